/* referee.c - the match referee, Elo arithmetic, the ladder and match games
 * in the database (through data/db.h). See referee.h. Every verdict comes
 * from engine/rules.h; this file only decides who caused an end and how it
 * is written down. */
#include "match/referee.h"
#include "compat/err.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

static const char *color_name(color_t c) { return c == COLOR_BLACK ? "black" : "white"; }

/* ---- one game ---------------------------------------------------------------- */
ref_game_t *ref_game_new(void) { return calloc(1, sizeof(ref_game_t)); }
void ref_game_free(ref_game_t *g) { free(g); }

static void end_game(ref_game_t *g, rules_end_t end, color_t winner, color_t offender, const char *fmt, ...) {
    g->end = end;
    g->winner = winner;
    g->offender = offender;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->detail, sizeof g->detail, fmt, ap);
    va_end(ap);
}

/* The verdict of the rules on the position after a move (or at the start).
 * The declaration is never automatic: a player has to claim it. */
static rules_end_t judge(ref_game_t *g) {
    rules_status_t st = rules_status(&g->pos, g->max_ply);
    color_t us = pos_side_to_move(&g->pos), them = color_flip(us);
    switch (st.end) {
    case RULES_END_CHECKMATE:
        end_game(g, st.end, them, COLOR_NB, "%s has no legal move (%s)", color_name(us),
                 pos_in_check(&g->pos) ? "checkmate" : "stalemate");
        break;
    case RULES_END_SENNICHITE:
        end_game(g, st.end, COLOR_NB, COLOR_NB, "fourfold repetition");
        break;
    case RULES_END_PERPETUAL_CHECK:
        end_game(g, st.end, st.winner, color_flip(st.winner), "fourfold repetition with %s giving check every move",
                 color_name(color_flip(st.winner)));
        break;
    case RULES_END_MAX_PLY:
        end_game(g, st.end, COLOR_NB, COLOR_NB, "move limit %d reached", g->max_ply);
        break;
    default: break; /* NONE, or DECLARATION: only on a claim */
    }
    return g->end;
}

int ref_game_start(ref_game_t *g, const char *start, int32_t max_ply, char *err, size_t errlen) {
    if (!g || !start) {
        set_err(err, errlen, "ref_game_start: no start position");
        return -1;
    }
    g->n_moves = 0;
    g->end = RULES_END_NONE;
    g->winner = g->offender = COLOR_NB;
    g->crashed = false;
    g->detail[0] = 0;
    g->max_ply = max_ply;
    while (isspace((unsigned char)*start)) start++;
    if (strncmp(start, "sfen ", 5) == 0) start += 5;
    const char *mv = strstr(start, " moves");
    size_t len = mv ? (size_t)(mv - start) : strlen(start);
    while (len > 0 && isspace((unsigned char)start[len - 1])) len--;
    if (len == 0 || len >= REF_START_MAX) {
        set_err(err, errlen, "start position '%.40s': %s", start, len ? "too long" : "empty");
        return -1;
    }
    char e[256];
    if (sfen_parse(&g->pos, start, len, e, sizeof e) != SFEN_OK) {
        set_err(err, errlen, "start position '%.*s': %s", (int)(len > 100 ? 100 : len), start, e);
        return -1;
    }
    if (len == 8 && memcmp(start, "startpos", 8) == 0) {
        strcpy(g->start, "startpos");
    } else {
        sfen_write(&g->pos, g->start, sizeof g->start); /* normalised */
    }
    if (mv) {
        const char *p = mv + 6;
        if (*p && !isspace((unsigned char)*p)) {
            set_err(err, errlen, "start position: '%s' is not ' moves ...'", mv);
            return -1;
        }
        for (;;) {
            while (isspace((unsigned char)*p)) p++;
            if (!*p) break;
            const char *q = p;
            while (*q && !isspace((unsigned char)*q)) q++;
            move_t m = move_from_usi(&g->pos, p, (size_t)(q - p));
            if (m == MOVE_NONE || ref_game_over(g)) {
                set_err(err, errlen, "start position: opening move %d '%.*s' is %s", g->n_moves + 1, (int)(q - p), p,
                        ref_game_over(g) ? "after the end of the game" : "illegal");
                return -1;
            }
            if (g->n_moves >= POS_HIST_MAX - 1) {
                set_err(err, errlen, "start position: too many opening moves");
                return -1;
            }
            g->moves[g->n_moves++] = m;
            pos_do_move(&g->pos, m);
            judge(g);
            p = q;
        }
    }
    judge(g);
    return 0;
}

rules_end_t ref_game_play(ref_game_t *g, move_t m) {
    if (ref_game_over(g)) return g->end;
    color_t us = pos_side_to_move(&g->pos);
    if (!pos_is_valid_move(&g->pos, m)) {
        char t[MOVE_USI_MAX + 8];
        move_to_usi(m, t);
        end_game(g, RULES_END_ILLEGAL_MOVE, color_flip(us), us, "%s played %s, which is illegal", color_name(us), t);
        return g->end;
    }
    if (g->n_moves >= POS_HIST_MAX - 1) { /* cannot happen with any sane max_ply */
        end_game(g, RULES_END_MAX_PLY, COLOR_NB, COLOR_NB, "history full after %d moves", g->n_moves);
        return g->end;
    }
    g->moves[g->n_moves++] = m;
    pos_do_move(&g->pos, m);
    return judge(g);
}

rules_end_t ref_game_play_usi(ref_game_t *g, const char *text) {
    if (ref_game_over(g)) return g->end;
    if (!text) text = "";
    while (isspace((unsigned char)*text)) text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1])) len--;
    if (len == 6 && memcmp(text, "resign", 6) == 0) return ref_game_resign(g);
    if (len == 3 && memcmp(text, "win", 3) == 0) return ref_game_claim_win(g);
    move_t m = move_from_usi(&g->pos, text, len);
    if (m == MOVE_NONE) {
        color_t us = pos_side_to_move(&g->pos);
        end_game(g, RULES_END_ILLEGAL_MOVE, color_flip(us), us, "%s played '%.*s', which is %s", color_name(us),
                 (int)(len > 32 ? 32 : len), text, len ? "unreadable or illegal" : "empty");
        return g->end;
    }
    return ref_game_play(g, m);
}

rules_end_t ref_game_resign(ref_game_t *g) {
    if (ref_game_over(g)) return g->end;
    color_t us = pos_side_to_move(&g->pos);
    end_game(g, RULES_END_RESIGN, color_flip(us), us, "%s resigned", color_name(us));
    return g->end;
}

rules_end_t ref_game_claim_win(ref_game_t *g) {
    if (ref_game_over(g)) return g->end;
    color_t us = pos_side_to_move(&g->pos);
    if (rules_can_declare(&g->pos)) {
        end_game(g, RULES_END_DECLARATION, us, us, "%s declared a win (entering king, %d points)", color_name(us),
                 rules_declaration_points(&g->pos, us));
    } else {
        end_game(g, RULES_END_ILLEGAL_MOVE, color_flip(us), us, "%s claimed a declaration win it does not have (%d points)",
                 color_name(us), rules_declaration_points(&g->pos, us));
    }
    return g->end;
}

rules_end_t ref_game_forfeit(ref_game_t *g, color_t side, rules_end_t end, bool crashed, const char *detail) {
    if (ref_game_over(g)) return g->end;
    KOMA_ASSERT(side == COLOR_BLACK || side == COLOR_WHITE);
    KOMA_ASSERT(end == RULES_END_TIME || end == RULES_END_ILLEGAL_MOVE);
    end_game(g, end, color_flip(side), side, "%s", detail ? detail : (end == RULES_END_TIME ? "time" : "forfeit"));
    g->crashed = crashed;
    return g->end;
}

int32_t ref_game_result(const ref_game_t *g) {
    if (g->winner == COLOR_BLACK) return DB_RESULT_BLACK_WIN;
    if (g->winner == COLOR_WHITE) return DB_RESULT_WHITE_WIN;
    return DB_RESULT_DRAW;
}

db_reason_t ref_db_reason(rules_end_t end) {
    switch (end) {
    case RULES_END_CHECKMATE: return DB_REASON_CHECKMATE;
    case RULES_END_SENNICHITE: return DB_REASON_SENNICHITE;
    case RULES_END_PERPETUAL_CHECK: return DB_REASON_PERPETUAL_CHECK;
    case RULES_END_DECLARATION: return DB_REASON_DECLARATION;
    case RULES_END_MAX_PLY: return DB_REASON_MAX_PLY;
    case RULES_END_RESIGN: return DB_REASON_RESIGN;
    case RULES_END_ILLEGAL_MOVE: return DB_REASON_ILLEGAL_MOVE;
    case RULES_END_TIME: return DB_REASON_TIME;
    default: return DB_REASON_ABORT;
    }
}

char *ref_game_moves_usi(const ref_game_t *g) {
    char *s = malloc((size_t)g->n_moves * MOVE_USI_MAX + 1), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (int32_t i = 0; i < g->n_moves; i++) {
        if (i) *p++ = ' ';
        p += move_to_usi(g->moves[i], p);
    }
    return s;
}

const char *ref_csa_ending(const ref_game_t *g) {
    switch (g->end) {
    case RULES_END_CHECKMATE: return "%TSUMI";
    case RULES_END_SENNICHITE: return "%SENNICHITE";
    case RULES_END_PERPETUAL_CHECK: /* a foul by the checker, who is not the side to move */
        return g->offender == COLOR_BLACK ? "%+ILLEGAL_ACTION" : "%-ILLEGAL_ACTION";
    case RULES_END_DECLARATION: return "%KACHI";
    case RULES_END_MAX_PLY: return "%JISHOGI";
    case RULES_END_RESIGN: return "%TORYO";
    case RULES_END_TIME: return "%TIME_UP";
    case RULES_END_ILLEGAL_MOVE:
        if (g->crashed) return g->offender == COLOR_BLACK ? "%+ILLEGAL_ACTION" : "%-ILLEGAL_ACTION";
        return "%ILLEGAL_MOVE"; /* the side to move loses; the comment says why */
    default: return "%CHUDAN";
    }
}

/* ---- Elo --------------------------------------------------------------------- */
double ref_elo_from_score(double s) {
    if (!(s >= 0.0 && s <= 1.0)) return NAN;
    if (s <= 0.0) return -INFINITY;
    if (s >= 1.0) return INFINITY;
    return -400.0 * log10(1.0 / s - 1.0);
}

double ref_elo_to_score(double e) { return 1.0 / (1.0 + pow(10.0, -e / 400.0)); }

static void elo_nan(ref_elo_t *o) {
    o->score = o->elo = o->elo_lo = o->elo_hi = o->los = NAN;
}

/* Fills score, elo and the interval from the mean score s over n samples
 * of per-sample variance var (of the per-game score), with games the number
 * of games behind it (for the perfect-score adjustment and Wilson). */
static void elo_fill(ref_elo_t *o, double s, double var, int32_t n, double games) {
    const double z = REF_ELO_Z95;
    o->score = s;
    double lo, hi;
    if (var <= 1e-12) { /* every sample scored the same: Wilson score interval */
        double z2n = z * z / games;
        double c = (s + z2n / 2) / (1 + z2n);
        double h = z / (1 + z2n) * sqrt(s * (1 - s) / games + z * z / (4 * games * games));
        lo = c - h, hi = c + h;
        if (s >= 1.0) hi = 1.0;
        if (s <= 0.0) lo = 0.0;
    } else {
        double se = sqrt(var / n);
        lo = s - z * se, hi = s + z * se;
    }
    double sp = s; /* a perfect score: as if one more game had been drawn */
    if (s >= 1.0) sp = (games + 0.5) / (games + 1);
    if (s <= 0.0) sp = 0.5 / (games + 1);
    o->elo = ref_elo_from_score(sp);
    o->elo_lo = lo <= 0.0 ? -INFINITY : lo >= 1.0 ? INFINITY : ref_elo_from_score(lo);
    o->elo_hi = hi >= 1.0 ? INFINITY : hi <= 0.0 ? -INFINITY : ref_elo_from_score(hi);
}

static double los_of(double w, double l) {
    if (w + l <= 0) return 0.5;
    return 0.5 * (1.0 + erf((w - l) / sqrt(2.0 * (w + l))));
}

void ref_elo_trinomial(int32_t wins, int32_t draws, int32_t losses, ref_elo_t *o) {
    memset(o, 0, sizeof *o);
    o->wins = wins, o->draws = draws, o->losses = losses;
    int32_t n = wins + draws + losses;
    o->n = n;
    if (n <= 0 || wins < 0 || draws < 0 || losses < 0) {
        elo_nan(o);
        return;
    }
    double s = (wins + 0.5 * draws) / n;
    double var = (wins * (1 - s) * (1 - s) + draws * (0.5 - s) * (0.5 - s) + losses * s * s) / n;
    elo_fill(o, s, var, n, n);
    o->los = los_of(wins, losses);
}

void ref_elo_pentanomial(const int32_t pairs[5], ref_elo_t *o) {
    memset(o, 0, sizeof *o);
    int32_t n = 0;
    double sum = 0;
    for (int k = 0; k < 5; k++) {
        if (pairs[k] < 0) {
            elo_nan(o);
            return;
        }
        n += pairs[k];
        sum += pairs[k] * (k / 4.0);
    }
    o->n = n;
    if (n <= 0) {
        elo_nan(o);
        return;
    }
    double s = sum / n, var = 0;
    for (int k = 0; k < 5; k++) var += pairs[k] * (k / 4.0 - s) * (k / 4.0 - s);
    var /= n;
    elo_fill(o, s, var, n, 2.0 * n);
    /* LOS from the pair outcomes: pairs A won on balance against pairs B won. */
    o->los = los_of(2.0 * pairs[4] + pairs[3], 2.0 * pairs[0] + pairs[1]);
}

/* ---- the ladder -------------------------------------------------------------- */
db_status_t ref_elo_ladder(db_t *db, ref_ladder_point_t **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    db_match_t *ms = NULL;
    int32_t nm = 0;
    db_status_t st = db_matches_list(db, -1, &ms, &nm);
    if (st != DB_OK) return st;
    /* Cycles of both models of every match between two models of the run. */
    typedef struct {
        int32_t a, b;
        const db_match_t *m;
    } edge_t;
    edge_t *edges = calloc((size_t)nm + 1, sizeof *edges);
    int32_t ne = 0, max_cycle = 0;
    if (!edges) {
        free(ms);
        return DB_ERROR;
    }
    for (int32_t i = 0; i < nm; i++) {
        const db_match_t *m = &ms[i];
        if (m->model_b == 0 || !isfinite(m->elo)) continue;
        db_model_t ma, mb;
        if (db_model_get(db, m->model_a, &ma) != DB_OK || db_model_get(db, m->model_b, &mb) != DB_OK) continue;
        if (mb.cycle >= ma.cycle) continue; /* a ladder step goes from an earlier net to a later one */
        int32_t j;
        for (j = 0; j < ne && edges[j].a != ma.cycle; j++) {}
        if (j == ne) ne++;
        else if (edges[j].m->id > m->id) continue; /* keep the latest match of each cycle */
        edges[j] = (edge_t){ma.cycle, mb.cycle, m};
        if (ma.cycle > max_cycle) max_cycle = ma.cycle;
    }
    ref_ladder_point_t *pts = NULL;
    int32_t np = 0;
    if (ne > 0) {
        /* rated[c]: index into pts + 1, 0 = not rated. Edges processed by cycle, so
         * the cycle a step starts from (always lower) is rated before it is needed. */
        int32_t *rated = calloc((size_t)max_cycle + 1, sizeof *rated);
        pts = calloc((size_t)ne + 1, sizeof *pts);
        if (!rated || !pts) {
            free(rated);
            free(pts);
            free(edges);
            free(ms);
            return DB_ERROR;
        }
        pts[np++] = (ref_ladder_point_t){0, 0.0, 0.0, 0.0, 0.0, -1, 0, 0};
        rated[0] = 1;
        for (int32_t c = 1; c <= max_cycle; c++) {
            for (int32_t j = 0; j < ne; j++) {
                if (edges[j].a != c || !rated[edges[j].b]) continue;
                const ref_ladder_point_t *from = &pts[rated[edges[j].b] - 1];
                const db_match_t *m = edges[j].m;
                double dlo = m->elo - m->elo_lo, dhi = m->elo_hi - m->elo;
                double flo = from->elo - from->elo_lo, fhi = from->elo_hi - from->elo;
                ref_ladder_point_t p;
                p.cycle = c;
                p.diff = m->elo;
                p.elo = from->elo + m->elo;
                p.elo_lo = p.elo - sqrt(dlo * dlo + flo * flo);
                p.elo_hi = p.elo + sqrt(dhi * dhi + fhi * fhi);
                p.from_cycle = edges[j].b;
                p.match_id = m->id;
                p.games = m->wins + m->draws + m->losses;
                pts[np++] = p;
                rated[c] = np;
                break;
            }
        }
        free(rated);
    }
    free(edges);
    free(ms);
    *out = pts;
    *n = np;
    return DB_OK;
}

/* ---- match games in the database --------------------------------------------------- */
db_status_t ref_store_match_game(db_t *db, int64_t match_id, const ref_game_t *g, const char *black,
                                 const char *white) {
    if (!db || !g) return DB_INVALID;
    char *moves = ref_game_moves_usi(g);
    if (!moves) return DB_ERROR;
    db_game_t dg;
    memset(&dg, 0, sizeof dg);
    dg.start_sfen = g->start;
    dg.moves = moves;
    dg.plies = g->n_moves;
    dg.result = ref_game_result(g);
    dg.reason = ref_db_reason(g->end);
    dg.black = black ? black : "";
    dg.white = white ? white : "";
    dg.detail = g->detail;
    db_status_t st = db_match_game_insert(db, match_id, &dg);
    free(moves);
    return st;
}
