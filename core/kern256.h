/* AVX2 + FMA float32 chunk kernels (kern256.c, kern256_bwd.c): the GEMM and chunk products of
 * the la_simd table (simd.h) for CPUs without AVX-512, docs/design.md §4.2, §4.4, §5.5
 * "Kernels per instruction set". Every function computes what its la_k512_ namesake
 * (kern512.h) documents, with the same signature; the maps and elementwise entries of the
 * table are in kern256_maps.c. The register tile is 6 rows x 16 columns (two ymm), so "tile"
 * below means the same 6-row tile as kern512's, and tri has the same meaning. */
#ifndef LINATTN_KERN256_H
#define LINATTN_KERN256_H
#include <stddef.h>
#include "simd.h"

/* kern256_cpu.c (compiled without AVX flags): this build has the kernels (x86_64) and the CPU
 * reports AVX2 and FMA. Nothing below may be called when it returns 0. */
int la_k256_available(void);
/* C[M x N] = (acc ? C : 0) + A B, row-major B and C; A(i, k) = A[i*ars + k*acs].
 * tri = 1: row i only reads A(i, k) for k < min(its 6-row tile's end, K) -- A lower triangular;
 * tri = 2: only columns j < (its 6-row tile's end) are written -- for a lower result;
 * tri = 3: row i only reads A(i, k) for k >= (its 6-row tile's start) -- A upper triangular.
 * (Row tiles start at rows 0, 6, 12, ...; the last one may be shorter.) */
void la_k256_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri);
/* dst[j][i] = src[i][j], i < rows, j < cols. */
void la_k256_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd);
/* Zero A[i][j], i < j, inside each diagonal 6-row tile of a len x len product: what a tri = 2
 * product wrote past the lower triangle. */
void la_k256_zero_tile_upper(int len, float *A, ptrdiff_t lda);
/* la_k512_causal_chunk: o = [Phi_q Sf + tril(Phi_q Phi_k^T) V | Phi_q zf + tril(..) 1]
 * (len x (dv+1)), tmp = [Phi_k^T V | Phi_k^T 1]; sf NULL: a zero state. Scratch: kT (r x C),
 * A (C x C), zf (r). len <= C. */
void la_k256_causal_chunk(int len, int r, int dv, const float *phiq, const float *phik,
                          const float *V, ptrdiff_t ldv, const float *sf, float *o, float *tmp,
                          float *kT, float *A, float *zf, int C);
/* tmp = [Phi_k^T V | Phi_k^T 1] (r x (dv+1)) from phik (len x r) and V in place (ld ldv). */
void la_k256_key_summary(int len, int r, int dv, const float *phik, const float *V,
                         ptrdiff_t ldv, float *tmp);
/* Bidirectional rows: o_i = [phiq_i Sf | phiq_i zf]; zf (r) scratch. */
void la_k256_query_apply(int len, int r, int dv, const float *phiq, const float *sf, float *o,
                         float *zf);
/* The backward's piece products (docs/design.md §4.4), as la_k512_bwd_*: ab = [a | b]
 * (len x (dv+1)), sf = (S|z) or dS' (r x (dv+1), NULL: zero). Scratch: A (C x C), tb
 * ((dv+1) x max(r, C)), kT (r x C). causal = 0: no intra-piece terms, tmp untouched.
 * bwd_dq:        dphi = ab sf^T + tril(ab [V|1]^T) phik                     (len x r)
 * bwd_reverse:   dphik = vp sf^T + triu(vp ab^T) phiq (len x r), dvo = phik sf[:, :dv]
 *                + triu(phik phiq^T) a (ld lddv), tmp = phiq^T ab; vp = [V|1] (ld dv+1)
 * bwd_query_sum: tmp = phiq^T ab                                            (r x (dv+1)) */
void la_k256_bwd_dq(int len, int r, int dv, const float *ab, const float *sf, const float *phik,
                    const float *V, ptrdiff_t ldv, float *dphi, float *A, float *tb, int C,
                    int causal);
void la_k256_bwd_reverse(int len, int r, int dv, const float *ab, const float *phiq,
                         const float *phik, const float *vp, const float *sf, float *dphik,
                         float *dvo, ptrdiff_t lddv, float *tmp, float *A, float *kT, float *tb,
                         int C, int causal);
void la_k256_bwd_query_sum(int len, int r, int dv, const float *phiq, const float *ab,
                           float *tmp);
#endif
