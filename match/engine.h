/* engine.h - an outside USI engine as a match player: its process and the
 * few USI exchanges a match needs.
 *
 * Owns: starting an engine command (split into words at spaces; "double"
 * or 'single' quotes group words; no shell), taking it through "usi" ...
 * "usiok", its setoption lines, "isready" ... "readyok"; readying it for a
 * game ("isready", "usinewgame"); the "position ... moves ..." line of a
 * game so far; waiting for "bestmove" with a deadline; "quit" (then a kill
 * after one second). Used by tools/usi_match.c and the in-loop gauntlet's
 * engine opponents (match/play.c, match_play_engine).
 * Does not own: clocks and time-out verdicts (the caller measures and
 * calls ref_game_forfeit), the rules (match/referee.h), the game schedule.
 *
 * Threads: one engine per thread; nothing shared. Every wait is bounded
 * (the caller's timeout), so a silent or hung engine never blocks a match.
 * Errors: -1 with a message that names the engine by its label and command
 * (a missing program, an engine that exits, one that does not answer in time).
 */
#ifndef KOMA_MATCH_ENGINE_H
#define KOMA_MATCH_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "compat/compat.h"
#include "match/referee.h"

enum { MATCH_ENGINE_NAME_MAX = 64, MATCH_ENGINE_OPTIONS_MAX = 64 };

typedef struct {
    const char *cmd;                                 /* the command line (words, quotes group) */
    const char *options[MATCH_ENGINE_OPTIONS_MAX];   /* "Name=Value" setoption; no '=': a button */
    int32_t n_options;
    const char *name;                                /* the player's name; NULL: the engine's "id name" */
} match_engine_spec_t;

typedef struct {
    compat_proc_t *proc;
    char name[MATCH_ENGINE_NAME_MAX]; /* spec->name, else "id name", else the program */
    int alive;                        /* 0: exited or broken (close it and open it again) */
} match_engine_t;

/* Splits cmd into words (quotes group) into buf; words[] NULL-terminated.
 * Returns the count; -1 when unbalanced or too long for buf / max. */
int match_engine_split(const char *cmd, char *buf, size_t buflen, char **words, int max);

/* Starts the engine (stderr_path: NULL ours, "" discarded, else appended)
 * and takes it through usi / setoption / isready, waiting at most
 * init_timeout_ms for each answer. label names it in messages ("engine1",
 * "gauntlet-engine2 'gpsusi'"). 0, or -1 with err; e is then closed. */
int match_engine_open(match_engine_t *e, const match_engine_spec_t *spec, const char *stderr_path,
                      int64_t init_timeout_ms, const char *label, char *err, size_t errlen);
/* "quit", one second to exit, then a kill. NULL-safe, idempotent. */
void match_engine_close(match_engine_t *e);
/* Reads lines until one starts with the word `want` (an "id name" line is
 * remembered when no name is set). 0, or -1 with err (exited: alive = 0; or
 * silent for timeout_ms). */
int match_engine_expect(match_engine_t *e, const char *want, int64_t timeout_ms, const char *label, char *err,
                        size_t errlen);
/* "isready" ... "readyok" within timeout_ms, then "usinewgame". 0 or -1 with err. */
int match_engine_new_game(match_engine_t *e, int64_t timeout_ms, const char *label, char *err, size_t errlen);
/* "position startpos|sfen S [moves ...]" of game g so far; malloc'ed (NULL: out of memory). */
char *match_engine_position_cmd(const ref_game_t *g);
/* Waits for "bestmove"; copies its move word into mv. 0, or
 * COMPAT_PROC_TIMEOUT / COMPAT_PROC_EOF. */
int match_engine_bestmove(match_engine_t *e, int64_t timeout_ms, char *mv, size_t mvlen);

/* ---- an engine as a gauntlet opponent -------------------------------------------
 * One text names an engine, how to start it and how long it thinks:
 *     LABEL | COMMAND | FIELD | FIELD ...
 * fields separated by '|' (spaces around them ignored):
 *   LABEL    its name in the run's rating list, the same in every cycle and
 *            run ("gpsusi", "fairy-stockfish skill 0"); 1..63 characters,
 *            not "cycle ..." (the run's nets are named so);
 *   COMMAND  the program and its arguments (words; quotes group);
 *   then any of
 *   byoyomi MS   go btime 0 wtime 0 byoyomi MS (the default: byoyomi 100)
 *   nodes N      go nodes N
 *   depth N      go depth N            (one budget at most)
 *   timeout MS   how long a move may take before it loses on time
 *                (default: byoyomi + max(byoyomi, 1000) ms; 10000 with nodes or depth);
 *                given, it also bounds the start-up answers (usiok, readyok, and
 *                readyok at each new game) to max(MS, 10 s); not given, those
 *                wait up to 60 s (a program with large tables, gpsusi, takes
 *                over 10 s to start on a machine busy with self-play)
 *   NAME=VALUE   a setoption (NAME may hold spaces: "Skill Level=0").
 * Example: "fairy-stockfish skill 0 | /usr/games/fairy-stockfish | nodes 2000 | Skill Level=0".
 * The struct points into its own text: do not copy it (parse again). */
typedef struct {
    char text[1024];         /* the fields, NUL-separated; the pointers below point into it */
    const char *label;
    match_engine_spec_t spec; /* spec.name = label */
    char go[96];             /* the go line sent for every move */
    int64_t move_timeout_ms;
    int64_t init_timeout_ms; /* usiok and readyok at start-up and at each new game */
} match_engine_player_t;

/* Parses text as above into *out. 0, or -1 with err saying which field is
 * wrong (the caller adds which option it came from). */
int match_engine_player_parse(const char *text, match_engine_player_t *out, char *err, size_t errlen);

#endif
