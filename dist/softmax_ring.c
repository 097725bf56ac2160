/* The softmax ring (softmax_ring.h; docs/design.md §4.6 "Exact references"). */
#include <stdlib.h>
#include "la_alloc.h"
#include "softmax_ring.h"

la_status la_softmax_ring(la_dist d, la_dtype dt, int64_t n, int H, int dk, int dv,
                          double scale, la_mode mode, int64_t nloc, int64_t row0,
                          const void *q, const void *k, const void *v, void *out, int threads) {
  MPI_Comm comm = la_dist_comm(d);
  const int P = la_dist_size(d), rank = la_dist_rank(d);
  const size_t es = la_dtype_size(dt);
  const int64_t maxloc = n / P + (n % P ? 1 : 0);
  const MPI_Datatype mt = dt == LA_F32 ? MPI_FLOAT : MPI_DOUBLE;
  LA_CHECK(maxloc * H * (dk > dv ? dk : dv) <= INT32_MAX, LA_ERR_UNSUPPORTED,
           "softmax ring: a block of %lld rows x %d heads x %d exceeds an MPI count",
           (long long)maxloc, H, dk > dv ? dk : dv);
  la_softmax_state st;
  la_status s = la_softmax_state_init(&st, nloc, H, dv);
  void *buf[4] = {NULL, NULL, NULL, NULL}; /* two (k, v) pairs: current and next */
  if (s == LA_OK && P > 1)
    for (int i = 0; i < 4; i++)
      if (!(buf[i] = la_malloc(es * (size_t)(maxloc ? maxloc : 1) * H * (i % 2 ? dv : dk) + 1)))
        s = la_error(LA_ERR_NOMEM, "softmax ring: out of memory for the blocks in flight (%lld "
                     "rows x %d heads)", (long long)maxloc, H);
  s = la_dist_agree(d, s, NULL, 0);
  const void *ck = k, *cv = v;
  for (int step = 0; step < P && s == LA_OK; step++) {
    int64_t nk, k0, nn, n0;
    la_split_ownership(n, P, (rank - step + P) % P, &nk, &k0);
    la_split_ownership(n, P, (rank - step - 1 + 2 * P) % P, &nn, &n0);
    void *nkb = buf[(step % 2) * 2], *nvb = buf[(step % 2) * 2 + 1];
    MPI_Request rq[4];
    int nrq = 0;
    if (step < P - 1) { /* the next block comes from the left, ours goes right */
      const int left = (rank - 1 + P) % P, right = (rank + 1) % P;
      MPI_Irecv(nkb, (int)(nn * H * dk), mt, left, 0, comm, &rq[nrq++]);
      MPI_Irecv(nvb, (int)(nn * H * dv), mt, left, 1, comm, &rq[nrq++]);
      MPI_Isend(ck, (int)(nk * H * dk), mt, right, 0, comm, &rq[nrq++]);
      MPI_Isend(cv, (int)(nk * H * dv), mt, right, 1, comm, &rq[nrq++]);
    }
    la_status ls = la_softmax_partial(&st, dt, dk, scale, mode, row0, q, k0, nk, ck, cv, threads);
    if (nrq && MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE) != MPI_SUCCESS) ls = LA_ERR_MPI;
    s = la_dist_agree(d, ls, NULL, 0);
    ck = nkb;
    cv = nvb;
  }
  if (s == LA_OK) s = la_dist_agree(d, la_softmax_finish(&st, dt, out), NULL, 0);
  for (int i = 0; i < 4; i++) free(buf[i]);
  la_softmax_state_free(&st);
  return s;
}
