/* e^x for x <= 0 on AVX2 + FMA registers: 8 floats (la_exp8_nonpos) or 4 doubles
 * (la_exp4d_nonpos), for the AVX2 maps (kern256_maps.c: elu1's negative branch, the favor
 * maps' exponentials; docs/design.md §2). Include only in a file built with -mavx2 -mfma.
 *
 * Why not kern512.c's scheme (a 16-entry table of 2^(j/16), then a short polynomial): AVX2
 * has no 16-entry permute (vpermps holds 8 floats, and nothing holds 16 doubles but a
 * gather), so here e^x = 2^k e^t with k = round(x / ln 2), |t| <= ln2/2, by a longer
 * polynomial and no table, as vexp.h does; t from a two-part (Cody-Waite) ln 2.
 *
 * float: e^t = 1 + t + t^2 (1/2 + t/6 + ... + t^5/7!) (Taylor, degree 7: truncation t^8/8! <
 * 5.4e-9 relative, 0.1 ulp). 2^k is applied as two exact powers 2^k1 2^k2 (k1 = floor(k/2)),
 * so p 2^k1 is exact and the one rounding is the last product: results below 2^-126 are the
 * correctly rounded subnormals of p 2^k (gradual underflow, as libm's expf), and x below
 * -104 (where e^x < 2^-150) gives +0. A NaN x gives NaN. Worst error: see
 * tests/test_kern256_maps.c (every float of [-104, 0] against double exp).
 *
 * double: e^t by Taylor to degree 13 (truncation t^14/14! < 4.2e-18, 0.04 ulp), 2^k built
 * in the exponent field (k >= -1022, so 2^k is normal). As kern512.c's exp8_nonpos, 0 below
 * -708.396... (the log of the smallest normal; between it and the exact underflow the result
 * may be one subnormal from p 2^k), NaN kept. Worst error: tests/test_kern256_maps.c (a
 * dense sample of [-708.4, 0] against expl). */
#ifndef LINATTN_VEXP256_H
#define LINATTN_VEXP256_H
#include <immintrin.h>

static inline __attribute__((always_inline)) __m256 la_exp8_nonpos(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x); /* a NaN x is the second operand: kept */
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 t = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), x); /* k hi exact */
  t = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187045e-06f), t);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(t, t), t); /* e^t - 1 */
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i ki = _mm256_cvtps_epi32(k); /* -151 <= k <= 0 */
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  const __m256i b = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static inline __attribute__((always_inline)) __m256d la_exp4d_nonpos(__m256d x) {
  const __m256d lo = _mm256_set1_pd(-708.3964185322641);
  const __m256d under = _mm256_cmp_pd(x, lo, _CMP_LT_OQ);
  x = _mm256_max_pd(lo, x); /* a NaN x is the second operand: kept */
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d t = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
  t = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), t);
  __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 479001600.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 39916800.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 3628800.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 40320.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 720.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 24.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(1.0 / 6.0));
  p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(0.5));
  p = _mm256_fmadd_pd(p, _mm256_mul_pd(t, t), t); /* e^t - 1 */
  p = _mm256_add_pd(p, _mm256_set1_pd(1.0));
  /* k + 1.5 2^52 holds k in its low bits; + 1023 and shifted into the exponent: 2^k */
  const __m256i kb = _mm256_castpd_si256(_mm256_add_pd(k, _mm256_set1_pd(0x1.8p52)));
  const __m256d s = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_add_epi64(kb, _mm256_set1_epi64x(1023)), 52));
  return _mm256_andnot_pd(under, _mm256_mul_pd(p, s));
}
#endif
