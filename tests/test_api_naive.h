/* Naive float64 references for the API tests (test_api*.c). They share no code with the
 * engine: the feature maps of docs/design.md §2 are written out here, the operator is the
 * quadratic form of §1 over the key sets A(i) of §3 (one loop per query over every key it
 * may read), and the gradient is the chain rule of that quadratic form, written by hand.
 * Only the public enums (la_map_kind, la_mode, la_den_policy) are borrowed for names, and
 * nv_map_of reads a featmap's projection (its random rows, data the reference must share).
 *
 * Scales: the exponential maps are written as phi_l(x) = e^{a(x)} p_l(x) with |p_l| <= 1 and
 * an analytic row log-scale a(x), and each query's sum over its keys is taken relative to
 * the largest key scale it reads, so large inputs neither overflow nor underflow here. */
#ifndef LINATTN_TESTS_API_NAIVE_H
#define LINATTN_TESTS_API_NAIVE_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/core.h"

/* ---- Test data: SplitMix64 + Box-Muller, a pure function of (seed, index) ---- */
static inline uint64_t nv_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static inline double nv_normal(uint64_t seed, uint64_t idx) {
  uint64_t a = nv_mix(nv_mix(seed) ^ (2 * idx)), b = nv_mix(a ^ (2 * idx + 1));
  double u1 = ((double)(a >> 11) + 1.0) * 0x1.0p-53, u2 = (double)(b >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
/* x[i] = offset + scale * N(0, 1), i < count */
static inline void nv_fill(double *x, size_t count, uint64_t seed, double scale, double offset) {
  for (size_t i = 0; i < count; i++) x[i] = offset + scale * nv_normal(seed, i);
}
/* Round to float32 in place (the f32 tests feed the engine and the reference the same values). */
static inline void nv_round_f32(double *x, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] = (double)(float)x[i];
}
/* A buffer of dtype dt (f32 or f64) holding x; free() it. */
static inline void *nv_to_dtype(la_dtype dt, const double *x, size_t count) {
  void *p = malloc((dt == LA_F32 ? sizeof(float) : sizeof(double)) * (count ? count : 1));
  for (size_t i = 0; i < count; i++) {
    if (dt == LA_F32) ((float *)p)[i] = (float)x[i];
    else ((double *)p)[i] = x[i];
  }
  return p;
}
static inline void nv_from_dtype(la_dtype dt, const void *p, double *x, size_t count) {
  for (size_t i = 0; i < count; i++)
    x[i] = dt == LA_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
/* Normwise relative error max|x - ref| / max(max|ref|, floor) (0/0 = 0); NaN anywhere gives
 * +inf. floor is the natural scale of entries whose exact value can vanish identically. */
static inline double nv_relerr_floor(const double *x, const double *ref, size_t count, double floor) {
  double num = 0, den = floor;
  for (size_t i = 0; i < count; i++) {
    double d = fabs(x[i] - ref[i]);
    if (isnan(d)) return INFINITY;
    num = d > num ? d : num;
    den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
  }
  return num == 0 ? 0 : den == 0 ? INFINITY : num / den;
}
static inline double nv_relerr(const double *x, const double *ref, size_t count) {
  return nv_relerr_floor(x, ref, count, 0.0);
}

/* ---- Feature maps, docs/design.md §2 ---- */
typedef struct {
  la_map_kind map;
  int heads, dk, m, r; /* r = dk (elu1, relu, identity, precomputed), m, 2m; taylor2
                        * 1 + dk + dk(dk+1)/2; dpfp 2 dk m (m = nu) */
  double s;            /* similarity scale */
  const double *omega; /* [heads][m][dk] (random maps) */
} nv_map;

static inline nv_map nv_map_make(la_map_kind map, int heads, int dk, int m, double scale,
                                 const double *omega) {
  nv_map f = {map, heads, dk, m, dk, scale > 0 ? scale : 1.0 / sqrt((double)dk), omega};
  if (map == LA_MAP_FAVOR || map == LA_MAP_FAVOR_ORF) f.r = m;
  if (map == LA_MAP_FAVOR_HYP || map == LA_MAP_TRIG) f.r = 2 * m;
  if (map == LA_MAP_TAYLOR2) f.r = 1 + dk + dk * (dk + 1) / 2;
  if (map == LA_MAP_DPFP) f.r = 2 * dk * m;
  return f;
}

/* The reference map of an engine's configuration c, its projection (random maps) copied out of
 * fm so that it outlives the featmap (data, not code): free f.omega when done. */
static inline nv_map nv_map_of(const la_config *c, la_featmap fm, int heads, int dk) {
  int m = 0;
  const double *om = la_featmap_projection(fm, &m);
  double *cp = NULL;
  if (om) {
    cp = malloc(sizeof(double) * (size_t)heads * m * dk);
    memcpy(cp, om, sizeof(double) * (size_t)heads * m * dk);
  }
  return nv_map_make(c->map, heads, dk, c->features, c->scale, cp);
}

/* dpfp's rho(x)_i (i < 2 dk): relu(x_i), then relu(-x_{i-dk}); and d rho_i / d x_{i mod dk} */
static inline double nv_rho(const double *x, int dk, int i) {
  const double v = i < dk ? x[i] : -x[i - dk];
  return v > 0 ? v : 0;
}
static inline double nv_drho(const double *x, int dk, int i) {
  return i < dk ? (x[i] > 0 ? 1.0 : 0.0) : (x[i - dk] < 0 ? -1.0 : 0.0);
}

/* phi(x) = e^{*a} p for head h: p has r entries. Domain: finite x. */
static inline void nv_phi(const nv_map *f, int h, const double *x, double *p, double *a) {
  const int dk = f->dk, m = f->m;
  *a = 0;
  switch (f->map) {
  case LA_MAP_ELU1: /* elu(x) + 1 = x + 1 (x > 0), e^x (x <= 0) */
    for (int c = 0; c < dk; c++) p[c] = x[c] > 0 ? x[c] + 1 : exp(x[c]);
    return;
  case LA_MAP_RELU:
    for (int c = 0; c < dk; c++) p[c] = x[c] > 0 ? x[c] : 0;
    return;
  case LA_MAP_IDENTITY:
  case LA_MAP_PRECOMPUTED:
    for (int c = 0; c < dk; c++) p[c] = x[c];
    return;
  case LA_MAP_TAYLOR2: { /* [1, x~, per row j: x~_j^2 / sqrt 2, x~_j x~_l (l > j)] */
    const double rs = sqrt(f->s);
    int o = 0;
    p[o++] = 1;
    for (int c = 0; c < dk; c++) p[o++] = rs * x[c];
    for (int j = 0; j < dk; j++)
      for (int l = j; l < dk; l++) p[o++] = f->s * x[j] * x[l] / (l == j ? sqrt(2.0) : 1.0);
    return;
  }
  case LA_MAP_DPFP: /* block j = 1..nu: rho_i rho_{(i - j) mod 2dk} */
    for (int j = 1; j <= m; j++)
      for (int i = 0; i < 2 * dk; i++)
        p[(j - 1) * 2 * dk + i] = nv_rho(x, dk, i) * nv_rho(x, dk, ((i - j) % (2 * dk) + 2 * dk) % (2 * dk));
    return;
  default:
    break;
  }
  /* u_l = omega_l . x~, x~ = sqrt(s) x; |x~|^2 / 2 = s |x|^2 / 2 */
  const double rs = sqrt(f->s);
  double half = 0, umax = -INFINITY, uabs = 0;
  for (int c = 0; c < dk; c++) half += 0.5 * f->s * x[c] * x[c];
  double *u = malloc(sizeof(double) * m);
  for (int l = 0; l < m; l++) {
    const double *w = f->omega + ((size_t)h * m + l) * dk;
    double t = 0;
    for (int c = 0; c < dk; c++) t += w[c] * rs * x[c];
    u[l] = t;
    umax = t > umax ? t : umax;
    uabs = fabs(t) > uabs ? fabs(t) : uabs;
  }
  if (f->map == LA_MAP_FAVOR || f->map == LA_MAP_FAVOR_ORF) {
    /* m^-1/2 exp(u_l - |x~|^2/2) */
    for (int l = 0; l < m; l++) p[l] = exp(u[l] - umax);
    *a = umax - half - 0.5 * log((double)m);
  } else if (f->map == LA_MAP_FAVOR_HYP) {
    /* (2m)^-1/2 exp(-|x~|^2/2) [exp(u_l), exp(-u_l)] */
    for (int l = 0; l < m; l++) {
      p[l] = exp(u[l] - uabs);
      p[m + l] = exp(-u[l] - uabs);
    }
    *a = uabs - half - 0.5 * log(2.0 * m);
  } else { /* trig: m^-1/2 exp(|x~|^2/2) [cos u_l, sin u_l] */
    for (int l = 0; l < m; l++) {
      p[l] = cos(u[l]);
      p[m + l] = sin(u[l]);
    }
    *a = half - 0.5 * log((double)m);
  }
  free(u);
}

/* out = sum_l c_l e^{-a(x)} grad_x phi_l(x) (dk entries), with p, a from nv_phi. */
static inline void nv_chain(const nv_map *f, int h, const double *x, const double *p,
                            const double *c, double *out) {
  const int dk = f->dk, m = f->m;
  const double rs = sqrt(f->s), s = f->s;
  for (int j = 0; j < dk; j++) out[j] = 0;
  switch (f->map) {
  case LA_MAP_ELU1: /* d/dx: 1 (x > 0), e^x (x <= 0) */
    for (int j = 0; j < dk; j++) out[j] = c[j] * (x[j] > 0 ? 1.0 : exp(x[j]));
    return;
  case LA_MAP_RELU: /* 1 (x > 0), 0 (x < 0); x = 0 does not occur in the tests */
    for (int j = 0; j < dk; j++) out[j] = x[j] > 0 ? c[j] : 0.0;
    return;
  case LA_MAP_IDENTITY:
  case LA_MAP_PRECOMPUTED:
    for (int j = 0; j < dk; j++) out[j] = c[j];
    return;
  case LA_MAP_TAYLOR2: { /* d(sqrt(s) x_j) = sqrt(s); d(s x_j x_l w) = s w (x_l e_j + x_j e_l) */
    int o = 1;
    for (int j = 0; j < dk; j++) out[j] += c[o++] * rs;
    for (int j = 0; j < dk; j++)
      for (int l = j; l < dk; l++, o++) {
        const double w = l == j ? 1 / sqrt(2.0) : 1.0;
        out[j] += c[o] * s * w * x[l];
        out[l] += c[o] * s * w * x[j];
      }
    return;
  }
  case LA_MAP_DPFP: /* product rule on rho_i rho_k */
    for (int j = 1; j <= m; j++)
      for (int i = 0; i < 2 * dk; i++) {
        const int k = ((i - j) % (2 * dk) + 2 * dk) % (2 * dk);
        const double cc = c[(j - 1) * 2 * dk + i];
        out[i % dk] += cc * nv_drho(x, dk, i) * nv_rho(x, dk, k);
        out[k % dk] += cc * nv_rho(x, dk, i) * nv_drho(x, dk, k);
      }
    return;
  default:
    break;
  }
  for (int l = 0; l < m; l++) {
    const double *w = f->omega + ((size_t)h * m + l) * dk;
    for (int j = 0; j < dk; j++) {
      double gx;
      if (f->map == LA_MAP_FAVOR || f->map == LA_MAP_FAVOR_ORF) /* phi_l (sqrt(s) w - s x) */
        gx = c[l] * p[l] * (rs * w[j] - s * x[j]);
      else if (f->map == LA_MAP_FAVOR_HYP)
        gx = c[l] * p[l] * (rs * w[j] - s * x[j]) + c[m + l] * p[m + l] * (-rs * w[j] - s * x[j]);
      else /* trig: cos' = cos s x - sin sqrt(s) w, sin' = sin s x + cos sqrt(s) w */
        gx = c[l] * (p[l] * s * x[j] - p[m + l] * rs * w[j]) +
             c[m + l] * (p[m + l] * s * x[j] + p[l] * rs * w[j]);
      out[j] += gx;
    }
  }
}

/* ---- Key sets A(i), docs/design.md §3 ---- */
typedef struct {
  la_mode mode;
  int64_t window;     /* causal: i - W < j <= i; 0 = none */
  const int64_t *off; /* segment offsets 0 = o_0 < ... < o_S = N, or NULL */
  int64_t noff;
  int normalize;
  la_den_policy pol;
  double eps;
} nv_op;

static inline int64_t nv_segment(const nv_op *op, int64_t t) {
  int64_t s = 0;
  if (op->off)
    for (int64_t i = 1; i < op->noff; i++) s += op->off[i] <= t;
  return s;
}
static inline int nv_reads(const nv_op *op, int64_t i, int64_t j) {
  if (nv_segment(op, i) != nv_segment(op, j)) return 0;
  if (op->mode == LA_BIDIRECTIONAL) return 1;
  return j <= i && (op->window <= 0 || i - j < op->window);
}

/* Features of all n*H rows of x ([n, H, dk]): p [n*H][r], a [n*H]. */
static inline void nv_features(const nv_map *f, int64_t n, const double *x, double *p, double *a) {
  for (int64_t i = 0; i < n; i++)
    for (int h = 0; h < f->heads; h++) {
      size_t row = (size_t)i * f->heads + h;
      nv_phi(f, h, x + row * f->dk, p + row * f->r, a + row);
    }
}

/* Denominator outcome of the forward (true scale). */
typedef struct {
  int64_t rows, violations, nonpositive, first_bad_token, overflows_f32, overflows_f64;
  int first_bad_head;
  double min, max; /* over finite true denominators */
} nv_den;

/* The divisor d' (on the stabilized scale, true den = den' e^lsc) of the policy, or 0 when
 * the row's output is 0: zero-empty on den = 0, or a violation (*bad = 1). clamp sets
 * *constant when E is the divisor. */
static inline double nv_divisor(const nv_op *op, double den_s, double lsc, int *bad,
                                int *constant) {
  *bad = 0;
  *constant = 0;
  switch (op->pol) {
  case LA_DEN_ERROR:
    if (den_s > 0 && isfinite(den_s)) return den_s;
    break;
  case LA_DEN_ZERO_EMPTY:
    if (den_s == 0) return 0;
    if (den_s > 0 && isfinite(den_s)) return den_s;
    break;
  case LA_DEN_ADD: { /* num / (den + E) */
    double d = den_s + op->eps * exp(-lsc);
    if (d != 0 && isfinite(d)) return d;
    break;
  }
  case LA_DEN_CLAMP: { /* num / max(den, E) */
    double e = op->eps * exp(-lsc);
    *constant = !(den_s >= e);
    double d = den_s >= e ? den_s : e;
    if (d > 0 && isfinite(d)) return d;
    break;
  }
  }
  *bad = 1;
  return 0;
}

/* One query row: over j in A(i), w'_j = e^{a_k(j) - Ak} p(q_i).p(k_j), num' = sum w' v_j,
 * den' = sum w'; the true values are e^{lsc} (num', den') with lsc = a_q(i) + Ak. */
typedef struct {
  int64_t n;
  int H, r, dk, dv;
  const double *pq, *aq, *pk, *ak, *v;
} nv_ctx;

static inline void nv_row(const nv_ctx *c, const nv_op *op, int h, int64_t i, double *w,
                          double *num, double *den, double *lsc) {
  const int H = c->H, r = c->r, dv = c->dv;
  double Ak = -INFINITY;
  for (int64_t j = 0; j < c->n; j++)
    if (nv_reads(op, i, j) && c->ak[j * H + h] > Ak) Ak = c->ak[j * H + h];
  for (int d = 0; d < dv; d++) num[d] = 0;
  *den = 0;
  const double *pi = c->pq + ((size_t)i * H + h) * r;
  for (int64_t j = 0; j < c->n; j++) {
    w[j] = 0;
    if (!nv_reads(op, i, j)) continue;
    const double *pj = c->pk + ((size_t)j * H + h) * r;
    double dot = 0;
    for (int l = 0; l < r; l++) dot += pi[l] * pj[l];
    w[j] = dot * exp(c->ak[j * H + h] - Ak);
    for (int d = 0; d < dv; d++) num[d] += w[j] * c->v[((size_t)j * H + h) * dv + d];
    *den += w[j];
  }
  *lsc = Ak == -INFINITY ? 0 : c->aq[i * H + h] + Ak;
}

/* Naive forward over the whole sequence: out [n, H, dv]; den statistics in *ds. */
static inline void nv_forward(const nv_map *f, const nv_op *op, int64_t n, int dv,
                              const double *q, const double *k, const double *v, double *out,
                              nv_den *ds) {
  const int H = f->heads, r = f->r;
  double *pq = malloc(sizeof(double) * (size_t)(n ? n : 1) * H * r), *aq = malloc(sizeof(double) * (size_t)(n ? n : 1) * H);
  double *pk = malloc(sizeof(double) * (size_t)(n ? n : 1) * H * r), *ak = malloc(sizeof(double) * (size_t)(n ? n : 1) * H);
  double *w = malloc(sizeof(double) * (size_t)(n ? n : 1)), *num = malloc(sizeof(double) * dv);
  nv_features(f, n, q, pq, aq);
  nv_features(f, n, k, pk, ak);
  nv_ctx c = {n, H, r, f->dk, dv, pq, aq, pk, ak, v};
  nv_den st = {0, 0, 0, -1, 0, 0, 0, INFINITY, -INFINITY};
  for (int64_t i = 0; i < n; i++)
    for (int h = 0; h < H; h++) {
      double den, lsc;
      nv_row(&c, op, h, i, w, num, &den, &lsc);
      double *o = out + ((size_t)i * H + h) * dv;
      st.rows++;
      double tden = den * exp(lsc);
      if (den <= 0) st.nonpositive++;
      if (isfinite(tden)) {
        st.min = tden < st.min ? tden : st.min;
        st.max = tden > st.max ? tden : st.max;
      }
      if (!op->normalize) { /* the true scale */
        int of32 = 0, of64 = 0;
        for (int d = 0; d < dv; d++) {
          double lg = log(fabs(num[d])) + lsc; /* log |num| on the true scale */
          o[d] = num[d] == 0 ? 0 : num[d] * exp(lsc);
          of32 |= num[d] != 0 && lg > log(3.4028234663852886e38);
          of64 |= num[d] != 0 && !isfinite(o[d]);
        }
        st.overflows_f32 += of32;
        st.overflows_f64 += of64;
        continue;
      }
      int bad, constant;
      double d = nv_divisor(op, den, lsc, &bad, &constant);
      if (bad) {
        st.violations++;
        if (st.first_bad_token < 0) { /* rows come token-major, heads in order */
          st.first_bad_token = i;
          st.first_bad_head = h;
        }
      }
      for (int e = 0; e < dv; e++) o[e] = d == 0 ? 0 : num[e] / d;
    }
  if (ds) *ds = st;
  free(pq); free(aq); free(pk); free(ak); free(w); free(num);
}

/* Naive gradient of L = sum(out * g) (out of nv_forward), by the chain rule:
 *   normalized, out_i = num_i / d_i with d_i the policy's divisor:
 *     dL/dw_ij = g_i . (v_j - out_i) / d_i   (g_i . v_j / d_i where clamp makes d_i = E)
 *   unnormalized, out_i = num_i:  dL/dw_ij = g_i . v_j
 *   dv_j = sum_i (w_ij / d_i) g_i  (or w_ij g_i),
 *   dq_i = sum_j dL/dw_ij sum_l phi_l(k_j) grad phi_l(q_i),
 *   dk_j = sum_i dL/dw_ij sum_l phi_l(q_i) grad phi_l(k_j),
 * all with w on the scale of query i (the e^{lsc} factors cancel as in nv_row).
 * Rows that violate the policy, or are 0 under zero-empty, contribute nothing. */
static inline void nv_backward(const nv_map *f, const nv_op *op, int64_t n, int dv,
                               const double *q, const double *k, const double *v,
                               const double *g, double *dq, double *dk, double *dvo) {
  const int H = f->heads, r = f->r, dkk = f->dk;
  const size_t nn = (size_t)(n ? n : 1);
  double *pq = malloc(sizeof(double) * nn * H * r), *aq = malloc(sizeof(double) * nn * H);
  double *pk = malloc(sizeof(double) * nn * H * r), *ak = malloc(sizeof(double) * nn * H);
  double *w = malloc(sizeof(double) * nn), *num = malloc(sizeof(double) * dv);
  double *E = malloc(sizeof(double) * nn), *cq = malloc(sizeof(double) * r);
  double *ck = malloc(sizeof(double) * r), *t = malloc(sizeof(double) * dkk);
  nv_features(f, n, q, pq, aq);
  nv_features(f, n, k, pk, ak);
  nv_ctx c = {n, H, r, dkk, dv, pq, aq, pk, ak, v};
  memset(dq, 0, sizeof(double) * nn * H * dkk);
  memset(dk, 0, sizeof(double) * nn * H * dkk);
  memset(dvo, 0, sizeof(double) * nn * H * dv);
  for (int64_t i = 0; i < n; i++)
    for (int h = 0; h < H; h++) {
      double den, lsc;
      nv_row(&c, op, h, i, w, num, &den, &lsc);
      const double *gi = g + ((size_t)i * H + h) * dv;
      double Ak = lsc - aq[i * H + h]; /* the key scale of the row */
      double vscale, outg = 0;     /* dv_j += vscale w'_ij g_i */
      int skip = 0;
      if (op->normalize) {
        int bad, constant;
        double d = nv_divisor(op, den, lsc, &bad, &constant);
        skip = d == 0;
        vscale = skip ? 0 : 1.0 / d;
        if (!skip && !constant)
          for (int e = 0; e < dv; e++) outg += gi[e] * num[e] / d;
      } else {
        vscale = exp(lsc);
      }
      if (skip) continue;
      /* E_j = dL/dw'_ij (per unit of w'_ij, the stabilized weight) */
      for (int64_t j = 0; j < n; j++) {
        E[j] = 0;
        if (!nv_reads(op, i, j)) continue;
        const double *vj = v + ((size_t)j * H + h) * dv;
        double gv = 0;
        for (int e = 0; e < dv; e++) gv += gi[e] * vj[e];
        E[j] = (gv - outg) * vscale;
        double *dvj = dvo + ((size_t)j * H + h) * dv;
        for (int e = 0; e < dv; e++) dvj[e] += vscale * w[j] * gi[e];
      }
      /* dq_i: c_l = sum_j E_j e^{a_k(j) - Ak} p_l(k_j) */
      for (int l = 0; l < r; l++) cq[l] = 0;
      const double *pi = pq + ((size_t)i * H + h) * r;
      for (int64_t j = 0; j < n; j++) {
        if (E[j] == 0) continue;
        const double sj = E[j] * exp(ak[j * H + h] - Ak);
        const double *pj = pk + ((size_t)j * H + h) * r;
        for (int l = 0; l < r; l++) cq[l] += sj * pj[l];
        /* dk_j: c_l = E_j e^{a_k(j) - Ak} p_l(q_i) */
        for (int l = 0; l < r; l++) ck[l] = sj * pi[l];
        nv_chain(f, h, k + ((size_t)j * H + h) * dkk, pj, ck, t);
        for (int e = 0; e < dkk; e++) dk[((size_t)j * H + h) * dkk + e] += t[e];
      }
      nv_chain(f, h, q + ((size_t)i * H + h) * dkk, pi, cq, t);
      for (int e = 0; e < dkk; e++) dq[((size_t)i * H + h) * dkk + e] += t[e];
    }
  free(pq); free(aq); free(pk); free(ak); free(w); free(num); free(E); free(cq); free(ck); free(t);
}

/* Summary of keys [a, b) of head h on the true scale, (S | z) as r x (dv+1) (§1): the tail
 * after the last segment start in (a, b) when op has segments. */
static inline void nv_summary(const nv_map *f, const nv_op *op, int h, int64_t a, int64_t b,
                              int dv, const double *k, const double *v, double *sz) {
  const int r = f->r, H = f->heads;
  double *p = malloc(sizeof(double) * r), ak;
  int64_t lo = a;
  for (int64_t t = a + 1; t < b; t++)
    if (nv_segment(op, t) != nv_segment(op, t - 1)) lo = t;
  memset(sz, 0, sizeof(double) * r * (dv + 1));
  for (int64_t j = lo; j < b; j++) {
    nv_phi(f, h, k + ((size_t)j * H + h) * f->dk, p, &ak);
    for (int l = 0; l < r; l++) {
      const double pl = p[l] * exp(ak);
      for (int e = 0; e < dv; e++) sz[l * (dv + 1) + e] += pl * v[((size_t)j * H + h) * dv + e];
      sz[l * (dv + 1) + dv] += pl;
    }
  }
  free(p);
}

#endif
