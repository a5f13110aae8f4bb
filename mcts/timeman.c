/* timeman.c - soft and hard time limits for one move (see timeman.h). */
#include "mcts/timeman.h"

#include <string.h>

void mcts_time_input_default(mcts_time_input_t *in) {
    memset(in, 0, sizeof *in);
    in->ply = 1;
    in->margin_ms = -1;
    in->margin2_ms = -1;
    in->load_per_cpu = -1;
}

int mcts_time_auto_percent(double load_per_cpu) {
    return load_per_cpu > 2.0    ? MCTS_TIME_BUSY_PERCENT
           : load_per_cpu > 1.25 ? MCTS_TIME_LOADED_PERCENT
                                 : MCTS_TIME_AUTO_PERCENT;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The lag kept back from `time`: the option as set, or (set < 0, the
 * default) pct percent of the time, at least MCTS_TIME_AUTO_FLOOR_MS (a
 * process's own lag), at most cap. */
static int64_t lag(int64_t pct, int64_t time, int64_t set, int64_t cap) {
    if (set >= 0) return set;
    return min64(cap, max64(MCTS_TIME_AUTO_FLOOR_MS, max64(0, time) * pct / 100));
}

/* What may be spent of avail with `keep` kept back; when keep does not fit, a quarter of avail. */
static int64_t usable(int64_t avail, int64_t keep) { return avail > keep ? avail - keep : avail / 4; }

int64_t mcts_time_moves_left(int32_t ply) {
    int64_t m = 40 - (int64_t)(ply > 0 ? ply : 1) / 6;
    return m < 20 ? 20 : m > 40 ? 40 : m;
}

mcts_time_limits_t mcts_time_limits(const mcts_time_input_t *in) {
    const int64_t d1 = in->margin_ms, d2 = in->margin2_ms;
    const int64_t cap1 = MCTS_TIME_AUTO_DELAY_MS, cap2 = MCTS_TIME_AUTO_DELAY2_MS;
    const int64_t pct = mcts_time_auto_percent(in->load_per_cpu);
    int64_t rem = max64(0, in->remaining_ms), inc = max64(0, in->increment_ms), byo = max64(0, in->byoyomi_ms);
    int64_t moves_left = mcts_time_moves_left(in->ply), share = rem / moves_left;
    mcts_time_limits_t out;
    if (in->movetime_ms > 0) {
        out.soft_ms = out.hard_ms = usable(in->movetime_ms, lag(pct, in->movetime_ms, d1, cap1));
    } else if (byo > 0) {
        int64_t floor_byo = usable(byo, lag(pct, byo, d2, cap2));
        if (rem == 0) {
            out.soft_ms = out.hard_ms = floor_byo;
        } else {
            int64_t cap = usable(rem + byo, lag(pct, rem + byo, d2, cap2));
            int64_t soft = max64(min64(share + byo - lag(pct, share + byo, d1, cap1), cap), floor_byo);
            int64_t hard = min64(soft + share, rem / 5 + floor_byo);
            out.soft_ms = soft;
            out.hard_ms = max64(min64(hard, cap), floor_byo);
        }
    } else {
        int64_t back = inc * 3 / 4, cap = usable(rem, lag(pct, rem, d2, cap2));
        /* the lag of the moves still to play that the increment does not pay for; in sudden death
         * nothing pays for it, and a game may last long past moves_left: the whole lag, set or 120 */
        int64_t delay = inc > 0 ? lag(pct, share + back, d1, cap1) : d1 >= 0 ? d1 : cap1;
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
