/* Unit tests of the AVX2 + FMA kernels (core/simd/kern256.c, and simd_compose.c on the avx2 table) against plain float64
 * loops written here (no engine code). Bounds are the rigorous float32 ones: a length-K chain
 * of float32 products and sums (any order, FMA or not) is within gamma_K sum_k |a_k b_k| of the
 * exact value, gamma_K = K u / (1 - K u), u = 2^-24; a product of products (the chunks'
 * tril(Phi_q Phi_k^T) V) adds the chain lengths, against the sum of the magnitudes of every
 * elementary product. Memory a kernel must not read (tri's far triangles, the padding of A, B
 * and V, the scratch it must write first) is NaN, and memory it must not write is checked
 * unchanged. Skipped (exit 77) where la_k256_available() is 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/simd/kern256.h"
#include "../core/simd/simd_compose.h"

#include "check.h"

static unsigned long long rs = 0x9E3779B97F4A7C15ULL;
static float urand(void) { /* xorshift64, uniform in [-1, 1) */
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static int irand(int lo, int hi) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return lo + (int)((rs >> 20) % (unsigned long long)(hi - lo + 1));
}
/* the float32 bound of a chain of k products and sums: +2 for the accumulate into C and one
 * rounding more, as tests/test_kern512.c */
static double gamma_k(int k) {
  const double u = ldexp(1.0, -24);
  return (k + 2) * u / (1 - (k + 2) * u);
}
static float *fbuf(size_t n, float fill) {
  float *p = malloc(sizeof(float) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) p[i] = fill;
  return p;
}
/* a value that is neither in any result nor NaN: "left alone" is checked bitwise */
#define SENT 1234.5f

/* One la_k256_gemm call against the reference. trans: A stored transposed (ars = 1). */
static int gemm_case(int M, int N, int K, int tri, int acc, int trans, double *worst) {
  const int pa = irand(0, 3), pb = irand(0, 9), pc = irand(0, 9);
  const int lda = (trans ? M : K) + pa, ldb = N + pb, ldc = N + pc;
  const ptrdiff_t ars = trans ? 1 : lda, acs = trans ? lda : 1;
  const size_t asz = (size_t)lda * (size_t)(trans ? K : M) + 1;
  float *A = fbuf(asz, NAN), *B = fbuf((size_t)(K + 1) * ldb, NAN);
  float *C = fbuf((size_t)(M + 1) * ldc, SENT), *C0 = fbuf((size_t)(M + 1) * ldc, SENT);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      const int t0 = i / 6 * 6, t1 = t0 + 6; /* the row's 6-row tile */
      float a = urand();
      if (tri == 1 && k > i) a = k < t1 ? 0.0f : NAN; /* zeros inside the tile, unread past it */
      if (tri == 3 && k < i) a = k >= t0 ? 0.0f : NAN;
      A[i * ars + k * acs] = a;
    }
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) B[(size_t)k * ldb + j] = urand();
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = C0[(size_t)i * ldc + j] = urand();
  la_k256_gemm(M, N, K, A, ars, acs, B, ldb, C, ldc, acc, tri);
  int ok = 1;
  for (int i = 0; i < M + 1; i++)
    for (int j = 0; j < ldc; j++) {
      const float c = C[(size_t)i * ldc + j], c0 = C0[(size_t)i * ldc + j];
      const int written = i < M && j < N && (tri != 2 || j < i / 6 * 6 + 6);
      if (!written) {
        if (memcmp(&c, &c0, sizeof c)) ok = 0;
        continue;
      }
      double ref = acc ? c0 : 0, mag = fabs(ref);
      for (int k = 0; k < K; k++) {
        if ((tri == 1 && k > i) || (tri == 3 && k < i)) continue;
        const double p = (double)A[i * ars + k * acs] * B[(size_t)k * ldb + j];
        ref += p, mag += fabs(p);
      }
      const double e = fabs(c - ref);
      if (!(e <= gamma_k(K) * mag)) ok = 0; /* a NaN fails too */
      if (mag > 0) *worst = worse(*worst, e / mag / ldexp(1.0, -24));
    }
  free(A), free(B), free(C), free(C0);
  return ok;
}

static void test_gemm(void) {
  /* the edges of the 6 x 16 tile, the 96-row block and the 256 K block */
  const int Ms[] = {1, 2, 5, 6, 7, 11, 12, 13, 17, 64, 65, 97, 103};
  const int Ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 24, 33, 64, 65};
  const int Ks[] = {1, 2, 6, 7, 16, 33, 64, 65};
  int ok = 1, n = 0;
  double worst = 0;
  for (int a = 0; a < 13; a++)
    for (int b = 0; b < 12; b++)
      for (int c = 0; c < 8; c++, n++) {
        const int tri = n % 4, acc = (n / 4) % 2, trans = (n / 8) % 2;
        /* tri 1 / 3: mostly square, as the chunks call them; otherwise K as listed */
        const int K = (tri == 1 || tri == 3) && c % 2 ? Ms[a] : Ks[c];
        ok &= gemm_case(Ms[a], Ns[b], K, tri, acc, trans, &worst);
      }
  CHECK(ok, "la_k256_gemm within gamma_K sum|a b| on a grid of %d shapes (M, N, K at the tile "
            "edges; every tri, acc, ars/acs; worst %.3g u)", n, worst);
  ok = 1, worst = 0;
  for (int t = 0; t < 400; t++)
    ok &= gemm_case(irand(1, 140), irand(1, 140), irand(1, 140), t % 4, (t / 4) % 2, (t / 8) % 2,
                    &worst);
  CHECK(ok, "la_k256_gemm on 400 random shapes up to 140 (worst %.3g u)", worst);
  ok = 1, worst = 0;
  const int big[][3] = {{200, 70, 600}, {97, 129, 257}, {6, 16, 1000}, {300, 17, 300},
                        {130, 128, 128}, {64, 64, 512}};
  for (int t = 0; t < 6; t++)
    for (int v = 0; v < 8; v++)
      ok &= gemm_case(big[t][0], big[t][1], big[t][2], v % 4, (v / 4) % 2, t % 2, &worst);
  CHECK(ok, "la_k256_gemm on long K (the 256 blocks) and tall M (the 96-row blocks): 48 cases "
            "(worst %.3g u)", worst);
  /* K = 0: C = acc ? C : 0; M or N = 0: nothing */
  float c[6] = {1, 2, 3, 4, 5, 6}, a = NAN, b = NAN;
  la_k256_gemm(2, 3, 0, &a, 1, 1, &b, 3, c, 3, 1, 0);
  int ok0 = c[0] == 1 && c[5] == 6;
  la_k256_gemm(2, 3, 0, &a, 1, 1, &b, 3, c, 3, 0, 0);
  for (int i = 0; i < 6; i++) ok0 &= c[i] == 0;
  c[0] = 7;
  la_k256_gemm(0, 3, 4, &a, 1, 1, &b, 3, c, 3, 0, 0);
  la_k256_gemm(2, 0, 4, &a, 1, 1, &b, 3, c, 3, 0, 0);
  ok0 &= c[0] == 7;
  CHECK(ok0, "la_k256_gemm with K = 0 (zero or keep C) and M or N = 0 (no access)");
}

/* The triangles change nothing but the work: on a triangular A, tri = 1 and tri = 3 give the
 * bits of tri = 0 (the skipped terms are exact zeros at the end or the start of each FMA
 * chain), and tri = 2 the bits of tri = 0 wherever it writes. So the chunk kernels' results do
 * not depend on the tiling. */
static void test_tri_bits(void) {
  int ok = 1, n = 0;
  for (int t = 0; t < 120; t++, n++) {
    const int M = irand(1, 100), N = irand(1, 100), acc = t % 2, trans = (t / 2) % 2;
    const int lda = M + irand(0, 3), ldc = N + irand(0, 3);
    const ptrdiff_t ars = trans ? 1 : lda, acs = trans ? lda : 1;
    float *L = fbuf((size_t)M * lda, 0), *U = fbuf((size_t)M * lda, 0), *B = fbuf((size_t)M * N, 0);
    float *C0 = fbuf((size_t)M * ldc, 0), *C1 = fbuf((size_t)M * ldc, 0), *C2 = fbuf((size_t)M * ldc, 0);
    for (int i = 0; i < M; i++)
      for (int k = 0; k < M; k++) {
        L[i * ars + k * acs] = k <= i ? urand() : 0.0f;
        U[i * ars + k * acs] = k >= i ? urand() : 0.0f;
      }
    for (int i = 0; i < M * N; i++) B[i] = urand();
    for (int i = 0; i < M * ldc; i++) C0[i] = urand();
    for (int pass = 0; pass < 3; pass++) {
      const float *A = pass == 1 ? U : L;
      const int tri = pass == 0 ? 1 : pass == 1 ? 3 : 2;
      memcpy(C1, C0, sizeof(float) * (size_t)M * ldc);
      memcpy(C2, C0, sizeof(float) * (size_t)M * ldc);
      la_k256_gemm(M, N, M, A, ars, acs, B, N, C1, ldc, acc, 0);
      la_k256_gemm(M, N, M, A, ars, acs, B, N, C2, ldc, acc, tri);
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
          if (tri != 2 || j < i / 6 * 6 + 6) ok &= C1[i * ldc + j] == C2[i * ldc + j];
    }
    free(L), free(U), free(B), free(C0), free(C1), free(C2);
  }
  CHECK(ok, "la_k256_gemm tri = 1, 2, 3 give tri = 0's values on triangular A (%d shapes)", n);
}

static void test_transpose(void) {
  const int sz[] = {1, 3, 7, 8, 9, 16, 17, 33, 64, 65, 70};
  int ok = 1, n = 0;
  for (int a = 0; a < 11; a++)
    for (int b = 0; b < 11; b++, n++) {
      const int rows = sz[a], cols = sz[b], lds = cols + irand(0, 3), ldd = rows + irand(0, 3);
      float *s = fbuf((size_t)rows * lds, NAN), *d = fbuf((size_t)(cols + 1) * ldd, SENT);
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) s[i * lds + j] = urand();
      la_k256_transpose(rows, cols, s, lds, d, ldd);
      for (int j = 0; j < cols + 1; j++)
        for (int i = 0; i < ldd; i++)
          ok &= j < cols && i < rows ? d[j * ldd + i] == s[i * lds + j] : d[j * ldd + i] == SENT;
      free(s), free(d);
    }
  CHECK(ok, "la_k256_transpose exact and in bounds on %d shapes up to 70 x 70", n);
  ok = 1;
  for (int len = 1; len <= 70; len++) {
    const int lda = len + 2;
    float *A = fbuf((size_t)len * lda, SENT);
    la_simd_zero_tile_upper(len, A, lda);
    for (int i = 0; i < len; i++)
      for (int j = 0; j < lda; j++)
        ok &= A[i * lda + j] == (j > i && j < len && j < i / 6 * 6 + 6 ? 0.0f : SENT);
    free(A);
  }
  CHECK(ok, "la_simd_zero_tile_upper zeroes exactly the upper part of each 6-row diagonal tile");
}

/* P[i][l] = phiq_i . phik_l and its magnitude |phiq_i| . |phik_l|, in float64 */
static void qk(int len, int r, const float *pq, const float *pk, double *P, double *Pm) {
  for (int i = 0; i < len; i++)
    for (int l = 0; l < len; l++) {
      double s = 0, m = 0;
      for (int k = 0; k < r; k++) {
        const double p = (double)pq[i * r + k] * pk[l * r + k];
        s += p, m += fabs(p);
      }
      P[i * len + l] = s, Pm[i * len + l] = m;
    }
}

/* tmp (r x (dv+1)) against [phik^T V | phik^T 1] */
static int check_summary(int len, int r, int dv, const float *pk, const float *V, int ldv,
                         const float *tmp) {
  int ok = 1;
  for (int k = 0; k < r; k++)
    for (int j = 0; j <= dv; j++) {
      double ref = 0, mag = 0;
      for (int l = 0; l < len; l++) {
        const double p = (double)pk[l * r + k] * (j < dv ? V[l * ldv + j] : 1.0);
        ref += p, mag += fabs(p);
      }
      if (!(fabs(tmp[k * (dv + 1) + j] - ref) <= gamma_k(len) * mag)) ok = 0;
    }
  return ok;
}

/* The causal chunk of docs/design.md §4.2 by its definition (kern512.h), the key summary and
 * the bidirectional rows, with signed features (the bound counts every product's magnitude). */
static void test_chunks(void) {
  const int lens[] = {1, 5, 6, 7, 8, 13, 33, 64}, rs_[] = {1, 7, 16, 33, 64, 65, 128};
  const int dvs[] = {1, 7, 16, 33, 64, 65, 128};
  int okc = 1, oks = 1, okq = 1, n = 0;
  for (int a = 0; a < 10; a++)
    for (int b = 0; b < 7; b++)
      for (int c = 0; c < 7; c++)
        for (int st = 0; st < 2; st++, n++) {
          /* a = 8, 9: a chunk of C = 128 (len 100, 128) */
          const int C = a < 8 ? 64 : 128, len = a < 8 ? lens[a] : (a == 8 ? 100 : 128);
          const int r = rs_[b], dv = dvs[c], dv1 = dv + 1, ldv = dv + irand(0, 5);
          float *pq = fbuf((size_t)len * r, 0), *pk = fbuf((size_t)len * r, 0);
          float *V = fbuf((size_t)len * ldv + 1, NAN), *sf = fbuf((size_t)r * dv1, 0);
          float *o = fbuf((size_t)(len + 1) * dv1, SENT), *tmp = fbuf((size_t)(r + 1) * dv1, SENT);
          float *kT = fbuf((size_t)r * C, NAN), *A = fbuf((size_t)C * C, NAN), *zf = fbuf(r, NAN);
          double *P = malloc(sizeof(double) * len * len), *Pm = malloc(sizeof(double) * len * len);
          for (int i = 0; i < len * r; i++) pq[i] = urand(), pk[i] = urand();
          for (int l = 0; l < len; l++)
            for (int j = 0; j < dv; j++) V[l * ldv + j] = urand();
          for (int i = 0; i < r * dv1; i++) sf[i] = urand();
          la_simd_causal_chunk(&la_simd_avx2, len, r, dv, pq, pk, V, ldv, st ? sf : NULL, o, tmp, kT, A, zf, C);
          qk(len, r, pq, pk, P, Pm);
          for (int i = 0; i < len; i++)
            for (int j = 0; j <= dv; j++) {
              double ref = 0, mag = 0;
              for (int k = 0; k < r && st; k++) {
                const double p = (double)pq[i * r + k] * sf[k * dv1 + j];
                ref += p, mag += fabs(p);
              }
              for (int l = 0; l <= i; l++) {
                const double vl = j < dv ? V[l * ldv + j] : 1.0;
                ref += P[i * len + l] * vl, mag += Pm[i * len + l] * fabs(vl);
              }
              if (!(fabs(o[i * dv1 + j] - ref) <= gamma_k(2 * r + len) * mag)) okc = 0;
            }
          for (int j = 0; j < dv1; j++) okc &= o[len * dv1 + j] == SENT && tmp[r * dv1 + j] == SENT;
          oks &= check_summary(len, r, dv, pk, V, ldv, tmp);
          /* the key summary alone, and the bidirectional rows o_i = [phiq_i Sf | phiq_i zf] */
          for (int i = 0; i < r * dv1; i++) tmp[i] = NAN;
          la_simd_key_summary(&la_simd_avx2, len, r, dv, pk, V, ldv, tmp);
          oks &= check_summary(len, r, dv, pk, V, ldv, tmp) && tmp[r * dv1] == SENT;
          for (int i = 0; i < len * dv1; i++) o[i] = NAN;
          la_simd_query_apply(&la_simd_avx2, len, r, dv, pq, sf, o, zf);
          for (int i = 0; i < len; i++)
            for (int j = 0; j <= dv; j++) {
              double ref = 0, mag = 0;
              for (int k = 0; k < r; k++) {
                const double p = (double)pq[i * r + k] * sf[k * dv1 + j];
                ref += p, mag += fabs(p);
              }
              if (!(fabs(o[i * dv1 + j] - ref) <= gamma_k(r) * mag)) okq = 0;
            }
          okq &= o[len * dv1] == SENT;
          free(pq), free(pk), free(V), free(sf), free(o), free(tmp), free(kT), free(A), free(zf);
          free(P), free(Pm);
        }
  CHECK(okc, "la_simd_causal_chunk (avx2) equals its definition on %d cases (len <= C = 64, 128; r, dv "
             "in 1..128; with and without a state)", n);
  CHECK(oks, "la_simd_key_summary (avx2; alone and in the chunk) equals [Phi_k^T V | Phi_k^T 1]");
  CHECK(okq, "la_simd_query_apply (avx2) equals [Phi_q Sf | Phi_q zf]");
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

/* The backward's piece products (docs/design.md §4.4, kern256.h) by their definitions. */
static void test_bwd(void) {
  const int lens[] = {1, 5, 6, 7, 13, 48, 64}, rs_[] = {1, 7, 16, 33, 64, 65, 128};
  const int dvs[] = {1, 7, 16, 33, 64, 65};
  int okq = 1, okr = 1, oks = 1, n = 0;
  for (int a = 0; a < 7; a++)
    for (int b = 0; b < 7; b++)
      for (int c = 0; c < 6; c++)
        for (int st = 0; st < 3; st++, n++) {
          /* st = 0: no state; 1: a state; 2: bidirectional (a state, no intra terms) */
          const int causal = st < 2, C = 64;
          const int len = lens[a], r = rs_[b], dv = dvs[c], dv1 = dv + 1, ldv = dv + irand(0, 3);
          const int ldo = dv + irand(0, 3), wmax = r > C ? r : C;
          float *pq = fbuf((size_t)len * r, 0), *pk = fbuf((size_t)len * r, 0);
          float *V = fbuf((size_t)len * ldv + 1, NAN), *vp = fbuf((size_t)len * dv1, 0);
          float *ab = fbuf((size_t)len * dv1, 0), *sf = fbuf((size_t)r * dv1, 0);
          float *dphi = fbuf((size_t)(len + 1) * r, SENT), *dvo = fbuf((size_t)(len + 1) * ldo, SENT);
          float *tmp = fbuf((size_t)(r + 1) * dv1, NAN), *A = fbuf((size_t)C * C, NAN);
          float *kT = fbuf((size_t)r * C, NAN), *tb = fbuf((size_t)dv1 * wmax, NAN);
          for (int i = 0; i < len * r; i++) pq[i] = urand(), pk[i] = urand();
          for (int l = 0; l < len; l++) {
            for (int j = 0; j < dv; j++) vp[l * dv1 + j] = V[l * ldv + j] = urand();
            vp[l * dv1 + dv] = 1.0f;
          }
          for (int i = 0; i < len * dv1; i++) ab[i] = urand();
          for (int i = 0; i < r * dv1; i++) sf[i] = urand();
          const float *S = st ? sf : NULL;
          tmp[r * dv1] = SENT;
          /* dq: dphi_i = sum_j ab_ij sf_kj + sum_{l <= i} (ab_i . [v_l; 1]) pk_l */
          la_simd_bwd_dq(&la_simd_avx2, len, r, dv, ab, S, pk, V, ldv, dphi, A, tb, C, causal);
          for (int i = 0; i < len; i++)
            for (int k = 0; k < r; k++) {
              double ref = 0, mag = 0;
              if (st) dot_mag(dv1, ab + i * dv1, 1, sf + k * dv1, 1, 1.0, &ref, &mag);
              for (int l = 0; l <= i && causal; l++)
                dot_mag(dv1, ab + i * dv1, 1, vp + l * dv1, 1, pk[l * r + k], &ref, &mag);
              if (!(fabs(dphi[i * r + k] - ref) <= gamma_k(2 * dv1 + len) * mag)) okq = 0;
            }
          for (int k = 0; k < r; k++) okq &= dphi[len * r + k] == SENT;
          /* reverse: dphik_l = sum_j vp_lj sf_kj + sum_{i >= l} (ab_i . vp_l) pq_i;
           * dv_l = sum_k pk_lk sf_kj + sum_{i >= l} (pq_i . pk_l) a_i; tmp = pq^T ab */
          for (int i = 0; i < len * r; i++) dphi[i] = NAN;
          for (int i = 0; i < C * C; i++) A[i] = NAN;
          la_simd_bwd_reverse(&la_simd_avx2, len, r, dv, ab, pq, pk, vp, S, dphi, dvo, ldo, tmp, A, kT, tb, C,
                              causal);
          for (int l = 0; l < len; l++) {
            for (int k = 0; k < r; k++) {
              double ref = 0, mag = 0;
              if (st) dot_mag(dv1, vp + l * dv1, 1, sf + k * dv1, 1, 1.0, &ref, &mag);
              for (int i = l; i < len && causal; i++)
                dot_mag(dv1, ab + i * dv1, 1, vp + l * dv1, 1, pq[i * r + k], &ref, &mag);
              if (!(fabs(dphi[l * r + k] - ref) <= gamma_k(2 * dv1 + len) * mag)) okr = 0;
            }
            for (int j = 0; j < ldo; j++) {
              if (j >= dv) { /* the row's padding: left alone */
                okr &= dvo[l * ldo + j] == SENT;
                continue;
              }
              double ref = 0, mag = 0;
              if (st) dot_mag(r, pk + l * r, 1, sf + j, dv1, 1.0, &ref, &mag);
              for (int i = l; i < len && causal; i++) {
                double t = 0, tm = 0;
                dot_mag(r, pq + i * r, 1, pk + l * r, 1, 1.0, &t, &tm);
                ref += t * ab[i * dv1 + j], mag += tm * fabs(ab[i * dv1 + j]);
              }
              if (!(fabs(dvo[l * ldo + j] - ref) <= gamma_k(2 * r + len) * mag)) okr = 0;
            }
          }
          for (int j = 0; j < ldo; j++) okr &= dvo[len * ldo + j] == SENT;
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
          okr &= tmp[r * dv1] == SENT;
          if (!causal) { /* the replay's query sums */
            la_simd_bwd_query_sum(&la_simd_avx2, len, r, dv, pq, ab, tmp);
            for (int k = 0; k < r; k++)
              for (int j = 0; j <= dv; j++) {
                double ref = 0, mag = 0;
                dot_mag(len, pq + k, r, ab + j, dv1, 1.0, &ref, &mag);
                if (!(fabs(tmp[k * dv1 + j] - ref) <= gamma_k(len) * mag)) oks = 0;
              }
            oks &= tmp[r * dv1] == SENT;
          }
          free(pq), free(pk), free(V), free(vp), free(ab), free(sf), free(dphi), free(dvo);
          free(tmp), free(A), free(kT), free(tb);
        }
  CHECK(okq, "la_simd_bwd_dq (avx2) equals its definition on %d cases (len, r, dv, state, mode)", n);
  CHECK(okr, "la_simd_bwd_reverse (avx2) equals its definition on %d cases (len, r, dv, state, mode)", n);
  CHECK(oks, "la_simd_bwd_query_sum (avx2) equals Phi_q^T [a | b] on the bidirectional cases");
}

int main(void) {
  if (!la_k256_available()) {
    printf("AVX2 + FMA kernels not available on this machine or build: skipped\n");
    return 77;
  }
  test_gemm();
  test_tri_bits();
  test_transpose();
  test_chunks();
  test_bwd();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
