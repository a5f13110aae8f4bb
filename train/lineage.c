/* lineage.c - the koma.lineage metadata of a model file (see lineage.h).
 *
 * Owns: parsing (cJSON; every field checked), formatting, the totals, and
 * resolving `--init FROM` to a model file, its counters and its ancestors.
 * Does not own: writing the file (train/model.c), SQL (data/db.c).
 */
#include "train/lineage.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "data/db.h"
#include "data/run.h"
#include "nn/weights.h"

static int bad(const char *path, const char *what, char *err, size_t errlen) {
    set_err(err, errlen, "%s: metadata 'koma.lineage' %s", path, what);
    return -1;
}

static int get_int(const cJSON *o, const char *k, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -1 && v->valuedouble <= 9e15)) return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* A figure in minutes: a number >= 0, or null (unknown: NAN). */
static int get_minutes(const cJSON *o, const char *k, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e12)) return -1;
    *out = v->valuedouble;
    return 0;
}

static int get_str(const cJSON *o, const char *k, char *out, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= len) return -1;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

int train_lineage_read(const char *path, train_lineage_t *l, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    char *text = malloc(TRAIN_LINEAGE_TEXT);
    if (!text) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = nn_weights_meta(path, "koma.lineage", text, TRAIN_LINEAGE_TEXT, err, errlen);
    if (rc != 0) {
        free(text);
        return rc < 0 ? -1 : 0; /* 1: no lineage */
    }
    cJSON *a = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(a);
        return bad(path, "is not a JSON array", err, errlen);
    }
    int32_t n = cJSON_GetArraySize(a);
    if (n > TRAIN_LINEAGE_RUNS) {
        cJSON_Delete(a);
        set_err(err, errlen, "%s: metadata 'koma.lineage' names %d runs, more than %d", path, (int)n,
                TRAIN_LINEAGE_RUNS);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(a, i);
        train_lineage_run_t *r = &l->r[i];
        if (!cJSON_IsObject(o) || get_str(o, "run", r->run, sizeof r->run) ||
            get_str(o, "commit", r->commit, sizeof r->commit) || get_int(o, "cycle", &r->cycle) ||
            get_int(o, "steps", &r->steps) || get_int(o, "samples", &r->samples) ||
            get_minutes(o, "cpu_minutes", &r->cpu_minutes) || get_minutes(o, "gpu_minutes", &r->gpu_minutes)) {
            cJSON_Delete(a);
            char what[96];
            snprintf(what, sizeof what,
                     "entry %d is not {run, commit, cycle, steps, samples, cpu_minutes, "
                     "gpu_minutes}",
                     (int)i);
            return bad(path, what, err, errlen);
        }
    }
    l->n = n;
    cJSON_Delete(a);
    return 0;
}

double train_lineage_cpu_minutes(const train_lineage_t *l) {
    double s = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (!isnan(l->r[i].cpu_minutes)) s += l->r[i].cpu_minutes;
    return s;
}

double train_lineage_gpu_minutes(const train_lineage_t *l) {
    double s = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (!isnan(l->r[i].gpu_minutes)) s += l->r[i].gpu_minutes;
    return s;
}

static void put_minutes(cJSON *o, const char *k, double v) {
    if (isnan(v)) cJSON_AddNullToObject(o, k);
    else cJSON_AddNumberToObject(o, k, round(v * 1000) / 1000); /* to the 60 ms: readable, and enough */
}

int train_lineage_meta(const train_lineage_t *l, char *text, char *num, const char *kv[7], char *err, size_t errlen) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < l->n; i++) {
        const train_lineage_run_t *r = &l->r[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "run", r->run);
        cJSON_AddStringToObject(o, "commit", r->commit);
        cJSON_AddNumberToObject(o, "cycle", (double)r->cycle);
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "samples", (double)r->samples);
        put_minutes(o, "cpu_minutes", r->cpu_minutes);
        put_minutes(o, "gpu_minutes", r->gpu_minutes);
        cJSON_AddItemToArray(a, o);
    }
    int ok = a && cJSON_PrintPreallocated(a, text, TRAIN_LINEAGE_TEXT - 5, 0);
    cJSON_Delete(a);
    if (!ok) {
        set_err(err, errlen, "koma.lineage of %d runs does not fit in %d bytes", (int)l->n, TRAIN_LINEAGE_TEXT);
        return -1;
    }
    /* the totals as written, the sums of the rounded figures */
    train_lineage_t rounded = *l;
    for (int32_t i = 0; i < l->n; i++) {
        train_lineage_run_t *r = &rounded.r[i];
        if (!isnan(r->cpu_minutes)) r->cpu_minutes = round(r->cpu_minutes * 1000) / 1000;
        if (!isnan(r->gpu_minutes)) r->gpu_minutes = round(r->gpu_minutes * 1000) / 1000;
    }
    snprintf(num, 32, "%.3f", train_lineage_cpu_minutes(&rounded));
    snprintf(num + 32, 32, "%.3f", train_lineage_gpu_minutes(&rounded));
    kv[0] = "koma.lineage", kv[1] = text;
    kv[2] = "koma.lineage.cpu_minutes", kv[3] = num;
    kv[4] = "koma.lineage.gpu_minutes", kv[5] = num + 32;
    kv[6] = NULL;
    return 0;
}

/* ---- --init FROM ---------------------------------------------------------------- */
/* FROM a run directory: its newest registered model. */
static int from_run(const char *from, char *model, size_t model_len, int64_t *steps, int64_t *samples,
                    train_lineage_t *anc, char *err, size_t errlen) {
    char dbp[1400], e2[1024];
    run_path(from, RUN_DB, dbp, sizeof dbp);
    if (!compat_file_exists(dbp)) {
        set_err(err, errlen, "--init %s: a directory without koma.db is not a run", from);
        return -1;
    }
    db_t *db = NULL;
    if (db_open(dbp, DB_OPEN_READONLY, &db, e2, sizeof e2) != DB_OK) {
        set_err(err, errlen, "--init %s: %s", from, e2);
        return -1;
    }
    db_model_t row;
    db_status_t st = db_model_latest(db, &row);
    if (st != DB_OK) {
        set_err(err, errlen, "--init %s: %s", from, st == DB_NOTFOUND ? "the run has no model yet" : db_errmsg(db));
        db_close(db);
        return -1;
    }
    db_close(db);
    if (run_path(from, row.path, model, model_len) != 0) {
        set_err(err, errlen, "--init %s: path of %s too long", from, row.path);
        return -1;
    }
    if (run_verify_file(model, row.xxh3, e2, sizeof e2) != 0) {
        set_err(err, errlen, "--init %s: newest model: %s", from, e2);
        return -1;
    }
    *steps = row.train_steps;
    *samples = row.train_samples;
    if (train_lineage_read(model, anc, err, errlen) != 0) return -1;
    if (anc->n == 0) { /* a net of an older Koma: its run as koma.db describes it */
        train_lineage_run_t *r = &anc->r[anc->n++];
        snprintf(r->run, sizeof r->run, "%s", from);
        snprintf(r->commit, sizeof r->commit, "unknown");
        r->cpu_minutes = isnan(row.cpu_seconds) ? NAN : row.cpu_seconds / 60;
        r->gpu_minutes = NAN;
    }
    train_lineage_run_t *r = &anc->r[anc->n - 1];
    r->cycle = row.cycle, r->steps = row.train_steps, r->samples = row.train_samples;
    return 0;
}

/* FROM a net file: its own lineage, or what its koma.shipped.* metadata says. */
static int from_file(const char *from, char *model, size_t model_len, int64_t *steps, int64_t *samples,
                     train_lineage_t *anc, char *err, size_t errlen) {
    char e2[1024];
    if (strlen(from) >= model_len) {
        set_err(err, errlen, "--init %s: path too long", from);
        return -1;
    }
    snprintf(model, model_len, "%s", from);
    if (nn_weights_check(from, -1, e2, sizeof e2) != 0) {
        set_err(err, errlen, "--init %s", e2);
        return -1;
    }
    if (train_lineage_read(from, anc, err, errlen) != 0) return -1;
    *steps = *samples = 0;
    if (anc->n > 0) {
        *steps = anc->r[anc->n - 1].steps;
        *samples = anc->r[anc->n - 1].samples;
        return 0;
    }
    train_lineage_run_t *r = &anc->r[anc->n++];
    char v[1024];
    snprintf(r->run, sizeof r->run, "%s", from);
    /* a shipped net (tools/ship_net.c): the run its command names */
    const char *rf =
        nn_weights_meta(from, "koma.shipped.command", v, sizeof v, e2, sizeof e2) == 0 ? strstr(v, "--run ") : NULL;
    if (rf) {
        rf += 6;
        int len = (int)strcspn(rf, " \t");
        snprintf(r->run, sizeof r->run, "%.*s (shipped as %.300s)", len < 200 ? len : 200, rf, from);
    }
    snprintf(r->commit, sizeof r->commit, "unknown");
    if (nn_weights_meta(from, "koma.shipped.commit", v, sizeof v, e2, sizeof e2) == 0)
        snprintf(r->commit, sizeof r->commit, "%.63s", v);
    r->cycle = -1;
    if (nn_weights_meta(from, "koma.shipped.cycle", v, sizeof v, e2, sizeof e2) == 0) r->cycle = strtoll(v, NULL, 10);
    r->cpu_minutes = r->gpu_minutes = NAN;
    if (nn_weights_meta(from, "koma.shipped.cpu_minutes", v, sizeof v, e2, sizeof e2) == 0) {
        char *end = NULL;
        double m = strtod(v, &end);
        if (end != v && m >= 0) r->cpu_minutes = m;
    }
    r->steps = -1; /* set by the caller from the file's optimizer step */
    return 0;
}

int train_lineage_from(const char *from, char *model, size_t model_len, int64_t *steps, int64_t *samples,
                       train_lineage_t *anc, char *err, size_t errlen) {
    memset(anc, 0, sizeof *anc);
    if (!from || !from[0]) {
        set_err(err, errlen, "--init: no run directory or net file given");
        return -1;
    }
    if (compat_is_dir(from)) return from_run(from, model, model_len, steps, samples, anc, err, errlen);
    if (!compat_file_exists(from)) {
        set_err(err, errlen, "--init %s: no such run directory or net file", from);
        return -1;
    }
    return from_file(from, model, model_len, steps, samples, anc, err, errlen);
}

int64_t train_lineage_clock_ns(void) {
    static _Atomic int64_t t0 = 0;
    int64_t now = compat_now_ns(), zero = 0;
    atomic_compare_exchange_strong(&t0, &zero, now);
    return now - atomic_load(&t0);
}
