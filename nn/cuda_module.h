/* cuda_module.h - the CUDA backend as a module loaded at run time: what
 * passes between the program (nn/backend_cuda_load.c) and the shared library
 * libkoma_cuda.so (koma_cuda.dll) built from the .cu files of nn/.
 *
 * Owns: the module's one exported entry point and the two tables it trades:
 * the host's functions the module calls (the fault switch of nn/fault.h,
 * which must count every op of the process in one place) and the module's
 * functions behind nn/backend_cuda.h (the backend, and NCCL between
 * processes' GPUs where the build has it).
 * Does not own: loading (nn/backend_cuda_load.c, through compat_dl_open),
 * the backend itself (nn/backend_cuda.cu).
 *
 * Why a module: the CUDA libraries (cuDNN, cuBLAS, the runtime) take about a
 * second to load and relocate, and a program linked against them pays that at
 * every start, on a machine without a GPU too (`koma` answering `usi` for a
 * GUI that starts it for every game). Linked into the module only, they load
 * when the cuda backend is chosen (lc0 and KataGo load their backends alike).
 *
 * The module and the program come from the same build: the entry point
 * refuses a caller whose ABI number or structure sizes differ.
 */
#ifndef KOMA_NN_CUDA_MODULE_H
#define KOMA_NN_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"
#include "nn/backend_cuda.h"
#include "nn/fault.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a table, nn_backend_t or nn_cuda_device_info_t changes. */
#define NN_CUDA_MODULE_ABI 2
/* The module's base name (compat_dl_file_name: libkoma_cuda.so, koma_cuda.dll). */
#define NN_CUDA_MODULE_NAME "koma_cuda"
/* Its one exported symbol, of type nn_cuda_module_init_fn. */
#define NN_CUDA_MODULE_INIT "koma_cuda_module_init"

/* The program's functions the module calls. */
typedef struct {
    nn_fault_t (*fault_hit)(const char *op);
    int (*fault_armed)(void);
    void (*fault_message)(const char *op, char *buf, size_t len);
} nn_cuda_host_t;

/* The module's functions: nn/backend_cuda.h, one for one. */
typedef struct {
    int (*device_count)(void);
    int (*device_info)(int32_t device, nn_cuda_device_info_t *info, char *err, size_t errlen);
    nn_backend_t *(*backend_new)(int32_t device, uint32_t flags, char *err, size_t errlen);
    int (*is_cuda)(const nn_backend_t *be);
    uint32_t (*flags)(const nn_backend_t *be);
    const char *(*error)(const nn_backend_t *be);
    int32_t (*device_of)(const nn_backend_t *be);
    void *(*stream)(const nn_backend_t *be);
    /* NCCL (nn/backend_cuda.h); each fails with err where the module was built without it */
    int (*nccl_id)(uint8_t *id, char *err, size_t errlen);
    nn_cuda_nccl_t *(*nccl_new)(const uint8_t *id, int32_t nranks, int32_t rank, const nn_backend_t *be, char *err,
                                size_t errlen);
    void (*nccl_free)(nn_cuda_nccl_t *g);
    int (*nccl_mean)(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen);
} nn_cuda_api_t;

/* Sizes the two sides must agree on (a module of another build is refused). */
typedef struct {
    int32_t abi;
    int32_t sizeof_host, sizeof_api, sizeof_backend, sizeof_info;
} nn_cuda_module_abi_t;

#define NN_CUDA_MODULE_ABI_INIT                                                                                        \
    {                                                                                                                  \
        NN_CUDA_MODULE_ABI, (int32_t)sizeof(nn_cuda_host_t), (int32_t)sizeof(nn_cuda_api_t),                           \
            (int32_t)sizeof(nn_backend_t), (int32_t)sizeof(nn_cuda_device_info_t)                                      \
    }

/* Fills *api and keeps host for the module's lifetime (the process's: it is
 * never unloaded). 0, or -1 with err when abi is not the module's. */
typedef int (*nn_cuda_module_init_fn)(const nn_cuda_module_abi_t *abi, const nn_cuda_host_t *host, nn_cuda_api_t *api,
                                      char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
