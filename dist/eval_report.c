/* `linattn eval`: DIR/report.md and the plots (eval_report.h). No MPI.
 *
 * 1. Read the CSVs by their header (csv_parse, load_table): columns are found by name, unknown
 *    columns are ignored, a malformed file is an error "DIR/x.csv: line L: reason".
 * 2. Aggregate results.csv over seeds (median, min, max) per (map, mode, n, input_scale,
 *    features), fit the slopes, run the checks.
 * 3. Write plots.gp: self-contained (the plotted numbers are inline datablocks), so that
 *    `gnuplot plots.gp` in DIR remakes the PNGs later; run gnuplot on it with
 *    suffix='.tmp.<pid>', so the PNGs appear under temporary names, and rename each valid one
 *    into place after gnuplot exits 0.
 * 4. Write report.md: every number in it comes from the files. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "eval_report.h"
#include "la_alloc.h"
#include "linattn/outfile.h"

extern char **environ;

/* Definitions the report states (they are not measurements). */
#define SLOPE_REF (-0.5)          /* the Monte Carlo rate m^-1/2 */
#define SLOPE_TOL 0.15            /* "consistent": |slope - (-0.5)| <= 0.15 */
#define EY_RTOL 1e-9              /* Eckart-Young: kernel < floor * (1 - 1e-9) is a violation */
#define REASSOC_ROUNDING 1e-10    /* reassoc_rel_err at or below: float64 rounding level */
#define SMALL_DEN 0.1             /* rows.csv: a "small" denominator is below 0.1 x the median */
#define GNUPLOT_TIMEOUT_S 300     /* gnuplot is killed after this long */

/* ======================================================================================== */
/* CSV reader                                                                               */
/* ======================================================================================== */

typedef struct {
  char *path;     /* DIR/name, for messages */
  char *text;     /* the file, NUL-terminated; the cells point into it */
  int ncol;
  char **cell;    /* (nrow + 1) x ncol, row 0 the header */
  int64_t *line;  /* the line each row starts on (1-based) */
  int64_t nrow;   /* data rows */
} csvfile;

#define CELL(c, i, j) ((c)->cell[(size_t)(i) * (size_t)(c)->ncol + (size_t)(j)])

static void csv_free(csvfile *c) {
  free(c->path);
  free(c->text);
  free(c->cell);
  free(c->line);
  memset(c, 0, sizeof *c);
}

static la_status fail(char *err, size_t errlen, la_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static la_status fail(char *err, size_t errlen, la_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return st;
}

/* The whole file into c->text. *present = 0 (and LA_OK) when it does not exist and optional. */
static la_status csv_read(csvfile *c, int optional, int *present, size_t *len, char *err,
                          size_t errlen) {
  *present = 0;
  int fd = open(c->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (optional && e == ENOENT) return LA_OK;
    return fail(err, errlen, LA_ERR_IO, "%s: cannot open: %s", c->path, strerror(e));
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = la_malloc(cap + 1);
  if (!buf) {
    close(fd);
    return fail(err, errlen, LA_ERR_NOMEM, "%s: out of memory for its contents", c->path);
  }
  for (;;) {
    if (n == cap) {
      char *nb = la_realloc(buf, 2 * cap + 1);
      if (!nb) {
        free(buf);
        close(fd);
        return fail(err, errlen, LA_ERR_NOMEM, "%s: out of memory for its contents (%zu bytes)",
                    c->path, 2 * cap);
      }
      buf = nb, cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return fail(err, errlen, LA_ERR_READ, "%s: cannot read: %s", c->path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  c->text = buf;
  *len = n;
  *present = 1;
  return LA_OK;
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t'; }

/* Split c->text (len bytes) into rows of cells, in place. RFC 4180 quoting ("" inside quotes);
 * \n, \r\n or \r end a record; blank lines are skipped; unquoted cells are trimmed. Every
 * record must have as many cells as the header, whose names must be distinct and non-empty. */
static la_status csv_parse(csvfile *c, size_t len, char *err, size_t errlen) {
  char *p = c->text, *end = c->text + len;
  const char *nul = memchr(p, 0, len);
  if (nul) {
    int64_t l = 1;
    for (const char *q = p; q < nul; q++) l += *q == '\n';
    return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: a NUL byte (not a text CSV file)",
                c->path, (long long)l);
  }
  size_t ncell = 0, ccap = 0, nrec = 0, lcap = 0;
  char **cells = NULL;
  int64_t *lines = NULL;
  int64_t line = 1;
  la_status st = LA_OK;
  while (p < end && st == LA_OK) {
    const int64_t rec_line = line;
    const size_t first = ncell;
    int nf = 0, quoted_any = 0;
    for (;;) {
      char *f;
      int quoted = *p == '"';
      if (quoted) {
        quoted_any = 1;
        char *w = ++p;
        f = w;
        for (;;) {
          if (p >= end) {
            st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: a quoted field is not closed",
                      c->path, (long long)rec_line);
            goto done;
          }
          if (*p == '"') {
            if (p + 1 < end && p[1] == '"') {
              *w++ = '"', p += 2;
              continue;
            }
            p++;
            break;
          }
          if (*p == '\n') line++;
          *w++ = *p++;
        }
        *w = 0;
        while (p < end && is_blank(*p)) p++;
        if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
          st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: text after the closing quote of field %d",
                    c->path, (long long)line, nf + 1);
          goto done;
        }
      } else {
        f = p;
        while (p < end && *p != ',' && *p != '\n' && *p != '\r') {
          if (*p == '"') {
            st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: a quote inside unquoted field %d",
                      c->path, (long long)line, nf + 1);
            goto done;
          }
          p++;
        }
      }
      const char d = p < end ? *p : 0;
      *p = 0; /* p == end is the terminating NUL */
      if (!quoted) { /* trim an unquoted cell */
        while (is_blank(*f)) f++;
        size_t fl = strlen(f);
        while (fl && is_blank(f[fl - 1])) f[--fl] = 0;
      }
      if (ncell == ccap) {
        size_t nc = ccap ? 2 * ccap : 256;
        char **ncells = la_realloc(cells, nc * sizeof *cells);
        if (!ncells) {
          st = fail(err, errlen, LA_ERR_NOMEM, "%s: out of memory for its cells", c->path);
          goto done;
        }
        cells = ncells, ccap = nc;
      }
      cells[ncell++] = f;
      nf++;
      if (p < end) p++;
      if (d == ',') continue;
      if (d == '\r' && p < end && *p == '\n') p++;
      line++;
      break;
    }
    if (nf == 1 && !quoted_any && !*cells[first]) { /* a blank line */
      ncell = first;
      continue;
    }
    if (nrec == 0) {
      c->ncol = nf;
      for (int j = 0; j < nf; j++) {
        if (!*cells[j]) {
          st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: header column %d has no name",
                    c->path, (long long)rec_line, j + 1);
          goto done;
        }
        for (int k = 0; k < j; k++)
          if (!strcmp(cells[j], cells[k])) {
            st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: column '%s' appears twice in the header",
                      c->path, (long long)rec_line, cells[j]);
            goto done;
          }
      }
    } else if (nf != c->ncol) {
      st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: %d fields where the header has %d",
                c->path, (long long)rec_line, nf, c->ncol);
      goto done;
    }
    if (nrec == lcap) {
      size_t nl = lcap ? 2 * lcap : 64;
      int64_t *nlines = la_realloc(lines, nl * sizeof *lines);
      if (!nlines) {
        st = fail(err, errlen, LA_ERR_NOMEM, "%s: out of memory for its rows", c->path);
        goto done;
      }
      lines = nlines, lcap = nl;
    }
    lines[nrec++] = rec_line;
  }
  if (st == LA_OK && nrec == 0)
    st = fail(err, errlen, LA_ERR_FORMAT, "%s: line 1: empty file (no header line)", c->path);
done:
  c->cell = cells;
  c->line = lines;
  c->nrow = nrec ? (int64_t)nrec - 1 : 0;
  return st;
}

static int csv_col(const csvfile *c, const char *name) {
  for (int j = 0; j < c->ncol; j++)
    if (!strcmp(CELL(c, 0, j), name)) return j;
  return -1;
}

/* ---- typed tables on top of the reader ---- */

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

static void table_free(table *t) {
  csv_free(&t->csv);
  free(t->row);
  t->row = NULL;
  t->n = 0;
}

static char *path_join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  char *p = la_malloc(dl + nl + 2);
  if (!p) return NULL;
  memcpy(p, dir, dl);
  size_t k = dl;
  if (k == 0 || p[k - 1] != '/') p[k++] = '/';
  memcpy(p + k, name, nl + 1);
  return p;
}

static la_status load_table(const char *dir, table *t, int optional, const colspec *spec,
                            int nspec, char *err, size_t errlen) {
  t->csv.path = path_join(dir, t->name);
  if (!t->csv.path) return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the path of %s", t->name);
  size_t len = 0;
  la_status st = csv_read(&t->csv, optional, &t->present, &len, err, errlen);
  if (st != LA_OK || !t->present) return st;
  if ((st = csv_parse(&t->csv, len, err, errlen)) != LA_OK) return st;
  const csvfile *c = &t->csv;
  for (int j = 0; j < nspec; j++) {
    t->col[j] = csv_col(c, spec[j].name);
    if (t->col[j] < 0 && (spec[j].flags & CF_REQ))
      return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: the header has no column '%s'",
                  c->path, (long long)c->line[0], spec[j].name);
  }
  t->row = la_calloc(c->nrow ? (size_t)c->nrow : 1, sizeof *t->row);
  if (!t->row) return fail(err, errlen, LA_ERR_NOMEM, "%s: out of memory for %lld rows", c->path, (long long)c->nrow);
  for (int64_t i = 0; i < c->nrow; i++) {
    trow *r = &t->row[i];
    r->line = c->line[i + 1];
    r->map = r->mode = -1;
    for (int j = 0; j < nspec; j++) {
      r->s[j] = "";
      r->v[j] = NAN;
      if (t->col[j] < 0) continue;
      const char *cell = CELL(c, i + 1, t->col[j]);
      if (*cell) r->set |= 1u << j;
      if (spec[j].kind == K_STR) {
        r->s[j] = cell;
        if ((spec[j].flags & CF_KEY) && !*cell)
          return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: %s is empty", c->path,
                      (long long)r->line, spec[j].name);
        if ((spec[j].flags & CF_YESNO) && *cell && strcmp(cell, "yes") && strcmp(cell, "no"))
          return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: %s is '%.40s', not yes or no",
                      c->path, (long long)r->line, spec[j].name, cell);
        continue;
      }
      if (*cell) {
        char *e;
        errno = 0;
        double v = strtod(cell, &e);
        if (e == cell || *e)
          return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: %s is '%.40s', not a number",
                      c->path, (long long)r->line, spec[j].name, cell);
        r->v[j] = v;
      }
      if ((spec[j].flags & CF_KEY) && !isfinite(r->v[j]))
        return fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: %s must be a finite number, not '%.40s'",
                    c->path, (long long)r->line, spec[j].name, cell);
    }
  }
  t->n = c->nrow;
  return LA_OK;
}

/* The columns this file uses (docs/cli.md "linattn eval"); others in the files are ignored. */
enum { R_MAP, R_MODE, R_FEATURES, R_R, R_SEED, R_N, R_HEADS, R_DK, R_DV, R_SCALE, R_OUT, R_GQ,
       R_GK, R_GV, R_REASSOC, R_KERNEL, R_KROWS, R_FLOOR, R_DENMIN, R_DENFRAC, R_SECONDS, R_OUTROWS, R_TV,
       R_TVFLOOR, R_NCOL };
static const colspec results_cols[R_NCOL] = {
    [R_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [R_MODE] = {"mode", K_STR, CF_REQ | CF_KEY},
    [R_FEATURES] = {"features", K_NUM, CF_REQ | CF_KEY}, [R_R] = {"r", K_NUM, 0},
    [R_SEED] = {"seed", K_NUM, CF_REQ | CF_KEY}, [R_N] = {"n", K_NUM, CF_REQ | CF_KEY},
    [R_HEADS] = {"heads", K_NUM, 0}, [R_DK] = {"dk", K_NUM, 0}, [R_DV] = {"dv", K_NUM, 0},
    [R_SCALE] = {"input_scale", K_NUM, CF_REQ | CF_KEY}, [R_OUT] = {"out_rel_err", K_NUM, CF_REQ},
    [R_GQ] = {"grad_q_rel_err", K_NUM, 0}, [R_GK] = {"grad_k_rel_err", K_NUM, 0},
    [R_GV] = {"grad_v_rel_err", K_NUM, 0}, [R_REASSOC] = {"reassoc_rel_err", K_NUM, 0},
    [R_KERNEL] = {"kernel_rel_err", K_NUM, 0}, [R_KROWS] = {"kernel_rows", K_NUM, 0},
    [R_FLOOR] = {"rank_r_floor_rel_err", K_NUM, 0}, [R_DENMIN] = {"den_min", K_NUM, 0},
    [R_DENFRAC] = {"den_frac_small", K_NUM, 0}, [R_SECONDS] = {"seconds", K_NUM, 0},
    [R_OUTROWS] = {"out_rows", K_NUM, 0}, [R_TV] = {"weights_tv", K_NUM, 0},
    [R_TVFLOOR] = {"weights_tv_floor", K_NUM, 0}};

enum { B_MAP, B_MODE, B_TEST, B_OUTDET, B_KDET, B_FEATURES, B_R, B_N, B_SCALE, B_SEEDS, B_OUTMEAN,
       B_OUTNOISE, B_OUTP, B_KMEAN, B_KNOISE, B_KP, B_KENTRIES, B_LEVEL, B_KUNDER, B_NCOL };
static const colspec bias_cols[B_NCOL] = {
    [B_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [B_MODE] = {"mode", K_STR, CF_REQ | CF_KEY},
    [B_TEST] = {"test", K_STR, 0}, [B_OUTDET] = {"out_bias_detected", K_STR, CF_REQ | CF_YESNO},
    [B_KDET] = {"kernel_bias_detected", K_STR, CF_YESNO},
    [B_FEATURES] = {"features", K_NUM, CF_REQ | CF_KEY}, [B_R] = {"r", K_NUM, 0},
    [B_N] = {"n", K_NUM, CF_REQ | CF_KEY}, [B_SCALE] = {"input_scale", K_NUM, CF_REQ | CF_KEY},
    [B_SEEDS] = {"seeds", K_NUM, 0}, [B_OUTMEAN] = {"out_mean_rel_err", K_NUM, 0},
    [B_OUTNOISE] = {"out_noise_rel", K_NUM, 0}, [B_OUTP] = {"out_p_value", K_NUM, 0},
    [B_KMEAN] = {"kernel_mean_rel_err", K_NUM, 0}, [B_KNOISE] = {"kernel_noise_rel", K_NUM, 0},
    [B_KP] = {"kernel_p_value", K_NUM, 0}, [B_KENTRIES] = {"kernel_entries", K_NUM, 0},
    [B_LEVEL] = {"level", K_NUM, 0}, [B_KUNDER] = {"kernel_under_share", K_NUM, 0}};

enum { W_MAP, W_MODE, W_FEATURES, W_SEED, W_N, W_SCALE, W_TOKEN, W_HEAD, W_DEN, W_DENMED, W_ROWERR,
       W_NCOL };
static const colspec rows_cols[W_NCOL] = {
    [W_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [W_MODE] = {"mode", K_STR, 0},
    [W_FEATURES] = {"features", K_NUM, 0}, [W_SEED] = {"seed", K_NUM, 0}, [W_N] = {"n", K_NUM, 0},
    [W_SCALE] = {"input_scale", K_NUM, 0}, [W_TOKEN] = {"token", K_NUM, 0},
    [W_HEAD] = {"head", K_NUM, 0}, [W_DEN] = {"den", K_NUM, 0},
    [W_DENMED] = {"den_over_median", K_NUM, 0}, [W_ROWERR] = {"row_rel_err", K_NUM, CF_REQ}};

enum { C_MAP, C_FEATURES, C_R, C_PAIRS, C_SEEDS, C_QUERIES, C_ACC, C_SMACC, C_NCOL };
static const colspec recall_cols[C_NCOL] = {
    [C_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [C_FEATURES] = {"features", K_NUM, CF_REQ | CF_KEY},
    [C_R] = {"r", K_NUM, 0}, [C_PAIRS] = {"pairs", K_NUM, CF_REQ | CF_KEY},
    [C_SEEDS] = {"seeds", K_NUM, 0}, [C_QUERIES] = {"queries", K_NUM, 0},
    [C_ACC] = {"accuracy", K_NUM, CF_REQ}, [C_SMACC] = {"softmax_accuracy", K_NUM, 0}};

enum { X_MODE, X_N, X_HEADS, X_DK, X_DV, X_SCALE, X_RANKS, X_THREADS, X_SMSEC, X_SMGF, X_FLOORSEC,
       X_NCOL };
static const colspec refs_cols[X_NCOL] = {
    [X_MODE] = {"mode", K_STR, CF_REQ | CF_KEY}, [X_N] = {"n", K_NUM, CF_REQ | CF_KEY},
    [X_HEADS] = {"heads", K_NUM, 0}, [X_DK] = {"dk", K_NUM, 0}, [X_DV] = {"dv", K_NUM, 0},
    [X_SCALE] = {"input_scale", K_NUM, 0}, [X_RANKS] = {"ranks", K_NUM, 0},
    [X_THREADS] = {"threads", K_NUM, 0}, [X_SMSEC] = {"softmax_seconds", K_NUM, 0},
    [X_SMGF] = {"softmax_gflops", K_NUM, 0}, [X_FLOORSEC] = {"floor_seconds", K_NUM, 0}};

/* ======================================================================================== */
/* Aggregation                                                                              */
/* ======================================================================================== */

typedef struct {
  const char **s;
  int n, cap;
} strset;

static int strset_find(const strset *ss, const char *s) {
  for (int i = 0; i < ss->n; i++)
    if (!strcmp(ss->s[i], s)) return i;
  return -1;
}

static int strset_add(strset *ss, const char *s) { /* index, or -1: out of memory */
  int i = strset_find(ss, s);
  if (i >= 0) return i;
  if (ss->n == ss->cap) {
    int nc = ss->cap ? 2 * ss->cap : 16;
    const char **ns = la_realloc(ss->s, (size_t)nc * sizeof *ns);
    if (!ns) return -1;
    ss->s = ns, ss->cap = nc;
  }
  ss->s[ss->n] = s;
  return ss->n++;
}

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
  seedstat st[R_NCOL];      /* numeric value columns R_OUT.. */
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
  int oom;              /* a plot could not allocate: the report fails (no silent gaps) */
  double ref_n, ref_scale;
  plotinfo plot[NPLOT];
} ctx;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static seedstat summarize(double *v, int k) {
  seedstat s = {NAN, NAN, NAN, k, 0};
  int m = 0;
  for (int i = 0; i < k; i++) {
    if (isnan(v[i])) s.nnan++;
    else v[m++] = v[i];
  }
  if (m) {
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    s.lo = v[0], s.hi = v[m - 1];
    s.med = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
  }
  if (s.nnan) s.med = NAN;
  return s;
}

static int cmp_results(const void *a, const void *b) {
  const trow *x = a, *y = b;
  if (x->map != y->map) return x->map - y->map;
  if (x->mode != y->mode) return x->mode - y->mode;
  static const int key[] = {R_N, R_SCALE, R_FEATURES, R_SEED};
  for (size_t i = 0; i < sizeof key / sizeof *key; i++) {
    int c = cmp_double(&x->v[key[i]], &y->v[key[i]]);
    if (c) return c;
  }
  return (x->line > y->line) - (x->line < y->line);
}

static double log_dist_to_one(double s) { return s > 0 ? fabs(log(s)) : INFINITY; }

static la_status aggregate(ctx *c, char *err, size_t errlen) {
  table *t = &c->res;
  for (int64_t i = 0; i < t->n; i++) {
    trow *r = &t->row[i];
    if ((r->map = strset_add(&c->maps, r->s[R_MAP])) < 0 || (r->mode = strset_add(&c->modes, r->s[R_MODE])) < 0)
      return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the list of feature maps");
    if (!HAS(r, R_R)) r->v[R_R] = r->v[R_FEATURES];
  }
  table *others[] = {&c->bias, &c->rows, &c->recall};
  const int mapcol[] = {B_MAP, W_MAP, C_MAP}, modecol[] = {B_MODE, W_MODE, -1};
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < others[k]->n; i++) {
      trow *r = &others[k]->row[i];
      if ((r->map = strset_add(&c->maps, r->s[mapcol[k]])) < 0)
        return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the list of feature maps");
      if (modecol[k] >= 0 && *r->s[modecol[k]] && (r->mode = strset_add(&c->modes, r->s[modecol[k]])) < 0)
        return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the list of modes");
    }
  const int nm = c->maps.n > 0 ? c->maps.n : 1;
  c->random = la_calloc((size_t)nm, sizeof *c->random);
  c->wmax = la_calloc((size_t)nm, sizeof *c->wmax);
  c->ag = la_calloc(t->n ? (size_t)t->n : 1, sizeof *c->ag);
  c->sl = la_calloc(t->n ? (size_t)t->n : 1, sizeof *c->sl);
  double *buf = la_malloc((t->n ? (size_t)t->n : 1) * sizeof *buf);
  if (!c->random || !c->wmax || !c->ag || !c->sl || !buf) {
    free(buf);
    return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the aggregates of %lld rows", (long long)t->n);
  }
  qsort(t->row, (size_t)t->n, sizeof *t->row, cmp_results);

  /* Random maps: more than one seed or width, or a row in bias.csv. */
  double *seed0 = la_malloc((size_t)nm * sizeof *seed0), *feat0 = la_malloc((size_t)nm * sizeof *feat0);
  if (!seed0 || !feat0) {
    free(seed0), free(feat0), free(buf);
    return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the aggregates");
  }
  for (int m = 0; m < nm; m++) seed0[m] = feat0[m] = NAN, c->wmax[m] = -INFINITY;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (isnan(seed0[r->map])) seed0[r->map] = r->v[R_SEED], feat0[r->map] = r->v[R_FEATURES];
    if (r->v[R_SEED] != seed0[r->map] || r->v[R_FEATURES] != feat0[r->map]) c->random[r->map] = 1;
    if (r->v[R_FEATURES] > c->wmax[r->map]) c->wmax[r->map] = r->v[R_FEATURES];
  }
  free(seed0), free(feat0);
  for (int64_t i = 0; i < c->bias.n; i++) c->random[c->bias.row[i].map] = 1;

  /* Groups over seeds. */
  for (int64_t i = 0; i < t->n;) {
    int64_t j = i + 1;
    const trow *a = &t->row[i];
    while (j < t->n && t->row[j].map == a->map && t->row[j].mode == a->mode &&
           t->row[j].v[R_N] == a->v[R_N] && t->row[j].v[R_SCALE] == a->v[R_SCALE] &&
           t->row[j].v[R_FEATURES] == a->v[R_FEATURES])
      j++;
    agg *g = &c->ag[c->nag++];
    g->map = a->map, g->mode = a->mode, g->features = a->v[R_FEATURES], g->n = a->v[R_N];
    g->scale = a->v[R_SCALE], g->r = a->v[R_R], g->heads = a->v[R_HEADS], g->dk = a->v[R_DK];
    g->dv = a->v[R_DV], g->rows = (int)(j - i);
    for (int col = R_OUT; col < R_NCOL; col++) {
      int k = 0;
      for (int64_t q = i; q < j; q++)
        if (HAS(&t->row[q], col)) buf[k++] = t->row[q].v[col];
      g->st[col] = summarize(buf, k);
    }
    i = j;
  }
  free(buf);

  /* Reference setting of the plots: the largest n, the input scale nearest 1. */
  c->ref_n = -INFINITY, c->ref_scale = NAN;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (r->v[R_N] > c->ref_n) c->ref_n = r->v[R_N];
    double d = log_dist_to_one(r->v[R_SCALE]), d0 = log_dist_to_one(c->ref_scale);
    if (isnan(c->ref_scale) || d < d0 || (d == d0 && r->v[R_SCALE] < c->ref_scale)) c->ref_scale = r->v[R_SCALE];
  }

  /* Slopes of log(median out_rel_err) on log(features) per (map, mode, n, input_scale). */
  for (int64_t i = 0; i < c->nag;) {
    int64_t j = i;
    const agg *a = &c->ag[i];
    double sx = 0, sy = 0, sxx = 0, sxy = 0, wmin = INFINITY, wmax = -INFINITY;
    int k = 0;
    for (; j < c->nag && c->ag[j].map == a->map && c->ag[j].mode == a->mode && c->ag[j].n == a->n &&
           c->ag[j].scale == a->scale;
         j++) {
      double y = c->ag[j].st[R_OUT].med, x = c->ag[j].features;
      if (!(y > 0) || !isfinite(y) || !(x > 0)) continue;
      x = log(x), y = log(y);
      sx += x, sy += y, sxx += x * x, sxy += x * y, k++;
      if (c->ag[j].features < wmin) wmin = c->ag[j].features;
      if (c->ag[j].features > wmax) wmax = c->ag[j].features;
    }
    if (k >= 2 && wmax > wmin) {
      slopefit *s = &c->sl[c->nsl++];
      s->map = a->map, s->mode = a->mode, s->n = a->n, s->scale = a->scale;
      s->widths = k, s->wmin = wmin, s->wmax = wmax;
      s->slope = (k * sxy - sx * sy) / (k * sxx - sx * sx);
    }
    i = j;
  }
  return LA_OK;
}

/* ======================================================================================== */
/* Formatting helpers                                                                       */
/* ======================================================================================== */

typedef struct {
  char s[112];
} numstr;

static numstr fg(double v) { /* 3 significant digits; nan, inf */
  numstr r;
  if (isnan(v)) snprintf(r.s, sizeof r.s, "nan");
  else if (isinf(v)) snprintf(r.s, sizeof r.s, v > 0 ? "inf" : "-inf");
  else snprintf(r.s, sizeof r.s, "%.3g", v);
  return r;
}

static numstr fgs(const seedstat *s) { /* a seed statistic, or an em dash when not computed */
  numstr r;
  if (!s->cnt) snprintf(r.s, sizeof r.s, "\u2014");
  else r = fg(s->med);
  return r;
}

static numstr fi(double v) { /* an integer-valued column */
  numstr r;
  if (isnan(v)) snprintf(r.s, sizeof r.s, "\u2014");
  else snprintf(r.s, sizeof r.s, "%.0f", v);
  return r;
}

static numstr fgm(double v, int have) {
  numstr r;
  if (!have) snprintf(r.s, sizeof r.s, "\u2014");
  else r = fg(v);
  return r;
}

/* A setting in words: "features 64, n 1024, input scale 1, causal". */
static numstr setting(const ctx *c, double features, double n, double scale, int mode) {
  numstr r;
  char f[48] = "";
  if (!isnan(features)) snprintf(f, sizeof f, "features %.0f, ", features);
  snprintf(r.s, sizeof r.s, "%sn %.0f, input scale %g%s%s", f, n, scale, mode >= 0 ? ", " : "",
           mode >= 0 ? c->modes.s[mode] : "");
  return r;
}

/* ======================================================================================== */
/* plots.gp                                                                                 */
/* ======================================================================================== */

#define MAXS 48
typedef struct {
  int blk;
  char title[128];
  char color[32];  /* "lc 3" or "lc rgb 'black'" */
  int dt, pt, style; /* style: 0 linespoints, 1 yerrorlines, 2 points, 3 lines */
} series;

typedef struct {
  char title[200], xlabel[120], ylabel[160];
  int logx, logy;   /* 0 or the base */
  double ylo, yhi;  /* yrange when ylo < yhi */
  series s[MAXS];
  int ns, data;     /* data: series with points (the reference lines do not count) */
} panel;

typedef struct {
  FILE *g;
  int nblk;
} gpw;

static void gp_str(FILE *g, const char *s) { /* a double-quoted gnuplot string */
  fputc('"', g);
  for (; *s; s++) {
    if (*s == '\n') fputs("\\n", g); /* a line break of a title */
    else if ((unsigned char)*s >= 32) {
      if (*s == '"' || *s == '\\') fputc('\\', g);
      fputc(*s, g);
    }
  }
  fputc('"', g);
}

/* A datablock of n points: x y [lo hi]. Returns its number. */
static int gp_block(gpw *w, const double *x, const double *y, const double *lo, const double *hi, int n) {
  int b = w->nblk++;
  fprintf(w->g, "$d%d << EOD\n", b);
  for (int i = 0; i < n; i++) {
    fprintf(w->g, "%.17g %.17g", x[i], y[i]);
    if (lo) fprintf(w->g, " %.17g %.17g", lo[i], hi[i]);
    fputc('\n', w->g);
  }
  fprintf(w->g, "EOD\n");
  return b;
}

static series *panel_add(panel *p, gpw *w, const double *x, const double *y, const double *lo,
                         const double *hi, int n, const char *title, int style, int data) {
  if (n <= 0 || p->ns >= MAXS) return NULL;
  series *s = &p->s[p->ns++];
  s->blk = gp_block(w, x, y, lo, hi, n);
  snprintf(s->title, sizeof s->title, "%s", title);
  snprintf(s->color, sizeof s->color, "lc rgb 'black'");
  s->dt = 1, s->pt = 7, s->style = style;
  p->data += data;
  return s;
}

static void series_color(series *s, int map) {
  if (s) snprintf(s->color, sizeof s->color, "lc %d", map + 1);
}

/* A valid point of a log-scale plot. */
static int pos(double v) { return v > 0 && isfinite(v); }

/* A reference line c * x^-1/2 through the first point of the first random-map series, over
 * the x range of the random series. */
static void panel_ref_slope(panel *p, gpw *w, double x0, double y0, double xmin, double xmax, const char *label) {
  if (!pos(x0) || !pos(y0) || !(xmax > xmin) || !pos(xmin)) return;
  double cst = y0 * sqrt(x0), x[2] = {xmin, xmax}, y[2] = {cst / sqrt(xmin), cst / sqrt(xmax)};
  series *s = panel_add(p, w, x, y, NULL, NULL, 2, label, 3, 0);
  if (s) s->dt = 3;
}

static void gp_panel(FILE *g, const panel *p) {
  fprintf(g, "set title ");
  gp_str(g, p->title);
  fprintf(g, "\nset xlabel ");
  gp_str(g, p->xlabel);
  fprintf(g, "\nset ylabel ");
  gp_str(g, p->ylabel);
  fprintf(g, "\nunset logscale\n");
  if (p->logx) fprintf(g, "set logscale x %d\n", p->logx);
  if (p->logy) fprintf(g, "set logscale y %d\n", p->logy);
  if (p->ylo < p->yhi) fprintf(g, "set yrange [%g:%g]\n", p->ylo, p->yhi);
  else fprintf(g, "set yrange [*:*]\n");
  fprintf(g, "set xrange [*:*]\nplot ");
  for (int i = 0; i < p->ns; i++) {
    const series *s = &p->s[i];
    static const char *with[] = {"linespoints", "yerrorlines", "points", "lines"};
    fprintf(g, "%s$d%d using %s with %s %s dt %d pt %d title ", i ? ", \\\n     " : "", s->blk,
            s->style == 1 ? "1:2:3:4" : "1:2", with[s->style], s->color, s->dt, s->pt);
    gp_str(g, s->title);
  }
  fprintf(g, "\n");
}

/* One PNG: the terminal (pngcairo when this gnuplot has it), the panels, the output closed. */
static void gp_figure(FILE *g, const char *file, const char *title, const panel *p, int np) {
  int nonempty = 0;
  for (int i = 0; i < np; i++) nonempty += p[i].data > 0;
  int cols = nonempty <= 2 ? nonempty : (nonempty <= 4 ? 2 : 3);
  int rows = (nonempty + cols - 1) / cols;
  int wpx = nonempty == 1 ? 900 : 700 * cols, hpx = nonempty == 1 ? 600 : 520 * rows;
  fprintf(g, "\n# ---- %s ----\n", file);
  fprintf(g, "if (cairo) { set terminal pngcairo size %d,%d noenhanced font ',10' } "
             "else { set terminal png size %d,%d noenhanced }\n", wpx, hpx, wpx, hpx);
  fprintf(g, "set output '%s'.suffix\n", file);
  fprintf(g, "set multiplot layout %d,%d", rows, cols);
  if (nonempty > 1) { /* one panel has its own title */
    fprintf(g, " title ");
    gp_str(g, title);
  }
  fprintf(g, "\n");
  for (int i = 0; i < np; i++)
    if (p[i].data > 0) gp_panel(g, &p[i]);
  fprintf(g, "unset multiplot\nset output\n");
}

static int nth_mode_title(const ctx *c, char *buf, size_t len, int map, int mode, int with_mode) {
  return snprintf(buf, len, "%s%s%s", c->maps.s[map], with_mode ? " " : "", with_mode ? c->modes.s[mode] : "");
}

/* Points of one results column against features for (map, mode) at (n, scale). */
static int pts_vs_features(const ctx *c, int map, int mode, double n, double scale, int col,
                           double *x, double *y, double *lo, double *hi) {
  int k = 0;
  for (int64_t i = 0; i < c->nag; i++) {
    const agg *a = &c->ag[i];
    if (a->map != map || a->mode != mode || a->n != n || a->scale != scale) continue;
    const seedstat *s = &a->st[col];
    if (!s->cnt || !pos(s->med)) continue;
    x[k] = a->features, y[k] = s->med;
    lo[k] = pos(s->lo) ? s->lo : s->med, hi[k] = isfinite(s->hi) ? s->hi : s->med;
    k++;
  }
  return k;
}

static void count_distinct(const double *v, int64_t n, int *nd, double *vmin, double *vmax) {
  *nd = 0, *vmin = INFINITY, *vmax = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    int seen = 0;
    for (int64_t j = 0; j < i && !seen; j++) seen = v[j] == v[i];
    if (!seen) (*nd)++;
    if (v[i] < *vmin) *vmin = v[i];
    if (v[i] > *vmax) *vmax = v[i];
  }
}

/* The distinct values of a results column: count, min, max. */
static void res_distinct(const ctx *c, int col, int *nd, double *vmin, double *vmax) {
  double *v = la_malloc((c->res.n ? (size_t)c->res.n : 1) * sizeof *v);
  if (!v) {
    *nd = 0;
    ((ctx *)c)->oom = 1; /* compose_plots fails the report */
    return;
  }
  int64_t k = 0;
  for (int64_t i = 0; i < c->res.n; i++) {
    int seen = 0;
    for (int64_t j = 0; j < k && !seen; j++) seen = v[j] == c->res.row[i].v[col];
    if (!seen) v[k++] = c->res.row[i].v[col];
  }
  count_distinct(v, k, nd, vmin, vmax);
  free(v);
}

static const char *rel_label = "||X - X_softmax||_F / ||X_softmax||_F (relative)";

/* 1. err_vs_features.png */
static void plot_features(ctx *c, gpw *w, double *x, double *y, double *lo, double *hi) {
  plotinfo *pi = &c->plot[P_FEAT];
  int nd;
  double a, b;
  res_distinct(c, R_FEATURES, &nd, &a, &b);
  if (nd < 2) {
    snprintf(pi->why, sizeof pi->why, "results.csv has one features value only");
    return;
  }
  const int np = c->modes.n + 1;
  panel *p = la_calloc((size_t)np, sizeof *p);
  if (!p) {
    c->oom = 1;
    return;
  }
  for (int mo = 0; mo < c->modes.n; mo++) {
    panel *q = &p[mo];
    snprintf(q->title, sizeof q->title, "Output error vs softmax, %s\nn %.0f, input scale %g; median over seeds, bars min-max",
             c->modes.s[mo], c->ref_n, c->ref_scale);
    snprintf(q->xlabel, sizeof q->xlabel, "features m (random projections; dk for elu1/relu)");
    snprintf(q->ylabel, sizeof q->ylabel, "output: %s", rel_label);
    q->logx = 2, q->logy = 10;
    double rx0 = NAN, ry0 = NAN, rmin = INFINITY, rmax = -INFINITY;
    for (int m = 0; m < c->maps.n; m++) {
      int k = pts_vs_features(c, m, mo, c->ref_n, c->ref_scale, R_OUT, x, y, lo, hi);
      series_color(panel_add(q, w, x, y, lo, hi, k, c->maps.s[m], 1, 1), m);
      if (c->random[m] && k >= 2) {
        if (isnan(rx0)) rx0 = x[0], ry0 = y[0];
        if (x[0] < rmin) rmin = x[0];
        if (x[k - 1] > rmax) rmax = x[k - 1];
      }
    }
    panel_ref_slope(q, w, rx0, ry0, rmin, rmax, "reference slope m^-1/2");
  }
  /* Kernel error against r, with the floor: at the largest n that has a floor. */
  panel *q = &p[c->modes.n];
  double kn = -INFINITY;
  for (int64_t i = 0; i < c->res.n; i++)
    if (c->res.row[i].v[R_SCALE] == c->ref_scale && HAS(&c->res.row[i], R_FLOOR) && c->res.row[i].v[R_N] > kn)
      kn = c->res.row[i].v[R_N];
  const int have_floor = isfinite(kn);
  if (!have_floor) kn = c->ref_n;
  snprintf(q->title, sizeof q->title, "Kernel error vs exp(s QK^T), and the rank-r floor\nn %.0f, input scale %g; median over seeds%s",
           kn, c->ref_scale, have_floor ? "" : "; floor not computed");
  snprintf(q->xlabel, sizeof q->xlabel, "feature width r (columns of phi)");
  snprintf(q->ylabel, sizeof q->ylabel, "||phi(Q)phi(K)^T - exp(sQK^T)||_F / ||exp(sQK^T)||_F");
  q->logx = 2, q->logy = 10;
  double rx0 = NAN, ry0 = NAN, rmin = INFINITY, rmax = -INFINITY;
  for (int m = 0; m < c->maps.n; m++) {
    int k = 0;
    for (int64_t i = 0; i < c->nag; i++) { /* the kernel does not depend on the mode: first mode */
      const agg *g = &c->ag[i];
      if (g->map != m || g->n != kn || g->scale != c->ref_scale || !g->st[R_KERNEL].cnt || !pos(g->st[R_KERNEL].med))
        continue;
      int dup = 0;
      for (int j = 0; j < k && !dup; j++) dup = x[j] == g->r;
      if (dup) continue;
      x[k] = g->r, y[k] = g->st[R_KERNEL].med;
      lo[k] = pos(g->st[R_KERNEL].lo) ? g->st[R_KERNEL].lo : y[k];
      hi[k] = isfinite(g->st[R_KERNEL].hi) ? g->st[R_KERNEL].hi : y[k];
      k++;
    }
    /* sort by r (modes may interleave) */
    for (int i = 1; i < k; i++)
      for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
        double t;
        t = x[j], x[j] = x[j - 1], x[j - 1] = t;
        t = y[j], y[j] = y[j - 1], y[j - 1] = t;
        t = lo[j], lo[j] = lo[j - 1], lo[j - 1] = t;
        t = hi[j], hi[j] = hi[j - 1], hi[j - 1] = t;
      }
    series_color(panel_add(q, w, x, y, lo, hi, k, c->maps.s[m], 1, 1), m);
    if (c->random[m] && k >= 2) {
      if (isnan(rx0)) rx0 = x[0], ry0 = y[0];
      if (x[0] < rmin) rmin = x[0];
      if (x[k - 1] > rmax) rmax = x[k - 1];
    }
  }
  if (have_floor) { /* the floor per r: median over the rows (every map and seed at that r) */
    int k = 0;
    double *v = la_malloc((size_t)c->res.n * sizeof *v);
    if (!v) c->oom = 1;
    for (int64_t i = 0; v && i < c->res.n; i++) {
      const trow *r = &c->res.row[i];
      if (r->v[R_N] != kn || r->v[R_SCALE] != c->ref_scale || !HAS(r, R_FLOOR)) continue;
      int dup = 0;
      for (int j = 0; j < k && !dup; j++) dup = x[j] == r->v[R_R];
      if (dup) continue;
      int nv = 0;
      for (int64_t j = 0; j < c->res.n; j++) {
        const trow *s = &c->res.row[j];
        if (s->v[R_N] == kn && s->v[R_SCALE] == c->ref_scale && s->v[R_R] == r->v[R_R] && HAS(s, R_FLOOR))
          v[nv++] = s->v[R_FLOOR];
      }
      seedstat st = summarize(v, nv);
      if (!pos(st.med)) continue;
      x[k] = r->v[R_R], y[k] = st.med, k++;
    }
    free(v);
    for (int i = 1; i < k; i++)
      for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
        double t;
        t = x[j], x[j] = x[j - 1], x[j - 1] = t;
        t = y[j], y[j] = y[j - 1], y[j - 1] = t;
      }
    series *s = panel_add(q, w, x, y, NULL, NULL, k, "rank-r floor (Eckart-Young)", 0, 1);
    if (s) s->dt = 2, s->pt = 5;
  }
  panel_ref_slope(q, w, rx0, ry0, rmin, rmax, "reference slope r^-1/2");
  int any = 0;
  for (int i = 0; i < np; i++) any += p[i].data > 0;
  if (any) {
    gp_figure(w->g, pi->file, "Error against width", p, np);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "no positive finite out_rel_err or kernel_rel_err at n %.0f, input scale %g",
             c->ref_n, c->ref_scale);
  }
  free(p);
}

/* 2. err_vs_scale.png and 3. err_vs_n.png: out_rel_err against input_scale (at n = ref_n) or n
 * (at the reference scale), each map at its largest features. */
static void plot_vs(ctx *c, gpw *w, int which, double *x, double *y, double *lo, double *hi) {
  const int col = which == P_SCALE ? R_SCALE : R_N;
  plotinfo *pi = &c->plot[which];
  int nd;
  double vmin, vmax;
  res_distinct(c, col, &nd, &vmin, &vmax);
  if (nd < 2) {
    snprintf(pi->why, sizeof pi->why, "results.csv has one %s value only", which == P_SCALE ? "input_scale" : "n");
    return;
  }
  panel *p = la_calloc((size_t)c->modes.n, sizeof *p);
  if (!p) {
    c->oom = 1;
    return;
  }
  for (int mo = 0; mo < c->modes.n; mo++) {
    panel *q = &p[mo];
    if (which == P_SCALE) {
      snprintf(q->title, sizeof q->title, "Output error vs input scale, %s\nn %.0f; each map at its largest features; median over seeds",
               c->modes.s[mo], c->ref_n);
      snprintf(q->xlabel, sizeof q->xlabel, "input scale (multiplies Q and K; dimensionless)");
      q->logx = vmin > 0 && vmax / vmin >= 4 ? 2 : 0;
    } else {
      snprintf(q->title, sizeof q->title, "Output error vs sequence length, %s\ninput scale %g; each map at its largest features; median over seeds",
               c->modes.s[mo], c->ref_scale);
      snprintf(q->xlabel, sizeof q->xlabel, "sequence length n (tokens)");
      q->logx = vmin > 0 && vmax / vmin >= 4 ? 2 : 0;
    }
    snprintf(q->ylabel, sizeof q->ylabel, "output: %s", rel_label);
    q->logy = 10;
    for (int m = 0; m < c->maps.n; m++) {
      int k = 0;
      for (int64_t i = 0; i < c->nag; i++) {
        const agg *a = &c->ag[i];
        if (a->map != m || a->mode != mo || a->features != c->wmax[m]) continue;
        if (which == P_SCALE ? a->n != c->ref_n : a->scale != c->ref_scale) continue;
        const seedstat *s = &a->st[R_OUT];
        if (!s->cnt || !pos(s->med)) continue;
        x[k] = which == P_SCALE ? a->scale : a->n, y[k] = s->med;
        lo[k] = pos(s->lo) ? s->lo : s->med, hi[k] = isfinite(s->hi) ? s->hi : s->med;
        k++;
      }
      for (int i = 1; i < k; i++) /* by x: the aggregates are ordered by n, then scale */
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
          double t;
          t = x[j], x[j] = x[j - 1], x[j - 1] = t;
          t = y[j], y[j] = y[j - 1], y[j - 1] = t;
          t = lo[j], lo[j] = lo[j - 1], lo[j - 1] = t;
          t = hi[j], hi[j] = hi[j - 1], hi[j - 1] = t;
        }
      char t[128];
      snprintf(t, sizeof t, "%s (features %.0f)", c->maps.s[m], c->wmax[m]);
      series_color(panel_add(q, w, x, y, lo, hi, k, t, 1, 1), m);
    }
  }
  int any = 0;
  for (int i = 0; i < c->modes.n; i++) any += p[i].data > 0;
  if (any) {
    gp_figure(w->g, pi->file, which == P_SCALE ? "Error against input scale" : "Error against sequence length", p, c->modes.n);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "no positive finite out_rel_err at %s",
             which == P_SCALE ? "the reference n" : "the reference input scale");
  }
  free(p);
}

/* 4. grad_err.png */
static void plot_grad(ctx *c, gpw *w, double *x, double *y, double *lo, double *hi) {
  plotinfo *pi = &c->plot[P_GRAD];
  panel p[3];
  memset(p, 0, sizeof p);
  static const int cols[3] = {R_GQ, R_GK, R_GV};
  static const char *names[3] = {"dQ", "dK", "dV"};
  for (int g = 0; g < 3; g++) {
    panel *q = &p[g];
    snprintf(q->title, sizeof q->title, "Gradient %s vs softmax\nn %.0f, input scale %g; median over seeds",
             names[g], c->ref_n, c->ref_scale);
    snprintf(q->xlabel, sizeof q->xlabel, "features m (random projections; dk for elu1/relu)");
    snprintf(q->ylabel, sizeof q->ylabel, "%s: %s", names[g], rel_label);
    q->logx = 2, q->logy = 10;
    for (int m = 0; m < c->maps.n; m++)
      for (int mo = 0; mo < c->modes.n; mo++) {
        int k = pts_vs_features(c, m, mo, c->ref_n, c->ref_scale, cols[g], x, y, lo, hi);
        char t[128];
        nth_mode_title(c, t, sizeof t, m, mo, c->modes.n > 1);
        series *s = panel_add(q, w, x, y, lo, hi, k, t, 1, 1);
        series_color(s, m);
        if (s) s->dt = mo + 1, s->pt = 7 - 2 * (mo % 3);
      }
  }
  if (p[0].data + p[1].data + p[2].data) {
    gp_figure(w->g, pi->file, "Gradient error against width", p, 3);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "no gradient errors (grad_*_rel_err) at n %.0f, input scale %g",
             c->ref_n, c->ref_scale);
  }
}

/* 5. bias.png */
static void plot_bias(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_BIAS];
  if (!c->bias.present || !c->bias.n) {
    snprintf(pi->why, sizeof pi->why, c->bias.present ? "bias.csv has no rows" : "no bias.csv");
    return;
  }
  double bn = -INFINITY, bs = NAN;
  for (int64_t i = 0; i < c->bias.n; i++) {
    const trow *r = &c->bias.row[i];
    if (r->v[B_N] > bn) bn = r->v[B_N];
    double d = log_dist_to_one(r->v[B_SCALE]), d0 = log_dist_to_one(bs);
    if (isnan(bs) || d < d0 || (d == d0 && r->v[B_SCALE] < bs)) bs = r->v[B_SCALE];
  }
  panel p[2];
  memset(p, 0, sizeof p);
  for (int kind = 0; kind < 2; kind++) {
    panel *q = &p[kind];
    snprintf(q->title, sizeof q->title, "%s of the mean over seeds vs softmax, and its seed noise\nn %.0f, input scale %g",
             kind ? "Kernel error" : "Output error", bn, bs);
    snprintf(q->xlabel, sizeof q->xlabel, "features m (random projections)");
    snprintf(q->ylabel, sizeof q->ylabel, kind ? "kernel relative error (mean over seeds): solid; noise: dashed"
                                              : "output relative error (mean over seeds): solid; noise: dashed");
    q->logx = 2, q->logy = 10;
    const int cm = kind ? B_KMEAN : B_OUTMEAN, cn = kind ? B_KNOISE : B_OUTNOISE;
    for (int m = 0; m < c->maps.n; m++)
      for (int mo = 0; mo < c->modes.n; mo++) {
        if (kind && mo > 0) break; /* the kernel does not depend on the mode */
        for (int which = 0; which < 2; which++) {
          int k = 0;
          for (int64_t i = 0; i < c->bias.n; i++) {
            const trow *r = &c->bias.row[i];
            if (r->map != m || (!kind && r->mode != mo) || r->v[B_N] != bn || r->v[B_SCALE] != bs) continue;
            double v = r->v[which ? cn : cm];
            if (!pos(v)) continue;
            int dup = 0;
            for (int j = 0; j < k && !dup; j++) dup = x[j] == r->v[B_FEATURES];
            if (dup) continue;
            x[k] = r->v[B_FEATURES], y[k] = v, k++;
          }
          for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
              double t;
              t = x[j], x[j] = x[j - 1], x[j - 1] = t;
              t = y[j], y[j] = y[j - 1], y[j - 1] = t;
            }
          char t[128];
          snprintf(t, sizeof t, "%s%s%s %s", c->maps.s[m], !kind && c->modes.n > 1 ? " " : "",
                   !kind && c->modes.n > 1 ? c->modes.s[mo] : "", which ? "noise" : "mean");
          series *s = panel_add(q, w, x, y, NULL, NULL, k, t, 0, 1);
          series_color(s, m);
          if (s) s->dt = which ? 2 : 1, s->pt = which ? 6 : 7 - 2 * (mo % 3);
        }
      }
  }
  if (p[0].data + p[1].data) {
    gp_figure(w->g, pi->file, "Bias: error of the mean over seeds against the noise of that mean", p, 2);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "bias.csv has no positive finite mean errors at n %.0f, input scale %g", bn, bs);
  }
}

/* 6. denominators.png */
static void plot_den(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_DEN];
  if (!c->rows.present || !c->rows.n) {
    snprintf(pi->why, sizeof pi->why, c->rows.present ? "rows.csv has no rows" : "no rows.csv");
    return;
  }
  const int xc = c->rows.col[W_DENMED] >= 0 ? W_DENMED : (c->rows.col[W_DEN] >= 0 ? W_DEN : -1);
  if (xc < 0) {
    snprintf(pi->why, sizeof pi->why, "rows.csv has neither den_over_median nor den");
    return;
  }
  panel p[1];
  memset(p, 0, sizeof p);
  int64_t dropped = 0;
  for (int m = 0; m < c->maps.n; m++) {
    int k = 0;
    for (int64_t i = 0; i < c->rows.n; i++) {
      const trow *r = &c->rows.row[i];
      if (r->map != m) continue;
      if (!pos(r->v[xc]) || !pos(r->v[W_ROWERR])) {
        dropped++;
        continue;
      }
      x[k] = r->v[xc], y[k] = r->v[W_ROWERR], k++;
    }
    series *s = panel_add(&p[0], w, x, y, NULL, NULL, k, c->maps.s[m], 2, 1);
    series_color(s, m);
    if (s) s->pt = 7;
  }
  snprintf(p[0].title, sizeof p[0].title, "Row error against the row's denominator (rows.csv sample)%s",
           dropped ? "\nrows with a value <= 0 or not finite are not shown (log axes)" : "");
  snprintf(p[0].xlabel, sizeof p[0].xlabel, xc == W_DENMED ? "denominator / median denominator (dimensionless)"
                                                           : "denominator");
  snprintf(p[0].ylabel, sizeof p[0].ylabel, "row relative error ||o_i - o_i,softmax|| / ||o_i,softmax||");
  p[0].logx = 10, p[0].logy = 10;
  if (p[0].data) {
    gp_figure(w->g, pi->file, "Denominator amplification", p, 1);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "rows.csv has no row with a positive finite denominator and error");
  }
}

/* 7. recall.png */
static void plot_recall(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_RECALL];
  if (!c->recall.present || !c->recall.n) {
    snprintf(pi->why, sizeof pi->why, c->recall.present ? "recall.csv has no rows" : "no recall.csv (run with --recall)");
    return;
  }
  panel p[1];
  memset(p, 0, sizeof p);
  const table *t = &c->recall;
  double pmin = INFINITY, pmax = -INFINITY;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (r->v[C_PAIRS] < pmin) pmin = r->v[C_PAIRS];
    if (r->v[C_PAIRS] > pmax) pmax = r->v[C_PAIRS];
    int first = 1; /* first row of its (map, features) */
    for (int64_t j = 0; j < i && first; j++)
      first = !(t->row[j].map == r->map && t->row[j].v[C_FEATURES] == r->v[C_FEATURES]);
    if (!first) continue;
    int k = 0;
    for (int64_t j = i; j < t->n; j++) {
      const trow *s = &t->row[j];
      if (s->map != r->map || s->v[C_FEATURES] != r->v[C_FEATURES] || !isfinite(s->v[C_ACC])) continue;
      x[k] = s->v[C_PAIRS], y[k] = s->v[C_ACC], k++;
    }
    for (int a = 1; a < k; a++)
      for (int b = a; b > 0 && x[b - 1] > x[b]; b--) {
        double tt;
        tt = x[b], x[b] = x[b - 1], x[b - 1] = tt;
        tt = y[b], y[b] = y[b - 1], y[b - 1] = tt;
      }
    char tl[128];
    snprintf(tl, sizeof tl, "%s (features %.0f)", c->maps.s[r->map], r->v[C_FEATURES]);
    series *s = panel_add(&p[0], w, x, y, NULL, NULL, k, tl, 0, 1);
    series_color(s, r->map);
    if (s) s->pt = 7 - 2 * (p[0].ns % 3), s->dt = 1 + (p[0].ns - 1) % 4;
  }
  { /* softmax: the median of softmax_accuracy per pairs value */
    int k = 0;
    double *v = la_malloc((size_t)t->n * sizeof *v);
    if (!v) c->oom = 1;
    for (int64_t i = 0; v && i < t->n; i++) {
      const trow *r = &t->row[i];
      int dup = 0;
      for (int j = 0; j < k && !dup; j++) dup = x[j] == r->v[C_PAIRS];
      if (dup) continue;
      int nv = 0;
      for (int64_t j = 0; j < t->n; j++)
        if (t->row[j].v[C_PAIRS] == r->v[C_PAIRS] && isfinite(t->row[j].v[C_SMACC])) v[nv++] = t->row[j].v[C_SMACC];
      if (!nv) continue;
      seedstat st = summarize(v, nv);
      x[k] = r->v[C_PAIRS], y[k] = st.med, k++;
    }
    free(v);
    for (int a = 1; a < k; a++)
      for (int b = a; b > 0 && x[b - 1] > x[b]; b--) {
        double tt;
        tt = x[b], x[b] = x[b - 1], x[b - 1] = tt;
        tt = y[b], y[b] = y[b - 1], y[b - 1] = tt;
      }
    series *s = panel_add(&p[0], w, x, y, NULL, NULL, k, "softmax attention", 0, 0);
    if (s) s->dt = 2, s->pt = 5;
  }
  snprintf(p[0].title, sizeof p[0].title, "Training-free associative recall");
  snprintf(p[0].xlabel, sizeof p[0].xlabel, "stored key-value pairs");
  snprintf(p[0].ylabel, sizeof p[0].ylabel, "accuracy (fraction of queries recalled)");
  p[0].logx = pmin > 0 && pmax / pmin >= 4 ? 2 : 0;
  p[0].ylo = 0, p[0].yhi = 1.05;
  if (p[0].data) {
    gp_figure(w->g, pi->file, "Associative recall", p, 1);
    pi->planned = 1;
  } else {
    snprintf(pi->why, sizeof pi->why, "recall.csv has no finite accuracy");
  }
}

/* Compose plots.gp in memory. */
static la_status compose_plots(ctx *c, char **text, size_t *len, char *err, size_t errlen) {
  gpw w = {la_open_memstream(text, len), 0};
  if (!w.g) return fail(err, errlen, LA_ERR_NOMEM, "out of memory for plots.gp");
  int64_t nmax = c->res.n;
  if (c->bias.n > nmax) nmax = c->bias.n;
  if (c->rows.n > nmax) nmax = c->rows.n;
  if (c->recall.n > nmax) nmax = c->recall.n;
  if (nmax < 2) nmax = 2;
  double *x = la_malloc(4 * (size_t)nmax * sizeof *x);
  if (!x) {
    fclose(w.g);
    free(*text);
    *text = NULL;
    return fail(err, errlen, LA_ERR_NOMEM, "out of memory for the plot data");
  }
  double *y = x + nmax, *lo = y + nmax, *hi = lo + nmax;
  fprintf(w.g, "# linattn eval: the plots of report.md. Made by linattn from the CSV files of this folder;\n"
               "# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp` in this folder\n"
               "# (gnuplot 5 or later: datablocks).\n"
               "if (!exists(\"suffix\")) suffix = \"\"\n"
               "cairo = strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0\n"
               "set grid\nset key outside right top font ',8'\nset bars small\nset datafile missing 'nan'\n");
  plot_features(c, &w, x, y, lo, hi);
  plot_vs(c, &w, P_SCALE, x, y, lo, hi);
  plot_vs(c, &w, P_N, x, y, lo, hi);
  plot_grad(c, &w, x, y, lo, hi);
  plot_bias(c, &w, x, y);
  plot_den(c, &w, x, y);
  plot_recall(c, &w, x, y);
  free(x);
  int bad = ferror(w.g) || c->oom;
  if (fclose(w.g) != 0 || bad) {
    free(*text);
    *text = NULL;
    return fail(err, errlen, LA_ERR_NOMEM, "out of memory composing plots.gp");
  }
  return LA_OK;
}

/* ======================================================================================== */
/* Running gnuplot                                                                          */
/* ======================================================================================== */

/* The line of gnuplot's stderr that says what went wrong: the first one naming plots.gp, else
 * the last non-blank one. */
static void first_error_line(const char *buf, char *out, size_t outlen) {
  const char *best = NULL, *last = NULL;
  size_t bestlen = 0, lastlen = 0;
  for (const char *p = buf; *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    const char *q = p;
    size_t ql = l;
    while (ql && (*q == ' ' || *q == '\t')) q++, ql--;
    if (ql) {
      last = q, lastlen = ql;
      if (!best && ql > 12 && memmem(q, ql, "plots.gp\"", 9)) best = q, bestlen = ql;
    }
    p += l + (e != NULL);
  }
  if (!best) best = last, bestlen = lastlen;
  if (!best) {
    snprintf(out, outlen, "no message");
    return;
  }
  if (bestlen > 200) bestlen = 200;
  snprintf(out, outlen, "%.*s", (int)bestlen, best);
  for (char *s = out; *s; s++)
    if ((unsigned char)*s < 32) *s = ' ';
}

/* Is there an executable regular file `name` in a folder of PATH (as posix_spawnp searches:
 * an empty entry is the current folder; no PATH is /bin:/usr/bin)? Checked before spawning,
 * because where posix_spawnp is fork and exec (valgrind, some libcs) a missing program only
 * shows as exit status 127. */
static int on_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  const size_t nl = strlen(name);
  for (const char *p = path;;) {
    const char *e = strchr(p, ':');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    char buf[4096];
    if (l + nl + 2 <= sizeof buf) {
      if (l) memcpy(buf, p, l);
      else buf[l++] = '.';
      buf[l] = '/';
      memcpy(buf + l + 1, name, nl + 1);
      struct stat sb;
      if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0) return 1;
    }
    if (!e) return 0;
    p = e + 1;
  }
}

/* gnuplot -e "suffix='SUFFIX'" plots.gp in dir. 1 success; 0 not on PATH; -1 failed (why). */
static int run_gnuplot(const char *dir, const char *suffix, char *why, size_t whylen) {
  if (!on_path("gnuplot")) return 0;
  char setexpr[128];
  snprintf(setexpr, sizeof setexpr, "suffix='%s'", suffix);
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    snprintf(why, whylen, "cannot make a pipe for gnuplot: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
  char *cdexpr = NULL;
  char *argv[9];
  int argc = 0;
  argv[argc++] = "gnuplot";
  argv[argc++] = "-d"; /* --default-settings: no ~/.gnuplot (the script sets everything) */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
  posix_spawn_file_actions_addchdir_np(&fa, dir);
#else
  if (strchr(dir, '\'')) {
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]), close(pfd[1]);
    snprintf(why, whylen, "the folder's name has a quote, which gnuplot's cd cannot take");
    return -1;
  }
  size_t cl = strlen(dir) + 8;
  cdexpr = la_malloc(cl);
  if (!cdexpr) {
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]), close(pfd[1]);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  snprintf(cdexpr, cl, "cd '%s'", dir);
  argv[argc++] = "-e";
  argv[argc++] = cdexpr;
#endif
  argv[argc++] = "-e";
  argv[argc++] = setexpr;
  argv[argc++] = "plots.gp";
  argv[argc] = NULL;
  pid_t pid;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(cdexpr);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    if (rc == ENOENT) return 0;
    snprintf(why, whylen, "cannot start gnuplot: %s", strerror(rc));
    return -1;
  }
  /* Its stderr, until it closes (bounded: the first 64 KiB are kept), with a deadline. */
  char msg[65536];
  size_t nmsg = 0;
  int timed_out = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double left = GNUPLOT_TIMEOUT_S - ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {pfd[0], POLLIN, 0};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char tmp[4096];
    ssize_t r = read(pfd[0], tmp, sizeof tmp);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    size_t keep = (size_t)r < sizeof msg - 1 - nmsg ? (size_t)r : sizeof msg - 1 - nmsg;
    memcpy(msg + nmsg, tmp, keep);
    nmsg += keep;
  }
  close(pfd[0]);
  msg[nmsg] = 0;
  if (timed_out) kill(pid, SIGKILL);
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) {
      snprintf(why, whylen, "cannot wait for gnuplot: %s", strerror(errno));
      return -1;
    }
  if (timed_out) {
    snprintf(why, whylen, "gnuplot did not finish within %d s and was stopped", GNUPLOT_TIMEOUT_S);
    return -1;
  }
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return 1;
  char line[256];
  first_error_line(msg, line, sizeof line);
  if (WIFEXITED(ws))
    snprintf(why, whylen, "gnuplot exited with status %d: %s", WEXITSTATUS(ws), line);
  else
    snprintf(why, whylen, "gnuplot was killed by signal %d: %s", WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, line);
  return -1;
}

/* A PNG with its signature and a non-empty IHDR. */
static int valid_png(const char *path) {
  unsigned char h[24];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, h, sizeof h);
  close(fd);
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (r != (ssize_t)sizeof h || memcmp(h, sig, 8) || memcmp(h + 12, "IHDR", 4)) return 0;
  uint32_t wd = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19];
  uint32_t ht = (uint32_t)h[20] << 24 | (uint32_t)h[21] << 16 | (uint32_t)h[22] << 8 | h[23];
  return wd > 0 && ht > 0;
}

static int fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

/* Make the planned PNGs; the ones not made get their reason. Returns the warning to print
 * (empty when every planned plot was made). */
/* LA_ERR_NOMEM when the file names cannot be allocated (nothing is made); else LA_OK, with
 * a warning when gnuplot is missing or fails. */
static la_status make_pngs(ctx *c, char *warn, size_t warnlen) {
  warn[0] = 0;
  int planned = 0;
  for (int i = 0; i < NPLOT; i++) planned += c->plot[i].planned;
  if (!planned) return LA_OK;
  char *path[NPLOT] = {0}, *tmp[NPLOT] = {0};
  const long self = (long)getpid();
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp.%ld", self);
  for (int i = 0; i < NPLOT; i++) {
    if (!c->plot[i].planned) continue;
    path[i] = path_join(c->dir, c->plot[i].file);
    size_t tl = path[i] ? strlen(path[i]) + 32 : 0;
    tmp[i] = path[i] ? la_malloc(tl) : NULL;
    if (!tmp[i]) {
      for (int j = 0; j <= i; j++) free(path[j]), free(tmp[j]);
      return LA_ERR_NOMEM;
    }
    la_tmp_name(path[i], self, tmp[i], tl);
    la_tmp_sweep(path[i]);
  }
  char why[320] = "";
  int rc = run_gnuplot(c->dir, suffix, why, sizeof why);
  for (int i = 0; i < NPLOT; i++) {
    plotinfo *p = &c->plot[i];
    if (!p->planned) continue;
    if (rc == 1) {
      if (!valid_png(tmp[i])) {
        snprintf(p->why, sizeof p->why, "gnuplot made no valid PNG");
      } else if (fsync_path(tmp[i]) != 0 || rename(tmp[i], path[i]) != 0) {
        snprintf(p->why, sizeof p->why, "%s: cannot write: %s", p->file, strerror(errno));
      } else {
        p->made = 1;
        continue;
      }
    } else {
      snprintf(p->why, sizeof p->why, "%s", rc == 0 ? "gnuplot is not on PATH" : why);
    }
    if (tmp[i]) unlink(tmp[i]);
  }
  for (int i = 0; i < NPLOT; i++) free(path[i]), free(tmp[i]);
  if (rc == 0)
    snprintf(warn, warnlen, "gnuplot is not on PATH: no plots were made; to make them later, run `gnuplot plots.gp` in %s",
             c->dir);
  else if (rc < 0)
    snprintf(warn, warnlen, "the plots were not made (%s); to make them later, run `gnuplot plots.gp` in %s", why, c->dir);
  else {
    int missing = 0;
    for (int i = 0; i < NPLOT; i++) missing += c->plot[i].planned && !c->plot[i].made;
    if (missing)
      snprintf(warn, warnlen, "%d plot%s not made (see report.md); to retry, run `gnuplot plots.gp` in %s", missing,
               missing > 1 ? "s were" : " was", c->dir);
  }
  return LA_OK;
}

/* ======================================================================================== */
/* report.md                                                                                */
/* ======================================================================================== */

static void md_escape_code(FILE *f, const char *s) { /* inside `...` */
  for (; *s; s++) fputc(*s == '`' ? '\'' : ((unsigned char)*s < 32 ? ' ' : *s), f);
}

static la_status list_values(FILE *f, const ctx *c, int col, const char *fmt) {
  double *v = la_malloc((c->res.n ? (size_t)c->res.n : 1) * sizeof *v);
  if (!v) return LA_ERR_NOMEM;
  int k = 0;
  for (int64_t i = 0; i < c->res.n; i++) {
    int seen = 0;
    for (int j = 0; j < k && !seen; j++) seen = v[j] == c->res.row[i].v[col];
    if (!seen) v[k++] = c->res.row[i].v[col];
  }
  qsort(v, (size_t)k, sizeof *v, cmp_double);
  for (int j = 0; j < k; j++) {
    fprintf(f, j ? ", " : "");
    fprintf(f, fmt, v[j]);
  }
  free(v);
  return LA_OK;
}

static la_status md_header(FILE *f, const ctx *c, const la_eval_meta *meta) {
  fprintf(f, "# linattn eval: feature maps against exact softmax attention\n\n");
  fprintf(f, "- command: `");
  md_escape_code(f, meta && meta->command ? meta->command : "(not given)");
  fprintf(f, "`\n- version: %s\n", meta && meta->version ? meta->version : "(not given)");
  if (meta) fprintf(f, "- ranks x threads: %d x %d\n- wall time: %.3g s\n", meta->ranks, meta->threads, meta->seconds);
  if (meta && meta->cpu) fprintf(f, "- CPU: %s\n", meta->cpu);
  if (meta && meta->cpu) fprintf(f, "- OpenBLAS core: %s\n", meta->blas_core ? meta->blas_core : "(not OpenBLAS)");
  fprintf(f, "- results.csv: %lld rows; feature maps ", (long long)c->res.n);
  for (int m = 0; m < c->maps.n; m++) fprintf(f, "%s%s", m ? ", " : "", c->maps.s[m]);
  fprintf(f, "; features ");
  if (list_values(f, c, R_FEATURES, "%.0f") != LA_OK) return LA_ERR_NOMEM;
  fprintf(f, "; n ");
  if (list_values(f, c, R_N, "%.0f") != LA_OK) return LA_ERR_NOMEM;
  fprintf(f, "; input scales ");
  if (list_values(f, c, R_SCALE, "%g") != LA_OK) return LA_ERR_NOMEM;
  fprintf(f, "; modes ");
  for (int m = 0; m < c->modes.n; m++) fprintf(f, "%s%s", m ? ", " : "", c->modes.s[m]);
  fprintf(f, "; seeds ");
  if (list_values(f, c, R_SEED, "%.0f") != LA_OK) return LA_ERR_NOMEM;
  fprintf(f, "\n- other files: bias.csv %s, rows.csv %s, refs.csv %s, recall.csv %s\n\n",
          c->bias.present ? "read" : "absent", c->rows.present ? "read" : "absent",
          c->refs.present ? "read" : "absent", c->recall.present ? "read (--recall)" : "absent (no --recall)");
  fprintf(f, "Errors are relative Frobenius errors ||X - X_softmax||_F / ||X_softmax||_F against exact softmax "
             "attention with the same scale, computed in float64; \"median\" is over seeds.\n\n");
  return LA_OK;
}

static la_status md_reassoc(FILE *f, const ctx *c) {
  const table *t = &c->res;
  int64_t have = 0, nnan = 0;
  const trow *worst = NULL;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (!HAS(r, R_REASSOC)) continue;
    have++;
    if (isnan(r->v[R_REASSOC])) {
      nnan++;
      continue;
    }
    if (!worst || r->v[R_REASSOC] > worst->v[R_REASSOC]) worst = r;
  }
  fprintf(f, "- **Reassociation.** ");
  if (!have) {
    fprintf(f, "reassoc_rel_err was not computed in any row: this run does not check that the linear form "
               "computes the quadratic form of the same map.\n");
  } else if (!worst) {
    fprintf(f, "**reassoc_rel_err is nan in all %lld rows where it was computed**: the linear form could not be "
               "compared with the quadratic form.\n", (long long)have);
  } else if (worst->v[R_REASSOC] <= REASSOC_ROUNDING && !nnan) {
    fprintf(f, "Reassociation is exact to %.2g (largest reassoc_rel_err over all %lld rows where it was computed): "
               "the linear form computes the quadratic form of the same map.\n", worst->v[R_REASSOC], (long long)have);
  } else {
    fprintf(f, "**Reassociation is not at rounding level**: the largest reassoc_rel_err is %s (%s, %s, seed %.0f)",
            fg(worst->v[R_REASSOC]).s, c->maps.s[worst->map],
            setting(c, worst->v[R_FEATURES], worst->v[R_N], worst->v[R_SCALE], worst->mode).s, worst->v[R_SEED]);
    if (nnan) fprintf(f, ", and it is nan in %lld rows", (long long)nnan);
    fprintf(f, "; float64 rounding would give at most %.0e. The linear form does not reproduce the quadratic form "
               "of the same map there.\n", REASSOC_ROUNDING);
  }
  fprintf(f, "- A low reassociation error says nothing about how close a map is to softmax: it compares two ways of "
             "computing the same map's attention. The distance to softmax is out_rel_err, below.\n");
  return LA_OK;
}

static la_status md_output(FILE *f, const ctx *c) {
  fprintf(f, "- **Output error against softmax** (median over seeds; range over the settings features x n x input "
             "scale):\n");
  for (int m = 0; m < c->maps.n; m++)
    for (int mo = 0; mo < c->modes.n; mo++) {
      const agg *lo = NULL, *hi = NULL;
      int nset = 0, nnan = 0;
      for (int64_t i = 0; i < c->nag; i++) {
        const agg *a = &c->ag[i];
        if (a->map != m || a->mode != mo || !a->st[R_OUT].cnt) continue;
        nset++;
        if (isnan(a->st[R_OUT].med)) {
          nnan++;
          continue;
        }
        if (!lo || a->st[R_OUT].med < lo->st[R_OUT].med) lo = a;
        if (!hi || a->st[R_OUT].med > hi->st[R_OUT].med) hi = a;
      }
      if (!nset) continue;
      fprintf(f, "  - %s, %s: ", c->maps.s[m], c->modes.s[mo]);
      if (!lo) fprintf(f, "nan in all %d settings", nset);
      else if (lo == hi) fprintf(f, "%s (%s)", fg(lo->st[R_OUT].med).s, setting(c, lo->features, lo->n, lo->scale, -1).s);
      else
        fprintf(f, "from %s (%s) to %s (%s) over %d settings", fg(lo->st[R_OUT].med).s,
                setting(c, lo->features, lo->n, lo->scale, -1).s, fg(hi->st[R_OUT].med).s,
                setting(c, hi->features, hi->n, hi->scale, -1).s, nset);
      if (nnan) fprintf(f, "; **nan in %d settings**", nnan);
      fprintf(f, ".\n");
    }
  int64_t all = 0, sampled = 0;
  for (int64_t i = 0; i < c->res.n; i++) {
    const trow *r = &c->res.row[i];
    if (!HAS(r, R_OUTROWS) || !HAS(r, R_OUT)) continue;
    if (r->v[R_OUTROWS] < r->v[R_N]) sampled++;
    else all++;
  }
  if (sampled)
    fprintf(f, "  - out_rel_err is over every row in %lld rows of results.csv and over sampled query rows (out_rows "
               "< n, above --softmax-max-n: exact softmax on those rows only, no gradient columns) in %lld rows.\n",
            (long long)all, (long long)sampled);
  return LA_OK;
}

/* weights_tv: the scale-free measure (docs/design.md §8.2 "The attention weights"). */
static la_status md_weights(FILE *f, const ctx *c) {
  int any = 0;
  for (int64_t i = 0; i < c->nag && !any; i++) any = c->ag[i].st[R_TV].cnt > 0;
  if (!any) {
    fprintf(f, "- **Attention weights**: weights_tv was not computed in this run (results.csv has no such "
               "column): no claim about the normalized weights.\n");
    return LA_OK;
  }
  fprintf(f, "- **Attention weights against softmax's** (rests on weights_tv: the mean over query rows of the total "
             "variation 0.5 sum_j |p_ij - w_ij| between row i's softmax weights and the map's normalized weights over "
             "the keys it reads; 0 is the same distribution, 1 disjoint ones; it ignores the overall scale of the "
             "kernel, which normalized attention ignores too, unlike kernel_rel_err; median over seeds, each map at "
             "its largest width; the reference is weights_tv_floor, the same measure for the best rank-r matrix of "
             "kernel_rel_err's floor, row-normalized: a reference point, not a lower bound):\n");
  for (int m = 0; m < c->maps.n; m++)
    for (int mo = 0; mo < c->modes.n; mo++) {
      const agg *lo = NULL, *hi = NULL;
      int nset = 0;
      for (int64_t i = 0; i < c->nag; i++) {
        const agg *a = &c->ag[i];
        if (a->map != m || a->mode != mo || a->features != c->wmax[m] || !a->st[R_TV].cnt ||
            isnan(a->st[R_TV].med))
          continue;
        nset++;
        if (!lo || a->st[R_TV].med < lo->st[R_TV].med) lo = a;
        if (!hi || a->st[R_TV].med > hi->st[R_TV].med) hi = a;
      }
      if (!nset) continue;
      fprintf(f, "  - %s (features %.0f), %s: weights_tv %s (%s", c->maps.s[m], c->wmax[m], c->modes.s[mo],
              fg(lo->st[R_TV].med).s, setting(c, NAN, lo->n, lo->scale, -1).s);
      if (lo->r >= lo->n) fprintf(f, "; r >= n: no floor");
      else if (lo->st[R_TVFLOOR].cnt) fprintf(f, "; rank-%.0f reference %s", lo->r, fg(lo->st[R_TVFLOOR].med).s);
      fprintf(f, ")");
      if (hi != lo)
        fprintf(f, " to %s (%s) over %d settings", fg(hi->st[R_TV].med).s,
                setting(c, NAN, hi->n, hi->scale, -1).s, nset);
      fprintf(f, ".\n");
    }
  return LA_OK;
}

static la_status md_slopes(FILE *f, const ctx *c) {
  fprintf(f, "- **Convergence with width.** For each random map, the slope of log(out_rel_err) against "
             "log(features) is fitted by least squares to the per-width medians over seeds, separately for each "
             "(mode, n, input scale). \"Consistent with m^-1/2\" means the slope is within %.2f of %.1f.\n",
          SLOPE_TOL, SLOPE_REF);
  for (int m = 0; m < c->maps.n; m++) {
    if (!c->random[m] || !isfinite(c->wmax[m])) continue;
    int k = 0, ok = 0;
    const slopefit *lo = NULL, *hi = NULL;
    for (int i = 0; i < c->nsl; i++) {
      const slopefit *s = &c->sl[i];
      if (s->map != m) continue;
      k++;
      ok += fabs(s->slope - SLOPE_REF) <= SLOPE_TOL;
      if (!lo || s->slope < lo->slope) lo = s;
      if (!hi || s->slope > hi->slope) hi = s;
    }
    fprintf(f, "  - %s: ", c->maps.s[m]);
    if (!k) {
      fprintf(f, "no slope: fewer than two widths with a positive finite error in every setting.\n");
    } else if (k == 1) {
      fprintf(f, "slope %.2f over %d widths (%.0f to %.0f) at %s: %s with m^-1/2.\n", lo->slope, lo->widths,
              lo->wmin, lo->wmax, setting(c, NAN, lo->n, lo->scale, lo->mode).s, ok ? "consistent" : "not consistent");
    } else {
      char a[32], b[32];
      snprintf(a, sizeof a, "%.2f", lo->slope);
      snprintf(b, sizeof b, "%.2f", hi->slope);
      if (!strcmp(a, b))
        fprintf(f, "slope %s in all %d settings (n x input scale x mode); consistent with m^-1/2 in %d of %d%s.\n", a, k,
                ok, k, ok == k ? "" : (ok ? "; not consistent in the others" : ": not consistent"));
      else
      fprintf(f, "slope from %.2f (%s) to %.2f (%s) over %d settings; consistent with m^-1/2 in %d of %d%s.\n",
              lo->slope, setting(c, NAN, lo->n, lo->scale, lo->mode).s, hi->slope,
              setting(c, NAN, hi->n, hi->scale, hi->mode).s, k, ok, k,
              ok == k ? "" : (ok ? "; not consistent in the others" : ": not consistent"));
    }
  }
  int anyrandom = 0;
  for (int m = 0; m < c->maps.n; m++) anyrandom |= c->random[m];
  if (!anyrandom) fprintf(f, "  - no random map in this run (one seed and one width per map).\n");
  return LA_OK;
}

static la_status md_floor(FILE *f, const ctx *c) {
  fprintf(f, "- **Kernel error against the rank-r floor** (each map at its largest width; ratio = median "
             "kernel_rel_err / median rank_r_floor_rel_err; the floor is the best any width-r map can do):\n");
  double *kv = la_malloc(2 * (size_t)c->res.n * sizeof *kv), *fv = kv ? kv + c->res.n : NULL;
  if (!kv) return LA_ERR_NOMEM;
  for (int m = 0; m < c->maps.n; m++) {
    double w = c->wmax[m], rlo = INFINITY, rhi = -INFINITY, rwid = NAN;
    if (!isfinite(w)) continue; /* a map of bias.csv, rows.csv or recall.csv only */
    int nset = 0, nofloor = 0, nofull = 0;
    char first[400] = "";
    /* one (n, scale) at a time; the kernel does not depend on the mode, so every mode's rows count */
    for (int64_t i = 0; i < c->nag; i++) {
      const agg *a = &c->ag[i];
      if (a->map != m || a->features != w) continue;
      int dup = 0;
      for (int64_t j = 0; j < i && !dup; j++)
        dup = c->ag[j].map == m && c->ag[j].features == w && c->ag[j].n == a->n && c->ag[j].scale == a->scale;
      if (dup) continue;
      int nk = 0, nf = 0;
      for (int64_t q = 0; q < c->res.n; q++) {
        const trow *r = &c->res.row[q];
        if (r->map != m || r->v[R_FEATURES] != w || r->v[R_N] != a->n || r->v[R_SCALE] != a->scale) continue;
        if (HAS(r, R_KERNEL)) kv[nk++] = r->v[R_KERNEL];
        if (HAS(r, R_FLOOR)) fv[nf++] = r->v[R_FLOOR];
      }
      if (!nk) continue;
      rwid = a->r;
      if (a->r >= a->n) { /* the rank-r matrix is exact: a floor of 0 is no reference */
        nofull++;
        continue;
      }
      if (!nf) {
        nofloor++;
        continue;
      }
      seedstat sk = summarize(kv, nk), sf = summarize(fv, nf);
      double ratio = sk.med / sf.med;
      rwid = a->r;
      if (!nset)
        snprintf(first, sizeof first, "kernel_rel_err %s against the rank-%.0f floor %s (%s)", fg(sk.med).s, a->r,
                 fg(sf.med).s, setting(c, NAN, a->n, a->scale, -1).s);
      nset++;
      if (ratio < rlo) rlo = ratio;
      if (ratio > rhi) rhi = ratio;
    }
    fprintf(f, "  - %s (features %.0f", c->maps.s[m], w);
    if (!isnan(rwid)) fprintf(f, ", r %.0f", rwid);
    fprintf(f, "): ");
    if (nset == 1) fprintf(f, "%s: %sx the floor", first, fg(rlo).s);
    else if (nset > 1 && !strcmp(fg(rlo).s, fg(rhi).s))
      fprintf(f, "%sx the floor in all %d settings (n, input scale); e.g. %s", fg(rlo).s, nset, first);
    else if (nset > 1) fprintf(f, "%sx to %sx the floor over %d settings (n, input scale); e.g. %s", fg(rlo).s, fg(rhi).s, nset, first);
    else if (nofloor) fprintf(f, "the floor was not computed (n above --floor-max-n)");
    else if (nofull) fprintf(f, "r >= n: no floor (a rank-r matrix reproduces exp(s Q K^T) exactly)");
    else fprintf(f, "kernel_rel_err was not computed");
    if (nset && nofloor) fprintf(f, "; the floor was not computed in %d more settings (n above --floor-max-n)", nofloor);
    if ((nset || nofloor) && nofull) fprintf(f, "; r >= n: no floor in %d more settings", nofull);
    fprintf(f, ".\n");
  }
  free(kv);
  return LA_OK;
}

static la_status md_eckart_young(FILE *f, const ctx *c) {
  int64_t both = 0, bad = 0, bad_sampled = 0, sampled = 0, exact = 0;
  const trow *first = NULL;
  for (int64_t i = 0; i < c->res.n; i++) {
    const trow *r = &c->res.row[i];
    if (HAS(r, R_KERNEL) && HAS(r, R_KROWS) && isfinite(r->v[R_KROWS])) {
      if (r->v[R_KROWS] < r->v[R_N]) sampled++;
      else exact++;
    }
    if (!HAS(r, R_KERNEL) || !HAS(r, R_FLOOR) || !isfinite(r->v[R_KERNEL]) || !isfinite(r->v[R_FLOOR])) continue;
    both++;
    if (r->v[R_KERNEL] < r->v[R_FLOOR] * (1 - EY_RTOL)) {
      bad++;
      if (HAS(r, R_KROWS) && r->v[R_KROWS] < r->v[R_N]) bad_sampled++;
      if (!first) first = r;
    }
  }
  if (!both) {
    fprintf(f, "- **Eckart-Young check**: not possible: no row has both kernel_rel_err and rank_r_floor_rel_err "
               "(the floor is computed only up to --floor-max-n).\n");
  } else if (!bad) {
    fprintf(f, "- **Eckart-Young check**: passed: in all %lld rows with both values, kernel_rel_err >= "
               "rank_r_floor_rel_err x (1 - %.0e) (0 rows below the floor).\n", (long long)both, EY_RTOL);
  } else {
    fprintf(f, "- **WARNING: Eckart-Young VIOLATED in %lld of %lld rows**: kernel_rel_err < rank_r_floor_rel_err x "
               "(1 - %.0e), which no width-r map can achieve; first at line %lld of results.csv: %s, %s, seed %.0f: "
               "kernel_rel_err %.6g < floor %.6g. The kernel error or the floor is wrong there",
            (long long)bad, (long long)both, EY_RTOL, (long long)first->line, c->maps.s[first->map],
            setting(c, first->v[R_FEATURES], first->v[R_N], first->v[R_SCALE], first->mode).s, first->v[R_SEED],
            first->v[R_KERNEL], first->v[R_FLOOR]);
    if (bad_sampled)
      fprintf(f, " (%lld of these rows estimate the kernel error from sampled query rows, which can fall below "
                 "the floor by sampling error)", (long long)bad_sampled);
    fprintf(f, ".\n");
  }
  if (sampled)
    fprintf(f, "- kernel_rel_err is exact (all n query rows) in %lld rows and estimated from sampled query rows "
               "(kernel_rows < n) in %lld rows.\n", (long long)exact, (long long)sampled);
  return LA_OK;
}

static la_status md_bias(FILE *f, const ctx *c) {
  if (!c->bias.present) {
    fprintf(f, "- **Bias**: no bias.csv: no bias verdicts.\n");
    return LA_OK;
  }
  if (!c->bias.n) {
    fprintf(f, "- **Bias**: bias.csv has no rows (no random map in the sweep).\n");
    return LA_OK;
  }
  const table *t = &c->bias;
  fprintf(f, "- **Bias** (bias.csv: is the error of the mean over seeds larger than the seed-to-seed noise of "
             "that mean explains?):\n");
  for (int m = 0; m < c->maps.n; m++) {
    for (int kind = 0; kind < 2; kind++) {
      const int det = kind ? B_KDET : B_OUTDET, pc = kind ? B_KP : B_OUTP, mc = kind ? B_KMEAN : B_OUTMEAN,
                nc = kind ? B_KNOISE : B_OUTNOISE;
      int64_t n = 0, yes = 0, no = 0, untested = 0, few = 0, disagree = 0;
      double smin = INFINITY, smax = -INFINITY, lev = NAN, pmin = INFINITY, noisemax = -INFINITY;
      const char *test = NULL;
      int levels = 0;
      for (int64_t i = 0; i < t->n; i++) {
        const trow *r = &t->row[i];
        if (r->map != m) continue;
        if (kind && t->col[B_KDET] < 0) continue;
        n++;
        const char *v = r->s[det];
        if (!strcmp(v, "yes")) yes++;
        else if (!strcmp(v, "no")) no++;
        else untested++;
        if (HAS(r, B_SEEDS)) {
          if (r->v[B_SEEDS] < smin) smin = r->v[B_SEEDS];
          if (r->v[B_SEEDS] > smax) smax = r->v[B_SEEDS];
          if (r->v[B_SEEDS] < 2) few++;
        }
        if (HAS(r, B_LEVEL) && r->v[B_LEVEL] != lev) lev = r->v[B_LEVEL], levels++;
        if (!test && *r->s[B_TEST]) test = r->s[B_TEST];
        if (HAS(r, pc) && r->v[pc] < pmin) pmin = r->v[pc];
        if (!strcmp(v, "no") && HAS(r, nc) && r->v[nc] > noisemax) noisemax = r->v[nc];
        if (HAS(r, pc) && HAS(r, B_LEVEL) && isfinite(r->v[pc]) && *v &&
            (r->v[pc] < r->v[B_LEVEL]) != !strcmp(v, "yes"))
          disagree++;
      }
      if (!n) continue;
      fprintf(f, "  - %s, %s bias: ", c->maps.s[m], kind ? "kernel" : "output");
      if (yes) fprintf(f, "**detected** in %lld of %lld settings", (long long)yes, (long long)n);
      else fprintf(f, "not detected in any of %lld settings", (long long)n);
      if (levels == 1) fprintf(f, " at level %g", lev);
      else if (levels > 1) fprintf(f, " (several levels)");
      if (test) fprintf(f, " (test: %s", test);
      else fprintf(f, " (test not named");
      if (isfinite(smin)) {
        if (smin == smax) fprintf(f, ", %.0f seed%s", smin, smin == 1 ? "" : "s");
        else fprintf(f, ", %.0f to %.0f seeds", smin, smax);
      }
      fprintf(f, ")");
      if (yes) {
        fprintf(f, ": ");
        int listed = 0;
        for (int64_t i = 0; i < t->n && listed < 3; i++) {
          const trow *r = &t->row[i];
          if (r->map != m || strcmp(r->s[det], "yes")) continue;
          fprintf(f, "%s%s (p = %s, mean-%s error %s against noise %s)", listed ? "; " : "",
                  setting(c, r->v[B_FEATURES], r->v[B_N], r->v[B_SCALE], kind ? -1 : r->mode).s,
                  fgm(r->v[pc], HAS(r, pc)).s, kind ? "kernel" : "output", fgm(r->v[mc], HAS(r, mc)).s,
                  fgm(r->v[nc], HAS(r, nc)).s);
          listed++;
        }
        if (yes > listed) fprintf(f, "; and %lld more (table below)", (long long)(yes - listed));
        /* The sign-flip test assumes seed noise symmetric about 0 (docs/design.md §8.3). A
         * kernel estimate below exp(s q.k) on most of its weight is heavy-tailed instead. */
        int64_t skewed = 0;
        for (int64_t i = 0; kind && i < t->n; i++) {
          const trow *r = &t->row[i];
          skewed += r->map == m && !strcmp(r->s[det], "yes") && HAS(r, B_KUNDER) &&
                    r->v[B_KUNDER] > 0.75;
        }
        if (skewed)
          fprintf(f, ". In %lld of these the estimate is below exp(s q.k) on more than 3/4 of "
                     "the entries' weight (kernel_under_share): it is heavy-tailed, most seeds "
                     "fall short and rare ones overshoot by far, so a few seeds do not reach its "
                     "mean and the test's symmetry assumption fails; there the detection does "
                     "not show a bias (the estimate is unbiased by construction), it shows that "
                     "this many seeds cannot estimate the mean",
                  (long long)skewed);
      } else if (isfinite(pmin)) {
        fprintf(f, "; smallest p = %s", fg(pmin).s);
      }
      if (untested) fprintf(f, "; no verdict in %lld settings", (long long)untested);
      fprintf(f, ".");
      if (no && isfinite(noisemax))
        fprintf(f, " \"Not detected\" is not \"absent\": at these seeds a bias below the noise of the mean (up to %s "
                   "here) cannot be seen.", fg(noisemax).s);
      if (few)
        fprintf(f, " **Too few seeds** in %lld settings (fewer than 2): the seed-to-seed noise cannot be estimated, so "
                   "the test cannot detect anything there.", (long long)few);
      if (disagree)
        fprintf(f, " **The verdict disagrees with p < level in %lld settings.**", (long long)disagree);
      fprintf(f, "\n");
    }
  }
  return LA_OK;
}

static la_status md_den(FILE *f, const ctx *c) {
  const trow *dmin = NULL, *fmax = NULL;
  for (int64_t i = 0; i < c->res.n; i++) {
    const trow *r = &c->res.row[i];
    if (HAS(r, R_DENMIN) && !isnan(r->v[R_DENMIN]) && (!dmin || r->v[R_DENMIN] < dmin->v[R_DENMIN])) dmin = r;
    if (HAS(r, R_DENFRAC) && !isnan(r->v[R_DENFRAC]) && (!fmax || r->v[R_DENFRAC] > fmax->v[R_DENFRAC])) fmax = r;
  }
  fprintf(f, "- **Denominators.** ");
  if (!dmin && !fmax) {
    fprintf(f, "den_min and den_frac_small were not computed.\n");
  } else {
    if (dmin)
      fprintf(f, "The smallest den_min is %s (%s, %s, seed %.0f). ", fg(dmin->v[R_DENMIN]).s, c->maps.s[dmin->map],
              setting(c, dmin->v[R_FEATURES], dmin->v[R_N], dmin->v[R_SCALE], dmin->mode).s, dmin->v[R_SEED]);
    if (fmax)
      fprintf(f, "The largest den_frac_small (rows below 1e-6 x the median denominator) is %s (%s, %s, seed %.0f). ",
              fg(fmax->v[R_DENFRAC]).s, c->maps.s[fmax->map],
              setting(c, fmax->v[R_FEATURES], fmax->v[R_N], fmax->v[R_SCALE], fmax->mode).s, fmax->v[R_SEED]);
    fprintf(f, "Per map (smallest den_min, largest den_frac_small):");
    int listed = 0;
    for (int m = 0; m < c->maps.n; m++) {
      double a = INFINITY, b = -INFINITY;
      int ha = 0, hb = 0;
      for (int64_t i = 0; i < c->res.n; i++) {
        const trow *r = &c->res.row[i];
        if (r->map != m) continue;
        if (HAS(r, R_DENMIN) && !isnan(r->v[R_DENMIN])) ha = 1, a = r->v[R_DENMIN] < a ? r->v[R_DENMIN] : a;
        if (HAS(r, R_DENFRAC) && !isnan(r->v[R_DENFRAC])) hb = 1, b = r->v[R_DENFRAC] > b ? r->v[R_DENFRAC] : b;
      }
      if (ha || hb) fprintf(f, "%s %s %s, %s", listed++ ? ";" : "", c->maps.s[m], fgm(a, ha).s, fgm(b, hb).s);
    }
    fprintf(f, ".\n");
  }
  fprintf(f, "- Nonnegative features make every denominator positive, not large: they do not prevent small "
             "denominators, and a small denominator amplifies the numerator's error in its row.");
  if (c->rows.present && c->rows.n) {
    const int xc = c->rows.col[W_DENMED] >= 0 ? W_DENMED : -1;
    double *v = la_malloc((size_t)c->rows.n * sizeof *v), *u = la_malloc((size_t)c->rows.n * sizeof *u);
    if (!v || !u) {
      free(v), free(u);
      return LA_ERR_NOMEM;
    }
    int ns = 0, nl = 0;
    for (int64_t i = 0; v && u && xc >= 0 && i < c->rows.n; i++) {
      const trow *r = &c->rows.row[i];
      if (!isfinite(r->v[xc]) || !HAS(r, W_ROWERR) || isnan(r->v[W_ROWERR])) continue;
      if (r->v[xc] < SMALL_DEN) v[ns++] = r->v[W_ROWERR];
      else u[nl++] = r->v[W_ROWERR];
    }
    if (xc < 0) fprintf(f, " rows.csv has no den_over_median column.");
    else if (ns && nl) {
      seedstat a = summarize(v, ns), b = summarize(u, nl);
      fprintf(f, " In rows.csv, the %d sampled rows whose denominator is below %g x the median have median "
                 "row_rel_err %s, against %s for the other %d rows.", ns, SMALL_DEN, fg(a.med).s, fg(b.med).s, nl);
    } else if (nl) {
      fprintf(f, " None of the %d sampled rows of rows.csv has a denominator below %g x the median.", nl, SMALL_DEN);
    }
    free(v), free(u);
  }
  fprintf(f, "\n");
  return LA_OK;
}

static la_status md_recall(FILE *f, const ctx *c) {
  if (!c->recall.present) {
    fprintf(f, "- **Associative recall**: not run (no recall.csv; run with --recall).\n");
    return LA_OK;
  }
  const table *t = &c->recall;
  if (!t->n) {
    fprintf(f, "- **Associative recall**: recall.csv has no rows.\n");
    return LA_OK;
  }
  fprintf(f, "- **Associative recall** (training-free; accuracy at the most pairs each map was given, against "
             "softmax on the same task):");
  int listed = 0;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    int first = 1;
    for (int64_t j = 0; j < i && first; j++)
      first = !(t->row[j].map == r->map && t->row[j].v[C_FEATURES] == r->v[C_FEATURES]);
    if (!first) continue;
    const trow *best = r;
    for (int64_t j = i; j < t->n; j++)
      if (t->row[j].map == r->map && t->row[j].v[C_FEATURES] == r->v[C_FEATURES] && t->row[j].v[C_PAIRS] > best->v[C_PAIRS])
        best = &t->row[j];
    fprintf(f, "%s %s (features %.0f) %s at %.0f pairs vs softmax %s", listed++ ? ";" : "", c->maps.s[r->map], r->v[C_FEATURES],
            fgm(best->v[C_ACC], HAS(best, C_ACC)).s, best->v[C_PAIRS], fgm(best->v[C_SMACC], HAS(best, C_SMACC)).s);
  }
  fprintf(f, ".\n");
  return LA_OK;
}

static la_status md_refs(FILE *f, const ctx *c) {
  if (!c->refs.present || !c->refs.n) {
    fprintf(f, "- **Exact reference cost**: %s.\n", c->refs.present ? "refs.csv has no rows" : "no refs.csv");
    return LA_OK;
  }
  const table *t = &c->refs;
  const trow *lo = NULL, *hi = NULL, *big = NULL;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (!big || r->v[X_N] > big->v[X_N]) big = r;
    if (!HAS(r, X_SMGF) || !isfinite(r->v[X_SMGF])) continue;
    if (!lo || r->v[X_SMGF] < lo->v[X_SMGF]) lo = r;
    if (!hi || r->v[X_SMGF] > hi->v[X_SMGF]) hi = r;
  }
  fprintf(f, "- **Exact reference cost** (refs.csv): ");
  if (lo && lo != hi)
    fprintf(f, "the softmax reference ran at %s to %s GFLOP/s (n %.0f %s to n %.0f %s); ", fg(lo->v[X_SMGF]).s,
            fg(hi->v[X_SMGF]).s, lo->v[X_N], lo->s[X_MODE], hi->v[X_N], hi->s[X_MODE]);
  else if (lo)
    fprintf(f, "the softmax reference ran at %s GFLOP/s (n %.0f %s); ", fg(lo->v[X_SMGF]).s, lo->v[X_N], lo->s[X_MODE]);
  fprintf(f, "at the largest n (%.0f, %s) it took %s s", big->v[X_N], big->s[X_MODE],
          fgm(big->v[X_SMSEC], HAS(big, X_SMSEC)).s);
  if (HAS(big, X_RANKS) || HAS(big, X_THREADS))
    fprintf(f, " (ranks x threads: %s x %s)", fi(big->v[X_RANKS]).s, fi(big->v[X_THREADS]).s);
  if (HAS(big, X_FLOORSEC)) fprintf(f, ", and the rank-r floor (SVD) %s s", fg(big->v[X_FLOORSEC]).s);
  fprintf(f, ".\n");
  return LA_OK;
}

static la_status md_tables(FILE *f, const ctx *c) {
  fprintf(f, "\n## Results (median over seeds)\n\n");
  fprintf(f, "out_rel_err is given as median [min, max] over seeds; kernel/floor is the ratio of the medians "
             "(\"r >= n: no floor\" where a rank-r matrix is exact); weights_tv is the mean total variation "
             "between each row's softmax weights and the map's normalized weights, weights_tv_floor the same for "
             "the row-normalized best rank-r matrix (a reference point, not a lower bound); out_rows is the number "
             "of query rows behind out_rel_err (n: all); "
             "den_min is the smallest over seeds, den_frac_small the largest; \u2014 means not computed.\n\n");
  fprintf(f, "| map | mode | features | r | n | input scale | seeds | out_rel_err | grad_q | grad_k | grad_v | "
             "kernel_rel_err | floor | kernel/floor | weights_tv | weights_tv_floor | out_rows | reassoc (max) | den_min | "
             "den_frac_small |\n");
  fprintf(f, "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int64_t i = 0; i < c->nag; i++) {
    const agg *a = &c->ag[i];
    const seedstat *o = &a->st[R_OUT], *k = &a->st[R_KERNEL], *fl = &a->st[R_FLOOR];
    fprintf(f, "| %s | %s | %.0f | %.0f | %.0f | %g | %d | ", c->maps.s[a->map], c->modes.s[a->mode], a->features,
            a->r, a->n, a->scale, a->rows);
    if (!o->cnt) fprintf(f, "\u2014");
    else if (o->cnt == 1 || o->nnan) fprintf(f, "%s", fg(o->med).s);
    else fprintf(f, "%s [%s, %s]", fg(o->med).s, fg(o->lo).s, fg(o->hi).s);
    fprintf(f, " | %s | %s | %s | %s | %s | ", fgs(&a->st[R_GQ]).s, fgs(&a->st[R_GK]).s, fgs(&a->st[R_GV]).s,
            fgs(k).s, fgs(fl).s);
    if (a->r >= a->n && k->cnt) fprintf(f, "r >= n: no floor | ");
    else fprintf(f, "%s | ", k->cnt && fl->cnt ? fg(k->med / fl->med).s : "\u2014");
    fprintf(f, "%s | %s | %s | ", fgs(&a->st[R_TV]).s, fgs(&a->st[R_TVFLOOR]).s, fgs(&a->st[R_OUTROWS]).s);
    const seedstat *re = &a->st[R_REASSOC], *dm = &a->st[R_DENMIN], *df = &a->st[R_DENFRAC];
    fprintf(f, "%s | %s | %s |\n", re->cnt ? fg(re->nnan ? NAN : re->hi).s : "\u2014",
            dm->cnt ? fg(dm->nnan ? NAN : dm->lo).s : "\u2014", df->cnt ? fg(df->nnan ? NAN : df->hi).s : "\u2014");
  }
  if (c->nsl) {
    fprintf(f, "\n## Fitted slopes of log(out_rel_err) against log(features)\n\n");
    fprintf(f, "| map | mode | n | input scale | widths | from | to | slope | consistent with m^-1/2 (\u00b1%.2f) |\n",
            SLOPE_TOL);
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|---|\n");
    for (int i = 0; i < c->nsl; i++) {
      const slopefit *s = &c->sl[i];
      fprintf(f, "| %s | %s | %.0f | %g | %d | %.0f | %.0f | %.3f | %s |\n", c->maps.s[s->map], c->modes.s[s->mode],
              s->n, s->scale, s->widths, s->wmin, s->wmax, s->slope,
              fabs(s->slope - SLOPE_REF) <= SLOPE_TOL ? "yes" : "no");
    }
  }
  if (c->bias.present && c->bias.n) {
    const table *t = &c->bias;
    fprintf(f, "\n## Bias (bias.csv)\n\n");
    fprintf(f, "| map | mode | features | r | n | input scale | seeds | out mean err | out noise | out p | out bias | "
               "kernel mean err | kernel noise | kernel p | kernel bias | test | level |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|---|--:|\n");
    for (int64_t i = 0; i < t->n; i++) {
      const trow *r = &t->row[i];
      fprintf(f, "| %s | %s | %.0f | %s | %.0f | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
              r->s[B_MAP], r->s[B_MODE], r->v[B_FEATURES], fi(r->v[B_R]).s, r->v[B_N], r->v[B_SCALE],
              fi(r->v[B_SEEDS]).s, fgm(r->v[B_OUTMEAN], HAS(r, B_OUTMEAN)).s,
              fgm(r->v[B_OUTNOISE], HAS(r, B_OUTNOISE)).s, fgm(r->v[B_OUTP], HAS(r, B_OUTP)).s,
              *r->s[B_OUTDET] ? r->s[B_OUTDET] : "\u2014", fgm(r->v[B_KMEAN], HAS(r, B_KMEAN)).s,
              fgm(r->v[B_KNOISE], HAS(r, B_KNOISE)).s, fgm(r->v[B_KP], HAS(r, B_KP)).s,
              *r->s[B_KDET] ? r->s[B_KDET] : "\u2014", *r->s[B_TEST] ? r->s[B_TEST] : "\u2014",
              fgm(r->v[B_LEVEL], HAS(r, B_LEVEL)).s);
    }
  }
  if (c->recall.present && c->recall.n) {
    const table *t = &c->recall;
    fprintf(f, "\n## Associative recall (recall.csv)\n\n");
    fprintf(f, "| map | features | r | pairs | seeds | queries | accuracy | softmax accuracy |\n");
    fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int64_t i = 0; i < t->n; i++) {
      const trow *r = &t->row[i];
      fprintf(f, "| %s | %.0f | %s | %.0f | %s | %s | %s | %s |\n", r->s[C_MAP], r->v[C_FEATURES], fi(r->v[C_R]).s,
              r->v[C_PAIRS], fi(r->v[C_SEEDS]).s, fi(r->v[C_QUERIES]).s, fgm(r->v[C_ACC], HAS(r, C_ACC)).s,
              fgm(r->v[C_SMACC], HAS(r, C_SMACC)).s);
    }
  }
  if (c->refs.present && c->refs.n) {
    const table *t = &c->refs;
    fprintf(f, "\n## Exact references (refs.csv)\n\n");
    fprintf(f, "| n | heads | dk | dv | input scale | mode | ranks | threads | softmax s | softmax GFLOP/s | floor s |\n");
    fprintf(f, "|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|\n");
    for (int64_t i = 0; i < t->n; i++) {
      const trow *r = &t->row[i];
      fprintf(f, "| %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r->v[X_N], fi(r->v[X_HEADS]).s,
              fi(r->v[X_DK]).s, fi(r->v[X_DV]).s, fgm(r->v[X_SCALE], HAS(r, X_SCALE)).s, r->s[X_MODE],
              fi(r->v[X_RANKS]).s, fi(r->v[X_THREADS]).s, fgm(r->v[X_SMSEC], HAS(r, X_SMSEC)).s,
              fgm(r->v[X_SMGF], HAS(r, X_SMGF)).s, fgm(r->v[X_FLOORSEC], HAS(r, X_FLOORSEC)).s);
    }
  }
  return LA_OK;
}

static la_status md_plots(FILE *f, const ctx *c) {
  fprintf(f, "\n## Plots\n\n");
  int missing = 0;
  for (int i = 0; i < NPLOT; i++) {
    const plotinfo *p = &c->plot[i];
    if (p->made) fprintf(f, "### %s\n\n![%s](%s)\n\n", p->what, p->what, p->file);
    else {
      fprintf(f, "### %s\n\n%s: **missing** (%s).\n\n", p->what, p->file, p->why[0] ? p->why : "not made");
      missing += p->planned;
    }
  }
  if (missing)
    fprintf(f, "Plots with data are missing: to make them, run `gnuplot plots.gp` in this folder (plots.gp holds "
               "the plotted numbers).\n");
  return LA_OK;
}

static la_status compose_report(const ctx *c, const la_eval_meta *meta, char **text, size_t *len, char *err,
                                size_t errlen) {
  FILE *f = la_open_memstream(text, len);
  if (!f) return fail(err, errlen, LA_ERR_NOMEM, "out of memory for report.md");
  /* every section returns LA_ERR_NOMEM when it cannot allocate: then no report at all */
  la_status st = md_header(f, c, meta);
  if (st == LA_OK)
    fprintf(f, "## What this run supports and what it does not\n\n"
               "Each claim names the column it rests on: out_rel_err and grad_*_rel_err (the outputs and gradients "
               "against softmax), weights_tv (the row-normalized attention weights against softmax's: scale-free), "
               "kernel_rel_err (the unnormalized kernel entry by entry: dominated by one overall scale for a finite "
               "map, which normalized attention ignores), reassoc_rel_err (the linear form against the quadratic "
               "form of the same map).\n\n");
  if (st == LA_OK) st = md_eckart_young(f, c);
  if (st == LA_OK) st = md_reassoc(f, c);
  if (st == LA_OK) st = md_output(f, c);
  if (st == LA_OK) st = md_weights(f, c);
  if (st == LA_OK) st = md_slopes(f, c);
  if (st == LA_OK) st = md_floor(f, c);
  if (st == LA_OK) st = md_bias(f, c);
  if (st == LA_OK) st = md_den(f, c);
  if (st == LA_OK) st = md_recall(f, c);
  if (st == LA_OK) st = md_refs(f, c);
  if (st == LA_OK) st = md_tables(f, c);
  if (st == LA_OK) st = md_plots(f, c);
  int bad = ferror(f) || st != LA_OK;
  if (fclose(f) != 0 || bad) {
    free(*text);
    *text = NULL;
    return fail(err, errlen, LA_ERR_NOMEM, "out of memory composing report.md");
  }
  return LA_OK;
}

/* ======================================================================================== */

la_status la_eval_report(const char *dir, const la_eval_meta *meta, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!dir || !*dir) return fail(err, errlen, LA_ERR_ARG, "la_eval_report: no folder");
  ctx c;
  memset(&c, 0, sizeof c);
  c.dir = dir;
  c.res.name = "results.csv", c.bias.name = "bias.csv", c.rows.name = "rows.csv";
  c.recall.name = "recall.csv", c.refs.name = "refs.csv";
  static const struct {
    int id;
    const char *file, *what;
  } plots[NPLOT] = {{P_FEAT, "err_vs_features.png", "Error against width (output; kernel with the rank-r floor)"},
                    {P_SCALE, "err_vs_scale.png", "Output error against input scale"},
                    {P_N, "err_vs_n.png", "Output error against sequence length"},
                    {P_GRAD, "grad_err.png", "Gradient errors against width"},
                    {P_BIAS, "bias.png", "Bias: error of the mean over seeds against its noise"},
                    {P_DEN, "denominators.png", "Row error against the denominator"},
                    {P_RECALL, "recall.png", "Associative recall"}};
  for (int i = 0; i < NPLOT; i++) c.plot[plots[i].id].file = plots[i].file, c.plot[plots[i].id].what = plots[i].what;
  char *gp = NULL, *md = NULL, *gppath = NULL, *mdpath = NULL;
  size_t gplen = 0, mdlen = 0;
  la_status st = load_table(dir, &c.res, 0, results_cols, R_NCOL, err, errlen);
  if (st == LA_OK) st = load_table(dir, &c.bias, 1, bias_cols, B_NCOL, err, errlen);
  if (st == LA_OK) st = load_table(dir, &c.rows, 1, rows_cols, W_NCOL, err, errlen);
  if (st == LA_OK) st = load_table(dir, &c.recall, 1, recall_cols, C_NCOL, err, errlen);
  if (st == LA_OK) st = load_table(dir, &c.refs, 1, refs_cols, X_NCOL, err, errlen);
  if (st == LA_OK && c.res.n == 0)
    st = fail(err, errlen, LA_ERR_FORMAT, "%s: line %lld: no rows after the header", c.res.csv.path,
              (long long)c.res.csv.line[0] + 1);
  if (st == LA_OK) st = aggregate(&c, err, errlen);
  if (st == LA_OK) st = compose_plots(&c, &gp, &gplen, err, errlen);
  if (st == LA_OK && (!(gppath = path_join(dir, "plots.gp")) || !(mdpath = path_join(dir, "report.md"))))
    st = fail(err, errlen, LA_ERR_NOMEM, "out of memory for the output paths");
  if (st == LA_OK) st = la_write_file(gppath, gp, gplen, NULL, 0, 1, err, errlen);
  const int gp_written = st == LA_OK;
  char warn[768] = "";
  if (st == LA_OK && make_pngs(&c, warn, sizeof warn) != LA_OK)
    st = fail(err, errlen, LA_ERR_NOMEM, "out of memory for the names of the plots");
  if (st == LA_OK) st = compose_report(&c, meta, &md, &mdlen, err, errlen);
  if (st == LA_OK) st = la_write_file(mdpath, md, mdlen, NULL, 0, 1, err, errlen);
  if (st == LA_OK && warn[0]) fprintf(stderr, "linattn: warning: %s\n", warn);
  if (st != LA_OK && gp_written) { /* a failed report leaves none of its files (the CSVs stay) */
    unlink(gppath);
    for (int i = 0; i < NPLOT; i++) {
      char *pp = c.plot[i].made ? path_join(dir, c.plot[i].file) : NULL;
      if (pp) unlink(pp);
      free(pp);
    }
  }
  free(gp), free(md), free(gppath), free(mdpath);
  table_free(&c.res), table_free(&c.bias), table_free(&c.rows), table_free(&c.recall), table_free(&c.refs);
  free(c.maps.s), free(c.modes.s), free(c.ag), free(c.sl), free(c.random), free(c.wmax);
  return st;
}
