/* config.h - command-line flags and named flag sets (the .ini files in configs/).
 *
 * A program describes its flags once in a table of cfg_opt_t (name, type,
 * pointer to the variable holding the default, help). cfg_parse then applies,
 * in order: the defaults already in the variables, the file given by
 * `--config FILE` (INI through inih: `key = value` where key is the long flag
 * name; [sections] are ignored), and the command-line flags, which win.
 * `--help` prints the table. Unknown keys, malformed numbers and out-of-range
 * values are errors that name the flag and, for files, the file and line.
 * Owns: parsing and printing flags. Does not own: what they mean.
 */
#ifndef KOMA_CONFIG_H
#define KOMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { CFG_TYPE_INT, CFG_TYPE_DOUBLE, CFG_TYPE_BOOL, CFG_TYPE_STRING } cfg_type_t;

#define CFG_STRING_MAX 512

typedef struct {
    const char *name;   /* long flag name without dashes, e.g. "cycles" */
    cfg_type_t type;    /* INT -> int64_t*, DOUBLE -> double*, BOOL -> int*, STRING -> char[CFG_STRING_MAX] */
    void *ptr;
    double min, max;    /* inclusive range for INT/DOUBLE; min > max means unbounded */
    const char *help;
} cfg_opt_t;

enum { CFG_OK = 0, CFG_ERROR = -1, CFG_HELP = 1 };

/* Parses argv[first..argc). Positional (non-flag) arguments are returned in
 * positional[] (at most max_positional; more is an error). Returns CFG_OK,
 * CFG_HELP (help was printed to out) or CFG_ERROR with err set. */
int cfg_parse(const cfg_opt_t *opts, int nopts, int argc, char **argv, int first,
              char **positional, int max_positional, int *npositional,
              const char *usage, FILE *out, char *err, size_t errlen);

/* Applies one key/value (as from a file or a USI setoption). */
int cfg_set(const cfg_opt_t *opts, int nopts, const char *key, const char *value,
            char *err, size_t errlen);
/* Loads an INI file (keys = long flag names). */
int cfg_load_file(const cfg_opt_t *opts, int nopts, const char *path, char *err, size_t errlen);
/* Writes "key = value" lines for every option (the effective config, e.g. to store in the run db). */
void cfg_dump(const cfg_opt_t *opts, int nopts, FILE *out);
/* Same into a malloc'ed string. */
char *cfg_dump_string(const cfg_opt_t *opts, int nopts);
void cfg_print_help(const cfg_opt_t *opts, int nopts, const char *usage, FILE *out);

#endif
