/* test_usi_start.c - how fast the real `koma` answers `usi` as a GUI starts
 * it (no argument, OMP_WAIT_POLICY unset as on a user's machine), and what
 * it loads (issue 46):
 *  - time from the start of the process to `usiok`, median of 7, against a
 *    bound of 150 ms plus 20 times the median start of a bare process on the
 *    same machine at the same moment (tests/usi/bare_start.c, which links
 *    nothing of Koma; the rounds interleaved): the bound grows with the machine's
 *    load, not with what koma loads. Koma linked against the CUDA libraries
 *    took 1.2 to 2.3 s (1.19 s of cuDNN/cuBLAS loading, twice with the
 *    OpenMP re-exec) where a bare start takes a few ms; the module loaded on
 *    demand (nn/backend_cuda_load.c) and the re-exec before any library's
 *    constructor (nn/gemm.c) answer in tens of ms;
 *  - after `usiok` no CUDA library is mapped in koma (Linux: /proc/PID/maps:
 *    libcudart, libcublas, libcudnn, libkoma_cuda);
 *  - `setoption name Backend value cuda` on a machine without a GPU: the
 *    error says there is no NVIDIA driver or GPU, in words, without the name
 *    of an internal function (nn_server_new) or a bare runtime hint; on a
 *    machine with one, readyok and the module loaded then;
 *  - with the CUDA toolkit's stub libcuda.so as the driver (where the build
 *    found one, Linux, and the machine has no GPU): the module is loaded
 *    when the cuda backend is chosen (the real CUDA libraries come in only
 *    then), the error names the stub; KOMA_CUDA_MODULE naming a missing file
 *    is "the CUDA backend module ... is missing" and a file that is no
 *    library "cannot be loaded".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/backend_cuda.h"
#include "tests/koma_test.h"

#if !defined(KOMA_BIN) || !defined(KOMA_BARE_BIN)
#error "KOMA_BIN and KOMA_BARE_BIN (koma, tests/usi/bare_start.c) must be defined by the build"
#endif

enum { ROUNDS = 7, BOUND_MS = 150, BARE_FACTOR = 20 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Reads koma's lines until one starts with want; 1 when found (the line in
 * buf), 0 on end of output or after 120 s (a hung koma, not a slow one). */
static int read_until(compat_proc_t *p, const char *want, char *buf, size_t len) {
    for (;;) {
        int32_t n = compat_proc_read_line(p, buf, len, 120000);
        if (n < 0) return 0;
        if (!strncmp(buf, want, strlen(want))) return 1;
    }
}

/* /proc/PID/maps of a running process into a malloc'ed string (NULL where
 * there is none: not Linux). */
static char *maps_of(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    size_t n = 0;
    return compat_read_file(path, &n, NULL, 0);
}

static const char *cuda_lib_in(const char *maps) {
    static const char *const libs[] = {"libcudart", "libcublas", "libcudnn", "libkoma_cuda"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (maps && strstr(maps, libs[i])) return libs[i];
    return NULL;
}

/* ms from spawn to the first line of the bare program. */
static double bare_start_ms(void) {
    const char *argv[] = {KOMA_BARE_BIN, NULL};
    char err[512], line[64];
    int64_t t0 = compat_now_ns();
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    KOMA_ASSERT(p);
    int ok = read_until(p, "noop", line, sizeof line);
    double ms = (double)(compat_now_ns() - t0) / 1e6;
    CHECK(ok);
    compat_proc_wait(p, -1, NULL);
    compat_proc_free(p);
    return ms;
}

/* ms from spawn to usiok; on the first round, what koma has mapped then. */
static double koma_usiok_ms(int check_maps) {
    const char *argv[] = {KOMA_BIN, NULL};
    char err[512], line[4096];
    int64_t t0 = compat_now_ns();
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    KOMA_ASSERT(p);
    CHECK(compat_proc_write_line(p, "usi") == 0);
    int ok = read_until(p, "usiok", line, sizeof line);
    double ms = (double)(compat_now_ns() - t0) / 1e6;
    CHECKF(ok, "koma gave no usiok");
    if (check_maps) {
        char *maps = maps_of(compat_proc_pid(p));
        if (maps) {
            const char *lib = cuda_lib_in(maps);
            CHECKF(!lib, "koma has %s mapped after usiok: the CUDA libraries load at start", lib);
        } else {
            printf("no /proc/PID/maps here: the mapped libraries are not checked\n");
        }
        free(maps);
    }
    compat_proc_write_line(p, "quit");
    int status = -1;
    CHECK(compat_proc_wait(p, -1, &status) == 0 && status == 0);
    compat_proc_free(p);
    return ms;
}

static void test_start_time(void) {
    double koma[ROUNDS], bare[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        bare[i] = bare_start_ms();
        koma[i] = koma_usiok_ms(i == 0);
    }
    double mk = median(koma, ROUNDS), mb = median(bare, ROUNDS), bound = BOUND_MS + BARE_FACTOR * mb;
    printf("koma start to usiok: median %.1f ms (fastest %.1f, slowest %.1f); a bare start: median %.1f ms; "
           "bound %.0f ms\n",
           mk, koma[0], koma[ROUNDS - 1], mb, bound);
    CHECKF(mk <= bound, "koma answered usi in %.1f ms (median of %d), over %.0f ms (150 + %d x a bare start, %.1f ms)",
           mk, ROUNDS, bound, BARE_FACTOR, mb);
}

/* koma with Backend cuda: the Error line (or readyok) into line; the maps
 * after it into *maps (NULL off Linux). */
static void koma_backend_cuda(char *line, size_t len, char **maps) {
    const char *argv[] = {KOMA_BIN, NULL}; /* the shipped net: a server, on the backend asked for */
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    KOMA_ASSERT(p);
    compat_proc_write_line(p, "usi");
    compat_proc_write_line(p, "setoption name Backend value cuda");
    compat_proc_write_line(p, "isready");
    line[0] = 0;
    for (;;) {
        int32_t n = compat_proc_read_line(p, line, len, 120000);
        if (n < 0) {
            snprintf(line, len, "(no answer to isready)");
            break;
        }
        if (!strncmp(line, "readyok", 7) || strstr(line, "info string Error")) break;
    }
    *maps = maps_of(compat_proc_pid(p));
    compat_proc_write_line(p, "quit");
    compat_proc_wait(p, -1, NULL);
    compat_proc_free(p);
}

static void test_backend_cuda(void) {
    char line[2048];
    char *maps = NULL;
    int devices = nn_cuda_device_count();
    koma_backend_cuda(line, sizeof line, &maps);
    printf("Backend cuda (%d device(s) here): %s\n", devices, line);
    if (devices == 0) {
#ifdef KOMA_HAVE_CUDA
        const char *says = "NVIDIA"; /* no NVIDIA driver, no NVIDIA GPU, an NVIDIA driver too old */
#else
        const char *says = "built without CUDA";
#endif
        CHECKF(strstr(line, "info string Error") && strstr(line, says) && !strstr(line, "nn_server_new") &&
                   !strstr(line, "hint:"),
               "Backend cuda without a GPU: %s", line);
    } else {
        CHECKF(!strncmp(line, "readyok", 7), "Backend cuda with %d device(s): %s", devices, line);
        CHECKF(!maps || strstr(maps, "libkoma_cuda"), "the cuda backend runs without its module mapped?");
    }
    free(maps);
}

#if defined(KOMA_CUDA_STUB_DRIVER) && defined(__linux__)
/* The toolkit's stub libcuda.so as libcuda.so.1 on LD_LIBRARY_PATH: the driver check passes, the module and
 * the CUDA libraries load, the runtime finds the stub. */
static void test_stub_driver(void) {
    if (nn_cuda_device_count() > 0) {
        printf("a GPU is here: the stub driver is not tried in its place\n");
        return;
    }
    char dir[700], link[800], env[2000], line[2048], err[512];
    snprintf(dir, sizeof dir, "%s", t_path("stubdrv"));
    KOMA_ASSERT(compat_mkdir_p(dir, err, sizeof err) == 0);
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    const char *ln[] = {"ln", "-sf", KOMA_CUDA_STUB_DRIVER, link, NULL};
    int st = -1;
    if (compat_run(ln, &st, err, sizeof err) != 0 || st != 0) {
        printf("cannot link the stub driver: not tried\n");
        return;
    }
    const char *old = getenv("LD_LIBRARY_PATH");
    char *saved = old ? strdup(old) : NULL;
    snprintf(env, sizeof env, "%s%s%s", dir, old && old[0] ? ":" : "", old ? old : "");
    compat_setenv("LD_LIBRARY_PATH", env);

    char *maps = NULL;
    koma_backend_cuda(line, sizeof line, &maps);
    printf("Backend cuda with the stub driver: %s\n", line);
    CHECKF(strstr(line, "info string Error") && strstr(line, "stub") && strstr(line, "NVIDIA driver") &&
               !strstr(line, "nn_server_new"),
           "with the stub driver: %s", line);
    CHECKF(maps && strstr(maps, "libkoma_cuda") && strstr(maps, "libcudnn"),
           "the module and cuDNN are not mapped once the cuda backend was chosen");
    free(maps);

    compat_setenv("KOMA_CUDA_MODULE", t_path("no-such-module.so"));
    koma_backend_cuda(line, sizeof line, &maps);
    CHECKF(strstr(line, "info string Error") && strstr(line, "module") && strstr(line, "is missing") &&
               strstr(line, "no-such-module.so"),
           "a missing module: %s", line);
    free(maps);
    const char *junk = t_path("junk.so");
    KOMA_ASSERT(compat_write_file_durable(junk, "no library\n", 11, err, sizeof err) == 0);
    compat_setenv("KOMA_CUDA_MODULE", junk);
    koma_backend_cuda(line, sizeof line, &maps);
    CHECKF(strstr(line, "info string Error") && strstr(line, "cannot be loaded") && strstr(line, "junk.so"),
           "a module that is no library: %s", line);
    free(maps);
    compat_setenv("KOMA_CUDA_MODULE", NULL);
    compat_setenv("LD_LIBRARY_PATH", saved);
    free(saved);
}
#endif

int main(void) {
    t_scratch("usi_start");
    /* as a GUI starts it on a user's machine: the variable koma sets for itself is not set yet */
    compat_setenv("OMP_WAIT_POLICY", NULL);
    test_start_time();
    test_backend_cuda();
#if defined(KOMA_CUDA_STUB_DRIVER) && defined(__linux__)
    test_stub_driver();
#endif
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_usi_start");
}
