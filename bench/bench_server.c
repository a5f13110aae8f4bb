/* bench_server.c - throughput of the inference server (nn/server.h).
 *
 * W client threads each keep two submissions of S random positions in
 * flight (submit the next, then wait for the previous: what a self-play
 * worker does) for a fixed time; reported: evaluations/s, average device
 * batch, worker busy fraction and ticket latency. Next to it, direct
 * nn_forward on one thread at batch S, at max_batch and at the server's
 * average batch, to show what the server costs and what batching buys.
 *
 * Usage: bench_server [--net 6x64] [--clients 1,2,4,8] [--size 64]
 *                     [--max-batch 256] [--streams 1] [--gather-us 1000]
 *                     [--labels 80] [--seconds 3] [--cpu-threads 0]
 *                     [--planes 68] [--hand 14] [--backend cpu|cuda|auto]
 *                     [--depth 2] [--reps 1]
 * --labels K: each position asks for K gathered policy logits (0: all 2187).
 * --depth D: submissions each client keeps in flight (1 = synchronous).
 * --reps R: run every measurement R times and keep the best (shared boxes).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "compat/compat.h"
#include "nn/net.h"
#include "nn/server.h"

typedef struct {
    const char *net;
    int32_t clients[16];
    int n_clients;
    int32_t size, max_batch, streams, gather_us, labels, cpu_threads, planes, hand, depth, reps;
    double seconds;
    const char *backend;
} opts_t;

static uint64_t rnd_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- one client's buffers -------------------------------------------------------- */
typedef struct {
    uint8_t *packed;
    float *hand;
    uint32_t *offsets;
    uint16_t *labels;
    float *value, *policy;
    nn_server_request_t req;
    nn_server_ticket_t ticket;
    double t_submit;
} sub_t;

typedef struct {
    nn_server_t *srv;
    const opts_t *o;
    int id;
    atomic_int *stop;
    int64_t positions, tickets, errors;
    double latency_sum, latency_max;
    sub_t sub[2];
} client_t;

static void sub_init(sub_t *u, const opts_t *o, uint64_t seed) {
    int32_t S = o->size;
    int64_t pb = nn_packed_bytes(o->planes);
    uint64_t s = seed | 1;
    u->packed = malloc((size_t)(S * pb));
    u->hand = malloc(sizeof(float) * (size_t)S * (size_t)(o->hand + 1));
    u->offsets = malloc(sizeof(uint32_t) * (size_t)(S + 1));
    u->labels = malloc(sizeof(uint16_t) * (size_t)S * (size_t)(o->labels + 1));
    u->value = malloc(sizeof(float) * (size_t)S * NN_VALUE_NB);
    u->policy = malloc(sizeof(float) * (size_t)S * (size_t)(o->labels ? o->labels : NN_POLICY_NB));
    for (int64_t i = 0; i < S * pb; i++)
        u->packed[i] = (uint8_t)(rnd_next(&s) & rnd_next(&s) & rnd_next(&s)); /* ~1/8 density */
    for (int64_t i = 0; i < (int64_t)S * o->hand; i++) u->hand[i] = (float)(rnd_next(&s) % 4);
    u->offsets[0] = 0;
    for (int32_t i = 0; i < S; i++) {
        for (int32_t k = 0; k < o->labels; k++)
            u->labels[i * o->labels + k] = (uint16_t)(rnd_next(&s) % NN_POLICY_NB);
        u->offsets[i + 1] = (uint32_t)((i + 1) * o->labels);
    }
    memset(&u->req, 0, sizeof(u->req));
    u->req.n = S;
    u->req.packed = u->packed;
    u->req.hand = u->hand;
    u->req.label_offsets = o->labels ? u->offsets : NULL;
    u->req.labels = o->labels ? u->labels : NULL;
    u->req.value = u->value;
    u->req.policy = u->policy;
}

static void sub_release(sub_t *u) {
    free(u->packed);
    free(u->hand);
    free(u->offsets);
    free(u->labels);
    free(u->value);
    free(u->policy);
}

static int client_complete(client_t *c, sub_t *u) {
    nn_server_result_t res;
    int st = nn_server_wait(c->srv, u->ticket, &res);
    double lat = bench_wall_s() - u->t_submit;
    if (st != NN_SERVER_OK) {
        c->errors++;
        fprintf(stderr, "client %d: %s: %s\n", c->id, nn_server_status_name(st), res.message);
        return -1;
    }
    c->positions += u->req.n;
    c->tickets++;
    c->latency_sum += lat;
    if (lat > c->latency_max) c->latency_max = lat;
    return 0;
}

static void *client_main(void *arg) {
    client_t *c = arg;
    char err[256];
    int inflight = 0;
    for (int it = 0;; it++) {
        int more = !atomic_load(c->stop);
        if (more) {
            sub_t *u = &c->sub[it % 2];
            u->t_submit = bench_wall_s();
            if (nn_server_submit(c->srv, &u->req, &u->ticket, err, sizeof(err)) != NN_SERVER_OK) {
                fprintf(stderr, "client %d: %s\n", c->id, err);
                c->errors++;
                break;
            }
            inflight++;
        }
        if (c->o->depth == 1 && inflight == 1) {
            inflight--;
            if (client_complete(c, &c->sub[it % 2]) != 0) break;
        } else if (inflight == 2 || (!more && inflight == 1)) {
            inflight--;
            if (client_complete(c, &c->sub[(it + 1) % 2]) != 0) break;
        }
        if (!more && inflight == 0) break;
    }
    while (inflight-- > 0) client_complete(c, &c->sub[0]); /* after an error only */
    return NULL;
}

/* ---- direct forward --------------------------------------------------------------- */
static double direct_evals(nn_net_t *net, nn_backend_t *be, int32_t B, const opts_t *o) {
    char err[256];
    nn_ctx_t *ctx = nn_ctx_new(net, be, B, err, sizeof(err));
    if (!ctx) {
        fprintf(stderr, "%s\n", err);
        return 0;
    }
    sub_t u;
    opts_t ob = *o;
    ob.size = B;
    ob.labels = 0;
    sub_init(&u, &ob, 99);
    nn_forward(ctx, B, u.packed, u.hand, u.policy, u.value, NULL);
    int64_t iters = 0;
    double t0 = bench_wall_s(), t;
    do {
        nn_forward(ctx, B, u.packed, u.hand, u.policy, u.value, NULL);
        iters++;
        t = bench_wall_s() - t0;
    } while (t < o->seconds / 2 || iters < 2);
    sub_release(&u);
    nn_ctx_free(ctx);
    return (double)iters * B / t;
}

/* ---- server runs ------------------------------------------------------------------- */
typedef struct {
    double evals, avg_batch, busy, lat_ms, max_ms;
    int64_t errors;
} run_t;

static int run_server(nn_net_t *net, const opts_t *o, int32_t W, run_t *r) {
    nn_server_config_t cfg = nn_server_config_default();
    cfg.backend = o->backend;
    cfg.streams = o->streams;
    cfg.cpu_threads = o->cpu_threads;
    cfg.max_batch = o->max_batch;
    cfg.gather_us = o->gather_us;
    char err[512];
    nn_server_t *srv = nn_server_new(&cfg, NULL, net, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    atomic_int stop = 0;
    client_t *cl = calloc((size_t)W, sizeof(client_t));
    compat_thread_t *th = calloc((size_t)W, sizeof(compat_thread_t));
    for (int i = 0; i < W; i++) {
        cl[i].srv = srv;
        cl[i].o = o;
        cl[i].id = i;
        cl[i].stop = &stop;
        sub_init(&cl[i].sub[0], o, 1000 + 2 * (uint64_t)i);
        sub_init(&cl[i].sub[1], o, 1001 + 2 * (uint64_t)i);
    }
    nn_server_stats_t st;
    nn_server_stats(srv, &st); /* starts the measured interval */
    double t0 = bench_wall_s();
    for (int i = 0; i < W; i++) compat_thread_create(&th[i], client_main, &cl[i]);
    compat_sleep_ms((int64_t)(o->seconds * 1000));
    atomic_store(&stop, 1);
    for (int i = 0; i < W; i++) compat_thread_join(th[i]);
    double wall = bench_wall_s() - t0;
    nn_server_stats(srv, &st);
    int64_t pos = 0, tickets = 0, errors = 0;
    double lat = 0, latmax = 0;
    for (int i = 0; i < W; i++) {
        pos += cl[i].positions;
        tickets += cl[i].tickets;
        errors += cl[i].errors;
        lat += cl[i].latency_sum;
        if (cl[i].latency_max > latmax) latmax = cl[i].latency_max;
        sub_release(&cl[i].sub[0]);
        sub_release(&cl[i].sub[1]);
    }
    r->evals = (double)pos / wall;
    r->avg_batch = st.avg_batch;
    r->busy = st.busy_frac;
    r->lat_ms = tickets ? 1e3 * lat / (double)tickets : 0.0;
    r->max_ms = 1e3 * latmax;
    r->errors = errors;
    free(cl);
    free(th);
    nn_server_free(srv);
    return 0;
}

int main(int argc, char **argv) {
    opts_t o = {"6x64", {1, 2, 4, 8}, 4, 64, 256, 1, 1000, 80, 0, 68, 14, 2, 1, 3.0, "cpu"};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "%s: missing value\n", a);
            return 2;
        }
        if (!strcmp(a, "--net")) o.net = v;
        else if (!strcmp(a, "--clients")) o.n_clients = bench_parse_list(v, o.clients, 16);
        else if (!strcmp(a, "--size")) o.size = atoi(v);
        else if (!strcmp(a, "--max-batch")) o.max_batch = atoi(v);
        else if (!strcmp(a, "--streams")) o.streams = atoi(v);
        else if (!strcmp(a, "--gather-us")) o.gather_us = atoi(v);
        else if (!strcmp(a, "--labels")) o.labels = atoi(v);
        else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
        else if (!strcmp(a, "--cpu-threads")) o.cpu_threads = atoi(v);
        else if (!strcmp(a, "--planes")) o.planes = atoi(v);
        else if (!strcmp(a, "--hand")) o.hand = atoi(v);
        else if (!strcmp(a, "--backend")) o.backend = v;
        else if (!strcmp(a, "--depth")) o.depth = atoi(v);
        else if (!strcmp(a, "--reps")) o.reps = atoi(v);
        else {
            fprintf(stderr, "unknown option %s (see the comment at the top of bench/bench_server.c)\n", a);
            return 2;
        }
    }
    if (o.size < 1 || o.max_batch < 1 || o.labels < 0 || o.labels > NN_POLICY_NB || o.n_clients < 1 ||
        o.depth < 1 || o.depth > 2 || o.reps < 1) {
        fprintf(stderr, "bad option values\n");
        return 2;
    }
    nn_net_config_t c = {0, 0, NN_ACT_RELU, o.planes, o.hand, 1};
    if (nn_net_size_parse(o.net, &c.blocks, &c.channels) != 0) {
        fprintf(stderr, "--net %s: not a size like 6x64\n", o.net);
        return 2;
    }
    int32_t threads = o.cpu_threads > 0 ? o.cpu_threads : compat_cpu_count();
    nn_backend_t *be = nn_backend_cpu_new(threads);
    char err[256];
    nn_net_t *net = nn_net_new(be, &c, 1, err, sizeof(err));
    if (!net) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("net %s, %d planes + %d hand; server: backend %s, %d stream(s), max_batch %d, gather %d us, "
           "%s policy; %d BLAS thread(s); depth %d; %.1f s per run, best of %d\n\n", o.net, o.planes, o.hand,
           o.backend, o.streams, o.max_batch, o.gather_us, o.labels ? "gathered" : "full", threads, o.depth,
           o.seconds, o.reps);
    printf("| clients | size | evals/s | avg batch | busy | latency ms | max ms | errors |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    double avgs[16];
    for (int i = 0; i < o.n_clients; i++) {
        run_t best = {0}, r;
        for (int k = 0; k < o.reps; k++) {
            if (run_server(net, &o, o.clients[i], &r) != 0) return 1;
            if (r.evals > best.evals) best = r;
        }
        printf("| %3d | %4d | %9.0f | %8.1f | %5.0f%% | %8.2f | %8.2f | %lld |\n", o.clients[i], o.size, best.evals,
               best.avg_batch, 100.0 * best.busy, best.lat_ms, best.max_ms, (long long)best.errors);
        fflush(stdout);
        avgs[i] = best.avg_batch;
    }
    /* direct forward on this thread (the CPU backend threads as configured) */
    nn_backend_free(nn_backend_cpu_new(threads)); /* BLAS threads back to `threads` */
    int32_t Bs[18];
    int nb = 0;
    Bs[nb++] = o.size;
    Bs[nb++] = o.max_batch;
    for (int i = 0; i < o.n_clients; i++) Bs[nb++] = (int32_t)(avgs[i] + 0.5) > 0 ? (int32_t)(avgs[i] + 0.5) : 1;
    printf("\ndirect nn_forward (one thread, full policy + value downloaded):\n\n| batch | evals/s | ms/batch |\n|---|---|---|\n");
    for (int i = 0; i < nb; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= Bs[j] == Bs[i];
        if (seen) continue;
        double best = 0;
        for (int k = 0; k < o.reps; k++) {
            double e = direct_evals(net, be, Bs[i], &o);
            if (e > best) best = e;
        }
        printf("| %4d | %9.0f | %8.2f |\n", Bs[i], best, 1e3 * Bs[i] / best);
        fflush(stdout);
    }
    nn_net_free(net);
    nn_backend_free(be);
    return 0;
}
