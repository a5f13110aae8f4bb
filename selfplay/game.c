/* game.c - one self-play game slot and its record; see game.h. */
#include "selfplay/game.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "data/shard_pos.h"
#include "engine/dfpn.h"
#include "engine/movegen.h"
#include "engine/sfen.h"
#include "match/referee.h"

typedef enum { GAME_IDLE = 0, GAME_PLAYING, GAME_ENDED } game_state_t;

struct sp_game {
    const sp_config_t *cfg;
    mcts_tree_t *tree;
    mcts_rng_t rng;
    game_state_t state;
    bool searching;
    bool gumbel;
    int32_t random_left;       /* random opening moves still to play */
    int32_t streak[COLOR_NB];  /* own searches in a row below the resign threshold */
    int64_t gen_cur;           /* newest generation delivered to the current search */
    sp_record_t *rec;          /* the game being played (or ended, until taken) */
    sp_game_stats_t stats;
    pos_t *scratch;         /* the start position; without tree reuse the next root; df-pn's copy */
    dfpn_t *dfpn;           /* the root mate search (cfg->dfpn_nodes > 0), else NULL */
    dfpn_result_t dfpn_res;
    mcts_result_t res;
};

enum { SP_DFPN_TT_BYTES = 1 << 20 }; /* each slot's df-pn table */

/* ---- records ------------------------------------------------------------------- */

static void *grow(void *p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return p;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(p, (size_t)c * elem);
    KOMA_ASSERT(q != NULL); /* out of memory in a game record: nothing sensible to do */
    *cap = c;
    return q;
}

static sp_record_t *record_new(void) {
    sp_record_t *r = calloc(1, sizeof *r);
    KOMA_ASSERT(r != NULL);
    r->would_resign = COLOR_NB;
    r->end = RULES_END_NONE;
    return r;
}

void sp_row_encode(sp_row_t *w, const pos_t *pos) {
    encode_position(pos, w->packed, w->hand);
    encode_legal_mask(pos, w->legal);
    shard_position_t sp;
    memcpy(sp.board, pos->board, sizeof sp.board);
    sp.side = (uint8_t)pos_side_to_move(pos);
    sp.ply = (uint16_t)pos_game_ply(pos);
    sp.hand[0] = pos_hand(pos, COLOR_BLACK);
    sp.hand[1] = pos_hand(pos, COLOR_WHITE);
    shard_position_pack(&sp, w->position);
    shard_pos_hcp(pos, w->hcp);
}

void sp_record_free(sp_record_t *r) {
    if (!r) return;
    free(r->moves);
    free(r->rows);
    free(r->pol_label);
    free(r->pol_prob);
    free(r);
}

int64_t sp_record_main_gen(const sp_record_t *r) {
    int64_t g = 0;
    int32_t best = -1;
    for (int32_t i = 0; i < r->n_gens; i++)
        if (r->gen_moves[i] > best || (r->gen_moves[i] == best && r->gens[i] > g)) best = r->gen_moves[i], g = r->gens[i];
    return g;
}

char *sp_record_usi(const sp_record_t *r) {
    size_t cap = (size_t)r->n_moves * MOVE_USI_MAX + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = 0;
    for (int32_t i = 0; i < r->n_moves; i++) {
        if (i) s[len++] = ' ';
        len += (size_t)move_to_usi(r->moves[i], s + len);
    }
    s[len] = 0;
    return s;
}

int sp_record_add_to_shard(const sp_record_t *r, shard_builder_t *b, int64_t model_id, int32_t rank, const char *host,
                           char *err, size_t errlen) {
    for (int32_t i = 0; i < r->n_rows; i++) {
        const sp_row_t *w = &r->rows[i];
        shard_row_t row = {
            .planes = w->packed,
            .hand = w->hand,
            .legal = w->legal,
            .policy_label = w->pol_n ? r->pol_label + w->pol_begin : NULL,
            .policy_prob = w->pol_n ? r->pol_prob + w->pol_begin : NULL,
            .policy_n = (int32_t)w->pol_n,
            .root_q = w->root_q,
            .ply = w->ply,
            .move = w->move,
            .position = w->position,
            .surprise = w->surprise >= 0 ? &w->surprise : NULL,
            .hcp = w->hcp,
        };
        if (shard_builder_add_row(b, &row, err, errlen) != 0) {
            shard_builder_abort_game(b);
            return -1;
        }
    }
    char *moves = sp_record_usi(r);
    if (!moves) {
        set_err(err, errlen, "out of memory for a game's moves");
        shard_builder_abort_game(b);
        return -1;
    }
    db_reason_t reason = ref_db_reason(r->end);
    db_game_t g = {
        .model_id = model_id,
        .start_sfen = "startpos",
        .moves = moves,
        .plies = r->n_moves,
        .result = r->result,
        .reason = reason,
        .rank = rank,
        .host = host,
    };
    int rc = shard_builder_end_game(b, &g, err, errlen);
    free(moves);
    if (rc != 0) shard_builder_abort_game(b);
    return rc;
}

/* ---- temperature ------------------------------------------------------------------ */

double sp_temperature(const sp_config_t *cfg, int32_t ply) {
    if (ply < 0 || ply >= cfg->temp_plies) return 0.0;
    double f = (double)ply / (double)cfg->temp_plies;
    return cfg->temp_start * pow(cfg->temp_end / cfg->temp_start, f);
}

int32_t sp_sample_policy(mcts_rng_t *rng, const float *p, int32_t n, double temp) {
    KOMA_ASSERT(n > 0);
    if (n == 1) return 0;
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (p[i] > p[best]) best = i;
    if (!(temp > 0.0) || !(p[best] > 0.0f)) return best;
    /* p^(1/T) in log space relative to the largest: no overflow at small T. */
    double lmax = log((double)p[best]), tot = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (p[i] > 0.0f) tot += exp((log((double)p[i]) - lmax) / temp);
    double u = mcts_rng_uniform(rng) * tot, acc = 0.0;
    int32_t last = best;
    for (int32_t i = 0; i < n; i++) {
        if (!(p[i] > 0.0f)) continue;
        acc += exp((log((double)p[i]) - lmax) / temp);
        last = i;
        if (u < acc) return i;
    }
    return last;
}

/* ---- the slot ---------------------------------------------------------------------- */

sp_game_t *sp_game_new(const sp_config_t *cfg, uint64_t seed, mcts_cache_t *cache) {
    sp_game_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = cfg;
    mcts_params_t p;
    sp_config_mcts(cfg, seed, &p);
    g->gumbel = p.root_mode == MCTS_ROOT_GUMBEL;
    g->tree = mcts_tree_new(&p, cache);
    g->scratch = malloc(sizeof(pos_t));
    if (cfg->dfpn_nodes > 0) g->dfpn = dfpn_new(SP_DFPN_TT_BYTES);
    if (!g->tree || !g->scratch || (cfg->dfpn_nodes > 0 && !g->dfpn)) {
        sp_game_free(g);
        return NULL;
    }
    mcts_rng_seed(&g->rng, seed ^ 0x5eedf00dcafe1234ull);
    return g;
}

void sp_game_free(sp_game_t *g) {
    if (!g) return;
    mcts_tree_free(g->tree);
    sp_record_free(g->rec);
    free(g->scratch);
    dfpn_free(g->dfpn);
    free(g);
}

const sp_game_stats_t *sp_game_stats(const sp_game_t *g) { return &g->stats; }
const mcts_tree_t *sp_game_tree(const sp_game_t *g) { return g->tree; }
bool sp_game_active(const sp_game_t *g) { return g->state == GAME_PLAYING; }

void sp_game_begin(sp_game_t *g) {
    pos_set_startpos(g->scratch);
    mcts_tree_set_position(g->tree, g->scratch);
    sp_record_free(g->rec);
    g->rec = record_new();
    g->state = GAME_PLAYING;
    g->searching = false;
    g->streak[0] = g->streak[1] = 0;
    g->gen_cur = 0;
    const sp_config_t *c = g->cfg;
    g->random_left = c->random_opening > 0 ? (int32_t)(mcts_rng_u64(&g->rng) % (uint64_t)(c->random_opening + 1)) : 0;
    g->rec->no_resign = c->resign_threshold <= 0.0 || mcts_rng_uniform(&g->rng) < c->no_resign_fraction;
}

static void push_move(sp_game_t *g, move_t m) {
    sp_record_t *r = g->rec;
    int64_t cap = r->cap_moves;
    r->moves = grow(r->moves, &cap, r->n_moves + 1, sizeof(move_t));
    r->cap_moves = (int32_t)cap;
    r->moves[r->n_moves++] = m;
}

/* Plays m at the root (keeping the subtree when tree reuse is on). */
static void play(sp_game_t *g, move_t m) {
    if (g->cfg->tree_reuse) {
        mcts_tree_advance(g->tree, m);
    } else {
        pos_copy(g->scratch, mcts_tree_position(g->tree));
        pos_do_move(g->scratch, m);
        mcts_tree_set_position(g->tree, g->scratch);
    }
    push_move(g, m);
}

static void end_game(sp_game_t *g, rules_end_t end, color_t winner) {
    sp_record_t *r = g->rec;
    r->end = end;
    r->result = winner == COLOR_BLACK ? 1 : winner == COLOR_WHITE ? -1 : 0;
    if (r->no_resign && r->would_resign != COLOR_NB) {
        color_t loser = r->result > 0 ? COLOR_WHITE : r->result < 0 ? COLOR_BLACK : COLOR_NB;
        r->false_resign = loser != r->would_resign;
    }
    g->state = GAME_ENDED;
    g->searching = false;
}

static void count_gen(sp_record_t *r, int64_t gen) {
    for (int32_t i = 0; i < r->n_gens; i++)
        if (r->gens[i] == gen) {
            r->gen_moves[i]++;
            return;
        }
    if (r->n_gens < SP_GENS_MAX) {
        r->gens[r->n_gens] = gen;
        r->gen_moves[r->n_gens++] = 1;
        return;
    }
    /* More nets than slots in one game (a tiny cycle): replace the least used. */
    int32_t k = 0;
    for (int32_t i = 1; i < SP_GENS_MAX; i++)
        if (r->gen_moves[i] < r->gen_moves[k]) k = i;
    r->gens[k] = gen;
    r->gen_moves[k] = 1;
}

/* Policy surprise (KataGo): KL(policy target || prior) over the root's moves,
 * the prior being what the network gave the root's children (without noise). */
static float policy_surprise(const mcts_result_t *res) {
    double kl = 0.0;
    for (int32_t i = 0; i < res->n; i++) {
        double p = res->policy[i];
        if (!(p > 0.0)) continue;
        double q = res->prior[i] > 1e-30f ? (double)res->prior[i] : 1e-30;
        kl += p * log(p / q);
    }
    return kl > 0.0 ? (float)kl : 0.0f; /* >= 0 up to rounding */
}

/* The search at the root is over: resign, or record a row and play a move. */
static void finish_move(sp_game_t *g) {
    mcts_result_t *res = &g->res;
    mcts_search_result(g->tree, res);
    const sp_config_t *c = g->cfg;
    sp_record_t *r = g->rec;
    const pos_t *pos = mcts_tree_position(g->tree);
    KOMA_ASSERT(res->n > 0 && res->best != MOVE_NONE); /* rules_status saw a legal move */
    g->searching = false;
    g->stats.searches++;
    g->stats.playouts += res->playouts;
    g->stats.cache_hits += res->cache_hits;
    bool full = res->full_search && res->n > 1 && res->stop != MCTS_STOP_SINGLE;
    g->stats.full_searches += full;

    float v = g->gumbel ? res->policy_q : res->root_q;
    if (!(v == v)) v = 0.0f;
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    color_t side = pos_side_to_move(pos);
    if (c->resign_threshold > 0.0 && res->n > 1) {
        /* The win probability of the side to move, as USI's ResignThreshold reads it. */
        g->streak[side] = 0.5 * (1.0 + (double)v) < c->resign_threshold ? g->streak[side] + 1 : 0;
        if (g->streak[side] >= c->resign_consecutive) {
            if (!r->no_resign) {
                end_game(g, RULES_END_RESIGN, color_flip(side));
                return;
            }
            if (r->would_resign == COLOR_NB) r->would_resign = side;
        }
    }

    int32_t ply = r->n_moves;
    double temp = sp_temperature(c, ply);
    move_t m = res->best;
    if (temp > 0.0 && res->n > 1) m = res->moves[sp_sample_policy(&g->rng, res->policy, res->n, temp)];

    /* The row of this position. */
    int64_t cap = r->cap_rows;
    r->rows = grow(r->rows, &cap, r->n_rows + 1, sizeof(sp_row_t));
    r->cap_rows = (int32_t)cap;
    sp_row_t *w = &r->rows[r->n_rows++];
    sp_row_encode(w, pos);
    w->root_q = v;
    w->ply = (uint16_t)ply;
    w->move = m;
    w->pol_begin = (uint32_t)r->n_pol;
    w->pol_n = 0;
    w->surprise = SHARD_SURPRISE_UNKNOWN;
    if (full) {
        int64_t pcap = r->cap_pol;
        r->pol_label = grow(r->pol_label, &pcap, r->n_pol + res->n, sizeof(uint16_t));
        pcap = r->cap_pol;
        r->pol_prob = grow(r->pol_prob, &pcap, r->n_pol + res->n, sizeof(float));
        r->cap_pol = pcap;
        for (int32_t i = 0; i < res->n; i++) {
            float p = res->policy[i];
            if (!(p > 0.0f)) continue;
            r->pol_label[r->n_pol] = (uint16_t)res->labels[i];
            r->pol_prob[r->n_pol++] = p;
            w->pol_n++;
        }
        w->surprise = policy_surprise(res);
        r->full_rows++;
    }
    if (g->gen_cur > 0) count_gen(r, g->gen_cur);
    play(g, m);
}

/* The first move of a mate df-pn proves at pos within cfg->dfpn_nodes, or MOVE_NONE. */
static move_t root_mate(sp_game_t *g, const pos_t *pos) {
    dfpn_limits_t lim;
    dfpn_limits_default(&lim);
    lim.max_nodes = g->cfg->dfpn_nodes;
    lim.shorten = false; /* any mate wins the game */
    dfpn_result_t *r = &g->dfpn_res;
    pos_copy(g->scratch, pos);
    dfpn_search(g->dfpn, g->scratch, &lim, r);
    g->stats.dfpn_nodes += r->nodes;
    return r->status == DFPN_PROVEN && r->len > 0 ? r->pv[0] : MOVE_NONE;
}

int32_t sp_game_step(sp_game_t *g, int32_t max, mcts_request_t *out, bool *ended) {
    *ended = false;
    if (g->state == GAME_ENDED) {
        *ended = true;
        return 0;
    }
    if (g->state != GAME_PLAYING) return 0;
    KOMA_ASSERT(mcts_pending(g->tree) == 0);
    const sp_config_t *c = g->cfg;
    for (int32_t idle = 0; idle < 1000000; idle++) {
        if (!g->searching) {
            const pos_t *pos = mcts_tree_position(g->tree);
            rules_status_t st = rules_status(pos, (int32_t)c->max_ply);
            if (st.end == RULES_END_NONE && pos_hist_len(pos) >= POS_HIST_MAX - 2)
                st.end = RULES_END_MAX_PLY, st.winner = COLOR_NB; /* unreachable with max-ply <= 2000 */
            if (st.end != RULES_END_NONE) {
                end_game(g, st.end, st.winner);
                *ended = true;
                return 0;
            }
            if (g->random_left > 0) {
                move_list_t l;
                movegen_legal(pos, &l);
                KOMA_ASSERT(l.n > 0);
                g->random_left--;
                g->rec->random_plies++;
                play(g, l.moves[mcts_rng_u64(&g->rng) % (uint64_t)l.n]);
                continue;
            }
            if (g->dfpn) { /* a mate df-pn proves within its budget is played, without a search or a row */
                move_t m = root_mate(g, pos);
                if (m != MOVE_NONE) {
                    g->stats.dfpn_mates++;
                    play(g, m);
                    continue;
                }
            }
            mcts_search_begin(g->tree, NULL);
            g->searching = true;
            g->gen_cur = 0;
        }
        int32_t n = mcts_collect(g->tree, max, out);
        if (n > 0) {
            g->stats.leaves += n;
            return n;
        }
        if (mcts_search_done(g->tree)) {
            finish_move(g);
            if (g->state == GAME_ENDED) {
                *ended = true;
                return 0;
            }
            continue;
        }
        if (mcts_pending(g->tree) > 0) return 0;
    }
    KOMA_ASSERT(!"a search made no progress in a million collects");
    return 0;
}

void sp_game_deliver(sp_game_t *g, const mcts_request_t *req, const float *move_logits, const float *wdl_logits,
                     int64_t gen) {
    if (mcts_deliver_moves(g->tree, req, move_logits, wdl_logits) && gen > g->gen_cur) g->gen_cur = gen;
}

sp_record_t *sp_game_take_record(sp_game_t *g) {
    if (g->state != GAME_ENDED) return NULL;
    sp_record_t *r = g->rec;
    g->rec = NULL;
    g->state = GAME_IDLE;
    return r;
}
