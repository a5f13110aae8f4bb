/* search.c - go limits, the MCTS loop of the search thread, info lines (see search.h). */
#include "usi/search.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/sfen.h"

void usi_go_init(usi_go_t *g) {
    memset(g, 0, sizeof *g);
    g->time[0] = g->time[1] = g->inc[0] = g->inc[1] = -1;
    g->byoyomi = g->movetime = g->nodes = -1;
    g->mate_ms = -1;
}

bool usi_go_timed(const usi_go_t *g) {
    return g->time[0] >= 0 || g->time[1] >= 0 || g->inc[0] >= 0 || g->inc[1] >= 0 || g->byoyomi >= 0 ||
           g->movetime >= 0;
}

mcts_time_limits_t usi_go_time_limits(const usi_go_t *g, color_t side, int32_t ply, const usi_options_t *o,
                                      double load_per_cpu) {
    mcts_time_input_t in;
    mcts_time_input_default(&in);
    in.remaining_ms = g->time[side] > 0 ? g->time[side] : 0;
    in.increment_ms = g->inc[side] > 0 ? g->inc[side] : 0;
    in.byoyomi_ms = g->byoyomi > 0 ? g->byoyomi : 0;
    in.movetime_ms = g->movetime > 0 ? g->movetime : 0;
    in.ply = ply;
    in.margin_ms = o->network_delay;
    in.margin2_ms = o->network_delay2;
    in.minimum_ms = o->minimum_ms;
    in.load_per_cpu = load_per_cpu;
    return mcts_time_limits(&in);
}

float usi_result_value(const mcts_result_t *res) {
    for (int32_t i = 0; i < res->n; i++)
        if (res->moves[i] == res->best && res->visits[i] > 0) return res->q[i];
    return res->root_q;
}

int32_t usi_value_to_cp(float q) {
    double s = (1.0 + (double)q) * 0.5;
    if (!(s >= 0.001)) s = 0.001; /* also NaN */
    if (s > 0.999) s = 0.999;
    return (int32_t)lround(600.0 * log10(s / (1.0 - s)));
}

/* " m1 m2 ..." of n moves into buf. */
static void moves_text(const move_t *mv, int32_t n, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < n && used + MOVE_USI_MAX + 2 < len; i++) {
        char m[MOVE_USI_MAX];
        move_to_usi(mv[i], m);
        used += (size_t)snprintf(buf + used, len - used, " %s", m);
    }
}

void usi_search_info(usi_search_t *s) {
    const mcts_result_t *r = s->res;
    int64_t now = compat_now_ms();
    int64_t ms = now - s->start_ms;
    if (ms < 0) ms = 0;
    s->elapsed_ms = ms;
    const mcts_params_t *p = mcts_tree_params(s->tree);
    int64_t edge_cap = p->edge_limit > 0 ? p->edge_limit : (int64_t)p->node_limit * 48;
    int64_t full = p->node_limit > 0 ? (int64_t)r->nodes * 1000 / p->node_limit : 0;
    int64_t full_e = edge_cap > 0 ? r->edges * 1000 / edge_cap : 0;
    if (full_e > full) full = full_e;
    if (full > 1000) full = 1000;
    char pv[MCTS_PV_MAX * MOVE_USI_MAX + 8], head[256];
    int32_t depth = s->depth > 0 ? s->depth : (r->pv_len > 0 ? r->pv_len : 1);
    int32_t seldepth = s->seldepth > depth ? s->seldepth : depth;
    long long nps = ms > 0 ? (long long)(s->playouts * 1000 / ms) : 0;
    snprintf(head, sizeof head, "depth %d seldepth %d nodes %lld nps %lld time %lld hashfull %lld", depth, seldepth,
             (long long)s->playouts, nps, (long long)ms, (long long)full);
    if (s->mate != 0) { /* proven: one line, whatever MultiPV says */
        char mpv[(USI_MATE_PLY_MAX + 1) * MOVE_USI_MAX + 8];
        moves_text(s->mate_pv, s->mate_len, mpv, sizeof mpv);
        usi_out_line(s->out, "info %s%s score mate %d%s%s", s->multipv > 1 ? "multipv 1 " : "", head, s->mate,
                     s->mate_len > 0 ? " pv" : "", mpv);
        return;
    }
    moves_text(r->pv, r->pv_len, pv, sizeof pv);
    if (s->multipv <= 1) {
        usi_out_line(s->out, "info %s score cp %d%s%s", head, usi_value_to_cp(usi_result_value(r)),
                     r->pv_len > 0 ? " pv" : "", pv);
        return;
    }
    /* the most visited root moves, best first (ties: the higher prior) */
    int32_t order[MCTS_MOVES_MAX], n = 0;
    for (int32_t i = 0; i < r->n; i++)
        if (r->visits[i] > 0 || (r->moves[i] == r->best && r->best != MOVE_NONE)) order[n++] = i;
    for (int32_t i = 1; i < n; i++) { /* insertion sort: a few hundred moves at most */
        int32_t x = order[i], k = i;
        while (k > 0 && (r->visits[order[k - 1]] < r->visits[x] ||
                         (r->visits[order[k - 1]] == r->visits[x] && r->prior[order[k - 1]] < r->prior[x]))) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = x;
    }
    /* the played move leads (Gumbel may play one that is not the most visited) */
    for (int32_t i = 0; i < n; i++)
        if (r->moves[order[i]] == r->best) {
            int32_t x = order[i];
            memmove(order + 1, order, (size_t)i * sizeof order[0]);
            order[0] = x;
            break;
        }
    if (n == 0) {
        usi_out_line(s->out, "info multipv 1 %s score cp %d%s%s", head, usi_value_to_cp(usi_result_value(r)),
                     r->pv_len > 0 ? " pv" : "", pv);
        return;
    }
    for (int32_t k = 0; k < n && k < s->multipv; k++) {
        int32_t i = order[k];
        char line[MCTS_PV_MAX * MOVE_USI_MAX + 8];
        bool full_pv = r->pv_len > 0 && r->pv[0] == r->moves[i];
        if (!full_pv) { /* the line of this root move, from the tree */
            move_t other[MCTS_PV_MAX];
            int32_t len = mcts_tree_pv(s->tree, r->moves[i], other, MCTS_PV_MAX);
            if (len <= 0) {
                other[0] = r->moves[i];
                len = 1;
            }
            moves_text(other, len, line, sizeof line);
        }
        float q = r->visits[i] > 0 ? r->q[i] : usi_result_value(r);
        usi_out_line(s->out, "info multipv %d %s score cp %d pv%s", k + 1, head, usi_value_to_cp(q),
                     full_pv ? pv : line);
    }
}

static void sample_depth(usi_search_t *s, usi_batch_t *b) {
    if (b->leaves->n <= 0 || !s->scratch) return;
    mcts_request_position(s->tree, &b->leaves->reqs[0], s->scratch);
    int32_t d = pos_hist_len(s->scratch) - pos_hist_len(mcts_tree_position(s->tree));
    s->depth_sum_ += d;
    s->depth_n_++;
    if (d > s->seldepth) s->seldepth = d;
    s->depth = (int32_t)((s->depth_sum_ + s->depth_n_ / 2) / s->depth_n_);
    if (s->depth < 1) s->depth = 1;
}

static void eval_error(usi_search_t *s, const char *err) {
    if (s->warned_) return;
    s->warned_ = true;
    usi_out_line(s->out, "info string %s; continuing with uniform answers", err);
}

/* The most visited root move is also the best by Q (the soft stop rule). */
static bool result_stable(const mcts_result_t *r) {
    int32_t bv = -1, bq = -1, bn = 0;
    float bqv = -2.0f;
    for (int32_t i = 0; i < r->n; i++) {
        if (r->visits[i] <= 0) continue;
        if (r->visits[i] > bn) bn = r->visits[i], bv = i;
        if (r->q[i] > bqv) bqv = r->q[i], bq = i;
    }
    return bv >= 0 && bv == bq;
}

/* Has this search completed a playout (a leaf evaluated and backed up, not
 * only sent)? Until it has, no deadline ends it: the answer is then at the
 * least the net's own choice at the root. Looks at the tree only until it
 * has (the answer does not change back). */
static bool searched(usi_search_t *s) {
    if (s->searched_) return true;
    mcts_search_result(s->tree, s->res);
    s->searched_ = s->res->playouts > mcts_pending(s->tree) && s->res->best != MOVE_NONE;
    s->forced_ = s->searched_ && s->res->n == 1;
    return s->searched_;
}

static int32_t in_flight(const usi_search_t *s) {
    return (s->batch[0] && s->batch[0]->in_flight) + (s->batch[1] && s->batch[1]->in_flight);
}

/* A finished batch: its device time is from its submission, or from the end
 * of the batch before it when it waited behind that one. */
static void batch_done(usi_search_t *s, int i, int64_t now) {
    usi_batch_t *b = s->batch[i];
    int64_t from = s->submit_ms_[i] > s->last_done_ms_ ? s->submit_ms_[i] : s->last_done_ms_;
    s->last_done_ms_ = now;
    if (b->leaves->n < 4) return; /* a batch of a few (the root) pays mostly fixed costs */
    double per = (double)(now - from) / (double)b->leaves->n;
    s->pos_ms_ = s->pos_ms_ > 0 ? 0.8 * s->pos_ms_ + 0.2 * per : per;
}

/* How many leaves a new batch may hold now: those that should be evaluated
 * before the hard deadline behind the batch in flight; one batch at a time
 * past the soft deadline. */
static int32_t batch_allowance(const usi_search_t *s, int64_t soft, int64_t hard, int64_t now, int32_t bs) {
    int32_t busy = in_flight(s);
    if (soft && now >= soft && busy >= 1) return 0;
    if (hard && now >= hard) return 0;
    if (!hard || s->pos_ms_ <= 0) return bs;
    double queued = 0;
    for (int i = 0; i < 2; i++)
        if (s->batch[i] && s->batch[i]->in_flight) queued += s->batch[i]->leaves->n;
    double fit = (double)(hard - now) / s->pos_ms_ - queued;
    if (fit < 1) return 0;
    return fit < bs ? (int32_t)fit : bs;
}

void usi_search_run(usi_search_t *s, const usi_search_limits_t *lim) {
    mcts_tree_t *t = s->tree;
    int64_t interval = s->info_interval_ms > 0 ? s->info_interval_ms : 1000;
    atomic_store(&s->halt_, 0);
    s->warned_ = false;
    s->mate = 0;
    s->depth_sum_ = s->depth_n_ = 0;
    s->playouts = 0;
    s->searched_ = s->forced_ = false;
    s->depth = s->seldepth = 0;
    mcts_limits_t ml;
    memset(&ml, 0, sizeof ml);
    ml.visits = lim->visits > 0 ? lim->visits : INT64_MAX / 4;
    ml.full = 0;
    ml.stop = &s->halt_;
    bool pondering = lim->ponder;
    int64_t soft = pondering ? 0 : lim->soft_ms, hard = pondering ? 0 : lim->hard_ms;
    int32_t bs = s->batch_size;
    if (bs > s->batch[0]->leaves->cap) bs = s->batch[0]->leaves->cap;
    if (bs < 1) bs = 1;
    mcts_search_begin(t, &ml);
    int64_t next_info = compat_now_ms() + interval, next_stable = 0;
    uint64_t seq = 0, batch_seq[2] = {0, 0};
    bool tried = false;     /* a batch was collected (or could not be) */
    bool delivered = false; /* a batch was taken in since the last look at the tree */
    int64_t spins = 0;
    for (;;) {
        /* the first batch (the root) always goes out: a stop right after go
         * is answered from its evaluation (see USI_ROOT_WAIT_MS) */
        if (tried && atomic_load_explicit(s->stop, memory_order_relaxed)) break;
        int64_t now = compat_now_ms(), at;
        if (pondering && s->ponderhit && s->ponderhit(s->user, &at)) {
            pondering = false;
            soft = lim->soft_rel ? at + lim->soft_rel : 0;
            hard = lim->hard_rel ? at + lim->hard_rel : 0;
        }
        if (!pondering) {
            if (hard && now >= hard && searched(s)) break;
            if (soft && now >= soft && now >= next_stable && searched(s)) {
                next_stable = now + 5;
                mcts_search_result(t, s->res);
                if (result_stable(s->res)) break;
            }
        }
        if (mcts_search_done(t)) break;
        if (delivered && searched(s) && s->forced_) break; /* one legal move: searched once, played */
        delivered = false;
        tried = true;
        bool submitted = false;
        for (int i = 0; i < 2; i++) {
            usi_batch_t *b = s->batch[i];
            if (!b || b->in_flight) continue;
            int32_t allow = pondering ? bs : batch_allowance(s, soft, hard, now, bs);
            if (allow <= 0 && in_flight(s) == 0 && !searched(s)) allow = 1; /* late: one leaf, at once */
            if (allow <= 0) break;
            mcts_batch_clear(b->leaves);
            int32_t n = mcts_collect(t, allow, mcts_batch_slots(b->leaves));
            if (n <= 0) break;
            mcts_batch_commit(b->leaves, n, 0);
            sample_depth(s, b);
            char err[256];
            if (usi_eval_submit(s->eval, b, err, sizeof err) != 0) eval_error(s, err);
            batch_seq[i] = ++seq;
            s->submit_ms_[i] = now;
            submitted = true;
            if (!b->in_flight) { /* uniform answers: at once */
                usi_batch_deliver(t, b);
                delivered = true;
            }
        }
        if (!submitted && in_flight(s) == 0 && !pondering && hard &&
            batch_allowance(s, soft, hard, now, bs) <= 0 && searched(s))
            break; /* nothing more fits before the deadline */
        /* the oldest batch on the device: take it in when it is done, never wait past a deadline */
        int oldest = -1;
        for (int i = 0; i < 2; i++)
            if (s->batch[i] && s->batch[i]->in_flight && (oldest < 0 || batch_seq[i] < batch_seq[oldest]))
                oldest = i;
        if (oldest >= 0) {
            char err[256];
            int rc = usi_eval_poll(s->eval, s->batch[oldest], err, sizeof err);
            if (rc != 0) {
                if (rc < 0) eval_error(s, err);
                batch_done(s, oldest, compat_now_ms());
                usi_batch_deliver(t, s->batch[oldest]);
                delivered = true;
            } else {
                compat_sleep_ms(1);
            }
        } else if (!submitted && (++spins & 63) == 0) {
            compat_sleep_ms(0); /* only resolved leaves: let others run */
        }
        if (now >= next_info) {
            next_info = now + interval;
            mcts_search_result(t, s->res);
            s->playouts = s->res->playouts;
            usi_search_info(s);
        }
    }
    atomic_store(&s->halt_, 1);
    mcts_search_result(t, s->res);
    /* stopped before the root's evaluation came back (a stop right after
     * go): wait a little for the batches on the device rather than answer
     * with no move searched at all */
    int64_t until = compat_now_ms() + USI_ROOT_WAIT_MS;
    while (!searched(s) && in_flight(s) > 0 && compat_now_ms() < until) {
        bool took = false;
        for (int i = 0; i < 2; i++) {
            usi_batch_t *b = s->batch[i];
            if (!b || !b->in_flight) continue;
            char err[256];
            int rc = usi_eval_poll(s->eval, b, err, sizeof err);
            if (rc == 0) continue;
            if (rc < 0) eval_error(s, err);
            usi_batch_deliver(t, b);
            took = true;
        }
        if (!took) compat_sleep_ms(1);
    }
    mcts_search_result(t, s->res);
    s->playouts = s->res->playouts;
    s->elapsed_ms = compat_now_ms() - s->start_ms;
}

int32_t usi_search_take_in(usi_search_t *s) {
    int32_t left = 0;
    for (int i = 0; i < 2; i++) {
        usi_batch_t *b = s->batch[i];
        if (!b || !b->in_flight) continue;
        char err[256];
        int rc = usi_eval_poll(s->eval, b, err, sizeof err);
        if (rc == 0) {
            left++;
            continue;
        }
        if (rc < 0) eval_error(s, err);
        usi_batch_deliver(s->tree, b);
    }
    return left;
}

void usi_search_finish(usi_search_t *s) {
    atomic_store(&s->halt_, 1);
    for (int i = 0; i < 2; i++) {
        usi_batch_t *b = s->batch[i];
        if (!b || !b->in_flight) continue;
        char err[256];
        if (usi_eval_wait(s->eval, b, err, sizeof err) != 0) eval_error(s, err);
        usi_batch_deliver(s->tree, b);
    }
}
