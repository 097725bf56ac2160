/* e^x for x <= 0 on AVX2 + FMA registers: 8 floats (la_exp8_nonpos) or 4 doubles
 * (la_exp4d_nonpos), for the AVX2 maps (kern256_maps.c: elu1's negative branch, the favor
 * maps' exponentials; docs/design.md §2). Include only in a file built with -mavx2 -mfma.
 *
 * Why not kern512.c's scheme (a 16-entry table of 2^(j/16), then a short polynomial): AVX2
 * has no 16-entry permute (vpermps holds 8 floats, and nothing holds 16 doubles but a
 * gather), so here e^x = 2^k e^t with k = round(x / ln 2), |t| <= ln2/2, by a longer
 * polynomial and no table, as vexp.h does; t from a two-part (Cody-Waite) ln 2.
 *
 * float: k from one fma with the shifter 1.5 2^23 + 191, whose low bits then hold k + 191,
 * so a shift gives 2^(k + 64) (no conversion); e^t = 1 + t q, q = 1 + t/2 + ... + t^6/7!
 * (Taylor, degree 7: truncation t^8/8! < 5.4e-9 relative, 0.1 ulp) by Horner, the last step
 * one fma. p 2^(k + 64) is exact and normal, and the product by 2^-64 is the one rounding:
 * results below 2^-126 are the correctly rounded subnormals of p 2^k (gradual underflow, as
 * libm's expf), and x below -104 (e^x < 2^-150) gives +0. A NaN x gives NaN. Measured on
 * every float of [-104, 0] against double exp: 0.937 ulp (normal results), 0.849 of 2^-149
 * (subnormal results); tests/test_kern256_maps.c asserts <= 1.25 and <= 1.
 *
 * double: the same scheme, shifter 1.5 2^52 + 1023 (2^k directly, k >= -1022), Taylor to
 * degree 13 (truncation t^14/14! < 4.2e-18, 0.04 ulp). As kern512.c's exp8_nonpos, 0 below
 * -708.396... (the log of the smallest normal), NaN kept. Measured 0.890 ulp against expl on
 * 2^24 evenly spaced points of [-708.4, 0] and 2^20 random ones (asserted <= 1.25).
 *
 * Cost (bench_kern256_maps, ns per element in L2, this project's AMD EPYC with AVX-512):
 * float 0.27 against 1.62 for vexp.h's scalar loop and 0.12 for kern512.c's 16-lane table
 * form; double 0.93 against 5.1 and 0.43. Before the shifter and the one-fma last step
 * (round, convert, two exact scalings, e^t - 1 then + 1): float 0.32 ns, 1.06 ulp. */
#ifndef LINATTN_VEXP256_H
#define LINATTN_VEXP256_H
#include <immintrin.h>

static inline __attribute__((always_inline)) __m256 la_exp8_nonpos(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x); /* a NaN x is the second operand: kept */
  /* kb = x / ln 2 + 1.5 2^23 + 191, rounded once to an integer (the fma): its low bits
   * hold k + 191, k = round(x / ln 2) in [-151, 0], so kb << 23 is 2^(k + 64) */
  const __m256 sh = _mm256_set1_ps(12583103.0f); /* 1.5 2^23 + 191 */
  const __m256 kb = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), sh);
  const __m256 k = _mm256_sub_ps(kb, sh);
  __m256 t = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), x); /* k hi exact */
  t = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187045e-06f), t);
  /* e^t = 1 + t q, q = 1 + t/2 + ... + t^6/7! by Horner, the last step one fma */
  __m256 q = _mm256_set1_ps(1.0f / 5040);
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f / 720));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f / 120));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f / 24));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f / 6));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(0.5f));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f));
  const __m256 p = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f));
  /* p 2^(k + 64) is exact and normal (k + 64 >= -87); the product by 2^-64 is the one
   * rounding, into the subnormals when p 2^k is below 2^-126 */
  const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(kb), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s), _mm256_set1_ps(0x1p-64f));
}

static inline __attribute__((always_inline)) __m256d la_exp4d_nonpos(__m256d x) {
  const __m256d lo = _mm256_set1_pd(-708.3964185322641);
  const __m256d under = _mm256_cmp_pd(x, lo, _CMP_LT_OQ);
  x = _mm256_max_pd(lo, x); /* a NaN x is the second operand: kept */
  /* kb = x / ln 2 + 1.5 2^52 + 1023 rounded to an integer: kb << 52 is 2^k (k >= -1022) */
  const __m256d sh = _mm256_set1_pd(6755399441056767.0); /* 1.5 2^52 + 1023 */
  const __m256d kb = _mm256_fmadd_pd(x, _mm256_set1_pd(1.4426950408889634074), sh);
  const __m256d k = _mm256_sub_pd(kb, sh);
  __m256d t = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
  t = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), t);
  __m256d q = _mm256_set1_pd(1.0 / 6227020800.0); /* q = 1 + t/2 + ... + t^12/13! */
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 479001600.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 39916800.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 3628800.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 362880.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 40320.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 5040.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 720.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 120.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 24.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0 / 6.0));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(0.5));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0));
  const __m256d p = _mm256_fmadd_pd(q, t, _mm256_set1_pd(1.0));
  const __m256d s = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(kb), 52));
  return _mm256_andnot_pd(under, _mm256_mul_pd(p, s));
}
#endif
