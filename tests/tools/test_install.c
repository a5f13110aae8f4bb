/* test_install.c - `cmake --install` puts the programs on a PATH prefix and
 * each answers --version: selfplay, train and koma under their names, the
 * user tools as koma-import, koma-inspect, koma-report, koma-usi-match,
 * koma-perft, koma-genconfig and koma-export, and the named flag sets under share/koma/configs
 * and the license under share/doc/koma, the shipped net under share/koma/nets (which the installed
 * koma plays by default). --version's first line is
 * "NAME (Koma) VERSION"; the commit and the parts built in follow. NAME is
 * the installed name (koma-report, not report): every koma-* tool reads it
 * from argv[0] and also names itself so in its usage and messages, and its
 * --help fits 80 columns and exits 0 (check_names), as every line of --version.
 * argv: cmake, the build directory, the project version. Skips (77) where
 * cmake cannot be run (a cross build under wine). */
#include "tests/koma_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

/* The longest line of text, in characters. */
static int longest_line(const char *text) {
    int longest = 0, cur = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') cur = 0;
        else if (++cur > longest) longest = cur;
    }
    return longest;
}

/* An installed user tool names itself by its installed name (koma-report,
 * not report) in its usage and messages, and its --help fits 80 columns with
 * that longer name: `NAME --help` prints "usage: NAME " (stdout or stderr),
 * and `NAME --no-such-flag` fails with a message or usage that names NAME and
 * never the bare build name ("report: ..." or "usage: report ..."). */
static void check_names(const char *exe, const char *name, const char *out) {
    const char *bare = name + 5; /* "koma-report" -> "report" */
    char want[128], bad1[128], bad2[128], err[512];
    const char *h[] = {exe, "--help", NULL};
    int status = -1;
    CHECKF(compat_run_io(h, out, out, &status, err, sizeof err) == 0, "%s --help: %s", exe, err);
    CHECKF(status == 0, "%s --help exited %d, not 0 (as every other tool)", exe, status);
    char *text = t_read_file(out, NULL);
    snprintf(want, sizeof want, "usage: %s ", name);
    CHECKF(text && strstr(text, want), "%s --help does not say '%s':\n%s", exe, want, text ? text : "");
    CHECKF(text && longest_line(text) <= 80, "%s --help has a line of %d characters:\n%s", exe,
           text ? longest_line(text) : -1, text ? text : "");
    free(text);
    const char *bad[] = {exe, "--no-such-flag", NULL};
    status = -1;
    CHECKF(compat_run_io(bad, out, out, &status, err, sizeof err) == 0, "%s --no-such-flag: %s", exe, err);
    CHECKF(status == 2, "%s --no-such-flag exited %d, not 2 (usage)", exe, status);
    text = t_read_file(out, NULL);
    snprintf(bad1, sizeof bad1, "usage: %s ", bare);
    snprintf(bad2, sizeof bad2, "%s: ", bare);
    int bare_prefix = text && strncmp(text, bad2, strlen(bad2)) == 0;
    snprintf(bad2, sizeof bad2, "\n%s: ", bare);
    bare_prefix |= text && strstr(text, bad2) != NULL;
    CHECKF(text && strstr(text, name) && !strstr(text, bad1) && !bare_prefix,
           "%s --no-such-flag does not call itself %s:\n%s", exe, name, text ? text : "");
    free(text);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_install CMAKE BUILD_DIR VERSION\n");
        return 2;
    }
#ifdef _WIN32
    if (argv[2][0] == '/') { /* a Unix build directory: cross-built, run under wine */
        printf("test_install: cross build under wine (build directory %s): skipped\n", argv[2]);
        return 77;
    }
#endif
    const char *base = t_scratch("install");
    char prefix[700], out[760], err[512];
    snprintf(prefix, sizeof prefix, "%s/prefix", base);
    snprintf(out, sizeof out, "%s/out.txt", base);
    const char *inst[] = {argv[1], "--install", argv[2], "--prefix", prefix, NULL};
    int status = -1;
    if (compat_run_io(inst, out, out, &status, err, sizeof err) != 0) {
        printf("test_install: cannot run %s (%s): skipped\n", argv[1], err);
        return 77;
    }
    char *text = t_read_file(out, NULL);
    CHECKF(status == 0, "cmake --install exited %d:\n%s", status, text);
    free(text);
    const char *const progs[][2] = {{"selfplay", "selfplay"},         {"train", "train"},
                                    {"koma", "koma"},                 {"koma-import", "koma-import"},
                                    {"koma-inspect", "koma-inspect"}, {"koma-report", "koma-report"},
                                    {"koma-usi-match", "koma-usi-match"}, {"koma-perft", "koma-perft"},
                                    {"koma-genconfig", "koma-genconfig"}, {"koma-export", "koma-export"}};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char exe[800], want[128];
        snprintf(exe, sizeof exe, "%s/bin/%s", prefix, progs[i][0]);
        const char *v[] = {exe, "--version", NULL};
        status = -1;
        CHECKF(compat_run_io(v, out, out, &status, err, sizeof err) == 0 && status == 0, "%s --version: %s", exe, err);
        text = t_read_file(out, NULL);
        snprintf(want, sizeof want, "%s (Koma) %s\n", progs[i][1], argv[3]);
        /* the first line as scripts read it; then the commit and the parts built in */
        CHECKF(strncmp(text, want, strlen(want)) == 0, "%s --version printed '%s', not '%s' first", exe, text, want);
        const char *rest = text + strcspn(text, "\n") + (text[strcspn(text, "\n")] ? 1 : 0);
        CHECKF(strncmp(rest, "commit ", 7) == 0 && strstr(rest, "\nCUDA: ") && strstr(rest, "; oneDNN: ") &&
                   strstr(rest, "; BLAS: ") && strstr(rest, "\nMPI: ") && strstr(rest, "; NCCL: "),
               "%s --version names no commit or parts built in:\n%s", exe, text);
        CHECKF(longest_line(text) <= 80, "%s --version has a line of %d characters:\n%s", exe, longest_line(text),
               text);
        free(text);
        if (strncmp(progs[i][0], "koma-", 5) == 0) check_names(exe, progs[i][0], out);
    }
    const char *const configs[] = {"cpu.ini", "gpu.ini"};
    for (int i = 0; i < 2; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/share/koma/configs/%s", prefix, configs[i]);
        CHECKF(compat_file_exists(p), "%s was not installed", p);
    }
    /* the shipped net: installed beside the programs, and the installed koma plays it by default (its Net
     * option's default names it, isready loads it: readyok) */
    char net[800], koma[800];
    snprintf(net, sizeof net, "%s/share/koma/nets/koma-default.safetensors", prefix);
    snprintf(koma, sizeof koma, "%s/bin/koma", prefix);
    CHECKF(compat_file_exists(net), "%s was not installed", net);
    const char *k[] = {koma, "usi", "isready", "quit", NULL};
    status = -1;
    CHECKF(compat_run_io(k, out, out, &status, err, sizeof err) == 0 && status == 0, "%s usi isready: %s (status %d)",
           koma, err, status);
    text = t_read_file(out, NULL);
    CHECKF(text && strstr(text, "option name Net type filename default ") && strstr(text, "koma-default.safetensors") &&
               strstr(text, "\nreadyok"),
           "the installed koma does not play the installed net by default:\n%s", text ? text : "(no output)");
    free(text);
    char lic[800];
    snprintf(lic, sizeof lic, "%s/share/doc/koma/LICENSE", prefix);
    text = t_read_file(lic, NULL);
    CHECKF(text && strstr(text, "MIT License"), "%s was not installed", lic);
    free(text);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_install");
}
