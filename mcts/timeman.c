/* timeman.c - soft and hard time limits for one move (see timeman.h). */
#include "mcts/timeman.h"

#include <string.h>

void mcts_time_input_default(mcts_time_input_t *in) {
    memset(in, 0, sizeof *in);
    in->ply = 1;
    in->margin_ms = -1;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* What may be spent when the margin does not fit: a quarter of it. */
static int64_t usable(int64_t avail, int64_t margin) { return avail > margin ? avail - margin : avail / 4; }

mcts_time_limits_t mcts_time_limits(const mcts_time_input_t *in) {
    int64_t margin = in->margin_ms < 0 ? 300 : in->margin_ms;
    int64_t rem = max64(0, in->remaining_ms), inc = max64(0, in->increment_ms), byo = max64(0, in->byoyomi_ms);
    int64_t horizon = 40 - (int64_t)(in->ply > 0 ? in->ply : 1) / 6;
    horizon = horizon < 20 ? 20 : horizon > 40 ? 40 : horizon;
    mcts_time_limits_t out;
    if (in->movetime_ms > 0) {
        out.soft_ms = out.hard_ms = usable(in->movetime_ms, margin);
    } else if (byo > 0) {
        int64_t cap = usable(rem + byo, margin);
        int64_t floor_byo = usable(byo, margin);
        int64_t soft = min64(rem / horizon + byo - margin, cap);
        soft = max64(soft, floor_byo);
        out.soft_ms = soft;
        out.hard_ms = max64(min64(cap, 3 * soft), floor_byo);
    } else {
        int64_t cap = usable(rem, margin);
        int64_t soft = rem / horizon + inc;
        out.hard_ms = min64(3 * soft, cap);
        out.soft_ms = min64(soft, out.hard_ms);
    }
    out.soft_ms = max64(1, out.soft_ms);
    out.hard_ms = max64(out.soft_ms, out.hard_ms);
    return out;
}
