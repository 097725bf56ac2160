/* Whether the AVX2 + FMA kernels (kern256.c, kern256_f64.c, kern256_maps.c) may run (docs/design.md §5.5
 * "Kernels per instruction set"): compiled without ISA flags, like simd_cpu.c, so the check
 * itself runs on any CPU. */
#include "kern256.h"

/* 1 if this build has the kernels (x86_64: kern256.c is built with -mavx2 -mfma) and the CPU
 * reports AVX2 and FMA. Decided once per process; a racing first call writes the same value. */
int la_k256_available(void) {
  static int avail = -1;
  if (avail >= 0) return avail;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  avail = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  avail = 0;
#endif
  return avail;
}
