/* The kernel tables (core/simd/simd.h, docs/design.md §5.5): every entry of every table is set
 * (the templates call them without a NULL check); --kernels and LINATTN_KERNELS choose as
 * documented; an instruction set the CPU lacks is refused with its reason; the engine and the
 * report name the table that ran. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"
#include "../core/simd/simd.h"

#include "check.h"

static void table_complete(const la_simd *t) {
  CHECK(t->name && t->name[0], "a table has a name");
  /* the entries after the name, all function pointers */
  const size_t n = (sizeof *t - offsetof(la_simd, gemm)) / sizeof(void (*)(void));
  const char *base = (const char *)t + offsetof(la_simd, gemm);
  /* gemm_f64 alone may be NULL (OpenBLAS's DGEMM is the faster there, simd.h) */
  const size_t opt = (offsetof(la_simd, gemm_f64) - offsetof(la_simd, gemm)) / sizeof(void (*)(void));
  int missing = 0;
  for (size_t i = 0; i < n; i++) {
    void (*f)(void);
    memcpy(&f, base + i * sizeof f, sizeof f);
    missing += f == NULL && i != opt;
  }
  CHECK(n == 23 && missing == 0, "table %s: %zu entries, %d unset", t->name, n, missing);
}

int main(void) {
  if (getenv("LINATTN_KERNELS")) unsetenv("LINATTN_KERNELS"); /* this test sets it itself */
  table_complete(&la_simd_avx512);
  table_complete(&la_simd_avx2);
  const la_simd *t = (const la_simd *)&t;
  CHECK(la_simd_choose(LA_KERNELS_BLAS, &t) == LA_OK && t == NULL, "blas: no table");
  CHECK(la_simd_choose(LA_KERNELS_GENERIC, &t) == LA_OK && t == NULL, "generic: no table");
  const la_simd *a = NULL;
  CHECK(la_simd_choose(LA_KERNELS_AUTO, &a) == LA_OK, "auto never fails");
  la_status st = la_simd_choose(LA_KERNELS_AVX512, &t);
  CHECK(st == LA_OK ? t == &la_simd_avx512 && a == t
                    : st == LA_ERR_UNSUPPORTED && strstr(la_error_message(), "AVX-512F") && !t,
        "avx512: the table, and auto's choice, or refused with its reason (%s)",
        st == LA_OK ? "" : la_error_message());
  st = la_simd_choose(LA_KERNELS_AVX2, &t);
  CHECK(st == LA_OK ? t == &la_simd_avx2 && (a == t || a == &la_simd_avx512)
                    : st == LA_ERR_UNSUPPORTED && strstr(la_error_message(), "AVX2") && !t &&
                          a == NULL,
        "avx2: the table (auto: it or a wider one), or refused with its reason (%s)",
        st == LA_OK ? "" : la_error_message());
  CHECK(la_simd_choose((la_kernel_choice)99, &t) == LA_ERR_ARG, "an unknown choice is refused");
  /* LINATTN_KERNELS overrides the config for the process */
  setenv("LINATTN_KERNELS", "generic", 1);
  CHECK(la_simd_choose(LA_KERNELS_AUTO, &t) == LA_OK && t == NULL, "LINATTN_KERNELS=generic");
  const char *name = NULL;
  CHECK(la_kernels_resolve(LA_KERNELS_AVX512, &name) == LA_OK && !strcmp(name, "blas"),
        "the environment overrides --kernels: %s", name ? name : "(null)");
  unsetenv("LINATTN_KERNELS");
  /* the engine reports the table it runs, float32 and float64 */
  la_config c;
  la_config_default(&c);
  for (int k = 0; k <= LA_KERNELS_GENERIC; k++) {
    c.kernels = (la_kernel_choice)k;
    la_featmap fm = NULL;
    la_engine e = NULL;
    const la_simd *want = NULL;
    st = la_simd_choose(c.kernels, &want);
    if (st != LA_OK) {
      CHECK(la_featmap_create(&c, 2, 8, &fm) == st && !fm, "kernels %d refused by the featmap", k);
      continue;
    }
    CHECK(la_featmap_create(&c, 2, 8, &fm) == LA_OK, "featmap, kernels %d", k);
    for (int dt = 0; dt < 2; dt++) {
      CHECK(la_engine_create(&c, fm, dt ? LA_F64 : LA_F32, 8, &e) == LA_OK, "engine");
      CHECK(!strcmp(la_engine_kernels(e), want ? want->name : "blas"), "kernels %d %s: %s", k,
            dt ? "f64" : "f32", la_engine_kernels(e));
      la_engine_destroy(&e);
    }
    la_featmap_destroy(&fm);
  }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
