/* AVX2 + FMA float32 kernels for the chunk products of docs/design.md §4.2, the la_simd table's
 * GEMM entries for CPUs without AVX-512 (§5.5 "Kernels per instruction set"). Only this file (and
 * kern256_maps.c) is compiled with -mavx2 -mfma; nothing here runs unless la_k256_available().
 * The chunk products composed of these kernels are simd_compose.c's (§5.5 "Composed products").
 * Same scheme as kern512.c: row-major operands read in place (no packing: the chunk GEMMs are
 * 64 x 64 x 64, where OpenBLAS spends its time packing), C kept in registers.
 * Register tile 6 x 16 (BLIS's Haswell shape): 12 ymm accumulators + 2 of B + 1 broadcast = 15
 * of 16 registers; per k two loads of B, six broadcasts of A and 12 FMAs, so the two FMA pipes
 * are the bound (6 cycles a k) and the loads (8 a k) fit the load ports. Expected gains, before
 * measuring (tools/bench_kern256.c, single thread, in cache):
 *  - the 6 x 16 tile against OpenBLAS (Haswell core) at 64^3: ~10-20 % (no packing of A and B,
 *    which at K = 64 costs about as much as a tenth of the FMAs);
 *  - 6-row tiles: the tri = 1/2/3 triangles skip the same ~45 % of a 64 x 64 product as kern512;
 *  - rows blocked by 96 and K by 256 (bit-identical: C is float32 in registers as in memory):
 *    nothing in cache; keeps A's block and B's panel in L1/L2 for the maps' tall GEMMs.
 *  - masked loads/stores only on the last vector of a panel narrower than 8k columns.
 * Measured (bench_kern256, OPENBLAS_CORETYPE=Haswell, AMD EPYC family 26 with AVX-512, one
 * thread, 64-byte aligned operands, a shared machine: the ranges are over 5 runs; a 12-chain
 * FMA loop peaks at 118 GFLOP/s there): 107-114 GFLOP/s at 64^3 against OpenBLAS's 92-98
 * (1.16x), 107-114 against 101-109 at 256^3; la_k512_gemm 206-224. Rows of N + 1 floats (the
 * engine's [S|z], [o|den]) run at the same rate. The tri = 2 product (len = r = 64) takes
 * 65-68 % of the full product's time for 58 % of its flops (short, masked last panels).
 * Accuracy: every product is a float32 FMA chain over k in order, as in a reference GEMM; the
 * reductions (row sums, dots) run 8 lanes wide, within the same gamma_K bound
 * (tests/test_kern256.c). Domain: finite operands (NaN/Inf propagate as in any GEMM). */
#include "kern256.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* mask of the first n lanes (0 <= n <= 8): load 8 from lanes_tab + 8 - n */
static const int32_t lanes_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
AI __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(lanes_tab + 8 - n)); }

/* C[mr x 8 nv] (+)= A[mr x K] B[K x 8 nv]; with tail, the last vector of B and C is masked by
 * ml. A(i, k) = A[i * ars + k * acs]. mr, nv and tail are constants after inlining. */
AI void ukern(const int mr, const int nv, const int tail, __m256i ml, int K, const float *A,
              ptrdiff_t ars, ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C,
              ptrdiff_t ldc, int acc) {
  __m256 c[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) {
      const float *ci = C + i * ldc + 8 * v;
      c[i][v] = !acc ? _mm256_setzero_ps()
                     : tail && v == nv - 1 ? _mm256_maskload_ps(ci, ml) : _mm256_loadu_ps(ci);
    }
  for (int k = 0; k < K; k++) {
    __m256 b[2];
    const float *bk = B + k * ldb;
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++)
      b[v] = tail && v == nv - 1 ? _mm256_maskload_ps(bk + 8 * v, ml) : _mm256_loadu_ps(bk + 8 * v);
    const float *ak = A + k * acs;
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      const __m256 a = _mm256_broadcast_ss(ak + i * ars);
#pragma GCC unroll 2
      for (int v = 0; v < nv; v++) c[i][v] = _mm256_fmadd_ps(a, b[v], c[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) {
      float *ci = C + i * ldc + 8 * v;
      if (tail && v == nv - 1) _mm256_maskstore_ps(ci, ml, c[i][v]);
      else _mm256_storeu_ps(ci, c[i][v]);
    }
}

/* Rows [i0, i1) of one panel of 8 nv columns (B, C already at the panel's first column), tile by
 * tile; i0 is a multiple of 6, and row indices are the GEMM's own (tri's tiles). */
AI void panel(const int nv, const int tail, __m256i ml, int i0, int i1, int K, int tri,
              const float *A, ptrdiff_t ars, ptrdiff_t acs, const float *B, ptrdiff_t ldb,
              float *C, ptrdiff_t ldc, int acc) {
  for (int t = i0; t < i1; t += 6) {
    const int mr = i1 - t < 6 ? i1 - t : 6;
    int k0 = 0, k1 = K;
    if (tri == 1 && t + mr < K) k1 = t + mr;
    if (tri == 3) k0 = t < K ? t : K;
    const int Kr = k1 - k0;
    const float *Ai = A + t * ars + k0 * acs, *Bk = B + k0 * ldb;
    float *Ci = C + t * ldc;
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

static void panel_2(__m256i ml, int i0, int i1, int K, int tri, const float *A, ptrdiff_t ars,
                    ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc) {
  panel(2, 0, ml, i0, i1, K, tri, A, ars, acs, B, ldb, C, ldc, acc);
}
static void panel_2t(__m256i ml, int i0, int i1, int K, int tri, const float *A, ptrdiff_t ars,
                     ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc) {
  panel(2, 1, ml, i0, i1, K, tri, A, ars, acs, B, ldb, C, ldc, acc);
}
static void panel_1(__m256i ml, int i0, int i1, int K, int tri, const float *A, ptrdiff_t ars,
                    ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc) {
  panel(1, 0, ml, i0, i1, K, tri, A, ars, acs, B, ldb, C, ldc, acc);
}
static void panel_1t(__m256i ml, int i0, int i1, int K, int tri, const float *A, ptrdiff_t ars,
                     ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc) {
  panel(1, 1, ml, i0, i1, K, tri, A, ars, acs, B, ldb, C, ldc, acc);
}

enum { MB = 96, KB = 256 }; /* row block (a multiple of 6) and K block of la_k256_gemm */

void la_k256_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!acc)
      for (int i = 0; i < M; i++) memset(C + (ptrdiff_t)i * ldc, 0, sizeof(float) * (size_t)N);
    return;
  }
  if (tri == 2) { /* lower: row tile i0 needs columns j < i0 + 6 only */
    for (int i0 = 0; i0 < M; i0 += 6) {
      const int mt = M - i0 < 6 ? M - i0 : 6, nt = i0 + 6 < N ? i0 + 6 : N;
      la_k256_gemm(mt, nt, K, A + i0 * ars, ars, acs, B, ldb, C + i0 * ldc, ldc, acc, 0);
    }
    return;
  }
  if (tri == 0 && K > KB) { /* K blocks, each accumulated onto the last: the same FMA chain */
    for (int k0 = 0; k0 < K; k0 += KB)
      la_k256_gemm(M, N, K - k0 < KB ? K - k0 : KB, A + k0 * acs, ars, acs, B + k0 * ldb, ldb, C,
                   ldc, acc || k0 > 0, 0);
    return;
  }
  for (int ib = 0; ib < M; ib += MB) {
    const int ie = M - ib < MB ? M : ib + MB;
    for (int j0 = 0; j0 < N; j0 += 16) {
      const int w = N - j0 < 16 ? N - j0 : 16, nv = (w + 7) / 8;
      const __m256i ml = lanes(w % 8 ? w % 8 : 8);
      const float *Bj = B + j0;
      float *Cj = C + j0;
      if (nv == 2) {
        if (w % 8) panel_2t(ml, ib, ie, K, tri, A, ars, acs, Bj, ldb, Cj, ldc, acc);
        else panel_2(ml, ib, ie, K, tri, A, ars, acs, Bj, ldb, Cj, ldc, acc);
      } else {
        if (w % 8) panel_1t(ml, ib, ie, K, tri, A, ars, acs, Bj, ldb, Cj, ldc, acc);
        else panel_1(ml, ib, ie, K, tri, A, ars, acs, Bj, ldb, Cj, ldc, acc);
      }
    }
  }
}

/* 8 x 8 block in registers: unpack pairs, then 64-bit pairs (shuffle), then 128-bit lanes. */
static void transpose8(const float *src, ptrdiff_t lds, float *dst, ptrdiff_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
  }
  for (int i = 0; i < 8; i += 4) { /* r[i + c]: rows i..i+3 of columns c and c + 4 */
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
    _mm256_storeu_ps(dst + (4 + c) * ldd, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
  }
}

void la_k256_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd) {
  const int rf = rows / 8 * 8, cf = cols / 8 * 8;
  for (int i0 = 0; i0 < rf; i0 += 8)
    for (int j0 = 0; j0 < cf; j0 += 8) transpose8(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
  for (int i = 0; i < rows; i++) /* the edges: rows past rf, columns past cf */
    for (int j = i < rf ? cf : 0; j < cols; j++)
      dst[(ptrdiff_t)j * ldd + i] = src[(ptrdiff_t)i * lds + j];
}

/* Lane i of the result = the sum of the 8 lanes of v[i] (an add tree, as kern512's
 * reduce16x16). */
AI __m256 reduce8x8(const __m256 v[8]) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* rows 0-3 | 4-7 per lane half */
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* The den column of a chunk, 8 rows at a time: for i < len,
 *   out[i * ldo] = sum_{j <= i} A[i][j] (A lower triangular, read up to j = i; NULL: none)
 *                  + phiq_i . zf (zf NULL: none).  A has ld lda; phiq rows of r. */
void la_k256_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo) {
  for (int i0 = 0; i0 < len; i0 += 8) {
    __m256 v[8];
    for (int u = 0; u < 8; u++) {
      const int i = i0 + u;
      __m256 s = _mm256_setzero_ps();
      if (i < len) {
        const int n = i + 1;
        if (A) {
          const float *Ai = A + (ptrdiff_t)i * lda;
          int j = 0;
          for (; j + 8 <= n; j += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(Ai + j));
          if (j < n) s = _mm256_add_ps(s, _mm256_maskload_ps(Ai + j, lanes(n - j)));
        }
        if (zf) {
          const float *qi = phiq + (ptrdiff_t)i * r;
          int k = 0;
          for (; k + 8 <= r; k += 8)
            s = _mm256_fmadd_ps(_mm256_loadu_ps(qi + k), _mm256_loadu_ps(zf + k), s);
          if (k < r) {
            const __m256i mk = lanes(r - k);
            s = _mm256_fmadd_ps(_mm256_maskload_ps(qi + k, mk), _mm256_maskload_ps(zf + k, mk), s);
          }
        }
      }
      v[u] = s;
    }
    float t[8];
    _mm256_storeu_ps(t, reduce8x8(v));
    for (int u = 0; u < 8 && i0 + u < len; u++) out[(ptrdiff_t)(i0 + u) * ldo] = t[u];
  }
}

/* out[i ldo] = sum_k w_k phik[k r + i] (w NULL: w_k = 1, a plain add), k in order, 8 features
 * per register: the key summary's z column and the backward's Phi_q^T b. */
void la_k256_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo) {
  for (int i0 = 0; i0 < r; i0 += 8) {
    __m256 z = _mm256_setzero_ps();
    const int whole = r - i0 >= 8;
    const __m256i mk = lanes(whole ? 8 : r - i0);
    if (whole && !w)
      for (int k = 0; k < len; k++) z = _mm256_add_ps(z, _mm256_loadu_ps(phi + (ptrdiff_t)k * r + i0));
    else if (!w)
      for (int k = 0; k < len; k++)
        z = _mm256_add_ps(z, _mm256_maskload_ps(phi + (ptrdiff_t)k * r + i0, mk));
    else if (whole)
      for (int k = 0; k < len; k++)
        z = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (ptrdiff_t)k * ldw),
                            _mm256_loadu_ps(phi + (ptrdiff_t)k * r + i0), z);
    else
      for (int k = 0; k < len; k++)
        z = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (ptrdiff_t)k * ldw),
                            _mm256_maskload_ps(phi + (ptrdiff_t)k * r + i0, mk), z);
    float t[8];
    _mm256_storeu_ps(t, z);
    for (int u = 0; u < 8 && i0 + u < r; u++) out[(ptrdiff_t)(i0 + u) * ldo] = t[u];
  }
}

#else /* no AVX2 + FMA at compile time: never selected (la_k256_available returns 0) */
void la_k256_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri) {
  (void)M; (void)N; (void)K; (void)A; (void)ars; (void)acs; (void)B; (void)ldb; (void)C;
  (void)ldc; (void)acc; (void)tri;
}
void la_k256_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd) {
  (void)rows; (void)cols; (void)src; (void)lds; (void)dst; (void)ldd;
}
void la_k256_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo) {
  (void)len; (void)A; (void)lda; (void)phiq; (void)r; (void)zf; (void)out; (void)ldo;
}
void la_k256_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo) {
  (void)len; (void)r; (void)phi; (void)w; (void)ldw; (void)out; (void)ldo;
}
#endif
