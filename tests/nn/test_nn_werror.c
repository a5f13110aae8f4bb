/* test_nn_werror.c - KOMA_WERROR holds for the CUDA sources as for the C ones.
 *
 * The build's own compile commands (compile_commands.json in the build
 * directory, which CMake writes at configure) are replayed on small probe
 * files in place of a real source: nn's first .c file for a C probe, its
 * first .cu file for two CUDA probes, so every flag the build passes
 * (-Wall -Wextra, -Werror, nvcc's --Werror=all-warnings, -Xcompiler=-Werror)
 * is the one the build used. Each probe holds one warning:
 *   - C:           a signed/unsigned comparison (the C compiler's -Wsign-compare);
 *   - CUDA host:   the same in host code of a .cu (nvcc's host compiler, which
 *                  gets -Wall -Wextra through -forward-unknown-to-host-compiler);
 *   - CUDA device: an unused variable in a kernel (nvcc's front end, #177-D).
 * With KOMA_WERROR on (read from CMakeCache.txt) every probe fails to compile
 * and names its warning; with it off every probe compiles and still shows it.
 * The compiler's dependency-file options (-MD -MF ...) are dropped and the
 * object goes to the scratch directory: the build tree is never written.
 *
 * Skips (77) on Windows (the commands are the host's, not wine's) and where
 * the generator writes no compile_commands.json; the CUDA probes run where
 * the CUDA backend is built (KOMA_HAVE_CUDA), no device needed. */
#include <cjson/cJSON.h>
#include <ctype.h>

#include "tests/koma_test.h"

#ifdef _WIN32
int main(void) {
    printf("test_nn_werror: skipped (the build's compile commands are the host's)\n");
    return 77;
}
#else

#define MAX_WORDS 512

/* Splits a command line as a POSIX shell splits words (CMake quotes with
 * '...', "..." and backslashes): each word malloc'ed into words; returns the
 * count, or -1 when there are more than max. */
static int split_words(const char *s, char **words, int max) {
    int n = 0;
    size_t cap = strlen(s) + 1;
    while (*s) {
        while (*s && isspace((unsigned char)*s)) s++;
        if (!*s) break;
        if (n == max) return -1;
        char *w = malloc(cap), *o = w;
        KOMA_ASSERT(w);
        int dq = 0;
        while (*s && (dq || !isspace((unsigned char)*s))) {
            char c = *s++;
            if (!dq && c == '\'') {
                while (*s && *s != '\'') *o++ = *s++;
                if (*s) s++;
            } else if (c == '"') {
                dq = !dq;
            } else if (c == '\\' && *s && (!dq || strchr("$`\"\\\n", *s))) {
                *o++ = *s++;
            } else {
                *o++ = c;
            }
        }
        *o = '\0';
        words[n++] = w;
    }
    return n;
}

/* The entry of compile_commands.json whose file is in nn/ and ends with suffix, or NULL. */
static const cJSON *find_entry(const cJSON *db, const char *suffix) {
    const cJSON *e;
    cJSON_ArrayForEach(e, db) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(e, "file"));
        if (!file || !strstr(file, "/nn/")) continue;
        size_t n = strlen(file), k = strlen(suffix);
        if (n > k && strcmp(file + n - k, suffix) == 0) return e;
    }
    return NULL;
}

/* Compiles the probe text (as file name probe) with entry's command, run in
 * entry's directory; returns the compiler's exit status, or -1 when the
 * command could not be replayed. Its stdout and stderr go to out_path. */
static int replay(const cJSON *entry, const char *probe, const char *text, const char *out_path) {
    const char *dir = cJSON_GetStringValue(cJSON_GetObjectItem(entry, "directory"));
    const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItem(entry, "command"));
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(entry, "file"));
    CHECKF(dir && cmd && file, "compile_commands.json: an entry without directory, command or file");
    if (!dir || !cmd || !file) return -1;
    char err[512], src[800], obj[900];
    snprintf(src, sizeof src, "%s", t_path(probe));
    snprintf(obj, sizeof obj, "%s.o", src);
    FILE *f = fopen(src, "w");
    KOMA_ASSERT(f);
    fputs(text, f);
    KOMA_ASSERT(fclose(f) == 0);

    /* sh -c 'cd "$0" && exec "$@"' dir argv...: the command in its directory, no quoting. */
    char *words[MAX_WORDS];
    int n = split_words(cmd, words, MAX_WORDS);
    CHECKF(n > 0, "compile command of %s: %d words", file, n);
    if (n <= 0) return -1;
    const char *argv[MAX_WORDS + 5];
    int a = 0, saw_src = 0, saw_obj = 0;
    argv[a++] = "/bin/sh";
    argv[a++] = "-c";
    argv[a++] = "cd \"$0\" && exec \"$@\"";
    argv[a++] = dir;
    for (int i = 0; i < n; i++) {
        const char *w = words[i];
        if (strcmp(w, "-MD") == 0 || strcmp(w, "-MMD") == 0) continue;
        if (strcmp(w, "-MT") == 0 || strcmp(w, "-MF") == 0 || strcmp(w, "-MQ") == 0) {
            i++;
            continue;
        }
        if (strcmp(w, file) == 0) {
            argv[a++] = src;
            saw_src = 1;
        } else if (strcmp(w, "-o") == 0 && i + 1 < n) {
            argv[a++] = w;
            argv[a++] = obj;
            i++;
            saw_obj = 1;
        } else {
            argv[a++] = w;
        }
    }
    argv[a] = NULL;
    CHECKF(saw_src && saw_obj, "compile command of %s: source %s, -o %s", file, saw_src ? "found" : "missing",
           saw_obj ? "found" : "missing");
    int status = -1;
    if (saw_src && saw_obj && compat_run_io(argv, out_path, out_path, &status, err, sizeof err) != 0) {
        t_fail(__FILE__, __LINE__, "", "%s: %s", probe, err);
        status = -1;
    }
    for (int i = 0; i < n; i++) free(words[i]);
    return saw_src && saw_obj ? status : -1;
}

/* One probe: with werror it must fail naming the warning, without it compile and show it. */
static void probe(const cJSON *entry, const char *name, const char *text, const char *warning, int werror) {
    char out[900];
    snprintf(out, sizeof out, "%s.log", t_path(name));
    int status = replay(entry, name, text, out);
    if (status < 0) return;
    char *log = t_read_file(out, NULL);
    if (werror)
        CHECKF(status != 0 && strstr(log, warning),
               "%s with KOMA_WERROR=ON: status %d, want a failure naming %s; output:\n%.3000s", name, status, warning,
               log);
    else
        CHECKF(status == 0 && strstr(log, warning),
               "%s with KOMA_WERROR=OFF: status %d, want success showing %s; output:\n%.3000s", name, status, warning,
               log);
    printf("%s: status %d, %s %s\n", name, status, strstr(log, warning) ? "names" : "does not name", warning);
    free(log);
}

/* KOMA_WERROR's value in the build's CMakeCache.txt: 1 on, 0 off, -1 not found. */
static int cache_werror(const char *build) {
    char path[900];
    snprintf(path, sizeof path, "%s/CMakeCache.txt", build);
    char *cache = t_read_file(path, NULL);
    const char *v = strstr(cache, "\nKOMA_WERROR:BOOL=");
    int on = -1;
    if (v) {
        v += strlen("\nKOMA_WERROR:BOOL=");
        on = 0;
        const char *yes[] = {"ON\n", "1\n", "YES\n", "TRUE\n", "Y\n", "on\n", "yes\n", "true\n"};
        for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) on |= strncmp(v, yes[i], strlen(yes[i])) == 0;
    }
    free(cache);
    return on;
}

int main(void) {
    char build[700], path[900];
    snprintf(build, sizeof build, "%s", KOMA_TEST_TMP);
    char *slash = strrchr(build, '/');
    KOMA_ASSERT(slash);
    *slash = '\0'; /* KOMA_TEST_TMP is <build>/test_tmp */
    snprintf(path, sizeof path, "%s/compile_commands.json", build);
    char *text = t_read_file(path, NULL);
    if (!*text) {
        printf("test_nn_werror: skipped (no %s: this generator writes none)\n", path);
        free(text);
        return 77;
    }
    cJSON *db = cJSON_Parse(text);
    free(text);
    CHECKF(cJSON_IsArray(db), "%s: not a JSON array", path);
    int werror = cache_werror(build);
    CHECKF(werror >= 0, "%s/CMakeCache.txt: no KOMA_WERROR", build);
    printf("KOMA_WERROR=%s in %s\n", werror ? "ON" : "OFF", build);
    t_scratch("nn_werror");

    const cJSON *c = find_entry(db, ".c");
    CHECKF(c, "%s: no nn/*.c entry", path);
    if (c)
        probe(c, "probe.c", "int probe(int a, unsigned b);\nint probe(int a, unsigned b) { return a < b; }\n",
              "sign-compare", werror == 1);
#ifdef KOMA_HAVE_CUDA
    const cJSON *cu = find_entry(db, ".cu");
    CHECKF(cu, "%s: no nn/*.cu entry in a build with the CUDA backend", path);
    if (cu) {
        probe(cu, "probe_host.cu", "int probe_host(int a, unsigned b) { return a < b; }\n", "sign-compare",
              werror == 1);
        probe(cu, "probe_device.cu", "__global__ void probe_device(int *p) { int unused; p[0] = 1; }\n", "#177-D",
              werror == 1);
    }
#else
    printf("no CUDA backend in this build: the CUDA probes are not run\n");
#endif
    cJSON_Delete(db);
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_nn_werror");
}
#endif /* _WIN32 */
