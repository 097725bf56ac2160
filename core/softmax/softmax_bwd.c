/* Backward of the exact softmax reference (include/linattn/baseline.h, docs/design.md §4.6),
 * float64, for L = sum(out * G). Per (key tile, head) item and each query tile that reads
 * it, the tile is recomputed from the final forward state (m, l):
 *   S = s Q K^T,  P = e^{S - m} / l (0 where masked),  dP = G V^T,  dS = P (dP - D),
 *   dV += P^T G,  dK += s dS^T Q,  dQ += s dS K          (FlashAttention-2, Dao 2023)
 * Items own their rows of dK and dV; dQ goes to thread 0's caller array or to the private
 * copy of thread t > 0, summed in thread order at the end (deterministic for a fixed
 * thread count). Nothing nq x nk is stored. With the mask's log_decay, S gets the forward's
 * bias |i - j| ln gamma_h (a constant: dS and the products are unchanged; §8.1 "With decay"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "la_alloc.h"
#include "la_blas.h"
#include "linattn/baseline.h"
#include "softmax_internal.h"
#include "vexp.h"

enum { TQ = 128, TK = 128 };

typedef struct {
  const la_softmax_state *fwd;
  const double *D, *q, *g, *k, *v;
  const int64_t *lo, *hi; /* keys of each query row (la_sm_rows) */
  double *dk, *dv, scale;
  int H, dkd, dvd;
  int64_t k0, q0;        /* global positions of the key block and of query row 0 */
  const double *ld;      /* [H] ln gamma_h, or NULL: no decay */
} bw_args;

/* Rows r0..r0+bq-1 against keys gk..gk+bc-1 (global) of head h; dq is this thread's. */
static void tile(const bw_args *a, int h, int64_t r0, int bq, int64_t gk, int bc, double *S,
                 double *dP, double *dq) {
  const int H = a->H, dk = a->dkd, dv = a->dvd, ldk = H * dk, ldv = H * dv;
  /* the columns some row of the tile reads (intervals grow with the row) */
  int64_t c0 = a->lo[r0] - gk, c1 = a->hi[r0 + bq - 1] - gk;
  c0 = c0 < 0 ? 0 : c0;
  c1 = c1 > bc ? bc : c1;
  if (c1 <= c0) return;
  gk += c0;
  const int nc = (int)(c1 - c0);
  const size_t qo = ((size_t)r0 * H + h), ko = ((size_t)(gk - a->k0) * H + h);
  const double *Q = a->q + qo * dk, *G = a->g + qo * dv, *K = a->k + ko * dk, *V = a->v + ko * dv;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, nc, dk, a->scale, Q, ldk, K, ldk, 0.0,
              S, nc);
  if (a->ld) /* the forward's decay bias, a constant: dS is unchanged (§8.1 "With decay") */
    la_sm_decay_bias_f64(S, bq, nc, nc, a->q0 + r0, gk, a->ld[h]);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, nc, dv, 1.0, G, ldv, V, ldv, 0.0, dP,
              nc);
  for (int i = 0; i < bq; i++) {
    const size_t r = (size_t)(r0 + i) * H + h;
    const double m = a->fwd->m[r], l = a->fwd->l[r], Di = a->D[r];
    double *s = S + (size_t)i * nc, *d = dP + (size_t)i * nc;
    int64_t lo = a->lo[r0 + i] - gk, hi = a->hi[r0 + i] - gk;
    lo = lo < 0 ? 0 : lo > nc ? nc : lo;
    hi = hi > nc ? nc : hi < lo ? lo : hi;
    if (!(l > 0)) lo = hi = 0; /* read no key: P = 0 */
    const double inv = l > 0 ? 1.0 / l : 0.0;
    for (int64_t j = 0; j < lo; j++) s[j] = d[j] = 0;
    for (int64_t j = lo; j < hi; j++) {
      const double p = la_vexp(s[j] - m) * inv;
      s[j] = p;
      d[j] = p * (d[j] - Di);
    }
    for (int64_t j = hi; j < nc; j++) s[j] = d[j] = 0;
  }
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, dv, bq, 1.0, S, nc, G, ldv, 1.0,
              a->dv + ko * dv, ldv);
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, dk, bq, a->scale, dP, nc, Q, ldk, 1.0,
              a->dk + ko * dk, ldk);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, dk, nc, a->scale, dP, nc, K, ldk,
              1.0, dq + qo * dk, ldk);
}

/* First r in [0, n) with x[r] >= t (x nondecreasing); n if none. */
static int64_t first_at_least(const int64_t *x, int64_t n, int64_t t) {
  int64_t a = 0, b = n;
  while (a < b) {
    const int64_t c = a + (b - a) / 2;
    if (x[c] >= t) b = c; else a = c + 1;
  }
  return a;
}

la_status la_softmax_delta(int64_t nq, int heads, int dv, const double *out, const double *g,
                           double *D) {
  LA_CHECK(nq >= 0 && heads >= 1 && dv >= 1 && (nq == 0 || (out && g && D)), LA_ERR_ARG,
           "la_softmax_delta: bad arguments");
  for (size_t r = 0; r < (size_t)nq * heads; r++) {
    double d = 0;
    for (int c = 0; c < dv; c++) d += g[r * dv + c] * out[r * dv + c];
    D[r] = d;
  }
  return LA_OK;
}

la_status la_softmax_backward_partial(const la_softmax_state *fwd, const double *D, int dk,
                                      double scale, const la_softmax_mask *mask, int64_t q0,
                                      const double *q, const double *g, int64_t k0, int64_t nk,
                                      const double *k, const double *v, double *dq,
                                      double *dk_blk, double *dv_blk, int threads) {
  LA_CHECK(fwd && fwd->nq >= 0 && fwd->heads >= 1 && fwd->dv >= 1 && fwd->dv <= LA_DIM_MAX &&
           dk >= 1 && dk <= LA_DIM_MAX && scale > 0 && isfinite(scale) && q0 >= 0 && k0 >= 0 &&
           nk >= 0 && (fwd->nq == 0 || nk == 0 ||
                       (D && q && g && k && v && dq && dk_blk && dv_blk)),
           LA_ERR_ARG, "la_softmax_backward_partial: bad arguments");
  const int64_t nq = fwd->nq, end = q0 + nq > k0 + nk ? q0 + nq : k0 + nk;
  LA_TRY(la_sm_mask_check(mask, end, "la_softmax_backward_partial"));
  LA_TRY(la_sm_decay_check(mask, fwd->heads, "la_softmax_backward_partial"));
  if (nq == 0 || nk == 0) return LA_OK;
  int64_t ka, kb;
  la_softmax_mask_keys(mask, q0, nq, &ka, &kb);
  ka = ka > k0 ? ka : k0;
  kb = kb < k0 + nk ? kb : k0 + nk;
  if (kb <= ka) return LA_OK; /* no query reads this block */
  const int H = fwd->heads, dv = fwd->dv;
  const int64_t items = (kb - ka + TK - 1) / TK * H;
  int T = la_sm_threads(threads);
  T = items < T ? (int)items : T;
  const size_t nqd = (size_t)nq * H * dk;
  int64_t *lo = la_malloc(sizeof(int64_t) * nq), *hi = la_malloc(sizeof(int64_t) * nq);
  double **S = la_calloc((size_t)T, sizeof *S), **dP = la_calloc((size_t)T, sizeof *dP);
  double **dqt = la_calloc((size_t)T, sizeof *dqt);
  int ok = lo && hi && S && dP && dqt;
  for (int t = 0; ok && t < T; t++) {
    S[t] = la_malloc(sizeof(double) * TQ * TK);
    dP[t] = la_malloc(sizeof(double) * TQ * TK);
    dqt[t] = t ? la_malloc(sizeof(double) * nqd) : dq;
    ok = S[t] && dP[t] && dqt[t];
  }
  la_status st = LA_OK;
  if (!ok) {
    st = la_error(LA_ERR_NOMEM, "softmax backward: out of memory for the scratch of %d threads "
                  "(%lld queries x %d heads x dk %d)", T, (long long)nq, H, dk);
    goto done;
  }
  la_sm_rows(mask, q0, nq, lo, hi);
  const bw_args a = {fwd, D, q, g, k, v, lo, hi, dk_blk, dv_blk, scale, H, dk, dv, k0, q0,
                     mask->log_decay};
  la_blas_single_thread();
#pragma omp parallel num_threads(T)
  {
    const int t = la_sm_thread();
    if (t) memset(dqt[t], 0, sizeof(double) * nqd);
#pragma omp for schedule(static, 1)
    for (int64_t it = 0; it < items; it++) {
      const int h = (int)(it % H);
      const int64_t gk = ka + it / H * TK;
      const int bc = (int)(kb - gk < TK ? kb - gk : TK);
      /* the query rows that read a key of the tile: hi > gk and lo < gk + bc */
      const int64_t ra = first_at_least(hi, nq, gk + 1), rb = first_at_least(lo, nq, gk + bc);
      for (int64_t r0 = ra; r0 < rb; r0 += TQ)
        tile(&a, h, r0, (int)(rb - r0 < TQ ? rb - r0 : TQ), gk, bc, S[t], dP[t], dqt[t]);
    }
    if (T > 1) {
#pragma omp for schedule(static)
      for (size_t x = 0; x < nqd; x++) {
        double s = dq[x];
        for (int u = 1; u < T; u++) s += dqt[u][x];
        dq[x] = s;
      }
    }
  }
done:
  for (int t = 0; t < T; t++) {
    if (S) free(S[t]);
    if (dP) free(dP[t]);
    if (dqt && t) free(dqt[t]);
  }
  free(S); free(dP); free(dqt); free(lo); free(hi);
  return st;
}
