/* AVX2 + FMA float64 GEMM of the avx2 table (simd.h's gemm_f64), for the float64 engine's
 * chunk products (docs/design.md §4.2, §5.5 "float64 products"): the same scheme as
 * kern256.c's float32 GEMM, row-major operands read in place (no packing), C kept in
 * registers, and the same 6-row tiles, so tri = 1/2/3 mean what they mean there.
 * Register tile 6 x 8 doubles (two ymm a row): 12 accumulators + 2 of B + 1 broadcast = 15
 * of 16 registers; per k two loads of B, six broadcasts and 12 FMAs (the FMA pipes bound).
 * Expected, before measuring (tools/bench_kern256_f64.c, one thread, in cache): OpenBLAS
 * 0.3.21's Haswell DGEMM packs A and B for every call; at the float64 chunk's shapes (C = 48,
 * r = 64, dv + 1 = 65, K = 16..64) packing is a tenth to a fifth of the FMAs, and the
 * triangle's 16-row blocks are below its blocking: ~15-30 % per product. The measurement is
 * in docs/performance.md "The AVX2 kernels".
 * Accuracy: every element is a float64 FMA chain over k in order, as in a reference GEMM
 * (the gamma_K bound of tests/test_kern256_f64.c). Domain: finite operands. */
#include "kern256.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* mask of the first n of 4 double lanes (0 <= n <= 4) */
static const int64_t lanes_tab[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
AI __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(lanes_tab + 4 - n)); }

/* C[mr x 4 nv] (+)= A[mr x K] B[K x 4 nv]; with tail, the last vector of B and C is masked. */
AI void ukern(const int mr, const int nv, const int tail, __m256i ml, int K, const double *A,
              ptrdiff_t ars, ptrdiff_t acs, const double *B, ptrdiff_t ldb, double *C,
              ptrdiff_t ldc, int acc) {
  __m256d c[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) {
      const double *ci = C + i * ldc + 4 * v;
      c[i][v] = !acc ? _mm256_setzero_pd()
                     : tail && v == nv - 1 ? _mm256_maskload_pd(ci, ml) : _mm256_loadu_pd(ci);
    }
  for (int k = 0; k < K; k++) {
    __m256d b[2];
    const double *bk = B + k * ldb;
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++)
      b[v] = tail && v == nv - 1 ? _mm256_maskload_pd(bk + 4 * v, ml) : _mm256_loadu_pd(bk + 4 * v);
    const double *ak = A + k * acs;
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      const __m256d a = _mm256_broadcast_sd(ak + i * ars);
#pragma GCC unroll 2
      for (int v = 0; v < nv; v++) c[i][v] = _mm256_fmadd_pd(a, b[v], c[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) {
      double *ci = C + i * ldc + 4 * v;
      if (tail && v == nv - 1) _mm256_maskstore_pd(ci, ml, c[i][v]);
      else _mm256_storeu_pd(ci, c[i][v]);
    }
}

/* Rows [0, M) of one panel of 4 nv columns, tile by tile (tri's 6-row tiles). */
AI void panel(const int nv, const int tail, __m256i ml, int M, int K, int tri, const double *A,
              ptrdiff_t ars, ptrdiff_t acs, const double *B, ptrdiff_t ldb, double *C,
              ptrdiff_t ldc, int acc) {
  for (int t = 0; t < M; t += 6) {
    const int mr = M - t < 6 ? M - t : 6;
    int k0 = 0, k1 = K;
    if (tri == 1 && t + mr < K) k1 = t + mr;
    if (tri == 3) k0 = t < K ? t : K;
    const int Kr = k1 - k0;
    const double *Ai = A + t * ars + k0 * acs, *Bk = B + k0 * ldb;
    double *Ci = C + t * ldc;
    switch (mr) {
    case 6: ukern(6, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    case 5: ukern(5, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    case 4: ukern(4, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    case 3: ukern(3, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    case 2: ukern(2, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    default: ukern(1, nv, tail, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;
    }
  }
}

typedef void panel_fn(__m256i, int, int, int, const double *, ptrdiff_t, ptrdiff_t,
                      const double *, ptrdiff_t, double *, ptrdiff_t, int);
#define LA_PANEL64(NAME, NV, TAIL)                                                            \
  static void NAME(__m256i ml, int M, int K, int tri, const double *A, ptrdiff_t ars,         \
                   ptrdiff_t acs, const double *B, ptrdiff_t ldb, double *C, ptrdiff_t ldc,   \
                   int acc) {                                                                 \
    panel(NV, TAIL, ml, M, K, tri, A, ars, acs, B, ldb, C, ldc, acc);                         \
  }
LA_PANEL64(panel_2, 2, 0)
LA_PANEL64(panel_2t, 2, 1)
LA_PANEL64(panel_1, 1, 0)
LA_PANEL64(panel_1t, 1, 1)

void la_k256_gemm_f64(int M, int N, int K, const double *A, ptrdiff_t ars, ptrdiff_t acs,
                      const double *B, ptrdiff_t ldb, double *C, ptrdiff_t ldc, int acc,
                      int tri) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!acc)
      for (int i = 0; i < M; i++) memset(C + (ptrdiff_t)i * ldc, 0, sizeof(double) * (size_t)N);
    return;
  }
  if (tri == 2) { /* lower: row tile i0 needs columns j < i0 + 6 only */
    for (int i0 = 0; i0 < M; i0 += 6) {
      const int mt = M - i0 < 6 ? M - i0 : 6, nt = i0 + 6 < N ? i0 + 6 : N;
      la_k256_gemm_f64(mt, nt, K, A + i0 * ars, ars, acs, B, ldb, C + i0 * ldc, ldc, acc, 0);
    }
    return;
  }
  for (int j0 = 0; j0 < N; j0 += 8) {
    const int w = N - j0 < 8 ? N - j0 : 8, nv = (w + 3) / 4;
    const __m256i ml = lanes(w % 4 ? w % 4 : 4);
    panel_fn *f = nv == 2 ? (w % 4 ? panel_2t : panel_2) : (w % 4 ? panel_1t : panel_1);
    f(ml, M, K, tri, A, ars, acs, B + j0, ldb, C + j0, ldc, acc);
  }
}

/* dst[j][i] = src[i][j] in 4 x 4 blocks of ymm (unpack + 128-bit permute), the edges one
 * element at a time: la_gemm_f64's op(B) = B^T (core/engine/gemm.c). Exact (moves only). */
void la_k256_transpose_f64(int rows, int cols, const double *src, ptrdiff_t lds, double *dst,
                           ptrdiff_t ldd) {
  const int rf = rows / 4 * 4, cf = cols / 4 * 4;
  for (int i0 = 0; i0 < rf; i0 += 4)
    for (int j0 = 0; j0 < cf; j0 += 4) {
      const double *s = src + (ptrdiff_t)i0 * lds + j0;
      const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + lds),
                    r2 = _mm256_loadu_pd(s + 2 * lds), r3 = _mm256_loadu_pd(s + 3 * lds);
      const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1),
                    t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      double *d = dst + (ptrdiff_t)j0 * ldd + i0;
      _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(d + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(d + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(d + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
  for (int i = 0; i < rows; i++) /* the edges: rows past rf, columns past cf */
    for (int j = i < rf ? cf : 0; j < cols; j++)
      dst[(ptrdiff_t)j * ldd + i] = src[(ptrdiff_t)i * lds + j];
}

#else /* no AVX2 + FMA at compile time: never selected (la_k256_available returns 0) */
void la_k256_gemm_f64(int M, int N, int K, const double *A, ptrdiff_t ars, ptrdiff_t acs,
                      const double *B, ptrdiff_t ldb, double *C, ptrdiff_t ldc, int acc,
                      int tri) {
  (void)M; (void)N; (void)K; (void)A; (void)ars; (void)acs; (void)B; (void)ldb; (void)C;
  (void)ldc; (void)acc; (void)tri;
}
void la_k256_transpose_f64(int rows, int cols, const double *src, ptrdiff_t lds, double *dst,
                           ptrdiff_t ldd) {
  (void)rows; (void)cols; (void)src; (void)lds; (void)dst; (void)ldd;
}
#endif
