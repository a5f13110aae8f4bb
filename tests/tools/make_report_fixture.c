/* make_report_fixture.c - fills RUN_DIR/koma.db with a synthetic but
 * plausible run, through data/db.h only: a runs row, one model per cycle,
 * training steps (falling losses, rising accuracies, cosine learning rate),
 * per-cycle self-play metrics (the resignation check from cycle 1 on; cycle
 * 0's row as a binary before schema v3 wrote it), games of random legal
 * moves (registered with shard rows whose files do not exist: the report
 * says their values are not available) and
 * evaluation matches, each cycle against the previous one, plus one against
 * an outside engine.
 *
 *   make_report_fixture RUN_DIR [--cycles N] [--steps-per-cycle N] [--games-per-cycle N]
 *                       [--partial] [--empty]
 *
 * --partial: one cycle under way (models and steps, no games, no matches).
 * --empty: the database and nothing in it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "match/referee.h"

static uint64_t rng = 12345;
static double uni(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2 * log(uni() + 1e-300)) * cos(6.283185307179586 * uni()); }

#define CHECK_DB(call)                                                     \
    do {                                                                   \
        if ((call) != DB_OK) {                                             \
            fprintf(stderr, "make_report_fixture: %s\n", db_errmsg(db));   \
            return 1;                                                      \
        }                                                                  \
    } while (0)

/* Training steps of cycle c into rows: falling losses, rising accuracies,
 * a cosine learning rate; *step and *samples count on. */
static void fill_steps(db_train_step_t *rows, int c, int steps_per_cycle, int64_t total_steps, double t0, int64_t *step,
                       int64_t *samples) {
    for (int i = 0; i < steps_per_cycle; i++, (*step)++) {
        db_train_step_t *t = &rows[i];
        double q = (double)*step / (double)total_steps;
        t->step = *step + 1; /* the trainer numbers its steps from 1 */
        t->cycle = c;
        t->time = t0 + (double)*step * 0.5;
        t->lr = 0.02 * (0.01 + 0.99 * (1 + cos(3.141592653589793 * q)) / 2);
        *samples += 256;
        t->samples = *samples;
        t->loss_policy = 4.2 * exp(-2.2 * q) + 1.3 + 0.12 * gauss();
        t->loss_value = 0.95 - 0.25 * q + 0.04 * gauss();
        t->loss_legal = 0.08 * exp(-5 * q) + 0.004 + 0.003 * fabs(gauss());
        t->loss_total = t->loss_policy + t->loss_value + t->loss_legal;
        t->acc_policy = 0.05 + 0.4 * (1 - exp(-3 * q)) + 0.02 * gauss();
        t->acc_value = NAN;
        t->acc_legal = 0.7 + 0.29 * (1 - exp(-6 * q)) + 0.005 * gauss();
        t->grad_norm = 1.5 + 0.3 * gauss();
    }
}

/* What a cycle's games add up to, for its metrics row. */
typedef struct {
    int64_t positions, bw, ww, dr;
    double plies_sum;
} cycle_games_t;

/* Up to *plies random legal moves from the start position, in USI, into buf
 * (malloc'ed); *plies is cut where the side to move has no legal move. */
static char *random_moves(int32_t *plies) {
    static pos_t pos;
    pos_set_startpos(&pos);
    char *buf = malloc((size_t)*plies * MOVE_USI_MAX + 1), *o = buf;
    if (!buf) return NULL;
    *o = 0;
    int32_t n = 0;
    for (; n < *plies && n < POS_HIST_MAX - 1; n++) {
        move_list_t ml;
        movegen_legal(&pos, &ml);
        if (ml.n == 0) break;
        move_t m = ml.moves[(int32_t)(uni() * ml.n) % ml.n];
        if (n) *o++ = ' ';
        o += move_to_usi(m, o);
        pos_do_move(&pos, m);
    }
    *plies = n;
    return buf;
}

/* Cycle c's games, in two shards registered with their games; 1 on a
 * database failure. */
static int add_games(db_t *db, int c, int games_per_cycle, int64_t model_id, cycle_games_t *t) {
    for (int sh = 0; sh < 2; sh++) {
        int ng = games_per_cycle / 2;
        db_game_t *games = calloc((size_t)ng, sizeof *games);
        if (!games) return 1;
        int64_t row = 0;
        for (int g = 0; g < ng; g++) {
            int32_t plies = (int32_t)(95 + 12 * c + 35 * gauss());
            double u = uni();
            db_reason_t reason = DB_REASON_CHECKMATE;
            int32_t result = uni() < 0.54 ? 1 : -1;
            if (plies > 320 || u < 0.03) plies = 320, reason = DB_REASON_MAX_PLY, result = 0;
            else if (u < 0.06) reason = DB_REASON_SENNICHITE, result = 0;
            else if (u < 0.08) reason = DB_REASON_DECLARATION;
            else if (u < 0.09) reason = DB_REASON_PERPETUAL_CHECK;
            else if (u < 0.55) reason = DB_REASON_RESIGN;
            if (plies < 12) plies = 12;
            char *moves = random_moves(&plies);
            if (!moves) return 1;
            games[g].first_row = row;
            games[g].row_count = plies;
            games[g].model_id = model_id;
            games[g].start_sfen = "startpos";
            games[g].moves = moves;
            games[g].plies = plies;
            games[g].result = result;
            games[g].reason = reason;
            row += plies;
            t->plies_sum += plies;
            t->bw += result > 0, t->ww += result < 0, t->dr += result == 0;
        }
        db_shard_t s;
        memset(&s, 0, sizeof s);
        snprintf(s.path, sizeof s.path, "shards/cycle-%04d-%d.safetensors", c, sh);
        s.cycle = c;
        s.features_version = 1;
        s.rows = row;
        s.bytes = row * 1300;
        strcpy(s.xxh3, "00000000deadbeef");
        t->positions += row;
        CHECK_DB(db_shard_insert(db, &s, games, ng));
        for (int g = 0; g < ng; g++) free((char *)games[g].moves);
        free(games);
    }
    return 0;
}

/* Cycle c's self-play metrics row; 1 on a database failure. */
static int add_cycle_metrics(db_t *db, int c, int games_per_cycle, int64_t model_id, double t0,
                             const cycle_games_t *t) {
    db_cycle_metrics_t cm;
    db_cycle_metrics_init(&cm, c);
    cm.model_id = model_id;
    /* the run stood still for a day before cycle 4 (stopped, resumed) */
    cm.started = t0 + c * 600.0 + (c >= 4 ? 86400.0 : 0.0);
    cm.finished = cm.started + 560;
    cm.games = games_per_cycle;
    cm.positions = t->positions;
    cm.selfplay_s = 420 + 20 * gauss();
    cm.train_s = 140 + 5 * gauss();
    cm.positions_per_s = (double)t->positions / cm.selfplay_s;
    cm.evals_per_s = cm.positions_per_s * (620 + 40 * gauss());
    cm.avg_batch = 180 + 30 * uni();
    cm.busy_pct = 78 + 12 * uni();
    cm.avg_plies = t->plies_sum / games_per_cycle;
    cm.black_wins = t->bw, cm.white_wins = t->ww, cm.draws = t->dr;
    cm.elo = cm.elo_lo = cm.elo_hi = NAN;
    /* The resignation check, from cycle 1 on (cycle 0's row is as an
     * older binary wrote it: not recorded): a fifth of the games could
     * not resign, a good half of those would have, a few wrongly. */
    if (c >= 1) {
        cm.no_resign_games = games_per_cycle / 5;
        cm.would_resign = cm.no_resign_games / 2 + (int64_t)(uni() * (double)(cm.no_resign_games / 2));
        cm.false_resign = (int64_t)(uni() * 0.2 * (double)cm.would_resign);
        cm.resign_threshold = 0.05;
    }
    CHECK_DB(db_cycle_metrics_put(db, &cm));
    return 0;
}

/* The evaluation matches, cycle c against c-1 (strength grows, then
 * flattens), and one against an outside engine; 1 on a database failure. */
static int add_matches(db_t *db, int cycles, const int64_t *model_ids) {
    /* evaluation: cycle c against c-1, every cycle; strength grows, then flattens */
    for (int c = 1; c <= cycles; c++) {
        double gain = 160.0 * exp(-0.25 * c) + 8 * gauss();
        double s = ref_elo_to_score(gain);
        int n = 40, w = 0, d = 0, l = 0;
        for (int g = 0; g < n; g++) {
            double u = uni();
            if (u < 0.1) d++;
            else if (u < 0.1 + 0.9 * s) w++;
            else l++;
        }
        ref_elo_t e;
        ref_elo_trinomial(w, d, l, &e);
        db_match_t m;
        memset(&m, 0, sizeof m);
        m.cycle = c;
        m.model_a = model_ids[c];
        m.model_b = model_ids[c - 1];
        m.wins = w, m.draws = d, m.losses = l;
        m.elo = e.elo, m.elo_lo = e.elo_lo, m.elo_hi = e.elo_hi;
        snprintf(m.settings, sizeof m.settings, "eval visits=64 temp=1.00/12 max_ply=320 games=%d", n);
        CHECK_DB(db_match_insert(db, &m));
    }
    db_match_t x;
    memset(&x, 0, sizeof x);
    x.cycle = cycles;
    x.model_a = model_ids[cycles];
    strcpy(x.opponent, "gpsshogi (smp) vm r3033");
    x.wins = 3, x.draws = 1, x.losses = 6;
    ref_elo_t e;
    ref_elo_trinomial(3, 1, 6, &e);
    x.elo = e.elo, x.elo_lo = e.elo_lo, x.elo_hi = e.elo_hi;
    strcpy(x.settings, "usi-match 0 ms + byoyomi 1000 ms, max_ply 320");
    CHECK_DB(db_match_insert(db, &x));
    return 0;
}

int main(int argc, char **argv) {
    const char *run = NULL;
    int cycles = 12, steps_per_cycle = 250, games_per_cycle = 120, partial = 0, empty = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cycles") && i + 1 < argc) cycles = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps-per-cycle") && i + 1 < argc) steps_per_cycle = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--games-per-cycle") && i + 1 < argc) games_per_cycle = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--partial")) partial = 1;
        else if (!strcmp(argv[i], "--empty")) empty = 1;
        else if (argv[i][0] != '-' && !run) run = argv[i];
        else {
            fprintf(stderr, "usage: make_report_fixture RUN_DIR [--cycles N] [--steps-per-cycle N] "
                            "[--games-per-cycle N] [--partial] [--empty]\n");
            return 2;
        }
    }
    if (!run || cycles < 1) return 2;
    char err[DB_ERR_MAX], path[1200];
    if (compat_mkdir_p(run, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (empty) {
        db_close(db);
        return 0;
    }
    int64_t run_id;
    CHECK_DB(db_run_insert(db, "0.1.0", "selfplay", "cycles = 12\nvisits = 800\n", &run_id));
    if (partial) cycles = 1;
    int64_t total_steps = (int64_t)cycles * steps_per_cycle, step = 0, samples = 0;
    int64_t model_ids[1024];
    double t0 = 1.7e9;
    db_train_step_t *rows = malloc(sizeof *rows * (size_t)steps_per_cycle);
    if (!rows) return 1;
    for (int c = 0; c <= cycles && c < 1024; c++) {
        /* the net published at the end of cycle c-1 (cycle 0: the random one) */
        db_model_t m;
        memset(&m, 0, sizeof m);
        m.run_id = run_id;
        m.cycle = c;
        snprintf(m.path, sizeof m.path, "models/cycle-%04d.safetensors", c);
        snprintf(m.xxh3, sizeof m.xxh3, "%016llx", (unsigned long long)(0x1234abcd5678ull * (uint64_t)(c + 1)));
        strcpy(m.arch, "6x64");
        m.features_version = 1;
        m.train_steps = step;
        m.train_samples = samples;
        double p = (double)step / (double)total_steps;
        m.loss_policy = c ? 4.2 * exp(-2.2 * p) + 1.3 : NAN;
        m.loss_value = c ? 0.95 - 0.25 * p : NAN;
        m.loss_legal = c ? 0.08 * exp(-5 * p) + 0.004 : NAN;
        m.loss_total = c ? m.loss_policy + m.loss_value + m.loss_legal : NAN;
        CHECK_DB(db_model_insert(db, &m));
        model_ids[c] = m.id;
        if (c == cycles) break;
        /* training steps of cycle c */
        fill_steps(rows, c, steps_per_cycle, total_steps, t0, &step, &samples);
        CHECK_DB(db_train_steps_insert(db, rows, steps_per_cycle));
        if (partial) continue;
        /* the cycle's games, in two shards */
        cycle_games_t cg = {0};
        if (add_games(db, c, games_per_cycle, model_ids[c], &cg) != 0) return 1;
        if (add_cycle_metrics(db, c, games_per_cycle, model_ids[c], t0, &cg) != 0) return 1;
    }
    free(rows);
    if (!partial && add_matches(db, cycles, model_ids) != 0) return 1;
    db_close(db);
    return 0;
}
