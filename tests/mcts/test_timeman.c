/* test_timeman.c - time limits for one move: byoyomi, sudden death with and
 * without increment, fixed move time, tiny clocks; never more than the clock
 * allows; the automatic margins (a tenth of the time, at most 120 / 300 ms)
 * and margins set by the user, kept back in full. */
#include <stdbool.h>
#include <stdio.h>

#include "mcts/timeman.h"
#include "tests/koma_test.h"

static mcts_time_limits_t run2(int64_t rem, int64_t inc, int64_t byo, int64_t movetime, int32_t ply, int64_t margin,
                               int64_t margin2) {
    mcts_time_input_t in;
    mcts_time_input_default(&in);
    in.remaining_ms = rem, in.increment_ms = inc, in.byoyomi_ms = byo, in.movetime_ms = movetime;
    in.ply = ply, in.margin_ms = margin, in.margin2_ms = margin2;
    return mcts_time_limits(&in);
}
/* margin2 as margin (set, or both automatic) */
static mcts_time_limits_t run(int64_t rem, int64_t inc, int64_t byo, int64_t movetime, int32_t ply, int64_t margin) {
    return run2(rem, inc, byo, movetime, ply, margin, margin);
}

int main(void) {
    /* Byoyomi only, automatic margins (the defaults): a tenth kept back, at most 300 ms; the issue's
     * byoyomi of 200 ms used 50 ms (a quarter: the 300 ms margin did not fit). */
    const int64_t byo_auto[][2] = {{50, 40}, {100, 90}, {200, 180}, {1000, 900}, {3000, 2700}, {10000, 9700}};
    for (size_t i = 0; i < sizeof byo_auto / sizeof byo_auto[0]; i++) {
        mcts_time_limits_t b = run(0, 0, byo_auto[i][0], 0, 50, -1);
        CHECKF(b.soft_ms == byo_auto[i][1] && b.hard_ms == byo_auto[i][1], "byoyomi %lld ms: %lld / %lld, want %lld",
               (long long)byo_auto[i][0], (long long)b.soft_ms, (long long)b.hard_ms, (long long)byo_auto[i][1]);
        CHECKF(b.hard_ms * 100 >= byo_auto[i][0] * 85 || byo_auto[i][0] > 2000 || byo_auto[i][0] < 100,
               "byoyomi %lld ms: at least 85%% used", (long long)byo_auto[i][0]);
    }
    /* A loaded machine (load average per CPU above 1.25, above 2) keeps back 15%, 20%; unknown (< 0) or
     * idle, 10%; a margin set stays as set; the caps stay (byoyomi 10 s: 300 ms). */
    const struct {
        double load;
        int64_t byo, want;
    } loaded[] = {{-1, 100, 90},  {0.5, 100, 90},   {1.25, 100, 90},  {1.3, 100, 85},     {2.0, 100, 85},
                  {2.5, 100, 80}, {3.0, 1000, 800}, {1.5, 1000, 850}, {3.0, 10000, 9700}, {3.0, 50, 40}};
    for (size_t i = 0; i < sizeof loaded / sizeof loaded[0]; i++) {
        mcts_time_input_t in;
        mcts_time_input_default(&in);
        in.byoyomi_ms = loaded[i].byo, in.ply = 50, in.load_per_cpu = loaded[i].load;
        mcts_time_limits_t b = mcts_time_limits(&in);
        CHECKF(b.soft_ms == loaded[i].want && b.hard_ms == loaded[i].want, "byoyomi %lld ms at load %.2f: %lld / %lld, want %lld",
               (long long)loaded[i].byo, loaded[i].load, (long long)b.soft_ms, (long long)b.hard_ms,
               (long long)loaded[i].want);
        in.margin2_ms = 5;
        b = mcts_time_limits(&in);
        CHECKF(b.hard_ms == loaded[i].byo - 5, "byoyomi %lld ms at load %.2f, NetworkDelay2 5: %lld",
               (long long)loaded[i].byo, loaded[i].load, (long long)b.hard_ms);
    }
    /* A margin set is kept back in full, whatever the clock (a network server's lag); one that does not
     * fit leaves a quarter. */
    mcts_time_limits_t t = run2(0, 0, 1000, 0, 50, 120, 800);
    CHECKF(t.soft_ms == 200 && t.hard_ms == 200, "byoyomi 1 s, NetworkDelay2 800: %lld / %lld", (long long)t.soft_ms,
           (long long)t.hard_ms);
    t = run2(0, 0, 200, 0, 50, 120, 300);
    CHECKF(t.soft_ms == 50 && t.hard_ms == 50, "byoyomi 200 ms, NetworkDelay2 300 (the old default): %lld / %lld",
           (long long)t.soft_ms, (long long)t.hard_ms);
    t = run2(0, 0, 200, 0, 50, 120, 0);
    CHECKF(t.soft_ms == 200 && t.hard_ms == 200, "byoyomi 200 ms, NetworkDelay2 0: %lld / %lld", (long long)t.soft_ms,
           (long long)t.hard_ms);
    t = run(0, 0, 10000, 0, 50, -1);
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
    /* Three quarters of the increment add to the soft limit (GUIs differ on when they credit it). */
    mcts_time_limits_t u = run(300000, 5000, 0, 0, 60, -1);
    CHECKF(u.soft_ms == 300000 / 30 + 3750, "increment: soft %lld", (long long)u.soft_ms);
    /* Without an increment the lag of the moves still to play (30 at ply 60, 120 ms each: a tenth of
     * 10 s is more than the automatic NetworkDelay's 120) is kept back. */
    CHECKF(t.soft_ms == (300000 - 30 * 120) / 30, "sudden death: soft %lld", (long long)t.soft_ms);
    mcts_time_limits_t sd = run(300000, 0, 0, 0, 60, 300);
    CHECKF(sd.soft_ms == (300000 - 30 * 300) / 30, "sudden death, NetworkDelay 300: soft %lld", (long long)sd.soft_ms);
    /* 10 s + 0.1 s Fischer, move 1: the automatic lag (a tenth of 250 + 75 ms) is paid by the increment. */
    sd = run(10000, 100, 0, 0, 1, -1);
    CHECKF(sd.soft_ms == 10000 / 40 + 75 && sd.hard_ms == sd.soft_ms + 10000 / 40, "10 s + 0.1 s, move 1: %lld / %lld",
           (long long)sd.soft_ms, (long long)sd.hard_ms);
    sd = run(10000, 100, 0, 0, 1, 120);
    CHECKF(sd.soft_ms == (10000 - 40 * 45) / 40 + 75, "10 s + 0.1 s, NetworkDelay 120 set: soft %lld",
           (long long)sd.soft_ms);
    /* The 20 s + 1 s Fischer: move 1 used 4.5 s of 20 (the hard limit, 3x soft). Now at most a
     * fifth of the main time, and hard adds only the soft limit's share of the main time again. */
    u = run(20000, 1000, 0, 0, 1, -1);
    CHECKF(u.hard_ms == u.soft_ms + 20000 / 40 && u.soft_ms == 20000 / 40 + 750,
           "20 s + 1 s, move 1: %lld / %lld", (long long)u.soft_ms, (long long)u.hard_ms);
    /* 60 s + 1 s byoyomi, move 1 took 5.3 s: hard adds 60/40 s, soft 60/40 s + 1 s. */
    u = run(60000, 0, 1000, 0, 1, -1);
    CHECKF(u.soft_ms == 60000 / 40 + 1000 - 120 && u.hard_ms == u.soft_ms + 60000 / 40,
           "60 s + 1 s byoyomi, move 1: %lld / %lld", (long long)u.soft_ms, (long long)u.hard_ms);
    u = run2(60000, 0, 1000, 0, 1, 300, 300);
    CHECKF(u.soft_ms == 60000 / 40 + 1000 - 300, "60 s + 1 s byoyomi, NetworkDelay 300: %lld", (long long)u.soft_ms);
    /* Low on time with a big increment: never more than remaining - margin. */
    u = run(4000, 10000, 0, 0, 100, -1);
    CHECKF(u.hard_ms <= 3700 && u.soft_ms <= u.hard_ms, "4 s left + 10 s inc: %lld / %lld", (long long)u.soft_ms,
           (long long)u.hard_ms);
    /* Fewer than a margin set left: a quarter of it. */
    u = run(200, 0, 0, 0, 100, 300);
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
                    int64_t keep = allowed / 10 < 10 ? 10 : allowed / 10 < 300 ? allowed / 10 : 300;
                    cases++;
                    CHECKF(x.soft_ms >= 1 && x.soft_ms <= x.hard_ms, "rem %lld inc %lld byo %lld ply %d: %lld / %lld",
                           (long long)rems[a], (long long)incs[b], (long long)byos[c], ply, (long long)x.soft_ms,
                           (long long)x.hard_ms);
                    CHECKF(x.hard_ms <= (allowed > keep ? allowed - keep : allowed / 4 > 1 ? allowed / 4 : 1),
                           "rem %lld inc %lld byo %lld ply %d: hard %lld exceeds the clock", (long long)rems[a],
                           (long long)incs[b], (long long)byos[c], ply, (long long)x.hard_ms);
                }
    printf("test_timeman: %lld sweep cases\n", (long long)cases);
    /* Whole games of 200 moves a side (a long shogi game has 150) in the worst case: every move runs to its hard limit, and the GUI
     * charges lag on top (up to NetworkDelay2; with an increment, less lag than a quarter of it: the increment is what pays
     * for lag in a long game). No clock ever falls, and the main time lasts (the 20 s + 1 s
     * game had 2.6 s left at move 13). The increment is credited after the move (the stricter convention). */
    const struct {
        int64_t time, inc, byo, lag, margin, margin2; /* margins: -1 automatic */
        const char *name;
    } clocks[] = {{20000, 1000, 0, 200, 120, 300, "20 s + 1 s"},
                  {10000, 100, 0, 20, 120, 300, "10 s + 0.1 s"},
                  {60000, 0, 1000, 300, 120, 300, "60 s + 1 s byoyomi"},
                  {0, 0, 1000, 300, 120, 300, "byoyomi 1 s"},
                  {300000, 0, 0, 20, 120, 300, "5 min"},
                  /* the automatic margins, with lag below what they keep back */
                  {20000, 1000, 0, 100, -1, -1, "20 s + 1 s, automatic margins"},
                  {10000, 100, 0, 9, -1, -1, "10 s + 0.1 s, automatic margins"},
                  {60000, 0, 1000, 90, -1, -1, "60 s + 1 s byoyomi, automatic margins"},
                  {0, 0, 100, 9, -1, -1, "byoyomi 100 ms, automatic margins"},
                  {300000, 0, 0, 20, -1, -1, "5 min, automatic margins"}};
    for (size_t c = 0; c < sizeof clocks / sizeof clocks[0]; c++) {
        int64_t clock = clocks[c].time, at13 = -1;
        bool lost = false;
        for (int32_t move = 1; move <= 200 && !lost; move++) {
            mcts_time_input_t in;
            mcts_time_input_default(&in);
            in.remaining_ms = clock, in.increment_ms = clocks[c].inc, in.byoyomi_ms = clocks[c].byo;
            in.ply = 2 * move - 1;
            in.margin_ms = clocks[c].margin, in.margin2_ms = clocks[c].margin2; /* NetworkDelay, NetworkDelay2 */
            mcts_time_limits_t x = mcts_time_limits(&in);
            int64_t spent = x.hard_ms + clocks[c].lag;
            if (clocks[c].byo > 0) {
                int64_t over = spent - clock;
                if (over > clocks[c].byo) lost = true;
                clock = over > 0 ? 0 : clock - spent;
            } else {
                if (spent > clock) lost = true;
                clock += clocks[c].inc - spent;
            }
            if (move == 13) at13 = clock;
        }
        CHECKF(!lost, "%s: the clock fell within 200 moves of hard limits", clocks[c].name);
        if (clocks[c].time > 0 && clocks[c].inc > 0)
            CHECKF(at13 >= clocks[c].time / 4, "%s: only %lld ms left at move 13 of hard limits", clocks[c].name,
                   (long long)at13);
        printf("%s: %lld ms left at move 13 when every move runs to its hard limit\n", clocks[c].name, (long long)at13);
    }
    /* NetworkDelay2 applies at the clock's end, MinimumThinkingTime raises soft only. */
    mcts_time_input_t in;
    mcts_time_input_default(&in);
    in.byoyomi_ms = 5000, in.margin_ms = 100, in.margin2_ms = 1000;
    t = mcts_time_limits(&in);
    CHECKF(t.soft_ms == 4000 && t.hard_ms == 4000, "byoyomi 5 s, NetworkDelay2 1 s: %lld / %lld", (long long)t.soft_ms,
           (long long)t.hard_ms);
    mcts_time_input_default(&in);
    in.remaining_ms = 300000, in.ply = 60, in.minimum_ms = 12000;
    t = mcts_time_limits(&in);
    CHECKF(t.soft_ms == 12000 && t.hard_ms >= 12000, "MinimumThinkingTime 12 s: %lld / %lld", (long long)t.soft_ms,
           (long long)t.hard_ms);
    in.remaining_ms = 20000;
    t = mcts_time_limits(&in);
    CHECKF(t.soft_ms <= 4000 && t.hard_ms <= 4000, "MinimumThinkingTime never beyond the hard limit: %lld / %lld",
           (long long)t.soft_ms, (long long)t.hard_ms);
    return t_done("test_timeman");
}
