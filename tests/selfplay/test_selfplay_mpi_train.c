/* test_selfplay_mpi_train.c - `mpirun -np 3 selfplay --train-ranks 2`: rank 0
 * and rank 1 train every net together (data-parallel over the training
 * group), rank 2 plays (built with MPI: tests/selfplay/CMakeLists.txt;
 * elsewhere, or when mpirun is gone, the job parts exit 77, skipped):
 *   - refusals (exit 2, a message naming the flag, nothing created): one
 *     process with --train-ranks 2, `mpirun -np 2` with --train-ranks 3, and
 *     a --batch the 2 training ranks cannot split;
 *   - the 2-cycle job exits 0 and leaves a complete, clean run (check_run:
 *     every game replayed against its shard rows, every model loads);
 *     games come from ranks 0 and 2 only (games.rank; rank 1 does not play);
 *   - rank 1 trained both cycles: its stderr line and its report in the
 *     run's log ("rank 1: trained cycle C with rank 0 ... weights H (the same
 *     on every training rank)", sent only after the group's weights check
 *     passed), rank 0's log names the group and the route ("training on
 *     ranks 0-1: MPI on host copies"), and H is the hash of the weights of
 *     models/000C.safetensors, the file rank 0 wrote: the follower ended
 *     each cycle with exactly the weights of the registered model;
 *   - Ctrl-C to mpirun once rank 1 trained cycle 2 of a long job: the job
 *     ends within 90 s (the cycle in flight stops with the group), rank 0
 *     says it was interrupted, and the same command with two more cycles
 *     completes a clean run, rank 1 loading the newest model first;
 *   - a training rank that cannot read the run (rank 1 given another --run
 *     through mpirun's MPMD syntax: the shared file system missing) fails
 *     cycle 1 on every rank with a message naming the file, and the job
 *     ends (exit 1) instead of waiting.
 */
#include "sp_test.h"

#include "dist/dist.h"
#include "selfplay/driver.h"
#include "train/dist_train.h"
#include "train/loop.h"

#ifdef KOMA_SELFPLAY_BIN
/* The binary alone, no mpirun: the refusal of --train-ranks 2 in a job of one. */
static void refused_alone(const char *base) {
    char dir[700], out[760];
    snprintf(dir, sizeof dir, "%s/alone", base);
    snprintf(out, sizeof out, "%s/alone.log", base);
    const char *argv[] = {KOMA_SELFPLAY_BIN, "--run", dir, "--train-ranks", "2", NULL};
    int status = -1;
    char err[512];
    CHECKF(compat_run_io(argv, out, out, &status, err, sizeof err) == 0, "%s", err);
    char *text = t_read_file(out, NULL);
    CHECKF(status == 2 && strstr(text, "--train-ranks 2: the job has 1 rank(s)"), "selfplay --train-ranks 2 alone: "
           "status %d, output:\n%s", status, text);
    CHECKF(!compat_file_exists(dir), "%s was created by a refused command", dir);
    free(text);
}
#endif

#if !defined(KOMA_MPIEXEC) || !defined(KOMA_SELFPLAY_BIN)
int main(void) {
#ifdef KOMA_SELFPLAY_BIN
    refused_alone(t_scratch("sp_mpi_train"));
    t_rm_rf(t_dir);
#endif
    printf("test_selfplay_mpi_train: built without MPI: the job parts skipped\n");
    t_done("test_selfplay_mpi_train");
    return 77;
}
#else
#include "sp_mpi_test.h"

/* The weights' hash of a model file as train_dist_check compares it. */
static uint64_t model_hash(const char *path) {
    char err[1024];
    train_config_t cfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    dist_t *d = dist_init(NULL, NULL, err, sizeof err); /* a job of one (no launcher here) */
    nn_backend_t *be = d ? train_backend_new(&cfg, err, sizeof err) : NULL;
    train_net_t tn = {0};
    uint64_t h = 0;
    if (be && train_net_load(be, &cfg, 16, path, 0, &tn, err, sizeof err) == 0) {
        train_dist_t *td = train_dist_new(d, tn.nt, 16, 1, err, sizeof err);
        if (td) h = train_dist_weights_hash(td);
        train_dist_free(td);
    }
    CHECKF(h != 0, "%s: %s", path, err);
    train_net_free(&tn);
    nn_backend_free(be);
    dist_free(d);
    return h;
}

/* Runs mpirun (argv ready) with a bounded wait; its status, -2 on a timeout. */
static int run_job(const char **argv, const char *log, int64_t ms) {
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_MPIEXEC, err);
        exit(2);
    }
    int status = -1;
    int still = compat_proc_wait(p, ms, &status);
    if (still == 1) compat_proc_kill(p);
    compat_proc_free(p);
    return still ? -2 : status;
}

/* The text of the first line holding both a and b, or NULL (a static copy). */
static const char *line_with(const char *text, const char *a, const char *b) {
    static char line[2048];
    for (const char *at = strstr(text, a); at; at = strstr(at + 1, a)) {
        const char *start = at;
        while (start > text && start[-1] != '\n') start--;
        const char *eol = strchr(at, '\n');
        size_t n = eol ? (size_t)(eol - start) : strlen(start);
        if (n >= sizeof line) n = sizeof line - 1;
        memcpy(line, start, n);
        line[n] = 0;
        if (strstr(line, b)) return line;
    }
    return NULL;
}

static void refused_by_job(const char *base, const char *np, const char *k, const char *batch, const char *want) {
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/refused", base);
    snprintf(log, sizeof log, "%s/refused_%s_%s.log", base, np, k);
    const char *argv[32];
    int argc = t_mpirun_argv(argv, np);
    const char *tail[] = {KOMA_SELFPLAY_BIN, "--run", dir, "--train-ranks", k, "--batch", batch, NULL};
    for (int i = 0; tail[i]; i++) argv[argc++] = tail[i];
    argv[argc] = NULL;
    int status = run_job(argv, log, 120000);
    char *text = t_read_file(log, NULL);
    CHECKF(status == 2 && strstr(text, want), "mpirun -np %s selfplay --train-ranks %s --batch %s: status %d (want "
           "2 and '%s'):\n%s", np, k, batch, status, want, text);
    CHECKF(!compat_file_exists(dir), "%s was created by a refused job", dir);
    free(text);
}

/* The job: ranks 0 and 1 train, ranks 0 and 2 play. */
static void job_train_and_play(const char *base) {
    char dir[700], log[760], path[800];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/mpirun.log", base);
    sp_mpi_extra[0] = "--train-ranks", sp_mpi_extra[1] = "2";
    const char *argv[96];
    sp_mpi_argv(argv, "3", dir, "2", "12"); /* 12 a cycle: rank 2 starts last and still plays some */
    int64_t t0 = compat_now_ms();
    int status = run_job(argv, log, 240000); /* TSan: 5-15x slower */
    double secs = (double)(compat_now_ms() - t0) / 1000.0;
    CHECKF(status == 0, "mpirun -np 3 selfplay --train-ranks 2 %s %d", status == -2 ? "timed out:" : "exited", status);
    printf("  mpirun -np 3 selfplay --train-ranks 2 --cycles 2: status %d, %.1f s\n", status, secs);

    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 2 && rs.models == 3, "model %d, %lld models (want cycle 2, 3 models)", rs.latest_cycle,
           (long long)rs.models);
    int64_t g0 = sp_mpi_rank_games(dir, 0), g1 = sp_mpi_sql(dir, "SELECT count(*) FROM games WHERE rank = 1"),
            g2 = sp_mpi_rank_games(dir, 2);
    /* rank 2 plays: its games, or where rank 0 played all 24 before any of
     * rank 2's was committed (seen at load 9: rank 2 starts last), its log
     * line that it is playing */
    bool r2_plays = sp_mpi_rank_played(dir, log, 2);
    CHECKF(g0 > 0 && r2_plays && g1 == 0, "games by rank: %lld, %lld, %lld (want ranks 0 and 2 only)", (long long)g0,
           (long long)g1, (long long)g2);
    CHECKF(sp_mpi_sql(dir, "SELECT count(*) FROM games WHERE match_id IS NULL AND (host IS NULL OR rank NOT IN (0, 2))") == 0,
           "self-play games without rank 0 or 2 and a host");
    printf("  games by rank: %lld, %lld, %lld\n", (long long)g0, (long long)g1, (long long)g2);

    /* rank 1 trained each cycle with rank 0, ending with the weights rank 0 registered */
    char *err_text = t_read_file(log, NULL);
    snprintf(path, sizeof path, "%s/log", dir);
    char *run_log = t_read_file(path, NULL);
    CHECKF(strstr(run_log, "train: training on ranks 0-1: MPI on host copies") != NULL,
           "rank 0's log does not name the training group and its route");
    CHECKF(strstr(run_log, "rank 1: host ") && strstr(run_log, "cpu trainer backend"),
           "rank 0's log lacks the hello of training rank 1");
    for (int c = 1; c <= 2; c++) {
        char key[64], want[64], file[800];
        snprintf(key, sizeof key, "rank 1: trained cycle %d with rank 0: ", c);
        const char *l = line_with(run_log, key, "(the same on every training rank)");
        CHECKF(l != NULL, "rank 0's log has no report of rank 1 on cycle %d", c);
        const char *w = l ? strstr(l, "weights ") : NULL;
        unsigned long long got = w ? strtoull(w + 8, NULL, 16) : 0;
        snprintf(file, sizeof file, "%s/models/%04d.safetensors", dir, c);
        uint64_t h = model_hash(file);
        CHECKF(got == h, "cycle %d: rank 1 ended with weights %016llx, models/%04d.safetensors holds %016llx", c, got,
               c, (unsigned long long)h);
        snprintf(key, sizeof key, "selfplay rank 1 (");
        snprintf(want, sizeof want, "): cycle %d: 4 steps with rank 0", c);
        CHECKF(line_with(err_text, key, want) != NULL, "rank 1's stderr has no line '%s'", want);
        printf("  cycle %d: rank 1 trained with rank 0, weights %016llx = models/%04d.safetensors\n", c, got, c);
    }
    CHECKF(sp_mpi_sql(dir, "SELECT train_steps FROM models WHERE cycle = 2") == 8, "model 2: %lld steps (want 2 x 4)",
           (long long)sp_mpi_sql(dir, "SELECT train_steps FROM models WHERE cycle = 2"));
    free(run_log);
    free(err_text);
    int failed_job = atomic_load(&g_fail);
    if (failed_job) sp_mpi_show("mpirun's stderr", log, 6000);
}

/* Ctrl-C to the job while the group trains: it ends in bounded time, and the
 * same command resumes (rank 1 loads the newest model, which its own
 * weights are not after the stop). */
static void job_ctrl_c(const char *base) {
    int failed_job = atomic_load(&g_fail);
    char path[800];
    run_state_t rs;
    int64_t t0;
    int status;
    double secs;
    char dir3[700], log3[760];
    snprintf(dir3, sizeof dir3, "%s/run3", base);
    snprintf(log3, sizeof log3, "%s/mpirun3.log", base);
    const char *a3[96];
    sp_mpi_argv(a3, "3", dir3, "500", "4");
    char err[512];
    compat_proc_t *p = compat_proc_spawn(a3, log3, err, sizeof err);
    CHECKF(p != NULL, "cannot start %s: %s", KOMA_MPIEXEC, err);
    snprintf(path, sizeof path, "%s/log", dir3);
    int trained = 0;
    for (int64_t t = compat_now_ms(); p && !trained && compat_now_ms() - t < 120000; compat_sleep_ms(100)) {
        char *lt = t_read_file(path, NULL);
        trained = strstr(lt, "rank 1: trained cycle 2 with rank 0") != NULL;
        free(lt);
    }
    CHECKF(trained, "rank 1 never reported cycle 2 of the long job");
    int64_t latest = -1;
    if (p) {
        CHECK(compat_proc_interrupt(p) == 0);
        t0 = compat_now_ms();
        status = -1;
        int still = compat_proc_wait(p, 90000, &status);
        if (still == 1) compat_proc_kill(p);
        compat_proc_free(p);
        secs = (double)(compat_now_ms() - t0) / 1000.0;
        CHECKF(still == 0, "the job did not end within 90 s of Ctrl-C");
        latest = sp_mpi_sql(dir3, "SELECT max(cycle) FROM models");
        printf("  Ctrl-C with the group training: mpirun ended in %.1f s (status %d), newest model %lld\n", secs,
               status, (long long)latest);
        char *lt = t_read_file(log3, NULL);
        CHECKF(strstr(lt, "interrupted: everything committed is kept"), "rank 0 did not say it was interrupted");
        free(lt);
    }
    if (latest >= 2) { /* the same command, two more cycles */
        char cycles[32];
        snprintf(cycles, sizeof cycles, "%lld", (long long)latest + 2);
        sp_mpi_argv(a3, "3", dir3, cycles, "4");
        status = run_job(a3, log3, 240000);
        CHECKF(status == 0, "the resumed job exited %d", status);
        check_run(dir3, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
        CHECKF(rs.latest_cycle == latest + 2, "resumed: newest model %d, want %lld", rs.latest_cycle,
               (long long)latest + 2);
        char key[96];
        snprintf(key, sizeof key, "): cycle %lld: 4 steps with rank 0", (long long)latest + 1);
        char *lt = t_read_file(log3, NULL);
        CHECKF(line_with(lt, key, "model loaded") != NULL, "resumed: rank 1 did not load model %lld for cycle %lld",
               (long long)latest, (long long)latest + 1);
        free(lt);
        printf("  resumed: models %lld and %lld trained with rank 1, which loaded model %lld first\n",
               (long long)latest + 1, (long long)latest + 2, (long long)latest);
    }
    if (atomic_load(&g_fail) > failed_job) sp_mpi_show("mpirun's stderr (Ctrl-C and resume)", log3, 6000);
}

/* Rank 1 cannot read the run: cycle 1 fails on every rank, the job ends. */
static void job_rank_without_run(const char *base) {
    int failed_job = atomic_load(&g_fail);
    char path[800];
    int64_t t0;
    int status;
    double secs;
    char dir2[700], other[700], log2[760];
    snprintf(dir2, sizeof dir2, "%s/run2", base);
    snprintf(other, sizeof other, "%s/elsewhere", base);
    snprintf(log2, sizeof log2, "%s/mpirun2.log", base);
    const char *a1[96], *a2[96], *mp[300];
    int n1 = sp_mpi_argv(a1, "1", dir2, "2", "4"), n2 = sp_mpi_argv(a2, "1", other, "2", "4");
    int m = t_mpirun_argv(mp, "1"); /* where the program starts in a1 and a2 */
    int n = 0;
    for (int i = 0; i < n1; i++) mp[n++] = a1[i]; /* rank 0: the run */
    mp[n++] = ":", mp[n++] = "-np", mp[n++] = "1";
    for (int i = m; i < n2; i++) mp[n++] = a2[i]; /* rank 1: --run elsewhere */
    mp[n++] = ":", mp[n++] = "-np", mp[n++] = "1";
    for (int i = m; i < n1; i++) mp[n++] = a1[i]; /* rank 2: the run */
    mp[n] = NULL;
    t0 = compat_now_ms();
    status = run_job(mp, log2, 240000);
    secs = (double)(compat_now_ms() - t0) / 1000.0;
    char *text = t_read_file(log2, NULL);
    char file[800];
    snprintf(file, sizeof file, "%s/models/0000.safetensors", other);
    CHECKF(status == 1, "rank 1 without the run: mpirun %s %d (want 1)", status == -2 ? "timed out:" : "exited", status);
    CHECKF(line_with(text, "selfplay rank 1 (", file) && strstr(text, "file system every training rank sees"),
           "rank 1's error does not name %s and the shared file system", file);
    CHECKF(strstr(text, "training cycle 1 failed") != NULL, "rank 0 did not fail cycle 1");
    snprintf(path, sizeof path, "%s/log", dir2);
    char *log_text = t_read_file(path, NULL);
    CHECKF(line_with(log_text, "rank 1: cycle 1 failed", file) != NULL, "rank 0's log lacks rank 1's report naming %s",
           file);
    CHECKF(sp_mpi_sql(dir2, "SELECT count(*) FROM models") == 1, "models registered after the failed cycle");
    printf("  rank 1 without the run: status %d after %.1f s, its error names %s\n", status, secs, file);
    free(log_text);
    free(text);
    if (atomic_load(&g_fail) > failed_job) sp_mpi_show("mpirun's stderr (rank 1 without the run)", log2, 6000);
}

int main(void) {
    if (!compat_file_exists(KOMA_MPIEXEC)) {
        printf("test_selfplay_mpi_train: %s is gone: skipped\n", KOMA_MPIEXEC);
        return 77;
    }
    const char *base = t_scratch("sp_mpi_train");
    refused_alone(base);
    refused_by_job(base, "2", "3", "16", "--train-ranks 3: the job has 2 rank(s)");
    refused_by_job(base, "3", "2", "15", "--batch 15 is the global batch of the 2 training ranks");

    job_train_and_play(base);
    job_ctrl_c(base);
    job_rank_without_run(base);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_selfplay_mpi_train");
}
#endif
