/* koma_test.h - what every test program shares: CHECK / CHECKF / CHECK_NEAR
 * with check and failure counters, t_done, a scratch directory (t_scratch,
 * t_path, t_rm_rf), seeded RNGs and reading a whole file.
 *
 * Header-only; every function is static inline. Included as "tests/koma_test.h"
 * (koma_add_test puts the source root on every test's include path). What one
 * module's tests share (evaluator doubles, a koma driver, shard builders)
 * stays in tests/<module>/<module>_test.h, which includes this header. Not
 * for the fuzz targets: they report with FUZZ_CHECK (tests/fuzz/fuzz.h).
 *
 * The counters are atomic: tests check from worker threads too. */
#ifndef KOMA_TESTS_KOMA_TEST_H
#define KOMA_TESTS_KOMA_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

/* 1 in an ASan or TSan build (a test that limits the address space or
 * times itself skips there), else 0. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ---- loop counts ------------------------------------------------------------------- */

/* KOMA_TEST_SCALE, a number in (0, 1] (default 1; the asan and tsan test
 * presets set it): the share of a long loop a test runs where the loop only
 * repeats code it has already run (training steps, games, perft nodes). A
 * sanitizer job checks that code's memory and threads, which a few rounds
 * do; the normal job runs the full counts and asserts what needs them (a
 * loss that falls far enough, a count that matches), so a test reads
 * t_full() before asserting those. Anything else read as 1, with a warning. */
static inline double t_scale(void) {
    static double scale = -1;
    if (scale < 0) {
        const char *e = getenv("KOMA_TEST_SCALE");
        char *end = NULL;
        double s = e && *e ? strtod(e, &end) : 1.0;
        if (e && *e && (*end || !(s > 0 && s <= 1))) {
            fprintf(stderr, "KOMA_TEST_SCALE=%s: not a number in (0, 1]; the full counts run\n", e);
            s = 1.0;
        }
        if (s < 1) fprintf(stderr, "KOMA_TEST_SCALE=%g: the long loops run that share of their counts\n", s);
        scale = s;
    }
    return scale;
}

/* 1 where the full counts run (KOMA_TEST_SCALE unset or 1). */
static inline int t_full(void) { return t_scale() >= 1.0; }

/* n times the scale, rounded up, at least lo (and never above n). */
static inline int t_scaled(int n, int lo) {
    double s = t_scale();
    if (s >= 1.0) return n;
    int k = (int)ceil(n * s);
    if (k < lo) k = lo;
    return k < n ? k : n;
}

/* ---- checks ------------------------------------------------------------------- */

static atomic_int g_checks; /* checks made */
static atomic_int g_fail;   /* failed checks and t_fail calls */

/* Failure messages printed at most; later failures are only counted. */
#ifndef T_REPORT_MAX
#define T_REPORT_MAX 50
#endif

#if defined(__GNUC__) || defined(__clang__)
#define T_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#else
#define T_PRINTF_(f, a)
#endif

static inline void t_count_(void) { atomic_fetch_add_explicit(&g_checks, 1, memory_order_relaxed); }

/* Counts a failure (not a check); "file:line: " + what + the printf-style
 * message goes to stderr as one write, for the first T_REPORT_MAX failures. */
static inline void t_vfail_(const char *file, int line, const char *what, const char *fmt, va_list ap) {
    int n = atomic_fetch_add(&g_fail, 1) + 1;
    if (n > T_REPORT_MAX + 1) return;
    if (n == T_REPORT_MAX + 1) {
        fprintf(stderr, "%s:%d: (more than %d failures: the rest are only counted)\n", file, line, T_REPORT_MAX);
        return;
    }
    char msg[8192];
    int k = snprintf(msg, sizeof msg, "%s:%d: %s", file, line, what);
    if (k >= 0 && (size_t)k < sizeof msg) vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    fprintf(stderr, "%s\n", msg);
}

/* A failure found outside CHECK (a worker thread's own test, say):
 * t_fail(__FILE__, __LINE__, "", "got %d", x). */
T_PRINTF_(4, 5) static inline void t_fail(const char *file, int line, const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    t_vfail_(file, line, what, fmt, ap);
    va_end(ap);
}

/* CHECKF's failure: "CHECK(expr) failed: " + the caller's message. */
T_PRINTF_(4, 5) static inline void t_failf_(const char *file, int line, const char *expr, const char *fmt, ...) {
    char what[1024];
    snprintf(what, sizeof what, "CHECK(%s) failed: ", expr);
    va_list ap;
    va_start(ap, fmt);
    t_vfail_(file, line, what, fmt, ap);
    va_end(ap);
}

/* file:line: CHECK failed: expr */
#define CHECK(cond)                                                             \
    do {                                                                        \
        t_count_();                                                             \
        if (!(cond)) t_fail(__FILE__, __LINE__, "CHECK failed: ", "%s", #cond); \
    } while (0)

/* file:line: CHECK(expr) failed: <printf-style message> */
#define CHECKF(cond, ...)                                              \
    do {                                                               \
        t_count_();                                                    \
        if (!(cond)) t_failf_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

/* |a - b| <= tol (a NaN fails) */
#define CHECK_NEAR(a, b, tol)                                                                           \
    do {                                                                                                \
        t_count_();                                                                                     \
        double a_ = (a), b_ = (b);                                                                      \
        if (!(fabs(a_ - b_) <= (tol)))                                                                  \
            t_fail(__FILE__, __LINE__, "CHECK_NEAR failed: ", "%s = %.6g, want %.6g +- %g", #a, a_, b_, \
                   (double)(tol));                                                                      \
    } while (0)

/* Counts a check judged by the caller (a comparison helper that prints its own
 * report); ok == 0 counts a failure without a message. Returns ok. */
static inline int t_judge(int ok) {
    t_count_();
    if (!ok) atomic_fetch_add(&g_fail, 1);
    return ok;
}

/* The last line of a test program: "name: N checks, F failed" on stdout;
 * the exit status, 1 when any check failed. */
static inline int t_done(const char *name) {
    int fail = atomic_load(&g_fail);
    printf("%s: %d checks, %d failed\n", name, atomic_load(&g_checks), fail);
    fflush(stdout);
    return fail ? 1 : 0;
}

/* ---- scratch directory ------------------------------------------------------------ */

static char t_dir[512]; /* the directory of the last t_scratch */

/* rm -rf path (missing is fine); 0, or -1 with the reason on stderr. */
static inline int t_rm_rf(const char *path) {
    char err[512];
    if (compat_remove_tree(path, err, sizeof err) == 0) return 0;
    fprintf(stderr, "t_rm_rf: %s\n", err);
    return -1;
}

/* compat_temp_dir()/koma_<name>_<pid>, empty: leftovers of an earlier run
 * are removed first (wine reuses pids). Exits 2 when it cannot be made. */
static inline const char *t_scratch(const char *name) {
    char err[512];
    snprintf(t_dir, sizeof t_dir, "%s/koma_%s_%d", compat_temp_dir(), name, compat_getpid());
    t_rm_rf(t_dir);
    if (compat_mkdir_p(t_dir, err, sizeof err) != 0) {
        fprintf(stderr, "t_scratch: %s\n", err);
        exit(2);
    }
    return t_dir;
}

/* t_dir/name in one of 16 rotating buffers (so a few can be live at once). */
static inline const char *t_path(const char *name) {
    static char bufs[16][900];
    static int at;
    char *b = bufs[at++ % 16];
    snprintf(b, 900, "%s/%s", t_dir, name);
    return b;
}

/* ---- files ----------------------------------------------------------------------- */

/* The whole file, malloc'ed and NUL-terminated (*len: its size, may be
 * NULL); an empty string when it cannot be read, so that a program's output
 * that never came is searched like an empty one. Never NULL. */
static inline char *t_read_file(const char *path, size_t *len) {
    size_t n = 0;
    char *text = compat_read_file(path, &n, NULL, 0);
    if (!text) {
        text = calloc(1, 1);
        KOMA_ASSERT(text);
        n = 0;
    }
    if (len) *len = n;
    return text;
}

/* ---- random numbers ----------------------------------------------------------------- */

/* splitmix64's finaliser: a good 64-bit hash. */
static inline uint64_t t_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64 on a caller's state. */
static inline uint64_t t_splitmix64(uint64_t *s) { return t_mix64(*s += 0x9E3779B97F4A7C15ull); }

/* xorshift64 (13, 7, 17) on a caller's state (never 0). */
static inline uint64_t t_xorshift64(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* The test's default stream: splitmix64, seeded with t_seed. */
static uint64_t t_rng = 0x1234567ull;
static inline void t_seed(uint64_t seed) { t_rng = seed; }
static inline uint64_t t_next(void) { return t_splitmix64(&t_rng); }
/* Uniform in [0, 1). */
static inline double t_unif(void) { return (double)(t_next() >> 11) * (1.0 / 9007199254740992.0); }

#ifdef KOMA_MPIEXEC
/* mpirun and the flags every MPI test runs it with into argv; returns the
 * count (the caller appends the program and its arguments). Root in CI and
 * more ranks than cores: --allow-run-as-root --oversubscribe. Open MPI's
 * components leak at MPI_Finalize (frames in unloaded modules, nothing of
 * Koma's), so under ASan the ranks run without the leak check; every other
 * check stays. */
static inline int t_mpirun_argv(const char **argv, const char *np) {
    int argc = 0;
    argv[argc++] = KOMA_MPIEXEC;
    argv[argc++] = "--allow-run-as-root";
    argv[argc++] = "--oversubscribe";
    argv[argc++] = "-x";
    argv[argc++] = "ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:exitcode=23";
    argv[argc++] = "-np";
    argv[argc++] = np;
    return argc;
}
#endif

#endif
