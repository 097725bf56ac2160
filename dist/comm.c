/* The communicators, error agreement and the summary collectives (docs/design.md §4.5).
 * A scan element travels in the packed layout of scan_element.h. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/dist.h"

#include "dist_internal.h"
#include "la_alloc.h"
#include "scan_element.h"

la_status la_dist_create(MPI_Comm comm, la_dist *out) {
  *out = NULL;
  la_dist d = la_calloc(1, sizeof *d);
  /* agreed before the collective MPI_Comm_dup, which a rank without d would never join */
  int me = 0, first = 0;
  MPI_Comm_rank(comm, &me);
  int mine = d ? INT_MAX : me;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
    free(d);
    return la_error(LA_ERR_MPI, "MPI_Allreduce failed while creating the communicators");
  }
  if (first != INT_MAX) {
    free(d);
    return la_error(LA_ERR_NOMEM, "out of memory for the communicator object on rank %d", first);
  }
  if (MPI_Comm_dup(comm, &d->comm) != MPI_SUCCESS) {
    free(d);
    return la_error(LA_ERR_MPI, "cannot duplicate the communicator");
  }
  MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(d->comm, &d->rank);
  MPI_Comm_size(d->comm, &d->size);
  /* ranks in reverse order, for suffix scans (§4 bidirectional segments, gradients) */
  if (MPI_Comm_split(d->comm, 0, d->size - 1 - d->rank, &d->rev) != MPI_SUCCESS) {
    MPI_Comm_free(&d->comm);
    free(d);
    return la_error(LA_ERR_MPI, "cannot split the communicator in reverse rank order");
  }
  MPI_Comm_set_errhandler(d->rev, MPI_ERRORS_RETURN);
  d->scan = d->scan_used = LA_SCAN_AUTO;
  d->scan_pieces = LA_SCAN_PIECES_DEFAULT;
  *out = d;
  return LA_OK;
}

void la_dist_destroy(la_dist *d) {
  if (!d || !*d) return;
  MPI_Comm_free(&(*d)->rev);
  MPI_Comm_free(&(*d)->comm);
  free(*d);
  *d = NULL;
}

MPI_Comm la_dist_comm(const la_dist d) { return d->comm; }
int la_dist_rank(const la_dist d) { return d->rank; }
int la_dist_size(const la_dist d) { return d->size; }
int64_t la_dist_comm_bytes(const la_dist d) { return d->bytes; }
double la_dist_comm_seconds(const la_dist d) { return d->comm_seconds; }

la_status la_dist_agree(la_dist d, la_status st) {
  int mine = st != LA_OK ? d->rank : d->size, first = d->size;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, d->comm) != MPI_SUCCESS)
    return la_error(LA_ERR_MPI, "MPI_Allreduce failed while agreeing on a status");
  if (first == d->size) {
    la_error_clear(); /* nothing failed: no reason from before this point can be mistaken for one */
    return LA_OK;
  }
  /* the first failing rank's status and recorded reason (docs/design.md §6 "Errors") */
  char buf[1024];
  int code = (int)st;
  memset(buf, 0, sizeof buf);
  if (d->rank == first) strncpy(buf, la_error_reason(st), sizeof buf - 1);
  MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, first, d->comm);
  MPI_Bcast(&code, 1, MPI_INT, first, d->comm);
  return la_error((la_status)code, "%s", buf);
}

la_status la_dist_row_ranges(la_dist d, la_status s, int64_t n, int64_t row0, int64_t **r0,
                             int64_t **rn) {
  int64_t mine[2] = {row0, n}, *all = la_malloc(sizeof(int64_t) * 2 * (size_t)d->size);
  *r0 = la_malloc(sizeof(int64_t) * (size_t)d->size);
  *rn = la_malloc(sizeof(int64_t) * (size_t)d->size);
  if (s == LA_OK && (!all || !*r0 || !*rn))
    s = la_error(LA_ERR_NOMEM, "out of memory for the row ranges of %d ranks", d->size);
  s = la_dist_agree(d, s);
  if (s == LA_OK && MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, d->comm) != MPI_SUCCESS)
    s = la_error(LA_ERR_MPI, "MPI_Allgather of the row ranges failed");
  for (int p = 0; s == LA_OK && p < d->size; p++) {
    (*r0)[p] = all[2 * p];
    (*rn)[p] = all[2 * p + 1];
    const int64_t end = p ? (*r0)[p - 1] + (*rn)[p - 1] : 0;
    if ((*r0)[p] != end || (*rn)[p] < 0) /* the same finding on every rank */
      s = la_error(LA_ERR_ARG, "rank %d passes rows [%lld, %lld) where row %lld is due: the "
                   "ranks must pass consecutive rows from 0 in rank order", p,
                   (long long)(*r0)[p], (long long)((*r0)[p] + (*rn)[p]), (long long)end);
  }
  free(all);
  return la_dist_agree(d, s);
}

/* MPI user operator: inout <- in (+) inout, in from the lower ranks (a before b). It cannot
 * report an error, so it allocates nothing: the result is formed in place in inout. */
static void scan_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  int bytes;
  MPI_Type_size(*dt, &bytes);
  la_scan_el_combine_right(in, inout, *len, (size_t)bytes / sizeof(double));
}

struct la_dist_req_s {
  MPI_Request req;
  MPI_Op op;
  MPI_Datatype el;
  double *in, *out;
  int exclusive, first; /* first: this rank leads the scan (its Exscan output is undefined) */
  double t0;
  /* a point-to-point scan (scan.c) runs in combine_end, on comm, with this scratch */
  la_scan_algorithm alg;
  MPI_Comm comm;
  int heads;
  size_t per;
  double *scratch;
};

void la_dist_use_config(la_dist d, const la_config *cfg) {
  d->scan = d->scan_used = cfg->scan_algorithm;
  d->scan_pieces = cfg->scan_pieces < 1 ? LA_SCAN_PIECES_DEFAULT : cfg->scan_pieces;
}

la_scan_algorithm la_dist_scan_algorithm(const la_dist d) { return d->scan_used; }

/* Start the exscan (causal) or allreduce (bidirectional) of the summaries in s. */
static la_status combine_begin(la_dist d, MPI_Comm comm, const la_state *s, int exclusive,
                               la_dist_req *out) {
  *out = NULL;
  size_t per = la_scan_el_doubles(s->r, s->dv), total = per * s->heads;
  la_dist_req q = la_calloc(1, sizeof *q);
  la_status st = LA_OK;
  /* auto: the model's choice for this P and state, the same on every rank (scan_model.c) */
  const la_scan_algorithm alg = !exclusive ? LA_SCAN_EXSCAN
                                : d->scan == LA_SCAN_AUTO
                                    ? la_scan_auto_choice(d->size, s->heads, per, d->scan_pieces)
                                    : d->scan;
  if (exclusive) d->scan_used = alg;
  const size_t nscratch = alg == LA_SCAN_EXSCAN
                              ? 0 : la_scan_scratch_doubles(alg, d->size, s->heads, per, d->scan_pieces);
  if (q) {
    q->in = la_malloc(sizeof(double) * total);
    q->out = la_malloc(sizeof(double) * total);
    if (nscratch) q->scratch = la_malloc(sizeof(double) * nscratch);
  }
  if (!q || !q->in || !q->out || (nscratch && !q->scratch))
    st = la_error(LA_ERR_NOMEM, "out of memory for the buffers of a summary collective "
                  "(%d heads x %zu doubles%s)", s->heads, per,
                  alg == LA_SCAN_ALLGATHER ? ", times the ranks for --scan-algorithm allgather" : "");
  /* every rank posts the collective, or none */
  st = la_dist_agree(d, st);
  if (st != LA_OK) {
    if (q) { free(q->in); free(q->out); free(q->scratch); }
    free(q);
    return st;
  }
  la_scan_el_pack(s, q->in);
  q->exclusive = exclusive;
  q->first = exclusive && (comm == d->rev ? d->rank == d->size - 1 : d->rank == 0);
  if (alg != LA_SCAN_EXSCAN) { /* point-to-point: runs in combine_end */
    q->alg = alg;
    q->comm = comm;
    q->heads = s->heads;
    q->per = per;
    q->req = MPI_REQUEST_NULL;
    q->t0 = MPI_Wtime();
    d->bytes += (int64_t)(sizeof(double) * la_scan_sent_doubles(alg, comm == d->rev ? d->size - 1 - d->rank : d->rank,
                                                                 d->size, s->heads, per, d->scan_pieces));
    *out = q;
    return LA_OK;
  }
  q->alg = LA_SCAN_EXSCAN;
  MPI_Type_contiguous((int)per, MPI_DOUBLE, &q->el);
  MPI_Type_commit(&q->el);
  MPI_Op_create(scan_op, 0 /* not commutative */, &q->op);
  q->t0 = MPI_Wtime();
  int rc = exclusive ? MPI_Iexscan(q->in, q->out, s->heads, q->el, q->op, comm, &q->req)
                     : MPI_Iallreduce(q->in, q->out, s->heads, q->el, q->op, comm, &q->req);
  d->bytes += (int64_t)(sizeof(double) * total);
  if (rc != MPI_SUCCESS) {
    MPI_Op_free(&q->op); MPI_Type_free(&q->el);
    free(q->in); free(q->out); free(q);
    return la_error(LA_ERR_MPI, "cannot start the summary collective");
  }
  *out = q;
  return LA_OK;
}

/* Complete it: s <- the exclusive prefix (rank 0: the identity, set explicitly, since
 * MPI_Exscan leaves it undefined) or the reduced summary. */
static la_status combine_end(la_dist d, la_dist_req *pq, la_state *s) {
  la_dist_req q = *pq;
  LA_CHECK(q, LA_ERR_ARG, "the summary collective to complete was not started");
  int rc = q->alg == LA_SCAN_EXSCAN
               ? MPI_Wait(&q->req, MPI_STATUS_IGNORE)
               : la_scan_exclusive(q->comm, q->alg, d->scan_pieces, q->in, q->out, q->heads, q->per,
                                   q->scratch);
  d->comm_seconds += MPI_Wtime() - q->t0;
  if (rc == MPI_SUCCESS) {
    if (q->first) la_state_reset(s);
    else la_scan_el_unpack(q->out, s);
  }
  if (q->alg == LA_SCAN_EXSCAN) {
    MPI_Op_free(&q->op);
    MPI_Type_free(&q->el);
  }
  free(q->in);
  free(q->out);
  free(q->scratch);
  free(q);
  *pq = NULL;
  LA_CHECK(rc == MPI_SUCCESS, LA_ERR_MPI, "the summary collective failed (MPI error %d)", rc);
  return LA_OK;
}

la_status la_dist_iexscan_begin(la_dist d, const la_state *total, la_dist_req *req) {
  return combine_begin(d, d->comm, total, 1, req);
}
la_status la_dist_iexscan_end(la_dist d, la_dist_req *req, la_state *prefix) {
  return combine_end(d, req, prefix);
}

static la_status combine(la_dist d, MPI_Comm comm, la_state *s, int exclusive) {
  la_dist_req q;
  la_status st = combine_begin(d, comm, s, exclusive, &q);
  return st == LA_OK ? combine_end(d, &q, s) : st;
}

la_status la_dist_exscan_reverse(la_dist d, la_state *s) { return combine(d, d->rev, s, 1); }

la_status la_dist_exscan(la_dist d, la_state *s) { return combine(d, d->comm, s, 1); }
la_status la_dist_allreduce(la_dist d, la_state *s) { return combine(d, d->comm, s, 0); }

/* ---- Exact states (§4.7): int64 buffers, combined by the exact operator ---- */
static void xscan_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  int bytes;
  MPI_Type_size(*dt, &bytes);
  const size_t per = (size_t)bytes / sizeof(int64_t), rsz = (per - 3) / (1 + LA_XBINS);
  for (int h = 0; h < *len; h++)
    la_xhead_combine_right((const int64_t *)in + h * per, (int64_t *)inout + h * per, rsz);
}

static la_status xcombine(la_dist d, MPI_Comm comm, la_xstate *x, int exclusive) {
  const size_t per = la_xhead_len(x->r, x->dv), total = per * (size_t)x->heads;
  int64_t *out = la_malloc(sizeof(int64_t) * total);
  la_status st = out ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for an exact summary "
                                        "collective (%d heads x %zu int64)", x->heads, per);
  st = la_dist_agree(d, st); /* every rank joins the collective, or none */
  if (st != LA_OK) {
    free(out);
    return st;
  }
  MPI_Datatype el;
  MPI_Op op;
  MPI_Type_contiguous((int)per, MPI_INT64_T, &el);
  MPI_Type_commit(&el);
  MPI_Op_create(xscan_op, 0 /* not commutative: flags */, &op);
  double t0 = MPI_Wtime();
  int rc = exclusive ? MPI_Exscan(x->x, out, x->heads, el, op, comm)
                     : MPI_Allreduce(x->x, out, x->heads, el, op, comm);
  d->comm_seconds += MPI_Wtime() - t0;
  d->bytes += (int64_t)(sizeof(int64_t) * total);
  const int first = exclusive && (comm == d->rev ? d->rank == d->size - 1 : d->rank == 0);
  if (rc == MPI_SUCCESS) {
    if (first) la_xstate_reset(x); /* MPI_Exscan leaves rank 0's output undefined */
    else memcpy(x->x, out, sizeof(int64_t) * total);
  }
  MPI_Op_free(&op);
  MPI_Type_free(&el);
  free(out);
  return rc == MPI_SUCCESS ? LA_OK : la_error(LA_ERR_MPI, "the exact summary collective failed");
}

la_status la_dist_xexscan(la_dist d, la_xstate *x) { return xcombine(d, d->comm, x, 1); }
la_status la_dist_xexscan_reverse(la_dist d, la_xstate *x) { return xcombine(d, d->rev, x, 1); }
la_status la_dist_xallreduce(la_dist d, la_xstate *x) { return xcombine(d, d->comm, x, 0); }

/* Denominator statistics merged over ranks (sums, min/max, first offender). */
la_status la_dist_reduce_stats(la_dist d, la_den_stats *st) {
  double mm[2] = {st->min, -st->max}, gmm[2];
  int64_t cnt[5] = {st->rows, st->count_nonpositive, st->count_nonfinite, st->violations,
                    st->overflows}, gcnt[5];
  /* first offenders as (token, head) pairs ordered lexicographically via MINLOC-free encoding */
  int64_t first[4] = {st->first_bad_token < 0 ? INT64_MAX : st->first_bad_token,
                      st->first_bad_head,
                      st->first_overflow_token < 0 ? INT64_MAX : st->first_overflow_token,
                      st->first_overflow_head}, gfirst[4];
  double t0 = MPI_Wtime();
  int rc = MPI_Allreduce(mm, gmm, 2, MPI_DOUBLE, MPI_MIN, d->comm);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(cnt, gcnt, 5, MPI_INT64_T, MPI_SUM, d->comm);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(first, gfirst, 4, MPI_INT64_T, MPI_MIN, d->comm);
  /* tokens are unique to a rank, so the rank holding the min token also holds its head */
  if (rc == MPI_SUCCESS) {
    int64_t hb[2] = {first[0] == gfirst[0] ? first[1] : INT64_MAX,
                     first[2] == gfirst[2] ? first[3] : INT64_MAX};
    rc = MPI_Allreduce(MPI_IN_PLACE, hb, 2, MPI_INT64_T, MPI_MIN, d->comm);
    gfirst[1] = hb[0];
    gfirst[3] = hb[1];
  }
  /* Histogram: only the occupied bin range travels (typically a few hundred bins). */
  int range[2] = {LA_DEN_HIST_BINS, 0}, grange[2];
  for (int i = 0; i < LA_DEN_HIST_BINS; i++)
    if (st->hist[i]) { range[0] = range[0] < i ? range[0] : i; range[1] = i + 1; }
  range[1] = -range[1];
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(range, grange, 2, MPI_INT, MPI_MIN, d->comm);
  int lo = grange[0], nb = -grange[1] - grange[0];
  if (rc == MPI_SUCCESS && nb > 0)
    rc = MPI_Allreduce(MPI_IN_PLACE, st->hist + lo, nb, MPI_UINT64_T, MPI_SUM, d->comm);
  d->bytes += (int64_t)(sizeof mm + sizeof cnt + sizeof first + 2 * sizeof(int64_t) +
                        sizeof range + (nb > 0 ? (size_t)nb * sizeof(uint64_t) : 0));
  d->comm_seconds += MPI_Wtime() - t0;
  LA_CHECK(rc == MPI_SUCCESS, LA_ERR_MPI, "the reduction of the denominator statistics failed "
           "(MPI error %d)", rc);
  st->min = gmm[0];
  st->max = -gmm[1];
  st->rows = gcnt[0];
  st->count_nonpositive = gcnt[1];
  st->count_nonfinite = gcnt[2];
  st->violations = gcnt[3];
  st->overflows = gcnt[4];
  st->first_bad_token = gfirst[0] == INT64_MAX ? -1 : gfirst[0];
  st->first_bad_head = (int)(gfirst[0] == INT64_MAX ? 0 : gfirst[1]);
  st->first_overflow_token = gfirst[2] == INT64_MAX ? -1 : gfirst[2];
  st->first_overflow_head = (int)(gfirst[2] == INT64_MAX ? 0 : gfirst[3]);
  return LA_OK;
}
