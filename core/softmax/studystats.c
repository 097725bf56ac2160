/* The bias test of `linattn eval` (docs/design.md §8.3): a sign-flip test on the Gram matrix
 * of the per-seed errors, and the mean and noise norms it implies. */
#include <math.h>
#include <stdint.h>
#include "linattn/study.h"

/* T(eps) = sum_{s != t} eps_s eps_t A_st. */
static double flip_stat(const double *A, int S, const signed char *eps) {
  double t = 0;
  for (int s = 0; s < S; s++)
    for (int u = s + 1; u < S; u++) t += 2.0 * eps[s] * eps[u] * A[s * S + u];
  return t;
}

/* splitmix64: a fixed stream for the drawn patterns (S > 21). */
static uint64_t mix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double la_signflip_pvalue(const double *A, int S) {
  if (S < 2 || S > LA_SIGNFLIP_MAX_SEEDS) return 1.0;
  signed char eps[LA_SIGNFLIP_MAX_SEEDS];
  for (int s = 0; s < S; s++) eps[s] = 1;
  const double t0 = flip_stat(A, S, eps);
  /* Ties within rounding count as >= (conservative). */
  double scale = 0;
  for (int s = 0; s < S * S; s++) scale += fabs(A[s]);
  const double tol = 1e-12 * scale;
  uint64_t hits = 0, total;
  if (S <= 21) { /* every pattern with eps_0 = +1 (eps and -eps give the same T) */
    total = (uint64_t)1 << (S - 1);
    for (uint64_t m = 0; m < total; m++) {
      for (int s = 1; s < S; s++) eps[s] = m >> (s - 1) & 1 ? -1 : 1;
      hits += flip_stat(A, S, eps) >= t0 - tol;
    }
  } else { /* the observed pattern and 2^14 - 1 drawn ones */
    total = (uint64_t)1 << 14;
    uint64_t x = 0x5EED;
    hits = 1;
    for (uint64_t m = 1; m < total; m++) {
      for (int s = 1; s < S; s++) eps[s] = mix(&x) & 1 ? -1 : 1;
      hits += flip_stat(A, S, eps) >= t0 - tol;
    }
  }
  return (double)hits / (double)total;
}

void la_gram_mean_noise(const double *A, int S, double *mean_norm, double *noise_norm) {
  double all = 0, diag = 0;
  for (int s = 0; s < S; s++) {
    diag += A[s * S + s];
    for (int t = 0; t < S; t++) all += A[s * S + t];
  }
  const double m2 = all / ((double)S * S); /* |mean Y|^2 */
  *mean_norm = sqrt(m2 > 0 ? m2 : 0);
  if (S < 2) {
    *noise_norm = 0;
    return;
  }
  const double tr = (diag - all / S) / (S - 1); /* sum_s |Y_s - mean|^2 / (S - 1) */
  *noise_norm = sqrt(tr > 0 ? tr / S : 0);
}
