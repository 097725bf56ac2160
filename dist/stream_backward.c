/* The streamed backward (linattn/dist.h "The streamed backward"; docs/design.md §4.4
 * "Streamed"): la_dist_backward's causal and bidirectional algorithm fed in blocks of a rank's
 * rows, so that no rank holds more than a block of Q, K, V, dL/dout or gradients.
 *   pass 1 (blocks in order; causal only with P > 1): the rank's key summary;
 *   the plan's collective: the prefix (causal) or the complete summary (bidirectional);
 *   pass 2 (blocks in order): the replay from the running prefix: dq and the side rows, and the
 *     block's query sums, folded into the rank's reverse element (later blocks first);
 *   the plan's reversed collective: the query sums of the later ranks (causal) or of all;
 *   pass 3 (blocks in reverse order): dk and dv from the side rows and the running suffix.
 * The side rows (3 doubles per token and head) are handed to the caller in pass 2 and back in
 * pass 3, packed; the caller keeps them (linattn grad: an unlinked scratch file).
 * A window shorter than N, bidirectional segments and decay hold the shard: one step of the
 * rank's rows through la_dist_backward (la_bstream_holds_shard). Every rank takes the same
 * number of steps, and a status is agreed at each, as in the forward plan (stream.c). */
#include <stdlib.h>
#include <string.h>
#include "dist_internal.h"
#include "la_alloc.h"
#include "linattn/grad.h"
#include "scan_element.h"

struct la_bstream_s {
  la_dist d;
  la_engine eng;
  int64_t N, B, row0, n; /* tokens; block; this rank's rows [row0, row0 + n) */
  int H, r, dv, bidir, shard;
  int pass;              /* 1, 2, 3; 4: done */
  int64_t nsteps, step;  /* steps of every pass (max over the ranks), the current one */
  int64_t wlo, wn;       /* the step handed out */
  int failed;
  la_state st, rev, tmp; /* the running prefix (summary); the reverse element; scratch */
  char *side;            /* a block's side rows at the engine's stride, unless in dv */
  size_t stride;         /* bytes between side rows: la_backward_side_size(eng, 1) / H */
  int in_dv;             /* the side rows live in the caller's dv rows (la_backward_side_in_dv) */
};

int la_bstream_holds_shard(const la_engine eng, int64_t N) {
  const int64_t W = la_engine_window(eng);
  return (W > 0 && W < N) || la_engine_decayed(eng) ||
         (la_engine_has_segments(eng) && la_engine_mode(eng) == LA_BIDIRECTIONAL);
}

void la_bstream_destroy(la_bstream *ps) {
  if (!ps || !*ps) return;
  la_bstream s = *ps;
  la_state_free(&s->st);
  la_state_free(&s->rev);
  la_state_free(&s->tmp);
  free(s->side);
  free(s);
  *ps = NULL;
}

la_status la_bstream_create(la_dist d, la_engine eng, int64_t N, int64_t block, la_bstream *out) {
  *out = NULL;
  la_bstream s = la_calloc(1, sizeof *s);
  la_status st = s ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the streamed backward");
  if (st == LA_OK) {
    s->d = d;
    s->eng = eng;
    s->N = N;
    la_engine_shape(eng, &s->H, &s->r, &s->dv);
    s->bidir = la_engine_mode(eng) == LA_BIDIRECTIONAL;
    s->shard = la_bstream_holds_shard(eng, N);
    la_engine_ownership(eng, N, la_dist_size(d), la_dist_rank(d), &s->n, &s->row0);
    s->B = s->shard || block < 1 || block > s->n ? (s->n > 0 ? s->n : 1) : block;
    s->stride = la_backward_side_size(eng, 1) / (size_t)s->H;
    st = la_state_init(&s->st, s->H, s->r, s->dv);
    if (st == LA_OK) st = la_state_init(&s->rev, s->H, s->r, s->dv);
    if (st == LA_OK) st = la_state_init(&s->tmp, s->H, s->r, s->dv);
    /* as la_dist_backward: at a dV row's stride the side rows use the block's dv rows (free
     * until pass 3 writes them, and read there before they are overwritten) */
    s->in_dv = la_backward_side_in_dv(eng);
    if (st == LA_OK && !s->shard && !s->in_dv &&
        !(s->side = la_alloc_rows(la_backward_side_size(eng, s->B) + 1)))
      st = la_error(LA_ERR_NOMEM, "out of memory for the side rows of a block of %lld tokens "
                    "(lower --block-tokens)", (long long)s->B);
  }
  st = la_dist_agree(d, st);
  if (st == LA_OK) { /* every pass takes the most blocks of any rank */
    const int64_t mine = s->shard ? 1 : (s->n + s->B - 1) / s->B;
    if (MPI_Allreduce(&mine, &s->nsteps, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "MPI_Allreduce of the step count failed");
    if (s->shard && s->nsteps < 1) s->nsteps = 1;
    s->pass = s->shard ? 2 : s->bidir || la_dist_size(d) > 1 ? 1 : 2;
    s->step = 0;
  }
  st = la_dist_agree(d, st);
  if (st != LA_OK) la_bstream_destroy(&s);
  *out = s;
  return st;
}

int64_t la_bstream_block_rows(const la_bstream s) { return s->B; }

size_t la_bstream_side_bytes(const la_bstream s, int64_t n) {
  return s->shard ? 0 : (size_t)n * s->H * 3 * sizeof(double);
}

/* Block k of this rank (in token order), or an idle step (n = 0) past its last. */
static void block_at(const la_bstream s, int64_t k, int64_t *lo, int64_t *n) {
  const int64_t nb = s->shard ? 1 : (s->n + s->B - 1) / s->B;
  if (k >= nb || s->n == 0) {
    *lo = s->row0 + s->n;
    *n = 0;
    return;
  }
  *lo = s->row0 + k * s->B;
  *n = s->row0 + s->n - *lo < s->B ? s->row0 + s->n - *lo : s->B;
}

/* Between the passes (Collective): after pass 1 the prefix or the summary, after pass 2 the
 * later ranks' (or all) query sums (the plan's collective, plan_combine.c). */
static la_status between(la_bstream s, int done) {
  if (done == 1) return la_plan_combine(s->d, LA_OK, s->bidir, 0, &s->st, NULL);
  return la_plan_combine(s->d, LA_OK, s->bidir, 1, &s->rev, NULL);
}

la_status la_bstream_next(la_bstream s, la_bstream_block *b) {
  memset(b, 0, sizeof *b);
  LA_CHECK(!s->failed, LA_ERR_ARG, "the streamed backward failed at an earlier step");
  la_status st = LA_OK;
  if (s->pass <= 3 && s->step >= s->nsteps) { /* a pass ends */
    if (!s->shard && s->pass <= 2) st = between(s, s->pass);
    s->pass = s->shard ? 4 : s->pass + 1;
    s->step = 0;
  }
  if (st != LA_OK) {
    s->failed = 1;
    return st;
  }
  if (s->pass > 3) return LA_OK;
  /* pass 3 walks the blocks from the last: step k is block nsteps - 1 - k (idle steps first
   * on a rank with fewer blocks) */
  block_at(s, s->pass == 3 ? s->nsteps - 1 - s->step : s->step, &s->wlo, &s->wn);
  b->pass = s->pass;
  b->row0 = s->wlo;
  b->n = s->wn;
  const int rows = s->wn > 0;
  b->kv = rows;
  b->q = b->g = rows && s->pass >= 2;
  b->side_in = rows && s->pass == 3;
  b->dq = rows && s->pass == 2;
  b->side_out = rows && s->pass == 2 && !s->shard;
  b->dkdv = rows && (s->pass == 3 || s->shard);
  return LA_OK;
}

/* side rows: the engine's (at sb, its stride) <-> packed 3 doubles per (token, head) */
static void side_pack(const la_bstream s, char *sb, int64_t n, void *packed, int unpack) {
  const size_t rows = (size_t)n * s->H, w = 3 * sizeof(double);
  for (size_t i = 0; i < rows; i++) {
    char *eng = sb + i * s->stride, *pk = (char *)packed + i * w;
    if (unpack) memcpy(eng, pk, w);
    else memcpy(pk, eng, w);
  }
}

la_status la_bstream_feed(la_bstream s, la_status in, const void *q, const void *k,
                          const void *v, const void *g, void *side, void *dq, void *dk, void *dv,
                          la_den_stats *stats) {
  LA_CHECK(!s->failed && s->pass <= 3 && s->step < s->nsteps, LA_ERR_ARG,
           "la_bstream_feed without a step from la_bstream_next");
  la_status st = in;
  const int64_t lo = s->wlo, n = s->wn;
  if (s->shard) { /* one step: la_dist_backward agrees and combines itself */
    st = la_dist_agree(s->d, st);
    if (st == LA_OK) st = la_dist_backward(s->d, s->eng, n, lo, q, k, v, g, dq, dk, dv, stats);
    s->step++;
    if (st != LA_OK) s->failed = 1;
    return st;
  }
  char *sb = s->in_dv ? (char *)dv : s->side;
  if (st == LA_OK && n > 0) {
    if (s->pass == 1) {
      st = la_engine_accumulate(s->eng, lo, n, k, v, &s->st);
    } else if (s->pass == 2) {
      /* the block's reverse element, then folded in front of the later blocks' (causal; the
       * later block comes first in reverse order); bidirectional sums every query */
      la_state *rv = s->bidir ? &s->rev : &s->tmp;
      if (!s->bidir) la_state_reset(&s->tmp);
      st = la_backward_replay(s->eng, lo, n, q, k, v, g, &s->st, dq, sb, rv, stats);
      if (st == LA_OK && !s->bidir) {
        la_state_combine(&s->tmp, &s->rev);
        la_scan_el_copy(&s->rev, &s->tmp);
      }
      if (st == LA_OK) side_pack(s, sb, n, side, 0);
    } else {
      side_pack(s, sb, n, side, 1);
      st = la_backward_reverse(s->eng, lo, n, q, k, v, g, sb, &s->rev, dk, dv);
    }
  }
  s->step++;
  st = la_dist_agree(s->d, st);
  if (st != LA_OK) s->failed = 1;
  return st;
}

la_status la_bstream_finish(la_bstream s, la_den_stats *stats) {
  LA_CHECK(!s->failed && s->pass > 3, LA_ERR_ARG, "la_bstream_finish before the last step");
  return stats && !s->shard ? la_dist_reduce_stats(s->d, stats) : LA_OK;
}
