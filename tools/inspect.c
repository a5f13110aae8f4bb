/* inspect.c - looks inside a run, its database or one shard, without
 * changing anything.
 *
 *   inspect RUN_DIR                  summary of RUN_DIR/koma.db
 *   inspect --db FILE                the same for a database file
 *   inspect --shard FILE [--rows N]  a shard's metadata, columns (dtype, shape,
 *                                    checksum ok/BAD), its validation, and its
 *                                    first N rows decoded (default 3)
 *
 * Exit status: 0 all fine, 1 something is bad or unreadable (the message
 * names the file), 2 usage. Owns: presentation only; every check is
 * data/shard.c's or data/db.c's.
 */
#include "compat/version.h"
#include "compat/bits.h"
#include "compat/compat.h"
#include "data/db.h"
#include "data/run.h"
#include "match/rating.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "engine/encode.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "nn/safetensors.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The name this program was run as: inspect in the build, koma-inspect where
 * installed (compat/version.h); in usage, --version and every message. */
static const char *g_prog = "inspect";

static void usage(FILE *out) {
    fprintf(out,
            "usage: %s RUN_DIR\n"
            "       %s --db FILE\n"
            "       %s --shard FILE [--rows N]\n"
            "       %s --shard FILE --expand OUT\n"
            "RUN_DIR: a summary of the run (RUN_DIR/koma.db); --db: the same for a\n"
            "database file; --shard: a shard's metadata, columns, checksums and its\n"
            "first N rows decoded (default 3). Nothing is changed. --expand: the\n"
            "shard's input planes, hand values and legal masks, as the trainer makes\n"
            "them from its positions, into the safetensors file OUT (koma_shards.py).\n",
            g_prog, g_prog, g_prog, g_prog);
}

static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0.0; }

static void print_loss(const char *name, double v) {
    if (isnan(v)) printf(" %s -", name);
    else printf(" %s %.4f", name, v);
}

/* ---- run / database summary ------------------------------------------------------ */
/* The header: invocations, the newest model, the games and their endings, positions and shards. */
static void print_summary(db_t *db, const char *path, const db_summary_t *s) {
    printf("database %s (schema %d)\n", path, s->schema_version);
    printf("  invocations  %lld", (long long)s->runs);
    if (s->runs) printf(" (first %s, last %s)", s->first_run, s->last_run);
    printf("\n");

    db_model_t m;
    printf("  models       %lld", (long long)s->models);
    if (s->models && db_model_latest(db, &m) == DB_OK) {
        printf(", latest: cycle %d, %s, %s, %lld steps, %lld samples\n", m.cycle, m.path, m.arch[0] ? m.arch : "?",
               (long long)m.train_steps, (long long)m.train_samples);
        printf("               losses at publication:");
        print_loss("policy", m.loss_policy);
        print_loss("value", m.loss_value);
        print_loss("legal", m.loss_legal);
        print_loss("total", m.loss_total);
        if (!isnan(m.cpu_seconds)) printf("\n               the run's CPU time at publication: %.1f CPU-minutes", m.cpu_seconds / 60);
    }
    printf("\n");

    int64_t decided = s->black_wins + s->white_wins + s->draws;
    if (s->games == 0 && s->positions > 0) { /* imported positions only: no games to describe */
        printf("  games        0 (the positions below were imported as positions, not games)\n");
    } else {
    printf("  games        %lld: black wins %lld (%.1f%%), white wins %lld (%.1f%%), draws %lld (%.1f%%)",
           (long long)s->games, (long long)s->black_wins, pct(s->black_wins, decided), (long long)s->white_wins,
           pct(s->white_wins, decided), (long long)s->draws, pct(s->draws, decided));
    if (!isnan(s->avg_plies)) printf(", %.1f plies on average", s->avg_plies);
    printf("\n  ended by    ");
    int any = 0;
    for (int r = 0; r < DB_REASON_NB; r++)
        if (s->reasons[r])
            printf("%s %s %lld (%.1f%%)", any++ ? "," : "", db_reason_name((db_reason_t)r), (long long)s->reasons[r],
                   pct(s->reasons[r], s->games));
    printf("%s\n", any ? "" : " -");
    }
    printf("  positions    %lld in %lld shards (%.1f MiB)\n", (long long)s->positions, (long long)s->shards,
           (double)s->shard_bytes / (1024.0 * 1024.0));
    db_set_t *sets = NULL;
    int32_t nsets = 0;
    if (db_sets_list(db, &sets, &nsets) == DB_OK && nsets > 0) { /* imported position files (schema v7) */
        int64_t pos = 0, rej = 0, done = 0;
        for (int32_t i = 0; i < nsets; i++) pos += sets[i].positions, rej += sets[i].rejected, done += sets[i].finished;
        printf("  imported positions %lld from %d position file(s) (%lld finished), %lld record(s) rejected\n",
               (long long)pos, (int)nsets, (long long)done, (long long)rej);
        for (int32_t i = 0; i < nsets && i < 5; i++)
            printf("    %s %s: %lld of %lld records read, %lld positions%s\n", sets[i].format, sets[i].path,
                   (long long)sets[i].records_done, (long long)sets[i].records, (long long)sets[i].positions,
                   sets[i].finished ? "" : " (unfinished: the same import resumes it)");
        if (nsets > 5) printf("    ... %d more\n", (int)nsets - 5);
    }
    free(sets);
    if (s->pending)
        printf("  pending      %lld shard files written but not registered (the next start moves them aside)\n",
               (long long)s->pending);
}

/* Where the self-play games were played (mpirun -np N selfplay: one row per rank). */
static int print_ranks(db_t *db) {
    int rc = 0;
    db_rank_games_t *rk = NULL;
    int32_t nrk = 0;
    if (db_games_by_rank(db, &rk, &nrk) != DB_OK) {
        fprintf(stderr, "%s: %s\n", g_prog, db_errmsg(db));
        rc = 1;
    } else if (nrk > 0) {
        printf("  ranks        games by the rank and host that played them; pos/s from its first game to its last\n");
        printf("    %5s %-24s %8s %10s %9s  %-24s %s\n", "rank", "host", "games", "positions", "pos/s", "first game",
               "last game");
        for (int32_t i = 0; i < nrk; i++) {
            char rate[32] = "-";
            if (rk[i].seconds > 0) snprintf(rate, sizeof rate, "%.1f", (double)rk[i].positions / rk[i].seconds);
            printf("    %5d %-24.24s %8lld %10lld %9s  %-24s %s\n", rk[i].rank, rk[i].host, (long long)rk[i].games,
                   (long long)rk[i].positions, rate, rk[i].first, rk[i].last);
        }
    }
    free(rk);

    return rc;
}

/* The table of the last 20 cycles and the latest shards. */
static void print_cycles(db_t *db, const db_summary_t *s) {
    /* Cycles: those with shards or metrics, up to the highest seen. */
    db_shard_t *sh = NULL;
    int32_t nsh = 0, max_cycle = s->latest_cycle;
    if (db_shards_recent(db, 0, &sh, &nsh) == DB_OK) {
        for (int32_t i = 0; i < nsh; i++)
            if (sh[i].cycle > max_cycle) max_cycle = sh[i].cycle;
    }
    if (max_cycle >= 0) {
        /* false-res: false resignations / would-be resignations in the cycle's
         * no-resign games, and their rate; "-" where not recorded (before v3) */
        printf("  cycles\n    %5s %8s %10s %6s %6s %6s %7s %9s %8s %8s %10s %11s %6s\n", "cycle", "games", "positions",
               "black", "white", "draws", "plies", "pos/s", "batch", "elo", "no-resign", "false-res", "rate");
        int32_t from = max_cycle - 19 > 0 ? max_cycle - 19 : 0;
        if (from > 0) printf("    (%d earlier cycles not shown)\n", from);
        double thr_lo = INFINITY, thr_hi = -INFINITY;
        for (int32_t c = from; c <= max_cycle; c++) {
            int64_t g = 0, p = 0;
            db_count(db, c, &g, &p);
            db_cycle_metrics_t cm;
            int have = db_cycle_metrics_get(db, c, &cm) == DB_OK;
            if (!have && !g) continue;
            printf("    %5d %8lld %10lld", c, (long long)g, (long long)p);
            /* Results and lengths from the games themselves: after a kill mid-cycle the
             * metrics row (written when a cycle closes) lags them or is blank. */
            int64_t bw = 0, ww = 0, dr = 0;
            double plies = NAN;
            db_cycle_results(db, c, &bw, &ww, &dr, &plies);
            printf(" %6lld %6lld %6lld", (long long)bw, (long long)ww, (long long)dr);
            if (isnan(plies)) printf(" %7s", "-");
            else printf(" %7.1f", plies);
            if (have) {
                if (isnan(cm.positions_per_s)) printf(" %9s %8s", "-", "-");
                else printf(" %9.0f %8.1f", cm.positions_per_s, cm.avg_batch);
                if (isnan(cm.elo)) printf(" %8s", "-");
                else printf(" %8.0f", cm.elo);
                char nr[24] = "-", fr[48] = "-", rate[16] = "-";
                if (cm.no_resign_games >= 0) snprintf(nr, sizeof nr, "%lld", (long long)cm.no_resign_games);
                if (cm.false_resign >= 0 && cm.would_resign >= 0)
                    snprintf(fr, sizeof fr, "%lld/%lld", (long long)cm.false_resign, (long long)cm.would_resign);
                if (cm.false_resign >= 0 && cm.would_resign > 0)
                    snprintf(rate, sizeof rate, "%.1f%%", 100.0 * (double)cm.false_resign / (double)cm.would_resign);
                printf(" %10s %11s %6s", nr, fr, rate);
                if (isfinite(cm.resign_threshold)) {
                    if (cm.resign_threshold < thr_lo) thr_lo = cm.resign_threshold;
                    if (cm.resign_threshold > thr_hi) thr_hi = cm.resign_threshold;
                }
            }
            printf("\n");
        }
        if (isfinite(thr_lo) && thr_hi <= 0.0) printf("    resignation off\n");
        else if (isfinite(thr_lo) && thr_lo == thr_hi) printf("    resign threshold %.2f\n", thr_lo);
        else if (isfinite(thr_lo)) printf("    resign threshold %.2f to %.2f\n", thr_lo, thr_hi);
    }
    if (nsh > 0) {
        printf("  latest shards\n");
        for (int32_t i = nsh > 5 ? nsh - 5 : 0; i < nsh; i++)
            printf("    %-40s cycle %3d  %7lld rows  %5lld games  %9lld bytes  %s\n", sh[i].path, sh[i].cycle,
                   (long long)sh[i].rows, (long long)sh[i].games, (long long)sh[i].bytes, sh[i].created);
    }
    free(sh);
}

/* The last training steps logged. */
static void print_training(db_t *db, const db_summary_t *s) {
    if (s->last_step >= 0) {
        db_train_step_t ts[8];
        int32_t n = 0;
        int64_t from = s->last_step - 7 > 0 ? s->last_step - 7 : 0;
        printf("  training     %lld steps logged, last step %lld\n", (long long)s->train_steps,
               (long long)s->last_step);
        if (db_train_steps_get(db, from, s->last_step + 1, ts, 8, &n) == DB_OK) {
            for (int32_t i = 0; i < n; i++) {
                printf("    step %8lld  cycle %3d  lr %.5f ", (long long)ts[i].step, ts[i].cycle, ts[i].lr);
                print_loss("policy", ts[i].loss_policy);
                print_loss("value", ts[i].loss_value);
                print_loss("legal", ts[i].loss_legal);
                print_loss("total", ts[i].loss_total);
                printf("\n");
            }
        }
    } else {
        printf("  training     no steps logged\n");
    }
}

/* The last matches and the rating list over every match. */
static int print_matches(db_t *db) {
    int rc = 0;
    db_match_t *mt = NULL;
    int32_t nm = 0;
    if (db_matches_list(db, -1, &mt, &nm) == DB_OK) {
        printf("  matches      %d\n", nm);
        for (int32_t i = nm > 5 ? nm - 5 : 0; i < nm; i++) {
            const db_match_t *m = &mt[i];
            char a[DB_NAME_MAX + 32], b[DB_NAME_MAX + 32], cyc[16] = "-", elo[96];
            if (m->cycle >= 0) snprintf(cyc, sizeof cyc, "%d", m->cycle);
            /* a net by its cycle, as selfplay's log numbers models ("model 3 vs 2") */
            db_model_t ma, mb;
            if (m->model_a && db_model_get(db, m->model_a, &ma) == DB_OK) snprintf(a, sizeof a, "model %d", ma.cycle);
            else if (m->model_a) snprintf(a, sizeof a, "model id %lld", (long long)m->model_a);
            else snprintf(a, sizeof a, "%s", m->engine_a[0] ? m->engine_a : "?");
            if (m->model_b && db_model_get(db, m->model_b, &mb) == DB_OK) snprintf(b, sizeof b, "model %d", mb.cycle);
            else if (m->model_b) snprintf(b, sizeof b, "model id %lld", (long long)m->model_b);
            else snprintf(b, sizeof b, "%s", m->opponent[0] ? m->opponent : m->engine_b[0] ? m->engine_b : "?");
            /* no Elo: the match never finished (killed or stopped; data/db.h) */
            if (isnan(m->elo)) snprintf(elo, sizeof elo, "unfinished, no Elo");
            else snprintf(elo, sizeof elo, "elo %+.0f [%+.0f, %+.0f]", m->elo, m->elo_lo, m->elo_hi);
            printf("    match %lld  cycle %3s  %s vs %s: %lld games +%d =%d -%d  %s  %s\n", (long long)m->id, cyc, a, b,
                   (long long)m->games, m->wins, m->draws, m->losses, elo, m->settings);
        }
    }
    free(mt);
    /* One rating list over every match (match/rating.h), cycle 0 = 0. */
    rating_player_t *list = NULL;
    int32_t n = 0;
    char e[DB_ERR_MAX + 64];
    if (rating_list(db, &list, &n, e, sizeof e) != DB_OK) {
        fprintf(stderr, "%s: rating list: %s\n", g_prog, e);
        rc = 1;
    } else if (n > 0) {
        printf("  ratings      joint fit over every match, cycle 0 = 0, 95%% intervals\n");
        int32_t from = 0, nets = 0;
        for (int32_t i = 0; i < n; i++) nets += list[i].cycle >= 0;
        if (nets > 12) from = nets - 12, printf("    (%d earlier nets not shown)\n", from);
        for (int32_t i = from; i < n; i++) {
            const rating_player_t *q = &list[i];
            if (isnan(q->elo))
                printf("    %-40.40s %8s %17s %6d games (no games linking it to cycle 0)\n", q->name, "-", "",
                       q->games);
            else printf("    %-40.40s %+8.0f [%+6.0f, %+6.0f] %6d games\n", q->name, q->elo, q->lo, q->hi, q->games);
        }
    }
    free(list);
    return rc;
}

static int inspect_db(const char *path) {
    char err[DB_ERR_MAX];
    if (!compat_file_exists(path)) {
        fprintf(stderr, "%s: no such file (not a run directory, or a run that never started?)\n", path);
        return 1;
    }
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (db_migrated_from(db))
        fprintf(stderr, "%s: %s: migrated from schema version %d to %d\n", g_prog, path, db_migrated_from(db),
                db_schema_version(db));
    int rc = 0;
    db_summary_t s;
    if (db_summary(db, &s) != DB_OK) {
        fprintf(stderr, "%s\n", db_errmsg(db));
        db_close(db);
        return 1;
    }
    print_summary(db, path, &s);
    if (print_ranks(db) != 0) rc = 1;
    print_cycles(db, &s);
    print_training(db, &s);
    if (s.matches && print_matches(db) != 0) rc = 1;
    db_close(db);
    return rc;
}

/* ---- shard -------------------------------------------------------------------------- */
/* A Position from the position column, or NULL with why when it is not a legal
 * shogi position (the raw fields are still set for SFEN text). */
static const char *decode_position(const uint8_t *bytes, pos_t *pos) {
    shard_position_t p;
    shard_position_unpack(bytes, &p);
    memset(pos, 0, offsetof(pos_t, hist) + sizeof(pos_state_t));
    memcpy(pos->board, p.board, sizeof pos->board);
    pos->side = p.side;
    pos->game_ply = p.ply;
    pos->hand[0] = p.hand[0];
    pos->hand[1] = p.hand[1];
    /* What pos_reset_state needs to be safe: codes (checked by shard_open), kings, hands. */
    int kings[2] = {0, 0};
    for (int sq = 0; sq < SQ_NB; sq++)
        if (p.board[sq] && piece_type(p.board[sq]) == PT_KING) kings[piece_color(p.board[sq])]++;
    if (kings[0] != 1 || kings[1] != 1) return "each side needs exactly one king";
    for (int c = 0; c < 2; c++)
        if (p.hand[c] & (HAND_BORROW_MASK | 0x40u | 0x80u | (1u << 23) | (1u << 27))) return "hand has stray bits";
    pos_reset_state(pos);
    return pos_validate(pos);
}

static void move_text(const pos_t *pos, int valid, uint16_t m, char *buf) {
    if (!valid || (m != MOVE_NONE && !move_is_drop(m) && (move_from(m) >= SQ_NB || move_to(m) >= SQ_NB)) ||
        (move_is_drop(m) && move_to(m) >= SQ_NB)) {
        snprintf(buf, 24, "0x%04x", m);
        return;
    }
    move_to_usi(m, buf);
    if (m != MOVE_NONE && !pos_is_legal(pos, m)) strcat(buf, "(illegal!)");
}

typedef struct {
    uint16_t label;
    float prob;
} entry_t;
static int by_prob(const void *a, const void *b) {
    float x = ((const entry_t *)a)->prob, y = ((const entry_t *)b)->prob;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Row r's position from either version's column: NULL, or why it is no legal position (pos's raw fields set). */
static const char *row_position(const shard_columns_t *c, int64_t r, pos_t *pos) {
    if (!c->hcp) return decode_position(c->position + r * SHARD_POSITION_BYTES, pos);
    static char why[256];
    memset(pos, 0, offsetof(pos_t, hist) + sizeof(pos_state_t));
    if (shard_row_position(c, r, pos, why, sizeof why) == 0) return NULL;
    shard_row_pos(c, r, pos);
    return why;
}

static void print_rows(const shard_t *s, int64_t nrows) {
    const shard_columns_t *c = shard_columns(s);
    const shard_format_t *f = shard_format(s);
    static pos_t pos; /* large: keep it off the stack */
    static uint8_t made_planes[ENC_PACKED_BYTES], made_legal[ENC_LEGAL_BYTES];
    float made_hand[ENC_HAND];
    shard_format_t made = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    if (nrows > shard_rows(s)) nrows = shard_rows(s);
    for (int64_t r = 0; r < nrows; r++) {
        const char *why = row_position(c, r, &pos);
        char sfen[SFEN_MAX_LEN], mv[32];
        sfen_write(&pos, sfen, sizeof sfen);
        move_text(&pos, why == NULL, c->move[r], mv);
        char owner[48];
        if (!shard_is_set(s)) snprintf(owner, sizeof owner, "game %lld", (long long)shard_row_game(s, r));
        else snprintf(owner, sizeof owner, "a position");
        printf("  row %lld: %s, ply %u, %s to move, %s, root_q %+.4f, move %s\n", (long long)r, owner, c->ply[r],
               pos.side ? "white" : "black",
               c->result[r] > 0   ? "won"
               : c->result[r] < 0 ? "lost"
                                  : "drawn",
               (double)c->root_q[r], mv);
        printf("    sfen %s%s%s\n", sfen, why ? "  (not a legal position: " : "", why ? why : "");
        if (why) printf("    )\n");
        int64_t b, e;
        shard_row_policy(s, r, &b, &e);
        if (e == b) {
            printf("    policy: none (no target at this row)\n");
        } else {
            entry_t top[SHARD_LABEL_NB];
            float prob[SHARD_LABEL_NB];
            int64_t n = e - b;
            double sum = 0;
            shard_row_probs(s, r, prob);
            for (int64_t i = 0; i < n; i++) {
                top[i] = (entry_t){c->policy_label[b + i], prob[i]};
                sum += top[i].prob;
            }
            qsort(top, (size_t)n, sizeof top[0], by_prob);
            printf("    policy: %lld entries, sum %.4f, top:", (long long)n, sum);
            for (int64_t i = 0; i < n && i < 6; i++) {
                char lm[32] = "?";
                int32_t dir = top[i].label / 81, sq = top[i].label % 81;
                if (!why && f->features_version == ENC_FEATURES_VERSION) {
                    move_t m = encode_label_move(&pos, top[i].label);
                    if (m != MOVE_NONE) move_to_usi(m, lm);
                    else snprintf(lm, sizeof lm, "d%d/s%d(illegal)", dir, sq);
                } else {
                    snprintf(lm, sizeof lm, "d%d/s%d", dir, sq);
                }
                printf(" %u=%s %.3f", top[i].label, lm, (double)top[i].prob);
            }
            printf("\n");
        }
        const uint8_t *planes = c->planes ? c->planes + r * f->planes_bytes : made_planes;
        const uint8_t *legal_bits = c->legal ? c->legal + r * f->legal_bytes : made_legal;
        const float *hand = c->hand ? c->hand + r * f->hand_n : made_hand;
        if (!c->planes) { /* version 2: what the trainer's loader makes from the position */
            f = &made;
            memset(made_planes, 0, sizeof made_planes), memset(made_legal, 0, sizeof made_legal);
            memset(made_hand, 0, sizeof made_hand);
            if (!why) encode_position(&pos, made_planes, made_hand), encode_legal_mask(&pos, made_legal);
        }
        int64_t bits = 0, legal = 0;
        for (int32_t i = 0; i < f->planes_bytes; i++) bits += compat_popcount32(planes[i]);
        for (int32_t i = 0; i < f->legal_bytes; i++) legal += compat_popcount32(legal_bits[i]);
        printf("    planes%s: %lld bits set; legal mask: %lld moves", c->planes ? "" : " (made from the position)",
               (long long)bits, (long long)legal);
        if (c->planes && !why && f->features_version == ENC_FEATURES_VERSION && f->legal_bytes == ENC_LEGAL_BYTES) {
            uint8_t mask[ENC_LEGAL_BYTES];
            encode_legal_mask(&pos, mask);
            printf(" (%s the position's)",
                   memcmp(mask, c->legal + r * f->legal_bytes, ENC_LEGAL_BYTES) ? "DIFFERS from" : "matches");
        }
        printf("; hand:");
        for (int32_t i = 0; i < f->hand_n && i < 16; i++) printf(" %.3g", (double)hand[i]);
        printf("\n");
    }
}

/* --expand OUT: the planes, hand and legal mask of every row of the shard at path, as the trainer's loader makes
 * them from its positions (version 2) or as stored (version 1), into OUT (safetensors: planes U8 (R, planes
 * bytes), hand F32 (R, 14), legal U8 (R, legal bytes)); for readers without a shogi move generator
 * (tools/koma_shards.py). 0, or 1 with the message printed. */
static int expand_shard(const char *path, const char *out) {
    char err[1024];
    shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    if (run_output_check(out, NULL, "the expanded planes", "--expand", err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        shard_close(s);
        return 1;
    }
    const shard_columns_t *c = shard_columns(s);
    const shard_format_t *f = shard_format(s);
    int64_t R = shard_rows(s);
    int v1 = c->planes != NULL;
    int64_t pb = v1 ? f->planes_bytes : ENC_PACKED_BYTES, hn = v1 ? f->hand_n : ENC_HAND,
            lb = v1 ? f->legal_bytes : ENC_LEGAL_BYTES;
    uint8_t *planes = v1 ? NULL : calloc((size_t)(R ? R : 1), (size_t)pb);
    float *hand = v1 ? NULL : calloc((size_t)(R ? R : 1), sizeof(float) * (size_t)hn);
    uint8_t *legal = v1 ? NULL : calloc((size_t)(R ? R : 1), (size_t)lb);
    pos_t *pos = malloc(sizeof *pos);
    int rc = 0;
    if (!pos || (!v1 && (!planes || !hand || !legal))) {
        fprintf(stderr, "%s: %s: out of memory for %lld rows\n", g_prog, path, (long long)R);
        rc = 1;
    }
    for (int64_t r = 0; rc == 0 && !v1 && r < R; r++) {
        if (shard_row_position(c, r, pos, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s: row %lld: %s\n", g_prog, path, (long long)r, err);
            rc = 1;
            break;
        }
        encode_position(pos, planes + r * pb, hand + r * hn);
        encode_legal_mask(pos, legal + r * lb);
    }
    if (rc == 0) {
        st_writer_t *w = st_writer_new();
        int64_t sp[2] = {R, pb}, sh[2] = {R, hn}, sl[2] = {R, lb};
        char v[32];
        rc = !w || st_writer_add(w, "planes", ST_DTYPE_U8, 2, sp, v1 ? c->planes : planes) ||
             st_writer_add(w, "hand", ST_DTYPE_F32, 2, sh, v1 ? c->hand : hand) ||
             st_writer_add(w, "legal", ST_DTYPE_U8, 2, sl, v1 ? c->legal : legal) ||
             st_writer_meta(w, "koma.kind", "expanded");
        snprintf(v, sizeof v, "%d", v1 ? f->features_version : ENC_FEATURES_VERSION);
        rc = rc || st_writer_meta(w, "koma.features_version", v);
        if (rc) snprintf(err, sizeof err, "%s: out of memory", out);
        if (!rc && st_writer_write(w, out, err, sizeof err) != 0) rc = 1;
        if (rc) fprintf(stderr, "%s: %s\n", g_prog, err);
        st_writer_free(w);
    }
    free(planes);
    free(hand);
    free(legal);
    free(pos);
    shard_close(s);
    return rc ? 1 : 0;
}

static int inspect_shard(const char *path, int64_t nrows) {
    char err[1024];
    int64_t size = compat_file_size(path);
    st_file_t *f = st_open(path, 0, err, sizeof err); /* no verify: show each column's checksum */
    if (!f) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 0;
    printf("shard %s (%lld bytes)\n", path, (long long)size);
    static const char *keys[] = {"koma.kind",         "koma.version", "koma.rows",
                                 "koma.games",        "koma.nnz",     "koma.features_version",
                                 "koma.planes_bytes", "koma.hand_n",  "koma.legal_bytes"};
    printf("  metadata:");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = st_meta(f, keys[i]);
        printf(" %s=%s", keys[i] + 5, v ? v : "(missing)");
    }
    printf("\n  %-16s %-5s %-14s %12s  %-16s %s\n", "column", "dtype", "shape", "bytes", "xxh3", "checksum");
    for (int32_t i = 0; i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        char shape[64] = "[", key[ST_MAX_NAME + 16], hex[17];
        for (int32_t d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? ", %lld" : "%lld",
                     (long long)t->shape[d]);
        strcat(shape, "]");
        snprintf(key, sizeof key, "koma.xxh3.%s", t->name);
        const char *want = st_meta(f, key);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(t->data, (size_t)t->nbytes));
        const char *state = !want ? "MISSING" : strcmp(want, hex) == 0 ? "ok" : "BAD";
        if (strcmp(state, "ok") != 0) rc = 1;
        printf("  %-16s %-5s %-14s %12llu  %-16s %s\n", t->name, st_dtype_name(t->dtype), shape,
               (unsigned long long)t->nbytes, hex, state);
    }
    st_close(f);

    shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
    if (s) {
        printf("  validation: ok\n");
    } else {
        printf("  validation: FAILED: %s\n", err);
        rc = 1;
        s = shard_open(path, NULL, SHARD_OPEN_NO_CHECKSUM, err, sizeof err);
    }
    if (!s) {
        printf("  rows not shown: the values do not pass the checks either\n");
        return 1;
    }
    const shard_format_t *fm = shard_format(s);
    shard_format_t mine = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    int same = fm->features_version == mine.features_version && fm->planes_bytes == mine.planes_bytes &&
               fm->hand_n == mine.hand_n && fm->legal_bytes == mine.legal_bytes;
    if (shard_version(s) == SHARD_VERSION)
        printf("  format: version %d (compact: the position as hcp, planes and legal masks made when a batch is "
               "built)%s\n", SHARD_VERSION, shard_is_set(s) ? ", a position set (a one-hot target on each row's move)" : "");
    else
        printf("  format: version 1, features_version %d, planes %d bytes, hand %d, legal %d bytes: %s this build's "
               "features\n", fm->features_version, fm->planes_bytes, fm->hand_n, fm->legal_bytes,
               same ? "matches" : "DIFFERS from");
    printf("  %lld rows, %lld games, %lld policy entries (%.1f per row)\n", (long long)shard_rows(s),
           (long long)shard_games(s), (long long)shard_nnz(s),
           shard_rows(s) ? (double)shard_nnz(s) / (double)shard_rows(s) : 0.0);
    print_rows(s, nrows);
    shard_close(s);
    return rc;
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "inspect");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    const char *db = NULL, *shard = NULL, *run = NULL, *expand = NULL;
    int64_t nrows = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            db = argv[++i];
        } else if (strcmp(argv[i], "--shard") == 0 && i + 1 < argc) {
            shard = argv[++i];
        } else if (strcmp(argv[i], "--expand") == 0 && i + 1 < argc) {
            expand = argv[++i];
        } else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
            char *end;
            nrows = strtoll(argv[++i], &end, 10);
            if (*end || nrows < 0) {
                fprintf(stderr, "%s: --rows wants a count >= 0, not '%s'\n", g_prog, argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !run) {
            run = argv[i];
        } else {
            fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", g_prog, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if ((db != NULL) + (shard != NULL) + (run != NULL) != 1) {
        usage(stderr);
        return 2;
    }
    if (shard && expand) return expand_shard(shard, expand);
    if (expand) {
        fprintf(stderr, "%s: --expand OUT goes with --shard FILE\n", g_prog);
        return 2;
    }
    if (shard) return inspect_shard(shard, nrows);
    if (db) return inspect_db(db);
    char path[4096];
    run_path(run, RUN_DB, path, sizeof path);
    return inspect_db(path);
}
