/* The rank-r floor of the `linattn eval` error study (docs/design.md §4.6 "The rank-r floor"):
 * the singular values of each head's attention matrix A_h = exp(scale Q_h K_h^T - c) from
 * ScaLAPACK pdgesvd, and the relative Frobenius error of the best rank-r matrix (Eckart-Young),
 * which no feature map of width r can beat. Private to dist/: it takes MPI handles. */
#ifndef LINATTN_FLOOR_H
#define LINATTN_FLOOR_H
#include <stddef.h>
#include <stdint.h>
#include "linattn/dist.h"

/* Block size of the block-cyclic distribution of A_h (rows and columns alike): ScaLAPACK's
 * usual 64, large enough for pdgebrd's level-3 updates, small enough for the load balance. */
#define LA_FLOOR_NB 64

/* Collective on d. Singular values (descending) of A_h = exp(scale Q_h K_h^T - c) for every head,
 * from ScaLAPACK pdgesvd (values only) on a BLACS process grid over all ranks of d.
 * q, k: the whole sequence on every rank, float64 [n, H, dk]. sv: [H, n] on every rank.
 * *shift receives c. Errors agreed across ranks (la_dist_agree), one-line reason recorded (la_error).
 *
 * c = max over every head h and entry (i, j) of scale q_i.k_j, so every entry of A_h is in
 * [0, 1] (underflow to 0 is allowed); the singular values of exp(S) are those of A_h times
 * e^c, and relative errors do not depend on c.
 * Grid: pr x pc = P ranks, pr the largest divisor of P with pr^2 <= P (1 x P for a prime P),
 * blocks of LA_FLOOR_NB. Each rank fills only its block-cyclic part of A_h, from q and k.
 * Memory per rank: the local part mp x nq of A_h, about n^2 / P doubles (at most
 * ceil(n / (64 pr)) 64 x ceil(n / (64 pc)) 64), plus pdgesvd's workspace as its query
 * returns it, 1 + 6 n + max(64 (mp + nq + 1) + nq, 4 n) doubles (4.2 MiB beside A's 128 MiB at
 * n = 4096 on one rank), plus (mp + nq) dk doubles of packed q and k rows and n for S.
 * Cost: O(n^3) per head (pdgebrd's bidiagonalization, 8/3 n^3 flops): about
 * 2.7e-10 n^3 / P seconds on the 2-core AVX-512 machine of §4.6; the BLAS inside pdgesvd
 * runs on OPENBLAS_NUM_THREADS threads.
 * Errors: LA_ERR_ARG (n < 1, heads < 1, dk < 1, scale not finite, NULL pointers);
 * LA_ERR_UNSUPPORTED when a rank's local part would reach 2^31 elements, where ScaLAPACK's
 * 32-bit local indices overflow (n > 46340 on one rank; about 46340 sqrt(P) on P ranks);
 * LA_ERR_NONFINITE when some scale q.k is not finite; LA_ERR_NOMEM; LA_ERR_INTERNAL when
 * pdgesvd reports an error (a nonzero info: no convergence, or values that differ across the
 * grid), with the info code in the reason; LA_ERR_MPI. */
la_status la_floor_singular_values(la_dist d, int64_t n, int heads, int dk, double scale,
                                   const double *q, const double *k, double *sv, double *shift);

/* Collective on d. As la_floor_singular_values, and with rvec > 0 also the leading rvec
 * singular triplets of every head on every rank: u [H][n][rvec] = U_r diag(sigma_r) and vv
 * [H][n][rvec] = V_r (columns l < rvec <= n), for the best rank-r matrices u_r vv_r^T (r <=
 * rvec) of weights_tv_floor (docs/design.md §8.2). The vectors come from LAPACK dgesdd on the
 * whole n x n matrix of head h on rank h mod P (3 n^2 doubles there, ~20 n^3 flops), then a
 * broadcast. heads n rvec must stay below 2^31. */
la_status la_floor_svd(la_dist d, int64_t n, int heads, int dk, double scale, const double *q,
                       const double *k, int rvec, double *sv, double *u, double *vv,
                       double *shift);

/* Not Collective: the floor over all heads, sqrt(sum_h sum_{i>=r} sv[h,i]^2 / sum_h sum_i sv[h,i]^2)
 * (0-based i), i.e. the relative Frobenius error of the best rank-r matrix per head, over all heads.
 * r <= 0 gives 1, r >= n gives 0; all-zero sv gives 0. */
double la_floor_rel_err(const double *sv, int heads, int64_t n, int64_t r);

#endif
