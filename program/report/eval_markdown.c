/* report.md of the eval report (eval_report_internal.h; docs/design.md §8): every number in it
 * comes from DIR's files. Each section writer returns a status, and the text's growth is
 * checked after each section (the memory stream's error flag): out of memory is an error,
 * never a report with a section missing (docs/design.md §6 "Out of memory"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eval_report_internal.h"
#include "la_alloc.h"

/* Definitions the report states (they are not measurements). */
#define SLOPE_REF (-0.5)          /* the Monte Carlo rate m^-1/2 */
#define SLOPE_TOL 0.15            /* "consistent": |slope - (-0.5)| <= 0.15 */
#define EY_RTOL 1e-9              /* Eckart-Young: kernel < floor * (1 - 1e-9) is a violation */
#define REASSOC_ROUNDING 1e-10    /* reassoc_rel_err at or below: float64 rounding level */
#define SMALL_DEN 0.1             /* rows.csv: a "small" denominator is below 0.1 x the median */

/* ---- number formats ---- */

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

/* ---- the sections ---- */

static void md_escape_code(FILE *f, const char *s) { /* inside `...` */
  for (; *s; s++) fputc(*s == '`' ? '\'' : ((unsigned char)*s < 32 ? ' ' : *s), f);
}

static la_status list_values(FILE *f, const ctx *c, int col, const char *fmt) {
  double *v = la_malloc((c->res.n ? (size_t)c->res.n : 1) * sizeof *v);
  LA_CHECK(v, LA_ERR_NOMEM, "report.md: out of memory for the distinct values of %lld rows",
           (long long)c->res.n);
  int k = 0;
  for (int64_t i = 0; i < c->res.n; i++) {
    int seen = 0;
    for (int j = 0; j < k && !seen; j++) seen = v[j] == c->res.row[i].v[col];
    if (!seen) v[k++] = c->res.row[i].v[col];
  }
  qsort(v, (size_t)k, sizeof *v, la_er_cmp_double);
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
  LA_TRY(list_values(f, c, R_FEATURES, "%.0f"));
  fprintf(f, "; n ");
  LA_TRY(list_values(f, c, R_N, "%.0f"));
  fprintf(f, "; input scales ");
  LA_TRY(list_values(f, c, R_SCALE, "%g"));
  fprintf(f, "; modes ");
  for (int m = 0; m < c->modes.n; m++) fprintf(f, "%s%s", m ? ", " : "", c->modes.s[m]);
  fprintf(f, "; seeds ");
  LA_TRY(list_values(f, c, R_SEED, "%.0f"));
  fprintf(f, "\n- other files: bias.csv %s, rows.csv %s, refs.csv %s, recall.csv %s\n\n",
          c->bias.present ? "read" : "absent", c->rows.present ? "read" : "absent",
          c->refs.present ? "read" : "absent", c->recall.present ? "read (--recall)" : "absent (no --recall)");
  fprintf(f, "Errors are relative Frobenius errors ||X - X_softmax||_F / ||X_softmax||_F against exact softmax "
             "attention with the same scale, computed in float64; \"median\" is over seeds.\n\n");
  /* --decay (docs/design.md §8.1 "With decay"): the decay column of results.csv */
  const csvfile *rc = &c->res.csv;
  for (int j = 0; c->res.present && rc->nrow > 0 && rc->cell && j < rc->ncol; j++) {
    const char *g = rc->cell[(size_t)rc->ncol + (size_t)j];
    if (strcmp(rc->cell[j], "decay") || !g || !*g) continue;
    fprintf(f, "**With decay** (`--decay ");
    md_escape_code(f, g);
    fprintf(f, "`; docs/design.md §8.1 \"With decay\"). Each map ran decayed (pair weights gamma_h^|i-j|) and "
               "is measured against softmax with the same decay: out_rel_err, the gradient errors, "
               "reassoc_rel_err (against the decayed quadratic form of the same map), den_min, den_frac_small, "
               "the bias of the output and rows.csv are of the decayed operator. kernel_rel_err, the rank-r floor, "
               "weights_tv, weights_tv_floor and the kernel's bias are properties of the undecayed kernel "
               "phi(q).phi(k) against exp(s q.k), the same as without --decay. A gradient cell is empty where the "
               "engine refused the decayed backward (docs/design.md §1.2 \"The backward\"; the row then has the "
               "forward's columns only).\n\n");
    break;
  }
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
  LA_CHECK(kv, LA_ERR_NOMEM, "report.md: out of memory for the kernel errors and floors of %lld rows",
           (long long)c->res.n);
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
      seedstat sk = la_er_summarize(kv, nk), sf = la_er_summarize(fv, nf);
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
      return la_error(LA_ERR_NOMEM, "report.md: out of memory for the row errors of %lld rows of rows.csv",
                      (long long)c->rows.n);
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
      seedstat a = la_er_summarize(v, ns), b = la_er_summarize(u, nl);
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

/* The "what this run supports" preamble. */
static la_status md_claims(FILE *f, const ctx *c) {
  (void)c;
  fprintf(f, "## What this run supports and what it does not\n\n"
             "Each claim names the column it rests on: out_rel_err and grad_*_rel_err (the outputs and gradients "
             "against softmax), weights_tv (the row-normalized attention weights against softmax's: scale-free), "
             "kernel_rel_err (the unnormalized kernel entry by entry: dominated by one overall scale for a finite "
             "map, which normalized attention ignores), reassoc_rel_err (the linear form against the quadratic "
             "form of the same map).\n\n");
  return LA_OK;
}

la_status la_er_compose_report(const ctx *c, const la_eval_meta *meta, char **text, size_t *len) {
  static const struct {
    const char *name;
    la_status (*write)(FILE *f, const ctx *c);
  } sections[] = {{"claims", md_claims}, {"Eckart-Young", md_eckart_young}, {"reassociation", md_reassoc},
                  {"output error", md_output}, {"weights", md_weights}, {"slopes", md_slopes},
                  {"floor", md_floor}, {"bias", md_bias}, {"denominators", md_den}, {"recall", md_recall},
                  {"references", md_refs}, {"tables", md_tables}, {"plots", md_plots}};
  FILE *f = la_open_memstream(text, len);
  LA_CHECK(f, LA_ERR_NOMEM, "out of memory for report.md");
  /* Every section returns its status (LA_ERR_NOMEM, recorded, when it cannot allocate); a
   * write that could not grow the text sets the stream's error flag, checked after each. Then
   * no report at all, never a shorter one. */
  la_status st = md_header(f, c, meta);
  if (st == LA_OK && ferror(f)) st = la_error(LA_ERR_NOMEM, "out of memory composing report.md (its header)");
  for (size_t i = 0; st == LA_OK && i < sizeof sections / sizeof *sections; i++) {
    st = sections[i].write(f, c);
    if (st == LA_OK && ferror(f))
      st = la_error(LA_ERR_NOMEM, "out of memory composing report.md (section %s)", sections[i].name);
  }
  if (fclose(f) != 0 && st == LA_OK) st = la_error(LA_ERR_NOMEM, "out of memory composing report.md");
  if (st != LA_OK) {
    free(*text);
    *text = NULL;
  }
  return st;
}
