/* AVX-512 float32 kernels for the chunk products of docs/design.md §4.2, chosen at run time
 * (la_k512_enabled, engine.c). This file alone is compiled with -mavx512f; nothing here runs unless
 * the CPU reports AVX-512F. Why not OpenBLAS: the chunk GEMMs are 64 x 64 x 64, where
 * OpenBLAS spends its time packing, and Debian's OpenBLAS runs AVX2 kernels on CPUs it does not
 * know. These kernels read row-major operands in place (no packing) and keep a 6 x 64 block of
 * C in registers: per k, four vector loads of B, six broadcasts of A and 24 FMAs (measured:
 * 247 GFLOP/s per thread on 64^3 in cache, against OpenBLAS's 116).
 * Accuracy: every product is a float32 FMA chain over k in order, as in a reference GEMM; the
 * reductions (row sums, dots) run 16 lanes wide, within the same gamma_K bound
 * (tests/test_kern512.c). */
#include "kern512.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* 2^(j/16), j = 0..15, each rounded to float once (from exp2l). */
static const float exp2_16th[16] = {
    1.000000000e+00f, 1.044273734e+00f, 1.090507746e+00f, 1.138788581e+00f,
    1.189207077e+00f, 1.241857767e+00f, 1.296839595e+00f, 1.354255557e+00f,
    1.414213538e+00f, 1.476826191e+00f, 1.542210817e+00f, 1.610490322e+00f,
    1.681792855e+00f, 1.756252170e+00f, 1.834008098e+00f, 1.915206552e+00f};

/* e^x for 16 lanes, x <= 0 (elu1's negative branch, favor's exponentials; docs/design.md
 * §2): e^x = 2^(k/16) e^t with k = round(16 x / ln 2) and |t| <= ln2/32, t by a two-part
 * (Cody-Waite) ln2/16 whose high part has 12 bits, so k * hi is exact for |k| < 2^12 (x >=
 * -104 gives |k| <= 2401; below, the result is 0 anyway). e^t = 1 + q, q = t + t^2/2 + t^3/6
 * (truncation t^4/24 < 1e-8, 0.1 ulp); 2^(j/16) from a 16-entry table (vpermps takes k's low
 * four bits, j = k mod 16), then 2^floor(k/16) by scalef, which flushes to 0 below the float
 * range. Worst error 1 ulp against expl over every float in [-104, 0] (checked exhaustively
 * when it was written; tests/test_kern512.c samples it, <= 2 ulp). Against the degree-7
 * polynomial on |t| <= ln2/2 it was: 2.64 against 3.45 cycles per 16 lanes in cache. */
AI __m512 exp16_nonpos(__m512 x) {
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(23.0831206542234f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 t = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.0433197021484375f), x);
  t = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.9966365590803897e-06f), t);
  __m512 q = _mm512_fmadd_ps(t, _mm512_set1_ps(1.0f / 6), _mm512_set1_ps(0.5f));
  q = _mm512_mul_ps(_mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0f)), t);
  const __m512 T = _mm512_permutexvar_ps(_mm512_cvtps_epi32(k), _mm512_loadu_ps(exp2_16th));
  return _mm512_scalef_ps(_mm512_fmadd_ps(T, q, T), _mm512_mul_ps(k, _mm512_set1_ps(0.0625f)));
}

/* C[mr x 16 nv] (+)= A[mr x K] B[K x 16 nv]; the last vector of B/C is masked by mlast.
 * A(i, k) = A[i * ars + k * acs]. */
AI void ukern(const int mr, const int nv, __mmask16 mlast, int K, const float *A, ptrdiff_t ars,
              ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc) {
  __m512 c[6][4];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      const __mmask16 mk = v == nv - 1 ? mlast : (__mmask16)0xFFFF;
      c[i][v] = acc ? _mm512_maskz_loadu_ps(mk, C + i * ldc + 16 * v) : _mm512_setzero_ps();
    }
  for (int k = 0; k < K; k++) {
    __m512 b[4];
    const float *bk = B + k * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
      b[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(mlast, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v);
    const float *ak = A + k * acs;
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      const __m512 a = _mm512_set1_ps(ak[i * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) c[i][v] = _mm512_fmadd_ps(a, b[v], c[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      const __mmask16 mk = v == nv - 1 ? mlast : (__mmask16)0xFFFF;
      _mm512_mask_storeu_ps(C + i * ldc + 16 * v, mk, c[i][v]);
    }
}

/* One panel of at most 64 columns: every row tile of 6 (the last one shorter). */
#define LA_PANEL(NV)                                                                          \
  static void panel_##NV(int M, __mmask16 ml, int K, int tri, const float *A, ptrdiff_t ars,  \
                         ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C,              \
                         ptrdiff_t ldc, int acc) {                                            \
    int i0 = 0;                                                                               \
    for (; i0 + 6 <= M; i0 += 6) {                                                            \
      const int Kt = tri == 1 && i0 + 6 < K ? i0 + 6 : K, k0 = tri == 3 && i0 < K ? i0 : 0;   \
      ukern(6, NV, ml, Kt - k0, A + i0 * ars + k0 * acs, ars, acs, B + k0 * ldb, ldb,         \
            C + i0 * ldc, ldc, acc);                                                          \
    }                                                                                         \
    const int rest = M - i0, Kt = tri == 1 && M < K ? M : K;                                  \
    const int k0 = tri == 3 && i0 < K ? i0 : 0, Kr = Kt - k0;                                 \
    const float *Ai = A + i0 * ars + k0 * acs, *Bk = B + k0 * ldb;                            \
    float *Ci = C + i0 * ldc;                                                                 \
    switch (rest) {                                                                           \
    case 5: ukern(5, NV, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;                 \
    case 4: ukern(4, NV, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;                 \
    case 3: ukern(3, NV, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;                 \
    case 2: ukern(2, NV, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;                 \
    case 1: ukern(1, NV, ml, Kr, Ai, ars, acs, Bk, ldb, Ci, ldc, acc); break;                 \
    default: break;                                                                           \
    }                                                                                         \
  }
LA_PANEL(1)
LA_PANEL(2)
LA_PANEL(3)
LA_PANEL(4)

void la_k512_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
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
      la_k512_gemm(mt, nt, K, A + i0 * ars, ars, acs, B, ldb, C + i0 * ldc, ldc, acc, 0);
    }
    return;
  }
  for (int j0 = 0; j0 < N; j0 += 64) {
    const int w = N - j0 < 64 ? N - j0 : 64, nv = (w + 15) / 16;
    const __mmask16 ml = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1 : 0xFFFF);
    switch (nv) {
    case 4: panel_4(M, ml, K, tri, A, ars, acs, B + j0, ldb, C + j0, ldc, acc); break;
    case 3: panel_3(M, ml, K, tri, A, ars, acs, B + j0, ldb, C + j0, ldc, acc); break;
    case 2: panel_2(M, ml, K, tri, A, ars, acs, B + j0, ldb, C + j0, ldc, acc); break;
    default: panel_1(M, ml, K, tri, A, ars, acs, B + j0, ldb, C + j0, ldc, acc); break;
    }
  }
}

/* 16 x 16 block in registers: unpack pairs, then 64-bit pairs, then 128-bit lanes twice. */
static void transpose16(const float *src, ptrdiff_t lds, float *dst, ptrdiff_t ldd) {
  __m512 r[16], t[16]; /* t[2k], t[2k+1]: rows 2k, 2k+1 interleaved */
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* 64-bit pairs: r[i + c] lane l = rows i..i+3 of column 4l + c */
    const __m512d a0 = _mm512_castps_pd(t[i]), a1 = _mm512_castps_pd(t[i + 1]);
    const __m512d b0 = _mm512_castps_pd(t[i + 2]), b1 = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, b0));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, b0));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, b1));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, b1));
  }
  for (int c = 0; c < 4; c++) { /* gather lane l of the four row groups: column 4l + c */
    const __m512 u = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
    const __m512 w = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    const __m512 w2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    _mm512_storeu_ps(dst + c * ldd, _mm512_shuffle_f32x4(u, u2, 0x88));
    _mm512_storeu_ps(dst + (8 + c) * ldd, _mm512_shuffle_f32x4(u, u2, 0xDD));
    _mm512_storeu_ps(dst + (4 + c) * ldd, _mm512_shuffle_f32x4(w, w2, 0x88));
    _mm512_storeu_ps(dst + (12 + c) * ldd, _mm512_shuffle_f32x4(w, w2, 0xDD));
  }
}

void la_k512_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd) {
  const int rf = rows / 16 * 16, cf = cols / 16 * 16;
  for (int i0 = 0; i0 < rf; i0 += 16)
    for (int j0 = 0; j0 < cf; j0 += 16)
      transpose16(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
  for (int i0 = 0; i0 < rows; i0 += 16)
    for (int j = 0; j < cols; j++) {
      const int ie = rows - i0 < 16 ? rows - i0 : 16;
      if (i0 < rf && j < cf) continue; /* done in registers */
      for (int i = 0; i < ie; i++) dst[(ptrdiff_t)j * ldd + i0 + i] = src[(ptrdiff_t)(i0 + i) * lds + j];
    }
}

/* Lane i of the result = the sum of the 16 lanes of v[i]: an add tree over pairs of rows,
 * then pairs of pairs, then the 128-bit lanes (about 3 operations a row, against a
 * dependent reduction per row). */
AI __m512 reduce16x16(const __m512 v[16]) {
  __m512 s1[8], s2[4];
  for (int i = 0; i < 8; i++) /* per 128-bit lane L: a0+a2, b0+b2, a1+a3, b1+b3 */
    s1[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                          _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int j = 0; j < 4; j++) { /* per lane L: the lane's sums of rows 4j .. 4j + 3 */
    const __m512d c = _mm512_castps_pd(s1[2 * j]), d = _mm512_castps_pd(s1[2 * j + 1]);
    s2[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)),
                          _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  /* u0 = [rows 0-3: lanes 0+2, 1+3 | rows 4-7: lanes 0+2, 1+3], u1 the same for rows 8-15 */
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(s2[0], s2[1], 0x44),
                                  _mm512_shuffle_f32x4(s2[0], s2[1], 0xEE));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(s2[2], s2[3], 0x44),
                                  _mm512_shuffle_f32x4(s2[2], s2[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xDD));
}

/* The den column of a chunk, 16 rows at a time (reduce16x16): for i < len,
 *   out[i * ldo] = sum_{j <= i} A[i][j] (A lower triangular, read up to j = i; NULL: none)
 *                  + phiq_i . zf (zf NULL: none).
 * A has ld lda; phiq rows of r. */
void la_k512_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo) {
  for (int i0 = 0; i0 < len; i0 += 16) {
    __m512 v[16];
    for (int u = 0; u < 16; u++) {
      const int i = i0 + u;
      __m512 s = _mm512_setzero_ps();
      if (i < len) {
        const int n = i + 1;
        if (A) { /* whole vectors plain, the tail masked (la_k512_elu1) */
          const float *Ai = A + (ptrdiff_t)i * lda;
          int j = 0;
          for (; j + 16 <= n; j += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(Ai + j));
          if (j < n)
            s = _mm512_add_ps(s, _mm512_maskz_loadu_ps((__mmask16)((1u << (n - j)) - 1), Ai + j));
        }
        if (zf) {
          const float *qi = phiq + (ptrdiff_t)i * r;
          int k = 0;
          for (; k + 16 <= r; k += 16)
            s = _mm512_fmadd_ps(_mm512_loadu_ps(qi + k), _mm512_loadu_ps(zf + k), s);
          if (k < r) {
            const __mmask16 mk = (__mmask16)((1u << (r - k)) - 1);
            s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, qi + k), _mm512_maskz_loadu_ps(mk, zf + k), s);
          }
        }
      }
      v[u] = s;
    }
    float t[16];
    _mm512_storeu_ps(t, reduce16x16(v));
    for (int u = 0; u < 16 && i0 + u < len; u++)
      out[(ptrdiff_t)(i0 + u) * ldo] = t[u];
  }
}

void la_k512_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes) {
  const char *p = base;
  for (int i = 0; i < rows; i++, p += ld_bytes)
    for (int b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

/* Row i of the streams in pf (la_simd_pf), into L1: a map calls it once per row, so that the
 * next chunk's prefetches are spread over its loop (la_k512_elu1). */
AI void pf_row(const la_simd_pf *pf, int64_t i) {
  if (pf && i < pf->rows)
    for (int s = 0; s < 2; s++)
      if (pf->p[s])
        for (int b = 0; b < pf->bytes[s]; b += 64) _mm_prefetch(pf->p[s] + i * pf->ld[s] + b, _MM_HINT_T0);
}

/* float64 |x|^2 of a row of dk floats. */
AI double norm2_f64(int dk, const float *xi) {
  __m512d n2 = _mm512_setzero_pd();
  for (int j = 0; j < dk; j += 16) {
    const __m512 xv = dk - j >= 16 ? _mm512_loadu_ps(xi + j) /* plain when whole (elu1) */
                                   : _mm512_maskz_loadu_ps((__mmask16)((1u << (dk - j)) - 1), xi + j);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
    const __m512d hi = _mm512_cvtps_pd(
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
    n2 = _mm512_fmadd_pd(hi, hi, _mm512_fmadd_pd(lo, lo, n2));
  }
  return _mm512_reduce_add_pd(n2);
}

/* favor+ / favor+orf (hyp = 0) and favor-hyp (hyp = 1) rows after the projection (docs/design.md
 * §2); u = phi[i, :m] holds x~ Omega^T:
 *   favor+:    phi_i = m^-1/2 e^{u - max u},                        a_i = max u - s|x|^2/2
 *   favor-hyp: phi_i = (2m)^-1/2 [e^{u - max|u|}, e^{-u - max|u|}],  a_i = max|u| - s|x|^2/2
 * (|x|^2 summed in float64). Domain: finite x; every exp argument is <= 0, flushed to 0 below
 * the float range. */
void la_k512_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  const __m512 c = _mm512_set1_ps((float)(1.0 / sqrt((hyp ? 2.0 : 1.0) * m)));
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r;
    pf_row(pf, i);
    __m512 mx = _mm512_set1_ps(hyp ? 0.0f : -INFINITY);
    /* whole vectors with plain loads and stores, the tail masked (la_k512_elu1); the max in
     * four independent registers (a max is exact, so the order does not change it) */
    const int mw = m & ~15;
    const __mmask16 mt = (__mmask16)((1u << (m - mw)) - 1);
    int j4 = 0;
    if (mw >= 64) {
      __m512 m4[4] = {mx, mx, mx, mx};
      for (; j4 + 64 <= mw; j4 += 64)
        for (int v = 0; v < 4; v++) {
          const __m512 u = _mm512_loadu_ps(pi + j4 + 16 * v);
          m4[v] = _mm512_max_ps(m4[v], hyp ? _mm512_abs_ps(u) : u);
        }
      mx = _mm512_max_ps(_mm512_max_ps(m4[0], m4[1]), _mm512_max_ps(m4[2], m4[3]));
    }
    for (int j = j4; j < mw; j += 16) {
      const __m512 u = _mm512_loadu_ps(pi + j);
      mx = _mm512_max_ps(mx, hyp ? _mm512_abs_ps(u) : u);
    }
    if (mw < m) {
      const __m512 u = _mm512_maskz_loadu_ps(mt, pi + mw);
      mx = _mm512_mask_max_ps(mx, mt, mx, hyp ? _mm512_abs_ps(u) : u);
    }
    const float umax = _mm512_reduce_max_ps(mx);
    const __m512 um = _mm512_set1_ps(umax), z0 = _mm512_setzero_ps();
    for (int j = 0; j < mw; j += 16) {
      const __m512 u = _mm512_loadu_ps(pi + j);
      _mm512_storeu_ps(pi + j, _mm512_mul_ps(c, exp16_nonpos(_mm512_sub_ps(u, um))));
      if (hyp)
        _mm512_storeu_ps(pi + m + j,
                         _mm512_mul_ps(c, exp16_nonpos(_mm512_sub_ps(_mm512_sub_ps(z0, u), um))));
    }
    if (mw < m) {
      const __m512 u = _mm512_maskz_loadu_ps(mt, pi + mw);
      _mm512_mask_storeu_ps(pi + mw, mt, _mm512_mul_ps(c, exp16_nonpos(_mm512_sub_ps(u, um))));
      if (hyp)
        _mm512_mask_storeu_ps(pi + m + mw, mt,
                              _mm512_mul_ps(c, exp16_nonpos(_mm512_sub_ps(_mm512_sub_ps(z0, u), um))));
    }
    a[i] = (double)umax - 0.5 * s * norm2_f64(dk, xi);
  }
}

/* 2^(j/16), j = 0..15, rounded to double (exp8_nonpos). */
static const double exp2_16th_d[16] = {
    1.0, 1.0442737824274138, 1.0905077326652577, 1.1387886347566916,
    1.189207115002721, 1.241857812073484, 1.2968395546510096, 1.3542555469368927,
    1.4142135623730951, 1.4768261459394993, 1.5422108254079407, 1.6104903319492543,
    1.681792830507429, 1.7562521603732995, 1.8340080864093424, 1.9152065613971474};

/* e^x for x <= 0 in float64, 8 lanes (the float64 elu1 and favor maps; docs/design.md §2),
 * the float32 exp16_nonpos's scheme in double: k = round(16 x / ln 2), t = x - k ln2/16 with
 * a two-part ln2/16 whose high part has 38 bits (k hi exact for |k| < 2^15; x >= -708.4
 * gives |k| <= 16352), so |t| <= ln2/32; e^t - 1 by Taylor to degree 7 (truncation
 * t^8/8! < 2e-18, 0.01 ulp); 2^(j/16) from a 16-entry table (vpermt2pd takes k's low four
 * bits, read from k + 1.5 2^52), then 2^floor(k/16) by scalef. 0 below -708.39 (the smallest
 * normal's log); NaN stays NaN. Worst 1.02 ulp against expl on 2^24 points of [-708.4, 0]
 * (0.89 for the degree-13 Taylor on |t| <= ln2/2 it replaced, which took 7.1 against 5.0
 * TSC cycles per 8 lanes in cache; docs/performance.md). tests/test_kern512.c: <= 2 ulp. */
AI __m512d exp8_nonpos(__m512d x) {
  const __m512d lo = _mm512_set1_pd(-708.3964185322641);
  const __mmask8 under = _mm512_cmp_pd_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_pd(lo, x); /* a NaN x is the second operand: kept */
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(23.083120654223414)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d t = _mm512_fnmadd_pd(k, _mm512_set1_pd(0.04332169878489367), x);
  t = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.0291218489310676e-13), t);
  __m512d p = _mm512_set1_pd(1.0 / 5040.0);
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(1.0 / 720.0));
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(1.0 / 120.0));
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(1.0 / 24.0));
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(1.0 / 6.0));
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(0.5));
  p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(1.0));
  p = _mm512_mul_pd(p, t); /* e^t - 1 */
  const __m512i j = _mm512_castpd_si512(_mm512_add_pd(k, _mm512_set1_pd(0x1.8p52)));
  const __m512d T = _mm512_permutex2var_pd(_mm512_loadu_pd(exp2_16th_d), j,
                                           _mm512_loadu_pd(exp2_16th_d + 8));
  return _mm512_maskz_mov_pd((__mmask8)~under,
                             _mm512_scalef_pd(_mm512_fmadd_pd(T, p, T),
                                              _mm512_mul_pd(k, _mm512_set1_pd(0.0625))));
}

/* elu(u) + 1 on 8 float64 lanes: u + 1 above 0, e^u below (min(0, u): a NaN u is kept). */
AI __m512d elu1_8(__m512d u) {
  const __m512d zero = _mm512_setzero_pd();
  const __mmask8 pos = _mm512_cmp_pd_mask(u, zero, _CMP_GT_OQ);
  return _mm512_mask_add_pd(exp8_nonpos(_mm512_min_pd(zero, u)), pos, u, _mm512_set1_pd(1.0));
}

void la_k512_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf) {
  for (int64_t i = 0; i < n; i++) {
    const double *xi = x + i * ld;
    double *pi = phi + i * r;
    if (pf) pf_row(pf, i); /* the next chunk's rows, one row of each stream per row here */
    else if (i + 8 < n) { /* rows strided by all heads (ld = H dk): the row 8 ahead */
      for (int j = 0; j < dk; j += 8) _mm_prefetch((const char *)(xi + 8 * ld + j), _MM_HINT_T0);
    }
    int j = 0;
    for (; j + 8 <= dk; j += 8) /* whole vectors plain, the tail masked (la_k512_elu1) */
      _mm512_storeu_pd(pi + j, elu1_8(_mm512_loadu_pd(xi + j)));
    if (j < dk) {
      const __mmask8 mk = (__mmask8)((1u << (dk - j)) - 1);
      _mm512_mask_storeu_pd(pi + j, mk, elu1_8(_mm512_maskz_loadu_pd(mk, xi + j)));
    }
  }
}

/* The float64 form of la_k512_favor_post: the same rows and scales, |x|^2 summed in order. */
void la_k512_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  const __m512d c = _mm512_set1_pd(1.0 / sqrt((hyp ? 2.0 : 1.0) * m));
  for (int64_t i = 0; i < n; i++) {
    const double *xi = x + i * ld;
    double *pi = phi + i * r;
    pf_row(pf, i);
    __m512d mx = _mm512_set1_pd(hyp ? 0.0 : -INFINITY);
    const int mw = m & ~7; /* whole vectors plain, the tail masked (la_k512_elu1) */
    const __mmask8 mt = (__mmask8)((1u << (m - mw)) - 1);
    for (int j = 0; j < mw; j += 8) {
      const __m512d u = _mm512_loadu_pd(pi + j);
      mx = _mm512_max_pd(mx, hyp ? _mm512_abs_pd(u) : u);
    }
    if (mw < m) {
      const __m512d u = _mm512_maskz_loadu_pd(mt, pi + mw);
      mx = _mm512_mask_max_pd(mx, mt, mx, hyp ? _mm512_abs_pd(u) : u);
    }
    const double umax = _mm512_reduce_max_pd(mx);
    const __m512d um = _mm512_set1_pd(umax), z0 = _mm512_setzero_pd();
    for (int j = 0; j < mw; j += 8) {
      const __m512d u = _mm512_loadu_pd(pi + j);
      _mm512_storeu_pd(pi + j, _mm512_mul_pd(c, exp8_nonpos(_mm512_sub_pd(u, um))));
      if (hyp)
        _mm512_storeu_pd(pi + m + j, _mm512_mul_pd(c, exp8_nonpos(_mm512_sub_pd(_mm512_sub_pd(z0, u), um))));
    }
    if (mw < m) {
      const __m512d u = _mm512_maskz_loadu_pd(mt, pi + mw);
      _mm512_mask_storeu_pd(pi + mw, mt, _mm512_mul_pd(c, exp8_nonpos(_mm512_sub_pd(u, um))));
      if (hyp)
        _mm512_mask_storeu_pd(pi + m + mw, mt,
                              _mm512_mul_pd(c, exp8_nonpos(_mm512_sub_pd(_mm512_sub_pd(z0, u), um))));
    }
    double nrm2 = 0.0;
    for (int j = 0; j < dk; j++) nrm2 += xi[j] * xi[j];
    a[i] = umax - 0.5 * s * nrm2;
  }
}

void la_k512_add_to_f64(size_t n, double *dst, const float *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm512_storeu_pd(dst + i, _mm512_add_pd(_mm512_loadu_pd(dst + i),
                                            _mm512_cvtps_pd(_mm256_loadu_ps(src + i))));
  for (; i < n; i++) dst[i] += (double)src[i];
}

double la_k512_dot_f64(int n, const float *a, const float *b) {
  __m512d s = _mm512_setzero_pd();
  int j = 0;
  for (; j + 8 <= n; j += 8)
    s = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + j)), _mm512_cvtps_pd(_mm256_loadu_ps(b + j)), s);
  double t = _mm512_reduce_add_pd(s);
  for (; j < n; j++) t += (double)a[j] * b[j];
  return t;
}

void la_k512_exp_f64(size_t n, const double *x, double *y) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(y + i, exp8_nonpos(_mm512_loadu_pd(x + i)));
  if (i < n) {
    const __mmask8 m = (__mmask8)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_pd(y + i, m, exp8_nonpos(_mm512_maskz_loadu_pd(m, x + i)));
  }
}

/* dst += src in float64, then f = (float)(base + dst) (base NULL: (float)dst), one pass:
 * la_k512_add_to_f64 followed by la_k512_sum_to_f32 / la_k512_to_f32, bit for bit. */
void la_k512_add_round(size_t n, double *dst, const float *src, const double *base, float *f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d d = _mm512_add_pd(_mm512_loadu_pd(dst + i), _mm512_cvtps_pd(_mm256_loadu_ps(src + i)));
    _mm512_storeu_pd(dst + i, d);
    _mm256_storeu_ps(f + i, _mm512_cvtpd_ps(base ? _mm512_add_pd(_mm512_loadu_pd(base + i), d) : d));
  }
  for (; i < n; i++) {
    dst[i] += (double)src[i];
    f[i] = (float)(base ? base[i] + dst[i] : dst[i]);
  }
}
void la_k512_to_f32(size_t n, const double *src, float *dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm512_cvtpd_ps(_mm512_loadu_pd(src + i)));
  for (; i < n; i++) dst[i] = (float)src[i];
}

void la_k512_sum_to_f32(size_t n, const double *a, const double *b, float *dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm512_cvtpd_ps(_mm512_add_pd(_mm512_loadu_pd(a + i),
                                                            _mm512_loadu_pd(b + i))));
  for (; i < n; i++) dst[i] = (float)(a[i] + b[i]);
}

void la_k512_mul_f32(size_t n, float *x, float f) {
  const __m512 fv = _mm512_set1_ps(f);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), fv));
  for (; i < n; i++) x[i] *= f;
}

void la_k512_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks) {
  for (int i = 0; i < len; i++) {
    const __m512d a = _mm512_set1_pd(q ? qs[i] : 1.0), b = _mm512_set1_pd(ks[i]);
    float *qi = q ? q + (size_t)i * r : NULL, *ki = k + (size_t)i * r;
    const double *Ei = E + (size_t)i * r;
    int f = 0;
    for (; f + 8 <= r; f += 8) {
      const __m512d e = _mm512_loadu_pd(Ei + f);
      const __m512d y = _mm512_cvtps_pd(_mm256_loadu_ps(ki + f));
      if (qi) {
        const __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(qi + f));
        _mm256_storeu_ps(qi + f, _mm512_cvtpd_ps(_mm512_mul_pd(x, _mm512_mul_pd(a, e))));
      }
      _mm256_storeu_ps(ki + f, _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_div_pd(b, e))));
    }
    for (; f < r; f++) {
      if (qi) qi[f] = (float)((double)qi[f] * (qs[i] * Ei[f]));
      ki[f] = (float)((double)ki[f] * (ks[i] / Ei[f]));
    }
  }
}

void la_k512_scale_row(int n, const float *o, double f, float *y) {
  const __m512d fv = _mm512_set1_pd(f);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(o + j)), fv)));
  for (; j < n; j++) y[j] = (float)((double)o[j] * f);
}

/* Up to 8 rows of la_k512_finalize_plain: d = den_s (float64), valid lanes in vm. Returns
 * the lanes that are in the common case (log-scale 0, den_s a positive normal float64). */
AI __mmask8 plain_rows(__mmask8 vm, __m512d d, __m512d l) {
  const __mmask8 ok = _mm512_mask_cmp_pd_mask(vm, d, _mm512_set1_pd(0x1p-1022), _CMP_GE_OQ) &
                      _mm512_mask_cmp_pd_mask(vm, d, _mm512_set1_pd(INFINITY), _CMP_LT_OQ) &
                      _mm512_mask_cmp_pd_mask(vm, l, _mm512_setzero_pd(), _CMP_EQ_OQ);
  return ok;
}

/* den_bin16 of 8 rows: 16 e + #{j in 1..15 : t16[j] <= m}, m = the mantissa in [1, 2) (d
 * positive normal); the valid lanes (vm) go to bin. */
AI void bins8(__mmask8 vm, __m512d d, const double t16[16], int32_t *bin) {
  const __m512d m = _mm512_getmant_pd(d, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);
  __m512d k = _mm512_mul_pd(_mm512_getexp_pd(d), _mm512_set1_pd(16.0)); /* exact */
  for (int j = 1; j < 16; j++)
    k = _mm512_mask_add_pd(k, _mm512_cmp_pd_mask(m, _mm512_set1_pd(t16[j]), _CMP_GE_OQ), k,
                           _mm512_set1_pd(1.0));
  int32_t kb[8];
  _mm256_storeu_si256((__m256i *)kb, _mm512_cvtpd_epi32(k));
  for (int u = 0; u < 8; u++)
    if (vm >> u & 1) bin[u] = kb[u];
}

/* The shared part of la_k512_finalize_plain(_f64) over den[0..len) and lsc: 0 when a row is
 * outside the common case; else the bins, the extremes and inv = 1 / den, and 1. */
static int plain_stats(int len, const double *den, const double *lsc, const double t16[16],
                       int32_t *bin, double *mn, double *mx, double *inv) {
  if (len <= 0 || len > 64) return 0;
  for (int i = 0; i < len; i += 8) { /* every row in the common case before anything is written */
    const __mmask8 vm = len - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (len - i)) - 1);
    const __m512d d = _mm512_maskz_loadu_pd(vm, den + i), l = _mm512_maskz_loadu_pd(vm, lsc + i);
    if (plain_rows(vm, d, l) != vm) return 0;
  }
  __m512d vmn = _mm512_set1_pd(INFINITY), vmx = _mm512_set1_pd(-INFINITY);
  for (int i = 0; i < len; i += 8) {
    const __mmask8 vm = len - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (len - i)) - 1);
    const __m512d d = _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), vm, den + i);
    vmn = _mm512_mask_min_pd(vmn, vm, vmn, d);
    vmx = _mm512_mask_max_pd(vmx, vm, vmx, d);
    bins8(vm, d, t16, bin + i);
    _mm512_mask_storeu_pd(inv + i, vm, _mm512_div_pd(_mm512_set1_pd(1.0), d));
  }
  *mn = _mm512_reduce_min_pd(vmn);
  *mx = _mm512_reduce_max_pd(vmx);
  return 1;
}

int la_k512_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx) {
  const int dv1 = dv + 1;
  double den[64], inv[64];
  for (int i = 0; i < len && i < 64; i++) den[i] = (double)o[(ptrdiff_t)i * dv1 + dv];
  if (!plain_stats(len, den, lsc, t16, bin, mn, mx, inv)) return 0;
  /* y_i = o_i * (1 / den_i) in float64, rounded once (la_k512_scale_row). Whole aligned lines
   * are streamed: never read back here, so skip the read for ownership of each line. */
  const int stream = dv % 16 == 0 && ((uintptr_t)y & 63) == 0 && (ldy & 15) == 0;
  for (int i = 0; i < len; i++) {
    const float *oi = o + (ptrdiff_t)i * dv1;
    float *yi = y + (ptrdiff_t)i * ldy;
    if (!stream) {
      la_k512_scale_row(dv, oi, inv[i], yi);
      continue;
    }
    const __m512d f = _mm512_set1_pd(inv[i]);
    for (int j = 0; j < dv; j += 16) {
      const __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(oi + j)), f));
      const __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(oi + j + 8)), f));
      _mm512_stream_ps(yi + j, _mm512_castpd_ps(_mm512_insertf64x4(
                                   _mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1)));
    }
  }
  if (stream) _mm_sfence(); /* the streamed rows are visible before anyone reads them */
  return 1;
}

int la_k512_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
                               ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                               double *mx) {
  const int dv1 = dv + 1;
  double den[64], inv[64];
  for (int i = 0; i < len && i < 64; i++) den[i] = o[(ptrdiff_t)i * dv1 + dv];
  if (!plain_stats(len, den, lsc, t16, bin, mn, mx, inv)) return 0;
  const int stream = dv % 8 == 0 && ((uintptr_t)y & 63) == 0 && (ldy & 7) == 0;
  for (int i = 0; i < len; i++) {
    const double *oi = o + (ptrdiff_t)i * dv1;
    double *yi = y + (ptrdiff_t)i * ldy;
    const __m512d f = _mm512_set1_pd(inv[i]);
    int j = 0;
    if (stream)
      for (; j < dv; j += 8) _mm512_stream_pd(yi + j, _mm512_mul_pd(_mm512_loadu_pd(oi + j), f));
    for (; j + 8 <= dv; j += 8) _mm512_storeu_pd(yi + j, _mm512_mul_pd(_mm512_loadu_pd(oi + j), f));
    for (; j < dv; j++) yi[j] = oi[j] * inv[i];
  }
  if (stream) _mm_sfence();
  return 1;
}

/* out[i ldo] = sum_k w_k phi[k r + i] (w NULL: w_k = 1, a plain add), k in order, 16
 * features per register: the key summary's z column and the backward's Phi_q^T b. */
void la_k512_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo) {
  for (int i0 = 0; i0 < r; i0 += 16) {
    const __mmask16 mk = r - i0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (r - i0)) - 1);
    __m512 z = _mm512_setzero_ps();
    if (mk == 0xFFFF && !w) /* plain loads when whole (la_k512_elu1) */
      for (int k = 0; k < len; k++) z = _mm512_add_ps(z, _mm512_loadu_ps(phi + (ptrdiff_t)k * r + i0));
    else if (!w)
      for (int k = 0; k < len; k++)
        z = _mm512_add_ps(z, _mm512_maskz_loadu_ps(mk, phi + (ptrdiff_t)k * r + i0));
    else if (mk == 0xFFFF)
      for (int k = 0; k < len; k++)
        z = _mm512_fmadd_ps(_mm512_set1_ps(w[(ptrdiff_t)k * ldw]),
                            _mm512_loadu_ps(phi + (ptrdiff_t)k * r + i0), z);
    else
      for (int k = 0; k < len; k++)
        z = _mm512_fmadd_ps(_mm512_set1_ps(w[(ptrdiff_t)k * ldw]),
                            _mm512_maskz_loadu_ps(mk, phi + (ptrdiff_t)k * r + i0), z);
    float t[16];
    _mm512_storeu_ps(t, z);
    for (int u = 0; u < 16 && i0 + u < r; u++) out[(ptrdiff_t)(i0 + u) * ldo] = t[u];
  }
}

/* elu(x) + 1 (docs/design.md §2) for n rows of dk, 16 lanes at a time; domain: finite x.
 * Row i also prefetches row i of the streams in pf (the next chunk's inputs): spread over the
 * loop like this they arrive in time, where one burst of 768 lines per chunk is mostly dropped
 * (measured: 14 against 35 ns per token for this loop, N = 2^20, H = 4, d = 64). */
/* elu(v) + 1 on 16 lanes: v + 1 above 0, e^v below. */
AI __m512 elu1_16(__m512 v) {
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 pos = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ);
  return _mm512_mask_add_ps(exp16_nonpos(_mm512_min_ps(v, zero)), pos, v, _mm512_set1_ps(1.0f));
}

void la_k512_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf) {
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r;
    pf_row(pf, i);
    int j = 0;
    /* whole vectors with plain loads and stores, only the tail masked: on this project's CPU
     * a masked load costs more even with a full mask (docs/performance.md) */
    for (; j + 16 <= dk; j += 16) _mm512_storeu_ps(pi + j, elu1_16(_mm512_loadu_ps(xi + j)));
    if (j < dk) {
      const __mmask16 mk = (__mmask16)((1u << (dk - j)) - 1);
      _mm512_mask_storeu_ps(pi + j, mk, elu1_16(_mm512_maskz_loadu_ps(mk, xi + j)));
    }
  }
}

/* dk <= 16: x~ fits one register, and the row [1, x~, triangle] is r = 1 + dk + dk(dk+1)/2
 * <= 153 lanes of products a (b w), a and b permuted from [x~, 1] by tables built once per
 * call (w = 1/sqrt 2 on the diagonal, else 1: the bits of xj * (c * xj) and xj * xl), stored
 * as whole vectors but the last (short triangle rows would otherwise be masked stores). */
static void taylor2_small(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                          float rs) {
  enum { NV = 10 }; /* ceil(153 / 16) */
  int ia[NV * 16], ib[NV * 16];
  float w[NV * 16];
  const float c = (float)sqrt(0.5);
  const int nv = (r + 15) / 16;
  for (int p = 0; p < nv * 16; p++) ia[p] = ib[p] = 16, w[p] = 1.0f; /* lane 16: the 1 */
  for (int j = 0; j < dk; j++) ia[1 + j] = j;
  for (int j = 0, p = 1 + dk; j < dk; j++)
    for (int l = j; l < dk; l++, p++) ia[p] = j, ib[p] = l, w[p] = l == j ? c : 1.0f;
  const __m512 one = _mm512_set1_ps(1.0f), vrs = _mm512_set1_ps(rs);
  const __mmask16 mx = (__mmask16)((1u << dk) - 1), ml = (__mmask16)((1u << (r - 16 * (nv - 1))) - 1);
  for (int64_t i = 0; i < n; i++) {
    const __m512 xt = _mm512_mul_ps(vrs, _mm512_maskz_loadu_ps(mx, x + i * ld));
    float *pi = phi + i * r;
    for (int v = 0; v < nv; v++) {
      const __m512 a = _mm512_permutex2var_ps(xt, _mm512_loadu_si512(ia + 16 * v), one);
      const __m512 b = _mm512_mul_ps(_mm512_permutex2var_ps(xt, _mm512_loadu_si512(ib + 16 * v), one),
                                     _mm512_loadu_ps(w + 16 * v));
      if (v < nv - 1) _mm512_storeu_ps(pi + 16 * v, _mm512_mul_ps(a, b));
      else _mm512_mask_storeu_ps(pi + 16 * v, ml, _mm512_mul_ps(a, b));
    }
  }
}

void la_k512_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs) {
  if (dk <= 16) {
    taylor2_small(n, dk, x, ld, phi, r, rs);
    return;
  }
  const float c = (float)sqrt(0.5);
  const __m512 vrs = _mm512_set1_ps(rs);
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r, *xt = pi + 1, *q = pi + 1 + dk;
    pi[0] = 1.0f;
    int j = 0;
    for (; j + 16 <= dk; j += 16) _mm512_storeu_ps(xt + j, _mm512_mul_ps(vrs, _mm512_loadu_ps(xi + j)));
    if (j < dk) {
      const __mmask16 mk = (__mmask16)((1u << (dk - j)) - 1);
      _mm512_mask_storeu_ps(xt + j, mk, _mm512_mul_ps(vrs, _mm512_maskz_loadu_ps(mk, xi + j)));
    }
    for (j = 0; j < dk; j++) { /* row j of the triangle: q[0] the diagonal, q[1..] l > j */
      const float xj = xt[j];
      const __m512 vx = _mm512_set1_ps(xj);
      const float *t = xt + j + 1;
      float *o = q + 1;
      const int len = dk - 1 - j;
      q[0] = xj * (c * xj);
      int l = 0;
      for (; l + 16 <= len; l += 16) _mm512_storeu_ps(o + l, _mm512_mul_ps(vx, _mm512_loadu_ps(t + l)));
      if (l < len) {
        const __mmask16 mk = (__mmask16)((1u << (len - l)) - 1);
        _mm512_mask_storeu_ps(o + l, mk, _mm512_mul_ps(vx, _mm512_maskz_loadu_ps(mk, t + l)));
      }
      q += dk - j;
    }
  }
}

#else /* no AVX-512 at compile time: never selected (la_k512_enabled returns 0) */
void la_k512_exp_f64(size_t n, const double *x, double *y) { (void)n, (void)x, (void)y; }
void la_k512_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri) {
  (void)M; (void)N; (void)K; (void)A; (void)ars; (void)acs; (void)B; (void)ldb; (void)C;
  (void)ldc; (void)acc; (void)tri;
}
void la_k512_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd) {
  (void)rows; (void)cols; (void)src; (void)lds; (void)dst; (void)ldd;
}
void la_k512_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo) {
  (void)len; (void)A; (void)lda; (void)phiq; (void)r; (void)zf; (void)out; (void)ldo;
}
void la_k512_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo) {
  (void)len; (void)r; (void)phi; (void)w; (void)ldw; (void)out; (void)ldo;
}
void la_k512_add_to_f64(size_t n, double *dst, const float *src) {
  (void)n; (void)dst; (void)src;
}
void la_k512_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  (void)n; (void)m; (void)dk; (void)x; (void)ld; (void)phi; (void)r; (void)s; (void)a; (void)hyp; (void)pf;
}
void la_k512_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  (void)n; (void)m; (void)dk; (void)x; (void)ld; (void)phi; (void)r; (void)s; (void)a; (void)hyp; (void)pf;
}
void la_k512_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf) {
  (void)pf;
  (void)n; (void)dk; (void)x; (void)ld; (void)phi; (void)r;
}
void la_k512_add_round(size_t n, double *dst, const float *src, const double *base, float *f) {
  (void)n; (void)dst; (void)src; (void)base; (void)f;
}
void la_k512_to_f32(size_t n, const double *src, float *dst) { (void)n; (void)src; (void)dst; }
void la_k512_sum_to_f32(size_t n, const double *a, const double *b, float *dst) {
  (void)n; (void)a; (void)b; (void)dst;
}
double la_k512_dot_f64(int n, const float *a, const float *b) {
  (void)n; (void)a; (void)b;
  return 0;
}
void la_k512_mul_f32(size_t n, float *x, float f) { (void)n; (void)x; (void)f; }
void la_k512_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks) {
  (void)len; (void)r; (void)q; (void)k; (void)E; (void)qs; (void)ks;
}
void la_k512_scale_row(int n, const float *o, double f, float *y) {
  (void)n; (void)o; (void)f; (void)y;
}
int la_k512_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx) {
  (void)len; (void)dv; (void)o; (void)lsc; (void)y; (void)ldy; (void)t16; (void)bin; (void)mn;
  (void)mx;
  return 0;
}
int la_k512_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
                               ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                               double *mx) {
  (void)len; (void)dv; (void)o; (void)lsc; (void)y; (void)ldy; (void)t16; (void)bin; (void)mn;
  (void)mx;
  return 0;
}
void la_k512_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes) {
  (void)base; (void)rows; (void)ld_bytes; (void)bytes;
}
void la_k512_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf) {
  (void)n; (void)dk; (void)x; (void)ld; (void)phi; (void)r; (void)pf;
}
void la_k512_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs) {
  (void)n; (void)dk; (void)x; (void)ld; (void)phi; (void)r; (void)rs;
}
#endif
