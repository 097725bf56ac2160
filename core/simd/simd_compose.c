/* The composed chunk products of every kernel table (simd_compose.h; docs/design.md §5.5
 * "Composed products", §4.2, §4.4). Built without ISA flags: the arithmetic is all in the
 * table's primitives; this file only orders them and copies, zeroes or fills (no float
 * operation of its own), so a table's results are bitwise those of its primitives.
 * The backward's products (§4.4), with the gradient coefficients ab = [a | b]:
 *   replay  dphi_q = ab (S|z)^T + tril(ab [V|1]^T) Phi_k                (la_simd_bwd_dq)
 *   reverse dphi_k = [V|1] dS'^T + triu([V|1] ab^T) Phi_q,
 *           dv     = Phi_k dS + triu(Phi_k Phi_q^T) a,   tmp = Phi_q^T ab  (la_simd_bwd_reverse)
 * where the upper-triangular factors are the transposes of the lower ones, read in place with
 * the gemm's tri = 3: each intra-piece product computes only the 6-row tiles that meet the
 * triangle, as the forward's chunk does. */
#include "simd_compose.h"

#include <string.h>

void la_simd_zero_tile_upper(int len, float *A, ptrdiff_t lda) {
  for (int i = 0; i < len; i++) {
    float *ai = A + (ptrdiff_t)i * lda;
    const int edge = (i / 6) * 6 + 6 < len ? (i / 6) * 6 + 6 : len;
    for (int j = i + 1; j < edge; j++) ai[j] = 0;
  }
}

/* zf = column dv of sf (r x (dv+1)), made contiguous for den_column. */
static void z_column(int r, int dv, const float *sf, float *zf) {
  for (int k = 0; k < r; k++) zf[k] = sf[(ptrdiff_t)k * (dv + 1) + dv];
}

void la_simd_causal_chunk(const la_simd *s, int len, int r, int dv, const float *phiq,
                          const float *phik, const float *V, ptrdiff_t ldv, const float *sf,
                          float *o, float *tmp, float *kT, float *A, float *zf, int C) {
  const int dv1 = dv + 1;
  s->transpose(len, r, phik, r, kT, C);
  /* A = tril(Phi_q Phi_k^T): row tile i0 needs columns j < i0 + 6 only */
  s->gemm(len, len, r, phiq, r, 1, kT, C, A, C, 0, 2);
  la_simd_zero_tile_upper(len, A, C);
  if (sf) {
    s->gemm(len, dv, r, phiq, r, 1, sf, dv1, o, dv1, 0, 0);
    z_column(r, dv, sf, zf);
  }
  /* den = sum_{j <= i} A_ij + phiq_i . z */
  s->den_column(len, A, C, phiq, r, sf ? zf : NULL, o + dv, dv1);
  s->gemm(len, dv, len, A, C, 1, V, ldv, o, dv1, sf != NULL, 1);
  la_simd_key_summary(s, len, r, dv, phik, V, ldv, tmp);
}

/* The GEMM reads Phi_k^T in place (A(i, k) = phik[k r + i]: a tile's broadcasts are adjacent
 * floats), no transpose; z = the column sums of phik, in k order. */
void la_simd_key_summary(const la_simd *s, int len, int r, int dv, const float *phik,
                         const float *V, ptrdiff_t ldv, float *tmp) {
  const int dv1 = dv + 1;
  s->gemm(r, dv, len, phik, 1, r, V, ldv, tmp, dv1, 0, 0);
  s->colsum(len, r, phik, NULL, 0, tmp + dv, dv1);
}

void la_simd_query_apply(const la_simd *s, int len, int r, int dv, const float *phiq,
                         const float *sf, float *o, float *zf) {
  const int dv1 = dv + 1;
  s->gemm(len, dv, r, phiq, r, 1, sf, dv1, o, dv1, 0, 0);
  z_column(r, dv, sf, zf);
  s->den_column(len, NULL, 0, phiq, r, zf, o + dv, dv1); /* den = phiq_i . z */
}

void la_simd_bwd_query_sum(const la_simd *s, int len, int r, int dv, const float *phiq,
                           const float *ab, float *tmp) {
  const int dv1 = dv + 1;
  s->gemm(r, dv, len, phiq, 1, r, ab, dv1, tmp, dv1, 0, 0);
  s->colsum(len, r, phiq, ab + dv, dv1, tmp + dv, dv1); /* the b column: Phi_q^T b */
}

void la_simd_bwd_dq(const la_simd *s, int len, int r, int dv, const float *ab, const float *sf,
                    const float *phik, const float *V, ptrdiff_t ldv, float *dphi, float *A,
                    float *tb, int C, int causal) {
  const int dv1 = dv + 1;
  if (sf) { /* ab (S|z)^T: tb = (S|z)^T, (dv+1) x r */
    s->transpose(r, dv1, sf, dv1, tb, r);
    s->gemm(len, r, dv1, ab, dv1, 1, tb, r, dphi, r, 0, 0);
  } else {
    memset(dphi, 0, sizeof(float) * (size_t)len * (size_t)r);
  }
  if (!causal) return;
  /* T = tril(ab [V|1]^T): tb = [V|1]^T, (dv+1) x C */
  s->transpose(len, dv, V, ldv, tb, C);
  for (int j = 0; j < len; j++) tb[(ptrdiff_t)dv * C + j] = 1.0f;
  s->gemm(len, len, dv1, ab, dv1, 1, tb, C, A, C, 0, 2);
  la_simd_zero_tile_upper(len, A, C);
  s->gemm(len, r, len, A, C, 1, phik, r, dphi, r, 1, 1);
}

void la_simd_bwd_reverse(const la_simd *s, int len, int r, int dv, const float *ab,
                         const float *phiq, const float *phik, const float *vp, const float *sf,
                         float *dphik, float *dvo, ptrdiff_t lddv, float *tmp, float *A,
                         float *kT, float *tb, int C, int causal) {
  const int dv1 = dv + 1;
  if (sf) { /* [V|1] dS'^T (tb = dS'^T) and Phi_k dS */
    s->transpose(r, dv1, sf, dv1, tb, r);
    s->gemm(len, r, dv1, vp, dv1, 1, tb, r, dphik, r, 0, 0);
    s->gemm(len, dv, r, phik, r, 1, sf, dv1, dvo, lddv, 0, 0);
  } else {
    memset(dphik, 0, sizeof(float) * (size_t)len * (size_t)r);
    for (int j = 0; j < len; j++) memset(dvo + (ptrdiff_t)j * lddv, 0, sizeof(float) * (size_t)dv);
  }
  if (!causal) return;
  /* T = tril(ab [V|1]^T); dphi_k[j] += sum_{i >= j} T[i][j] phiq_i (T^T read in place, tri 3) */
  s->transpose(len, dv1, vp, dv1, tb, C);
  s->gemm(len, len, dv1, ab, dv1, 1, tb, C, A, C, 0, 2);
  la_simd_zero_tile_upper(len, A, C);
  s->gemm(len, r, len, A, 1, C, phiq, r, dphik, r, 1, 3);
  /* P = tril(Phi_q Phi_k^T); dv[j] += sum_{i >= j} P[i][j] a_i */
  s->transpose(len, r, phik, r, kT, C);
  s->gemm(len, len, r, phiq, r, 1, kT, C, A, C, 0, 2);
  la_simd_zero_tile_upper(len, A, C);
  s->gemm(len, dv, len, A, 1, C, ab, dv1, dvo, lddv, 1, 3);
  la_simd_bwd_query_sum(s, len, r, dv, phiq, ab, tmp);
}
