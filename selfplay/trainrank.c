/* trainrank.c - a training rank of `selfplay`; see trainrank.h. */
#include "selfplay/trainrank.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "selfplay/exit.h"
#include "selfplay/ranks.h"
#include "selfplay/wire.h"
#include "train/follow.h"

#define SEND_TIMEOUT_MS 60000 /* a report or a net passed on waits this long for send slots */
#define STOP_WAIT_MS 60000    /* after ERROR or BYE, STOP is awaited this long */
#define FLUSH_MS 30000
#define IN_FLIGHT 8
#define INBOX 16

typedef struct {
    const sp_config_t *cfg;
    const train_config_t *tcfg;
    dist_t *dist, *group;
    dist_mail_t *mail;
    train_follower_t *f; /* NULL: it could not be made (ERROR sent); plans are answered not ready */
    int32_t rank, size, fanout;
    char host[128];
    runlog_sink_t log; /* sp_rank_sink */
} trank_t;

/* The follower's lines (train_config_t.log). */
static void window_log(void *user, const char *line) {
    const trank_t *x = user;
    runlog_printf(&x->log, "train: %s", line);
}

static int send_to_0(trank_t *x, int32_t tag, const void *buf, int64_t len, char *err, size_t errlen) {
    char e[512];
    int rc = dist_mail_send(x->mail, 0, tag, buf, len, SEND_TIMEOUT_MS, e, sizeof e);
    if (rc == DIST_OK) return 0;
    set_err(err, errlen, "to rank 0: %.400s", rc == DIST_TIMEOUT ? "earlier messages still in flight after 60 s" : e);
    return -1;
}

/* One plan: the cycle's steps with the group (always its collective calls,
 * even when the plan or this rank is not ready), then the report. 0, or -1
 * with err when the report cannot be sent (the mailbox failed). */
static int take_plan(trank_t *x, const dist_msg_t *m, char *err, size_t errlen) {
    sp_wire_plan_t wp;
    sp_wire_trained_t t;
    memset(&t, 0, sizeof t);
    char e[1024] = "";
    int decoded = sp_wire_plan_decode(m->data, m->len, &wp, e, sizeof e) == 0;
    int rc;
    if (decoded && x->f) {
        train_follow_report_t rep;
        rc = train_follower_cycle(x->f, &wp.plan, &rep, e, sizeof e);
        t.steps = rep.steps, t.positions = rep.positions, t.weights = rep.weights, t.loaded = rep.loaded;
        t.ms = (int64_t)(rep.seconds * 1e3);
        if (rc == TRAIN_OK) snprintf(e, sizeof e, "%s", rep.route ? rep.route : "");
        else if (rc == TRAIN_STOPPED) snprintf(e, sizeof e, "a stop was requested (agreed by the training group)");
    } else { /* not ready: the group's collectives all the same, so rank 0 is not left waiting */
        if (decoded) snprintf(e, sizeof e, "this rank has no trainer (its error went to rank 0)");
        train_dist_t *none = NULL;
        train_loop_t lp = {.cycle = decoded ? wp.plan.cycle : -1};
        train_loop_result_t r;
        char e2[512];
        rc = train_group_run(x->group, &none, NULL, 0, 0, &lp, &r, e2, sizeof e2);
    }
    t.cycle = decoded ? wp.plan.cycle : 0;
    t.status = rc == TRAIN_OK ? SP_TRAINED_OK : rc == TRAIN_STOPPED ? SP_TRAINED_STOPPED : SP_TRAINED_FAILED;
    snprintf(t.text, sizeof t.text, "%s", e);
    if (rc == TRAIN_OK)
        runlog_printf(&x->log,
                      "cycle %" PRId64 ": %" PRId64 " steps with rank 0 (window %" PRId64
                      " positions%s), weights %016" PRIx64 " the same on the %d training ranks",
                      t.cycle, t.steps, t.positions, t.loaded ? ", model loaded" : "", t.weights,
                      (int)dist_size(x->group));
    else runlog_printf(&x->log, "cycle %" PRId64 " %s: %s", t.cycle, rc == TRAIN_STOPPED ? "stopped" : "failed", e);
    sp_wire_plan_free(&wp);
    uint8_t buf[SP_WIRE_TRAINED_MAX];
    int64_t len = sp_wire_trained_encode(&t, buf);
    return send_to_0(x, SP_TAG_TRAINED, buf, len, err, errlen);
}

/* The loop: returns SP_EXIT_* once rank 0 says STOP. */
static int trank_loop(trank_t *x) {
    char err[2048] = "", e[1024];
    int32_t code = -1;
    bool failed = false, left = false;
    int64_t deadline = -1; /* after ERROR or BYE: STOP is awaited until then */
    bool bye = false;
    if (!x->f) { /* its ERROR is sent: plans are answered (not ready) until STOP */
        failed = true;
        deadline = compat_now_ns() + (int64_t)STOP_WAIT_MS * 1000000;
    }
    while (code < 0) {
        if (!left && compat_stop_requested()) { /* Ctrl-C: a cycle in flight stops with the group (agreed) */
            left = true;
            runlog_printf(&x->log, "stop requested: leaving the job");
            bye = send_to_0(x, SP_TAG_BYE, "", 0, e, sizeof e) == 0;
            if (deadline < 0) deadline = compat_now_ns() + (int64_t)STOP_WAIT_MS * 1000000;
        }
        if (deadline >= 0 && compat_now_ns() > deadline) break;
        dist_msg_t *m = NULL;
        int rc = dist_mail_recv(x->mail, &m, 100, e, sizeof e);
        if (rc < 0) { /* the mailbox is gone: nothing more can be said */
            runlog_printf(&x->log, "error: %s", e);
            return SP_EXIT_ERROR;
        }
        if (rc == DIST_TIMEOUT) continue;
        int32_t parent = x->fanout > 0 ? (x->rank - 1) / x->fanout : 0, sent = 0, v = 0;
        char fail_now[1200] = "";
        if ((m->tag == SP_TAG_NET || m->tag == SP_TAG_PAUSE) && m->src != parent) {
            snprintf(fail_now, sizeof fail_now,
                     "a %s from rank %d, not from rank %d above this one in the tree "
                     "(--net-fanout must be the same on every rank)",
                     m->tag == SP_TAG_NET ? "net" : "pause", (int)m->src, (int)parent);
        } else if (m->tag == SP_TAG_NET || m->tag == SP_TAG_PAUSE) { /* passed on; this rank does not play */
            if (sp_ranks_tree_down(x->mail, x->rank, x->size, x->fanout, m->tag, m->data, m->len, &sent, e, sizeof e) !=
                0)
                snprintf(fail_now, sizeof fail_now, "passing a %s on: %s", m->tag == SP_TAG_NET ? "net" : "pause", e);
        } else if (m->tag == SP_TAG_PLAN && m->src == 0) {
            if (take_plan(x, m, e, sizeof e) != 0) snprintf(fail_now, sizeof fail_now, "%s", e);
        } else if (m->tag == SP_TAG_STOP && m->src == 0) {
            if (sp_wire_int_decode(m->data, m->len, &v, e, sizeof e) != 0) snprintf(fail_now, sizeof fail_now, "%s", e);
            else code = v;
        } else {
            snprintf(fail_now, sizeof fail_now, "unknown message tag %d from rank %d", (int)m->tag, (int)m->src);
        }
        dist_msg_free(m);
        if (fail_now[0] && !failed) {
            failed = true;
            set_err(err, sizeof err, "%s", fail_now);
        }
        if (failed && err[0]) { /* once: rank 0 ends the job; plans are still answered until STOP */
            runlog_printf(&x->log, "error: %s", err);
            (void)send_to_0(x, SP_TAG_ERROR, err, (int64_t)strlen(err), e, sizeof e);
            err[0] = 0;
            if (deadline < 0) deadline = compat_now_ns() + (int64_t)STOP_WAIT_MS * 1000000;
        }
    }
    if (code < 0) code = left ? SP_EXIT_INTERRUPTED : SP_EXIT_ERROR; /* no STOP in time */
    if (!bye) (void)send_to_0(x, SP_TAG_BYE, "", 0, e, sizeof e);
    if (left) return code == SP_EXIT_DONE ? SP_EXIT_INTERRUPTED : code;
    return failed && code == SP_EXIT_DONE ? SP_EXIT_ERROR : code;
}

int sp_train_rank_run(const sp_config_t *cfg, const train_config_t *tcfg_in, dist_t *dist, dist_t *group) {
    trank_t x = {.cfg = cfg,
                 .dist = dist,
                 .group = group,
                 .rank = dist_rank(dist),
                 .size = dist_size(dist),
                 .fanout = (int32_t)cfg->net_fanout};
    compat_hostname(x.host, sizeof x.host);
    x.log = sp_rank_sink(x.rank, x.host, cfg->quiet != 0);
    train_config_t tcfg = *tcfg_in;
    tcfg.log = window_log;
    tcfg.log_user = &x;
    tcfg.group = NULL; /* this rank follows; rank 0's trainer leads */
    x.tcfg = &tcfg;
    char err[1024], e[512];
    x.mail = dist_mail_start(dist, IN_FLIGHT, INBOX, err, sizeof err);
    if (!x.mail) {
        fprintf(stderr, "selfplay rank %d: %s\n", (int)x.rank, err);
        dist_abort(dist, SP_EXIT_ERROR);
        return SP_EXIT_ERROR;
    }
    x.f = train_follower_new(&tcfg, cfg->run, group, err, sizeof err);
    sp_wire_hello_t h = {.pid = compat_getpid(), .device = -1};
    snprintf(h.host, sizeof h.host, "%s", x.host);
    snprintf(h.backend, sizeof h.backend, "%s trainer", tcfg.backend);
    uint8_t buf[SP_WIRE_SMALL_MAX];
    int64_t len = sp_wire_hello_encode(&h, buf);
    (void)send_to_0(&x, SP_TAG_HELLO, buf, len, e, sizeof e);
    if (!x.f) {
        char msg[1200];
        snprintf(msg, sizeof msg, "training rank: %s", err);
        runlog_printf(&x.log, "error: %s", msg);
        (void)send_to_0(&x, SP_TAG_ERROR, msg, (int64_t)strlen(msg), e, sizeof e);
    } else {
        runlog_printf(&x.log, "training with rank 0 (training group rank %d of %d), reading %s", (int)dist_rank(group),
                      (int)dist_size(group), cfg->run);
    }
    int code = trank_loop(&x);
    int flushed = dist_mail_flush(x.mail, FLUSH_MS, e, sizeof e);
    int32_t unsent = dist_mail_stop(x.mail);
    train_follower_free(x.f);
    if (flushed != DIST_OK || unsent > 0) {
        fprintf(stderr, "selfplay rank %d (%s): %d message(s) to rank 0 still in flight at the end: ending the job\n",
                (int)x.rank, x.host, (int)unsent);
        dist_abort(dist, code ? code : SP_EXIT_ERROR);
    }
    return code;
}
