/* test_run_names.c - a run directory's layout has one owner (data/run.h):
 * no source file of a program or module outside data/run.c spells a run's
 * file names into a path by hand ("%s/koma.db", "%s/log", "%s/models", ...);
 * they go through run_path and the RUN_* names, so that a change of layout
 * is made once (issue 46: tools/loop_summary.c and bench/bench_ranks.c had
 * grown their own copies again). Tests are left out: they check the layout
 * from the outside, by its names.
 * Reads the source tree (KOMA_SOURCE_DIR); writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/run.h"
#include "tests/koma_test.h"

static const char *const g_dirs[] = {"compat", "config", "engine",   "nn",  "dist",  "mcts", "data",
                                     "match",  "train",  "selfplay", "usi", "tools", "bench"};

typedef struct {
    const char *dir;
    int files, found;
} scan_t;

static void scan_file(scan_t *s, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    size_t n = strlen(name);
    if (n < 3 ||
        (strcmp(name + n - 2, ".c") != 0 && strcmp(name + n - 2, ".h") != 0 && strcmp(name + n - 3, ".cu") != 0))
        return;
    if (!strcmp(path, KOMA_SOURCE_DIR "/data/run.c")) return; /* the owner */
    char *text = t_read_file(path, NULL);
    if (!text) return;
    s->files++;
    static const char *const names[] = {RUN_DB,     RUN_LOG,   RUN_LOCK,   RUN_MODELS,
                                        RUN_SHARDS, RUN_TRAIN, RUN_REPORT, "orphans"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"%%s/%s", names[i]); /* "%s/koma.db ... */
        for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat)) {
            char after = p[strlen(pat)];
            if (after != '"' && after != '/') continue; /* "%s/logs.txt" is no run's file */
            int line = 1;
            for (const char *q = text; q < p; q++) line += *q == '\n';
            CHECKF(0, "%s:%d: a run's path built by hand (%s...\"): use run_path(dir, RUN_..., ...) of data/run.h",
                   path, line, pat);
            s->found++;
        }
    }
    free(text);
}

static int entry(const char *name, int is_dir, void *user) {
    if (!is_dir) scan_file(user, name);
    return 0;
}

int main(void) {
    int files = 0;
    for (size_t i = 0; i < sizeof g_dirs / sizeof g_dirs[0]; i++) {
        char dir[1000];
        snprintf(dir, sizeof dir, "%s/%s", KOMA_SOURCE_DIR, g_dirs[i]);
        scan_t s = {dir, 0, 0};
        if (compat_is_dir(dir)) compat_list_dir(dir, entry, &s, NULL, 0);
        files += s.files;
    }
    CHECKF(files > 100, "only %d source files read under %s: not the source tree", files, KOMA_SOURCE_DIR);
    printf("%d source files read\n", files);
    return t_done("test_run_names");
}
