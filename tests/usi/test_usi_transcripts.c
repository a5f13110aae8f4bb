/* test_usi_transcripts.c - replays every tests/data/usi/<name>.usi transcript
 * against the real koma binary.
 *
 * Transcript lines (one action each; '#' starts a comment line):
 *   > TEXT              send TEXT to koma
 *   < PREFIX            wait (USI_WAIT_MS) for a line starting with PREFIX
 *   <N PREFIX           the same, waiting at most N ms (a bound on time: a clock)
 *   ~ N                 read what comes for N ms
 *   ! none PREFIX       no line starting with PREFIX since the last match
 *   ! legal POS         the last matched line is "bestmove M ..." with M legal
 *                       in POS = startpos|sfen <sfen> [moves ...]
 *   ! exit N            koma exits within N ms with status 0 (a hang guard:
 *                       quit with nothing searching, N long for any load)
 * A transcript fails at its first broken expectation, naming file and line. */
#include "usi_test.h"

static const char *last_match;

static bool legal_in(const char *spec, const char *bm) {
    pos_t *pos = malloc(sizeof *pos);
    char sfen[256] = "startpos", moves[8192] = "";
    const char *mv = strstr(spec, " moves ");
    if (strncmp(spec, "sfen ", 5) == 0) {
        size_t n = mv ? (size_t)(mv - spec - 5) : strlen(spec + 5);
        snprintf(sfen, sizeof sfen, "%.*s", (int)n, spec + 5);
    }
    if (mv) snprintf(moves, sizeof moves, "%s", mv + 7);
    char txt[16];
    bool ok = play_moves(pos, sfen, moves) && bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE;
    free(pos);
    return ok;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        CHECKF(0, "%s: cannot open", path);
        return 1;
    }
    usi_proc_t p;
    int before = g_fail;
    CHECKF(proc_start(&p, NULL), "%s: start", path);
    char line[8192];
    int ln = 0, since = 0;
    bool exited = false;
    last_match = NULL;
    while (fgets(line, sizeof line, f) && g_fail == before) {
        ln++;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        if (line[0] == '>') {
            proc_send(&p, "%s", line + 2);
        } else if (line[0] == '<') {
            int ms = USI_WAIT_MS;
            const char *prefix = line + 1;
            if (*prefix >= '0' && *prefix <= '9') ms = (int)strtol(prefix, (char **)&prefix, 10);
            if (*prefix == ' ') prefix++;
            last_match = proc_expect(&p, prefix, ms);
            CHECKF(last_match != NULL, "%s:%d: no '%s' within %d ms", path, ln, prefix, ms);
            since = p.mark;
        } else if (line[0] == '~') {
            proc_drain(&p, atoi(line + 1));
        } else if (strncmp(line, "! none ", 7) == 0) {
            const char *hit = proc_find(&p, since, p.n_lines, line + 7);
            CHECKF(!hit, "%s:%d: unexpected '%s'", path, ln, hit ? hit : "");
        } else if (strncmp(line, "! legal ", 8) == 0) {
            CHECKF(last_match && legal_in(line + 8, last_match), "%s:%d: '%s' is not a legal bestmove in %s", path, ln,
                   last_match ? last_match : "-", line + 8);
        } else if (strncmp(line, "! exit ", 7) == 0) {
            exited = proc_wait_exit(&p, atoi(line + 7));
            CHECKF(exited && p.status == 0, "%s:%d: koma did not exit cleanly", path, ln);
        } else {
            CHECKF(0, "%s:%d: bad transcript line '%s'", path, ln, line);
        }
    }
    fclose(f);
    if (g_fail != before) proc_dump(&p, path);
    proc_end(&p);
    return g_fail != before;
}

typedef struct {
    char names[64][256];
    int n;
} names_t;

static int add_usi(const char *name, int is_dir, void *user) {
    names_t *l = user;
    size_t n = strlen(name);
    if (!is_dir && n > 4 && strcmp(name + n - 4, ".usi") == 0 && l->n < 64)
        snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return 0;
}

int main(void) {
    watchdog(170);
    const char *dir = KOMA_SOURCE_DIR "/tests/data/usi";
    static names_t list;
    char err[512] = "";
    CHECKF(compat_list_dir(dir, add_usi, &list, err, sizeof err) == 0, "%s", err); /* in strcmp order */
    CHECKF(list.n >= 3, "transcripts found: %d", list.n);
    for (int i = 0; i < list.n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, list.names[i]);
        int bad = run_file(path);
        printf("%s: %s\n", list.names[i], bad ? "FAILED" : "ok");
    }
    return t_done("test_usi_transcripts");
}
