/* Built-in synthetic workload (docs/cli.md "linattn run"): i.i.d. N(0,1) * A, keyed by
 * (seed, tensor, token, head, column) so every rank count, block size and thread count gives
 * the same data. The definition and the kernel are in synth_kernel.h; this file instantiates
 * the generic build of it and picks, once per process, the AVX-512 build (synth_avx512.c)
 * when the CPU has it, else the AVX2 one (synth_avx2.c). All give the same bits
 * (tests/test_synth.c). */
#include "synth_kernel.h"

#include "kern512.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#define LA_SYNTH_SUFFIX generic
#include "synth_kernel.h"

int la_synth_avx512_available(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  static int avail = -1; /* a racing first call from two threads writes the same value */
  if (avail < 0)
    avail = la_k512_available() && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  return avail;
#else
  return 0;
#endif
}

int la_synth_avx2_available(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  static int avail = -1; /* as above; libgcc's check includes the OS's YMM state (XCR0) */
  if (avail < 0) avail = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avail;
#else
  return 0;
#endif
}

/* Threads take blocks of LA_SYNTH_BLOCK tokens; which thread made a row changes nothing. */
enum { LA_SYNTH_BLOCK = 16 };

void la_synth_rows_threads(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst, int threads) {
  void (*rows)(uint64_t, int, int64_t, int64_t, int, int, double, la_dtype, void *) =
      la_synth_avx512_available() ? la_synth_rows_avx512
      : la_synth_avx2_available() ? la_synth_rows_avx2
                                  : la_synth_rows_generic;
  const size_t esz = dt == LA_F32 ? sizeof(float) : sizeof(double);
  const int64_t nb = (n + LA_SYNTH_BLOCK - 1) / LA_SYNTH_BLOCK;
#ifdef _OPENMP
  if (threads <= 0) threads = omp_get_max_threads();
#else
  (void)threads; /* one thread without OpenMP (the smpi preset) */
#endif
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
  for (int64_t b = 0; b < nb; b++) {
    const int64_t i0 = b * LA_SYNTH_BLOCK, m = n - i0 < LA_SYNTH_BLOCK ? n - i0 : LA_SYNTH_BLOCK;
    rows(seed, tensor, token0 + i0, m, heads, d, scale, dt,
         (char *)dst + (size_t)i0 * (size_t)heads * (size_t)d * esz);
  }
}

void la_synth_rows(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads, int d,
                   double scale, la_dtype dt, void *dst) {
  la_synth_rows_threads(seed, tensor, token0, n, heads, d, scale, dt, dst, 0);
}
