/* Rate of the kernel table's GEMM on its own (issue 6, docs/design.md §5.5): the 64 x 64 x 64
 * float32 product that dominates a chunk, repeated in cache on every thread; and of its float64
 * GEMM where it has one. Reported by
 * `linattn bench --gemm-probe` beside OpenBLAS's SGEMM, so that efficiency can be read
 * against both ceilings. */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "simd.h"
#include "la_alloc.h"
#include "linattn/core.h"
#include "la_core_private.h"

/* dbl: the table's gemm_f64 on doubles, else its gemm on floats */
static double probe(int dbl, int threads, int reps, const char **impl) {
  const la_simd *k = NULL;
  *impl = "";
  if (la_simd_choose(LA_KERNELS_AUTO, &k) != LA_OK || !k || threads < 1 || reps < 1) return NAN;
  if (dbl && !k->gemm_f64) return NAN;
  *impl = dbl ? (k == &la_simd_avx512 ? "k512dgemm" : "k256dgemm")
              : k == &la_simd_avx512 ? "k512gemm" : "k256gemm";
  enum { S = 64, ITER = 2000 };
  const size_t es = dbl ? sizeof(double) : sizeof(float);
  char **buf = la_calloc((size_t)threads, sizeof *buf); /* one A | B | C per thread, untimed */
  int bad = !buf;
  for (int t = 0; t < threads && !bad; t++) {
    bad = !(buf[t] = la_malloc(es * S * S * 3));
    for (int i = 0; !bad && i < S * S * 3; i++) {
      const double v = (double)((i * 2654435761u) % 1000) / 1000.0 - 0.5;
      if (dbl) ((double *)buf[t])[i] = v;
      else ((float *)buf[t])[i] = (float)v;
    }
  }
  double best = INFINITY;
  for (int r = 0; r <= reps && !bad; r++) { /* r = 0 warms up */
    double t0 = 0, t1 = 0;
#ifdef _OPENMP
    t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
      char *p = buf[omp_get_thread_num()];
#else
      char *p = buf[0];
#endif
      float *a = (float *)p;
      double *ad = (double *)p;
      for (int it = 0; it < ITER; it++)
        if (dbl) k->gemm_f64(S, S, S, ad, S, 1, ad + S * S, S, ad + 2 * S * S, S, 1, 0);
        else k->gemm(S, S, S, a, S, 1, a + S * S, S, a + 2 * S * S, S, 1, 0);
    }
#ifdef _OPENMP
    t1 = omp_get_wtime();
#endif
    if (r > 0 && t1 - t0 < best) best = t1 - t0;
  }
  for (int t = 0; buf && t < threads; t++) free(buf[t]);
  free(buf);
  if (bad) {
    la_error(LA_ERR_NOMEM, "kernel probe: out of memory for %d threads' 64 x 64 tiles", threads);
    return -1.0;
  }
  if (!(best > 0)) return NAN;
  return 2.0 * S * S * S * ITER * threads / best * 1e-9;
}

double la_kernel_probe_gflops(int threads, int reps, const char **impl) {
  return probe(0, threads, reps, impl);
}
double la_kernel_probe_gflops_f64(int threads, int reps, const char **impl) {
  return probe(1, threads, reps, impl);
}
