/* test_timeman.c - time limits for one move: byoyomi, sudden death with and
 * without increment, fixed move time, tiny clocks; never more than the clock allows. */
#include <stdio.h>

#include "mcts/timeman.h"
#include "tests/koma_test.h"

static mcts_time_limits_t run(int64_t rem, int64_t inc, int64_t byo, int64_t movetime, int32_t ply, int64_t margin) {
    mcts_time_input_t in;
    mcts_time_input_default(&in);
    in.remaining_ms = rem, in.increment_ms = inc, in.byoyomi_ms = byo, in.movetime_ms = movetime;
    in.ply = ply, in.margin_ms = margin;
    return mcts_time_limits(&in);
}

int main(void) {
    /* Byoyomi only: most of it, minus the margin. */
    mcts_time_limits_t t = run(0, 0, 10000, 0, 50, -1);
    CHECKF(t.soft_ms == 9700 && t.hard_ms == 9700, "byoyomi 10 s: %lld / %lld", (long long)t.soft_ms, (long long)t.hard_ms);
    t = run(0, 0, 3000, 0, 50, 500);
    CHECKF(t.hard_ms == 2500 && t.soft_ms == 2500, "byoyomi 3 s margin 500: %lld / %lld", (long long)t.soft_ms,
           (long long)t.hard_ms);
    /* Main time + byoyomi: more than the byoyomi, within main + byoyomi. */
    t = run(600000, 0, 10000, 0, 1, -1);
    CHECKF(t.soft_ms > 9700 && t.soft_ms < 40000 && t.hard_ms >= t.soft_ms && t.hard_ms <= 609700,
           "10 min + 10 s byoyomi: %lld / %lld", (long long)t.soft_ms, (long long)t.hard_ms);
    /* Sudden death: about remaining / 30, hard a few times that. */
    t = run(300000, 0, 0, 0, 60, -1);
    CHECKF(t.soft_ms >= 300000 / 40 && t.soft_ms <= 300000 / 20 && t.hard_ms <= 3 * t.soft_ms && t.hard_ms >= t.soft_ms,
           "5 min sudden death: %lld / %lld", (long long)t.soft_ms, (long long)t.hard_ms);
    /* Increment adds to the soft limit. */
    mcts_time_limits_t u = run(300000, 5000, 0, 0, 60, -1);
    CHECKF(u.soft_ms == t.soft_ms + 5000, "increment: soft %lld vs %lld", (long long)u.soft_ms, (long long)t.soft_ms);
    /* Low on time with a big increment: never more than remaining - margin. */
    u = run(4000, 10000, 0, 0, 100, -1);
    CHECKF(u.hard_ms <= 3700 && u.soft_ms <= u.hard_ms, "4 s left + 10 s inc: %lld / %lld", (long long)u.soft_ms,
           (long long)u.hard_ms);
    /* Fewer than the margin left: a quarter of it. */
    u = run(200, 0, 0, 0, 100, -1);
    CHECKF(u.hard_ms <= 50 && u.soft_ms >= 1 && u.soft_ms <= u.hard_ms, "200 ms left: %lld / %lld", (long long)u.soft_ms, (long long)u.hard_ms);
    /* Fixed move time. */
    u = run(100000, 0, 5000, 2000, 10, 100);
    CHECKF(u.soft_ms == 1900 && u.hard_ms == 1900, "movetime 2 s: %lld / %lld", (long long)u.soft_ms, (long long)u.hard_ms);
    /* Later in the game a larger share of the remaining time. */
    mcts_time_limits_t early = run(300000, 0, 0, 0, 1, -1), late = run(300000, 0, 0, 0, 150, -1);
    CHECKF(late.soft_ms > early.soft_ms, "ply 150 soft %lld <= ply 1 soft %lld", (long long)late.soft_ms,
           (long long)early.soft_ms);
    /* Sweep: limits never exceed what the clock allows and soft <= hard. */
    const int64_t rems[] = {0, 1, 50, 299, 300, 301, 1000, 5000, 60000, 3600000};
    const int64_t incs[] = {0, 1000, 10000};
    const int64_t byos[] = {0, 100, 1000, 10000, 60000};
    int64_t cases = 0;
    for (size_t a = 0; a < sizeof rems / sizeof rems[0]; a++)
        for (size_t b = 0; b < sizeof incs / sizeof incs[0]; b++)
            for (size_t c = 0; c < sizeof byos / sizeof byos[0]; c++)
                for (int32_t ply = 1; ply < 400; ply += 37) {
                    if (byos[c] > 0 && incs[b] > 0) continue; /* no clock uses both */
                    mcts_time_limits_t x = run(rems[a], incs[b], byos[c], 0, ply, -1);
                    int64_t allowed = rems[a] + byos[c];
                    cases++;
                    CHECKF(x.soft_ms >= 1 && x.soft_ms <= x.hard_ms, "rem %lld inc %lld byo %lld ply %d: %lld / %lld",
                           (long long)rems[a], (long long)incs[b], (long long)byos[c], ply, (long long)x.soft_ms,
                           (long long)x.hard_ms);
                    CHECKF(x.hard_ms <= (allowed > 1 ? allowed - (allowed > 300 ? 300 : 0) : 1),
                           "rem %lld inc %lld byo %lld ply %d: hard %lld exceeds the clock", (long long)rems[a],
                           (long long)incs[b], (long long)byos[c], ply, (long long)x.hard_ms);
                }
    printf("test_timeman: %lld sweep cases\n", (long long)cases);
    return t_done("test_timeman");
}
