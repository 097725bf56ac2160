/* The kernel pass of `linattn eval` across ranks (docs/design.md §8.2, §8.7): every rank holds
 * the kernel rows' queries and only its own keys and values; la_shard_pass gives its partial
 * sums, combined here as an online softmax is (a max, a rescale, a sum). Memory per rank:
 * O(n/P + rows), so eval runs at lengths where no rank could hold every key. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "eval.h"
#include "la_alloc.h"

static la_status mpi_ok(int rc, const char *what) {
  return rc == MPI_SUCCESS ? LA_OK : la_error(LA_ERR_MPI, "eval: %s failed", what);
}

/* x <- x e^{loc - glob} for the values of each stabilizer (loc = -inf: x = 0). */
static void rescale(double *x, int64_t cnt, int w, const double *loc, const double *glob) {
  for (int64_t i = 0; i < cnt; i++) {
    const double f = loc[i] == -INFINITY ? 0 : exp(loc[i] - glob[i]);
    for (int c = 0; c < w; c++) x[i * w + c] *= f;
  }
}

/* Kernel sums over ranks, merged in rank order (the same on every rank). */
la_status la_eval_kernel_sums_allreduce(la_dist d, la_kernel_sums *ks) {
  const int P = la_dist_size(d);
  double mine[3] = {ks->shift, ks->err2, ks->ref2}, *all = la_malloc(sizeof(double) * 3 * (size_t)P);
  la_status st = all ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory");
  st = la_dist_agree(d, st); /* every rank joins the collective, or none */
  if (st == LA_OK)
    st = mpi_ok(MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, la_dist_comm(d)), "MPI_Allgather");
  la_kernel_sums_init(ks);
  for (int p = 0; p < P && st == LA_OK; p++) {
    la_kernel_sums b = {all[3 * p], all[3 * p + 1], all[3 * p + 2]};
    la_kernel_sums_merge(ks, &b);
  }
  free(all);
  return st;
}

la_status la_eval_kernel_pass(la_dist d, const la_featmap fm, double scale, int64_t j0, int64_t nk,
                              const double *k, const double *v, int64_t nq, const int64_t *rows,
                              const double *q, int nmodes, const la_mode *modes, int dv,
                              int threads, la_shard_sums *ss) {
  const int H = la_featmap_heads(fm);
  MPI_Comm comm = la_dist_comm(d);
  if ((int64_t)nmodes * nq * H * dv > INT32_MAX)
    return la_error(LA_ERR_UNSUPPORTED, "eval: %lld kernel rows x %d heads x %d values exceed an "
                    "MPI count (lower --kernel-rows or --kernel-max-n)", (long long)nq, H, dv);
  la_status st = la_shard_sums_create(nq, H, dv, nmodes, ss);
  if (st == LA_OK) st = la_shard_pass(fm, scale, 1, j0, nk, k, v, rows, q, modes, ss, threads);
  st = la_dist_agree(d, st);
  const int64_t rh = (int64_t)nmodes * nq * H;
  double *glob = st == LA_OK ? la_malloc(sizeof(double) * (size_t)(rh > H ? rh : H)) : NULL;
  if (st == LA_OK && !glob) st = la_error(LA_ERR_NOMEM, "eval: out of memory");
  st = la_dist_agree(d, st);
  if (st != LA_OK) {
    free(glob);
    return st;
  }
  /* the key stabilizer c_h: the largest over ranks; rescale the map's sums to it */
  st = mpi_ok(MPI_Allreduce(ss->c, glob, H, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  for (int64_t x = 0; x < (int64_t)nmodes * nq && st == LA_OK; x++) {
    rescale(ss->map_den + x * H, H, 1, ss->c, glob);
    rescale(ss->map_out + x * H * dv, H, dv, ss->c, glob);
  }
  if (st == LA_OK) memcpy(ss->c, glob, sizeof(double) * (size_t)H);
  /* softmax: each row's largest score over ranks */
  if (st == LA_OK) st = mpi_ok(MPI_Allreduce(ss->sm_max, glob, (int)rh, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  if (st == LA_OK) {
    rescale(ss->sm_sum, rh, 1, ss->sm_max, glob);
    rescale(ss->sm_out, rh, dv, ss->sm_max, glob);
    memcpy(ss->sm_max, glob, sizeof(double) * (size_t)rh);
  }
  double *sum[4] = {ss->sm_sum, ss->sm_out, ss->map_den, ss->map_out};
  const int64_t cnt[4] = {rh, rh * dv, rh, rh * dv};
  for (int t = 0; t < 4 && st == LA_OK; t++)
    st = mpi_ok(MPI_Allreduce(MPI_IN_PLACE, sum[t], (int)cnt[t], MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
  if (st == LA_OK) st = la_eval_kernel_sums_allreduce(d, &ss->ks);
  free(glob);
  st = la_dist_agree(d, st);
  /* phase 2: the total variation of the weights, given the combined normalizers */
  if (st == LA_OK) st = la_shard_pass(fm, scale, 2, j0, nk, k, v, rows, q, modes, ss, threads);
  st = la_dist_agree(d, st);
  if (st == LA_OK) st = mpi_ok(MPI_Allreduce(MPI_IN_PLACE, ss->tv, (int)rh, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
  return la_dist_agree(d, st);
}

double la_eval_weights_tv(const la_shard_sums *ss, int mi) {
  const int64_t rh = ss->nq * ss->heads;
  double acc = 0;
  for (int64_t x = 0; x < rh; x++) {
    const int64_t y = (int64_t)mi * rh + x;
    acc += ss->map_den[y] > 0 && isfinite(ss->tv[y]) ? 0.5 * ss->tv[y] : 1.0;
  }
  return rh ? acc / (double)rh : NAN;
}
