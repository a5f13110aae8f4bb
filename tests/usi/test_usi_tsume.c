/* test_usi_tsume.c - tests/data/tsume.txt measured again by an independent
 * search: usi/mate.c's iterative deepening (exhaustive over checks, shortest
 * first; no df-pn code) finds every stated mate at exactly its length with a
 * line the brute force (mate_bf.h) accepts, and proves every `nomate`
 * position mate-free within USI_MATE_PLY_MAX plies. test_dfpn holds df-pn to
 * the same file. */
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "tests/koma_test.h"
#include "usi/mate.h"

#include "mate_bf.h"

int main(void) {
    engine_init();
    pos_t *pos = malloc(sizeof *pos);
    const char *path = "tests/data/tsume.txt";
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "cannot open %s (run from the source root)", path);
    char line[2048];
    int lineno = 0, mates = 0, nomates = 0;
    while (f && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0) continue;
        char *semi = strchr(line, ';');
        if (!semi) {
            CHECKF(0, "%s:%d: want 'SFEN ; plies|nomate'", path, lineno);
            continue;
        }
        char *e = semi;
        while (e > line && e[-1] == ' ') e--;
        *e = 0;
        const char *want = semi + 1;
        while (*want == ' ') want++;
        char err[256];
        if (strcmp(line, "startpos") == 0) pos_set_startpos(pos);
        else if (sfen_parse_cstr(pos, line, err, sizeof err) != SFEN_OK) {
            CHECKF(0, "%s:%d: %s", path, lineno, err);
            continue;
        }
        usi_mate_limits_t lim;
        usi_mate_limits_default(&lim);
        lim.deadline_ms = compat_now_ms() + 60000;
        lim.tt_log2 = 22;
        usi_mate_result_t r;
        usi_mate_search(pos, &lim, &r);
        if (strcmp(want, "nomate") == 0) {
            nomates++;
            CHECKF(r.status == USI_MATE_NONE, "%s:%d: %s: status %d, want nomate", path, lineno, line, (int)r.status);
            continue;
        }
        mates++;
        int plies = atoi(want);
        CHECKF(r.status == USI_MATE_FOUND && r.len == plies, "%s:%d: %s: status %d len %d, want %d", path, lineno, line,
               (int)r.status, r.len, plies);
        if (r.status != USI_MATE_FOUND) continue;
        char text[1024];
        size_t u = 0;
        text[0] = 0;
        for (int32_t i = 0; i < r.len && u + 8 < sizeof text; i++) {
            char m[MOVE_USI_MAX];
            move_to_usi(r.pv[i], m);
            u += (size_t)snprintf(text + u, sizeof text - u, "%s%s", i ? " " : "", m);
        }
        int n = 0;
        CHECKF(bf_verify_line(pos, text, &n) && n == plies, "%s:%d: '%s' is not a mate", path, lineno, text);
        /* the brute force: no mate shorter than the stated length (up to 5 plies, where it is cheap) */
        if (plies >= 3 && plies <= 7) CHECKF(!bf_or(pos, plies - 2), "%s:%d: a shorter mate", path, lineno);
    }
    if (f) fclose(f);
    CHECKF(mates >= 40 && nomates >= 5, "%d mates, %d nomates", mates, nomates);
    free(pos);
    return t_done("test_usi_tsume");
}
