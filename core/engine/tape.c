/* The tape of a causal forward and the backward that reads it, docs/design.md §4.4 "Tape".
 * la_forward_taped keeps what the replay of la_backward would recompute: per chunk and head
 * the prefix state the chunk's queries read (working precision), per token and head the
 * denominator policy's coefficients and key log-scale. la_backward_taped then walks the
 * pieces once, from last to first, and forms dq, dk and dv from the same rows. Layout
 * (bytes): a header, cm [chunks][H] doubles, rows [n][H][3] doubles, cs [chunks][H][r (dv+1)]
 * reals, each part 64-byte aligned. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "engine_internal.h"
#include "linattn/grad.h"

enum { TAPE_HDR = 64 };
static const uint64_t tape_magic = 0x4c41544150453031ULL; /* "LATAPE01" */

typedef struct {
  uint64_t magic;
  int64_t n, seg_count;
  int32_t H, r, dv, C, dt, complete;
} tape_hdr;

static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

/* Whether the engine can keep a tape of n tokens; *why says why not. */
static int tape_supported(const la_engine e, int64_t n, const char **why) {
  *why = NULL;
  if (e->cfg.mode != LA_CAUSAL) *why = "bidirectional mode (its backward replays one summary)";
  else if (e->cfg.window > 0 && e->cfg.window < n) *why = "a causal window";
  else if (n < 1) *why = "an empty sequence";
  else if (e->dlog) *why = "--decay (its backward composes decayed forwards; docs/design.md §1.2)";
  return *why == NULL;
}

static size_t tape_parts(const la_engine e, int64_t n, la_tape_view *v, char *base) {
  const size_t nch = (size_t)((n + e->C - 1) / e->C), H = (size_t)e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  size_t off = TAPE_HDR;
  const size_t cm = off;
  off = up64(off + sizeof(double) * nch * H);
  const size_t rows = off;
  off = up64(off + sizeof(double) * 3 * (size_t)n * H);
  const size_t cs = off;
  off = up64(off + la_dtype_size(e->dt) * nch * H * rsz);
  if (v && base) {
    v->cm = (double *)(base + cm);
    v->rows = (double *)(base + rows);
    v->cs = base + cs;
  }
  return off;
}

size_t la_tape_size(const la_engine e, int64_t n) {
  const char *why;
  return e && tape_supported(e, n, &why) ? tape_parts(e, n, NULL, NULL) : 0;
}

la_status la_forward_taped(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                           void *out, void *tape, la_den_stats *stats) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_forward_taped");
  const char *why;
  LA_CHECK(e && tape, LA_ERR_ARG, "la_forward_taped: no engine or no tape");
  LA_CHECK(tape_supported(e, n, &why), LA_ERR_UNSUPPORTED, "la_forward_taped: no tape with %s",
           why);
  LA_CHECK(((uintptr_t)tape & 63) == 0, LA_ERR_ARG,
           "la_forward_taped: the tape is not 64-byte aligned");
  tape_hdr h = {.magic = tape_magic, .n = n, .seg_count = e->seg_count, .H = e->H, .r = e->r,
                .dv = e->dv, .C = e->C, .dt = (int32_t)e->dt, .complete = 0};
  memcpy(tape, &h, sizeof h);
  la_tape_view view;
  tape_parts(e, n, &view, tape);
  e->tape = &view;
  la_status s = la_forward(e, n, q, k, v, out, stats);
  e->tape = NULL;
  if (s == LA_OK) {
    h.complete = 1;
    memcpy(tape, &h, sizeof h);
  }
  return s;
}

la_status la_backward_taped(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                            const void *g, const void *out, const void *tape, void *dq, void *dk,
                            void *dv) {
  LA_CHECK(!la_engine_decayed(e), LA_ERR_UNSUPPORTED, "%s: the backward with --decay is not built yet (docs/design.md §1.2)", "la_backward_taped");
  const char *why;
  LA_CHECK(e && tape && out, LA_ERR_ARG, "la_backward_taped: no engine, tape or outputs");
  LA_CHECK(tape_supported(e, n, &why), LA_ERR_UNSUPPORTED, "la_backward_taped: no tape with %s",
           why);
  tape_hdr h;
  memcpy(&h, tape, sizeof h);
  LA_CHECK(h.magic == tape_magic && h.complete, LA_ERR_ARG,
           "la_backward_taped: the tape was not filled by a successful la_forward_taped");
  LA_CHECK(h.n == n && h.H == e->H && h.r == e->r && h.dv == e->dv && h.C == e->C &&
               h.dt == (int32_t)e->dt && h.seg_count == e->seg_count,
           LA_ERR_ARG,
           "la_backward_taped: the tape is of another call (n %lld, H %d, r %d, dv %d, chunk %d, "
           "%lld segment offsets) than this one (n %lld, H %d, r %d, dv %d, chunk %d, %lld)",
           (long long)h.n, h.H, h.r, h.dv, h.C, (long long)h.seg_count, (long long)n, e->H,
           e->r, e->dv, e->C, (long long)e->seg_count);
  la_tape_view view;
  tape_parts(e, n, &view, (char *)tape);
  la_state suf;
  LA_TRY(la_state_init(&suf, e->H, e->r, e->dv)); /* nothing after the sequence */
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int G = la_head_groups(e); /* one group of adjacent heads per thread (§4.2) */
#pragma omp parallel for schedule(static, 1) num_threads(e->T)
  for (int g_ = 0; g_ < G; g_++) {
    const int h0 = la_head_group(e->H, G, g_), h1 = la_head_group(e->H, G, g_ + 1);
    e->kern->bwd_tape_heads(e, &e->work[la_thread_id()], h0, h1, n, q, k, v, g, out, &view, dq,
                            suf.sz + h0 * rsz, suf.m + h0, dk, dv);
  }
  la_state_free(&suf);
  return e->check_finite ? la_engine_take_nonfinite(e) : LA_OK;
}
