/* The kernel tables' gate_fold entry (core/simd/simd.h; per-feature gates folded into a
 * chunk's rows, docs/design.md §1.2 "Kernels: the gates folded into the rows"), one check for
 * every table's test: r = 1..19 and 64 (the lanes' tails), factors over the fold's range (E in
 * [e^-8, 1], qs, ks in (0, e^8]), bitwise the generic loop's float64 products rounded once,
 * q NULL (every third width) the keys alone; rows past len untouched. Include after check.h. */
#ifndef LINATTN_TESTS_CHECK_GATE_FOLD_H
#define LINATTN_TESTS_CHECK_GATE_FOLD_H
#include <math.h>
#include <stdlib.h>

typedef void (*gate_fold_fn)(int len, int r, float *q, float *k, const double *E,
                             const double *qs, const double *ks);

static double gf_urand(unsigned long long *s) { /* xorshift64, uniform in [-1, 1) */
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void check_gate_fold(gate_fold_fn fold, const char *name) {
  unsigned long long s = 0x9e3779b97f4a7c15ULL;
  int ok = 1, untouched = 1, ncase = 0;
  for (int r = 1; r <= 64; r = r < 19 ? r + 1 : 64) {
    const int len = 1 + (r * 7) % 13, n = len * r;
    float *q = malloc(sizeof(float) * (n + r)), *k = malloc(sizeof(float) * (n + r));
    float *q0 = malloc(sizeof(float) * n), *k0 = malloc(sizeof(float) * n);
    double *E = malloc(sizeof(double) * n), *qs = malloc(sizeof(double) * len),
           *ks = malloc(sizeof(double) * len);
    for (int i = 0; i < n + r; i++) {
      q[i] = (float)(gf_urand(&s) * 3.0);
      k[i] = (float)(gf_urand(&s) * 3.0);
      if (i < n) {
        q0[i] = q[i], k0[i] = k[i];
        E[i] = exp(4.0 * (gf_urand(&s) - 1.0));
      }
    }
    for (int i = 0; i < len; i++)
      qs[i] = exp(4.0 * gf_urand(&s) - 4.0), ks[i] = exp(4.0 * gf_urand(&s) + 4.0);
    const float qt = q[n], kt = k[n];
    const int konly = r % 3 == 0; /* the keys pass: q NULL */
    fold(len, r, konly ? NULL : q, k, E, qs, ks);
    for (int i = 0; i < n; i++) {
      ok &= q[i] == (konly ? q0[i] : (float)((double)q0[i] * (qs[i / r] * E[i])));
      ok &= k[i] == (float)((double)k0[i] * (ks[i / r] / E[i]));
    }
    untouched &= q[n] == qt && k[n] == kt;
    free(q), free(k), free(q0), free(k0), free(E), free(qs), free(ks);
    ncase++;
    if (r == 64) break;
  }
  CHECK(ok && untouched && ncase == 20, "%s: the generic loop's bits on %d widths, rows past "
        "len untouched %d", name, ncase, untouched);
}

#endif
