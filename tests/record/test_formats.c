/* test_formats.c - dlshogi hcpe/hcpe3 and YaneuraOu psv (data/fmt_pack.c,
 * data/fmt_file.c, tools/import.c, tools/export.c):
 *  - both 256-bit position layouts and the move16 codes round-trip on every
 *    position of seeded random games (hands and a piece box included), the
 *    eval <-> value map is a fixed point on the integers files hold;
 *  - the fixtures cshogi wrote (tests/data/formats/, make_fixtures.py) read
 *    by Koma record by record as cshogi reads them (expected.txt: SFEN,
 *    move, result, eval, candidates and visits);
 *  - the broken copies: exactly the broken records rejected, each named by
 *    file and record, the others read;
 *  - the real programs: import of each fixture and export again gives the
 *    file byte for byte; a run's games exported, imported and exported again
 *    are the same bytes (imported data, the CSA/KIF/USI records, a real
 *    self-play run); --from-cycle/--to-cycle choose shards; dedup; --check.
 */
#include "compat/compat.h"
#include "data/db.h"
#include "data/fmt_file.h"
#include "data/fmt_pack.h"
#include "data/shard.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX(name) KOMA_SOURCE_DIR "/tests/data/formats/" name

/* ---- codecs ------------------------------------------------------------------------------ */
static void check_codecs_on(pos_t *pos) {
    fmt_board_t b, back;
    fmt_board_of_pos(pos, &b);
    for (int k = 0; k < 2; k++) {
        uint8_t code[FMT_PACK_BYTES];
        CHECK(fmt_pack_encode((fmt_pack_t)k, &b, code) == 0);
        const char *e = fmt_pack_decode((fmt_pack_t)k, code, &back);
        CHECKF(e == NULL, "decode: %s", e ? e : "");
        CHECK(memcmp(back.board, b.board, sizeof b.board) == 0);
        CHECK(back.hand[0] == b.hand[0] && back.hand[1] == b.hand[1] && back.side == b.side);
    }
    move_list_t ml;
    movegen_legal(pos, &ml);
    for (int32_t i = 0; i < ml.n; i++) CHECK(fmt_move_from_cshogi(fmt_move_to_cshogi(ml.moves[i])) == ml.moves[i]);
}

static void test_codecs(void) {
    static const char *STARTS[] = {"startpos", "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
                                   "4k4/9/9/9/9/9/9/9/4K4 b 2r2b4g4s4n4l18p 1"};
    uint64_t rng = 7;
    pos_t *pos = malloc(sizeof *pos);
    KOMA_ASSERT(pos);
    int64_t positions = 0;
    for (int s = 0; s < 3; s++)
        for (int game = 0; game < 6; game++) {
            KOMA_ASSERT(sfen_parse_cstr(pos, STARTS[s], NULL, 0) == SFEN_OK);
            for (int ply = 0; ply < 160; ply++) {
                check_codecs_on(pos);
                positions++;
                move_list_t ml;
                movegen_legal(pos, &ml);
                if (ml.n == 0) break;
                move_t m = ml.moves[t_splitmix64(&rng) % (uint64_t)ml.n];
                for (int32_t i = 0; i < ml.n; i++) /* mostly captures: hands fill up */
                    if (!move_is_drop(ml.moves[i]) && pos_piece_on(pos, move_to(ml.moves[i])) && t_splitmix64(&rng) % 3)
                        m = ml.moves[i];
                pos_do_move(pos, m);
            }
        }
    printf("codecs: %lld positions round-tripped\n", (long long)positions);
    /* a missing king has no code */
    fmt_board_t b;
    memset(&b, 0, sizeof b);
    uint8_t code[FMT_PACK_BYTES];
    CHECK(fmt_pack_encode(FMT_PACK_HCP, &b, code) == -1);
    /* evals: integers a file holds come back */
    int bad = 0;
    for (int32_t e = -7000; e <= 7000; e++)
        bad += fmt_value_to_eval(fmt_eval_to_value(e, FMT_EVAL_DLSHOGI, 30000), FMT_EVAL_DLSHOGI, 30000) != e;
    CHECKF(bad == 0, "%d evals in [-7000, 7000] changed", bad);
    CHECK(fmt_value_to_eval(1.0f, FMT_EVAL_DLSHOGI, 30000) == 30000);
    /* past the exact range a foreign eval comes back as another integer with the same value (a few float steps) */
    for (int32_t e = 7000; e < 30000; e += 37) {
        float q = fmt_eval_to_value(e, FMT_EVAL_DLSHOGI, 30000);
        int32_t back = fmt_value_to_eval(q, FMT_EVAL_DLSHOGI, 30000);
        float q2 = fmt_eval_to_value(back, FMT_EVAL_DLSHOGI, 30000);
        CHECKF(fabsf(q2 - q) <= 3e-7f, "eval %d (value %.9g) came back as %d (value %.9g)", e, q, back, q2);
    }
    CHECK(fmt_value_to_eval(-1.0f, FMT_EVAL_YANEURAOU, 32000) == -32000);
    for (float q = -1.0f; q <= 1.0f; q += 0.001f) { /* exports are fixed points */
        int32_t e = fmt_value_to_eval(q, FMT_EVAL_DLSHOGI, 30000);
        bad += fmt_value_to_eval(fmt_eval_to_value(e, FMT_EVAL_DLSHOGI, 30000), FMT_EVAL_DLSHOGI, 30000) != e;
    }
    CHECKF(bad == 0, "%d exported evals are no fixed point", bad);
    /* visits from probabilities */
    uint16_t v[4] = {0}, w[4];
    const uint16_t V[4] = {1234, 7, 0, 300};
    float p[4];
    for (int i = 0; i < 4; i++) p[i] = (float)V[i] / 1541.0f;
    fmt_visits_of_probs(p, 4, w);
    CHECK(memcmp(w, V, sizeof V) == 0);
    (void)v;
    /* any target (Gumbel's, a softmax): the counts written, read back as visits / sum and written
     * again, are the same counts */
    int unstable = 0;
    for (int t = 0; t < 300; t++) {
        float q[40], q2[40];
        uint16_t c1[40], c2[40];
        int32_t n = 1 + (int32_t)(t_splitmix64(&rng) % 40);
        float sum = 0;
        for (int32_t i = 0; i < n; i++) sum += q[i] = (float)(t_splitmix64(&rng) % 100000) / 1000.0f + (t % 3 ? 0.001f : 0);
        for (int32_t i = 0; i < n; i++) q[i] /= sum;
        fmt_visits_of_probs(q, n, c1);
        uint32_t s1 = 0;
        for (int32_t i = 0; i < n; i++) s1 += c1[i];
        for (int32_t i = 0; i < n; i++) q2[i] = s1 ? (float)c1[i] / (float)s1 : 0;
        fmt_visits_of_probs(q2, n, c2);
        unstable += memcmp(c1, c2, (size_t)n * sizeof *c1) != 0;
    }
    CHECKF(unstable == 0, "%d of 300 targets: counts written again differ", unstable);
    free(pos);
}

/* ---- the fixtures against cshogi's reading ------------------------------------------------------ */
typedef struct {
    char **lines;
    int n, cap;
    int64_t rejected[64];
    int nrej;
    char rejmsg[64][REC_MSG_MAX];
    fmt_kind_t kind;
    int probs; /* hcpe3: candidates as their probabilities (visits / sum), not counts */
} collect_t;

static void add_line(collect_t *c, const char *fmt, ...) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->lines = realloc(c->lines, (size_t)c->cap * sizeof *c->lines);
        KOMA_ASSERT(c->lines);
    }
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->lines[c->n++] = strdup(buf);
}

/* SFEN as Koma writes it, without its ply; the ply into *ply. */
static void norm_sfen(const char *in, char *out, size_t len, int *ply) {
    pos_t *p = malloc(sizeof *p);
    KOMA_ASSERT(p);
    if (sfen_parse_cstr(p, in, NULL, 0) != SFEN_OK) {
        snprintf(out, len, "unreadable:%s", in);
        *ply = -1;
    } else {
        sfen_write(p, out, len);
        *ply = pos_game_ply(p);
        char *sp = strrchr(out, ' ');
        if (sp) *sp = '\0';
    }
    free(p);
}

static int on_game(void *user, const fmt_game_t *g) {
    collect_t *c = user;
    char sfen[SFEN_MAX_LEN], mv[16];
    int ply;
    norm_sfen(g->start_sfen, sfen, sizeof sfen, &ply);
    if (c->kind == FMT_HCPE) {
        move_to_usi(g->moves[0], mv);
        add_line(c, "hcpe %lld %s | %s %u %d", (long long)g->record, sfen, mv, g->result_byte, g->evals[0]);
    } else if (c->kind == FMT_PSV) {
        move_to_usi(g->moves[0], mv);
        add_line(c, "psv %lld %s | %s %d %d %d", (long long)g->record, sfen, mv, ply, (int)(int8_t)g->result_byte,
                 g->evals[0]);
    } else {
        add_line(c, "hcpe3 %lld %s | %d %u", (long long)g->record, sfen, g->n_moves, g->result_byte);
        for (int32_t i = 0; i < g->n_moves; i++) {
            char line[8192];
            move_to_usi(g->moves[i], mv);
            int n = snprintf(line, sizeof line, "  %d %s %d %u", (int)i + 1, mv, g->evals[i],
                             g->cand_begin[i + 1] - g->cand_begin[i]);
            uint32_t sum = 0;
            for (uint32_t j = g->cand_begin[i]; j < g->cand_begin[i + 1]; j++) sum += g->cand_visits[j];
            for (uint32_t j = g->cand_begin[i]; j < g->cand_begin[i + 1]; j++) {
                move_to_usi(g->cand_moves[j], mv);
                if (c->probs)
                    n += snprintf(line + n, sizeof line - (size_t)n, " %s:%a", mv, (double)((float)g->cand_visits[j] / (float)sum));
                else
                    n += snprintf(line + n, sizeof line - (size_t)n, " %s:%u", mv, g->cand_visits[j]);
            }
            add_line(c, "%s", line);
        }
    }
    return 0;
}

static void on_reject(void *user, const rec_reject_t *r) {
    collect_t *c = user;
    if (c->nrej < 64) {
        c->rejected[c->nrej] = r->game;
        snprintf(c->rejmsg[c->nrej], REC_MSG_MAX, "%s", r->msg);
    }
    c->nrej++;
}

static void collect_free(collect_t *c) {
    for (int i = 0; i < c->n; i++) free(c->lines[i]);
    free(c->lines);
    memset(c, 0, sizeof *c);
}

/* expected.txt's lines of one kind, with SFENs written as Koma writes them. */
static int expected_lines(const char *kind, char ***out) {
    size_t len;
    char *text = t_read_file(FIX("expected.txt"), &len);
    KOMA_ASSERT(text);
    int n = 0, cap = 0, in = 0;
    char **lines = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char word[16] = "";
        sscanf(line, "%15s", word);
        if (line[0] != ' ') in = strcmp(word, kind) == 0;
        if (!in) continue;
        char buf[8192];
        if (line[0] != ' ') { /* "<kind> <i> <sfen 4 fields> | rest" */
            char *bar = strstr(line, " | ");
            KOMA_ASSERT(bar);
            *bar = '\0';
            char *sp = strchr(line + strlen(kind) + 1, ' ');
            KOMA_ASSERT(sp);
            char sfen[SFEN_MAX_LEN];
            int ply;
            norm_sfen(sp + 1, sfen, sizeof sfen, &ply);
            *sp = '\0';
            snprintf(buf, sizeof buf, "%s %s | %s", line, sfen, bar + 3);
        } else {
            snprintf(buf, sizeof buf, "%s", line);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            lines = realloc(lines, (size_t)cap * sizeof *lines);
            KOMA_ASSERT(lines);
        }
        lines[n++] = strdup(buf);
    }
    free(text);
    *out = lines;
    return n;
}

static void test_fixture(fmt_kind_t k, const char *file) {
    collect_t *c = calloc(1, sizeof *c);
    KOMA_ASSERT(c);
    c->kind = k;
    CHECK(fmt_parse_file(file, k, &(fmt_sink_t){on_game, on_reject, c}) == 0);
    CHECKF(c->nrej == 0, "%s: %d rejected, the first: %s", file, c->nrej, c->nrej ? c->rejmsg[0] : "");
    char **want;
    int n = expected_lines(fmt_kind_name(k), &want);
    CHECKF(n == c->n && n > 100, "%s: %d lines read, cshogi listed %d", file, c->n, n);
    int shown = 0, diff = 0;
    for (int i = 0; i < n && i < c->n; i++)
        if (strcmp(want[i], c->lines[i]) != 0) {
            diff++;
            if (shown++ < 3) fprintf(stderr, "%s line %d:\n  cshogi: %s\n  koma:   %s\n", file, i + 1, want[i], c->lines[i]);
        }
    CHECKF(diff == 0, "%s: %d of %d records differ from cshogi's reading", file, diff, n);
    printf("%s: %d lines as cshogi reads them\n", fmt_kind_name(k), c->n);
    for (int i = 0; i < n; i++) free(want[i]);
    free(want);
    collect_free(c);
    free(c);
}

static void test_bad(fmt_kind_t k, const char *name, const char *file) {
    collect_t *c = calloc(1, sizeof *c);
    KOMA_ASSERT(c);
    c->kind = k;
    CHECK(fmt_parse_file(file, k, &(fmt_sink_t){on_game, on_reject, c}) == 0);
    size_t len;
    char *text = t_read_file(FIX("expected.txt"), &len);
    KOMA_ASSERT(text);
    int want = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char f[64];
        long long rec;
        if (sscanf(line, "bad %63s %lld", f, &rec) != 2 || strcmp(f, name) != 0) continue;
        want++;
        int found = 0;
        for (int i = 0; i < c->nrej && i < 64; i++)
            if (c->rejected[i] == rec) {
                char tag[64];
                snprintf(tag, sizeof tag, "record %lld", rec);
                found = strstr(c->rejmsg[i], name) && strstr(c->rejmsg[i], tag);
                if (found) printf("  %s\n", c->rejmsg[i]);
            }
        CHECKF(found, "%s: record %lld not rejected by name", name, rec);
    }
    free(text);
    CHECKF(c->nrej == want, "%s: %d rejected, %d broken", name, c->nrej, want);
    /* the rest read: every record but the broken ones */
    CHECK(c->n > 100);
    collect_free(c);
    free(c);
}

/* ---- damaged input: bytes flipped, cut, random: every record read or rejected, nothing else ---------- */
/* what was accepted replays; one position for all the games (pos_t is 131 kB: a
 * malloc per game took ASan's mmap path, 60% of this test's time in TLB flushes) */
typedef struct {
    int64_t games, rejected;
    pos_t *pos;
} damaged_count_t;

static int count_game(void *user, const fmt_game_t *g) {
    damaged_count_t *c = user;
    pos_t *p = c->pos;
    int ok = sfen_parse_cstr(p, g->start_sfen, NULL, 0) == SFEN_OK;
    for (int32_t i = 0; ok && i < g->n_moves; i++) {
        ok = pos_is_valid_move(p, g->moves[i]);
        if (g->cand_begin)
            for (uint32_t j = g->cand_begin[i]; ok && j < g->cand_begin[i + 1]; j++) ok = pos_is_valid_move(p, g->cand_moves[j]);
        if (ok) pos_do_move(p, g->moves[i]);
    }
    CHECK(ok);
    c->games++;
    return 0;
}

static void count_reject(void *user, const rec_reject_t *r) {
    damaged_count_t *c = user;
    CHECK(r->msg[0] != '\0');
    c->rejected++;
}

static void test_damaged(void) {
    static const char *const F[3] = {FIX("games.hcpe"), FIX("games.hcpe3"), FIX("games.psv")};
    static const fmt_kind_t K[3] = {FMT_HCPE, FMT_HCPE3, FMT_PSV};
    uint64_t rng = 99;
    damaged_count_t c = {0, 0, malloc(sizeof(pos_t))};
    KOMA_ASSERT(c.pos);
    for (int f = 0; f < 3; f++) {
        size_t len;
        char *orig = t_read_file(F[f], &len);
        KOMA_ASSERT(orig && len > 0);
        unsigned char *buf = malloc(len);
        KOMA_ASSERT(buf);
        for (int t = 0; t < 200; t++) {
            memcpy(buf, orig, len);
            size_t n = len;
            int flips = 1 + (int)(t_splitmix64(&rng) % 8);
            for (int i = 0; i < flips; i++) buf[t_splitmix64(&rng) % len] ^= (unsigned char)(1u << (t_splitmix64(&rng) % 8));
            if (t % 4 == 1) n = (size_t)(t_splitmix64(&rng) % len);
            if (t % 10 == 3)
                for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)t_splitmix64(&rng);
            CHECK(fmt_parse("damaged", buf, n, K[f], &(fmt_sink_t){count_game, count_reject, &c}) == 0);
        }
        free(buf);
        free(orig);
    }
    free(c.pos);
    printf("damaged copies: %lld games read, %lld records rejected\n", (long long)c.games, (long long)c.rejected);
    CHECK(c.rejected > 100 && c.games > 1000);
}

/* ---- the programs -------------------------------------------------------------------------------- */
static int run_prog(const char *bin, const char *a0, ...) {
    const char *argv[32];
    int n = 0;
    argv[n++] = bin;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int status = -1;
    char err[512];
    fflush(stdout);
    if (compat_run(argv, &status, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return status;
}

/* Two hcpe3 files hold the same games, evals, results and policy targets
 * (visits / sum as floats: Koma keeps the target, not the scale of the counts). */
static int same_hcpe3(const char *a, const char *b) {
    collect_t *x = calloc(1, sizeof *x), *y = calloc(1, sizeof *y);
    KOMA_ASSERT(x && y);
    x->kind = y->kind = FMT_HCPE3;
    x->probs = y->probs = 1;
    fmt_parse_file(a, FMT_HCPE3, &(fmt_sink_t){on_game, on_reject, x});
    fmt_parse_file(b, FMT_HCPE3, &(fmt_sink_t){on_game, on_reject, y});
    int same = x->n == y->n && x->n > 0 && x->nrej == 0 && y->nrej == 0;
    for (int i = 0; same && i < x->n; i++)
        if (strcmp(x->lines[i], y->lines[i]) != 0) {
            fprintf(stderr, "%s: %s\n%s: %s\n", a, x->lines[i], b, y->lines[i]);
            same = 0;
        }
    collect_free(x);
    collect_free(y);
    free(x);
    free(y);
    return same;
}

static int same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = t_read_file(a, &la), *y = t_read_file(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    if (!same) fprintf(stderr, "%s (%zu bytes) differs from %s (%zu bytes)\n", a, x ? la : 0, b, y ? lb : 0);
    free(x);
    free(y);
    return same;
}

#ifdef KOMA_EXPORT_BIN
static void test_programs(void) {
    const char *dir = t_scratch("formats");
    char run[3][600], out[700], out2[700], run2[600];
    static const char *const FIXT[3] = {FIX("games.hcpe"), FIX("games.hcpe3"), FIX("games.psv")};
    static const char *const NAME[3] = {"hcpe", "hcpe3", "psv"};
    for (int k = 0; k < 3; k++) {
        snprintf(run[k], sizeof run[k], "%s/run_%s", dir, NAME[k]);
        snprintf(out, sizeof out, "%s/out.%s", dir, NAME[k]);
        CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run[k], "--dedup", "0", "--quiet", FIXT[k], NULL) == 0);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run[k], "--format", NAME[k], "--out", out, NULL) == 0);
        if (k == 1) /* visit counts come back in lowest terms: the same targets */
            CHECKF(same_hcpe3(FIXT[k], out), "hcpe3: import + export does not hold cshogi's games and targets");
        else
            CHECKF(same_file(FIXT[k], out), "%s: import + export is not the file cshogi wrote", NAME[k]);
    }
    /* Koma's games (the hcpe3 run: visit targets, rows without one) out in every format, in and out again */
    for (int k = 0; k < 3; k++) {
        snprintf(out, sizeof out, "%s/koma.%s", dir, NAME[k]);
        snprintf(out2, sizeof out2, "%s/koma2.%s", dir, NAME[k]);
        snprintf(run2, sizeof run2, "%s/run2_%s", dir, NAME[k]);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run[1], "--format", NAME[k], "--out", out, NULL) == 0);
        CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--dedup", "0", "--quiet", out, NULL) == 0);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", NAME[k], "--out", out2, NULL) == 0);
        CHECKF(same_file(out, out2), "%s: export, import, export differ", NAME[k]);
    }
    /* the CSA/KIF/USI records of tests/data/records (one-hot targets, results as values, handicaps) out and back */
    snprintf(run2, sizeof run2, "%s/run_records", dir);
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--quiet", KOMA_SOURCE_DIR "/tests/data/records", NULL) == 0);
    for (int k = 0; k < 3; k++) {
        char run3[700];
        snprintf(out, sizeof out, "%s/rec.%s", dir, NAME[k]);
        snprintf(out2, sizeof out2, "%s/rec2.%s", dir, NAME[k]);
        snprintf(run3, sizeof run3, "%s/run3_%s", dir, NAME[k]);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", NAME[k], "--out", out, NULL) == 0);
        CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run3, "--dedup", "0", "--quiet", out, NULL) == 0);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run3, "--format", NAME[k], "--out", out2, NULL) == 0);
        CHECKF(same_file(out, out2), "records as %s: export, import, export differ", NAME[k]);
    }
#ifdef KOMA_SELFPLAY_BIN
    /* a real self-play run (search targets that are not visit counts, plies without rows) out and back;
     * no evaluation match and no report (half of this test's time under ASan, and not its subject) */
    snprintf(run2, sizeof run2, "%s/run_selfplay", dir);
    CHECK(run_prog(KOMA_SELFPLAY_BIN, "--run", run2, "--cycles", "1", "--games-per-cycle", "2", "--threads", "1",
                   "--games-per-thread", "2", "--visits", "16", "--max-ply", "60", "--net", "1x8", "--eval-every", "0",
                   "--report", "0", "--quiet", NULL) == 0);
    for (int k = 0; k < 3; k++) {
        char run3[700];
        snprintf(out, sizeof out, "%s/sp.%s", dir, NAME[k]);
        snprintf(out2, sizeof out2, "%s/sp2.%s", dir, NAME[k]);
        snprintf(run3, sizeof run3, "%s/run3sp_%s", dir, NAME[k]);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", NAME[k], "--out", out, NULL) == 0);
        CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run3, "--dedup", "0", "--quiet", out, NULL) == 0);
        CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run3, "--format", NAME[k], "--out", out2, NULL) == 0);
        CHECKF(same_file(out, out2), "self-play as %s: export, import, export differ", NAME[k]);
    }
#endif
    /* cycles: shards of cycle 3 are not in 4..9 */
    snprintf(run2, sizeof run2, "%s/run_cycle", dir);
    snprintf(out, sizeof out, "%s/none.hcpe", dir);
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--cycle", "3", "--quiet", FIX("games.psv"), NULL) == 0);
    /* nothing to export is an error, and no file is made (issue 46; tests/tools/test_export_outputs.c) */
    CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", "hcpe", "--from-cycle", "4", "--out", out, NULL) == 1);
    CHECK(!compat_file_exists(out));
    size_t len = 0;
    CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", "hcpe", "--from-cycle", "3", "--to-cycle", "3", "--out", out,
                   NULL) == 0);
    free(t_read_file(out, &len));
    CHECK(len > 0 && len % FMT_HCPE_BYTES == 0);
    /* the same file again: every game already there */
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--quiet", FIX("games.psv"), NULL) == 0);
    /* export refuses a file of the run and bad flags */
    snprintf(out, sizeof out, "%s/koma.db", run2);
    CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", "hcpe", "--out", out, NULL) == 1);
    CHECK(run_prog(KOMA_EXPORT_BIN, "--run", run2, "--format", "kif", "--out", "x", NULL) == 2);
    /* --check reads and counts, and opens no run */
    snprintf(run2, sizeof run2, "%s/run_check", dir);
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--check", "--quiet", FIX("games.hcpe"), NULL) == 0);
    CHECK(!compat_file_exists(run2));
    /* bad.hcpe ends inside a record: --check says so (exit 1) and still opens no run */
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--check", "--quiet", FIX("bad.hcpe"), NULL) == 1);
    CHECK(!compat_file_exists(run2));
    /* broken files: the rest imported; files that end inside a record make the exit status 1 (issue 46) */
    snprintf(run2, sizeof run2, "%s/run_bad", dir);
    CHECK(run_prog(KOMA_IMPORT_BIN, "--run", run2, "--quiet", FIX("bad.hcpe"), FIX("bad.psv"), FIX("bad.hcpe3"), NULL) == 1);
    db_t *bdb = NULL;
    char bpath[1200], berr[512];
    snprintf(bpath, sizeof bpath, "%s/koma.db", run2);
    int64_t bgames = 0, bpos = 0;
    CHECK(db_open(bpath, DB_OPEN_READONLY, &bdb, berr, sizeof berr) == DB_OK && db_count(bdb, -1, &bgames, &bpos) == DB_OK &&
          bpos > 800);
    db_close(bdb);
    t_rm_rf(dir);
}
#endif

int main(void) {
    engine_init();
    test_codecs();
    test_fixture(FMT_HCPE, FIX("games.hcpe"));
    test_fixture(FMT_PSV, FIX("games.psv"));
    test_fixture(FMT_HCPE3, FIX("games.hcpe3"));
    test_bad(FMT_HCPE, "bad.hcpe", FIX("bad.hcpe"));
    test_bad(FMT_PSV, "bad.psv", FIX("bad.psv"));
    test_bad(FMT_HCPE3, "bad.hcpe3", FIX("bad.hcpe3"));
    test_damaged();
    if (getenv("KOMA_TEST_FORMATS_NO_PROGRAMS")) return t_done("test_formats"); /* valgrind runs */
#ifdef KOMA_EXPORT_BIN
    test_programs();
#endif
    return t_done("test_formats");
}
