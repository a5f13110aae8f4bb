/* test_run_outputs.c - what the real programs may write, and where
 * (issue 30.1, 31.6, 31.7), driving train, report, selfplay and import:
 *  - an output path (train --out and --losses, report -o) never replaces a
 *    run's file: the run's koma.db (also spelt R/./koma.db, through a
 *    symbolic link or a hard link), its -wal, a shard, a model; nor a FIFO,
 *    a device node (as root) or a directory. Each is refused with a message
 *    that names the path and the flag, and the run's files stay byte for
 *    byte what they were;
 *  - a new run is never made in a directory holding unrelated files nor in
 *    $HOME; train on a folder that is no run leaves it untouched (no
 *    koma.lock);
 *  - a train that fails (no positions; --train-backend cuda without a GPU)
 *    writes nothing: no runs row, no train/, no models/0000;
 *  - train without --net continues from the run's newest net (its size),
 *    and a different size is taken only from an explicit --net, said so;
 *  - a read-only run (a read-only bind mount as root where mount is
 *    allowed, else permissions): report, inspect and koma (Net = the run)
 *    read it; train, import and selfplay refuse, naming the read-only file
 *    system or the permissions.
 * The run is made by `import` from tests/data/records.
 *
 *   (binaries: KOMA_TRAIN_BIN, KOMA_REPORT_BIN, KOMA_SELFPLAY_BIN, KOMA_IMPORT_BIN)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "tests/koma_test.h"
#include "tests/run_prog.h"

#if !defined(KOMA_TRAIN_BIN) || !defined(KOMA_REPORT_BIN) || !defined(KOMA_SELFPLAY_BIN) || !defined(KOMA_IMPORT_BIN)
#error "the paths of train, report, selfplay and import (tests/train/CMakeLists.txt)"
#endif

/* The whole file, for byte-for-byte comparisons. */
typedef struct {
    char *data;
    size_t len;
} snap_t;

static snap_t snap(const char *path) {
    snap_t s;
    s.data = t_read_file(path, &s.len);
    return s;
}

static int same(const char *path, const snap_t *s) {
    size_t len;
    char *now = t_read_file(path, &len);
    int r = len == s->len && memcmp(now, s->data, len) == 0;
    free(now);
    return r;
}

static int is_regular(const char *path) { return compat_check_regular_file(path, NULL, 0) == 0; }

static int sh(const char *a0, const char *a1, const char *a2, const char *a3, const char *a4, const char *a5) {
    const char *argv[] = {a0, a1, a2, a3, a4, a5, NULL};
    int status = -1;
    return compat_run_io(argv, "", "", &status, NULL, 0) == 0 ? status : -1;
}

/* Entries of a directory (0 when missing). */
static int count_entry(const char *name, int is_dir, void *user) {
    (void)name, (void)is_dir;
    (*(int *)user)++;
    return 0;
}
static int entries(const char *dir) {
    int n = 0;
    if (compat_is_dir(dir)) compat_list_dir(dir, count_entry, &n, NULL, 0);
    return n;
}

static int64_t runs_rows(const char *run) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) return -1;
    db_summary_t s;
    int64_t n = db_summary(db, &s) == DB_OK ? s.runs : -1;
    db_close(db);
    return n;
}

/* The newest model's architecture ("" when none). */
static void newest_arch(const char *run, char *arch, size_t len, int32_t *cycle) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", run);
    arch[0] = 0;
    *cycle = -1;
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) return;
    db_model_t m;
    if (db_model_latest(db, &m) == DB_OK) snprintf(arch, len, "%s", m.arch), *cycle = m.cycle;
    db_close(db);
}

#define TINY "--batch", "16", "--train-threads", "1", "--progress", "0"

/* ---- 30.1: outputs ---------------------------------------------------------------------------- */
static void test_outputs(const char *R) {
    char db[1000], shard[1000], model[1000], path[1000];
    snprintf(db, sizeof db, "%s/koma.db", R);
    /* a model to protect: cycles 0 and 1 of a 1x16 net */
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--net", "1x16", "--steps", "2", TINY, NULL) == 0);
    snprintf(model, sizeof model, "%s/models/0001.safetensors", R);
    CHECK(is_regular(model));
    snprintf(shard, sizeof shard, "%s/shards", R);
    int n_shards = entries(shard);
    CHECK(n_shards >= 1);
    snap_t sdb = snap(db), smodel = snap(model);

    /* train --out and --losses onto the database, however it is spelt */
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--out", db, TINY, NULL) == 1);
    CHECK(has(g_err, "refusing to write the final net to") && has(g_err, "it is the run's database") &&
          has(g_err, "choose another --out"));
    CHECK(same(db, &sdb));
    snprintf(path, sizeof path, "%s/./koma.db", R);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--losses", path, TINY, NULL) == 1);
    CHECK(has(g_err, "refusing to write the losses to") && has(g_err, "choose another --losses"));
    CHECK(same(db, &sdb));
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--out", model, TINY, NULL) == 1);
    CHECK(has(g_err, "it is in the run's models/"));
    CHECK(same(model, &smodel));

    /* report -o onto the database: directly, through ./, a symbolic link, a hard link; its -wal; a shard */
    CHECK(run(KOMA_REPORT_BIN, R, "-o", db, NULL) == 1);
    CHECK(has(g_err, "refusing to write report to") && has(g_err, "it is the run's database (") &&
          has(g_err, "choose another -o"));
    CHECK(same(db, &sdb));
    CHECK(run(KOMA_REPORT_BIN, R, "-o", path, NULL) == 1 && same(db, &sdb));
    const char *sym = t_path("link.db"), *hard = t_path("hard.db");
    if (sh("ln", "-s", db, sym, NULL, NULL) == 0) {
        CHECK(run(KOMA_REPORT_BIN, R, "-o", sym, NULL) == 1 && has(g_err, "it is the run's database"));
        CHECK(same(db, &sdb));
    }
    if (sh("ln", db, hard, NULL, NULL, NULL) == 0) {
        CHECK(run(KOMA_REPORT_BIN, R, "-o", hard, NULL) == 1 && has(g_err, "it is a hard link to the run's file"));
        CHECK(same(db, &sdb));
        compat_remove_file(hard);
    }
    snprintf(path, sizeof path, "%s/koma.db-wal", R);
    CHECK(run(KOMA_REPORT_BIN, R, "-o", path, NULL) == 1 && has(g_err, "SQLite's write-ahead log"));
    CHECK(!compat_file_exists(path));
    snprintf(path, sizeof path, "%s/shards/report.html", R);
    CHECK(run(KOMA_REPORT_BIN, R, "-o", path, NULL) == 1 && has(g_err, "it is in the run's shards/"));
    CHECK(!compat_file_exists(path) && entries(shard) == n_shards);
    /* the same run seen from another run's report: still the run's database */
    CHECK(run(KOMA_REPORT_BIN, "--db", db, "-o", db, NULL) == 1 && same(db, &sdb));

    /* not regular files: a FIFO, a device node (root), a directory */
    const char *fifo = t_path("out.fifo");
    if (sh("mkfifo", fifo, NULL, NULL, NULL, NULL) == 0) {
        CHECK(run(KOMA_REPORT_BIN, R, "-o", fifo, NULL) == 1 && has(g_err, "not a regular file"));
        CHECK(!is_regular(fifo)); /* still the FIFO */
        CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--out", fifo, TINY, NULL) == 1);
        CHECK(!is_regular(fifo));
    }
    const char *dev = t_path("null.dev");
    if (sh("mknod", dev, "c", "1", "3", NULL) == 0) { /* a copy of /dev/null: root only */
        CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--out", dev, TINY, NULL) == 1);
        CHECK(has(g_err, "not a regular file") && !is_regular(dev));
        CHECK(run(KOMA_REPORT_BIN, R, "-o", dev, NULL) == 1 && !is_regular(dev));
    } else {
        printf("mknod not permitted: the device-node case is left to root\n");
    }
    CHECK(run(KOMA_REPORT_BIN, R, "-o", t_dir, NULL) == 1 && has(g_err, "it is a directory"));

    /* what is allowed still works: the report in the run's folder, a net and losses elsewhere */
    CHECK(run(KOMA_REPORT_BIN, R, NULL) == 0);
    const char *net = t_path("net.safetensors"), *losses = t_path("losses.csv");
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "3", "--out", net, "--losses", losses, TINY,
              NULL) == 0);
    CHECK(is_regular(net) && has(losses, "step,loss,policy"));
    CHECK(same(model, &smodel));
    free(sdb.data);
    free(smodel.data);
}

/* ---- 30.1: run directories; 31.7: a failed train leaves nothing -------------------------------- */
static void test_run_dirs(void) {
    /* unrelated files: neither selfplay nor import makes a run there */
    const char *G = t_path("notes");
    char notes[1000];
    KOMA_ASSERT(compat_mkdir_p(G, NULL, 0) == 0);
    snprintf(notes, sizeof notes, "%s/notes.txt", G);
    FILE *f = fopen(notes, "w");
    KOMA_ASSERT(f && fputs("mine\n", f) >= 0 && fclose(f) == 0);
    CHECK(run(KOMA_SELFPLAY_BIN, "--run", G, "--cycles", "1", "--games-per-cycle", "2", "--visits", "2", NULL) != 0);
    CHECK(has(g_err, "refusing to make a new run here") && has(g_err, "notes.txt"));
    CHECK(entries(G) == 1);
    CHECK(run(KOMA_IMPORT_BIN, "--run", G, KOMA_SOURCE_DIR "/tests/data/records/game1.csa", NULL) == 1);
    CHECK(entries(G) == 1);

    /* $HOME itself (an empty one, so only the home rule can refuse it) */
    const char *H = t_path("home");
    KOMA_ASSERT(compat_mkdir_p(H, NULL, 0) == 0);
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    compat_setenv("HOME", H);
    CHECK(run(KOMA_IMPORT_BIN, "--run", H, KOMA_SOURCE_DIR "/tests/data/records/game1.csa", NULL) == 1);
    CHECK(has(g_err, "your home directory") && entries(H) == 0);
    compat_setenv("HOME", old_home);
    free(old_home);

    /* train on an empty folder: not a run, and no koma.lock left in it */
    const char *E = t_path("empty");
    KOMA_ASSERT(compat_mkdir_p(E, NULL, 0) == 0);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", E, "--steps", "2", TINY, NULL) == 1);
    CHECK(has(g_err, "not a Koma run directory") && entries(E) == 0);

    /* a run with no positions: train fails before writing anything */
    const char *N = t_path("nopos");
    char p[1000], err[1024];
    KOMA_ASSERT(compat_mkdir_p(N, NULL, 0) == 0);
    snprintf(p, sizeof p, "%s/koma.db", N);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(p, 0, &db, err, sizeof err) == DB_OK);
    db_close(db);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", N, "--steps", "2", "--net", "1x16", TINY, NULL) == 1);
    CHECK(has(g_err, "no positions to train on"));
    snprintf(p, sizeof p, "%s/train", N);
    CHECK(!compat_is_dir(p));
    snprintf(p, sizeof p, "%s/models/0000.safetensors", N);
    CHECK(!compat_file_exists(p));
    CHECK(runs_rows(N) == 0);
}

/* 31.7: no GPU with --train-backend cuda: nothing written either (skipped where a GPU answers) */
static void test_no_gpu(const char *R) {
    int64_t before = runs_rows(R);
    char arch[64];
    int32_t c0, c1;
    newest_arch(R, arch, sizeof arch, &c0);
    int rc = run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "2", "--fresh", "--train-backend", "cuda",
                 "--out", t_path("gpu.safetensors"), TINY, NULL);
    if (rc == 0) {
        printf("a CUDA device answered: the no-GPU case is not tested here\n");
        return;
    }
    CHECK(rc == 1);
    newest_arch(R, arch, sizeof arch, &c1);
    CHECK(runs_rows(R) == before && c1 == c0 && !compat_file_exists(t_path("gpu.safetensors")));
}

/* ---- 31.6: train continues from the run's net ------------------------------------------------- */
static void test_continue(void) {
    char arch[64], ck[1000], R[900];
    int32_t c0, c1;
    snprintf(R, sizeof R, "%s", t_path("cont")); /* a run of its own: one whose newest net is 1x16 */
    CHECK(run(KOMA_IMPORT_BIN, "--run", R, KOMA_SOURCE_DIR "/tests/data/records/game1.csa", NULL) == 0);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--net", "1x16", "--steps", "2", TINY, NULL) == 0);
    snprintf(ck, sizeof ck, "%s/train/checkpoint.safetensors", R);
    newest_arch(R, arch, sizeof arch, &c0);
    CHECK(strstr(arch, "1x16") != NULL);
    /* no --net, no checkpoint: the newest net, its size (6x64 is train's default for a new run) */
    compat_remove_file(ck);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "2", TINY, NULL) == 0);
    CHECK(has(g_out, "continuing from the run's newest net"));
    newest_arch(R, arch, sizeof arch, &c1);
    CHECKF(strstr(arch, "1x16") && c1 == c0 + 1, "after train without --net: cycle %d, %s", c1, arch);
    /* --fresh without --net: a new net of the run's size */
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "2", "--fresh", TINY, NULL) == 0);
    newest_arch(R, arch, sizeof arch, &c1);
    CHECKF(strstr(arch, "1x16") != NULL, "after --fresh: %s", arch);
    /* an explicit other size: taken, and said so */
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "2", "--fresh", "--net", "2x16", TINY, NULL) == 0);
    CHECK(has(g_out, "starting a new architecture"));
    newest_arch(R, arch, sizeof arch, &c1);
    CHECKF(strstr(arch, "2x16") != NULL, "after --net 2x16: %s", arch);
}

/* ---- 30.6: a read-only run -------------------------------------------------------------------- */
/* Makes dir read-only: a read-only bind mount of src on dir where mount is
 * allowed (root), else permissions (not root). 1 mounted, 2 by permissions,
 * 0 when neither can stop root writing here. */
static int make_readonly(const char *src, const char *dir) {
    KOMA_ASSERT(compat_mkdir_p(dir, NULL, 0) == 0);
    if (sh("mount", "--bind", src, dir, NULL, NULL) == 0) {
        if (sh("mount", "-o", "remount,bind,ro", dir, NULL, NULL) == 0 && compat_fs_readonly(dir)) return 1;
        sh("umount", dir, NULL, NULL, NULL, NULL);
    }
    if (sh("chmod", "-R", "a-w", src, NULL, NULL) != 0) return 0;
    char probe[1000];
    snprintf(probe, sizeof probe, "%s/probe", src);
    FILE *f = fopen(probe, "w"); /* root writes anyway */
    if (f) {
        fclose(f);
        compat_remove_file(probe);
        sh("chmod", "-R", "u+w", src, NULL, NULL);
        return 0;
    }
    KOMA_ASSERT(compat_remove_dir(dir) == 0);
    return 2;
}

static void test_readonly(void) {
    char src[900], R[900];
    snprintf(src, sizeof src, "%s", t_path("ro_src"));
    CHECK(run(KOMA_IMPORT_BIN, "--run", src, KOMA_SOURCE_DIR "/tests/data/records/game1.csa", NULL) == 0);
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", src, "--net", "1x16", "--steps", "2", TINY, NULL) == 0);
    snprintf(R, sizeof R, "%s", t_path("ro"));
    int how = make_readonly(src, R);
    if (!how) {
        printf("read-only run: neither a read-only mount nor permissions can be made here: not tested\n");
        return;
    }
    if (how == 2) snprintf(R, sizeof R, "%s", src);
    printf("read-only run: %s\n", how == 1 ? "a read-only bind mount" : "permissions (chmod -R a-w)");
    char db[1000];
    snprintf(db, sizeof db, "%s/koma.db", R);
    snap_t sdb = snap(db);
    /* readers read it */
    CHECK(run(KOMA_REPORT_BIN, R, "-o", t_path("ro.html"), NULL) == 0 && has(g_out, "2 models"));
#ifdef KOMA_INSPECT_BIN
    CHECK(run(KOMA_INSPECT_BIN, R, NULL) == 0 && has(g_out, "import_000001"));
#endif
#ifdef KOMA_BIN
    {
        char err[256], line[4096];
        const char *argv[] = {KOMA_BIN, NULL};
        compat_proc_t *p = compat_proc_spawn(argv, "", err, sizeof err);
        CHECK(p != NULL);
        int ready = 0, loaded = 0;
        if (p) {
            char set[1200];
            snprintf(set, sizeof set, "setoption name Net value %s", R);
            compat_proc_write_line(p, "usi");
            compat_proc_write_line(p, set);
            compat_proc_write_line(p, "isready");
            int32_t n;
            while ((n = compat_proc_read_line(p, line, sizeof line, 60000)) >= 0) {
                if (strstr(line, "models/0001.safetensors")) loaded = 1;
                if (!strcmp(line, "readyok")) {
                    ready = 1;
                    break;
                }
            }
            compat_proc_write_line(p, "quit");
            compat_proc_wait(p, 10000, NULL);
            compat_proc_free(p);
        }
        CHECKF(ready && loaded, "koma with Net = a read-only run: readyok %d, its newest net loaded %d", ready, loaded);
    }
#endif
    /* writers refuse, naming why */
    const char *why = how == 1 ? "read-only file system" : "cannot write";
    CHECK(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "2", TINY, NULL) == 1 && has(g_err, why));
    CHECK(run(KOMA_IMPORT_BIN, "--run", R, KOMA_SOURCE_DIR "/tests/data/records/game1.kif", NULL) == 1 &&
          has(g_err, why));
    CHECK(run(KOMA_SELFPLAY_BIN, "--run", R, "--cycles", "1", NULL) != 0 && has(g_err, why));
    CHECK(same(db, &sdb));
    free(sdb.data);
    if (how == 1) CHECK(sh("umount", R, NULL, NULL, NULL, NULL) == 0);
    else sh("chmod", "-R", "u+w", src, NULL, NULL);
}

int main(void) {
    t_scratch("run_outputs");
    snprintf(g_out, sizeof g_out, "%s", t_path("stdout.txt"));
    snprintf(g_err, sizeof g_err, "%s", t_path("stderr.txt"));
    char R[900];
    snprintf(R, sizeof R, "%s", t_path("run"));
    CHECK(run(KOMA_IMPORT_BIN, "--run", R, KOMA_SOURCE_DIR "/tests/data/records/game1.csa",
              KOMA_SOURCE_DIR "/tests/data/records/game1.kif", NULL) == 0);
    test_outputs(R);
    test_run_dirs();
    test_no_gpu(R);
    test_continue();
    test_readonly();
    int rc = t_done("test_run_outputs");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
