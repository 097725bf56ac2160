/* Denominator statistics (docs/design.md §1.1): min, max, count <= 0, and the count below
 * 1e-6 * median. The median comes from a log2 histogram with LA_DEN_HIST_PER_OCTAVE bins per
 * octave, so it is exact to 1/16 octave (4.4 %) and mergeable across threads and ranks
 * without storing N values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine_internal.h"
#include "la_alloc.h"
#include "linattn/core.h"

static void clear(la_den_stats *st) {
  uint64_t *hist = st->hist;
  memset(st, 0, sizeof *st);
  st->min = INFINITY;
  st->max = -INFINITY;
  st->first_bad_token = -1;
  st->first_overflow_token = -1;
  st->hist = hist;
}

la_status la_den_stats_init(la_den_stats *st) {
  st->hist = NULL;
  clear(st);
  st->hist = la_calloc(LA_DEN_HIST_BINS, sizeof(uint64_t));
  if (!st->hist)
    return la_error(LA_ERR_NOMEM, "out of memory for the denominator histogram (%d bins)",
                    LA_DEN_HIST_BINS);
  return LA_OK;
}

/* engine_internal.h: back to the empty statistics, keeping the histogram's storage. */
void la_den_stats_reset(la_den_stats *st) {
  clear(st);
  if (st->hist) memset(st->hist, 0, LA_DEN_HIST_BINS * sizeof(uint64_t));
}

void la_den_stats_free(la_den_stats *st) {
  free(st->hist);
  st->hist = NULL;
}

static void first_of(int64_t *tok, int *head, int64_t t2, int h2) {
  if (t2 < 0) return;
  if (*tok < 0 || t2 < *tok || (t2 == *tok && h2 < *head)) {
    *tok = t2;
    *head = h2;
  }
}

void la_den_stats_merge(la_den_stats *a, const la_den_stats *b) {
  a->min = fmin(a->min, b->min);
  a->max = fmax(a->max, b->max);
  a->rows += b->rows;
  a->count_nonpositive += b->count_nonpositive;
  a->count_nonfinite += b->count_nonfinite;
  a->violations += b->violations;
  a->overflows += b->overflows;
  first_of(&a->first_bad_token, &a->first_bad_head, b->first_bad_token, b->first_bad_head);
  first_of(&a->first_overflow_token, &a->first_overflow_head, b->first_overflow_token,
           b->first_overflow_head);
  for (int i = 0; i < LA_DEN_HIST_BINS; i++) a->hist[i] += b->hist[i];
}

static double bin_center_log2(int i) {
  return ((double)(i - LA_DEN_HIST_BINS / 2) + 0.5) / LA_DEN_HIST_PER_OCTAVE;
}

double la_den_stats_median(const la_den_stats *st) {
  /* Median over all rows: nonpositive and nonfinite rows sort below the positive ones. */
  uint64_t below = (uint64_t)(st->count_nonpositive + st->count_nonfinite), total = (uint64_t)st->rows;
  if (total == 0) return NAN;
  uint64_t half = (total + 1) / 2;
  if (half <= below) return 0.0;
  uint64_t acc = below;
  for (int i = 0; i < LA_DEN_HIST_BINS; i++) {
    acc += st->hist[i];
    if (acc >= half) return exp2(bin_center_log2(i));
  }
  return NAN;
}

int64_t la_den_stats_count_small(const la_den_stats *st) {
  double med = la_den_stats_median(st);
  int64_t n = st->count_nonpositive + st->count_nonfinite;
  if (!(med > 0)) return n;
  double lt = log2(med) + log2(1e-6);
  for (int i = 0; i < LA_DEN_HIST_BINS; i++)
    if (bin_center_log2(i) < lt) n += (int64_t)st->hist[i];
  return n;
}
