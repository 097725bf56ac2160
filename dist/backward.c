/* The distributed backward (docs/design.md §4.4) on in-memory shards:
 * - causal: the forward prefix (exscan of rank totals) for the replay, then the suffix sums of
 *   the query side through an exscan over the reversed communicator, with the same segment
 *   flags and log-scales as the forward;
 * - bidirectional: the summary and the query sums each by one allreduce.
 * Both collectives are the plan's (la_plan_combine, docs/design.md §4.5 "The plan's
 * collective"): the forward one for the replay's prefix, the reversed one for the query sums. */
#include <stdlib.h>
#include "dist_internal.h"
#include "la_alloc.h"
#include "linattn/grad.h"
#include "scan_element.h"

/* Bidirectional with segments: the forward summaries of spanning segments as in the forward
 * (prefix + local + suffix), then the query sums of spanning segments the same way. */
static la_status backward_segmented(la_dist d, la_engine eng, int64_t n, int64_t row0,
                                    const void *q, const void *k, const void *v, const void *g,
                                    void *dq, void *dk, void *dv, void *side,
                                    la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  la_state L = {0}, F = {0}, hr = {0}, tr = {0}, lr = {0}, rr = {0};
  la_status s = la_state_init(&L, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&F, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&hr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&tr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&lr, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&rr, H, r, dvw);
  if (s == LA_OK) s = la_engine_accumulate(eng, row0, n, k, v, &L);
  if (s == LA_OK) { /* keys before the first segment start (the head) */
    int64_t t = la_engine_segment_at_or_after(eng, row0), hn = t - row0 < n ? t - row0 : n;
    if (hn > 0) s = la_engine_accumulate(eng, row0, hn, k, v, &F);
    if (t < row0 + n)
      for (int h = 0; h < H; h++) F.f[h] = 1;
  }
  s = la_plan_combine(d, s, 1, 0, &L, &F); /* the tails' prefix, the heads' suffix */
  if (s == LA_OK)
    s = la_backward_segmented(eng, row0, n, q, k, v, g, &L, &F, dq, dk, dv, side, &hr, &tr, stats);
  if (s == LA_OK) { /* the query sums' tails and heads, kept for the ends */
    la_scan_el_copy(&lr, &tr);
    la_scan_el_copy(&rr, &hr);
  }
  s = la_plan_combine(d, s, 1, 0, &lr, &rr);
  if (s == LA_OK)
    s = la_backward_segmented_ends(eng, row0, n, q, k, v, g, side, &lr, &rr, &hr, &tr, dk, dv);
  la_state_free(&L);
  la_state_free(&F);
  la_state_free(&hr);
  la_state_free(&tr);
  la_state_free(&lr);
  la_state_free(&rr);
  return s;
}

/* The future halo of the window backward: the queries' raw rows (q, g, side) in
 * [*flo, *fhi) and the query summary fmid of [row0+n, *flo), from the later ranks by
 * point-to-point messages (we send ours to the earlier ranks that need them). Collective. */
static la_status window_fetch_future(la_dist d, la_engine eng, int64_t N, int64_t n,
                                     int64_t row0, const int64_t *r0, const int64_t *rn,
                                     const void *q, const void *g,
                                     const double *side, int64_t *pflo, int64_t *pfhi,
                                     char **pfq, char **pfg, double **pfs, la_state *fmid) {
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  const size_t es = la_engine_dtype(eng) == LA_F32 ? 4 : 8;
  const size_t rowq = es * H * la_engine_input_dim(eng), rowg = es * H * dv;
  const size_t rows3 = sizeof(double) * 3 * H, per = la_scan_el_doubles(r, dv);
  int64_t flo, fhi;
  la_window_future(eng, row0, n, N, &flo, &fhi);
  const size_t nf = (size_t)(fhi - flo);
  char *fq = la_malloc(rowq * nf + 1), *fg = la_malloc(rowg * nf + 1);
  double *fs = la_malloc(rows3 * nf + 1);
  double *recvmid = la_malloc(sizeof(double) * per * H * d->size);
  double *sendmid = la_malloc(sizeof(double) * per * H * d->size);
  char *have = la_calloc((size_t)d->size, 1);
  MPI_Request *reqs = la_malloc(sizeof(MPI_Request) * 8 * d->size);
  la_state part = {0};
  la_status s = (fq && fg && fs && recvmid && sendmid && have && reqs)
                    ? LA_OK
                    : la_error(LA_ERR_NOMEM, "window: out of memory for the future halo (%lld "
                               "query rows)", (long long)nf);
  if (s == LA_OK) s = la_state_init(&part, H, r, dv);
  s = la_dist_agree(d, s);
  if (s == LA_OK) {
    MPI_Datatype tq, tg, ts;
    MPI_Type_contiguous((int)rowq, MPI_BYTE, &tq);
    MPI_Type_contiguous((int)rowg, MPI_BYTE, &tg);
    MPI_Type_contiguous((int)rows3, MPI_BYTE, &ts);
    MPI_Type_commit(&tq);
    MPI_Type_commit(&tg);
    MPI_Type_commit(&ts);
    int nreq = 0;
    double t0 = MPI_Wtime();
    for (int src = d->rank + 1; src < d->size; src++) {
      const int64_t qn = rn[src], q0 = r0[src];
      int64_t ra = flo > q0 ? flo : q0, rb = fhi < q0 + qn ? fhi : q0 + qn;
      int64_t ma = row0 + n > q0 ? row0 + n : q0, mb = flo < q0 + qn ? flo : q0 + qn;
      if (rb > ra) {
        MPI_Irecv(fq + rowq * (size_t)(ra - flo), (int)(rb - ra), tq, src, 201, d->comm, &reqs[nreq++]);
        MPI_Irecv(fg + rowg * (size_t)(ra - flo), (int)(rb - ra), tg, src, 202, d->comm, &reqs[nreq++]);
        MPI_Irecv((char *)fs + rows3 * (size_t)(ra - flo), (int)(rb - ra), ts, src, 203, d->comm, &reqs[nreq++]);
      }
      if (mb > ma) {
        MPI_Irecv(recvmid + per * H * src, (int)(per * H), MPI_DOUBLE, src, 204, d->comm, &reqs[nreq++]);
        have[src] = 1;
      }
    }
    for (int dst = 0; dst < d->rank && s == LA_OK; dst++) {
      const int64_t pn = rn[dst], p0 = r0[dst];
      int64_t lo2, hi2;
      la_window_future(eng, p0, pn, N, &lo2, &hi2);
      int64_t ra = lo2 > row0 ? lo2 : row0, rb = hi2 < row0 + n ? hi2 : row0 + n;
      int64_t ma = p0 + pn > row0 ? p0 + pn : row0, mb = lo2 < row0 + n ? lo2 : row0 + n;
      if (rb > ra) {
        MPI_Isend((const char *)q + rowq * (size_t)(ra - row0), (int)(rb - ra), tq, dst, 201, d->comm, &reqs[nreq++]);
        MPI_Isend((const char *)g + rowg * (size_t)(ra - row0), (int)(rb - ra), tg, dst, 202, d->comm, &reqs[nreq++]);
        MPI_Isend((const char *)side + rows3 * (size_t)(ra - row0), (int)(rb - ra), ts, dst, 203, d->comm, &reqs[nreq++]);
        d->bytes += (int64_t)((rb - ra) * (rowq + rowg + rows3));
      }
      if (mb > ma) {
        s = la_backward_query_summary(eng, row0, n, q, g, side, ma, mb, &part);
        double *b = sendmid + per * H * dst;
        la_scan_el_pack(&part, b); /* the receiver takes it as a plain sum: its flag unread */
        MPI_Isend(b, (int)(per * H), MPI_DOUBLE, dst, 204, d->comm, &reqs[nreq++]);
        d->bytes += (int64_t)(sizeof(double) * per * H);
      }
    }
    if (MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
      s = la_error(LA_ERR_MPI, "backward: window: the halo exchange failed");
    d->comm_seconds += MPI_Wtime() - t0;
    MPI_Type_free(&tq);
    MPI_Type_free(&tg);
    MPI_Type_free(&ts);
    for (int src = d->rank + 1; src < d->size && s == LA_OK; src++) { /* a plain sum */
      if (have[src]) la_scan_el_fold(fmid, recvmid + per * H * src, 0);
    }
  }
  s = la_dist_agree(d, s);
  free(recvmid);
  free(sendmid);
  free(have);
  free(reqs);
  la_state_free(&part);
  *pflo = flo;
  *pfhi = fhi;
  *pfq = fq;
  *pfg = fg;
  *pfs = fs;
  return s;
}

/* Causal sliding window: the replay with the past halo, then the reverse pass with the
 * future halo (§3, §4 "Gradients"). */
static la_status backward_window(la_dist d, la_engine eng, int64_t N, int64_t n, int64_t row0,
                                 const void *q, const void *k, const void *v, const void *g,
                                 void *dq, void *dk, void *dv, double *side,
                                 la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  la_state mid = {0}, fmid = {0};
  int64_t lo = row0, hi = row0, flo = row0 + n, fhi = row0 + n;
  char *hk = NULL, *hv = NULL, *fq = NULL, *fg = NULL;
  double *fs = NULL;
  int64_t *r0 = NULL, *rn = NULL; /* every rank's rows, as passed: both halos follow them */
  la_status s = la_state_init(&mid, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&fmid, H, r, dvw);
  s = la_dist_row_ranges(d, s, n, row0, &r0, &rn);
  if (s == LA_OK)
    s = la_window_fetch_past(d, eng, n, row0, r0, rn, k, v, &lo, &hi, &hk, &hv, &mid);
  if (s == LA_OK)
    s = la_backward_window(eng, row0, n, q, k, v, g, lo, hi, hk, hv, &mid, dq, side, stats);
  s = la_dist_agree(d, s);
  if (s == LA_OK)
    s = window_fetch_future(d, eng, N, n, row0, r0, rn, q, g, side, &flo, &fhi, &fq, &fg, &fs,
                            &fmid);
  if (s == LA_OK)
    s = la_backward_window_reverse(eng, row0, n, q, k, v, g, side, flo, fhi, fq, fg, fs, &fmid,
                                   dk, dv);
  free(r0);
  free(rn);
  free(hk);
  free(hv);
  free(fq);
  free(fg);
  free(fs);
  la_state_free(&mid);
  la_state_free(&fmid);
  return s;
}

/* ---- The decayed backward across ranks (la_decay_ranks, la_core_private.h) ---- */

typedef struct {
  la_dist d;
  struct la_dist_s rev; /* d with the ranks in reverse order (the reversed sequence) */
  int64_t *rows;        /* every rank's row count */
} decay_ctx;

static la_status decay_forward(void *ctx, la_status s, int reversed, la_engine eng, int64_t n,
                               int64_t row0, const void *q, const void *k, const void *v,
                               void *out, la_den_stats *stats) {
  decay_ctx *c = ctx;
  la_dist d = reversed ? &c->rev : c->d;
  s = la_dist_agree(d, s);
  return s == LA_OK ? la_dist_forward(d, eng, n, row0, q, k, v, out, stats) : s;
}

/* The next rank with rows sends its first row of gates to this one (a point-to-point message
 * between neighbours with rows). */
static la_status decay_next_gates(void *ctx, la_status s, int64_t n, const double *first,
                                  double *next) {
  decay_ctx *c = ctx;
  const la_dist d = c->d;
  const int H = (int)c->rows[d->size]; /* stored after the row counts */
  LA_TRY(la_dist_agree(d, s));
  int prev = -1, nxt = -1; /* the nearest ranks with rows before and after this one */
  for (int p = d->rank - 1; p >= 0 && prev < 0; p--)
    if (c->rows[p] > 0) prev = p;
  for (int p = d->rank + 1; p < d->size && nxt < 0; p++)
    if (c->rows[p] > 0) nxt = p;
  MPI_Request rq[2];
  int nr = 0, rc = MPI_SUCCESS;
  for (int h = 0; h < H; h++) next[h] = 0.0;
  if (n > 0 && nxt >= 0) rc |= MPI_Irecv(next, H, MPI_DOUBLE, nxt, 38, d->comm, &rq[nr++]);
  if (n > 0 && prev >= 0)
    rc |= MPI_Isend((void *)first, H, MPI_DOUBLE, prev, 38, d->comm, &rq[nr++]);
  if (nr) rc |= MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE);
  return la_dist_agree(d, rc == MPI_SUCCESS ? LA_OK
                              : la_error(LA_ERR_MPI, "backward: the gates' message failed"));
}

/* Every rank's (head sums, start) gathered; this rank folds the later ones up to the first
 * with a segment start. */
static la_status decay_later(void *ctx, la_status s, const double *head, int start,
                             double *later) {
  decay_ctx *c = ctx;
  const la_dist d = c->d;
  const int H = (int)c->rows[d->size];
  LA_TRY(la_dist_agree(d, s));
  double *mine = la_malloc(sizeof(double) * (size_t)(H + 1)),
         *all = la_malloc(sizeof(double) * (size_t)(H + 1) * (size_t)d->size);
  s = mine && all ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the gates' sums of %d "
                                     "ranks", d->size);
  if ((s = la_dist_agree(d, s)) != LA_OK) {
    free(mine);
    free(all);
    return s;
  }
  for (int h = 0; h < H; h++) mine[h] = head[h];
  mine[H] = start;
  if (MPI_Allgather(mine, H + 1, MPI_DOUBLE, all, H + 1, MPI_DOUBLE, d->comm) != MPI_SUCCESS)
    s = la_error(LA_ERR_MPI, "backward: MPI_Allgather of the gates' sums failed");
  for (int h = 0; h < H; h++) later[h] = 0.0;
  for (int p = d->rank + 1; s == LA_OK && p < d->size; p++) {
    for (int h = 0; h < H; h++) later[h] += all[(size_t)p * (H + 1) + h];
    if (all[(size_t)p * (H + 1) + H] != 0.0) break;
  }
  free(mine);
  free(all);
  return la_dist_agree(d, s);
}

/* The exclusive scan of the ranks' states in rank order, or in reverse order on the reversed
 * communicator (the plan's collective, plan_combine.c). */
static la_status decay_scan(void *ctx, la_status s, int reversed, la_state *st) {
  decay_ctx *c = ctx;
  return la_plan_combine(reversed ? &c->rev : c->d, s, 0, 0, st, NULL);
}

static la_status decay_allmax(void *ctx, la_status s, double *x, int n) {
  decay_ctx *c = ctx;
  const la_dist d = c->d;
  LA_TRY(la_dist_agree(d, s));
  s = MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, d->comm) == MPI_SUCCESS
          ? LA_OK : la_error(LA_ERR_MPI, "backward: MPI_Allreduce of the scales failed");
  return la_dist_agree(d, s);
}

static la_status decay_backward(la_dist d, la_engine eng, int64_t N, int64_t n, int64_t row0,
                                const void *q, const void *k, const void *v, const void *g,
                                void *dq, void *dk, void *dv, la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  decay_ctx c = {d, *d, la_malloc(sizeof(int64_t) * (size_t)(d->size + 1))};
  const double secs0 = d->comm_seconds;
  const int64_t bytes0 = d->bytes;
  c.rev.comm = d->rev; /* rank p of rev is rank P - 1 - p of d */
  c.rev.rev = d->comm;
  c.rev.rank = d->size - 1 - d->rank;
  la_status s = c.rows ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the row counts");
  s = la_dist_agree(d, s);
  if (s == LA_OK && MPI_Allgather(&n, 1, MPI_INT64_T, c.rows, 1, MPI_INT64_T, d->comm) != MPI_SUCCESS)
    s = la_error(LA_ERR_MPI, "backward: MPI_Allgather of the row counts failed");
  if (s == LA_OK) c.rows[d->size] = (int64_t)H * la_engine_gate_width(eng); /* gates a row */
  const la_decay_ranks rk = {&c, row0, N, decay_forward, decay_next_gates, decay_later,
                             decay_allmax, decay_scan};
  s = la_dist_agree(d, s);
  if (s == LA_OK) s = la_decay_backward_ranks(eng, n, q, k, v, g, dq, dk, dv, stats, &rk);
  d->comm_seconds += c.rev.comm_seconds - secs0; /* the reversed products' share */
  d->bytes += c.rev.bytes - bytes0;
  free(c.rows);
  return la_dist_agree(d, s);
}

la_status la_dist_backward(la_dist d, la_engine eng, int64_t n, int64_t row0, const void *q,
                           const void *k, const void *v, const void *g, void *dq, void *dk,
                           void *dv, la_den_stats *stats) {
  int H, r, dvw;
  la_engine_shape(eng, &H, &r, &dvw);
  const int bidir = la_engine_mode(eng) == LA_BIDIRECTIONAL;
  la_state st = {0}, rev = {0};
  int64_t N = 0;
  la_status s = LA_OK;
  if (MPI_Allreduce(&n, &N, 1, MPI_INT64_T, MPI_SUM, d->comm) != MPI_SUCCESS)
    s = la_error(LA_ERR_MPI, "backward: MPI_Allreduce of the sequence length failed");
  const int win = la_engine_window(eng) > 0 && la_engine_window(eng) < N;
  /* side rows: inside dv (read before overwritten) unless the window's reverse pass needs
   * later rows, or a dV row is shorter than 24 bytes */
  const int own_side = win || !la_backward_side_in_dv(eng);
  void *own = own_side ? la_malloc(win ? sizeof(double) * 3 * (size_t)(n > 0 ? n : 1) * H
                                       : la_backward_side_size(eng, n) + 1)
                       : NULL;
  void *side = own_side ? own : dv;
  if (s == LA_OK && own_side && !own)
    s = la_error(LA_ERR_NOMEM, "out of memory for the side storage (%lld tokens x "
                 "%d heads)", (long long)n, H);
  if (s == LA_OK) s = la_state_init(&st, H, r, dvw);
  if (s == LA_OK) s = la_state_init(&rev, H, r, dvw);
  /* decay (docs/design.md §1.2 "The backward"): la_backward's composition, its products
   * across the ranks (decay_backward) */
  s = la_dist_agree(d, s);
  if (s == LA_OK && la_engine_decayed(eng)) { /* its statistics are merged by its forward */
    s = decay_backward(d, eng, N, n, row0, q, k, v, g, dq, dk, dv, stats);
    la_state_free(&st);
    la_state_free(&rev);
    free(own);
    return s;
  } else if (s == LA_OK && win) {
    s = backward_window(d, eng, N, n, row0, q, k, v, g, dq, dk, dv, side, stats);
  } else if (s == LA_OK && bidir && la_engine_has_segments(eng)) {
    s = backward_segmented(d, eng, n, row0, q, k, v, g, dq, dk, dv, side, stats);
  } else if (s == LA_OK) {
    if (bidir || d->size > 1) s = la_engine_accumulate(eng, row0, n, k, v, &st);
    s = la_plan_combine(d, s, bidir, 0, &st, NULL); /* the replay's prefix */
    if (s == LA_OK) s = la_backward_replay(eng, row0, n, q, k, v, g, &st, dq, side, &rev, stats);
    s = la_plan_combine(d, s, bidir, 1, &rev, NULL); /* the query sums of the later ranks */
    if (s == LA_OK) s = la_backward_reverse(eng, row0, n, q, k, v, g, side, &rev, dk, dv);
  }
  la_state_free(&st);
  la_state_free(&rev);
  free(own);
  s = la_dist_agree(d, s);
  if (s == LA_OK && stats) s = la_dist_reduce_stats(d, stats);
  return s;
}
