/* --reproducible on one rank, docs/design.md §4.7: blocks of R tokens on the global grid
 * (la_engine_repro_block), each summarized from the identity by the ordinary kernels, and
 * the block summaries combined in exact arithmetic (exact.c). Every output row then depends
 * on its block's data and on an exactly rounded prefix only, never on how the sequence was
 * split over ranks, streaming blocks or threads.
 * Piece summaries of block j (tokens [jR, jR + R) of the sequence):
 *   TAIL(j): the block from the identity through accum_range (the keys after its last segment
 *            start, f = 1, or the whole block);
 *   HEAD(j): the keys before its first segment start (f = 1), or TAIL(j) without a start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "engine_internal.h"
#include "la_alloc.h"

/* R = 64 chunks (4096 tokens at the usual C = 64): the exact combination costs O(r dv) per
 * block, about 1/64 of a chunk's O(C r dv) work per chunk of the block. */
int64_t la_engine_repro_block(const la_engine e) { return (int64_t)LA_REPRO_CHUNKS * e->C; }

static la_status check_grid(const la_engine e, int64_t token0, int64_t n, const char *fn) {
  const int64_t R = la_engine_repro_block(e);
  LA_CHECK(n >= 0, LA_ERR_ARG, "%s: n = %lld < 0", fn, (long long)n);
  LA_CHECK(n == 0 || token0 % R == 0, LA_ERR_ARG,
           "%s: token0 = %lld is not on the reproducible grid of %lld tokens (ranks and "
           "streaming blocks must start at multiples of it, docs/design.md §4.7)",
           fn, (long long)token0, (long long)R);
  return LA_OK;
}

/* Block j of [0, n): rows [lo, hi) relative to token0. */
static void block_rows(int64_t R, int64_t n, int64_t j, int64_t *lo, int64_t *hi) {
  *lo = j * R;
  *hi = *lo + R < n ? *lo + R : n;
}

/* TAIL(j) or HEAD(j) into (sz, m, f) from the identity (head: only the keys before the
 * block's first start; f = 1 if the block holds a start). */
static void piece(la_engine e, la_work *w, int h, int64_t token0, int64_t n, int64_t j,
                  int head, const void *k, const void *v, double *sz, double *m, int *f) {
  int64_t lo, hi;
  block_rows(la_engine_repro_block(e), n, j, &lo, &hi);
  memset(sz, 0, sizeof(double) * (size_t)e->r * (e->dv + 1));
  *m = -INFINITY;
  *f = 0;
  const int64_t fs = la_engine_segment_at_or_after(e, token0 + lo);
  const int start = e->seg_off && fs < token0 + hi;
  if (head && start) {
    if (fs > token0 + lo) e->kern->accum_range(e, w, h, token0, lo, fs - token0, k, v, sz, m, f);
    *f = 1;
    return;
  }
  e->kern->accum_range(e, w, h, token0, lo, hi, k, v, sz, m, f);
  *f = start;
}

/* x_h <- x_h (+) the pieces [j0, j1) of every head (TAIL, or HEAD with head = 1), flagged
 * with f: the pieces are summed on per-thread exact states in any order, then folded in. */
static la_status sum_pieces(la_engine e, int64_t token0, int64_t n, int64_t j0, int64_t j1,
                            int head, const void *k, const void *v, int f, la_xstate *x) {
  const int H = e->H, T = e->T;
  const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
  la_xstate acc = {0};
  LA_TRY(la_xstate_init(&acc, T * H, e->r, e->dv));
  const int64_t nb = j1 - j0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(T)
  for (int64_t it = 0; it < H * nb; it++) {
    const int h = (int)(it / nb), t = la_thread_id();
    la_work *w = &e->work[t];
    double m;
    int pf;
    piece(e, w, h, token0, n, j0 + it % nb, head, k, v, w->wsz, &m, &pf);
    la_xhead_add(acc.x + (size_t)(t * H + h) * len, rsz, w->wsz, m, 0);
  }
  for (int h = 0; h < H; h++) {
    int64_t *a = acc.x + (size_t)h * len;
    for (int t = 1; t < T; t++) la_xhead_combine(a, acc.x + (size_t)(t * H + h) * len, rsz);
    a[0] = f;
    la_xhead_combine(x->x + (size_t)h * len, a, rsz); /* flagged: f drops what x held */
  }
  la_xstate_free(&acc);
  return LA_OK;
}

static la_status check_x(const la_engine e, const la_xstate *x, const char *fn) {
  LA_CHECK(x && x->x && x->heads == e->H && x->r == e->r && x->dv == e->dv, LA_ERR_ARG,
           "%s: the exact state is not of the engine's shape (%d heads, r = %d, dv = %d)", fn,
           e->H, e->r, e->dv);
  return LA_OK;
}

/* The block holding the last segment start of [token0, token0 + n), or -1. */
static int64_t last_start_block(const la_engine e, int64_t token0, int64_t n) {
  if (!e->seg_off || n == 0) return -1;
  const int64_t ls = la_segment_start(e, token0 + n - 1);
  return ls >= token0 ? (ls - token0) / la_engine_repro_block(e) : -1;
}

la_status la_engine_accumulate_exact(la_engine e, int64_t token0, int64_t n, const void *k,
                                     const void *v, la_xstate *x) {
  LA_TRY(check_grid(e, token0, n, "la_engine_accumulate_exact"));
  LA_TRY(check_x(e, x, "la_engine_accumulate_exact"));
  if (n == 0) return LA_OK;
  const int64_t R = la_engine_repro_block(e), nb = (n + R - 1) / R;
  const int64_t js = last_start_block(e, token0, n); /* the fold keeps TAIL(js) on */
  return sum_pieces(e, token0, n, js < 0 ? 0 : js, nb, 0, k, v, js >= 0, x);
}

la_status la_engine_segment_ends_exact(la_engine e, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_xstate *tail, la_xstate *head) {
  LA_TRY(la_engine_accumulate_exact(e, token0, n, k, v, tail));
  LA_TRY(check_x(e, head, "la_engine_segment_ends_exact"));
  if (n == 0) return LA_OK;
  const int64_t R = la_engine_repro_block(e), nb = (n + R - 1) / R;
  const int64_t fs = la_engine_segment_at_or_after(e, token0);
  const int start = e->seg_off && fs < token0 + n;
  const int64_t jf = start ? (fs - token0) / R : nb;
  /* reverse fold: HEAD(jf) with f = 1, then the whole blocks before it */
  LA_TRY(sum_pieces(e, token0, n, 0, jf, 0, k, v, 0, head));
  if (start) {
    la_xstate one = {0};
    LA_TRY(la_xstate_init(&one, e->H, e->r, e->dv));
    la_status s = sum_pieces(e, token0, n, jf, jf + 1, 1, k, v, 1, &one);
    /* head <- (the whole blocks before jf) + HEAD(jf), flagged */
    const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
    for (int h = 0; h < e->H && s == LA_OK; h++) {
      int64_t *a = head->x + (size_t)h * len;
      la_xhead_add_x(a, one.x + (size_t)h * len, rsz);
      a[0] = 1;
    }
    la_xstate_free(&one);
    LA_TRY(s);
  }
  return LA_OK;
}

/* Unstabilized maps with a head per thread: one pass per head, block after block; block j
 * reads the base round(x) beside its own state from the identity, which ends as TAIL(j)
 * (bitwise accum_range's: the same features, scales and key summary) and goes into x. */
static la_status causal_one_pass(la_engine e, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, la_xstate *x, void *out,
                                 la_den_stats *stats) {
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
  const int64_t R = la_engine_repro_block(e), nb = (n + R - 1) / R;
  la_state base = {0};
  LA_TRY(la_state_init(&base, H, e->r, e->dv));
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < H; h++) {
    la_work *w = &e->work[la_thread_id()];
    int64_t *xh = x->x + (size_t)h * len;
    double *b = base.sz + (size_t)h * rsz;
    for (int64_t j = 0; j < nb; j++) {
      int64_t lo, hi;
      block_rows(R, n, j, &lo, &hi);
      double bm, m = -INFINITY;
      int bf, f = 0;
      la_xhead_round(xh, rsz, 0, b, &bm, &bf);
      memset(w->wsz, 0, sizeof(double) * rsz);
      e->kern->apply_causal(e, w, h, token0, lo, hi, q, k, v, w->wsz, &m, &f, out, NULL, NULL,
                            bm == -INFINITY ? NULL : b);
      la_xhead_add(xh, rsz, w->wsz, m, f);
    }
  }
  la_engine_merge_stats(e, stats);
  la_state_free(&base);
  return LA_OK;
}

la_status la_engine_apply_exact(la_engine e, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_xstate *x, void *out,
                                la_den_stats *stats) {
  LA_TRY(check_grid(e, token0, n, "la_engine_apply_exact"));
  LA_TRY(check_x(e, x, "la_engine_apply_exact"));
  if (n == 0) return LA_OK;
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
  la_state parts = {0}, tot = {0};
  if (e->cfg.mode == LA_BIDIRECTIONAL) { /* rows read one complete summary: round it once */
    LA_TRY(la_state_init(&tot, H, e->r, e->dv));
    la_xstate_round(x, e->stabilized, &tot);
    la_status s = la_engine_apply(e, token0, n, q, k, v, &tot, out, stats);
    la_state_free(&tot);
    return s;
  }
  const int64_t R = la_engine_repro_block(e), nb = (n + R - 1) / R;
  if (!e->stabilized && e->T <= H) return causal_one_pass(e, token0, n, q, k, v, x, out, stats);
  la_status s = la_state_init(&parts, (int)(H * nb), e->r, e->dv);
  if (s == LA_OK) s = la_state_init(&tot, H, e->r, e->dv);
  if (s != LA_OK) {
    la_state_free(&parts);
    return la_error(LA_ERR_NOMEM, "out of memory for the block summaries of a reproducible "
                    "block of %lld tokens (%lld blocks)", (long long)n, (long long)nb);
  }
  /* 1. TAIL(j) of every block */
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * nb; it++)
    piece(e, &e->work[la_thread_id()], (int)(it / nb), token0, n, it % nb, 0, k, v,
          parts.sz + (size_t)it * rsz, parts.m + it, parts.f + it);
  /* 2. exclusive exact prefix: block j gets round(x (+) TAIL(0..j-1)); x ends past them all */
#pragma omp parallel for schedule(static) num_threads(e->T)
  for (int h = 0; h < H; h++) {
    int64_t *xh = x->x + (size_t)h * len;
    double *t = tot.sz + (size_t)h * rsz;
    for (int64_t j = 0; j < nb; j++) {
      const size_t it = (size_t)h * nb + j;
      double *p = parts.sz + it * rsz, tm = parts.m[it];
      int tf = parts.f[it];
      memcpy(t, p, sizeof(double) * rsz);
      la_xhead_round(xh, rsz, e->stabilized, p, parts.m + it, parts.f + it);
      la_xhead_add(xh, rsz, t, tm, tf);
    }
  }
  /* 3. every block's outputs from its own prefix: unstabilized maps read it as a base beside
   * the block's own state from the identity, as causal_one_pass does (the same bits) */
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * nb; it++) {
    int64_t lo, hi;
    block_rows(R, n, it % nb, &lo, &hi);
    la_work *w = &e->work[la_thread_id()];
    double *p = parts.sz + (size_t)it * rsz;
    if (e->stabilized) {
      e->kern->apply_causal(e, w, (int)(it / nb), token0, lo, hi, q, k, v, p, parts.m + it,
                            parts.f + it, out, NULL, NULL, NULL);
    } else {
      double m = -INFINITY;
      int f = 0;
      memset(w->wsz, 0, sizeof(double) * rsz);
      e->kern->apply_causal(e, w, (int)(it / nb), token0, lo, hi, q, k, v, w->wsz, &m, &f, out,
                            NULL, NULL, parts.m[it] == -INFINITY ? NULL : p);
    }
  }
  la_engine_merge_stats(e, stats);
  la_state_free(&parts);
  la_state_free(&tot);
  return LA_OK;
}

/* Rows [a, b) of the block (relative to token0), one segment piece, from the summary sz. */
static void apply_piece(la_engine e, la_work *w, int h, int64_t token0, int64_t a, int64_t b,
                        const void *q, const double *sz, double m, void *out) {
  if (b > a) e->kern->apply_bidir(e, w, h, token0, a, b, q, sz, m, out);
}

la_status la_engine_apply_segmented_exact(la_engine e, int64_t token0, int64_t n,
                                          const void *q, const void *k, const void *v,
                                          const la_xstate *left, const la_xstate *right,
                                          void *out, la_den_stats *stats) {
  LA_CHECK(e->cfg.mode == LA_BIDIRECTIONAL, LA_ERR_ARG,
           "la_engine_apply_segmented_exact: the engine is not bidirectional");
  LA_TRY(check_grid(e, token0, n, "la_engine_apply_segmented_exact"));
  LA_TRY(check_x(e, left, "la_engine_apply_segmented_exact"));
  LA_TRY(check_x(e, right, "la_engine_apply_segmented_exact"));
  if (n == 0) return LA_OK;
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
  const int64_t R = la_engine_repro_block(e), nb = (n + R - 1) / R;
  /* per block: TAIL, HEAD; per head: the totals of the segments that cross a block edge
   * (segment i of the head: tot[h * (nb + 1) + i]), and the walk's exact state */
  la_state tail = {0}, head = {0}, tot = {0};
  la_xstate walk = {0};
  int64_t *first = la_malloc(sizeof(int64_t) * (size_t)(H * nb) + 1);
  la_status s = first ? la_state_init(&tail, (int)(H * nb), e->r, e->dv) : LA_ERR_NOMEM;
  if (s == LA_OK) s = la_state_init(&head, (int)(H * nb), e->r, e->dv);
  if (s == LA_OK) s = la_state_init(&tot, (int)(H * (nb + 1)), e->r, e->dv);
  if (s == LA_OK) s = la_xstate_init(&walk, H, e->r, e->dv);
  if (s != LA_OK) {
    free(first);
    la_state_free(&tail);
    la_state_free(&head);
    la_state_free(&tot);
    return la_error(LA_ERR_NOMEM, "out of memory for the segment summaries of a reproducible "
                    "block of %lld tokens", (long long)n);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * nb; it++) {
    la_work *w = &e->work[la_thread_id()];
    const int h = (int)(it / nb);
    piece(e, w, h, token0, n, it % nb, 0, k, v, tail.sz + it * rsz, tail.m + it, tail.f + it);
    if (tail.f[it]) piece(e, w, h, token0, n, it % nb, 1, k, v, head.sz + it * rsz, head.m + it, head.f + it);
  }
  /* the walk: segment totals = left (+) pieces (+) right, exact, rounded once each */
  memcpy(walk.x, left->x, sizeof(int64_t) * len * H);
#pragma omp parallel for schedule(static) num_threads(e->T)
  for (int h = 0; h < H; h++) {
    int64_t *xh = walk.x + (size_t)h * len, i = 0;
    xh[0] = 0;
    for (int64_t j = 0; j < nb; j++) {
      const size_t it = (size_t)h * nb + j;
      first[it] = i;
      if (!tail.f[it]) {
        la_xhead_add(xh, rsz, tail.sz + it * rsz, tail.m[it], 0);
        continue;
      }
      const size_t ti = (size_t)h * (nb + 1) + i++;
      la_xhead_add(xh, rsz, head.sz + it * rsz, head.m[it], 0);
      la_xhead_round(xh, rsz, e->stabilized, tot.sz + ti * rsz, tot.m + ti, tot.f + ti);
      la_xhead_add(xh, rsz, tail.sz + it * rsz, tail.m[it], 1);
    }
    /* the open segment goes on to the right (an empty HEAD if a segment starts there) */
    la_xhead_add_x(xh, right->x + (size_t)h * len, rsz);
    const size_t ti = (size_t)h * (nb + 1) + i;
    la_xhead_round(xh, rsz, e->stabilized, tot.sz + ti * rsz, tot.m + ti, tot.f + ti);
  }
  /* every block: its first piece, the segments inside it, its last piece */
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * nb; it++) {
    la_work *w = &e->work[la_thread_id()];
    const int h = (int)(it / nb);
    int64_t lo, hi;
    block_rows(R, n, it % nb, &lo, &hi);
    const size_t t0 = (size_t)h * (nb + 1) + first[it];
    int64_t a = lo, b = la_engine_segment_at_or_after(e, token0 + lo) - token0;
    b = b < hi ? b : hi;
    apply_piece(e, w, h, token0, a, b, q, tot.sz + t0 * rsz, tot.m[t0], out);
    while (b < hi) {
      a = b;
      b = la_next_start_after(e, token0 + a) - token0;
      if (b >= hi) { /* the last piece continues after the block */
        apply_piece(e, w, h, token0, a, hi, q, tot.sz + (t0 + 1) * rsz, tot.m[t0 + 1], out);
        break;
      }
      double m = -INFINITY; /* a segment inside the block: its own sum */
      int f = 0;
      memset(w->wsz, 0, sizeof(double) * rsz);
      e->kern->accum_range(e, w, h, token0, a, b, k, v, w->wsz, &m, &f);
      apply_piece(e, w, h, token0, a, b, q, w->wsz, m, out);
    }
  }
  la_engine_merge_stats(e, stats);
  free(first);
  la_state_free(&tail);
  la_state_free(&head);
  la_state_free(&tot);
  la_xstate_free(&walk);
  return LA_OK;
}

/* ---- Causal sliding window (§3.2, §4.7) ----
 * Every block of R tokens runs the window kernel as if it began a rank: its queue starts from
 * the raw halo [lo, hi) and the middle summary of [hi, t0) (la_window_halo). The middle is
 * the exact sum of TAILs of the whole blocks inside it and one partial piece
 * [hi, ceil_R(hi)), rounded once, so every block's rows are a function of global positions. */

/* The summary of global keys [a, b) from the identity (no piece straddles token0, a
 * multiple of R): before token0 from the extended keys (xk, xv from global token x0), else
 * from the own rows. */
static void range_sum(la_engine e, la_work *w, int h, int64_t a, int64_t b, int64_t x0,
                      const void *xk, const void *xv, int64_t token0,
                      const void *k, const void *v, double *sz, double *m, int *f) {
  memset(sz, 0, sizeof(double) * (size_t)e->r * (e->dv + 1));
  *m = -INFINITY;
  *f = 0;
  if (b <= a) return;
  if (a < token0) e->kern->accum_range(e, w, h, x0, a - x0, b - x0, xk, xv, sz, m, f);
  else e->kern->accum_range(e, w, h, token0, a - token0, b - token0, k, v, sz, m, f);
}

la_status la_engine_apply_window_exact(la_engine e, int64_t token0, int64_t n, const void *q,
                                       const void *k, const void *v, int64_t x0,
                                       int64_t xend, const void *xk, const void *xv,
                                       void *out, la_den_stats *stats) {
  LA_CHECK(e->cfg.mode == LA_CAUSAL && e->cfg.window > 0, LA_ERR_ARG,
           "la_engine_apply_window_exact: the engine has no causal window");
  LA_TRY(check_grid(e, token0, n, "la_engine_apply_window_exact"));
  if (n == 0) return LA_OK;
  const int64_t R = la_engine_repro_block(e), W = e->cfg.window, nb = (n + R - 1) / R;
  const int64_t need = token0 + (n < W - 1 ? n : W - 1); /* halos reach up to here */
  LA_CHECK(x0 <= token0 && xend >= need && (x0 == 0 || x0 <= token0 - W + 1),
           LA_ERR_ARG, "la_engine_apply_window_exact: the extended keys [%lld, %lld) do not "
           "cover the window of the rows from %lld", (long long)x0, (long long)xend,
           (long long)token0);
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1), len = la_xhead_len(e->r, e->dv);
  const size_t es = e->dt == LA_F32 ? 4 : 8, rowk = es * H * e->dk, rowv = es * H * e->dv;
  /* TAIL of every whole block in [x0, token0 + n): block b is tokens [bR, bR + R) */
  const int64_t b0 = (x0 + R - 1) / R, b1 = (token0 + n) / R, ntail = b1 > b0 ? b1 - b0 : 0;
  la_state tails = {0}, mids = {0};
  la_xstate acc = {0}; /* one middle per thread at a time */
  la_status s = la_state_init(&tails, (int)(H * (ntail > 0 ? ntail : 1)), e->r, e->dv);
  if (s == LA_OK) s = la_state_init(&mids, e->T, e->r, e->dv);
  if (s == LA_OK) s = la_xstate_init(&acc, e->T, e->r, e->dv);
  if (s == LA_OK) s = la_engine_reserve_queues(e, la_window_queue_cap(e, token0 + n));
  if (s != LA_OK) {
    la_state_free(&tails);
    la_state_free(&mids);
    la_xstate_free(&acc);
    return la_error(LA_ERR_NOMEM, "out of memory for the window summaries of a reproducible "
                    "block of %lld tokens", (long long)n);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * ntail; it++) {
    const int64_t b = b0 + it % ntail;
    range_sum(e, &e->work[la_thread_id()], (int)(it / ntail), b * R, b * R + R, x0, xk, xv,
              token0, k, v, tails.sz + it * rsz, tails.m + it, tails.f + it);
  }
  /* each block's middle: partial piece + whole-block TAILs, exact, rounded once */
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int64_t it = 0; it < H * nb; it++) {
    la_work *w = &e->work[la_thread_id()];
    const int h = (int)(it / nb);
    const int64_t t0 = token0 + (it % nb) * R, tn = t0 + R < token0 + n ? R : token0 + n - t0;
    int64_t lo, hi;
    la_window_halo(e, t0, tn, &lo, &hi);
    const int t = la_thread_id();
    int64_t *xh = acc.x + (size_t)t * len;
    double *md = mids.sz + (size_t)t * rsz, mm;
    int mf;
    la_xhead_reset(xh, rsz);
    const int64_t cut = (hi + R - 1) / R * R < t0 ? (hi + R - 1) / R * R : t0;
    double m;
    int f;
    range_sum(e, w, h, hi, cut, x0, xk, xv, token0, k, v, w->wsz, &m, &f);
    la_xhead_add(xh, rsz, w->wsz, m, 0);
    for (int64_t b = cut / R; b < t0 / R && cut < t0; b++) {
      const size_t ti = (size_t)h * ntail + (b - b0);
      la_xhead_add(xh, rsz, tails.sz + ti * rsz, tails.m[ti], 0);
    }
    la_xhead_round(xh, rsz, e->stabilized, md, &mm, &mf);
    /* the kernel on this block, its raw halo from the extended keys or the own rows */
    const int ext = lo < token0;
    const char *hk = ext ? (const char *)xk + rowk * (size_t)(lo - x0)
                         : (const char *)k + rowk * (size_t)(lo - token0);
    const char *hv = ext ? (const char *)xv + rowv * (size_t)(lo - x0)
                         : (const char *)v + rowv * (size_t)(lo - token0);
    const size_t off = (size_t)(t0 - token0);
    e->kern->apply_window(e, w, h, t0, tn, (const char *)q + rowk * off,
                          (const char *)k + rowk * off, (const char *)v + rowv * off, lo, hi, hk,
                          hv, md, mm, (char *)out + rowv * off, NULL,
                          NULL, NULL);
  }
  la_engine_merge_stats(e, stats);
  la_state_free(&tails);
  la_state_free(&mids);
  la_xstate_free(&acc);
  return LA_OK;
}

/* What the drivers above allocate for one call on n rows (docs/design.md §4.8 counts it in
 * the memory estimate): block summaries, per-thread exact states, window tails. */
size_t la_repro_plan_bytes(const la_config *cfg, int heads, int r, int dv, int64_t n) {
  const size_t C = (size_t)(cfg->chunk > 0 ? cfg->chunk : la_default_chunk(r, dv));
  const size_t R = LA_REPRO_CHUNKS * C, T = (size_t)la_plan_threads(cfg), H = (size_t)heads;
  const size_t nb = ((size_t)(n > 0 ? n : 1) + R - 1) / R;
  const size_t st = sizeof(double) * ((size_t)r * (dv + 1) + 1) + sizeof(int);
  const size_t xs = sizeof(int64_t) * la_xhead_len(r, dv);
  size_t b = T * H * xs + H * xs;                   /* sum_pieces; a walk */
  size_t blocks = (3 * nb + 1) * H * st;            /* segments: tails, heads, totals */
  if (cfg->window > 0) {
    const size_t ntail = nb + (size_t)cfg->window / R + 1;
    size_t wb = ntail * H * st + T * (st + xs);     /* tails; a middle per thread */
    blocks = wb > blocks ? wb : blocks;
  }
  return b + blocks + nb * sizeof(int64_t) * H;
}
