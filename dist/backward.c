/* The distributed backward (DESIGN.md §4 "Gradients") on in-memory shards:
 * - causal: the forward prefix (exscan of rank totals) for the replay, then the suffix sums of
 *   the query side through an exscan over the reversed communicator, with the same segment
 *   flags and log-scales as the forward;
 * - bidirectional: the summary and the query sums each by one allreduce. */
#include <stdlib.h>
#include <string.h>
#include "dist_internal.h"
#include "linattn/grad.h"

/* Bidirectional with segments: the forward summaries of spanning segments as in the forward
 * (prefix + local + suffix), then the query sums of spanning segments the same way. */
static la_status backward_segmented(la_dist d, la_engine eng, int64_t n, int64_t row0,
                                    const void *q, const void *k, const void *v, const void *g,
                                    void *dq, void *dk, void *dv, double *side,
                                    la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  la_state L = {0}, F = {0}, hr = {0}, tr = {0}, lr = {0}, rr = {0};
  la_status s = la_state_init(&L, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&F, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&hr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&tr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&lr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&rr, H, r, dvw);
  if (s == LA_OK) s = la_engine_accumulate(eng, row0, n, k, v, &L);
  if (s == LA_OK) { /* keys before the first segment start (the head) */
    int64_t t = la_engine_segment_at_or_after(eng, row0), hn = t - row0 < n ? t - row0 : n;
    if (hn > 0) s = la_engine_accumulate(eng, row0, hn, k, v, &F);
    if (t < row0 + n)
      for (int h = 0; h < H; h++) F.f[h] = 1;
  }
  s = la_dist_agree(d, s, NULL, 0);
  if (s == LA_OK) s = la_dist_exscan(d, &L);
  if (s == LA_OK) s = la_dist_exscan_reverse(d, &F);
  if (s == LA_OK)
    s = la_backward_segmented(eng, row0, n, q, k, v, g, &L, &F, dq, dk, dv, side, &hr, &tr, stats);
  s = la_dist_agree(d, s, NULL, 0);
  if (s == LA_OK) {
    size_t bytes = sizeof(double) * (size_t)H * ((size_t)r * (dvw + 1));
    memcpy(lr.sz, tr.sz, bytes);
    memcpy(rr.sz, hr.sz, bytes);
    for (int h = 0; h < H; h++) {
      lr.m[h] = tr.m[h];
      lr.f[h] = tr.f[h];
      rr.m[h] = hr.m[h];
      rr.f[h] = hr.f[h];
    }
    s = la_dist_exscan(d, &lr);
    if (s == LA_OK) s = la_dist_exscan_reverse(d, &rr);
  }
  if (s == LA_OK)
    s = la_backward_segmented_ends(eng, row0, n, q, k, v, g, side, &lr, &rr, &hr, &tr, dk, dv);
  la_state_free(&L);
  la_state_free(&F);
  la_state_free(&hr);
  la_state_free(&tr);
  la_state_free(&lr);
  la_state_free(&rr);
  return s;
}

la_status la_dist_backward(la_dist d, la_engine eng, int64_t n, int64_t row0, const void *q,
                           const void *k, const void *v, const void *g, void *dq, void *dk,
                           void *dv, la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  const int bidir = la_engine_mode(eng) == LA_BIDIRECTIONAL;
  la_state st = {0}, rev = {0};
  double *side = malloc(sizeof(double) * (la_backward_side_size(eng, n) + 1));
  la_status s = side ? la_state_init(&st, H, r, dvw) : LA_ERR_NOMEM;
  if (s == LA_OK) s = la_state_init(&rev, H, r, dvw);
  if (s == LA_OK && la_engine_window(eng) > 0) s = LA_ERR_UNSUPPORTED;
  if (s == LA_OK && bidir && la_engine_has_segments(eng)) {
    s = backward_segmented(d, eng, n, row0, q, k, v, g, dq, dk, dv, side, stats);
    la_state_free(&st);
    la_state_free(&rev);
    free(side);
    s = la_dist_agree(d, s, NULL, 0);
    if (s == LA_OK && stats) s = la_dist_reduce_stats(d, stats);
    return s;
  }
  if (s == LA_OK && (bidir || d->size > 1)) s = la_engine_accumulate(eng, row0, n, k, v, &st);
  s = la_dist_agree(d, s, NULL, 0);
  if (s == LA_OK && d->size > 1) s = bidir ? la_dist_allreduce(d, &st) : la_dist_exscan(d, &st);
  if (s == LA_OK) s = la_backward_replay(eng, row0, n, q, k, v, g, &st, dq, side, &rev, stats);
  s = la_dist_agree(d, s, NULL, 0);
  if (s == LA_OK) {
    if (bidir) s = d->size > 1 ? la_dist_allreduce(d, &rev) : LA_OK;
    else if (d->size > 1) s = la_dist_exscan_reverse(d, &rev);
    else la_state_reset(&rev); /* no queries after the only rank */
  }
  if (s == LA_OK) s = la_backward_reverse(eng, row0, n, q, k, v, g, side, &rev, dk, dv);
  la_state_free(&st);
  la_state_free(&rev);
  free(side);
  s = la_dist_agree(d, s, NULL, 0);
  if (s == LA_OK && stats) s = la_dist_reduce_stats(d, stats);
  return s;
}
