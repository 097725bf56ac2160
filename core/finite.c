/* Input validation: every value must be finite (docs/design.md §1). */
#include <math.h>
#include "linattn/core.h"

la_status la_check_finite(la_dtype dt, const void *x, int64_t n, int heads, int d,
                          int64_t token0, int64_t *bad_token, int *bad_head, int *bad_col) {
  const int64_t row = (int64_t)heads * d;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < row; j++) {
      double val = dt == LA_F32 ? (double)((const float *)x)[i * row + j]
                                : ((const double *)x)[i * row + j];
      if (!isfinite(val)) {
        *bad_token = token0 + i;
        *bad_head = (int)(j / d);
        *bad_col = (int)(j % d);
        return LA_ERR_NONFINITE;
      }
    }
  return LA_OK;
}
