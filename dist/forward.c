/* The distributed forward on in-memory shards (docs/design.md §4.5), the step of the streaming
 * plan that holds a rank's shard (stream.c; la_dist_forward): each rank passes its own rows
 * (la_split_ownership) and every mask of §3 is combined across ranks here:
 * - causal: rank totals -> exscan, then the apply from the prefix; segments ride in the
 *   scan element's flag;
 * - bidirectional: one allreduce of the summaries; with segments, prefix (exscan) + local +
 *   suffix (exscan over the reversed communicator) for the pieces that span ranks;
 * - causal sliding window: the halo of raw keys and one middle summary come from the
 *   preceding ranks by point-to-point messages (never a gather).
 * The exscans and the allreduce are the plan's collective (la_plan_combine, §4.5). */
#include <stdlib.h>
#include <string.h>
#include "dist_internal.h"
#include "la_alloc.h"
#include "scan_element.h"

/* Causal, P > 1: keys pass, exscan of the totals (the plan's collective, §4.5), then the
 * apply from the prefix (docs/design.md §4.5 "In memory"). Not overlapped: overlapping the
 * scan with a local apply from the identity costs a correction of every row afterwards (0.87
 * of an apply per token, docs/sim_calibration.csv), far more than the scan it hides at any
 * shard worth sharding. */
static la_status forward_causal(la_dist d, la_engine eng, int64_t n, int64_t row0,
                                const void *q, const void *k, const void *v, void *out,
                                la_den_stats *stats) {
  la_state st = {0};
  /* agreed, so that a rank whose state cannot be made leaves with the others (no collective
   * below is joined by some ranks only) */
  la_status s = la_dist_agree(d, la_engine_state_init(eng, &st)); /* per-feature gates: rows */
  if (s != LA_OK) {
    la_state_free(&st);
    return s;
  }
  if (d->size > 1) s = la_engine_accumulate(eng, row0, n, k, v, &st);
  s = la_plan_combine(d, s, 0, 0, &st, NULL); /* rank 0, one rank: the identity */
  if (s == LA_OK) s = la_engine_apply(eng, row0, n, q, k, v, &st, out, stats);
  la_state_free(&st);
  return s;
}

static la_status forward_bidir(la_dist d, la_engine eng, int64_t n, int64_t row0,
                               const void *q, const void *k, const void *v, void *out,
                               la_den_stats *stats) {
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  la_state st = {0}, head = {0};
  la_status s = la_dist_agree(d, la_state_init(&st, H, r, dv)); /* as forward_causal */
  if (s != LA_OK) {
    la_state_free(&st);
    return s;
  }
  if (la_engine_decayed(eng) && d->size == 1) { /* forward and reverse passes */
    s = la_engine_apply(eng, row0, n, q, k, v, &st, out, stats);
    la_state_free(&st);
    return s;
  }
  if (la_engine_decayed(eng)) { /* §1.2: the prefix by the forward scan, the suffix by the
                                 * reverse scan of the reverse summaries (their flags carry
                                 * the segment starts) */
    s = la_state_init(&head, H, r, dv);
    if (s == LA_OK) s = la_engine_accumulate(eng, row0, n, k, v, &st);
    if (s == LA_OK) s = la_engine_accumulate_reverse(eng, row0, n, k, v, &head);
    s = la_plan_combine(d, s, 0, 0, &st, NULL);
    s = la_plan_combine(d, s, 0, 1, &head, NULL);
    if (s == LA_OK) s = la_engine_apply_segmented(eng, row0, n, q, k, v, &st, &head, out, stats);
    la_state_free(&st);
    la_state_free(&head);
    return s;
  }
  if (!la_engine_has_segments(eng)) {
    s = la_engine_accumulate(eng, row0, n, k, v, &st);
    s = la_plan_combine(d, s, 1, 0, &st, NULL);
    if (s == LA_OK) s = la_engine_apply(eng, row0, n, q, k, v, &st, out, stats);
    la_state_free(&st);
    return s;
  }
  /* tail (keys after the last start) goes right; head (keys before the first start) left */
  s = la_state_init(&head, H, r, dv);
  if (s == LA_OK) s = la_engine_accumulate(eng, row0, n, k, v, &st);
  if (s == LA_OK) {
    int64_t t = la_engine_segment_at_or_after(eng, row0);
    int64_t hn = t - row0 < n ? t - row0 : n;
    if (hn > 0) s = la_engine_accumulate(eng, row0, hn, k, v, &head);
    if (t < row0 + n)
      for (int h = 0; h < H; h++) head.f[h] = 1; /* blocks the suffix from further right */
  }
  s = la_plan_combine(d, s, 1, 0, &st, &head);
  if (s == LA_OK) s = la_engine_apply_segmented(eng, row0, n, q, k, v, &st, &head, out, stats);
  la_state_free(&st);
  la_state_free(&head);
  return s;
}

/* Halo of the sliding window (§3): what rank p needs from rank q's rows [q0, q1). */
static void halo_parts(la_engine eng, int64_t p0, int64_t np, int64_t q0, int64_t q1,
                       int64_t *ra, int64_t *rb, int64_t *ma, int64_t *mb) {
  int64_t lo, hi;
  la_window_halo(eng, p0, np, &lo, &hi);
  *ra = lo > q0 ? lo : q0;
  *rb = hi < q1 ? hi : q1;
  *ma = hi > q0 ? hi : q0;
  *mb = p0 < q1 ? p0 : q1;
}

/* The past halo of the window (§3) for this rank: raw key rows [*lo, *hi) into *hk, *hv and
 * the summary of [*hi, row0) into mid, by point-to-point messages from the earlier ranks
 * (and sends of our rows to the later ranks that need them). Collective. */
la_status la_window_fetch_past(la_dist d, la_engine eng, int64_t n, int64_t row0,
                               const int64_t *r0, const int64_t *rn, const void *k, const void *v, int64_t *plo, int64_t *phi,
                               char **phk, char **phv, la_state *mid) {
  int H, r, dv, dk = 0;
  la_engine_shape(eng, &H, &r, &dv);
  la_status s = LA_OK;
  const size_t es = la_engine_dtype(eng) == LA_F32 ? 4 : 8;
  dk = la_engine_input_dim(eng);
  const size_t rowk = es * H * dk, rowv = es * H * dv;
  const size_t per = la_scan_el_doubles(r, dv);
  int64_t lo, hi;
  la_window_halo(eng, row0, n, &lo, &hi);
  char *hk = la_malloc(rowk * (size_t)(hi - lo) + 1), *hv = la_malloc(rowv * (size_t)(hi - lo) + 1);
  double *midbuf = la_malloc(sizeof(double) * per * H * d->size);
  double *sendmid = la_malloc(sizeof(double) * per * H * d->size);
  MPI_Request *reqs = la_malloc(sizeof(MPI_Request) * 6 * d->size);
  char *have = la_calloc((size_t)d->size, 1);
  la_state part = {0};
  if (!hk || !hv || !midbuf || !sendmid || !reqs || !have)
    s = la_error(LA_ERR_NOMEM, "window: out of memory for the past halo (%lld key rows)",
                 (long long)(hi - lo));
  if (s == LA_OK) s = la_state_init(&part, H, r, dv);
  s = la_dist_agree(d, s);
  int nreq = 0;
  if (s == LA_OK) {
    MPI_Datatype tk, tv;
    MPI_Type_contiguous((int)rowk, MPI_BYTE, &tk);
    MPI_Type_contiguous((int)rowv, MPI_BYTE, &tv);
    MPI_Type_commit(&tk);
    MPI_Type_commit(&tv);
    double t0 = MPI_Wtime();
    /* receives: raw rows and a middle part from every earlier rank that holds some */
    for (int src = 0; src < d->rank; src++) {
      int64_t ra, rb, ma, mb;
      halo_parts(eng, row0, n, r0[src], r0[src] + rn[src], &ra, &rb, &ma, &mb);
      if (rb > ra) {
        MPI_Irecv(hk + rowk * (size_t)(ra - lo), (int)(rb - ra), tk, src, 101, d->comm, &reqs[nreq++]);
        MPI_Irecv(hv + rowv * (size_t)(ra - lo), (int)(rb - ra), tv, src, 102, d->comm, &reqs[nreq++]);
      }
      if (mb > ma) {
        MPI_Irecv(midbuf + per * H * src, (int)(per * H), MPI_DOUBLE, src, 103, d->comm, &reqs[nreq++]);
        have[src] = 1;
      }
    }
    /* sends to every later rank whose halo reaches our rows */
    for (int dst = d->rank + 1; dst < d->size && s == LA_OK; dst++) {
      int64_t ra, rb, ma, mb;
      halo_parts(eng, r0[dst], rn[dst], row0, row0 + n, &ra, &rb, &ma, &mb);
      if (rb > ra) {
        MPI_Isend((const char *)k + rowk * (size_t)(ra - row0), (int)(rb - ra), tk, dst, 101, d->comm, &reqs[nreq++]);
        MPI_Isend((const char *)v + rowv * (size_t)(ra - row0), (int)(rb - ra), tv, dst, 102, d->comm, &reqs[nreq++]);
        d->bytes += (int64_t)((rb - ra) * (rowk + rowv));
      }
      if (mb > ma) {
        la_state_reset(&part);
        s = la_engine_accumulate(eng, ma, mb - ma, (const char *)k + rowk * (size_t)(ma - row0),
                                 (const char *)v + rowv * (size_t)(ma - row0), &part);
        double *b = sendmid + per * H * dst;
        la_scan_el_pack(&part, b);
        MPI_Isend(b, (int)(per * H), MPI_DOUBLE, dst, 103, d->comm, &reqs[nreq++]);
        d->bytes += (int64_t)(sizeof(double) * per * H);
      }
    }
    if (MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
      s = la_error(LA_ERR_MPI, "forward: window: the halo exchange failed");
    d->comm_seconds += MPI_Wtime() - t0;
    MPI_Type_free(&tk);
    MPI_Type_free(&tv);
    /* middle summary: the parts in rank order */
    for (int src = 0; src < d->rank && s == LA_OK; src++) {
      if (have[src]) la_scan_el_fold(mid, midbuf + per * H * src, 1);
    }
  }
  s = la_dist_agree(d, s);
  free(have);
  free(midbuf);
  free(sendmid);
  free(reqs);
  la_state_free(&part);
  *plo = lo;
  *phi = hi;
  *phk = hk;
  *phv = hv;
  return s;
}

/* With gates (§1.2 "Gates"): the log-gates of the halo's tokens [lo, row0) from the earlier
 * ranks (each sends from what its engine holds), joined with this rank's own into *pg, the
 * gates of [lo, row0 + n); NULL without gates. Collective. */
static la_status window_fetch_gates(la_dist d, la_engine eng, int64_t n, int64_t row0,
                                    const int64_t *r0, const int64_t *rn, int64_t lo,
                                    double **pg) {
  *pg = NULL;
  if (!la_engine_gated(eng)) return LA_OK;
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  int64_t g0, gn;
  const double *own = la_engine_gates(eng, &g0, &gn);
  la_status s = n == 0 || (own && g0 <= row0 && row0 + n <= g0 + gn)
                    ? LA_OK
                    : la_error(LA_ERR_ARG, "window: the log-gates of rows [%lld, %lld) were not "
                               "given (la_engine_set_gates holds [%lld, %lld))", (long long)row0,
                               (long long)(row0 + n), (long long)g0, (long long)(g0 + gn));
  double *cg = la_malloc(sizeof(double) * (size_t)H * (size_t)(row0 + n - lo) + 1);
  MPI_Request *reqs = la_malloc(sizeof(MPI_Request) * (size_t)d->size + 1);
  if (s == LA_OK && (!cg || !reqs))
    s = la_error(LA_ERR_NOMEM, "window: out of memory for the log-gates of %lld rows",
                 (long long)(row0 + n - lo));
  s = la_dist_agree(d, s);
  if (s == LA_OK) {
    if (n > 0) memcpy(cg + (size_t)(row0 - lo) * H, own + (size_t)(row0 - g0) * H,
                      sizeof(double) * (size_t)H * (size_t)n);
    int nreq = 0;
    const double t0 = MPI_Wtime();
    for (int src = 0; src < d->rank; src++) { /* [lo, row0) from the ranks that hold it */
      const int64_t a = lo > r0[src] ? lo : r0[src];
      const int64_t b = row0 < r0[src] + rn[src] ? row0 : r0[src] + rn[src];
      if (b > a)
        MPI_Irecv(cg + (size_t)(a - lo) * H, (int)((b - a) * H), MPI_DOUBLE, src, 105, d->comm,
                  &reqs[nreq++]);
    }
    for (int dst = d->rank + 1; dst < d->size; dst++) { /* ours, to the halos that reach it */
      int64_t lo2, hi2;
      la_window_halo(eng, r0[dst], rn[dst], &lo2, &hi2);
      const int64_t a = lo2 > row0 ? lo2 : row0;
      const int64_t b = r0[dst] < row0 + n ? r0[dst] : row0 + n;
      if (b > a) {
        MPI_Send(own + (size_t)(a - g0) * H, (int)((b - a) * H), MPI_DOUBLE, dst, 105, d->comm);
        d->bytes += (int64_t)(sizeof(double) * (size_t)((b - a) * H));
      }
    }
    if (MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
      s = la_error(LA_ERR_MPI, "forward: window: the exchange of the halo's log-gates failed");
    d->comm_seconds += MPI_Wtime() - t0;
  }
  s = la_dist_agree(d, s);
  free(reqs);
  if (s != LA_OK) free(cg);
  else *pg = cg;
  return s;
}

static la_status forward_window(la_dist d, la_engine eng, int64_t n, int64_t row0,
                                const void *q, const void *k, const void *v, void *out,
                                la_den_stats *stats) {
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  la_state mid = {0};
  int64_t lo = row0, hi = row0;
  char *hk = NULL, *hv = NULL;
  int64_t *r0 = NULL, *rn = NULL; /* every rank's rows, as passed */
  la_status s = la_state_init(&mid, H, r, dv);
  s = la_dist_row_ranges(d, s, n, row0, &r0, &rn);
  if (s == LA_OK) s = la_window_fetch_past(d, eng, n, row0, r0, rn, k, v, &lo, &hi, &hk, &hv, &mid);
  double *cg = NULL; /* gates: the halo's and ours, bound for this call only */
  int64_t g0 = 0, gn = 0;
  const double *own = la_engine_gates(eng, &g0, &gn);
  if (s == LA_OK) s = window_fetch_gates(d, eng, n, row0, r0, rn, lo, &cg);
  if (s == LA_OK && cg) s = la_engine_set_gates(eng, cg, lo, row0 + n - lo);
  if (s == LA_OK) s = la_engine_apply_window(eng, row0, n, q, k, v, lo, hi, hk, hv, &mid, out, stats);
  if (cg) {
    la_status s2 = la_engine_set_gates(eng, own, g0, gn); /* the caller's binding again */
    s = s == LA_OK ? s2 : s;
    free(cg);
  }
  free(r0);
  free(rn);
  free(hk);
  free(hv);
  la_state_free(&mid);
  return s;
}

/* --reproducible (§4.7): exact block summaries, exact collectives, rows from rounded exact
 * prefixes; the rows must be owned on the grid (la_engine_ownership). */
static la_status forward_exact(la_dist d, la_engine eng, int64_t n, int64_t row0,
                               const void *q, const void *k, const void *v, void *out,
                               la_den_stats *stats) {
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  la_xstate x = {0}, y = {0};
  la_status s = la_xstate_init(&x, H, r, dv);
  if (s == LA_OK) s = la_xstate_init(&y, H, r, dv);
  s = la_dist_agree(d, s);
  if (s == LA_OK && la_engine_mode(eng) == LA_BIDIRECTIONAL && la_engine_has_segments(eng)) {
    s = la_engine_segment_ends_exact(eng, row0, n, k, v, &x, &y);
    s = la_dist_agree(d, s);
    if (s == LA_OK) s = la_dist_xexscan(d, &x);
    if (s == LA_OK) s = la_dist_xexscan_reverse(d, &y);
    if (s == LA_OK) s = la_engine_apply_segmented_exact(eng, row0, n, q, k, v, &x, &y, out, stats);
  } else if (s == LA_OK) {
    const int bidir = la_engine_mode(eng) == LA_BIDIRECTIONAL;
    if (bidir || d->size > 1) { /* one causal rank starts from the identity */
      s = la_engine_accumulate_exact(eng, row0, n, k, v, &x);
      s = la_dist_agree(d, s);
      if (s == LA_OK) s = bidir ? la_dist_xallreduce(d, &x) : la_dist_xexscan(d, &x);
    }
    if (s == LA_OK) s = la_engine_apply_exact(eng, row0, n, q, k, v, &x, out, stats);
  }
  la_xstate_free(&x);
  la_xstate_free(&y);
  return s;
}

/* --reproducible with a window (§4.7): the raw keys of [max(0, row0 - W + 1), row0) come
 * from the earlier ranks by point-to-point messages, the first own rows follow them, and
 * every block restarts the window kernel from global positions (la_engine_apply_window_exact). */
static la_status forward_window_exact(la_dist d, la_engine eng, int64_t N, int64_t n,
                                      int64_t row0, const void *q, const void *k,
                                      const void *v, void *out, la_den_stats *stats) {
  int H, r, dv;
  la_engine_shape(eng, &H, &r, &dv);
  const int64_t W = la_engine_window(eng);
  const size_t es = la_engine_dtype(eng) == LA_F32 ? 4 : 8;
  const size_t rowk = es * H * la_engine_input_dim(eng), rowv = es * H * dv;
  /* a rank that owns no rows (past the last block of the grid) needs no keys before them:
   * the senders skip it (pn > 0 below), so it must post no receive either */
  const int64_t x0 = n == 0 ? row0 : row0 - W + 1 > 0 ? row0 - W + 1 : 0;
  const int64_t xend = row0 + (n < W - 1 ? n : W - 1);
  char *xk = la_malloc(rowk * (size_t)(xend - x0) + 1), *xv = la_malloc(rowv * (size_t)(xend - x0) + 1);
  MPI_Request *reqs = la_malloc(sizeof(MPI_Request) * 2 * (size_t)d->size + 1);
  la_status s = xk && xv && reqs ? LA_OK
                : la_error(LA_ERR_NOMEM, "window: out of memory for the %lld key rows before "
                           "this rank's (--reproducible)", (long long)(xend - x0));
  s = la_dist_agree(d, s);
  if (s == LA_OK) {
    int nreq = 0;
    double t0 = MPI_Wtime();
    for (int p = 0; p < d->size; p++) {
      int64_t pn, p0;
      la_engine_ownership(eng, N, d->size, p, &pn, &p0);
      if (p < d->rank) { /* its rows inside [x0, row0) */
        const int64_t a = p0 > x0 ? p0 : x0, b = p0 + pn < row0 ? p0 + pn : row0;
        if (b > a) {
          MPI_Irecv(xk + rowk * (size_t)(a - x0), (int)(rowk * (b - a)), MPI_BYTE, p, 111, d->comm, &reqs[nreq++]);
          MPI_Irecv(xv + rowv * (size_t)(a - x0), (int)(rowv * (b - a)), MPI_BYTE, p, 112, d->comm, &reqs[nreq++]);
        }
      } else if (p > d->rank && pn > 0) { /* our rows inside its [p0 - W + 1, p0) */
        const int64_t px0 = p0 - W + 1 > 0 ? p0 - W + 1 : 0;
        const int64_t a = row0 > px0 ? row0 : px0, b = row0 + n < p0 ? row0 + n : p0;
        if (b > a) {
          MPI_Isend((const char *)k + rowk * (size_t)(a - row0), (int)(rowk * (b - a)), MPI_BYTE, p, 111, d->comm, &reqs[nreq++]);
          MPI_Isend((const char *)v + rowv * (size_t)(a - row0), (int)(rowv * (b - a)), MPI_BYTE, p, 112, d->comm, &reqs[nreq++]);
          d->bytes += (int64_t)((b - a) * (rowk + rowv));
        }
      }
    }
    if (MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
      s = la_error(LA_ERR_MPI, "window: the key rows before this rank did not arrive");
    d->comm_seconds += MPI_Wtime() - t0;
    memcpy(xk + rowk * (size_t)(row0 - x0), k, rowk * (size_t)(xend - row0));
    memcpy(xv + rowv * (size_t)(row0 - x0), v, rowv * (size_t)(xend - row0));
  }
  s = la_dist_agree(d, s);
  if (s == LA_OK)
    s = la_engine_apply_window_exact(eng, row0, n, q, k, v, x0, xend, xk, xv, out, stats);
  free(xk);
  free(xv);
  free(reqs);
  return s;
}

la_status la_forward_shard(la_dist d, la_engine eng, int64_t N, int64_t n_local, int64_t row0,
                           const void *q, const void *k, const void *v, void *out,
                           la_den_stats *stats) {
  la_status s;
  if (la_engine_reproducible(eng) && la_engine_window(eng) > 0 && la_engine_window(eng) < N)
    s = forward_window_exact(d, eng, N, n_local, row0, q, k, v, out, stats);
  else if (la_engine_reproducible(eng))
    s = forward_exact(d, eng, n_local, row0, q, k, v, out, stats);
  else if (la_engine_mode(eng) == LA_BIDIRECTIONAL)
    s = forward_bidir(d, eng, n_local, row0, q, k, v, out, stats);
  else if (la_engine_window(eng) > 0 && la_engine_window(eng) < N)
    s = forward_window(d, eng, n_local, row0, q, k, v, out, stats);
  else /* a window of N or more is the plain causal operator */
    s = forward_causal(d, eng, n_local, row0, q, k, v, out, stats);
  return la_dist_agree(d, s);
}
