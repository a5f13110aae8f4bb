/* fault.h - fault injection into the backends, for tests (off unless asked).
 *
 * Owns: the one process-wide fault switch and its call counter.
 * Does not own: what a failed op does (each backend records its sticky error,
 * nn/backend.h), how callers report it (nn/net.c, nn/server.c, train/).
 *
 * The switch: KOMA_FAULT=<op>:<n>[:nan] in the environment (read on the first
 * op of the process), or nn_fault_set() from a test. <op> is a member name
 * of nn_backend_t ("conv_fwd", "sgd_step", "buf_alloc", "download", ...);
 * <n> >= 1 is the call that faults, counted over every backend instance of
 * the process (CPU and CUDA alike) from the moment the switch is set (an op
 * a backend does not have, e.g. sync or download_async on the CPU, never
 * faults there).
 *  - default ("fail"): that call fails as a real device failure would: the
 *    instance that made it records the sticky error "injected fault: <op>
 *    call <n> (KOMA_FAULT)" and every later op of that instance is a no-op
 *    (buf_alloc returns NULL instead, as when out of memory, and sets no
 *    error).
 *  - ":nan": the op runs, then its output is overwritten with NaN, and no
 *    error is recorded: a silent numerical blow-up. Only ops with one float
 *    output take it: conv_fwd (y), dense_fwd (y), sgd_step (the parameters).
 * Exactly one call faults; later calls of <op> run normally.
 *
 * Threads: nn_fault_hit may be called from any thread; nn_fault_set too
 * (a mutex guards the spec; an atomic flag keeps the disarmed path cheap).
 * Errors: a malformed spec is refused by nn_fault_set with a message; from
 * the environment it is printed once to stderr and ignored.
 */
#ifndef KOMA_NN_FAULT_H
#define KOMA_NN_FAULT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    NN_FAULT_NONE = 0, /* run the op */
    NN_FAULT_FAIL,     /* fail the op: record the sticky error, skip the op */
    NN_FAULT_NAN,      /* run the op, then fill its output with NaN */
} nn_fault_t;

/* Sets the switch to spec ("<op>:<n>[:nan]") and restarts the count; NULL or
 * "" turns it off. Returns 0, or -1 with err for a malformed spec (the switch
 * is then off). */
int nn_fault_set(const char *spec, char *err, size_t errlen);

/* Called at the entry of op `op` of any backend: counts the call when op is
 * the armed one and says what to do with it. */
nn_fault_t nn_fault_hit(const char *op);

/* 1 while a fault is armed (set, fired or not): a replayed recording
 * (graph_launch) calls no ops, so backends record nothing then. */
int nn_fault_armed(void);

/* The message a backend records for an injected failure of op. */
void nn_fault_message(const char *op, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
