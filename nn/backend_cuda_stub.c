/* backend_cuda_stub.c - nn/backend_cuda.h where Koma is built without CUDA.
 *
 * Owns: the no-device answers (0 devices, NULL backend with "built without
 * CUDA"), so that callers never need #ifdef KOMA_HAVE_CUDA.
 * Does not own: anything when KOMA_HAVE_CUDA is defined (nn/backend_cuda.cu
 * then defines these functions and this file compiles to nothing).
 */
#include "nn/backend_cuda.h"

#ifndef KOMA_HAVE_CUDA

#include <stdio.h>

#include "compat/err.h"

static void stub_err(char *err, size_t errlen) {
    set_err(
        err, errlen,
        "CUDA backend: built without CUDA (toolkit, cuDNN or cuBLAS not found at configure time, or -DKOMA_CUDA=OFF)");
}

int nn_cuda_device_count(void) { return 0; }

int nn_cuda_device_info(int32_t device, nn_cuda_device_info_t *info, char *err, size_t errlen) {
    (void)device;
    (void)info;
    stub_err(err, errlen);
    return -1;
}

nn_backend_t *nn_backend_cuda_new(int32_t device, uint32_t flags, char *err, size_t errlen) {
    (void)device;
    (void)flags;
    stub_err(err, errlen);
    return NULL;
}

int nn_backend_is_cuda(const nn_backend_t *be) {
    (void)be;
    return 0;
}

uint32_t nn_cuda_flags(const nn_backend_t *be) {
    (void)be;
    return 0;
}

const char *nn_cuda_error(const nn_backend_t *be) {
    (void)be;
    return NULL;
}

int32_t nn_cuda_device_of(const nn_backend_t *be) {
    (void)be;
    return -1;
}

void *nn_cuda_stream(const nn_backend_t *be) {
    (void)be;
    return NULL;
}

#else
/* ISO C wants at least one declaration per translation unit. */
typedef int nn_backend_cuda_stub_unused_t;
#endif
