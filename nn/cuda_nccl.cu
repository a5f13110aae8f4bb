/* cuda_nccl.cu - NCCL between processes' GPUs, inside the CUDA module
 * (nn/backend_cuda.h's nn_cuda_nccl_*): a communicator member on a CUDA
 * backend's device and stream, its mean all-reduce. train/dist_nccl.c makes
 * the collective agreement and sends the id; this file only calls NCCL.
 * Built with NCCL where the build found it (KOMA_HAVE_NCCL), else each call
 * says so. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "compat/err.h"
#include "nn/cuda_internal.h"

#ifdef KOMA_HAVE_NCCL
#include <nccl.h>

static_assert(NCCL_UNIQUE_ID_BYTES == NN_CUDA_NCCL_ID_BYTES, "NCCL's unique id size");

struct nn_cuda_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
};

extern "C" int nn_cuda_nccl_id(uint8_t id[NN_CUDA_NCCL_ID_BYTES], char *err, size_t errlen) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) {
        set_err(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        return -1;
    }
    memcpy(id, &u, sizeof u);
    return 0;
}

extern "C" nn_cuda_nccl_t *nn_cuda_nccl_new(const uint8_t id[NN_CUDA_NCCL_ID_BYTES], int32_t nranks, int32_t rank,
                                            const nn_backend_t *be, char *err, size_t errlen) {
    if (!nn_backend_is_cuda(be)) {
        set_err(err, errlen, "the trainer backend is not CUDA");
        return NULL;
    }
    nn_cuda_nccl_t *g = (nn_cuda_nccl_t *)calloc(1, sizeof *g);
    if (!g) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    g->device = nn_cuda_device_of(be);
    g->stream = (cudaStream_t)nn_cuda_stream(be);
    cudaError_t ce = cudaSetDevice(g->device);
    if (ce != cudaSuccess) {
        set_err(err, errlen, "cudaSetDevice(%d): %s", g->device, cudaGetErrorString(ce));
        free(g);
        return NULL;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&g->comm, (int)nranks, u, (int)rank);
    if (r != ncclSuccess) {
        set_err(err, errlen, "ncclCommInitRank (rank %d of %d, device %d): %s", (int)rank, (int)nranks, g->device,
                ncclGetErrorString(r));
        free(g);
        return NULL;
    }
    return g;
}

extern "C" void nn_cuda_nccl_free(nn_cuda_nccl_t *g) {
    if (!g) return;
    if (g->comm) ncclCommDestroy(g->comm);
    free(g);
}

extern "C" int nn_cuda_nccl_mean(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
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

#else /* the module without NCCL */

static void no_nccl(char *err, size_t errlen) {
    set_err(err, errlen, "built without NCCL (it needs the CUDA backend, MPI and NCCL at configure time)");
}

extern "C" int nn_cuda_nccl_id(uint8_t id[NN_CUDA_NCCL_ID_BYTES], char *err, size_t errlen) {
    (void)id;
    no_nccl(err, errlen);
    return -1;
}

extern "C" nn_cuda_nccl_t *nn_cuda_nccl_new(const uint8_t id[NN_CUDA_NCCL_ID_BYTES], int32_t nranks, int32_t rank,
                                            const nn_backend_t *be, char *err, size_t errlen) {
    (void)id, (void)nranks, (void)rank, (void)be;
    no_nccl(err, errlen);
    return NULL;
}

extern "C" void nn_cuda_nccl_free(nn_cuda_nccl_t *g) { (void)g; }

extern "C" int nn_cuda_nccl_mean(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    (void)g, (void)dev, (void)n;
    no_nccl(err, errlen);
    return -1;
}
#endif
