/* A loaded --projection (docs/design.md §2.1 "Load"): the checks of its shape and values,
 * without MPI, so that the reader can be tested and fuzzed on its own
 * (tests/fuzz/fuzz_projection.c). */
#include <math.h>
#include <stdio.h>
#include "linattn/core.h"

int la_projection_features(int ndim, const int64_t *shape, int features) {
  if (ndim != 2 && ndim != 3) return features;
  const int64_t m = shape[ndim - 2];
  return m >= 1 && m <= LA_FEATURES_MAX ? (int)m : features;
}

la_status la_projection_check(la_dtype dt, int ndim, const int64_t *shape, const void *data,
                              int heads, int dk, int features) {
  const int64_t m = ndim == 2 || ndim == 3 ? shape[ndim - 2] : 0,
                d = ndim == 2 || ndim == 3 ? shape[ndim - 1] : 0;
  LA_CHECK((dt == LA_F32 || dt == LA_F64) && (ndim == 2 || ndim == 3) &&
           (ndim != 3 || shape[0] == heads) && d == dk && m == features,
           LA_ERR_SHAPE, "projection must be [H=%d, m, dk=%d] or [m, dk=%d] float, with m = "
           "--features (%d)", heads, dk, dk, features);
  const int64_t count = (ndim == 3 ? shape[0] : 1) * m * d;
  for (int64_t i = 0; i < count; i++)
    LA_CHECK(isfinite(dt == LA_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i]),
             LA_ERR_NONFINITE, "non-finite projection entry");
  return LA_OK;
}
