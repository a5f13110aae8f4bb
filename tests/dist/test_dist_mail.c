/* test_dist_mail.c - collectives over a group of ranks (dist_split) made by
 * the mailbox's communication thread while messages flow (dist/dist.h).
 *
 * Without a launcher's environment the program starts itself under
 * `mpirun -np 3` and passes when every rank passes; each rank then:
 * 1. splits the job into the group {0, 2} (key -rank: world rank 2 is the
 *    group's rank 0) and rank 1 outside it (no group);
 * 2. starts its mailbox; a second split is refused while it runs;
 * 3. on the group's ranks, a second thread makes ROUNDS sums of N floats
 *    (dist_sum_f32, values that sum exactly in float), a double sum, an
 *    agreement (one round with a rank saying no), a broadcast from the
 *    group's rank 1 and a same-value check that finds the rank that differs,
 *    all through the mailbox's thread, every result checked on every rank;
 *    meanwhile the main threads of all three ranks exchange MSGS messages
 *    each way (ranks 1 -> 0 and 1 -> 2, and back), every one checked; and
 *    the job's own agreement (all three ranks) goes through the mailbox too;
 * 4. stops the mailbox and sums once more on the group: a direct call again.
 * Built without MPI: dist_split gives the job of one as its group, and the
 * rest is skipped (exit 77).
 */
#include "tests/koma_test.h"

#include <inttypes.h>

#include "dist/dist.h"

#define N 4099      /* floats per sum (not a multiple of anything) */
#define ROUNDS 40
#define MSGS 60
#define TAG 7

typedef struct {
    dist_t *group;
    int32_t world_rank;
    int rounds_ok;
} sums_t;

/* What world rank r adds to element i in round k: small integers, exact in float. */
static float term(int32_t r, int k, int64_t i) { return (float)((r + 1) * 1000 + k * 3 + (int)(i % 97)); }

static void *sums_main(void *arg) {
    sums_t *s = arg;
    float *buf = malloc(sizeof(float) * N);
    KOMA_ASSERT(buf);
    char err[512];
    for (int k = 0; k < ROUNDS; k++) {
        for (int64_t i = 0; i < N; i++) buf[i] = term(s->world_rank, k, i);
        int rc = dist_sum_f32(s->group, buf, N, err, sizeof err);
        CHECKF(rc == 0, "round %d: %s", k, err);
        int bad = 0;
        for (int64_t i = 0; i < N && rc == 0; i++)
            if (buf[i] != term(0, k, i) + term(2, k, i)) bad++;
        CHECKF(bad == 0, "round %d: %d of %d sums wrong on world rank %d", k, bad, N, (int)s->world_rank);
        if (rc == 0 && bad == 0) s->rounds_ok++;
    }
    double d[3] = {1.5 * s->world_rank, -2.0, 0.25};
    CHECK(dist_sum_f64(s->group, d, 3, err, sizeof err) == 0);
    CHECK(d[0] == 3.0 && d[1] == -4.0 && d[2] == 0.5);
    int all = -1;
    CHECK(dist_agree(s->group, 1, &all, err, sizeof err) == 0 && all == 1);
    CHECK(dist_agree(s->group, s->world_rank != 0, &all, err, sizeof err) == 0 && all == 0);
    uint64_t v = s->world_rank == 0 ? 0xfeedull : 0; /* world rank 0 is the group's rank 1 */
    CHECK(dist_bcast(s->group, &v, sizeof v, 1, err, sizeof err) == 0 && v == 0xfeedull);
    int same = -1;
    int32_t first_bad = -2;
    CHECK(dist_same_u64(s->group, 42, &same, &first_bad, err, sizeof err) == 0 && same == 1 && first_bad == -1);
    CHECK(dist_same_u64(s->group, s->world_rank == 0 ? 43 : 42, &same, &first_bad, err, sizeof err) == 0);
    CHECKF(same == 0 && first_bad == 1, "same %d, first bad %d (want group rank 1: world rank 0)", same,
           (int)first_bad);
    free(buf);
    return NULL;
}

/* Sends MSGS numbered messages to each peer and takes MSGS from each,
 * checking their bytes. */
static void exchange(dist_mail_t *mail, int32_t me, const int32_t *peers, int npeers) {
    char err[512];
    int got[3] = {0, 0, 0}, sent = 0;
    int64_t deadline = compat_now_ns() + (int64_t)120 * 1000000000;
    while ((sent < MSGS || got[peers[0]] < MSGS || (npeers > 1 && got[peers[1]] < MSGS)) &&
           compat_now_ns() < deadline) {
        if (sent < MSGS) {
            for (int p = 0; p < npeers; p++) {
                int32_t msg[64];
                for (int i = 0; i < 64; i++) msg[i] = me * 100000 + sent * 64 + i;
                int rc = dist_mail_send(mail, peers[p], TAG, msg, sizeof msg, 10000, err, sizeof err);
                CHECKF(rc == DIST_OK, "rank %d: send %d to %d: %s", (int)me, sent, (int)peers[p], err);
            }
            sent++;
        }
        dist_msg_t *m = NULL;
        if (dist_mail_recv(mail, &m, 5, err, sizeof err) == DIST_OK) {
            int k = got[m->src];
            const int32_t *w = (const int32_t *)m->data;
            int ok = m->tag == TAG && m->len == 64 * (int64_t)sizeof(int32_t);
            for (int i = 0; ok && i < 64; i++) ok = w[i] == m->src * 100000 + k * 64 + i;
            CHECKF(ok, "rank %d: message %d from rank %d is not the one sent", (int)me, k, (int)m->src);
            got[m->src]++;
            dist_msg_free(m);
        }
    }
    for (int p = 0; p < npeers; p++)
        CHECKF(got[peers[p]] == MSGS, "rank %d: %d of %d messages from rank %d", (int)me, got[peers[p]], MSGS,
               (int)peers[p]);
}

static int rank_main(int argc, char **argv) {
    char err[512];
    dist_t *d = dist_init(&argc, &argv, err, sizeof err);
    if (!d) {
        fprintf(stderr, "dist_init: %s\n", err);
        return 1;
    }
    int32_t me = dist_rank(d);
    CHECK(dist_size(d) == 3);
    if (dist_size(d) != 3) {
        dist_free(d);
        return 1;
    }
    dist_t *g = NULL;
    CHECKF(dist_split(d, me == 1 ? -1 : 0, -me, &g, err, sizeof err) == 0, "%s", err);
    CHECK((g == NULL) == (me == 1));
    if (g) {
        CHECK(dist_size(g) == 2);
        CHECKF(dist_rank(g) == (me == 2 ? 0 : 1), "world rank %d is group rank %d", (int)me, (int)dist_rank(g));
    }
    dist_mail_t *mail = dist_mail_start(d, 8, 16, err, sizeof err);
    CHECKF(mail != NULL, "%s", err);
    dist_t *again = NULL;
    CHECK(dist_split(d, 0, 0, &again, err, sizeof err) == -1 && again == NULL);
    CHECK(dist_mail_start(d, 8, 16, err, sizeof err) == NULL);

    sums_t s = {g, me, 0};
    compat_thread_t th;
    int threaded = g && compat_thread_create(&th, sums_main, &s) == 0;
    CHECK(!g || threaded);
    int32_t peers[2] = {0, 2};
    int32_t one[1] = {1};
    if (me == 1) exchange(mail, me, peers, 2);
    else exchange(mail, me, one, 1);
    if (threaded) compat_thread_join(th);
    if (g) CHECKF(s.rounds_ok == ROUNDS, "world rank %d: %d of %d rounds right", (int)me, s.rounds_ok, ROUNDS);
    int all = -1; /* the job's own collective through the mailbox */
    CHECK(dist_agree(d, 1, &all, err, sizeof err) == 0 && all == 1);
    CHECK(dist_mail_flush(mail, 30000, err, sizeof err) == DIST_OK);
    CHECK(dist_agree(d, 1, &all, err, sizeof err) == 0 && all == 1); /* every rank's sends are done */
    CHECK(dist_mail_stop(mail) == 0);
    if (g) { /* no mailbox: a direct call */
        float x = (float)me;
        CHECK(dist_sum_f32(g, &x, 1, err, sizeof err) == 0 && x == 2.0f);
    }
    dist_free(g);
    dist_free(d);
    char name[64];
    snprintf(name, sizeof name, "test_dist_mail rank %d", (int)me);
    return t_done(name);
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE")) return rank_main(argc, argv);
    char err[512];
    dist_t *d = dist_init(&argc, &argv, err, sizeof err); /* a job of one: its group is itself */
    CHECKF(d != NULL, "%s", err);
    dist_t *g = NULL;
    CHECK(d && dist_split(d, 0, 0, &g, err, sizeof err) == 0 && g && dist_size(g) == 1 && dist_rank(g) == 0);
    float x = 3.0f;
    CHECK(g && dist_sum_f32(g, &x, 1, err, sizeof err) == 0 && x == 3.0f);
    dist_t *none = (dist_t *)1;
    CHECK(d && dist_split(d, -1, 0, &none, err, sizeof err) == 0 && none == NULL);
    dist_free(g);
    dist_free(d);
#ifndef KOMA_MPIEXEC
    printf("test_dist_mail: built without MPI: the job of one checked, the ranks skipped\n");
    t_done("test_dist_mail");
    return 77;
#else
    const char *av[16];
    int ac = t_mpirun_argv(av, "3");
    av[ac++] = argv[0];
    av[ac] = NULL;
    const char *dir = t_scratch("dist_mail");
    (void)dir;
    const char *out = t_path("ranks.log");
    int status = -1;
    int64_t t0 = compat_now_ns();
    CHECKF(compat_run_io(av, out, out, &status, err, sizeof err) == 0, "%s", err);
    char *text = t_read_file(out, NULL);
    CHECKF(status == 0, "mpirun -np 3 exited %d:\n%s", status, text);
    int ranks_done = 0;
    for (const char *p = text; (p = strstr(p, ", 0 failed")); p++) ranks_done++;
    CHECKF(ranks_done == 3, "%d of 3 ranks passed:\n%s", ranks_done, text);
    printf("test_dist_mail: 3 ranks, %d sums of %d floats through the mailbox's thread: %.1f s\n", ROUNDS, N,
           (double)(compat_now_ns() - t0) * 1e-9);
    free(text);
    t_rm_rf(t_dir);
    return t_done("test_dist_mail");
#endif
}
