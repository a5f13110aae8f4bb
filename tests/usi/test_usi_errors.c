/* test_usi_errors.c - koma never plays silently without what the user asked
 * for (issue 31.1, 31.2, 31.3), through the real binary:
 *   - a Net that cannot be used (missing, a foreign file, a safetensors file
 *     holding NaN, an empty directory, a FIFO is in test_usi_limits) and a
 *     Backend that cannot be used (cuda without a GPU): `isready` answers
 *     `info string Error: <path>: <reason>`, the same line on stderr, no
 *     `readyok`, and koma exits with status 1;
 *   - the same at `go` when the Net was set after the last isready: no search,
 *     no bestmove, exit 1;
 *   - Net none: the uniform evaluator, asked for: readyok and a bestmove;
 *   - the default Net: the shipped net, found beside an installed binary
 *     (<prefix>/bin/koma finds <prefix>/share/koma/nets/koma-default.safetensors)
 *     and announced as Net's default; without one, the error names where it
 *     looked;
 *   - `koma --help` and `koma --version` answer and exit without reading stdin.
 */
#include "usi_test.h"

#include "engine/encode.h"
#include "nn/net.h"
#include "nn/safetensors.h"
#include "nn/weights.h"

static const char *dir;

static bool write_net(const char *path, const char *poison_tensor, float poison) {
    char err[512];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t c = {1, 8, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &c, 7, err, sizeof err);
    bool ok = net != NULL;
    if (ok && !poison_tensor) {
        ok = nn_weights_save(net, NULL, path, err, sizeof err) == 0;
    } else if (ok) {
        /* valid checksums over a NaN: only the values betray the file (nn_weights_save refuses NaN) */
        st_writer_t *w = st_writer_new();
        float *copy = NULL;
        for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
            const nn_tensor_info_t *t = nn_net_tensor(net, i);
            const float *src = nn_net_tensor_data(net, i);
            if (strcmp(t->name, poison_tensor) == 0) {
                copy = malloc(sizeof(float) * (size_t)t->numel);
                memcpy(copy, src, sizeof(float) * (size_t)t->numel);
                copy[0] = poison;
                src = copy;
            }
            st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, src);
        }
        char v[32];
        st_writer_meta(w, "koma.kind", "weights");
        st_writer_meta(w, "koma.version", "1");
        st_writer_meta(w, "koma.net", "1x8");
        st_writer_meta(w, "koma.activation", "relu");
        snprintf(v, sizeof v, "%d", ENC_FEATURES_VERSION);
        st_writer_meta(w, "koma.features_version", v);
        snprintf(v, sizeof v, "%d", ENC_PLANES);
        st_writer_meta(w, "koma.in_planes", v);
        snprintf(v, sizeof v, "%d", ENC_HAND);
        st_writer_meta(w, "koma.in_hand", v);
        ok = copy != NULL && st_writer_write(w, path, err, sizeof err) == 0;
        st_writer_free(w);
        free(copy);
    }
    if (!ok) fprintf(stderr, "write_net %s: %s\n", path, err);
    nn_net_free(net);
    nn_backend_free(be);
    return ok;
}

/* koma (Net none first, then the given settings) with stderr to a file. */
static bool start_logged(usi_proc_t *p, const char *stderr_path, const char *bin) {
    memset(p, 0, sizeof *p);
    const char *argv[] = {bin, NULL};
    char err[512];
    p->cp = compat_proc_spawn(argv, stderr_path, err, sizeof err);
    if (!p->cp) {
        fprintf(stderr, "spawn %s: %s\n", bin, err);
        p->eof = true;
    }
    return p->cp != NULL;
}

/* After the lines `setup` (NULL-terminated) and then `trigger` (isready or a
 * go): an `info string Error:` line containing want (and want2), the same
 * text on stderr, no readyok or bestmove, exit status 1. */
static void expect_error(const char *what, const char *const *setup, const char *trigger, const char *want,
                         const char *want2) {
    fprintf(stderr, "-- %s\n", what);
    usi_proc_t P;
    static int n_logs;
    char name[64];
    snprintf(name, sizeof name, "stderr-%d.txt", ++n_logs);
    const char *log = t_path(name);
    CHECKF(start_logged(&P, log, KOMA_BIN), "%s: start", what);
    proc_send(&P, "usi");
    CHECKF(proc_expect(&P, "usiok", USI_WAIT_MS) != NULL, "%s: usiok", what);
    int from = P.mark;
    for (int i = 0; setup[i]; i++) {
        proc_send(&P, "%s", setup[i]);
        if (strcmp(setup[i], "isready") == 0) { /* an isready before the change: its readyok is due */
            CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "%s: readyok before the change", what);
            from = P.mark;
        }
    }
    proc_send(&P, "%s", trigger);
    const char *l = proc_expect(&P, "info string Error: ", USI_WAIT_MS);
    CHECKF(l && strstr(l, want) && (!want2 || strstr(l, want2)), "%s: the error names '%s'%s%s: %s", what, want,
           want2 ? " and " : "", want2 ? want2 : "", l ? l : "-");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "%s: koma exits after the error", what);
    CHECKF(P.exited && P.status == 1, "%s: exit status 1, got %d", what, P.status);
    CHECKF(!proc_find(&P, from, P.n_lines, "readyok"), "%s: no readyok", what);
    CHECKF(!proc_find(&P, from, P.n_lines, "bestmove"), "%s: no bestmove", what);
    char line[2048] = "";
    if (l) snprintf(line, sizeof line, "%s", l + strlen("info string ")); /* a whole line: \n or \r\n after it */
    proc_end(&P);
    char *text = t_read_file(log, NULL);
    if (line[0])
        CHECKF(text && strstr(text, line), "%s: the same line on stderr: '%s' in '%s'", what, line, text ? text : "-");
    free(text);
}

static void test_bad_nets(void) {
    char missing[700], foreign[700], nan_net[700], empty[700], good[700], err[256];
    snprintf(missing, sizeof missing, "%s/no-such.safetensors", dir);
    snprintf(foreign, sizeof foreign, "%s/foreign.safetensors", dir);
    snprintf(nan_net, sizeof nan_net, "%s/nan.safetensors", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    CHECK(compat_write_file_durable(foreign, "PK\x03\x04 a zip file, not a net", 27, err, sizeof err) == 0);
    CHECK(write_net(nan_net, "stem.conv.weight", NAN));
    CHECK(write_net(good, NULL, 0));
    CHECK(compat_mkdir_p(empty, err, sizeof err) == 0);
    char set[900];
    const char *setup[] = {set, NULL};
    snprintf(set, sizeof set, "setoption name Net value %s", missing);
    expect_error("a missing Net", setup, "isready", missing, "no such file");
    snprintf(set, sizeof set, "setoption name Net value %s", foreign);
    expect_error("a foreign file as Net", setup, "isready", foreign, NULL);
    snprintf(set, sizeof set, "setoption name Net value %s", nan_net);
    expect_error("a net holding NaN", setup, "isready", nan_net, "NaN");
    snprintf(set, sizeof set, "setoption name Net value %s", empty);
    expect_error("an empty directory as Net", setup, "isready", empty, NULL);
    /* set after isready, then go: the go is not searched */
    const char *late[] = {"setoption name Net value none", "isready", "position startpos", set, NULL};
    snprintf(set, sizeof set, "setoption name Net value %s", missing);
    expect_error("a missing Net set after isready, at go", late, "go nodes 16", missing, NULL);

    /* Backend cuda: an error where no GPU can be used, else the net loads on it */
    fprintf(stderr, "-- Backend cuda\n");
    usi_proc_t P;
    CHECK(start_logged(&P, t_path("cuda.txt"), KOMA_BIN));
    proc_send(&P, "setoption name Net value %s", good);
    proc_send(&P, "setoption name Backend value cuda");
    proc_send(&P, "isready");
    const char *l = NULL;
    for (long long end = now_ms() + 60000; now_ms() < end && !P.eof;) {
        proc_pump(&P, 100);
        if ((l = proc_find(&P, 0, P.n_lines, "info string Error: ")) || proc_find(&P, 0, P.n_lines, "readyok")) break;
    }
    if (l) {
        CHECKF(strstr(l, "cuda") || strstr(l, "CUDA") || strstr(l, "GPU") || strstr(l, "device"),
               "Backend cuda refused, saying why: %s", l);
        CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 1, "exit 1 after Backend cuda failed (status %d)", P.status);
        CHECKF(!proc_find(&P, 0, P.n_lines, "readyok"), "no readyok when Backend cuda failed");
    } else {
        const char *loaded = proc_find(&P, 0, P.n_lines, "info string net loaded");
        CHECKF(loaded && strstr(loaded, "cuda"), "readyok with Backend cuda: the net runs on cuda: %s",
               loaded ? loaded : "-");
        fprintf(stderr, "   a GPU is here: %s\n", loaded ? loaded : "-");
    }
    proc_end(&P);

    /* Net none: asked for, it plays */
    fprintf(stderr, "-- Net none\n");
    CHECK(start_logged(&P, NULL, KOMA_BIN));
    proc_send(&P, "setoption name Net value NONE");
    proc_send(&P, "isready");
    CHECK(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL);
    CHECKF(proc_find(&P, 0, P.mark, "info string Net none: no network"), "Net none said at isready");
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 16");
    CHECK(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL);
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 0, "quit: status 0");
    proc_end(&P);
}

/* The Net option's default as `usi` announces it ("" for <empty>). */
static bool announced_net(usi_proc_t *P, char *out, size_t n) {
    proc_send(P, "usi");
    const char *l = proc_expect(P, "option name Net type filename default ", USI_WAIT_MS);
    if (!l) return false;
    const char *v = l + strlen("option name Net type filename default ");
    snprintf(out, n, "%s", strcmp(v, "<empty>") == 0 ? "" : v);
    return proc_expect(P, "usiok", USI_WAIT_MS) != NULL;
}

static void test_default_net(void) {
    /* the build tree's koma: the source tree's nets/ has the shipped net, or not */
    fprintf(stderr, "-- the default Net of the built koma\n");
    usi_proc_t P;
    char def[1024];
    CHECK(start_logged(&P, NULL, KOMA_BIN));
    CHECK(announced_net(&P, def, sizeof def));
    proc_send(&P, "isready");
    if (def[0]) {
        CHECKF(strstr(def, "koma-default.safetensors") != NULL, "the default is the shipped net: %s", def);
        CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok with the shipped net");
        const char *l = proc_find(&P, 0, P.mark, "info string net loaded");
        CHECKF(l && strstr(l, def), "the shipped net loaded: %s", l ? l : "-");
        proc_send(&P, "quit");
    } else {
        const char *l = proc_expect(&P, "info string Error: ", USI_WAIT_MS);
        CHECKF(l && strstr(l, "nets/koma-default.safetensors") && strstr(l, "share/koma/nets") &&
                   strstr(l, "set the Net option"),
               "no shipped net: the error names where it looked and what to do: %s", l ? l : "-");
        CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 1, "exit 1 without a net (status %d)", P.status);
        fprintf(stderr, "   no shipped net in this tree: %s\n", l ? l : "-");
    }
    proc_end(&P);

    /* an installed layout: <prefix>/bin/koma and <prefix>/share/koma/nets/ */
    char bin[700], exe[800], nets[700], net[800], err[256];
    snprintf(bin, sizeof bin, "%s/prefix/bin", dir);
    snprintf(exe, sizeof exe, "%s/koma%s", bin, strstr(KOMA_BIN, ".exe") ? ".exe" : "");
    snprintf(nets, sizeof nets, "%s/prefix/share/koma/nets", dir);
    snprintf(net, sizeof net, "%s/koma-default.safetensors", nets);
    CHECK(compat_mkdir_p(bin, err, sizeof err) == 0 && compat_mkdir_p(nets, err, sizeof err) == 0);
    const char *cp[] = {"cp", KOMA_BIN, exe, NULL};
    int status = -1;
    if (compat_run_io(cp, "", "", &status, err, sizeof err) != 0 || status != 0) {
        fprintf(stderr, "-- installed layout: skipped (no cp to copy koma)\n");
        return;
    }
    fprintf(stderr, "-- installed layout: %s\n", exe);
    CHECK(write_net(net, NULL, 0));
    CHECK(start_logged(&P, NULL, exe));
    CHECK(announced_net(&P, def, sizeof def));
    CHECKF(strstr(def, "prefix/share/koma/nets/koma-default.safetensors") != NULL,
           "Net's default is the installed net: '%s'", def);
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok with the installed net");
    const char *l = proc_find(&P, 0, P.mark, "info string net loaded");
    CHECKF(l && strstr(l, "prefix/share/koma/nets/koma-default.safetensors"), "the installed net loaded: %s",
           l ? l : "-");
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 16");
    CHECK(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL);
    /* <empty> is the default again */
    proc_send(&P, "setoption name Net value <empty>");
    int from = P.mark;
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL && !proc_find(&P, from, P.mark, "info string Error"),
           "Net <empty>: the shipped net");
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 0, "quit: status 0");
    proc_end(&P);
}

static bool any_line_has(const usi_proc_t *p, const char *text) {
    for (int j = 0; j < p->n_lines; j++)
        if (strstr(p->lines[j], text)) return true;
    return false;
}

/* --help and --version print and exit at once, stdin left open and unread. */
static void test_help_version(void) {
    const char *flags[] = {"--help", "--version"};
    const char *want[] = {"usage: koma", "koma (Koma) "};
    for (int k = 0; k < 2; k++) {
        fprintf(stderr, "-- koma %s\n", flags[k]);
        usi_proc_t P;
        const char *args[] = {flags[k], NULL};
        CHECK(proc_start_bare(&P, args));
        CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "%s exits without input", flags[k]);
        CHECKF(P.exited && P.status == 0, "%s: status 0, got %d", flags[k], P.status);
        CHECKF(any_line_has(&P, want[k]), "%s: says '%s'", flags[k], want[k]);
        if (k == 0) {
            /* the options table from the same rows as `usi`: every option, type and range */
            static const char *rows[] = {"Net ", "filename", "NodeLimit ", "spin 0..2147483647", "MultiPV ",
                                         "EnteringKingRule ", "CSARule27|CSARule24|NoEnteringKing", "NetworkDelay2 ",
                                         "MinimumThinkingTime ", "USI_Ponder ", "USI on stdin", "none"};
            for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
                CHECKF(any_line_has(&P, rows[i]), "--help mentions '%s'", rows[i]);
            for (int j = 0; j < P.n_lines; j++) {
                size_t w = strlen(P.lines[j]);
                if (w > 0 && P.lines[j][w - 1] == '\r') w--; /* Windows' CR LF */
                CHECKF(w <= 80, "--help line %d within 80 columns: %s", j + 1, P.lines[j]);
            }
            CHECKF(!proc_find(&P, 0, P.n_lines, "info string"), "--help is not a USI command");
        }
        proc_end(&P);
    }
}

int main(void) {
    watchdog(170);
    dir = t_scratch("test_usi_errors");
    test_help_version();
    test_bad_nets();
    test_default_net();
    t_rm_rf(dir);
    return t_done("test_usi_errors");
}
