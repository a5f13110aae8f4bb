/* backend_cuda_load.c - nn/backend_cuda.h for the program: the CUDA backend
 * is a module (libkoma_cuda.so, koma_cuda.dll: nn/cuda_module.h) loaded the
 * first time a CUDA function is called, never at start-up.
 *
 * Owns: finding and loading the module once per process, the NVIDIA driver
 * check before it, and the answers where it cannot be had (0 devices, no
 * backend, with a message that says why in a user's words); the answers of
 * a build without CUDA (KOMA_HAVE_CUDA undefined: "built without CUDA").
 * Does not own: the backend (nn/backend_cuda.cu, inside the module), the
 * choice of a backend (nn/registry.c).
 *
 * Loading, in order (the first failure is the answer for the whole process):
 *  1. the NVIDIA driver (libcuda.so.1, nvcuda.dll): without it there is no GPU
 *     to use, and the CUDA libraries are not loaded at all ("no NVIDIA
 *     driver on this machine");
 *  2. the module: $KOMA_CUDA_MODULE (a path) alone where it is set, else the
 *     first of: beside the program, ../lib/koma/ from the program's
 *     directory (an installed bin/koma), the build tree's
 *     (KOMA_CUDA_MODULE_BUILD_PATH); a module
 *     that is there but cannot be loaded names the library it lacks (cuDNN,
 *     cuBLAS, the CUDA runtime);
 *  3. its entry point, which refuses a module of another build.
 * Threads: any thread may call any function; the first call loads (under a
 * spin lock; the others wait for it), later ones only read.
 */
#include "nn/backend_cuda.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/exe.h"
#include "nn/cuda_module.h"
#include "nn/fault.h"

#ifdef KOMA_HAVE_CUDA

#ifndef KOMA_BUILD_CUDA
#define KOMA_BUILD_CUDA "(version unknown)"
#endif
#if defined(_WIN32)
#define NN_CUDA_DRIVER_LIB "nvcuda.dll"
#elif defined(__APPLE__)
#define NN_CUDA_DRIVER_LIB "libcuda.dylib"
#else
#define NN_CUDA_DRIVER_LIB "libcuda.so.1"
#endif

enum { LOAD_NOT_TRIED = 0, LOAD_OK, LOAD_FAILED };
static atomic_int g_state = LOAD_NOT_TRIED;
static atomic_flag g_lock = ATOMIC_FLAG_INIT;
static nn_cuda_api_t g_api;
static char g_why[1536]; /* why the backend cannot be had (LOAD_FAILED) */

static const nn_cuda_host_t g_host = {nn_fault_hit, nn_fault_armed, nn_fault_message};

/* The module's path: the first candidate that exists, into out; 0, or -1 with
 * the places looked at in tried. */
static int module_path(char *out, size_t len, char *tried, size_t tlen) {
    char file[64], dir[1024], cand[4][1400];
    int n = 0;
    compat_dl_file_name(NN_CUDA_MODULE_NAME, file, sizeof file);
    const char *env = getenv("KOMA_CUDA_MODULE"); /* this one alone, when given */
    if (env && env[0]) snprintf(cand[n++], sizeof cand[0], "%s", env);
    else if (compat_exe_dir(dir, sizeof dir) == 0) {
        snprintf(cand[n++], sizeof cand[0], "%s/%s", dir, file);
        snprintf(cand[n++], sizeof cand[0], "%s/../lib/koma/%s", dir, file);
    }
#ifdef KOMA_CUDA_MODULE_BUILD_PATH
    if (!env || !env[0]) snprintf(cand[n++], sizeof cand[0], "%s", KOMA_CUDA_MODULE_BUILD_PATH);
#endif
    size_t used = 0;
    if (tlen) tried[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t cl = strlen(cand[i]);
        if (cl < len && compat_file_exists(cand[i]) && !compat_is_dir(cand[i])) {
            memcpy(out, cand[i], cl + 1);
            return 0;
        }
        int w = snprintf(tried + used, tlen > used ? tlen - used : 0, "%s%s", i ? ", " : "", cand[i]);
        if (w > 0 && used + (size_t)w < tlen) used += (size_t)w;
    }
    return -1;
}

static void load(void) {
    char e[1024], path[1400], tried[1200];
    /* 1. the driver: no driver, no GPU; the CUDA libraries stay unloaded */
    if (!compat_dl_open(NN_CUDA_DRIVER_LIB, e, sizeof e)) { /* kept open: the CUDA runtime loads it again */
        set_err(g_why, sizeof g_why,
                "no NVIDIA driver on this machine (%s cannot be loaded), so no GPU for the cuda backend: use the "
                "cpu backend (or install an NVIDIA GPU's driver)",
                NN_CUDA_DRIVER_LIB);
        atomic_store(&g_state, LOAD_FAILED);
        return;
    }
    /* 2. the module */
    if (module_path(path, sizeof path, tried, sizeof tried) != 0) {
        char file[64];
        set_err(g_why, sizeof g_why,
                "the CUDA backend module %s is missing (looked for %s): reinstall Koma, or use the cpu backend",
                compat_dl_file_name(NN_CUDA_MODULE_NAME, file, sizeof file), tried);
        atomic_store(&g_state, LOAD_FAILED);
        return;
    }
    compat_dl_t *mod = compat_dl_open(path, e, sizeof e);
    if (!mod) {
        set_err(g_why, sizeof g_why,
                "the CUDA backend %s cannot be loaded: %s (it needs the CUDA runtime, cuBLAS and cuDNN 9 it was "
                "built with: CUDA " KOMA_BUILD_CUDA "); install them, or use the cpu backend",
                path, e);
        atomic_store(&g_state, LOAD_FAILED);
        return;
    }
    /* 3. its entry point */
    nn_cuda_module_init_fn init = (nn_cuda_module_init_fn)(uintptr_t)compat_dl_sym(mod, NN_CUDA_MODULE_INIT);
    const nn_cuda_module_abi_t abi = NN_CUDA_MODULE_ABI_INIT;
    if (!init) {
        set_err(g_why, sizeof g_why, "%s: not Koma's CUDA backend module (no %s)", path, NN_CUDA_MODULE_INIT);
    } else if (init(&abi, &g_host, &g_api, e, sizeof e) != 0) {
        set_err(g_why, sizeof g_why, "%s: %s: rebuild and reinstall Koma", path, e);
    } else {
        atomic_store(&g_state, LOAD_OK);
        return;
    }
    atomic_store(&g_state, LOAD_FAILED);
}

/* The module's table, loaded on first use; NULL with why where it cannot be had. */
static const nn_cuda_api_t *api(void) {
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st == LOAD_NOT_TRIED) {
        while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire)) compat_sleep_ms(1);
        if (atomic_load(&g_state) == LOAD_NOT_TRIED) load();
        atomic_flag_clear_explicit(&g_lock, memory_order_release);
        st = atomic_load_explicit(&g_state, memory_order_acquire);
    }
    return st == LOAD_OK ? &g_api : NULL;
}

static void why(char *err, size_t errlen) { set_err(err, errlen, "%s", g_why); }

int nn_cuda_device_count(void) {
    const nn_cuda_api_t *a = api();
    return a ? a->device_count() : 0;
}

int nn_cuda_device_info(int32_t device, nn_cuda_device_info_t *info, char *err, size_t errlen) {
    const nn_cuda_api_t *a = api();
    if (a) return a->device_info(device, info, err, errlen);
    why(err, errlen);
    return -1;
}

nn_backend_t *nn_backend_cuda_new(int32_t device, uint32_t flags, char *err, size_t errlen) {
    const nn_cuda_api_t *a = api();
    if (a) return a->backend_new(device, flags, err, errlen);
    why(err, errlen);
    return NULL;
}

/* A backend can be CUDA only once the module is loaded: none is before. */
static const nn_cuda_api_t *loaded(void) {
    return atomic_load_explicit(&g_state, memory_order_acquire) == LOAD_OK ? &g_api : NULL;
}

int nn_backend_is_cuda(const nn_backend_t *be) {
    const nn_cuda_api_t *a = loaded();
    return a && be ? a->is_cuda(be) : 0;
}

uint32_t nn_cuda_flags(const nn_backend_t *be) {
    const nn_cuda_api_t *a = loaded();
    return a && be ? a->flags(be) : 0;
}

const char *nn_cuda_error(const nn_backend_t *be) {
    const nn_cuda_api_t *a = loaded();
    return a && be ? a->error(be) : NULL;
}

int32_t nn_cuda_device_of(const nn_backend_t *be) {
    const nn_cuda_api_t *a = loaded();
    return a && be ? a->device_of(be) : -1;
}

void *nn_cuda_stream(const nn_backend_t *be) {
    const nn_cuda_api_t *a = loaded();
    return a && be ? a->stream(be) : NULL;
}

int nn_cuda_nccl_id(uint8_t id[NN_CUDA_NCCL_ID_BYTES], char *err, size_t errlen) {
    const nn_cuda_api_t *a = api();
    if (a) return a->nccl_id(id, err, errlen);
    why(err, errlen);
    return -1;
}

nn_cuda_nccl_t *nn_cuda_nccl_new(const uint8_t id[NN_CUDA_NCCL_ID_BYTES], int32_t nranks, int32_t rank,
                                 const nn_backend_t *be, char *err, size_t errlen) {
    const nn_cuda_api_t *a = api();
    if (a) return a->nccl_new(id, nranks, rank, be, err, errlen);
    why(err, errlen);
    return NULL;
}

void nn_cuda_nccl_free(nn_cuda_nccl_t *g) {
    const nn_cuda_api_t *a = loaded();
    if (a && g) a->nccl_free(g);
}

int nn_cuda_nccl_mean(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    const nn_cuda_api_t *a = loaded();
    if (a && g) return a->nccl_mean(g, dev, n, err, errlen);
    set_err(err, errlen, "NCCL: no communicator");
    return -1;
}

#else /* built without CUDA */

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

int nn_cuda_nccl_id(uint8_t id[NN_CUDA_NCCL_ID_BYTES], char *err, size_t errlen) {
    (void)id;
    stub_err(err, errlen);
    return -1;
}

nn_cuda_nccl_t *nn_cuda_nccl_new(const uint8_t id[NN_CUDA_NCCL_ID_BYTES], int32_t nranks, int32_t rank,
                                 const nn_backend_t *be, char *err, size_t errlen) {
    (void)id, (void)nranks, (void)rank, (void)be;
    stub_err(err, errlen);
    return NULL;
}

void nn_cuda_nccl_free(nn_cuda_nccl_t *g) { (void)g; }

int nn_cuda_nccl_mean(nn_cuda_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen) {
    (void)g, (void)dev, (void)n;
    stub_err(err, errlen);
    return -1;
}

#endif
