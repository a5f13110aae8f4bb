/* bench_mcts.c - speed of the search tree alone (no network) and the fixed
 * bench whose node count is a signature of the search.
 *
 * usage: bench_mcts [--visits N] [--batch B] [--no-encode] [--quick]
 *
 * A dummy network answers every leaf at once: one fixed table of 2187
 * policy logits (so priors differ by move label) and a value drawn from the
 * position key. Its cost is not timed: the figures are the tree's work.
 *   1. signature: PUCT then Gumbel searches of N visits (default 800) on
 *      fixed positions with mcts_search, batch 16, no noise; prints the
 *      total nodes created and a hash of the results ("bench nodes ...").
 *      Any change to search behaviour changes it: quote it in commits.
 *   2. throughput: the batched protocol (collect B leaves, deliver them) on
 *      the same positions, single thread, timing mcts_collect (descent,
 *      leaf rules, move generation and labels, mate in one, encoding) and
 *      mcts_deliver (softmax, expansion, backup) per playout: PUCT, Gumbel,
 *      and PUCT with an (initially empty) cache. Process CPU time (clock()),
 *      best of 5 passes, so a busy machine slows the figures less.
 * The last line is: bench nodes <count> signature <hex> playouts_per_s <rate>
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sfen.h"
#include "compat/bits.h"
#include "mcts/mcts.h"

static const char *const POSITIONS[] = {
    "startpos",
    "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2",
    "ln1g1g1nl/1ks2r3/1pppp1bpp/p3spp2/9/P1P1P1P1P/1PSP1P1P1/1BK1GS1R1/LN1G3NL b - 1",
    "ln3k1nl/1r3g3/p1ppsp1pp/1s2p1p2/1p5P1/2P1PSP2/PPSP1P2P/2G2K1R1/LN5NL b BGb 43",
    "4k1+N2/P3g1s2/l1+P3N1l/3P1pp1P/2s1p4/p3PP2L/3GKBN1l/1+pS2RP+p+p/2B1G4 b R2Pgsn2p 111",
    "5k1n1/2g1s1sgl/l3n1b+P1/pr1pp3+P/Pp1nP1ppp/1Gp+p1pS2/L1P2+p3/1BS2R3/1N1K2G1L b Pp 99",
};
enum { N_POS = sizeof POSITIONS / sizeof POSITIONS[0] };

static float policy_table[ENC_LABEL_NB];

static void fake_wdl(uint64_t key, float wdl[3]) {
    uint64_t h = compat_mix64_fin(key);
    wdl[0] = (float)(h & 1023) / 512.0f;
    wdl[1] = (float)((h >> 10) & 1023) / 1024.0f;
    wdl[2] = (float)((h >> 20) & 1023) / 512.0f;
}

static void eval_dummy(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    (void)user;
    (void)t;
    for (int32_t i = 0; i < n; i++) {
        memcpy(pol + (size_t)i * ENC_LABEL_NB, policy_table, sizeof policy_table);
        fake_wdl(reqs[i].key, wdl + 3 * i);
    }
}

/* Process CPU time (the bench is single-threaded): robust to a shared machine. */
static int64_t cpu_ns(void) { return (int64_t)((double)clock() * (1e9 / CLOCKS_PER_SEC)); }

static uint64_t hash_result(uint64_t h, const mcts_result_t *r) {
    h = compat_mix64_fin(h ^ r->best);
    for (int32_t i = 0; i < r->n; i++) h = compat_mix64_fin(h ^ ((uint64_t)r->visits[i] << 16) ^ r->moves[i]);
    return h;
}

int main(int argc, char **argv) {
    int64_t visits = 800;
    int32_t batch = 32;
    bool encode = true, quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--visits") == 0 && i + 1 < argc) visits = atoll(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-encode") == 0) encode = false;
        else if (strcmp(argv[i], "--quick") == 0) quick = true;
        else {
            fprintf(stderr, "usage: bench_mcts [--visits N] [--batch B] [--no-encode] [--quick]\n");
            return 2;
        }
    }
    if (visits < 1 || batch < 1 || batch > 4096) {
        fprintf(stderr, "bench_mcts: visits >= 1 and batch 1..4096\n");
        return 2;
    }
    for (int32_t l = 0; l < ENC_LABEL_NB; l++) policy_table[l] = (float)(compat_mix64_fin((uint64_t)l) >> 40) * (4.0f / 16777216.0f);

    static pos_t pos[N_POS];
    char err[256];
    for (int i = 0; i < N_POS; i++)
        if (sfen_parse_cstr(&pos[i], POSITIONS[i], err, sizeof err) != SFEN_OK) {
            fprintf(stderr, "bench_mcts: position %d: %s\n", i, err);
            return 1;
        }

    /* 1. signature */
    static mcts_result_t res;
    int64_t nodes = 0;
    uint64_t sig = 0;
    for (int mode = 0; mode < 2; mode++) {
        mcts_params_t p;
        mcts_params_default(&p);
        p.root_mode = mode ? MCTS_ROOT_GUMBEL : MCTS_ROOT_PUCT;
        p.node_limit = 1 << 16;
        mcts_tree_t *t = mcts_tree_new(&p, NULL);
        if (!t) {
            fprintf(stderr, "bench_mcts: out of memory\n");
            return 1;
        }
        for (int i = 0; i < N_POS; i++) {
            mcts_tree_set_position(t, &pos[i]);
            mcts_limits_t l = {.visits = 800, .full = 1};
            mcts_search(t, &l, eval_dummy, NULL, &res);
            nodes += res.nodes;
            sig = hash_result(sig, &res);
        }
        mcts_tree_free(t);
    }
    printf("signature: %d positions x 800 visits, PUCT + Gumbel: nodes %" PRId64 " signature %016" PRIx64 "\n", N_POS,
           nodes, sig);

    /* 2. throughput of the batched protocol */
    mcts_request_t *reqs = malloc((size_t)batch * sizeof *reqs);
    float *pol = malloc((size_t)batch * ENC_LABEL_NB * sizeof(float));
    float *wdl = malloc((size_t)batch * 3 * sizeof(float));
    if (!reqs || !pol || !wdl) return 1;
    for (int32_t i = 0; i < batch; i++) memcpy(pol + (size_t)i * ENC_LABEL_NB, policy_table, sizeof policy_table);
    /* Each row: the fastest of reps passes over all positions (the machine may be shared). */
    double puct_rate = 0.0;
    int reps = quick ? 1 : 5;
    for (int mode = 0; mode < 3; mode++) {
        bool gumbel = mode == 1, cached = mode == 2;
        mcts_params_t p;
        mcts_params_default(&p);
        p.root_mode = gumbel ? MCTS_ROOT_GUMBEL : MCTS_ROOT_PUCT;
        p.encode_leaves = encode;
        p.node_limit = (int32_t)(visits + 1024);
        mcts_cache_t *cache = cached ? mcts_cache_new(64 << 20) : NULL;
        mcts_tree_t *t = mcts_tree_new(&p, cache);
        int64_t best_ns = INT64_MAX, best_collect = 0, best_deliver = 0, leaves = 0, playouts = 0, hits = 0, calls = 0;
        for (int r = 0; r < reps; r++) {
            int64_t t_collect = 0, t_deliver = 0;
            leaves = playouts = hits = calls = 0;
            mcts_cache_clear(cache); /* cold: hits are transpositions within a search */
            for (int i = 0; i < N_POS; i++) {
                mcts_tree_set_position(t, &pos[i]);
                mcts_limits_t l = {.visits = visits, .full = 1};
                mcts_search_begin(t, &l);
                while (!mcts_search_done(t)) {
                    int64_t a = cpu_ns();
                    int32_t n = mcts_collect(t, batch, reqs);
                    int64_t b = cpu_ns();
                    calls++;
                    for (int32_t k = 0; k < n; k++) fake_wdl(reqs[k].key, wdl + 3 * k);
                    int64_t c = cpu_ns();
                    for (int32_t k = 0; k < n; k++)
                        mcts_deliver(t, &reqs[k], pol + (size_t)k * ENC_LABEL_NB, wdl + 3 * k);
                    int64_t d = cpu_ns();
                    t_collect += b - a;
                    t_deliver += d - c;
                    leaves += n;
                }
                mcts_search_result(t, &res);
                playouts += res.playouts;
                hits += res.cache_hits;
            }
            if (t_collect + t_deliver < best_ns) best_ns = t_collect + t_deliver, best_collect = t_collect, best_deliver = t_deliver;
        }
        double rate = (double)playouts / ((double)best_ns * 1e-9);
        if (mode == 0) puct_rate = rate;
        printf("%-12s batch %3d: %8.0f playouts/s  per playout: collect %5.2f us, deliver %5.2f us  "
               "network leaves/collect %5.1f  cache hits %4.1f%%\n",
               gumbel ? "gumbel" : cached ? "puct+cache" : "puct", batch, rate,
               (double)best_collect * 1e-3 / (double)playouts, (double)best_deliver * 1e-3 / (double)playouts,
               calls ? (double)leaves / (double)calls : 0.0, playouts ? 100.0 * (double)hits / (double)playouts : 0.0);
        mcts_tree_free(t);
        mcts_cache_free(cache);
    }
    printf("bench nodes %" PRId64 " signature %016" PRIx64 " playouts_per_s %.0f\n", nodes, sig, puct_rate);
    free(reqs);
    free(pol);
    free(wdl);
    return 0;
}
