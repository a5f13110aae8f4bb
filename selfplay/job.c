/* job.c - rank 0's side of a selfplay job; see job.h. */
#include "selfplay/job.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/err.h"
#include "selfplay/exit.h"
#include "selfplay/wire.h"

#define JOB_IN_FLIGHT 8   /* rank 0's sends in flight (nets, orders) */
#define JOB_INBOX 256     /* messages received and not yet taken */
#define JOB_STOP_MS 60000 /* the other ranks get this long to answer STOP; a plan this long to leave */
#define JOB_TAKE_MAX 256  /* games taken at once */

struct sp_job {
    dist_t *dist;
    dist_mail_t *mail;
    sp_ranks_t *ranks;
    dist_t *group; /* the training group (tcfg->group; NULL: rank 0 trains alone) */
    runlog_t *log;
    char run_dir[1024];
    bool finished; /* STOP sent, BYEs drained */
    bool abort;    /* ... some rank did not answer in time, or messages never left */
    sp_ranks_game_t games[JOB_TAKE_MAX];
};

/* The trainer's plan for a cycle to the training ranks 1..K-1 (their group
 * ranks are their ranks in the job: dist_split with key = rank). Called on
 * the trainer's thread. */
static int send_plan(void *user, const train_plan_t *plan, char *err, size_t errlen) {
    sp_job_t *j = user;
    int64_t len = 0;
    uint8_t *msg = sp_wire_plan_encode(plan, &len);
    if (!msg) {
        set_err(err, errlen,
                "cannot encode the plan of cycle %" PRId64 " (%d shards; out of memory, or a path over 255 bytes)",
                plan->cycle, (int)plan->nshards);
        return -1;
    }
    int rc = 0;
    char e[512];
    for (int32_t r = 1; r < dist_size(j->group) && rc == 0; r++) {
        int st = dist_mail_send(j->mail, r, SP_TAG_PLAN, msg, len, JOB_STOP_MS, e, sizeof e);
        if (st != DIST_OK) {
            set_err(err, errlen, "to rank %d: %s", (int)r,
                    st == DIST_TIMEOUT ? "earlier messages still in flight after 60 s" : e);
            rc = -1;
        }
    }
    free(msg);
    return rc;
}

int sp_job_open(dist_t *dist, const sp_config_t *cfg, train_config_t *tcfg, runlog_t *log, const char *host,
                const char *run_dir, sp_job_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!dist || dist_size(dist) <= 1) return 0;
    char e[1024];
    sp_job_t *j = calloc(1, sizeof *j);
    if (j) j->mail = dist_mail_start(dist, JOB_IN_FLIGHT, JOB_INBOX, e, sizeof e);
    else snprintf(e, sizeof e, "out of memory");
    if (j && (!j->mail || !(j->ranks = sp_ranks_new(dist, j->mail, (int32_t)cfg->net_fanout, runlog_line, log)))) {
        if (j->mail) snprintf(e, sizeof e, "out of memory");
    }
    if (!j || !j->ranks) {
        runlog_event(log, "error: %s", e);
        set_err(err, errlen, "%s", e);
        dist_abort(dist, SP_EXIT_ERROR); /* the other ranks cannot be told otherwise */
        free(j);
        return -1;
    }
    j->dist = dist;
    j->log = log;
    snprintf(j->run_dir, sizeof j->run_dir, "%s", run_dir);
    int32_t K = tcfg->group ? dist_size(tcfg->group) : 1;
    if (K > 1) {
        j->group = tcfg->group;
        tcfg->plan = send_plan;
        tcfg->plan_user = j;
        sp_ranks_set_train_ranks(j->ranks, K);
        char others[64];
        if (K == 2) snprintf(others, sizeof others, "rank 1 does not play and reads");
        else snprintf(others, sizeof others, "ranks 1-%d do not play and read", (int)K - 1);
        runlog_event(log,
                     "job: %d ranks, rank 0 on %s owns the run and plays; ranks 0-%d train each net together "
                     "(--train-ranks %d: %s the run directory %s)",
                     (int)dist_size(dist), host, (int)K - 1, (int)K, others, run_dir);
    } else {
        runlog_event(log, "job: %d ranks, rank 0 on %s owns the run and plays", (int)dist_size(dist), host);
    }
    *out = j;
    return 0;
}

int sp_job_send_net(sp_job_t *j, db_t *rdb, int64_t cycle, uint64_t seed, char *err, size_t errlen) {
    if (!j) return 0;
    db_model_t m;
    if (db_model_by_cycle(rdb, (int32_t)cycle, &m) != DB_OK) {
        set_err(err, errlen, "model cycle %" PRId64 " for the other ranks: %s", cycle, db_errmsg(rdb));
        return -1;
    }
    char path[sizeof j->run_dir + DB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", j->run_dir, m.path);
    return sp_ranks_send_net(j->ranks, cycle, seed, path, m.xxh3, err, errlen);
}

int sp_job_games(sp_job_t *j, int64_t timeout_ms, sp_job_game_fn on_game, void *user, char *err, size_t errlen) {
    if (!j) return 0;
    int32_t n = sp_ranks_take(j->ranks, j->games, JOB_TAKE_MAX, timeout_ms, err, errlen);
    if (n < 0) return n;
    for (int32_t i = 0; i < n; i++)
        if (on_game(user, &j->games[i], err, errlen) != 0) {
            for (int32_t k = i + 1; k < n; k++) sp_record_free(j->games[k].rec);
            return -1;
        }
    return 0;
}

int sp_job_pause(sp_job_t *j, bool paused, char *err, size_t errlen) {
    return j ? sp_ranks_pause(j->ranks, paused, err, errlen) : 0;
}

int64_t sp_job_searches(const sp_job_t *j) { return j ? sp_ranks_searches(j->ranks) : 0; }

double sp_job_describe(sp_job_t *j, double rank0_pos_s, char *buf, size_t n) {
    buf[0] = 0;
    if (!j) return rank0_pos_s;
    char per[400];
    double remote = sp_ranks_describe(j->ranks, per, sizeof per);
    snprintf(buf, n, " (r0 %.1f%s%s)", rank0_pos_s, per[0] ? ", " : "", per); /* none: --train-ranks N */
    return rank0_pos_s + remote;
}

typedef struct {
    sp_job_t *j;
    sp_job_game_fn on_game;
    void *user;
} late_t;

/* A game that reaches rank 0 while the job ends: kept like a local one. */
static void late_game(void *user, sp_ranks_game_t *g) {
    late_t *lt = user;
    char e[512];
    if (lt->on_game(lt->user, g, e, sizeof e) != 0) runlog_event(lt->j->log, "warning: %s", e);
}

void sp_job_finish(sp_job_t *j, int code, bool keep, train_trainer_t *trainer, sp_job_game_fn on_game, void *user) {
    if (!j || j->finished) return;
    j->finished = true;
    /* The training ranks answer STOP only between cycles: the cycle in
     * flight stops first (a stop agreed inside the training group). */
    if (j->group && trainer) train_trainer_stop(trainer);
    late_t lt = {j, on_game, user};
    char e[1024];
    if (sp_ranks_finish(j->ranks, code, JOB_STOP_MS, keep ? late_game : NULL, &lt, e, sizeof e) != 0) {
        runlog_event(j->log, "warning: ending the other ranks: %s", e);
        j->abort = true;
    }
}

void sp_job_close(sp_job_t *j) {
    if (!j) return;
    if (j->mail && dist_mail_stop(j->mail) > 0) j->abort = true; /* messages that never left */
    j->mail = NULL;
    sp_ranks_free(j->ranks);
    j->ranks = NULL;
}

void sp_job_end(sp_job_t *j, int rc) {
    if (!j) return;
    if (j->abort) { /* everything committed is on disk: end the ranks that did not answer */
        fprintf(stderr, "selfplay: other ranks did not stop in time: ending the job (mpirun reports it)\n");
        dist_abort(j->dist, rc ? rc : SP_EXIT_ERROR);
    }
    free(j);
}
