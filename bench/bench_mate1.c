/* bench_mate1.c - time the per-leaf engine calls of MCTS: mate1_find, its
 * reference, encode_position, encode_legal_mask, rules_status.
 *
 * usage: bench_mate1 [--reps N] [--perft FILE]
 * Position sets: (a) every SFEN of FILE (default tests/data/perft.txt, the
 * perft fixture: start, middlegame and random positions), (b) positions from
 * uniformly random playouts from the start position, plies 20..120, (c) the
 * same with a third of the moves chosen among checks (mating nets). Each
 * call is timed over all positions of a set, N passes; prints ns per call of
 * the fastest pass in process CPU time (clock()), so time spent descheduled
 * on a busy machine does not count (cache and core sharing still do).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/encode.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"

enum { MAX_POS = 4000 };
static pos_t set[MAX_POS];

static uint64_t rng_state = 0x853C49E6748FEA9Bull;
static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static int load_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096], err[256];
    int n = 0;
    while (n < MAX_POS && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, ";\r\n")] = 0;
        if (sfen_parse_cstr(&set[n], line, err, sizeof err) == SFEN_OK) n++;
    }
    fclose(f);
    return n;
}

static int playouts(bool check_bias) {
    static pos_t pos;
    int n = 0;
    while (n < MAX_POS) {
        pos_set_startpos(&pos);
        int stop = 20 + (int)(rng_next() % 101);
        for (int ply = 0; ply < stop; ply++) {
            move_list_t list, checks;
            movegen_legal(&pos, &list);
            if (list.n == 0) break;
            checks.n = 0;
            if (check_bias)
                for (int32_t i = 0; i < list.n; i++)
                    if (pos_gives_check(&pos, list.moves[i])) checks.moves[checks.n++] = list.moves[i];
            const move_list_t *from = checks.n && rng_next() % 3 == 0 ? &checks : &list;
            pos_do_move(&pos, from->moves[rng_next() % (uint64_t)from->n]);
        }
        if (movegen_count_legal(&pos) == 0) continue;
        pos_copy(&set[n++], &pos);
    }
    return n;
}

static double cpu_ns(void) { return (double)clock() * 1e9 / CLOCKS_PER_SEC; }

/* ns per call of BODY (run for i = 0..n-1): the fastest of reps passes over the set. */
#define TIME_MIN(out, reps, BODY)                                                                                      \
    do {                                                                                                               \
        double best_ = 1e300;                                                                                          \
        for (int r_ = 0; r_ < (reps); r_++) {                                                                          \
            double t0_ = cpu_ns();                                                                                     \
            for (int i = 0; i < n; i++) {                                                                              \
                BODY;                                                                                                  \
            }                                                                                                          \
            double t_ = cpu_ns() - t0_;                                                                                \
            if (t_ < best_) best_ = t_;                                                                                \
        }                                                                                                              \
        (out) = best_ / n;                                                                                             \
    } while (0)

static void bench(const char *name, int n, int reps) {
    static uint8_t packed[ENC_PACKED_BYTES], mask[ENC_LEGAL_BYTES];
    static float hand[ENC_HAND];
    int mates = 0, checks = 0;
    for (int i = 0; i < n; i++) {
        mates += mate1_find(&set[i]) != MOVE_NONE;
        checks += pos_in_check(&set[i]);
    }
    uint64_t sink = 0;
    double t_fast, t_ref, t_enc, t_mask, t_status, t_count, t_mated;
    TIME_MIN(t_fast, reps, sink += mate1_find(&set[i]));
    TIME_MIN(t_ref, reps / 4 > 0 ? reps / 4 : 1, sink += mate1_find_reference(&set[i]));
    TIME_MIN(t_mated, reps, sink += mate1_is_mated(&set[i]));
    TIME_MIN(t_enc, reps, encode_position(&set[i], packed, hand); sink += packed[i % ENC_PACKED_BYTES]);
    TIME_MIN(t_mask, reps, encode_legal_mask(&set[i], mask); sink += mask[i % ENC_LEGAL_BYTES]);
    TIME_MIN(t_status, reps, sink += (uint64_t)rules_status(&set[i], RULES_MAX_PLY_DEFAULT).end);
    TIME_MIN(t_count, reps, sink += (uint64_t)movegen_count_legal(&set[i]));
    printf("%s: %d positions (%d in check, %d with a mate in one), ns per call (fastest of %d passes):\n"
           "  mate1_find %.0f | mate1_find_reference %.0f | mate1_is_mated %.0f | encode_position %.0f | "
           "encode_legal_mask %.0f | rules_status %.0f | movegen_count_legal %.0f   (sink %llu)\n",
           name, n, checks, mates, reps, t_fast, t_ref, t_mated, t_enc, t_mask, t_status, t_count,
           (unsigned long long)(sink & 0xFF));
}

int main(int argc, char **argv) {
    const char *perft = "tests/data/perft.txt";
    int reps = 50;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--perft") == 0 && i + 1 < argc)
            perft = argv[++i];
        else {
            fprintf(stderr, "usage: bench_mate1 [--reps N] [--perft FILE]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    engine_init();
    int n = load_file(perft);
    if (n)
        bench("perft fixture", n, reps);
    else
        fprintf(stderr, "bench_mate1: cannot read %s (run from the source root); skipped\n", perft);
    bench("random playouts", playouts(false), reps);
    bench("check-biased playouts", playouts(true), reps);
    return 0;
}
