/* Unit tests of the AVX2 + FMA float64 GEMM (core/simd/kern256_f64.c, the avx2 table's gemm_f64)
 * against a plain long double loop written here (no engine code). The bound is the rigorous
 * float64 one: a length-K chain of float64 products and sums (any order, FMA or not) is within
 * gamma_K sum_k |a_k b_k| of the exact value, gamma_K = K u / (1 - K u), u = 2^-53 (+2 for the
 * accumulate into C and one rounding more, as tests/test_kern256.c). Memory the kernel must
 * not read (tri's far triangles, the padding of A and B) is NaN, and memory it must not write
 * is checked unchanged bitwise. Shapes: the edges of the 6 x 8 register tile, the float64
 * chunk's own (C = 48, r = 64, dv + 1 = 65, the triangle's 16-row blocks), random ones, and
 * long K. Skipped (exit 77) where la_k256_available() is 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/simd/kern256.h"

#include "check.h"

static unsigned long long rs = 0x2545F4914F6CDD1DULL;
static double urand(void) { /* xorshift64, uniform in [-1, 1) */
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static int irand(int lo, int hi) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return lo + (int)((rs >> 20) % (unsigned long long)(hi - lo + 1));
}
static double gamma_k(int k) {
  const double u = ldexp(1.0, -53);
  return (k + 2) * u / (1 - (k + 2) * u);
}
static double *dbuf(size_t n, double fill) {
  double *p = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) p[i] = fill;
  return p;
}
#define SENT 1234.5 /* neither in any result nor NaN: "left alone" is checked bitwise */

/* One la_k256_gemm_f64 call against the reference. trans: A stored transposed (ars = 1). */
static int gemm_case(int M, int N, int K, int tri, int acc, int trans, double *worst) {
  const int pa = irand(0, 3), pb = irand(0, 5), pc = irand(0, 5);
  const int lda = (trans ? M : K) + pa, ldb = N + pb, ldc = N + pc;
  const ptrdiff_t ars = trans ? 1 : lda, acs = trans ? lda : 1;
  const size_t asz = (size_t)lda * (size_t)(trans ? K : M) + 1;
  double *A = dbuf(asz, NAN), *B = dbuf((size_t)(K + 1) * ldb, NAN);
  double *C = dbuf((size_t)(M + 1) * ldc, SENT), *C0 = dbuf((size_t)(M + 1) * ldc, SENT);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      const int t0 = i / 6 * 6, t1 = t0 + 6; /* the row's 6-row tile */
      double a = urand();
      if (tri == 1 && k > i) a = k < t1 ? 0.0 : NAN; /* zeros inside the tile, unread past it */
      if (tri == 3 && k < i) a = k >= t0 ? 0.0 : NAN;
      A[i * ars + k * acs] = a;
    }
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) B[(size_t)k * ldb + j] = urand();
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = C0[(size_t)i * ldc + j] = urand();
  la_k256_gemm_f64(M, N, K, A, ars, acs, B, ldb, C, ldc, acc, tri);
  int ok = 1;
  for (int i = 0; i < M + 1; i++)
    for (int j = 0; j < ldc; j++) {
      const double c = C[(size_t)i * ldc + j], c0 = C0[(size_t)i * ldc + j];
      const int written = i < M && j < N && (tri != 2 || j < i / 6 * 6 + 6);
      if (!written) {
        if (memcmp(&c, &c0, sizeof c)) ok = 0;
        continue;
      }
      long double ref = acc ? c0 : 0, mag = fabs(acc ? c0 : 0);
      for (int k = 0; k < K; k++) {
        if ((tri == 1 && k > i) || (tri == 3 && k < i)) continue;
        const long double p = (long double)A[i * ars + k * acs] * B[(size_t)k * ldb + j];
        ref += p, mag += fabsl(p);
      }
      const double e = (double)fabsl((long double)c - ref);
      if (!(e <= gamma_k(K) * (double)mag)) ok = 0; /* a NaN fails too */
      if (mag > 0) *worst = worse(*worst, e / (double)mag / ldexp(1.0, -53));
    }
  free(A), free(B), free(C), free(C0);
  return ok;
}

static void test_gemm(void) {
  /* the edges of the 6 x 8 tile and the float64 chunk's shapes (C = 48, r = 64, dv + 1 = 65) */
  const int Ms[] = {1, 2, 5, 6, 7, 11, 12, 13, 16, 17, 47, 48, 49, 64, 65};
  const int Ns[] = {1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 32, 33, 48, 64, 65};
  const int Ks[] = {1, 2, 6, 7, 16, 32, 48, 64, 65};
  int ok = 1, n = 0;
  double worst = 0;
  for (int a = 0; a < 15; a++)
    for (int b = 0; b < 16; b++)
      for (int c = 0; c < 9; c++, n++) {
        const int tri = n % 4, acc = (n / 4) % 2, trans = (n / 8) % 2;
        /* tri 1 / 3: mostly square, as the chunks call them; otherwise K as listed */
        const int K = (tri == 1 || tri == 3) && c % 2 ? Ms[a] : Ks[c];
        ok &= gemm_case(Ms[a], Ns[b], K, tri, acc, trans, &worst);
      }
  CHECK(ok, "la_k256_gemm_f64 within gamma_K sum|a b| on a grid of %d shapes (M, N, K at the "
            "tile edges and the chunk's; every tri, acc, ars/acs; worst %.3g u)", n, worst);
  ok = 1, worst = 0;
  for (int t = 0; t < 400; t++)
    ok &= gemm_case(irand(1, 140), irand(1, 140), irand(1, 140), t % 4, (t / 4) % 2, (t / 8) % 2,
                    &worst);
  CHECK(ok, "la_k256_gemm_f64 on 400 random shapes up to 140 (worst %.3g u)", worst);
  ok = 1, worst = 0;
  const int big[][3] = {{200, 70, 600}, {6, 8, 2100}, {97, 65, 257}, {48, 65, 1000}};
  for (int t = 0; t < 4; t++)
    for (int v = 0; v < 8; v++)
      ok &= gemm_case(big[t][0], big[t][1], big[t][2], v % 4, (v / 4) % 2, t % 2, &worst);
  CHECK(ok, "la_k256_gemm_f64 on long K and tall M: 32 cases (worst %.3g u)", worst);
  /* K = 0: C = acc ? C : 0; M or N = 0: nothing */
  double c[6] = {1, 2, 3, 4, 5, 6}, a = NAN, b = NAN;
  la_k256_gemm_f64(2, 3, 0, &a, 1, 1, &b, 3, c, 3, 1, 0);
  int ok0 = c[0] == 1 && c[5] == 6;
  la_k256_gemm_f64(2, 3, 0, &a, 1, 1, &b, 3, c, 3, 0, 0);
  for (int i = 0; i < 6; i++) ok0 &= c[i] == 0;
  c[0] = 7;
  la_k256_gemm_f64(0, 3, 4, &a, 1, 1, &b, 3, c, 3, 0, 0);
  la_k256_gemm_f64(2, 0, 4, &a, 1, 1, &b, 3, c, 3, 0, 0);
  ok0 &= c[0] == 7;
  CHECK(ok0, "la_k256_gemm_f64 with K = 0 (zero or keep C) and M or N = 0 (no access)");
}

/* On a triangular A, tri = 1 and tri = 3 give the bits of tri = 0 (the skipped terms are exact
 * zeros at the end or the start of each FMA chain), and tri = 2 the bits of tri = 0 wherever
 * it writes: the results do not depend on the tiling. */
static void test_tri_bits(void) {
  int ok = 1, n = 0;
  for (int t = 0; t < 120; t++, n++) {
    const int M = irand(1, 100), N = irand(1, 100), acc = t % 2, trans = (t / 2) % 2;
    const int lda = M + irand(0, 3), ldc = N + irand(0, 3);
    const ptrdiff_t ars = trans ? 1 : lda, acs = trans ? lda : 1;
    double *L = dbuf((size_t)M * lda, 0), *U = dbuf((size_t)M * lda, 0), *B = dbuf((size_t)M * N, 0);
    double *C0 = dbuf((size_t)M * ldc, 0), *C1 = dbuf((size_t)M * ldc, 0), *C2 = dbuf((size_t)M * ldc, 0);
    for (int i = 0; i < M; i++)
      for (int k = 0; k < M; k++) {
        L[i * ars + k * acs] = k <= i ? urand() : 0.0;
        U[i * ars + k * acs] = k >= i ? urand() : 0.0;
      }
    for (int i = 0; i < M * N; i++) B[i] = urand();
    for (int i = 0; i < M * ldc; i++) C0[i] = urand();
    for (int pass = 0; pass < 3; pass++) {
      const double *A = pass == 1 ? U : L;
      const int tri = pass == 0 ? 1 : pass == 1 ? 3 : 2;
      memcpy(C1, C0, sizeof(double) * (size_t)M * ldc);
      memcpy(C2, C0, sizeof(double) * (size_t)M * ldc);
      la_k256_gemm_f64(M, N, M, A, ars, acs, B, N, C1, ldc, acc, 0);
      la_k256_gemm_f64(M, N, M, A, ars, acs, B, N, C2, ldc, acc, tri);
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
          if (tri != 2 || j < i / 6 * 6 + 6) ok &= C1[i * ldc + j] == C2[i * ldc + j];
    }
    free(L), free(U), free(B), free(C0), free(C1), free(C2);
  }
  CHECK(ok, "la_k256_gemm_f64 tri = 1, 2, 3 give tri = 0's values on triangular A (%d shapes)", n);
}

/* la_k256_transpose_f64 moves every element exactly and writes nothing else (the tile's
 * edges: sizes around multiples of 4, the chunk's 48 x 64 and 48 x 65). */
static void test_transpose(void) {
  const int sz[] = {1, 3, 4, 5, 7, 8, 9, 16, 17, 33, 48, 64, 65, 70};
  const int ns = (int)(sizeof sz / sizeof *sz);
  int ok = 1, n = 0;
  for (int a = 0; a < ns; a++)
    for (int b = 0; b < ns; b++, n++) {
      const int rows = sz[a], cols = sz[b], lds = cols + irand(0, 3), ldd = rows + irand(0, 3);
      double *s = dbuf((size_t)rows * lds, NAN), *d = dbuf((size_t)(cols + 1) * ldd, SENT);
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) s[i * lds + j] = urand();
      la_k256_transpose_f64(rows, cols, s, lds, d, ldd);
      for (int j = 0; j < cols + 1; j++)
        for (int i = 0; i < ldd; i++)
          ok &= j < cols && i < rows ? d[j * ldd + i] == s[i * lds + j] : d[j * ldd + i] == SENT;
      free(s), free(d);
    }
  CHECK(ok, "la_k256_transpose_f64 exact and in bounds on %d shapes up to 70 x 70", n);
}

int main(void) {
  if (!la_k256_available()) {
    printf("AVX2 + FMA kernels not available on this machine or build: skipped\n");
    return 77;
  }
  test_gemm();
  test_tri_bits();
  test_transpose();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
