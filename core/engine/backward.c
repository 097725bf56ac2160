/* Backward pass drivers (docs/design.md §4.4): heads over OpenMP threads (the replay and the
 * reverse pass in groups of adjacent heads, §4.2 "Head groups"), each head's pieces in order
 * (replay) and in reverse order (dk, dv). Memory: the per-thread chunk
 * workspaces of the forward plus 3 doubles per (token, head) of side storage; no per-token
 * state is kept (the suffix state is recomputed chunk by chunk). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine_internal.h"
#include "la_alloc.h"
#include "linattn/grad.h"

/* The side storage of the replay (§4.4), and la_side_* access. */

/* Side rows are 24 bytes at the stride of a dV row when that is large enough (§ header). */
static size_t side_stride(const la_engine e) {
  size_t row = (size_t)e->dv * la_dtype_size(e->dt);
  return row >= 3 * sizeof(double) ? row : 3 * sizeof(double);
}
static la_side side_of(const la_engine e, void *side) {
  return (la_side){(char *)side, side_stride(e)};
}

size_t la_backward_side_size(const la_engine e, int64_t n) {
  return side_stride(e) * (size_t)n * e->H;
}
int la_backward_side_in_dv(const la_engine e) {
  return side_stride(e) == (size_t)e->dv * la_dtype_size(e->dt);
}

la_status la_backward_window(la_engine e, int64_t token0, int64_t n, const void *q,
                             const void *k, const void *v, const void *g, int64_t hlo,
                             int64_t hhi, const void *hk, const void *hv, const la_state *mid,
                             void *dq, double *side, la_den_stats *stats) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_backward_window");
  LA_CHECK(e->cfg.mode == LA_CAUSAL && e->cfg.window > 0, LA_ERR_ARG,
           "la_backward_window: the engine has no causal window");
  LA_CHECK(hlo <= hhi && hhi <= token0, LA_ERR_ARG,
           "la_backward_window: halo [%lld, %lld) does not end at or before token0 = %lld",
           (long long)hlo, (long long)hhi, (long long)token0);
  LA_TRY(la_engine_state_ok(e, mid, "la_backward_window", "mid"));
  if (n == 0) return LA_OK;
  return la_window_heads(e, token0, n, q, k, v, hlo, hhi, hk, hv, mid, NULL, g, dq, side, stats);
}

la_status la_backward_window_reverse(la_engine e, int64_t token0, int64_t n, const void *q,
                                     const void *k, const void *v, const void *g,
                                     const double *side, int64_t flo, int64_t fhi,
                                     const void *fq, const void *fg, const double *fside,
                                     const la_state *fmid, void *dk, void *dv) {
  LA_CHECK(e->cfg.mode == LA_CAUSAL && e->cfg.window > 0, LA_ERR_ARG,
           "la_backward_window_reverse: the engine has no causal window");
  LA_CHECK(flo >= token0 + n && fhi >= flo, LA_ERR_ARG,
           "la_backward_window_reverse: future halo [%lld, %lld) does not start at or after %lld",
           (long long)flo, (long long)fhi, (long long)(token0 + n));
  LA_TRY(la_engine_state_ok(e, fmid, "la_backward_window_reverse", "fmid"));
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  LA_TRY(la_engine_reserve_queues(e, la_window_queue_cap(e, fhi - token0)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++)
    e->kern->bwd_window_reverse(e, &e->work[la_thread_id()], h, token0, n, q, k, v, g, side, flo,
                                fhi, fq, fg, fside, fmid->sz + h * rsz, fmid->m[h], dk, dv);
  return LA_OK;
}

la_status la_backward_query_summary(la_engine e, int64_t token0, int64_t n, const void *q,
                                    const void *g, const double *side, int64_t a, int64_t b,
                                    la_state *out) {
  LA_TRY(la_engine_state_ok(e, out, "la_backward_query_summary", "out"));
  LA_CHECK(token0 <= a && a <= b && b <= token0 + n, LA_ERR_ARG,
           "la_backward_query_summary: [%lld, %lld) is not inside the block [%lld, %lld)",
           (long long)a, (long long)b, (long long)token0, (long long)(token0 + n));
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++)
    e->kern->query_summary(e, &e->work[la_thread_id()], h, token0, n, a, b, q, g, side,
                           out->sz + h * rsz, out->m + h);
  for (int h = 0; h < e->H; h++) out->f[h] = 0;
  return LA_OK;
}

la_status la_backward_segmented(la_engine e, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, const void *g,
                                const la_state *left, const la_state *right, void *dq, void *dk,
                                void *dv, void *side, la_state *head_rev,
                                la_state *tail_rev, la_den_stats *stats) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_backward_segmented");
  LA_TRY(la_engine_state_ok(e, head_rev, "la_backward_segmented", "head_rev"));
  LA_TRY(la_engine_state_ok(e, tail_rev, "la_backward_segmented", "tail_rev"));
  LA_TRY(la_engine_state_ok(e, left, "la_backward_segmented", "left"));
  LA_TRY(la_engine_state_ok(e, right, "la_backward_segmented", "right"));
  LA_CHECK(e->cfg.mode == LA_BIDIRECTIONAL && e->seg_off, LA_ERR_ARG,
           "la_backward_segmented: the engine is not bidirectional with segments");
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    e->kern->bwd_segmented(e, w, h, token0, n, q, k, v, g, left->sz + h * rsz, left->m[h],
                        right->sz + h * rsz, right->m[h], dq, side_of(e, (void *)side), head_rev->sz + h * rsz,
                        head_rev->m + h, tail_rev->sz + h * rsz, tail_rev->m + h, dk, dv);
  }
  /* scan flags: the block holds a segment start */
  int has = la_engine_segment_at_or_after(e, token0) < token0 + n;
  for (int h = 0; h < e->H; h++) head_rev->f[h] = tail_rev->f[h] = has;
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

la_status la_backward_segmented_ends(la_engine e, int64_t token0, int64_t n, const void *q,
                                     const void *k, const void *v, const void *g,
                                     const void *side, const la_state *left_rev,
                                     const la_state *right_rev, const la_state *head_rev,
                                     const la_state *tail_rev, void *dk, void *dv) {
  LA_TRY(la_engine_state_ok(e, left_rev, "la_backward_segmented_ends", "left_rev"));
  LA_TRY(la_engine_state_ok(e, right_rev, "la_backward_segmented_ends", "right_rev"));
  LA_TRY(la_engine_state_ok(e, head_rev, "la_backward_segmented_ends", "head_rev"));
  LA_TRY(la_engine_state_ok(e, tail_rev, "la_backward_segmented_ends", "tail_rev"));
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    e->kern->bwd_segmented_ends(e, w, h, token0, n, q, k, v, g, side_of(e, (void *)side), left_rev->sz + h * rsz,
                             left_rev->m[h], right_rev->sz + h * rsz, right_rev->m[h],
                             head_rev->sz + h * rsz, head_rev->m[h], tail_rev->sz + h * rsz,
                             tail_rev->m[h], dk, dv);
  }
  return LA_OK;
}

la_status la_engine_set_replay_output(la_engine e, void *out, int64_t row0, int64_t n) {
  LA_CHECK(e && (!out || (row0 >= 0 && n >= 0)), LA_ERR_ARG,
           "la_engine_set_replay_output: invalid arguments (row0 %lld, n %lld)", (long long)row0,
           (long long)n);
  LA_CHECK(!out || (!e->seg_off && e->cfg.window <= 0), LA_ERR_UNSUPPORTED,
           "la_engine_set_replay_output: not with segments or a window");
  e->rout = out, e->rout_row0 = row0, e->rout_n = out ? n : 0;
  return LA_OK;
}

la_status la_backward_replay(la_engine e, int64_t token0, int64_t n, const void *q,
                             const void *k, const void *v, const void *g, la_state *state,
                             void *dq, void *side, la_state *rev, la_den_stats *stats) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_backward_replay");
  LA_TRY(la_engine_state_ok(e, state, "la_backward_replay", "state"));
  LA_CHECK(rev || e->cfg.mode == LA_CAUSAL, LA_ERR_ARG,
           "la_backward_replay: rev is needed in bidirectional mode");
  if (rev) LA_TRY(la_engine_state_ok(e, rev, "la_backward_replay", "rev"));
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  /* queries before the first segment start at or after token0 feed the reverse element; none
   * when the caller has no later block (rev == NULL): one GEMM per piece saved */
  const int64_t cut = e->cfg.mode == LA_BIDIRECTIONAL ? INT64_MAX
                      : rev ? la_engine_segment_at_or_after(e, token0) : token0;
  la_state none = {0};
  if (!rev) rev = &none; /* never read: cut = token0 keeps every piece out of the element */
  if (e->cfg.mode == LA_CAUSAL) { /* one group of adjacent heads per thread (§4.2) */
    const int G = la_head_groups(e);
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
    for (int g_ = 0; g_ < G; g_++) {
      const int h0 = la_head_group(e->H, G, g_), h1 = la_head_group(e->H, G, g_ + 1);
      e->kern->bwd_replay_heads(e, &e->work[la_thread_id()], h0, h1, token0, n, q, k, v, g,
                                state->sz + h0 * rsz, state->m + h0, state->f + h0, dq,
                                side_of(e, (void *)side), rev->sz ? rev->sz + h0 * rsz : NULL,
                                rev->m ? rev->m + h0 : NULL, cut);
    }
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int h = 0; h < e->H; h++) {
      la_work *w = &e->work[la_thread_id()];
      e->kern->bwd_replay(e, w, h, token0, n, q, k, v, g, state->sz + h * rsz, state->m + h,
                          state->f + h, dq, side_of(e, (void *)side), rev->sz + h * rsz,
                          rev->m + h, cut); /* bidirectional: rev is the caller's */
    }
  }
  if (e->cfg.mode == LA_CAUSAL && rev != &none && cut < token0 + n)
    for (int h = 0; h < e->H; h++) rev->f[h] = 1;
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

la_status la_backward_reverse(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, const void *g, const void *side,
                              la_state *suffix, void *dk, void *dv) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_backward_reverse");
  LA_TRY(la_engine_state_ok(e, suffix, "la_backward_reverse", "suffix"));
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int G = la_head_groups(e); /* one group of adjacent heads per thread (§4.2) */
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
  for (int g_ = 0; g_ < G; g_++) {
    const int h0 = la_head_group(e->H, G, g_), h1 = la_head_group(e->H, G, g_ + 1);
    e->kern->bwd_reverse_heads(e, &e->work[la_thread_id()], h0, h1, token0, n, q, k, v, g,
                               side_of(e, (void *)side), suffix->sz + h0 * rsz, suffix->m + h0,
                               dk, dv);
  }
  return LA_OK;
}

la_status la_backward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                      const void *g, void *dq, void *dk, void *dv, la_den_stats *stats) {
  if (la_engine_decayed(e)) return la_decay_backward(e, n, q, k, v, g, dq, dk, dv, stats);
  la_state st = {0}, rev = {0}, tail = {0};
  const int win = e->cfg.window > 0 && e->cfg.window < n;
  /* the side rows live in dv until the reverse pass overwrites them, except for windows */
  void *own = (win || !la_backward_side_in_dv(e))
                  ? la_malloc(win ? sizeof(double) * 3 * (size_t)n * e->H + 1
                               : la_backward_side_size(e, n) + 1)
                  : NULL;
  void *side = (win || !la_backward_side_in_dv(e)) ? own : dv;
  la_status s = side ? la_state_init(&st, e->H, e->r, e->dv)
                     : la_error(LA_ERR_NOMEM, "la_backward: out of memory for the side storage "
                                "(%lld tokens x %d heads)", (long long)n, e->H);
  if (s == LA_OK) s = la_state_init(&rev, e->H, e->r, e->dv);
  if (s == LA_OK) s = la_state_init(&tail, e->H, e->r, e->dv);
  if (s == LA_OK && win) {
    /* nothing before or after the sequence: empty halos */
    s = la_backward_window(e, 0, n, q, k, v, g, 0, 0, NULL, NULL, &st, dq, side, stats);
    if (s == LA_OK)
      s = la_backward_window_reverse(e, 0, n, q, k, v, g, side, n, n, NULL, NULL, NULL, &st, dk, dv);
  } else if (s == LA_OK && e->cfg.mode == LA_BIDIRECTIONAL && e->seg_off) {
    /* st stays the identity: nothing lies left or right of the sequence */
    s = la_backward_segmented(e, 0, n, q, k, v, g, &st, &st, dq, dk, dv, side, &rev, &tail, stats);
    if (s == LA_OK)
      s = la_backward_segmented_ends(e, 0, n, q, k, v, g, side, &st, &st, &rev, &tail, dk, dv);
  } else if (s == LA_OK) {
    if (e->cfg.mode == LA_BIDIRECTIONAL) s = la_engine_accumulate(e, 0, n, k, v, &st);
    if (s == LA_OK) s = la_backward_replay(e, 0, n, q, k, v, g, &st, dq, side, &rev, stats);
    if (s == LA_OK) {
      if (e->cfg.mode == LA_CAUSAL) la_state_reset(&rev); /* nothing after the sequence */
      s = la_backward_reverse(e, 0, n, q, k, v, g, side, &rev, dk, dv);
    }
  }
  la_state_free(&st);
  la_state_free(&rev);
  la_state_free(&tail);
  free(own);
  if (s == LA_OK && e->check_finite) s = la_engine_take_nonfinite(e);
  return s;
}
