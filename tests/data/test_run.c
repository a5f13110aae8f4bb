/* test_run.c - data/run.c: the run directory's one writer and its start-up
 * checks. A second writer is refused and named while readers still open the
 * run; the lock goes with its holder; another program's koma.db is refused
 * before anything is written next to it; a lost (missing or empty) database
 * never becomes a new run over old models/ and shards/; unwritable
 * directories are found before any work; the newest model must be the file
 * koma.db registered (every model with RUN_VERIFY); a new run is made only in
 * a missing, empty or run-only directory that is no system root; outputs
 * never name a run's own files. The same checks through
 * the real programs: tests/selfplay/test_run_lock.c. */
#include "compat/compat.h"
#include "data/db.h"
#include "data/run.h"
#include "tests/koma_test.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static void write_text(const char *path, const char *text) {
    char e[256];
    if (compat_write_file_durable(path, text, strlen(text), e, sizeof e) != 0) {
        fprintf(stderr, "write %s: %s\n", path, e);
        exit(2);
    }
}

static void mkdirs(const char *path) {
    char e[256];
    if (compat_mkdir_p(path, e, sizeof e) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", path, e);
        exit(2);
    }
}

/* A run whose models rows (cycles 0..n-1) point at small files with the right XXH3. */
static void make_models(run_t *r, int32_t n) {
    for (int32_t c = 0; c < n; c++) {
        db_model_t m;
        memset(&m, 0, sizeof m);
        m.cycle = c;
        m.features_version = 1;
        snprintf(m.path, sizeof m.path, "models/%04d.safetensors", c);
        snprintf(m.arch, sizeof m.arch, "resnet1x8");
        char p[RUN_PATH_MAX], text[64];
        run_path(run_dir(r), m.path, p, sizeof p);
        snprintf(text, sizeof text, "net of cycle %d", c);
        write_text(p, text);
        uint64_t h;
        int64_t bytes;
        CHECK(db_file_xxh3(p, &h, &bytes, NULL, 0) == 0);
        snprintf(m.xxh3, sizeof m.xxh3, "%016" PRIx64, h);
        m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = 0;
        CHECK(db_model_insert(run_db(r), &m) == DB_OK);
    }
}

static void test_one_writer(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/one", base);
    run_t *a = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
    CHECKF(a != NULL, "a new run: %s", err);
    if (!a) return;
    CHECK(run_is_new(a));
    CHECK(run_db(a) != NULL);
    run_path(dir, RUN_MODELS, p, sizeof p);
    CHECK(compat_is_dir(p));
    run_path(dir, RUN_SHARDS, p, sizeof p);
    CHECK(compat_is_dir(p));

    /* A second writer, in this process or another, is refused at once and told who holds the run. */
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", compat_getpid());
    int64_t t0 = compat_now_ms();
    run_t *b = run_open(dir, RUN_WRITE, "train", err, sizeof err);
    CHECKF(b == NULL, "a second writer was let in");
    CHECKF(contains(err, "in use") && contains(err, pid) && contains(err, "selfplay"),
           "the refusal does not name the holder: %s", err);
    CHECKF(compat_now_ms() - t0 < 5000, "the refusal took %lld ms", (long long)(compat_now_ms() - t0));
    run_close(b);
    b = run_open(dir, RUN_WRITE | RUN_CREATE, "import", err, sizeof err);
    CHECK(b == NULL && contains(err, "in use"));
    run_close(b);

    /* Readers keep working. */
    run_t *rd = run_open(dir, 0, "inspect", err, sizeof err);
    CHECKF(rd != NULL, "a reader was refused: %s", err);
    CHECK(run_db(rd) == NULL);
    run_close(rd);

    /* The lock goes with its holder: the next writer gets it, and the run is not new to it. */
    run_close(a);
    b = run_open(dir, RUN_WRITE, "train", err, sizeof err);
    CHECKF(b != NULL, "after the holder closed: %s", err);
    CHECK(b && !run_is_new(b));
    run_close(b);
}

/* The lock file on its own: a holder's text for the refused, release, retake. */
static void test_lock_file(const char *base) {
    char path[700], holder[512], err[512];
    snprintf(path, sizeof path, "%s/lockfile", base);
    compat_lock_t *l1 = NULL, *l2 = NULL;
    CHECK(compat_lock_try(path, "pid 1 first\n", &l1, holder, sizeof holder, err, sizeof err) == 0 && l1);
    CHECK(compat_lock_try(path, "pid 2 second\n", &l2, holder, sizeof holder, err, sizeof err) == 1 && !l2);
    CHECKF(strcmp(holder, "pid 1 first\n") == 0, "holder text '%s'", holder);
    compat_lock_release(l1);
    CHECK(compat_lock_try(path, "pid 2 second\n", &l2, holder, sizeof holder, err, sizeof err) == 0 && l2);
    char *text = t_read_file(path, NULL);
    CHECKF(strcmp(text, "pid 2 second\n") == 0, "the new holder's text is '%s'", text);
    free(text);
    compat_lock_release(l2);
    snprintf(path, sizeof path, "%s/no/such/dir/lockfile", base);
    CHECK(compat_lock_try(path, "x", &l1, holder, sizeof holder, err, sizeof err) == -1 && contains(err, path));
}

/* models/ and shards/ of a run whose koma.db is gone: refused, nothing touched. */
static void test_lost_database(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX], db[RUN_PATH_MAX];
    for (int empty = 0; empty < 2; empty++) {
        snprintf(dir, sizeof dir, "%s/lost%d", base, empty);
        run_path(dir, "models", p, sizeof p);
        mkdirs(p);
        run_path(dir, "models/0001.safetensors", p, sizeof p);
        write_text(p, "the only copy of a trained net");
        run_path(dir, RUN_DB, db, sizeof db);
        if (empty) write_text(db, "");
        run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
        CHECKF(r == NULL, "a new run over an old one's models (%s koma.db)", empty ? "empty" : "no");
        CHECKF(contains(err, empty ? "koma.db is empty" : "koma.db is missing") && contains(err, "Restore koma.db") &&
                   contains(err, "models/ holds 1 file"),
               "message: %s", err);
        run_close(r);
        char *text = t_read_file(p, NULL);
        CHECKF(strcmp(text, "the only copy of a trained net") == 0, "models/0001.safetensors was changed");
        free(text);
        CHECKF(empty ? compat_file_size(db) == 0 : !compat_file_exists(db), "koma.db was %s",
               empty ? "written" : "created");
    }
    /* The same with only a shard. */
    snprintf(dir, sizeof dir, "%s/lost_shard", base);
    run_path(dir, "shards", p, sizeof p);
    mkdirs(p);
    run_path(dir, "shards/c0001_000001.safetensors", p, sizeof p);
    write_text(p, "games");
    run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "import", err, sizeof err);
    CHECKF(r == NULL && contains(err, "shards/ 1"), "a new run over old shards: %s", r ? "opened" : err);
    run_close(r);
    /* Without RUN_CREATE (train) a missing database is not a run at all. */
    snprintf(dir, sizeof dir, "%s/lost0", base);
    r = run_open(dir, RUN_WRITE, "train", err, sizeof err);
    CHECKF(r == NULL && contains(err, "not a Koma run directory"), "train on a lost run: %s", r ? "opened" : err);
    run_close(r);
    snprintf(dir, sizeof dir, "%s/nowhere", base);
    r = run_open(dir, RUN_WRITE, "train", err, sizeof err);
    CHECKF(r == NULL && contains(err, "no such run directory") && !compat_file_exists(dir), "train on nothing: %s",
           r ? "opened" : err);
    run_close(r);
}

/* Another program's file named koma.db: refused before a lock file, a log or a folder appears. */
static void test_foreign(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX];
    for (int kind = 0; kind < 2; kind++) {
        snprintf(dir, sizeof dir, "%s/foreign%d", base, kind);
        mkdirs(dir);
        run_path(dir, RUN_DB, p, sizeof p);
        if (kind == 0) {
            sqlite3 *sq = NULL;
            CHECK(sqlite3_open(p, &sq) == SQLITE_OK);
            CHECK(sqlite3_exec(sq, "CREATE TABLE photos(id INTEGER); INSERT INTO photos VALUES (1);", NULL, NULL,
                               NULL) == SQLITE_OK);
            sqlite3_close(sq);
        } else {
            write_text(p, "this is a text file, not a database, and it is long enough to have a header");
        }
        run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
        CHECKF(r == NULL, "a foreign koma.db was taken");
        CHECKF(contains(err, p) && contains(err, kind == 0 ? "not a Koma database" : "not a database"), "message: %s",
               err);
        run_close(r);
        const char *const never[] = {RUN_LOCK, RUN_LOG, RUN_MODELS, RUN_SHARDS};
        for (int i = 0; i < 4; i++) {
            run_path(dir, never[i], p, sizeof p);
            CHECKF(!compat_file_exists(p), "%s was created in a foreign directory", never[i]);
        }
    }
}

static void test_unwritable(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/unwritable", base);
    run_path(dir, RUN_MODELS, p, sizeof p);
    mkdirs(dir);
    write_text(p, "a file where the models folder should be");
    run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
    CHECKF(r == NULL && contains(err, "models") && contains(err, "not a directory"), "models/ is a file: %s",
           r ? "opened" : err);
    run_close(r);
    /* Permissions: meaningful only where they bind (not for root). */
    snprintf(dir, sizeof dir, "%s/readonly", base);
    run_path(dir, RUN_SHARDS, p, sizeof p);
    mkdirs(p);
    if (compat_set_readonly_dir(p, 1) == 0 && run_check_writable(p, NULL, 0) != 0) {
        r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
        CHECKF(r == NULL && contains(err, "shards") && contains(err, "not writable"), "read-only shards/: %s",
               r ? "opened" : err);
        run_close(r);
    } else {
        printf("  (read-only directories are writable here: running as root?)\n");
    }
    compat_set_readonly_dir(p, 0);
    CHECK(run_check_writable(base, err, sizeof err) == 0);
    /* No write-test file is left behind. */
    int32_t left = 0;
    run_path(base, ".koma-write-test.1", p, sizeof p);
    left += compat_file_exists(p);
    CHECK(left == 0);
}

static void test_model_hashes(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/hash", base);
    run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
    CHECKF(r != NULL, "%s", err);
    if (!r) return;
    make_models(r, 3);
    run_close(r);
    r = run_open(dir, RUN_WRITE, "selfplay", err, sizeof err);
    CHECKF(r != NULL && run_findings(r) == 0, "a clean run: %s", r ? run_finding(r, 0) : err);
    run_close(r);

    /* The newest model replaced by another valid file (an older net, copied over it). */
    char newest[RUN_PATH_MAX], older[RUN_PATH_MAX];
    run_path(dir, "models/0002.safetensors", newest, sizeof newest);
    run_path(dir, "models/0001.safetensors", older, sizeof older);
    char *keep = t_read_file(newest, NULL);
    char *one = t_read_file(older, NULL);
    write_text(newest, one);
    r = run_open(dir, RUN_WRITE, "selfplay", err, sizeof err);
    CHECKF(r == NULL && contains(err, "models/0002.safetensors") && contains(err, "does not match koma.db") &&
               contains(err, "newest model"),
           "a replaced newest model: %s", r ? "opened" : err);
    run_close(r);
    /* Readers are not stopped by it (koma falls back on its own). */
    r = run_open(dir, 0, "inspect", err, sizeof err);
    CHECK(r != NULL);
    run_close(r);
    write_text(newest, keep);

    /* An older model replaced: only RUN_VERIFY hashes it, and reports it without refusing. */
    write_text(older, "something else");
    r = run_open(dir, RUN_WRITE, "selfplay", err, sizeof err);
    CHECKF(r != NULL && run_findings(r) == 0, "without RUN_VERIFY the older models are not hashed");
    run_close(r);
    r = run_open(dir, RUN_WRITE | RUN_VERIFY, "selfplay", err, sizeof err);
    CHECKF(r != NULL, "%s", err);
    int found = 0;
    for (int32_t i = 0; r && i < run_findings(r); i++)
        found += contains(run_finding(r, i), "models/0001.safetensors") && contains(run_finding(r, i), "mismatch");
    CHECKF(found == 1, "RUN_VERIFY did not report the replaced models/0001.safetensors");
    run_close(r);
    /* A missing newest model. */
    compat_remove_file(newest);
    r = run_open(dir, RUN_WRITE, "selfplay", err, sizeof err);
    CHECKF(r == NULL && contains(err, "models/0002.safetensors"), "a missing newest model: %s", r ? "opened" : err);
    run_close(r);
    free(keep);
    free(one);
    /* run_verify_file on its own. */
    run_path(dir, "models/0000.safetensors", p, sizeof p);
    CHECK(run_verify_file(p, "", err, sizeof err) == 0);
    CHECK(run_verify_file(p, "0123456789abcdef", err, sizeof err) != 0 && contains(err, "0123456789abcdef"));
}

/* A damaged page: the writer refuses the run at start-up, before any work. */
static void test_damaged(const char *base) {
    char dir[700], err[2048], p[RUN_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/damaged", base);
    run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
    CHECKF(r != NULL, "%s", err);
    if (!r) return;
    make_models(r, 40); /* the models table over a few pages */
    run_close(r);
    run_path(dir, RUN_DB, p, sizeof p);
    sqlite3 *sq = NULL;
    int64_t root = 0, page = 4096;
    if (sqlite3_open(p, &sq) == SQLITE_OK) {
        sqlite3_stmt *s = NULL;
        sqlite3_exec(sq, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        if (sqlite3_prepare_v2(sq, "SELECT rootpage FROM sqlite_master WHERE name = 'models'", -1, &s, NULL) ==
                SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW)
            root = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        if (sqlite3_prepare_v2(sq, "PRAGMA page_size", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
            page = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(sq);
    CHECK(root > 1);
    FILE *f = fopen(p, "r+b");
    const unsigned char garbage[8] = {0x0d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
    CHECK(f && fseek(f, (long)((root - 1) * page), SEEK_SET) == 0 && fwrite(garbage, 1, 8, f) == 8);
    if (f) fclose(f);
    r = run_open(dir, RUN_WRITE, "selfplay", err, sizeof err);
    CHECKF(r == NULL && contains(err, "koma.db") && contains(err, "quick check") && !strchr(err, '\n'),
           "a damaged koma.db: %s", r ? "opened" : err);
    run_close(r);
}

static void test_paths(void) {
    char out[16];
    CHECK(run_path("runs/a", RUN_DB, out, sizeof out) == 0 && strcmp(out, "runs/a/koma.db") == 0);
    CHECK(run_path("runs/a", NULL, out, sizeof out) == 0 && strcmp(out, "runs/a") == 0);
    CHECK(run_path("runs/abcdef", RUN_DB, out, sizeof out) == -1 && out[0] == 0);
    char err[256];
    run_t *r = run_open("", RUN_WRITE, "x", err, sizeof err);
    CHECK(r == NULL && contains(err, "no run directory"));
}

/* Where a new run may be made (run_check_new_dir) and which outputs are a
 * run's own files (run_output_check), without the programs. */
static void test_new_dir_and_outputs(const char *base) {
    char err[1024], dir[700], p[900];
    /* system directories; nothing is written (only read) */
    CHECKF(run_check_new_dir("/", err, sizeof err) != 0 && contains(err, "system directory"), "/: %s", err);
    CHECK(run_check_new_dir("/usr", err, sizeof err) != 0 && run_check_new_dir("/etc/", err, sizeof err) != 0);
    snprintf(dir, sizeof dir, "%s/newdirs", base);
    CHECK(run_check_new_dir(dir, err, sizeof err) == 0); /* missing */
    mkdirs(dir);
    CHECK(run_check_new_dir(dir, err, sizeof err) == 0); /* empty */
    snprintf(p, sizeof p, "%s/models", dir);
    mkdirs(p);
    snprintf(p, sizeof p, "%s/log", dir);
    write_text(p, "a run's log\n");
    CHECK(run_check_new_dir(dir, err, sizeof err) == 0); /* only a run's names */
    snprintf(p, sizeof p, "%s/thesis.tex", dir);
    write_text(p, "mine\n");
    CHECKF(run_check_new_dir(dir, err, sizeof err) != 0 && contains(err, "thesis.tex"), "foreign file: %s", err);

    /* outputs: a run's files by name, through "..", and under its folders; other names are fine */
    snprintf(dir, sizeof dir, "%s/outrun", base);
    run_t *r = run_open(dir, RUN_WRITE | RUN_CREATE, "selfplay", err, sizeof err);
    CHECKF(r != NULL, "%s", err);
    run_close(r);
    snprintf(p, sizeof p, "%s/models/sub", dir);
    mkdirs(p);
    const char *refused[] = {"koma.db", "koma.db-wal", "koma.lock", "log", "report.html", "models/0007.safetensors",
                             "models/sub/../x", "shards/new.safetensors", "train/checkpoint.safetensors"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, refused[i]);
        CHECKF(run_output_check(p, NULL, "report", "-o", err, sizeof err) != 0 && contains(err, "refusing") &&
                   contains(err, "choose another -o"),
               "%s: %s", refused[i], err);
    }
    const char *fine[] = {"net.safetensors", "report.htm"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, fine[i]);
        CHECKF(run_output_check(p, dir, "report", "-o", err, sizeof err) == 0, "%s: %s", fine[i], err);
    }
    /* report.html: the run's report, written by `report RUN` alone: its own run's, not another's nor the log */
    snprintf(p, sizeof p, "%s/report.html", dir);
    CHECKF(run_output_check_own(p, dir, RUN_REPORT, "report", "-o", err, sizeof err) == 0, "own report: %s", err);
    CHECKF(run_output_check_own(p, NULL, RUN_REPORT, "report", "-o", err, sizeof err) != 0 &&
               contains(err, "it is the run's report"),
           "report.html with no run given: %s", err);
    CHECKF(run_output_check_own(p, base, RUN_REPORT, "report", "-o", err, sizeof err) != 0,
           "report.html of another run: %s", err);
    snprintf(p, sizeof p, "%s/log", dir);
    CHECKF(run_output_check_own(p, dir, RUN_REPORT, "report", "-o", err, sizeof err) != 0, "log as own: %s", err);
    snprintf(p, sizeof p, "%s/no/such/dir/x.html", base);
    CHECK(run_output_check(p, NULL, "report", "-o", err, sizeof err) != 0 && contains(err, "does not exist"));
}

int main(void) {
    const char *base = t_scratch("run");
    char b[512];
    snprintf(b, sizeof b, "%.400s", base);
    test_paths();
    test_lock_file(b);
    test_one_writer(b);
    test_lost_database(b);
    test_foreign(b);
    test_unwritable(b);
    test_model_hashes(b);
    test_damaged(b);
    test_new_dir_and_outputs(b);
    if (!atomic_load(&g_fail)) t_rm_rf(b);
    return t_done("test_run");
}
