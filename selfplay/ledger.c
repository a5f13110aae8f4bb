/* ledger.c - the cycle ledger of a selfplay run; see ledger.h. */
#include "selfplay/ledger.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

void sp_ledger_init(sp_ledger_t *l, int64_t target, int64_t games_per_cycle) {
    memset(l, 0, sizeof *l);
    l->target = target;
    l->games_per_cycle = games_per_cycle;
    l->fill = 1;
    l->acc.cycle = 1;
}

void sp_ledger_free(sp_ledger_t *l) {
    if (!l) return;
    free(l->closed);
    free(l->training);
    l->closed = NULL;
    l->training = NULL;
    l->n_closed = l->cap_closed = l->n_training = l->cap_training = 0;
}

void sp_ledger_resume(sp_ledger_t *l, int64_t latest, int64_t latest_steps) {
    l->latest = latest;
    l->latest_steps = latest_steps;
    l->fill = latest + 1;
    l->fill_games = l->fill_positions = 0;
}

bool sp_ledger_stored(sp_ledger_t *l, int64_t games, int64_t positions) {
    l->fill_games = games;
    l->fill_positions = positions;
    return l->fill <= l->target && games >= l->games_per_cycle;
}

void sp_ledger_begin(sp_ledger_t *l, int64_t now_ns, double wall_s) {
    memset(&l->acc, 0, sizeof l->acc);
    l->acc.cycle = l->fill;
    l->acc.t0_ns = now_ns;
    l->acc.started = wall_s;
}

bool sp_ledger_playing(const sp_ledger_t *l) { return l->fill <= l->target; }

bool sp_ledger_add(sp_ledger_t *l, const sp_record_t *r, int64_t gen) {
    sp_cycle_acc_t *a = &l->acc;
    a->games++;
    a->rows += r->n_rows;
    a->full_rows += r->full_rows;
    a->plies += r->n_moves;
    if (r->result > 0) a->black++;
    else if (r->result < 0) a->white++;
    else a->draws++;
    if (r->end > 0 && r->end < RULES_END_NB) a->reasons[r->end]++;
    if (r->no_resign) a->no_resign++;
    if (r->would_resign != COLOR_NB) a->would_resign++;
    if (r->false_resign) a->false_resign++;
    if (r->n_gens > 1) a->mixed++;
    int32_t k = 0;
    while (k < a->n_gens && a->gens[k] != gen) k++;
    if (k == a->n_gens && k < SP_LEDGER_GENS) a->gens[a->n_gens++] = gen;
    if (k < SP_LEDGER_GENS) a->gen_games[k]++;
    l->fill_games++;
    l->fill_positions += r->n_rows;
    l->total_games++;
    return l->fill_games >= l->games_per_cycle;
}

void sp_ledger_sample(sp_ledger_t *l, int64_t evaluated, int64_t batches, double busy_s, double worker_s,
                      int64_t searched) {
    sp_cycle_acc_t *a = &l->acc;
    a->evaluated += evaluated;
    a->batches += batches;
    a->busy_s += busy_s;
    a->worker_s += worker_s;
    a->searched += searched;
}

void sp_ledger_metrics(const sp_ledger_t *l, int64_t now_ns, double wall_s, double resign_threshold,
                       db_cycle_metrics_t *m) {
    const sp_cycle_acc_t *a = &l->acc;
    double sp_s = (double)(now_ns - a->t0_ns) * 1e-9;
    /* A window with no batch evaluated has no rates (NAN, not 0): on a busy
     * machine the driver can close two cycles in one pass, and the second
     * one's games were then all searched in the first one's window. */
    bool measured = sp_s > 0 && a->batches > 0;
    *m = (db_cycle_metrics_t){
        .cycle = (int32_t)a->cycle,
        .started = a->started,
        .finished = wall_s,
        .games = l->fill_games,
        .positions = l->fill_positions,
        .selfplay_s = sp_s,
        .train_s = NAN,
        /* Searched during the cycle's window, not the rows of the games that finished in
         * it: with many games in flight, those were mostly played in earlier cycles. */
        .positions_per_s = measured ? (double)a->searched / sp_s : NAN,
        .evals_per_s = measured ? (double)a->evaluated / sp_s : NAN,
        .avg_batch = measured ? (double)a->evaluated / (double)a->batches : NAN,
        .busy_pct = measured && a->worker_s > 0 ? fmin(100.0, 100.0 * a->busy_s / a->worker_s) : NAN,
        .avg_plies = a->games > 0 ? (double)a->plies / (double)a->games : NAN,
        .black_wins = a->black,
        .white_wins = a->white,
        .draws = a->draws,
        .elo = NAN,
        .elo_lo = NAN,
        .elo_hi = NAN,
        /* over the same games as black_wins .. draws: this session's of the cycle */
        .no_resign_games = a->no_resign,
        .would_resign = a->would_resign,
        .false_resign = a->false_resign,
        .resign_threshold = resign_threshold,
    };
}

int64_t sp_ledger_main_gen(const sp_ledger_t *l) {
    const sp_cycle_acc_t *a = &l->acc;
    int64_t g = 0, best = -1;
    for (int32_t i = 0; i < a->n_gens; i++)
        if (a->gen_games[i] > best) best = a->gen_games[i], g = a->gens[i];
    return g;
}

double sp_ledger_eta_s(const sp_ledger_t *l, double elapsed_s) {
    if (l->acc.games <= 0) return -1.0;
    return elapsed_s / (double)l->acc.games * (double)(l->games_per_cycle - l->fill_games);
}

void sp_ledger_close(sp_ledger_t *l, int64_t need_shards) {
    if (l->n_closed == l->cap_closed) {
        int32_t cap = l->cap_closed ? 2 * l->cap_closed : 16;
        sp_closed_t *q = realloc(l->closed, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        l->closed = q;
        l->cap_closed = cap;
    }
    l->closed[l->n_closed++] = (sp_closed_t){l->fill, need_shards};
    l->fill++;
    l->fill_games = l->fill_positions = 0;
}

bool sp_ledger_trainable(const sp_ledger_t *l, int64_t shards_done, int64_t *cycle) {
    if (l->n_closed == 0 || l->closed[0].need_shards > shards_done) return false;
    *cycle = l->closed[0].cycle;
    return true;
}

void sp_ledger_train(sp_ledger_t *l, int64_t steps) {
    KOMA_ASSERT(l->n_closed > 0);
    if (l->n_training == l->cap_training) {
        int32_t cap = l->cap_training ? 2 * l->cap_training : 16;
        sp_training_t *q = realloc(l->training, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        l->training = q;
        l->cap_training = cap;
    }
    l->training[l->n_training++] = (sp_training_t){l->closed[0].cycle, steps};
    memmove(l->closed, l->closed + 1, (size_t)(--l->n_closed) * sizeof *l->closed);
}

bool sp_ledger_training(const sp_ledger_t *l, int64_t *cycle, int64_t *steps) {
    if (l->n_training == 0) return false;
    *cycle = l->training[0].cycle;
    if (steps) *steps = l->training[0].steps;
    return true;
}

void sp_ledger_published(sp_ledger_t *l, int64_t total_steps) {
    KOMA_ASSERT(l->n_training > 0);
    l->latest = l->training[0].cycle;
    l->latest_steps = total_steps;
    memmove(l->training, l->training + 1, (size_t)(--l->n_training) * sizeof *l->training);
}

bool sp_ledger_too_far_ahead(const sp_ledger_t *l, int64_t ahead) { return l->fill - 1 - l->latest > ahead; }

int64_t sp_ledger_games_allowed(const sp_ledger_t *l, int64_t ahead) {
    int64_t last = l->latest + ahead + 1; /* the last cycle that may be filled now */
    if (last > l->target) last = l->target;
    if (l->fill > last) return 0;
    int64_t rest = l->games_per_cycle - l->fill_games;
    return (last - l->fill) * l->games_per_cycle + (rest > 0 ? rest : 0);
}

bool sp_ledger_done(const sp_ledger_t *l) { return l->fill > l->target && l->n_closed == 0 && l->n_training == 0; }
