/* model.c - model file names and registration through the writer. See model.h. */
#include "train/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/version.h"
#include "nn/weights.h"
#include "train/lineage.h"

char *train_model_rel_path(char *buf, size_t len, int64_t cycle) {
    snprintf(buf, len, TRAIN_MODELS_DIR "/%04" PRId64 ".safetensors", cycle);
    return buf;
}

char *train_model_arch(const nn_net_config_t *cfg, char *buf, size_t len) {
    char size[32];
    snprintf(buf, len, "resnet%s-%s", nn_net_arch_format(cfg, size, sizeof size),
             nn_act_name(cfg->act));
    return buf;
}

/* ---- a job run on the writer thread, waited for ---------------------------- */
typedef struct {
    compat_mutex_t mu;
    compat_cond_t cv;
    int refs;   /* the waiter and the job */
    int done;
    int status;
    char err[DB_ERR_MAX];
    db_job_run_fn run;
    size_t argsize;
    _Alignas(16) unsigned char arg[]; /* a copy of the caller's argument */
} call_t;

static void call_release(call_t *c) {
    compat_mutex_lock(&c->mu);
    int left = --c->refs;
    compat_mutex_unlock(&c->mu);
    if (left == 0) {
        compat_cond_destroy(&c->cv);
        compat_mutex_destroy(&c->mu);
        free(c);
    }
}

static int call_run(db_t *db, void *arg, char *err, size_t errlen) {
    call_t *c = arg;
    return c->run(db, c->arg, err, errlen);
}

static void call_done(void *arg, int status, const char *err) {
    call_t *c = arg;
    compat_mutex_lock(&c->mu);
    c->done = 1;
    c->status = status;
    snprintf(c->err, sizeof c->err, "%s", err ? err : "");
    compat_cond_broadcast(&c->cv);
    compat_mutex_unlock(&c->mu);
    call_release(c);
}

static int stop_seen(const atomic_int *stop) {
    return compat_stop_requested() || (stop && atomic_load(stop));
}

int train_writer_call(db_writer_t *w, db_job_run_fn run, void *arg, size_t argsize, const atomic_int *stop,
                      char *err, size_t errlen) {
    if (!w) {
        set_err(err, errlen, "no writer thread");
        return DB_INVALID;
    }
    call_t *c = calloc(1, sizeof *c + argsize);
    if (!c) {
        set_err(err, errlen, "writer call: out of memory");
        return DB_ERROR;
    }
    compat_mutex_init(&c->mu);
    compat_cond_init(&c->cv);
    c->refs = 2;
    c->run = run;
    c->argsize = argsize;
    memcpy(c->arg, arg, argsize);
    db_job_t job = {.run = call_run, .done = call_done, .arg = c};
    /* Block while the queue is full, in slices, so that a stop is noticed. */
    int st;
    int64_t stop_at = -1;
    for (;;) {
        st = db_writer_submit(w, &job, 200);
        if (st != DB_TIMEOUT) break;
        if (stop_seen(stop)) {
            if (stop_at < 0) stop_at = compat_now_ms();
            if (compat_now_ms() - stop_at > TRAIN_WRITER_GRACE_MS) break;
        }
    }
    if (st != DB_OK) {
        set_err(err, errlen, "writer: %s", st == DB_CANCELLED ? "stopping, nothing written" : "queue stayed full");
        compat_cond_destroy(&c->cv);
        compat_mutex_destroy(&c->mu);
        free(c);
        return st;
    }
    compat_mutex_lock(&c->mu);
    while (!c->done) {
        compat_cond_timedwait(&c->cv, &c->mu, 200);
        if (!c->done && stop_seen(stop)) {
            if (stop_at < 0) stop_at = compat_now_ms();
            if (compat_now_ms() - stop_at > TRAIN_WRITER_GRACE_MS) break;
        }
    }
    int done = c->done;
    st = done ? c->status : DB_TIMEOUT;
    if (done) {
        memcpy(arg, c->arg, argsize);
        if (st != DB_OK) set_err(err, errlen, "%s", c->err[0] ? c->err : db_status_name((db_status_t)st));
    } else {
        set_err(err, errlen, "writer: gave up waiting after a stop request");
    }
    compat_mutex_unlock(&c->mu);
    call_release(c);
    return st;
}

/* ---- models ------------------------------------------------------------------ */
static int model_insert_run(db_t *db, void *arg, char *err, size_t errlen) {
    db_model_t *m = arg;
    /* A row for this cycle with the same file (a retried registration whose
     * commit went through) counts as done. */
    db_model_t old;
    if (db_model_by_cycle(db, m->cycle, &old) == DB_OK && strcmp(old.path, m->path) == 0 &&
        strcmp(old.xxh3, m->xxh3) == 0) {
        m->id = old.id;
        return DB_OK;
    }
    /* The run's CPU seconds: this process's so far plus every earlier
     * invocation's (NAN without an invocation row, or past a run row of an
     * older schema). */
    m->cpu_seconds = NAN;
    db_status_t st = DB_OK;
    if (m->run_id > 0) st = db_run_cpu_update(db, m->run_id, (double)compat_cpu_time_ns() / 1e9, &m->cpu_seconds);
    if (st == DB_OK) st = db_model_insert(db, m);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

int train_model_register(db_writer_t *w, const char *run_dir, db_model_t *m, const atomic_int *stop, char *err,
                         size_t errlen) {
    char path[1400], e2[1024];
    snprintf(path, sizeof path, "%s/%s", run_dir, m->path);
    uint64_t h = 0;
    int64_t bytes = 0;
    if (db_file_xxh3(path, &h, &bytes, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s", e2);
        return -1;
    }
    snprintf(m->xxh3, sizeof m->xxh3, "%016" PRIx64, h);
    int st = train_writer_call(w, model_insert_run, m, sizeof *m, stop, e2, sizeof e2);
    if (st != DB_OK) {
        set_err(err, errlen, "%s: register model of cycle %d: %s", path, m->cycle, e2);
        return -1;
    }
    return 0;
}

/* ---- lineage ----------------------------------------------------------------- */
typedef struct {
    int64_t run_id;
    double cpu_now;   /* this process's CPU seconds */
    double cpu_total; /* out: the run's, every invocation's; NAN = unknown */
    int32_t want_latest;
    int32_t has_latest;       /* out */
    char latest[DB_PATH_MAX]; /* out: the run's newest model (run-relative) */
} lineage_arg_t;

static int lineage_prep_run(db_t *db, void *arg, char *err, size_t errlen) {
    lineage_arg_t *a = arg;
    a->cpu_total = NAN;
    db_status_t st = DB_OK;
    if (a->run_id > 0) st = db_run_cpu_update(db, a->run_id, a->cpu_now, &a->cpu_total);
    if (st == DB_OK && a->want_latest) {
        db_model_t row;
        st = db_model_latest(db, &row);
        if (st == DB_OK) {
            a->has_latest = 1;
            snprintf(a->latest, sizeof a->latest, "%s", row.path);
        } else if (st == DB_NOTFOUND) {
            st = DB_OK;
        }
    }
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

/* The wall time of the trainer on a CUDA device since this process's last
 * save (or since the trainer began), in minutes; 0 on any other backend. */
static double gpu_minutes_since_last_save(const nn_net_t *net) {
    static _Atomic int64_t last_ns = 0;
    int64_t now = train_lineage_clock_ns();
    int64_t prev = atomic_exchange(&last_ns, now);
    const nn_backend_t *be = nn_net_backend((nn_net_t *)net);
    if (!be || strcmp(be->name, "cuda") != 0 || now < prev) return 0;
    return (double)(now - prev) / 60e9;
}

/* l: the lineage the file of m gets: anc and a new entry for this run, or
 * (anc NULL) the run's newest model's with its last entry (this run's)
 * brought up to date; a newest model without lineage (an older Koma) or none
 * (a new run) gives this run's entry alone. */
static int lineage_stamp(db_writer_t *w, const char *run_dir, const nn_net_t *net, const db_model_t *m,
                         const train_lineage_t *anc, const atomic_int *stop, train_lineage_t *l, char *err,
                         size_t errlen) {
    lineage_arg_t a = {.run_id = m->run_id, .cpu_now = (double)compat_cpu_time_ns() / 1e9, .want_latest = !anc};
    char e2[1024];
    int st = train_writer_call(w, lineage_prep_run, &a, sizeof a, stop, e2, sizeof e2);
    if (st != DB_OK) {
        set_err(err, errlen, "%s: lineage of cycle %d: %s", run_dir, m->cycle, e2);
        return -1;
    }
    memset(l, 0, sizeof *l);
    if (anc) {
        *l = *anc;
    } else if (a.has_latest) {
        char path[1400];
        run_path(run_dir, a.latest, path, sizeof path);
        if (train_lineage_read(path, l, err, errlen) != 0) return -1;
    }
    if (anc || l->n == 0) {
        if (l->n == TRAIN_LINEAGE_RUNS) {
            set_err(err, errlen, "%s: lineage of cycle %d: already %d runs, the most a net records", run_dir, m->cycle,
                    TRAIN_LINEAGE_RUNS);
            return -1;
        }
        train_lineage_run_t *r = &l->r[l->n++];
        memset(r, 0, sizeof *r);
        r->cpu_minutes = NAN; /* 0 CPU and GPU so far unless said below */
    }
    train_lineage_run_t *r = &l->r[l->n - 1];
    snprintf(r->run, sizeof r->run, "%s", run_dir);
    snprintf(r->commit, sizeof r->commit, "%s", KOMA_GIT_COMMIT);
    r->cycle = m->cycle, r->steps = m->train_steps, r->samples = m->train_samples;
    /* koma.db's figure when it has one (it survives restarts), else this process's */
    double cpu = isnan(a.cpu_total) ? a.cpu_now : a.cpu_total;
    r->cpu_minutes = isnan(r->cpu_minutes) || cpu / 60 > r->cpu_minutes ? cpu / 60 : r->cpu_minutes;
    r->gpu_minutes = (isnan(r->gpu_minutes) ? 0 : r->gpu_minutes) + gpu_minutes_since_last_save(net);
    return 0;
}

int train_model_save_from(db_writer_t *w, const char *run_dir, nn_net_t *net, nn_optim_t *nt, db_model_t *m,
                          const train_lineage_t *anc, const atomic_int *stop, char *err, size_t errlen) {
    const nn_net_config_t *nc = nn_net_config(net);
    m->features_version = nc->features_version;
    train_model_rel_path(m->path, sizeof m->path, m->cycle);
    train_model_arch(nc, m->arch, sizeof m->arch);
    char path[1400], e2[1024];
    snprintf(path, sizeof path, "%s/" TRAIN_MODELS_DIR, run_dir);
    if (compat_mkdir_p(path, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s: %s", path, e2);
        return -1;
    }
    train_lineage_t *l = malloc(sizeof *l);
    char *text = malloc(TRAIN_LINEAGE_TEXT), num[64];
    const char *kv[7];
    int rc = l && text ? 0 : -1;
    if (rc) set_err(err, errlen, "%s: out of memory", run_dir);
    if (rc == 0) rc = lineage_stamp(w, run_dir, net, m, anc, stop, l, err, errlen);
    if (rc == 0) rc = train_lineage_meta(l, text, num, kv, err, errlen);
    snprintf(path, sizeof path, "%s/%s", run_dir, m->path);
    if (rc == 0) rc = nn_weights_save_meta(net, nt, kv, path, err, errlen);
    free(l);
    free(text);
    if (rc != 0) return -1;
    return train_model_register(w, run_dir, m, stop, err, errlen);
}

int train_model_save(db_writer_t *w, const char *run_dir, nn_net_t *net, nn_optim_t *nt, db_model_t *m,
                     const atomic_int *stop, char *err, size_t errlen) {
    return train_model_save_from(w, run_dir, net, nt, m, NULL, stop, err, errlen);
}

typedef struct {
    int32_t cycle;
    double train_s;
} train_s_arg_t;

static int train_s_run(db_t *db, void *arg, char *err, size_t errlen) {
    train_s_arg_t *a = arg;
    db_cycle_metrics_t m;
    db_status_t st = db_cycle_metrics_get_or_init(db, a->cycle, &m);
    if (st == DB_OK) {
        m.train_s = a->train_s;
        st = db_cycle_metrics_put(db, &m);
    }
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

int train_cycle_train_s(db_writer_t *w, int32_t cycle, double train_s, const atomic_int *stop, char *err,
                        size_t errlen) {
    train_s_arg_t a = {cycle, train_s};
    char e2[DB_ERR_MAX];
    int st = train_writer_call(w, train_s_run, &a, sizeof a, stop, e2, sizeof e2);
    if (st != DB_OK) {
        set_err(err, errlen, "cycle_metrics of cycle %d: %s", cycle, e2);
        return -1;
    }
    return 0;
}

/* ---- leftovers of killed writes ------------------------------------------------------ */
typedef struct {
    const char *dir;
    void (*note)(void *user, const char *path);
    void *user;
    int removed;
} stale_t;

static int stale_one(const char *name, int is_dir, void *arg) {
    stale_t *st = arg;
    const char *t = strstr(name, ".tmp.");
    if (is_dir || !t || t == name) return 0;
    for (const char *p = t + 5; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    if (!t[5]) return 0;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", st->dir, name);
    if (compat_remove_file(path) == 0) {
        st->removed++;
        if (st->note) st->note(st->user, path);
    }
    return 0;
}

int train_remove_stale_tmp(const char *dir, void (*note)(void *user, const char *path), void *user) {
    stale_t st = {dir, note, user, 0};
    char err[512];
    if (compat_list_dir(dir, stale_one, &st, err, sizeof err) != 0) return 0;
    return st.removed;
}
