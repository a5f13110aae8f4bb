/* dist_mpi.c - dist.h over MPI (built when CMake finds MPI; dist_stub.c
 * otherwise).
 *
 * Owns: MPI_Init_thread / MPI_Finalize, the world communicator with
 * MPI_ERRORS_RETURN, the sums, the agreement, the same-value check.
 * Does not own: what the buffers mean (train/dist_train.c).
 * Threads: the thread that called dist_init (MPI_THREAD_FUNNELED).
 * Errors: every MPI call goes through DIST_CHECK: -1 with err naming the call,
 * file:line and MPI's own error string.
 */
#include "dist/dist.h"

#ifdef KOMA_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

struct dist {
    int32_t rank, size;
    int mpi;          /* 1: dist_init initialised MPI and dist_free finalizes it */
    MPI_Comm comm;    /* a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN */
    double sum_s;     /* time inside the sums */
    int64_t sum_bytes;
};

static int mpi_fail(int rc, const char *call, const char *file, int line, char *err, size_t errlen) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    if (err && errlen) snprintf(err, errlen, "%s failed at %s:%d: %s", call, file, line, msg);
    return -1;
}

/* Every MPI call: DIST_CHECK(MPI_Xxx(...)) returns -1 with err on failure. */
#define DIST_CHECK(call)                                                                  \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, #call, __FILE__, __LINE__, err, errlen); \
    } while (0)

bool dist_built(void) { return true; }

/* A launcher that starts MPI processes leaves one of these behind. */
static int launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                                       "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static int start(dist_t *d, int *argc, char ***argv, char *err, size_t errlen) {
    int provided = 0, r = 0, n = 0;
    DIST_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    d->mpi = 1;
    DIST_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    DIST_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->comm));
    DIST_CHECK(MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN));
    DIST_CHECK(MPI_Comm_rank(d->comm, &r));
    DIST_CHECK(MPI_Comm_size(d->comm, &n));
    d->rank = r;
    d->size = n;
    return 0;
}

dist_t *dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    dist_t *d = calloc(1, sizeof *d);
    if (!d) {
        if (err && errlen) snprintf(err, errlen, "dist_init: out of memory");
        return NULL;
    }
    d->size = 1;
    d->comm = MPI_COMM_NULL;
    if (!launched()) return d;
    if (start(d, argc, argv, err, errlen) != 0) {
        dist_free(d);
        return NULL;
    }
    return d;
}

void dist_free(dist_t *d) {
    if (!d) return;
    if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
    if (d->mpi) MPI_Finalize();
    free(d);
}

int32_t dist_rank(const dist_t *d) { return d->rank; }
int32_t dist_size(const dist_t *d) { return d->size; }

/* In-place sum in chunks that an int count can hold. */
static int sum_any(dist_t *d, void *buf, int64_t n, MPI_Datatype type, size_t width, char *err, size_t errlen) {
    if (d->size == 1 || n <= 0) return 0;
    int64_t t0 = compat_now_ns();
    char *p = buf;
    for (int64_t done = 0; done < n;) {
        int count = (int)(n - done < (INT_MAX / 2) ? n - done : (INT_MAX / 2));
        DIST_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + done * (int64_t)width, count, type, MPI_SUM, d->comm));
        done += count;
    }
    d->sum_s += (double)(compat_now_ns() - t0) * 1e-9;
    d->sum_bytes += n * (int64_t)width;
    return 0;
}

int dist_sum_f32(dist_t *d, float *buf, int64_t n, char *err, size_t errlen) {
    return sum_any(d, buf, n, MPI_FLOAT, sizeof(float), err, errlen);
}

int dist_sum_f64(dist_t *d, double *buf, int64_t n, char *err, size_t errlen) {
    return sum_any(d, buf, n, MPI_DOUBLE, sizeof(double), err, errlen);
}

int dist_agree(dist_t *d, int ok, int *all_ok, char *err, size_t errlen) {
    int v = ok != 0;
    *all_ok = v;
    if (d->size == 1) return 0;
    DIST_CHECK(MPI_Allreduce(&v, all_ok, 1, MPI_INT, MPI_LAND, d->comm));
    return 0;
}

int dist_same_u64(dist_t *d, uint64_t v, int *same, int32_t *first_bad, char *err, size_t errlen) {
    *same = 1;
    *first_bad = -1;
    if (d->size == 1) return 0;
    uint64_t ref = v;
    DIST_CHECK(MPI_Bcast(&ref, 1, MPI_UINT64_T, 0, d->comm));
    int mine = ref == v ? INT_MAX : d->rank, low = INT_MAX;
    DIST_CHECK(MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, d->comm));
    if (low != INT_MAX) {
        *same = 0;
        *first_bad = low;
    }
    return 0;
}

double dist_sum_seconds(const dist_t *d, int64_t *bytes) {
    if (bytes) *bytes = d->sum_bytes;
    return d->sum_s;
}

#endif /* KOMA_HAVE_MPI */
