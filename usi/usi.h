/* usi.h - the USI protocol loop: one line in, one call out.
 *
 * Owns: splitting a line into tokens and parsing every command and its
 * arguments (`setoption name .. value ..`, `position startpos|sfen ..
 * [moves ..]`, `go` with btime/wtime/binc/winc/byoyomi/movetime/nodes/
 * infinite/ponder/mate), rejecting malformed ones with `info string` and a
 * reason, and dispatching to session.h. Nothing here decides anything.
 * Does not own: what the commands do (session.c), reading stdin (main.c).
 *
 * Numbers in `go` are decimal integers 0..10^12 (ms or visits); anything else
 * (missing, signed, not a number, larger) rejects the whole `go` with a
 * reason and starts no search. Unknown `go` words (depth, movestogo,
 * searchmoves, ...) are reported and skipped, and the search goes ahead.
 * `go mate [<ms>|infinite]`: without a number, infinite; a time out of
 * range is clamped as the other values are (`go mate -1` is `go mate 0`).
 */
#ifndef KOMA_USI_USI_H
#define KOMA_USI_USI_H

#include <stddef.h>
#include <stdint.h>

#include "usi/search.h"
#include "usi/session.h"

/* USI_FATAL: the Net or Backend asked for cannot be used (isready, go);
 * the error was said and the caller ends koma with a nonzero status. */
enum { USI_CONTINUE = 0, USI_QUIT = 1, USI_FATAL = 2 };
enum { USI_NUMBER_MAX_DIGITS = 13 };
#define USI_NUMBER_MAX 1000000000000LL

/* Handles one line (len bytes, without or with its line ending). received_ms:
 * when it was read (go's clock starts then). Returns USI_QUIT after `quit`,
 * USI_FATAL when koma cannot play with what was asked for. */
int usi_handle_line(usi_session_t *s, const char *line, size_t len, int64_t received_ms);

/* Parses the words after `go` (text of len bytes) into g. Returns 0, or -1
 * with err saying what is wrong (too many words, a bad `go mate` time). A
 * value out of 0..USI_NUMBER_MAX (negative, too large) is clamped into it, a
 * value that is no number is ignored, unknown words are skipped: warn says
 * which, "; "-separated ("" if none), for an info string. */
int usi_parse_go(const char *text, size_t len, usi_go_t *g, char *err, size_t errlen, char *warn, size_t warnlen);

#endif
