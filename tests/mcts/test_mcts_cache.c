/* test_mcts_cache.c - the network result cache:
 *   - a hit returns exactly what was stored (moves left included); a query that differs in key,
 *     move-list checksum or move count misses (so no query ever reads
 *     another position's data or past its own length);
 *   - a one-slot table and a small ring force collisions and overwrites:
 *     thousands of mixed puts/gets never return wrong data;
 *   - a search with a cache gives the same result as one without (also with
 *     a one-slot cache), and a repeated search is served from the cache.
 *     One leaf per step: a hit is backed up inside mcts_collect while a
 *     network leaf waits for delivery, so with larger batches the two
 *     searches legitimately take different paths;
 *   - several threads sharing one cache (run under TSan by the CI job).
 */
#include "mcts_test.h"

#include "compat/bits.h"
#include "compat/compat.h"

static pos_t pos;
static mcts_result_t res, res2;

/* Entry content derived from (key, n) so any returned data can be checked. */
static void make_entry(uint64_t key, int32_t n, uint16_t *q, float wdl[3]) {
    for (int32_t i = 0; i < n; i++) q[i] = (uint16_t)(t_mix64(key + (uint64_t)i) & 0xFFFF);
    wdl[0] = (float)(key & 255);
    wdl[1] = (float)n;
    wdl[2] = (float)((key >> 8) & 255);
}

static float ml_of(uint64_t key) { return (float)(key % 301) + 0.25f; }

static bool entry_ok(uint64_t key, int32_t n, const uint16_t *q, const float wdl[3], float ml) {
    uint16_t want[MCTS_CACHE_MOVES_MAX];
    float w[3];
    make_entry(key, n, want, w);
    return memcmp(q, want, (size_t)n * 2) == 0 && memcmp(w, wdl, sizeof w) == 0 && ml == ml_of(key);
}

static uint32_t check_of(uint64_t key) { return (uint32_t)(key * 2654435761u); }

static void test_basic(void) {
    mcts_cache_t *c = mcts_cache_new(1 << 20);
    CHECKF(c != NULL, "cache_new");
    uint16_t q[MCTS_CACHE_MOVES_MAX], got[MCTS_CACHE_MOVES_MAX + 8];
    float wdl[3], gw[3];
    make_entry(42, 30, q, wdl);
    float gm = 0.0f;
    mcts_cache_put(c, 42, check_of(42), 30, q, wdl, ml_of(42));
    memset(got, 0xAB, sizeof got);
    CHECKF(mcts_cache_get(c, 42, check_of(42), 30, got, gw, &gm) && entry_ok(42, 30, got, gw, gm), "hit returns the entry");
    CHECKF(got[30] == 0xABAB, "a hit wrote past n");
    CHECKF(!mcts_cache_get(c, 43, check_of(42), 30, got, gw, NULL), "other key hit");
    CHECKF(!mcts_cache_get(c, 42, check_of(42) ^ 1, 30, got, gw, NULL), "other move checksum hit");
    CHECKF(!mcts_cache_get(c, 42, check_of(42), 31, got, gw, NULL), "other move count hit");
    CHECKF(!mcts_cache_get(c, 42, check_of(42), 29, got, gw, NULL), "shorter move count hit");
    CHECKF(!mcts_cache_get(c, 42, check_of(42), 0, got, gw, NULL) &&
               !mcts_cache_get(c, 42, check_of(42), 100000, got, gw, NULL),
           "out-of-range n accepted");
    /* Largest list fits and round-trips. */
    make_entry(7, MCTS_CACHE_MOVES_MAX, q, wdl);
    mcts_cache_put(c, 7, check_of(7), MCTS_CACHE_MOVES_MAX, q, wdl, ml_of(7));
    CHECKF(mcts_cache_get(c, 7, check_of(7), MCTS_CACHE_MOVES_MAX, got, gw, &gm) &&
               entry_ok(7, MCTS_CACHE_MOVES_MAX, got, gw, gm),
           "largest entry");
    mcts_cache_clear(c);
    CHECKF(!mcts_cache_get(c, 7, check_of(7), MCTS_CACHE_MOVES_MAX, got, gw, NULL), "hit after clear");
    mcts_cache_stats_t st;
    mcts_cache_stats(c, &st);
    CHECKF(st.lookups == 7 && st.hits == 2 && st.inserts == 2, "stats %llu %llu %llu", (unsigned long long)st.lookups,
           (unsigned long long)st.hits, (unsigned long long)st.inserts);
    mcts_cache_free(c);
    mcts_cache_free(NULL);
}

static void test_collisions(void) {
    /* One slot, a 4 KiB ring: every put evicts, the ring wraps every few puts. */
    for (int geometry = 0; geometry < 2; geometry++) {
        mcts_cache_t *c = geometry == 0 ? mcts_cache_new_geometry(1, 1, 4096) : mcts_cache_new_geometry(2, 8, 8192);
        uint64_t s = 12345;
        int64_t hits = 0, wrong = 0;
        uint16_t q[MCTS_CACHE_MOVES_MAX], got[MCTS_CACHE_MOVES_MAX];
        float wdl[3], gw[3], gm = 0.0f;
        uint64_t last_key = 0;
        int32_t last_n = 0;
        for (int i = 0; i < 20000; i++) {
            s = t_mix64(s);
            uint64_t key = s % 64; /* few keys: many repeats and slot collisions */
            int32_t n = 1 + (int32_t)(t_mix64(key) % 300);
            if (s & (1ull << 40)) {
                make_entry(key, n, q, wdl);
                mcts_cache_put(c, key, check_of(key), n, q, wdl, ml_of(key));
                last_key = key, last_n = n;
            } else {
                /* Ask with the right n or a wrong one. */
                int32_t qn = (s >> 50) & 1 ? n : n + 1;
                if (mcts_cache_get(c, key, check_of(key), qn, got, gw, &gm)) {
                    hits++;
                    if (qn != n || !entry_ok(key, n, got, gw, gm)) wrong++;
                }
            }
            /* The entry just stored is always there. */
            if (last_n && !(mcts_cache_get(c, last_key, check_of(last_key), last_n, got, gw, &gm) &&
                            entry_ok(last_key, last_n, got, gw, gm)))
                wrong++;
        }
        CHECKF(wrong == 0, "geometry %d: %lld wrong or missing entries", geometry, (long long)wrong);
        CHECKF(hits > 50, "geometry %d: only %lld hits", geometry, (long long)hits);
        mcts_cache_free(c);
    }
    CHECKF(mcts_cache_new_geometry(1, 3, 4096) == NULL, "slots not a power of two accepted");
    CHECKF(mcts_cache_new_geometry(1, 1, 100) == NULL, "ring smaller than an entry accepted");
}

static void test_search_equivalence(void) {
    static const char *sfens[] = {"startpos", "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2",
                                  "ln1g1g1nl/1ks2r3/1pppp1bpp/p3spp2/9/P1P1P1P1P/1PSP1P1P1/1BK1GS1R1/LN1G3NL b - 1"};
    for (size_t k = 0; k < sizeof sfens / sizeof sfens[0]; k++) {
        set_sfen(&pos, sfens[k]);
        for (int gumbel = 0; gumbel <= 1; gumbel++) {
            mcts_params_t p;
            mcts_params_default(&p);
            p.root_mode = gumbel ? MCTS_ROOT_GUMBEL : MCTS_ROOT_PUCT;
            p.search_batch = 1;
            mcts_cache_t *big = mcts_cache_new(8 << 20);
            mcts_cache_t *tiny = mcts_cache_new_geometry(1, 1, 4096);
            mcts_tree_t *plain = mcts_tree_new(&p, NULL);
            mcts_tree_t *cached = mcts_tree_new(&p, big);
            mcts_tree_t *small = mcts_tree_new(&p, tiny);
            mcts_limits_t l = {.visits = 400, .full = 1};
            eval_stats_t s1 = {0}, s2 = {0}, s3 = {0};
            mcts_tree_set_position(plain, &pos);
            mcts_search(plain, &l, eval_hash, &s1, &res);
            int64_t first_round = 0;
            for (int round = 0; round < 2; round++) {
                if (round == 1) first_round = s2.leaves;
                mcts_tree_set_position(cached, &pos);
                mcts_search(cached, &l, eval_hash, &s2, &res2);
                bool same = res.n == res2.n && res.best == res2.best && res.root_q == res2.root_q &&
                            memcmp(res.visits, res2.visits, sizeof(int32_t) * (size_t)res.n) == 0 &&
                            memcmp(res.policy, res2.policy, sizeof(float) * (size_t)res.n) == 0 &&
                            memcmp(res.q, res2.q, sizeof(float) * (size_t)res.n) == 0;
                CHECKF(same, "%s gumbel %d round %d: cached search differs from plain", sfens[k], gumbel, round);
            }
            /* The repeat came from the cache: (almost) no leaf evaluated again. */
            CHECKF(first_round <= s1.leaves && s2.leaves - first_round <= s1.leaves / 50,
                   "%s: repeated search evaluated %lld leaves (first %lld, plain %lld)", sfens[k],
                   (long long)(s2.leaves - first_round), (long long)first_round, (long long)s1.leaves);
            CHECKF(res2.cache_hits > 0, "%s: no cache hits on the repeated search", sfens[k]);
            mcts_tree_set_position(small, &pos);
            mcts_search(small, &l, eval_hash, &s3, &res2);
            CHECKF(res.best == res2.best && memcmp(res.visits, res2.visits, sizeof(int32_t) * (size_t)res.n) == 0 &&
                      memcmp(res.policy, res2.policy, sizeof(float) * (size_t)res.n) == 0,
                   "%s gumbel %d: one-slot cache changed the search", sfens[k], gumbel);
            mcts_tree_free(plain);
            mcts_tree_free(cached);
            mcts_tree_free(small);
            mcts_cache_free(big);
            mcts_cache_free(tiny);
        }
    }
}

/* ---- threads ------------------------------------------------------------------------------- */

typedef struct {
    mcts_cache_t *cache;
    int seed;
    int ok;
    move_t best;
    int32_t visits[MCTS_MOVES_MAX];
} test_worker_t;

static void *worker(void *arg) {
    test_worker_t *w = arg;
    static KOMA_THREAD_LOCAL pos_t p;
    static KOMA_THREAD_LOCAL mcts_result_t r;
    mcts_params_t par;
    mcts_params_default(&par);
    par.search_batch = 1;
    mcts_tree_t *t = mcts_tree_new(&par, w->cache);
    pos_set_startpos(&p);
    w->ok = 1;
    for (int i = 0; i < 4; i++) {
        mcts_tree_set_position(t, &p);
        mcts_limits_t l = {.visits = 300, .full = 1};
        mcts_search(t, &l, eval_hash, NULL, &r);
        if (i == 0) {
            w->best = r.best;
            memcpy(w->visits, r.visits, sizeof(int32_t) * (size_t)r.n);
        } else if (r.best != w->best || memcmp(w->visits, r.visits, sizeof(int32_t) * (size_t)r.n) != 0) {
            w->ok = 0;
        }
    }
    mcts_tree_free(t);
    return NULL;
}

static void test_threads(void) {
    mcts_cache_t *c = mcts_cache_new(1 << 20); /* small: heavy eviction while shared */
    enum { N = 4 };
    static test_worker_t w[N];
    compat_thread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i].cache = c;
        w[i].seed = i;
        CHECKF(compat_thread_create(&th[i], worker, &w[i]) == 0, "thread create");
    }
    for (int i = 0; i < N; i++) compat_thread_join(th[i]);
    for (int i = 0; i < N; i++) {
        CHECKF(w[i].ok, "thread %d: searches with a shared cache differ", i);
        CHECKF(w[i].best == w[0].best && memcmp(w[i].visits, w[0].visits, sizeof w[0].visits) == 0,
               "thread %d differs from thread 0", i);
    }
    mcts_cache_stats_t st;
    mcts_cache_stats(c, &st);
    CHECKF(st.hits > 0 && st.inserts > 0, "shared cache unused");
    mcts_cache_free(c);
}

int main(void) {
    test_basic();
    test_collisions();
    test_search_equivalence();
    test_threads();
    return t_done("test_mcts_cache");
}
