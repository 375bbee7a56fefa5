/* The smallest program that uses the allocator: one malloc and one free, then exit 0. For
 * tests that only need hakmem to start up (tests/config.sh, the install test). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *p = malloc(100);
    if (!p) return 1;
    strcpy(p, "hello");
    printf("%s\n", p);
    free(p);
    return 0;
}
