/* Branch-free exp for float and double that the compiler vectorizes (no libm call).
 * exp(x) = 2^n e^t, n = round(x / ln 2), |t| <= ln2/2, e^t by its Taylor polynomial
 * (degree 7 for float, 13 for double: truncation < 0.1 ulp). The range is clamped: below
 * -87.3 (float) / -708.3 (double) the result is 0, above the overflow bound it is +inf.
 * Accuracy is tested against libm in tests/test_core.c (<= 2 ulp). Domain: finite x. */
#ifndef LINATTN_VEXP_H
#define LINATTN_VEXP_H
#include <stdint.h>
#include <string.h>

static inline float la_vexpf(float x) {
  const float lo = -87.33654f, hi = 88.72283f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  const float shifter = 12582912.0f; /* 1.5 * 2^23: rounds to an integer in the mantissa */
  float t = xc * 1.44269504088896341f + shifter;
  float n = t - shifter;
  float r = xc - n * 0.693145751953125f; /* ln2 split in two parts (Cody-Waite) */
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t ti, ni;
  memcpy(&ti, &t, sizeof ti);
  ni = ti - 0x4B400000; /* bits of the shifter: the low bits hold n */
  int32_t sb = (ni + 127) << 23;
  float s;
  memcpy(&s, &sb, sizeof s);
  float y = p * s;
  y = x < lo ? 0.0f : y;
  return x > hi ? __builtin_inff() : y;
}

static inline double la_vexp(double x) {
  const double lo = -708.3964185322641, hi = 709.782712893384;
  double xc = x < lo ? lo : (x > hi ? hi : x);
  const double shifter = 6755399441055744.0; /* 1.5 * 2^52 */
  double t = xc * 1.4426950408889634074 + shifter;
  double n = t - shifter;
  double r = xc - n * 6.93147180369123816490e-01; /* Cody-Waite ln2 split (fdlibm) */
  r = r - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t ti, ni;
  memcpy(&ti, &t, sizeof ti);
  ni = ti - 0x4338000000000000LL;
  int64_t sb = (ni + 1023) << 52;
  double s;
  memcpy(&s, &sb, sizeof s);
  double y = p * s;
  y = x < lo ? 0.0 : y;
  return x > hi ? __builtin_inf() : y;
}
#endif
