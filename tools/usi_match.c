/* usi_match.c - plays a match between two USI engines and rates it.
 *
 *   usi-match --engine1 CMD --engine2 CMD [options]
 *
 * Owns: its options (one row each, config/config.h: the command line,
 * --config FILE and --help read them), clocks, the game schedule
 * (openings, colours, concurrency), CSA records, the summary.
 * Does not own: the engine processes and their USI exchanges
 * (match/engine.h, shared with the in-loop gauntlet), any rule
 * (match/referee.h judges every move with engine/rules.h), the Elo formulas
 * (referee.h), the database (data/db.h; match games go through
 * ref_store_match_game).
 *
 * Engine commands are split into words at spaces; "double" or 'single'
 * quotes group words (no other escapes, no shell). Each engine gets
 * "usi" ... "usiok", its --optionN settings as setoption, "isready" ...
 * "readyok" before every game, "usinewgame", then per move "position ...
 * moves ..." and "go btime B wtime W byoyomi Y" (or "binc I winc I"), and
 * "gameover win|lose|draw" at the end. Ponder is never used.
 *
 * Time: the time of a move is the wall time from writing "go" to reading
 * "bestmove"; it includes the pipe and scheduling latency. A move is in
 * time when it takes at most the remaining main time plus the byoyomi (or
 * plus the increment: the increment is credited when the move starts, as
 * Shogidokoro and ShogiGUI do) plus --tolerance. Main time
 * is used up first; byoyomi does not accumulate. An engine that does not
 * answer in time loses on time, gets "stop" and one second to answer, and
 * is restarted for its next game if it stays silent.
 *
 * An engine that exits (or whose pipe breaks) loses the game it is in
 * (illegal action) and is restarted for the next game; one that cannot be
 * (re)started stops the match (exit status 1) after the games in progress.
 * Ctrl-C: the games in progress are abandoned (not recorded); the ones
 * finished are summarised, and recorded as they ended.
 *
 * Elo (engine1's, printed in the running score and the summary): the
 * pentanomial 95% interval over game pairs (games 2k and 2k+1: one opening,
 * colours swapped) once 2 pairs are complete, the trinomial one over the
 * games taken one by one before that, each named where printed; the
 * summary adds the trinomial figure under a pentanomial headline. A
 * difference that rounds to zero prints as 0, never -0.
 *
 * Records: with --db FILE or --run DIR, one matches row, opened when the
 * first game ends, and every game stored under it the moment it ends (so a
 * match killed midway keeps every game it finished); when the match has
 * played all its games the row gets its W/D/L and trinomial Elo. A row
 * without Elo is a match that did not finish (killed, Ctrl-C, an engine
 * that could not be started): its W/D/L still count its stored games. The
 * row is from player A's side: the net of the run given by --cycle1/--cycle2
 * (engine1's if both), else engine1; the other engine is named by its id
 * name. Every game also goes to DIR/game-NNNN.csa (--csa-dir).
 * The move limit counts as engine/rules.h does, from the start position's
 * move number (an opening SFEN at ply 31 has 30 moves counted already).
 * --random-plies K adds K uniformly random legal non-capturing moves to each opening,
 * drawn from (--seed, the pair's index), so both games of a pair start from
 * the same position and every pair from its own: a match of N games
 * between engines that play alike from the same position (two nets at a
 * node limit) has N/2 independent pairs instead of repeats of a few
 * openings. A draw that ends the game or leaves the side to move in check
 * is redrawn.
 * Threads: one per concurrent game slot (--concurrency); the database
 * connection is shared by them under the match's mutex (one SQLite call at
 * a time), the row opened by whichever slot finishes a game first.
 * Built as build/tools/usi-match, installed as koma-usi-match: usage,
 * --version and messages use the name it was run as (argv[0]).
 */
#include "compat/version.h"
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/bits.h"
#include "compat/compat.h"
#include "compat/status.h"
#include "config/config.h"
#include "data/db.h"
#include "data/run.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "match/engine.h"
#include "match/referee.h"
#include "tools/strbuf.h"

/* The name this program was run as (compat/version.h's koma_program_name):
 * usi-match in the build, koma-usi-match where installed; in usage,
 * --version and every message. */
static const char *g_prog = "usi-match";

/* e rounded to `decimals` with its sign, and a plain 0 when it rounds to
 * zero ("-0" read as a loss): "+12", "-3.5", "0", "+inf". */
static const char *elo_text(double e, int decimals, char *buf, size_t n) {
    if (isnan(e)) snprintf(buf, n, "nan");
    else if (isinf(e)) snprintf(buf, n, "%sinf", e > 0 ? "+" : "-");
    else {
        double scale = pow(10.0, decimals);
        double r = round(e * scale) / scale;
        if (r == 0.0) snprintf(buf, n, "0");
        else snprintf(buf, n, "%+.*f", decimals, r);
    }
    return buf;
}

enum { MAX_OPTIONS = MATCH_ENGINE_OPTIONS_MAX, NAME_MAX_ = MATCH_ENGINE_NAME_MAX };

/* ---- settings ------------------------------------------------------------------ */
typedef struct {
    const char *cmd;
    const char *options[MAX_OPTIONS]; /* "Name=Value" */
    int32_t n_options;
    const char *name; /* --nameN, else "id name" */
    int32_t cycle;    /* --cycleN: the model of this run it plays, -1 none */
} engine_spec_t;

typedef struct {
    engine_spec_t eng[2];
    int32_t games;
    const char *openings_path;
    int32_t random_plies; /* uniformly random legal moves after each opening, the same for both games of a pair */
    uint64_t seed;        /* of those moves */
    int64_t byoyomi_ms, time_ms, inc_ms, tolerance_ms, init_timeout_ms;
    int32_t max_ply, concurrency;
    const char *db_path, *run_dir, *csa_dir, *stderr_path;
    int quiet;
    int64_t progress_s; /* seconds between score lines off a terminal (0: 30) */
} match_cfg_t;

static void msgf(char *dst, size_t len, const char *fmt, ...) PRINTF_LIKE(3, 4);
static void msgf(char *dst, size_t len, const char *fmt, ...) {
    if (!dst || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

/* Starts engine k of the match (match/engine.h) with its --optionK settings. */
static int engine_open(match_engine_t *e, const engine_spec_t *spec, const match_cfg_t *cfg, const char *label,
                       char *err, size_t errlen) {
    match_engine_spec_t ms;
    memset(&ms, 0, sizeof ms);
    ms.cmd = spec->cmd;
    ms.name = spec->name;
    ms.n_options = spec->n_options;
    for (int32_t i = 0; i < spec->n_options; i++) ms.options[i] = spec->options[i];
    return match_engine_open(e, &ms, cfg->stderr_path, cfg->init_timeout_ms, label, err, errlen);
}

/* ---- the schedule and the results -------------------------------------------------- */
typedef struct {
    int done;
    int e1_black; /* engine1 played Black */
    int score2;   /* engine1's half points: 2 win, 1 draw, 0 loss */
    int opening;  /* index into the openings, -1 = startpos */
    rules_end_t end;
    int32_t plies;
    char detail[REF_DETAIL_MAX];
} game_out_t;

/* The match's Elo for engine1 as it is reported (the running score, the summary), from the finished
 * games out[0..games): pentanomial over game pairs (games 2k and 2k+1, one
 * opening with colours swapped) once 2 pairs are complete, trinomial over
 * the games taken one by one before that. *pairs_done: complete pairs;
 * pairs[5]: their counts by engine1's half-points (0..4). Returns 1 when
 * pentanomial. */
static int match_elo(const game_out_t *g, int32_t games, ref_elo_t *elo, int32_t pairs[5], int32_t *pairs_done) {
    int32_t w = 0, d = 0, l = 0, np = 0;
    for (int k = 0; k < 5; k++) pairs[k] = 0;
    for (int32_t i = 0; i < games; i++) {
        if (!g[i].done) continue;
        g[i].score2 == 2 ? w++ : g[i].score2 == 1 ? d++ : l++;
        if (i % 2 == 1 && g[i - 1].done) pairs[g[i].score2 + g[i - 1].score2]++, np++;
    }
    *pairs_done = np;
    if (np >= 2) {
        ref_elo_pentanomial(pairs, elo);
        return 1;
    }
    ref_elo_trinomial(w, d, l, elo);
    return 0;
}

/* What one engine's clock did over the finished games: every timed move's
 * milliseconds (ms[0..n)), the largest share of its allowance (the clock plus
 * the byoyomi or the increment, before --tolerance) a move used, the least
 * allowance a move had, and the games lost on time. */
typedef struct {
    int64_t *ms;
    int64_t n, cap;
    double most_share;
    int64_t least_allowed; /* -1: no timed move yet */
    int32_t time_losses;
    int oom;
} time_use_t;

typedef struct {
    const match_cfg_t *cfg;
    char **openings; /* NULL: startpos */
    int32_t n_openings;
    game_out_t *out;
    compat_mutex_t mu; /* next, fatal, db, row, printing */
    int32_t next;
    int fatal;
    char fatal_msg[600];
    db_t *db;
    db_match_t row;           /* the matches row (row.id 0 until the first game is stored) */
    int32_t stored;           /* games stored under it */
    int side;                 /* player A of the row: 0 engine1, 1 engine2 */
    char names[2][NAME_MAX_]; /* engine names, from the first slot that started them */
    status_t *st;             /* stdout: a line per game, and the score so far (in place on a terminal) */
    time_use_t use[2];        /* engine1's and engine2's clocks over the finished games */
} match_t;

/* One timed move of a game in progress into the game's own tally g (no
 * lock: the slot's; its ms stay in the game's times_ms until it ends). */
static void time_use_move(time_use_t *g, int64_t used, int64_t allowed) {
    double share = allowed > 0 ? (double)used / (double)allowed : 0.0;
    if (share > g->most_share) g->most_share = share;
    if (g->least_allowed < 0 || allowed < g->least_allowed) g->least_allowed = allowed;
}

/* A finished game into m->use (m->mu held): the moves times_ms[n_open..last]
 * (ply i made by engine who_last when i has last's parity, else the other),
 * each engine's game tally, the engine that lost on time (-1 none). */
static void time_use_add(match_t *m, const int64_t *times_ms, int32_t n_open, int32_t last, int who_last,
                         const time_use_t game[2], int lost) {
    for (int32_t i = n_open; i <= last; i++) {
        time_use_t *u = &m->use[(last - i) % 2 == 0 ? who_last : 1 - who_last];
        if (u->n == u->cap) {
            int64_t cap = u->cap ? 2 * u->cap : 1024;
            int64_t *ms = realloc(u->ms, sizeof(int64_t) * (size_t)cap);
            if (!ms) {
                u->oom = 1;
                continue;
            }
            u->ms = ms, u->cap = cap;
        }
        u->ms[u->n++] = times_ms[i];
    }
    for (int k = 0; k < 2; k++) {
        time_use_t *u = &m->use[k];
        if (game[k].most_share > u->most_share) u->most_share = game[k].most_share;
        if (game[k].least_allowed >= 0 && (u->least_allowed < 0 || game[k].least_allowed < u->least_allowed))
            u->least_allowed = game[k].least_allowed;
    }
    if (lost >= 0) m->use[lost].time_losses++;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "time, engine1 koma: 1234 moves, median 180 ms, 90th percentile 183 ms, longest 187 ms; at most 93.5% of a
 * move's allowance; least allowance 200 ms; lost on time 0" (sorts u->ms). */
static void print_time_use(const char *label, const char *name, time_use_t *u) {
    if (u->n == 0) {
        printf("time, %s %s: no timed move; lost on time %d\n", label, name, u->time_losses);
        return;
    }
    qsort(u->ms, (size_t)u->n, sizeof *u->ms, cmp_i64);
    int64_t med = u->ms[(u->n - 1) / 2], p90 = u->ms[(int64_t)(0.9 * (double)(u->n - 1))], top = u->ms[u->n - 1];
    printf("time, %s %s: %lld moves, median %lld ms, 90th percentile %lld ms, longest %lld ms; at most %.1f%% of a "
           "move's allowance; least allowance %lld ms; lost on time %d%s\n",
           label, name, (long long)u->n, (long long)med, (long long)p90, (long long)top, 100.0 * u->most_share,
           (long long)u->least_allowed, u->time_losses, u->oom ? " (out of memory: some moves not counted)" : "");
}

static void set_fatal(match_t *m, const char *msg) {
    compat_mutex_lock(&m->mu);
    if (!m->fatal) {
        m->fatal = 1;
        msgf(m->fatal_msg, sizeof m->fatal_msg, "%s", msg);
    }
    compat_mutex_unlock(&m->mu);
}

/* "YYYY/MM/DD HH:MM:SS" UTC of t (days to civil date, H. Hinnant's algorithm;
 * no gmtime: it is not thread-safe and its safe variants differ by OS). */
static void fmt_time(char *buf, size_t len, time_t t) {
    int64_t secs = (int64_t)t, days = secs / 86400, rem = secs % 86400;
    if (rem < 0) rem += 86400, days--;
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, dd = doy - (153 * mp + 2) / 5 + 1, mm = mp < 10 ? mp + 3 : mp - 9;
    if (mm <= 2) y++;
    msgf(buf, len, "%04d/%02d/%02d %02d:%02d:%02d", (int)y, (int)mm, (int)dd, (int)(rem / 3600), (int)(rem / 60 % 60),
         (int)(rem % 60));
}

/* ---- CSA records --------------------------------------------------------------------- */
static const char *const csa_piece[PT_NB] = {"",   "FU", "KY", "KE", "GI", "KA", "HI", "KI",
                                             "OU", "TO", "NY", "NK", "NG", "UM", "RY"};

/* The position pos as CSA P1..P9, hands and side lines. */
static void csa_position(sb_t *f, const pos_t *pos, int startpos) {
    if (startpos) {
        sb_printf(f, "PI\n+\n");
        return;
    }
    for (int r = 0; r < 9; r++) {
        sb_printf(f, "P%d", r + 1);
        for (int file = 8; file >= 0; file--) {
            piece_t pc = pos_piece_on(pos, sq_make(file, r));
            if (pc == PIECE_NONE) sb_printf(f, " * ");
            else sb_printf(f, "%c%s", piece_color(pc) == COLOR_BLACK ? '+' : '-', csa_piece[piece_type(pc)]);
        }
        sb_printf(f, "\n");
    }
    static const piece_type_t order[] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE, PT_PAWN};
    for (color_t c = COLOR_BLACK; c <= COLOR_WHITE; c++) {
        if (pos_hand(pos, c) == 0) continue;
        sb_printf(f, "P%c", c == COLOR_BLACK ? '+' : '-');
        for (int i = 0; i < 7; i++)
            for (int k = pos_hand_count(pos, c, order[i]); k > 0; k--) sb_printf(f, "00%s", csa_piece[order[i]]);
        sb_printf(f, "\n");
    }
    sb_printf(f, "%c\n", pos_side_to_move(pos) == COLOR_BLACK ? '+' : '-');
}

/* "+7776FU": the move m from pos (before it is made), with the piece after it. */
static void csa_move(const pos_t *pos, move_t m, char out[8]) {
    const char *pc = csa_piece[piece_type(pos_moved_piece_after(pos, m))];
    out[0] = pos_side_to_move(pos) == COLOR_BLACK ? '+' : '-';
    out[1] = move_is_drop(m) ? '0' : (char)('1' + sq_file(move_from(m))); /* file, rank as digits 1-9; 00 = drop */
    out[2] = move_is_drop(m) ? '0' : (char)('1' + sq_rank(move_from(m)));
    out[3] = (char)('1' + sq_file(move_to(m)));
    out[4] = (char)('1' + sq_rank(move_to(m)));
    out[5] = pc[0];
    out[6] = pc[1];
    out[7] = 0;
}

static void time_control_text(const match_cfg_t *cfg, char *buf, size_t len) {
    if (cfg->inc_ms > 0) msgf(buf, len, "%lld ms + %lld ms per move", (long long)cfg->time_ms, (long long)cfg->inc_ms);
    else msgf(buf, len, "%lld ms + byoyomi %lld ms", (long long)cfg->time_ms, (long long)cfg->byoyomi_ms);
}

/* Writes <csa_dir>/game-NNNN.csa durably, never over a run's file or a
 * non-regular file (run_output_write). times_ms[i]: time of move i (-1 for
 * opening moves); each timed move's T line (whole seconds, as CSA has them)
 * is followed by a comment with its milliseconds, "'ms 93". */
static int write_csa(const match_t *m, int32_t gi, const ref_game_t *g, const int64_t *times_ms, int32_t n_open,
                     const char *black, const char *white, time_t started, time_t ended, char *err, size_t errlen) {
    char path[1200];
    msgf(path, sizeof path, "%s/game-%04d.csa", m->cfg->csa_dir, gi + 1);
    sb_t sb = {NULL, 0, 0, 0}, *f = &sb;
    char t0[32], t1[32], tc[96];
    fmt_time(t0, sizeof t0, started);
    fmt_time(t1, sizeof t1, ended);
    time_control_text(m->cfg, tc, sizeof tc);
    sb_printf(f, "V2.2\nN+%s\nN-%s\n$EVENT:usi-match\n$START_TIME:%s\n$END_TIME:%s\n", black, white, t0, t1);
    sb_printf(f, "'game %d of %d, time %s, max ply %d\n", gi + 1, m->cfg->games, tc, m->cfg->max_ply);
    pos_t *pos = malloc(sizeof *pos);
    if (!pos) {
        free(sb.s);
        msgf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    char e[256];
    int sp = strcmp(g->start, "startpos") == 0;
    if (sfen_parse_cstr(pos, sp ? SFEN_STARTPOS : g->start, e, sizeof e) != SFEN_OK) KOMA_ASSERT(0);
    csa_position(f, pos, sp);
    for (int32_t i = 0; i < g->n_moves; i++) {
        char mv[8];
        csa_move(pos, g->moves[i], mv);
        sb_printf(f, "%s\nT%lld\n", mv, (long long)(i < n_open || times_ms[i] < 0 ? 0 : times_ms[i] / 1000));
        if (i >= n_open && times_ms[i] >= 0) /* T is whole seconds */
            sb_printf(f, "'ms %lld\n", (long long)times_ms[i]);
        pos_do_move(pos, g->moves[i]);
    }
    free(pos);
    sb_printf(f, "%s\n'%s: %s\n", ref_csa_ending(g), rules_end_name(g->end), g->detail);
    int rc = -1;
    if (sb.oom) msgf(err, errlen, "%s: out of memory", path);
    else rc = run_output_write(path, m->cfg->run_dir, "a CSA game record", "--csa-dir", sb.s, sb.n, err, errlen);
    free(sb.s);
    return rc;
}

/* ---- one game ----------------------------------------------------------------------------- */
/* "engineK: <name>", the players' names in the games and the matches row. */
static void player_name(const match_t *m, int k, char *buf, size_t len) {
    msgf(buf, len, "engine%d: %s", k + 1, m->names[k][0] ? m->names[k] : m->cfg->eng[k].cmd);
}

/* Stores finished game gi (under m->mu), opening the matches row first if
 * this is the first game to end. A failure is reported; the match goes on. */
static void store_game(match_t *m, int32_t gi, const ref_game_t *g, int e1_black) {
    char names[2][NAME_MAX_ + 16];
    player_name(m, 0, names[0], sizeof names[0]);
    player_name(m, 1, names[1], sizeof names[1]);
    if (m->row.id == 0) {
        db_match_t *r = &m->row; /* the rest was set up by main */
        int a = m->side;
        msgf(r->engine_a, sizeof r->engine_a, "%s", names[a]);
        msgf(r->engine_b, sizeof r->engine_b, "%s", names[1 - a]);
        msgf(r->opponent, sizeof r->opponent, "%s", m->names[1 - a][0] ? m->names[1 - a] : m->cfg->eng[1 - a].cmd);
        if (db_match_begin(m->db, r) != DB_OK) {
            fprintf(stderr, "%s: game %d not stored: %s\n", g_prog, gi + 1, db_errmsg(m->db));
            r->id = 0;
            return;
        }
    }
    if (ref_store_match_game(m->db, m->row.id, g, names[e1_black ? 0 : 1], names[e1_black ? 1 : 0]) != DB_OK)
        fprintf(stderr, "%s: game %d not stored: %s\n", g_prog, gi + 1, db_errmsg(m->db));
    else m->stored++;
}

/* Adds cfg->random_plies random legal non-capturing moves to the started game g, from the
 * seed (cfg->seed, pair): the same moves for both games of a pair. Up to 1000
 * draws for a line that neither ends the game nor leaves the side to move in
 * check; 0, or -1 with err. */
static int random_moves(ref_game_t *g, const match_cfg_t *cfg, int32_t pair, char *err, size_t errlen) {
    ref_game_t *opening = ref_game_new(); /* the game as the opening left it, for a retry */
    if (!opening) {
        msgf(err, errlen, "out of memory");
        return -1;
    }
    *opening = *g;
    uint64_t st = compat_mix64(cfg->seed ^ compat_mix64((uint64_t)pair));
    int rc = -1;
    for (int attempt = 0; attempt < 1000 && rc != 0; attempt++) {
        if (attempt > 0) *g = *opening;
        int ok = 1;
        for (int32_t i = 0; i < cfg->random_plies && ok; i++) {
            move_list_t list;
            int32_t n = movegen_legal(&g->pos, &list), quiet = 0;
            for (int32_t j = 0; j < n; j++) /* captures left out: the pair should not start a piece down */
                if (!pos_is_capture(&g->pos, list.moves[j])) list.moves[quiet++] = list.moves[j];
            ok = quiet > 0 && ref_game_play(g, list.moves[compat_splitmix64(&st) % (uint64_t)quiet]) == RULES_END_NONE;
        }
        if (ok && !pos_in_check(&g->pos)) rc = 0;
    }
    if (rc != 0) msgf(err, errlen, "no line of %d random moves from %s", cfg->random_plies, opening->start);
    ref_game_free(opening);
    return rc;
}

/* Plays game gi with the slot's engines (eng[0] = engine1). Returns 0, or -1
 * when the game was abandoned (Ctrl-C, an engine that cannot start). */
static int play_game(match_t *m, match_engine_t eng[2], int32_t gi, ref_game_t *g, int64_t *times_ms) {
    const match_cfg_t *cfg = m->cfg;
    int e1_black = gi % 2 == 0;
    int opening = m->openings ? (gi / 2) % m->n_openings : -1;
    char err[600];
    if (ref_game_start(g, opening >= 0 ? m->openings[opening] : "startpos", cfg->max_ply, err, sizeof err) != 0) {
        set_fatal(m, err);
        return -1;
    }
    if (cfg->random_plies > 0 && random_moves(g, cfg, gi / 2, err, sizeof err) != 0) {
        set_fatal(m, err);
        return -1;
    }
    int32_t n_open = g->n_moves;
    for (int k = 0; k < 2; k++) {
        char label[32];
        msgf(label, sizeof label, "engine%d", k + 1);
        if (eng[k].proc && !eng[k].alive) match_engine_close(&eng[k]);
        if (!eng[k].proc && engine_open(&eng[k], &cfg->eng[k], cfg, label, err, sizeof err) != 0) {
            set_fatal(m, err);
            return -1;
        }
        compat_mutex_lock(&m->mu);
        if (!m->names[k][0]) msgf(m->names[k], sizeof m->names[k], "%s", eng[k].name);
        compat_mutex_unlock(&m->mu);
    }
    /* Ready both for a new game; an engine that fails here is restarted once. */
    for (int k = 0; k < 2; k++) {
        char label[32];
        msgf(label, sizeof label, "engine%d", k + 1);
        for (int attempt = 0;; attempt++) {
            if (compat_proc_write_line(eng[k].proc, "isready") == 0 &&
                match_engine_expect(&eng[k], "readyok", cfg->init_timeout_ms, label, err, sizeof err) == 0 &&
                compat_proc_write_line(eng[k].proc, "usinewgame") == 0)
                break;
            eng[k].alive = 0;
            match_engine_close(&eng[k]);
            if (attempt == 1 || engine_open(&eng[k], &cfg->eng[k], cfg, label, err, sizeof err) != 0) {
                set_fatal(m, err);
                return -1;
            }
        }
    }
    time_t started = time(NULL);
    int64_t clock_ms[COLOR_NB] = {cfg->time_ms, cfg->time_ms};
    for (int32_t i = 0; i < n_open; i++) times_ms[i] = -1;
    int32_t last_timed = n_open - 1; /* the last ply with a time: a move played, or the one that forfeited */
    int who_last = 0;                /* the engine that made it */
    time_use_t game_use[2] = {{.least_allowed = -1}, {.least_allowed = -1}};
    while (!ref_game_over(g)) {
        if (compat_stop_requested()) return -1;
        color_t side = ref_game_side(g);
        int k = (side == COLOR_BLACK) == e1_black ? 0 : 1;
        match_engine_t *e = &eng[k];
        char *pos_cmd = match_engine_position_cmd(g), go[160], detail[REF_DETAIL_MAX];
        if (!pos_cmd) {
            set_fatal(m, "out of memory");
            return -1;
        }
        if (cfg->inc_ms > 0)
            msgf(go, sizeof go, "go btime %lld wtime %lld binc %lld winc %lld", (long long)clock_ms[COLOR_BLACK],
                 (long long)clock_ms[COLOR_WHITE], (long long)cfg->inc_ms, (long long)cfg->inc_ms);
        else
            msgf(go, sizeof go, "go btime %lld wtime %lld byoyomi %lld", (long long)clock_ms[COLOR_BLACK],
                 (long long)clock_ms[COLOR_WHITE], (long long)cfg->byoyomi_ms);
        int wrc = compat_proc_write_line(e->proc, pos_cmd);
        free(pos_cmd);
        int64_t t0 = compat_now_ms();
        if (wrc == 0) wrc = compat_proc_write_line(e->proc, go);
        int64_t allowed = clock_ms[side] + (cfg->inc_ms > 0 ? cfg->inc_ms : cfg->byoyomi_ms);
        char mv[64] = "";
        int rc = wrc == 0 ? match_engine_bestmove(e, allowed + cfg->tolerance_ms, mv, sizeof mv) : COMPAT_PROC_EOF;
        int64_t used = compat_now_ms() - t0;
        times_ms[g->n_moves] = used;
        time_use_move(&game_use[k], used, allowed);
        last_timed = g->n_moves, who_last = k;
        if (rc == COMPAT_PROC_EOF) {
            e->alive = 0;
            msgf(detail, sizeof detail, "%s's engine (%s) exited or closed its output while thinking",
                 side == COLOR_BLACK ? "black" : "white", e->name);
            ref_game_forfeit(g, side, RULES_END_ILLEGAL_MOVE, true, detail);
            break;
        }
        if (rc == COMPAT_PROC_TIMEOUT || used > allowed + cfg->tolerance_ms) {
            msgf(detail, sizeof detail, "%s (%s) used %lld ms of %lld ms allowed (+%lld ms tolerance)",
                 side == COLOR_BLACK ? "black" : "white", e->name, (long long)used, (long long)allowed,
                 (long long)cfg->tolerance_ms);
            ref_game_forfeit(g, side, RULES_END_TIME, false, detail);
            if (rc == COMPAT_PROC_TIMEOUT) { /* make it stop, or replace it */
                char tmp[64];
                if (compat_proc_write_line(e->proc, "stop") != 0 ||
                    match_engine_bestmove(e, 1000, tmp, sizeof tmp) != 0)
                    e->alive = 0;
            }
            break;
        }
        if (cfg->inc_ms > 0) clock_ms[side] += cfg->inc_ms - used;
        else clock_ms[side] = clock_ms[side] > used ? clock_ms[side] - used : 0;
        ref_game_play_usi(g, mv);
    }
    /* gameover from each engine's side */
    for (int k = 0; k < 2; k++) {
        if (!eng[k].alive) continue;
        color_t c = (k == 0) == e1_black ? COLOR_BLACK : COLOR_WHITE;
        const char *res = g->winner == COLOR_NB ? "draw" : g->winner == c ? "win" : "lose";
        char cmd[32];
        msgf(cmd, sizeof cmd, "gameover %s", res);
        if (compat_proc_write_line(eng[k].proc, cmd) != 0) eng[k].alive = 0;
    }
    time_t ended = time(NULL);

    game_out_t *o = &m->out[gi];
    o->e1_black = e1_black;
    o->opening = opening;
    o->end = g->end;
    o->plies = g->n_moves;
    color_t e1 = e1_black ? COLOR_BLACK : COLOR_WHITE;
    o->score2 = g->winner == COLOR_NB ? 1 : g->winner == e1 ? 2 : 0;
    msgf(o->detail, sizeof o->detail, "%s", g->detail);
    const char *black = eng[e1_black ? 0 : 1].name, *white = eng[e1_black ? 1 : 0].name;
    if (cfg->csa_dir && write_csa(m, gi, g, times_ms, n_open, black, white, started, ended, err, sizeof err) != 0)
        fprintf(stderr, "%s: %s\n", g_prog, err);
    compat_mutex_lock(&m->mu);
    o->done = 1;
    int lost = -1;
    if (g->end == RULES_END_TIME && g->winner != COLOR_NB) lost = g->winner == e1 ? 1 : 0;
    time_use_add(m, times_ms, n_open, last_timed, who_last, game_use, lost);
    if (m->db) store_game(m, gi, g, e1_black);
    const char *score = g->winner == COLOR_BLACK ? "1-0" : g->winner == COLOR_WHITE ? "0-1" : "1/2";
    status_event(m->st, STATUS_INFO, "game %d/%d: %s (black) vs %s (white): %s, %s, %d plies - %s", gi + 1, cfg->games,
                 e1_black ? "engine1" : "engine2", e1_black ? "engine2" : "engine1", score, rules_end_name(g->end),
                 g->n_moves, g->detail);
    /* The score so far, from engine1's side. */
    int32_t w = 0, d = 0, l = 0;
    for (int32_t i = 0; i < cfg->games; i++)
        if (m->out[i].done) m->out[i].score2 == 2 ? w++ : m->out[i].score2 == 1 ? d++ : l++;
    ref_elo_t elo;
    int32_t pairs[5], np = 0;
    int pent = match_elo(m->out, cfg->games, &elo, pairs, &np);
    char t0[32], t1[32], t2[32];
    status_line(m->st, status_is_tty(m->st) || w + d + l == cfg->games,
                "games %d/%d | engine1 +%d =%d -%d | Elo %s [%s, %s] %s", w + d + l, cfg->games, w, d, l,
                elo_text(elo.elo, 0, t0, sizeof t0), elo_text(elo.elo_lo, 0, t1, sizeof t1),
                elo_text(elo.elo_hi, 0, t2, sizeof t2), pent ? "over pairs" : "over games");
    compat_mutex_unlock(&m->mu);
    return 0;
}

static void *slot_thread(void *arg) {
    match_t *m = arg;
    match_engine_t eng[2];
    memset(eng, 0, sizeof eng);
    ref_game_t *g = ref_game_new();
    int64_t *times_ms = malloc(sizeof(int64_t) * POS_HIST_MAX);
    if (!g || !times_ms) set_fatal(m, "out of memory");
    while (g && times_ms) {
        compat_mutex_lock(&m->mu);
        int32_t gi = m->fatal || compat_stop_requested() ? m->cfg->games : m->next++;
        compat_mutex_unlock(&m->mu);
        if (gi >= m->cfg->games) break;
        if (play_game(m, eng, gi, g, times_ms) != 0) break;
    }
    match_engine_close(&eng[0]);
    match_engine_close(&eng[1]);
    free(times_ms);
    ref_game_free(g);
    return NULL;
}

/* ---- command line ------------------------------------------------------------------------ */
/* The options, one row each (config/config.h: --help, --config FILE and the
 * command line read them); main turns them into a match_cfg_t. */
typedef struct {
    char cmd[2][4096], options[2][8192], name[2][CFG_STRING_MAX];
    int32_t cycle[2], games, random_plies, max_ply, concurrency;
    uint64_t seed;
    int64_t byoyomi_ms, time_ms, inc_ms, tolerance_ms, init_timeout_ms, progress_s;
    char openings[CFG_STRING_MAX], db[CFG_STRING_MAX], run[CFG_STRING_MAX], csa_dir[CFG_STRING_MAX],
        stderr_path[CFG_STRING_MAX];
    int quiet;
    int given_byoyomi, given_progress;
} match_flags_t;

#define MATCH_STR_(x) #x
#define MATCH_STR(x) MATCH_STR_(x)

static int match_flags(match_flags_t *f, cfg_opt_t *opts) {
    /* clang-format off */
    const cfg_opt_t all[] = {
        {"engine1", CFG_TYPE_STRING, f->cmd[0], 1, 0, "engine1's command (words split at spaces; \"double\" or "
         "'single' quotes group; no shell)", "", NULL, sizeof f->cmd[0]},
        {"engine2", CFG_TYPE_STRING, f->cmd[1], 1, 0, "engine2's command, as --engine1", "", NULL, sizeof f->cmd[1]},
        {"option1", CFG_TYPE_LIST, f->options[0], 1, 0, "NAME=VALUE: a setoption for engine1 (given once per option)",
         "", NULL, sizeof f->options[0]},
        {"option2", CFG_TYPE_LIST, f->options[1], 1, 0, "a setoption for engine2, as --option1", "", NULL,
         sizeof f->options[1]},
        {"name1", CFG_TYPE_STRING, f->name[0], 1, 0, "engine1's name in the records ('' = its id name)", "", NULL,
         sizeof f->name[0]},
        {"name2", CFG_TYPE_STRING, f->name[1], 1, 0, "engine2's name in the records ('' = its id name)", "", NULL,
         sizeof f->name[1]},
        {"games", CFG_TYPE_I32, &f->games, 1, INT32_MAX, "games; colours alternate, engine1 Black first", "2"},
        {"openings", CFG_TYPE_PATH, f->openings, 1, 0, "a file of starts, one per line: SFEN or startpos, optionally "
         "'... moves m1 m2'; each is played twice, colours swapped ('' = startpos)", "", NULL, sizeof f->openings},
        {"random-plies", CFG_TYPE_I32, &f->random_plies, 0, 64, "K random legal non-capturing moves after each opening "
         "(or startpos), new for every pair of games (colours swapped), drawn from --seed", "0"},
        {"seed", CFG_TYPE_U64, &f->seed, 0, 9.2e18, "seed of those moves", "1"},
        {"byoyomi", CFG_TYPE_INT, &f->byoyomi_ms, 0, 1e12, "byoyomi per move in ms (0 when --time or --inc is given "
         "and this is not)", "1000", NULL, 0, &f->given_byoyomi},
        {"time", CFG_TYPE_INT, &f->time_ms, 0, 1e12, "main time in ms", "0"},
        {"inc", CFG_TYPE_INT, &f->inc_ms, 0, 1e12, "Fischer increment per move in ms", "0"},
        {"tolerance", CFG_TYPE_INT, &f->tolerance_ms, 0, 1e12, "grace in ms on every move's time", "200"},
        {"max-ply", CFG_TYPE_I32, &f->max_ply, 0, POS_HIST_MAX - 8, "draw after move N, counted from the SFEN's move "
         "number (0 = none)", MATCH_STR(RULES_MAX_PLY_DEFAULT)},
        {"concurrency", CFG_TYPE_I32, &f->concurrency, 1, INT32_MAX, "games at once, at most 256 (each has its own "
         "engine processes)", "1"},
        {"db", CFG_TYPE_PATH, f->db, 1, 0, "record the match in this database, each game as it ends (an existing "
         "file must be a Koma database; '' = none)", "", NULL, sizeof f->db},
        {"run", CFG_TYPE_PATH, f->run, 1, 0, "record it in this run's koma.db instead ('' = none)", "", NULL,
         sizeof f->run},
        {"cycle1", CFG_TYPE_I32, &f->cycle[0], -1, INT32_MAX, "engine1 plays the net of cycle C of that run (for the "
         "matches row; -1 = none)", "-1"},
        {"cycle2", CFG_TYPE_I32, &f->cycle[1], -1, INT32_MAX, "engine2's cycle, as --cycle1", "-1"},
        {"csa-dir", CFG_TYPE_PATH, f->csa_dir, 1, 0, "write DIR/game-NNNN.csa (CSA v2.2) for every game (never in a "
         "run's models/ or shards/; '' = none)", "", NULL, sizeof f->csa_dir},
        {"engine-stderr", CFG_TYPE_PATH, f->stderr_path, 1, 0, "engines' stderr appended to FILE ('-' = ours, '' "
         "discards; never a run's own file)", "-", NULL, sizeof f->stderr_path},
        {"init-timeout", CFG_TYPE_INT, &f->init_timeout_ms, 1, 1e12, "ms to wait for usiok / readyok", "60000"},
        {"quiet", CFG_TYPE_BOOL, &f->quiet, 1, 0, "no line per game and no running score (for scripts)", "0"},
        {"progress", CFG_TYPE_INT, &f->progress_s, 1, 1e9, "seconds between score lines off a terminal (on a "
         "terminal the score is one line updated in place, every second unless given)", "30", NULL, 0,
         &f->given_progress},
    };
    /* clang-format on */
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(opts, all, sizeof all);
    return n;
}
enum { MATCH_NFLAGS = 25 };

/* The usage paragraph of --help. */
static void usage_text(char *buf, size_t n) {
    snprintf(buf, n,
             "usage: %s --engine1 CMD --engine2 CMD [options]\n"
             "Plays a match between two USI engines, judged by Koma's referee, and rates it.\n"
             "The Elo difference (engine1's) comes with a 95%% interval: pentanomial, over\n"
             "game pairs (each opening played with both colours), once 2 pairs are complete;\n"
             "before that trinomial, over games taken one by one.",
             g_prog);
}

/* A command-line error: the message, and where --help is. */
static int usage_error(const char *msg) {
    fprintf(stderr, "%s: %s\nusage: %s --engine1 CMD --engine2 CMD [options] (--help lists them)\n", g_prog, msg,
            g_prog);
    return 2;
}

/* ---- output paths ------------------------------------------------------------------------ */
/* A directory that holds outputs and is made when missing, judged as
 * data/run.h's run_output_check judges a file: DIR/name when DIR exists,
 * else the nearest existing ancestor joined with the first missing component
 * (R/models/csa/x is judged as R/models/csa, a name under the run's models/,
 * before anything is made). */
static int out_dir_check(const char *dir, const char *name, const char *run_dir, const char *what, const char *flag,
                         char *err, size_t errlen) {
    char probe[1200], anc[1200];
    msgf(anc, sizeof anc, "%s", dir);
    size_t n = strlen(anc);
    while (n > 1 && (anc[n - 1] == '/' || anc[n - 1] == '\\')) anc[--n] = 0;
    if (compat_is_dir(anc)) {
        msgf(probe, sizeof probe, "%s/%s", anc, name);
    } else {
        msgf(probe, sizeof probe, "%s", anc); /* relative, one component: judged in "." */
        for (;;) {
            char *s = strrchr(anc, '/'), *bs = strrchr(anc, '\\');
            if (bs && (!s || bs > s)) s = bs;
            if (!s) break;
            *s = 0;
            const char *child = s + 1, *up = anc[0] ? anc : "/";
            if (compat_is_dir(up)) {
                msgf(probe, sizeof probe, "%s%s%s", up, anc[0] ? "/" : "", child);
                break;
            }
        }
    }
    return run_output_check(probe, run_dir, what, flag, err, errlen);
}

/* What the match writes, checked before any engine starts (issue 30.1:
 * no output path replaces a run's file or a non-regular file):
 *  --csa-dir: never inside a run's models/, shards/, train/ or orphans/
 *    (each file is checked again when it is written: write_csa);
 *  --engine-stderr: appended to, so a device or FIFO (/dev/null, a pipe
 *    to a logger) and any other file are fine, but never a run's own file
 *    (koma.db, its -wal/-shm, koma.lock, log, models/, shards/ ...) nor a
 *    directory;
 *  --db FILE / --run DIR: an existing file must be a Koma database (it is
 *    recorded into; a run's koma.db is the usual one); a new one is made
 *    only where run_output_check allows (not under a run's models/ or
 *    shards/, not as koma.db-wal or koma.lock ...), and --run's directory
 *    only where a writer may make a run (data/run.h's run_check_new_dir). */
static int check_outputs(const match_cfg_t *cfg, char *err, size_t errlen) {
    char e[DB_ERR_MAX + 64];
    if (cfg->csa_dir &&
        out_dir_check(cfg->csa_dir, "game-0001.csa", cfg->run_dir, "CSA game records", "--csa-dir", err, errlen) != 0)
        return -1;
    const char *se = cfg->stderr_path;
    if (se && se[0]) {
        int special = !compat_is_dir(se) && compat_file_exists(se) && compat_check_regular_file(se, e, sizeof e) != 0;
        if (!special && run_output_check(se, cfg->run_dir, "the engines' stderr", "--engine-stderr", err, errlen) != 0)
            return -1;
    }
    if (!cfg->db_path && !cfg->run_dir) return 0;
    const char *flag = cfg->run_dir ? "--run" : "--db";
    char path[1200];
    if (cfg->run_dir) run_path(cfg->run_dir, RUN_DB, path, sizeof path);
    else msgf(path, sizeof path, "%s", cfg->db_path);
    if (compat_is_dir(path) || compat_check_regular_file(path, e, sizeof e) != 0)
        return run_output_check(path, cfg->run_dir, "the match database", flag, err, errlen); /* refuses it */
    db_probe_t kind;
    if (db_probe(path, &kind, e, sizeof e) != DB_OK) {
        msgf(err, errlen,
             "%s; %s takes a Koma database (a run's koma.db) or the name of a new file: nothing was written", e, flag);
        return -1;
    }
    if (kind == DB_PROBE_KOMA) return 0; /* recorded into */
    if (cfg->run_dir) {
        if (out_dir_check(cfg->run_dir, RUN_DB, NULL, "the match database", flag, err, errlen) != 0) return -1;
        return compat_is_dir(cfg->run_dir) ? run_check_new_dir(cfg->run_dir, err, errlen) : 0;
    }
    return run_output_check(path, NULL, "the match database", flag, err, errlen);
}

static int load_openings(const char *path, match_t *m, int32_t max_ply) {
    char err[600];
    size_t len = 0;
    char *text = compat_read_file(path, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return -1;
    }
    ref_game_t *g = ref_game_new();
    int32_t cap = 16, lineno = 0;
    m->openings = malloc(sizeof(char *) * (size_t)cap);
    if (!g || !m->openings) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        ref_game_free(g);
        free(text);
        return -1;
    }
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *s = p;
        p = nl ? nl + 1 : NULL;
        while (isspace((unsigned char)*s)) s++;
        size_t l = strlen(s);
        while (l > 0 && isspace((unsigned char)s[l - 1])) s[--l] = 0;
        if (!*s || *s == '#') continue;
        if (ref_game_start(g, s, max_ply, err, sizeof err) != 0 || ref_game_over(g)) {
            fprintf(stderr, "%s: %s:%d: %s\n", g_prog, path, lineno,
                    ref_game_over(g) ? "the game is already over" : err);
            ref_game_free(g);
            free(text);
            return -1;
        }
        if (m->n_openings == cap) {
            cap *= 2;
            char **o = realloc(m->openings, sizeof(char *) * (size_t)cap);
            if (!o) break;
            m->openings = o;
        }
        m->openings[m->n_openings++] = strdup(s);
    }
    ref_game_free(g);
    free(text);
    if (m->n_openings == 0) {
        fprintf(stderr, "%s: %s: no openings in the file\n", g_prog, path);
        return -1;
    }
    return 0;
}

static void print_elo(const char *label, const ref_elo_t *e, const char *basis) {
    char a[32], b[32], c[32];
    printf("%sElo %s, 95%% interval [%s, %s]%s\n", label, elo_text(e->elo, 1, a, sizeof a),
           elo_text(e->elo_lo, 1, b, sizeof b), elo_text(e->elo_hi, 1, c, sizeof c), basis);
}

/* The summary of the games played: engine1's W/D/L into wdl; returns the
 * games played. */
static int32_t print_summary(match_t *m, int32_t wdl[3]) {
    int32_t w = 0, d = 0, l = 0, played = 0, ends[RULES_END_NB] = {0};
    const match_cfg_t *cfg = m->cfg;
    int32_t by_colour[2][3] = {{0}}; /* [engine1 black?][win, draw, loss] */
    for (int32_t i = 0; i < cfg->games; i++) {
        const game_out_t *o = &m->out[i];
        if (!o->done) continue;
        played++;
        ends[o->end]++;
        int r = o->score2 == 2 ? 0 : o->score2 == 1 ? 1 : 2;
        by_colour[o->e1_black ? 1 : 0][r]++;
        if (r == 0) w++;
        else if (r == 1) d++;
        else l++;
    }
    printf("\n%s (engine1) vs %s (engine2): %d of %d games played\n", m->names[0][0] ? m->names[0] : cfg->eng[0].cmd,
           m->names[1][0] ? m->names[1] : cfg->eng[1].cmd, played, cfg->games);
    ref_elo_t elo, head;
    ref_elo_trinomial(w, d, l, &elo);
    int32_t pairs[5], n_pairs = 0;
    int pent = match_elo(m->out, cfg->games, &head, pairs, &n_pairs);
    if (played > 0) {
        printf("engine1: +%d =%d -%d, score %.3f (as Black +%d =%d -%d, as White +%d =%d -%d)\n", w, d, l, elo.score,
               by_colour[1][0], by_colour[1][1], by_colour[1][2], by_colour[0][0], by_colour[0][1], by_colour[0][2]);
        /* The headline is what the README promises: pentanomial over pairs;
         * the per-game (trinomial) figure below it, or alone with its reason. */
        char basis[160];
        if (pent) {
            snprintf(basis, sizeof basis, " (pentanomial, over %d game pairs)", n_pairs);
            print_elo("", &head, basis);
            printf("  pairs by engine1's points (0, 0.5, 1, 1.5, 2): %d/%d/%d/%d/%d\n", pairs[0], pairs[1], pairs[2],
                   pairs[3], pairs[4]);
            print_elo("  games taken one by one (trinomial): ", &elo, "");
        } else {
            snprintf(basis, sizeof basis,
                     " (trinomial, over %d game%s taken one by one:\n  the pentanomial "
                     "interval over game pairs needs 2 complete pairs, %d here)",
                     played, played == 1 ? "" : "s", n_pairs);
            print_elo("", &elo, basis);
        }
        printf("LOS %.1f%%\nends:", 100.0 * elo.los);
        for (int e = 0; e < RULES_END_NB; e++)
            if (ends[e]) printf(" %s %d", rules_end_name((rules_end_t)e), ends[e]);
        printf("\n");
        for (int k = 0; k < 2; k++)
            print_time_use(k == 0 ? "engine1" : "engine2", m->names[k][0] ? m->names[k] : cfg->eng[k].cmd, &m->use[k]);
    }
    wdl[0] = w, wdl[1] = d, wdl[2] = l;
    return played;
}

/* The command line into *cfg (pointing into *f): -1 to play, else the exit
 * status (0: --help printed; 2: the message printed). */
static int parse_command(int argc, char **argv, match_flags_t *f, match_cfg_t *cfg) {
    cfg_opt_t opts[MATCH_NFLAGS];
    int nopts = match_flags(f, opts);
    KOMA_ASSERT(nopts == MATCH_NFLAGS);
    cfg_defaults(opts, nopts);
    char usage[1024], err[1024];
    usage_text(usage, sizeof usage);
    int prc = cfg_parse(opts, nopts, argc, argv, 1, NULL, 0, NULL, usage, stdout, err, sizeof err);
    if (prc == CFG_HELP) return 0;
    if (prc != CFG_OK) return usage_error(err);
    memset(cfg, 0, sizeof *cfg);
    for (int k = 0; k < 2; k++) {
        engine_spec_t *e = &cfg->eng[k];
        e->cmd = f->cmd[k][0] ? f->cmd[k] : NULL;
        e->name = f->name[k][0] ? f->name[k] : NULL;
        e->cycle = f->cycle[k];
        for (char *o = f->options[k]; *o;) { /* the LIST's values, each made a string of its own */
            if (e->n_options == MAX_OPTIONS) {
                fprintf(stderr, "%s: more than %d options for engine%d\n", g_prog, MAX_OPTIONS, k + 1);
                return 2;
            }
            e->options[e->n_options++] = o;
            char *nl = strchr(o, '\n');
            if (!nl) break;
            *nl = 0;
            o = nl + 1;
        }
    }
    cfg->games = f->games;
    cfg->openings_path = f->openings[0] ? f->openings : NULL;
    cfg->random_plies = f->random_plies;
    cfg->seed = f->seed;
    cfg->byoyomi_ms = f->given_byoyomi ? f->byoyomi_ms : -1;
    cfg->time_ms = f->time_ms, cfg->inc_ms = f->inc_ms, cfg->tolerance_ms = f->tolerance_ms;
    cfg->init_timeout_ms = f->init_timeout_ms;
    cfg->max_ply = f->max_ply;
    cfg->concurrency = f->concurrency > 256 ? 256 : f->concurrency;
    cfg->db_path = f->db[0] ? f->db : NULL;
    cfg->run_dir = f->run[0] ? f->run : NULL;
    cfg->csa_dir = f->csa_dir[0] ? f->csa_dir : NULL;
    cfg->stderr_path = strcmp(f->stderr_path, "-") ? f->stderr_path : NULL;
    cfg->quiet = f->quiet;
    cfg->progress_s = f->given_progress ? f->progress_s : 0;
    if (!cfg->eng[0].cmd || !cfg->eng[1].cmd) return usage_error("--engine1 and --engine2 are required");
    if (cfg->db_path && cfg->run_dir) {
        fprintf(stderr, "%s: give --db or --run, not both\n", g_prog);
        return 2;
    }
    if (cfg->inc_ms > 0 && cfg->byoyomi_ms > 0) {
        fprintf(stderr, "%s: --byoyomi and --inc do not go together\n", g_prog);
        return 2;
    }
    if (cfg->byoyomi_ms < 0) cfg->byoyomi_ms = cfg->time_ms > 0 || cfg->inc_ms > 0 ? 0 : 1000;
    if (cfg->time_ms == 0 && cfg->byoyomi_ms == 0 && cfg->inc_ms == 0) {
        fprintf(stderr, "%s: no time at all (give --byoyomi, --time or --inc)\n", g_prog);
        return 2;
    }
    if ((cfg->eng[0].cycle >= 0 || cfg->eng[1].cycle >= 0) && !cfg->db_path && !cfg->run_dir) {
        fprintf(stderr, "%s: --cycle1/--cycle2 need --db or --run\n", g_prog);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "usi-match");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    static match_flags_t f; /* the rows' targets (large strings) */
    match_cfg_t cfg;
    int prc = parse_command(argc, argv, &f, &cfg);
    if (prc >= 0) return prc;
    char err[DB_ERR_MAX + 64];

    match_t m;
    memset(&m, 0, sizeof m);
    m.cfg = &cfg;
    m.use[0].least_allowed = m.use[1].least_allowed = -1;
    compat_mutex_init(&m.mu);
    int rc = 1;
    if (cfg.openings_path && load_openings(cfg.openings_path, &m, cfg.max_ply) != 0) return 1;
    char oerr[3 * 1200];
    if (check_outputs(&cfg, oerr, sizeof oerr) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, oerr);
        return 1;
    }
    if (cfg.csa_dir && compat_mkdir_p(cfg.csa_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    db_model_t model[2];
    int have_model[2] = {0, 0};
    if (cfg.db_path || cfg.run_dir) {
        char path[1200];
        if (cfg.run_dir) {
            if (compat_mkdir_p(cfg.run_dir, err, sizeof err) != 0) {
                fprintf(stderr, "%s: %s\n", g_prog, err);
                return 1;
            }
            run_path(cfg.run_dir, RUN_DB, path, sizeof path);
        } else {
            msgf(path, sizeof path, "%s", cfg.db_path);
        }
        if (db_open(path, 0, &m.db, err, sizeof err) != DB_OK) {
            fprintf(stderr, "%s: %s\n", g_prog, err);
            return 1;
        }
        for (int k = 0; k < 2; k++) {
            if (cfg.eng[k].cycle < 0) continue;
            if (db_model_by_cycle(m.db, cfg.eng[k].cycle, &model[k]) != DB_OK) {
                fprintf(stderr, "%s: --cycle%d %d: no such model in %s\n", g_prog, k + 1, cfg.eng[k].cycle, path);
                db_close(m.db);
                return 1;
            }
            have_model[k] = 1;
        }
        /* The row's fixed part; store_game opens it when the first game ends. */
        m.side = have_model[0] ? 0 : have_model[1] ? 1 : 0;
        m.row.cycle = have_model[m.side] ? model[m.side].cycle : -1;
        m.row.model_a = have_model[m.side] ? model[m.side].id : 0;
        m.row.model_b = have_model[1 - m.side] ? model[1 - m.side].id : 0;
        char tc[96];
        time_control_text(&cfg, tc, sizeof tc);
        msgf(m.row.settings, sizeof m.row.settings, "usi-match %s, max_ply %d, %d games", tc, cfg.max_ply, cfg.games);
        if (cfg.random_plies > 0) {
            size_t used = strlen(m.row.settings);
            msgf(m.row.settings + used, sizeof m.row.settings - used, ", %d random plies (seed %" PRIu64 ")",
                 cfg.random_plies, cfg.seed);
        }
    }
    m.out = calloc((size_t)cfg.games, sizeof *m.out);
    if (!m.out) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        db_close(m.db);
        return 1;
    }
    compat_install_stop_handler();
    m.st = status_new(stdout, (double)cfg.progress_s, cfg.quiet != 0);
    int32_t nt = cfg.concurrency < cfg.games ? cfg.concurrency : cfg.games;
    compat_thread_t *th = calloc((size_t)nt, sizeof *th);
    int32_t started = 0;
    while (th && started < nt && compat_thread_create(&th[started], slot_thread, &m) == 0) started++;
    if (started == 0) slot_thread(&m);
    for (int32_t i = 0; i < started; i++) compat_thread_join(th[i]);
    free(th);
    status_free(m.st); /* the last score stays as a line */
    m.st = NULL;

    int32_t wdl[3];
    int32_t played = print_summary(&m, wdl), w = wdl[0], d = wdl[1], l = wdl[2];

    /* Every game was stored as it ended; a match that played (and stored)
     * all its games gets its totals (from A's side) and Elo, one that did not
     * stays unfinished (no Elo; its W/D/L are those of its stored games). */
    int complete = played == cfg.games && m.stored == played && !m.fatal && !compat_stop_requested();
    if (m.db && m.row.id > 0) {
        db_match_t *row = &m.row;
        if (complete) {
            row->wins = m.side == 0 ? w : l;
            row->losses = m.side == 0 ? l : w;
            row->draws = d;
            ref_elo_t re;
            ref_elo_trinomial(row->wins, row->draws, row->losses, &re);
            row->elo = re.elo, row->elo_lo = re.elo_lo, row->elo_hi = re.elo_hi;
            if (db_match_finish(m.db, row) != DB_OK) {
                fprintf(stderr, "%s: %s\n", g_prog, db_errmsg(m.db));
                if (!m.fatal) msgf(m.fatal_msg, sizeof m.fatal_msg, "the match's row was not finished");
                m.fatal = 1;
            } else if (row->cycle >= 0) {
                printf("recorded as match %lld (cycle %d)\n", (long long)row->id, row->cycle);
            } else {
                printf("recorded as match %lld\n", (long long)row->id);
            }
        } else {
            printf("recorded as match %lld, unfinished (%d of %d games stored; no Elo)\n", (long long)row->id, m.stored,
                   cfg.games);
        }
    }
    if (m.fatal) fprintf(stderr, "%s: %s\n", g_prog, m.fatal_msg[0] ? m.fatal_msg : "failed");
    else if (compat_stop_requested()) fprintf(stderr, "%s: interrupted; games in progress were not recorded\n", g_prog);
    else rc = 0;
    db_close(m.db);
    for (int32_t i = 0; i < m.n_openings; i++) free(m.openings[i]);
    free(m.openings);
    free(m.out);
    free(m.use[0].ms), free(m.use[1].ms);
    compat_mutex_destroy(&m.mu);
    return rc;
}
