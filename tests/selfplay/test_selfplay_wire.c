/* test_selfplay_wire.c - selfplay/wire.c, the messages between `selfplay`
 * ranks, without MPI:
 *   - games played by slots against a network double go through encode and
 *     decode and come back the same: moves, rows (ply, move, search value,
 *     and the planes, hand, legal mask and position rank 0 rebuilds by
 *     replay), policies, result, end, nets; the rebuilt rows match the ones
 *     the game wrote;
 *   - every truncation and a flipped byte anywhere are refused (the trailing
 *     XXH3); a message with a good XXH3 but an illegal move, a label past
 *     2186, a net of generation 0 or a count that does not fill it is refused
 *     with a message naming it;
 *   - a net message round-trips its cycle, seed, XXH3 and bytes; file bytes
 *     that do not hash to the announced XXH3 are refused;
 *   - hello, stats and orders round-trip; short ones are refused;
 *   - a training plan (--train-ranks) round-trips its cycle, steps, seed,
 *     model and every shard; every truncation and a flipped byte are
 *     refused, and so are, resealed, an absolute or ".." path (the follower
 *     opens them under the run directory), a model not older than the
 *     cycle and a shard count the bytes cannot hold; a training report
 *     round-trips its figures and text.
 */
#include "sp_test.h"

#include <xxhash.h>

#include "compat/bits.h"
#include "selfplay/game.h"
#include "selfplay/ranks.h"
#include "selfplay/wire.h"
#include "sp_hash_net.h"

/* a and b hold the same game, rows included. */
static void same_record(const sp_record_t *a, const sp_record_t *b, int k) {
    CHECKF(a->n_moves == b->n_moves && a->n_rows == b->n_rows && a->n_pol == b->n_pol,
           "game %d: %d moves %d rows %lld policies, decoded %d %d %lld", k, a->n_moves, a->n_rows, (long long)a->n_pol,
           b->n_moves, b->n_rows, (long long)b->n_pol);
    if (a->n_moves != b->n_moves || a->n_rows != b->n_rows || a->n_pol != b->n_pol) return;
    CHECKF(!memcmp(a->moves, b->moves, (size_t)a->n_moves * sizeof *a->moves), "game %d: moves differ", k);
    CHECKF(a->result == b->result && a->end == b->end && a->random_plies == b->random_plies &&
               a->full_rows == b->full_rows && a->no_resign == b->no_resign && a->would_resign == b->would_resign &&
               a->false_resign == b->false_resign,
           "game %d: result/end/opening/resignation fields differ", k);
    CHECKF(a->n_gens == b->n_gens && sp_record_main_gen(a) == sp_record_main_gen(b), "game %d: nets differ", k);
    int bad = 0;
    for (int32_t i = 0; i < a->n_rows; i++) {
        const sp_row_t *x = &a->rows[i], *y = &b->rows[i];
        bad += x->ply != y->ply || x->move != y->move || x->root_q != y->root_q || x->pol_n != y->pol_n ||
               x->surprise != y->surprise ||
               x->pol_begin != y->pol_begin || memcmp(x->packed, y->packed, sizeof x->packed) ||
               memcmp(x->hand, y->hand, sizeof x->hand) || memcmp(x->legal, y->legal, sizeof x->legal) ||
               memcmp(x->position, y->position, sizeof x->position);
    }
    CHECKF(bad == 0, "game %d: %d of %d rows differ after decode", k, bad, a->n_rows);
    CHECKF(!memcmp(a->pol_label, b->pol_label, (size_t)a->n_pol * sizeof *a->pol_label) &&
               !memcmp(a->pol_prob, b->pol_prob, (size_t)a->n_pol * sizeof *a->pol_prob),
           "game %d: policies differ", k);
}

/* Recomputes the trailing XXH3 after an edit. */
static void reseal(uint8_t *buf, int64_t len) {
    uint64_t h = XXH3_64bits(buf, (size_t)(len - 8));
    for (int i = 0; i < 8; i++) buf[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

static void refused(const uint8_t *buf, int64_t len, const char *what, const char *want) {
    char err[512] = "";
    sp_record_t *r = sp_wire_game_decode(buf, len, err, sizeof err);
    CHECKF(!r && err[0] && (!want || strstr(err, want)), "%s: %s (error '%s', want '%s')", what,
           r ? "accepted" : "refused with the wrong error", err, want ? want : "any");
    sp_record_free(r);
}

static void test_games(void) {
    sp_config_t cfg;
    sp_config_default(&cfg);
    cfg.visits = 16;
    cfg.visits_fast = 8;
    cfg.full_prob = 0.5;
    cfg.max_ply = 120;
    cfg.resign_threshold = 0.0;
    sp_game_t *g = sp_game_new(&cfg, 7, NULL);
    CHECK(g != NULL);
    if (!g) return;
    char err[512];
    for (int k = 0; k < 4; k++) {
        sp_record_t *r = sp_hash_play_game(g, 3 + k);
        CHECKF(r != NULL, "game %d did not end", k);
        if (!r) break;
        int64_t len = 0;
        uint8_t *msg = sp_wire_game_encode(r, &len);
        CHECK(msg != NULL && len > 16);
        sp_record_t *d = sp_wire_game_decode(msg, len, err, sizeof err);
        CHECKF(d != NULL, "game %d: decode: %s", k, err);
        if (d) same_record(r, d, k);
        sp_record_free(d);
        if (k == 0) {
            /* every truncation, and a flipped bit every 7 bytes */
            int accepted = 0;
            for (int64_t n = 0; n < len; n++) {
                sp_record_t *t = sp_wire_game_decode(msg, n, err, sizeof err);
                accepted += t != NULL;
                sp_record_free(t);
            }
            CHECKF(accepted == 0, "%d truncated game messages accepted", accepted);
            for (int64_t i = 0; i < len; i += 7) {
                msg[i] ^= 0x10;
                sp_record_t *t = sp_wire_game_decode(msg, len, err, sizeof err);
                accepted += t != NULL;
                sp_record_free(t);
                msg[i] ^= 0x10;
            }
            CHECKF(accepted == 0, "%d game messages with a flipped bit accepted", accepted);
            /* well sealed but wrong inside: header is 8 bytes, then n_moves n_rows n_pol (u32), 5 bytes, 2 u32,
             * n_gens x 12 bytes, then the moves (u16) */
            int64_t moves_at = 8 + 12 + 5 + 8 + (int64_t)r->n_gens * 12;
            uint8_t *bad = malloc((size_t)len);
            memcpy(bad, msg, (size_t)len);
            bad[moves_at] ^= 0x5a, bad[moves_at + 1] ^= 0x01; /* the first move, garbled */
            reseal(bad, len);
            refused(bad, len, "an illegal first move", "is not legal here");
            memcpy(bad, msg, (size_t)len);
            bad[8] = (uint8_t)(bad[8] + 1); /* one move more than the message holds */
            reseal(bad, len);
            refused(bad, len, "a move count that does not fill the message", "do not fill");
            if (r->n_gens > 0) { /* the first net's generation 0 */
                memcpy(bad, msg, (size_t)len);
                memset(bad + 8 + 12 + 5 + 8, 0, 8);
                reseal(bad, len);
                refused(bad, len, "a net of generation 0", "generation 0");
            }
            if (r->n_rows > 0) { /* the first row's policy surprise (ply u16, value f32, entries u32, surprise f32) */
                memcpy(bad, msg, (size_t)len);
                float neg = -0.5f;
                memcpy(bad + moves_at + 2 * (int64_t)r->n_moves + 10, &neg, 4);
                reseal(bad, len);
                refused(bad, len, "a negative policy surprise", "policy surprise");
            }
            if (r->n_pol > 0) { /* the last policy entry's label past 2186 */
                memcpy(bad, msg, (size_t)len);
                int64_t at = len - 8 - 6;
                bad[at] = 0xff, bad[at + 1] = 0xff;
                reseal(bad, len);
                refused(bad, len, "a policy label past 2186", "policy entry");
            }
            free(bad);
        }
        free(msg);
        sp_record_free(r);
    }
    sp_game_free(g);
}

static void test_net(void) {
    uint8_t file[5000];
    for (int i = 0; i < (int)sizeof file; i++) file[i] = (uint8_t)(i * 131 + 7);
    uint64_t h = XXH3_64bits(file, sizeof file);
    int64_t len = 0;
    uint8_t *msg = sp_wire_net_encode(12, 0xabcdefull, h, file, sizeof file, &len);
    CHECK(msg != NULL);
    if (!msg) return;
    int64_t cycle = -1, n = 0;
    uint64_t seed = 0, x = 0;
    const uint8_t *got = NULL;
    char err[512] = "";
    CHECKF(sp_wire_net_decode(msg, len, &cycle, &seed, &x, &got, &n, err, sizeof err) == 0, "net decode: %s", err);
    CHECK(cycle == 12 && seed == 0xabcdefull && x == h && n == (int64_t)sizeof file && got &&
          !memcmp(got, file, sizeof file));
    /* a file byte changed and the message resealed: its bytes no longer hash to the announced XXH3 */
    msg[len - 100] ^= 1;
    reseal(msg, len);
    err[0] = 0;
    CHECKF(sp_wire_net_decode(msg, len, &cycle, &seed, &x, &got, &n, err, sizeof err) != 0 && strstr(err, "XXH3"),
           "a net whose bytes do not match its XXH3: '%s'", err);
    CHECK(sp_wire_net_decode(msg, len / 2, &cycle, &seed, &x, &got, &n, err, sizeof err) != 0);
    free(msg);
}

static void test_small(void) {
    uint8_t buf[SP_WIRE_SMALL_MAX];
    char err[256];
    sp_wire_hello_t h = {.pid = 4242, .device = 1}, h2;
    snprintf(h.host, sizeof h.host, "node-017.cluster");
    snprintf(h.backend, sizeof h.backend, "cuda");
    int64_t n = sp_wire_hello_encode(&h, buf);
    CHECK(n > 0 && n <= SP_WIRE_SMALL_MAX);
    CHECKF(sp_wire_hello_decode(buf, n, &h2, err, sizeof err) == 0, "hello: %s", err);
    CHECK(h2.pid == 4242 && h2.device == 1 && !strcmp(h2.host, h.host) && !strcmp(h2.backend, "cuda"));
    CHECK(sp_wire_hello_decode(buf, n - 9, &h2, err, sizeof err) != 0);
    sp_wire_stats_t s = {.searches = 123456789012ll, .evaluated = 5, .batches = 6, .games = 7, .generation = 8,
                         .active = 9},
                    s2;
    n = sp_wire_stats_encode(&s, buf);
    CHECKF(sp_wire_stats_decode(buf, n, &s2, err, sizeof err) == 0, "stats: %s", err);
    CHECK(s2.searches == s.searches && s2.evaluated == 5 && s2.batches == 6 && s2.games == 7 && s2.generation == 8 &&
          s2.active == 9);
    buf[3] ^= 1;
    CHECK(sp_wire_stats_decode(buf, n, &s2, err, sizeof err) != 0);
    int32_t v = 0;
    n = sp_wire_int_encode(130, buf);
    CHECK(sp_wire_int_decode(buf, n, &v, err, sizeof err) == 0 && v == 130);
    CHECK(sp_wire_int_decode(buf, 3, &v, err, sizeof err) != 0);
}

/* The tree nets go down (--net-fanout): every rank but 0 is reached exactly
 * once, from its parent (r - 1) / F, within ceil(log_F) levels; F = 0 is the
 * star (rank 0 to every rank). */
static void test_tree(void) {
    const int32_t sizes[] = {1, 2, 3, 9, 10, 100, 1000};
    const int32_t fans[] = {0, 1, 2, 8, 64};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t fi = 0; fi < sizeof fans / sizeof *fans; fi++) {
            int32_t N = sizes[si], F = fans[fi], kids[1000];
            int32_t *hits = calloc((size_t)N, sizeof *hits), *depth = calloc((size_t)N, sizeof *depth), maxd = 0;
            for (int32_t r = 0; r < N; r++) { /* parents before children: depth in one pass */
                int32_t n = sp_ranks_children(r, N, F, kids, 1000);
                CHECKF(n <= (F ? F : N - 1) && (F || r == 0 || n == 0), "N %d F %d: rank %d has %d children", N, F, r, n);
                for (int32_t i = 0; i < n; i++) {
                    int32_t c = kids[i];
                    CHECKF(c > r && c < N && (F ? (c - 1) / F == r : r == 0), "N %d F %d: rank %d -> %d", N, F, r, c);
                    if (c > r && c < N) hits[c]++, depth[c] = depth[r] + 1, maxd = depth[c] > maxd ? depth[c] : maxd;
                }
            }
            for (int32_t r = 1; r < N; r++) CHECKF(hits[r] == 1, "N %d F %d: rank %d reached %d times", N, F, r, hits[r]);
            int32_t levels = 0; /* ranks within L levels: F + F^2 + ... + F^L */
            for (int64_t reach = 0, pw = 1; reach < N - 1; levels++) pw *= F > 0 ? F : N, reach += pw;
            CHECKF(F == 1 ? maxd == N - 1 : maxd == levels, "N %d F %d: %d levels (want %d)", N, F, maxd, levels);
            free(hits), free(depth);
        }
    int32_t k[4];
    CHECK(sp_ranks_children(0, 10, 8, k, 4) == 4); /* max respected */
}

static void test_plan(void) {
    db_shard_t sh[3];
    memset(sh, 0, sizeof sh);
    for (int i = 0; i < 3; i++) {
        sh[i].id = 100 + i, sh[i].cycle = i + 1, sh[i].features_version = 7, sh[i].rows = 1000 * (i + 1);
        snprintf(sh[i].path, sizeof sh[i].path, "shards/c%04d_%06d.safetensors", i + 1, i + 1);
    }
    train_plan_t p = {.cycle = 4, .first = 0, .end = 37, .want = 2500, .batch = 256, .seed = 0x1234567890abcdefull,
                      .model_cycle = 3, .model_steps = 99, .shards = sh, .nshards = 3};
    snprintf(p.model_rel, sizeof p.model_rel, "models/0003.safetensors");
    snprintf(p.model_xxh3, sizeof p.model_xxh3, "0123456789abcdef");
    int64_t len = 0;
    uint8_t *msg = sp_wire_plan_encode(&p, &len);
    CHECK(msg != NULL);
    if (!msg) return;
    sp_wire_plan_t w;
    char err[512] = "";
    CHECKF(sp_wire_plan_decode(msg, len, &w, err, sizeof err) == 0, "plan: %s", err);
    const train_plan_t *q = &w.plan;
    CHECK(q->cycle == 4 && q->first == 0 && q->end == 37 && q->want == 2500 && q->batch == 256 && q->seed == p.seed &&
          q->model_cycle == 3 && q->model_steps == 99 && !strcmp(q->model_rel, p.model_rel) &&
          !strcmp(q->model_xxh3, p.model_xxh3) && q->nshards == 3);
    for (int i = 0; i < 3 && q->nshards == 3; i++)
        CHECKF(q->shards[i].id == sh[i].id && q->shards[i].cycle == sh[i].cycle && q->shards[i].rows == sh[i].rows &&
                   q->shards[i].features_version == 7 && !strcmp(q->shards[i].path, sh[i].path),
               "shard %d differs after the round trip", i);
    sp_wire_plan_free(&w);
    int refused = 0;
    for (int64_t k = 0; k < len; k++) refused += sp_wire_plan_decode(msg, k, &w, err, sizeof err) != 0;
    CHECKF(refused == len, "%d of %lld truncations refused", refused, (long long)len);
    for (int64_t k = 0; k < len; k += 7) {
        msg[k] ^= 0x10;
        CHECKF(sp_wire_plan_decode(msg, len, &w, err, sizeof err) != 0, "byte %lld flipped: accepted", (long long)k);
        msg[k] ^= 0x10;
    }
    free(msg);
    /* well sealed, but wrong inside */
    const char *bad_paths[] = {"/etc/passwd", "../other/models/0003.safetensors", "models/../../x", ".."};
    for (int i = 0; i < 4; i++) {
        train_plan_t b = p;
        snprintf(i % 2 ? sh[1].path : b.model_rel, sizeof b.model_rel, "%s", bad_paths[i]);
        msg = sp_wire_plan_encode(&b, &len);
        err[0] = 0;
        CHECKF(msg && sp_wire_plan_decode(msg, len, &w, err, sizeof err) != 0 && strstr(err, bad_paths[i]),
               "path '%s' accepted (or not named: '%s')", bad_paths[i], err);
        free(msg);
        snprintf(sh[1].path, sizeof sh[1].path, "shards/c0002_000002.safetensors");
    }
    train_plan_t b = p;
    b.model_cycle = 4; /* not older than the cycle */
    msg = sp_wire_plan_encode(&b, &len);
    CHECK(msg && sp_wire_plan_decode(msg, len, &w, err, sizeof err) != 0);
    free(msg);
    b = p;
    b.nshards = 0;
    msg = sp_wire_plan_encode(&b, &len);
    CHECKF(msg && sp_wire_plan_decode(msg, len, &w, err, sizeof err) == 0 && w.plan.nshards == 0, "no shards: %s", err);
    sp_wire_plan_free(&w);
    if (msg) { /* a count of 3 with no entries after it */
        msg[len - 12] = 3;
        reseal(msg, len);
        CHECK(sp_wire_plan_decode(msg, len, &w, err, sizeof err) != 0);
    }
    free(msg);

    uint8_t buf[SP_WIRE_TRAINED_MAX];
    sp_wire_trained_t t = {.cycle = 5, .steps = 40, .positions = 12345, .weights = 0xfeedfacecafebeefull, .ms = 1500,
                           .status = SP_TRAINED_FAILED, .loaded = 1}, t2;
    memset(t.text, 'x', sizeof t.text - 1);
    t.text[sizeof t.text - 1] = 0;
    int64_t n = sp_wire_trained_encode(&t, buf);
    CHECK(n > 0 && n <= SP_WIRE_TRAINED_MAX);
    CHECKF(sp_wire_trained_decode(buf, n, &t2, err, sizeof err) == 0, "trained: %s", err);
    CHECK(t2.cycle == 5 && t2.steps == 40 && t2.positions == 12345 && t2.weights == t.weights && t2.ms == 1500 &&
          t2.status == SP_TRAINED_FAILED && t2.loaded == 1 && !strcmp(t2.text, t.text));
    CHECK(sp_wire_trained_decode(buf, n - 1, &t2, err, sizeof err) != 0);
}

int main(void) {
    test_tree();
    test_plan();
    test_games();
    test_net();
    test_small();
    return t_done("test_selfplay_wire");
}
