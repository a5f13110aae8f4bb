/* timeman.c - soft and hard time limits for one move (see timeman.h). */
#include "mcts/timeman.h"

#include <string.h>

void mcts_time_input_default(mcts_time_input_t *in) {
    memset(in, 0, sizeof *in);
    in->ply = 1;
    in->margin_ms = -1;
    in->margin2_ms = -1;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* What may be spent when the delay does not fit: a quarter of it. */
static int64_t usable(int64_t avail, int64_t delay) { return avail > delay ? avail - delay : avail / 4; }

int64_t mcts_time_moves_left(int32_t ply) {
    int64_t m = 40 - (int64_t)(ply > 0 ? ply : 1) / 6;
    return m < 20 ? 20 : m > 40 ? 40 : m;
}

mcts_time_limits_t mcts_time_limits(const mcts_time_input_t *in) {
    int64_t delay = in->margin_ms < 0 ? MCTS_TIME_DEFAULT_DELAY_MS : in->margin_ms;
    int64_t delay2 = in->margin2_ms < 0 ? delay : in->margin2_ms;
    int64_t rem = max64(0, in->remaining_ms), inc = max64(0, in->increment_ms), byo = max64(0, in->byoyomi_ms);
    int64_t moves_left = mcts_time_moves_left(in->ply);
    mcts_time_limits_t out;
    if (in->movetime_ms > 0) {
        out.soft_ms = out.hard_ms = usable(in->movetime_ms, delay);
    } else if (byo > 0) {
        int64_t cap = usable(rem + byo, delay2);
        int64_t floor_byo = usable(byo, delay2);
        if (rem == 0) {
            out.soft_ms = out.hard_ms = floor_byo;
        } else {
            int64_t soft = max64(min64(rem / moves_left + byo - delay, cap), floor_byo);
            int64_t hard = min64(soft + rem / moves_left, rem / 5 + byo - delay2);
            out.soft_ms = soft;
            out.hard_ms = max64(min64(hard, cap), floor_byo);
        }
    } else {
        int64_t cap = usable(rem, delay2), back = inc * 3 / 4;
        /* the lag of the moves still to play that the increment does not pay for */
        int64_t avail = max64(0, rem - moves_left * max64(0, delay - back));
        int64_t soft = avail / moves_left + back;
        out.hard_ms = min64(min64(soft + avail / moves_left, rem / 5 + back), cap);
        out.soft_ms = min64(soft, out.hard_ms);
    }
    if (in->minimum_ms > 0 && out.soft_ms < in->minimum_ms) out.soft_ms = min64(in->minimum_ms, out.hard_ms);
    out.soft_ms = max64(1, out.soft_ms);
    out.hard_ms = max64(out.soft_ms, out.hard_ms);
    return out;
}
