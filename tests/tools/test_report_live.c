/* test_report_live.c - a report that follows the run: the real `selfplay`
 * (tiny net, a few visits, an evaluation after every net) rewrites
 * RUN/report.html while it runs; the page says so ("while the run was
 * going"), shows the games of the nets so far (net 0's, then the next
 * nets' after each new net and its evaluation) on the board with their values
 * (Black's win probability per ply, from the shards' root_q) and the
 * search's top moves, and is never seen half-written (every read of it is a
 * whole page: written to a temporary name and renamed). After Ctrl-C the
 * last page says the run had stopped. report --db on the run's database
 * finds the shards beside it; with the shard files damaged the page still
 * comes (exit 0), its games without values and the shard named. With
 * --report 0 no page is written.
 * Every wait is for the page's content or the process's exit, bounded;
 * never a sleep for a time.
 *
 *   test_report_live SELFPLAY REPORT
 */
#include "tools_test.h"

#define SP_ARGS(dir, cycles)                                                                                           \
    selfplay, "--run", dir, "--cycles", cycles, "--games-per-cycle", "4", "--threads", "1", "--games-per-thread", "2", \
        "--visits", "8", "--visits-fast", "4", "--max-ply", "60", "--net", "2x16", "--progress", "0",                  \
        "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--cpu-threads", "1", "--train-threads", "1",      \
        "--cache-mb", "1", "--eval-every", "1", "--eval-games", "2", "--eval-visits", "4", "--full-prob", "0.5"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* A whole page: its start and its end. */
static int whole(const char *s, size_t n) {
    return n > 20 && !strncmp(s, "<!DOCTYPE html>", 15) && !strcmp(s + n - 8, "</html>\n");
}

/* compat_list_dir's callbacks: a shard file cut to half its length; files counted. */
static int cut_in_half(const char *name, int is_dir, void *dir) {
    char path[1400], err[256];
    snprintf(path, sizeof path, "%s/%s", (const char *)dir, name);
    size_t len = 0;
    char *data = is_dir ? NULL : compat_read_file(path, &len, err, sizeof err);
    FILE *f = data ? fopen(path, "wb") : NULL;
    if (f) fwrite(data, 1, len / 2, f), fclose(f);
    free(data);
    return 0;
}

static int count_files(const char *name, int is_dir, void *n) {
    (void)name;
    *(int *)n += !is_dir;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_report_live SELFPLAY REPORT\n");
        return 2;
    }
    const char *selfplay = argv[1], *report = argv[2];
    t_scratch("test_report_live");
    char run[900], page[1000], err[512];
    snprintf(run, sizeof run, "%s", t_path("run"));
    snprintf(page, sizeof page, "%s/report.html", run);

    /* a long run, followed until its page shows a net's games with values, then Ctrl-C */
    const char *sp[] = {SP_ARGS(run, "1000"), NULL};
    compat_proc_t *p = compat_proc_spawn(sp, t_path("selfplay.log"), err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", selfplay, err);
        return 2;
    }
    char *html = NULL;
    int reads = 0, torn = 0, seen = 0, status = -1;
    char line[512];
    for (int64_t t0 = compat_now_ms(); compat_now_ms() - t0 < 300000;) {
        while (compat_proc_read_line(p, line, sizeof line, 0) >= 0) {} /* (selfplay's stdout, drained) */
        if (compat_proc_wait(p, 20, &status) == 0) break;              /* it ended: the checks below fail */
        size_t n = 0;
        char *s = compat_read_file(page, &n, NULL, 0);
        if (!s) continue;
        reads++;
        torn += !whole(s, n);
        if (whole(s, n) && strstr(s, "while the run was going") && strstr(s, "\"v\":\"") && strstr(s, "\"t\":[[") &&
            count(s, "\"title\":\"net ") >= 2) {
            html = s;
            seen = 1;
            break;
        }
        if (reads % 500 == 1)
            fprintf(stderr, "read %d: whole %d going %d values %d search %d nets %d\n", reads, whole(s, n),
                    strstr(s, "while the run was going") != NULL, strstr(s, "\"v\":\"") != NULL,
                    strstr(s, "\"t\":[[") != NULL, count(s, "\"title\":\"net "));
        free(s);
    }
    CHECKF(seen, "no page with the run going, values, search moves and two nets' games (%d reads)", reads);
    CHECKF(torn == 0, "%d of %d reads of report.html found a partial page", torn, reads);
    if (html) {
        CHECK(count(html, "<h2>Games on the board</h2>") == 1 && count(html, "window.KOMA_GAMES=") == 1);
        CHECK(count(html, "\"title\":\"net 0 · longest") == 1);
        /* a value is one of A-Z a-z 0-9 - _ per position, '.' where none was stored */
        const char *v = strstr(html, "\"v\":\"") + 5;
        size_t k = 0;
        while (v[k] && v[k] != '"' &&
               (strchr("._-", v[k]) || (v[k] >= 'A' && v[k] <= 'Z') || (v[k] >= 'a' && v[k] <= 'z') ||
                (v[k] >= '0' && v[k] <= '9')))
            k++;
        CHECKF(v[k] == '"' && k > 10, "values: %.40s", v);
        CHECK(count(html, "search policy (Gumbel: improved policy)") == 1);
    }
    free(html);
    /* Ctrl-C (where it can be sent: SIGINT, or Ctrl-Break under Windows): the last page says the run stopped */
    if (compat_proc_interrupt(p) == 0) {
        int still = compat_proc_wait(p, 120000, &status);
        if (still) compat_proc_kill(p);
        CHECKF(!still && status == 130, "selfplay after Ctrl-C: %s, status %d", still ? "still running" : "exited",
               status);
        size_t n = 0;
        html = compat_read_file(page, &n, err, sizeof err);
        CHECKF(html && whole(html, n) && strstr(html, "by selfplay as the run stopped") &&
                   !strstr(html, "while the run was going"),
               "the last page: %.300s", html ? strstr(html, "report written") : err);
        free(html);
    } else {
        printf("Ctrl-C cannot be sent here: the page written as the run stops is not checked\n");
        compat_proc_kill(p);
    }
    compat_proc_free(p);

    /* report --db: the shards beside the database; then every shard file cut in half */
    char dbp[1000];
    snprintf(dbp, sizeof dbp, "%s/koma.db", run);
    const char *rep_db[] = {report, "--db", dbp, "-o", t_path("db.html"), NULL};
    CHECK(t_run(rep_db) == 0);
    html = compat_read_file(t_path("db.html"), NULL, err, sizeof err);
    CHECK(html && strstr(html, "\"v\":\"") && strstr(html, "by report"));
    free(html);
    char shards[1000];
    int cut = 0;
    snprintf(shards, sizeof shards, "%s/shards", run);
    CHECK(compat_list_dir(shards, cut_in_half, (void *)shards, err, sizeof err) == 0);
    CHECK(compat_list_dir(shards, count_files, &cut, err, sizeof err) == 0 && cut > 0);
    const char *rep_cut[] = {report, run, "-o", t_path("cut.html"), NULL};
    CHECK(t_run(rep_cut) == 0);
    html = compat_read_file(t_path("cut.html"), NULL, err, sizeof err);
    CHECKF(html && !strstr(html, "\"v\":\"") && strstr(html, "values not available: ") && strstr(html, "/shards/c0"),
           "the page of a run whose shards are cut: %.200s", html ? strstr(html, "values not") : err);
    free(html);

    /* --report 0: none */
    char off[900];
    snprintf(off, sizeof off, "%s", t_path("off"));
    const char *sp0[] = {SP_ARGS(off, "1"), "--report", "0", NULL};
    CHECK(t_run(sp0) == 0);
    snprintf(page, sizeof page, "%s/report.html", off);
    CHECK(compat_file_exists(t_path("off/koma.db")) && !compat_file_exists(page));

    int rc = t_done("test_report_live");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
