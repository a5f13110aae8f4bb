/* timeman.h - how long to think about one move.
 *
 * Owns: turning the clock (remaining time, increment, byoyomi, fixed move
 * time) and the game's progress into a soft limit (stop when the best move
 * is settled) and a hard limit (stop now), in milliseconds from the start
 * of the move.
 * Does not own: the clock itself or the USI parsing (the caller fills
 * mcts_time_input_t from "go btime .. wtime .. byoyomi .. binc .. winc .. movetime"
 * and the NetworkDelay / NetworkDelay2 / MinimumThinkingTime options);
 * the search takes absolute deadlines (mcts_limits_t).
 *
 * The model (delay = NetworkDelay, the lag a move costs on the clock beyond
 * the search; delay2 = NetworkDelay2, the lag allowed when a move runs to
 * the end of what the clock allows). Each is either set (>= 0: kept back in
 * full, whatever the clock) or automatic (< 0, the default): a tenth of the
 * time it is kept from (MCTS_TIME_AUTO_PERCENT), at least 10 ms (a process's
 * own lag on a busy machine), at most 120 ms for delay and 300 ms for
 * delay2. So a byoyomi of 100 ms gives 90 ms, 1 s gives 900 ms, and from
 * 3 s on 300 ms are kept back (a network server's lag);
 * the margins fit the clock instead of wasting most of a short one. On a
 * loaded machine (the load average over the last minute above 1.25 per CPU,
 * where the OS tells it; the engine's own threads count in it) a move's
 * answer can stall behind other processes for longer than a tenth of a short
 * byoyomi, so the automatic part is 15% there, and 20% above 2 per CPU
 * (byoyomi 100 ms: 85 or 80 ms); the caps stay.
 *   moves_left = clamp(40 - ply / 6, 20, 40): the engine's own moves still to
 *                play, about 30 mid-game (mcts_time_moves_left);
 *                share = remaining / moves_left.
 *   usable(t, k) = t - k, or t / 4 when k >= t (a set delay that does not fit).
 *   movetime > 0:  soft = hard = usable(movetime, delay of movetime).
 *   byoyomi > 0:   floor = usable(byoyomi, delay2 of byoyomi); with no main
 *                  time left, soft = hard = floor (a byoyomi not used is
 *                  lost); else
 *                  soft = share + byoyomi - delay of (share + byoyomi),
 *                  hard = min(soft + share, remaining / 5 + floor),
 *                  both at least floor and at most
 *                  usable(remaining + byoyomi, delay2 of that).
 *   otherwise (sudden death, optional increment): with
 *                  avail = remaining - moves_left * max(0, delay - 3/4 increment)
 *                  (delay of share + 3/4 increment, or with no increment
 *                  NetworkDelay as set or 120 ms; the lag of the moves still
 *                  to play that the increment does not pay for, kept in
 *                  reserve),
 *                  soft = avail / moves_left + 3/4 increment,
 *                  hard = min(soft + avail / moves_left, remaining / 5 + 3/4 increment),
 *                  both at most usable(remaining, delay2 of remaining). GUIs
 *                  differ on whether the increment is credited before or
 *                  after the move, so it is never counted as time this move
 *                  may spend, and only three quarters of it as time a later
 *                  move gets back.
 *   MinimumThinkingTime raises soft (never hard) to at least its value.
 * A move that runs to its hard limit spends twice the soft limit's share of
 * the main time, never more. No move ever takes more than a fifth of the main time left (plus the
 * byoyomi or 3/4 of the increment), so a game at any pace keeps time for
 * its later moves; no limit is ever more than the clock allows (remaining,
 * plus the byoyomi if there is one). Every limit is at least 1 ms.
 */
#ifndef KOMA_MCTS_TIMEMAN_H
#define KOMA_MCTS_TIMEMAN_H

#include <stdint.h>

typedef struct {
    int64_t remaining_ms; /* main time left for the side to move */
    int64_t increment_ms; /* Fischer increment per move (binc/winc) */
    int64_t byoyomi_ms;   /* byoyomi per move */
    int64_t movetime_ms;  /* fixed time for this move (overrides the rest) */
    int32_t ply;          /* game ply of the move to play (1 = first) */
    int64_t margin_ms;    /* NetworkDelay: lag a move costs; < 0: automatic (a tenth, at most 120) */
    int64_t margin2_ms;   /* NetworkDelay2: lag allowed at the clock's end; < 0: automatic (a tenth, at most 300) */
    int64_t minimum_ms;   /* MinimumThinkingTime: soft at least this (0 = none) */
    double load_per_cpu;  /* the machine's load average per CPU; < 0: unknown (the default) */
} mcts_time_input_t;

typedef struct {
    int64_t soft_ms; /* stop once the most visited move is also the best */
    int64_t hard_ms; /* stop now */
} mcts_time_limits_t;

/* The automatic delays: this percent of the time they are kept from (more
 * on a loaded machine: mcts_time_auto_percent), at most these. */
enum {
    MCTS_TIME_AUTO_PERCENT = 10,
    MCTS_TIME_LOADED_PERCENT = 15, /* load average above 1.25 per CPU */
    MCTS_TIME_BUSY_PERCENT = 20,   /* load average above 2 per CPU */
    MCTS_TIME_AUTO_FLOOR_MS = 10, /* and at least this */
    MCTS_TIME_AUTO_DELAY_MS = 120,
    MCTS_TIME_AUTO_DELAY2_MS = 300,
};

void mcts_time_input_default(mcts_time_input_t *in);
/* The engine's own moves still to play at ply (the model's divisor). */
int64_t mcts_time_moves_left(int32_t ply);
/* The percent of the time the automatic delays keep back at this load per CPU (< 0: unknown, 10). */
int mcts_time_auto_percent(double load_per_cpu);

mcts_time_limits_t mcts_time_limits(const mcts_time_input_t *in);

#endif
