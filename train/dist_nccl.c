/* dist_nccl.c - NCCL all-reduce between the ranks' GPUs (see dist_nccl.h). */
#include "train/dist_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/err.h"
#include "nn/backend_cuda.h"

#ifdef KOMA_HAVE_NCCL
/* NCCL itself is in the CUDA module (nn/backend_cuda.h's nn_cuda_nccl_*), loaded with the cuda backend: this
 * file makes the ranks agree at each step and sends rank 0's id. */
struct dist_nccl {
    nn_cuda_nccl_t *member;
};

bool dist_nccl_built(void) { return true; }

/* Every rank says whether it got this far: true when all did; else err :=
 * this rank's own message (mine) or that another one failed (theirs). */
static bool all_agree(dist_t *d, int ok, const char *mine, const char *theirs, char *err, size_t errlen) {
    int all = 0;
    if (dist_agree(d, ok, &all, err, errlen) != 0) return false;
    if (!all) set_err(err, errlen, "%s", ok ? theirs : mine);
    return all != 0;
}

dist_nccl_t *dist_nccl_new(dist_t *d, nn_backend_t *be, char *err, size_t errlen) {
    char e[512] = "";
    int ok = nn_backend_is_cuda(be);
    if (!ok) snprintf(e, sizeof e, "the trainer backend is not CUDA");
    uint8_t id[NN_CUDA_NCCL_ID_BYTES];
    memset(id, 0, sizeof id); /* rank 0's arrives by dist_bcast */
    if (ok && dist_rank(d) == 0 && nn_cuda_nccl_id(id, e, sizeof e) != 0) ok = 0;
    if (!all_agree(d, ok, e, "another rank cannot use NCCL (its trainer is not on CUDA, or no id)", err, errlen) ||
        dist_bcast(d, id, (int64_t)sizeof id, 0, err, errlen) != 0)
        return NULL;
    dist_nccl_t *g = calloc(1, sizeof *g);
    ok = g != NULL;
    if (!ok) snprintf(e, sizeof e, "out of memory");
    /* ncclCommInitRank waits for every rank: none may skip it once one enters */
    if (!all_agree(d, ok, e, "another rank cannot start NCCL (its message is above)", err, errlen)) {
        dist_nccl_free(g);
        return NULL;
    }
    g->member = nn_cuda_nccl_new(id, dist_size(d), dist_rank(d), be, e, sizeof e);
    ok = g->member != NULL;
    if (!all_agree(d, ok, e, "NCCL did not start on another rank (its message is above)", err, errlen)) {
        dist_nccl_free(g);
        return NULL;
    }
    return g;
}

void dist_nccl_free(dist_nccl_t *g) {
    if (!g) return;
    nn_cuda_nccl_free(g->member);
    free(g);
}

int dist_nccl_mean(dist_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    return nn_cuda_nccl_mean(g->member, dev, n, err, errlen);
}

#else /* built without NCCL */

bool dist_nccl_built(void) { return false; }

dist_nccl_t *dist_nccl_new(dist_t *d, nn_backend_t *be, char *err, size_t errlen) {
    (void)d, (void)be;
    set_err(err, errlen, "built without NCCL (it needs the CUDA backend, MPI and NCCL at configure time)");
    return NULL;
}

void dist_nccl_free(dist_nccl_t *g) { (void)g; }

int dist_nccl_mean(dist_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    (void)g, (void)dev, (void)n;
    set_err(err, errlen, "built without NCCL");
    return -1;
}
#endif
