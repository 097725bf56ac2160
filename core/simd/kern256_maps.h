/* AVX2 + FMA forms of the maps' and the elementwise kernels (kern256_maps.c), for the "avx2"
 * kernel table (simd.h, docs/design.md §5.5 "Kernels per instruction set"). Each has the
 * signature of its la_simd entry and computes what the la_k512_ function of the same name
 * computes (kern512.h documents each; the differences are noted here). Nothing here runs
 * unless the CPU reports AVX2 and FMA; on a build for another architecture they are stubs
 * that are never selected. */
#ifndef LINATTN_KERN256_MAPS_H
#define LINATTN_KERN256_MAPS_H
#include <stddef.h>
#include <stdint.h>
#include "simd.h"

/* elu(x) + 1 (docs/design.md §2), n rows of dk (stride ld) into rows of r, 8 lanes; row i
 * also prefetches row i of the streams in pf (NULL: none). A NaN x gives 1, as the generic
 * elu1 and la_k512_elu1 (inputs are checked finite upstream). */
void la_k256_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf);
/* The same in float64, 4 lanes; a NaN x stays NaN (la_k512_elu1_f64); pf NULL: each row
 * prefetches the row 8 ahead. */
void la_k256_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf);
/* favor+ / favor+orf (hyp = 0) and favor-hyp (hyp = 1) rows after the projection, u =
 * phi[i, :m]: phi_i = m^-1/2 e^{u - max u} (hyp: (2m)^-1/2 [e^{u - max|u|}, e^{-u - max|u|}]),
 * a_i = max u (max|u|) - s |x|^2 / 2 with |x|^2 in float64. */
void la_k256_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf);
void la_k256_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf);
/* taylor2's features, the generic form's roundings (maps_impl.h), so its bits. */
void la_k256_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs);
/* dst[i] += src[i] in float64. */
void la_k256_add_to_f64(size_t n, double *dst, const float *src);
/* dst[i] += src[i], then f[i] = (float)(base[i] + dst[i]) (base NULL: (float)dst[i]). */
void la_k256_add_round(size_t n, double *dst, const float *src, const double *base, float *f);
void la_k256_to_f32(size_t n, const double *src, float *dst);
/* dst[i] = (float)(a[i] + b[i]), the sum in float64 rounded once. */
void la_k256_sum_to_f32(size_t n, const double *a, const double *b, float *dst);
/* y[j] = (float)((double)o[j] * f). */
void la_k256_scale_row(int n, const float *o, double f, float *y);
/* x[i] *= f in float32. */
void la_k256_mul_f32(size_t n, float *x, float f);
/* simd.h's gate_fold, 4 lanes (the generic loop's bits) */
void la_k256_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks);
/* sum_j a[j] b[j], float64 products and sums (8 lanes in two registers, then the tail). */
double la_k256_dot_f64(int n, const float *a, const float *b);
/* y[i] = e^{x[i]}, x[i] <= 0 (la_exp4d_nonpos: 0 below -708.39, 0.89 ulp) */
void la_k256_exp_f64(size_t n, const double *x, double *y);
/* finalize_rows' common case (docs/design.md §1.1 "Statistics"), len <= 64 rows of
 * o = [num_s | den_s]: when every row has lsc = 0 and den_s a positive normal float64,
 * y_i = (float)(num_s * (1 / den_s)), bin[i] = den_bin16(den_s) (t16: its table), *mn / *mx
 * the extremes of den_s, and 1; otherwise 0 and nothing written. */
int la_k256_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx);
int la_k256_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
                               ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                               double *mx);
/* Prefetch rows of `bytes` at a stride of ld_bytes (into L2). */
void la_k256_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes);
#endif
