/* Rate of the AVX-512 chunk kernel on its own (issue 6): the 64 x 64 x 64 float32 product
 * that dominates a chunk (kern512.c), repeated in cache on every thread. Reported by
 * `linattn bench --gemm-probe` beside OpenBLAS's SGEMM, so that efficiency can be read
 * against both ceilings. */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kern512.h"
#include "linattn/core.h"

double la_kernel_probe_gflops(int threads, int reps) {
  if (!la_k512_enabled() || threads < 1 || reps < 1) return NAN;
  enum { S = 64, ITER = 2000 };
  double best = INFINITY;
  int bad = 0;
  for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
    double t0 = 0, t1 = 0;
#ifdef _OPENMP
    t0 = omp_get_wtime();
#endif
#pragma omp parallel num_threads(threads) reduction(| : bad)
    {
      float *a = malloc(sizeof(float) * S * S * 3);
      if (!a) {
        bad = 1;
      } else {
        for (int i = 0; i < S * S * 3; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (int it = 0; it < ITER; it++)
          la_k512_gemm(S, S, S, a, S, 1, a + S * S, S, a + 2 * S * S, S, 1, 0);
        free(a);
      }
    }
#ifdef _OPENMP
    t1 = omp_get_wtime();
#endif
    if (r > 0 && t1 - t0 < best) best = t1 - t0;
  }
  if (bad || !(best > 0)) return NAN;
  return 2.0 * S * S * S * ITER * threads / best * 1e-9;
}
