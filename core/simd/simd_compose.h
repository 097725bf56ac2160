/* The chunk products that are only a composition of a kernel table's primitives (gemm,
 * transpose, den_column, colsum; simd.h), written once for every table: docs/design.md §5.5
 * "Composed products". Each takes the table whose primitives it calls; every table then gives
 * the same composition, and its bits are those of its own primitives. Conventions as in
 * simd.h: row-major float32, sf = [S | z] r x (dv+1) (NULL: a zero state), tri as its gemm. */
#ifndef LINATTN_SIMD_COMPOSE_H
#define LINATTN_SIMD_COMPOSE_H
#include <stddef.h>
#include "simd.h"

/* Zero A[i][j], i < j, inside each diagonal 6-row tile of a len x len product: what a tri = 2
 * product wrote past the lower triangle (columns past the tile's end are not written). */
void la_simd_zero_tile_upper(int len, float *A, ptrdiff_t lda);
/* Causal chunk (§4.2), rows i < len:
 *   o_i = [ phiq_i Sf + sum_{j<=i} (phiq_i . phik_j) v_j  |  phiq_i zf + sum_{j<=i} phiq_i . phik_j ]
 *   tmp = [ phik^T V | phik^T 1 ]   (the chunk's key summary, r x (dv+1))
 * Scratch: kT (r x C), A (C x C), zf (r). len <= C. */
void la_simd_causal_chunk(const la_simd *s, int len, int r, int dv, const float *phiq,
                          const float *phik, const float *V, ptrdiff_t ldv, const float *sf,
                          float *o, float *tmp, float *kT, float *A, float *zf, int C);
/* tmp = [Phi_k^T V | Phi_k^T 1] (r x (dv+1)) from phik (len x r) and V in place (ld ldv), for
 * the causal chunk and the keys pass alike (the same bits: --reproducible, §4.7). */
void la_simd_key_summary(const la_simd *s, int len, int r, int dv, const float *phik,
                         const float *V, ptrdiff_t ldv, float *tmp);
/* Bidirectional rows (§4): o_i = [phiq_i Sf | phiq_i zf]; zf (r) scratch. */
void la_simd_query_apply(const la_simd *s, int len, int r, int dv, const float *phiq,
                         const float *sf, float *o, float *zf);
/* The backward's piece products (§4.4); ab = [a | b] (len x (dv+1)), sf = (S|z) or dS'
 * (r x (dv+1), NULL: zero). Scratch: A (C x C), tb ((dv+1) x max(r, C)), kT (r x C).
 * causal = 0 (bidirectional): no intra-piece terms, tmp untouched.
 * bwd_dq:        dphi = ab sf^T + tril(ab [V|1]^T) phik                     (len x r)
 * bwd_reverse:   dphik = vp sf^T + triu(vp ab^T) phiq (len x r), dvo = phik sf[:, :dv]
 *                + triu(phik phiq^T) a (ld lddv), tmp = phiq^T ab; vp = [V|1] (ld dv+1)
 * bwd_query_sum: tmp = phiq^T ab                                            (r x (dv+1)) */
void la_simd_bwd_dq(const la_simd *s, int len, int r, int dv, const float *ab, const float *sf,
                    const float *phik, const float *V, ptrdiff_t ldv, float *dphi, float *A,
                    float *tb, int C, int causal);
void la_simd_bwd_reverse(const la_simd *s, int len, int r, int dv, const float *ab,
                         const float *phiq, const float *phik, const float *vp, const float *sf,
                         float *dphik, float *dvo, ptrdiff_t lddv, float *tmp, float *A,
                         float *kT, float *tb, int C, int causal);
void la_simd_bwd_query_sum(const la_simd *s, int len, int r, int dv, const float *phiq,
                           const float *ab, float *tmp);
#endif
