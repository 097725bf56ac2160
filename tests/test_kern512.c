/* Unit tests of the AVX-512 kernels (core/simd/kern512.c) against plain float64 loops written here.
 * Bounds are the rigorous float32 ones: a length-K dot product in float32 (any order, FMA or
 * not) is within gamma_K sum_k |a_k b_k| of the exact value, gamma_K = K u / (1 - K u),
 * u = 2^-24. Skipped (exit 77) on a CPU without AVX-512F or with LINATTN_KERNELS=blas. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"
#include "../core/simd/kern512.h"
#include "../core/simd/simd_compose.h"
#include "../core/engine/denominator.h"

#include "check.h"
#include "check_gate_fold.h"

static unsigned long long rs = 88172645463325252ULL;
static float urand(void) { /* xorshift64, uniform in [-1, 1) */
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static int irand(int lo, int hi) { return lo + (int)((urand() + 1.0f) * 0.5f * (float)(hi - lo + 1)) % (hi - lo + 1); }
static double gamma_k(int k) {
  const double u = ldexp(1.0, -24);
  return (k + 2) * u / (1 - (k + 2) * u); /* +2: the accumulate into C and one rounding more */
}

/* C = acc*C0 + A B with A(i, k) = A[i*ars + k*acs]; tri as in kern512.h. */
static void test_gemm(void) {
  int worst_ratio_ok = 1;
  double worst = 0;
  for (int t = 0; t < 400; t++) {
    const int M = irand(1, 90), N = irand(1, 150), K = irand(1, 100), acc = t % 2;
    const int trans = (t / 2) % 2, tri = (t / 4) % 4;
    const int Kt = tri == 1 || tri == 3 ? M : K; /* tri = 1 (3): A is M x M lower (upper) */
    const int lda = (trans ? M : Kt) + irand(0, 5), ldb = N + irand(0, 5), ldc = N + irand(0, 5);
    const size_t asz = (size_t)lda * (trans ? Kt : M);
    float *A = malloc(sizeof(float) * asz), *B = malloc(sizeof(float) * (size_t)Kt * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    for (size_t i = 0; i < asz; i++) A[i] = urand();
    for (int i = 0; i < Kt * ldb; i++) B[i] = urand();
    for (int i = 0; i < M * ldc; i++) C0[i] = C[i] = urand();
    const ptrdiff_t ars = trans ? 1 : lda, acs = trans ? lda : 1;
    /* the triangle's zeros inside a row's 6-row tile are read; beyond the tile they must not
     * be (NaN there would show) */
    if (tri == 1)
      for (int i = 0; i < M; i++)
        for (int k = i + 1; k < Kt; k++) A[i * ars + k * acs] = k < (i / 6) * 6 + 6 ? 0 : NAN;
    if (tri == 3)
      for (int i = 0; i < M; i++)
        for (int k = 0; k < i; k++) A[i * ars + k * acs] = k >= (i / 6) * 6 ? 0 : NAN;
    la_k512_gemm(M, N, Kt, A, ars, acs, B, ldb, C, ldc, acc, tri);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        const int written = tri != 2 || j < (i / 6) * 6 + 6;
        double ref = acc ? C0[i * ldc + j] : 0, mag = fabs(ref);
        for (int k = 0; k < Kt; k++) {
          if ((tri == 1 && k > i) || (tri == 3 && k < i)) continue;
          const double p = (double)A[i * ars + k * acs] * B[k * ldb + j];
          ref += p;
          mag += fabs(p);
        }
        if (!written) {
          if (C[i * ldc + j] != C0[i * ldc + j]) worst_ratio_ok = 0;
          continue;
        }
        const double e = fabs(C[i * ldc + j] - ref), bound = gamma_k(Kt) * mag;
        if (!(e <= bound)) worst_ratio_ok = 0; /* a NaN fails too */
        if (mag > 0 || isnan(e)) worst = worse(worst, e / mag);
      }
    /* columns past the row's written edge (tri = 2) or past N are untouched */
    for (int i = 0; i < M; i++)
      for (int j = N; j < ldc; j++)
        if (C[i * ldc + j] != C0[i * ldc + j]) worst_ratio_ok = 0;
    free(A), free(B), free(C), free(C0);
  }
  CHECK(worst_ratio_ok, "la_k512_gemm within gamma_K sum|a b| on 400 shapes (worst rel %.3g)", worst);
}

/* The causal chunk of docs/design.md §4.2 by its definition, in float64. */
static void test_causal_chunk(void) {
  const int lens[] = {1, 5, 6, 7, 13, 64}, rs_[] = {8, 64, 70}, dvs[] = {5, 16, 64, 80};
  int ok = 1, ncase = 0;
  for (int a = 0; a < 6; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 4; c++)
        for (int st = 0; st < 2; st++) {
          const int len = lens[a], r = rs_[b], dv = dvs[c], dv1 = dv + 1, C = 64, ldv = dv + 3;
          float *pq = malloc(sizeof(float) * len * r), *pk = malloc(sizeof(float) * len * r);
          float *V = malloc(sizeof(float) * len * ldv), *sf = malloc(sizeof(float) * r * dv1);
          float *o = malloc(sizeof(float) * len * dv1), *tmp = malloc(sizeof(float) * r * dv1);
          float *kT = malloc(sizeof(float) * r * C), *A = malloc(sizeof(float) * C * C);
          float *zf = malloc(sizeof(float) * r);
          for (int i = 0; i < len * r; i++) pq[i] = urand() + 1.0f, pk[i] = urand() + 1.0f;
          for (int i = 0; i < len * ldv; i++) V[i] = urand();
          for (int i = 0; i < r * dv1; i++) sf[i] = urand() + 1.0f;
          la_simd_causal_chunk(&la_simd_avx512, len, r, dv, pq, pk, V, ldv, st ? sf : NULL, o, tmp, kT, A, zf, C);
          for (int i = 0; i < len; i++)
            for (int j = 0; j <= dv; j++) {
              double ref = 0, mag = 0;
              for (int k = 0; k < r && st; k++) {
                double p = (double)pq[i * r + k] * sf[k * dv1 + j];
                ref += p, mag += fabs(p);
              }
              for (int l = 0; l <= i; l++) {
                double s = 0;
                for (int k = 0; k < r; k++) s += (double)pq[i * r + k] * pk[l * r + k];
                double p = s * (j < dv ? V[l * ldv + j] : 1.0);
                ref += p, mag += fabs(p);
              }
              if (fabs(o[i * dv1 + j] - ref) > gamma_k(2 * r + len) * mag) ok = 0;
            }
          for (int k = 0; k < r; k++)
            for (int j = 0; j <= dv; j++) {
              double ref = 0, mag = 0;
              for (int l = 0; l < len; l++) {
                double p = (double)pk[l * r + k] * (j < dv ? V[l * ldv + j] : 1.0);
                ref += p, mag += fabs(p);
              }
              if (fabs(tmp[k * dv1 + j] - ref) > gamma_k(len) * mag) ok = 0;
            }
          ncase++;
          free(pq), free(pk), free(V), free(sf), free(o), free(tmp), free(kT), free(A), free(zf);
        }
  CHECK(ok, "la_simd_causal_chunk (avx512) equals its definition on %d cases (len, r, dv, state)", ncase);
}

/* *ref += f sum_j x_j y_j and *mag += |f| sum_j |x_j y_j| in float64 (strides sx, sy). */
static void dot_mag(int n, const float *x, int sx, const float *y, int sy, double f,
                    double *ref, double *mag) {
  double t = 0, tm = 0;
  for (int j = 0; j < n; j++) {
    const double p = (double)x[j * sx] * y[j * sy];
    t += p, tm += fabs(p);
  }
  *ref += f * t, *mag += fabs(f) * tm;
}

/* The causal backward's piece products (simd_compose.c on the avx512 table, docs/design.md §4.4) by their
 * definitions, in float64, with ab = [a | b] of signed values: each entry within gamma_K of
 * the sum of its products' magnitudes, K the longest chain that feeds it. */
static void test_bwd_pieces(void) {
  const int lens[] = {1, 5, 6, 7, 13, 48, 64}, rs_[] = {8, 64, 70}, dvs[] = {5, 16, 64};
  int okq = 1, okr = 1, ncase = 0;
  for (int a = 0; a < 7; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 3; c++)
        for (int st = 0; st < 3; st++) {
          /* st = 0: no state; 1: a state; 2: bidirectional (a state, no intra terms) */
          const int causal = st < 2;
          const int len = lens[a], r = rs_[b], dv = dvs[c], dv1 = dv + 1, C = 64, ldv = dv + 3;
          const int ldo = dv + 2, wmax = r > C ? r : C;
          float *pq = malloc(sizeof(float) * len * r), *pk = malloc(sizeof(float) * len * r);
          float *V = malloc(sizeof(float) * len * ldv), *vp = malloc(sizeof(float) * len * dv1);
          float *ab = malloc(sizeof(float) * len * dv1), *sf = malloc(sizeof(float) * r * dv1);
          float *dphi = malloc(sizeof(float) * len * r), *dvo = malloc(sizeof(float) * len * ldo);
          float *tmp = malloc(sizeof(float) * r * dv1), *A = malloc(sizeof(float) * C * C);
          float *kT = malloc(sizeof(float) * r * C), *tb = malloc(sizeof(float) * dv1 * wmax);
          for (int i = 0; i < len * r; i++) pq[i] = urand() + 1.0f, pk[i] = urand() + 1.0f;
          for (int i = 0; i < len * ldv; i++) V[i] = urand();
          for (int l = 0; l < len; l++) {
            for (int j = 0; j < dv; j++) vp[l * dv1 + j] = V[l * ldv + j];
            vp[l * dv1 + dv] = 1.0f;
          }
          for (int i = 0; i < len * dv1; i++) ab[i] = urand();
          for (int i = 0; i < r * dv1; i++) sf[i] = urand();
          const float *S = st ? sf : NULL;
          /* dq: dphi_i = sum_j ab_ij sf_kj + sum_{l <= i} (ab_i . [v_l; 1]) pk_l */
          la_simd_bwd_dq(&la_simd_avx512, len, r, dv, ab, S, pk, V, ldv, dphi, A, tb, C, causal);
          for (int i = 0; i < len; i++)
            for (int k = 0; k < r; k++) {
              double ref = 0, mag = 0;
              if (st) dot_mag(dv1, ab + i * dv1, 1, sf + k * dv1, 1, 1.0, &ref, &mag);
              for (int l = 0; l <= i && causal; l++)
                dot_mag(dv1, ab + i * dv1, 1, vp + l * dv1, 1, pk[l * r + k], &ref, &mag);
              if (!(fabs(dphi[i * r + k] - ref) <= gamma_k(2 * dv1 + len) * mag)) okq = 0;
            }
          /* reverse: dphik_l = sum_j vp_lj sf_kj + sum_{i >= l} (ab_i . vp_l) pq_i;
           * dv_l = sum_k pk_lk sf_kj + sum_{i >= l} (pq_i . pk_l) a_i; tmp = pq^T ab */
          for (int i = 0; i < r * dv1; i++) tmp[i] = NAN; /* bidirectional: left alone */
          la_simd_bwd_reverse(&la_simd_avx512, len, r, dv, ab, pq, pk, vp, S, dphi, dvo, ldo, tmp, A, kT, tb, C,
                              causal);
          for (int l = 0; l < len; l++) {
            for (int k = 0; k < r; k++) {
              double ref = 0, mag = 0;
              if (st) dot_mag(dv1, vp + l * dv1, 1, sf + k * dv1, 1, 1.0, &ref, &mag);
              for (int i = l; i < len && causal; i++)
                dot_mag(dv1, ab + i * dv1, 1, vp + l * dv1, 1, pq[i * r + k], &ref, &mag);
              if (!(fabs(dphi[l * r + k] - ref) <= gamma_k(2 * dv1 + len) * mag)) okr = 0;
            }
            for (int j = 0; j < dv; j++) {
              double ref = 0, mag = 0;
              for (int k = 0; k < r && st; k++) {
                double p = (double)pk[l * r + k] * sf[k * dv1 + j];
                ref += p, mag += fabs(p);
              }
              for (int i = l; i < len && causal; i++) {
                double t = 0;
                for (int k = 0; k < r; k++) t += (double)pq[i * r + k] * pk[l * r + k];
                ref += t * ab[i * dv1 + j], mag += fabs(t * ab[i * dv1 + j]);
              }
              if (!(fabs(dvo[l * ldo + j] - ref) <= gamma_k(2 * r + len) * mag)) okr = 0;
            }
          }
          for (int k = 0; k < r; k++)
            for (int j = 0; j <= dv; j++) {
              if (!causal) { /* untouched; la_simd_bwd_query_sum gives it */
                if (!isnan(tmp[k * dv1 + j])) okr = 0;
                continue;
              }
              double ref = 0, mag = 0;
              dot_mag(len, pq + k, r, ab + j, dv1, 1.0, &ref, &mag);
              if (!(fabs(tmp[k * dv1 + j] - ref) <= gamma_k(len) * mag)) okr = 0;
            }
          if (!causal) { /* the replay's query sums */
            la_simd_bwd_query_sum(&la_simd_avx512, len, r, dv, pq, ab, tmp);
            for (int k = 0; k < r; k++)
              for (int j = 0; j <= dv; j++) {
                double ref = 0, mag = 0;
                dot_mag(len, pq + k, r, ab + j, dv1, 1.0, &ref, &mag);
                if (!(fabs(tmp[k * dv1 + j] - ref) <= gamma_k(len) * mag)) okr = 0;
              }
          }
          ncase++;
          free(pq), free(pk), free(V), free(vp), free(ab), free(sf), free(dphi), free(dvo);
          free(tmp), free(A), free(kT), free(tb);
        }
  CHECK(okq, "la_simd_bwd_dq (avx512) equals its definition on %d cases (len, r, dv, state, mode)", ncase);
  CHECK(okr, "la_simd_bwd_reverse and _query_sum (avx512) equal their definitions on %d cases (len, r, "
             "dv, state, mode)", ncase);
}

static double ulps(float y, float r) {
  if (y == r) return 0;
  return fabs((double)y - r) / (double)(nextafterf(fabsf(r), INFINITY) - fabsf(r));
}

static void test_maps(void) {
  /* elu1: x + 1 above 0, e^x below, within 2 ulp of expf; dk = 13 has a masked tail */
  const int n = 20000, dk = 13;
  float *x = malloc(sizeof(float) * n * dk), *phi = malloc(sizeof(float) * n * 16);
  for (int i = 0; i < n * dk; i++) x[i] = -104.0f + 114.0f * (float)i / (float)(n * dk);
  la_simd_pf pf = {{(const char *)x, NULL}, {dk * 4, 0}, {dk * 4, 0}, n};
  la_k512_elu1(n, dk, x, dk, phi, 16, &pf);
  double worst = 0;
  int exact_pos = 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < dk; j++) {
      const float xv = x[i * dk + j], y = phi[i * 16 + j];
      if (xv > 0) exact_pos &= y == xv + 1.0f;
      else worst = worse(worst, ulps(y, expf(xv)));
    }
  CHECK(worst <= 2.0 && exact_pos, "elu1: e^x within 2 ulp (worst %.2f), x + 1 exact above 0", worst);
  free(x), free(phi);

  /* favor+ after the projection: phi = m^-1/2 e^{u - max u}, a = max u - s |x|^2 / 2;
   * m = 150 also takes the max's four-register loop (m >= 64) */
  for (int mi = 0; mi < 2; mi++) {
    const int m = mi ? 150 : 37, d = 21, rows = 50, r = m + 3;
    const double s = 0.3;
    float *u = malloc(sizeof(float) * rows * r), *xx = malloc(sizeof(float) * rows * d);
    float *u0 = malloc(sizeof(float) * rows * r);
    double *av = malloc(sizeof(double) * rows);
    for (int i = 0; i < rows * r; i++) u0[i] = u[i] = 30.0f * urand();
    for (int i = 0; i < rows * d; i++) xx[i] = 3.0f * urand();
    la_k512_favor_post(rows, m, d, xx, d, u, r, s, av, 0, NULL);
    double wp = 0, wa = 0;
    for (int i = 0; i < rows; i++) {
      float umax = -INFINITY;
      double n2 = 0;
      for (int j = 0; j < m; j++) umax = fmaxf(umax, u0[i * r + j]);
      for (int j = 0; j < d; j++) n2 += (double)xx[i * d + j] * xx[i * d + j];
      for (int j = 0; j < m; j++) {
        const double ref = exp((double)(u0[i * r + j] - umax)) / sqrt((double)m);
        if (ref > FLT_MIN) wp = worse(wp, fabs(u[i * r + j] - ref) / ref);
      }
      const double aref = umax - 0.5 * s * n2;
      wa = worse(wa, fabs(av[i] - aref) / fmax(1.0, fabs(aref)));
    }
    CHECK(wp < 4 * FLT_EPSILON, "favor+ features within 4 eps of the float64 formula (m %d, worst %.3g)", m, wp);
    CHECK(wa < 1e-12, "favor+ log-scale a from a float64 norm (m %d, worst %.3g)", m, wa);
    /* favor-hyp: (2m)^-1/2 [e^{u - max|u|}, e^{-u - max|u|}], a = max|u| - s |x|^2 / 2 */
    float *uh = malloc(sizeof(float) * rows * 2 * m);
    for (int i = 0; i < rows; i++)
      for (int j = 0; j < m; j++) uh[i * 2 * m + j] = u0[i * r + j];
    la_k512_favor_post(rows, m, d, xx, d, uh, 2 * m, s, av, 1, NULL);
    wp = 0, wa = 0;
    for (int i = 0; i < rows; i++) {
      float umax = 0;
      double n2 = 0;
      for (int j = 0; j < m; j++) umax = fmaxf(umax, fabsf(u0[i * r + j]));
      for (int j = 0; j < d; j++) n2 += (double)xx[i * d + j] * xx[i * d + j];
      for (int j = 0; j < 2 * m; j++) {
        const float uj = j < m ? u0[i * r + j] : -u0[i * r + j - m];
        const double ref = exp((double)(uj - umax)) / sqrt(2.0 * m);
        if (ref > FLT_MIN) wp = worse(wp, fabs(uh[i * 2 * m + j] - ref) / ref);
      }
      wa = worse(wa, fabs(av[i] - (umax - 0.5 * s * n2)) / fmax(1.0, fabs(umax - 0.5 * s * n2)));
    }
    CHECK(wp < 4 * FLT_EPSILON && wa < 1e-12, "favor-hyp features (m %d, worst %.3g) and a (%.3g)", m, wp, wa);
    free(uh);
    free(u), free(u0), free(xx), free(av);
  }
}

/* taylor2 (la_k512_taylor2): the generic form's roundings, so the same bits as a scalar float
 * loop of the formula (docs/design.md §2); dk = 1, 5, 16, 17, 40, 64 cover the masked tails
 * of x~ and of every triangle row; the row stride ld > dk. */
static void test_taylor2(void) {
  const int dks[] = {1, 5, 16, 17, 40, 64}, n = 7;
  const float rs = 0.37f, c = (float)sqrt(0.5);
  for (int di = 0; di < 6; di++) {
    const int dk = dks[di], ld = dk + 3, r = 1 + dk + dk * (dk + 1) / 2;
    float *x = malloc(sizeof(float) * n * ld), *phi = malloc(sizeof(float) * n * r);
    float *want = malloc(sizeof(float) * r);
    for (int i = 0; i < n * ld; i++) x[i] = 5.0f * urand();
    la_k512_taylor2(n, dk, x, ld, phi, r, rs);
    int same = 1;
    double rel = 0;
    for (int i = 0; i < n; i++) {
      const float *xi = x + i * ld;
      int o = 0;
      want[o++] = 1.0f;
      for (int j = 0; j < dk; j++) want[o++] = rs * xi[j];
      for (int j = 0; j < dk; j++) {
        const float xj = rs * xi[j];
        want[o++] = xj * (c * xj);
        for (int l = j + 1; l < dk; l++) want[o++] = xj * (rs * xi[l]);
      }
      for (int l = 0; l < r; l++) same &= memcmp(&want[l], &phi[i * r + l], sizeof(float)) == 0;
      o = 1 + dk; /* and within 3 roundings of the float64 formula */
      for (int j = 0; j < dk; j++)
        for (int l = j; l < dk; l++, o++) {
          const double e = (double)rs * rs * xi[j] * xi[l] / (l == j ? sqrt(2.0) : 1.0);
          if (e != 0) rel = worse(rel, fabs(phi[i * r + o] - e) / fabs(e));
        }
    }
    CHECK(same && rel <= 3 * FLT_EPSILON, "taylor2 dk %d: the scalar loop's bits (%d), within "
          "3 eps of float64 (worst %.3g)", dk, same, rel);
    free(x), free(phi), free(want);
  }
}

static double ulps64(double y, double r) {
  if (y == r) return 0;
  return fabs(y - r) / (nextafter(fabs(r), INFINITY) - fabs(r));
}

/* The float64 favor post (la_k512_favor_post_f64): its exp within 2 ulp of libm's over
 * [-708, 0] (m = 4, so the scale 1/2 is exact), 0 below -708.4, NaN kept; favor-hyp's rows. */
static void test_maps_f64(void) {
  const int m = 4, d = 5, rows = 100000;
  double *u = malloc(sizeof(double) * rows * m), *x = malloc(sizeof(double) * rows * d);
  double *arg = malloc(sizeof(double) * rows * m), *av = malloc(sizeof(double) * rows);
  for (int i = 0; i < rows; i++) {
    arg[i * m] = 0.0; /* the row maximum */
    for (int j = 1; j < m; j++) arg[i * m + j] = -708.0 * (double)(i * (m - 1) + j - 1) / (rows * (m - 1));
    for (int j = 0; j < d; j++) x[i * d + j] = urand();
  }
  arg[7 * m + 1] = -708.5, arg[7 * m + 2] = -1000.0, arg[9 * m + 3] = NAN;
  memcpy(u, arg, sizeof(double) * rows * m);
  la_k512_favor_post_f64(rows, m, d, x, d, u, m, 0.7, av, 0, NULL);
  double worst = 0, wa = 0;
  int under_ok = u[7 * m + 1] == 0.0 && u[7 * m + 2] == 0.0, nan_ok = isnan(u[9 * m + 3]);
  for (int i = 0; i < rows; i++) {
    double n2 = 0;
    for (int j = 0; j < d; j++) n2 += x[i * d + j] * x[i * d + j];
    wa = worse(wa, fabs(av[i] - (0.0 - 0.35 * n2)) / fmax(1.0, 0.35 * n2));
    if (i == 7 || i == 9) continue;
    for (int j = 0; j < m; j++) {
      const double ref = 0.5 * exp(arg[i * m + j]);
      if (ref >= DBL_MIN) worst = worse(worst, ulps64(u[i * m + j], ref));
    }
  }
  CHECK(worst <= 2.0 && under_ok && nan_ok && wa < 1e-15,
        "favor+ f64: e^x within 2 ulp of libm on [-708, 0] (worst %.2f), 0 below -708.4, NaN "
        "kept, a exact (%.3g)", worst, wa);
  /* favor-hyp: (2m)^-1/2 [e^{u - max|u|}, e^{-u - max|u|}] against libm */
  const int mh = 37, rh = 50;
  double *uh = malloc(sizeof(double) * rh * 2 * mh), *u0 = malloc(sizeof(double) * rh * mh);
  for (int i = 0; i < rh; i++)
    for (int j = 0; j < mh; j++) u0[i * mh + j] = uh[i * 2 * mh + j] = 30.0 * urand();
  la_k512_favor_post_f64(rh, mh, d, x, d, uh, 2 * mh, 0.7, av, 1, NULL);
  double wp = 0;
  for (int i = 0; i < rh; i++) {
    double umax = 0;
    for (int j = 0; j < mh; j++) umax = fmax(umax, fabs(u0[i * mh + j]));
    for (int j = 0; j < 2 * mh; j++) {
      const double uj = j < mh ? u0[i * mh + j] : -u0[i * mh + j - mh];
      const double ref = exp(uj - umax) / sqrt(2.0 * mh);
      wp = worse(wp, fabs(uh[i * 2 * mh + j] - ref) / ref);
    }
  }
  CHECK(wp < 4 * DBL_EPSILON, "favor-hyp f64 features within 4 eps of libm (worst %.3g)", wp);
  free(u), free(x), free(arg), free(av), free(uh), free(u0);
}

/* The float64 elu1 (la_k512_elu1_f64): e^x within 2 ulp of libm's exp for x <= 0 (down to
 * -720, past the underflow to 0), x + 1 exact above 0, NaN kept; dk = 13 has a masked tail
 * and the row stride 16 a gap that must stay untouched. */
static void test_elu1_f64(void) {
  const int n = 20000, dk = 13, r = 16;
  double *x = malloc(sizeof(double) * n * dk), *phi = malloc(sizeof(double) * n * r);
  for (int i = 0; i < n * dk; i++) x[i] = -720.0 + 730.0 * (double)i / (double)(n * dk);
  for (int i = 0; i < n * r; i++) phi[i] = -1.0;
  x[5] = NAN;
  la_k512_elu1_f64(n, dk, x, dk, phi, r, NULL);
  double worst = 0;
  int exact_pos = 1, gap_ok = 1, nan_ok = isnan(phi[5]);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < dk; j++) {
      const double xv = x[i * dk + j], y = phi[i * r + j];
      if (isnan(xv)) continue;
      if (xv > 0) exact_pos &= y == xv + 1.0;
      else worst = worse(worst, ulps64(y, xv < -708.3964185322641 ? 0.0 : exp(xv)));
    }
    for (int j = dk; j < r; j++) gap_ok &= phi[i * r + j] == -1.0;
  }
  CHECK(worst <= 2.0 && exact_pos && gap_ok && nan_ok,
        "elu1 f64: e^x within 2 ulp (worst %.2f), x + 1 exact %d, gap kept %d, NaN kept %d", worst,
        exact_pos, gap_ok, nan_ok);
  free(x), free(phi);
}

/* la_k512_exp_f64 (the per-feature gates' factors): lengths 1..17 and 1001 (masked tails),
 * within 2 ulp of libm's exp as elu1's, 0 below -708.396..., nothing written past n. */
static void test_exp_f64(void) {
  double worst = 0;
  int under_ok = 1, tail_ok = 1;
  for (int n = 1; n <= 1001; n = n < 17 ? n + 1 : 1001) {
    double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * (n + 1));
    for (int i = 0; i < n; i++) x[i] = -720.0 * (double)((i * 7919) % (n + 3)) / (double)(n + 2);
    y[n] = -1.0;
    la_k512_exp_f64((size_t)n, x, y);
    for (int i = 0; i < n; i++) {
      if (x[i] < -708.3964185322641) under_ok &= y[i] == 0.0;
      else worst = worse(worst, ulps64(y[i], exp(x[i])));
    }
    tail_ok &= y[n] == -1.0;
    free(x), free(y);
    if (n == 1001) break;
  }
  CHECK(worst <= 2.0 && under_ok && tail_ok, "exp_f64 array: within 2 ulp of exp (worst %.2f), 0 "
        "below -708.396 %d, nothing written past n %d", worst, under_ok, tail_ok);
}

static void test_transpose(void) {
  int ok = 1;
  for (int t = 0; t < 60; t++) {
    const int rows = irand(1, 70), cols = irand(1, 70), lds = cols + irand(0, 3), ldd = rows + irand(0, 3);
    float *s = malloc(sizeof(float) * rows * lds), *d = malloc(sizeof(float) * cols * ldd);
    for (int i = 0; i < rows * lds; i++) s[i] = urand();
    la_k512_transpose(rows, cols, s, lds, d, ldd);
    for (int i = 0; i < rows; i++)
      for (int j = 0; j < cols; j++) ok &= d[j * ldd + i] == s[i * lds + j];
    free(s), free(d);
  }
  CHECK(ok, "la_k512_transpose on 60 shapes up to 70 x 70");
}

static void test_moves(void) {
  enum { n = 1003 };
  static float f[n], y[n];
  static double d[n], d0[n];
  for (int i = 0; i < n; i++) f[i] = urand(), d0[i] = d[i] = urand() * 1e3;
  la_k512_add_to_f64(n, d, f);
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= d[i] == d0[i] + (double)f[i];
  CHECK(ok, "add_to_f64 is the plain float64 sum");
  la_k512_to_f32(n, d, y);
  ok = 1;
  for (int i = 0; i < n; i++) ok &= y[i] == (float)d[i];
  CHECK(ok, "to_f32 rounds like a cast");
  /* add_round: the add and the rounded copy, with and without a base, in one pass */
  static double d1[n], base[n];
  static float g[n];
  for (int i = 0; i < n; i++) d1[i] = d0[i], base[i] = urand() * 1e5;
  for (int withbase = 0; withbase < 2; withbase++) {
    ok = 1;
    for (int i = 0; i < n; i++) d[i] = d1[i];
    la_k512_add_round(n, d, f, withbase ? base : NULL, g);
    for (int i = 0; i < n; i++)
      ok &= d[i] == d1[i] + (double)f[i] &&
            g[i] == (float)(withbase ? base[i] + d[i] : d[i]);
    CHECK(ok, "add_round (base %d) is add_to_f64 then the rounded (base +) copy", withbase);
  }
  la_k512_scale_row(n, f, 1.0 / 3.0, y);
  ok = 1;
  for (int i = 0; i < n; i++) ok &= y[i] == (float)((double)f[i] * (1.0 / 3.0));
  CHECK(ok, "scale_row multiplies in float64 and rounds once");
  double ref = 0, mag = 0;
  for (int i = 0; i < n; i++) ref += (double)f[i] * y[i], mag += fabs((double)f[i] * y[i]);
  const double dot = la_k512_dot_f64(n, f, y);
  CHECK(fabs(dot - ref) <= 2 * n * DBL_EPSILON * mag, "dot_f64 sums float64 products (err %.3g)",
        fabs(dot - ref) / mag);
}

/* la_k512_finalize_plain against its definition: y = (float)(num * (1 / den)) in float64,
 * bins floor(16 log2 den) from long double log2 (a den within 1e-12 of a bin edge may land
 * on either side), the extremes; and it writes nothing when any row is outside the case. */
static void test_finalize_plain(void) {
  const double *t16 = den_bin16_t; /* the table the engine passes (denominator.h) */
  static float o[64 * 66], y[64 * 80] __attribute__((aligned(64)));
  double lsc[64], mn, mx;
  int32_t bin[64];
  int ok = 1, refused_ok = 1, ncase = 0, nrow = 0;
  const int dvs[] = {1, 7, 15, 16, 64, 65};
  for (int c = 0; c < 300; c++) {
    const int dv = dvs[c % 6], len = 1 + irand(0, 63), dv1 = dv + 1;
    /* dv 16 and 64 with ldy a multiple of 16 take the streaming stores */
    const int ldy = dv % 16 == 0 && c % 12 < 6 ? dv + 16 : dv + 3;
    for (int i = 0; i < len; i++) {
      for (int j = 0; j < dv; j++) o[i * dv1 + j] = urand() * 100.0f;
      /* den over the whole float range, subnormals included, and exact powers of two */
      float den = ldexpf(1.0f + 0.5f * (urand() + 1.0f), irand(-149, 126));
      if (irand(0, 9) == 0) den = ldexpf(1.0f, irand(-149, 127));
      o[i * dv1 + dv] = den;
      lsc[i] = 0.0;
    }
    for (int i = 0; i < 64 * 80; i++) y[i] = -7.0f;
    if (!la_k512_finalize_plain(len, dv, o, lsc, y, ldy, t16, bin, &mn, &mx)) {
      ok = 0;
      continue;
    }
    ncase++;
    double rmn = INFINITY, rmx = -INFINITY;
    for (int i = 0; i < len; i++, nrow++) {
      const double den = (double)o[i * dv1 + dv];
      rmn = den < rmn ? den : rmn;
      rmx = den > rmx ? den : rmx;
      const long double l = 16.0L * log2l((long double)den);
      const long double fl = floorl(l);
      if (bin[i] != (long)fl && !(fabsl(l - roundl(l)) < 1e-12L && labs(bin[i] - (long)fl) == 1))
        ok = 0;
      for (int j = 0; j < dv; j++)
        ok &= y[i * ldy + j] == (float)((double)o[i * dv1 + j] * (1.0 / den));
      for (int j = dv; j < ldy && i + 1 < len; j++) ok &= y[i * ldy + j] == -7.0f;
    }
    ok &= mn == rmn && mx == rmx;
    /* one row outside the case: refused, nothing written */
    const int bad = irand(0, len - 1), kind = irand(0, 5);
    const float badden[] = {0.0f, -1.0f, INFINITY, NAN, 1.0f, 2.0f};
    o[bad * dv1 + dv] = badden[kind];
    if (kind >= 4) lsc[bad] = kind == 4 ? 0.5 : NAN;
    for (int i = 0; i < 64 * 80; i++) y[i] = -7.0f;
    const int r = la_k512_finalize_plain(len, dv, o, lsc, y, ldy, t16, bin, &mn, &mx);
    int untouched = 1;
    for (int i = 0; i < 64 * 80; i++) untouched &= y[i] == -7.0f;
    refused_ok &= r == 0 && untouched;
  }
  CHECK(ok && ncase == 300, "finalize_plain: scaled rows, bins and extremes on %d cases (%d rows)",
        ncase, nrow);
  CHECK(refused_ok, "finalize_plain refuses a zero, negative, infinite or NaN den, or a scaled row");
}

/* la_k512_finalize_plain_f64 against its definition, dens over the whole double range. */
static void test_finalize_plain_f64(void) {
  const double *t16 = den_bin16_t; /* the table the engine passes (denominator.h) */
  static double o[64 * 66], y[64 * 80] __attribute__((aligned(64)));
  double lsc[64], mn, mx;
  int32_t bin[64];
  int ok = 1, refused_ok = 1, ncase = 0;
  const int dvs[] = {1, 7, 8, 16, 64, 65};
  for (int c = 0; c < 300; c++) {
    const int dv = dvs[c % 6], len = 1 + irand(0, 63), dv1 = dv + 1;
    const int ldy = dv % 8 == 0 && c % 12 < 6 ? dv + 8 : dv + 3; /* streamed or not */
    for (int i = 0; i < len; i++) {
      for (int j = 0; j < dv; j++) o[i * dv1 + j] = urand() * 100.0;
      o[i * dv1 + dv] = ldexp(1.0 + 0.5 * (urand() + 1.0), irand(-1022, 1022));
      if (irand(0, 9) == 0) o[i * dv1 + dv] = ldexp(1.0, irand(-1022, 1023));
      lsc[i] = 0.0;
    }
    for (int i = 0; i < 64 * 80; i++) y[i] = -7.0;
    if (!la_k512_finalize_plain_f64(len, dv, o, lsc, y, ldy, t16, bin, &mn, &mx)) {
      ok = 0;
      continue;
    }
    ncase++;
    double rmn = INFINITY, rmx = -INFINITY;
    for (int i = 0; i < len; i++) {
      const double den = o[i * dv1 + dv];
      rmn = den < rmn ? den : rmn;
      rmx = den > rmx ? den : rmx;
      const long double l = 16.0L * log2l((long double)den), fl = floorl(l);
      if (bin[i] != (long)fl && !(fabsl(l - roundl(l)) < 1e-12L && labs(bin[i] - (long)fl) == 1))
        ok = 0;
      for (int j = 0; j < dv; j++) ok &= y[i * ldy + j] == o[i * dv1 + j] * (1.0 / den);
      for (int j = dv; j < ldy && i + 1 < len; j++) ok &= y[i * ldy + j] == -7.0;
    }
    ok &= mn == rmn && mx == rmx;
    const int bad = irand(0, len - 1), kind = irand(0, 5);
    const double badden[] = {0.0, -1.0, INFINITY, NAN, 0x1p-1030, 2.0};
    o[bad * dv1 + dv] = badden[kind];
    if (kind == 5) lsc[bad] = -0.25;
    for (int i = 0; i < 64 * 80; i++) y[i] = -7.0;
    const int r = la_k512_finalize_plain_f64(len, dv, o, lsc, y, ldy, t16, bin, &mn, &mx);
    int untouched = 1;
    for (int i = 0; i < 64 * 80; i++) untouched &= y[i] == -7.0;
    refused_ok &= r == 0 && untouched;
  }
  CHECK(ok && ncase == 300, "finalize_plain_f64: scaled rows, bins and extremes on %d cases", ncase);
  CHECK(refused_ok, "finalize_plain_f64 refuses a zero, negative, infinite, NaN or subnormal den, "
                    "or a scaled row");
}

int main(void) {
  if (!la_k512_enabled()) {
    printf("AVX-512 kernels not in use on this machine (or LINATTN_KERNELS=blas): skipped\n");
    return 77;
  }
  test_gemm();
  test_causal_chunk();
  test_bwd_pieces();
  test_maps();
  test_taylor2();
  test_maps_f64();
  test_elu1_f64();
  test_exp_f64();
  check_gate_fold(la_k512_gate_fold, "la_k512_gate_fold");
  test_transpose();
  test_moves();
  test_finalize_plain();
  test_finalize_plain_f64();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
