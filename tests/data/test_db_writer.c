/* test_db_writer.c - data/writer.c: the writer thread with several
 * producers, backpressure, flush and bounded shutdown, and a writer killed
 * mid-work (a child process) whose run resumes with every committed job and
 * none half-done. */
#include "compat/compat.h"
#include "compat/err.h"
#include "data/db.h"
#include "data/writer.h"
#include "tests/data/db_test.h"
#include "tests/koma_test.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer thread ------------------------------------------------------------------------- */
#define PRODUCERS 4
#define JOBS_PER_PRODUCER 12
#define STEPS_PER_PRODUCER 150

typedef struct {
    int producer, index;
    const char *run;
    atomic_int *done_calls;
    atomic_int *done_ok;
    int sleep_ms;
    atomic_int *gate;    /* when set, the job waits for *gate != 0 before its sleep */
    atomic_int *entered; /* when set, counts jobs the writer thread has begun */
    int big;          /* games with long move lists: the database must grow */
    char text[64];
} job_arg_t;

static int job_write(const char *path, void *arg, char *err, size_t errlen) {
    job_arg_t *a = arg;
    return compat_write_file_durable(path, a->text, strlen(a->text), err, errlen) == 0 ? 0 : DB_ERROR;
}

/* Runs on the writer thread: writes and registers a shard of 3 games. */
static int job_run(db_t *db, void *arg, char *err, size_t errlen) {
    job_arg_t *a = arg;
    if (a->entered) atomic_fetch_add(a->entered, 1);
    while (a->gate && !atomic_load(a->gate)) compat_sleep_ms(1);
    if (a->sleep_ms) compat_sleep_ms(a->sleep_ms);
    db_shard_t s = shard("", 1, 30);
    snprintf(s.path, sizeof s.path, "shards/p%d_j%03d.safetensors", a->producer, a->index);
    snprintf(a->text, sizeof a->text, "producer %d job %d", a->producer, a->index);
    static char long_moves[20001];
    if (a->big && !long_moves[0]) { /* only ever filled on the writer thread */
        for (int i = 0; i < 4000; i++) memcpy(long_moves + 5 * i, "7g7f ", 5);
        long_moves[19999] = 0;
    }
    const char *mv = a->big ? long_moves : "7g7f";
    db_game_t g[3] = {game(0, 10, 1, DB_REASON_CHECKMATE, mv, 10), game(10, 10, -1, DB_REASON_RESIGN, mv, 10),
                      game(20, 10, 0, DB_REASON_SENNICHITE, mv, 10)};
    db_status_t st = db_shard_commit(db, a->run, &s, g, 3, job_write, a);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void job_done(void *arg, int status, const char *err) {
    job_arg_t *a = arg;
    (void)err;
    atomic_fetch_add(a->done_calls, 1);
    if (status == DB_OK) atomic_fetch_add(a->done_ok, 1);
    free(a);
}

typedef struct {
    db_writer_t *w;
    int producer;
    const char *run;
    atomic_int *done_calls, *done_ok;
    int submit_failures;
} producer_t;

static void *producer_main(void *arg) {
    producer_t *p = arg;
    int job = 0;
    for (int i = 0; i < STEPS_PER_PRODUCER; i++) {
        db_train_step_t row = {0};
        row.step = (int64_t)p->producer * 100000 + i;
        row.cycle = 1;
        row.lr = 0.01;
        row.loss_total = 1.0 / (i + 1);
        row.loss_policy = row.loss_value = row.loss_legal = NAN;
        row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
        if (db_writer_train_step(p->w, &row, -1) != DB_OK) p->submit_failures++;
        if (i % (STEPS_PER_PRODUCER / JOBS_PER_PRODUCER) == 0 && job < JOBS_PER_PRODUCER) {
            job_arg_t *a = calloc(1, sizeof *a);
            a->producer = p->producer;
            a->index = job++;
            a->run = p->run;
            a->done_calls = p->done_calls;
            a->done_ok = p->done_ok;
            db_job_t j = {job_run, job_done, a};
            if (db_writer_submit(p->w, &j, -1) != DB_OK) {
                p->submit_failures++;
                free(a);
            }
        }
    }
    return NULL;
}

static void test_writer_producers(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *run = tmp("wrun");
    tmp("wrun/shards");
    CHECK(compat_mkdir_p(tmp("wrun/shards"), err, sizeof err) == 0);
    for (int p = 0; p < PRODUCERS; p++)
        for (int j = 0; j < JOBS_PER_PRODUCER; j++) {
            char name[96];
            snprintf(name, sizeof name, "wrun/shards/p%d_j%03d.safetensors", p, j);
            tmp(name);
        }
    const char *path = tmp_db("wrun/koma.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_t *reader = NULL; /* the trainer's view: a read-only connection while the writer writes */
    CHECK_OK(reader, db_open(path, DB_OPEN_READONLY, &reader, err, sizeof err));

    db_writer_t *w = db_writer_start(db, 8, err, sizeof err); /* small: producers feel backpressure */
    CHECK(w != NULL);
    if (!w) return;
    atomic_int done_calls = 0, done_ok = 0;
    producer_t prod[PRODUCERS];
    compat_thread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        prod[p] = (producer_t){w, p, run, &done_calls, &done_ok, 0};
        CHECK(compat_thread_create(&th[p], producer_main, &prod[p]) == 0);
    }
    int64_t seen_games = 0;
    for (int i = 0; i < 20; i++) { /* reads never block on the writer */
        int64_t ng = 0;
        CHECK_OK(reader, db_count(reader, -1, &ng, NULL));
        CHECK(ng >= seen_games);
        seen_games = ng;
        compat_sleep_ms(2);
    }
    for (int p = 0; p < PRODUCERS; p++) compat_thread_join(th[p]);
    CHECK(db_writer_flush(w, 30000) == DB_OK);
    /* After the flush every row is visible to another connection. */
    int64_t ng = 0, np = 0;
    CHECK_OK(reader, db_count(reader, -1, &ng, &np));
    CHECK(ng == PRODUCERS * JOBS_PER_PRODUCER * 3 && np == PRODUCERS * JOBS_PER_PRODUCER * 30);
    db_train_step_t *rows = calloc(PRODUCERS * STEPS_PER_PRODUCER + 1, sizeof *rows);
    int32_t nr = 0;
    CHECK_OK(reader, db_train_steps_get(reader, 0, INT64_MAX, rows, PRODUCERS * STEPS_PER_PRODUCER + 1, &nr));
    CHECK(nr == PRODUCERS * STEPS_PER_PRODUCER);
    free(rows);

    db_cycle_metrics_t cm = {0};
    cm.cycle = 1;
    cm.games = ng;
    cm.started = cm.finished = cm.selfplay_s = cm.train_s = cm.positions_per_s = cm.evals_per_s = NAN;
    cm.avg_batch = cm.busy_pct = cm.avg_plies = cm.elo = cm.elo_lo = cm.elo_hi = NAN;
    CHECK(db_writer_cycle_metrics(w, &cm, -1) == DB_OK);
    db_train_step_t late = {0};
    late.step = 999999;
    CHECK(db_writer_train_step(w, &late, -1) == DB_OK); /* written by stop, not lost */

    CHECK(db_writer_stop(w, 30000) == DB_OK);
    CHECK(db_writer_stop(w, 0) == DB_OK); /* twice is fine */
    db_writer_stats_t stats;
    db_writer_stats(w, &stats);
    CHECK(stats.jobs_done == PRODUCERS * JOBS_PER_PRODUCER && stats.jobs_failed == 0 && stats.jobs_cancelled == 0);
    CHECK(stats.steps_written == PRODUCERS * STEPS_PER_PRODUCER + 1 && stats.steps_failed == 0);
    CHECK(stats.cycles_written == 1 && stats.queued == 0 && stats.last_status == DB_OK);
    CHECK(atomic_load(&done_calls) == PRODUCERS * JOBS_PER_PRODUCER && atomic_load(&done_ok) == done_calls);
    for (int p = 0; p < PRODUCERS; p++) CHECK(prod[p].submit_failures == 0);
    CHECK(db_writer_train_step(w, &late, -1) == DB_CANCELLED); /* stopped: refused, not queued */
    db_writer_free(w);

    /* The db is the caller's again. */
    db_cycle_metrics_t cg;
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &cg));
    CHECK(cg.games == ng);
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.train_steps == PRODUCERS * STEPS_PER_PRODUCER + 1 && sum.last_step == 999999 && sum.pending == 0);
    CHECK(sum.shards == PRODUCERS * JOBS_PER_PRODUCER);
    db_check_report_t rep;
    CHECK_OK(db, db_check_shards(db, run, DB_CHECK_VERIFY, &rep));
    CHECK(rep.n == 0 && rep.shards_checked == PRODUCERS * JOBS_PER_PRODUCER);
    db_check_report_free(&rep);
    db_close(reader);
    db_close(db);
}

/* A producer blocked on a full queue, released by stop. */
typedef struct {
    db_writer_t *w;
    atomic_int *done_calls, *done_ok, *gate, *entered;
    int results[64];
    int n;
} blocked_t;

static void *blocked_main(void *arg) {
    blocked_t *b = arg;
    for (b->n = 0; b->n < 64; b->n++) {
        job_arg_t *a = calloc(1, sizeof *a);
        a->sleep_ms = 100;
        a->producer = 9;
        a->index = 100 + b->n;
        a->run = g_dir;
        a->done_calls = b->done_calls;
        a->done_ok = b->done_ok;
        a->gate = b->gate;
        a->entered = b->entered;
        db_job_t j = {job_run, job_done, a};
        b->results[b->n] = db_writer_submit(b->w, &j, -1);
        if (b->results[b->n] != DB_OK) {
            free(a);
            b->n++;
            break;
        }
    }
    return NULL;
}

static void test_writer_shutdown(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("wstop.db");
    CHECK(compat_mkdir_p(tmp("shards"), err, sizeof err) == 0);
    for (int i = 0; i < 64; i++) {
        char name[96];
        snprintf(name, sizeof name, "shards/p9_j%03d.safetensors", 100 + i);
        tmp(name);
    }
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;

    CHECK(db_writer_start(db, 0, err, sizeof err) == NULL && contains(err, "capacity 0"));
    CHECK(db_writer_start(NULL, 4, err, sizeof err) == NULL);

    /* Slow jobs, a full queue, a short deadline: stop returns within bounds,
     * the queued jobs are cancelled, every job's done() runs exactly once
     * (written or cancelled), the blocked producer is released. */
    db_writer_t *w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    /* The job in flight waits at the gate until the full-queue checks are
     * done, so no slot can open under them (a 100 ms sleep alone could end
     * during them on a loaded machine). */
    atomic_int done_calls = 0, done_ok = 0, gate = 0, entered = 0;
    blocked_t b = {w, &done_calls, &done_ok, &gate, &entered, {0}, 0};
    compat_thread_t th;
    CHECK(compat_thread_create(&th, blocked_main, &b) == 0);
    db_writer_stats_t stats;
    /* Until 4 are queued behind the one running: the first must have left the
     * queue (entered the writer), or its slot could open under the checks
     * below (seen under TSan, where the writer thread starts late). */
    for (int i = 0; i < 2500; i++) {
        db_writer_stats(w, &stats);
        if (stats.queued == 4 && atomic_load(&entered) == 1) break;
        compat_sleep_ms(2);
    }
    CHECK(stats.queued == 4 && atomic_load(&entered) == 1);
    /* The queue is full: a submit that does not wait says so. */
    atomic_int extra_calls = 0, extra_ok = 0;
    job_arg_t *extra = calloc(1, sizeof *extra);
    extra->done_calls = &extra_calls, extra->done_ok = &extra_ok;
    extra->run = g_dir, extra->producer = 8;
    db_job_t ej = {job_run, job_done, extra};
    int r0 = db_writer_submit(w, &ej, 0);
    int r20 = r0 == DB_OK ? DB_OK : db_writer_submit(w, &ej, 20);
    CHECK(r0 == DB_TIMEOUT && r20 == DB_TIMEOUT);
    if (r0 != DB_OK && r20 != DB_OK) free(extra); /* else the writer owns it: job_done frees it */
    CHECK(db_writer_flush(w, 1) == DB_TIMEOUT);
    atomic_store(&gate, 1);

    int64_t t0 = compat_now_ms();
    int st = db_writer_stop(w, 50);
    int64_t took = compat_now_ms() - t0;
    CHECK(st == DB_TIMEOUT);
    CHECK(took < 1000); /* the deadline plus the job in flight */
    compat_thread_join(th);
    CHECK(b.n >= 1 && b.results[b.n - 1] == DB_CANCELLED);
    int accepted = 0;
    for (int i = 0; i < b.n; i++) accepted += b.results[i] == DB_OK;
    db_writer_stats(w, &stats);
    CHECK(atomic_load(&done_calls) == accepted);
    CHECK(stats.jobs_done + stats.jobs_cancelled == accepted && stats.jobs_cancelled >= 3);
    CHECK(atomic_load(&done_ok) == stats.jobs_done);
    CHECK(db_writer_flush(w, 100) == DB_OK); /* everything is accounted for */
    printf("writer shutdown: %d accepted, %lld written, %lld cancelled, stop took %lld ms\n", accepted,
           (long long)stats.jobs_done, (long long)stats.jobs_cancelled, (long long)took);
    db_writer_free(w);
    CHECK(count_rows(db, "shards") == stats.jobs_done && count_rows(db, "shard_intents") == 0);

    /* A failing row and a full disk reach the stats and done(). */
    w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    db_train_step_t row = {0};
    row.step = 1;
    row.lr = NAN; /* lr is NOT NULL: this row cannot be written */
    row.loss_policy = row.loss_value = row.loss_legal = row.loss_total = NAN;
    row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
    CHECK(db_writer_train_step(w, &row, -1) == DB_OK);
    CHECK(db_writer_flush(w, 10000) == DB_OK);
    db_writer_stats(w, &stats);
    CHECK(stats.steps_failed == 1 && stats.last_status == DB_CONSTRAINT && contains(stats.last_error, "train step 1"));
    CHECK(db_writer_stop(w, 1000) == DB_OK);
    db_writer_free(w);

    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1")); /* the db is ours between writers */
    w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    int calls_before = atomic_load(&done_calls);
    job_arg_t *a = calloc(1, sizeof *a);
    a->producer = 9;
    a->index = 500;
    a->big = 1;
    a->run = g_dir;
    a->done_calls = &done_calls;
    a->done_ok = &done_ok;
    tmp("shards/p9_j500.safetensors");
    db_job_t j = {job_run, job_done, a};
    CHECK(db_writer_submit(w, &j, -1) == DB_OK);
    CHECK(db_writer_flush(w, 10000) == DB_OK);
    db_writer_stats(w, &stats);
    CHECK(stats.jobs_failed == 1 && stats.last_status == DB_FULL && contains(stats.last_error, "disk is full") &&
          starts_with(stats.last_error, path));
    CHECK(atomic_load(&done_calls) == calls_before + 1);
    CHECK(!compat_file_exists(tmp("shards/p9_j500.safetensors"))); /* no orphan left */
    db_writer_free(w);
    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1073741823"));
    db_writer_free(NULL);
    db_close(db);
}

/* ---- crash and resume ------------------------------------------------------------------------ */
/* The test binary runs itself as a child ("--crash-child <dir> <iteration>
 * <mode>") that writes shards and train steps through the writer thread and
 * dies with _Exit at some moment: no cleanup, no stdio flush, as under
 * kill -9 (the OS keeps what was written). Mode 0 dies right after a shard
 * file's rename, before its registration (the orphan window); mode 1 dies
 * after a delay that depends on the iteration. The parent then reopens the
 * run as a restarted command would and checks the invariants. */
#define CRASH_JOBS 40

typedef struct {
    int iteration, mode, producer, index;
    char text[64];
} crash_arg_t;

static int crash_write(const char *path, void *arg, char *err, size_t errlen) {
    crash_arg_t *a = arg;
    int rc = compat_write_file_durable(path, a->text, strlen(a->text), err, errlen);
    if (a->mode == 0 && a->producer == 0 && a->index == 5) _Exit(3); /* renamed, not registered */
    return rc == 0 ? 0 : DB_ERROR;
}

static const char *g_child_run;

static int crash_job(db_t *db, void *arg, char *err, size_t errlen) {
    crash_arg_t *a = arg;
    db_shard_t s = shard("", a->iteration, 20);
    snprintf(s.path, sizeof s.path, "shards/i%02d_p%d_j%03d.safetensors", a->iteration, a->producer, a->index);
    snprintf(a->text, sizeof a->text, "iteration %d producer %d job %d", a->iteration, a->producer, a->index);
    db_game_t g[2] = {game(0, 12, 1, DB_REASON_CHECKMATE, "7g7f 3c3d", 12),
                      game(12, 8, 0, DB_REASON_SENNICHITE, "2g2f", 8)};
    db_status_t st = db_shard_commit(db, g_child_run, &s, g, 2, crash_write, a);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void crash_done(void *arg, int status, const char *err) {
    (void)status;
    (void)err;
    free(arg);
}

typedef struct {
    db_writer_t *w;
    int iteration, mode, producer;
} crash_producer_t;

static void *crash_producer(void *arg) {
    crash_producer_t *p = arg;
    for (int j = 0; j < CRASH_JOBS; j++) {
        crash_arg_t *a = calloc(1, sizeof *a);
        *a = (crash_arg_t){p->iteration, p->mode, p->producer, j, ""};
        db_job_t job = {crash_job, crash_done, a};
        if (db_writer_submit(p->w, &job, -1) != DB_OK) free(a);
        for (int k = 0; k < 5; k++) {
            db_train_step_t row = {0};
            row.step = (int64_t)p->iteration * 1000000 + p->producer * 100000 + j * 10 + k;
            row.cycle = p->iteration;
            row.lr = 0.01;
            row.loss_policy = row.loss_value = row.loss_legal = row.loss_total = NAN;
            row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
            db_writer_train_step(p->w, &row, -1);
        }
    }
    return NULL;
}

static int crash_child(const char *run, int iteration, int mode) {
    char err[DB_ERR_MAX], path[600];
    g_child_run = run;
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    db_writer_t *w = db_writer_start(db, 4, err, sizeof err);
    if (!w) return 1;
    crash_producer_t p[2] = {{w, iteration, mode, 0}, {w, iteration, mode, 1}};
    compat_thread_t th[2];
    for (int i = 0; i < 2; i++) compat_thread_create(&th[i], crash_producer, &p[i]);
    if (mode == 1) {
        compat_sleep_ms(3 + 7 * iteration);
        _Exit(3); /* in the middle of whatever the writer is doing */
    }
    for (int i = 0; i < 2; i++) compat_thread_join(th[i]);
    db_writer_free(w);
    db_close(db);
    return 0; /* mode 0 normally dies before this */
}

static void test_crash_resume(const char *self) {
    char err[DB_ERR_MAX];
    const char *run = tmp("crun");
    tmp("crun/shards");
    tmp("crun/orphans");
    const char *path = tmp_db("crun/koma.db");
    CHECK(compat_mkdir_p(tmp("crun/shards"), err, sizeof err) == 0);
    int orphans = 0, registered = 0;
    for (int it = 0; it < 6; it++) {
        int mode = it % 2;
        for (int p = 0; p < 2; p++)
            for (int j = 0; j < CRASH_JOBS; j++) {
                char name[96];
                snprintf(name, sizeof name, "crun/shards/i%02d_p%d_j%03d.safetensors", it, p, j);
                tmp(name);
                snprintf(name, sizeof name, "crun/orphans/shards_i%02d_p%d_j%03d.safetensors", it, p, j);
                tmp(name);
            }
        char it_s[16], mode_s[16];
        snprintf(it_s, sizeof it_s, "%d", it);
        snprintf(mode_s, sizeof mode_s, "%d", mode);
        const char *argv[] = {self, "--crash-child", run, it_s, mode_s, NULL};
        int status = 0;
        int ran = compat_run(argv, &status, err, sizeof err);
        if (ran != 0) fprintf(stderr, "%s\n", err);
        CHECK(ran == 0 && status != 0); /* it ran, and died */

        /* Restart: open, check, and everything on record is whole. */
        db_t *db = NULL;
        CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
        if (!db) return;
        db_check_report_t rep;
        CHECK_OK(db, db_check_shards(db, run, DB_CHECK_VERIFY, &rep));
        for (int32_t i = 0; i < rep.n; i++) {
            CHECK(rep.items[i].kind != DB_CHECK_MISSING && rep.items[i].kind != DB_CHECK_MISMATCH);
            if (rep.items[i].kind == DB_CHECK_ORPHAN_MOVED) orphans++;
            if (rep.items[i].kind == DB_CHECK_TMP_REMOVED) {
                char name[DB_PATH_MAX + 64];
                snprintf(name, sizeof name, "crun/%s", rep.items[i].path);
                tmp(name);
            }
        }
        if (mode == 0) { /* died between rename and registration of this one */
            char rel[96];
            snprintf(rel, sizeof rel, "shards/i%02d_p0_j005.safetensors", it);
            CHECK(has_item(&rep, DB_CHECK_ORPHAN_MOVED, rel));
        }
        db_check_report_free(&rep);
        CHECK(sql_int(path, "SELECT count(*) FROM shards s WHERE games != "
                            "(SELECT count(*) FROM games g WHERE g.shard_id = s.id)") == 0);
        CHECK(sql_int(path, "SELECT count(*) FROM games WHERE shard_id NOT IN (SELECT id FROM shards)") == 0);
        CHECK(sql_int(path, "SELECT count(*) FROM shard_intents") == 0);
        char ok[16];
        sql_text(path, "PRAGMA integrity_check", ok, sizeof ok);
        CHECK(strcmp(ok, "ok") == 0);
        /* A file in shards/ exists exactly when its row does. */
        for (int p = 0; p < 2; p++)
            for (int j = 0; j < CRASH_JOBS; j++) {
                char rel[96], abs[800], sql[200];
                snprintf(rel, sizeof rel, "shards/i%02d_p%d_j%03d.safetensors", it, p, j);
                snprintf(abs, sizeof abs, "%s/%s", run, rel);
                snprintf(sql, sizeof sql, "SELECT count(*) FROM shards WHERE path = '%s'", rel);
                int64_t rows = sql_int(path, sql);
                CHECK(rows == (compat_file_exists(abs) ? 1 : 0));
                registered += (int)rows;
            }
        db_close(db);
    }
    printf("crash/resume: 6 crashes, %d shards registered, %d orphans moved aside\n", registered, orphans);
    CHECK(orphans >= 1);
    CHECK(registered > 0);
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--crash-child") == 0)
        return crash_child(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (t_db_setup("db_writer") != 0) return 1;
    test_writer_producers();
    test_writer_shutdown();
    test_crash_resume(argv[0]);
    t_db_cleanup();
    return t_done("test_db_writer");
}
