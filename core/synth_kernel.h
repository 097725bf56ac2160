/* The synthetic generator's kernel (docs/design.md §2 "Generator"), one source built twice:
 * core/synth.c includes it with the project's default flags (la_synth_rows_generic) and
 * core/synth_avx512.c with -mavx512f -mavx512dq -mavx512vl (la_synth_rows_avx512); synth.c
 * picks one at run time. Both files are compiled with -ffp-contract=off and the kernel uses
 * only IEEE basic operations (+ - * /, sqrt, double -> float) and integer operations, each
 * correctly rounded per lane, so every lane of every build gives the same bits as the
 * scalar code: the value is a pure function of (seed, tensor, token, head, column). (This
 * needs double arithmetic without excess precision: SSE2 or AArch64, not x87.)
 *
 * Definition. Row (token, head) of tensor t has the key
 *   rowkey = mix64(mix64(mix64(seed + C0) ^ (token + C1)) ^ ((2^60 | t << 32 | head) + C2)),
 * (the first three links of la_rng_u64's chain, once per row); pair c (columns 2c, 2c+1) is
 *   x = mix64(rowkey ^ (c + C3)), y = mix64(x ^ C4),
 *   u1 = ((x >> 11) + 1) 2^-53 in (0, 1], u2 = (y >> 11) 2^-53 in [0, 1),
 *   column 2c = scale sqrt(-2 log u1) cos(2 pi u2), column 2c+1 = ... sin(2 pi u2)
 * (Box-Muller), with this file's log (fdlibm's, < 1 ulp) and sin/cos (the angle reduced
 * exactly from the bits of u2, then fdlibm's kernels, < 1 ulp). The uniforms are those of
 * the earlier definition (la_rng_u64(seed, token, key, c)); only log/sin/cos changed. */
#ifndef LINATTN_SYNTH_KERNEL_H
#define LINATTN_SYNTH_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include "linattn/core.h"

/* Rows [token0, token0 + n) as la_synth_rows, on the calling thread only. The _avx512 one
 * exists in every build but may run only when la_synth_avx512_available() (on other builds
 * or CPUs it is the generic code). */
void la_synth_rows_generic(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst);
void la_synth_rows_avx512(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                          int d, double scale, la_dtype dt, void *dst);
/* 1 if this build has the AVX-512 kernel and the CPU reports AVX-512F, DQ and VL. */
int la_synth_avx512_available(void);
/* The kernel's math on its own, for the tests: out[i] = log(m[i] 2^-53), m[i] in [1, 2^53];
 * s[i], c[i] = sin, cos(2 pi m[i] 2^-53), m[i] in [0, 2^53). */
void la_synth_log_generic(size_t n, const uint64_t *m, double *out);
void la_synth_log_avx512(size_t n, const uint64_t *m, double *out);
void la_synth_sincos_generic(size_t n, const uint64_t *m, double *s, double *c);
void la_synth_sincos_avx512(size_t n, const uint64_t *m, double *s, double *c);
#endif

/* ---- the kernel template: define LA_SYNTH_SUFFIX (generic or avx512) before including ---- */
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
SK_AI uint64_t sk_u(double d) {
  uint64_t i;
  memcpy(&i, &d, sizeof i);
  return i;
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
/* (double)r, exact for r in [-2^51, 2^51) */
SK_AI double sk_exact_i51(int64_t r) {
#if defined(__AVX512DQ__) || defined(__aarch64__)
  return (double)r;
#else
  return sk_d(0x4338000000000000ULL + (uint64_t)r) - 0x1.8p52;
#endif
}

/* log(m 2^-53) for m in [1, 2^53], after fdlibm's e_log.c: m 2^-53 = 2^k (1 + f) with
 * 1 + f in [sqrt(2)/2, sqrt(2)) (from the bits), s = f / (2 + f), log(1 + f) =
 * f - f^2/2 + s (f^2/2 + R(s^2)) with its minimax R (|error| < 2^-58.45), and k ln 2 in two
 * parts (ln2_hi k exact for |k| < 2^11). Error < 1 ulp (0.84 measured, tests/test_synth.c). */
SK_AI double sk_log_m53(uint64_t m) {
  uint64_t ix = sk_u(sk_exact_u53(m)); /* m = u1 2^53: its exponent is k + 53 */
  ix += (uint64_t)(0x3ff00000 - 0x3fe6a09e) << 32;
  const uint64_t e = ix >> 52; /* k + 1023 + 53 */
  ix = (ix & 0x000fffffffffffffULL) + (0x3fe6a09eULL << 32);
  const double dk = sk_d(0x4330000000000000ULL + e) - (0x1p52 + 1076.0);
  const double f = sk_d(ix) - 1.0;
  const double hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
  const double t1 = w * (3.999999999940941908e-01 +
                         w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
  const double t2 = z * (6.666666666666735130e-01 +
                         w * (2.857142874366239149e-01 +
                              w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
  const double R = t2 + t1;
  return s * (hfsq + R) + dk * 1.90821492927058770002e-10 - hfsq + f +
         dk * 6.93147180369123816490e-01;
}

/* sin and cos of 2 pi m 2^-53, m in [0, 2^53). Reduction, all exact: q = nearest integer of
 * 4 m 2^-53 (0..4, from the bits), r = m - q 2^51 in [-2^50, 2^50), g = r 2^-51 in
 * [-1/2, 1/2), so the angle is q pi/2 + (pi/2) g. (pi/2) g as a double-double (xh, xl):
 * g = gh + gl with gh its top 26 bits, P1 = pi/2 to 27 bits (gh P1 exact), P2 = pi/2 - P1;
 * xh + xl = gh P1 + (gl P1 + g P2) by Fast2Sum, relative error < 2^-80. Then fdlibm's
 * __kernel_sin / __kernel_cos on |xh| <= pi/4 (polynomial errors < 2^-58), and the quadrant
 * swaps and negates them. Error < 1 ulp (0.79 measured); the zeros of sin and cos are exact. */
SK_AI void sk_sincos_m53(uint64_t m, double *sn, double *cs) {
  const uint64_t q = (m + (1ULL << 50)) >> 51;
  /* g 2^51 = r, and the 2^-51 is in the constants (the same bits: a power of 2) */
  const double g = sk_exact_i51((int64_t)(m - (q << 51)));
  const double gh = sk_d(sk_u(g) & 0xfffffffff8000000ULL), gl = g - gh;
  const double a = gh * 0x1.921fb54p-51, b = gl * 0x1.921fb54p-51 + g * 0x1.10b4611a62633p-81;
  const double x = a + b, y = b - (x - a);
  const double z = x * x, w = z * z;
  /* __kernel_sin(x, y, 1) */
  const double r = 8.33333333332248946124e-03 +
                   z * (-1.98412698298579493134e-04 + z * 2.75573137070700676789e-06) +
                   z * w * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10);
  const double v = z * x;
  const double S = x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01);
  /* __kernel_cos(x, y) */
  const double rc = z * (4.16666666666666019037e-02 +
                         z * (-1.38888888888741095749e-03 + z * 2.48015872894767294178e-05)) +
                    w * w * (-2.75573143513906633035e-07 +
                             z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11));
  const double hz = 0.5 * z, wc = 1.0 - hz;
  const double C = wc + (((1.0 - wc) - hz) + (z * rc - x * y));
  /* quadrant q mod 4: (sin, cos) = (S, C), (C, -S), (-S, -C), (-C, S) */
  const uint64_t sw = 0 - (q & 1), sb = sk_u(S), cb = sk_u(C), qs = q << 62;
  *sn = sk_d(((sb & ~sw) | (cb & sw)) ^ (qs & 0x8000000000000000ULL));
  *cs = sk_d(((cb & ~sw) | (sb & sw)) ^ ((qs + (1ULL << 62)) & 0x8000000000000000ULL));
}

enum { LA_SK_TILE = 256 };

/* The output of tile pairs [0, m) (global pairs J0 + j of the block, J = row np + c) in the
 * columns of dst: for an even d the pairs are contiguous (J -> columns 2J, 2J + 1); for an
 * odd d row by row, the last pair of a row keeping only its cos. */
#define LA_SK_OUT(T)                                                                     \
  do {                                                                                   \
    T *o_ = (T *)dst;                                                                    \
    if (!(d & 1)) {                                                                      \
      T *p_ = o_ + 2 * J0;                                                               \
      _Pragma("omp simd") for (int j = 0; j < m; j++) {                                  \
        double sn, cs;                                                                   \
        sk_sincos_m53(m2[j], &sn, &cs);                                                  \
        p_[2 * j] = (T)(rad[j] * cs);                                                    \
        p_[2 * j + 1] = (T)(rad[j] * sn);                                                \
      }                                                                                  \
    } else {                                                                             \
      for (int64_t J = J0; J < J0 + m;) {                                                \
        const int64_t r = J / np, c = J - r * np;                                        \
        const int cn = (int)(np - c < J0 + m - J ? np - c : J0 + m - J);                 \
        const int j0 = (int)(J - J0), full = c + cn == np ? cn - 1 : cn;                 \
        T *p_ = o_ + r * d + 2 * c;                                                      \
        _Pragma("omp simd") for (int j = 0; j < full; j++) {                             \
          double sn, cs;                                                                 \
          sk_sincos_m53(m2[j0 + j], &sn, &cs);                                           \
          p_[2 * j] = (T)(rad[j0 + j] * cs);                                             \
          p_[2 * j + 1] = (T)(rad[j0 + j] * sn);                                         \
        }                                                                                \
        if (full < cn) {                                                                 \
          double sn, cs;                                                                 \
          sk_sincos_m53(m2[j0 + full], &sn, &cs);                                        \
          p_[2 * full] = (T)(rad[j0 + full] * cs);                                       \
        }                                                                                \
        J += cn;                                                                         \
      }                                                                                  \
    }                                                                                    \
  } while (0)

/* Tiles of LA_SK_TILE pairs of the block's rows (row r = token i, head h, r = i heads + h),
 * in three passes with short loop bodies (the out-of-order core overlaps their iterations):
 * the hash, then log and sqrt, then sin, cos and the stores. */
void LA_SK(la_synth_rows_)(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst) {
  const int64_t np = (d + 1) / 2, P = n * heads * np;
  uint64_t m1[LA_SK_TILE], m2[LA_SK_TILE];
  double rad[LA_SK_TILE];
  const uint64_t k0 = la_mix64(seed + LA_RNG_C0);
  for (int64_t J0 = 0; J0 < P; J0 += LA_SK_TILE) {
    const int m = P - J0 < LA_SK_TILE ? (int)(P - J0) : LA_SK_TILE;
    for (int64_t J = J0; J < J0 + m;) {
      const int64_t r = J / np, c = J - r * np, i = r / heads, h = r - i * heads;
      const int cn = (int)(np - c < J0 + m - J ? np - c : J0 + m - J), j0 = (int)(J - J0);
      const uint64_t key = (1ULL << 60) | ((uint64_t)tensor << 32) | (uint64_t)h;
      const uint64_t k1 = la_mix64(k0 ^ ((uint64_t)(token0 + i) + LA_RNG_C1));
      const uint64_t rk = la_mix64(k1 ^ (key + LA_RNG_C2));
#pragma omp simd
      for (int j = 0; j < cn; j++) {
        const uint64_t x = la_mix64(rk ^ ((uint64_t)(c + j) + LA_RNG_C3));
        m1[j0 + j] = (x >> 11) + 1;
        m2[j0 + j] = la_mix64(x ^ LA_RNG_C4) >> 11;
      }
      J += cn;
    }
#pragma omp simd
    for (int j = 0; j < m; j++) rad[j] = scale * sqrt(-2.0 * sk_log_m53(m1[j]));
    if (dt == LA_F32)
      LA_SK_OUT(float);
    else
      LA_SK_OUT(double);
  }
}

void LA_SK(la_synth_log_)(size_t n, const uint64_t *m, double *out) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) out[i] = sk_log_m53(m[i]);
}

void LA_SK(la_synth_sincos_)(size_t n, const uint64_t *m, double *s, double *c) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    double a, b;
    sk_sincos_m53(m[i], &a, &b);
    s[i] = a;
    c[i] = b;
  }
}
#endif
