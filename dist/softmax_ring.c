/* The softmax ring (declared in linattn/dist.h; docs/design.md §4.6 "Exact references"). Step s: rank p
 * holds the key/value block of rank o = p - s (mod P), computes on it if its rows read it,
 * and passes it right while the next one comes from the left. The holder folds a block at its
 * global positions (pl->r0), so the mask's decay bias |i - j| ln gamma_h (docs/design.md §8.1
 * "With decay") is the same on every rank count. */
#include <stdlib.h>
#include <string.h>
#include "la_alloc.h"
#include "linattn/dist.h"

enum { TAG_K, TAG_V, TAG_DK, TAG_DV, TAG_HOME_DK, TAG_HOME_DV };

/* The same on every rank: rank r owns rows [r0[r], r0[r] + nr[r]) and its queries read keys
 * in [klo[r], khi[r]); block o travels from o to o + far[o] (ring order), the last rank
 * whose rows read it (0: no other rank does). */
typedef struct {
  int P, rank;
  int64_t *nr, *r0, *klo, *khi, maxloc;
  int *far;
} ring_plan;

static int reads(const ring_plan *pl, int o, int r) {
  return pl->nr[o] > 0 && pl->nr[r] > 0 && pl->klo[r] < pl->r0[o] + pl->nr[o] &&
         pl->khi[r] > pl->r0[o];
}

static void plan_free(ring_plan *pl) {
  free(pl->nr); free(pl->r0); free(pl->klo); free(pl->khi); free(pl->far);
  memset(pl, 0, sizeof *pl);
}

/* The plan, and the checks of the arguments every rank makes the same way (not agreed). */
static la_status plan_make(ring_plan *pl, la_dist d, int64_t n, int H, int dk, int dv,
                           const la_softmax_mask *mask, int64_t nloc, int64_t row0) {
  const int P = la_dist_size(d), rank = la_dist_rank(d);
  memset(pl, 0, sizeof *pl);
  pl->P = P;
  pl->rank = rank;
  pl->maxloc = n / P + (n % P ? 1 : 0);
  int64_t mine, mine0;
  la_split_ownership(n, P, rank, &mine, &mine0);
  LA_CHECK(n >= 0 && H >= 1 && dk >= 1 && dv >= 1 && nloc == mine && row0 == mine0,
           LA_ERR_ARG, "softmax ring: rank %d passes rows %lld + %lld, la_split_ownership of "
           "n = %lld gives %lld + %lld", rank, (long long)row0, (long long)nloc, (long long)n,
           (long long)mine0, (long long)mine);
  LA_CHECK(!mask || !mask->seg || (mask->nseg >= 2 && mask->seg[mask->nseg - 1] == n),
           LA_ERR_ARG, "softmax ring: the segment offsets must end at n = %lld", (long long)n);
  LA_CHECK(pl->maxloc * H * (dk > dv ? dk : dv) <= INT32_MAX, LA_ERR_UNSUPPORTED,
           "softmax ring: a block of %lld rows x %d heads x %d exceeds an MPI count",
           (long long)pl->maxloc, H, dk > dv ? dk : dv);
  pl->nr = la_malloc(sizeof(int64_t) * P);
  pl->r0 = la_malloc(sizeof(int64_t) * P);
  pl->klo = la_malloc(sizeof(int64_t) * P);
  pl->khi = la_malloc(sizeof(int64_t) * P);
  pl->far = la_calloc((size_t)P, sizeof(int));
  if (!pl->nr || !pl->r0 || !pl->klo || !pl->khi || !pl->far)
    return la_error(LA_ERR_NOMEM, "softmax ring: out of memory for the plan of %d ranks", P);
  for (int r = 0; r < P; r++) {
    la_split_ownership(n, P, r, &pl->nr[r], &pl->r0[r]);
    LA_TRY(la_softmax_mask_keys(mask, pl->r0[r], pl->nr[r], &pl->klo[r], &pl->khi[r]));
  }
  for (int o = 0; o < P; o++)
    for (int t = 1; t < P; t++)
      if (reads(pl, o, (o + t) % P)) pl->far[o] = t;
  return LA_OK;
}

/* Forward steps into st; kv holds two (k, v) slots of maxloc rows when P > 1. */
static la_status ring_forward(la_dist d, const ring_plan *pl, la_dtype dt, int H, int dk, int dv,
                              double scale, const la_softmax_mask *mask, const void *q,
                              const void *k, const void *v, la_softmax_state *st,
                              void *const kv[4], int threads) {
  MPI_Comm comm = la_dist_comm(d);
  const int P = pl->P, rank = pl->rank, left = (rank - 1 + P) % P, right = (rank + 1) % P;
  const MPI_Datatype mt = dt == LA_F32 ? MPI_FLOAT : MPI_DOUBLE;
  la_status s = LA_OK;
  const void *ck = k, *cv = v;
  for (int step = 0; step < P && s == LA_OK; step++) {
    const int o = (rank - step + P) % P, on = (rank - step - 1 + 2 * P) % P;
    const int have = step == 0 || pl->far[o] >= step;
    void *nkb = kv[(step % 2) * 2], *nvb = kv[(step % 2) * 2 + 1];
    MPI_Request rq[4];
    int nrq = 0;
    if (step < pl->far[on]) { /* the left neighbour passes block on to us */
      MPI_Irecv(nkb, (int)(pl->nr[on] * H * dk), mt, left, TAG_K, comm, &rq[nrq++]);
      MPI_Irecv(nvb, (int)(pl->nr[on] * H * dv), mt, left, TAG_V, comm, &rq[nrq++]);
    }
    if (have && step < pl->far[o]) {
      MPI_Isend(ck, (int)(pl->nr[o] * H * dk), mt, right, TAG_K, comm, &rq[nrq++]);
      MPI_Isend(cv, (int)(pl->nr[o] * H * dv), mt, right, TAG_V, comm, &rq[nrq++]);
    }
    la_status ls = LA_OK;
    if (have && reads(pl, o, rank))
      ls = la_softmax_partial_mask(st, dt, dk, scale, mask, pl->r0[rank], q, pl->r0[o],
                                   pl->nr[o], ck, cv, threads);
    if (nrq && MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
      ls = la_error(LA_ERR_MPI, "softmax ring: a block transfer failed at step %d", step);
    s = la_dist_agree(d, ls);
    ck = nkb;
    cv = nvb;
  }
  return s;
}

/* Backward steps (float64): dq of this rank's rows, and dk, dv of its keys when their block
 * comes home. acc: two accumulator slots and one incoming, each [maxloc H dk | maxloc H dv].
 * Every message is sent and received whatever fails locally: the status is returned for the
 * caller to agree on. */
static la_status ring_backward(la_dist d, const ring_plan *pl, int H, int dk, int dv,
                               double scale, const la_softmax_mask *mask,
                               const la_softmax_state *st, const double *D, const double *q,
                               const double *g, const double *k, const double *v, double *dq,
                               double *dko, double *dvo, void *const kv[4], double *const acc[3],
                               int threads) {
  MPI_Comm comm = la_dist_comm(d);
  const int P = pl->P, rank = pl->rank, left = (rank - 1 + P) % P, right = (rank + 1) % P;
  const size_t half = (size_t)pl->maxloc * H * dk;
  la_status ls = LA_OK;
  int rc = MPI_SUCCESS;
  if (pl->nr[rank]) memset(dq, 0, sizeof(double) * pl->nr[rank] * H * dk);
  MPI_Request home[2], prev[2];
  int nhome = 0, nprev = 0;
  if (pl->far[rank] > 0) { /* our block comes back from the last rank that reads it */
    const int from = (rank + pl->far[rank]) % P;
    rc |= MPI_Irecv(dko, (int)(pl->nr[rank] * H * dk), MPI_DOUBLE, from, TAG_HOME_DK, comm, &home[nhome++]);
    rc |= MPI_Irecv(dvo, (int)(pl->nr[rank] * H * dv), MPI_DOUBLE, from, TAG_HOME_DV, comm, &home[nhome++]);
  }
  const double *ck = k, *cv = v;
  for (int step = 0; step < P; step++) {
    const int o = (rank - step + P) % P, on = (rank - step - 1 + 2 * P) % P;
    const int have = step == 0 || pl->far[o] >= step;
    const int64_t nb = pl->nr[o];
    double *nkb = kv[(step % 2) * 2], *nvb = kv[(step % 2) * 2 + 1];
    double *ak = acc[step % 2], *av = ak + half, *ik = acc[2], *iv = ik + half;
    MPI_Request rq[4], ri[2], rs[2];
    int nrq = 0, nri = 0, nrs = 0;
    if (step < pl->far[on]) {
      rc |= MPI_Irecv(nkb, (int)(pl->nr[on] * H * dk), MPI_DOUBLE, left, TAG_K, comm, &rq[nrq++]);
      rc |= MPI_Irecv(nvb, (int)(pl->nr[on] * H * dv), MPI_DOUBLE, left, TAG_V, comm, &rq[nrq++]);
    }
    if (have && step < pl->far[o]) {
      rc |= MPI_Isend(ck, (int)(nb * H * dk), MPI_DOUBLE, right, TAG_K, comm, &rq[nrq++]);
      rc |= MPI_Isend(cv, (int)(nb * H * dv), MPI_DOUBLE, right, TAG_V, comm, &rq[nrq++]);
    }
    if (have && step > 0) { /* the block's accumulators so far, from the left neighbour */
      rc |= MPI_Irecv(ik, (int)(nb * H * dk), MPI_DOUBLE, left, TAG_DK, comm, &ri[nri++]);
      rc |= MPI_Irecv(iv, (int)(nb * H * dv), MPI_DOUBLE, left, TAG_DV, comm, &ri[nri++]);
    }
    if (have) {
      const size_t ck_n = (size_t)nb * H * dk, cv_n = (size_t)nb * H * dv;
      memset(ak, 0, sizeof(double) * ck_n);
      memset(av, 0, sizeof(double) * cv_n);
      if (reads(pl, o, rank)) {
        la_status e = la_softmax_backward_partial(st, D, dk, scale, mask, pl->r0[rank], q, g,
                                                  pl->r0[o], nb, ck, cv, dq, ak, av, threads);
        ls = ls == LA_OK ? e : ls;
      }
      if (nri) {
        rc |= MPI_Waitall(nri, ri, MPI_STATUSES_IGNORE);
        for (size_t x = 0; x < ck_n; x++) ak[x] += ik[x];
        for (size_t x = 0; x < cv_n; x++) av[x] += iv[x];
      }
      if (step < pl->far[o] || o != rank) { /* on to the right, or home from the last reader */
        const int to = step < pl->far[o] ? right : o;
        const int tk = step < pl->far[o] ? TAG_DK : TAG_HOME_DK;
        rc |= MPI_Isend(ak, (int)ck_n, MPI_DOUBLE, to, tk, comm, &rs[nrs++]);
        rc |= MPI_Isend(av, (int)cv_n, MPI_DOUBLE, to, tk + 1, comm, &rs[nrs++]);
      } else if (ck_n) { /* our own block, read by no other rank */
        memcpy(dko, ak, sizeof(double) * ck_n);
        memcpy(dvo, av, sizeof(double) * cv_n);
      }
    }
    if (nrq) rc |= MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
    if (nprev) rc |= MPI_Waitall(nprev, prev, MPI_STATUSES_IGNORE); /* frees acc[(step+1)%2] */
    for (nprev = 0; nprev < nrs; nprev++) prev[nprev] = rs[nprev];
    ck = nkb;
    cv = nvb;
  }
  if (nprev) rc |= MPI_Waitall(nprev, prev, MPI_STATUSES_IGNORE);
  if (nhome) rc |= MPI_Waitall(nhome, home, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS && ls == LA_OK)
    ls = la_error(LA_ERR_MPI, "softmax ring: a transfer of the backward ring failed");
  return ls;
}

la_status la_softmax_ring_mask(la_dist d, la_dtype dt, int64_t n, int H, int dk, int dv,
                               double scale, const la_softmax_mask *mask, int64_t nloc,
                               int64_t row0, const void *q, const void *k, const void *v,
                               void *out, int threads) {
  const size_t es = la_dtype_size(dt);
  ring_plan pl;
  la_softmax_state st;
  memset(&st, 0, sizeof st);
  void *kv[4] = {NULL, NULL, NULL, NULL}; /* two (k, v) pairs: current and next */
  la_status s = plan_make(&pl, d, n, H, dk, dv, mask, nloc, row0);
  if (s == LA_OK) s = la_softmax_state_init(&st, nloc, H, dv);
  if (s == LA_OK && pl.P > 1)
    for (int i = 0; i < 4 && s == LA_OK; i++)
      if (!(kv[i] = la_malloc(es * (size_t)pl.maxloc * H * (i % 2 ? dv : dk) + 1)))
        s = la_error(LA_ERR_NOMEM, "softmax ring: out of memory for the blocks in flight (%lld "
                     "rows x %d heads)", (long long)pl.maxloc, H);
  s = la_dist_agree(d, s);
  if (s == LA_OK) s = ring_forward(d, &pl, dt, H, dk, dv, scale, mask, q, k, v, &st, kv, threads);
  if (s == LA_OK) s = la_dist_agree(d, la_softmax_finish(&st, dt, out));
  for (int i = 0; i < 4; i++) free(kv[i]);
  la_softmax_state_free(&st);
  plan_free(&pl);
  return s;
}

la_status la_softmax_ring(la_dist d, la_dtype dt, int64_t n, int H, int dk, int dv,
                          double scale, la_mode mode, int64_t nloc, int64_t row0,
                          const void *q, const void *k, const void *v, void *out, int threads) {
  const la_softmax_mask mask = {mode, NULL, 0, 0, NULL};
  return la_softmax_ring_mask(d, dt, n, H, dk, dv, scale, &mask, nloc, row0, q, k, v, out,
                              threads);
}

la_status la_softmax_ring_grad(la_dist d, int64_t n, int H, int dk, int dv, double scale,
                               const la_softmax_mask *mask, int64_t nloc, int64_t row0,
                               const double *q, const double *k, const double *v,
                               const double *g, double *out, double *dq, double *dko,
                               double *dvo, int threads) {
  ring_plan pl;
  la_softmax_state st;
  memset(&st, 0, sizeof st);
  void *kv[4] = {NULL, NULL, NULL, NULL};
  double *acc[3] = {NULL, NULL, NULL}, *D = NULL;
  la_status s = plan_make(&pl, d, n, H, dk, dv, mask, nloc, row0);
  if (s == LA_OK) s = la_softmax_state_init(&st, nloc, H, dv);
  if (s == LA_OK) {
    const size_t blk = (size_t)pl.maxloc * H;
    int ok = (D = la_malloc(sizeof(double) * (nloc * H + 1))) != NULL;
    for (int i = 0; ok && pl.P > 1 && i < 4; i++)
      ok = (kv[i] = la_malloc(sizeof(double) * blk * (i % 2 ? dv : dk) + 1)) != NULL;
    for (int i = 0; ok && i < (pl.P > 1 ? 3 : 1); i++)
      ok = (acc[i] = la_malloc(sizeof(double) * blk * (dk + dv) + 1)) != NULL;
    if (!ok)
      s = la_error(LA_ERR_NOMEM, "softmax ring: out of memory for the blocks and gradient "
                   "accumulators in flight (%lld rows x %d heads)", (long long)pl.maxloc, H);
  }
  s = la_dist_agree(d, s);
  if (s == LA_OK)
    s = ring_forward(d, &pl, LA_F64, H, dk, dv, scale, mask, q, k, v, &st, kv, threads);
  if (s == LA_OK) s = la_dist_agree(d, la_softmax_finish(&st, LA_F64, out));
  if (s == LA_OK) s = la_dist_agree(d, la_softmax_delta(nloc, H, dv, out, g, D));
  if (s == LA_OK)
    s = la_dist_agree(d, ring_backward(d, &pl, H, dk, dv, scale, mask, &st, D, q, g, k, v, dq,
                                       dko, dvo, kv, acc, threads));
  for (int i = 0; i < 4; i++) free(kv[i]);
  for (int i = 0; i < 3; i++) free(acc[i]);
  free(D);
  la_softmax_state_free(&st);
  plan_free(&pl);
  return s;
}
