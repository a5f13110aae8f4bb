/* model.c - model file names and registration through the writer. See model.h. */
#include "train/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "nn/weights.h"

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

int train_model_save(db_writer_t *w, const char *run_dir, nn_net_t *net, nn_optim_t *nt, db_model_t *m,
                     const atomic_int *stop, char *err, size_t errlen) {
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
    snprintf(path, sizeof path, "%s/%s", run_dir, m->path);
    if (nn_weights_save(net, nt, path, err, errlen) != 0) return -1;
    return train_model_register(w, run_dir, m, stop, err, errlen);
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
