/* The forward entry points on one rank, docs/design.md §4.2: heads and superblocks of chunks
 * spread over OpenMP threads, each running a kernel of the engine's table (e->kern). Causal is
 * two passes when heads alone cannot occupy the threads (superblock totals, then outputs from
 * their prefixes); otherwise each thread takes a group of adjacent heads and walks their
 * chunks together ("Head groups"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "engine_internal.h"
#include "la_alloc.h"

/* e->sfall <- every head's summary sz, rounded once to the working precision. */
static void la_summaries_to_work(la_engine e, const double *sz) {
  const size_t n = (size_t)e->H * e->r * (e->dv + 1);
  if (e->dt == LA_F32) {
    float *d = e->sfall;
    for (size_t i = 0; i < n; i++) d[i] = (float)sz[i];
  } else {
    memcpy(e->sfall, sz, sizeof(double) * n);
  }
}


/* 1 if every head of s is the identity (nothing read before or after the block). */
static int state_empty(const la_engine e, const la_state *s) {
  for (int h = 0; h < e->H; h++)
    if (s->m[h] != -INFINITY) return 0;
  return 1;
}

/* Decayed bidirectional rows [token0, token0 + n) (§1.2): per head a forward pass into
 * unfinalized rows from pre (the decayed summary of the keys before the block), then the
 * reverse pass from suf (the reverse summary of the keys after it); NULL: none, which is the
 * whole sequence only when token0 = 0. The forward pass keeps its numerators in out; den and
 * lsc ([n, H] each) are allocated here, outside the parallel region. */
static la_status decay_bidir_all(la_engine e, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, void *out, la_den_stats *stats,
                                 const la_state *pre, const la_state *suf) {
  LA_CHECK(token0 == 0 || pre, LA_ERR_UNSUPPORTED,
           "decay: a bidirectional block without the summaries around it must be the whole "
           "sequence (token0 = %lld; docs/design.md §1.2)", (long long)token0);
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const size_t es = la_dtype_size(e->dt), rows = (size_t)n * e->H;
  void *den = la_malloc(es * rows);
  double *lsc = la_malloc(sizeof(double) * rows);
  if (!den || !lsc) {
    free(den);
    free(lsc);
    return la_error(LA_ERR_NOMEM, "decay: out of memory for %lld bidirectional rows",
                    (long long)n);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++)
    e->kern->decay_bidir(e, &e->work[la_thread_id()], h, token0, n, q, k, v, den, lsc, out,
                         pre ? pre->sz + (size_t)h * rsz : NULL, pre ? pre->m[h] : 0,
                         suf ? suf->sz + (size_t)h * rsz : NULL, suf ? suf->m[h] : 0);
  free(den);
  free(lsc);
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

/* Decayed (§1.2, §4.1): state <- state (+) the block's summary, whose cumulative log-decay is
 * n ln gamma_h; one group of adjacent heads per thread, no superblocks. rev = 1: the reverse
 * summary, state holding the keys after the block (the reverse scan's order). */
static la_status decay_accumulate(la_engine e, int64_t token0, int64_t n, const void *k,
                                  const void *v, la_state *state, int rev) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int G = la_head_groups(e);
  la_state_reset(&e->part);
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
  for (int g = 0; g < G; g++) {
    const int h0 = la_head_group(e->H, G, g), h1 = la_head_group(e->H, G, g + 1);
    e->kern->decay_accum(e, &e->work[la_thread_id()], h0, h1, token0, 0, n, k, v, rev,
                         e->part.sz + (size_t)h0 * rsz, e->part.m + h0, e->part.f + h0);
  }
  for (int h = 0; h < e->H; h++) {
    const double a = la_block_log_decay(e, h, token0, n);
    if (state->m[h] != -INFINITY) state->m[h] += a; /* the earlier summary, decayed over n */
    la_state_combine_head(state->sz + (size_t)h * rsz, state->m + h, state->f + h,
                          e->part.sz + (size_t)h * rsz, e->part.m + h, e->part.f + h, rsz);
    state->a[h] += a;
  }
  return LA_OK;
}

/* The block's cumulative log-decay per head and feature into e->rows.a, summed by the
 * kernels as they read the gates (gla_cum) rather than in a pass of its own over them. */
static void gla_sums_begin(la_engine e) {
  for (int i = 0; i < e->rows.heads; i++) e->rows.a[i] = 0.0;
  e->gsum = e->rows.a;
}

/* Per-feature gates (§1.2 "Per-feature gates"): the block's summary in head form (e->hst),
 * then in row form with each row's cumulative log-decay (e->rows), combined into state. */
static la_status gla_accumulate(la_engine e, int64_t token0, int64_t n, const void *k,
                                const void *v, la_state *state) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int G = la_head_groups(e);
  la_state_reset(&e->hst);
  gla_sums_begin(e);
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
  for (int g = 0; g < G; g++) {
    const int h0 = la_head_group(e->H, G, g), h1 = la_head_group(e->H, G, g + 1);
    e->kern->gla_accum(e, &e->work[la_thread_id()], h0, h1, token0, 0, n, k, v,
                       e->hst.sz + (size_t)h0 * rsz, e->hst.m + h0, e->hst.f + h0);
  }
  e->gsum = NULL;
  la_gla_head_to_rows(e, &e->hst, &e->rows); /* the rows' a: the block's gates (gla_cum) */
  la_state_combine(state, &e->rows);
  return LA_OK;
}

la_status la_engine_accumulate(la_engine e, int64_t token0, int64_t n, const void *k,
                               const void *v, la_state *state) {
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_accumulate: n = %lld < 0", (long long)n);
  LA_TRY(la_engine_state_ok(e, state, "la_engine_accumulate", "state"));
  LA_TRY(la_engine_gates_cover(e, token0, n, "la_engine_accumulate"));
  LA_CHECK(e->gate_w == 1 || la_gla_row_form(e, state), LA_ERR_ARG,
           "la_engine_accumulate: with per-feature gates a summary is in row form, (heads H r, "
           "r 1, dv) (la_engine_state_init; docs/design.md §1.2 \"Per-feature gates\")");
  if (n == 0) return LA_OK;
  if (e->gate_w > 1) return gla_accumulate(e, token0, n, k, v, state);
  if (e->dlog) return decay_accumulate(e, token0, n, k, v, state, 0);
  const int H = e->H, B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  la_state_reset(&e->part);
  if (B == 1) { /* one group of adjacent heads per thread (§4.2 "Head groups") */
    const int G = la_head_groups(e);
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
    for (int g = 0; g < G; g++) {
      const int h0 = la_head_group(H, G, g), h1 = la_head_group(H, G, g + 1);
      e->kern->accum_heads(e, &e->work[la_thread_id()], h0, h1, token0, 0, n, k, v,
                           e->part.sz + (size_t)h0 * rsz, e->part.m + h0, e->part.f + h0);
    }
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int it = 0; it < H * B; it++) {
      int h = it / B, b = it % B;
      int64_t lo, hi;
      la_superblock(n, e->C, B, b, &lo, &hi);
      e->kern->accum_range(e, &e->work[la_thread_id()], h, token0, lo, hi, k, v,
                           e->part.sz + (size_t)it * rsz, e->part.m + it, e->part.f + it);
    }
  }
  for (int h = 0; h < H; h++)
    for (int b = 0; b < B; b++)
      la_state_combine_head(state->sz + (size_t)h * rsz, state->m + h, state->f + h,
                            e->part.sz + (size_t)(h * B + b) * rsz, e->part.m + h * B + b,
                            e->part.f + h * B + b, rsz);
  return LA_OK;
}

la_status la_engine_accumulate_reverse(la_engine e, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_state *state) {
  if (!e || !e->dlog) return la_engine_accumulate(e, token0, n, k, v, state);
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_accumulate_reverse: n = %lld < 0", (long long)n);
  LA_TRY(la_engine_state_ok(e, state, "la_engine_accumulate_reverse", "state"));
  LA_CHECK(!e->gated, LA_ERR_UNSUPPORTED, "la_engine_accumulate_reverse: gates are causal (docs/design.md §1.2 \"Gates\")");
  return n == 0 ? LA_OK : decay_accumulate(e, token0, n, k, v, state, 1);
}

static la_status causal_apply(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, la_state *state, void *out,
                              la_den_stats *stats, void *raw, double *lsc);

/* causal_apply on a state in either form: a row-form state (per-feature gates, gla_rows.c)
 * runs in head form and comes back with its a grown by the block's gates. */
static la_status causal_apply_rows(la_engine e, int64_t token0, int64_t n, const void *q,
                                   const void *k, const void *v, la_state *state, void *out,
                                   la_den_stats *stats, void *raw, double *lsc) {
  if (!la_gla_row_form(e, state))
    return causal_apply(e, token0, n, q, k, v, state, out, stats, raw, lsc);
  la_gla_rows_to_head(e, state, &e->hst);
  gla_sums_begin(e);
  const la_status st = causal_apply(e, token0, n, q, k, v, &e->hst, out, stats, raw, lsc);
  e->gsum = NULL;
  LA_TRY(st);
  la_gla_head_to_rows(e, &e->hst, state);
  for (int i = 0; i < state->heads; i++) state->a[i] += e->rows.a[i];
  return LA_OK;
}

la_status la_engine_apply(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, la_state *state, void *out, la_den_stats *stats) {
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_apply: n = %lld < 0", (long long)n);
  LA_TRY(la_engine_state_ok(e, state, "la_engine_apply", "state"));
  LA_TRY(la_engine_gates_cover(e, token0, n, "la_engine_apply"));
  if (n == 0) return LA_OK;
  const int H = e->H;
  if (e->cfg.mode == LA_BIDIRECTIONAL && e->dlog) {
    LA_CHECK(state_empty(e, state), LA_ERR_UNSUPPORTED,
             "la_engine_apply: a decayed bidirectional block reads no summary from elsewhere "
             "yet (docs/design.md §1.2)");
    return decay_bidir_all(e, token0, n, q, k, v, out, stats, NULL, NULL);
  }
  if (e->cfg.mode == LA_BIDIRECTIONAL) {
    /* Rows are independent: superblocks of all heads when there are chunks enough for the
     * threads, so that a thread reads whole token rows; else groups of adjacent heads. */
    const int B = n / e->C >= e->T ? e->T : 1, G = B > 1 ? 1 : la_head_groups(e);
    la_summaries_to_work(e, state->sz);
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
    for (int it = 0; it < G * B; it++) {
      const int g = it / B;
      int64_t lo, hi;
      la_superblock(n, e->C, B, it % B, &lo, &hi);
      e->kern->apply_bidir_heads(e, &e->work[la_thread_id()], la_head_group(H, G, g),
                                 la_head_group(H, G, g + 1), token0, lo, hi, q, e->sfall,
                                 state->m, out);
    }
    la_engine_merge_stats(e, stats);
    return LA_OK;
  }
  return causal_apply_rows(e, token0, n, q, k, v, state, out, stats, NULL, NULL);
}

la_status la_engine_apply_local(la_engine e, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_state *local, void *raw,
                                double *lsc) {
  LA_CHECK(e->cfg.mode == LA_CAUSAL, LA_ERR_ARG, "la_engine_apply_local: the engine is not causal");
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_apply_local: n = %lld < 0", (long long)n);
  LA_CHECK(raw && lsc, LA_ERR_ARG, "la_engine_apply_local: raw and lsc are needed");
  LA_TRY(la_engine_state_ok(e, local, "la_engine_apply_local", "local"));
  LA_TRY(la_engine_gates_cover(e, token0, n, "la_engine_apply_local"));
  if (n == 0) return LA_OK;
  return causal_apply_rows(e, token0, n, q, k, v, local, NULL, NULL, raw, lsc);
}

la_status la_engine_correct(la_engine e, int64_t token0, int64_t n, const void *q,
                            const la_state *prefix, const void *raw, const double *lsc,
                            void *out, la_den_stats *stats) {
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_correct: n = %lld < 0", (long long)n);
  LA_TRY(la_engine_state_ok(e, prefix, "la_engine_correct", "prefix"));
  LA_TRY(la_engine_gates_cover(e, token0, n, "la_engine_correct"));
  if (n == 0) return LA_OK;
  if (la_gla_row_form(e, prefix)) { /* per-feature gates: read in head form (gla_rows.c) */
    la_gla_rows_to_head(e, prefix, &e->hst);
    prefix = &e->hst;
  }
  const la_correct_fn correct = e->gate_w > 1 ? e->kern->gla_correct : e->kern->correct_rows;
  const int H = e->H, B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int it = 0; it < H * B; it++) {
    int h = it / B, b = it % B;
    int64_t lo, hi;
    la_superblock(n, e->C, B, b, &lo, &hi);
    la_work *w = &e->work[la_thread_id()];
    correct(e, w, h, token0, lo, hi, q, prefix->sz + h * rsz, prefix->m[h], raw, lsc, out);
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

/* Causal, two passes when heads alone cannot occupy the threads (§4). */
static la_status causal_apply(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, la_state *state, void *out,
                              la_den_stats *stats, void *raw, double *lsc) {
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  /* decay (§1.2): no superblocks, their totals would need the cumulative decay */
  const int B = !e->dlog && (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  la_state_reset(&e->part);
  if (B > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int it = 0; it < H * B; it++) {
      int h = it / B, b = it % B;
      if (b == B - 1) continue; /* the last superblock's total is not needed */
      int64_t lo, hi;
      la_superblock(n, e->C, B, b, &lo, &hi);
      e->kern->accum_range(e, &e->work[la_thread_id()], h, token0, lo, hi, k, v,
                  e->part.sz + (size_t)it * rsz, e->part.m + it, e->part.f + it);
    }
  }
  /* Exclusive prefix over superblocks, in place: part[h,b] <- state_h (+) tot_0..tot_{b-1};
   * state_h is the running prefix, e->scratch holds one total while it is swapped out. */
  for (int h = 0; h < H; h++) {
    double *run = state->sz + (size_t)h * rsz;
    for (int b = 0; b < B; b++) {
      size_t idx = (size_t)h * B + b;
      double *p = e->part.sz + idx * rsz, tot_m = e->part.m[idx];
      int tot_f = e->part.f[idx];
      memcpy(e->scratch, p, sizeof(double) * rsz);
      memcpy(p, run, sizeof(double) * rsz);
      e->part.m[idx] = state->m[h];
      e->part.f[idx] = state->f[h];
      if (b < B - 1)
        la_state_combine_head(run, state->m + h, state->f + h, e->scratch, &tot_m, &tot_f, rsz);
    }
  }
  if (B == 1) { /* heads alone occupy the threads: one group of adjacent heads per thread;
                 * decayed (§1.2: always B = 1) the same, on decay_causal (gla_causal with
                 * per-feature gates) */
    const int G = la_head_groups(e);
    const la_causal_heads_fn apply = e->gate_w > 1 ? e->kern->gla_causal
                                     : e->dlog     ? e->kern->decay_causal
                                                   : e->kern->apply_causal_heads;
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
    for (int g = 0; g < G; g++) {
      const int h0 = la_head_group(H, G, g), h1 = la_head_group(H, G, g + 1);
      apply(e, &e->work[la_thread_id()], h0, h1, token0, 0, n, q, k, v,
            e->part.sz + (size_t)h0 * rsz, e->part.m + h0, e->part.f + h0, out, raw, lsc);
    }
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int it = 0; it < H * B; it++) {
      int h = it / B, b = it % B;
      int64_t lo, hi;
      la_superblock(n, e->C, B, b, &lo, &hi);
      la_work *w = &e->work[la_thread_id()];
      e->kern->apply_causal(e, w, h, token0, lo, hi, q, k, v, e->part.sz + (size_t)it * rsz,
                            e->part.m + it, e->part.f + it, out, raw, lsc, NULL);
    }
  }
  /* The last superblock's state now covers the whole block. */
  for (int h = 0; h < H; h++) {
    size_t idx = (size_t)h * B + (B - 1);
    memcpy(state->sz + (size_t)h * rsz, e->part.sz + idx * rsz, sizeof(double) * rsz);
    state->m[h] = e->part.m[idx];
    state->f[h] = e->part.f[idx];
    /* §1.2: the block's decay (per-feature gates: the row form's, causal_apply_rows) */
    if (e->dlog && e->gate_w == 1) state->a[h] += la_block_log_decay(e, h, token0, n);
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}


la_status la_engine_apply_segmented(la_engine e, int64_t token0, int64_t n, const void *q,
                                    const void *k, const void *v, const la_state *left,
                                    const la_state *right, void *out, la_den_stats *stats) {
  LA_CHECK(e->cfg.mode == LA_BIDIRECTIONAL, LA_ERR_ARG,
           "la_engine_apply_segmented: the engine is not bidirectional");
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_apply_segmented: n = %lld < 0", (long long)n);
  LA_TRY(la_engine_state_ok(e, left, "la_engine_apply_segmented", "left"));
  LA_TRY(la_engine_state_ok(e, right, "la_engine_apply_segmented", "right"));
  if (n == 0) return LA_OK;
  if (e->dlog) { /* decay (§1.2): left is the prefix summary, right the reverse suffix */
    const int around = !state_empty(e, left) || !state_empty(e, right);
    return around ? decay_bidir_all(e, token0, n, q, k, v, out, stats, left, right)
                  : decay_bidir_all(e, token0, n, q, k, v, out, stats, NULL, NULL);
  }
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    e->kern->apply_segmented(e, w, h, token0, n, q, k, v, left->sz + h * rsz, left->m[h],
                          right->sz + h * rsz, right->m[h], out);
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

/* Every head through the window kernel: the forward (out) or the backward replay (g, dq, side).
 * The queues are reserved here, before the parallel region (§3.2). */
la_status la_window_heads(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, int64_t hlo, int64_t hhi, const void *hk,
                          const void *hv, const la_state *mid, void *out, const void *g,
                          void *dq, double *side, la_den_stats *stats) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  LA_TRY(la_engine_reserve_queues(e, la_window_queue_cap(e, token0 + n)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++)
    e->kern->apply_window(e, &e->work[la_thread_id()], h, token0, n, q, k, v, hlo, hhi, hk, hv,
                          mid->sz + h * rsz, mid->m[h], out, g, dq, side);
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

la_status la_engine_apply_window(la_engine e, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, int64_t hlo, int64_t hhi,
                                 const void *hk, const void *hv, const la_state *mid, void *out,
                                 la_den_stats *stats) {
  LA_CHECK(e->cfg.mode == LA_CAUSAL && e->cfg.window > 0, LA_ERR_ARG,
           "la_engine_apply_window: the engine has no causal window");
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_apply_window: n = %lld < 0", (long long)n);
  LA_CHECK(hlo <= hhi && hhi <= token0, LA_ERR_ARG,
           "la_engine_apply_window: halo [%lld, %lld) does not end at or before token0 = %lld",
           (long long)hlo, (long long)hhi, (long long)token0);
  LA_TRY(la_engine_state_ok(e, mid, "la_engine_apply_window", "mid"));
  if (n == 0) return LA_OK;
  /* gates (§1.2): the halo's too, since its keys decay by the gates up to token0 */
  LA_TRY(la_engine_gates_cover(e, hlo, token0 + n - hlo, "la_engine_apply_window"));
  return la_window_heads(e, token0, n, q, k, v, hlo, hhi, hk, hv, mid, out, NULL, NULL, NULL,
                         stats);
}

la_status la_forward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                     void *out, la_den_stats *stats) {
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_forward: n = %lld < 0", (long long)n);
  la_state st;
  LA_TRY(la_state_init(&st, e->H, e->r, e->dv));
  la_status s = LA_OK;
  if (e->cfg.window > 0 && e->cfg.window < n) /* nothing before the sequence: empty halo */
    s = la_engine_apply_window(e, 0, n, q, k, v, 0, 0, NULL, NULL, &st, out, stats);
  else if (e->cfg.mode == LA_BIDIRECTIONAL && e->dlog) /* §1.2: forward and reverse passes */
    s = decay_bidir_all(e, 0, n, q, k, v, out, stats, NULL, NULL);
  else if (e->cfg.mode == LA_BIDIRECTIONAL && e->seg_off) /* identity left and right */
    s = la_engine_apply_segmented(e, 0, n, q, k, v, &st, &st, out, stats);
  else {
    if (e->cfg.mode == LA_BIDIRECTIONAL) s = la_engine_accumulate(e, 0, n, k, v, &st);
    if (s == LA_OK) s = la_engine_apply(e, 0, n, q, k, v, &st, out, stats);
  }
  la_state_free(&st);
  if (s == LA_OK && e->check_finite) s = la_engine_take_nonfinite(e);
  return s;
}
