/* backend_cuda.h - the CUDA backend of nn/backend.h (cuDNN convolutions, cuBLAS
 * dense layers, hand-written kernels for everything else).
 *
 * Owns: the constructor of a CUDA backend instance, its flags, device queries
 * and the sticky error of an instance.
 * Does not own: op semantics (nn/backend.h), the network (nn/net.c).
 *
 * Always declared: where Koma is built without CUDA (KOMA_HAVE_CUDA undefined)
 * nn/backend_cuda_stub.c defines these functions so that callers need no
 * #ifdef: nn_cuda_device_count() returns 0 and nn_backend_cuda_new() returns
 * NULL with "built without CUDA".
 *
 * One instance = one CUDA stream, its own cuDNN and cuBLAS handles bound to
 * that stream, pinned staging buffers for upload/download and a private
 * workspace. Ops only enqueue work (no host synchronisation), except that the
 * first use of a new convolution shape chooses its cuDNN algorithms (see
 * NN_CUDA_HEURISTIC). download and sync wait for the stream. Buffers come from
 * cudaMalloc and may be used by any instance on the same device (ordering
 * between streams is the caller's business: sync one before the other reads).
 *
 * Errors: the constructor never aborts; it returns NULL and a message. A CUDA,
 * cuDNN or cuBLAS failure inside an op (a lost device, out of memory while
 * choosing an algorithm or growing a workspace, a launch error) or a fault
 * injected with KOMA_FAULT (nn/fault.h; every op entry asks the switch) is
 * printed once with file:line and a hint, kept as the instance's sticky error
 * (nn_cuda_error, also the `error` member of nn/backend.h that nn/net.c checks
 * to fail the call), and turns every later op of that instance into a no-op;
 * download then fills its destination with 0xFF bytes (NaN floats) so that a
 * failed result never looks plausible. With NN_CUDA_ABORT_ON_ERROR the process
 * aborts at the first failure instead.
 */
#ifndef KOMA_NN_BACKEND_CUDA_H
#define KOMA_NN_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of nn_backend_cuda_new (bitwise or). 0 = the defaults. */
enum {
    /* FP32 convolutions and GEMMs without TF32 tensor cores (cuDNN FMA math,
     * cuBLAS default math): slower, for comparisons with the CPU reference.
     * Without this flag TF32 is used where the GPU has it (cc >= 8.0). */
    NN_CUDA_NO_TF32 = 1u << 0,
    /* Mixed precision: convolutions run in BF16 with FP32 accumulation; the
     * inputs/outputs of every op stay FP32 (converted around each conv in the
     * conv workspace), so master weights and all other ops stay FP32. Needs
     * cc >= 8.0. OFF by default: not yet validated on a device. */
    NN_CUDA_BF16 = 1u << 1,
    /* Only deterministic cuDNN algorithms (bitwise reproducible runs). */
    NN_CUDA_DETERMINISTIC = 1u << 2,
    /* Choose cuDNN algorithms with the heuristics (cudnnGet*_v7, no timing,
     * no host synchronisation) instead of timing them once per shape bucket
     * (cudnnFind*, which synchronises the first time a shape is seen). */
    NN_CUDA_HEURISTIC = 1u << 3,
    /* abort() at the first CUDA/cuDNN/cuBLAS failure inside an op (tests, bench). */
    NN_CUDA_ABORT_ON_ERROR = 1u << 4,
};

/* Number of usable CUDA devices; 0 when there is none, no driver, or Koma was
 * built without CUDA. Never aborts. */
int nn_cuda_device_count(void);

typedef struct {
    char name[256];      /* "NVIDIA H100 80GB HBM3" */
    int32_t cc_major;    /* compute capability */
    int32_t cc_minor;
    int32_t sm_count;    /* multiprocessors */
    int32_t clock_khz;   /* peak SM clock, 0 if unknown */
    int64_t mem_bytes;   /* global memory */
    int32_t driver_version, runtime_version; /* 13000 = 13.0 */
} nn_cuda_device_info_t;

/* Fills info for device; 0, or -1 with err (no such device, no driver). */
int nn_cuda_device_info(int32_t device, nn_cuda_device_info_t *info, char *err, size_t errlen);

/* New CUDA backend on device (0-based) with flags. NULL with err when there
 * is no device/driver, the device index is out of range, BF16 is asked of a
 * GPU without it, or a library (cuDNN, cuBLAS) fails to initialise. Free with
 * nn_backend_free. */
nn_backend_t *nn_backend_cuda_new(int32_t device, uint32_t flags, char *err, size_t errlen);

/* Is be a CUDA backend instance? (0 for NULL and for other backends.) */
int nn_backend_is_cuda(const nn_backend_t *be);
/* The flags the instance runs with (NN_CUDA_NO_TF32 is set when the GPU has
 * no TF32, whatever was asked); 0 for a non-CUDA backend. */
uint32_t nn_cuda_flags(const nn_backend_t *be);
/* The instance's sticky error message, or NULL while none happened. */
const char *nn_cuda_error(const nn_backend_t *be);
/* The CUDA instance's device and stream (a cudaStream_t), for code that
 * enqueues its own work behind the instance's (NCCL: train/dist_nccl.c);
 * -1 and NULL for another backend. */
int32_t nn_cuda_device_of(const nn_backend_t *be);
void *nn_cuda_stream(const nn_backend_t *be);

/* ---- NCCL between processes' GPUs (train/dist_nccl.c) ----
 * In the CUDA module with the backend (nn/cuda_module.h), so that a program
 * loads NCCL, like the CUDA libraries, only when it uses a GPU. Where the
 * build has no NCCL (KOMA_HAVE_NCCL undefined) or the module cannot be
 * loaded, each call fails with err saying so. The id is made by one process
 * and sent to the others (the caller's business: dist_bcast). */
enum { NN_CUDA_NCCL_ID_BYTES = 128 };
typedef struct nn_cuda_nccl nn_cuda_nccl_t;
/* A new unique id into id. 0, or -1 with err. */
int nn_cuda_nccl_id(uint8_t id[NN_CUDA_NCCL_ID_BYTES], char *err, size_t errlen);
/* This process's member (rank of nranks) of the communicator of id, on the
 * device and stream of the CUDA backend be; waits for every member. NULL
 * with err. */
nn_cuda_nccl_t *nn_cuda_nccl_new(const uint8_t id[NN_CUDA_NCCL_ID_BYTES], int32_t nranks, int32_t rank,
                                 const nn_backend_t *be, char *err, size_t errlen);
void nn_cuda_nccl_free(nn_cuda_nccl_t *g); /* NULL ok */
/* dev (n floats of be's device memory) := its mean over the members,
 * enqueued on be's stream. 0, or -1 with err. */
int nn_cuda_nccl_mean(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
