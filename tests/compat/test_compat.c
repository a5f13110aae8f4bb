/* test_compat.c - compat/ layer: durable writes, mapping, threads, clock,
 * aligned memory, directory listing, rename, rm -rf, running a program,
 * a child on pipes (lines, end of input), environment, temp dir. */
#include "compat/compat.h"
#include "tests/koma_test.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    compat_mutex_t mu;
    compat_cond_t cv;
    int counter;
    atomic_int ready;
} shared_t;

static void *worker(void *arg) {
    shared_t *s = arg;
    for (int i = 0; i < 100000; i++) {
        compat_mutex_lock(&s->mu);
        s->counter++;
        compat_mutex_unlock(&s->mu);
    }
    compat_mutex_lock(&s->mu);
    atomic_fetch_add(&s->ready, 1);
    compat_cond_broadcast(&s->cv);
    compat_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- compat_list_dir ------------------------------------------------------ */
typedef struct {
    char names[16][32];
    int is_dir[16];
    int n;
    int stop_after; /* return 7 after this many calls (0: never) */
    const char *dir; /* when set, remove each listed file while walking */
} listing_t;

static int collect(const char *name, int is_dir, void *user) {
    listing_t *l = user;
    if (l->n < 16) {
        snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
        l->is_dir[l->n] = is_dir;
    }
    l->n++;
    if (l->dir && !is_dir) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", l->dir, name);
        CHECK(compat_remove_file(p) == 0);
    }
    return l->stop_after && l->n == l->stop_after ? 7 : 0;
}

static void remove_listing(const char *dir) {
    static const char *names[] = {"b.safetensors", "a.safetensors.tmp.12", "c", "plain"};
    char p[600];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        compat_remove_file(p);
    }
    snprintf(p, sizeof p, "%s/sub", dir);
    compat_remove_dir(p);
    compat_remove_dir(dir);
}

static void test_list_dir(const char *base) {
    char err[512], dir[400], p[600];
    snprintf(dir, sizeof dir, "%s/list", base);
    remove_listing(dir); /* left by an earlier run with the same pid (wine reuses them) */
    CHECK(compat_mkdir_p(dir, err, sizeof err) == 0);

    /* Empty directory: no calls, success. */
    listing_t l;
    memset(&l, 0, sizeof l);
    CHECK(compat_list_dir(dir, collect, &l, err, sizeof err) == 0);
    CHECK(l.n == 0);

    /* Files and a subdirectory come back sorted, flagged, without . and .. */
    const char *files[] = {"b.safetensors", "a.safetensors.tmp.12", "c"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(compat_write_file_durable(p, "x", 1, err, sizeof err) == 0);
    }
    snprintf(p, sizeof p, "%s/sub", dir);
    CHECK(compat_mkdir_p(p, err, sizeof err) == 0);
    CHECK(compat_is_dir(p));
    snprintf(p, sizeof p, "%s/c", dir);
    CHECK(!compat_is_dir(p));
    memset(&l, 0, sizeof l);
    CHECK(compat_list_dir(dir, collect, &l, err, sizeof err) == 0);
    CHECK(l.n == 4);
    CHECK(strcmp(l.names[0], "a.safetensors.tmp.12") == 0 && !l.is_dir[0]);
    CHECK(strcmp(l.names[1], "b.safetensors") == 0 && !l.is_dir[1]);
    CHECK(strcmp(l.names[2], "c") == 0 && !l.is_dir[2]);
    CHECK(strcmp(l.names[3], "sub") == 0 && l.is_dir[3]);

    /* A nonzero return stops the walk and is passed through. */
    memset(&l, 0, sizeof l);
    l.stop_after = 2;
    CHECK(compat_list_dir(dir, collect, &l, err, sizeof err) == 7);
    CHECK(l.n == 2);

    /* A trailing separator is fine; the callback may remove what it sees. */
    char dir_slash[420];
    snprintf(dir_slash, sizeof dir_slash, "%s/", dir);
    memset(&l, 0, sizeof l);
    l.dir = dir;
    CHECK(compat_list_dir(dir_slash, collect, &l, err, sizeof err) == 0);
    CHECK(l.n == 4);
    memset(&l, 0, sizeof l);
    CHECK(compat_list_dir(dir, collect, &l, err, sizeof err) == 0);
    CHECK(l.n == 1 && strcmp(l.names[0], "sub") == 0);

    /* A missing directory, or a file, is an error that names it. */
    snprintf(p, sizeof p, "%s/no-such-dir", dir);
    err[0] = 0;
    CHECK(compat_list_dir(p, collect, &l, err, sizeof err) == -1);
    CHECK(strstr(err, "no-such-dir") != NULL);
    snprintf(p, sizeof p, "%s/plain", dir);
    CHECK(compat_write_file_durable(p, "x", 1, err, sizeof err) == 0);
    err[0] = 0;
    CHECK(compat_list_dir(p, collect, &l, err, sizeof err) == -1);
    CHECK(strstr(err, "plain") != NULL);
    compat_remove_file(p);

    /* compat_remove_dir removes an empty directory only. */
    snprintf(p, sizeof p, "%s/sub", dir);
    CHECK(compat_remove_dir(dir) != 0 && compat_is_dir(dir));
    CHECK(compat_remove_dir(p) == 0 && !compat_is_dir(p));
    CHECK(compat_remove_dir(dir) == 0 && !compat_is_dir(dir));
}

/* ---- compat_remove_tree ---------------------------------------------------- */
static void test_remove_tree(const char *base) {
    char err[512], root[400], p[600];
    snprintf(root, sizeof root, "%s/tree", base);
    const char *dirs[] = {"", "/b", "/b/d", "/b/d/deeper", "/empty"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        CHECK(compat_mkdir_p(p, err, sizeof err) == 0);
    }
    const char *files[] = {"/a", "/b/c", "/b/d/e", "/b/d/deeper/f.tmp.1"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", root, files[i]);
        CHECK(compat_write_file_durable(p, "data", 4, err, sizeof err) == 0);
    }
    CHECK(compat_remove_tree(root, err, sizeof err) == 0);
    CHECK(!compat_is_dir(root) && !compat_file_exists(root));
    /* Missing: nothing to do. A plain file: removed. */
    CHECK(compat_remove_tree(root, err, sizeof err) == 0);
    snprintf(p, sizeof p, "%s/lonely", base);
    CHECK(compat_write_file_durable(p, "x", 1, err, sizeof err) == 0);
    CHECK(compat_remove_tree(p, err, sizeof err) == 0 && !compat_file_exists(p));
}

/* ---- rename, aligned memory, environment, temp dir ------------------------ */
static void test_misc(const char *base) {
    char err[512], a[400], b[400];
    /* compat_rename replaces an existing target (Windows' rename() won't). */
    snprintf(a, sizeof a, "%s/ren_a", base);
    snprintf(b, sizeof b, "%s/ren_b", base);
    CHECK(compat_write_file_durable(a, "new", 3, err, sizeof err) == 0);
    CHECK(compat_write_file_durable(b, "older", 5, err, sizeof err) == 0);
    CHECK(compat_rename(a, b, err, sizeof err) == 0);
    CHECK(!compat_file_exists(a) && compat_file_size(b) == 3);
    err[0] = 0;
    CHECK(compat_rename(a, b, err, sizeof err) == -1); /* source gone */
    CHECK(strstr(err, "ren_a") != NULL);
    compat_remove_file(b);

    /* Aligned blocks: aligned, writable, any size (0 too), freed apart. */
    size_t aligns[] = {1, 8, 64, 4096};
    size_t sizes[] = {0, 1, 63, 100000};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            unsigned char *p = compat_aligned_alloc(aligns[i], sizes[j]);
            CHECK(p != NULL);
            if (!p) continue;
            CHECK((uintptr_t)p % aligns[i] == 0);
            memset(p, 0xab, sizes[j]);
            compat_aligned_free(p);
        }
    CHECK(compat_aligned_alloc(48, 10) == NULL);   /* not a power of two */
    CHECK(compat_aligned_alloc(8192, 10) == NULL); /* too large an alignment */
    CHECK(compat_aligned_alloc(64, SIZE_MAX - 10) == NULL);
    compat_aligned_free(NULL);

    /* Environment: set, overwrite, remove. */
    CHECK(compat_setenv("KOMA_COMPAT_TEST_VAR", "one") == 0);
    CHECK(getenv("KOMA_COMPAT_TEST_VAR") && strcmp(getenv("KOMA_COMPAT_TEST_VAR"), "one") == 0);
    CHECK(compat_setenv("KOMA_COMPAT_TEST_VAR", "two") == 0);
    CHECK(getenv("KOMA_COMPAT_TEST_VAR") && strcmp(getenv("KOMA_COMPAT_TEST_VAR"), "two") == 0);
    CHECK(compat_setenv("KOMA_COMPAT_TEST_VAR", NULL) == 0);
    CHECK(getenv("KOMA_COMPAT_TEST_VAR") == NULL || getenv("KOMA_COMPAT_TEST_VAR")[0] == 0);

    /* The temp dir exists, has no trailing separator and is stable. */
    const char *t = compat_temp_dir();
    size_t tl = strlen(t);
    CHECK(tl > 0 && compat_is_dir(t));
    CHECK(tl == 1 || (t[tl - 1] != '/' && t[tl - 1] != '\\'));
    CHECK(compat_temp_dir() == t);
}

/* ---- compat_run: the test runs itself as the child ------------------------ */
static const char *const child_args[] = {"plain", "two words", "q\"uote", "back\\slash\\", "", "tab\there",
                                         "\\\"x\\\\", NULL};

static int child_main(int argc, char **argv) {
    /* argv: self --child <child_args...> */
    int n = 0;
    while (child_args[n]) n++;
    if (argc != 2 + n) return 3;
    for (int i = 0; i < n; i++)
        if (strcmp(argv[2 + i], child_args[i]) != 0) {
            fprintf(stderr, "child: argument %d is [%s], want [%s]\n", i, argv[2 + i], child_args[i]);
            return 4;
        }
    return 42;
}

static void test_run(const char *self) {
    char err[512];
    const char *argv[16];
    int k = 0;
    argv[k++] = self;
    argv[k++] = "--child";
    for (int i = 0; child_args[i]; i++) argv[k++] = child_args[i];
    argv[k] = NULL;
    int status = -1;
    /* Arguments with spaces, quotes, backslashes and empty ones arrive verbatim. */
    CHECK(compat_run(argv, &status, err, sizeof err) == 0);
    CHECK(status == 42);
    /* The exit code comes back as it is; a failing child is not a failure to start. */
    const char *exit7[] = {self, "--child-exit", NULL};
    status = 0;
    CHECK(compat_run(exit7, &status, err, sizeof err) == 0);
    CHECK(status == 7);
    /* A program that does not exist cannot be started, and the error says which. */
    const char *none[] = {"koma-no-such-program-xyz", "arg", NULL};
    err[0] = 0;
    CHECK(compat_run(none, &status, err, sizeof err) == -1);
    CHECK(strstr(err, "koma-no-such-program-xyz") != NULL);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no/such/dir/prog", KOMA_TEST_TMP);
    const char *none2[] = {missing, NULL};
    CHECK(compat_run(none2, &status, err, sizeof err) == -1);

    /* Output to files: separate, together, discarded; a bad path is named. */
    char out[400], errf[400];
    snprintf(out, sizeof out, "%s/run_out_%d.txt", KOMA_TEST_TMP, compat_getpid());
    snprintf(errf, sizeof errf, "%s/run_err_%d.txt", KOMA_TEST_TMP, compat_getpid());
    const char *print[] = {self, "--child-print", NULL};
    CHECK(compat_write_file_durable(out, "old contents, longer than the new", 33, err, sizeof err) == 0);
    CHECK(compat_run_io(print, out, errf, &status, err, sizeof err) == 0 && status == 0);
    size_t len = 0;
    char *o = compat_read_file(out, &len, err, sizeof err), *e = compat_read_file(errf, NULL, err, sizeof err);
    CHECK(o && strstr(o, "to stdout") && !strstr(o, "to stderr") && !strstr(o, "old contents"));
    CHECK(e && strstr(e, "to stderr") && !strstr(e, "to stdout"));
    free(o);
    free(e);
    CHECK(compat_run_io(print, out, out, &status, err, sizeof err) == 0 && status == 0);
    o = compat_read_file(out, NULL, err, sizeof err);
    CHECK(o && strstr(o, "to stdout") && strstr(o, "to stderr"));
    free(o);
    CHECK(compat_run_io(print, "", "", &status, err, sizeof err) == 0 && status == 0);
    snprintf(missing, sizeof missing, "%s/no/such/dir/out.txt", KOMA_TEST_TMP);
    err[0] = 0;
    CHECK(compat_run_io(print, missing, NULL, &status, err, sizeof err) == -1);
    CHECK(strstr(err, "out.txt") != NULL);
    compat_remove_file(out);
    compat_remove_file(errf);
}

/* ---- compat_proc: a line dialogue with a child, then end of its input ----- */
/* The child: echoes each stdin line as "echo: LINE"; at end of input says
 * "eof" and exits 5. */
static int child_echo(void) {
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        printf("echo: %s\n", line);
        fflush(stdout);
    }
    printf("eof\n");
    fflush(stdout);
    return 5;
}

static void test_proc(const char *self) {
    char err[512], buf[64];
    const char *argv[] = {self, "--child-echo", NULL};
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "test_proc: %s\n", err);
        return;
    }
    CHECK(compat_proc_pid(p) > 0);
    /* Nothing said yet: a short read times out. */
    CHECK(compat_proc_read_line(p, buf, sizeof buf, 50) == COMPAT_PROC_TIMEOUT);
    CHECK(compat_proc_write_line(p, "hello") == 0);
    CHECK(compat_proc_read_line(p, buf, sizeof buf, 10000) == 11 && strcmp(buf, "echo: hello") == 0);
    /* The child still runs while its input is open... */
    CHECK(compat_proc_wait(p, 50, NULL) == 1);
    /* ...and ends once it is closed; writing then fails instead of killing us. */
    compat_proc_close_input(p);
    compat_proc_close_input(p); /* idempotent */
    CHECK(compat_proc_write_line(p, "too late") == -1);
    CHECK(compat_proc_read_line(p, buf, sizeof buf, 10000) == 3 && strcmp(buf, "eof") == 0);
    CHECK(compat_proc_read_line(p, buf, sizeof buf, 10000) == COMPAT_PROC_EOF);
    int status = -1;
    CHECK(compat_proc_wait(p, 10000, &status) == 0 && status == 5);
    compat_proc_free(p);
    compat_proc_close_input(NULL);
}

/* Spins until this thread has used 50 ms of CPU time (60 s of wall time at most). */
static void *spin_thread_cpu(void *arg) {
    (void)arg;
    volatile uint64_t spin = 0;
    int64_t c0 = compat_thread_cpu_time_ns(), w0 = compat_now_ns();
    while (compat_thread_cpu_time_ns() - c0 < 50 * 1000000LL && compat_now_ns() - w0 < 60 * 1000000000LL)
        for (int k = 0; k < 100000; k++) spin += 1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--child-echo") == 0) return child_echo();
    if (argc >= 2 && strcmp(argv[1], "--child-exit") == 0) _Exit(7);
    if (argc >= 2 && strcmp(argv[1], "--child-print") == 0) {
        printf("to stdout\n");
        fprintf(stderr, "to stderr\n");
        return 0;
    }
    char err[512];
    char dir[256];
    snprintf(dir, sizeof dir, "%s/compat_%d/a/b", KOMA_TEST_TMP, compat_getpid());
    CHECK(compat_mkdir_p(dir, err, sizeof err) == 0);
    CHECK(compat_mkdir_p(dir, err, sizeof err) == 0); /* idempotent */

    char path[300];
    snprintf(path, sizeof path, "%s/file.bin", dir);
    const char msg[] = "hello, durable world";
    CHECK(compat_write_file_durable(path, msg, sizeof msg, err, sizeof err) == 0);
    CHECK(compat_file_size(path) == (int64_t)sizeof msg);

    compat_map_t m;
    CHECK(compat_map_file(path, &m, err, sizeof err) == 0);
    CHECK(m.size == sizeof msg && memcmp(m.data, msg, sizeof msg) == 0);
    compat_unmap_file(&m);

    /* An aborted durable write leaves the old contents and no temporary. */
    compat_durable_t *d = compat_durable_open(path, err, sizeof err);
    CHECK(d != NULL);
    CHECK(compat_durable_write(d, "xx", 2, err, sizeof err) == 0);
    compat_durable_abort(d);
    size_t len = 0;
    char *back = compat_read_file(path, &len, err, sizeof err);
    CHECK(back && len == sizeof msg && memcmp(back, msg, len) == 0);
    free(back);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, compat_getpid());
    CHECK(!compat_file_exists(tmp));

    /* Missing files are reported by name. */
    CHECK(compat_map_file("build/no/such/file", &m, err, sizeof err) != 0);
    CHECK(strstr(err, "build/no/such/file") != NULL);
    CHECK(compat_read_file("build/no/such/file", NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "build/no/such/file") != NULL);

    /* Threads and a mutex: no lost increments. */
    shared_t s;
    memset(&s, 0, sizeof s);
    compat_mutex_init(&s.mu);
    compat_cond_init(&s.cv);
    compat_thread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(compat_thread_create(&t[i], worker, &s) == 0);
    compat_mutex_lock(&s.mu);
    while (atomic_load(&s.ready) < 4) compat_cond_wait(&s.cv, &s.mu);
    compat_mutex_unlock(&s.mu);
    for (int i = 0; i < 4; i++) compat_thread_join(t[i]);
    CHECK(s.counter == 400000);

    /* Timed wait times out and the clock moves forward. */
    int64_t t0 = compat_now_ns();
    compat_mutex_lock(&s.mu);
    int rc = compat_cond_timedwait(&s.cv, &s.mu, 30);
    compat_mutex_unlock(&s.mu);
    int64_t dt = compat_now_ns() - t0;
    CHECK(rc == 1);
    CHECK(dt >= 25 * 1000000LL);
    CHECK(compat_cpu_count() >= 1);

    /* CPU time: a sleep adds (almost) none, a busy loop adds about its length. */
    int64_t c0 = compat_cpu_time_ns();
    CHECK(c0 > 0);
    compat_sleep_ms(100);
    int64_t c1 = compat_cpu_time_ns();
    CHECK(c1 >= c0 && c1 - c0 < 40 * 1000000LL);
    /* Spin until 50 ms of CPU time have been counted (however loaded the machine, the event comes;
     * 60 s of wall time is the bound), and one thread cannot count more CPU than wall time. */
    volatile uint64_t spin = 0;
    int64_t w0 = compat_now_ns(), c2 = c1;
    while (c2 - c1 < 50 * 1000000LL && compat_now_ns() - w0 < 60 * 1000000000LL) {
        for (int k = 0; k < 100000; k++) spin += 1;
        c2 = compat_cpu_time_ns();
    }
    int64_t w1 = compat_now_ns();
    CHECKF(c2 - c1 >= 50 * 1000000LL, "CPU time advanced %lld ns in %lld ns of spinning", (long long)(c2 - c1),
           (long long)(w1 - w0));
    CHECKF(c2 - c1 <= (w1 - w0) + 20 * 1000000LL, "CPU time %lld ns > wall time %lld ns", (long long)(c2 - c1),
           (long long)(w1 - w0));
    /* Thread CPU time: another thread's 50 ms of spinning count in the process's CPU time
     * and not in this (sleeping, joining) thread's; this thread's own spinning counts in both.
     * Both clocks may tick coarsely (Windows and wine: 10-15.6 ms), hence the slack of two ticks. */
    const int64_t tick2 = 32 * 1000000LL;
    int64_t tc0 = compat_thread_cpu_time_ns(), pc0 = compat_cpu_time_ns();
    compat_thread_t spinner;
    KOMA_ASSERT(compat_thread_create(&spinner, spin_thread_cpu, NULL) == 0);
    compat_thread_join(spinner);
    int64_t tc1 = compat_thread_cpu_time_ns(), pc1 = compat_cpu_time_ns();
    CHECKF(pc1 - pc0 + tick2 >= 50 * 1000000LL, "process CPU time advanced %lld ns while a thread spun 50 ms", (long long)(pc1 - pc0));
    CHECKF(tc1 - tc0 < tick2, "this thread's CPU time advanced %lld ns while it joined a spinning thread",
           (long long)(tc1 - tc0));
    int64_t tc2 = tc1;
    w0 = compat_now_ns();
    while (tc2 - tc1 < 50 * 1000000LL && compat_now_ns() - w0 < 60 * 1000000000LL) {
        for (int k = 0; k < 100000; k++) spin += 1;
        tc2 = compat_thread_cpu_time_ns();
    }
    int64_t pc2 = compat_cpu_time_ns();
    CHECKF(tc2 - tc1 >= 50 * 1000000LL, "thread CPU time advanced %lld ns in 60 s of spinning", (long long)(tc2 - tc1));
    CHECKF(pc2 - pc1 + tick2 >= tc2 - tc1, "process CPU time %lld ns < this thread's %lld ns", (long long)(pc2 - pc1),
           (long long)(tc2 - tc1));
    compat_cond_destroy(&s.cv);
    compat_mutex_destroy(&s.mu);
    compat_remove_file(path);

    char base[256];
    snprintf(base, sizeof base, "%s/compat_%d", KOMA_TEST_TMP, compat_getpid());
    test_list_dir(base);
    test_misc(base);
    test_remove_tree(base);
    test_run(argv[0]);
    test_proc(argv[0]);

    return t_done("test_compat");
}
