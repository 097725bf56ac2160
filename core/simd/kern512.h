/* AVX-512 float32 chunk kernels (kern512.c), selected at run time. docs/design.md §4.2; the
 * chunk products composed of these primitives are simd_compose.c's (§5.5). */
#ifndef LINATTN_KERN512_H
#define LINATTN_KERN512_H
#include <stddef.h>
#include <stdint.h>
#include "simd.h"

/* simd_cpu.c (compiled without AVX-512, so the check runs anywhere):
 * la_k512_available: this build has the kernels and the CPU reports AVX-512F;
 * la_k512_enabled: the process default (auto, or LINATTN_KERNELS) is the AVX-512 table. */
int la_k512_available(void);
int la_k512_enabled(void);
/* C[M x N] = (acc ? C : 0) + A B, row-major B and C; A(i, k) = A[i*ars + k*acs].
 * tri = 1: row i only reads A(i, k) for k < (its 6-row tile's end) -- A lower triangular;
 * tri = 2: only columns j < (its 6-row tile's end) are written -- for a lower result;
 * tri = 3: row i only reads A(i, k) for k >= (its 6-row tile's start) -- A upper triangular. */
void la_k512_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri);
void la_k512_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd);
/* The den column of a chunk, 16 rows at a time (simd.h's den_column). */
void la_k512_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo);
/* Weighted column sums (simd.h's colsum), 16 features per register. */
void la_k512_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo);
/* favor+ / favor+orf (hyp = 0) and favor-hyp (hyp = 1) rows after the projection GEMM
 * (featmap_impl.h has the scalar form). */
void la_k512_favor_post(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                        int r, double s, double *a, int hyp, const la_simd_pf *pf);
/* The same in float64 (the engine's f64 path and the eval's references of a map). */
void la_k512_favor_post_f64(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                            int r, double s, double *a, int hyp, const la_simd_pf *pf);
/* add_to_f64: dst[i] += src[i]; to_f32: dst[i] = (float)src[i]; scale_row: y[j] = (float)(o[j]
 * * f) in double. add_round: dst[i] += src[i], then f[i] = (float)(base[i] + dst[i]) (base
 * NULL: (float)dst[i]), one pass (the causal state update and its working copy, §4.2). */
void la_k512_add_to_f64(size_t n, double *dst, const float *src);
void la_k512_add_round(size_t n, double *dst, const float *src, const double *base, float *f);
void la_k512_to_f32(size_t n, const double *src, float *dst);
/* dst = (float)(a + b), the sum in float64 rounded once (--reproducible's base, §4.7). */
void la_k512_sum_to_f32(size_t n, const double *a, const double *b, float *dst);
void la_k512_scale_row(int n, const float *o, double f, float *y);
/* Per-feature gates folded into a chunk's rows (simd.h's gate_fold): q[i,f] *= qs[i] E[i,f],
 * k[i,f] *= ks[i] / E[i,f], in float64 rounded once; the generic loop's operations, so its bits. */
void la_k512_gate_fold(int len, int r, float *q, float *k, const double *E, const double *qs,
                       const double *ks);
/* x[i] *= f in float32 (the keys' rescaling by the stabilizer, §2.2). */
void la_k512_mul_f32(size_t n, float *x, float f);
/* The common case of finalize_rows (docs/design.md §1.1 "Statistics"), len <= 64 rows of
 * o = [num_s | den_s] (ld dv + 1) with log-scales lsc: when every row has lsc = 0 and den_s a
 * positive normal float64, y_i = (float)(num_s * (1 / den_s)) in float64 (row i at y + i ldy),
 * bin[i] = den_bin16(den_s) (t16: its table), *mn / *mx the smallest and largest den_s, and 1
 * is returned. Otherwise 0, and nothing is written. */
int la_k512_finalize_plain(int len, int dv, const float *o, const double *lsc, float *y,
                           ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                           double *mx);
/* The same for float64 rows: y_i = num_s * (1 / den_s), one rounding. */
int la_k512_finalize_plain_f64(int len, int dv, const double *o, const double *lsc, double *y,
                               ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                               double *mx);
/* sum_j a[j] b[j] with float64 products and sums (8 lanes, then the tail). */
double la_k512_dot_f64(int n, const float *a, const float *b);
/* y[i] = e^{x[i]}, x[i] <= 0 (exp8_nonpos: 0 below -708.39) */
void la_k512_exp_f64(size_t n, const double *x, double *y);
/* Prefetch rows of `bytes` at a stride of ld_bytes: the next chunk's inputs. */
void la_k512_prefetch(const void *base, int rows, ptrdiff_t ld_bytes, int bytes);
void la_k512_elu1(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
                  const la_simd_pf *pf);
/* taylor2's features (docs/design.md §2) of n rows of dk: [1, x~ = rs x, per j: x~_j (x~_j /
 * sqrt 2), x~_j x~_l (l > j)], row stride r = 1 + dk + dk(dk+1)/2; the same roundings as the
 * generic form (maps_impl.h), so the same bits. */
void la_k512_taylor2(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs);
/* elu(x) + 1 in float64 (x + 1 for x > 0, e^x otherwise; a NaN stays NaN), rows of dk;
 * pf as for la_k512_elu1, or NULL: each call prefetches its own rows 8 ahead. */
void la_k512_elu1_f64(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                      const la_simd_pf *pf);
#endif
