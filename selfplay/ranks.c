/* ranks.c - self-play over several ranks; see ranks.h. */
#include "selfplay/ranks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compat/bits.h"
#include "compat/compat.h"
#include "compat/err.h"
#include "mcts/cache.h"
#include "nn/registry.h"
#include "nn/server.h"
#include "selfplay/exit.h"
#include "selfplay/wire.h"
#include "selfplay/worker.h"

#define SEND_TIMEOUT_MS 60000    /* a net or an order waits this long for send slots */
#define START_TIMEOUT_MS 3600000 /* a playing rank waits this long for its first net (rank 0's start-up) */
#define STOP_WAIT_MS 60000       /* a rank that sent ERROR or BYE waits this long for STOP */
#define FLUSH_MS 30000           /* the last sends get this long */
#define GAMES_IN_FLIGHT 8
#define INBOX 16

/* ---- rank 0 ------------------------------------------------------------------------------ */

typedef struct {
    bool hello, bye;
    sp_wire_hello_t h;
    sp_wire_stats_t st;    /* the last stats */
    int64_t prev_searches; /* at the previous describe */
    int64_t games;         /* game messages received */
    int64_t gen_logged;    /* generation last logged */
} peer_t;

struct sp_ranks {
    dist_t *dist;
    dist_mail_t *mail;
    runlog_sink_t log;
    int32_t size;
    int32_t fanout; /* nets: the tree's fan-out (0: to every rank) */
    peer_t *peers;  /* (size); [0] unused */
    bool paused;
    int64_t prev_ns;
    int32_t train_ranks; /* ranks 1..train_ranks-1 train with rank 0 and do not play */
};

int32_t sp_ranks_children(int32_t rank, int32_t size, int32_t fanout, int32_t *out, int32_t max) {
    int32_t n = 0;
    if (fanout <= 0) {
        for (int32_t r = 1; rank == 0 && r < size && n < max; r++) out[n++] = r;
        return n;
    }
    for (int64_t c = (int64_t)rank * fanout + 1; c <= (int64_t)rank * fanout + fanout && c < size && n < max; c++)
        out[n++] = (int32_t)c;
    return n;
}

/* Sends a NET or PAUSE message to rank's children in the tree (*sent := how
 * many): 0, or -1 with err. Rank 0 sending to every other rank shares one
 * copy. Pauses take the nets' path so that a rank never resumes (sync-train)
 * before the net it is to play with has reached it: MPI keeps one sender's
 * messages to one rank in order. */
int sp_ranks_tree_down(dist_mail_t *mail, int32_t rank, int32_t size, int32_t fanout, int32_t tag, const uint8_t *msg,
                       int64_t len, int32_t *sent, char *err, size_t errlen) {
    int32_t kids[SP_NET_FANOUT_MAX];
    bool all = rank == 0 && (fanout <= 0 || fanout >= size - 1); /* the star: fan-out 0, or a small job */
    int32_t n = all ? size - 1 : sp_ranks_children(rank, size, fanout, kids, SP_NET_FANOUT_MAX);
    *sent = n;
    char e[512];
    for (int32_t i = 0; i < (all ? 1 : n); i++) {
        int rc = dist_mail_send(mail, all ? DIST_ALL_OTHERS : kids[i], tag, msg, len, SEND_TIMEOUT_MS, e, sizeof e);
        if (rc != DIST_OK) {
            set_err(err, errlen, "%s", rc == DIST_TIMEOUT ? "earlier messages still in flight after 60 s" : e);
            return -1;
        }
    }
    return 0;
}

sp_ranks_t *sp_ranks_new(dist_t *dist, dist_mail_t *mail, int32_t fanout, runlog_fn log, void *user) {
    sp_ranks_t *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->size = dist_size(dist);
    k->peers = calloc((size_t)k->size, sizeof *k->peers);
    if (!k->peers) {
        free(k);
        return NULL;
    }
    k->dist = dist, k->mail = mail, k->log = runlog_sink(log, user, NULL), k->fanout = fanout;
    k->prev_ns = compat_now_ns();
    for (int32_t r = 0; r < k->size; r++) snprintf(k->peers[r].h.host, sizeof k->peers[r].h.host, "?");
    return k;
}

void sp_ranks_free(sp_ranks_t *k) {
    if (!k) return;
    free(k->peers);
    free(k);
}

int sp_ranks_send_net(sp_ranks_t *k, int64_t cycle, uint64_t seed, const char *path, const char *xxh3_hex, char *err,
                      size_t errlen) {
    if (k->size < 2) return 0;
    size_t n = 0;
    char e[512];
    char *file = compat_read_file(path, &n, e, sizeof e);
    if (!file) {
        set_err(err, errlen, "model cycle %" PRId64 " for the other ranks: %s", cycle, e);
        return -1;
    }
    /* koma.db holds the hash as 16 lowercase hex digits (db.c), as written here */
    uint64_t got = XXH3_64bits(file, n);
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, got);
    if (!xxh3_hex || strcmp(hex, xxh3_hex) != 0) {
        set_err(err, errlen, "%s: XXH3 %s, koma.db registered %s: not sent to the other ranks", path, hex,
                xxh3_hex ? xxh3_hex : "(none)");
        free(file);
        return -1;
    }
    int64_t len = 0;
    uint8_t *msg = sp_wire_net_encode(cycle, seed, got, (const uint8_t *)file, (int64_t)n, &len);
    free(file);
    if (!msg) {
        set_err(err, errlen, "out of memory for model cycle %" PRId64 " (%lld bytes)", cycle, (long long)n);
        return -1;
    }
    int32_t sent = 0;
    int rc = sp_ranks_tree_down(k->mail, 0, k->size, k->fanout, SP_TAG_NET, msg, len, &sent, e, sizeof e);
    free(msg);
    if (rc != 0) {
        set_err(err, errlen, "model cycle %" PRId64 " to the other ranks: %s", cycle, e);
        return -1;
    }
    if (sent == k->size - 1)
        runlog_printf(&k->log, "ranks: model %" PRId64 " (%.2f MB, XXH3 %s) queued for %d rank(s)", cycle,
                      (double)n / 1e6, xxh3_hex, sent);
    else
        runlog_printf(&k->log,
                      "ranks: model %" PRId64 " (%.2f MB, XXH3 %s) queued for %d rank(s), who pass it on (fan-out %d) "
                      "to the other %d",
                      cycle, (double)n / 1e6, xxh3_hex, sent, k->fanout, k->size - 1 - sent);
    return 0;
}

static int send_order(sp_ranks_t *k, int32_t tag, int32_t v, char *err, size_t errlen) {
    uint8_t buf[SP_WIRE_SMALL_MAX];
    int64_t len = sp_wire_int_encode(v, buf);
    char e[512];
    int32_t sent = 0;
    if (tag == SP_TAG_PAUSE) { /* down the nets' tree (tree_down) */
        if (sp_ranks_tree_down(k->mail, 0, k->size, k->fanout, tag, buf, len, &sent, e, sizeof e) == 0) return 0;
        set_err(err, errlen, "pause to the other ranks: %s", e);
        return -1;
    }
    int rc = dist_mail_send(k->mail, DIST_ALL_OTHERS, tag, buf, len, SEND_TIMEOUT_MS, e, sizeof e);
    if (rc == DIST_OK) return 0;
    set_err(err, errlen, "stop to the other ranks: %s",
            rc == DIST_TIMEOUT ? "earlier messages still in flight after 60 s" : e);
    return -1;
}

int sp_ranks_pause(sp_ranks_t *k, bool paused, char *err, size_t errlen) {
    if (k->size < 2 || paused == k->paused) return 0;
    k->paused = paused;
    return send_order(k, SP_TAG_PAUSE, paused, err, errlen);
}

/* One message that is not a game: 0, or SP_RANKS_FAILED / SP_RANKS_LEFT with err. */
static int other_message(sp_ranks_t *k, const dist_msg_t *m, char *err, size_t errlen) {
    peer_t *p = &k->peers[m->src];
    char e[512];
    switch (m->tag) {
    case SP_TAG_HELLO:
        if (sp_wire_hello_decode(m->data, m->len, &p->h, e, sizeof e) != 0) break;
        p->hello = true;
        if (p->h.device >= 0)
            runlog_printf(&k->log, "rank %d: host %s, pid %" PRId64 ", %s backend on CUDA device %d", (int)m->src,
                          p->h.host, p->h.pid, p->h.backend, (int)p->h.device);
        else
            runlog_printf(&k->log, "rank %d: host %s, pid %" PRId64 ", %s backend", (int)m->src, p->h.host, p->h.pid,
                          p->h.backend);
        return 0;
    case SP_TAG_STATS:
        if (sp_wire_stats_decode(m->data, m->len, &p->st, e, sizeof e) != 0) break;
        if (p->st.generation > p->gen_logged) {
            p->gen_logged = p->st.generation;
            runlog_printf(&k->log, "rank %d: playing model %" PRId64, (int)m->src, p->st.generation - 1);
        }
        return 0;
    case SP_TAG_ERROR: {
        int n = (int)(m->len < 900 ? m->len : 900);
        set_err(err, errlen, "rank %d (%s): %.*s", (int)m->src, p->h.host, n, (const char *)m->data);
        for (char *c = err; *c; c++)
            if ((unsigned char)*c < 32) *c = ' ';
        return SP_RANKS_FAILED;
    }
    case SP_TAG_TRAINED: {
        sp_wire_trained_t t;
        if (sp_wire_trained_decode(m->data, m->len, &t, e, sizeof e) != 0) break;
        if (t.status == SP_TRAINED_OK)
            runlog_printf(&k->log,
                          "rank %d: trained cycle %" PRId64 " with rank 0: %" PRId64 " steps, window %" PRId64
                          " positions%s, %.1f s, weights %016" PRIx64 " (the same on every training rank), %s",
                          (int)m->src, t.cycle, t.steps, t.positions, t.loaded ? ", model file loaded" : "",
                          (double)t.ms / 1e3, t.weights, t.text);
        else
            runlog_printf(&k->log, "rank %d: cycle %" PRId64 " %s after %" PRId64 " steps: %s", (int)m->src, t.cycle,
                          t.status == SP_TRAINED_STOPPED ? "stopped" : "failed", t.steps, t.text);
        return 0;
    }
    case SP_TAG_BYE:
        p->bye = true;
        set_err(err, errlen, "rank %d (%s) stopped (interrupted)", (int)m->src, p->h.host);
        return SP_RANKS_LEFT;
    default: snprintf(e, sizeof e, "unknown message tag %d (%lld bytes)", (int)m->tag, (long long)m->len); break;
    }
    set_err(err, errlen, "rank %d (%s): %s", (int)m->src, p->h.host, e);
    return SP_RANKS_FAILED;
}

int32_t sp_ranks_take(sp_ranks_t *k, sp_ranks_game_t *out, int32_t max, int64_t timeout_ms, char *err, size_t errlen) {
    int32_t n = 0;
    if (k->size < 2) return 0;
    while (n < max) {
        dist_msg_t *m = NULL;
        int rc = dist_mail_recv(k->mail, &m, n == 0 ? timeout_ms : 0, err, errlen);
        if (rc == DIST_TIMEOUT) break;
        if (rc != DIST_OK) return SP_RANKS_FAILED; /* an MPI failure: err says which call */
        if (m->src <= 0 || m->src >= k->size) {
            set_err(err, errlen, "a message from rank %d, outside the job's 1..%d", (int)m->src, (int)k->size - 1);
            dist_msg_free(m);
            return SP_RANKS_FAILED;
        }
        if (m->tag == SP_TAG_GAME) {
            char e[512];
            sp_record_t *r = sp_wire_game_decode(m->data, m->len, e, sizeof e);
            peer_t *p = &k->peers[m->src];
            if (!r) {
                set_err(err, errlen, "rank %d (%s): game %" PRId64 " refused: %s", (int)m->src, p->h.host, p->games + 1,
                        e);
                dist_msg_free(m);
                return SP_RANKS_FAILED;
            }
            p->games++;
            out[n++] = (sp_ranks_game_t){r, m->src, p->h.host};
            dist_msg_free(m);
            continue;
        }
        int st = other_message(k, m, err, errlen);
        dist_msg_free(m);
        if (st != 0) {
            for (int32_t i = 0; i < n; i++) sp_record_free(out[i].rec);
            return st;
        }
    }
    return n;
}

int64_t sp_ranks_searches(const sp_ranks_t *k) {
    int64_t s = 0;
    for (int32_t r = 1; r < k->size; r++) s += k->peers[r].st.searches;
    return s;
}

void sp_ranks_set_train_ranks(sp_ranks_t *k, int32_t train_ranks) { k->train_ranks = train_ranks; }

double sp_ranks_describe(sp_ranks_t *k, char *buf, size_t n) {
    int64_t now = compat_now_ns();
    double dt = (double)(now - k->prev_ns) * 1e-9;
    k->prev_ns = now;
    size_t len = 0;
    double total = 0.0;
    buf[0] = 0;
    for (int32_t r = k->train_ranks > 1 ? k->train_ranks : 1; r < k->size; r++) {
        peer_t *p = &k->peers[r];
        double rate = dt > 0 ? (double)(p->st.searches - p->prev_searches) / dt : 0.0;
        p->prev_searches = p->st.searches;
        total += rate;
        if (len < n) len += (size_t)snprintf(buf + len, n - len, "%sr%d %.1f", len ? ", " : "", (int)r, rate);
    }
    return total;
}

int sp_ranks_finish(sp_ranks_t *k, int32_t code, int64_t timeout_ms, void (*on_game)(void *user, sp_ranks_game_t *g),
                    void *user, char *err, size_t errlen) {
    if (k->size < 2) return 0;
    char e[1024];
    if (send_order(k, SP_TAG_STOP, code, err, errlen) != 0) return -1;
    int64_t deadline = compat_now_ns() + timeout_ms * 1000000;
    for (;;) {
        int32_t left = 0;
        for (int32_t r = 1; r < k->size; r++) left += !k->peers[r].bye;
        if (left == 0) break;
        int64_t ms = (deadline - compat_now_ns()) / 1000000;
        if (ms <= 0) {
            set_err(err, errlen, "%d rank(s) did not answer the stop within %.0f s", (int)left,
                    (double)timeout_ms / 1e3);
            return -1;
        }
        dist_msg_t *m = NULL;
        int rc = dist_mail_recv(k->mail, &m, ms < 100 ? ms : 100, e, sizeof e);
        if (rc == DIST_TIMEOUT) continue;
        if (rc != DIST_OK) {
            set_err(err, errlen, "%s", e);
            return -1;
        }
        if (m->src > 0 && m->src < k->size) {
            peer_t *p = &k->peers[m->src];
            if (m->tag == SP_TAG_BYE) {
                p->bye = true;
            } else if (m->tag == SP_TAG_GAME) {
                sp_record_t *r = on_game ? sp_wire_game_decode(m->data, m->len, e, sizeof e) : NULL;
                if (r) {
                    p->games++;
                    sp_ranks_game_t g = {r, m->src, p->h.host};
                    on_game(user, &g);
                }
            } else if (m->tag == SP_TAG_ERROR) {
                runlog_printf(&k->log, "rank %d (%s): %.*s", (int)m->src, p->h.host, (int)(m->len < 900 ? m->len : 900),
                              (const char *)m->data);
            } else if (m->tag == SP_TAG_HELLO || m->tag == SP_TAG_STATS || m->tag == SP_TAG_TRAINED) {
                (void)other_message(k, m, e, sizeof e);
            }
        }
        dist_msg_free(m);
    }
    if (dist_mail_flush(k->mail, FLUSH_MS, e, sizeof e) != DIST_OK) {
        set_err(err, errlen, "the stop did not reach every rank: %s", e);
        return -1;
    }
    return 0;
}

/* ---- a playing rank ---------------------------------------------------------------------- */

typedef struct {
    const sp_config_t *cfg;
    dist_t *dist;
    dist_mail_t *mail;
    int32_t rank, size, fanout;
    char host[128];
    char dir[1024]; /* where received nets are written before loading */
    nn_server_t *server;
    mcts_cache_t *cache;
    sp_pool_t *pool;
    uint8_t *pending; /* an encoded game waiting for a send slot */
    int64_t pending_len;
    int64_t games_sent;
    int64_t last_stats_ns;
    runlog_sink_t log; /* sp_rank_sink */
} remote_t;

runlog_sink_t sp_rank_sink(int32_t rank, const char *host, bool quiet) {
    char prefix[192];
    snprintf(prefix, sizeof prefix, "selfplay rank %d (%s): ", (int)rank, host);
    return runlog_sink(NULL, NULL, quiet ? NULL : prefix);
}

/* Writes the net's bytes where the server can load them; 0 or -1 with err. */
static int net_file(remote_t *x, int64_t cycle, const uint8_t *file, int64_t n, char *path, size_t pn, char *err,
                    size_t errlen) {
    snprintf(path, pn, "%s/model-%06" PRId64 ".safetensors", x->dir, cycle);
    return compat_write_file_durable(path, file, (size_t)n, err, errlen);
}

/* A NET message: verified, written, loaded (the first) or published. */
static int take_net(remote_t *x, const dist_msg_t *m, uint64_t *seed, char *err, size_t errlen) {
    int64_t cycle = 0, n = 0;
    uint64_t xxh = 0;
    const uint8_t *file = NULL;
    char e[1024], path[1200];
    if (sp_wire_net_decode(m->data, m->len, &cycle, seed, &xxh, &file, &n, e, sizeof e) != 0) {
        set_err(err, errlen, "cannot verify the net rank %d sent: %s", (int)m->src, e);
        return -1;
    }
    int32_t sent = 0; /* checked: down the tree before this rank loads it */
    if (sp_ranks_tree_down(x->mail, x->rank, x->size, x->fanout, SP_TAG_NET, m->data, m->len, &sent, e, sizeof e) !=
        0) {
        set_err(err, errlen, "model %" PRId64 " to the ranks below this one: %s", cycle, e);
        return -1;
    }
    if (sent > 0)
        runlog_printf(&x->log, "model %" PRId64 " passed on to %d rank(s) from rank %d", cycle, (int)sent, (int)m->src);
    if (net_file(x, cycle, file, n, path, sizeof path, e, sizeof e) != 0) {
        set_err(err, errlen, "model %" PRId64 ": %s", cycle, e);
        return -1;
    }
    int rc = 0;
    if (!x->server) {
        nn_server_config_t sc = sp_config_server(x->cfg);
        sc.generation = cycle + 1;
        sc.device = nn_device_for_rank(x->cfg->backend, (int32_t)x->cfg->device, dist_local_rank(x->dist));
        x->server = nn_server_new(&sc, path, NULL, e, sizeof e);
        if (!x->server) {
            set_err(err, errlen, "inference server on model %" PRId64 ": %s", cycle, e);
            rc = -1;
        } else {
            sp_wire_hello_t h = {.pid = compat_getpid(), .device = -1};
            snprintf(h.host, sizeof h.host, "%s", x->host);
            snprintf(h.backend, sizeof h.backend, "%s", nn_server_backend_name(x->server));
            if (strcmp(h.backend, "cuda") == 0) h.device = sc.device;
            uint8_t buf[SP_WIRE_SMALL_MAX];
            int64_t len = sp_wire_hello_encode(&h, buf);
            if (dist_mail_send(x->mail, 0, SP_TAG_HELLO, buf, len, SEND_TIMEOUT_MS, e, sizeof e) != DIST_OK) {
                set_err(err, errlen, "hello to rank 0: %s", e);
                rc = -1;
            }
            runlog_printf(&x->log, "model %" PRId64 " loaded (XXH3 %016" PRIx64 ", %.2f MB), %s backend", cycle, xxh,
                          (double)n / 1e6, h.backend);
        }
    } else if (nn_server_publish_file(x->server, path, cycle + 1, e, sizeof e) < 0) {
        set_err(err, errlen, "model %" PRId64 " (XXH3 verified) not loaded: %s", cycle, e);
        rc = -1;
    } else {
        runlog_printf(&x->log, "model %" PRId64 " published (XXH3 %016" PRIx64 ")", cycle, xxh);
    }
    compat_remove_file(path);
    return rc;
}

static void send_stats(remote_t *x) {
    sp_wire_stats_t s = {0};
    sp_pool_stats_t ps = {0};
    if (x->pool) sp_pool_stats(x->pool, &ps);
    nn_server_stats_t ss = {0};
    if (x->server) nn_server_stats(x->server, &ss);
    s.searches = ps.searches;
    s.evaluated = ss.evaluated;
    s.batches = ss.batches;
    s.games = x->games_sent;
    s.generation = x->server ? nn_server_generation(x->server) : 0;
    s.active = ps.active;
    uint8_t buf[SP_WIRE_SMALL_MAX];
    int64_t len = sp_wire_stats_encode(&s, buf);
    char e[256];
    (void)dist_mail_send(x->mail, 0, SP_TAG_STATS, buf, len, 0, e, sizeof e); /* no room: the next second's */
    x->last_stats_ns = compat_now_ns();
}

/* Sends finished games while there is room; 0, or -1 with err. */
static int send_games(remote_t *x, char *err, size_t errlen) {
    for (;;) {
        if (!x->pending) {
            sp_record_t *r = NULL;
            if (sp_pool_take(x->pool, &r, 1, 0) != 1) return 0;
            x->pending = sp_wire_game_encode(r, &x->pending_len);
            sp_record_free(r);
            if (!x->pending) {
                set_err(err, errlen, "out of memory for a game message");
                return -1;
            }
        }
        char e[512];
        int rc = dist_mail_send(x->mail, 0, SP_TAG_GAME, x->pending, x->pending_len, 0, e, sizeof e);
        if (rc == DIST_TIMEOUT) return 0; /* GAMES_IN_FLIGHT in flight: later */
        if (rc != DIST_OK) {
            set_err(err, errlen, "a game to rank 0: %s", e);
            return -1;
        }
        free(x->pending);
        x->pending = NULL;
        x->games_sent++;
    }
}

/* Waits (bounded) for STOP after this rank sent ERROR or BYE; its code, or -1. */
static int32_t wait_stop(remote_t *x) {
    int64_t deadline = compat_now_ns() + (int64_t)STOP_WAIT_MS * 1000000;
    char e[512];
    while (compat_now_ns() < deadline) {
        dist_msg_t *m = NULL;
        int rc = dist_mail_recv(x->mail, &m, 100, e, sizeof e);
        if (rc < 0) return -1;
        if (rc == DIST_TIMEOUT) continue;
        int32_t code = -1;
        bool stop = m->tag == SP_TAG_STOP && sp_wire_int_decode(m->data, m->len, &code, e, sizeof e) == 0;
        dist_msg_free(m);
        if (stop) return code;
    }
    return -1;
}

static void send_text(remote_t *x, int32_t tag, const char *text) {
    char e[256];
    (void)dist_mail_send(x->mail, 0, tag, text, (int64_t)strlen(text), SEND_TIMEOUT_MS, e, sizeof e);
}

/* The loop: returns SP_EXIT_* once rank 0 says STOP (or this rank stops). */
static int remote_loop(remote_t *x) {
    char err[2048] = "", e[1024];
    uint64_t seed = 0;
    int32_t code = -1;
    bool failed = false, left = false;
    int64_t start_deadline = compat_now_ns() + (int64_t)START_TIMEOUT_MS * 1000000;
    while (code < 0 && !failed) {
        if (compat_stop_requested()) {
            left = true;
            break;
        }
        if (!x->server && compat_now_ns() > start_deadline) {
            set_err(err, sizeof err, "no net from rank 0 within %d s", START_TIMEOUT_MS / 1000);
            failed = true;
            break;
        }
        dist_msg_t *m = NULL;
        int rc = dist_mail_recv(x->mail, &m, x->pool ? 0 : 50, e, sizeof e);
        if (rc < 0) {
            set_err(err, sizeof err, "%s", e);
            failed = true;
            break;
        }
        if (rc == DIST_OK) {
            int32_t v = 0;
            int32_t parent = x->fanout > 0 ? (x->rank - 1) / x->fanout : 0, sent = 0;
            if ((m->tag == SP_TAG_NET || m->tag == SP_TAG_PAUSE) && m->src != parent) {
                set_err(err, sizeof err,
                        "a %s from rank %d, not from rank %d above this one in the tree "
                        "(--net-fanout must be the same on every rank)",
                        m->tag == SP_TAG_NET ? "net" : "pause", (int)m->src, (int)parent);
                failed = true;
            } else if (m->tag == SP_TAG_PAUSE && sp_ranks_tree_down(x->mail, x->rank, x->size, x->fanout, m->tag,
                                                                    m->data, m->len, &sent, e, sizeof e) != 0) {
                set_err(err, sizeof err, "pause to the ranks below this one: %s", e);
                failed = true;
            } else if (m->tag == SP_TAG_NET) {
                if (take_net(x, m, &seed, err, sizeof err) != 0) failed = true;
            } else if (m->tag == SP_TAG_STOP || m->tag == SP_TAG_PAUSE) {
                if (sp_wire_int_decode(m->data, m->len, &v, e, sizeof e) != 0) {
                    set_err(err, sizeof err, "from rank 0: %s", e);
                    failed = true;
                } else if (m->tag == SP_TAG_STOP) {
                    code = v;
                } else if (x->pool) {
                    sp_pool_pause(x->pool, v != 0);
                }
            } else {
                set_err(err, sizeof err, "unknown message tag %d from rank %d", (int)m->tag, (int)m->src);
                failed = true;
            }
            dist_msg_free(m);
            if (failed || code >= 0) break;
        }
        if (x->server && !x->pool) { /* the first net is in: start playing */
            if (x->cfg->cache_mb > 0 && !(x->cache = mcts_cache_new(x->cfg->cache_mb << 20))) {
                set_err(err, sizeof err, "out of memory for a %lld MiB cache", (long long)x->cfg->cache_mb);
                failed = true;
                break;
            }
            uint64_t s = compat_mix64(seed ^ compat_mix64(0x9e3779b97f4a7c15ull * (uint64_t)x->rank));
            x->pool = sp_pool_new(x->cfg, x->server, x->cache, s, err, sizeof err);
            if (!x->pool || sp_pool_start(x->pool, err, sizeof err) != 0) {
                failed = true;
                break;
            }
        }
        if (!x->pool) continue;
        if (sp_pool_error(x->pool, err, sizeof err) || send_games(x, err, sizeof err) != 0) {
            failed = true;
            break;
        }
        if (compat_now_ns() - x->last_stats_ns > 1000000000) send_stats(x);
        compat_sleep_ms(10);
    }
    if (x->pool) sp_pool_stop(x->pool); /* games in progress are dropped */
    if (x->pool) send_stats(x);
    if (failed) {
        runlog_printf(&x->log, "error: %s", err);
        send_text(x, SP_TAG_ERROR, err);
        code = wait_stop(x);
        if (code < 0) code = SP_EXIT_ERROR;
    } else if (left) {
        runlog_printf(&x->log, "stop requested: leaving the job");
        send_text(x, SP_TAG_BYE, "");
        code = wait_stop(x);
        if (code < 0) code = SP_EXIT_INTERRUPTED;
        return code == SP_EXIT_DONE ? SP_EXIT_INTERRUPTED : code;
    }
    send_text(x, SP_TAG_BYE, "");
    return code;
}

int sp_remote_run(const sp_config_t *cfg, dist_t *dist) {
    remote_t x = {
        .cfg = cfg, .dist = dist, .rank = dist_rank(dist), .size = dist_size(dist), .fanout = (int32_t)cfg->net_fanout};
    compat_hostname(x.host, sizeof x.host);
    x.log = sp_rank_sink(x.rank, x.host, cfg->quiet != 0);
    char err[1024];
    snprintf(x.dir, sizeof x.dir, "%s/koma_rank%d_%d", compat_temp_dir(), (int)x.rank, compat_getpid());
    if (compat_mkdir_p(x.dir, err, sizeof err) != 0) {
        fprintf(stderr, "selfplay rank %d: %s\n", (int)x.rank, err);
        dist_abort(dist, SP_EXIT_ERROR);
        return SP_EXIT_ERROR;
    }
    x.mail = dist_mail_start(dist, GAMES_IN_FLIGHT, INBOX, err, sizeof err);
    if (!x.mail) {
        fprintf(stderr, "selfplay rank %d: %s\n", (int)x.rank, err);
        dist_abort(dist, SP_EXIT_ERROR);
        return SP_EXIT_ERROR;
    }
    int code = remote_loop(&x);
    char e[512];
    int flushed = dist_mail_flush(x.mail, FLUSH_MS, e, sizeof e);
    int32_t unsent = dist_mail_stop(x.mail);
    sp_pool_free(x.pool);
    nn_server_free(x.server);
    mcts_cache_free(x.cache);
    free(x.pending);
    compat_remove_tree(x.dir, e, sizeof e);
    if (flushed != DIST_OK || unsent > 0) {
        fprintf(stderr, "selfplay rank %d (%s): %d message(s) to rank 0 still in flight at the end: ending the job\n",
                (int)x.rank, x.host, (int)unsent);
        dist_abort(dist, code ? code : SP_EXIT_ERROR);
    }
    return code;
}
