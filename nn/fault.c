/* fault.c - the fault switch of the backends (see fault.h).
 *
 * Owns: the parsed spec, the call counter, the lock guarding them.
 * Does not own: the backends' reaction to a fault (backend_cpu.c,
 * backend_cuda.cu).
 * Threads: a spin lock (atomic_flag; no static mutex initialiser exists in
 * compat/) guards the spec and counter; `g_state` says, without the lock,
 * whether the environment was read and whether a fault is armed.
 */
#include "nn/fault.h"
#include "compat/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATE_UNREAD = 0, STATE_OFF = 1, STATE_ARMED = 2 };

static atomic_int g_state = STATE_UNREAD;
static atomic_flag g_lock = ATOMIC_FLAG_INIT;
static char g_op[32];      /* armed op (g_lock) */
static int64_t g_n;        /* the call that faults, 1-based (g_lock) */
static int64_t g_count;    /* calls of g_op so far (g_lock) */
static nn_fault_t g_kind;  /* NN_FAULT_FAIL or NN_FAULT_NAN (g_lock) */

static void lock(void) {
    while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire)) {
    }
}
static void unlock(void) { atomic_flag_clear_explicit(&g_lock, memory_order_release); }

/* Parses spec into the globals; g_lock held. Returns 0 or -1 with err. */
static int parse_locked(const char *spec, char *err, size_t errlen) {
    atomic_store(&g_state, STATE_OFF);
    if (!spec || !*spec) return 0;
    const char *c1 = strchr(spec, ':');
    size_t oplen = c1 ? (size_t)(c1 - spec) : 0;
    if (!c1 || oplen == 0 || oplen >= sizeof g_op) {
        set_err(err, errlen, "KOMA_FAULT '%s': expected <op>:<call>[:nan], e.g. conv_fwd:3", spec);
        return -1;
    }
    errno = 0;
    char *end = NULL;
    long long n = strtoll(c1 + 1, &end, 10);
    if (errno || end == c1 + 1 || n < 1 || (*end && *end != ':')) {
        set_err(err, errlen, "KOMA_FAULT '%s': the call number must be an integer >= 1", spec);
        return -1;
    }
    nn_fault_t kind = NN_FAULT_FAIL;
    if (*end == ':') {
        if (strcmp(end + 1, "nan") != 0) {
            set_err(err, errlen, "KOMA_FAULT '%s': the only mode after the call number is 'nan'", spec);
            return -1;
        }
        kind = NN_FAULT_NAN;
    }
    memcpy(g_op, spec, oplen);
    g_op[oplen] = '\0';
    if (kind == NN_FAULT_NAN && strcmp(g_op, "conv_fwd") != 0 && strcmp(g_op, "dense_fwd") != 0 &&
        strcmp(g_op, "sgd_step") != 0) {
        set_err(err, errlen, "KOMA_FAULT '%s': ':nan' applies only to conv_fwd, dense_fwd and sgd_step", spec);
        return -1;
    }
    g_n = n;
    g_count = 0;
    g_kind = kind;
    atomic_store(&g_state, STATE_ARMED);
    return 0;
}

int nn_fault_set(const char *spec, char *err, size_t errlen) {
    lock();
    int rc = parse_locked(spec, err, errlen);
    unlock();
    return rc;
}

nn_fault_t nn_fault_hit(const char *op) {
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st == STATE_OFF) return NN_FAULT_NONE;
    nn_fault_t r = NN_FAULT_NONE;
    lock();
    if (atomic_load(&g_state) == STATE_UNREAD) {
        char e[256];
        if (parse_locked(getenv("KOMA_FAULT"), e, sizeof e) != 0) fprintf(stderr, "koma: %s (ignored)\n", e);
    }
    if (atomic_load(&g_state) == STATE_ARMED && strcmp(op, g_op) == 0 && ++g_count == g_n) r = g_kind;
    unlock();
    return r;
}

int nn_fault_armed(void) {
    (void)nn_fault_hit(""); /* reads KOMA_FAULT on the first call; counts nothing */
    return atomic_load(&g_state) == STATE_ARMED;
}

void nn_fault_message(const char *op, char *buf, size_t len) {
    lock();
    long long n = (long long)g_n;
    unlock();
    snprintf(buf, len, "injected fault: %s call %lld (KOMA_FAULT)", op, n);
}
