/* Table-driven command-line options (docs/cli.md). One row per option says which field it
 * sets, how its value is parsed and bounded, its default, its help text and which
 * subcommands accept it; the same rows drive parsing, --help and --print-options, so the
 * defaults that --help shows are the ones the program starts from. The rows are generic
 * over the options struct (fields by offsetof); linattn's own table is in cli.c.
 * Everything here is Not Collective. */
#ifndef LINATTN_OPTIONS_H
#define LINATTN_OPTIONS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "linattn/status.h"

#define LA_LIST_MAX 64
#define LA_OPT_ROWS_MAX 256 /* rows of one table */

/* A comma-separated list: integers and enum values in i[], numbers in x[]. */
typedef struct {
  int n;
  int64_t i[LA_LIST_MAX];
  double x[LA_LIST_MAX];
} la_list;

typedef enum {
  LA_OPT_FLAG,   /* no value: stores lo into an int field */
  LA_OPT_INT,    /* integer in [lo, hi], into an int or int64_t field (by size) */
  LA_OPT_F64,    /* finite number in [flo, fhi] ((flo, fhi] when open_lo), into a double */
  LA_OPT_STR,    /* a string (path), kept by pointer into a const char * field */
  LA_OPT_ENUM,   /* one of names[] / name_of(i); values[i] or i goes into an int field */
  LA_OPT_CUSTOM, /* set() parses; the value as given goes into a const char * field */
  LA_OPT_BYTES,  /* a byte count in [lo, hi]: digits, optionally followed by K, M, G or T
                    (or KiB, MiB, GiB, TiB; powers of 1024), into an int64_t field */
} la_opt_kind;

enum { LA_OPT_HIDDEN = 1, /* not in --help nor docs/cli.md */
       LA_OPT_NOPRINT = 2, /* not in --print-options */
       LA_OPT_RESUMABLE = 4 /* changes only the speed, the rounding or where things go: a
                             * resume from a checkpoint may change it (not in the
                             * fingerprint, checkpoint.c) */ };

typedef struct la_opt la_opt;
struct la_opt {
  const char *name;  /* "--heads" */
  const char *alias; /* "-h", or NULL */
  const char *meta;  /* value placeholder in --help ("H"); NULL for flags */
  unsigned subs;     /* bit mask of the subcommands that accept it */
  int group;         /* --help section */
  la_opt_kind kind;
  int list;          /* 0: one value; n > 0: a comma-separated list of 1..n values (la_list) */
  size_t off, size;  /* the field (LA_OPT_FIELD); size 0: nothing is stored */
  size_t seen;       /* > 0: offset of an int field set to 1 when the option is given */
  int64_t lo, hi;    /* LA_OPT_INT, LA_OPT_BYTES bounds (inclusive); LA_OPT_FLAG: lo is the
                        value stored */
  double flo, fhi;   /* LA_OPT_F64 bounds */
  int open_lo;       /* LA_OPT_F64: flo < x instead of flo <= x */
  const char *range; /* the values as --help and errors say them; NULL: made from the bounds */
  const char *const *names;           /* LA_OPT_ENUM: names, NULL-terminated, value = index */
  const char *(*name_of)(int v);      /* LA_OPT_ENUM: or names by value, NULL past the end */
  const int *values;                  /* LA_OPT_ENUM: value of names[i] (NULL: i) */
  int (*lookup)(const char *s, int *v); /* LA_OPT_ENUM: name -> value (0), else a scan */
  const char *(*refuse_value)(int v); /* LA_OPT_ENUM: NULL, or why value v is refused here */
  const char *noun;  /* LA_OPT_ENUM: "unknown NOUN 'x' (a, b)" instead of "'x' is not a or b" */
  la_status (*set)(const la_opt *r, const char *val, void *o); /* LA_OPT_CUSTOM */
  const char *def;      /* default: parsed into the field before argv is read, and shown */
  const char *def_text; /* or: a default the program works out, only shown ... */
  void (*init)(const la_opt *r, void *o); /* ... and set by init (NULL: left as it was) */
  const char *refuse;   /* the value is checked, then the option is refused with this reason */
  const char *help;
  unsigned flags;       /* LA_OPT_HIDDEN, LA_OPT_NOPRINT, LA_OPT_RESUMABLE */
};

/* The field f of struct type T: designators .off and .size of a row. */
#define LA_OPT_FIELD(T, f) .off = offsetof(T, f), .size = sizeof(((T *)0)->f)

/* A subcommand as the table knows it. */
typedef struct {
  const char *name; /* "run" */
  unsigned bit;     /* its bit in la_opt.subs */
} la_opt_sub;

/* Defaults of every row of subcommand bit `sub` into o (rows with def, or init). */
la_status la_opts_defaults(const la_opt *rows, int nrows, unsigned sub, void *o);
/* Parse argv[first..argc) for subcommand subs[isub] into o (defaults are not applied here).
 * Errors are LA_ERR_ARG with a one-line reason naming the option and the value, recorded by
 * la_error (read it with la_error_reason): among them an option given twice, and two options
 * that set the same field. given (NULL, or nrows bytes) receives 1 for every row given. */
la_status la_opts_parse(const la_opt *rows, int nrows, const la_opt_sub *subs, int nsubs,
                        int isub, int argc, char **argv, int first, void *o,
                        unsigned char *given);
/* --help: the rows of `sub` that are not hidden, by group (titles[g], NULL-terminated list),
 * each with its values and its default. */
void la_opts_help(FILE *f, const la_opt *rows, int nrows, unsigned sub,
                  const char *const *titles);
/* --print-options: one "name=value" line per field of `sub` (first row that sets it). */
/* --print-options: NAME=VALUE per option of sub, without the rows whose flags meet skip. */
void la_opts_print(FILE *f, const la_opt *rows, int nrows, unsigned sub, const void *o,
                   unsigned skip);

#endif
