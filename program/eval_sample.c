/* The kernel pass of `linattn eval` across ranks (docs/design.md §8.2, §8.7): every rank holds
 * the kernel rows' queries and only its own keys and values; la_shard_pass gives its partial
 * sums, combined here as an online softmax is (a max, a rescale, a sum). Memory per rank:
 * O(n/P + rows), so eval runs at lengths where no rank could hold every key. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "eval.h"
#include <cblas.h>
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

/* ---- with --decay: the decayed quadratic form of the map (docs/design.md §8.1 "With decay") ---- */

la_status la_eval_decay_quad(la_dist d, const la_featmap fm, const double *lg, int64_t j0, int64_t nk,
                             const double *k, const double *v, int64_t nq, const int64_t *rows,
                             const double *q, int nmodes, const la_mode *modes, int dv,
                             double *quad, double *lden) {
  enum { QT = 64, KT = 1024 };
  const int H = la_featmap_heads(fm), r = la_featmap_width(fm), dk = la_featmap_input_dim(fm);
  const int64_t ldx = (int64_t)H * dk, ldv = (int64_t)H * dv, rh = (int64_t)nmodes * nq * H;
  if (rh * dv > INT32_MAX)
    return la_error(LA_ERR_UNSUPPORTED, "eval: %lld kernel rows x %d heads x %d values exceed an "
                    "MPI count (lower --kernel-rows or --kernel-max-n)", (long long)nq, H, dv);
  double *pq = la_eval_dalloc(nq * r), *aq = la_eval_dalloc(nq * H), *pk = la_eval_dalloc((int64_t)KT * r);
  double *ak = la_eval_dalloc(KT), *G = la_eval_dalloc((int64_t)QT * KT), *W = la_eval_dalloc((int64_t)QT * KT);
  double *den = la_calloc((size_t)(rh > 0 ? rh : 1), sizeof(double)), *lsc = la_eval_dalloc(rh);
  double *glob = la_eval_dalloc(rh);
  la_status st = pq && aq && pk && ak && G && W && den && lsc && glob ? LA_OK
                 : la_error(LA_ERR_NOMEM, "eval: out of memory for the decayed quadratic form of %lld "
                            "kernel rows", (long long)nq);
  if (st == LA_OK) memset(quad, 0, sizeof(double) * (size_t)(rh * dv));
  for (int64_t x = 0; x < rh && st == LA_OK; x++) lsc[x] = -INFINITY;
  for (int h = 0; h < H && st == LA_OK && nq > 0; h++) {
    const double ld = lg ? lg[h] : 0.0;
    double *aqh = aq + (int64_t)h * nq;
    st = la_featmap_eval(fm, LA_F64, h, nq, q + (size_t)h * dk, ldx, pq, aqh);
    for (int64_t b0 = 0; b0 < nk && st == LA_OK; b0 += KT) {
      const int nb = (int)(nk - b0 < KT ? nk - b0 : KT);
      const int64_t g0 = j0 + b0;
      st = la_featmap_eval(fm, LA_F64, h, nb, k + (size_t)b0 * ldx + (size_t)h * dk, ldx, pk, ak);
      for (int64_t i0 = 0; i0 < nq && st == LA_OK; i0 += QT) {
        const int nr = (int)(nq - i0 < QT ? nq - i0 : QT);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nb, r, 1.0, pq + (size_t)i0 * r, r,
                    pk, r, 0.0, G, KT);
        for (int mi = 0; mi < nmodes; mi++) {
          const int causal = modes[mi] == LA_CAUSAL;
          for (int i = 0; i < nr; i++) {
            const int64_t row = rows[i0 + i], x = ((int64_t)mi * nq + i0 + i) * H + h;
            const int64_t lim = causal ? row - g0 + 1 : nb;
            const int ne = (int)(lim < 0 ? 0 : (lim > nb ? nb : lim));
            double *Wi = W + (size_t)i * KT, *Gi = G + (size_t)i * KT, mx = -INFINITY;
            /* the log-weight a_k,j + |i - j| ln gamma of each key the row reads */
            for (int j = 0; j < ne; j++) {
              const int64_t dist = row > g0 + j ? row - (g0 + j) : (g0 + j) - row;
              Wi[j] = ak[j] + (double)dist * ld;
              mx = Wi[j] > mx ? Wi[j] : mx;
            }
            if (ne > 0 && mx > lsc[x]) { /* the row's scale grows: rescale its sums */
              const double f = lsc[x] == -INFINITY ? 0 : exp(lsc[x] - mx);
              den[x] *= f;
              for (int c = 0; c < dv; c++) quad[x * dv + c] *= f;
              lsc[x] = mx;
            }
            double acc = 0;
            for (int j = 0; j < ne; j++) {
              Wi[j] = Gi[j] * exp(Wi[j] - lsc[x]);
              acc += Wi[j];
            }
            for (int j = ne; j < nb; j++) Wi[j] = 0;
            den[x] += acc;
          }
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dv, nb, 1.0, W, KT,
                      v + (size_t)b0 * ldv + (size_t)h * dv, (int)ldv, 1.0,
                      quad + (((size_t)mi * nq + i0) * H + h) * dv, (int)ldv);
        }
      }
    }
  }
  st = la_dist_agree(d, st);
  /* across ranks as an online softmax: the largest scale, each rank's sums rescaled, added */
  if (st == LA_OK)
    st = mpi_ok(MPI_Allreduce(lsc, glob, (int)rh, MPI_DOUBLE, MPI_MAX, la_dist_comm(d)), "MPI_Allreduce");
  if (st == LA_OK) {
    rescale(den, rh, 1, lsc, glob);
    rescale(quad, rh, dv, lsc, glob);
    st = mpi_ok(MPI_Allreduce(MPI_IN_PLACE, den, (int)rh, MPI_DOUBLE, MPI_SUM, la_dist_comm(d)), "MPI_Allreduce");
  }
  if (st == LA_OK)
    st = mpi_ok(MPI_Allreduce(MPI_IN_PLACE, quad, (int)(rh * dv), MPI_DOUBLE, MPI_SUM, la_dist_comm(d)),
                "MPI_Allreduce");
  for (int64_t x = 0; x < rh && st == LA_OK; x++) {
    const int64_t i = x / H % nq, h = x % H;
    for (int c = 0; c < dv; c++) quad[x * dv + c] /= den[x];
    lden[x] = den[x] > 0 ? log(den[x]) + glob[x] + aq[h * nq + i] : (den[x] == 0 ? -INFINITY : NAN);
  }
  free(pq), free(aq), free(pk), free(ak), free(G), free(W), free(den), free(lsc), free(glob);
  return la_dist_agree(d, st);
}
