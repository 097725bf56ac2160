/* The denominator policy of one output row, docs/design.md §1.1. Included by the kernel
 * instantiations (kernels_f32.c, kernels_f64.c); static inline because it runs once per row.
 * Domain: den_s and lsc come from a stabilized row, true den = den_s e^lsc (§2.2). */
#ifndef LINATTN_DENOMINATOR_H
#define LINATTN_DENOMINATOR_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "linattn/core.h"

/* floor(16 log2 x) for a normal positive x, without log2: the exponent gives 16 e, and the
 * mantissa m in [1, 2) is placed among 2^(j/16), j = 1..15 (the doubles nearest them; a
 * mantissa within an ulp of a boundary may land one bin away from libm's log2, which the
 * 1/16-octave median does not notice). About a tenth of the cost of log2 + floor + lround,
 * once per output row and head (docs/design.md §1.1 "Statistics"). */
static const double den_bin16_t[16] = {
    1.0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f09p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
static inline long den_bin16(double x) {
  const double *t = den_bin16_t;
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  const long e = (long)((u >> 52) & 0x7ff) - 1023;
  u = (u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m;
  memcpy(&m, &u, sizeof m);
  long k = m >= t[8] ? 8 : 0; /* binary search over the 16 boundaries */
  k += m >= t[k + 4] ? 4 : 0;
  k += m >= t[k + 2] ? 2 : 0;
  k += m >= t[k + 1] ? 1 : 0;
  return 16 * e + k;
}

/* Row finalization: the denominator policy of §1 on the true scale. o_row = [num_s | den_s]
 * with true (num, den) = e^lsc (num_s, den_s); lsc = log-scale of query + keys. */
static inline void den_note(la_den_stats *st, double den_s, double lsc) {
  st->rows++;
  if (!isfinite(den_s) || isnan(lsc)) {
    st->count_nonfinite++;
    return;
  }
  if (den_s <= 0) {
    st->count_nonpositive++;
    if (den_s == 0) { if (st->min > 0) st->min = 0; if (st->max < 0) st->max = 0; return; }
    double d = den_s * exp(lsc);
    if (d < st->min) st->min = d;
    if (d > st->max) st->max = d;
    return;
  }
  double d = lsc == 0 ? den_s : den_s * exp(lsc);
  if (d < st->min) st->min = d;
  if (d > st->max) st->max = d;
  long bin;
  if (lsc == 0 && den_s >= 0x1p-1022) { /* normal: floor(16 log2 den) from the bits (§1.1) */
    bin = den_bin16(den_s) + (LA_DEN_HIST_BINS / 2);
  } else {
    double l2 = log2(den_s) + lsc / M_LN2; /* log2 of the true den, overflow-free */
    bin = lround(floor(l2 * LA_DEN_HIST_PER_OCTAVE)) + (LA_DEN_HIST_BINS / 2);
  }
  if (bin < 0) bin = 0;
  if (bin >= LA_DEN_HIST_BINS) bin = LA_DEN_HIST_BINS - 1;
  st->hist[bin]++;
}

/* den_note for n rows at once, all in its positive normal case with log-scale 0, from the
 * AVX-512 output rows (la_k512_finalize_plain): their bins (floor(16 log2 den), not yet
 * offset) and their extremes. */
static inline void den_note_plain(la_den_stats *st, int n, const int32_t *bin, double mn,
                                  double mx) {
  st->rows += n;
  if (mn < st->min) st->min = mn;
  if (mx > st->max) st->max = mx;
  for (int i = 0; i < n; i++) {
    long b = (long)bin[i] + LA_DEN_HIST_BINS / 2;
    st->hist[b < 0 ? 0 : b >= LA_DEN_HIST_BINS ? LA_DEN_HIST_BINS - 1 : b]++;
  }
}

static inline void den_violation(la_den_stats *st, int64_t tok, int h) {
  st->violations++;
  if (st->first_bad_token < 0 || tok < st->first_bad_token ||
      (tok == st->first_bad_token && h < st->first_bad_head)) {
    st->first_bad_token = tok;
    st->first_bad_head = h;
  }
}

static inline void overflow_note(la_den_stats *st, int64_t tok, int h) {
  st->overflows++;
  if (st->first_overflow_token < 0 || tok < st->first_overflow_token ||
      (tok == st->first_overflow_token && h < st->first_overflow_head)) {
    st->first_overflow_token = tok;
    st->first_overflow_head = h;
  }
}

/* The divisor of a normalized row under the policy, without side effects: returns it, or 0
 * with *zero = 1 when the row's output is exactly 0 (zero-empty) or the row violates the
 * policy (then *bad = 1). */
static inline double den_divisor_of(const la_config *cfg, double den_s, double lsc, int *zero,
                                    int *bad) {
  *zero = *bad = 0;
  switch (cfg->den_policy) {
  case LA_DEN_ERROR:
    if (!(den_s > 0) || !isfinite(den_s)) break;
    return den_s;
  case LA_DEN_ZERO_EMPTY:
    if (den_s == 0) { *zero = 1; return 0; }
    if (!(den_s > 0) || !isfinite(den_s)) break;
    return den_s;
  case LA_DEN_ADD: { /* num / (den + E)  ==  num_s / (den_s + E e^{-lsc}); E >= 0, and with
                       * E = 0 the raw ratio: a zero or non-finite divisor is a violation */
    double d = cfg->den_eps == 0 ? den_s : den_s + cfg->den_eps * exp(-lsc);
    if (d == 0 || !isfinite(d)) break;
    return d;
  }
  case LA_DEN_CLAMP: { /* num / max(den, E), E > 0; a NaN den is a violation (fmax hides it) */
    if (isnan(den_s)) break;
    double d = fmax(den_s, cfg->den_eps * exp(-lsc));
    if (!(d > 0) || isnan(d)) break;
    return d;
  }
  }
  *zero = *bad = 1;
  return 0;
}

/* den_divisor_of, noting a violation in st. */
static inline double den_divisor(const la_config *cfg, la_den_stats *st, double den_s,
                                 double lsc, int64_t tok, int h, int *zero) {
  int bad;
  const double d = den_divisor_of(cfg, den_s, lsc, zero, &bad);
  if (bad) den_violation(st, tok, h);
  return d;
}

/* The backward's coefficients of a row (§4.4), a_s = fa G and b = bf (G . out), from the
 * forward's den_s and log-scale lsc: normalized, fa = 1/d and b = -G.num_s/d^2 = -fa G.out
 * (none below a clamp, where the divisor is the constant E; none for a zero row);
 * unnormalized, fa = e^lsc and b = 0. */
static inline void den_coeffs(const la_config *cfg, double den_s, double lsc, double *fa,
                              double *bf) {
  if (!cfg->normalize) {
    *fa = exp(lsc), *bf = 0;
    return;
  }
  int zero, bad;
  const double d = den_divisor_of(cfg, den_s, lsc, &zero, &bad);
  if (zero) {
    *fa = *bf = 0;
    return;
  }
  *fa = 1.0 / d;
  *bf = cfg->den_policy == LA_DEN_CLAMP && !(den_s >= cfg->den_eps * exp(-lsc)) ? 0.0 : -*fa;
}

#endif
