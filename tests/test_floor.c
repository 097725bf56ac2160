/* The rank-r floor (dist/floor.h, docs/design.md §4.6 "The rank-r floor") at any rank count
 * (ctest runs 1, 2, 3 and 4: grids 1x1, 1x2, 1x3, 2x2). Every rank draws the same q, k from a
 * fixed seed; the test builds each A_h = exp(s Q_h K_h^T - c) itself with plain loops and takes
 * its singular values with serial LAPACKE_dgesvd, sharing no code with dist/floor.c.
 *
 * Checks and tolerances (eps = 2^-52):
 * - shift: |c - c_ref| <= 1e-13 (1 + |c_ref|). Both are a max of s q.k; GEMM and the loop sum
 *   the dk <= 64 products in different orders: |error| <= dk eps sum_d |s q_d k_d|, and
 *   64 eps = 1.4e-14.
 * - singular values: max_i |sv_i - sv_ref_i| <= 1e-11 sv_ref_0. Both SVDs are backward stable,
 *   the exact values of A + E with ||E||_2 <= p(n) eps ||A||_2, p(n) a modest multiple of n,
 *   and Weyl's inequality bounds each |sigma_i(A + E) - sigma_i(A)| by ||E||_2. The entries
 *   also differ by the rounding of s q.k - c (relative dk eps |s q.k - c| <= 1e-13 here), so
 *   ||dA||_2 <= ||dA||_F <= 1e-13 sqrt(n) ||A||_2. With n <= 256 the sum is below 1e-12 sv_0;
 *   1e-11 leaves a factor 10 for p(n). A wrong entry or index gives errors of order sv_0.
 * - la_floor_rel_err(sv) against the formula evaluated here on sv_ref: each of the n values
 *   moves by at most tau = 1e-11 sv_ref_0, so the tail norm and the total norm move by at most
 *   sqrt(n H) tau each: |f - f_ref| <= 2 sqrt(n H) tau / ||sv_ref|| + 1e-15.
 * - Eckart-Young (rank 0): the truncated SVD U_r S_r V_r^T from LAPACKE_dgesvd has relative
 *   Frobenius error equal to the floor within 1e-12 (the reconstruction's rounding, r eps per
 *   entry relative to ||A||, and the SVD's backward error); three other rank-r matrices have
 *   an error >= floor - 1e-12: a positive random-feature map phi(Q) phi(K)^T (FAVOR+,
 *   E phi(q).phi(k) = exp(s q.k)), a Gaussian X Y^T, both at their best scalar multiple, and
 *   the randomized range finder Q Q^T A (two power iterations), which is close to the floor.
 * - errors: n = 0 (LA_ERR_ARG), a NaN in q and an overflowing scale (LA_ERR_NONFINITE), an n
 *   past ScaLAPACK's 32-bit local index (LA_ERR_UNSUPPORTED): the same status and reason on
 *   every rank.
 * Every rank counts its failures; the exit status is the MPI_MAX over ranks.
 *
 * `test_floor --expect-nomem` under LINATTN_FAIL_ALLOC=N: the agreed LA_ERR_NOMEM (ctest
 * floor_nomem*, one per allocation of the floor, failing on rank 1 of 2).
 * `test_floor --time n1,n2,...` times la_floor_singular_values (H = 1, dk = 64) and, on
 * rank 0 alone, LAPACKE_dgesvd (values only) on the same matrix, and prints the OpenBLAS core
 * (docs/design.md §4.6 gives the figures). */
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "linattn/dist.h"

#include "check.h"
#include "floor.h"

char *openblas_get_corename(void);

#define TOL_SV 1e-11
#define TOL_SHIFT 1e-13
#define TOL_EY 1e-12

static int RANK, SIZE;
static double worst_sv, worst_floor, worst_ey;

/* splitmix64 and Box-Muller: the same stream on every rank */
static uint64_t rng_state;
static double urand(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) * 0x1.0p-53;
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

/* A_h (row-major n x n) = exp(s q_i.k_j - c), plain loops; c = max over heads (c_out). */
static double ref_shift(int n, int H, int dk, double s, const double *q, const double *k) {
  double c = -INFINITY;
  for (int h = 0; h < H; h++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double dot = 0;
        for (int t = 0; t < dk; t++) dot += q[((size_t)i * H + h) * dk + t] * k[((size_t)j * H + h) * dk + t];
        c = s * dot > c ? s * dot : c;
      }
  return c;
}
static void ref_matrix(int n, int H, int dk, double s, const double *q, const double *k, double c,
                       int h, double *A) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double dot = 0;
      for (int t = 0; t < dk; t++) dot += q[((size_t)i * H + h) * dk + t] * k[((size_t)j * H + h) * dk + t];
      A[(size_t)i * n + j] = exp(s * dot - c);
    }
}

/* singular values of a copy of A (values only) */
static int ref_sv(int n, const double *A, double *s) {
  double *a = malloc(sizeof(double) * n * n), *sup = malloc(sizeof(double) * (n > 1 ? n : 2));
  memcpy(a, A, sizeof(double) * n * n);
  int info = (int)LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', n, n, a, n, s, NULL, 1, NULL, 1, sup);
  free(a);
  free(sup);
  return info;
}

static double ref_floor(const double *sv, int H, int n, int r) {
  double tail = 0, tot = 0;
  for (int h = 0; h < H; h++)
    for (int i = 0; i < n; i++) {
      tot += sv[h * n + i] * sv[h * n + i];
      if (i >= r) tail += sv[h * n + i] * sv[h * n + i];
    }
  return tot > 0 ? sqrt(tail / tot) : 0;
}

static double frob2(int n, const double *X) {
  double t = 0;
  for (size_t i = 0; i < (size_t)n * n; i++) t += X[i] * X[i];
  return t;
}
/* ||A - alpha B||_F^2 at the best alpha = <A, B> / <B, B> (B = 0: ||A||^2) */
static double best_multiple_err2(int n, const double *A, const double *B) {
  double ab = 0, bb = 0;
  for (size_t i = 0; i < (size_t)n * n; i++) { ab += A[i] * B[i]; bb += B[i] * B[i]; }
  double alpha = bb > 0 ? ab / bb : 0, e = 0;
  for (size_t i = 0; i < (size_t)n * n; i++) { double d = A[i] - alpha * B[i]; e += d * d; }
  return e;
}
/* C (n x n) = X (n x r) Y^T (Y n x r), row-major */
static void outer(int n, int r, const double *X, const double *Y, double *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double t = 0;
      for (int l = 0; l < r; l++) t += X[(size_t)i * r + l] * Y[(size_t)j * r + l];
      C[(size_t)i * n + j] = t;
    }
}
/* Q (n x r, orthonormal columns) <- orth(Y), in place; returns info */
static int orth(int n, int r, double *Y) {
  double tau[64];
  int info = (int)LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, r, Y, r, tau);
  if (!info) info = (int)LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, r, r, Y, r, tau);
  return info;
}

/* Rank-r matrices against the floor over all heads (rank 0 only). */
static void eckart_young(int n, int H, int dk, double s, const double *q, const double *k, double c,
                         const double *sv) {
  const int rs[3] = {1, 4, 16};
  double *A = malloc(sizeof(double) * n * n), *a = malloc(sizeof(double) * n * n);
  double *U = malloc(sizeof(double) * n * n), *VT = malloc(sizeof(double) * n * n);
  double *S = malloc(sizeof(double) * n), *sup = malloc(sizeof(double) * (n > 1 ? n : 2));
  double *B = malloc(sizeof(double) * n * n), *X = malloc(sizeof(double) * n * 16);
  double *Y = malloc(sizeof(double) * n * 16), *Z = malloc(sizeof(double) * (n * 16 + 16 * dk));
  for (int ri = 0; ri < 3; ri++) {
    const int r = rs[ri];
    if (r >= n) continue;
    double tot = 0, e_svd = 0, e_feat = 0, e_gauss = 0, e_range = 0;
    for (int h = 0; h < H; h++) {
      ref_matrix(n, H, dk, s, q, k, c, h, A);
      tot += frob2(n, A);
      /* the truncated SVD: exactly the floor */
      memcpy(a, A, sizeof(double) * n * n);
      int info = (int)LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'S', 'S', n, n, a, n, S, U, n, VT, n, sup);
      CHECK(info == 0, "LAPACKE_dgesvd with vectors: info = %d", info);
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
          double t = 0;
          for (int l = 0; l < r; l++) t += U[(size_t)i * n + l] * S[l] * VT[(size_t)l * n + j];
          double dd = A[(size_t)i * n + j] - t;
          e_svd += dd * dd;
        }
      /* positive random features phi(x) = exp(sqrt(s) w.x - s |x|^2 / 2) / sqrt(r), w ~ N(0, I) */
      for (int l = 0; l < r; l++)
        for (int t = 0; t < dk; t++) Z[l * dk + t] = nrand();
      for (int side = 0; side < 2; side++) {
        const double *x = side ? k : q;
        double *F = side ? Y : X;
        for (int i = 0; i < n; i++) {
          const double *xi = x + ((size_t)i * H + h) * dk;
          double nn = 0;
          for (int t = 0; t < dk; t++) nn += xi[t] * xi[t];
          for (int l = 0; l < r; l++) {
            double wx = 0;
            for (int t = 0; t < dk; t++) wx += Z[l * dk + t] * xi[t];
            /* the shift c goes half into each side: exp(-c/2) twice */
            F[(size_t)i * r + l] = exp(sqrt(s) * wx - s * nn / 2 - c / 2) / sqrt((double)r);
          }
        }
      }
      outer(n, r, X, Y, B);
      e_feat += best_multiple_err2(n, A, B);
      /* Gaussian X Y^T */
      for (int i = 0; i < n * r; i++) { X[i] = nrand(); Y[i] = nrand(); }
      outer(n, r, X, Y, B);
      e_gauss += best_multiple_err2(n, A, B);
      /* range finder: Y = orth(A Omega), two power iterations, B = Y Y^T A */
      for (int i = 0; i < n * r; i++) X[i] = nrand();
      for (int it = 0; it < 3; it++) {
        for (int i = 0; i < n; i++) /* Y = A X */
          for (int l = 0; l < r; l++) {
            double t = 0;
            for (int j = 0; j < n; j++) t += A[(size_t)i * n + j] * X[(size_t)j * r + l];
            Y[(size_t)i * r + l] = t;
          }
        CHECK(orth(n, r, Y) == 0, "QR of the range");
        if (it == 2) break;
        for (int j = 0; j < n; j++) /* X = A^T Y */
          for (int l = 0; l < r; l++) {
            double t = 0;
            for (int i = 0; i < n; i++) t += A[(size_t)i * n + j] * Y[(size_t)i * r + l];
            X[(size_t)j * r + l] = t;
          }
        CHECK(orth(n, r, X) == 0, "QR of the co-range");
      }
      for (int l = 0; l < r; l++) /* Z = Y^T A, r x n */
        for (int j = 0; j < n; j++) {
          double t = 0;
          for (int i = 0; i < n; i++) t += Y[(size_t)i * r + l] * A[(size_t)i * n + j];
          B[(size_t)l * n + j] = t;
        }
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
          double t = 0;
          for (int l = 0; l < r; l++) t += Y[(size_t)i * r + l] * B[(size_t)l * n + j];
          double dd = A[(size_t)i * n + j] - t;
          e_range += dd * dd;
        }
    }
    const double fl = la_floor_rel_err(sv, H, n, r);
    e_svd = sqrt(e_svd / tot);
    e_feat = sqrt(e_feat / tot);
    e_gauss = sqrt(e_gauss / tot);
    e_range = sqrt(e_range / tot);
    worst_ey = worse(worst_ey, fabs(e_svd - fl));
    CHECK(fabs(e_svd - fl) <= TOL_EY, "n = %d, H = %d, r = %d: truncated SVD error %.17g != floor "
          "%.17g (diff %.3g)", n, H, r, e_svd, fl, fabs(e_svd - fl));
    CHECK(e_feat >= fl - TOL_EY, "n = %d, r = %d: random features beat the floor: %.17g < %.17g",
          n, r, e_feat, fl);
    CHECK(e_gauss >= fl - TOL_EY, "n = %d, r = %d: Gaussian X Y^T beats the floor: %.17g < %.17g",
          n, r, e_gauss, fl);
    CHECK(e_range >= fl - TOL_EY, "n = %d, r = %d: range finder beats the floor: %.17g < %.17g",
          n, r, e_range, fl);
    printf("  n = %d, H = %d, r = %d: floor %.6e, truncated SVD %.6e (diff %.1e), range finder "
           "%.6e, random features %.6e, Gaussian %.6e\n", n, H, r, fl, e_svd, fabs(e_svd - fl),
           e_range, e_feat, e_gauss);
  }
  free(A); free(a); free(U); free(VT); free(S); free(sup); free(B); free(X); free(Y); free(Z);
}

typedef struct {
  int n, H, dk;
  double scale, head_gain; /* head h's q is multiplied by head_gain^h */
} fcase;

static void run_case(la_dist d, fcase fc, uint64_t seed) {
  const int n = fc.n, H = fc.H, dk = fc.dk;
  rng_state = seed;
  double *q = malloc(sizeof(double) * n * H * dk), *k = malloc(sizeof(double) * n * H * dk);
  for (int i = 0; i < n * H * dk; i++) { q[i] = nrand(); k[i] = nrand(); }
  for (int i = 0; i < n; i++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < dk; t++) q[((size_t)i * H + h) * dk + t] *= pow(fc.head_gain, h);
  double *sv = malloc(sizeof(double) * n * H), *svr = malloc(sizeof(double) * n * H);
  double *A = malloc(sizeof(double) * n * n), shift = NAN;
  char err[512] = "";
  for (int i = 0; i < n * H; i++) sv[i] = NAN;
  double t0 = MPI_Wtime();
  la_status st = why(la_floor_singular_values(d, n, H, dk, fc.scale, q, k, sv, &shift), err, sizeof err);
  double secs = MPI_Wtime() - t0;
  CHECK(st == LA_OK, "n = %d, H = %d: la_floor_singular_values: %s (%s)", n, H,
        la_status_string(st), err);
  const double c = ref_shift(n, H, dk, fc.scale, q, k);
  CHECK(fabs(shift - c) <= TOL_SHIFT * (1 + fabs(c)), "n = %d: shift %.17g, reference %.17g", n,
        shift, c);
  for (int h = 0; h < H; h++) {
    ref_matrix(n, H, dk, fc.scale, q, k, c, h, A);
    CHECK(ref_sv(n, A, svr + (size_t)h * n) == 0, "LAPACKE_dgesvd failed");
  }
  double e = 0, tot = 0;
  int sorted = 1;
  for (int h = 0; h < H; h++)
    for (int i = 0; i < n; i++) {
      const double x = sv[h * n + i], y = svr[h * n + i];
      e = worse(e, fabs(x - y) / svr[h * n]);
      tot += y * y;
      if (i && !(x <= sv[h * n + i - 1])) sorted = 0;
    }
  worst_sv = worse(worst_sv, e);
  CHECK(e <= TOL_SV, "n = %d, H = %d, dk = %d: max |sv - sv_ref| / sv_ref[0] = %.3g > %.0g", n, H,
        dk, e, TOL_SV);
  CHECK(sorted, "n = %d: singular values not descending", n);
  /* identical on every rank */
  double *sv0 = malloc(sizeof(double) * n * H);
  memcpy(sv0, sv, sizeof(double) * n * H);
  MPI_Bcast(sv0, n * H, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  CHECK(memcmp(sv0, sv, sizeof(double) * n * H) == 0, "n = %d: sv differs from rank 0's", n);
  free(sv0);
  /* the floor */
  const double ftol = 2 * sqrt((double)n * H) * TOL_SV * svr[0] / sqrt(tot) + 1e-15;
  const int64_t rs[] = {-1, 0, 1, 2, 5, 16, n / 2, n - 1, n, n + 3};
  double fe = 0;
  for (int a = 0; a < 10; a++) {
    const int r = (int)rs[a];
    const double f = la_floor_rel_err(sv, H, n, r), fr = ref_floor(svr, H, n, r < 0 ? 0 : r);
    const double fself = la_floor_rel_err(svr, H, n, r);
    fe = worse(fe, fabs(f - fr));
    CHECK(fabs(f - fr) <= ftol, "n = %d, r = %d: floor %.17g, reference %.17g (tol %.2g)", n, r,
          f, fr, ftol);
    CHECK(fabs(fself - fr) <= 1e-15 * (1 + fr), "n = %d, r = %d: la_floor_rel_err(sv_ref) = %.17g, "
          "formula %.17g", n, r, fself, fr);
  }
  CHECK(la_floor_rel_err(sv, H, n, 0) == 1.0 || svr[0] == 0, "r = 0 gives 1");
  CHECK(la_floor_rel_err(sv, H, n, n) == 0.0, "r = n gives 0");
  worst_floor = worse(worst_floor, fe);
  if (RANK == 0) {
    printf("case n = %d, H = %d, dk = %d, scale = %g: %.3f s, shift %.6g, sv_0 %.6g, "
           "max |sv - sv_ref| / sv_0 = %.2e, max floor error %.2e\n", n, H, dk, fc.scale, secs,
           shift, svr[0], e, fe);
    eckart_young(n, H, dk, fc.scale, q, k, c, sv);
  }
  free(q); free(k); free(sv); free(svr); free(A);
}

/* The same status and reason on every rank. */
static void check_agreed(la_status st, const char *err, la_status want, const char *word,
                         const char *what) {
  CHECK(st == want, "%s: status %s, want %s (%s)", what, la_status_string(st),
        la_status_string(want), err);
  CHECK(strstr(err, word) != NULL, "%s: the reason '%s' does not say '%s'", what, err, word);
  char r0[512];
  snprintf(r0, sizeof r0, "%s", err);
  MPI_Bcast(r0, sizeof r0, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(strcmp(r0, err) == 0, "%s: reason differs from rank 0's: '%s' vs '%s'", what, err, r0);
}

static void test_errors(la_dist d) {
  const int n = 70, dk = 3;
  double *q = calloc((size_t)n * dk, sizeof(double)), *k = calloc((size_t)n * dk, sizeof(double));
  double sv[70], shift = 0;
  char err[512];
  la_status st = why(la_floor_singular_values(d, 0, 1, dk, 1.0, q, k, sv, &shift), err, sizeof err);
  check_agreed(st, err, LA_ERR_ARG, "n >= 1", "n = 0");
  q[(size_t)(n - 3) * dk + 1] = NAN;
  st = why(la_floor_singular_values(d, n, 1, dk, 1.0, q, k, sv, &shift), err, sizeof err);
  check_agreed(st, err, LA_ERR_NONFINITE, "query 67", "NaN in q row 67");
  q[(size_t)(n - 3) * dk + 1] = 0;
  for (int i = 0; i < n * dk; i++) q[i] = k[i] = 1.0;
  st = why(la_floor_singular_values(d, n, 1, dk, 1e308, q, k, sv, &shift), err, sizeof err);
  check_agreed(st, err, LA_ERR_NONFINITE, "not finite", "scale 1e308");
  /* n = 46341 P: some rank's local part is at least n^2 / P = 46341^2 P > 2^31 elements on
   * any grid; refused before q and k are read (they are too short on purpose) */
  st = why(la_floor_singular_values(d, (int64_t)46341 * SIZE, 1, dk, 1.0, q, k, sv, &shift), err,
           sizeof err);
  check_agreed(st, err, LA_ERR_UNSUPPORTED, "32-bit", "n = 46341 P");
  /* after the failures, a good call still works */
  for (int i = 0; i < n * dk; i++) { q[i] = 0.01 * (i % 7); k[i] = 0.02 * (i % 5); }
  st = why(la_floor_singular_values(d, n, 1, dk, 1.0, q, k, sv, &shift), err, sizeof err);
  CHECK(st == LA_OK && sv[0] > 0, "a good call after the failures: %s (%s)", la_status_string(st), err);
  free(q);
  free(k);
}

/* --expect-nomem, run with LINATTN_FAIL_ALLOC=N (core/la_alloc.h) on one rank: that rank's
 * Nth allocation (la_dist_create makes the 1st, the floor the 2nd to 8th) fails, every rank
 * returns LA_ERR_NOMEM with the same reason, and the next call succeeds. */
static void nomem_mode(la_dist d) {
  const int n = 200, H = 2, dk = 16;
  rng_state = 5;
  double *q = malloc(sizeof(double) * n * H * dk), *k = malloc(sizeof(double) * n * H * dk);
  for (int i = 0; i < n * H * dk; i++) { q[i] = nrand(); k[i] = nrand(); }
  double *sv = malloc(sizeof(double) * n * H), shift;
  char err[512];
  la_status st = why(la_floor_singular_values(d, n, H, dk, 0.25, q, k, sv, &shift), err, sizeof err);
  check_agreed(st, err, LA_ERR_NOMEM, "out of memory", "injected allocation failure");
  st = why(la_floor_singular_values(d, n, H, dk, 0.25, q, k, sv, &shift), err, sizeof err);
  CHECK(st == LA_OK && sv[0] > 0 && sv[n] > 0, "the call after the failure: %s (%s)",
        la_status_string(st), err);
  free(q); free(k); free(sv);
}

static int time_mode(la_dist d, const char *list) {
  if (RANK == 0)
    printf("OpenBLAS core %s, OPENBLAS_NUM_THREADS=%s, %d ranks\n", openblas_get_corename(),
           getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "(unset)", SIZE);
  for (const char *p = list; p && *p;) {
    const int n = atoi(p), H = 1, dk = 64;
    rng_state = 7;
    double *q = malloc(sizeof(double) * n * dk), *k = malloc(sizeof(double) * n * dk);
    for (int i = 0; i < n * dk; i++) { q[i] = nrand(); k[i] = nrand(); }
    double *sv = malloc(sizeof(double) * n), shift;
    char err[512];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    la_status st = why(la_floor_singular_values(d, n, H, dk, 0.125, q, k, sv, &shift), err, sizeof err);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (RANK == 0) {
      double *A = malloc(sizeof(double) * n * n), *s = malloc(sizeof(double) * n);
      ref_matrix(n, H, dk, 0.125, q, k, shift, 0, A);
      double t1 = MPI_Wtime();
      int info = ref_sv(n, A, s);
      double tl = MPI_Wtime() - t1, e = 0;
      for (int i = 0; i < n; i++) e = worse(e, fabs(s[i] - sv[i]) / s[0]);
      printf("n = %d: la_floor_singular_values %.2f s (%s), LAPACKE_dgesvd %.2f s (info %d), "
             "max |diff| / sv_0 %.1e, floor(r = 64) %.3e\n", n, tmax, la_status_string(st), tl,
             info, e, la_floor_rel_err(sv, 1, n, 64));
      free(A);
      free(s);
    }
    free(q); free(k); free(sv);
    p = strchr(p, ',');
    if (p) p++;
  }
  return 0;
}

static const fcase cases[] = {
    {200, 1, 16, 0.25, 1.0},  /* n not a multiple of the block size 64 */
    {3, 2, 4, 0.5, 1.0},      /* n smaller than the grid: all on process (0, 0), the rest empty */
    {1, 1, 2, 1.0, 1.0},      /* one entry */
    {130, 2, 8, 0.35, 0.3},   /* H = 2, head 1's scores smaller: c is head 0's */
    {256, 1, 64, 0.125, 1.0}, /* whole blocks, dk = 64 */
    {97, 3, 5, 2.0, 1.0},     /* sharp scores: a few entries dominate, the floor falls fast */
};

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &RANK);
  MPI_Comm_size(MPI_COMM_WORLD, &SIZE);
  char tag[32];
  snprintf(tag, sizeof tag, "[rank %d/%d] ", RANK, SIZE);
  check_tag = tag;
  la_dist d = NULL;
  if (la_dist_create(MPI_COMM_WORLD, &d) != LA_OK) MPI_Abort(MPI_COMM_WORLD, 1);
  if (argc == 3 && strcmp(argv[1], "--time") == 0) {
    time_mode(d, argv[2]);
    la_dist_destroy(&d);
    MPI_Finalize();
    return 0;
  }
  double t0 = MPI_Wtime();
  const int nomem = argc == 2 && strcmp(argv[1], "--expect-nomem") == 0;
  if (nomem) {
    nomem_mode(d);
  } else {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(d, cases[i], 1000 + i);
    test_errors(d);
  }
  la_dist_destroy(&d);
  int counts[2] = {nfail, npass}, maxc[2], sumc[2];
  double worst[3] = {worst_sv, worst_floor, worst_ey}, gworst[3];
  MPI_Allreduce(counts, maxc, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(counts, sumc, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(worst, gworst, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (RANK == 0 && !nomem) {
    printf("floor on %d ranks (%.1f s): max |sv - sv_ref| / sv_0 %.2e (tolerance %.0e), max "
           "floor error %.2e, truncated SVD vs floor %.2e (tolerance %.0e)\n", SIZE,
           MPI_Wtime() - t0, gworst[0], TOL_SV, gworst[1], gworst[2], TOL_EY);
  }
  if (RANK == 0)
    printf("%d passed, %d failed (summed over ranks; worst rank %d failed)\n", sumc[1], sumc[0],
           maxc[0]);
  MPI_Finalize();
  return maxc[0] != 0;
}
