/*
 * sweep N ROUNDS DEAD MIN MAX SEED
 *
 * A garbage-collected interpreter's heap, as Lua's or a mark-and-sweep
 * runtime's: N objects of MIN..MAX bytes (log-uniform) on one list, newest
 * first, in the order they were made.  Each round marks every object (a
 * walk of the list that reads each one), sweeps (a second walk that frees
 * each object dead with probability DEAD percent, in list order), and then
 * makes as many new objects as it freed, each put at the head of the list
 * and written.  The walks chase each object's link to the next: they run at
 * the speed of memory where consecutive objects lie far apart, and of the
 * cache where the allocator placed objects made one after another side by
 * side, as they were made.  What it measures is where an allocator puts the
 * blocks it hands out after a sweep freed blocks all over its heap.  Reports
 * objects visited (marked, swept or made) per second.
 */
#include "common.h"

struct obj {
    struct obj *next;
    uint64_t tag;
};

int main(int argc, char **argv)
{
    bench_init(argc, argv, "sweep", "[N=200000] [ROUNDS=20] [DEAD=50] [MIN=16] [MAX=128] [SEED=42]",
               6);
    uint64_t n = arg_u64(argc, argv, 1, "N", 200000, 1, 1ULL << 32);
    uint64_t rounds = arg_u64(argc, argv, 2, "ROUNDS", 20, 1, 1ULL << 32);
    uint64_t dead = arg_u64(argc, argv, 3, "DEAD", 50, 0, 100);
    uint64_t min = arg_u64(argc, argv, 4, "MIN", 16, sizeof(struct obj), 1ULL << 20);
    uint64_t max = arg_u64(argc, argv, 5, "MAX", 128, sizeof(struct obj), 1ULL << 20);
    uint64_t seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", min, "MAX", max);
    print_params("n=%" PRIu64 " rounds=%" PRIu64 " dead=%" PRIu64 " min=%" PRIu64
                 " max=%" PRIu64 " seed=%" PRIu64, n, rounds, dead, min, max, seed);

    rng_t r;
    rng_seed(&r, seed, 1);
    struct obj *head = NULL;
    uint64_t made = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct obj *o = xmalloc((size_t)rng_log_range(&r, min, max));
        o->tag = ++made;
        o->next = head;
        head = o;
    }
    double t0 = now_sec();
    uint64_t visits = 0, sum = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        /* Mark: read every object. */
        for (struct obj *o = head; o; o = o->next) sum += o->tag;
        /* Sweep: free the dead ones, in list order. */
        uint64_t freed = 0;
        for (struct obj **at = &head; *at;) {
            struct obj *o = *at;
            if (rng_below(&r, 100) < dead) {
                *at = o->next;
                free(o);
                freed++;
            } else {
                at = &o->next;
            }
        }
        /* Make as many new ones, newest first. */
        for (uint64_t i = 0; i < freed; i++) {
            struct obj *o = xmalloc((size_t)rng_log_range(&r, min, max));
            o->tag = ++made;
            o->next = head;
            head = o;
        }
        visits += 2 * n + freed;
    }
    double secs = now_sec() - t0;
    escape(&sum);
    while (head) {
        struct obj *o = head;
        head = o->next;
        free(o);
    }
    print_result((double)visits, secs, " rounds=%" PRIu64, rounds);
    return 0;
}
