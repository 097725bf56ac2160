/* What the files of the eval report share (eval_report.h; docs/design.md §8): the tables read
 * from DIR's CSVs, the aggregates over seeds, and the state one report is made from.
 *   eval_csv.c      the CSV reader and the typed tables (columns found by name)
 *   eval_stats.c    seed medians, the random maps, the reference setting, slope fits
 *   eval_plots.c    plots.gp, composed in memory
 *   eval_gnuplot.c  gnuplot run on plots.gp, the PNGs renamed into place
 *   eval_markdown.c report.md, composed in memory
 *   eval_report.c   la_eval_report: the steps in order, and the clean-up of a failed report
 * No MPI. Every fallible function returns la_status with its reason recorded by la_error
 * (docs/design.md §6 "Errors"). Not Collective. */
#ifndef LINATTN_EVAL_REPORT_INTERNAL_H
#define LINATTN_EVAL_REPORT_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "eval_report.h"

/* ---- CSV files (eval_csv.c) ---- */

typedef struct {
  char *path;     /* DIR/name, for messages */
  char *text;     /* the file, NUL-terminated; the cells point into it */
  int ncol;
  char **cell;    /* (nrow + 1) x ncol, row 0 the header */
  int64_t *line;  /* the line each row starts on (1-based) */
  int64_t nrow;   /* data rows */
} csvfile;

enum { K_STR, K_NUM };
#define CF_REQ 1   /* the column must be in the header */
#define CF_KEY 2   /* every row needs a value (a finite one for numbers) */
#define CF_YESNO 4 /* yes, no or empty */
typedef struct {
  const char *name;
  int kind, flags;
} colspec;

#define MAXC 28
typedef struct {
  const char *s[MAXC]; /* string cells ("" when empty or the column is absent) */
  double v[MAXC];      /* number cells (NAN when empty or absent) */
  uint32_t set;        /* bit j: cell j is non-empty */
  int64_t line;
  int map, mode;       /* indices into the distinct lists (-1 when the table has none) */
} trow;
#define HAS(r, j) (((r)->set >> (j)) & 1u)

typedef struct {
  const char *name; /* file name in DIR */
  int present;
  csvfile csv;
  int col[MAXC];    /* -1: the column is not in the file */
  trow *row;
  int64_t n;
} table;

/* The columns the report uses (docs/cli.md "linattn eval"); others in the files are ignored. */
enum { R_MAP, R_MODE, R_FEATURES, R_R, R_SEED, R_N, R_HEADS, R_DK, R_DV, R_SCALE, R_OUT, R_GQ,
       R_GK, R_GV, R_REASSOC, R_KERNEL, R_KROWS, R_FLOOR, R_DENMIN, R_DENFRAC, R_SECONDS, R_OUTROWS, R_TV,
       R_TVFLOOR, R_NCOL };
enum { B_MAP, B_MODE, B_TEST, B_OUTDET, B_KDET, B_FEATURES, B_R, B_N, B_SCALE, B_SEEDS, B_OUTMEAN,
       B_OUTNOISE, B_OUTP, B_KMEAN, B_KNOISE, B_KP, B_KENTRIES, B_LEVEL, B_KUNDER, B_NCOL };
enum { W_MAP, W_MODE, W_FEATURES, W_SEED, W_N, W_SCALE, W_TOKEN, W_HEAD, W_DEN, W_DENMED, W_ROWERR,
       W_NCOL };
enum { C_MAP, C_FEATURES, C_R, C_PAIRS, C_SEEDS, C_QUERIES, C_ACC, C_SMACC, C_NCOL };
enum { X_MODE, X_N, X_HEADS, X_DK, X_DV, X_SCALE, X_RANKS, X_THREADS, X_SMSEC, X_SMGF, X_FLOORSEC,
       X_NCOL };

/* ---- the aggregates (eval_stats.c) ---- */

typedef struct {
  const char **s;
  int n, cap;
} strset;

/* Seed statistics of one results column in one group: median, min, max of the non-empty
 * values; a NaN among them makes the median NaN (min and max are over the others). */
typedef struct {
  double med, lo, hi;
  int cnt, nnan;
} seedstat;

typedef struct {
  int map, mode;
  double features, r, n, scale, heads, dk, dv;
  int rows;             /* seeds behind it */
  seedstat st[R_NCOL];  /* numeric value columns R_OUT.. */
} agg;

typedef struct {
  int map, mode;
  double n, scale, wmin, wmax, slope;
  int widths;
} slopefit;

enum { P_FEAT, P_SCALE, P_N, P_GRAD, P_BIAS, P_DEN, P_RECALL, NPLOT };
typedef struct {
  const char *file, *what;
  int planned, made;
  char why[320]; /* when not made */
} plotinfo;

typedef struct {
  const char *dir;
  table res, bias, rows, recall, refs;
  strset maps, modes;
  agg *ag;
  int64_t nag;
  slopefit *sl;
  int nsl;
  int *random;          /* per map: a random map (several seeds or widths, or in bias.csv) */
  double *wmax;         /* per map: largest features in results.csv */
  double ref_n, ref_scale;
  plotinfo plot[NPLOT];
} ctx;

/* eval_csv.c. "DIR/name" (free() it), or NULL: out of memory. */
char *la_er_path_join(const char *dir, const char *name);
/* Read results.csv (required, with at least one row) and the optional bias.csv, rows.csv,
 * recall.csv and refs.csv into c's tables. A malformed file is LA_ERR_FORMAT "DIR/x.csv: line
 * L: reason". */
la_status la_er_read_tables(ctx *c);
void la_er_free_tables(ctx *c);

/* eval_stats.c */
int la_er_cmp_double(const void *a, const void *b);
/* Median, min and max of v[0..k) (reordered). */
seedstat la_er_summarize(double *v, int k);
/* |log s|: how far an input scale is from 1 (infinite for s <= 0). */
double la_er_log_dist_to_one(double s);
/* The distinct maps and modes, the random maps, the groups over seeds (sorted by map, mode,
 * n, input scale, features), the reference setting (ref_n, ref_scale) and the slope fits. */
la_status la_er_aggregate(ctx *c);

/* eval_plots.c: plots.gp into *text (free() it); plot[i].planned or plot[i].why is set. */
la_status la_er_compose_plots(ctx *c, char **text, size_t *len);

/* eval_gnuplot.c: make the planned PNGs from DIR/plots.gp (each made one gets .made, the
 * others a .why). LA_ERR_NOMEM when their names cannot be allocated (nothing is made); else
 * LA_OK, with warn the line to print (empty when every planned plot was made). */
la_status la_er_make_pngs(ctx *c, char *warn, size_t warnlen);

/* eval_markdown.c: report.md into *text (free() it). Out of memory anywhere (a section's own
 * buffer, or the text's growth) is LA_ERR_NOMEM and no text: never a shorter report. */
la_status la_er_compose_report(const ctx *c, const la_eval_meta *meta, char **text, size_t *len);

#endif
