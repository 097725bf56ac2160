/* Which kernel table a run uses (docs/design.md §5.5): la_config.kernels, overridden for the
 * whole process by the environment variable LINATTN_KERNELS, against what the CPU reports.
 * This file is compiled without ISA flags, so the checks run on any CPU. */
#include <stdlib.h>
#include <string.h>
#include "kern256.h"
#include "kern512.h"
#include "linattn/core.h"
#include "simd.h"

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

/* One row per instruction set, widest first: what auto tries in order. */
static const struct {
  la_kernel_choice choice;
  const la_simd *table;
  int (*available)(void);
  const char *lacks; /* the reason when it is asked for and absent */
} isa[] = {
    {LA_KERNELS_AVX512, &la_simd_avx512, la_k512_available,
     "kernels avx512: this CPU (or this build) has no AVX-512F; use auto, avx2 or generic"},
    {LA_KERNELS_AVX2, &la_simd_avx2, la_k256_available,
     "kernels avx2: this CPU (or this build) has no AVX2 and FMA; use auto or generic"},
};

static int from_env(la_kernel_choice *choice) {
  static const char *const names[] = {"auto", "blas", "avx512", "avx2", "generic"};
  const char *v = getenv("LINATTN_KERNELS");
  for (int i = 0; v && i < (int)(sizeof names / sizeof *names); i++)
    if (!strcmp(v, names[i])) {
      *choice = (la_kernel_choice)i; /* the names are in enum order (core.h) */
      return 1;
    }
  return 0;
}

la_status la_simd_choose(la_kernel_choice choice, const la_simd **out) {
  *out = NULL;
  from_env(&choice);
  const int n = (int)(sizeof isa / sizeof *isa);
  switch (choice) {
  case LA_KERNELS_BLAS:
  case LA_KERNELS_GENERIC: return LA_OK;
  case LA_KERNELS_AUTO:
    for (int i = 0; i < n; i++)
      if (isa[i].available()) {
        *out = isa[i].table;
        return LA_OK;
      }
    return LA_OK;
  default:
    for (int i = 0; i < n; i++)
      if (isa[i].choice == choice) {
        LA_CHECK(isa[i].available(), LA_ERR_UNSUPPORTED, "%s", isa[i].lacks);
        *out = isa[i].table;
        return LA_OK;
      }
  }
  return la_error(LA_ERR_ARG, "kernels: unknown choice %d", (int)choice);
}

la_status la_kernels_resolve(la_kernel_choice choice, const char **name) {
  const la_simd *t = NULL;
  la_status st = la_simd_choose(choice, &t);
  *name = t ? t->name : "blas";
  return st;
}

int la_k512_enabled(void) {
  const la_simd *t = NULL;
  return la_simd_choose(LA_KERNELS_AUTO, &t) == LA_OK && t == &la_simd_avx512;
}
