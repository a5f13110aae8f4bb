/* config.h - command-line flags and named flag sets (the .ini files in configs/).
 *
 * A program describes each option once, in a row of a cfg_opt_t table:
 * name, type, target field, range, help, default, allowed words (the option
 * registry: the command line, INI files, the USI engine's `option` lines and
 * `setoption`, --help and the stored effective config all read the same
 * rows). cfg_parse then applies, in order: the defaults already in the
 * variables (cfg_defaults writes the rows' defaults there), the file given by
 * `--config FILE` (INI through inih: `key = value` where key is the long flag
 * name; [sections] and a key set twice are errors), and the command-line flags, which win.
 * `--help` prints the table. Unknown keys, malformed numbers and out-of-range
 * values are errors that name the flag and, for files, the file and line.
 * Owns: parsing and printing flags. Does not own: what they mean.
 */
#ifndef KOMA_CONFIG_H
#define KOMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The type of a row says what its target is:
 *   INT     int64_t      I32  int32_t      U64   uint64_t (range as for INT)
 *   DOUBLE  double       FLOAT float       BOOL  int (0/1)
 *   ENUM    int: the index of the value in `choices` ("constant|cosine|step")
 *   STRING  char[size]   (size 0: CFG_STRING_MAX); with `choices`, one of
 *           them (matched without regard to case, stored as spelled there)
 *   PATH    as STRING, a file or directory name
 *   LIST    char[size]: a flag that may be given more than once (a file
 *           key too); each value is appended as STRING checks it, the
 *           values separated by '\n' (a value never holds one); an empty
 *           value empties the list. Dumps write one "key = value" line per
 *           value; --help and cfg_value_string join them with ", ". */
typedef enum {
    CFG_TYPE_INT,
    CFG_TYPE_DOUBLE,
    CFG_TYPE_BOOL,
    CFG_TYPE_STRING,
    CFG_TYPE_I32,
    CFG_TYPE_U64,
    CFG_TYPE_FLOAT,
    CFG_TYPE_ENUM,
    CFG_TYPE_PATH,
    CFG_TYPE_LIST,
} cfg_type_t;

#define CFG_STRING_MAX 512

/* One option: a row of a program's table. The first six fields are always
 * given; the rest may be left out (zero). */
typedef struct {
    const char *name; /* long flag name without dashes, e.g. "cycles" (USI: the option name) */
    cfg_type_t type;
    void *ptr;       /* the target field */
    double min, max; /* inclusive range for numbers; min > max means unbounded */
    const char *help;
    const char *def;     /* the default as text, applied by cfg_defaults; NULL: whatever the
                          * target holds when the table is built (a default computed at run
                          * time, or one owned by a library, e.g. nn_train_config_default) */
    const char *choices; /* ENUM, or STRING limited to these words: "a|b|c" */
    size_t size;         /* STRING/PATH/LIST: the target's size in bytes (0: CFG_STRING_MAX) */
    int *given;          /* NULL, or set to 1 when a file or flag sets the option */
} cfg_opt_t;

enum { CFG_OK = 0, CFG_ERROR = -1, CFG_HELP = 1 };

/* Parses argv[first..argc). Positional (non-flag) arguments are returned in
 * positional[] (at most max_positional; more is an error). Returns CFG_OK,
 * CFG_HELP (help was printed to out) or CFG_ERROR with err set. */
int cfg_parse(const cfg_opt_t *opts, int nopts, int argc, char **argv, int first, char **positional, int max_positional,
              int *npositional, const char *usage, FILE *out, char *err, size_t errlen);

/* Writes every row's `def` into its target (rows without one keep theirs).
 * A default that does not parse is a programming error: it is printed and
 * the program aborts (every table's defaults are applied by the tests). */
void cfg_defaults(const cfg_opt_t *opts, int nopts);
/* The row named `name` (exact), or NULL. */
const cfg_opt_t *cfg_find(const cfg_opt_t *opts, int nopts, const char *name);
/* The row named `name` ignoring ASCII case (USI option names), or NULL. */
const cfg_opt_t *cfg_find_nocase(const cfg_opt_t *opts, int nopts, const char *name);
/* The k-th word (from 0) of allowed words "a|b|c": its start, with *len
 * (NULL ok) its length; NULL past the last. */
const char *cfg_choice(const char *choices, int k, int *len);
/* The k-th value (from 0) of a LIST row's target: its start, with *len its
 * length; NULL past the last. */
const char *cfg_list_item(const char *list, int k, int *len);
/* The current value of a row as text (what --help, dumps and USI print). */
void cfg_value_string(const cfg_opt_t *o, char *buf, size_t n);

/* s as it may be quoted in a message: printable ASCII and valid printable
 * UTF-8 as they are, every other byte as \xNN (a binary file's bytes never
 * reach the terminal raw), cut with "..." to fit n (CFG_QUOTE_MAX: about
 * 120 characters). Returns buf. Every message of this module that quotes
 * input goes through it. */
#define CFG_QUOTE_MAX 128
const char *cfg_quote(const char *s, char *buf, size_t n);

/* Applies one key/value (as from a file or a USI setoption). A bad value
 * leaves the target as it was; a number out of the row's range, or beyond
 * what its type holds ("99999999999999999999", "1e400"), is an error that
 * gives the range. */
int cfg_set(const cfg_opt_t *opts, int nopts, const char *key, const char *value, char *err, size_t errlen);
/* Loads an INI file (keys = long flag names). */
int cfg_load_file(const cfg_opt_t *opts, int nopts, const char *path, char *err, size_t errlen);
/* "key = value" lines for every option, the effective config (e.g. to store
 * in the run db), in a malloc'ed string. */
char *cfg_dump_string(const cfg_opt_t *opts, int nopts);
void cfg_print_help(const cfg_opt_t *opts, int nopts, const char *usage, FILE *out);

#endif
