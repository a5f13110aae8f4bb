/* timeman.h - how long to think about one move.
 *
 * Owns: turning the clock (remaining time, increment, byoyomi, fixed move
 * time) and the game's progress into a soft limit (stop when the best move
 * is settled) and a hard limit (stop now), in milliseconds from the start
 * of the move.
 * Does not own: the clock itself or the USI parsing (the caller fills
 * mcts_time_input_t from "go btime .. wtime .. byoyomi .. binc .. winc .. movetime");
 * the search takes absolute deadlines (mcts_limits_t).
 *
 * Rules (margin = network/GUI lag allowance, default 300 ms):
 *   movetime > 0:  soft = hard = movetime - margin.
 *   byoyomi > 0:   soft = remaining / horizon + byoyomi - margin,
 *                  hard = min(remaining + byoyomi - margin, 3 * soft) (but >= byoyomi - margin);
 *                  with no main time left both are byoyomi - margin.
 *   otherwise (sudden death, optional increment):
 *                  soft = remaining / horizon + increment, hard = min(3 * soft, remaining - margin),
 *                  soft <= hard. remaining is taken to include this move's
 *                  increment already (servers add it when the move starts), so
 *                  the limits never exceed remaining - margin.
 *   horizon = clamp(40 - ply / 6, 20, 40) moves still to play (about 30 mid-game).
 * No limit is ever more than the time the clock allows (remaining, plus the
 * byoyomi if there is one); with less than the margin left, a quarter of
 * what is left is used. Every limit is at least 1 ms.
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
    int64_t margin_ms;    /* lag allowance; < 0 selects the default 300 */
} mcts_time_input_t;

typedef struct {
    int64_t soft_ms; /* stop once the most visited move is also the best */
    int64_t hard_ms; /* stop now */
} mcts_time_limits_t;

void mcts_time_input_default(mcts_time_input_t *in);
mcts_time_limits_t mcts_time_limits(const mcts_time_input_t *in);

#endif
