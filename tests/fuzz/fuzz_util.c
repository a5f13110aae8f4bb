/* fuzz_util.c - helpers of fuzz.h (scratch files). */
#include "fuzz.h"

#include <string.h>

#include "compat/compat.h"

static char g_path[1200];

static void remove_scratch(void) {
    if (g_path[0]) compat_remove_file(g_path);
}

const char *fuzz_scratch_file(const char *tag, const uint8_t *data, size_t size) {
    if (!g_path[0]) {
        const char *dir = compat_is_dir("/dev/shm") ? "/dev/shm" : compat_temp_dir();
        snprintf(g_path, sizeof g_path, "%s/koma_fuzz_%s_%d.bin", dir, tag, compat_getpid());
        atexit(remove_scratch);
    }
    FILE *f = fopen(g_path, "wb");
    FUZZ_CHECK(f != NULL, "cannot create %s", g_path);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size, "cannot write %s", g_path);
    FUZZ_CHECK(fclose(f) == 0, "cannot close %s", g_path);
    return g_path;
}
