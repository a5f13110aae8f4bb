/* registry.c - backend names to backends; see registry.h. */
#include "nn/registry.h"

#include <stdio.h>
#include <string.h>

#include "compat/err.h"
#include "nn/backend_cuda.h"

int nn_backend_resolve(const char *name, nn_backend_kind_t *kind, char *err, size_t errlen) {
    const char *n = name && name[0] ? name : "auto";
    nn_backend_kind_t k;
    if (strcmp(n, "cpu") == 0) {
        k = NN_BACKEND_KIND_CPU;
    } else if (strcmp(n, "cuda") == 0) {
        k = NN_BACKEND_KIND_CUDA;
    } else if (strcmp(n, "auto") == 0) {
        k = kind && nn_cuda_device_count() > 0 ? NN_BACKEND_KIND_CUDA : NN_BACKEND_KIND_CPU;
    } else {
        set_err(err, errlen, "'%s' is not " NN_BACKEND_NAMES, n);
        return -1;
    }
    if (kind) *kind = k;
    return 0;
}

int32_t nn_device_for_rank(const char *backend, int32_t device, int32_t local_rank) {
    int32_t ndev = nn_cuda_device_count();
    if ((backend && strcmp(backend, "cpu") == 0) || ndev <= 0) return device;
    return (int32_t)((device + local_rank) % ndev);
}

nn_backend_t *nn_backend_open(nn_backend_kind_t kind, int32_t cpu_threads, int32_t device, uint32_t cuda_flags,
                              char *err, size_t errlen) {
    if (kind == NN_BACKEND_KIND_CUDA) {
        char e[512] = "";
        nn_backend_t *be = nn_backend_cuda_new(device, cuda_flags, e, sizeof e);
        if (!be) set_err(err, errlen, "cuda backend (device %d): %s", device, e);
        return be;
    }
    nn_backend_t *be = nn_backend_cpu_new(cpu_threads);
    if (!be) set_err(err, errlen, "cpu backend: out of host memory");
    return be;
}

const char *nn_backend_kind_name(nn_backend_kind_t kind) { return kind == NN_BACKEND_KIND_CUDA ? "cuda" : "cpu"; }
