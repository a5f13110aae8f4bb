/* test_import_sets.c - `import` of position files (hcpe, psv) as position sets, through the real program
 * (docs/DATA.md; issues 44 and 46):
 *   1. kill -9 in the middle of an import of many files: the same command again reads no committed file
 *      (finished files are skipped unread, the cut one resumes at its committed record) and the run ends
 *      with exactly the files' positions, no koma.db row per position, every set finished;
 *   2. duplicates are kept by default (as the field keeps them), --dedup 1 drops them;
 *   3. a file cut short while it is read: named, what was committed kept, exit 1, never a crash (SIGBUS);
 *   4. a file of another format (--format hcpe on a psv file) is refused whole, and a run this import
 *      created for nothing is removed again;
 *   5. one damaged candidate count in an hcpe3 file: the bytes not read are named and the exit status is 1.
 * The import holds after each committed chunk while KOMA_TEST_IMPORT_HOLD names a file (tools/import.c),
 * so every step acts at a known point: nothing waits for a time.
 */
#include "compat/compat.h"
#include "data/db.h"
#include "data/fmt_file.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "tests/koma_test.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KOMA_IMPORT_BIN
#define KOMA_IMPORT_BIN "import"
#endif

static char g_dir[1024];

/* n hcpe records of random playouts (seeded) into path; returns n. */
static int64_t write_hcpe(const char *path, int64_t n, uint64_t seed) {
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f);
    static pos_t pos;
    uint64_t s = seed;
    int64_t w = 0;
    while (w < n) {
        pos_set_startpos(&pos);
        for (int ply = 0; ply < 150 && w < n; ply++) {
            move_list_t ml;
            movegen_legal(&pos, &ml);
            if (ml.n == 0) break;
            move_t m = ml.moves[t_splitmix64(&s) % (uint64_t)ml.n];
            uint8_t rec[FMT_HCPE_BYTES];
            KOMA_ASSERT(fmt_hcpe_record(&pos, 0.1f, m, (uint8_t)(1 + ply % 2), rec) == 0);
            KOMA_ASSERT(fwrite(rec, 1, sizeof rec, f) == sizeof rec);
            w++;
            pos_do_move(&pos, m);
        }
    }
    fclose(f);
    return w;
}

/* Runs import with args (NULL-terminated) and its output into out (stdout + stderr). Returns the status. */
static int run_import(char *out, size_t outlen, const char *a0, ...) {
    const char *argv[64];
    int n = 0;
    argv[n++] = KOMA_IMPORT_BIN;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char log[1100], err[512];
    snprintf(log, sizeof log, "%s/import.log", g_dir);
    compat_remove_file(log);
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    KOMA_ASSERT(p);
    size_t used = 0;
    char line[2048];
    int32_t k;
    while ((k = compat_proc_read_line(p, line, sizeof line, -1)) != COMPAT_PROC_EOF)
        if (k >= 0 && used + (size_t)k + 2 < outlen) used += (size_t)snprintf(out + used, outlen - used, "%s\n", line);
    int status = -1;
    compat_proc_wait(p, -1, &status);
    compat_proc_free(p);
    size_t len = 0;
    char *e = compat_read_file(log, &len, err, sizeof err);
    if (e && used + len + 1 < outlen) memcpy(out + used, e, len + 1);
    free(e);
    return status;
}

static int64_t sql_int(const char *run, const char *sql) {
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) return -1;
    db_set_t *sets = NULL;
    int32_t n = 0;
    int64_t v = -1;
    if (strcmp(sql, "positions") == 0) {
        int64_t games = 0;
        if (db_count(db, -1, &games, &v) != DB_OK) v = -1;
    } else if (strcmp(sql, "games") == 0) {
        int64_t pos = 0;
        if (db_count(db, -1, &v, &pos) != DB_OK) v = -1;
    } else if (db_sets_list(db, &sets, &n) == DB_OK) {
        v = 0;
        for (int32_t i = 0; i < n; i++)
            v += strcmp(sql, "sets") == 0       ? 1
                 : strcmp(sql, "finished") == 0 ? sets[i].finished
                 : strcmp(sql, "set_positions") == 0 ? sets[i].positions
                                                     : 0;
    }
    free(sets);
    db_close(db);
    return v;
}

/* The count before `what` in a summary line, e.g. "12 file(s) already imported". */
static int64_t count_before(const char *out, const char *what) {
    const char *p = strstr(out, what);
    if (!p) return -1;
    while (p > out && p[-1] == ' ') p--;
    while (p > out && p[-1] >= '0' && p[-1] <= '9') p--;
    return strtoll(p, NULL, 10);
}

enum { FILES = 10, PER = 1800, CHUNK = 500 };

static void test_kill_resume(void) {
    char run[1100], dir[1100], hold[1100], out[1 << 16], err[512];
    snprintf(run, sizeof run, "%s/run_kill", g_dir);
    snprintf(dir, sizeof dir, "%s/in", g_dir);
    snprintf(hold, sizeof hold, "%s/hold", g_dir);
    KOMA_ASSERT(compat_mkdir_p(dir, err, sizeof err) == 0);
    int64_t total = 0;
    for (int i = 0; i < FILES; i++) {
        char f[1200];
        snprintf(f, sizeof f, "%s/part%02d.hcpe", dir, i);
        total += write_hcpe(f, PER, 1000 + (uint64_t)i);
    }
    /* the import, held after each chunk; killed at its 9th (file 3 of 10, its second chunk) */
    compat_setenv("KOMA_TEST_IMPORT_HOLD", hold);
    char rows[16];
    snprintf(rows, sizeof rows, "%d", CHUNK);
    const char *argv[] = {KOMA_IMPORT_BIN, "--run", run, "--shard-rows", rows, "--quiet", dir, NULL};
    compat_proc_t *p = compat_proc_spawn(argv, "", err, sizeof err);
    KOMA_ASSERT(p);
    int held = 0, status = 0;
    while (held < 9) {
        char *text = compat_file_exists(hold) ? t_read_file(hold, NULL) : NULL;
        long long n = text ? strtoll(text, NULL, 10) : 0; /* the import's Nth hold (0: written only in part) */
        free(text);
        if (n > held) held = (int)n;
        if (n > 0 && n < 9) { /* let it go on (again, if the removed file is still seen) */
            compat_remove_file(hold);
            continue;
        }
        if (n == 9) break;
        if (compat_proc_wait(p, 2, &status) == 0) break; /* ended early: a failure below */
    }
    CHECKF(held == 9, "the import held %d times before it ended", held);
    compat_proc_kill(p);
    compat_proc_wait(p, -1, &status);
    compat_proc_free(p);
    compat_remove_file(hold);
    compat_setenv("KOMA_TEST_IMPORT_HOLD", "");
    /* files 1 and 2 whole (4 chunks each: 500, 500, 500, 300), file 3's first chunk */
    const int64_t committed = 2 * PER + CHUNK;
    CHECKF(sql_int(run, "positions") == committed, "committed %lld when killed, want %lld",
           (long long)sql_int(run, "positions"), (long long)committed);
    int64_t finished_before = sql_int(run, "finished");
    CHECKF(finished_before == 2, "%lld sets finished when killed in file 3", (long long)finished_before);

    /* the same command again */
    int rc = run_import(out, sizeof out, "--run", run, "--shard-rows", rows, dir, NULL);
    CHECKF(rc == 0, "resumed import exit %d:\n%s", rc, out);
    CHECKF(sql_int(run, "positions") == total, "positions %lld, the files hold %lld", (long long)sql_int(run, "positions"),
           (long long)total);
    CHECK(sql_int(run, "set_positions") == total && sql_int(run, "sets") == FILES && sql_int(run, "finished") == FILES);
    CHECK(sql_int(run, "games") == 0); /* no koma.db row per position */
    int64_t skipped_files = count_before(out, "file(s) already imported");
    int64_t skipped_records = count_before(out, "record(s) committed earlier");
    int64_t read = count_before(out, "record(s) read into");
    CHECKF(skipped_files == 2 && skipped_records == CHUNK && read == total - committed,
           "resume: %lld files skipped, %lld records skipped, %lld read (want 2, %d, %lld):\n%s",
           (long long)skipped_files, (long long)skipped_records, (long long)read, CHUNK,
           (long long)(total - committed), out);
    /* once more: nothing is read at all */
    rc = run_import(out, sizeof out, "--run", run, dir, NULL);
    CHECK(rc == 0 && count_before(out, "file(s) already imported") == FILES && sql_int(run, "positions") == total);
}

static void test_dedup(void) {
    char run[1100], f[1100], out[1 << 16];
    snprintf(f, sizeof f, "%s/twice.hcpe", g_dir);
    int64_t n = write_hcpe(f, 300, 7);
    size_t len = 0;
    char *once = t_read_file(f, &len);
    FILE *fp = fopen(f, "ab");
    KOMA_ASSERT(once && fp && fwrite(once, 1, len, fp) == len);
    fclose(fp);
    free(once);
    snprintf(run, sizeof run, "%s/run_dup", g_dir);
    CHECK(run_import(out, sizeof out, "--run", run, f, NULL) == 0);
    CHECKF(sql_int(run, "positions") == 2 * n, "duplicates kept by default: %lld of %lld",
           (long long)sql_int(run, "positions"), (long long)(2 * n));
    snprintf(run, sizeof run, "%s/run_dedup", g_dir);
    CHECK(run_import(out, sizeof out, "--run", run, "--dedup", "1", f, NULL) == 0);
    CHECKF(sql_int(run, "positions") <= n, "--dedup 1: %lld of %lld", (long long)sql_int(run, "positions"), (long long)n);
}

static void test_cut_short(void) {
    char run[1100], f[1100], hold[1100], out[1 << 16], err[512];
    snprintf(f, sizeof f, "%s/shrinks.hcpe", g_dir);
    snprintf(hold, sizeof hold, "%s/hold2", g_dir);
    snprintf(run, sizeof run, "%s/run_cut", g_dir);
    write_hcpe(f, 3000, 9);
    compat_setenv("KOMA_TEST_IMPORT_HOLD", hold);
    const char *argv[] = {KOMA_IMPORT_BIN, "--run", run, "--shard-rows", "1000", f, NULL};
    char log[1100];
    snprintf(log, sizeof log, "%s/cut.log", g_dir);
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    KOMA_ASSERT(p);
    int status = -1;
    while (!compat_file_exists(hold))
        if (compat_proc_wait(p, 2, &status) == 0) break;
    CHECK(compat_file_exists(hold));
    /* the first chunk is committed; the file shrinks to 1,000 bytes under the import (in place: the same
     * file the import has open) */
    size_t len = 0;
    char *all = t_read_file(f, &len);
    FILE *fp = fopen(f, "wb");
    KOMA_ASSERT(all && fp && fwrite(all, 1, 1000, fp) == 1000);
    fclose(fp);
    free(all);
    compat_setenv("KOMA_TEST_IMPORT_HOLD", "");
    while (compat_proc_wait(p, 2, &status) != 0) /* let every later hold go (none is expected) */
        if (compat_file_exists(hold)) compat_remove_file(hold);
    compat_proc_free(p);
    char *text = compat_read_file(log, &len, err, sizeof err);
    CHECKF(status == 1 && text && strstr(text, f) && strstr(text, "changed while it was imported"),
           "a file cut short under the import: exit %d:\n%s", status, text ? text : "");
    free(text);
    CHECK(sql_int(run, "positions") == 1000); /* the committed chunk is kept */
    (void)out;
}

static void test_wrong_format(void) {
    char run[1100], out[1 << 16];
    snprintf(run, sizeof run, "%s/run_typo", g_dir);
    int rc = run_import(out, sizeof out, "--run", run, "--format", "hcpe",
                        KOMA_SOURCE_DIR "/tests/data/formats/games.psv", NULL);
    CHECKF(rc == 1 && strstr(out, "not hcpe data"), "psv as hcpe: exit %d:\n%s", rc, out);
    CHECKF(!compat_file_exists(run), "a run created for nothing stays: %s", run);
    rc = run_import(out, sizeof out, "--run", run, "/nonexistent/file.hcpe", NULL);
    CHECK(rc == 1 && !compat_file_exists(run));
}

static void test_hcpe3_damaged(void) {
    char run[1100], f[1100], out[1 << 16];
    size_t len = 0;
    uint8_t *d = (uint8_t *)t_read_file(KOMA_SOURCE_DIR "/tests/data/formats/games.hcpe3", &len);
    KOMA_ASSERT(d && len > 4096);
    /* the first game's first move's candidate count, high bit set: every later record is out of reach */
    d[FMT_HCPE3_HEAD + 5] |= 0x80;
    snprintf(f, sizeof f, "%s/damaged.hcpe3", g_dir);
    char err[256];
    KOMA_ASSERT(compat_write_file_durable(f, d, len, err, sizeof err) == 0);
    free(d);
    snprintf(run, sizeof run, "%s/run_h3", g_dir);
    int rc = run_import(out, sizeof out, "--run", run, f, NULL);
    CHECKF(rc == 1 && strstr(out, "are not read") && strstr(out, "bytes from byte"),
           "a damaged hcpe3 count: exit %d:\n%s", rc, out);
}

int main(void) {
    engine_init();
    snprintf(g_dir, sizeof g_dir, "%s", t_scratch("import_sets"));
    test_kill_resume();
    test_dedup();
    test_cut_short();
    test_wrong_format();
    test_hcpe3_damaged();
    t_rm_rf(g_dir);
    return t_done("test_import_sets");
}
