/* The plan's collective between two passes (docs/design.md §4.5 "The plan's collective"),
 * written once for every driver: the streaming plan (stream.c), the in-memory step
 * (forward.c) and the backward (backward.c); the SimGrid model (tools/smpi/simscan.c) runs
 * the first two. The
 * status of the pass that made the summaries is agreed first, so every rank joins the
 * collective or none does; the collectives themselves, and the scan algorithm's dispatch,
 * are comm.c's. */
#include "dist_internal.h"

la_status la_plan_combine(la_dist d, la_status in, int bidir, int reverse, la_state *a,
                          la_state *b) {
  la_status st = la_dist_agree(d, in);
  if (st != LA_OK) return st;
  if (d->size == 1) { /* nothing travels: no earlier or later rank */
    if (!bidir || b) la_state_reset(a);
    if (b) la_state_reset(b);
    return LA_OK;
  }
  if (b) { /* bidirectional segments (§3.1): the tails' prefix, the heads' suffix */
    st = la_dist_exscan(d, a);
    return st == LA_OK ? la_dist_exscan_reverse(d, b) : st;
  }
  if (bidir) return la_dist_allreduce(d, a);
  return reverse ? la_dist_exscan_reverse(d, a) : la_dist_exscan(d, a);
}

la_status la_plan_combine_begin(la_dist d, la_status in, const la_state *total,
                                la_dist_req *req) {
  *req = NULL;
  la_status st = la_dist_agree(d, in);
  return st == LA_OK ? la_dist_iexscan_begin(d, total, req) : st;
}
