/* The synthetic generator's kernel (docs/design.md §2.1 "Synthetic inputs"), one source built
 * three times: core/random/synth.c includes it with the project's default flags
 * (la_synth_rows_generic), core/random/synth_avx2.c with -mavx2 -mfma (la_synth_rows_avx2) and
 * core/random/synth_avx512.c with -mavx512f -mavx512dq -mavx512vl -mfma (la_synth_rows_avx512);
 * synth.c picks one at run time. All are compiled with -ffp-contract=off and the kernel uses
 * only IEEE operations that are correctly rounded per lane (+ - * /, sqrt, the conversions,
 * and the fused multiply-adds it names with fmaf) and integer operations, so every lane of
 * every build gives the same bits as the scalar code: the value is a pure function of (seed,
 * tensor, token, head, column). (This needs arithmetic without excess precision: SSE2 or
 * AArch64, not x87. Where the CPU has no FMA, the generic build's fmaf is libm's, exact and
 * slow.)
 *
 * Definition (version 4, since 2026-12-03 evening; docs/design.md §2.1). Row (token, head)
 * of tensor t has the key
 *   rowkey = mix64(mix64(mix64(seed + C0) ^ (token + C1)) ^ ((2^60 | t << 32 | head) + C2)),
 * (the first three links of la_rng_u64's chain, once per row); pair c (columns 2c, 2c+1) is
 * one draw x = mix64(rowkey ^ (c + C3)) = la_rng_u64(seed, token, key, c), split into
 *   u1 = float((x >> 24) + 1) 2^-40 in [2^-40, 1] (40 bits, rounded once to float),
 *   u2 = (x mod 2^24) 2^-24 in [0, 1) (24 bits),
 *   z = sqrt(-2 log u1) (cos, sin)(2 pi u2) in float (Box-Muller), with this file's -2 log
 *   (reduced from the bits, a degree-8 polynomial, no division; < 0.87 ulp over every float
 *   of [2^-40, 1]) and sin/cos (the angle reduced exactly from the bits of u2, then minimax
 *   polynomials of degree 7 and 8, < 2 ulp), their polynomials evaluated with fmaf as written
 *   below, and the columns are scale z, computed in double and rounded to the output type
 *   (z itself when scale = 1). So a value is a normal truncated at |z| <= sqrt(80 ln 2) = 7.45
 *   (probability of more: 1e-13), a float32 row is the float64 row rounded, and a float64
 *   row at scale 1 holds float32 values.
 * Version 3 was the same with fdlibm's logf (s = f / (2 + f), a polynomial in s^2) and
 * fdlibm's float sin and cos kernels (degree 9 and a compensated degree 10); it took 35 %
 * longer, and values differ in the last bits. Version 2 was version 3 without the fused
 * multiply-adds (14 % slower again). Version 1 computed log, sin and cos in double from two
 * draws per pair; it was 2.4 times slower than version 2 and its values differ. */
#ifndef LINATTN_SYNTH_KERNEL_H
#define LINATTN_SYNTH_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include "linattn/core.h"
#include "../la_core_private.h"

/* Rows [token0, token0 + n) as la_synth_rows, on the calling thread only. The _avx2 and
 * _avx512 ones exist in every build but may run only when la_synth_avx2_available() or
 * la_synth_avx512_available() (on other builds or CPUs they are the generic code). */
void la_synth_rows_generic(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst);
void la_synth_rows_avx2(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads, int d,
                        double scale, la_dtype dt, void *dst);
void la_synth_rows_avx512(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                          int d, double scale, la_dtype dt, void *dst);
/* 1 if this build has the AVX-512 kernel and the CPU reports AVX-512F, DQ, VL and FMA. */
int la_synth_avx512_available(void);
/* 1 if this build has the AVX2 kernel and the CPU reports AVX2 and FMA. */
int la_synth_avx2_available(void);
/* The kernel's math on its own, for the tests: out[i] = -2 log(u[i]), u[i] a positive normal
 * float; s[i], c[i] = sin, cos(2 pi m[i] 2^-24), m[i] in [0, 2^24). */
void la_synth_m2log_generic(size_t n, const float *u, float *out);
void la_synth_m2log_avx2(size_t n, const float *u, float *out);
void la_synth_m2log_avx512(size_t n, const float *u, float *out);
void la_synth_sincos_generic(size_t n, const uint32_t *m, float *s, float *c);
void la_synth_sincos_avx2(size_t n, const uint32_t *m, float *s, float *c);
void la_synth_sincos_avx512(size_t n, const uint32_t *m, float *s, float *c);
#endif

/* ---- the kernel template: define LA_SYNTH_SUFFIX (generic, avx2 or avx512) before including ---- */
#ifdef LA_SYNTH_SUFFIX
#include <math.h>
#include <string.h>
#include "rng_chain.h"

#define LA_SK_CAT2(a, b) a##b
#define LA_SK_CAT(a, b) LA_SK_CAT2(a, b)
#define LA_SK(name) LA_SK_CAT(name, LA_SYNTH_SUFFIX)
#define SK_AI static inline __attribute__((always_inline))

SK_AI double sk_d(uint64_t i) {
  double d;
  memcpy(&d, &i, sizeof d);
  return d;
}

/* (double)m, exact for m in [0, 2^53]: one instruction with AVX-512DQ; without it (SSE2, AVX2
 * have no int64 -> double conversion) 2 (m >> 1) from the bits, + (m & 1). Same value. */
SK_AI double sk_exact_u53(uint64_t m) {
#if defined(__AVX512DQ__) || defined(__aarch64__)
  return (double)(int64_t)m;
#else /* 2^53 + 2 (m >> 1) has the bits 2^53 + (m >> 1), the ulp being 2 there */
  return (sk_d(0x4340000000000000ULL + (m >> 1)) - 0x1p53) +
         sk_d((0 - (m & 1)) & 0x3ff0000000000000ULL); /* + 0.0 or 1.0 */
#endif
}
/* float(m) for m in [1, 2^40], one rounding: with AVX-512DQ straight from the integer
 * (vcvtqq2ps), else through the exact double. The same value either way. */
SK_AI float sk_round_u40(uint64_t m) {
#if defined(__AVX512DQ__) || defined(__aarch64__)
  return (float)(int64_t)m;
#else
  return (float)sk_exact_u53(m);
#endif
}
SK_AI float sk_fu(uint32_t i) {
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}
SK_AI uint32_t sk_uf(float f) {
  uint32_t i;
  memcpy(&i, &f, sizeof i);
  return i;
}

/* -2 log(u 2^(127 - bias)) for a positive normal float u: bias = 127 for u itself; the kernel
 * passes X = float((x >> 24) + 1) in [1, 2^40] with bias 167, for u1 = X 2^-40 (the exponent
 * shifted instead of a multiply). Branch-free: u = 2^k x with x in [sqrt(2)/2, sqrt(2)) from
 * the bits (fdlibm's split), g = 2 - 2x = -2 (x - 1) exactly (|g| <= 0.83),
 *   -2 log x = g + g^2 Q(g),  Q of degree 8 fitted to (-2 log(1 - g/2) - g) / g^2 for the
 *   relative error of the sum (0.09 ulp before rounding), Horner in fused multiply-adds,
 * and -2 log u = k (-2 ln 2) + (-2 log x) in one fused multiply-add (-2 ln 2 rounded to
 * float; k is exact). No division. Error < 0.87 ulp over every float of [2^-40, 1]
 * (tests/test_synth.c; docs/design.md §2.1). log(1) gives +0. */
SK_AI float sk_m2logf(float u, int32_t bias) {
  uint32_t ix = sk_uf(u);
  int32_t k = (int32_t)(ix >> 23) - bias;
  ix &= 0x007fffffu;
  const uint32_t i = (ix + 0x4afb20u) & 0x800000u; /* 0x95f64 << 3: mantissa >= sqrt(2) */
  const float x = sk_fu(ix | (i ^ 0x3f800000u));     /* 1 + f, or (1 + f) / 2 */
  k += (int32_t)(i >> 23);
  const float g = fmaf(x, -2.0f, 2.0f), G = g * g;
  float q = fmaf(g, 1.488693379e-04f, 5.040895194e-04f);
  q = fmaf(q, g, 1.034607529e-03f);
  q = fmaf(q, g, 2.215902787e-03f);
  q = fmaf(q, g, 5.190336611e-03f);
  q = fmaf(q, g, 1.250123512e-02f);
  q = fmaf(q, g, 3.125197813e-02f);
  q = fmaf(q, g, 8.333331347e-02f);
  q = fmaf(q, g, 2.499999404e-01f);
  return fmaf((float)k, -1.386294361f, fmaf(G, q, g));
}

/* sin and cos of 2 pi m 2^-24, m in [0, 2^24). Reduction, exact: q = nearest integer of
 * 4 m 2^-24 (0..4, from the bits), r = m - q 2^22 in [-2^21, 2^21), so the angle is
 * q pi/2 + (pi/2) r 2^-22; x = r (pi/2 2^-22) in float, |x| <= pi/4 (two roundings: of the
 * constant and of the product). Then, z = x^2, minimax polynomials fitted for the relative
 * error on [0, pi/4] (version 4; docs/design.md §2.1), in Horner form with fused
 * multiply-adds:
 *   S = x + x z (s1 + z (s2 + z s3))            (0.13 ulp before rounding)
 *   C = 1 + z (-1/2 + z (c1 + z (c2 + z c3)))   (0.003 ulp before rounding)
 * and the quadrant swaps and negates them. The zeros of sin and cos are exact. Error < 2 ulp
 * against the exact sin, cos(2 pi m 2^-24) (measured over the whole domain,
 * tests/test_synth.c). */
SK_AI void sk_sincosf_m24(uint32_t m, float *sn, float *cs) {
  const uint32_t q = (m + (1u << 21)) >> 22;
  const float x = (float)(int32_t)(m - (q << 22)) * 0x1.921fb6p-22f; /* fl(pi/2) 2^-22 */
  const float z = x * x;
  const float ps = fmaf(z, fmaf(z, -1.951528684e-04f, 8.332161233e-03f), -1.666665524e-01f);
  const float S = fmaf(x * z, ps, x);
  float pc = fmaf(z, 2.443315680e-05f, -1.388731645e-03f);
  pc = fmaf(z, pc, 4.166664556e-02f);
  pc = fmaf(z, pc, -0.5f);
  const float C = fmaf(z, pc, 1.0f);
  /* quadrant q mod 4: (sin, cos) = (S, C), (C, -S), (-S, -C), (-C, S) */
  const uint32_t sw = 0u - (q & 1u), sb = sk_uf(S), cb = sk_uf(C), qs = q << 30;
  *sn = sk_fu(((sb & ~sw) | (cb & sw)) ^ (qs & 0x80000000u));
  *cs = sk_fu(((cb & ~sw) | (sb & sw)) ^ ((qs + (1u << 30)) & 0x80000000u));
}

enum { LA_SK_TILE = 256 };

/* The output of tile pairs [0, m) (global pairs J0 + j of the block, J = row np + c) in the
 * columns of dst: z = rad (cos, sin) in float, then scale z in double (skipped when scale is
 * 1) rounded to T. For an even d the pairs are contiguous (J -> columns 2J, 2J + 1); for an
 * odd d row by row, the last pair of a row keeping only its cos. */
#define LA_SK_UNIT(T, zf) ((T)(zf))
#define LA_SK_SCALED(T, zf) ((T)(scale * (double)(zf)))
#define LA_SK_OUT(T, VAL)                                                                  \
  do {                                                                                   \
    T *o_ = (T *)dst;                                                                    \
    if (!(d & 1)) {                                                                      \
      T *p_ = o_ + 2 * J0;                                                               \
      _Pragma("omp simd") for (int j = 0; j < m; j++) {                                  \
        float sn, cs;                                                                    \
        sk_sincosf_m24(m2[j], &sn, &cs);                                                 \
        p_[2 * j] = VAL(T, rad[j] * cs);                                           \
        p_[2 * j + 1] = VAL(T, rad[j] * sn);                                       \
      }                                                                                  \
    } else {                                                                             \
      for (int64_t J = J0; J < J0 + m;) {                                                \
        const int64_t r = J / np, c = J - r * np;                                        \
        const int cn = (int)(np - c < J0 + m - J ? np - c : J0 + m - J);                 \
        const int j0 = (int)(J - J0), full = c + cn == np ? cn - 1 : cn;                 \
        T *p_ = o_ + r * d + 2 * c;                                                      \
        _Pragma("omp simd") for (int j = 0; j < full; j++) {                             \
          float sn, cs;                                                                  \
          sk_sincosf_m24(m2[j0 + j], &sn, &cs);                                          \
          p_[2 * j] = VAL(T, rad[j0 + j] * cs);                                    \
          p_[2 * j + 1] = VAL(T, rad[j0 + j] * sn);                                \
        }                                                                                \
        if (full < cn) {                                                                 \
          float sn, cs;                                                                  \
          sk_sincosf_m24(m2[j0 + full], &sn, &cs);                                       \
          p_[2 * full] = VAL(T, rad[j0 + full] * cs);                              \
        }                                                                                \
        J += cn;                                                                         \
      }                                                                                  \
    }                                                                                    \
  } while (0)

/* Tiles of LA_SK_TILE pairs of the block's rows (row r = token i, head h, r = i heads + h),
 * in three passes with short loop bodies (the out-of-order core overlaps their iterations):
 * the hash and the uniforms (64-bit lanes), then log and sqrt, then sin, cos and the stores
 * (32-bit lanes). */
void LA_SK(la_synth_rows_)(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst) {
  const int64_t np = (d + 1) / 2, P = n * heads * np;
  const int unit = scale == 1.0;
  float xu[LA_SK_TILE], rad[LA_SK_TILE]; /* xu = 2^40 u1 */
  uint32_t m2[LA_SK_TILE];
  /* j + C3 from a table: the vector loop then adds c to a load instead of widening an int
   * counter to 64-bit lanes (8 % fewer cycles in cache, the same bits; docs/design.md §2.1) */
  uint64_t cj[LA_SK_TILE];
  for (int j = 0; j < LA_SK_TILE; j++) cj[j] = (uint64_t)j + LA_RNG_C3;
  /* the row and pair at the tile's cursor, advanced without divisions: pair c of row
   * (token i, head h), whose key rk is recomputed once per row (k1 once per token) */
  const uint64_t k0 = la_mix64(seed + LA_RNG_C0), tkey = (1ULL << 60) | ((uint64_t)tensor << 32);
  int64_t i = 0, c = 0;
  int h = 0;
  uint64_t k1 = la_mix64(k0 ^ ((uint64_t)token0 + LA_RNG_C1));
  uint64_t rk = la_mix64(k1 ^ (tkey + LA_RNG_C2));
  for (int64_t J0 = 0; J0 < P; J0 += LA_SK_TILE) {
    const int m = P - J0 < LA_SK_TILE ? (int)(P - J0) : LA_SK_TILE;
    for (int j0 = 0; j0 < m;) {
      const int cn = (int)(np - c < m - j0 ? np - c : m - j0);
      const uint64_t cb = (uint64_t)c;
#pragma omp simd
      for (int j = 0; j < cn; j++) {
        const uint64_t x = la_mix64(rk ^ (cb + cj[j]));
        /* u1 = float((x >> 24) + 1) 2^-40: one rounding (sk_round_u40); the 2^-40 is
         * sk_m2logf's bias (167) */
        xu[j0 + j] = sk_round_u40((x >> 24) + 1);
        m2[j0 + j] = (uint32_t)(x & 0xffffffu);
      }
      j0 += cn;
      c += cn;
      if (c == np) { /* the next row (one past the last is computed and not used) */
        c = 0;
        if (++h == heads) {
          h = 0;
          ++i;
          k1 = la_mix64(k0 ^ ((uint64_t)(token0 + i) + LA_RNG_C1));
        }
        rk = la_mix64(k1 ^ ((tkey | (uint64_t)h) + LA_RNG_C2));
      }
    }
#pragma omp simd
    for (int j = 0; j < m; j++) rad[j] = sqrtf(sk_m2logf(xu[j], 167));
    /* four loops, so that no loop evaluates both forms and blends them */
    if (dt == LA_F32 && unit)
      LA_SK_OUT(float, LA_SK_UNIT);
    else if (dt == LA_F32)
      LA_SK_OUT(float, LA_SK_SCALED);
    else if (unit)
      LA_SK_OUT(double, LA_SK_UNIT);
    else
      LA_SK_OUT(double, LA_SK_SCALED);
  }
}

void LA_SK(la_synth_m2log_)(size_t n, const float *u, float *out) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) out[i] = sk_m2logf(u[i], 127);
}

void LA_SK(la_synth_sincos_)(size_t n, const uint32_t *m, float *s, float *c) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float a, b;
    sk_sincosf_m24(m[i], &a, &b);
    s[i] = a;
    c[i] = b;
  }
}
#endif
