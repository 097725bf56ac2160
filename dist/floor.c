/* The rank-r floor (floor.h; docs/design.md §4.6 "The rank-r floor"). Per head, the n x n
 * matrix A_h = exp(s Q_h K_h^T - c) is laid out block-cyclically on a BLACS grid over all
 * ranks, each rank computing its own entries from q and k, and ScaLAPACK pdgesvd gives its
 * singular values (JOBU = JOBVT = 'N'). Eckart-Young: the best rank-r approximation of A in
 * the Frobenius norm has error sqrt(sum_{i>=r} sigma_i^2) (0-based i).
 * The BLACS/ScaLAPACK prototypes: scalapack.h (Debian ships no header). */
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "floor.h"
#include "la_alloc.h"

#include "scalapack.h"

/* Global index of local index l in a block-cyclic dimension of blocks nb over np processes,
 * this process p, source process 0 (ScaLAPACK's indxl2g, 0-based). */
static int64_t g_index(int64_t l, int nb, int p, int np) {
  return (l / nb) * (int64_t)nb * np + (int64_t)p * nb + l % nb;
}

/* Rows (or columns) a process gets of n in blocks of nb over np processes, when it is the
 * first one (the most any gets): ceil(ceil(n / nb) / np) nb, at most n. */
static int64_t max_local(int64_t n, int nb, int np) {
  int64_t b = ((n + nb - 1) / nb + np - 1) / np * nb;
  return b < n ? b : n;
}

/* A_loc <- scale Q_h K_h^T on this rank's block-cyclic part (mloc x nloc, column-major, lld):
 * the local rows of Q_h and of K_h are packed as [mloc, dk] and [nloc, dk], one GEMM. Returns
 * the largest entry, and in *bad the count of non-finite entries (the first at *bi, *bj). */
static double fill_scores(double *a, int lld, int mloc, int nloc, const int64_t *grow,
                          const int64_t *gcol, int h, int heads, int dk, double scale,
                          const double *q, const double *k, double *qp, double *kp,
                          int64_t *bad, int64_t *bi, int64_t *bj) {
  double mx = -INFINITY;
  *bad = 0;
  if (mloc == 0 || nloc == 0) return mx;
  const size_t row = (size_t)heads * dk;
  for (int i = 0; i < mloc; i++)
    memcpy(qp + (size_t)i * dk, q + (size_t)grow[i] * row + (size_t)h * dk, sizeof(double) * dk);
  for (int j = 0; j < nloc; j++)
    memcpy(kp + (size_t)j * dk, k + (size_t)gcol[j] * row + (size_t)h * dk, sizeof(double) * dk);
  cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, mloc, nloc, dk, scale, qp, dk, kp, dk,
              0.0, a, lld);
  for (int j = 0; j < nloc; j++)
    for (int i = 0; i < mloc; i++) {
      const double x = a[(size_t)j * lld + i];
      if (!isfinite(x)) {
        if (!(*bad)++) { *bi = grow[i]; *bj = gcol[j]; }
      } else if (x > mx) {
        mx = x;
      }
    }
  return mx;
}

la_status la_floor_singular_values(la_dist d, int64_t n, int heads, int dk, double scale,
                                   const double *q, const double *k, double *sv, double *shift) {
  return la_floor_svd(d, n, heads, dk, scale, q, k, 0, sv, NULL, NULL, shift);
}

/* The leading rvec singular triplets of every head (la_floor_svd): head h on rank h mod P,
 * LAPACK dgesdd (divide and conquer) on the whole n x n matrix A_h = exp(scale Q_h K_h^T - c),
 * then broadcast. pdgesvd forming the vectors took 80x its values-only time here (99 s at
 * n = 2048 on 2 ranks), dgesdd takes about 20 n^3 flops. */
static la_status leading_vectors(la_dist d, int64_t n, int heads, int dk, double scale,
                                 const double *q, const double *k, double c, int rvec, double *u,
                                 double *vv) {
  const int P = la_dist_size(d), me = la_dist_rank(d);
  const size_t nn = (size_t)n * (size_t)n;
  la_status st = LA_OK;
  for (int h0 = 0; h0 < heads && st == LA_OK; h0 += P) {
    const int h = h0 + me; /* this rank's head of the round, if any */
    if (h < heads) {
      double *a = la_malloc(sizeof(double) * nn), *uf = la_malloc(sizeof(double) * nn);
      double *vt = la_malloc(sizeof(double) * nn), *s = la_malloc(sizeof(double) * (size_t)n);
      double *qh = la_malloc(sizeof(double) * (size_t)n * dk), *kh = la_malloc(sizeof(double) * (size_t)n * dk);
      if (!a || !uf || !vt || !s || !qh || !kh) {
        st = la_error(LA_ERR_NOMEM, "la_floor_svd: out of memory for the singular vectors of a %lld x %lld "
                      "matrix on rank %d", (long long)n, (long long)n, me);
      } else {
        for (int64_t i = 0; i < n; i++) {
          memcpy(qh + i * dk, q + ((size_t)i * heads + h) * dk, sizeof(double) * dk);
          memcpy(kh + i * dk, k + ((size_t)i * heads + h) * dk, sizeof(double) * dk);
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, dk, scale, qh, dk, kh,
                    dk, 0.0, a, (int)n);
        for (size_t i = 0; i < nn; i++) a[i] = exp(a[i] - c);
        lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)n, (lapack_int)n, a,
                                         (lapack_int)n, s, uf, (lapack_int)n, vt, (lapack_int)n);
        if (info != 0) {
          st = la_error(LA_ERR_INTERNAL, "la_floor_svd: LAPACK dgesdd failed on head %d (info = %d)",
                        h, (int)info);
        } else { /* U_r diag(sigma_r) and V_r, [n][rvec] */
          double *uh = u + (size_t)h * n * rvec, *vh = vv + (size_t)h * n * rvec;
          for (int64_t i = 0; i < n; i++)
            for (int l = 0; l < rvec; l++)
              uh[i * rvec + l] = uf[(size_t)i * n + l] * s[l], vh[i * rvec + l] = vt[(size_t)l * n + i];
        }
      }
      free(a), free(uf), free(vt), free(s), free(qh), free(kh);
    }
    st = la_dist_agree(d, st);
    for (int p = 0; p < P && h0 + p < heads && st == LA_OK; p++) {
      const size_t cnt = (size_t)n * rvec;
      if (MPI_Bcast(u + (size_t)(h0 + p) * cnt, (int)cnt, MPI_DOUBLE, p, la_dist_comm(d)) != MPI_SUCCESS ||
          MPI_Bcast(vv + (size_t)(h0 + p) * cnt, (int)cnt, MPI_DOUBLE, p, la_dist_comm(d)) != MPI_SUCCESS)
        st = la_error(LA_ERR_MPI, "la_floor_svd: MPI_Bcast of the singular vectors failed");
    }
  }
  return st;
}

la_status la_floor_svd(la_dist d, int64_t n, int heads, int dk, double scale, const double *q,
                       const double *k, int rvec, double *sv, double *u, double *vv,
                       double *shift) {
  const char *job = "N";
  la_status st = LA_OK;
  if (n < 1 || heads < 1 || dk < 1 || !isfinite(scale) || !q || !k || !sv || !shift ||
      rvec < 0 || rvec > n || (rvec > 0 && (!u || !vv))) {
    st = la_error(LA_ERR_ARG, "la_floor_singular_values: want n >= 1, heads >= 1, dk >= 1, a "
                  "finite scale and non-NULL arrays (n = %lld, heads = %d, dk = %d, scale = %g)",
                  (long long)n, heads, dk, scale);
  }
  const int P = la_dist_size(d), nb = LA_FLOOR_NB;
  /* near-square grid: pr the largest divisor of P with pr^2 <= P (1 x P for a prime P) */
  int pr = 1;
  for (int c = 1; (int64_t)c * c <= P; c++)
    if (P % c == 0) pr = c;
  const int pc = P / pr;
  /* ScaLAPACK indexes a local array with 32-bit integers ((j-1) lld + i): the largest local
   * part (process (0,0)'s) must stay below 2^31 elements. n x n on one rank: n <= 46340. */
  if (st == LA_OK && (n > INT_MAX || max_local(n, nb, pr) * max_local(n, nb, pc) > INT_MAX)) {
    st = la_error(LA_ERR_UNSUPPORTED, "la_floor_singular_values: n = %lld is too large for %d ranks: "
                  "a %lld x %lld local block reaches ScaLAPACK's 32-bit index limit (2^31 elements "
                  "per rank; n <= 46340 on one rank, about 46340 sqrt(P) on P)", (long long)n, P,
                  (long long)max_local(n, nb, pr), (long long)max_local(n, nb, pc));
  }
  LA_TRY(la_dist_agree(d, st));

  const int N = (int)n, zero = 0, one = 1;
  int me, np, myr = -1, myc = -1, npr, npc;
  Cblacs_pinfo(&me, &np);
  int sys = Csys2blacs_handle(la_dist_comm(d)), ctxt = sys;
  Cblacs_gridinit(&ctxt, "Row", pr, pc);
  Cblacs_gridinfo(ctxt, &npr, &npc, &myr, &myc);
  /* every rank is in a pr x pc = P grid; a rank outside one (myr < 0) would still agree and
   * receive sv by the broadcast below */
  const int in_grid = myr >= 0 && myr < pr && myc >= 0 && myc < pc;
  int mloc = 0, nloc = 0, lld = 1, lwork = 0, info = 0, desc[9];
  double *a = NULL, *work = NULL, *qp = NULL, *kp = NULL, *s = NULL;
  int64_t *grow = NULL, *gcol = NULL;
  if (in_grid) {
    mloc = numroc_(&N, &nb, &myr, &zero, &pr);
    nloc = numroc_(&N, &nb, &myc, &zero, &pc);
    lld = mloc > 1 ? mloc : 1;
    descinit_(desc, &N, &N, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
    /* workspace query (lwork = -1), collective on the grid; U and VT (n x n, laid out as
     * A) only with rvec > 0 */
    double wq = 0, dummy = 0;
    const int query = -1;
    if (info == 0)
      pdgesvd_(job, job, &N, &N, &dummy, &one, &one, desc, &dummy, &dummy, &one, &one, desc,
               &dummy, &one, &one, desc, &wq, &query, &info);
    if (info != 0) {
      st = la_error(LA_ERR_INTERNAL, "la_floor_singular_values: descinit or the pdgesvd workspace "
                    "query failed (info = %d)", info);
    } else if (!(wq >= 1 && wq <= INT_MAX)) {
      st = la_error(LA_ERR_UNSUPPORTED, "la_floor_singular_values: pdgesvd asks for %.0f doubles of "
                    "workspace, beyond its 32-bit lwork", wq);
    } else {
      lwork = (int)wq;
      a = la_malloc(sizeof(double) * (size_t)lld * (size_t)(nloc > 0 ? nloc : 1));
      work = la_malloc(sizeof(double) * (size_t)lwork);
      qp = la_malloc(sizeof(double) * (size_t)(mloc > 0 ? mloc : 1) * dk);
      kp = la_malloc(sizeof(double) * (size_t)(nloc > 0 ? nloc : 1) * dk);
      grow = la_malloc(sizeof(int64_t) * (size_t)(mloc > 0 ? mloc : 1));
      gcol = la_malloc(sizeof(int64_t) * (size_t)(nloc > 0 ? nloc : 1));
      s = la_malloc(sizeof(double) * (size_t)N);
      if (!a || !work || !qp || !kp || !grow || !gcol || !s) {
        st = la_error(LA_ERR_NOMEM, "la_floor_singular_values: out of memory for the %d x %d "
                      "local part of the %d x %d matrix and %d doubles of pdgesvd workspace on "
                      "rank %d", mloc, nloc, N, N, lwork, la_dist_rank(d));
      }
    }
  }
  st = la_dist_agree(d, st);
  if (st != LA_OK) goto done;
  for (int i = 0; i < mloc; i++) grow[i] = g_index(i, nb, myr, pr);
  for (int j = 0; j < nloc; j++) gcol[j] = g_index(j, nb, myc, pc);

  /* The shift c = max_{h,i,j} s q_i.k_j: each rank's largest local score, MPI_MAX. Heads go
   * 0..H-1, so head H-1's scores are left in a and the SVDs start from it. */
  double c = -INFINITY;
  int64_t bad = 0, bi = 0, bj = 0;
  int badh = 0;
  for (int h = 0; h < heads && in_grid && !bad; h++) {
    double m = fill_scores(a, lld, mloc, nloc, grow, gcol, h, heads, dk, scale, q, k, qp, kp,
                           &bad, &bi, &bj);
    c = m > c ? m : c;
    badh = h;
  }
  if (bad) {
    st = la_error(LA_ERR_NONFINITE, "la_floor_singular_values: scale q.k is not finite (head %d, "
                  "query %lld, key %lld): q or k holds a non-finite value, or the product "
                  "overflows", badh, (long long)bi, (long long)bj);
  }
  st = la_dist_agree(d, st);
  if (st != LA_OK) goto done;
  if (MPI_Allreduce(MPI_IN_PLACE, &c, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(d)) != MPI_SUCCESS) {
    st = la_error(LA_ERR_MPI, "la_floor_singular_values: MPI_Allreduce of the shift failed");
    goto done;
  }
  *shift = c;

  for (int h = heads - 1; h >= 0; h--) {
    if (in_grid) {
      if (h != heads - 1)
        fill_scores(a, lld, mloc, nloc, grow, gcol, h, heads, dk, scale, q, k, qp, kp, &bad,
                    &bi, &bj);
      /* A_h = exp(s q.k - c): every entry in [0, 1], s q.k - c <= 0 by the choice of c */
      for (int j = 0; j < nloc; j++)
        for (int i = 0; i < mloc; i++) a[(size_t)j * lld + i] = exp(a[(size_t)j * lld + i] - c);
      double dummy = 0;
      info = 0;
      pdgesvd_(job, job, &N, &N, a, &one, &one, desc, s, &dummy, &one, &one, desc, &dummy, &one,
               &one, desc, work, &lwork, &info); /* destroys a */
      if (info > N)
        st = la_error(LA_ERR_INTERNAL, "la_floor_singular_values: pdgesvd found different singular "
                      "values on different ranks (head %d, info = %d)", h, info);
      else if (info > 0)
        st = la_error(LA_ERR_INTERNAL, "la_floor_singular_values: pdgesvd did not converge (head %d, "
                      "info = %d: the bidiagonal QR iteration failed)", h, info);
      else if (info < 0)
        st = la_error(LA_ERR_INTERNAL, "la_floor_singular_values: pdgesvd rejected argument %d "
                      "(head %d, info = %d)", -info, h, info);
      else memcpy(sv + (size_t)h * N, s, sizeof(double) * (size_t)N);
    }
    st = la_dist_agree(d, st);
    if (st != LA_OK) goto done;
  }
  /* rank 0 is grid process (0, 0); S is replicated on the grid, and this reaches any rank
   * outside it */
  for (int h = 0; h < heads && st == LA_OK; h++)
    if (MPI_Bcast(sv + (size_t)h * N, N, MPI_DOUBLE, 0, la_dist_comm(d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "la_floor_singular_values: MPI_Bcast of the singular values "
                    "failed");

  if (st == LA_OK && rvec > 0)
    st = leading_vectors(d, n, heads, dk, scale, q, k, c, rvec, u, vv);

done:
  free(a); free(work); free(qp); free(kp); free(grow); free(gcol); free(s);
  if (in_grid) Cblacs_gridexit(ctxt);
  Cfree_blacs_system_handle(sys);
  return st;
}

double la_floor_rel_err(const double *sv, int heads, int64_t n, int64_t r) {
  if (r < 0) r = 0;
  if (r > n) r = n;
  /* each head from its smallest value up, so the tail is not lost next to the large values */
  double tail = 0, total = 0;
  for (int h = 0; h < heads; h++) {
    const double *x = sv + (size_t)h * n;
    double t = 0, all = 0;
    for (int64_t i = n - 1; i >= r; i--) t += x[i] * x[i];
    all = t;
    for (int64_t i = r - 1; i >= 0; i--) all += x[i] * x[i];
    tail += t;
    total += all;
  }
  return total > 0 ? sqrt(tail / total) : 0.0;
}
