/* Input validation: every value must be finite (docs/design.md §1). A value is non-finite
 * exactly when its exponent field is all ones, and then (bits & E) + the exponent's lowest
 * bit carries into the sign bit, which no finite value reaches. One pass ORs that over the
 * block: and, add and or only, which vectorize on every x86-64 (SSE2) without a dependency
 * longer than the OR. Only a block that fails is scanned again, to name the first bad value. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "linattn/core.h"

static int any_nonfinite_f32(const float *x, size_t n) {
  uint32_t acc = 0;
#pragma omp simd reduction(| : acc)
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    acc |= (b & 0x7f800000u) + 0x00800000u;
  }
  return (int)(acc >> 31);
}

static int any_nonfinite_f64(const double *x, size_t n) {
  uint64_t acc = 0;
#pragma omp simd reduction(| : acc)
  for (size_t i = 0; i < n; i++) {
    uint64_t b;
    memcpy(&b, x + i, sizeof b);
    acc |= (b & 0x7ff0000000000000ULL) + 0x0010000000000000ULL;
  }
  return (int)(acc >> 63);
}

la_status la_check_finite(la_dtype dt, const void *x, int64_t n, int heads, int d,
                          int64_t token0, int64_t *bad_token, int *bad_head, int *bad_col) {
  const int64_t row = (int64_t)heads * d;
  const size_t total = (size_t)n * (size_t)row;
  if (!(dt == LA_F32 ? any_nonfinite_f32(x, total) : any_nonfinite_f64(x, total))) return LA_OK;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < row; j++) {
      double val = dt == LA_F32 ? (double)((const float *)x)[i * row + j]
                                : ((const double *)x)[i * row + j];
      if (!isfinite(val)) {
        *bad_token = token0 + i;
        *bad_head = (int)(j / d);
        *bad_col = (int)(j % d); /* the callers name the input in their own message */
        return la_error(LA_ERR_NONFINITE, "non-finite value at (token %lld, head %d, column %d)",
                        (long long)*bad_token, *bad_head, *bad_col);
      }
    }
  return LA_OK; /* not reached: the first pass found one */
}
