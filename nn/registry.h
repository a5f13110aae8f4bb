/* registry.h - the one place that turns a backend name into a backend.
 *
 * Owns: the names users type (--backend, --train-backend, the USI Backend
 * option): "cpu", "cuda", and "auto" (cuda when a CUDA device is present,
 * else cpu); checking them, and opening a backend of the chosen kind.
 * Does not own: the backends (nn/backend_cpu.c, nn/backend_cuda.cu), how
 * many instances a program opens (the server opens one per device worker).
 * Errors: an unknown name or a backend that cannot be opened returns -1 /
 * NULL with a message naming it.
 */
#ifndef KOMA_NN_REGISTRY_H
#define KOMA_NN_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

typedef enum {
    NN_BACKEND_KIND_CPU = 0,
    NN_BACKEND_KIND_CUDA = 1,
} nn_backend_kind_t;

#define NN_BACKEND_NAMES "cpu, cuda or auto"

/* 0 and *kind for "cpu", "cuda" or "auto" ("auto": cuda when a device is
 * present); -1 with err "'NAME' is not cpu, cuda or auto" otherwise. NULL
 * or "" is "auto". A check only (no device opened): with kind NULL. */
int nn_backend_resolve(const char *name, nn_backend_kind_t *kind, char *err, size_t errlen);
/* The CUDA device of the local_rank-th process of a node (mpirun ranks):
 * (device + local_rank) mod the GPUs present, so that each rank has a GPU
 * of its own (NCCL refuses two ranks on one); `device` itself for the cpu
 * backend or where there is no GPU. */
int32_t nn_device_for_rank(const char *backend, int32_t device, int32_t local_rank);
/* A backend instance of that kind: cpu with cpu_threads BLAS/oneDNN threads,
 * or cuda on device with cuda_flags (nn/backend_cuda.h). NULL with err. */
nn_backend_t *nn_backend_open(nn_backend_kind_t kind, int32_t cpu_threads, int32_t device, uint32_t cuda_flags,
                              char *err, size_t errlen);
const char *nn_backend_kind_name(nn_backend_kind_t kind); /* "cpu" / "cuda" */

#endif
