/* dist_nccl.c - NCCL all-reduce between the ranks' GPUs (see dist_nccl.h). */
#include "train/dist_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/err.h"
#include "nn/backend_cuda.h"

#ifdef KOMA_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct dist_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
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
    ncclUniqueId id;
    memset(&id, 0, sizeof id); /* rank 0's arrives by dist_bcast */
    ncclResult_t r = ncclSuccess;
    if (ok && dist_rank(d) == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess) {
        snprintf(e, sizeof e, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        ok = 0;
    }
    if (!all_agree(d, ok, e, "another rank cannot use NCCL (its trainer is not on CUDA, or no id)", err, errlen) ||
        dist_bcast(d, &id, (int64_t)sizeof id, 0, err, errlen) != 0)
        return NULL;
    dist_nccl_t *g = calloc(1, sizeof *g);
    ok = g != NULL;
    if (!ok) snprintf(e, sizeof e, "out of memory");
    if (ok) {
        g->device = nn_cuda_device_of(be);
        g->stream = (cudaStream_t)nn_cuda_stream(be);
        cudaError_t ce = cudaSetDevice(g->device);
        if (ce != cudaSuccess) snprintf(e, sizeof e, "cudaSetDevice(%d): %s", g->device, cudaGetErrorString(ce)), ok = 0;
    }
    /* ncclCommInitRank waits for every rank: none may skip it once one enters */
    if (!all_agree(d, ok, e, "another rank cannot start NCCL (its message is above)", err, errlen)) {
        dist_nccl_free(g);
        return NULL;
    }
    if ((r = ncclCommInitRank(&g->comm, (int)dist_size(d), id, (int)dist_rank(d))) != ncclSuccess) {
        snprintf(e, sizeof e, "ncclCommInitRank (rank %d of %d, device %d): %s", (int)dist_rank(d), (int)dist_size(d),
                 g->device, ncclGetErrorString(r));
        g->comm = NULL;
        ok = 0;
    }
    if (!all_agree(d, ok, e, "NCCL did not start on another rank (its message is above)", err, errlen)) {
        dist_nccl_free(g);
        return NULL;
    }
    return g;
}

void dist_nccl_free(dist_nccl_t *g) {
    if (!g) return;
    if (g->comm) ncclCommDestroy(g->comm);
    free(g);
}

int dist_nccl_mean(dist_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    ncclResult_t async = ncclSuccess, r = ncclCommGetAsyncError(g->comm, &async);
    if (r == ncclSuccess && async != ncclSuccess) r = async;
    if (r == ncclSuccess) r = ncclAllReduce(dev, dev, (size_t)n, ncclFloat, ncclAvg, g->comm, g->stream);
    if (r != ncclSuccess) {
        set_err(err, errlen, "ncclAllReduce of %lld floats on device %d: %s", (long long)n, g->device,
                ncclGetErrorString(r));
        return -1;
    }
    return 0;
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
