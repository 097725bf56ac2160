/* Built-in synthetic workload (docs/cli.md "linattn run"): i.i.d. N(0,1) * A, keyed by
 * (seed, token, head) so every rank count and block size gives the same data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/core.h"

#define LA_STREAM_DATA (1ULL << 60)

/* Columns 2c and 2c+1 of row (token, head) come from Box-Muller on draw
 * la_rng_u64(seed, token, key, c). Per tile of pairs, the uniforms are drawn first, then the
 * transcendental functions (scalar libm: gcc merges sin and cos into sincos, which has no
 * vector variant); the tiles live on the stack, so nothing is allocated. */
enum { LA_SYNTH_TILE = 256 };

void la_synth_rows(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads, int d,
                   double scale, la_dtype dt, void *dst) {
  const int np = (d + 1) / 2;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double u1[LA_SYNTH_TILE], u2[LA_SYNTH_TILE], x[2 * LA_SYNTH_TILE];
    for (int h = 0; h < heads; h++) {
      const uint64_t key = LA_STREAM_DATA | ((uint64_t)tensor << 32) | (uint64_t)h;
      const size_t base = ((size_t)i * heads + h) * d;
      for (int c0 = 0; c0 < np; c0 += LA_SYNTH_TILE) {
        const int m = np - c0 < LA_SYNTH_TILE ? np - c0 : LA_SYNTH_TILE;
        for (int c = 0; c < m; c++)
          la_rng_uniform2(seed, (uint64_t)(token0 + i), key, (uint64_t)(c0 + c), u1 + c, u2 + c);
#pragma omp simd
        for (int c = 0; c < m; c++) {
          double rad = scale * sqrt(-2.0 * log(u1[c])), ang = 6.283185307179586476925 * u2[c];
          x[2 * c] = rad * cos(ang);
          x[2 * c + 1] = rad * sin(ang);
        }
        const int j0 = 2 * c0, nj = d - j0 < 2 * m ? d - j0 : 2 * m;
        if (dt == LA_F32)
          for (int j = 0; j < nj; j++) ((float *)dst)[base + j0 + j] = (float)x[j];
        else
          memcpy((double *)dst + base + j0, x, sizeof(double) * nj);
      }
    }
  }
}
