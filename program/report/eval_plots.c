/* plots.gp of the eval report (eval_report_internal.h; docs/cli.md "linattn eval"):
 * self-contained (the plotted numbers are inline datablocks), so that `gnuplot plots.gp` in DIR
 * remakes the PNGs later. Each figure's writer returns a status: a buffer it cannot allocate
 * fails the report (docs/design.md §6 "Out of memory"); the script's text goes to a memory
 * stream whose sticky error flag is checked once, when it is closed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eval_report_internal.h"
#include "la_alloc.h"

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
static la_status res_distinct(const ctx *c, int col, int *nd, double *vmin, double *vmax) {
  double *v = la_malloc((c->res.n ? (size_t)c->res.n : 1) * sizeof *v);
  LA_CHECK(v, LA_ERR_NOMEM, "plots.gp: out of memory for the distinct values of %lld rows",
           (long long)c->res.n);
  int64_t k = 0;
  for (int64_t i = 0; i < c->res.n; i++) {
    int seen = 0;
    for (int64_t j = 0; j < k && !seen; j++) seen = v[j] == c->res.row[i].v[col];
    if (!seen) v[k++] = c->res.row[i].v[col];
  }
  count_distinct(v, k, nd, vmin, vmax);
  free(v);
  return LA_OK;
}

static const char *rel_label = "||X - X_softmax||_F / ||X_softmax||_F (relative)";

/* 1. err_vs_features.png */
static la_status plot_features(ctx *c, gpw *w, double *x, double *y, double *lo, double *hi) {
  plotinfo *pi = &c->plot[P_FEAT];
  int nd = 0;
  double a = 0, b = 0;
  LA_TRY(res_distinct(c, R_FEATURES, &nd, &a, &b));
  if (nd < 2) {
    snprintf(pi->why, sizeof pi->why, "results.csv has one features value only");
    return LA_OK;
  }
  const int np = c->modes.n + 1;
  panel *p = la_calloc((size_t)np, sizeof *p);
  LA_CHECK(p, LA_ERR_NOMEM, "plots.gp: out of memory for the panels of %s", pi->file);
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
    if (!v) {
      free(p);
      return la_error(LA_ERR_NOMEM, "plots.gp: out of memory for the rank-r floor of %s", pi->file);
    }
    for (int64_t i = 0; i < c->res.n; i++) {
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
      seedstat st = la_er_summarize(v, nv);
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
  return LA_OK;
}

/* 2. err_vs_scale.png and 3. err_vs_n.png: out_rel_err against input_scale (at n = ref_n) or n
 * (at the reference scale), each map at its largest features. */
static la_status plot_vs(ctx *c, gpw *w, int which, double *x, double *y, double *lo, double *hi) {
  const int col = which == P_SCALE ? R_SCALE : R_N;
  plotinfo *pi = &c->plot[which];
  int nd = 0;
  double vmin = 0, vmax = 0;
  LA_TRY(res_distinct(c, col, &nd, &vmin, &vmax));
  if (nd < 2) {
    snprintf(pi->why, sizeof pi->why, "results.csv has one %s value only", which == P_SCALE ? "input_scale" : "n");
    return LA_OK;
  }
  panel *p = la_calloc((size_t)c->modes.n, sizeof *p);
  LA_CHECK(p, LA_ERR_NOMEM, "plots.gp: out of memory for the panels of %s", pi->file);
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
  return LA_OK;
}

/* 4. grad_err.png */
static la_status plot_grad(ctx *c, gpw *w, double *x, double *y, double *lo, double *hi) {
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
  return LA_OK;
}

/* 5. bias.png */
static la_status plot_bias(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_BIAS];
  if (!c->bias.present || !c->bias.n) {
    snprintf(pi->why, sizeof pi->why, c->bias.present ? "bias.csv has no rows" : "no bias.csv");
    return LA_OK;
  }
  double bn = -INFINITY, bs = NAN;
  for (int64_t i = 0; i < c->bias.n; i++) {
    const trow *r = &c->bias.row[i];
    if (r->v[B_N] > bn) bn = r->v[B_N];
    double d = la_er_log_dist_to_one(r->v[B_SCALE]), d0 = la_er_log_dist_to_one(bs);
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
  return LA_OK;
}

/* 6. denominators.png */
static la_status plot_den(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_DEN];
  if (!c->rows.present || !c->rows.n) {
    snprintf(pi->why, sizeof pi->why, c->rows.present ? "rows.csv has no rows" : "no rows.csv");
    return LA_OK;
  }
  const int xc = c->rows.col[W_DENMED] >= 0 ? W_DENMED : (c->rows.col[W_DEN] >= 0 ? W_DEN : -1);
  if (xc < 0) {
    snprintf(pi->why, sizeof pi->why, "rows.csv has neither den_over_median nor den");
    return LA_OK;
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
  return LA_OK;
}

/* 7. recall.png */
static la_status plot_recall(ctx *c, gpw *w, double *x, double *y) {
  plotinfo *pi = &c->plot[P_RECALL];
  if (!c->recall.present || !c->recall.n) {
    snprintf(pi->why, sizeof pi->why, c->recall.present ? "recall.csv has no rows" : "no recall.csv (run with --recall)");
    return LA_OK;
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
    LA_CHECK(v, LA_ERR_NOMEM, "plots.gp: out of memory for the softmax accuracies of %s", pi->file);
    for (int64_t i = 0; i < t->n; i++) {
      const trow *r = &t->row[i];
      int dup = 0;
      for (int j = 0; j < k && !dup; j++) dup = x[j] == r->v[C_PAIRS];
      if (dup) continue;
      int nv = 0;
      for (int64_t j = 0; j < t->n; j++)
        if (t->row[j].v[C_PAIRS] == r->v[C_PAIRS] && isfinite(t->row[j].v[C_SMACC])) v[nv++] = t->row[j].v[C_SMACC];
      if (!nv) continue;
      seedstat st = la_er_summarize(v, nv);
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
  return LA_OK;
}

la_status la_er_compose_plots(ctx *c, char **text, size_t *len) {
  gpw w = {la_open_memstream(text, len), 0};
  LA_CHECK(w.g, LA_ERR_NOMEM, "out of memory for plots.gp");
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
    return la_error(LA_ERR_NOMEM, "out of memory for the plot data");
  }
  double *y = x + nmax, *lo = y + nmax, *hi = lo + nmax;
  fprintf(w.g, "# linattn eval: the plots of report.md. Made by linattn from the CSV files of this folder;\n"
               "# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp` in this folder\n"
               "# (gnuplot 5 or later: datablocks).\n"
               "if (!exists(\"suffix\")) suffix = \"\"\n"
               "cairo = strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0\n"
               "set grid\nset key outside right top font ',8'\nset bars small\nset datafile missing 'nan'\n");
  la_status st = plot_features(c, &w, x, y, lo, hi);
  if (st == LA_OK) st = plot_vs(c, &w, P_SCALE, x, y, lo, hi);
  if (st == LA_OK) st = plot_vs(c, &w, P_N, x, y, lo, hi);
  if (st == LA_OK) st = plot_grad(c, &w, x, y, lo, hi);
  if (st == LA_OK) st = plot_bias(c, &w, x, y);
  if (st == LA_OK) st = plot_den(c, &w, x, y);
  if (st == LA_OK) st = plot_recall(c, &w, x, y);
  free(x);
  const int bad = ferror(w.g);
  if (fclose(w.g) != 0 || bad) /* the text could not grow: the memory stream's error flag */
    st = st != LA_OK ? st : la_error(LA_ERR_NOMEM, "out of memory composing plots.gp");
  if (st != LA_OK) {
    free(*text);
    *text = NULL;
  }
  return st;
}
