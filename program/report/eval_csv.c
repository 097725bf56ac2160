/* The eval report's CSV reader (eval_report_internal.h; docs/cli.md "linattn eval"): DIR's
 * CSVs read by their header (columns found by name, unknown columns ignored) into typed
 * tables; a malformed file is LA_ERR_FORMAT "DIR/x.csv: line L: reason" (docs/design.md §6). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "eval_report_internal.h"
#include "la_alloc.h"

#define CELL(c, i, j) ((c)->cell[(size_t)(i) * (size_t)(c)->ncol + (size_t)(j)])

static void csv_free(csvfile *c) {
  free(c->path);
  free(c->text);
  free(c->cell);
  free(c->line);
  memset(c, 0, sizeof *c);
}

/* The whole file into c->text. *present = 0 (and LA_OK) when it does not exist and optional. */
static la_status csv_read(csvfile *c, int optional, int *present, size_t *len) {
  *present = 0;
  int fd = open(c->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (optional && e == ENOENT) return LA_OK;
    return la_error(LA_ERR_IO, "%s: cannot open: %s", c->path, strerror(e));
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = la_malloc(cap + 1);
  if (!buf) {
    close(fd);
    return la_error(LA_ERR_NOMEM, "%s: out of memory for its contents", c->path);
  }
  for (;;) {
    if (n == cap) {
      char *nb = la_realloc(buf, 2 * cap + 1);
      if (!nb) {
        free(buf);
        close(fd);
        return la_error(LA_ERR_NOMEM, "%s: out of memory for its contents (%zu bytes)",
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
      return la_error(LA_ERR_READ, "%s: cannot read: %s", c->path, strerror(e));
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
static la_status csv_parse(csvfile *c, size_t len) {
  char *p = c->text, *end = c->text + len;
  const char *nul = memchr(p, 0, len);
  if (nul) {
    int64_t l = 1;
    for (const char *q = p; q < nul; q++) l += *q == '\n';
    return la_error(LA_ERR_FORMAT, "%s: line %lld: a NUL byte (not a text CSV file)",
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
            st = la_error(LA_ERR_FORMAT, "%s: line %lld: a quoted field is not closed",
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
          st = la_error(LA_ERR_FORMAT, "%s: line %lld: text after the closing quote of field %d",
                        c->path, (long long)line, nf + 1);
          goto done;
        }
      } else {
        f = p;
        while (p < end && *p != ',' && *p != '\n' && *p != '\r') {
          if (*p == '"') {
            st = la_error(LA_ERR_FORMAT, "%s: line %lld: a quote inside unquoted field %d",
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
          st = la_error(LA_ERR_NOMEM, "%s: out of memory for its cells", c->path);
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
          st = la_error(LA_ERR_FORMAT, "%s: line %lld: header column %d has no name",
                        c->path, (long long)rec_line, j + 1);
          goto done;
        }
        for (int k = 0; k < j; k++)
          if (!strcmp(cells[j], cells[k])) {
            st = la_error(LA_ERR_FORMAT, "%s: line %lld: column '%s' appears twice in the header",
                          c->path, (long long)rec_line, cells[j]);
            goto done;
          }
      }
    } else if (nf != c->ncol) {
      st = la_error(LA_ERR_FORMAT, "%s: line %lld: %d fields where the header has %d",
                    c->path, (long long)rec_line, nf, c->ncol);
      goto done;
    }
    if (nrec == lcap) {
      size_t nl = lcap ? 2 * lcap : 64;
      int64_t *nlines = la_realloc(lines, nl * sizeof *lines);
      if (!nlines) {
        st = la_error(LA_ERR_NOMEM, "%s: out of memory for its rows", c->path);
        goto done;
      }
      lines = nlines, lcap = nl;
    }
    lines[nrec++] = rec_line;
  }
  if (st == LA_OK && nrec == 0)
    st = la_error(LA_ERR_FORMAT, "%s: line 1: empty file (no header line)", c->path);
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

static void table_free(table *t) {
  csv_free(&t->csv);
  free(t->row);
  t->row = NULL;
  t->n = 0;
}

char *la_er_path_join(const char *dir, const char *name) {
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
                            int nspec) {
  t->csv.path = la_er_path_join(dir, t->name);
  if (!t->csv.path) return la_error(LA_ERR_NOMEM, "out of memory for the path of %s", t->name);
  size_t len = 0;
  la_status st = csv_read(&t->csv, optional, &t->present, &len);
  if (st != LA_OK || !t->present) return st;
  if ((st = csv_parse(&t->csv, len)) != LA_OK) return st;
  const csvfile *c = &t->csv;
  for (int j = 0; j < nspec; j++) {
    t->col[j] = csv_col(c, spec[j].name);
    if (t->col[j] < 0 && (spec[j].flags & CF_REQ))
      return la_error(LA_ERR_FORMAT, "%s: line %lld: the header has no column '%s'",
                      c->path, (long long)c->line[0], spec[j].name);
  }
  t->row = la_calloc(c->nrow ? (size_t)c->nrow : 1, sizeof *t->row);
  if (!t->row) return la_error(LA_ERR_NOMEM, "%s: out of memory for %lld rows", c->path, (long long)c->nrow);
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
          return la_error(LA_ERR_FORMAT, "%s: line %lld: %s is empty", c->path,
                          (long long)r->line, spec[j].name);
        if ((spec[j].flags & CF_YESNO) && *cell && strcmp(cell, "yes") && strcmp(cell, "no"))
          return la_error(LA_ERR_FORMAT, "%s: line %lld: %s is '%.40s', not yes or no",
                          c->path, (long long)r->line, spec[j].name, cell);
        continue;
      }
      if (*cell) {
        char *e;
        errno = 0;
        double v = strtod(cell, &e);
        if (e == cell || *e)
          return la_error(LA_ERR_FORMAT, "%s: line %lld: %s is '%.40s', not a number",
                          c->path, (long long)r->line, spec[j].name, cell);
        r->v[j] = v;
      }
      if ((spec[j].flags & CF_KEY) && !isfinite(r->v[j]))
        return la_error(LA_ERR_FORMAT, "%s: line %lld: %s must be a finite number, not '%.40s'",
                        c->path, (long long)r->line, spec[j].name, cell);
    }
  }
  t->n = c->nrow;
  return LA_OK;
}

/* The columns the report reads, by table (the enums of eval_report_internal.h). */
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

static const colspec rows_cols[W_NCOL] = {
    [W_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [W_MODE] = {"mode", K_STR, 0},
    [W_FEATURES] = {"features", K_NUM, 0}, [W_SEED] = {"seed", K_NUM, 0}, [W_N] = {"n", K_NUM, 0},
    [W_SCALE] = {"input_scale", K_NUM, 0}, [W_TOKEN] = {"token", K_NUM, 0},
    [W_HEAD] = {"head", K_NUM, 0}, [W_DEN] = {"den", K_NUM, 0},
    [W_DENMED] = {"den_over_median", K_NUM, 0}, [W_ROWERR] = {"row_rel_err", K_NUM, CF_REQ}};

static const colspec recall_cols[C_NCOL] = {
    [C_MAP] = {"feature_map", K_STR, CF_REQ | CF_KEY}, [C_FEATURES] = {"features", K_NUM, CF_REQ | CF_KEY},
    [C_R] = {"r", K_NUM, 0}, [C_PAIRS] = {"pairs", K_NUM, CF_REQ | CF_KEY},
    [C_SEEDS] = {"seeds", K_NUM, 0}, [C_QUERIES] = {"queries", K_NUM, 0},
    [C_ACC] = {"accuracy", K_NUM, CF_REQ}, [C_SMACC] = {"softmax_accuracy", K_NUM, 0}};

static const colspec refs_cols[X_NCOL] = {
    [X_MODE] = {"mode", K_STR, CF_REQ | CF_KEY}, [X_N] = {"n", K_NUM, CF_REQ | CF_KEY},
    [X_HEADS] = {"heads", K_NUM, 0}, [X_DK] = {"dk", K_NUM, 0}, [X_DV] = {"dv", K_NUM, 0},
    [X_SCALE] = {"input_scale", K_NUM, 0}, [X_RANKS] = {"ranks", K_NUM, 0},
    [X_THREADS] = {"threads", K_NUM, 0}, [X_SMSEC] = {"softmax_seconds", K_NUM, 0},
    [X_SMGF] = {"softmax_gflops", K_NUM, 0}, [X_FLOORSEC] = {"floor_seconds", K_NUM, 0}};

la_status la_er_read_tables(ctx *c) {
  c->res.name = "results.csv", c->bias.name = "bias.csv", c->rows.name = "rows.csv";
  c->recall.name = "recall.csv", c->refs.name = "refs.csv";
  LA_TRY(load_table(c->dir, &c->res, 0, results_cols, R_NCOL));
  LA_TRY(load_table(c->dir, &c->bias, 1, bias_cols, B_NCOL));
  LA_TRY(load_table(c->dir, &c->rows, 1, rows_cols, W_NCOL));
  LA_TRY(load_table(c->dir, &c->recall, 1, recall_cols, C_NCOL));
  LA_TRY(load_table(c->dir, &c->refs, 1, refs_cols, X_NCOL));
  LA_CHECK(c->res.n > 0, LA_ERR_FORMAT, "%s: line %lld: no rows after the header", c->res.csv.path,
           (long long)c->res.csv.line[0] + 1);
  return LA_OK;
}

void la_er_free_tables(ctx *c) {
  table_free(&c->res), table_free(&c->bias), table_free(&c->rows), table_free(&c->recall);
  table_free(&c->refs);
}
