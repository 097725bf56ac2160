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

/* The kernel pass of `linattn eval` over one shard of keys (docs/design.md §8.2, §8.7), for
 * nq query rows at ascending global positions rows[] (q [nq, H, dk]) against the nk keys at
 * global positions j0.. (k [nk, H, dk], v [nk, H, dv]). Arrays [nmodes][nq][H] (and x dv):
 *   sm_max, sm_sum, sm_out: softmax's running max of S = s q.k over the keys row i reads, sum
 *     e^{S - max}, and sum e^{S - max} v (out_i = sm_out / sm_sum once combined);
 *   map_den, map_out: sum G, sum G v with G_ij = phi_s(q_i).phi(k_j) e^{-c_h} (khat_ij =
 *     G_ij e^{aq_i}; the quadratic form is map_out / map_den);
 *   tv: phase 2, sum_j |p_ij - w_ij| over the keys row i reads, p = e^{S - sm_max} / sm_sum,
 *     w = G / map_den (0 where map_den <= 0);
 *   aq [nq][H]: the query stabilizers; c [H]: the key stabilizer c_h = max a_k;
 *   ks: kernel_rel_err's sums over these rows and keys, no mask.
 * Phase 1 accumulates everything but tv (the sums combine across shards: max and rescale,
 * then add); phase 2 needs the combined sm_max, sm_sum, map_den and c and adds tv. Not
 * Collective, MPI-free. Domain: finite inputs, scale > 0. threads <= 0: the OpenMP default. */
typedef struct {
  int64_t nq;
  int heads, dv, nmodes;
  double *sm_max, *sm_sum, *sm_out, *map_den, *map_out, *tv, *aq, *c;
  la_kernel_sums ks;
} la_shard_sums;
la_status la_shard_sums_create(int64_t nq, int heads, int dv, int nmodes, la_shard_sums *ss);
void la_shard_sums_free(la_shard_sums *ss);
la_status la_shard_pass(const la_featmap fm, double scale, int phase, int64_t j0, int64_t nk,
                        const double *k, const double *v, const int64_t *rows, const double *q,
                        const la_mode *modes, la_shard_sums *ss, int threads);

/* weights_tv_floor's sum (docs/design.md §8.2): for nq query rows (rows[] global positions, q
 * [nq, H, dk]) against all n keys k [n, H, dk], per mode, the sum over (row, head) of
 * 0.5 sum_{j in A(i)} |p_ij - w_ij|, p softmax's weights and w the row-normalized A_r =
 * u_r vv_r^T (u = U diag(sigma), vv = V, [H][n][rvec]: their first r <= rvec columns); signed weights are taken
 * as they are, and a row whose A_r sums to <= 0 counts 1. Not Collective, MPI-free. */
la_status la_lowrank_tv(int64_t n, int heads, int dk, double scale, const double *k, int64_t nq,
                        const int64_t *rows, const double *q, int rvec, const double *u,
                        const double *vv, int r, int nmodes,
                        const la_mode *modes, double *tvsum, int threads);

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
