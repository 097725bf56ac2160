/* AVX2 + FMA forms of the maps and the elementwise kernels (kern256_maps.h), the "avx2"
 * table's counterparts of kern512.c's (docs/design.md §2 maps, §1.1 denominator statistics,
 * §4.2 the chunk's state updates, §5.5 kernels per instruction set). Only this file is built
 * with -mavx2 -mfma, and nothing here runs unless the CPU reports both.
 *
 * Expected gains, written before tuning (against the generic C templates, which gcc
 * vectorizes to SSE2 only in a portable build):
 *  - elu1, favor_post: the exp dominates; 8 lanes of FMA against the generic form's 4 lanes
 *    without FMA (vexp.h if-converted to SSE2): about 2-3x on the exp, more on elu1, whose
 *    generic loop stays scalar where gcc does not vectorize the select (measured by
 *    tools/bench_kern256_maps.c). Against la_k512_*: at best 1/2 of its rate per cycle on a
 *    CPU with full-width AVX-512, about equal where AVX-512 runs as two halves.
 *  - elu1_f64, favor_post_f64: 4 lanes against the generic double exp (2 lanes SSE2): ~2x.
 *  - taylor2: the products are memory-bound stores; ~1.5-2x for dk >= 8, none for dk < 8.
 *  - add_to_f64, add_round, to_f32, sum_to_f32, scale_row, mul_f32: bandwidth-bound
 *    conversions; the gain is only where gcc's SSE2 code is not already at L1/L2 bandwidth
 *    (~1.2-2x), plus no dependence on -O3's vectorizer for the conversions.
 *  - dot_f64: the generic loop is one serial float64 add chain (4-cycle latency per
 *    element); two 4-lane accumulators: ~4-8x.
 *  - finalize_plain: the statistics of 4 rows at a time (bins without log2 or a branch) and
 *    the 1/den scaling in 4 lanes: ~2-3x on the row finalization.
 *  - prefetch: none by itself (the prefetch instruction is the same); it is here so the table
 *    is complete.
 * Measured (tools/bench_kern256_maps, in L2, 512 rows, dk 64, m 256, this project's AMD EPYC
 * with AVX-512; ns per element, generic / avx2 / avx512): elu1 2.02 / 0.31 / 0.11 (6.4x over
 * generic), favor_post 2.47 / 0.44 / 0.22 (5.6x), elu1_f64 6.39 / 1.06 / 0.36 (6.0x),
 * favor_post_f64 6.40 / 1.45 / 0.69 (4.4x): above the expected gains (the generic loops take
 * 7-8 cycles per float element here, not the SSE2 rate assumed); AVX-512 stays 2-3x ahead, its 16-entry-table exp needing fewer operations
 * per lane than the table-free one AVX2 allows (vexp256.h). The others were not timed. */
#include "kern256_maps.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include "vexp256.h"

#define AI static inline __attribute__((always_inline))

/* lanes < rem (0..8) of 8 (float) set: for maskload / maskstore of a tail */
AI __m256i tail8(int rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* lanes < rem (0..4) of 4 (double) set */
AI __m256i tail4(int rem) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(rem), _mm256_setr_epi64x(0, 1, 2, 3));
}

void la_k256_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes) {
  const char *p = base;
  for (int i = 0; i < rows; i++, p += ld_bytes)
    for (int b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

/* Row i of the streams in pf into L1, one row per map row (kern512.c's pf_row: spread over
 * the loop, the next chunk's lines arrive in time where one burst is mostly dropped). */
AI void pf_row(const la_simd_pf *pf, int64_t i) {
  if (pf && i < pf->rows)
    for (int s = 0; s < 2; s++)
      if (pf->p[s])
        for (int b = 0; b < pf->bytes[s]; b += 64) _mm_prefetch(pf->p[s] + i * pf->ld[s] + b, _MM_HINT_T0);
}

/* ---- elu1 ---- */

/* elu(v) + 1 on 8 lanes: v + 1 above 0, e^v below; min(v, 0) returns 0 for a NaN v (the
 * second operand), so a NaN gives e^0 = 1, as the generic loop. */
AI __m256 elu1_8(__m256 v) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 pos = _mm256_cmp_ps(v, zero, _CMP_GT_OQ);
  return _mm256_blendv_ps(la_exp8_nonpos(_mm256_min_ps(v, zero)),
                          _mm256_add_ps(v, _mm256_set1_ps(1.0f)), pos);
}

void la_k256_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf) {
  const int dw = dk & ~7;
  const __m256i mt = tail8(dk - dw);
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r;
    pf_row(pf, i);
    for (int j = 0; j < dw; j += 8) _mm256_storeu_ps(pi + j, elu1_8(_mm256_loadu_ps(xi + j)));
    if (dw < dk) _mm256_maskstore_ps(pi + dw, mt, elu1_8(_mm256_maskload_ps(xi + dw, mt)));
  }
}

/* elu(u) + 1 on 4 float64 lanes; min(0, u) keeps a NaN u (la_k512_elu1_f64). */
AI __m256d elu1_4d(__m256d u) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d pos = _mm256_cmp_pd(u, zero, _CMP_GT_OQ);
  return _mm256_blendv_pd(la_exp4d_nonpos(_mm256_min_pd(zero, u)),
                          _mm256_add_pd(u, _mm256_set1_pd(1.0)), pos);
}

void la_k256_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf) {
  const int dw = dk & ~3;
  const __m256i mt = tail4(dk - dw);
  for (int64_t i = 0; i < n; i++) {
    const double *xi = x + i * ld;
    double *pi = phi + i * r;
    if (pf) pf_row(pf, i);
    else if (i + 8 < n) /* rows strided by all heads (ld = H dk): the row 8 ahead */
      for (int j = 0; j < dk; j += 8) _mm_prefetch((const char *)(xi + 8 * ld + j), _MM_HINT_T0);
    for (int j = 0; j < dw; j += 4) _mm256_storeu_pd(pi + j, elu1_4d(_mm256_loadu_pd(xi + j)));
    if (dw < dk) _mm256_maskstore_pd(pi + dw, mt, elu1_4d(_mm256_maskload_pd(xi + dw, mt)));
  }
}

/* ---- favor ---- */

AI float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
AI double hmax4d(__m256d v) {
  __m128d m = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  m = _mm_max_sd(m, _mm_unpackhi_pd(m, m));
  return _mm_cvtsd_f64(m);
}
AI double hsum4d(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

/* float64 |x|^2 of a row of dk floats, 4 lanes (the 8-float tail masked). */
AI double norm2_f64(int dk, const float *xi) {
  __m256d n2 = _mm256_setzero_pd();
  for (int j = 0; j < dk; j += 8) {
    const __m256 xv = dk - j >= 8 ? _mm256_loadu_ps(xi + j) : _mm256_maskload_ps(xi + j, tail8(dk - j));
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
    n2 = _mm256_fmadd_pd(hi, hi, _mm256_fmadd_pd(lo, lo, n2));
  }
  return hsum4d(n2);
}

/* |v| on 8 float lanes */
AI __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
AI __m256d abs4d(__m256d v) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), v); }

void la_k256_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  const __m256 c = _mm256_set1_ps((float)(1.0 / sqrt((hyp ? 2.0 : 1.0) * m)));
  const int mw = m & ~7;
  const __m256i mt = tail8(m - mw);
  const __m256 ninf = _mm256_set1_ps(hyp ? 0.0f : -INFINITY), z0 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r;
    pf_row(pf, i);
    /* the max in four registers (a max is exact: the order does not change it) */
    __m256 m4[4] = {ninf, ninf, ninf, ninf};
    int j = 0;
    for (; j + 32 <= mw; j += 32)
      for (int v = 0; v < 4; v++) {
        const __m256 u = _mm256_loadu_ps(pi + j + 8 * v);
        m4[v] = _mm256_max_ps(m4[v], hyp ? abs8(u) : u);
      }
    for (; j < mw; j += 8) {
      const __m256 u = _mm256_loadu_ps(pi + j);
      m4[0] = _mm256_max_ps(m4[0], hyp ? abs8(u) : u);
    }
    if (mw < m) { /* masked-out lanes are 0 after maskload: blend the start value in */
      const __m256 u = _mm256_blendv_ps(ninf, _mm256_maskload_ps(pi + mw, mt), _mm256_castsi256_ps(mt));
      m4[1] = _mm256_max_ps(m4[1], hyp ? abs8(u) : u);
    }
    const float umax = hmax8(_mm256_max_ps(_mm256_max_ps(m4[0], m4[1]), _mm256_max_ps(m4[2], m4[3])));
    const __m256 um = _mm256_set1_ps(umax);
    for (j = 0; j < mw; j += 8) {
      const __m256 u = _mm256_loadu_ps(pi + j);
      _mm256_storeu_ps(pi + j, _mm256_mul_ps(c, la_exp8_nonpos(_mm256_sub_ps(u, um))));
      if (hyp)
        _mm256_storeu_ps(pi + m + j,
                         _mm256_mul_ps(c, la_exp8_nonpos(_mm256_sub_ps(_mm256_sub_ps(z0, u), um))));
    }
    if (mw < m) {
      const __m256 u = _mm256_maskload_ps(pi + mw, mt);
      _mm256_maskstore_ps(pi + mw, mt, _mm256_mul_ps(c, la_exp8_nonpos(_mm256_sub_ps(u, um))));
      if (hyp)
        _mm256_maskstore_ps(pi + m + mw, mt,
                            _mm256_mul_ps(c, la_exp8_nonpos(_mm256_sub_ps(_mm256_sub_ps(z0, u), um))));
    }
    a[i] = (double)umax - 0.5 * s * norm2_f64(dk, xi);
  }
}

void la_k256_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  const __m256d c = _mm256_set1_pd(1.0 / sqrt((hyp ? 2.0 : 1.0) * m));
  const int mw = m & ~3;
  const __m256i mt = tail4(m - mw);
  const __m256d ninf = _mm256_set1_pd(hyp ? 0.0 : -INFINITY), z0 = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i++) {
    const double *xi = x + i * ld;
    double *pi = phi + i * r;
    pf_row(pf, i);
    __m256d m0 = ninf, m1 = ninf; /* two chains (a max is exact: any order) */
    int j = 0;
    for (; j + 8 <= mw; j += 8) {
      const __m256d u0 = _mm256_loadu_pd(pi + j), u1 = _mm256_loadu_pd(pi + j + 4);
      m0 = _mm256_max_pd(m0, hyp ? abs4d(u0) : u0);
      m1 = _mm256_max_pd(m1, hyp ? abs4d(u1) : u1);
    }
    if (j < mw) {
      const __m256d u = _mm256_loadu_pd(pi + j);
      m0 = _mm256_max_pd(m0, hyp ? abs4d(u) : u);
    }
    if (mw < m) {
      const __m256d u = _mm256_blendv_pd(ninf, _mm256_maskload_pd(pi + mw, mt), _mm256_castsi256_pd(mt));
      m1 = _mm256_max_pd(m1, hyp ? abs4d(u) : u);
    }
    const double umax = hmax4d(_mm256_max_pd(m0, m1));
    const __m256d um = _mm256_set1_pd(umax);
    for (j = 0; j < mw; j += 4) {
      const __m256d u = _mm256_loadu_pd(pi + j);
      _mm256_storeu_pd(pi + j, _mm256_mul_pd(c, la_exp4d_nonpos(_mm256_sub_pd(u, um))));
      if (hyp)
        _mm256_storeu_pd(pi + m + j,
                         _mm256_mul_pd(c, la_exp4d_nonpos(_mm256_sub_pd(_mm256_sub_pd(z0, u), um))));
    }
    if (mw < m) {
      const __m256d u = _mm256_maskload_pd(pi + mw, mt);
      _mm256_maskstore_pd(pi + mw, mt, _mm256_mul_pd(c, la_exp4d_nonpos(_mm256_sub_pd(u, um))));
      if (hyp)
        _mm256_maskstore_pd(pi + m + mw, mt,
                            _mm256_mul_pd(c, la_exp4d_nonpos(_mm256_sub_pd(_mm256_sub_pd(z0, u), um))));
    }
    double nrm2 = 0.0; /* in order, as la_k512_favor_post_f64 */
    for (j = 0; j < dk; j++) nrm2 += xi[j] * xi[j];
    a[i] = umax - 0.5 * s * nrm2;
  }
}

/* ---- taylor2 ---- */

/* vx * t[0..len) into o, 8 lanes, the tail masked. */
AI void scale_run(__m256 vx, const float *t, float *o, int len) {
  int l = 0;
  for (; l + 8 <= len; l += 8) _mm256_storeu_ps(o + l, _mm256_mul_ps(vx, _mm256_loadu_ps(t + l)));
  if (l < len) {
    const __m256i mk = tail8(len - l);
    _mm256_maskstore_ps(o + l, mk, _mm256_mul_ps(vx, _mm256_maskload_ps(t + l, mk)));
  }
}

/* [1, x~ = rs x, per j: x~_j (c x~_j), x~_j x~_l (l > j)]: each product the generic form's
 * (maps_impl.h), rounded once, so the same bits. */
void la_k256_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs) {
  const float c = (float)sqrt(0.5);
  const __m256 vrs = _mm256_set1_ps(rs);
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * ld;
    float *pi = phi + i * r, *xt = pi + 1, *q = pi + 1 + dk;
    pi[0] = 1.0f;
    scale_run(vrs, xi, xt, dk);
    for (int j = 0; j < dk; j++) { /* row j of the triangle: q[0] the diagonal, q[1..] l > j */
      const float xj = xt[j];
      q[0] = xj * (c * xj);
      scale_run(_mm256_set1_ps(xj), xt + j + 1, q + 1, dk - 1 - j);
      q += dk - j;
    }
  }
}

/* ---- state updates, conversions, row scalings ---- */

void la_k256_add_to_f64(size_t n, double *dst, const float *src) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(dst + i, _mm256_add_pd(_mm256_loadu_pd(dst + i), _mm256_cvtps_pd(_mm_loadu_ps(src + i))));
  for (; i < n; i++) dst[i] += (double)src[i];
}

void la_k256_add_round(size_t n, double *dst, const float *src, const double *base, float *f) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_add_pd(_mm256_loadu_pd(dst + i), _mm256_cvtps_pd(_mm_loadu_ps(src + i)));
    _mm256_storeu_pd(dst + i, d);
    _mm_storeu_ps(f + i, _mm256_cvtpd_ps(base ? _mm256_add_pd(_mm256_loadu_pd(base + i), d) : d));
  }
  for (; i < n; i++) {
    dst[i] += (double)src[i];
    f[i] = (float)(base ? base[i] + dst[i] : dst[i]);
  }
}

void la_k256_to_f32(size_t n, const double *src, float *dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128 lo = _mm256_cvtpd_ps(_mm256_loadu_pd(src + i));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_loadu_pd(src + i + 4));
    _mm256_storeu_ps(dst + i, _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1));
  }
  for (; i < n; i++) dst[i] = (float)src[i];
}

void la_k256_sum_to_f32(size_t n, const double *a, const double *b, float *dst) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(dst + i, _mm256_cvtpd_ps(_mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i))));
  for (; i < n; i++) dst[i] = (float)(a[i] + b[i]);
}

void la_k256_mul_f32(size_t n, float *x, float f) {
  const __m256 fv = _mm256_set1_ps(f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), fv));
  for (; i < n; i++) x[i] *= f;
}

void la_k256_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks) {
  for (int i = 0; i < len; i++) {
    const __m256d a = _mm256_set1_pd(q ? qs[i] : 1.0), b = _mm256_set1_pd(ks[i]);
    float *qi = q ? q + (size_t)i * r : NULL, *ki = k + (size_t)i * r;
    const double *Ei = E + (size_t)i * r;
    int f = 0;
    for (; f + 4 <= r; f += 4) {
      const __m256d e = _mm256_loadu_pd(Ei + f);
      const __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(ki + f));
      if (qi) {
        const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(qi + f));
        _mm_storeu_ps(qi + f, _mm256_cvtpd_ps(_mm256_mul_pd(x, _mm256_mul_pd(a, e))));
      }
      _mm_storeu_ps(ki + f, _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_div_pd(b, e))));
    }
    for (; f < r; f++) {
      if (qi) qi[f] = (float)((double)qi[f] * (qs[i] * Ei[f]));
      ki[f] = (float)((double)ki[f] * (ks[i] / Ei[f]));
    }
  }
}

/* 8 floats of o times f in float64, rounded once each */
AI __m256 scale8(const float *o, __m256d f) {
  const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(o)), f));
  const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(o + 4)), f));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

void la_k256_scale_row(int n, const float *o, double f, float *y) {
  const __m256d fv = _mm256_set1_pd(f);
  int j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, scale8(o + j, fv));
  for (; j < n; j++) y[j] = (float)((double)o[j] * f);
}

double la_k256_dot_f64(int n, const float *a, const float *b) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + j)), _mm256_cvtps_pd(_mm_loadu_ps(b + j)), s0);
    s1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + j + 4)), _mm256_cvtps_pd(_mm_loadu_ps(b + j + 4)), s1);
  }
  double t = hsum4d(_mm256_add_pd(s0, s1));
  for (; j < n; j++) t += (double)a[j] * b[j];
  return t;
}

void la_k256_exp_f64(size_t n, const double *x, double *y) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, la_exp4d_nonpos(_mm256_loadu_pd(x + i)));
  for (; i < n; i++) y[i] = _mm256_cvtsd_f64(la_exp4d_nonpos(_mm256_set1_pd(x[i])));
}

/* ---- finalize_plain ---- */

/* den_bin16 (denominator.h) of 4 positive normal float64 lanes: 16 e + #{j in 1..15 :
 * t16[j] <= m}, e the unbiased exponent, m the mantissa in [1, 2) (from the bits). */
AI __m128i bins4(__m256d d, const double t16[16]) {
  const __m256i u = _mm256_castpd_si256(d);
  const __m256d m = _mm256_castsi256_pd(_mm256_or_si256(
      _mm256_and_si256(u, _mm256_set1_epi64x(0x000fffffffffffffLL)), _mm256_set1_epi64x(0x3ff0000000000000LL)));
  __m256i k = _mm256_slli_epi64(_mm256_sub_epi64(_mm256_srli_epi64(u, 52), _mm256_set1_epi64x(1023)), 4);
  for (int j = 1; j < 16; j++) /* a true compare is -1 in every bit: subtract it */
    k = _mm256_sub_epi64(k, _mm256_castpd_si256(_mm256_cmp_pd(m, _mm256_set1_pd(t16[j]), _CMP_GE_OQ)));
  /* the low 32 bits of each 64-bit lane (the bins fit in 32 bits) */
  const __m256i lo = _mm256_permutevar8x32_epi32(k, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0));
  return _mm256_castsi256_si128(lo);
}

/* The shared part of la_k256_finalize_plain(_f64) over den[0..len) (padded here to a multiple
 * of 4) and lsc: 0 when a row is outside the common case (lsc = 0, den a positive normal
 * float64); else the bins, the extremes and inv = 1 / den, and 1. */
static int plain_stats(int len, double *den, const double *lsc, const double t16[16],
                       int32_t *bin, double *mn, double *mx, double *inv) {
  if (len <= 0 || len > 64) return 0;
  const __m256d tiny = _mm256_set1_pd(0x1p-1022), inf = _mm256_set1_pd(INFINITY), z = _mm256_setzero_pd();
  const int lw = len & ~3;
  for (int i = 0; i < len; i += 4) { /* every row in the common case before anything is written */
    __m256d l;
    if (i < lw) l = _mm256_loadu_pd(lsc + i);
    else l = _mm256_maskload_pd(lsc + i, tail4(len - i)); /* absent lanes 0: pass */
    for (int u = len; u < i + 4; u++) den[u] = den[0]; /* padding that changes no extreme */
    const __m256d d = _mm256_loadu_pd(den + i);
    const __m256d ok = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(d, tiny, _CMP_GE_OQ), _mm256_cmp_pd(d, inf, _CMP_LT_OQ)),
                                     _mm256_cmp_pd(l, z, _CMP_EQ_OQ));
    if (_mm256_movemask_pd(ok) != 0xF) return 0;
  }
  __m256d vmn = _mm256_set1_pd(INFINITY), vmx = _mm256_set1_pd(-INFINITY);
  for (int i = 0; i < len; i += 4) {
    const __m256d d = _mm256_loadu_pd(den + i);
    vmn = _mm256_min_pd(vmn, d);
    vmx = _mm256_max_pd(vmx, d);
    const __m128i b = bins4(d, t16);
    if (i < lw) _mm_storeu_si128((__m128i *)(bin + i), b);
    else {
      int32_t kb[4];
      _mm_storeu_si128((__m128i *)kb, b);
      for (int u = 0; u < len - i; u++) bin[i + u] = kb[u];
    }
    _mm256_storeu_pd(inv + i, _mm256_div_pd(_mm256_set1_pd(1.0), d));
  }
  *mn = -hmax4d(_mm256_sub_pd(z, vmn)); /* min = -max(-x), exact */
  *mx = hmax4d(vmx);
  return 1;
}

int la_k256_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx) {
  const int dv1 = dv + 1;
  double den[64], inv[64];
  for (int i = 0; i < len && i < 64; i++) den[i] = (double)o[(ptrdiff_t)i * dv1 + dv];
  if (!plain_stats(len, den, lsc, t16, bin, mn, mx, inv)) return 0;
  /* y_i = o_i * (1 / den_i) in float64, rounded once (la_k256_scale_row). Whole aligned
   * lines are streamed: never read back here, so skip the read for ownership of each line. */
  const int stream = dv % 16 == 0 && ((uintptr_t)y & 63) == 0 && (ldy & 15) == 0;
  for (int i = 0; i < len; i++) {
    const float *oi = o + (ptrdiff_t)i * dv1;
    float *yi = y + (ptrdiff_t)i * ldy;
    if (!stream) {
      la_k256_scale_row(dv, oi, inv[i], yi);
      continue;
    }
    const __m256d f = _mm256_set1_pd(inv[i]);
    for (int j = 0; j < dv; j += 8) _mm256_stream_ps(yi + j, scale8(oi + j, f));
  }
  if (stream) _mm_sfence(); /* the streamed rows are visible before anyone reads them */
  return 1;
}

int la_k256_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
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
    const __m256d f = _mm256_set1_pd(inv[i]);
    int j = 0;
    if (stream)
      for (; j < dv; j += 4) _mm256_stream_pd(yi + j, _mm256_mul_pd(_mm256_loadu_pd(oi + j), f));
    for (; j + 4 <= dv; j += 4) _mm256_storeu_pd(yi + j, _mm256_mul_pd(_mm256_loadu_pd(oi + j), f));
    for (; j < dv; j++) yi[j] = oi[j] * inv[i];
  }
  if (stream) _mm_sfence();
  return 1;
}

#else /* not x86-64 with AVX2 + FMA at compile time: never selected */
void la_k256_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf) {
  (void)n, (void)dk, (void)x, (void)ld, (void)phi, (void)r, (void)pf;
}
void la_k256_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf) {
  (void)n, (void)dk, (void)x, (void)ld, (void)phi, (void)r, (void)pf;
}
void la_k256_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  (void)n, (void)m, (void)dk, (void)x, (void)ld, (void)phi, (void)r, (void)s, (void)a, (void)hyp, (void)pf;
}
void la_k256_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf) {
  (void)n, (void)m, (void)dk, (void)x, (void)ld, (void)phi, (void)r, (void)s, (void)a, (void)hyp, (void)pf;
}
void la_k256_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs) {
  (void)n, (void)dk, (void)x, (void)ld, (void)phi, (void)r, (void)rs;
}
void la_k256_add_to_f64(size_t n, double *dst, const float *src) { (void)n, (void)dst, (void)src; }
void la_k256_add_round(size_t n, double *dst, const float *src, const double *base, float *f) {
  (void)n, (void)dst, (void)src, (void)base, (void)f;
}
void la_k256_to_f32(size_t n, const double *src, float *dst) { (void)n, (void)src, (void)dst; }
void la_k256_sum_to_f32(size_t n, const double *a, const double *b, float *dst) {
  (void)n, (void)a, (void)b, (void)dst;
}
void la_k256_scale_row(int n, const float *o, double f, float *y) { (void)n, (void)o, (void)f, (void)y; }
void la_k256_mul_f32(size_t n, float *x, float f) { (void)n, (void)x, (void)f; }
void la_k256_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks) {
  (void)len, (void)r, (void)q, (void)k, (void)E, (void)qs, (void)ks;
}
double la_k256_dot_f64(int n, const float *a, const float *b) {
  (void)n, (void)a, (void)b;
  return 0;
}
void la_k256_exp_f64(size_t n, const double *x, double *y) { (void)n, (void)x, (void)y; }
int la_k256_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx) {
  (void)len, (void)dv, (void)o, (void)lsc, (void)y, (void)ldy, (void)t16, (void)bin, (void)mn, (void)mx;
  return 0;
}
int la_k256_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
                               ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                               double *mx) {
  (void)len, (void)dv, (void)o, (void)lsc, (void)y, (void)ldy, (void)t16, (void)bin, (void)mn, (void)mx;
  return 0;
}
void la_k256_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes) {
  (void)base, (void)rows, (void)ld_bytes, (void)bytes;
}
#endif
