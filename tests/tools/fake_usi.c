/* fake_usi.c - a scripted USI engine for the usi-match tests.
 *
 * Plays random legal moves (the engine library generates them), or what a
 * script says, and speaks just enough USI: usi, isready, setoption,
 * usinewgame, position, go, stop, gameover, quit. It checks every position
 * command it gets (a bad one is a bug in the match runner: it prints
 * "info string fake: bad position ..." to stderr and exits 9).
 *
 *   fake_usi [--name NAME] [--seed N] [--script S] [--declare] [--log FILE]
 *            [--require-option NAME=VALUE] [--stop-answers] [--hang-from-game N] [--mute]
 *
 * --script: comma-separated actions for this engine's own moves of every
 * game, in order; after the last one it plays random moves:
 *   a USI move     "bestmove <it>" (legal or not)
 *   random         a random legal move
 *   resign, win    "bestmove resign" / "bestmove win"
 *   garbage        "bestmove xyzzy"
 *   crash          exits (status 3) without answering
 *   hang           never answers go (answers stop only with --stop-answers)
 *   sleep:MS       sleeps MS milliseconds, then a random move
 *   info           prints 3000 info lines, then a random move
 * --declare: claims the declaration win whenever the rules allow it.
 * --log: appends every command received to FILE.
 * --require-option: exits 5 at isready unless that setoption came.
 * --hang-from-game: from this process's N-th game (usinewgame) on, never
 *   answers go (a match to be killed midway).
 * --mute: reads every command and never answers one (an engine that never
 *   says usiok; `sleep 60` did this where there is a sleep program).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/rules.h"
#include "engine/sfen.h"

static char line[1 << 16];
static pos_t pos;
static char *script[256];
static int nscript;

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void say(const char *fmt, const char *arg) {
    printf(fmt, arg);
    putchar('\n');
    fflush(stdout);
}

static void bad(const char *what) {
    fprintf(stderr, "info string fake: bad position (%s): %s\n", what, line);
    exit(9);
}

/* "position startpos|sfen ... [moves ...]" into pos. */
static void set_position(char *s) {
    char err[256];
    char *mv = strstr(s, " moves");
    if (mv) *mv = 0;
    while (*s == ' ') s++;
    if (strncmp(s, "startpos", 8) == 0) pos_set_startpos(&pos);
    else if (strncmp(s, "sfen ", 5) == 0) {
        if (sfen_parse_cstr(&pos, s + 5, err, sizeof err) != SFEN_OK) bad(err);
    } else {
        bad("neither startpos nor sfen");
    }
    if (!mv) return;
    char *p = mv + 6;
    for (;;) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *q = p;
        while (*q && *q != ' ') q++;
        move_t m = move_from_usi(&pos, p, (size_t)(q - p));
        if (m == MOVE_NONE) bad("illegal move in the list");
        pos_do_move(&pos, m);
        p = q;
    }
}

static void random_move(char *out) {
    move_list_t ml;
    movegen_legal(&pos, &ml);
    if (ml.n == 0) {
        strcpy(out, "resign");
        return;
    }
    move_to_usi(ml.moves[rng_next() % (uint64_t)ml.n], out);
}

/* Appends one line to the --log file. Engines of a match share the file
 * (concurrency > 1), and appends from two processes can interleave or be
 * lost where O_APPEND is emulated (wine): a lock file serialises them. */
static void log_line(const char *path, const char *lock_path, const char *text) {
    compat_lock_t *lk = NULL;
    char holder[64], err[256];
    for (int i = 0; i < 5000 && compat_lock_try(lock_path, "fake_usi", &lk, holder, sizeof holder, err, sizeof err) == 1; i++)
        compat_sleep_ms(1);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
    compat_lock_release(lk);
}

int main(int argc, char **argv) {
    const char *name = "fake", *log_path = NULL, *required = NULL;
    int declare = 0, stop_answers = 0, got_required = 0, hang_from = 0, mute = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--declare")) declare = 1;
        else if (!strcmp(argv[i], "--stop-answers")) stop_answers = 1;
        else if (!strcmp(argv[i], "--mute")) mute = 1;
        else if (!strcmp(argv[i], "--hang-from-game") && i + 1 < argc) hang_from = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
        else if (!strcmp(argv[i], "--require-option") && i + 1 < argc) required = argv[++i];
        else if (!strcmp(argv[i], "--script") && i + 1 < argc) {
            char *s = strdup(argv[++i]);
            for (char *tok = strtok(s, ","); tok && nscript < 256; tok = strtok(NULL, ",")) script[nscript++] = tok;
        } else {
            fprintf(stderr, "fake_usi: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    rng_state = seed;
    char lock_path[1200];
    if (log_path) snprintf(lock_path, sizeof lock_path, "%s.lock", log_path);
    pos_set_startpos(&pos);
    int own = 0, games = 0, hanging = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (log_path) log_line(log_path, lock_path, line);
        if (mute) continue;
        if (!strcmp(line, "usi")) {
            say("id name %s", name);
            say("id author %s", "koma tests");
            say("option name FakeOption type string default %s", "none");
            say("usiok%s", "");
        } else if (!strcmp(line, "isready")) {
            if (required && !got_required) {
                fprintf(stderr, "fake_usi: option %s was not set\n", required);
                return 5;
            }
            say("readyok%s", "");
        } else if (!strncmp(line, "setoption name ", 15)) {
            char want[256];
            if (required) {
                const char *eq = strchr(required, '=');
                if (eq) {
                    snprintf(want, sizeof want, "setoption name %.*s value %s", (int)(eq - required), required, eq + 1);
                    if (!strcmp(line, want)) got_required = 1;
                }
            }
        } else if (!strcmp(line, "usinewgame")) {
            own = 0;
            games++;
            rng_state = seed * 1000003u + (uint64_t)games;
        } else if (!strncmp(line, "position ", 9)) {
            set_position(line + 9);
        } else if (!strncmp(line, "go", 2)) {
            char mv[64];
            const char *act = own < nscript ? script[own] : "random";
            own++;
            if (declare && rules_can_declare(&pos)) act = "win";
            if (hang_from > 0 && games >= hang_from) act = "hang";
            if (!strcmp(act, "crash")) return 3;
            if (!strcmp(act, "hang")) {
                hanging = 1;
                continue;
            }
            if (!strncmp(act, "sleep:", 6)) {
                compat_sleep_ms(atoi(act + 6));
                act = "random";
            }
            if (!strcmp(act, "info")) {
                for (int i = 0; i < 3000; i++) printf("info depth %d nodes %d score cp %d pv 7g7f\n", i, i * 10, i % 50);
                act = "random";
            }
            if (!strcmp(act, "random")) random_move(mv);
            else if (!strcmp(act, "garbage")) strcpy(mv, "xyzzy");
            else snprintf(mv, sizeof mv, "%s", act);
            printf("info depth 1 score cp 0 pv %s\n", mv);
            say("bestmove %s", mv);
        } else if (!strcmp(line, "stop")) {
            if (hanging && stop_answers) {
                char mv[64];
                random_move(mv);
                say("bestmove %s", mv);
            }
            hanging = 0;
        } else if (!strncmp(line, "gameover", 8)) {
            hanging = 0;
        } else if (!strcmp(line, "quit")) {
            break;
        }
    }
    return 0;
}
