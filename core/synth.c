/* Built-in synthetic workload (CONTRACT.md `run`): i.i.d. N(0,1) * A, keyed by
 * (seed, token, head) so every rank count and block size gives the same data. */
#include "linattn/core.h"

#define LA_STREAM_DATA (1ULL << 60)

void la_synth_rows(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads, int d,
                   double scale, la_dtype dt, void *dst) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++)
    for (int h = 0; h < heads; h++)
      for (int j = 0; j < d; j++) {
        double x = scale * la_rng_normal(seed, (uint64_t)(token0 + i),
                                         LA_STREAM_DATA | ((uint64_t)tensor << 32) | (uint64_t)h,
                                         (uint64_t)j);
        size_t idx = ((size_t)i * heads + h) * d + j;
        if (dt == LA_F32) ((float *)dst)[idx] = (float)x;
        else ((double *)dst)[idx] = x;
      }
}
