/*
 * realloc_grow VECTORS OPS MAXSIZE SEED STEP
 *
 * Growing and shrinking buffers.  VECTORS buffers, each starting at a random
 * size of 16..64 bytes.  Each operation picks a random buffer and, if it is
 * growing, doubles it with realloc (until MAXSIZE bytes, then it starts
 * shrinking); if it is shrinking, halves it with realloc (below 16 bytes it
 * is freed and starts again from nothing with realloc(NULL, ...)).  Some
 * bytes of the preserved content are checked after each realloc.
 * Stresses in-place growth, size-class changes and copying.  Reports realloc
 * calls per second.  With STEP > 0 a growing buffer grows by STEP bytes at a
 * time instead of doubling (a file read into it a block at a time), and only
 * its new pages are written.
 */
#include "common.h"

struct vec {
    unsigned char *p;
    size_t size;
    int growing;
    unsigned char tag;
};

int main(int argc, char **argv)
{
    bench_init(argc, argv, "realloc_grow",
               "[VECTORS=1000] [OPS=500000] [MAXSIZE=262144] [SEED=42] [STEP=0]", 5);
    uint64_t nvec = arg_u64(argc, argv, 1, "VECTORS", 1000, 1, 1ULL << 26);
    uint64_t ops = arg_u64(argc, argv, 2, "OPS", 500000, 1, UINT64_MAX / 2);
    uint64_t maxsize = arg_u64(argc, argv, 3, "MAXSIZE", 262144, 128, 1ULL << 34);
    uint64_t seed = arg_u64(argc, argv, 4, "SEED", 42, 0, UINT64_MAX);
    uint64_t step = arg_u64(argc, argv, 5, "STEP", 0, 0, 1ULL << 30);

    print_params("vectors=%" PRIu64 " ops=%" PRIu64 " maxsize=%" PRIu64 " seed=%" PRIu64
                 " step=%" PRIu64,
                 nvec, ops, maxsize, seed, step);

    rng_t r;
    rng_seed(&r, seed, 1);
    struct vec *v = xcalloc((size_t)nvec, sizeof *v);
    for (uint64_t i = 0; i < nvec; i++)
        v[i].growing = 1;

    uint64_t reallocs = 0, frees = 0;
    double t0 = now_sec();
    for (uint64_t i = 0; i < ops; i++) {
        struct vec *V = &v[rng_below(&r, nvec)];
        size_t nsize;
        if (V->p == NULL) {
            nsize = (size_t)rng_range(&r, 16, 64);
            V->growing = 1;
            V->tag = (unsigned char)(i | 1);
        } else if (V->growing) {
            nsize = step ? V->size + step : V->size * 2;
            if (nsize > maxsize) {
                V->growing = 0;
                nsize = V->size / 2;
            }
        } else {
            nsize = V->size / 2;
            if (nsize < 16) {
                free(V->p);
                V->p = NULL;
                V->size = 0;
                frees++;
                continue;
            }
        }
        /* the old pointer must not be looked at after realloc */
        size_t keep = V->size < nsize ? V->size : nsize; /* 0 when new */
        unsigned char *np = realloc(V->p, nsize);
        if (np == NULL)
            die("realloc(%zu -> %zu) returned NULL", V->size, nsize);
        reallocs++;
        /* written bytes: every page start and the last byte of each size
         * the block has had while growing */
        if (keep != 0 && (np[0] != V->tag || np[(keep - 1) & ~(size_t)4095] != V->tag ||
                          (nsize > V->size && np[keep - 1] != V->tag)))
            die("realloc %zu -> %zu lost the block's content", V->size, nsize);
        V->p = np;
        V->size = nsize;
        /* first and last byte and one byte per page (with STEP, from the page where the
         * new part starts) */
        if (step && keep != 0 && nsize > keep) {
            size_t from = keep & ~(size_t)4095;
            touch_pages(np + from, nsize - from, V->tag);
        } else
            touch_pages(np, nsize, V->tag);
    }
    double t1 = now_sec();

    for (uint64_t i = 0; i < nvec; i++)
        free(v[i].p);
    free(v);

    print_result((double)reallocs, t1 - t0, " reallocs=%" PRIu64 " frees=%" PRIu64,
                 reallocs, frees);
    return 0;
}
