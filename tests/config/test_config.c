/* test_config.c - flags, INI flag sets, precedence and error messages;
 * LIST rows (a flag given more than once). */
#include "compat/compat.h"
#include "config/config.h"
#include "tests/koma_test.h"

#include <stdlib.h>
#include <string.h>

static int64_t cycles;
static double lr;
static int gumbel;
static char net[CFG_STRING_MAX];

static const cfg_opt_t opts[] = {
    {"cycles", CFG_TYPE_INT, &cycles, 1, 1e9, "cycles to run"},
    {"lr", CFG_TYPE_DOUBLE, &lr, 0, 10, "learning rate"},
    {"gumbel", CFG_TYPE_BOOL, &gumbel, 1, 0, "Gumbel root search"},
    {"net", CFG_TYPE_STRING, net, 1, 0, "net size"},
};
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

static void reset(void) {
    cycles = 50;
    lr = 0.1;
    gumbel = 0;
    strcpy(net, "6x64");
}

static int parse(int argc, char **argv, char *err, size_t n) {
    char *pos[4];
    int npos = 0;
    FILE *devnull = fopen(KOMA_TEST_TMP "/config_help.txt", "w");
    int rc = cfg_parse(opts, NOPTS, argc, argv, 1, pos, 4, &npos, "usage: test", devnull ? devnull : stdout, err, n);
    if (devnull) fclose(devnull);
    return rc;
}

/* A LIST row: every --opt and every file line adds a value, in order (the
 * file's first, as for every row); "" empties it; the default replaces it;
 * dumps write a line per value and load back the same list; a value with a
 * control character or past the size is refused, naming the row. */
static void test_list(const char *ini) {
    char err[600], list[64], tail[16] = "", *pos[2];
    int npos = 0, w = 0, given = 0;
    const cfg_opt_t lo[] = {
        {"opt", CFG_TYPE_LIST, list, 1, 0, "setoption (repeatable)", "", NULL, sizeof list, &given},
        {"tail", CFG_TYPE_STRING, tail, 1, 0, "a plain row after it", "", NULL, sizeof tail},
    };
    cfg_defaults(lo, 2);
    CHECK(list[0] == 0 && !given && cfg_list_item(list, 0, &w) == NULL);
    FILE *f = fopen(ini, "w");
    fprintf(f, "opt = Hash=16\nopt = Threads=2\n");
    fclose(f);
    char path[400];
    snprintf(path, sizeof path, "%s", ini);
    char *a[] = {"prog", "--opt", "USI_Ponder=false", "--config", path, "--opt=Name=x y"};
    CHECKF(cfg_parse(lo, 2, 6, a, 1, pos, 2, &npos, "usage", stdout, err, sizeof err) == CFG_OK, "%s", err);
    CHECKF(!strcmp(list, "Hash=16\nThreads=2\nUSI_Ponder=false\nName=x y") && given, "list '%s'", list);
    const char *p = cfg_list_item(list, 3, &w);
    CHECK(p && w == 8 && !strncmp(p, "Name=x y", 8) && !cfg_list_item(list, 4, &w));
    char v[128];
    cfg_value_string(&lo[0], v, sizeof v);
    CHECKF(!strcmp(v, "Hash=16, Threads=2, USI_Ponder=false, Name=x y"), "value string '%s'", v);
    char *dump = cfg_dump_string(lo, 2);
    CHECKF(dump && !strcmp(dump, "opt = Hash=16\nopt = Threads=2\nopt = USI_Ponder=false\nopt = Name=x y\ntail = \n"),
           "dump '%s'", dump ? dump : "-");
    compat_write_file_durable(ini, dump, strlen(dump), err, sizeof err);
    free(dump);
    cfg_defaults(lo, 2);
    CHECK(list[0] == 0);
    CHECKF(cfg_load_file(lo, 2, ini, err, sizeof err) == CFG_OK && !strcmp(list, "Hash=16\nThreads=2\nUSI_Ponder=false\nName=x y"),
           "reloaded '%s' (%s)", list, err);
    CHECK(cfg_set(lo, 2, "opt", "", err, sizeof err) == CFG_OK && list[0] == 0);
    CHECK(cfg_set(lo, 2, "opt", "a=1", err, sizeof err) == CFG_OK && !strcmp(list, "a=1"));
    CHECKF(cfg_set(lo, 2, "opt", "b\n=2", err, sizeof err) == CFG_ERROR && strstr(err, "control character") &&
               !strcmp(list, "a=1"),
           "%s", err);
    char big[80];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECKF(cfg_set(lo, 2, "opt", big, err, sizeof err) == CFG_ERROR && strstr(err, "'opt'") && strstr(err, "63") &&
               !strcmp(list, "a=1"),
           "%s", err);
}

/* Defaults stay when nothing is given; the file applies; the command line wins. */
static void test_precedence(char *ini) {
    char err[600];
    /* Defaults stay when nothing is given. */
    reset();
    char *a0[] = {"prog"};
    CHECK(parse(1, a0, err, sizeof err) == CFG_OK);
    CHECK(cycles == 50 && lr == 0.1 && !gumbel && !strcmp(net, "6x64"));

    /* File applies; command-line flags win regardless of order. */
    reset();
    char *a1[] = {"prog", "--cycles", "3", "--config", ini, "--no-gumbel"};
    CHECK(parse(6, a1, err, sizeof err) == CFG_OK);
    CHECK(cycles == 3);
    CHECK(lr == 0.02);
    CHECK(!strcmp(net, "10x128"));
    CHECK(gumbel == 0);

    reset();
    char *a2[] = {"prog", "--lr=0.5", "--gumbel"};
    CHECK(parse(3, a2, err, sizeof err) == CFG_OK);
    CHECK(lr == 0.5 && gumbel == 1);
}

/* Errors name the flag or the file (and its line). */
static void test_errors(char *ini, char *dir) {
    char err[600];
    FILE *f;
    /* Errors name the flag / the file. */
    reset();
    char *a3[] = {"prog", "--cycels", "3"};
    CHECK(parse(3, a3, err, sizeof err) == CFG_ERROR && strstr(err, "cycels"));
    char *a4[] = {"prog", "--cycles", "3x"};
    CHECK(parse(3, a4, err, sizeof err) == CFG_ERROR && strstr(err, "not an integer"));
    char *a5[] = {"prog", "--cycles", "0"};
    CHECK(parse(3, a5, err, sizeof err) == CFG_ERROR && strstr(err, "outside"));
    char *a6[] = {"prog", "--cycles"};
    CHECK(parse(2, a6, err, sizeof err) == CFG_ERROR && strstr(err, "needs a value"));
    char *a7[] = {"prog", "--config", KOMA_TEST_TMP "/missing.ini"};
    CHECK(parse(3, a7, err, sizeof err) == CFG_ERROR && strstr(err, "missing.ini"));
    f = fopen(ini, "w");
    fprintf(f, "cycles = 2\nbogus = 1\n");
    fclose(f);
    char *a8[] = {"prog", "--config", ini};
    CHECK(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:2: ") && strstr(err, "bogus"));
    /* The line number counts comments and blank lines. */
    f = fopen(ini, "w");
    fprintf(f, "# comment\n\n; another\ncycles = 2\nlr = fast\n");
    fclose(f);
    CHECK(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:5: ") && strstr(err, "'fast'"));
    f = fopen(ini, "w");
    fprintf(f, "cycles = 2\nthis line has no equals sign\n");
    fclose(f);
    CHECK(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:2: malformed line"));
    /* A line longer than inih's buffer is refused, not cut in two and its
     * value truncated. */
    f = fopen(ini, "w");
    fprintf(f, "cycles = 2\nnet = ");
    for (int i = 0; i < 300; i++) fputc('x', f);
    fprintf(f, "\ncycles = 3\n");
    fclose(f);
    reset();
    CHECK(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:2: line longer than"));
    CHECKF(!strcmp(net, "6x64"), "net was set to '%.20s...' from a cut line", net);
    /* A [section] header is refused with its line (a flag set is flat: inih
     * would file the keys under it and they were silently used). */
    f = fopen(ini, "w");
    fprintf(f, "cycles = 2\n\n  [selfplay]\ncycles = 3\n");
    fclose(f);
    reset();
    CHECKF(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:3: ") && strstr(err, "[section]"),
           "section header: %s", err);
    /* A key set twice is refused with both lines. */
    f = fopen(ini, "w");
    fprintf(f, "cycles = 2\nlr = 0.5\ncycles = 3\n");
    fclose(f);
    CHECKF(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "config_test.ini:3: ") &&
               strstr(err, "'cycles' is already set on line 1"),
           "duplicate key: %s", err);
    /* A directory or a FIFO named as the config file: refused by name, never
     * read (a FIFO blocked the open for ever). */
    char *a10[] = {"prog", "--config", dir};
    CHECKF(parse(3, a10, err, sizeof err) == CFG_ERROR && strstr(err, dir) && strstr(err, "is a directory"),
           "directory: %s", err);
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/config_fifo.ini", dir);
    compat_remove_file(fifo);
    const char *mk[] = {"mkfifo", fifo, NULL};
    int status = -1;
    if (compat_run(mk, &status, err, sizeof err) == 0 && status == 0) {
        char *a11[] = {"prog", "--config", fifo};
        CHECKF(parse(3, a11, err, sizeof err) == CFG_ERROR && strstr(err, "config_fifo.ini") &&
                   strstr(err, "not a regular file"),
               "FIFO: %s", err);
        compat_remove_file(fifo);
    } else {
        fprintf(stderr, "no mkfifo: the FIFO case is skipped\n");
    }
}

static void test_bool_words(void) {
    char err[600];
    /* A boolean flag followed by a word that is no boolean: a program without
     * positional arguments says the value is not a boolean ("unexpected
     * argument" did not name the flag); one with positional arguments takes
     * the word as one. */
    reset();
    char *a12[] = {"prog", "--gumbel", "maybe"};
    CHECKF(cfg_parse(opts, NOPTS, 3, a12, 1, NULL, 0, NULL, "usage: test", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "gumbel") && strstr(err, "'maybe' is not a boolean"),
           "--gumbel maybe: %s", err);
    char *a13[] = {"prog", "--gumbel", "no"};
    CHECK(cfg_parse(opts, NOPTS, 3, a13, 1, NULL, 0, NULL, "usage: test", stdout, err, sizeof err) == CFG_OK && !gumbel);
    reset();
    char *a14[] = {"prog", "--gumbel", "file.csa"};
    CHECK(parse(3, a14, err, sizeof err) == CFG_OK && gumbel);
}

static void test_out_of_range(void) {
    char err[600];
    /* Numbers beyond what the type holds are out of range, and the message
     * gives the range ("is not an integer" / "is not a number" misled). */
    reset();
    char *r1[] = {"prog", "--cycles", "99999999999999999999"};
    CHECKF(parse(3, r1, err, sizeof err) == CFG_ERROR &&
               strstr(err, "option 'cycles': 99999999999999999999 is outside [1, 1000000000]") &&
               !strstr(err, "not an integer"),
           "--cycles 99999999999999999999: %s", err);
    char *r2[] = {"prog", "--lr", "1e400"};
    CHECKF(parse(3, r2, err, sizeof err) == CFG_ERROR && strstr(err, "option 'lr': 1e400 is outside [0, 10]") &&
               !strstr(err, "not a number"),
           "--lr 1e400: %s", err);
    char *r3[] = {"prog", "--cycles", "-99999999999999999999"};
    CHECKF(parse(3, r3, err, sizeof err) == CFG_ERROR && strstr(err, "-99999999999999999999 is outside [1, "),
           "--cycles -99999999999999999999: %s", err);
    char *r4[] = {"prog", "--lr", "1e-400"}; /* next to 0: taken as it is */
    CHECKF(parse(3, r4, err, sizeof err) == CFG_OK && lr >= 0 && lr < 1e-300, "--lr 1e-400: %s", err);
    char *r5[] = {"prog", "--lr", "nan"};
    CHECKF(parse(3, r5, err, sizeof err) == CFG_ERROR && strstr(err, "'nan' is not a number"), "--lr nan: %s", err);
    {
        static double un;
        static float fl;
        static int64_t big;
        const cfg_opt_t u[] = {{"un", CFG_TYPE_DOUBLE, &un, 1, 0, "unbounded"},
                               {"fl", CFG_TYPE_FLOAT, &fl, 1, 0, "a float"},
                               {"big", CFG_TYPE_INT, &big, 1, 0, "unbounded integer"}};
        CHECKF(cfg_set(u, 3, "un", "-1e400", err, sizeof err) == CFG_ERROR && strstr(err, "-1e400 is outside [-1.79769e+308, 1.79769e+308]"),
               "un -1e400: %s", err);
        CHECKF(cfg_set(u, 3, "fl", "1e39", err, sizeof err) == CFG_ERROR && strstr(err, "1e39 is outside [-3.40282e+38, 3.40282e+38]"),
               "fl 1e39: %s", err);
        CHECKF(cfg_set(u, 3, "big", "99999999999999999999", err, sizeof err) == CFG_ERROR && strstr(err, "is outside [-9.3e+18, 9.3e+18]"),
               "big: %s", err);
    }
}

static void test_binary_input(char *ini) {
    char err[600];
    FILE *f;
    char *a8[] = {"prog", "--config", ini};
    /* A binary file named as the config: no raw byte of it reaches the
     * message (a terminal would act on escape sequences), every one shown
     * as \xNN; valid UTF-8 stays readable. */
    f = fopen(ini, "wb");
    fputs("\x1b[2J\x7f\xff\xfe\x01 = 1\n", f);
    fclose(f);
    CHECK(parse(3, a8, err, sizeof err) == CFG_ERROR);
    int raw = 0;
    for (const unsigned char *p = (const unsigned char *)err; *p; p++) raw += *p < 0x20 || *p >= 0x7f;
    CHECKF(raw == 0 && strstr(err, "unknown option '\\x1b[2J\\x7f\\xff\\xfe\\x01'"), "binary key: %s", err);
    f = fopen(ini, "wb");
    fputs("cycles = \x07\x9b" "1\n", f);
    fclose(f);
    CHECKF(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "'\\x07\\x9b1' is not an integer"), "binary value: %s", err);
    /* a string value with a control character or bytes that are not UTF-8
     * is refused, so no later message (of the program using it) quotes them */
    f = fopen(ini, "wb");
    fputs("net = \x1b[31mred\n", f);
    fclose(f);
    CHECKF(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "'\\x1b[31mred' holds a control character (byte 1)"),
           "ESC in a value: %s", err);
    f = fopen(ini, "wb");
    fputs("net = caf\xe9\n", f);
    fclose(f);
    CHECKF(parse(3, a8, err, sizeof err) == CFG_ERROR && strstr(err, "'caf\\xe9' holds bytes that are not UTF-8 text (byte 4)"),
           "Latin-1 in a value: %s", err);
    char *b0[] = {"prog", "--net", "\xe5\xb0\x86\xe6\xa3\x8b"}; /* UTF-8 text is fine */
    CHECKF(parse(3, b0, err, sizeof err) == CFG_OK && !strcmp(net, "\xe5\xb0\x86\xe6\xa3\x8b"), "UTF-8 value: %s", err);
    char *b1[] = {"prog", "--net\x1b]0;title\x07"};
    CHECKF(parse(2, b1, err, sizeof err) == CFG_ERROR && strstr(err, "unknown flag --net\\x1b]0;title\\x07"), "flag: %s", err);
    char *b2[] = {"prog", "--gumbel", "\xe5\xb0\x86\xe6\xa3\x8b\xc2\x9b"}; /* 将棋, then a C1 control */
    CHECKF(cfg_parse(opts, NOPTS, 3, b2, 1, NULL, 0, NULL, "", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "'\xe5\xb0\x86\xe6\xa3\x8b\\xc2\\x9b' is not a boolean"),
           "UTF-8: %s", err);
    char q[CFG_QUOTE_MAX];
    char longv[600];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    CHECK(strlen(cfg_quote(longv, q, sizeof q)) < sizeof q && strstr(q, "...") != NULL);
}

static void test_help_wrap(void) {
    char err[600];
    /* --help: rows wrapped to 80 columns (not a terminal), texts in one
     * column, allowed words given once. */
    {
        static int mode;
        static char word[CFG_STRING_MAX];
        const cfg_opt_t h[] = {
            {"mode", CFG_TYPE_ENUM, &mode, 1, 0, "a leaf mate search of this many plies: 0, 1 or 3", "1", "0|1|3"},
            {"word", CFG_TYPE_STRING, word, 1, 0,
             "a very long help text that goes on and on, much longer than one line of a terminal eighty columns wide, "
             "so that it must be wrapped onto several lines, each starting in the same column as the first",
             "alpha", "alpha|beta|gamma"},
            {"a-flag-with-a-very-long-name", CFG_TYPE_BOOL, &gumbel, 1, 0, "its text starts on the next line", "0"},
        };
        const char *hp = KOMA_TEST_TMP "/config_help_wrap.txt";
        cfg_defaults(h, 3);
        FILE *hf = fopen(hp, "wb"); /* binary: the lines as printed, no CR before each newline on Windows */
        cfg_print_help(h, 3,
                       "usage: prog --from-games [--run DIR] [--window N] [--steps N] [--batch N] [--lr X] [--net 6x64]\n"
                       "Trains a net offline on the most recent positions of the run's shards, a paragraph whose\n"
                       "lines are longer than eighty columns and are reflowed together into one paragraph.\n"
                       "  an indented line that is kept as it is\n",
                       hf);
        fclose(hf);
        size_t hl = 0;
        char *t = compat_read_file(hp, &hl, err, sizeof err);
        KOMA_ASSERT(t);
        fprintf(stderr, "%s", t);
        int longest = 0;
        for (char *p = t; *p;) {
            char *e = strchr(p, '\n');
            int l = e ? (int)(e - p) : (int)strlen(p);
            longest = l > longest ? l : longest;
            p = e ? e + 1 : p + l;
        }
        CHECKF(longest <= 80, "a help line of %d characters", longest);
        CHECK(strstr(t, "0, 1 or 3 (default: 1)") && !strstr(t, "0, 1 or 3: 0, 1 or 3"));
        CHECK(strstr(t, "(alpha, beta or gamma; default: alpha)") != NULL);
        CHECK(strstr(t, "  --a-flag-with-a-very-long-name bool\n                 ") != NULL);
        CHECK(strstr(t, "\n            [--lr X] [--net 6x64]\n") != NULL); /* under the first argument, [..] whole */
        CHECK(strstr(t, "whose lines are longer") || strstr(t, "whose\nlines are longer")); /* reflowed */
        CHECK(strstr(t, "\n  an indented line that is kept as it is\n") != NULL);
        free(t);
        compat_remove_file(hp);
    }
}

static void test_last_line_and_dump(char *ini) {
    char err[600];
    FILE *f;
    char *a8[] = {"prog", "--config", ini};
    /* The last line needs no newline. */
    f = fopen(ini, "w");
    fprintf(f, "cycles = 9");
    fclose(f);
    reset();
    CHECK(parse(3, a8, err, sizeof err) == CFG_OK && cycles == 9);
    char *a9[] = {"prog", "--help"};
    CHECK(parse(2, a9, err, sizeof err) == CFG_HELP);

    /* Dump round-trips through a file. */
    reset();
    cycles = 123;
    strcpy(net, "20x256");
    char *dump = cfg_dump_string(opts, NOPTS);
    CHECK(dump && strstr(dump, "cycles = 123\n") && strstr(dump, "net = 20x256\n"));
    compat_write_file_durable(ini, dump, strlen(dump), err, sizeof err);
    free(dump);
    reset();
    CHECK(cfg_load_file(opts, NOPTS, ini, err, sizeof err) == CFG_OK);
    CHECK(cycles == 123 && !strcmp(net, "20x256"));
}

int main(void) {
    char err[600];
    char dir[300];
    snprintf(dir, sizeof dir, "%s", KOMA_TEST_TMP);
    compat_mkdir_p(dir, err, sizeof err);
    char ini[400];
    snprintf(ini, sizeof ini, "%s/config_test.ini", dir);
    FILE *f = fopen(ini, "w");
    fprintf(f, "# a named flag set\ncycles = 7\nlr = 0.02\nnet = 10x128\ngumbel = true\n");
    fclose(f);
    test_precedence(ini);
    test_errors(ini, dir);
    test_bool_words();
    test_out_of_range();
    test_binary_input(ini);
    test_help_wrap();
    test_last_line_and_dump(ini);
    test_list(ini);
    return t_done("test_config");
}
