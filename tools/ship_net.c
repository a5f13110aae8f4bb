/* ship_net.c - `ship-net`: turns one of a run's models into the net that ships
 * with Koma (nets/koma-default.safetensors): the weights only (the optimizer
 * state a run's model carries is dropped: a third of the size), every Koma
 * metadata key kept, and the facts a user needs to trust it added as
 * koma.shipped.* metadata (the command that trained it, its CPU time, the
 * commit, the measured strength). Checksums are written afresh and the result
 * is loaded back as a net before it counts as written.
 *
 *   ship-net MODEL OUT [--meta KEY=VALUE ...]
 *
 * KEY is stored as "koma.shipped.KEY". A maintenance tool (tools/ship-net.sh
 * drives it); not installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/version.h"
#include "nn/backend.h"
#include "nn/safetensors.h"
#include "nn/weights.h"

/* The metadata a Koma weights file holds beside its checksums (nn/weights.c). */
static const char *const KEPT[] = {"koma.kind",     "koma.version",   "koma.net", "koma.activation",
                                   "koma.features_version", "koma.in_planes", "koma.in_hand",
                                   /* where it came from: every run and its compute (train/lineage.h) */
                                   "koma.lineage", "koma.lineage.cpu_minutes", "koma.lineage.gpu_minutes"};

static int usage(void) {
    fprintf(stderr, "usage: ship-net MODEL OUT [--meta KEY=VALUE ...]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "ship-net")) return 0;
    if (argc < 3 || (argc - 3) % 2 != 0) return usage();
    const char *in = argv[1], *out = argv[2];
    char err[1024];
    st_file_t *f = st_open(in, ST_OPEN_VERIFY, err, sizeof err);
    if (!f) {
        fprintf(stderr, "ship-net: %s\n", err);
        return 1;
    }
    const char *kind = st_meta(f, "koma.kind");
    if (!kind || strcmp(kind, "weights") != 0) {
        fprintf(stderr, "ship-net: %s: not a Koma net (koma.kind is %s)\n", in, kind ? kind : "missing");
        st_close(f);
        return 1;
    }
    st_writer_t *w = st_writer_new();
    int rc = w ? 0 : -1;
    int32_t kept = 0;
    for (int32_t i = 0; rc == 0 && i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (strncmp(t->name, "opt.", 4) == 0) continue; /* optimizer state */
        rc = st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
        kept++;
    }
    for (size_t k = 0; rc == 0 && k < sizeof KEPT / sizeof KEPT[0]; k++) {
        const char *v = st_meta(f, KEPT[k]);
        if (v) rc = st_writer_meta(w, KEPT[k], v);
    }
    for (int i = 3; rc == 0 && i + 1 < argc; i += 2) {
        const char *kv = argv[i + 1], *eq = strchr(kv, '=');
        if (strcmp(argv[i], "--meta") != 0 || !eq || eq == kv) {
            st_writer_free(w);
            st_close(f);
            return usage();
        }
        char key[256];
        snprintf(key, sizeof key, "koma.shipped.%.*s", (int)(eq - kv), kv);
        rc = st_writer_meta(w, key, eq + 1);
    }
    if (rc != 0) {
        fprintf(stderr, "ship-net: %s: cannot copy its tensors (out of memory?)\n", in);
    } else if (st_writer_write(w, out, err, sizeof err) != 0) {
        fprintf(stderr, "ship-net: %s\n", err);
        rc = -1;
    }
    st_writer_free(w);
    st_close(f);
    if (rc != 0) return 1;
    /* it must load as a net, as koma will load it */
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = be ? nn_weights_load(be, out, -1, err, sizeof err) : NULL;
    if (!net) {
        fprintf(stderr, "ship-net: %s does not load back: %s\n", out, be ? err : "no CPU backend");
        compat_remove_file(out);
        if (be) nn_backend_free(be);
        return 1;
    }
    nn_net_free(net);
    nn_backend_free(be);
    printf("%s: %d tensors, weights only, from %s\n", out, kept, in);
    return 0;
}
