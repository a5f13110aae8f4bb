/* bench_dist.c - the cost of averaging gradients over ranks: MPI_Allreduce
 * (dist_sum_f32) of one gradient of each net size, timed on every rank.
 *
 *   mpirun -np 2 build/bench/bench_dist [--nets 6x64,10x128] [--reps 50]
 *
 * Prints, per net: parameters, MB, and the median / min / max milliseconds
 * of one sum (rank 0's) and the mean of the ranks' medians. Without a launcher
 * it is a job of one and says so.
 * Owns: nothing beyond its own buffers. Errors: exit 1 with a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/version.h"
#include "dist/dist.h"
#include "nn/backend.h"
#include "nn/net.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_one(dist_t *d, const char *size, int reps) {
    char err[512];
    nn_net_config_t nc = {.act = NN_ACT_RELU, .in_planes = 68, .in_hand = 14, .features_version = 1};
    if (nn_net_size_parse(size, &nc.blocks, &nc.channels) != 0) {
        fprintf(stderr, "bench_dist: bad net size %s\n", size);
        return -1;
    }
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = nn_net_new(be, &nc, 1, err, sizeof err);
    if (!net) {
        fprintf(stderr, "bench_dist: %s\n", err);
        nn_backend_free(be);
        return -1;
    }
    int64_t n = 0;
    nn_net_params(net, &n, NULL);
    float *g = malloc(sizeof(float) * (size_t)n);
    double *t = malloc(sizeof(double) * (size_t)reps);
    int rc = g && t ? 0 : -1;
    for (int64_t i = 0; i < n && rc == 0; i++) g[i] = (float)(i % 7) * 1e-3f;
    for (int r = -3; r < reps && rc == 0; r++) { /* 3 warm-up sums */
        int64_t t0 = compat_now_ns();
        rc = dist_sum_f32(d, g, n, err, sizeof err);
        if (r >= 0) t[r] = (double)(compat_now_ns() - t0) * 1e-6;
    }
    if (rc != 0) {
        fprintf(stderr, "bench_dist: %s\n", err);
    } else {
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        double med = t[reps / 2], mean_med = med;
        rc = dist_sum_f64(d, &mean_med, 1, err, sizeof err); /* the mean of the ranks' medians */
        mean_med /= dist_size(d);
        if (rc != 0) fprintf(stderr, "bench_dist: %s\n", err);
        else if (dist_rank(d) == 0)
            printf("%-7s %9lld params %7.2f MB  allreduce median %7.3f ms  min %7.3f  max %7.3f  (mean of the ranks' "
                   "medians %.3f ms)\n",
                   size, (long long)n, (double)n * 4 / 1e6, med, t[0], t[reps - 1], mean_med);
    }
    free(g);
    free(t);
    nn_net_free(net);
    nn_backend_free(be);
    return rc;
}

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "bench_dist")) return 0;
    char err[512];
    dist_t *d = dist_init(&argc, &argv, err, sizeof err);
    if (!d) {
        fprintf(stderr, "bench_dist: %s\n", err);
        return 1;
    }
    char nets[256] = "6x64,10x128";
    int reps = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nets") == 0) snprintf(nets, sizeof nets, "%s", argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
    }
    if (reps < 1) reps = 1;
    if (dist_rank(d) == 0)
        printf("bench_dist: %d rank(s)%s, %d sums per net\n", dist_size(d),
               dist_built() ? "" : " (built without MPI)", reps);
    int rc = 0;
    for (char *s = strtok(nets, ","); s && rc == 0; s = strtok(NULL, ",")) rc = bench_one(d, s, reps);
    dist_free(d);
    return rc ? 1 : 0;
}
