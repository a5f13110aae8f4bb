/* cuda_module.cu - the entry point of the CUDA backend module (libkoma_cuda.so,
 * nn/cuda_module.h): checks the caller's ABI, keeps the host's table and
 * hands out the backend's functions; the fault switch's three functions the
 * backend calls (nn/fault.h) go back to the program's one switch, so that
 * KOMA_FAULT counts the ops of the whole process in one place.
 * Built into the module only (every symbol hidden but the entry point). */
#include "nn/cuda_module.h"

#include <cstdio>

#include "compat/err.h"

static const nn_cuda_host_t *g_host;

extern "C" nn_fault_t nn_fault_hit(const char *op) { return g_host ? g_host->fault_hit(op) : NN_FAULT_NONE; }

extern "C" int nn_fault_armed(void) { return g_host ? g_host->fault_armed() : 0; }

extern "C" void nn_fault_message(const char *op, char *buf, size_t len) {
    if (g_host) g_host->fault_message(op, buf, len);
    else if (buf && len) snprintf(buf, len, "%s: injected fault", op);
}

#if defined(_WIN32)
#define NN_CUDA_MODULE_EXPORT __declspec(dllexport)
#else
#define NN_CUDA_MODULE_EXPORT __attribute__((visibility("default")))
#endif

extern "C" NN_CUDA_MODULE_EXPORT int koma_cuda_module_init(const nn_cuda_module_abi_t *abi, const nn_cuda_host_t *host,
                                                           nn_cuda_api_t *api, char *err, size_t errlen) {
    const nn_cuda_module_abi_t mine = NN_CUDA_MODULE_ABI_INIT;
    if (!abi || !host || !api || abi->abi != mine.abi || abi->sizeof_host != mine.sizeof_host ||
        abi->sizeof_api != mine.sizeof_api || abi->sizeof_backend != mine.sizeof_backend ||
        abi->sizeof_info != mine.sizeof_info) {
        set_err(err, errlen, "the module is of another build of Koma (ABI %d, the program's %d)", mine.abi,
                abi ? abi->abi : -1);
        return -1;
    }
    g_host = host;
    api->device_count = nn_cuda_device_count;
    api->device_info = nn_cuda_device_info;
    api->backend_new = nn_backend_cuda_new;
    api->is_cuda = nn_backend_is_cuda;
    api->flags = nn_cuda_flags;
    api->error = nn_cuda_error;
    api->device_of = nn_cuda_device_of;
    api->stream = nn_cuda_stream;
    api->nccl_id = nn_cuda_nccl_id;
    api->nccl_new = nn_cuda_nccl_new;
    api->nccl_free = nn_cuda_nccl_free;
    api->nccl_mean = nn_cuda_nccl_mean;
    return 0;
}
