/* The softmax reference's mask (include/linattn/baseline.h, docs/design.md §3 and §4.6):
 * query i reads the keys j with  seg(j) = seg(i),  j <= i (causal)  and  i - W < j (window),
 * an interval [lo_i, hi_i) whose ends never decrease with i. */
#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "softmax_internal.h"

la_status la_sm_mask_check(const la_softmax_mask *m, int64_t end, const char *who) {
  LA_CHECK(m, LA_ERR_ARG, "%s: no mask", who);
  LA_CHECK(m->mode == LA_CAUSAL || m->mode == LA_BIDIRECTIONAL, LA_ERR_ARG, "%s: mode %d is "
           "neither causal nor bidirectional", who, (int)m->mode);
  LA_CHECK(m->window >= 0, LA_ERR_ARG, "%s: window %lld < 0", who, (long long)m->window);
  LA_CHECK(m->window == 0 || m->mode == LA_CAUSAL, LA_ERR_ARG, "%s: a window needs causal mode "
           "(docs/design.md §3.2)", who);
  if (!m->seg) return LA_OK;
  LA_CHECK(m->nseg >= 2 && m->seg[0] == 0, LA_ERR_ARG, "%s: segment offsets must be "
           "0 = o_0 < ... < o_S with S >= 1 (got %lld offsets)", who, (long long)m->nseg);
  for (int64_t s = 1; s < m->nseg; s++)
    LA_CHECK(m->seg[s] > m->seg[s - 1], LA_ERR_ARG, "%s: segment offsets must increase "
             "strictly: o[%lld] = %lld after %lld", who, (long long)s, (long long)m->seg[s],
             (long long)m->seg[s - 1]);
  LA_CHECK(end <= m->seg[m->nseg - 1], LA_ERR_ARG, "%s: position %lld is past the last "
           "segment offset %lld", who, (long long)end - 1, (long long)m->seg[m->nseg - 1]);
  return LA_OK;
}

la_status la_sm_decay_check(const la_softmax_mask *m, int heads, const char *who) {
  for (int h = 0; m->log_decay && h < heads; h++)
    LA_CHECK(m->log_decay[h] <= 0 && isfinite(m->log_decay[h]), LA_ERR_ARG, "%s: ln gamma of "
             "head %d is %g, not a finite value <= 0 (gamma in (0, 1])", who, h, m->log_decay[h]);
  return LA_OK;
}

/* |i - j| ln gamma by global positions; the distance is exact in a double (< 2^53). */
#define LA_SM_BIAS(T, SFX)                                                                    \
  void la_sm_decay_bias_##SFX(T *S, int nr, int nc, int lds, int64_t i0, int64_t j0,         \
                              double ld) {                                                    \
    if (ld == 0) return;                                                                      \
    for (int i = 0; i < nr; i++) {                                                            \
      T *s = S + (size_t)i * lds;                                                             \
      const int64_t gi = i0 + i;                                                              \
      for (int c = 0; c < nc; c++) {                                                          \
        const int64_t dist = gi > j0 + c ? gi - (j0 + c) : (j0 + c) - gi;                     \
        s[c] = (T)((double)s[c] + (double)dist * ld);                                         \
      }                                                                                       \
    }                                                                                         \
  }
LA_SM_BIAS(double, f64)
LA_SM_BIAS(float, f32)

void la_sm_rows(const la_softmax_mask *m, int64_t i0, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t s = 0; /* segment of row i: seg[s] <= i < seg[s + 1] */
  if (m->seg && n > 0) {
    int64_t a = 0, b = m->nseg - 1; /* seg[a] <= i0 < seg[b] */
    while (b - a > 1) {
      const int64_t c = a + (b - a) / 2;
      if (m->seg[c] <= i0) a = c; else b = c;
    }
    s = a;
  }
  for (int64_t r = 0; r < n; r++) {
    const int64_t i = i0 + r;
    int64_t l = 0, h = INT64_MAX;
    if (m->seg) {
      while (m->seg[s + 1] <= i) s++;
      l = m->seg[s];
      h = m->seg[s + 1];
    }
    if (m->mode == LA_CAUSAL && i + 1 < h) h = i + 1;
    if (m->window > 0 && i - m->window + 1 > l) l = i - m->window + 1;
    lo[r] = l;
    hi[r] = h;
  }
}

la_status la_softmax_mask_keys(const la_softmax_mask *mask, int64_t q0, int64_t nq, int64_t *lo,
                               int64_t *hi) {
  LA_CHECK(lo && hi && q0 >= 0 && nq >= 0, LA_ERR_ARG, "la_softmax_mask_keys: bad arguments");
  LA_TRY(la_sm_mask_check(mask, q0 + nq, "la_softmax_mask_keys"));
  *lo = *hi = q0;
  if (nq == 0) return LA_OK;
  int64_t l, h;
  la_sm_rows(mask, q0, 1, lo, &h);
  la_sm_rows(mask, q0 + nq - 1, 1, &l, hi);
  return LA_OK;
}

int la_sm_threads(int threads) {
#ifdef _OPENMP
  return threads > 0 ? threads : omp_get_max_threads();
#else
  (void)threads;
  return 1;
#endif
}

int la_sm_thread(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}
