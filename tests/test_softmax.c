/* Exact softmax baseline (core/softmax.c) against a naive float64 quadratic implementation
 * written here (no shared code): whole-sequence and key-block (partial) entries, causal and
 * bidirectional, f64 (tolerance 1e-12) and f32 (1e-5), sizes that are not multiples of the
 * blocks. Error = max |x - ref| / max |ref|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/baseline.h"

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

static double rel_err(la_dtype dt, const void *x, const double *ref, size_t cnt) {
  double num = 0, den = 0;
  for (size_t i = 0; i < cnt; i++) {
    double xi = dt == LA_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
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
