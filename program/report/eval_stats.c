/* The eval report's statistics (eval_report_internal.h; docs/design.md §8): results.csv
 * grouped over seeds (median, min, max per (map, mode, n, input scale, features)), the random
 * maps, the reference setting of the plots, and the least-squares slopes of log(out_rel_err)
 * on log(features) that the report holds against the Monte Carlo rate m^-1/2. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "eval_report_internal.h"
#include "la_alloc.h"

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

int la_er_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

seedstat la_er_summarize(double *v, int k) {
  seedstat s = {NAN, NAN, NAN, k, 0};
  int m = 0;
  for (int i = 0; i < k; i++) {
    if (isnan(v[i])) s.nnan++;
    else v[m++] = v[i];
  }
  if (m) {
    qsort(v, (size_t)m, sizeof *v, la_er_cmp_double);
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
    int c = la_er_cmp_double(&x->v[key[i]], &y->v[key[i]]);
    if (c) return c;
  }
  return (x->line > y->line) - (x->line < y->line);
}

double la_er_log_dist_to_one(double s) { return s > 0 ? fabs(log(s)) : INFINITY; }

la_status la_er_aggregate(ctx *c) {
  table *t = &c->res;
  for (int64_t i = 0; i < t->n; i++) {
    trow *r = &t->row[i];
    if ((r->map = strset_add(&c->maps, r->s[R_MAP])) < 0 || (r->mode = strset_add(&c->modes, r->s[R_MODE])) < 0)
      return la_error(LA_ERR_NOMEM, "out of memory for the lists of feature maps and modes");
    if (!HAS(r, R_R)) r->v[R_R] = r->v[R_FEATURES];
  }
  table *others[] = {&c->bias, &c->rows, &c->recall};
  const int mapcol[] = {B_MAP, W_MAP, C_MAP}, modecol[] = {B_MODE, W_MODE, -1};
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < others[k]->n; i++) {
      trow *r = &others[k]->row[i];
      if ((r->map = strset_add(&c->maps, r->s[mapcol[k]])) < 0)
        return la_error(LA_ERR_NOMEM, "out of memory for the list of feature maps");
      if (modecol[k] >= 0 && *r->s[modecol[k]] && (r->mode = strset_add(&c->modes, r->s[modecol[k]])) < 0)
        return la_error(LA_ERR_NOMEM, "out of memory for the list of modes");
    }
  const int nm = c->maps.n > 0 ? c->maps.n : 1;
  c->random = la_calloc((size_t)nm, sizeof *c->random);
  c->wmax = la_calloc((size_t)nm, sizeof *c->wmax);
  c->ag = la_calloc(t->n ? (size_t)t->n : 1, sizeof *c->ag);
  c->sl = la_calloc(t->n ? (size_t)t->n : 1, sizeof *c->sl);
  double *buf = la_malloc((t->n ? (size_t)t->n : 1) * sizeof *buf);
  if (!c->random || !c->wmax || !c->ag || !c->sl || !buf) {
    free(buf);
    return la_error(LA_ERR_NOMEM, "out of memory for the aggregates of %lld rows", (long long)t->n);
  }
  qsort(t->row, (size_t)t->n, sizeof *t->row, cmp_results);

  /* Random maps: more than one seed or width, or a row in bias.csv. */
  double *seed0 = la_malloc((size_t)nm * sizeof *seed0), *feat0 = la_malloc((size_t)nm * sizeof *feat0);
  if (!seed0 || !feat0) {
    free(seed0), free(feat0), free(buf);
    return la_error(LA_ERR_NOMEM, "out of memory for the aggregates");
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
      g->st[col] = la_er_summarize(buf, k);
    }
    i = j;
  }
  free(buf);

  /* Reference setting of the plots: the largest n, the input scale nearest 1. */
  c->ref_n = -INFINITY, c->ref_scale = NAN;
  for (int64_t i = 0; i < t->n; i++) {
    const trow *r = &t->row[i];
    if (r->v[R_N] > c->ref_n) c->ref_n = r->v[R_N];
    double d = la_er_log_dist_to_one(r->v[R_SCALE]), d0 = la_er_log_dist_to_one(c->ref_scale);
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

