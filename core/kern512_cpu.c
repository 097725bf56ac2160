/* Which float32 kernels a run uses, docs/design.md §4.2: the AVX-512 kernels of kern512.c or
 * OpenBLAS. This file is compiled without AVX-512 flags, so the check itself runs on any CPU.
 * The choice is la_config.kernels (auto | blas | avx512); the environment variable
 * LINATTN_KERNELS, when set to one of those names, overrides it for the whole process. */
#include <stdlib.h>
#include <string.h>
#include "kern512.h"
#include "linattn/core.h"

/* 1 if this build has the kernels and the CPU reports AVX-512F. Decided once per process;
 * a racing first call from two threads writes the same value. */
int la_k512_available(void) {
  static int avail = -1;
  if (avail >= 0) return avail;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  avail = __builtin_cpu_supports("avx512f") != 0; /* a bit, not 1 */
#else
  avail = 0;
#endif
  return avail;
}

la_status la_kernels_resolve(la_kernel_choice choice, int *use_avx512) {
  const char *v = getenv("LINATTN_KERNELS");
  if (v && !strcmp(v, "blas")) choice = LA_KERNELS_BLAS;
  else if (v && !strcmp(v, "avx512")) choice = LA_KERNELS_AVX512;
  else if (v && !strcmp(v, "auto")) choice = LA_KERNELS_AUTO;
  switch (choice) {
  case LA_KERNELS_AUTO: *use_avx512 = la_k512_available(); return LA_OK;
  case LA_KERNELS_BLAS: *use_avx512 = 0; return LA_OK;
  case LA_KERNELS_AVX512:
    *use_avx512 = la_k512_available();
    LA_CHECK(*use_avx512, LA_ERR_UNSUPPORTED,
             "kernels avx512: this CPU (or this build) has no AVX-512F; use auto or blas");
    return LA_OK;
  }
  *use_avx512 = 0;
  return la_error(LA_ERR_ARG, "kernels: unknown choice %d", (int)choice);
}

int la_k512_enabled(void) {
  int on = 0;
  return la_kernels_resolve(LA_KERNELS_AUTO, &on) == LA_OK && on;
}
