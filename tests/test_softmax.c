/* Exact softmax baseline (core/softmax/softmax.c, core/softmax/softmax_bwd.c) against naive float64 quadratic
 * implementations written in the tests (here and test_softmax_naive.h; no shared code):
 * whole-sequence and key-block (partial) entries, causal and bidirectional, f64 (tolerance
 * 1e-12) and f32 (1e-5), sizes that are not multiples of the blocks. Masks (segments of
 * length 1 and across tiles, windows of 1, 5 and 300, both together) in the forward and the
 * float64 backward (1e-12), with keys that no query reads set to NaN so that touching them
 * shows; the naive backward itself against central differences. With decay (docs/design.md
 * §8.1 "With decay"): the same cases against sn_forward_decay (test_softmax_naive.h), which weighs each pair by
 * gamma_h^|i-j| (several gammas per head, 1.0 and 0.5 among them); gamma = 1 bitwise the
 * undecayed reference. Error = max |x - ref| / max |ref|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/baseline.h"
#include "test_softmax_naive.h"

static int passed, failed;

static void check(int ok, const char *fmt, const char *what, double err) {
  if (ok) {
    passed++;
  } else {
    failed++;
    printf("FAIL ");
    printf(fmt, what, err);
    printf("\n");
  }
}

/* Reference rows [q0, q0+nq) with all n keys: plain two-pass softmax per (row, head). */
static void naive(int64_t n, int H, int dk, int dv, double scale, int causal, const double *q,
                  const double *k, const double *v, int64_t q0, int64_t nq, double *out) {
  double *s = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = q0; i < q0 + nq; i++)
    for (int h = 0; h < H; h++) {
      const int64_t nj = causal ? i + 1 : n;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < nj; j++) {
        double d = 0;
        for (int c = 0; c < dk; c++) d += q[(i * H + h) * dk + c] * k[(j * H + h) * dk + c];
        s[j] = scale * d;
        mx = fmax(mx, s[j]);
      }
      double *o = out + ((i - q0) * H + h) * dv;
      memset(o, 0, sizeof(double) * dv);
      for (int64_t j = 0; j < nj; j++) {
        double p = exp(s[j] - mx);
        sum += p;
        for (int c = 0; c < dv; c++) o[c] += p * v[(j * H + h) * dv + c];
      }
      for (int c = 0; c < dv; c++) o[c] /= sum;
    }
  free(s);
}

/* max |x - ref| / max |ref|; a NaN in x gives INFINITY (fmax alone would skip it). The early
 * return also keeps gcc 12 for aarch64 from vectorizing the two fmax reductions, which
 * crashes it at -O3 (internal compiler error in vect_transform_reduction). */
static double rel_err(la_dtype dt, const void *x, const double *ref, size_t cnt) {
  double num = 0, den = 0;
  for (size_t i = 0; i < cnt; i++) {
    double xi = dt == LA_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
    if (isnan(xi)) return INFINITY;
    num = fmax(num, fabs(xi - ref[i]));
    den = fmax(den, fabs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

/* Random normal inputs * a; f32 copies are rounded and the reference uses the rounded values. */
static void fill(la_dtype dt, size_t cnt, double a, unsigned seed, double *d, void *x) {
  srand(seed);
  for (size_t i = 0; i < cnt; i++) {
    double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = rand() / (RAND_MAX + 1.0);
    d[i] = a * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
    if (dt == LA_F32) {
      ((float *)x)[i] = (float)d[i];
      d[i] = ((float *)x)[i];
    } else {
      ((double *)x)[i] = d[i];
    }
  }
}

static void one_case(la_dtype dt, la_mode mode, int64_t n, int H, int dk, int dv, double a,
                     int threads) {
  const double tol = dt == LA_F32 ? 1e-5 : 1e-12, scale = 1.0 / sqrt((double)dk);
  const size_t es = dt == LA_F32 ? 4 : 8, nq = (size_t)n * H * dk, nv = (size_t)n * H * dv;
  double *qd = malloc(8 * nq), *kd = malloc(8 * nq), *vd = malloc(8 * nv), *ref = malloc(8 * nv);
  void *q = malloc(es * nq), *k = malloc(es * nq), *v = malloc(es * nv), *out = malloc(es * nv);
  fill(dt, nq, a, 1 + (unsigned)n, qd, q);
  fill(dt, nq, a, 2 + (unsigned)n, kd, k);
  fill(dt, nv, 1.0, 3 + (unsigned)n, vd, v);
  const int causal = mode == LA_CAUSAL;
  naive(n, H, dk, dv, scale, causal, qd, kd, vd, 0, n, ref);
  char what[160];
  snprintf(what, sizeof what, "%s %s n=%lld H=%d dk=%d dv=%d a=%g T=%d", dt == LA_F32 ? "f32" : "f64",
           causal ? "causal" : "bidirectional", (long long)n, H, dk, dv, a, threads);

  /* Whole sequence. */
  la_status st = la_softmax_attention(dt, n, H, dk, dv, scale, mode, q, k, v, out, threads);
  double e = st == LA_OK ? rel_err(dt, out, ref, nv) : INFINITY;
  check(e <= tol, "la_softmax_attention %s: rel err %.3g", what, e);

  /* Key blocks from outside: query rows [q0, q0+m), keys in irregular blocks folded in a
   * ring-like order (the block holding the queries first, then the others backwards). */
  int64_t q0 = n / 3, m = n - n / 3 - n / 5;
  if (m < 1) { q0 = 0; m = n; }
  int64_t cut[6] = {0, n / 4, n / 4 + 1, n / 2, (3 * n) / 4, n};
  for (int b = 1; b < 6; b++) cut[b] = cut[b] < cut[b - 1] ? cut[b - 1] : cut[b] > n ? n : cut[b];
  int order[5] = {2, 1, 0, 4, 3};
  la_softmax_state S;
  st = la_softmax_state_init(&S, m, H, dv);
  for (int b = 0; b < 5 && st == LA_OK; b++) {
    int64_t k0 = cut[order[b]], nk = cut[order[b] + 1] - k0;
    st = la_softmax_partial(&S, dt, dk, scale, mode, q0, (char *)q + (size_t)q0 * H * dk * es,
                            k0, nk, (char *)k + (size_t)k0 * H * dk * es,
                            (char *)v + (size_t)k0 * H * dv * es, threads);
  }
  if (st == LA_OK) st = la_softmax_finish(&S, dt, out);
  e = st == LA_OK ? rel_err(dt, out, ref + (size_t)q0 * H * dv, (size_t)m * H * dv) : INFINITY;
  check(e <= tol, "la_softmax_partial %s: rel err %.3g", what, e);
  la_softmax_state_free(&S);
  free(qd); free(kd); free(vd); free(ref); free(q); free(k); free(v); free(out);
}


/* ---------------- masks and the backward ---------------- */

static double worst_fwd64, worst_fwd32, worst_bwd, worst_fd;

/* The larger error, NaN staying NaN. */
static double worse(double acc, double e) {
  return (isnan(acc) || isnan(e)) ? NAN : (e > acc ? e : acc);
}

static double err64(const double *x, const double *ref, size_t cnt) {
  double num = 0, den = 0;
  for (size_t i = 0; i < cnt; i++) {
    num = isnan(x[i]) ? INFINITY : fmax(num, fabs(x[i] - ref[i]));
    if (isinf(num)) break;
    den = fmax(den, fabs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

/* sn_forward_decay's gradients (sn_backward on its P) against central differences of its loss. */
static double dn_fd_check(int64_t n, int H, int dk, int dv, double scale, const sn_mask *m,
                          const double *lg, double *q, double *k, double *v, const double *g) {
  const size_t nk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *P = malloc(sizeof(double) * H * n * n), *gq = malloc(8 * nk), *gk = malloc(8 * nk),
         *gv = malloc(8 * nvv), *out = malloc(8 * nvv);
  sn_forward_decay(n, H, dk, dv, scale, m, lg, q, k, v, P, out);
  sn_backward(n, H, dk, dv, scale, P, q, k, v, g, gq, gk, gv);
  double *xs[3] = {q, k, v}, *gs[3] = {gq, gk, gv}, num = 0, den = 0;
  const size_t cnt[3] = {nk, nk, nvv};
  const double eps = 1e-5;
  for (int a = 0; a < 3; a++)
    for (size_t x = 0; x < cnt[a]; x++) {
      const double keep = xs[a][x];
      double L[2];
      for (int sg = 0; sg < 2; sg++) {
        xs[a][x] = keep + (sg ? -eps : eps);
        sn_forward_decay(n, H, dk, dv, scale, m, lg, q, k, v, NULL, out);
        L[sg] = 0;
        for (size_t y = 0; y < nvv; y++) L[sg] += out[y] * g[y];
      }
      xs[a][x] = keep;
      num = fmax(num, fabs((L[0] - L[1]) / (2 * eps) - gs[a][x]));
      den = fmax(den, fabs(gs[a][x]));
    }
  free(P); free(gq); free(gk); free(gv); free(out);
  return den > 0 ? num / den : num;
}

/* Query rows [qa, qb) of a sequence of n under the mask, split in two states at a point
 * that is no tile multiple; keys folded in five irregular blocks (forward and backward in
 * different orders). Keys no query of [qa, qb) may read are NaN in the engine's copy. The
 * reference: the naive forward over all rows, and the naive backward with g = 0 outside
 * [qa, qb), so that dk, dv hold those rows' contributions only. */
static void mask_case_d(const char *name, int64_t n, int H, int dk, int dv, double a,
                        const sn_mask *nm, int64_t qa, int64_t qb, int threads, int f32,
                        const double *lg) {
  const double scale = 1.0 / sqrt((double)dk);
  const size_t nqk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *q = malloc(8 * nqk), *k = malloc(8 * nqk), *v = malloc(8 * nvv), *g = calloc(nvv, 8);
  double *P = malloc(sizeof(double) * H * n * n), *ref = malloc(8 * nvv);
  double *rq = malloc(8 * nqk), *rk = malloc(8 * nqk), *rv = malloc(8 * nvv);
  sn_fill(q, nqk, a, 11 + n);
  sn_fill(k, nqk, a, 12 + n);
  sn_fill(v, nvv, 1.0, 13 + n);
  sn_fill(g + (size_t)qa * H * dv, (size_t)(qb - qa) * H * dv, 1.0, 14 + n);
  sn_forward_decay(n, H, dk, dv, scale, nm, lg, q, k, v, P, ref);
  sn_backward(n, H, dk, dv, scale, P, q, k, v, g, rq, rk, rv);
  /* the engine's keys: NaN where no query of [qa, qb) may read */
  double *ke = malloc(8 * nqk), *ve = malloc(8 * nvv);
  memcpy(ke, k, 8 * nqk);
  memcpy(ve, v, 8 * nvv);
  int64_t poisoned = 0;
  for (int64_t j = 0; j < n; j++) {
    int used = 0;
    for (int64_t i = qa; i < qb && !used; i++) used = sn_allowed(nm, i, j);
    if (used) continue;
    poisoned++;
    for (int c = 0; c < H * dk; c++) ke[j * H * dk + c] = NAN;
    for (int c = 0; c < H * dv; c++) ve[j * H * dv + c] = NAN;
  }
  const la_softmax_mask lm = {nm->causal ? LA_CAUSAL : LA_BIDIRECTIONAL, nm->seg, nm->nseg,
                              nm->window, lg};
  char what[260], gs[64] = "";
  for (int h = 0; lg && h < H && h < 4; h++) {
    const size_t l = strlen(gs);
    snprintf(gs + l, sizeof gs - l, "%s%.4g", h ? "," : " gamma ", exp(lg[h]));
  }
  snprintf(what, sizeof what, "%s%s n=%lld rows [%lld, %lld) H=%d dk=%d dv=%d T=%d (%lld keys NaN)",
           name, gs, (long long)n, (long long)qa, (long long)qb, H, dk, dv, threads,
           (long long)poisoned);
  int64_t cut[6] = {0, n / 4, n / 4 + 1, n / 2, (3 * n) / 4, n};
  for (int b = 1; b < 6; b++) cut[b] = cut[b] < cut[b - 1] ? cut[b - 1] : cut[b] > n ? n : cut[b];
  const int ford[5] = {2, 1, 0, 4, 3}, bord[5] = {4, 0, 3, 1, 2};
  const int64_t qc = qa + (qb - qa) / 3 + 1 < qb ? qa + (qb - qa) / 3 + 1 : qb;
  const int64_t part[3] = {qa, qc, qb};
  double *out = calloc(nvv, 8), *D = calloc((size_t)n * H, 8);
  double *dq = calloc(nqk, 8), *gk = calloc(nqk, 8), *gv = calloc(nvv, 8);
  la_softmax_state S[2];
  la_status st = LA_OK;
  for (int pi = 0; pi < 2; pi++) {
    const int64_t q0 = part[pi], nq = part[pi + 1] - q0;
    const size_t oq = (size_t)q0 * H * dk, ov = (size_t)q0 * H * dv;
    la_status e = la_softmax_state_init(&S[pi], nq, H, dv);
    for (int b = 0; b < 5 && e == LA_OK; b++) {
      const int64_t k0 = cut[ford[b]], nk = cut[ford[b] + 1] - k0;
      e = la_softmax_partial_mask(&S[pi], LA_F64, dk, scale, &lm, q0, q + oq, k0, nk,
                                  ke + (size_t)k0 * H * dk, ve + (size_t)k0 * H * dv, threads);
    }
    if (e == LA_OK) e = la_softmax_finish(&S[pi], LA_F64, out + ov);
    if (e == LA_OK) e = la_softmax_delta(nq, H, dv, out + ov, g + ov, D + (size_t)q0 * H);
    for (int b = 0; b < 5 && e == LA_OK; b++) {
      const int64_t k0 = cut[bord[b]], nk = cut[bord[b] + 1] - k0;
      e = la_softmax_backward_partial(&S[pi], D + (size_t)q0 * H, dk, scale, &lm, q0, q + oq,
                                      g + ov, k0, nk, ke + (size_t)k0 * H * dk,
                                      ve + (size_t)k0 * H * dv, dq + oq,
                                      gk + (size_t)k0 * H * dk, gv + (size_t)k0 * H * dv, threads);
    }
    st = st == LA_OK ? e : st;
  }
  const size_t oq = (size_t)qa * H * dk, ov = (size_t)qa * H * dv;
  const size_t cq = (size_t)(qb - qa) * H * dk, cv = (size_t)(qb - qa) * H * dv;
  double e = st == LA_OK ? err64(out + ov, ref + ov, cv) : INFINITY;
  worst_fwd64 = worse(worst_fwd64, e);
  check(e <= 1e-12, "masked forward f64 %s: rel err %.3g", what, e);
  /* backward: dq of the rows, dk and dv of every key (zero where no query reads) */
  double eq = st == LA_OK ? err64(dq + oq, rq + oq, cq) : INFINITY;
  double ek = st == LA_OK ? err64(gk, rk, nqk) : INFINITY, ev = st == LA_OK ? err64(gv, rv, nvv) : INFINITY;
  worst_bwd = worse(worse(worse(worst_bwd, eq), ek), ev);
  check(eq <= 1e-12, "backward dq %s: rel err %.3g", what, eq);
  check(ek <= 1e-12, "backward dk %s: rel err %.3g", what, ek);
  check(ev <= 1e-12, "backward dv %s: rel err %.3g", what, ev);
  /* the same thread count gives the same bytes */
  if (st == LA_OK && threads > 1) {
    double *dq2 = calloc(nqk, 8), *gk2 = calloc(nqk, 8), *gv2 = calloc(nvv, 8);
    for (int pi = 0; pi < 2; pi++) {
      const int64_t q0 = part[pi];
      const size_t pq = (size_t)q0 * H * dk, pv = (size_t)q0 * H * dv;
      for (int b = 0; b < 5; b++) {
        const int64_t k0 = cut[bord[b]], nk = cut[bord[b] + 1] - k0;
        la_softmax_backward_partial(&S[pi], D + (size_t)q0 * H, dk, scale, &lm, q0, q + pq, g + pv,
                                    k0, nk, ke + (size_t)k0 * H * dk, ve + (size_t)k0 * H * dv,
                                    dq2 + pq, gk2 + (size_t)k0 * H * dk,
                                    gv2 + (size_t)k0 * H * dv, threads);
      }
    }
    const int same = !memcmp(dq, dq2, 8 * nqk) && !memcmp(gk, gk2, 8 * nqk) &&
                     !memcmp(gv, gv2, 8 * nvv);
    check(same, "backward %s: a second run with the same thread count gave other bytes (%g)",
          what, 0.0);
    free(dq2); free(gk2); free(gv2);
  }
  for (int pi = 0; pi < 2; pi++) la_softmax_state_free(&S[pi]);
  /* float32 forward: the reference on the rounded inputs */
  if (f32) {
    float *qf = malloc(4 * nqk), *kf = malloc(4 * nqk), *vf = malloc(4 * nvv), *of = malloc(4 * nvv);
    for (size_t x = 0; x < nqk; x++) {
      qf[x] = (float)q[x]; kf[x] = (float)ke[x];
      q[x] = qf[x]; k[x] = (float)k[x];
    }
    for (size_t x = 0; x < nvv; x++) {
      vf[x] = (float)ve[x];
      v[x] = (float)v[x];
    }
    sn_forward_decay(n, H, dk, dv, scale, nm, lg, q, k, v, NULL, ref);
    la_softmax_state S32;
    la_status e32 = la_softmax_state_init(&S32, qb - qa, H, dv);
    for (int b = 0; b < 5 && e32 == LA_OK; b++) {
      const int64_t k0 = cut[ford[b]], nk = cut[ford[b] + 1] - k0;
      e32 = la_softmax_partial_mask(&S32, LA_F32, dk, scale, &lm, qa, qf + oq, k0, nk,
                                    kf + (size_t)k0 * H * dk, vf + (size_t)k0 * H * dv, threads);
    }
    if (e32 == LA_OK) e32 = la_softmax_finish(&S32, LA_F32, of);
    double e3 = e32 == LA_OK ? rel_err(LA_F32, of, ref + ov, cv) : INFINITY;
    if (isnan(e3)) e3 = INFINITY;
    worst_fwd32 = worse(worst_fwd32, e3);
    check(e3 <= 1e-5, "masked forward f32 %s: rel err %.3g", what, e3);
    la_softmax_state_free(&S32);
    free(qf); free(kf); free(vf); free(of);
  }
  free(q); free(k); free(v); free(g); free(P); free(ref); free(rq); free(rk); free(rv);
  free(ke); free(ve); free(out); free(D); free(dq); free(gk); free(gv);
}

static void mask_case(const char *name, int64_t n, int H, int dk, int dv, double a,
                      const sn_mask *nm, int64_t qa, int64_t qb, int threads, int f32) {
  mask_case_d(name, n, H, dk, dv, a, nm, qa, qb, threads, f32, NULL);
}

/* gamma = 1 (ln gamma = 0 for every head) gives the undecayed reference's bytes: forward
 * state and backward, against log_decay = NULL, with the same blocks and threads. */
static void decay_one_bitwise(const sn_mask *nm, int64_t n, int H, int dk, int dv, int threads) {
  const double scale = 1.0 / sqrt((double)dk), zero[4] = {0, 0, 0, 0};
  const size_t nqk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *q = malloc(8 * nqk), *k = malloc(8 * nqk), *v = malloc(8 * nvv), *g = malloc(8 * nvv);
  sn_fill(q, nqk, 1.5, 41);
  sn_fill(k, nqk, 1.5, 42);
  sn_fill(v, nvv, 1.0, 43);
  sn_fill(g, nvv, 1.0, 44);
  double *res[2][4];
  int same = 1;
  la_status st = LA_OK;
  for (int c = 0; c < 2; c++) {
    const la_softmax_mask lm = {nm->causal ? LA_CAUSAL : LA_BIDIRECTIONAL, nm->seg, nm->nseg,
                                nm->window, c ? zero : NULL};
    double *out = calloc(nvv, 8), *D = calloc((size_t)n * H, 8), *dq = calloc(nqk, 8),
           *gk = calloc(nqk, 8), *gv = calloc(nvv, 8);
    la_softmax_state S;
    la_status e = la_softmax_state_init(&S, n, H, dv);
    const int64_t cut[3] = {0, n / 3, n};
    for (int b = 1; b >= 0 && e == LA_OK; b--)
      e = la_softmax_partial_mask(&S, LA_F64, dk, scale, &lm, 0, q, cut[b], cut[b + 1] - cut[b],
                                  k + (size_t)cut[b] * H * dk, v + (size_t)cut[b] * H * dv, threads);
    if (e == LA_OK) e = la_softmax_finish(&S, LA_F64, out);
    if (e == LA_OK) e = la_softmax_delta(n, H, dv, out, g, D);
    for (int b = 0; b < 2 && e == LA_OK; b++)
      e = la_softmax_backward_partial(&S, D, dk, scale, &lm, 0, q, g, cut[b], cut[b + 1] - cut[b],
                                      k + (size_t)cut[b] * H * dk, v + (size_t)cut[b] * H * dv, dq,
                                      gk + (size_t)cut[b] * H * dk, gv + (size_t)cut[b] * H * dv,
                                      threads);
    st = st == LA_OK ? e : st;
    res[c][0] = out, res[c][1] = dq, res[c][2] = gk, res[c][3] = gv;
    la_softmax_state_free(&S);
    free(D);
  }
  same = st == LA_OK && !memcmp(res[0][0], res[1][0], 8 * nvv) &&
         !memcmp(res[0][1], res[1][1], 8 * nqk) && !memcmp(res[0][2], res[1][2], 8 * nqk) &&
         !memcmp(res[0][3], res[1][3], 8 * nvv);
  check(same, "decay gamma = 1 (%s) gives the bytes of log_decay = NULL: out, dq, dk, dv%g",
        nm->causal ? "causal" : "bidirectional", 0.0);
  for (int c = 0; c < 2; c++)
    for (int t = 0; t < 4; t++) free(res[c][t]);
  free(q); free(k); free(v); free(g);
}

/* Decay (docs/design.md §8.1 "With decay"): every mask_case shape against sn_forward_decay. */
static void decay_cases(void) {
  /* gamma = 1 against the undecayed reference bitwise is decay_one_bitwise's */
  const double gam[][3] = {{0.5, 0.5, 0.5}, {0.5, 0.97, 1.0}, {0.999, 0.9, 0.5}};
  /* n = 320: two key tiles (256 + 64) and three query tiles of 128, at a tenth of n = 1000's
   * cost (the quadratic references dominate; under qemu-aarch64 n = 1000 ran past 300 s) */
  const int64_t seg[] = {0, 1, 2, 130, 131, 260, 261, 300, 319, 320};
  const int64_t nseg = sizeof seg / sizeof *seg;
  for (int gi = 0; gi < 3; gi++) {
    double lg[3];
    for (int h = 0; h < 3; h++) lg[h] = log(gam[gi][h]);
    for (int c = 0; c < 2; c++) {
      sn_mask m = {c, NULL, 0, 0};
      const char *mode = c ? "decay causal" : "decay bidirectional";
      mask_case_d(mode, 320, 3, 16, 12, 1.0, &m, 0, 320, 3, 1, lg);
      mask_case_d(mode, 277, 2, 8, 5, 2.0, &m, 130, 277, 2, 0, lg); /* rows from 130 */
      m.seg = seg, m.nseg = nseg;
      mask_case_d(c ? "decay causal segments" : "decay bidirectional segments", 320, 3, 16, 12,
                  1.0, &m, 0, 320, 2, 1, lg);
    }
    sn_mask w = {1, seg, nseg, 37};
    mask_case_d("decay segments + window 37", 320, 3, 16, 12, 1.0, &w, 0, 320, 3, 1, lg);
    w.seg = NULL, w.nseg = 0, w.window = 150;
    mask_case_d("decay window 150", 320, 2, 8, 8, 1.0, &w, 170, 320, 2, 0, lg);
  }
  sn_mask cm = {1, NULL, 0, 0}, bm = {0, NULL, 0, 0};
  decay_one_bitwise(&cm, 700, 2, 16, 8, 3);
  decay_one_bitwise(&bm, 700, 2, 16, 8, 3);
  /* sn_forward_decay's gradients (through sn_backward) against central differences */
  const int64_t fseg[] = {0, 3, 4, 7};
  const double lg[2] = {log(0.5), log(0.8)};
  sn_mask fm[3] = {{1, fseg, 4, 2}, {0, fseg, 4, 0}, {0, NULL, 0, 0}};
  for (int c = 0; c < 3; c++) {
    double q[42], k[42], v[28], g[28];
    sn_fill(q, 42, 1.0, 31);
    sn_fill(k, 42, 1.0, 32);
    sn_fill(v, 28, 1.0, 33);
    sn_fill(g, 28, 1.0, 34);
    const double e = dn_fd_check(7, 2, 3, 2, 0.7, &fm[c], lg, q, k, v, g);
    worst_fd = worse(worst_fd, e);
    check(e <= 1e-8, "decayed naive backward vs central differences, case %s: rel err %.3g",
          c == 0 ? "causal segments + window 2" : c == 1 ? "bidirectional segments" : "bidirectional", e);
  }
  /* refused: gamma > 1 (ln gamma > 0), NaN */
  {
    double x[8] = {0};
    const double up[1] = {0.1}, nan1[1] = {NAN};
    la_softmax_state S;
    la_softmax_state_init(&S, 2, 1, 1);
    const la_softmax_mask m1 = {LA_CAUSAL, NULL, 0, 0, up}, m2 = {LA_BIDIRECTIONAL, NULL, 0, 0, nan1};
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m1, 0, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "ln gamma > 0 refused", 0.0);
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m2, 0, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "ln gamma NaN refused", 0.0);
    check(la_softmax_backward_partial(&S, x, 2, 1.0, &m1, 0, x, x, 0, 2, x, x, x, x, x, 1) ==
              LA_ERR_ARG, "%s %g", "backward: ln gamma > 0 refused", 0.0);
    la_softmax_state_free(&S);
  }
}

static void mask_cases(void) {
  /* segments of length 1 (0, 1, 130, 999), one across the 128/256 tiles (300..600) */
  const int64_t seg[] = {0, 1, 2, 130, 131, 300, 600, 601, 900, 999, 1000};
  const int64_t nseg = sizeof seg / sizeof *seg;
  const int64_t seg777[] = {0, 100, 101, 400, 777}; /* n not a tile multiple */
  const int64_t half[] = {0, 600, 1000};
  for (int c = 0; c < 2; c++) {
    const char *mode = c ? "causal" : "bidirectional";
    sn_mask m = {c, seg, nseg, 0};
    char name[64];
    snprintf(name, sizeof name, "%s segments", mode);
    mask_case(name, 1000, 2, 16, 12, 1.0, &m, 0, 1000, 3, 1);
    mask_case(name, 1000, 1, 8, 5, 3.0, &m, 0, 1000, 1, 0);
    m.seg = seg777;
    m.nseg = 5;
    mask_case(name, 777, 3, 16, 16, 1.0, &m, 0, 777, 2, 1);
    m.seg = half;
    m.nseg = 3;
    mask_case(name, 1000, 2, 8, 8, 1.0, &m, 600, 1000, 2, 0); /* keys [0, 600) NaN */
    mask_case(name, 1000, 2, 8, 8, 1.0, &m, 0, 600, 2, 0);    /* keys [600, 1000) NaN */
  }
  const int64_t W[] = {1, 5, 300};
  for (int w = 0; w < 3; w++) {
    sn_mask m = {1, NULL, 0, W[w]};
    char name[64];
    snprintf(name, sizeof name, "window %lld", (long long)W[w]);
    mask_case(name, 1000, 2, 16, 12, 1.0, &m, 0, 1000, 3, 1);
    mask_case(name, 1000, 2, 8, 8, 3.0, &m, 700, 1000, 2, 0); /* keys below 700 - W + 1 NaN */
    m.seg = seg;
    m.nseg = nseg;
    snprintf(name, sizeof name, "segments + window %lld", (long long)W[w]);
    mask_case(name, 1000, 2, 16, 12, 1.0, &m, 0, 1000, 2, 1);
    mask_case(name, 1000, 1, 8, 8, 1.0, &m, 650, 1000, 3, 0);
  }
  sn_mask causal = {1, NULL, 0, 0}, bidir = {0, NULL, 0, 0};
  mask_case("causal", 1000, 2, 16, 12, 1.0, &causal, 0, 300, 3, 1); /* keys [300, 1000) NaN */
  mask_case("causal", 7, 1, 4, 3, 1.0, &causal, 0, 7, 2, 1);
  mask_case("bidirectional", 1000, 2, 16, 12, 1.0, &bidir, 0, 1000, 2, 1);
  mask_case("bidirectional", 1, 1, 4, 3, 1.0, &bidir, 0, 1, 2, 1);

  /* the naive backward against central differences (tiny: every entry of q, k, v) */
  const int64_t fseg[] = {0, 3, 4, 7};
  sn_mask fm[3] = {{1, fseg, 4, 2}, {0, fseg, 4, 0}, {1, NULL, 0, 0}};
  for (int c = 0; c < 3; c++) {
    const int64_t n = 7;
    const int H = 2, dk = 3, dv = 2;
    double q[42], k[42], v[28], g[28];
    sn_fill(q, 42, 1.0, 21);
    sn_fill(k, 42, 1.0, 22);
    sn_fill(v, 28, 1.0, 23);
    sn_fill(g, 28, 1.0, 24);
    const double e = sn_fd_check(n, H, dk, dv, 0.7, &fm[c], q, k, v, g);
    worst_fd = worse(worst_fd, e);
    check(e <= 1e-8, "naive backward vs central differences, case %s: rel err %.3g",
          c == 0 ? "causal segments + window 2" : c == 1 ? "bidirectional segments" : "causal", e);
  }

  /* masks refused */
  {
    double x[8] = {0};
    la_softmax_state S;
    la_softmax_state_init(&S, 2, 1, 1);
    const int64_t bad[] = {0, 2, 2, 4}, ok[] = {0, 2, 4};
    la_softmax_mask m1 = {LA_BIDIRECTIONAL, NULL, 0, 3, NULL}, m2 = {LA_CAUSAL, bad, 4, 0, NULL},
                    m3 = {LA_CAUSAL, ok, 3, 0, NULL}, m4 = {LA_CAUSAL, NULL, 0, -1, NULL};
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m1, 0, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "bidirectional window refused", 0.0);
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m2, 0, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "offsets that do not increase refused", 0.0);
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m3, 3, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "rows past the last offset refused", 0.0);
    check(la_softmax_partial_mask(&S, LA_F64, 2, 1.0, &m4, 0, x, 0, 2, x, x, 1) == LA_ERR_ARG,
          "%s %g", "negative window refused", 0.0);
    check(la_softmax_backward_partial(&S, x, 2, 1.0, &m1, 0, x, x, 0, 2, x, x, x, x, x, 1) ==
              LA_ERR_ARG, "%s %g", "backward: bidirectional window refused", 0.0);
    la_softmax_state_free(&S);
  }
}

int main(void) {
  const int64_t ns[] = {1, 7, 129, 1000};
  for (int d = 0; d < 2; d++)
    for (int md = 0; md < 2; md++)
      for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        la_dtype dt = d ? LA_F32 : LA_F64;
        la_mode mode = md ? LA_BIDIRECTIONAL : LA_CAUSAL;
        one_case(dt, mode, ns[i], 3, 16, 24, 1.0, 3);
        if (ns[i] == 1000) {
          one_case(dt, mode, ns[i], 1, 64, 64, 1.0, 1);
          one_case(dt, mode, ns[i], 2, 8, 5, 3.0, 2); /* larger scores: the max moves often */
        }
      }
  one_case(LA_F64, LA_CAUSAL, 777, 2, 16, 16, 1.0, 2);
  mask_cases();
  printf("masked forward: worst f64 %.3g (tol 1e-12), f32 %.3g (tol 1e-5); backward f64 %.3g "
         "(tol 1e-12); naive backward vs finite differences %.3g (tol 1e-8)\n",
         worst_fwd64, worst_fwd32, worst_bwd, worst_fd);
  worst_fwd64 = worst_fwd32 = worst_bwd = worst_fd = 0;
  decay_cases();
  printf("decayed: worst forward f64 %.3g (tol 1e-12), f32 %.3g (tol 1e-5); backward f64 %.3g "
         "(tol 1e-12); decayed naive backward vs finite differences %.3g (tol 1e-8)\n",
         worst_fwd64, worst_fwd32, worst_bwd, worst_fd);

  /* A causal query row that read no key: zeros and LA_ERR_DENOMINATOR. */
  {
    la_softmax_state S;
    double q[4] = {1, 2, 3, 4}, k[2] = {1, 1}, v[2] = {5, 6}, out[2] = {-1, -1};
    la_softmax_state_init(&S, 2, 1, 1);
    la_status st = la_softmax_partial(&S, LA_F64, 2, 1.0, LA_CAUSAL, 10, q, 11, 1, k, v, 1);
    st = st == LA_OK ? la_softmax_finish(&S, LA_F64, out) : st;
    check(st == LA_ERR_DENOMINATOR && out[0] == 0 && out[1] == 5, "%s: status %g", "empty causal row",
          (double)st);
    la_softmax_state_free(&S);
  }
  /* Bad arguments. */
  {
    double x[4] = {0};
    check(la_softmax_attention(LA_F64, 2, 1, 0, 1, 1.0, LA_CAUSAL, x, x, x, x, 1) == LA_ERR_ARG,
          "%s %g", "dk = 0 refused", 0.0);
    check(la_softmax_attention(LA_I64, 2, 1, 1, 1, 1.0, LA_CAUSAL, x, x, x, x, 1) == LA_ERR_ARG,
          "%s %g", "i64 refused", 0.0);
    check(la_softmax_attention(LA_F64, 2, 1, 1, 1, NAN, LA_CAUSAL, x, x, x, x, 1) == LA_ERR_ARG,
          "%s %g", "NaN scale refused", 0.0);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
