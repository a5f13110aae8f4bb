/* dist_stub.c - dist.h where Koma is built without MPI: a job of one process.
 *
 * Owns: the one-process answers (rank 0 of 1, sums leave the buffer as it
 * is, every agreement is the caller's own), so that callers never need
 * #ifdef KOMA_HAVE_MPI; a process that a launcher started as one of several
 * is refused (each copy would otherwise train alone).
 * Does not own: anything when KOMA_HAVE_MPI is defined (dist/dist_mpi.c then
 * defines these functions and this file compiles to nothing).
 * A group (dist_split) is this process alone, as the job is.
 * Threads: any. Errors: dist_init (the refusal above), out of memory.
 */
#include "dist/dist.h"

#ifndef KOMA_HAVE_MPI

#include <stdio.h>
#include <stdlib.h>

#include "compat/err.h"

struct dist {
    int32_t unused;
};

bool dist_built(void) { return false; }

dist_t *dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    (void)argc;
    (void)argv;
    /* N copies of a program built without MPI would each be a job of one. */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) {
            set_err(err, errlen,
                    "started by an MPI launcher as %s processes (%s), but built without MPI: "
                    "install MPI (libopenmpi-dev) and configure again (docs/SCALING.md)",
                    v, vars[i]);
            return NULL;
        }
    }
    dist_t *d = calloc(1, sizeof *d);
    if (!d && err && errlen) set_err(err, errlen, "dist_init: out of memory");
    return d;
}

void dist_free(dist_t *d) { free(d); }

int dist_split(dist_t *d, int32_t color, int32_t key, dist_t **group, char *err, size_t errlen) {
    (void)d, (void)key;
    *group = NULL;
    if (color < 0) return 0; /* not in a group */
    if (!(*group = calloc(1, sizeof **group))) {
        set_err(err, errlen, "dist_split: out of memory");
        return -1;
    }
    return 0;
}
int32_t dist_rank(const dist_t *d) { return (void)d, 0; }
int32_t dist_size(const dist_t *d) { return (void)d, 1; }
int32_t dist_local_rank(const dist_t *d) { return (void)d, 0; }
void dist_abort(dist_t *d, int code) { (void)d, (void)code; }

int dist_sum_f32(dist_t *d, float *buf, int64_t n, char *err, size_t errlen) {
    (void)d, (void)buf, (void)n, (void)err, (void)errlen;
    return 0;
}

int dist_sum_f64(dist_t *d, double *buf, int64_t n, char *err, size_t errlen) {
    (void)d, (void)buf, (void)n, (void)err, (void)errlen;
    return 0;
}

int dist_bcast(dist_t *d, void *buf, int64_t bytes, int32_t root, char *err, size_t errlen) {
    (void)d, (void)buf, (void)bytes, (void)root, (void)err, (void)errlen;
    return 0;
}

int dist_agree(dist_t *d, int ok, int *all_ok, char *err, size_t errlen) {
    (void)d, (void)err, (void)errlen;
    *all_ok = ok != 0;
    return 0;
}

int dist_same_u64(dist_t *d, uint64_t v, int *same, int32_t *first_bad, char *err, size_t errlen) {
    (void)d, (void)v, (void)err, (void)errlen;
    *same = 1;
    *first_bad = -1;
    return 0;
}

double dist_sum_seconds(const dist_t *d, int64_t *bytes) {
    (void)d;
    if (bytes) *bytes = 0;
    return 0.0;
}

/* The mailbox of a job of one: there is nobody to send to or hear from. */
struct dist_mail {
    int32_t unused;
};

void dist_msg_free(dist_msg_t *m) { free(m); }

dist_mail_t *dist_mail_start(dist_t *d, int32_t max_in_flight, int32_t max_inbox, char *err, size_t errlen) {
    (void)d, (void)max_in_flight, (void)max_inbox;
    dist_mail_t *m = calloc(1, sizeof *m);
    if (!m && err && errlen) set_err(err, errlen, "dist_mail_start: out of memory");
    return m;
}

int dist_mail_send(dist_mail_t *m, int32_t dest, int32_t tag, const void *buf, int64_t len, int64_t timeout_ms,
                   char *err, size_t errlen) {
    (void)m, (void)tag, (void)buf, (void)len, (void)timeout_ms;
    if (dest == DIST_ALL_OTHERS) return DIST_OK;
    set_err(err, errlen, "dist_mail_send: no rank %d to send to (a job of one: built without MPI)", (int)dest);
    return -1;
}

int dist_mail_recv(dist_mail_t *m, dist_msg_t **out, int64_t timeout_ms, char *err, size_t errlen) {
    (void)m, (void)timeout_ms, (void)err, (void)errlen;
    *out = NULL;
    return DIST_TIMEOUT; /* nobody sends: never wait */
}

int dist_mail_flush(dist_mail_t *m, int64_t timeout_ms, char *err, size_t errlen) {
    (void)m, (void)timeout_ms, (void)err, (void)errlen;
    return DIST_OK;
}

int dist_mail_error(dist_mail_t *m, char *err, size_t errlen) { return (void)m, (void)err, (void)errlen, 0; }

void dist_mail_stats(dist_mail_t *m, dist_mail_stats_t *st) {
    (void)m;
    *st = (dist_mail_stats_t){0};
}

int32_t dist_mail_stop(dist_mail_t *m) {
    free(m);
    return 0;
}

#endif /* !KOMA_HAVE_MPI */
