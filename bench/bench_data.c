/* bench_data.c - a seeded generator of dlshogi hcpe training files: random
 * legal games from the start position, every position of every game one
 * record, for the data benchmark of issue 44 (bench/bench_data.sh,
 * docs/BENCHMARKS.md "Data at the field's scale").
 *
 * Usage: bench_data --out DIR [--positions N] [--per-file 100000] [--seed 1]
 *                   [--first K] [--count M] [--prefix data]
 * Writes ceil(N / per-file) files DIR/<prefix>-00000.hcpe ... (the last one
 * shorter when per-file does not divide N); --first/--count write only files
 * K .. K+M-1 of that set (two processes can share the work). File i is a
 * function of (seed, i) alone: the same bytes whoever writes it and in
 * whatever order. Prints the files, positions, games and an FNV-1a hash of
 * the records written, so two runs can be compared.
 *
 * The games: each move drawn among the legal moves (engine/movegen) with
 * weights that keep games going and make the positions look played: a
 * capture or a promotion 4, a drop 2, a king move 1, any other move 2. A game
 * ends when the side to move has no legal move (mated: a result for the
 * other side) or at a ply limit drawn in [80, 320) (a draw by max ply). The
 * records' eval is the side to move's material balance squashed to [-1, 1]
 * (a stand-in for a search value), the move the one played and the result
 * byte the game's (fmt_result_byte). A game that reaches the end of a file
 * is cut there; the next file starts a new game.
 *
 * Owns: nothing but its output files. Does not own: the record layout
 * (data/fmt_file.h), the rules (engine/).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "data/fmt_file.h"
#include "engine/movegen.h"
#include "engine/position.h"

typedef struct {
    uint64_t s;
} rng_t;

/* splitmix64 */
static uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const int32_t PIECE_VALUE[PT_NB] = {0, 1, 3, 4, 5, 8, 10, 6, 0, 6, 6, 6, 6, 10, 12};

/* Material of the side to move minus the other's, squashed to (-1, 1). */
static float material_value(const pos_t *pos) {
    int32_t sum = 0;
    color_t us = pos_side_to_move(pos);
    for (int32_t sq = 0; sq < 81; sq++) {
        piece_t pc = pos_piece_on(pos, (sq_t)sq);
        if (pc == PIECE_NONE) continue;
        int32_t v = PIECE_VALUE[piece_type(pc)];
        sum += piece_color(pc) == us ? v : -v;
    }
    for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++)
        sum += PIECE_VALUE[pt] * (pos_hand_count(pos, us, pt) - pos_hand_count(pos, !us, pt));
    return tanhf((float)sum / 20.0f);
}

static int32_t move_weight(const pos_t *pos, move_t m) {
    if (move_is_drop(m)) return 2;
    if (pos_is_capture(pos, m) || move_is_promote(m)) return 4;
    if (piece_type(pos_piece_on(pos, move_from(m))) == PT_KING) return 1;
    return 2;
}

static move_t pick_move(const pos_t *pos, const move_list_t *list, rng_t *r) {
    int32_t w[MOVES_MAX], total = 0;
    for (int32_t i = 0; i < list->n; i++) total += (w[i] = move_weight(pos, list->moves[i]));
    int32_t x = (int32_t)(rng_next(r) % (uint64_t)total);
    for (int32_t i = 0; i < list->n; i++)
        if ((x -= w[i]) < 0) return list->moves[i];
    return list->moves[list->n - 1];
}

typedef struct {
    move_t moves[POS_HIST_MAX];
    float values[POS_HIST_MAX];
} game_buf_t;

/* One game into pos's history; returns its plies and sets *result_byte. */
static int32_t play_game(pos_t *pos, game_buf_t *g, rng_t *r, uint8_t *result_byte) {
    pos_set_startpos(pos);
    int32_t limit = 80 + (int32_t)(rng_next(r) % 240), n = 0;
    int32_t result = DB_RESULT_DRAW;
    db_reason_t reason = DB_REASON_MAX_PLY;
    move_list_t list;
    for (; n < limit; n++) {
        movegen_legal(pos, &list);
        if (list.n == 0) {
            result = pos_side_to_move(pos) == COLOR_BLACK ? DB_RESULT_WHITE_WIN : DB_RESULT_BLACK_WIN;
            reason = DB_REASON_CHECKMATE;
            break;
        }
        g->values[n] = material_value(pos);
        g->moves[n] = pick_move(pos, &list, r);
        pos_do_move(pos, g->moves[n]);
    }
    *result_byte = fmt_result_byte(result, reason);
    while (pos_hist_len(pos) > 0) pos_undo_move(pos);
    return n;
}

typedef struct {
    int64_t positions, games;
    uint64_t hash;
} gen_stats_t;

static void fnv(uint64_t *h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) *h = (*h ^ p[i]) * 0x100000001B3ull;
}

/* File `index` of `records` records: 0, or -1 with a message. */
static int write_file(const char *path, uint64_t seed, int64_t index, int64_t records, pos_t *pos, game_buf_t *g,
                      uint8_t *buf, gen_stats_t *st) {
    rng_t r = {seed * 0xD1B54A32D192ED03ull + (uint64_t)index * 0x8CB92BA72F3D8DD7ull + 1};
    int64_t done = 0;
    while (done < records) {
        uint8_t rb;
        int32_t n = play_game(pos, g, &r, &rb);
        st->games++;
        for (int32_t i = 0; i < n && done < records; i++, done++) {
            uint8_t *rec = buf + done * FMT_HCPE_BYTES;
            if (fmt_hcpe_record(pos, g->values[i], g->moves[i], rb, rec) != 0) {
                fprintf(stderr, "bench_data: %s: a position without hcp (game %" PRId64 ", ply %d)\n", path, st->games,
                        i);
                return -1;
            }
            pos_do_move(pos, g->moves[i]);
        }
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "bench_data: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t bytes = (size_t)records * FMT_HCPE_BYTES;
    int bad = fwrite(buf, 1, bytes, f) != bytes;
    bad |= fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "bench_data: %s: write failed: %s\n", path, strerror(errno));
        return -1;
    }
    fnv(&st->hash, buf, bytes);
    st->positions += records;
    return 0;
}

static int64_t arg_int(const char *flag, const char *v, int64_t lo) {
    char *e;
    long long x = v ? strtoll(v, &e, 10) : 0;
    if (!v || *e || x < lo) {
        fprintf(stderr, "bench_data: %s: expected an integer >= %" PRId64 ", got %s\n", flag, lo, v ? v : "nothing");
        exit(2);
    }
    return (int64_t)x;
}

int main(int argc, char **argv) {
    const char *out = NULL, *prefix = "data";
    int64_t positions = 1000000, per_file = 100000, first = 0, count = -1;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--out")) out = v, i++;
        else if (!strcmp(a, "--prefix")) prefix = v ? v : "data", i++;
        else if (!strcmp(a, "--positions")) positions = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--per-file")) per_file = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--seed")) seed = (uint64_t)arg_int(a, v, 0), i++;
        else if (!strcmp(a, "--first")) first = arg_int(a, v, 0), i++;
        else if (!strcmp(a, "--count")) count = arg_int(a, v, 0), i++;
        else {
            fprintf(stderr,
                    "usage: bench_data --out DIR [--positions N] [--per-file 100000] [--seed 1] [--first K] "
                    "[--count M] [--prefix data]\nunknown argument: %s\n",
                    a);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "bench_data: --out DIR is required\n");
        return 2;
    }
    char err[512];
    if (compat_mkdir_p(out, err, sizeof err) != 0) {
        fprintf(stderr, "bench_data: %s: %s\n", out, err);
        return 1;
    }
    int64_t files = (positions + per_file - 1) / per_file;
    int64_t last = count < 0 ? files : first + count < files ? first + count : files;
    pos_t *pos = malloc(sizeof *pos);
    game_buf_t *g = malloc(sizeof *g);
    uint8_t *buf = malloc((size_t)per_file * FMT_HCPE_BYTES);
    if (!pos || !g || !buf) {
        fprintf(stderr, "bench_data: out of memory (%" PRId64 " records a file)\n", per_file);
        return 1;
    }
    gen_stats_t st = {0, 0, 0xCBF29CE484222325ull};
    double t0 = (double)compat_now_ns() * 1e-9;
    for (int64_t i = first; i < last; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%05" PRId64 ".hcpe", out, prefix, i);
        int64_t records = i + 1 < files ? per_file : positions - i * per_file;
        if (write_file(path, seed, i, records, pos, g, buf, &st) != 0) return 1;
    }
    double s = (double)compat_now_ns() * 1e-9 - t0;
    printf("bench_data: %" PRId64 " files, %" PRId64 " positions, %" PRId64 " games, seed %" PRIu64 ", hash %016" PRIx64
           ", %.1f s (%.0f positions/s)\n",
           last > first ? last - first : 0, st.positions, st.games, seed, st.hash, s, s > 0 ? st.positions / s : 0.0);
    free(buf), free(g), free(pos);
    return 0;
}
