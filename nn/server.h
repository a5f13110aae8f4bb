/* server.h - the inference server: one owner of the device, many clients.
 *
 * Owns: the device workers (one backend instance + two inference contexts
 * each), the bounded FIFO of submissions, the forming of device batches, the
 * two resident nets (current + standby) and their hot swap, the counters.
 * Does not own: the network or its ops (nn/net.h, nn/backend.h), weights
 * files (nn/weights.h), what a position or a move label means (engine/).
 *
 * Protocol (one ticket per submission):
 *   1. nn_server_submit(srv, &req, &ticket, err) validates req, takes a slot
 *      and queues it, and returns at once (it blocks only while the queue is
 *      full; see below). The request struct itself is copied; the BUFFERS it
 *      points to are NOT: they belong to the client, who must keep them alive
 *      and must neither write the inputs nor read or write the outputs until
 *      the ticket has completed. The server reads the inputs straight from
 *      them when it packs a device batch and writes the outputs straight
 *      into them (no staging copy of a whole submission, no malloc).
 *   2. nn_server_poll(srv, ticket, &res) returns NN_SERVER_PENDING while the
 *      ticket runs; nn_server_wait(srv, ticket, &res) blocks until it ends.
 *      Either one, once it returns a final status (OK or an error), CONSUMES
 *      the ticket: its slot is recycled and the ticket becomes invalid. Every
 *      ticket must be consumed exactly once, by one thread at a time (slots
 *      of unconsumed tickets stay taken and count against max_tickets).
 *   3. nn_server_eval(srv, &req, &res) = submit + wait.
 *
 * Batching: submissions are served strictly in FIFO order and packed into
 * device batches of up to max_batch positions. A submission MAY BE SPLIT
 * across consecutive device batches (a batch is always filled to max_batch
 * when enough positions wait); it completes when its last position is done.
 * A worker that finds fewer than max_batch positions waiting waits at most
 * gather_us, counted from the arrival of the oldest waiting submission, then
 * runs what it has: a lone client is served within gather_us + one forward.
 * gather_us -1 (the default) is 0 on CPU workers, which gain little from a
 * fuller batch and leave their core idle while they wait, and 1000 on CUDA.
 *
 * Generations: every published net gets a generation (monotonic). All the
 * positions of one submission are evaluated by the same net, even when the
 * submission is split across batches (its first batch pins the net); the
 * result reports that generation. A swap never happens inside a batch.
 *
 * Publishing: nn_server_publish_file / _net copy new weights into the
 * standby net (the one not current) while the workers keep serving the
 * current one, fold batch norm there, then swap the two under the queue lock
 * between device batches. The standby is reused only after the last
 * submission pinned to it has completed (its reference count is 0). Both
 * nets stay resident: the previous net becomes the next standby. A new net
 * must have the server's configuration (size, activation, inputs, heads,
 * features_version); anything else is refused with the loader's message and
 * the current net keeps serving. Publishers are serialised among themselves.
 *
 * Bounded queue: at most max_tickets unconsumed tickets and queue_positions
 * positions waiting for a worker. nn_server_submit blocks while either bound
 * would be exceeded, and returns NN_SERVER_ESTOPPED when the server stops.
 *
 * Shutdown: nn_server_stop(srv, drain) refuses new submissions, lets the
 * workers finish their current batch (drain = 0) or everything already
 * queued (drain = 1), joins them, then fails every ticket still unfinished
 * with NN_SERVER_ESTOPPED and wakes every waiter. Nothing blocks forever.
 * nn_server_free stops (drain = 0) if needed, waits for threads still inside
 * a server call to leave it, and frees everything; no thread may START a
 * server call once nn_server_free has begun.
 *
 * Errors from the outside world (backend creation, device memory, a bad
 * weights file, a stopped server) are statuses with messages; the process is
 * never aborted. Invariant violations (bugs) hit KOMA_ASSERT.
 *
 * A failed device worker (its backend's sticky error, nn/backend.h: a CUDA
 * fault, or KOMA_FAULT in tests) fails every ticket with rows in its batch
 * with NN_SERVER_EDEVICE and "inference server worker N: <cause>", and
 * retires; the others go on. When the last one retires, every pending ticket
 * and every later submission fails the same way. Publishing refuses a net
 * with a non-finite tensor (nn_server_publish_net) or a file with one (the
 * loader, nn/weights.h).
 *
 * Backends: "cpu" (workers share the BLAS threads), "cuda" (one stream per
 * worker; built only with KOMA_HAVE_CUDA), "auto" (cuda when a device is
 * present, else cpu).
 */
#ifndef KOMA_NN_SERVER_H
#define KOMA_NN_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "nn/net.h"

typedef enum {
    NN_SERVER_OK = 0,
    NN_SERVER_PENDING = 1,       /* nn_server_poll only: not finished yet */
    NN_SERVER_EINVAL = -1,       /* bad request, bad ticket, bad argument */
    NN_SERVER_ESTOPPED = -2,     /* the server is stopping or stopped */
    NN_SERVER_EDEVICE = -3,      /* the backend failed (no usable device worker) */
} nn_server_status_t;

const char *nn_server_status_name(int status); /* "ok", "pending", "invalid", ... */

typedef struct {
    const char *backend;     /* "cpu" (default), "cuda" or "auto" */
    int32_t device;          /* CUDA device index (0) */
    uint32_t cuda_flags;     /* passed to nn_backend_cuda_new (0) */
    int32_t streams;         /* device workers; 0: 1 on cpu, 2 on cuda */
    int32_t cpu_threads;     /* cpu: BLAS threads in all, split among workers; <= 0: all CPUs */
    int32_t max_batch;       /* positions per device batch (256) */
    int32_t gather_us;       /* wait for a fuller batch at most this long (-1: 0 on the CPU, 1000 on CUDA) */
    int32_t queue_positions; /* positions waiting for a worker; 0: 4 * max_batch * streams */
    int32_t max_tickets;     /* unconsumed tickets; 0: 1024 */
    int64_t generation;      /* generation of the initial net (1) */
    int32_t expect_features_version; /* initial file: required features_version, < 0 any (-1) */
    int32_t
        cpu_precision; /* cpu: nn_cpu_prec_t of the workers' inference (NN_CPU_PREC_FP32; selfplay and koma: auto) */
} nn_server_config_t;

nn_server_config_t nn_server_config_default(void);

/* One submission. Inputs and outputs are client memory (see the protocol). */
typedef struct {
    int32_t n;                    /* positions, 1..queue_positions */
    const uint8_t *packed;        /* (n, nn_packed_bytes(in_planes)) packed planes */
    const float *hand;            /* (n, in_hand); NULL ok when in_hand == 0 */
    /* Labels whose policy logits are wanted, CSR: position i's labels are
     * labels[label_offsets[i] .. label_offsets[i+1]), label_offsets (n+1),
     * non-decreasing, labels < 2187. NULL label_offsets: all 2187 logits. */
    const uint32_t *label_offsets;
    const uint16_t *labels;
    float *value;  /* out (n, 3) W/D/L logits, or NULL */
    float *policy; /* out: (label_offsets[n]) logits in label order, or (n, 2187) when
                      label_offsets is NULL; NULL: policy not wanted */
    float *legal;  /* out (n, 2187) legal-head logits, or NULL (self-play leaves it NULL) */
    /* out (n) the moves-left head's plies left until the game ends (>= 0;
     * lc0's moves-left head); NAN for every position when the net has no
     * such head (nn_server_net_config(srv)->heads), whose forward then skips
     * it; NULL: not wanted */
    float *moves_left;
} nn_server_request_t;

typedef struct {
    int32_t status;      /* nn_server_status_t */
    int64_t generation;  /* the net that produced every output of this ticket (0 on error) */
    char message[192];   /* "" when status is OK */
} nn_server_result_t;

/* Opaque; 0 is never a valid ticket. */
typedef uint64_t nn_server_ticket_t;

typedef struct {
    int64_t requests;       /* positions submitted (accepted) */
    int64_t submissions;    /* submissions accepted */
    int64_t evaluated;      /* positions evaluated by a device batch */
    int64_t failed;         /* tickets that ended with an error status */
    int64_t batches;        /* device batches run */
    double avg_batch;       /* evaluated / batches (0 before the first batch) */
    double evals_per_s;     /* positions/s since the previous nn_server_stats call (or start) */
    double busy_frac;       /* sum of worker busy time / (wall * workers) over that interval; a
                               worker's busy time is the backend's stopwatch over its forward
                               passes (CUDA: events, so device compute, not copies or waits;
                               CPU: the forward's wall time), else its wall time per batch */
    double busy_frac_total; /* the same since the server started */
    int64_t queued;         /* positions waiting for a worker now */
    int64_t generation;     /* generation of the current net */
    int32_t publishes;      /* successful publishes */
    int32_t workers;        /* device workers */
    int32_t gather_us;      /* the gather wait in force (the configuration's -1 resolved) */
    const char *backend;    /* "cpu" or "cuda" */
    const char *precision;  /* cpu: "fp32" or "bf16", the workers' inference (nn_backend_cpu_precision); NULL on cuda */
} nn_server_stats_t;

typedef struct nn_server nn_server_t;

/* Starts the server with the initial net from weights_path (loaded, checked
 * against cfg->expect_features_version) or copied from net (exactly one of
 * the two; the caller keeps net, which may live on any backend). NULL with
 * err on failure (bad file, no CUDA, out of memory). cfg NULL: defaults. */
nn_server_t *nn_server_new(const nn_server_config_t *cfg, const char *weights_path, nn_net_t *net,
                           char *err, size_t errlen);
void nn_server_stop(nn_server_t *srv, int drain); /* idempotent, NULL ok */
void nn_server_free(nn_server_t *srv);             /* NULL ok */

/* The configuration of the served nets (in_planes, in_hand, ...). */
const nn_net_config_t *nn_server_net_config(const nn_server_t *srv);
const char *nn_server_backend_name(const nn_server_t *srv);
int32_t nn_server_max_batch(const nn_server_t *srv);

/* Returns NN_SERVER_OK with *ticket set, or an error status with err
 * (EINVAL: malformed request; ESTOPPED; EDEVICE). */
int nn_server_submit(nn_server_t *srv, const nn_server_request_t *req, nn_server_ticket_t *ticket,
                     char *err, size_t errlen);
/* Final status (and res, which may be NULL); consumes the ticket. */
int nn_server_wait(nn_server_t *srv, nn_server_ticket_t ticket, nn_server_result_t *res);
/* NN_SERVER_PENDING (ticket kept), or the final status as nn_server_wait. */
int nn_server_poll(nn_server_t *srv, nn_server_ticket_t ticket, nn_server_result_t *res);
/* submit + wait. */
int nn_server_eval(nn_server_t *srv, const nn_server_request_t *req, nn_server_result_t *res);

/* Publishes new weights; returns the new generation, or -1 with err (the
 * loader's message naming the file, a configuration mismatch, a stopped
 * server) leaving the current net in place. generation 0: current + 1; else
 * it must exceed the current generation. _net: src may live on any backend;
 * it is read on the calling thread, which must own src's backend (e.g. the
 * trainer thread, between steps). */
int64_t nn_server_publish_file(nn_server_t *srv, const char *weights_path, int64_t generation,
                               char *err, size_t errlen);
int64_t nn_server_publish_net(nn_server_t *srv, nn_net_t *src, int64_t generation, char *err,
                              size_t errlen);

/* Counters (consistent snapshot); also advances the "since the previous
 * call" interval of evals_per_s and busy_frac. */
void nn_server_stats(nn_server_t *srv, nn_server_stats_t *st);
int64_t nn_server_generation(nn_server_t *srv);

#endif
