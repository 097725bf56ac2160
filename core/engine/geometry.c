/* Segment and window geometry, docs/design.md §3: which global tokens start a segment, the
 * segment layout of a chunk, the superblock split of a block over threads (§4.2), and the
 * halos a rank's window needs from earlier (forward) and later (backward) ranks (§3.2).
 * Everything here depends only on its arguments and the engine's offsets, chunk and window,
 * so every rank can compute any other rank's halo. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "engine_internal.h"

la_status la_engine_set_segments(la_engine e, const int64_t *offsets, int64_t count) {
  if (!offsets || count < 2) {
    e->seg_off = NULL;
    e->seg_count = 0;
    return LA_OK;
  }
  LA_CHECK(!e->rout, LA_ERR_UNSUPPORTED,
           "segments: not with a replay output (la_engine_set_replay_output)");
  LA_CHECK(offsets[0] == 0, LA_ERR_ARG, "segments: the first offset is %lld, not 0",
           (long long)offsets[0]);
  for (int64_t i = 1; i < count; i++)
    LA_CHECK(offsets[i] > offsets[i - 1], LA_ERR_ARG,
             "segments: offsets must increase, but o_%lld = %lld follows o_%lld = %lld",
             (long long)i, (long long)offsets[i], (long long)(i - 1), (long long)offsets[i - 1]);
  e->seg_off = offsets;
  e->seg_count = count;
  return LA_OK;
}

/* Index of the first offset >= t (binary search; seg_count if none). */
static int64_t first_offset_at_or_after(const la_engine e, int64_t t) {
  int64_t lo = 0, hi = e->seg_count;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (e->seg_off[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Segment layout of global tokens [t0, t0+len) (§3): segi[i] = segment of token i counted
 * from the segment of t0; *reset = 1 when t0 starts a segment. Returns the number of
 * segments touched. Without segments: one segment, no reset. */
int la_seg_layout(const la_engine e, int64_t t0, int len, int *segi, int *reset) {
  *reset = 0;
  if (!e->seg_off) {
    memset(segi, 0, sizeof(int) * (size_t)len);
    return 1;
  }
  int64_t idx = first_offset_at_or_after(e, t0);
  if (idx < e->seg_count && e->seg_off[idx] == t0) {
    *reset = 1;
    idx++;
  }
  int s = 0;
  for (int i = 0; i < len; i++) {
    if (idx < e->seg_count && e->seg_off[idx] == t0 + i && i > 0) {
      s++;
      idx++;
    }
    segi[i] = s;
  }
  return s + 1;
}

/* Smallest multiple of C that is >= x (0 for x <= 0): the global chunk grid of windows. */
int64_t la_ceil_to(int64_t x, int64_t C) { return x <= 0 ? 0 : ((x + C - 1) / C) * C; }

/* 1 if global token t starts a segment (o_s = t with s < S, or t = N = o_S). */
int la_is_segment_start(const la_engine e, int64_t t) {
  if (!e->seg_off) return t == 0;
  int64_t i = first_offset_at_or_after(e, t);
  return i < e->seg_count && e->seg_off[i] == t;
}

/* Start of the segment holding global token t. */
int64_t la_segment_start(const la_engine e, int64_t t) {
  if (!e->seg_off) return 0;
  int64_t i = first_offset_at_or_after(e, t + 1); /* first offset > t */
  return i > 0 ? e->seg_off[i - 1] : 0;
}

/* First segment start after global token t (INT64_MAX if none). */
int64_t la_next_start_after(const la_engine e, int64_t t) {
  if (!e->seg_off) return INT64_MAX;
  int64_t i = first_offset_at_or_after(e, t + 1);
  return i < e->seg_count ? e->seg_off[i] : INT64_MAX;
}

int64_t la_engine_segment_at_or_after(const la_engine e, int64_t t) {
  if (!e->seg_off) return t <= 0 ? 0 : INT64_MAX;
  int64_t i = first_offset_at_or_after(e, t);
  return i < e->seg_count ? e->seg_off[i] : INT64_MAX;
}
int la_engine_has_segments(const la_engine e) { return e->seg_off != NULL; }

la_status la_engine_set_mask(la_engine e, const void *mask) {
  (void)e;
  (void)mask;
  return la_error(LA_ERR_UNSUPPORTED, "general pairwise masks are not supported: an arbitrary mask "
                  "breaks the single shared summary phi(q)^T S (docs/design.md §3.3); use segments or "
                  "a causal window");
}

/* Superblock bounds: b of B, chunk-aligned. */
void la_superblock(int64_t n, int C, int B, int b, int64_t *lo, int64_t *hi) {
  int64_t nch = (n + C - 1) / C;
  *lo = (nch * b / B) * C;
  *hi = (nch * (b + 1) / B) * C;
  if (*lo > n) *lo = n;
  if (*hi > n) *hi = n;
}

void la_window_halo(const la_engine e, int64_t token0, int64_t n, int64_t *lo, int64_t *hi) {
  const int64_t W = e->cfg.window, C = e->C;
  *lo = *hi = token0;
  if (W <= 0 || n <= 0 || la_is_segment_start(e, token0)) return;
  int64_t S0 = la_segment_start(e, token0);
  int64_t l = token0 - W + 1;
  l = l > S0 ? l : S0;
  l = l > 0 ? l : 0;
  int64_t c0_last = ((token0 + n - 1) / C) * C;
  if (c0_last < token0) c0_last = token0;
  int64_t A = la_ceil_to(token0 + n - W, C); /* c0_last + len_last = token0 + n */
  A = A < token0 ? A : token0;
  *lo = l < token0 ? l : token0;
  *hi = A > *lo ? A : *lo;
}

void la_window_future(const la_engine e, int64_t token0, int64_t n, int64_t N, int64_t *lo,
                      int64_t *hi) {
  const int64_t W = e->cfg.window, C = e->C, end = token0 + n;
  *lo = *hi = end;
  if (W <= 0 || n <= 0 || end >= N) return;
  int64_t E = la_next_start_after(e, end - 1);
  if (E > N) E = N;
  if (E <= end) return;
  int64_t S = la_segment_start(e, end - 1), c0 = (S / C) * C;
  if (c0 < token0) c0 = token0;
  int64_t A = (c0 + W) / C * C;
  A = A < E ? A : E;
  A = A > end ? A : end;
  int64_t R = end - 1 + W < E ? end - 1 + W : E;
  *lo = A;
  *hi = R > A ? R : A;
}

/* Capacity of the window queue for tokens up to `reach` (§3): O(min(W, reach) / C) chunks. */
int la_window_queue_cap(const la_engine e, int64_t reach) {
  const int64_t span = e->cfg.window < reach ? e->cfg.window : reach;
  return (int)(span / e->C) + 8;
}

