/* The error study's numerical pieces (docs/design.md §8, `linattn eval`): the quadratic form
 * of a feature map with its kernel error against exp(s q.k), and the bias test over seeds.
 * MPI-free, Not Collective, float64. Layout as everywhere: [rows, H, d], C order. */
#ifndef LINATTN_STUDY_H
#define LINATTN_STUDY_H
#include <stdint.h>
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Sums of the kernel error, scaled by e^{-2 shift} so that exp(s q.k) cannot overflow:
 *   err2 = sum (khat_ij - E_ij)^2 e^{-2 shift},  ref2 = sum E_ij^2 e^{-2 shift}
 * with khat_ij = phi(q_i).phi(k_j) and E_ij = exp(s q_i.k_j). kernel_rel_err =
 * sqrt(err2 / ref2), whatever the shift. The empty sum has shift = -inf. */
typedef struct {
  double shift, err2, ref2;
} la_kernel_sums;
void la_kernel_sums_init(la_kernel_sums *a);
/* a <- a + b, rescaled to the larger shift. */
void la_kernel_sums_merge(la_kernel_sums *a, const la_kernel_sums *b);

/* The quadratic form of the map fm, for nq query rows at global positions rows[] (ascending;
 * q [nq, H, dk]) against all n keys k [n, H, dk] and values v [n, H, dv]:
 *   quad_i = sum_{j in A(i)} khat_ij v_j / sum_{j in A(i)} khat_ij,  A(i) = all j, or j <= i
 * for each of the nmodes modes, into quad [nmodes][nq, H, dv] (NULL: skip), and the log of
 * the denominator into lden [nmodes][nq, H] (NULL: skip; -inf or NaN when it is not
 * positive). ks (NULL: skip) accumulates the kernel sums of these rows against every key, no
 * mask, every head. Tiles of 64 rows through dgemm; no n x n matrix is stored: per thread
 * 3 * 64 * n doubles, and n * r for the key features of one head. Domain: finite inputs; the
 * map's features are used as the engine uses them (phi = phi_s e^a, docs/design.md §2.2), so
 * a positive map gives khat > 0 up to underflow. threads <= 0: the OpenMP default. */
la_status la_quadform_rows(const la_featmap fm, double scale, int64_t n, int heads, int dk,
                           int dv, const double *k, const double *v, int64_t nq,
                           const int64_t *rows, const double *q, int nmodes,
                           const la_mode *modes, double *quad, double *lden,
                           la_kernel_sums *ks, int threads);

/* The bias test over S seeds (docs/design.md §8.3). Y_s = x_s - x_ref for S independent
 * seeds, A [S, S] their Gram matrix A_st = <Y_s, Y_t>. H0: E[Y_s] = 0 (no bias).
 * Statistic T = sum_{s != t} A_st, an unbiased estimate of S(S-1) |E Y|^2. The p-value is the
 * fraction of the 2^(S-1) sign patterns eps (eps_0 = +1) with T(eps) >= T, where
 * T(eps) = sum_{s != t} eps_s eps_t A_st: exact under H0 when the law of Y_s is symmetric
 * about 0; enumerated for S <= 21, else 2^14 patterns drawn from a fixed stream. With S
 * seeds the smallest p-value is 2^(1-S): below 6 seeds no level <= 0.05 can reject.
 * S outside [2, LA_SIGNFLIP_MAX_SEEDS] gives 1 (nothing can be detected). */
#define LA_SIGNFLIP_MAX_SEEDS 256
double la_signflip_pvalue(const double *A, int S);
/* From the same Gram matrix: |mean_s Y_s| and the part seed noise explains,
 * sqrt(tr(Sigma_hat) / S) with tr(Sigma_hat) = sum_s |Y_s - mean|^2 / (S - 1) (0 for S = 1). */
void la_gram_mean_noise(const double *A, int S, double *mean_norm, double *noise_norm);

#ifdef __cplusplus
}
#endif
#endif
