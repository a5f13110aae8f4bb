/* server.c - the inference server (see server.h for the protocol).
 *
 * Owns: the slots (one per unconsumed ticket, preallocated), the FIFO of
 * queued slots, the device workers and the two resident models.
 * Does not own: the forward pass (nn/net.c), file loading (nn/weights.c).
 *
 * Locking: one mutex `mu` guards the queue, the slots, the models' reference
 * counts and which model is current. Workers hold it only to take rows and
 * to report finished rows; packing inputs, the forward pass and writing the
 * outputs happen outside it, on rows that belong to that worker alone.
 * Exactly one idle worker at a time is the "gatherer" (waits for a batch to
 * fill); the others wait for that role, so two CUDA workers never split a
 * batch that could have been one. CPU workers are cores, not devices: there a
 * gatherer takes only its share of the queued rows when other workers are
 * free (worker_take_limit), so two workers compute at the same time. `pub_mu` serialises publishers (and the main
 * backend, which only publishers and nn_server_new use).
 *
 * Models: models[cur] serves new submissions; models[1 - cur] is the
 * standby. A submission pins the current model when its first rows are
 * taken (refs++) and unpins it when it finishes (refs--); a publisher
 * writes into the standby only when its refs are 0, which cannot change
 * while it writes, since rows are only ever pinned to the current model or to
 * the model of the partially taken head submission (which has refs > 0).
 */
#include "nn/registry.h"
#include "compat/err.h"
#include "nn/server.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/backend_cuda.h" /* declared in every build: a stub says "no CUDA" without it */
#include "nn/weights.h"

const char *nn_server_status_name(int status) {
    switch (status) {
    case NN_SERVER_OK: return "ok";
    case NN_SERVER_PENDING: return "pending";
    case NN_SERVER_EINVAL: return "invalid";
    case NN_SERVER_ESTOPPED: return "stopped";
    case NN_SERVER_EDEVICE: return "device error";
    default: return "?";
    }
}

nn_server_config_t nn_server_config_default(void) {
    nn_server_config_t c;
    memset(&c, 0, sizeof(c));
    c.backend = "cpu";
    c.device = 0;
    c.cuda_flags = 0;
    c.streams = 0;
    c.cpu_threads = 0;
    c.max_batch = 256;
    c.gather_us = -1;
    c.queue_positions = 0;
    c.max_tickets = 0;
    c.generation = 1;
    c.expect_features_version = -1;
    c.cpu_precision = NN_CPU_PREC_FP32;
    return c;
}

/* ---- state ------------------------------------------------------------------ */
enum { SLOT_FREE, SLOT_QUEUED, SLOT_DONE };

typedef struct {
    nn_net_t *net;
    nn_ctx_t *warm; /* batch-1 context on the main backend: folds BN before a swap */
    int64_t gen;
    int32_t refs;   /* unfinished submissions pinned to this model (mu) */
} srv_model_t;

typedef struct {
    nn_server_request_t req; /* the client's request (its buffers stay the client's) */
    uint32_t seq;            /* ticket = seq << 32 | index; bumped when recycled */
    int32_t state;           /* SLOT_* */
    int32_t taken;           /* positions handed to workers */
    int32_t done;            /* positions finished (evaluated or failed) */
    int32_t status;          /* first error of any of its rows, else OK */
    int32_t model;           /* pinned model index, -1 before its first rows are taken */
    int32_t waiting;         /* a thread waits on cv */
    int32_t next;            /* FIFO / free-list link, -1 = none */
    int64_t gen;             /* generation of the pinned model */
    int64_t t_submit;        /* ns, compat_now_ns */
    compat_cond_t cv;        /* signalled when the slot becomes SLOT_DONE */
    char msg[192];
} srv_slot_t;

typedef struct {
    int32_t slot, row0, n; /* rows [row0, row0 + n) of slot's request */
} srv_seg_t;

typedef struct {
    nn_server_t *srv;
    int32_t id;
    nn_backend_t *be;
    nn_ctx_t *ctx[2];     /* one per model, max_batch each */
    int32_t host_visible; /* backend buffers are host memory (cpu): no staging copies */
    /* host staging for device backends (NULL when host_visible); page-locked
     * where the backend has host_alloc, so that downloads land in it directly */
    uint8_t *st_packed;   /* (max_batch, packed_bytes) */
    float *st_hand;       /* (max_batch, in_hand) */
    float *st_value;      /* (max_batch, 3) */
    float *st_policy;     /* (max_batch, 2187) */
    float *st_legal;      /* (max_batch, 2187) */
    float *st_ml;         /* (max_batch) raw moves-left outputs; NULL without the head */
    /* The device gather of the requested policy logits (be->gather; NULL
     * when host_visible or the backend has none): offsets staged on the host
     * and uploaded, logits gathered on the device and downloaded. */
    int32_t gather_cap;   /* labels one batch can gather: max_batch * SRV_GATHER_PER_ROW */
    int32_t *st_idx;      /* (gather_cap) host */
    float *st_gath;       /* (gather_cap) host */
    int32_t *d_idx;       /* (gather_cap) device */
    float *d_gath;        /* (gather_cap) device */
    srv_seg_t *segs;      /* (max_batch) the current batch's pieces */
    compat_thread_t thread;
    int32_t started;
} srv_worker_t;

struct nn_server {
    nn_server_config_t cfg;
    char backend_name[8];
    _Atomic(const char *) precision; /* cpu workers' inference precision (static strings), NULL on cuda */
    nn_net_config_t net_cfg;
    int64_t packed_bytes; /* per position */
    int64_t gather_ns;
    int32_t use_cuda;
    int32_t cpu_threads_each;

    nn_backend_t *main_be; /* loading and folding published nets (pub_mu) */
    srv_model_t models[2];
    uint8_t *zero_packed;  /* (1, packed_bytes) zeros: the warm-up forward's input */
    float *zero_hand;      /* (1, in_hand + 1) */
    float zero_value[NN_VALUE_NB];

    compat_mutex_t mu;
    compat_cond_t cv_work;   /* the gatherer: rows queued, stop */
    compat_cond_t cv_gather; /* idle workers: the gatherer role is free */
    compat_cond_t cv_space;  /* submitters: a slot or queue space was freed */
    compat_cond_t cv_refs;   /* publishers: a model's refs dropped to 0 */
    compat_cond_t cv_users;  /* nn_server_free: the last caller left */
    int32_t cur;             /* current model */
    int32_t gathering;
    int32_t stopping, drain, stopped, dead;
    int32_t live_workers;
    int32_t running;         /* workers with a batch out of the lock */
    int32_t split_rest;      /* a gatherer left rows for the next one: no gather wait */
    int32_t users;           /* threads inside blocking server calls */
    int32_t q_head, q_tail;  /* FIFO of slots with untaken rows */
    int32_t free_head;
    int64_t queued;          /* untaken rows in the FIFO */
    char dead_msg[192];

    srv_slot_t *slots;
    int32_t n_slots;
    srv_worker_t *workers;
    int32_t n_workers;

    compat_mutex_t pub_mu;
    compat_mutex_t stop_mu;
    compat_mutex_t stats_mu; /* the "since the previous call" interval */
    int64_t t_start, last_t, last_eval, last_busy;

    _Atomic int64_t n_requests, n_submissions, n_evaluated, n_failed, n_batches, busy_ns;
    _Atomic int64_t generation;
    _Atomic int32_t n_publishes;
};

/* ---- slots (mu held) ------------------------------------------------------------ */
static void slot_finish(nn_server_t *srv, srv_slot_t *s) {
    s->state = SLOT_DONE;
    if (s->model >= 0) {
        srv_model_t *m = &srv->models[s->model];
        KOMA_ASSERT(m->refs > 0);
        if (--m->refs == 0) compat_cond_broadcast(&srv->cv_refs);
    }
    if (s->status != NN_SERVER_OK) atomic_fetch_add(&srv->n_failed, 1);
    if (s->waiting) compat_cond_signal(&s->cv);
}

/* Marks rows of s finished (failed with status/msg when status != OK). */
static void slot_rows_done(nn_server_t *srv, srv_slot_t *s, int32_t n, int32_t status, const char *msg) {
    if (status != NN_SERVER_OK && s->status == NN_SERVER_OK) {
        s->status = status;
        snprintf(s->msg, sizeof(s->msg), "%s", msg ? msg : nn_server_status_name(status));
    }
    s->done += n;
    KOMA_ASSERT(s->done <= s->req.n);
    if (s->done == s->req.n) slot_finish(srv, s);
}

/* Fails every unfinished slot (no worker may have rows in flight). */
static void fail_all(nn_server_t *srv, int32_t status, const char *msg) {
    for (int32_t i = 0; i < srv->n_slots; i++) {
        srv_slot_t *s = &srv->slots[i];
        if (s->state != SLOT_QUEUED) continue;
        s->taken = s->req.n;
        slot_rows_done(srv, s, s->req.n - s->done, status, msg);
    }
    srv->q_head = srv->q_tail = -1;
    srv->queued = 0;
    compat_cond_broadcast(&srv->cv_space);
}

/* ---- backends ---------------------------------------------------------------------- */
static nn_backend_t *srv_backend_new(nn_server_t *srv, int32_t threads, char *err, size_t errlen) {
    nn_backend_t *be = nn_backend_open(srv->use_cuda ? NN_BACKEND_KIND_CUDA : NN_BACKEND_KIND_CPU, threads,
                                       srv->cfg.device, srv->cfg.cuda_flags, err, errlen);
    if (be && !srv->use_cuda) nn_backend_cpu_set_precision(be, (nn_cpu_prec_t)srv->cfg.cpu_precision);
    if (be && !srv->use_cuda) atomic_store(&srv->precision, nn_backend_cpu_precision(be)); /* every worker's */
    return be;
}

/* ---- device workers ------------------------------------------------------------- */
static int worker_should_exit(const nn_server_t *srv) {
    return srv->stopping && (!srv->drain || srv->queued == 0 || srv->dead);
}

/* Under mu: how many rows the gatherer takes. A device runs one batch at a
 * time fastest, so on CUDA it takes up to max_batch. CPU workers are cores:
 * a gatherer that took every queued row would leave the other workers idle
 * while it alone computes the batch, so it takes its share of the rows among
 * the workers that are free (itself included), and never fewer than
 * SRV_CPU_MIN_SPLIT rows (smaller GEMMs lose more than they gain). */
enum { SRV_CPU_MIN_SPLIT = 32 };
static int32_t worker_take_limit(const nn_server_t *srv) {
    int32_t max_batch = srv->cfg.max_batch, free_workers = srv->live_workers - srv->running;
    if (srv->use_cuda || free_workers <= 1) return max_batch;
    int64_t share = (srv->queued + free_workers - 1) / free_workers;
    if (share < SRV_CPU_MIN_SPLIT) share = SRV_CPU_MIN_SPLIT;
    return share < max_batch ? (int32_t)share : max_batch;
}

/* Under mu, as the gatherer: takes up to max_batch rows from the FIFO
 * head into w->segs. Returns the number of segments; *model_out = model index. */
static int32_t worker_take(nn_server_t *srv, srv_worker_t *w, int32_t max_batch, int32_t *B_out,
                           int32_t *model_out) {
    int32_t nseg = 0, B = 0, bm = -1;
    while (srv->q_head >= 0 && B < max_batch) {
        int32_t idx = srv->q_head;
        srv_slot_t *s = &srv->slots[idx];
        if (s->model < 0) {
            if (bm < 0) bm = srv->cur;
            else if (bm != srv->cur) break; /* head remainder ran on the old net: no newcomers */
            s->model = bm;
            s->gen = srv->models[bm].gen;
            srv->models[bm].refs++;
        } else if (bm < 0) {
            bm = s->model;
        } else if (s->model != bm) {
            break;
        }
        int32_t k = s->req.n - s->taken;
        if (k > max_batch - B) k = max_batch - B;
        w->segs[nseg].slot = idx;
        w->segs[nseg].row0 = s->taken;
        w->segs[nseg].n = k;
        nseg++;
        s->taken += k;
        B += k;
        srv->queued -= k;
        if (s->taken == s->req.n) {
            srv->q_head = s->next;
            if (srv->q_head < 0) srv->q_tail = -1;
            s->next = -1;
        }
    }
    *B_out = B;
    *model_out = bm;
    return nseg;
}

/* Labels per position the device gather is sized for: a shogi position has
 * at most 593 legal moves; a batch whose requests ask for more (or for whole
 * rows) downloads whole rows instead. */
#define SRV_GATHER_PER_ROW 600

/* The element offsets of every requested label in the batch's (B, 2187)
 * policy output, in the order the clients' buffers take them, into
 * w->st_idx. Returns their count, or -1 when the batch cannot be gathered
 * (a request wants whole rows, or more labels than the buffer holds). */
static int64_t gather_offsets(const nn_server_t *srv, srv_worker_t *w, int32_t nseg) {
    int64_t k = 0;
    int32_t off = 0;
    for (int32_t i = 0; i < nseg; i++) {
        const srv_seg_t *g = &w->segs[i];
        const nn_server_request_t *r = &srv->slots[g->slot].req;
        if (r->policy) {
            if (!r->label_offsets) return -1;
            int64_t n = (int64_t)r->label_offsets[g->row0 + g->n] - r->label_offsets[g->row0];
            if (k + n > w->gather_cap) return -1;
            for (int32_t j = 0; j < g->n; j++) {
                int32_t base = (off + j) * NN_POLICY_NB;
                for (uint32_t q = r->label_offsets[g->row0 + j]; q < r->label_offsets[g->row0 + j + 1]; q++)
                    w->st_idx[k++] = base + r->labels[q];
            }
        }
        off += g->n;
    }
    return k;
}

/* Packs the batch, runs it, writes every output into the clients' buffers;
 * *dev_ns: the device time of the forward and the gather (the backend's
 * stopwatch), -1 when the backend cannot say. Returns NULL, or the backend's
 * error message. No lock held. */
static const char *worker_run(nn_server_t *srv, srv_worker_t *w, int32_t nseg, int32_t B, int32_t mi,
                              int64_t *dev_ns) {
    *dev_ns = -1;
    nn_ctx_t *ctx = w->ctx[mi];
    nn_backend_t *be = w->be;
    int64_t pb = srv->packed_bytes;
    int32_t nh = srv->net_cfg.in_hand;
    uint8_t *d_packed;
    float *d_hand, *d_policy, *d_value, *d_legal;
    nn_ctx_buffers(ctx, &d_packed, &d_hand, &d_policy, &d_value, &d_legal);
    uint8_t *h_packed = w->host_visible ? d_packed : w->st_packed;
    float *h_hand = w->host_visible ? d_hand : w->st_hand;
    int32_t want_policy = 0, want_legal = 0, want_value = 0, want_ml = 0;
    int32_t off = 0;
    for (int32_t i = 0; i < nseg; i++) {
        const srv_seg_t *g = &w->segs[i];
        const nn_server_request_t *r = &srv->slots[g->slot].req;
        memcpy(h_packed + off * pb, r->packed + g->row0 * pb, (size_t)(g->n * pb));
        if (nh) memcpy(h_hand + (int64_t)off * nh, r->hand + (int64_t)g->row0 * nh, sizeof(float) * (size_t)g->n * nh);
        want_policy |= r->policy != NULL;
        want_legal |= r->legal != NULL;
        want_value |= r->value != NULL;
        want_ml |= r->moves_left != NULL;
        off += g->n;
    }
    KOMA_ASSERT(off == B);
    int64_t n_gath = want_policy && w->gather_cap ? gather_offsets(srv, w, nseg) : -1;
    if (!w->host_visible) {
        be->upload(be, d_packed, h_packed, (size_t)(B * pb));
        if (nh) be->upload(be, d_hand, h_hand, sizeof(float) * (size_t)B * nh);
        if (n_gath > 0) be->upload(be, w->d_idx, w->st_idx, sizeof(int32_t) * (size_t)n_gath);
    }
    /* the moves-left head only on a net that has it: the others answer NAN */
    const float *d_ml = want_ml && (srv->net_cfg.heads & NN_HEAD_MOVES_LEFT) ? nn_ctx_moves_left(ctx) : NULL;
    int32_t outputs = (want_policy ? NN_OUT_POLICY : 0) | (want_value ? NN_OUT_VALUE : 0) |
                      (want_legal ? NN_OUT_LEGAL : 0) | (d_ml ? NN_OUT_MOVES_LEFT : 0);
    if (be->timer_mark) be->timer_mark(be, 0);
    (void)nn_forward_dev(ctx, B, d_packed, d_hand, outputs); /* a failure is sticky: checked below */
    if (n_gath > 0) be->gather(be, d_policy, w->d_idx, n_gath, w->d_gath);
    if (be->timer_mark) be->timer_mark(be, 1);
    const float *P = d_policy, *V = d_value, *L = d_legal, *M = d_ml;
    if (w->host_visible) {
        if (be->sync) be->sync(be);
    } else {
        /* Queued behind the forward and waited for once per batch where the
         * backend can (pinned staging); else one wait per download. */
        void (*down)(nn_backend_t *, void *, const void *, size_t) =
            be->download_async && be->host_alloc ? be->download_async : be->download;
        if (want_value) down(be, w->st_value, d_value, sizeof(float) * (size_t)B * NN_VALUE_NB);
        if (n_gath > 0) {
            down(be, w->st_gath, w->d_gath, sizeof(float) * (size_t)n_gath);
        } else if (want_policy && n_gath < 0) {
            down(be, w->st_policy, d_policy, sizeof(float) * (size_t)B * NN_POLICY_NB);
        }
        if (want_legal) down(be, w->st_legal, d_legal, sizeof(float) * (size_t)B * NN_LEGAL_NB);
        if (d_ml) down(be, w->st_ml, d_ml, sizeof(float) * (size_t)B);
        if (be->sync) be->sync(be);
        P = w->st_policy;
        V = w->st_value;
        L = w->st_legal;
        M = d_ml ? w->st_ml : NULL;
    }
    const char *e = nn_backend_error(be);
    if (e) return e;
    if (be->timer_ms) {
        double ms = be->timer_ms(be);
        if (ms >= 0) *dev_ns = (int64_t)(ms * 1e6);
    }
    off = 0;
    const float *gath = w->st_gath; /* the gathered logits, in the clients' order */
    for (int32_t i = 0; i < nseg; i++) {
        const srv_seg_t *g = &w->segs[i];
        const nn_server_request_t *r = &srv->slots[g->slot].req;
        for (int32_t j = 0; j < g->n; j++) {
            int64_t row = g->row0 + j, b = off + j;
            if (r->value) memcpy(r->value + row * NN_VALUE_NB, V + b * NN_VALUE_NB, sizeof(float) * NN_VALUE_NB);
            if (r->legal) memcpy(r->legal + row * NN_LEGAL_NB, L + b * NN_LEGAL_NB, sizeof(float) * NN_LEGAL_NB);
            if (r->moves_left) r->moves_left[row] = M ? nn_moves_left_plies(M[b]) : NAN;
            if (!r->policy) continue;
            if (n_gath >= 0) {
                uint32_t k0 = r->label_offsets[row], k1 = r->label_offsets[row + 1];
                memcpy(r->policy + k0, gath, sizeof(float) * (k1 - k0));
                gath += k1 - k0;
                continue;
            }
            const float *pr = P + b * NN_POLICY_NB;
            if (!r->label_offsets) {
                memcpy(r->policy + row * NN_POLICY_NB, pr, sizeof(float) * NN_POLICY_NB);
            } else {
                for (uint32_t k = r->label_offsets[row]; k < r->label_offsets[row + 1]; k++)
                    r->policy[k] = pr[r->labels[k]];
            }
        }
        off += g->n;
    }
    return NULL;
}

static void *worker_main(void *arg) {
    srv_worker_t *w = arg;
    nn_server_t *srv = w->srv;
    for (;;) {
        compat_mutex_lock(&srv->mu);
        while (srv->gathering && !worker_should_exit(srv)) compat_cond_wait(&srv->cv_gather, &srv->mu);
        if (worker_should_exit(srv)) {
            compat_mutex_unlock(&srv->mu);
            break;
        }
        srv->gathering = 1;
        while (srv->queued == 0 && !worker_should_exit(srv)) compat_cond_wait(&srv->cv_work, &srv->mu);
        int32_t nseg = 0, B = 0, mi = -1;
        /* Wait for a full batch, at most gather_ns after the oldest arrival
         * (no waiting once stopping: drain runs what is queued at once). */
        while (srv->queued > 0 && srv->queued < srv->cfg.max_batch && !srv->stopping && !srv->split_rest) {
            int64_t left = srv->slots[srv->q_head].t_submit + srv->gather_ns - compat_now_ns();
            if (left <= 0) break;
            compat_cond_timedwait(&srv->cv_work, &srv->mu, (left + 999999) / 1000000);
        }
        if (srv->queued > 0 && !srv->dead && !(srv->stopping && !srv->drain)) {
            int32_t limit = worker_take_limit(srv);
            nseg = worker_take(srv, w, limit, &B, &mi);
            compat_cond_broadcast(&srv->cv_space);
            srv->running += nseg > 0;
            srv->split_rest = srv->queued > 0 && limit < srv->cfg.max_batch;
        }
        srv->gathering = 0;
        compat_cond_signal(&srv->cv_gather);
        compat_mutex_unlock(&srv->mu);
        if (nseg == 0) continue;

        int64_t t0 = compat_now_ns(), dev_ns;
        const char *e = worker_run(srv, w, nseg, B, mi, &dev_ns);
        /* busy: the device's own time where the backend measures it (CUDA
         * events: compute, not waits or copies), else the worker's wall time */
        atomic_fetch_add(&srv->busy_ns, dev_ns >= 0 ? dev_ns : compat_now_ns() - t0);

        compat_mutex_lock(&srv->mu);
        srv->running--;
        char msg[192];
        if (e) snprintf(msg, sizeof(msg), "inference server worker %d: %s", w->id, e);
        for (int32_t i = 0; i < nseg; i++)
            slot_rows_done(srv, &srv->slots[w->segs[i].slot], w->segs[i].n,
                           e ? NN_SERVER_EDEVICE : NN_SERVER_OK, e ? msg : NULL);
        if (!e) {
            atomic_fetch_add(&srv->n_batches, 1);
            atomic_fetch_add(&srv->n_evaluated, B);
        } else {
            /* The instance is unusable from now on (sticky error): retire it. */
            if (--srv->live_workers == 0) {
                srv->dead = 1;
                snprintf(srv->dead_msg, sizeof(srv->dead_msg), "%s", msg);
                fail_all(srv, NN_SERVER_EDEVICE, msg);
                compat_cond_broadcast(&srv->cv_gather);
                compat_cond_broadcast(&srv->cv_work);
            }
            compat_mutex_unlock(&srv->mu);
            break;
        }
        compat_mutex_unlock(&srv->mu);
    }
    return NULL;
}

/* ---- construction ---------------------------------------------------------------- */
static int same_config(const nn_net_config_t *a, const nn_net_config_t *b) {
    return a->blocks == b->blocks && a->channels == b->channels && a->act == b->act &&
           a->in_planes == b->in_planes && a->in_hand == b->in_hand &&
           a->features_version == b->features_version && a->gpool == b->gpool && a->heads == b->heads;
}

static void describe_config(const nn_net_config_t *c, char *buf, size_t len) {
    char sz[32];
    snprintf(buf, len, "%s %s, %d planes + %d hand, features_version %d",
             nn_net_arch_format(c, sz, sizeof(sz)), nn_act_name(c->act), c->in_planes,
             c->in_hand, c->features_version);
}

/* Copies src's weights into dst (server net on main_be), through the host
 * when the backends differ in kind. Caller holds pub_mu (or is nn_server_new). */
static int copy_net(nn_server_t *srv, nn_net_t *dst, nn_net_t *src, char *err, size_t errlen) {
    if (!same_config(nn_net_config(dst), nn_net_config(src))) {
        char a[128], b[128];
        describe_config(nn_net_config(src), a, sizeof(a));
        describe_config(nn_net_config(dst), b, sizeof(b));
        set_err(err, errlen, "inference server: net is %s, the server serves %s", a, b);
        return -1;
    }
    nn_backend_t *sbe = nn_net_backend(src);
    if (strcmp(sbe->name, srv->main_be->name) == 0) return nn_net_copy_weights(dst, src, err, errlen);
    int64_t np, ns, np2, ns2;
    const float *sp = nn_net_params(src, &np, NULL), *ss = nn_net_stats(src, &ns);
    float *dp = nn_net_params(dst, &np2, NULL), *ds = nn_net_stats(dst, &ns2);
    KOMA_ASSERT(np == np2 && ns == ns2);
    float *host = malloc(sizeof(float) * (size_t)(np + ns));
    if (!host) {
        set_err(err, errlen, "inference server: out of memory copying a net");
        return -1;
    }
    sbe->download(sbe, host, sp, sizeof(float) * (size_t)np);
    sbe->download(sbe, host + np, ss, sizeof(float) * (size_t)ns);
    if (sbe->sync) sbe->sync(sbe);
    srv->main_be->upload(srv->main_be, dp, host, sizeof(float) * (size_t)np);
    srv->main_be->upload(srv->main_be, ds, host + np, sizeof(float) * (size_t)ns);
    if (srv->main_be->sync) srv->main_be->sync(srv->main_be);
    free(host);
    nn_net_mark_dirty(dst);
    const char *e = nn_backend_error(srv->main_be);
    if (!e) e = nn_backend_error(sbe);
    if (e) {
        set_err(err, errlen, "inference server: copying a net: %s", e);
        return -1;
    }
    return 0;
}

/* Folds BN of model m on the main backend (a batch-1 forward), so that no
 * worker pays for it after the swap. */
static int warm_model(nn_server_t *srv, srv_model_t *m, char *err, size_t errlen) {
    nn_forward(m->warm, 1, srv->zero_packed, srv->net_cfg.in_hand ? srv->zero_hand : NULL, NULL,
               srv->zero_value, NULL);
    const char *e = nn_backend_error(srv->main_be);
    if (e) {
        set_err(err, errlen, "inference server: preparing a net: %s", e);
        return -1;
    }
    return 0;
}

static int resolve_backend(nn_server_t *srv, char *err, size_t errlen) {
    nn_backend_kind_t kind;
    char e[128];
    if (nn_backend_resolve(srv->cfg.backend ? srv->cfg.backend : "cpu", &kind, e, sizeof e) != 0) {
        set_err(err, errlen, "inference server: backend %s", e);
        return -1;
    }
    srv->use_cuda = kind == NN_BACKEND_KIND_CUDA;
    snprintf(srv->backend_name, sizeof(srv->backend_name), "%s", nn_backend_kind_name(kind));
    return 0;
}

/* Host staging of a device worker: page-locked when the backend offers it. */
static void *stage_alloc(srv_worker_t *w, size_t bytes) {
    return w->be->host_alloc ? w->be->host_alloc(w->be, bytes) : malloc(bytes);
}
static void stage_free(srv_worker_t *w, void *p) {
    if (!p) return;
    if (w->be->host_free) w->be->host_free(w->be, p);
    else free(p);
}

static int worker_init(nn_server_t *srv, srv_worker_t *w, int32_t id, char *err, size_t errlen) {
    int32_t mb = srv->cfg.max_batch;
    w->srv = srv;
    w->id = id;
    char e[256] = "";
    w->be = srv_backend_new(srv, srv->cpu_threads_each, e, sizeof(e));
    if (!w->be) {
        set_err(err, errlen, "inference server worker %d: %s", id, e);
        return -1;
    }
    /* KOMA_SERVER_STAGED=1 (tests): a CPU worker takes the device route, its
     * staging copies and gather included, so the CPU tests cover it. */
    const char *staged = getenv("KOMA_SERVER_STAGED");
    w->host_visible = strcmp(w->be->name, "cpu") == 0 && !(staged && strcmp(staged, "1") == 0);
    for (int i = 0; i < 2; i++) {
        w->ctx[i] = nn_ctx_new(srv->models[i].net, w->be, mb, e, sizeof(e));
        if (!w->ctx[i]) {
            set_err(err, errlen, "inference server worker %d: %s", id, e);
            return -1;
        }
    }
    w->segs = calloc((size_t)mb, sizeof(srv_seg_t));
    if (!w->host_visible) {
        w->st_packed = stage_alloc(w, (size_t)(mb * srv->packed_bytes));
        w->st_hand = stage_alloc(w, sizeof(float) * (size_t)mb * (size_t)(srv->net_cfg.in_hand + 1));
        w->st_value = stage_alloc(w, sizeof(float) * (size_t)mb * NN_VALUE_NB);
        w->st_policy = stage_alloc(w, sizeof(float) * (size_t)mb * NN_POLICY_NB);
        w->st_legal = stage_alloc(w, sizeof(float) * (size_t)mb * NN_LEGAL_NB);
        if (srv->net_cfg.heads & NN_HEAD_MOVES_LEFT) w->st_ml = stage_alloc(w, sizeof(float) * (size_t)mb);
        if (w->be->gather) {
            w->gather_cap = mb * SRV_GATHER_PER_ROW;
            w->st_idx = stage_alloc(w, sizeof(int32_t) * (size_t)w->gather_cap);
            w->st_gath = stage_alloc(w, sizeof(float) * (size_t)w->gather_cap);
            w->d_idx = w->be->buf_alloc(w->be, sizeof(int32_t) * (size_t)w->gather_cap);
            w->d_gath = w->be->buf_alloc(w->be, sizeof(float) * (size_t)w->gather_cap);
            if (!w->st_idx || !w->st_gath || !w->d_idx || !w->d_gath) w->gather_cap = -1;
        }
    }
    if (!w->segs || w->gather_cap < 0 ||
        (!w->host_visible && (!w->st_packed || !w->st_hand || !w->st_value || !w->st_policy || !w->st_legal ||
                              (!w->st_ml && (srv->net_cfg.heads & NN_HEAD_MOVES_LEFT))))) {
        set_err(err, errlen, "inference server worker %d: out of memory", id);
        return -1;
    }
    return 0;
}

static void worker_release(srv_worker_t *w) {
    for (int i = 0; i < 2; i++) nn_ctx_free(w->ctx[i]);
    if (w->be) { /* staging first: pinned staging belongs to the backend */
        stage_free(w, w->st_packed);
        stage_free(w, w->st_hand);
        stage_free(w, w->st_value);
        stage_free(w, w->st_policy);
        stage_free(w, w->st_legal);
        stage_free(w, w->st_ml);
        stage_free(w, w->st_idx);
        stage_free(w, w->st_gath);
        w->be->buf_free(w->be, w->d_idx);
        w->be->buf_free(w->be, w->d_gath);
    }
    nn_backend_free(w->be);
    free(w->segs);
}

nn_server_t *nn_server_new(const nn_server_config_t *cfg_in, const char *weights_path, nn_net_t *net,
                           char *err, size_t errlen) {
    nn_server_config_t cfg = cfg_in ? *cfg_in : nn_server_config_default();
    if ((weights_path == NULL) == (net == NULL)) {
        set_err(err, errlen, "inference server: give exactly one of a weights file and a net");
        return NULL;
    }
    if (cfg.max_batch < 1 || cfg.max_batch > 65536 || cfg.gather_us < -1 || cfg.streams < 0 ||
        cfg.streams > 64 || cfg.queue_positions < 0 || cfg.max_tickets < 0 || cfg.max_tickets > (1 << 20)) {
        set_err(err, errlen, "inference server: settings out of range (max_batch %d, gather_us %d, streams %d, "
                "queue_positions %d, max_tickets %d)", cfg.max_batch, cfg.gather_us, cfg.streams,
                cfg.queue_positions, cfg.max_tickets);
        return NULL;
    }
    nn_server_t *srv = calloc(1, sizeof(*srv));
    if (!srv) {
        set_err(err, errlen, "inference server: out of host memory");
        return NULL;
    }
    srv->cfg = cfg;
    compat_mutex_init(&srv->mu);
    compat_mutex_init(&srv->pub_mu);
    compat_mutex_init(&srv->stop_mu);
    compat_mutex_init(&srv->stats_mu);
    compat_cond_init(&srv->cv_work);
    compat_cond_init(&srv->cv_gather);
    compat_cond_init(&srv->cv_space);
    compat_cond_init(&srv->cv_refs);
    compat_cond_init(&srv->cv_users);
    srv->q_head = srv->q_tail = srv->free_head = -1;
    srv->stopped = 1; /* nothing to stop until the workers run */
    if (resolve_backend(srv, err, errlen) != 0) goto fail;
    if (srv->cfg.streams == 0) srv->cfg.streams = srv->use_cuda ? 2 : 1;
    if (srv->cfg.queue_positions == 0) srv->cfg.queue_positions = 4 * srv->cfg.max_batch * srv->cfg.streams;
    if (srv->cfg.max_tickets == 0) srv->cfg.max_tickets = 1024;
    if (srv->cfg.generation <= 0) srv->cfg.generation = 1;
    /* -1: a core gains little from a batch fuller than what one self-play
     * half submits (32 rows), and a CPU worker waiting for one leaves its core
     * idle (bench_selfplay on 2 cores: 1.67 -> 1.87-1.89 cores,
     * docs/BENCHMARKS.md); a GPU batch is worth a millisecond. */
    if (srv->cfg.gather_us < 0) srv->cfg.gather_us = srv->use_cuda ? 1000 : 0;
    srv->gather_ns = (int64_t)srv->cfg.gather_us * 1000;
    int32_t total = srv->cfg.cpu_threads > 0 ? srv->cfg.cpu_threads : compat_cpu_count();
    srv->cpu_threads_each = total / srv->cfg.streams > 0 ? total / srv->cfg.streams : 1;

    char e[512] = "";
    srv->main_be = srv_backend_new(srv, srv->cpu_threads_each, e, sizeof(e));
    if (!srv->main_be) {
        set_err(err, errlen, "%s", e); /* names the backend or the net */
        goto fail;
    }
    /* models[0] = the initial net; models[1] = standby of the same configuration */
    if (weights_path) {
        srv->models[0].net = nn_weights_load(srv->main_be, weights_path, cfg.expect_features_version, err, errlen);
        if (!srv->models[0].net) goto fail;
    } else {
        srv->models[0].net = nn_net_new(srv->main_be, nn_net_config(net), 0, e, sizeof(e));
        if (!srv->models[0].net) {
            set_err(err, errlen, "%s", e); /* names the backend or the net */
            goto fail;
        }
        if (copy_net(srv, srv->models[0].net, net, err, errlen) != 0) goto fail;
    }
    srv->net_cfg = *nn_net_config(srv->models[0].net);
    srv->packed_bytes = nn_packed_bytes(srv->net_cfg.in_planes);
    srv->models[1].net = nn_net_new(srv->main_be, &srv->net_cfg, 0, e, sizeof(e));
    if (!srv->models[1].net) {
        set_err(err, errlen, "%s", e); /* names the backend or the net */
        goto fail;
    }
    srv->zero_packed = calloc(1, (size_t)srv->packed_bytes);
    srv->zero_hand = calloc((size_t)srv->net_cfg.in_hand + 1, sizeof(float));
    if (!srv->zero_packed || !srv->zero_hand) {
        set_err(err, errlen, "inference server: out of host memory");
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        srv->models[i].warm = nn_ctx_new(srv->models[i].net, srv->main_be, 1, e, sizeof(e));
        if (!srv->models[i].warm) {
            set_err(err, errlen, "%s", e); /* names the backend or the net */
            goto fail;
        }
    }
    if (warm_model(srv, &srv->models[0], err, errlen) != 0) goto fail;
    srv->models[0].gen = srv->cfg.generation;
    srv->cur = 0;
    atomic_store(&srv->generation, srv->cfg.generation);

    srv->n_slots = srv->cfg.max_tickets;
    srv->slots = calloc((size_t)srv->n_slots, sizeof(srv_slot_t));
    srv->n_workers = srv->cfg.streams;
    srv->workers = calloc((size_t)srv->n_workers, sizeof(srv_worker_t));
    if (!srv->slots || !srv->workers) {
        set_err(err, errlen, "inference server: out of host memory");
        goto fail;
    }
    for (int32_t i = srv->n_slots - 1; i >= 0; i--) {
        srv_slot_t *s = &srv->slots[i];
        compat_cond_init(&s->cv);
        s->seq = 1;
        s->model = -1;
        s->next = srv->free_head;
        srv->free_head = i;
    }
    for (int32_t i = 0; i < srv->n_workers; i++)
        if (worker_init(srv, &srv->workers[i], i, err, errlen) != 0) goto fail;
    srv->stopped = 0;
    srv->t_start = srv->last_t = compat_now_ns();
    for (int32_t i = 0; i < srv->n_workers; i++) {
        if (compat_thread_create(&srv->workers[i].thread, worker_main, &srv->workers[i]) != 0) {
            set_err(err, errlen, "inference server: could not start its worker thread %d", i);
            goto fail;
        }
        srv->workers[i].started = 1;
        compat_mutex_lock(&srv->mu);
        srv->live_workers++;
        compat_mutex_unlock(&srv->mu);
    }
    return srv;
fail:
    nn_server_free(srv);
    return NULL;
}

void nn_server_stop(nn_server_t *srv, int drain) {
    if (!srv) return;
    compat_mutex_lock(&srv->stop_mu);
    compat_mutex_lock(&srv->mu);
    int already = srv->stopped;
    if (!already) {
        srv->stopping = 1;
        srv->drain = drain != 0;
        compat_cond_broadcast(&srv->cv_work);
        compat_cond_broadcast(&srv->cv_gather);
        compat_cond_broadcast(&srv->cv_space);
        compat_cond_broadcast(&srv->cv_refs);
    }
    compat_mutex_unlock(&srv->mu);
    if (!already) {
        for (int32_t i = 0; i < srv->n_workers; i++)
            if (srv->workers[i].started) {
                compat_thread_join(srv->workers[i].thread);
                srv->workers[i].started = 0;
            }
        compat_mutex_lock(&srv->mu);
        srv->stopping = 1;
        srv->stopped = 1;
        fail_all(srv, NN_SERVER_ESTOPPED, "inference server stopped before this request ran");
        compat_cond_broadcast(&srv->cv_users);
        compat_mutex_unlock(&srv->mu);
    }
    compat_mutex_unlock(&srv->stop_mu);
}

void nn_server_free(nn_server_t *srv) {
    if (!srv) return;
    nn_server_stop(srv, 0);
    compat_mutex_lock(&srv->mu);
    srv->stopping = 1;
    while (srv->users > 0) compat_cond_wait(&srv->cv_users, &srv->mu);
    compat_mutex_unlock(&srv->mu);
    if (srv->workers)
        for (int32_t i = 0; i < srv->n_workers; i++) worker_release(&srv->workers[i]);
    free(srv->workers);
    if (srv->slots)
        for (int32_t i = 0; i < srv->n_slots; i++) compat_cond_destroy(&srv->slots[i].cv);
    free(srv->slots);
    for (int i = 0; i < 2; i++) {
        nn_ctx_free(srv->models[i].warm);
        nn_net_free(srv->models[i].net);
    }
    free(srv->zero_packed);
    free(srv->zero_hand);
    nn_backend_free(srv->main_be);
    compat_cond_destroy(&srv->cv_work);
    compat_cond_destroy(&srv->cv_gather);
    compat_cond_destroy(&srv->cv_space);
    compat_cond_destroy(&srv->cv_refs);
    compat_cond_destroy(&srv->cv_users);
    compat_mutex_destroy(&srv->mu);
    compat_mutex_destroy(&srv->pub_mu);
    compat_mutex_destroy(&srv->stop_mu);
    compat_mutex_destroy(&srv->stats_mu);
    free(srv);
}

const nn_net_config_t *nn_server_net_config(const nn_server_t *srv) { return &srv->net_cfg; }
const char *nn_server_backend_name(const nn_server_t *srv) { return srv->backend_name; }
int32_t nn_server_max_batch(const nn_server_t *srv) { return srv->cfg.max_batch; }

/* ---- clients ------------------------------------------------------------------------ */
static void users_leave(nn_server_t *srv) {
    if (--srv->users == 0 && srv->stopping) compat_cond_broadcast(&srv->cv_users);
}

static int check_request(const nn_server_t *srv, const nn_server_request_t *r, char *err, size_t errlen) {
    if (!r) {
        set_err(err, errlen, "nn_server_submit: no request");
        return -1;
    }
    if (r->n < 1 || r->n > srv->cfg.queue_positions) {
        set_err(err, errlen, "nn_server_submit: %d positions, expected 1..%d (queue_positions)", r->n,
                srv->cfg.queue_positions);
        return -1;
    }
    if (!r->packed || (srv->net_cfg.in_hand > 0 && !r->hand)) {
        set_err(err, errlen, "nn_server_submit: missing %s", r->packed ? "hand" : "packed planes");
        return -1;
    }
    if (r->label_offsets && r->policy) {
        const uint32_t *o = r->label_offsets;
        if (o[r->n] > o[0] && !r->labels) {
            set_err(err, errlen, "nn_server_submit: label offsets without labels");
            return -1;
        }
        for (int32_t i = 0; i < r->n; i++) {
            if (o[i + 1] < o[i]) {
                set_err(err, errlen, "nn_server_submit: label_offsets decrease at position %d (%u -> %u)", i,
                        o[i], o[i + 1]);
                return -1;
            }
            for (uint32_t k = o[i]; k < o[i + 1]; k++)
                if (r->labels[k] >= NN_POLICY_NB) {
                    set_err(err, errlen, "nn_server_submit: position %d: label %u >= %d", i, r->labels[k],
                            NN_POLICY_NB);
                    return -1;
                }
        }
    }
    return 0;
}

int nn_server_submit(nn_server_t *srv, const nn_server_request_t *req, nn_server_ticket_t *ticket,
                     char *err, size_t errlen) {
    if (ticket) *ticket = 0;
    if (!srv || !ticket) {
        set_err(err, errlen, "nn_server_submit: no server or no ticket");
        return NN_SERVER_EINVAL;
    }
    if (check_request(srv, req, err, errlen) != 0) return NN_SERVER_EINVAL;
    compat_mutex_lock(&srv->mu);
    srv->users++;
    while (!srv->stopping && !srv->dead &&
           (srv->free_head < 0 || srv->queued + req->n > srv->cfg.queue_positions))
        compat_cond_wait(&srv->cv_space, &srv->mu);
    if (srv->stopping || srv->dead) {
        int st = srv->dead && !srv->stopping ? NN_SERVER_EDEVICE : NN_SERVER_ESTOPPED;
        set_err(err, errlen, "nn_server_submit: %s", st == NN_SERVER_EDEVICE ? srv->dead_msg
                                                                           : "the inference server is stopping");
        users_leave(srv);
        compat_mutex_unlock(&srv->mu);
        return st;
    }
    int32_t idx = srv->free_head;
    srv_slot_t *s = &srv->slots[idx];
    srv->free_head = s->next;
    s->req = *req;
    s->state = SLOT_QUEUED;
    s->taken = s->done = 0;
    s->status = NN_SERVER_OK;
    s->msg[0] = 0;
    s->model = -1;
    s->gen = 0;
    s->waiting = 0;
    s->next = -1;
    s->t_submit = compat_now_ns();
    if (srv->q_tail >= 0) srv->slots[srv->q_tail].next = idx;
    else srv->q_head = idx;
    srv->q_tail = idx;
    srv->queued += req->n;
    compat_cond_signal(&srv->cv_work);
    *ticket = ((uint64_t)s->seq << 32) | (uint32_t)idx;
    atomic_fetch_add(&srv->n_requests, req->n);
    atomic_fetch_add(&srv->n_submissions, 1);
    users_leave(srv);
    compat_mutex_unlock(&srv->mu);
    return NN_SERVER_OK;
}

static int complete(nn_server_t *srv, nn_server_ticket_t ticket, nn_server_result_t *res, int block) {
    uint32_t idx = (uint32_t)(ticket & 0xffffffffu), seq = (uint32_t)(ticket >> 32);
    if (res) {
        res->status = NN_SERVER_EINVAL;
        res->generation = 0;
        snprintf(res->message, sizeof(res->message), "invalid ticket");
    }
    if (!srv) return NN_SERVER_EINVAL;
    compat_mutex_lock(&srv->mu);
    srv_slot_t *s = idx < (uint32_t)srv->n_slots ? &srv->slots[idx] : NULL;
    if (!s || s->seq != seq || s->state == SLOT_FREE || s->waiting) {
        compat_mutex_unlock(&srv->mu);
        return NN_SERVER_EINVAL;
    }
    srv->users++;
    if (block) {
        while (s->state != SLOT_DONE) {
            s->waiting = 1;
            compat_cond_wait(&s->cv, &srv->mu);
        }
        s->waiting = 0;
    }
    int st = NN_SERVER_PENDING;
    if (s->state == SLOT_DONE) {
        st = s->status;
        if (res) {
            res->status = st;
            res->generation = st == NN_SERVER_OK ? s->gen : 0;
            snprintf(res->message, sizeof(res->message), "%s", s->msg);
        }
        s->state = SLOT_FREE;
        s->model = -1;
        if (++s->seq == 0) s->seq = 1;
        s->next = srv->free_head;
        srv->free_head = (int32_t)idx;
        compat_cond_broadcast(&srv->cv_space);
    } else if (res) {
        res->status = st;
        res->message[0] = 0;
    }
    users_leave(srv);
    compat_mutex_unlock(&srv->mu);
    return st;
}

int nn_server_wait(nn_server_t *srv, nn_server_ticket_t ticket, nn_server_result_t *res) {
    return complete(srv, ticket, res, 1);
}

int nn_server_poll(nn_server_t *srv, nn_server_ticket_t ticket, nn_server_result_t *res) {
    return complete(srv, ticket, res, 0);
}

int nn_server_eval(nn_server_t *srv, const nn_server_request_t *req, nn_server_result_t *res) {
    nn_server_ticket_t t;
    char err[192] = "";
    int st = nn_server_submit(srv, req, &t, err, sizeof(err));
    if (st != NN_SERVER_OK) {
        if (res) {
            res->status = st;
            res->generation = 0;
            snprintf(res->message, sizeof(res->message), "%s", err);
        }
        return st;
    }
    return nn_server_wait(srv, t, res);
}

/* ---- publishing ------------------------------------------------------------------ */
/* Takes pub_mu, waits until the standby is free; returns its index or -1. */
static int32_t publish_begin(nn_server_t *srv, int64_t *generation, char *err, size_t errlen) {
    compat_mutex_lock(&srv->mu);
    srv->users++; /* counted before queueing on pub_mu: nn_server_free waits for us */
    compat_mutex_unlock(&srv->mu);
    compat_mutex_lock(&srv->pub_mu);
    compat_mutex_lock(&srv->mu);
    int32_t sb = 1 - srv->cur;
    while (srv->models[sb].refs > 0 && !srv->stopping) compat_cond_wait(&srv->cv_refs, &srv->mu);
    int64_t curgen = srv->models[srv->cur].gen;
    int32_t rc = sb;
    if (srv->stopping) {
        set_err(err, errlen, "inference server: publish refused, the server is stopping");
        rc = -1;
    } else if (*generation == 0) {
        *generation = curgen + 1;
    } else if (*generation <= curgen) {
        set_err(err, errlen, "inference server: publish generation %lld is not above the current %lld",
                (long long)*generation, (long long)curgen);
        rc = -1;
    }
    compat_mutex_unlock(&srv->mu);
    return rc;
}

/* Swaps the standby in when ok; releases pub_mu. Returns the generation or -1. */
static int64_t publish_end(nn_server_t *srv, int32_t sb, int ok, int64_t generation, char *err, size_t errlen) {
    if (ok && warm_model(srv, &srv->models[sb], err, errlen) != 0) ok = 0;
    compat_mutex_lock(&srv->mu);
    if (ok && srv->stopping) {
        set_err(err, errlen, "inference server: publish refused, the server is stopping");
        ok = 0;
    }
    if (ok) {
        srv->models[sb].gen = generation;
        srv->cur = sb;
        atomic_store(&srv->generation, generation);
        atomic_fetch_add(&srv->n_publishes, 1);
    }
    users_leave(srv);
    compat_mutex_unlock(&srv->mu);
    compat_mutex_unlock(&srv->pub_mu);
    return ok ? generation : -1;
}

int64_t nn_server_publish_file(nn_server_t *srv, const char *weights_path, int64_t generation, char *err,
                               size_t errlen) {
    if (!srv || !weights_path) {
        set_err(err, errlen, "nn_server_publish_file: no server or no path");
        return -1;
    }
    int32_t sb = publish_begin(srv, &generation, err, errlen);
    int ok = sb >= 0 && nn_weights_read(srv->models[sb].net, NULL, weights_path, err, errlen) == 0;
    return publish_end(srv, sb < 0 ? 0 : sb, ok, generation, err, errlen);
}

int64_t nn_server_publish_net(nn_server_t *srv, nn_net_t *src, int64_t generation, char *err, size_t errlen) {
    if (!srv || !src) {
        set_err(err, errlen, "nn_server_publish_net: no server or no net");
        return -1;
    }
    char e[512];
    if (nn_net_check_finite(src, e, sizeof e) != 0) { /* never serve a diverged or failed net */
        set_err(err, errlen, "inference server: publish refused: %s", e);
        return -1;
    }
    int32_t sb = publish_begin(srv, &generation, err, errlen);
    int ok = sb >= 0 && copy_net(srv, srv->models[sb].net, src, err, errlen) == 0;
    return publish_end(srv, sb < 0 ? 0 : sb, ok, generation, err, errlen);
}

/* ---- counters ------------------------------------------------------------------------ */
int64_t nn_server_generation(nn_server_t *srv) { return atomic_load(&srv->generation); }

void nn_server_stats(nn_server_t *srv, nn_server_stats_t *st) {
    memset(st, 0, sizeof(*st));
    if (!srv) return;
    compat_mutex_lock(&srv->mu);
    st->queued = srv->queued;
    compat_mutex_unlock(&srv->mu);
    st->requests = atomic_load(&srv->n_requests);
    st->submissions = atomic_load(&srv->n_submissions);
    st->evaluated = atomic_load(&srv->n_evaluated);
    st->failed = atomic_load(&srv->n_failed);
    st->batches = atomic_load(&srv->n_batches);
    st->avg_batch = st->batches ? (double)st->evaluated / (double)st->batches : 0.0;
    st->generation = atomic_load(&srv->generation);
    st->publishes = atomic_load(&srv->n_publishes);
    st->workers = srv->n_workers;
    st->gather_us = srv->cfg.gather_us;
    st->backend = srv->backend_name;
    st->precision = srv->use_cuda ? NULL : atomic_load(&srv->precision);
    int64_t busy = atomic_load(&srv->busy_ns), now = compat_now_ns();
    compat_mutex_lock(&srv->stats_mu);
    double dt = (double)(now - srv->last_t) * 1e-9, wall = (double)(now - srv->t_start) * 1e-9;
    if (dt > 0) {
        st->evals_per_s = (double)(st->evaluated - srv->last_eval) / dt;
        st->busy_frac = (double)(busy - srv->last_busy) * 1e-9 / (dt * srv->n_workers);
    }
    if (wall > 0) st->busy_frac_total = (double)busy * 1e-9 / (wall * srv->n_workers);
    srv->last_t = now;
    srv->last_eval = st->evaluated;
    srv->last_busy = busy;
    compat_mutex_unlock(&srv->stats_mu);
}
