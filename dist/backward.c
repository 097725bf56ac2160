/* The distributed backward (DESIGN.md §4 "Gradients") on in-memory shards:
 * - causal: the forward prefix (exscan of rank totals) for the replay, then the suffix sums of
 *   the query side through an exscan over the reversed communicator, with the same segment
 *   flags and log-scales as the forward;
 * - bidirectional: the summary and the query sums each by one allreduce. */
#include <stdlib.h>
#include "dist_internal.h"
#include "linattn/grad.h"

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
  if (s == LA_OK && (la_engine_window(eng) > 0 || (bidir && la_engine_has_segments(eng))))
    s = LA_ERR_UNSUPPORTED;
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
