/* The streaming plan (linattn/dist.h "The streaming plan"; docs/design.md §4.5): the forward
 * fed in blocks of a rank's rows. Pass 1 sums each lane's keys, the collective combines the
 * lanes' sums across ranks, pass 2 hands out the outputs; every rank takes the same number of
 * steps so that errors are agreed at each one. A plan that holds the shard (a window, or
 * bidirectional segments) takes one step, la_forward_shard (forward.c).
 *
 * Causal, at the start of each lane of a run of many (L > 1), the lane's first block is
 * applied from a zero state and corrected by its prefix (la_engine_apply_local, _correct):
 * in a fresh run, while the ranks' prefix travels (the nonblocking exscan begun between the
 * passes ends in that block); in a resumed one, the same path, so the same bits. */
#include <stdlib.h>
#include <string.h>
#include "dist_internal.h"
#include "la_alloc.h"
#include "scan_element.h"

struct la_stream_s {
  la_dist d;
  la_engine eng;
  int64_t N, B, rows; /* tokens; block on the grid of steps; the most rows of a step */
  int H, r, dv;
  int in_memory, repro, bidir, corrected;
  int pass;      /* 1, 2; 3: done */
  int L, nmy;    /* lanes of the run; this rank's */
  int64_t lane0; /* global index of this rank's first lane */
  la_lane *lanes, *at; /* the lanes, and their positions at the start of the pass */
  la_state *ls;        /* per lane: pass 1 the partial key sum, pass 2 the prefix state */
  la_state state, local;
  la_xstate xs;        /* reproducible: the exact prefix or summary (§4.7) */
  la_dist_req req;     /* the rank prefix in flight (fresh causal run, P > 1) */
  void *raw;           /* corrected lane starts: unfinalized rows and their log-scales */
  double *lsc;
  int64_t nsteps, step; /* steps of this pass (max over ranks; -1: not counted yet) */
  int64_t wlo, wn;      /* the step handed out: lane wi's rows [wlo, wlo + wn) */
  int wi, failed;
  int shard_call;       /* la_stream_in_memory: la_dist_forward's messages, unprefixed */
  double t_compute;
};

/* The s-th step over the lanes from their positions on a grid of B tokens; idle past the
 * end (n = 0 at the end of the last lane). */
static void step_at(const la_stream s, int64_t k, int *wi, int64_t *lo, int64_t *n) {
  const la_lane *l = s->at;
  for (int i = 0; i < s->nmy; i++) {
    int64_t c = l[i].pos >= l[i].end ? 0 : (l[i].end - l[i].pos + s->B - 1) / s->B;
    if (k < c) {
      *wi = i;
      *lo = l[i].pos + k * s->B;
      *n = l[i].end - *lo < s->B ? l[i].end - *lo : s->B;
      return;
    }
    k -= c;
  }
  *wi = -1;
  *lo = s->nmy > 0 ? l[s->nmy - 1].end : 0;
  *n = 0;
}

int la_stream_holds_shard(const la_engine eng, int64_t N) {
  const int64_t W = la_engine_window(eng);
  return (W > 0 && W < N) ||
         (la_engine_has_segments(eng) && la_engine_mode(eng) == LA_BIDIRECTIONAL) ||
         /* bidirectional --decay: the prefix and the reverse suffix at once (design.md §1.2) */
         (la_engine_decayed(eng) && la_engine_mode(eng) == LA_BIDIRECTIONAL);
}

void la_stream_destroy(la_stream *ps) {
  if (!ps || !*ps) return;
  la_stream s = *ps;
  if (s->ls)
    for (int i = 0; i < s->nmy; i++) la_state_free(&s->ls[i]);
  free(s->ls);
  free(s->lanes);
  free(s->at);
  la_state_free(&s->state);
  la_state_free(&s->local);
  la_xstate_free(&s->xs);
  free(s->raw);
  free(s->lsc);
  free(s);
  *ps = NULL;
}

/* The plan around lanes already set (s->lanes, s->nmy, s->ls): states, buffers, block. */
static la_status plan(la_stream s, int64_t block) {
  const la_dist d = s->d;
  la_status st = LA_OK;
  st = la_engine_state_init(s->eng, &s->state); /* per-feature gates: rows */
  if (st == LA_OK) st = la_engine_state_init(s->eng, &s->local);
  if (st == LA_OK && s->repro) st = la_xstate_init(&s->xs, s->H, s->r, s->dv);
  if (st == LA_OK && !(s->at = la_malloc(sizeof *s->at * (size_t)(s->nmy > 0 ? s->nmy : 1))))
    st = la_error(LA_ERR_NOMEM, "out of memory for the lane table");
  if (st != LA_OK) la_error_prefix(st, "engine: ");
  st = la_dist_agree(d, st);
  if (st != LA_OK) return st;
  s->corrected = !s->bidir && s->L > 1 && !s->in_memory && !s->repro;
  int64_t mine = 0, maxloc = 0, B = block;
  for (int i = 0; i < s->nmy; i++)
    mine = s->lanes[i].end - s->lanes[i].start > mine ? s->lanes[i].end - s->lanes[i].start : mine;
  if (MPI_Allreduce(&mine, &maxloc, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d)) != MPI_SUCCESS)
    return la_error(LA_ERR_MPI, "MPI_Allreduce of the lane lengths failed");
  if (B < 1) B = maxloc > 0 ? maxloc : 1;
  if (s->repro) { /* streaming blocks on the reproducible grid (§4.7) */
    const int64_t R = la_engine_repro_block(s->eng);
    B = (B + R - 1) / R * R;
  }
  if (s->in_memory) B = maxloc > 0 ? maxloc : 1;
  s->B = B;
  s->rows = B > mine && mine > 0 ? mine : B;
  if (s->corrected) {
    const size_t es = la_dtype_size(la_engine_dtype(s->eng)), hb = (size_t)s->rows * s->H;
    s->raw = la_alloc_rows(es * hb * (s->dv + 1) + 1);
    s->lsc = la_malloc(sizeof(double) * hb + 1);
    if (!s->raw || !s->lsc)
      st = la_error(LA_ERR_NOMEM, "out of memory for the block buffers of %lld tokens (lower "
                    "--block-tokens)", (long long)s->rows);
  }
  s->nsteps = -1;
  return la_dist_agree(d, st);
}

static la_stream alloc_plan(la_dist d, la_engine eng, int64_t N) {
  la_stream s = la_calloc(1, sizeof *s);
  if (!s) return NULL;
  s->d = d;
  s->eng = eng;
  s->N = N;
  la_engine_shape(eng, &s->H, &s->r, &s->dv);
  s->repro = la_engine_reproducible(eng);
  s->bidir = la_engine_mode(eng) == LA_BIDIRECTIONAL;
  s->in_memory = la_stream_holds_shard(eng, N);
  s->L = la_dist_size(d);
  s->wi = -1;
  return s;
}

/* One lane [row0, row0 + n) with an identity state (fresh and in-memory plans). */
static la_status one_lane(la_stream s, int64_t row0, int64_t n) {
  s->lane0 = la_dist_rank(s->d);
  s->lanes = la_calloc(1, sizeof *s->lanes);
  s->ls = la_calloc(1, sizeof *s->ls);
  if (!s->lanes || !s->ls || la_engine_state_init(s->eng, &s->ls[0]) != LA_OK) {
    s->nmy = s->ls ? 1 : 0; /* la_state_free of a zeroed state is a no-op */
    return la_error(LA_ERR_NOMEM, "out of memory for the scan state");
  }
  s->nmy = 1;
  s->lanes[0] = (la_lane){row0, row0 + n, row0};
  return LA_OK;
}

la_status la_stream_create(la_dist d, la_engine eng, int64_t N, int64_t block, la_stream *out) {
  *out = NULL;
  la_stream s = alloc_plan(d, eng, N);
  la_status st = s ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the streaming plan");
  if (st == LA_OK) {
    int64_t nloc = 0, row0 = 0;
    la_engine_ownership(eng, N, la_dist_size(d), la_dist_rank(d), &nloc, &row0);
    st = one_lane(s, row0, nloc);
    s->pass = (s->bidir || la_dist_size(d) > 1) && !s->in_memory ? 1 : 2;
  }
  st = la_dist_agree(d, st);
  if (st == LA_OK) st = plan(s, block);
  if (st != LA_OK) la_stream_destroy(&s);
  *out = s;
  return st;
}

la_status la_stream_resume(la_dist d, la_engine eng, int64_t N, int64_t block, int pass, int L,
                           int64_t lane0, int nmy, const la_lane *lanes, const la_state *states,
                           la_stream *out) {
  *out = NULL;
  la_stream s = alloc_plan(d, eng, N);
  la_status st = s ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the streaming plan");
  if (st == LA_OK && (s->in_memory || s->repro || (pass != 1 && pass != 2) || L < 1 || nmy < 0))
    st = la_error(LA_ERR_ARG, "resume: %s", s->in_memory || s->repro
                  ? "a plan that holds the shard, or a reproducible one, has no position to resume"
                  : "bad pass or lane count");
  if (st == LA_OK) {
    s->pass = pass;
    s->L = L;
    s->lane0 = lane0;
    s->lanes = la_malloc(sizeof *s->lanes * (size_t)(nmy > 0 ? nmy : 1));
    s->ls = la_calloc((size_t)(nmy > 0 ? nmy : 1), sizeof *s->ls);
    if (!s->lanes || !s->ls) st = la_error(LA_ERR_NOMEM, "out of memory for the lane table");
    for (int i = 0; st == LA_OK && i < nmy; i++) {
      s->nmy = i + 1;
      s->lanes[i] = lanes[i];
      st = la_engine_state_init(s->eng, &s->ls[i]);
      if (st == LA_OK && (states[i].heads != s->ls[i].heads || states[i].r != s->ls[i].r ||
                          states[i].dv != s->ls[i].dv))
        st = la_error(LA_ERR_ARG, "resume: lane %d's state has shape (heads %d, r %d, dv %d), "
                      "the engine's summaries (%d, %d, %d) (la_engine_state_init)", i,
                      states[i].heads, states[i].r, states[i].dv, s->ls[i].heads, s->ls[i].r,
                      s->ls[i].dv);
      if (st == LA_OK) la_scan_el_copy(&s->ls[i], &states[i]);
    }
  }
  st = la_dist_agree(d, st);
  if (st == LA_OK) st = plan(s, block);
  if (st != LA_OK) la_stream_destroy(&s);
  *out = s;
  return st;
}

la_status la_stream_in_memory(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                              la_stream *out) {
  *out = NULL;
  int64_t N = 0;
  LA_CHECK(MPI_Allreduce(&n_local, &N, 1, MPI_INT64_T, MPI_SUM, la_dist_comm(d)) == MPI_SUCCESS,
           LA_ERR_MPI, "forward: MPI_Allreduce of the sequence length failed");
  la_stream s = alloc_plan(d, eng, N);
  la_status st = s ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the streaming plan");
  if (st == LA_OK) {
    s->in_memory = s->shard_call = 1; /* one step of the caller's rows, whatever the masks */
    s->pass = 2;
    st = one_lane(s, row0, n_local);
  }
  if (st == LA_OK) {
    s->B = s->rows = n_local > 0 ? n_local : 1;
    s->nsteps = -1;
    if (!(s->at = la_malloc(sizeof *s->at)))
      st = la_error(LA_ERR_NOMEM, "out of memory for the lane table");
  }
  st = la_dist_agree(d, st); /* the one collective beyond la_dist_forward's own */
  if (st != LA_OK) la_stream_destroy(&s);
  *out = s;
  return st;
}

int64_t la_stream_block_rows(const la_stream s) { return s->rows; }

int64_t la_stream_tokens_left(const la_stream s) {
  int64_t k = 0;
  for (int i = 0; s->pass <= 2 && i < s->nmy; i++) k += s->lanes[i].end - s->lanes[i].pos;
  return k;
}

void la_stream_lanes(const la_stream s, int *pass, int *L, int64_t *lane0, int *nmy,
                     const la_lane **lanes, const la_state **states) {
  *pass = s->pass;
  *L = s->L;
  *lane0 = s->lane0;
  *nmy = s->nmy;
  *lanes = s->lanes;
  *states = s->ls;
}

double la_stream_compute_seconds(const la_stream s) { return s->t_compute; }

/* Between the passes: the rank total (lanes in order), then the plan's collective
 * (plan_combine.c; §4.5 "The plan's collective") and each lane's prefix (pass 2's starting
 * states). The pass's status was agreed by its last feed. Collective. */
static la_status combine_lanes(la_stream s) {
  const la_dist d = s->d;
  la_status st = LA_OK;
  /* decay (§1.2): a lane's partial sum covers [start, end), so its cumulative log-decay is
   * (end - start) ln gamma_h, set here in one rounding rather than summed block by block:
   * the same bits whatever blocks, stops and resumes the pass went through, and nothing of it
   * needs to be in a checkpoint */
  /* with --gates the lanes' a is the sum of their gates, accumulated block by block */
  for (int i = 0; !s->repro && i < s->nmy && la_engine_decayed(s->eng) && !la_engine_gated(s->eng); i++)
    for (int h = 0; h < s->H; h++)
      s->ls[i].a[h] = (double)(s->lanes[i].end - s->lanes[i].start) *
                      la_engine_log_decay(s->eng, h);
  if (!s->repro && s->nmy == 0) { /* a rank without lanes: identity */
    la_state_reset(&s->state);
  } else if (!s->repro) {
    la_scan_el_copy(&s->state, &s->ls[0]);
    for (int i = 1; i < s->nmy; i++) la_state_combine(&s->state, &s->ls[i]);
  }
  if (s->repro) {
    st = s->bidir ? la_dist_xallreduce(d, &s->xs) : la_dist_xexscan(d, &s->xs);
    if (st == LA_OK && s->bidir) la_xstate_round(&s->xs, la_engine_stabilized(s->eng), &s->ls[0]);
  } else if (s->bidir) {
    st = la_plan_combine(d, LA_OK, 1, 0, &s->state, NULL);
    for (int i = 0; st == LA_OK && i < s->nmy; i++) la_scan_el_copy(&s->ls[i], &s->state);
  } else if (s->L == la_dist_size(d) && s->nmy == 1) { /* ends in the first step of pass 2 */
    st = la_plan_combine_begin(d, LA_OK, &s->state, &s->req);
  } else { /* lanes of a resumed run: the rank prefix, then lane by lane: ls[i] from the */
    st = la_plan_combine(d, LA_OK, 0, 0, &s->state, NULL); /* lane total to its prefix */
    for (int i = 0; st == LA_OK && i < s->nmy; i++) {
      la_scan_el_copy(&s->local, &s->ls[i]);
      la_scan_el_copy(&s->ls[i], &s->state);
      la_state_combine(&s->state, &s->local);
    }
  }
  if (st == LA_OK) {
    s->pass = 2;
    for (int i = 0; i < s->nmy; i++) s->lanes[i].pos = s->lanes[i].start;
  }
  return st;
}

la_status la_stream_next(la_stream s, la_stream_block *b) {
  memset(b, 0, sizeof *b);
  LA_CHECK(!s->failed, LA_ERR_ARG, "the streaming plan failed at an earlier step");
  la_status st = LA_OK;
  if (s->pass == 1 && s->nsteps >= 0 && s->step >= s->nsteps) {
    st = combine_lanes(s);
    s->nsteps = -1;
  }
  if (st == LA_OK && s->pass == 2 && s->nsteps >= 0 && s->step >= s->nsteps) s->pass = 3;
  if (st == LA_OK && s->pass <= 2 && s->nsteps < 0) { /* a pass begins: count its steps */
    int64_t my = 0;
    for (int i = 0; i < s->nmy; i++)
      my += s->lanes[i].pos >= s->lanes[i].end
                ? 0 : (s->lanes[i].end - s->lanes[i].pos + s->B - 1) / s->B;
    if (s->in_memory) /* one step of the whole shard on every rank, rows or not */
      s->nsteps = 1;
    else if (MPI_Allreduce(&my, &s->nsteps, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(s->d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "MPI_Allreduce of the step count failed");
    memcpy(s->at, s->lanes, sizeof *s->at * (size_t)s->nmy);
    s->step = 0;
    if (st == LA_OK && s->nsteps == 0) return la_stream_next(s, b); /* an empty pass */
  }
  if (st != LA_OK) {
    s->failed = 1;
    return st;
  }
  if (s->pass > 2) return LA_OK;
  step_at(s, s->step, &s->wi, &s->wlo, &s->wn);
  b->pass = s->pass;
  b->row0 = s->wlo;
  b->n = s->wn;
  b->q = s->pass == 2 && s->wn > 0;
  b->kv = s->wn > 0 && (s->pass == 1 || !s->bidir || s->in_memory);
  b->out = s->pass == 2 && s->wn > 0;
  b->last = s->step + 1 >= s->nsteps;
  return LA_OK;
}

/* Pass 1: the block's keys into the lane's partial sum (or the exact summary). */
static la_status feed_keys(la_stream s, const void *k, const void *v) {
  if (s->wn <= 0) return LA_OK;
  return s->repro ? la_engine_accumulate_exact(s->eng, s->wlo, s->wn, k, v, &s->xs)
                  : la_engine_accumulate(s->eng, s->wlo, s->wn, k, v, &s->ls[s->wi]);
}

/* Pass 2 of a streaming plan: the block's outputs. st is the caller's status; the prefix in
 * flight is received whatever it is. */
static la_status feed_outputs(la_stream s, la_status st, const void *q, const void *k,
                              const void *v, void *out, la_den_stats *stats) {
  const int64_t lo = s->wlo, n = s->wn;
  if (s->req || (s->corrected && n > 0 && lo == s->lanes[s->wi].start)) {
    /* Causal, at the start of a lane of many: the lane's outputs from a zero state (while
     * the rank prefix travels, in a fresh run), then the correction phi(q)^T P and
     * state = P (+) local. A resumed lane start takes the same path: the same bits. */
    la_status lst = st;
    if (lst == LA_OK && n > 0) {
      la_state_reset(&s->local);
      lst = la_engine_apply_local(s->eng, lo, n, q, k, v, &s->local, s->raw, s->lsc);
    }
    if (s->req) {
      st = la_dist_iexscan_end(s->d, &s->req, &s->state);
      if (st == LA_OK) la_scan_el_copy(&s->ls[0], &s->state); /* the one lane's prefix */
    }
    if (st == LA_OK) st = lst;
    if (st == LA_OK && n > 0)
      st = la_engine_correct(s->eng, lo, n, q, &s->ls[s->wi], s->raw, s->lsc, out, stats);
    if (st == LA_OK && n > 0) la_state_combine(&s->ls[s->wi], &s->local);
    return st;
  }
  if (st != LA_OK || n <= 0) return st;
  if (s->repro && !s->bidir) return la_engine_apply_exact(s->eng, lo, n, q, k, v, &s->xs, out, stats);
  return la_engine_apply(s->eng, lo, n, q, k, v, &s->ls[s->wi], out, stats);
}

la_status la_stream_feed(la_stream s, la_status in, const void *q, const void *k, const void *v,
                         void *out, la_den_stats *stats) {
  LA_CHECK(!s->failed && s->pass <= 2 && s->nsteps >= 0 && s->step < s->nsteps, LA_ERR_ARG,
           "la_stream_feed without a step from la_stream_next");
  la_status st = in;
  double t0 = MPI_Wtime();
  if (s->pass == 1) {
    if (st == LA_OK) st = feed_keys(s, k, v);
  } else if (s->in_memory) {
    /* one step of the shard: la_forward_shard combines the masks across ranks and agrees on
     * its status; the caller's is agreed first (la_dist_forward's is LA_OK everywhere) */
    const double t1 = MPI_Wtime();
    if (!s->shard_call) st = la_dist_agree(s->d, st);
    t0 += MPI_Wtime() - t1;
    if (st == LA_OK && (st = la_forward_shard(s->d, s->eng, s->N, s->wn, s->wlo, q, k, v, out,
                                              stats)) != LA_OK && !s->shard_call)
      la_error_prefix(st, "forward: ");
  } else {
    st = feed_outputs(s, st, q, k, v, out, stats);
  }
  s->t_compute += MPI_Wtime() - t0;
  if (st == LA_OK && s->wn > 0) s->lanes[s->wi].pos = s->wlo + s->wn;
  s->step++;
  if (!s->in_memory) st = la_dist_agree(s->d, st); /* la_forward_shard's is agreed */
  if (st != LA_OK) s->failed = 1;
  return st;
}

la_status la_stream_finish(la_stream s, la_den_stats *stats) {
  LA_CHECK(!s->failed && s->pass > 2, LA_ERR_ARG, "la_stream_finish before the last step");
  return stats ? la_dist_reduce_stats(s->d, stats) : LA_OK;
}

/* The in-memory plan, in one call (linattn/dist.h). */
la_status la_dist_forward(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                          const void *q, const void *k, const void *v, void *out,
                          la_den_stats *stats) {
  la_stream s = NULL;
  la_stream_block b;
  la_status st = la_stream_in_memory(d, eng, n_local, row0, &s);
  if (st == LA_OK) st = la_stream_next(s, &b);
  if (st == LA_OK) st = la_stream_feed(s, LA_OK, q, k, v, out, stats);
  if (st == LA_OK) st = la_stream_next(s, &b); /* done */
  if (st == LA_OK) st = la_stream_finish(s, stats);
  la_stream_destroy(&s);
  return st;
}
