/* fuzz_safetensors.c - nn/safetensors.h: st_open on untrusted files.
 *
 * st_open maps a path, so each input is written to a scratch file (tmpfs
 * /dev/shm where there is one) and opened twice: without checksums (so the
 * fuzzer gets past them to the shape/offset checks) and with ST_OPEN_VERIFY.
 * Properties:
 *   - a refused file comes with a message that starts with its path;
 *   - an accepted file's tensors lie inside the mapping (every byte is read:
 *     ASan sees any overrun), their byte counts match shape x dtype size,
 *     names are terminated and unique (st_find returns the same tensor);
 *   - st_expect with the tensor's own dtype and shape accepts it;
 *   - st_verify and ST_OPEN_VERIFY agree;
 *   - an accepted file written back with st_writer reopens, verified, with
 *     the same tensors (bytes compared).
 */
#include <string.h>

#include "fuzz.h"
#include "nn/safetensors.h"

static uint64_t touch(const st_tensor_t *t) {
    const uint8_t *p = t->data;
    uint64_t h = 0;
    for (uint64_t i = 0; i < t->nbytes; i++) h = h * 31 + p[i];
    return h;
}

static void check_open_file(const st_file_t *f, const char *path) {
    int32_t n = st_count(f);
    FUZZ_CHECK(n >= 0, "negative count %d", (int)n);
    FUZZ_CHECK(strcmp(st_path(f), path) == 0, "st_path '%s'", st_path(f));
    for (int32_t i = 0; i < n; i++) {
        const st_tensor_t *t = st_at(f, i);
        FUZZ_CHECK(t != NULL, "st_at(%d) NULL", (int)i);
        FUZZ_CHECK(memchr(t->name, 0, sizeof t->name) != NULL, "name not terminated");
        FUZZ_CHECK(t->dtype >= 0 && t->dtype < ST_DTYPE_NB, "dtype %d", (int)t->dtype);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "ndim %d", (int)t->ndim);
        uint64_t count = 1;
        for (int32_t d = 0; d < t->ndim; d++) {
            FUZZ_CHECK(t->shape[d] >= 0, "%s: negative dim", t->name);
            count *= (uint64_t)t->shape[d];
        }
        FUZZ_CHECK(count * st_dtype_size(t->dtype) == t->nbytes, "%s: %llu elements of %zu bytes vs %llu bytes",
                   t->name, (unsigned long long)count, st_dtype_size(t->dtype), (unsigned long long)t->nbytes);
        FUZZ_CHECK(t->nbytes == 0 || t->data != NULL, "%s: no data", t->name);
        (void)touch(t);
        FUZZ_CHECK(st_find(f, t->name) == t, "%s: st_find gives another tensor", t->name);
        char err[512];
        const st_tensor_t *e = st_expect(f, t->name, t->dtype, t->ndim, t->shape, err, sizeof err);
        FUZZ_CHECK(e == t, "%s: st_expect refuses its own shape: %s", t->name, err);
    }
    (void)st_meta(f, "koma.kind");
    (void)st_meta(f, "__metadata__");
}

/* Writes f's tensors to a second file and checks they come back verified. */
static void check_rewrite(const st_file_t *f, const char *path) {
    char out[1300], err[512];
    snprintf(out, sizeof out, "%s.rewrite", path);
    st_writer_t *w = st_writer_new();
    FUZZ_CHECK(w != NULL, "st_writer_new");
    int32_t n = st_count(f);
    for (int32_t i = 0; i < n; i++) {
        const st_tensor_t *t = st_at(f, i);
        /* The writer may refuse names or shapes the reader accepts (it is
         * stricter): then there is nothing to compare. */
        if (st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data) != 0) {
            st_writer_free(w);
            return;
        }
    }
    st_writer_meta(w, "koma.kind", "fuzz");
    if (st_writer_write(w, out, err, sizeof err) != 0) {
        st_writer_free(w);
        return;
    }
    st_writer_free(w);
    st_file_t *g = st_open(out, ST_OPEN_VERIFY, err, sizeof err);
    FUZZ_CHECK(g != NULL, "rewritten file refused: %s", err);
    FUZZ_CHECK(st_count(g) == n, "rewritten file has %d tensors, not %d", (int)st_count(g), (int)n);
    for (int32_t i = 0; i < n; i++) {
        const st_tensor_t *a = st_at(f, i), *b = st_find(g, a->name);
        FUZZ_CHECK(b != NULL, "%s lost in the rewrite", a->name);
        FUZZ_CHECK(b->dtype == a->dtype && b->ndim == a->ndim && b->nbytes == a->nbytes, "%s changed", a->name);
        FUZZ_CHECK(memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0, "%s: shape changed", a->name);
        FUZZ_CHECK(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0, "%s: bytes changed", a->name);
    }
    st_close(g);
    remove(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_file("safetensors", data, size);
    char err[512];
    int opened_plain = 0, opened_verified = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(err, 0, sizeof err);
        st_file_t *f = st_open(path, pass ? ST_OPEN_VERIFY : 0, err, sizeof err);
        if (!f) {
            FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0, "message does not start with the path: '%s'", err);
            continue;
        }
        if (pass == 0) opened_plain = 1;
        if (pass == 1) opened_verified = 1;
        check_open_file(f, path);
        if (pass == 0) {
            int v = st_verify(f, err, sizeof err);
            st_file_t *g = st_open(path, ST_OPEN_VERIFY, err, sizeof err);
            FUZZ_CHECK((v == 0) == (g != NULL), "st_verify %d but ST_OPEN_VERIFY %s", v, g ? "accepts" : "refuses");
            st_close(g);
            check_rewrite(f, path);
        }
        st_close(f);
    }
    FUZZ_CHECK(!opened_verified || opened_plain, "verified open succeeded where the plain one failed");
    st_close(NULL);
    return 0;
}
