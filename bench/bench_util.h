/* bench_util.h - what the network benchmarks share (header-only): wall
 * seconds, a fixed-seed xorshift, "1,8,32" lists, random packed inputs and a
 * synthetic training batch (8 labels per position, all legal).
 * Owns: nothing beyond the buffers of a bench_batch_t. */
#ifndef KOMA_BENCH_UTIL_H
#define KOMA_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat/compat.h"
#include "nn/net.h"

static inline double bench_wall_s(void) { return (double)compat_now_ns() * 1e-9; }

/* xorshift32 on a fixed seed: the same inputs run after run */
static uint64_t bench_rng_state = 88172645463325252ull;
static inline uint32_t bench_rnd(void) {
    bench_rng_state ^= bench_rng_state << 13;
    bench_rng_state ^= bench_rng_state >> 7;
    bench_rng_state ^= bench_rng_state << 17;
    return (uint32_t)bench_rng_state;
}

/* "1,8,32" -> out; stops at the first character that is neither a digit nor a comma */
static inline int bench_parse_list(const char *s, int32_t *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s) break;
        out[n++] = (int32_t)v;
        s = *e == ',' ? e + 1 : e;
    }
    return n;
}

/* Packed planes at ~1/8 density and hand counts 0..3 for B positions. */
static inline void bench_fill_inputs(uint8_t *packed, float *hand, int32_t B, int32_t planes, int32_t nhand) {
    int64_t n = B * nn_packed_bytes(planes);
    for (int64_t i = 0; i < n; i++) packed[i] = (uint8_t)(bench_rnd() & bench_rnd() & bench_rnd());
    for (int64_t i = 0; i < (int64_t)B * nhand; i++) hand[i] = (float)(bench_rnd() % 4);
}

/* A training batch of B random positions of net config c: 8 policy labels
 * of probability 1/8 each (marked legal), a random result, root q 0.1. */
typedef struct {
    nn_batch_t b;
    uint8_t *packed, *legal;
    float *hand, *prob, *q;
    uint32_t *off;
    uint16_t *lab;
    int8_t *res;
} bench_batch_t;

static inline void bench_batch_free(bench_batch_t *t) {
    free(t->packed), free(t->legal), free(t->hand), free(t->prob), free(t->q), free(t->off), free(t->lab),
        free(t->res);
}

/* 0, or -1 (nothing left allocated) when memory ran out */
static inline int bench_batch_init(bench_batch_t *t, const nn_net_config_t *c, int32_t B) {
    int64_t lb = nn_packed_bytes(NN_POLICY_CH);
    t->packed = malloc((size_t)(B * nn_packed_bytes(c->in_planes)));
    t->hand = malloc(sizeof(float) * (size_t)B * (c->in_hand ? c->in_hand : 1));
    t->legal = calloc((size_t)(B * lb), 1);
    t->off = malloc(sizeof(uint32_t) * (size_t)(B + 1));
    t->lab = malloc(sizeof(uint16_t) * (size_t)B * 8);
    t->prob = malloc(sizeof(float) * (size_t)B * 8);
    t->q = malloc(sizeof(float) * (size_t)B);
    t->res = malloc((size_t)B);
    if (!t->packed || !t->hand || !t->legal || !t->off || !t->lab || !t->prob || !t->q || !t->res) {
        bench_batch_free(t);
        return -1;
    }
    bench_fill_inputs(t->packed, t->hand, B, c->in_planes, c->in_hand);
    t->off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        for (int j = 0; j < 8; j++) {
            uint16_t l = (uint16_t)(bench_rnd() % NN_POLICY_NB);
            t->lab[b * 8 + j] = l;
            t->prob[b * 8 + j] = 0.125f;
            t->legal[b * lb + l / 8] |= (uint8_t)(1u << (l % 8));
        }
        t->off[b + 1] = t->off[b] + 8;
        t->res[b] = (int8_t)((int)(bench_rnd() % 3) - 1);
        t->q[b] = 0.1f;
    }
    t->b = (nn_batch_t){.B = B, .planes = t->packed, .hand = t->hand, .legal = t->legal, .policy_offsets = t->off,
                        .policy_label = t->lab, .policy_prob = t->prob, .result = t->res, .root_q = t->q};
    return 0;
}

/* A trainer for net at batch B and its synthetic batch; NULL (message on
 * stderr, nothing left allocated) when either cannot be had. */
static inline nn_optim_t *bench_trainer_new(nn_net_t *net, int32_t B, bench_batch_t *tb) {
    char err[256];
    nn_optim_t *tr = nn_optim_new(net, NULL, B, err, sizeof(err));
    if (!tr) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    if (bench_batch_init(tb, nn_net_config(net), B) != 0) {
        fprintf(stderr, "bench: out of memory for a batch of %d\n", (int)B);
        nn_optim_free(tr);
        return NULL;
    }
    return tr;
}

#endif
