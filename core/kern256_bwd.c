/* AVX2 + FMA float32 kernels of the backward (docs/design.md §4.4): the products of
 * la_k512_bwd_* (kern512_bwd.c has the derivation) on kern256.c's GEMM, whose 6-row tiles make
 * the tri = 2 / tri = 3 triangles the same as there. Accuracy: float32 FMA chains over k,
 * within the gamma_K bounds of tests/test_kern256.c. Domain: finite operands. */
#include "kern256.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* out[i * ldo] = sum_k phi[k r + i] w[k ldw] for i < r, k < len, in k order (8 features per
 * register): the b column of Phi_q^T [a | b]. */
static void weighted_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw,
                            float *out, ptrdiff_t ldo) {
  static const int32_t tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i0 = 0; i0 < r; i0 += 8) {
    __m256 z = _mm256_setzero_ps();
    if (r - i0 >= 8)
      for (int k = 0; k < len; k++)
        z = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (ptrdiff_t)k * ldw),
                            _mm256_loadu_ps(phi + (ptrdiff_t)k * r + i0), z);
    else {
      const __m256i mk = _mm256_loadu_si256((const __m256i *)(tab + 8 - (r - i0)));
      for (int k = 0; k < len; k++)
        z = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (ptrdiff_t)k * ldw),
                            _mm256_maskload_ps(phi + (ptrdiff_t)k * r + i0, mk), z);
    }
    float t[8];
    _mm256_storeu_ps(t, z);
    for (int u = 0; u < 8 && i0 + u < r; u++) out[(ptrdiff_t)(i0 + u) * ldo] = t[u];
  }
}

void la_k256_bwd_query_sum(int len, int r, int dv, const float *phiq, const float *ab,
                           float *tmp) {
  const int dv1 = dv + 1;
  la_k256_gemm(r, dv, len, phiq, 1, r, ab, dv1, tmp, dv1, 0, 0);
  weighted_colsum(len, r, phiq, ab + dv, dv1, tmp + dv, dv1);
}

void la_k256_bwd_dq(int len, int r, int dv, const float *ab, const float *sf, const float *phik,
                    const float *V, ptrdiff_t ldv, float *dphi, float *A, float *tb, int C,
                    int causal) {
  const int dv1 = dv + 1;
  if (sf) { /* ab (S|z)^T: tb = (S|z)^T, (dv+1) x r */
    la_k256_transpose(r, dv1, sf, dv1, tb, r);
    la_k256_gemm(len, r, dv1, ab, dv1, 1, tb, r, dphi, r, 0, 0);
  } else {
    memset(dphi, 0, sizeof(float) * (size_t)len * (size_t)r);
  }
  if (!causal) return;
  /* T = tril(ab [V|1]^T): tb = [V|1]^T, (dv+1) x C */
  la_k256_transpose(len, dv, V, ldv, tb, C);
  for (int j = 0; j < len; j++) tb[(ptrdiff_t)dv * C + j] = 1.0f;
  la_k256_gemm(len, len, dv1, ab, dv1, 1, tb, C, A, C, 0, 2);
  la_k256_zero_tile_upper(len, A, C);
  la_k256_gemm(len, r, len, A, C, 1, phik, r, dphi, r, 1, 1);
}

void la_k256_bwd_reverse(int len, int r, int dv, const float *ab, const float *phiq,
                         const float *phik, const float *vp, const float *sf, float *dphik,
                         float *dvo, ptrdiff_t lddv, float *tmp, float *A, float *kT, float *tb,
                         int C, int causal) {
  const int dv1 = dv + 1;
  if (sf) { /* [V|1] dS'^T (tb = dS'^T) and Phi_k dS */
    la_k256_transpose(r, dv1, sf, dv1, tb, r);
    la_k256_gemm(len, r, dv1, vp, dv1, 1, tb, r, dphik, r, 0, 0);
    la_k256_gemm(len, dv, r, phik, r, 1, sf, dv1, dvo, lddv, 0, 0);
  } else {
    memset(dphik, 0, sizeof(float) * (size_t)len * (size_t)r);
    for (int j = 0; j < len; j++) memset(dvo + (ptrdiff_t)j * lddv, 0, sizeof(float) * (size_t)dv);
  }
  if (!causal) return;
  /* T = tril(ab [V|1]^T); dphi_k[j] += sum_{i >= j} T[i][j] phiq_i (T^T read in place, tri 3) */
  la_k256_transpose(len, dv1, vp, dv1, tb, C);
  la_k256_gemm(len, len, dv1, ab, dv1, 1, tb, C, A, C, 0, 2);
  la_k256_zero_tile_upper(len, A, C);
  la_k256_gemm(len, r, len, A, 1, C, phiq, r, dphik, r, 1, 3);
  /* P = tril(Phi_q Phi_k^T); dv[j] += sum_{i >= j} P[i][j] a_i */
  la_k256_transpose(len, r, phik, r, kT, C);
  la_k256_gemm(len, len, r, phiq, r, 1, kT, C, A, C, 0, 2);
  la_k256_zero_tile_upper(len, A, C);
  la_k256_gemm(len, dv, len, A, 1, C, ab, dv1, dvo, lddv, 1, 3);
  la_k256_bwd_query_sum(len, r, dv, phiq, ab, tmp);
}

#else /* no AVX2 + FMA at compile time: never selected (la_k256_available returns 0) */
void la_k256_bwd_query_sum(int len, int r, int dv, const float *phiq, const float *ab,
                           float *tmp) {
  (void)len; (void)r; (void)dv; (void)phiq; (void)ab; (void)tmp;
}
void la_k256_bwd_dq(int len, int r, int dv, const float *ab, const float *sf, const float *phik,
                    const float *V, ptrdiff_t ldv, float *dphi, float *A, float *tb, int C,
                    int causal) {
  (void)len; (void)r; (void)dv; (void)ab; (void)sf; (void)phik; (void)V; (void)ldv;
  (void)dphi; (void)A; (void)tb; (void)C; (void)causal;
}
void la_k256_bwd_reverse(int len, int r, int dv, const float *ab, const float *phiq,
                         const float *phik, const float *vp, const float *sf, float *dphik,
                         float *dvo, ptrdiff_t lddv, float *tmp, float *A, float *kT, float *tb,
                         int C, int causal) {
  (void)len; (void)r; (void)dv; (void)ab; (void)phiq; (void)phik; (void)vp; (void)sf;
  (void)dphik; (void)dvo; (void)lddv; (void)tmp; (void)A; (void)kT; (void)tb; (void)C;
  (void)causal;
}
#endif
