/* Backward pass drivers (DESIGN.md §4 "Gradients"): heads over OpenMP threads, each head's
 * pieces in order (replay) and in reverse order (dk, dv). Memory: the per-thread chunk
 * workspaces of the forward plus 3 doubles per (token, head) of side storage; no per-token
 * state is kept (the suffix state is recomputed chunk by chunk). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine_internal.h"
#include "linattn/grad.h"

size_t la_backward_side_size(const la_engine e, int64_t n) { return (size_t)3 * n * e->H; }

static la_status check(const la_engine e, const la_state *s) {
  if (!s || s->heads != e->H || s->r != e->r || s->dv != e->dv) return LA_ERR_ARG;
  if (e->cfg.window > 0) return LA_ERR_UNSUPPORTED;
  if (e->cfg.mode == LA_BIDIRECTIONAL && e->seg_off) return LA_ERR_UNSUPPORTED;
  return LA_OK;
}

la_status la_backward_replay(la_engine e, int64_t token0, int64_t n, const void *q,
                             const void *k, const void *v, const void *g, la_state *state,
                             void *dq, double *side, la_state *rev, la_den_stats *stats) {
  la_status st = check(e, state);
  if (st == LA_OK) st = check(e, rev);
  if (st != LA_OK || n == 0) return st;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  /* queries before the first segment start at or after token0 feed the reverse element */
  const int64_t cut = e->cfg.mode == LA_BIDIRECTIONAL ? INT64_MAX
                                                      : la_engine_segment_at_or_after(e, token0);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    if (e->dt == LA_F32)
      bwd_replay_f32(e, w, h, token0, n, q, k, v, g, state->sz + h * rsz, state->m + h,
                     state->f + h, dq, side, rev->sz + h * rsz, rev->m + h, cut);
    else
      bwd_replay_f64(e, w, h, token0, n, q, k, v, g, state->sz + h * rsz, state->m + h,
                     state->f + h, dq, side, rev->sz + h * rsz, rev->m + h, cut);
  }
  if (e->cfg.mode == LA_CAUSAL && cut < token0 + n)
    for (int h = 0; h < e->H; h++) rev->f[h] = 1;
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

la_status la_backward_reverse(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, const void *g, const double *side,
                              la_state *suffix, void *dk, void *dv) {
  la_status st = check(e, suffix);
  if (st != LA_OK || n == 0) return st;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    if (e->dt == LA_F32)
      bwd_reverse_f32(e, w, h, token0, n, q, k, v, g, side, suffix->sz + h * rsz, suffix->m + h,
                      dk, dv);
    else
      bwd_reverse_f64(e, w, h, token0, n, q, k, v, g, side, suffix->sz + h * rsz, suffix->m + h,
                      dk, dv);
  }
  return LA_OK;
}

la_status la_backward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                      const void *g, void *dq, void *dk, void *dv, la_den_stats *stats) {
  la_state st = {0}, rev = {0};
  double *side = malloc(sizeof(double) * (la_backward_side_size(e, n) + 1));
  la_status s = side ? la_state_init(&st, e->H, e->r, e->dv) : LA_ERR_NOMEM;
  if (s == LA_OK) s = la_state_init(&rev, e->H, e->r, e->dv);
  if (s == LA_OK && e->cfg.mode == LA_BIDIRECTIONAL) s = la_engine_accumulate(e, 0, n, k, v, &st);
  if (s == LA_OK) s = la_backward_replay(e, 0, n, q, k, v, g, &st, dq, side, &rev, stats);
  if (s == LA_OK) {
    if (e->cfg.mode == LA_CAUSAL) la_state_reset(&rev); /* nothing after the sequence */
    s = la_backward_reverse(e, 0, n, q, k, v, g, side, &rev, dk, dv);
  }
  la_state_free(&st);
  la_state_free(&rev);
  free(side);
  return s;
}
