/* Minimal test harness: TEST(name) { ... CHECK(cond); ... } and RUN(name) in main.
 * Each test prints "PASS: <file> <name>" or "FAIL: <file> <name>" (tests/run.sh counts them);
 * the first failing CHECK of a test prints where and why. */
#ifndef HK_CHECK_H
#define HK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failed_in_test, check_failures;
static const char *check_prog = "test";

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            if (!check_failed_in_test)                                                         \
                fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);     \
            check_failed_in_test = 1;                                                          \
        }                                                                                      \
    } while (0)

#define CHECKF(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            if (!check_failed_in_test) {                                                       \
                fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);     \
                fprintf(stderr, __VA_ARGS__);                                                  \
                fprintf(stderr, "\n");                                                         \
            }                                                                                  \
            check_failed_in_test = 1;                                                          \
        }                                                                                      \
    } while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                              \
    do {                                                                                       \
        check_failed_in_test = 0;                                                              \
        test_##name();                                                                         \
        printf("%s: %s %s\n", check_failed_in_test ? "FAIL" : "PASS", check_prog, #name);      \
        fflush(stdout);                                                                        \
        check_failures += check_failed_in_test;                                                \
    } while (0)

#define TEST_MAIN_BEGIN(prog) check_prog = (prog);
#define TEST_MAIN_END() return check_failures ? 1 : 0;

#endif
