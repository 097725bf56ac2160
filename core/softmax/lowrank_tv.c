/* weights_tv_floor (docs/design.md §8.2 "The attention weights"): the total variation between
 * softmax's row weights and those of the best rank-r matrix A_r = U_r diag(sigma_r) V_r^T of
 * exp(s Q K^T - c), row-normalized over the keys the row reads. A_r can have negative entries:
 * the weights are then signed and TV = 0.5 sum |p - w| is taken over them as they are; a row
 * whose A_r entries do not sum to a positive number counts 1. Tiles of TQ query rows, two dgemm
 * each (B V_r^T and s Q K^T), nothing n x n stored. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "la_alloc.h"
#include "la_blas.h"
#include "linattn/study.h"

#define TQ 32

la_status la_lowrank_tv(int64_t n, int heads, int dk, double scale, const double *k, int64_t nq,
                        const int64_t *rows, const double *q, int rvec, const double *u,
                        const double *vv, int r, int nmodes,
                        const la_mode *modes, double *tvsum, int threads) {
  LA_CHECK(n > 0 && heads > 0 && dk > 0 && scale > 0 && k && nq >= 0 && (nq == 0 || (rows && q)) &&
               r >= 1 && r <= rvec && rvec <= n && u && vv && nmodes >= 1 && nmodes <= 2 &&
               modes && tvsum,
           LA_ERR_ARG, "la_lowrank_tv: invalid arguments");
  for (int mi = 0; mi < nmodes; mi++) tvsum[mi] = 0;
  if (nq == 0) return LA_OK;
#ifdef _OPENMP
  const int T = threads > 0 ? threads : omp_get_max_threads();
#else
  const int T = 1;
  (void)threads;
#endif
  const int64_t ldx = (int64_t)heads * dk, ntiles = (nq + TQ - 1) / TQ;
  const size_t per = 2 * (size_t)TQ * n + (size_t)TQ * r + 2;
  double *scratch = la_malloc(sizeof(double) * per * (size_t)T);
  if (!scratch)
    return la_error(LA_ERR_NOMEM, "la_lowrank_tv: out of memory for %d tiles of %d x %lld", T, TQ,
                    (long long)n);
  for (int t = 0; t < T; t++) {
    double *acc = scratch + (size_t)t * per + 2 * (size_t)TQ * n + (size_t)TQ * r;
    acc[0] = acc[1] = 0;
  }
  la_blas_single_thread();
  for (int h = 0; h < heads; h++) {
    const double *uh = u + (size_t)h * n * rvec, *vh = vv + (size_t)h * n * rvec;
#pragma omp parallel for num_threads(T) schedule(dynamic)
    for (int64_t tile = 0; tile < ntiles; tile++) {
#ifdef _OPENMP
      const int me = omp_get_thread_num();
#else
      const int me = 0;
#endif
      double *A = scratch + (size_t)me * per, *S = A + (size_t)TQ * n, *B = S + (size_t)TQ * n;
      double *acc = B + (size_t)TQ * r; /* this thread's sums, per mode */
      const int64_t i0 = tile * TQ;
      const int nr = (int)(nq - i0 < TQ ? nq - i0 : TQ);
      for (int i = 0; i < nr; i++)
        for (int l = 0; l < r; l++) B[i * r + l] = uh[rows[i0 + i] * rvec + l];
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, (int)n, r, 1.0, B, r, vh, rvec, 0.0, A,
                  (int)n);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, (int)n, dk, scale,
                  q + (size_t)i0 * ldx + (size_t)h * dk, (int)ldx, k + (size_t)h * dk, (int)ldx, 0.0, S,
                  (int)n);
      for (int mi = 0; mi < nmodes; mi++)
        for (int i = 0; i < nr; i++) {
          const int64_t ne = modes[mi] == LA_CAUSAL ? rows[i0 + i] + 1 : n;
          const double *Ai = A + (size_t)i * n, *Si = S + (size_t)i * n;
          double M = -INFINITY, L = 0, D = 0, tv = 0;
          for (int64_t j = 0; j < ne; j++) M = Si[j] > M ? Si[j] : M;
          for (int64_t j = 0; j < ne; j++) L += exp(Si[j] - M), D += Ai[j];
          if (!(D > 0)) {
            tv = 1;
          } else {
            for (int64_t j = 0; j < ne; j++) tv += fabs(exp(Si[j] - M) / L - Ai[j] / D);
            tv *= 0.5;
          }
          acc[mi] += tv;
        }
    }
  }
  for (int t = 0; t < T; t++) {
    const double *acc = scratch + (size_t)t * per + 2 * (size_t)TQ * n + (size_t)TQ * r;
    for (int mi = 0; mi < nmodes; mi++) tvsum[mi] += acc[mi];
  }
  free(scratch);
  return LA_OK;
}
