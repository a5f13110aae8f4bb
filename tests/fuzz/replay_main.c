/* replay_main.c - runs a fuzz target without libFuzzer: every file named on
 * the command line, and every file in every directory named there (sorted),
 * goes through LLVMFuzzerTestOneInput once. A finding aborts (FUZZ_CHECK,
 * sanitizers) and fails the ctest case. An empty or missing corpus fails too:
 * a replay that runs nothing cannot catch anything.
 *
 *   fuzz_<name>_replay tests/data/fuzz/<name> [more files or dirs]
 */
#include <string.h>

#include "compat/compat.h"
#include "fuzz.h"

static int64_t g_runs;

static int run_file(const char *path) {
    char err[512];
    size_t len = 0;
    char *buf = compat_read_file(path, &len, err, sizeof err);
    if (!buf) {
        fprintf(stderr, "replay: %s\n", err);
        return -1;
    }
    /* An exact-size copy, so ASan sees reads past the input's end. */
    uint8_t *data = malloc(len ? len : 1);
    if (!data) {
        free(buf);
        return -1;
    }
    memcpy(data, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    g_runs++;
    return 0;
}

typedef struct {
    const char *dir;
    int failed;
} walk_t;

static int on_entry(const char *name, int is_dir, void *user) {
    walk_t *w = user;
    if (is_dir || name[0] == '.') return 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", w->dir, name);
    if (run_file(path) != 0) w->failed = 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        char err[512];
        if (compat_is_dir(argv[i])) {
            walk_t w = {argv[i], 0};
            if (compat_list_dir(argv[i], on_entry, &w, err, sizeof err) != 0) {
                fprintf(stderr, "replay: %s\n", err);
                failed = 1;
            }
            failed |= w.failed;
        } else if (run_file(argv[i]) != 0) {
            failed = 1;
        }
    }
    printf("replay: %lld inputs, no finding\n", (long long)g_runs);
    if (g_runs == 0) {
        fprintf(stderr, "replay: no input found: an empty corpus tests nothing\n");
        return 1;
    }
    return failed;
}
