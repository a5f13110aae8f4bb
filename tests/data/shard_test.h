/* shard_test.h - helpers shared by the shard column tests (tests/data). */
#ifndef KOMA_TESTS_SHARD_TEST_H
#define KOMA_TESTS_SHARD_TEST_H

#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/safetensors.h"

/* dst = the shard src with its tensor `column` replaced by (dtype, n values of
 * data), or added last when src has none; every other tensor and the nine
 * koma.* format keys of the metadata copied (no koma.xxh3.* checksums).
 * dst may be src: the new file is written beside it and renamed over it once
 * src is closed (Windows cannot replace a file that is still mapped). */
static inline void t_shard_rewrite_column(const char *src, const char *dst, const char *column, st_dtype_t dtype,
                                          int64_t n, const void *data) {
    char err[512];
    st_file_t *f = st_open(src, 0, err, sizeof err);
    KOMA_ASSERT(f);
    st_writer_t *w = st_writer_new();
    int64_t shape[1] = {n};
    for (int32_t i = 0; i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (strcmp(t->name, column) == 0) KOMA_ASSERT(st_writer_add(w, t->name, dtype, 1, shape, data) == 0);
        else KOMA_ASSERT(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data) == 0);
    }
    if (!st_find(f, column)) KOMA_ASSERT(st_writer_add(w, column, dtype, 1, shape, data) == 0);
    static const char *const keys[9] = {"koma.kind",  "koma.version",          "koma.rows",
                                        "koma.games", "koma.nnz",              "koma.features_version",
                                        "koma.planes_bytes", "koma.hand_n", "koma.legal_bytes"};
    for (int k = 0; k < 9; k++) KOMA_ASSERT(st_writer_meta(w, keys[k], st_meta(f, keys[k])) == 0);
    char tmp[4096];
    KOMA_ASSERT((size_t)snprintf(tmp, sizeof tmp, "%s.rewrite", dst) < sizeof tmp);
    KOMA_ASSERT(st_writer_write(w, tmp, err, sizeof err) == 0);
    st_writer_free(w);
    st_close(f);
    KOMA_ASSERT(compat_rename(tmp, dst, err, sizeof err) == 0);
}

#endif
