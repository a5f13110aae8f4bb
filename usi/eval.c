/* eval.c - Net resolution, the inference server, the uniform evaluator and
 * batch plumbing (see eval.h). */
#include "usi/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/exe.h"
#include "data/db.h"
#include "data/run.h"
#include "engine/encode.h"
#include "nn/weights.h"

struct usi_eval {
    nn_server_t *srv; /* NULL: uniform */
    char describe[USI_PATH_MAX + 128];
};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

typedef struct {
    char last[USI_PATH_MAX];
} eval_last_file_t;

static int keep_last_weights(const char *name, int is_dir, void *user) {
    eval_last_file_t *lf = user;
    if (!is_dir && ends_with(name, ".safetensors")) snprintf(lf->last, sizeof lf->last, "%s", name);
    return 0;
}

/* The newest model of the run in dir (database at dbpath) whose file is the
 * one registered; see usi_net_resolve. */
static int resolve_run(const char *dir, const char *dbpath, char *path, size_t pathlen, char *note, size_t notelen,
                       char *err, size_t errlen) {
    db_t *db = NULL;
    char e[DB_ERR_MAX + 512], first[DB_ERR_MAX + 512] = "";
    if (db_open(dbpath, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, e, sizeof e) != DB_OK) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    db_model_t newest, m;
    db_status_t st = db_model_latest(db, &newest);
    if (st == DB_NOTFOUND) set_err(err, errlen, "%s: the run has no model yet", dir);
    else if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    int rc = -1;
    for (int32_t c = st == DB_OK ? newest.cycle : -1; c >= 0 && rc != 0; c--) {
        st = db_model_by_cycle(db, c, &m);
        if (st == DB_NOTFOUND) continue;
        if (st != DB_OK) {
            set_err(err, errlen, "%s", db_errmsg(db));
            break;
        }
        if (run_path(dir, m.path, path, pathlen) != 0) {
            snprintf(e, sizeof e, "%s/%s: path too long", dir, m.path);
        } else if (!compat_file_exists(path)) {
            snprintf(e, sizeof e, "%s: the model of cycle %d is missing", path, m.cycle);
        } else if (run_verify_file(path, m.xxh3, e, sizeof e) == 0 &&
                   nn_weights_check(path, ENC_FEATURES_VERSION, e, sizeof e) == 0) { /* and holds a net */
            rc = 0;
            break;
        }
        if (!first[0]) snprintf(first, sizeof first, "%s", e);
    }
    db_close(db);
    if (rc != 0) {
        path[0] = 0;
        if (first[0]) set_err(err, errlen, "%s; no earlier model verifies either", first);
        return -1;
    }
    if (note && notelen) {
        note[0] = 0;
        if (m.cycle != newest.cycle)
            snprintf(note, notelen, "%s; using the newest model that verifies, cycle %d (%s)", first, m.cycle, m.path);
    }
    return 0;
}

int usi_net_resolve(const char *net, char *path, size_t pathlen, char *note, size_t notelen, char *err,
                    size_t errlen) {
    path[0] = 0;
    if (note && notelen) note[0] = 0;
    if (!net || !*net) return 0;
    if (!compat_is_dir(net)) {
        if (!compat_file_exists(net)) {
            set_err(err, errlen, "%s: no such file or directory", net);
            return -1;
        }
        if ((size_t)snprintf(path, pathlen, "%s", net) >= pathlen) {
            set_err(err, errlen, "%s: path too long", net);
            return -1;
        }
        return 0;
    }
    char buf[USI_PATH_MAX + 64];
    run_path(net, RUN_DB, buf, sizeof buf);
    if (compat_file_exists(buf)) return resolve_run(net, buf, path, pathlen, note, notelen, err, errlen);
    const char *dirs[2] = {"models", ""};
    for (int i = 0; i < 2; i++) {
        eval_last_file_t lf = {""};
        snprintf(buf, sizeof buf, "%s%s%s", net, *dirs[i] ? "/" : "", dirs[i]);
        char e[256];
        if (!compat_is_dir(buf) || compat_list_dir(buf, keep_last_weights, &lf, e, sizeof e) != 0 || !lf.last[0])
            continue;
        if ((size_t)snprintf(path, pathlen, "%s/%s", buf, lf.last) >= pathlen) {
            set_err(err, errlen, "%s: path too long", net);
            path[0] = 0;
            return -1;
        }
        return 0;
    }
    set_err(err, errlen, "%s: a directory with no koma.db and no .safetensors file", net);
    return -1;
}

bool usi_net_is_none(const char *net) {
    return net && (net[0] == 'n' || net[0] == 'N') && (net[1] == 'o' || net[1] == 'O') &&
           (net[2] == 'n' || net[2] == 'N') && (net[3] == 'e' || net[3] == 'E') && net[4] == 0;
}

int usi_net_shipped(char *path, size_t pathlen, char *looked, size_t lookedlen) {
    char cand[2][USI_PATH_MAX];
    int n = 0;
    char dir[USI_PATH_MAX];
    if (compat_exe_dir(dir, sizeof dir) == 0) {
        char *slash = strrchr(dir, '/'); /* <prefix>/bin -> <prefix> */
        if (slash && slash != dir) *slash = 0;
        if ((size_t)snprintf(cand[n], sizeof cand[n], "%s/share/koma/nets/%s", dir, USI_SHIPPED_NET) <
            sizeof cand[n])
            n++;
    }
#ifdef KOMA_SOURCE_NETS_DIR
    if ((size_t)snprintf(cand[n], sizeof cand[n], "%s/%s", KOMA_SOURCE_NETS_DIR, USI_SHIPPED_NET) < sizeof cand[n])
        n++;
#endif
    if (path && pathlen) path[0] = 0;
    if (looked && lookedlen) {
        looked[0] = 0;
        for (int i = 0; i < n; i++) {
            size_t u = strlen(looked);
            snprintf(looked + u, lookedlen - u, "%s%s", i ? " and " : "", cand[i]);
        }
        if (n == 0) snprintf(looked, lookedlen, "(no place: the executable's path is unknown)");
    }
    for (int i = 0; i < n; i++)
        if (compat_file_exists(cand[i]) && !compat_is_dir(cand[i])) {
            if (path && pathlen) snprintf(path, pathlen, "%s", cand[i]);
            return 0;
        }
    return -1;
}

typedef struct {
    compat_mutex_t mu;
    compat_cond_t cv;
    int released;
} probe_t;

static void *probe_main(void *arg) {
    probe_t *p = arg;
    compat_mutex_lock(&p->mu);
    while (!p->released) compat_cond_wait(&p->cv, &p->mu);
    compat_mutex_unlock(&p->mu);
    return NULL;
}

int32_t usi_threads_startable(int32_t want) {
    compat_thread_t *t = want > 0 ? malloc((size_t)want * sizeof *t) : NULL;
    if (!t) return want > 0 ? 1 : 0;
    probe_t p;
    compat_mutex_init(&p.mu);
    compat_cond_init(&p.cv);
    p.released = 0;
    int32_t n = 0;
    while (n < want && compat_thread_create(&t[n], probe_main, &p) == 0) n++;
    compat_mutex_lock(&p.mu);
    p.released = 1;
    compat_cond_broadcast(&p.cv);
    compat_mutex_unlock(&p.mu);
    for (int32_t i = 0; i < n; i++) compat_thread_join(t[i]);
    compat_cond_destroy(&p.cv);
    compat_mutex_destroy(&p.mu);
    free(t);
    return n;
}

/* One forward of every batch size a search can send (1..max_batch; above
 * USI_WARM_ALL only powers of two), within USI_WARM_MS: a backend builds its
 * kernels for a batch size the first time it sees it (oneDNN: 20-40 ms on a
 * loaded 2-core machine, where a move may have 50), so that happens here and
 * not on a move's clock. Returns how many sizes were run. */
enum { USI_WARM_ALL = 64, USI_WARM_MS = 1000 };
static int32_t warm_sizes(nn_server_t *srv, int32_t max_batch) {
    int32_t cap = max_batch, done = 0;
    uint8_t *packed = calloc((size_t)cap, ENC_PACKED_BYTES);
    float *hand = calloc((size_t)cap, ENC_HAND * sizeof(float)), *value = calloc((size_t)cap, 3 * sizeof(float));
    float *ml = calloc((size_t)cap, sizeof(float)), policy[1];
    uint32_t *offsets = calloc((size_t)cap + 1, sizeof(uint32_t)); /* no labels: no policy logits */
    uint16_t labels[1] = {0};
    int64_t until = compat_now_ms() + USI_WARM_MS;
    for (int32_t n = 1; packed && hand && value && ml && offsets && n <= cap && compat_now_ms() < until;
         n = n < USI_WARM_ALL ? n + 1 : (n * 2 > cap && n < cap ? cap : n * 2)) {
        nn_server_request_t req = {0};
        req.n = n, req.packed = packed, req.hand = hand, req.label_offsets = offsets, req.labels = labels;
        req.value = value, req.policy = policy, req.moves_left = ml;
        nn_server_ticket_t t;
        nn_server_result_t res;
        char e[256];
        if (nn_server_submit(srv, &req, &t, e, sizeof e) != NN_SERVER_OK ||
            nn_server_wait(srv, t, &res) != NN_SERVER_OK)
            break; /* a failing net is reported by the search */
        done++;
    }
    free(packed), free(hand), free(value), free(ml), free(offsets);
    return done;
}

usi_eval_t *usi_eval_new(const char *weights_path, const char *backend, int32_t threads, int32_t max_batch, char *err,
                      size_t errlen) {
    usi_eval_t *ev = calloc(1, sizeof *ev);
    if (!ev) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    if (!weights_path || !*weights_path) {
        snprintf(ev->describe, sizeof ev->describe, "uniform policy, zero value (no net)");
        return ev;
    }
    nn_server_config_t cfg = nn_server_config_default();
    cfg.backend = backend && *backend ? backend : "auto";
    cfg.cpu_threads = threads;
    cfg.max_batch = max_batch > 0 ? max_batch : 32;
    cfg.gather_us = 100;
    cfg.expect_features_version = ENC_FEATURES_VERSION;
    cfg.cpu_precision = NN_CPU_PREC_AUTO; /* bf16 where the CPU has it; KOMA_CPU_PRECISION=fp32 forces fp32 */
    char e[512] = "";
    ev->srv = nn_server_new(&cfg, weights_path, NULL, e, sizeof e);
    if (!ev->srv) {
        set_err(err, errlen, "%s", e);
        free(ev);
        return NULL;
    }
    const nn_net_config_t *nc = nn_server_net_config(ev->srv);
    if (nc->in_planes != ENC_PLANES || nc->in_hand != ENC_HAND) {
        set_err(err, errlen, "%s: the net takes %d planes and %d hand values, koma encodes %d and %d", weights_path,
                nc->in_planes, nc->in_hand, ENC_PLANES, ENC_HAND);
        usi_eval_free(ev);
        return NULL;
    }
    warm_sizes(ev->srv, cfg.max_batch);
    char size[32], prec[16] = "";
    nn_server_stats_t st;
    nn_server_stats(ev->srv, &st);
    if (st.precision) snprintf(prec, sizeof prec, " (%s)", st.precision);
    snprintf(ev->describe, sizeof ev->describe, "%s %s on %s%s: %s", nn_net_arch_format(nc, size, sizeof size),
             nn_act_name(nc->act), nn_server_backend_name(ev->srv), prec, weights_path);
    return ev;
}

void usi_eval_free(usi_eval_t *ev) {
    if (!ev) return;
    nn_server_free(ev->srv);
    free(ev);
}

bool usi_eval_uniform(const usi_eval_t *ev) { return !ev || !ev->srv; }
const char *usi_eval_describe(const usi_eval_t *ev) { return ev ? ev->describe : "none"; }

usi_batch_t *usi_batch_new(int32_t cap) {
    usi_batch_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->leaves = mcts_batch_new(cap);
    if (!b->leaves) {
        free(b);
        return NULL;
    }
    return b;
}

void usi_batch_free(usi_batch_t *b) {
    if (!b) return;
    mcts_batch_free(b->leaves);
    free(b);
}

int usi_eval_submit(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen) {
    mcts_batch_t *l = b->leaves;
    KOMA_ASSERT(!b->in_flight);
    if (usi_eval_uniform(ev) || l->n == 0) {
        mcts_batch_uniform(l);
        return 0;
    }
    nn_server_request_t req = {0};
    req.n = l->n;
    req.packed = l->packed;
    req.hand = l->hand;
    req.label_offsets = l->offsets;
    req.labels = l->labels;
    req.value = l->value;
    req.policy = l->policy;
    req.moves_left = l->moves_left; /* NAN from a net without the head */
    if (nn_server_submit(ev->srv, &req, &b->ticket, err, errlen) != NN_SERVER_OK) {
        mcts_batch_uniform(l);
        return -1;
    }
    b->in_flight = true;
    return 0;
}

int usi_eval_wait(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen) {
    if (!b->in_flight) return 0;
    b->in_flight = false;
    nn_server_result_t res;
    res.message[0] = 0;
    int st = nn_server_wait(ev->srv, b->ticket, &res);
    if (st != NN_SERVER_OK) {
        set_err(err, errlen, "network: %s: %s", nn_server_status_name(st), res.message);
        mcts_batch_uniform(b->leaves);
        return -1;
    }
    return 0;
}

int usi_eval_poll(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen) {
    if (!b->in_flight) return 1;
    nn_server_result_t res;
    res.message[0] = 0;
    int st = nn_server_poll(ev->srv, b->ticket, &res);
    if (st == NN_SERVER_PENDING) return 0;
    b->in_flight = false;
    if (st != NN_SERVER_OK) {
        set_err(err, errlen, "network: %s: %s", nn_server_status_name(st), res.message);
        mcts_batch_uniform(b->leaves);
        return -1;
    }
    return 1;
}

void usi_batch_deliver(mcts_tree_t *t, usi_batch_t *b) { mcts_batch_deliver(b->leaves, t); }
