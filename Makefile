# hakmem build.
#   make            release library: build/libhakmem.so and build/libhakmem.a (-O2, no asserts)
#   make debug      the same with assertions and -O1 -g: build/debug/
#   make hardened   the hardened build (encoded free lists, guards, random carving; see
#                   docs/RELIABILITY.md): build/hardened/libhakmem.so and .a
#   make chaos      the debug build with random delays where threads race, and fast ticks
#                   (src/chaos.h): build/chaos/libhakmem.so and .a, for tests/stress
#   make test       every test (unit, API, randomized, threads, real programs, bench smoke)
#   make test-asan  the unit, API and randomized tests under ASan+UBSan (hak_* API only)
#   make test-tsan  the threaded tests under ThreadSanitizer (hak_* API only)
#   make stress     threads in every tier for STRESS_TIME seconds (60), contents checked
#   make fuzz       the libFuzzer harness (clang) for FUZZ_TIME seconds, default 60
#   make bench      benchmark suite, hakmem beside the peer allocators (see docs/BENCHMARKS.md)
#   make bench-deps install the peer allocators and plotting tools (Debian)
#   make install    the libraries, hakmem.h, the hakmem command and hakmem.pc under PREFIX
#                   (/usr/local; DESTDIR= stages them elsewhere); make uninstall removes them

CC      ?= gcc
CFLAGS_COMMON := -std=c11 -Wall -Wextra -Wshadow -fPIC -pthread -fvisibility=hidden \
                 -fno-semantic-interposition -ftls-model=initial-exec \
                 -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
                 -fno-builtin-realloc -Iinclude
CFLAGS_RELEASE := -O2 -g -DNDEBUG
CFLAGS_DEBUG   := -O1 -g -DHK_DEBUG
CFLAGS_HARDENED := -O2 -g -DNDEBUG -DHK_HARDENED
CFLAGS_CHAOS   := -O1 -g -DHK_DEBUG -DHK_CHAOS
CFLAGS_ASAN    := -O1 -g -DHK_DEBUG -DHK_NO_OVERRIDE -fsanitize=address,undefined \
                  -fno-omit-frame-pointer -fno-sanitize-recover=undefined
CFLAGS_TSAN    := -O1 -g -DHK_DEBUG -DHK_NO_OVERRIDE -fsanitize=thread
VERSION        := 0.1.0
SOVERSION      := 0
LDFLAGS_SO     := -shared -pthread -Wl,-z,now -Wl,--no-undefined \
                  -Wl,-soname,libhakmem.so.$(SOVERSION)

SRCS := $(wildcard src/*.c)
HDRS := $(wildcard src/*.h) include/hakmem.h

.PHONY: all release debug hardened chaos test test-asan test-tsan stress fuzz bench bench-deps \
        install uninstall clean
all: release
release: build/libhakmem.so build/libhakmem.a
debug: build/debug/libhakmem.so build/debug/libhakmem.a
hardened: build/hardened/libhakmem.so build/hardened/libhakmem.a
chaos: build/chaos/libhakmem.so build/chaos/libhakmem.a

# One pattern per flavour: objects go to build/<flavour>/obj.
build/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_RELEASE) $(CFLAGS) -c $< -o $@
build/debug/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_DEBUG) $(CFLAGS) -c $< -o $@
build/hardened/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_HARDENED) $(CFLAGS) -c $< -o $@
build/chaos/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_CHAOS) $(CFLAGS) -c $< -o $@
build/asan/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_ASAN) $(CFLAGS) -c $< -o $@
build/tsan/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_TSAN) $(CFLAGS) -c $< -o $@

OBJS       := $(SRCS:src/%.c=build/obj/%.o)
DEBUG_OBJS := $(SRCS:src/%.c=build/debug/obj/%.o)
HARDENED_OBJS := $(SRCS:src/%.c=build/hardened/obj/%.o)
CHAOS_OBJS := $(SRCS:src/%.c=build/chaos/obj/%.o)
ASAN_OBJS  := $(SRCS:src/%.c=build/asan/obj/%.o)
TSAN_OBJS  := $(SRCS:src/%.c=build/tsan/obj/%.o)

build/libhakmem.so: $(OBJS) Makefile
	$(CC) $(LDFLAGS_SO) -o $@ $(filter %.o,$^)
build/libhakmem.a: $(OBJS)
	rm -f $@ && ar rcs $@ $^
build/debug/libhakmem.so: $(DEBUG_OBJS) Makefile
	$(CC) $(LDFLAGS_SO) -o $@ $(filter %.o,$^)
build/debug/libhakmem.a: $(DEBUG_OBJS)
	rm -f $@ && ar rcs $@ $^
build/hardened/libhakmem.so: $(HARDENED_OBJS) Makefile
	$(CC) $(LDFLAGS_SO) -o $@ $(filter %.o,$^)
build/hardened/libhakmem.a: $(HARDENED_OBJS)
	rm -f $@ && ar rcs $@ $^
build/chaos/libhakmem.so: $(CHAOS_OBJS) Makefile
	$(CC) $(LDFLAGS_SO) -o $@ $(filter %.o,$^)
build/chaos/libhakmem.a: $(CHAOS_OBJS)
	rm -f $@ && ar rcs $@ $^
build/asan/libhakmem.a: $(ASAN_OBJS)
	rm -f $@ && ar rcs $@ $^
build/tsan/libhakmem.a: $(TSAN_OBJS)
	rm -f $@ && ar rcs $@ $^

# --- tests ------------------------------------------------------------------------------------
TEST_CFLAGS := -std=c11 -Wall -Wextra -O1 -g -pthread -Iinclude -Isrc -Itests
UNIT_TESTS  := test_size_class test_slab test_api test_random test_threads
TSAN_TESTS  := test_threads test_random
# The hardened build's tests: those of the API and its behaviour, not of the layout.
HARDENED_TESTS := test_api test_random test_threads test_oom
# Run by tests/run.sh once per mode, each under the configuration the mode needs.
MODE_TESTS  := test_lifecycle
TEST_BINS   := $(UNIT_TESTS:%=build/tests/%) $(UNIT_TESTS:%=build/tests/%_debug) \
               $(MODE_TESTS:%=build/tests/%) $(MODE_TESTS:%=build/tests/%_debug) \
               build/tests/test_api_preload build/tests/test_misuse build/tests/test_misuse_first \
               build/tests/test_no_keys build/tests/test_dlopen build/tests/test_oom \
               build/tests/test_oom_debug \
               build/tests/stress build/tests/stress_chaos build/tests/hello \
               build/tests/trace_workload \
               build/tests/stats_workload \
               build/tests/cxx_program

build/tests/%: tests/%.c tests/check.h build/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< build/libhakmem.a
build/tests/%_debug: tests/%.c tests/check.h build/debug/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< build/debug/libhakmem.a
build/tests/%_hardened: tests/%.c tests/check.h build/hardened/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DHK_HARDENED -o $@ $< build/hardened/libhakmem.a
build/tests/%_chaos: tests/%.c tests/check.h build/chaos/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< build/chaos/libhakmem.a
build/tests/%_asan: tests/%.c tests/check.h build/asan/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS_ASAN) -o $@ $< build/asan/libhakmem.a
build/tests/%_tsan: tests/%.c tests/check.h build/tsan/libhakmem.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS_TSAN) -o $@ $< build/tsan/libhakmem.a
# The API test again, through the standard names, for running under LD_PRELOAD.
build/tests/test_api_preload: tests/test_api.c tests/check.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DUSE_LIBC_NAMES -o $@ $< -ldl
# Programs run under LD_PRELOAD, linked against plain libc. The misuse cases are built without
# optimisation and builtins, so that the compiler keeps every bad write and call as written.
build/tests/test_no_keys build/tests/hello build/tests/trace_workload \
build/tests/stats_workload: build/tests/%: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $<
build/tests/test_dlopen: tests/test_dlopen.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl
build/tests/test_misuse build/tests/test_misuse_first: build/tests/%: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -O0 -fno-builtin -o $@ $<
build/tests/cxx_program: tests/cxx_program.cpp
	@mkdir -p $(@D)
	g++ -std=c++17 -O2 -Wall -Wextra -o $@ $<

SAN_BINS := $(UNIT_TESTS:%=build/tests/%_asan) $(MODE_TESTS:%=build/tests/%_asan) \
            $(TSAN_TESTS:%=build/tests/%_tsan)
test: release debug hardened $(TEST_BINS) $(SAN_BINS) $(HARDENED_TESTS:%=build/tests/%_hardened) \
      build/fuzz/fuzz_ops
	@tests/run.sh

STRESS_TIME ?= 60
STRESS_THREADS ?= 8
stress: build/tests/stress
	build/tests/stress $(STRESS_TIME) $(STRESS_THREADS)

test-asan: $(UNIT_TESTS:%=build/tests/%_asan)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t (asan)"; \
	    HAKMEM_LARGE_ARENAS=4 build/tests/$${t}_asan; done

test-tsan: $(TSAN_TESTS:%=build/tests/%_tsan)
	@set -e; for t in $(TSAN_TESTS); do echo "== $$t (tsan)"; \
	    TSAN_OPTIONS=halt_on_error=1 HAKMEM_LARGE_ARENAS=4 build/tests/$${t}_tsan; done

# --- fuzzing: clang's libFuzzer on the hak_* API, with ASan and UBSan (tests/fuzz_ops.c) -------
# The library's sources are compiled into the harness with coverage; HK_NO_OVERRIDE leaves the
# standard names to glibc, which libFuzzer and the sanitizers use.
FUZZ_CC     ?= clang
FUZZ_TIME   ?= 60
CFLAGS_FUZZ := $(CFLAGS_COMMON) -O1 -g -DHK_DEBUG -DHK_NO_OVERRIDE \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
               -fno-omit-frame-pointer
build/fuzz/fuzz_ops: tests/fuzz_ops.c $(SRCS) $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS_FUZZ) -o $@ tests/fuzz_ops.c $(SRCS)
fuzz: build/fuzz/fuzz_ops
	@tests/fuzz.sh $(FUZZ_TIME)

# --- benchmarks (bench/run.sh and bench/deps.sh own the details) ------------------------------
bench: release
	@bench/run.sh
bench-deps:
	@bench/deps.sh

# --- installation ------------------------------------------------------------------------------
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALLED    := $(LIBDIR)/libhakmem.so.$(VERSION) $(LIBDIR)/libhakmem.so.$(SOVERSION) \
                $(LIBDIR)/libhakmem.so $(LIBDIR)/libhakmem.a $(INCLUDEDIR)/hakmem.h \
                $(BINDIR)/hakmem $(BINDIR)/hakmem-report $(PKGCONFIGDIR)/hakmem.pc

install: release
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 build/libhakmem.so $(DESTDIR)$(LIBDIR)/libhakmem.so.$(VERSION)
	ln -sf libhakmem.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhakmem.so.$(SOVERSION)
	ln -sf libhakmem.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhakmem.so
	install -m 644 build/libhakmem.a $(DESTDIR)$(LIBDIR)/libhakmem.a
	install -m 644 include/hakmem.h $(DESTDIR)$(INCLUDEDIR)/hakmem.h
	# the command preloads the installed library (HAKMEM_LIB still overrides it)
	sed 's|^lib=\$${HAKMEM_LIB.*|lib=$${HAKMEM_LIB:-$(LIBDIR)/libhakmem.so.$(SOVERSION)}|' bin/hakmem \
	    > $(DESTDIR)$(BINDIR)/hakmem
	chmod 755 $(DESTDIR)$(BINDIR)/hakmem
	install -m 755 bin/hakmem-report $(DESTDIR)$(BINDIR)/hakmem-report
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' hakmem.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/hakmem.pc

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

clean:
	rm -rf build
