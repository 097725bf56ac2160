/* Exact softmax attention (docs/design.md §4.6), blocked: for each head and block
 * of BQ queries, key blocks of BK go through two GEMMs (S = s Q K^T, then P V) with an online
 * softmax between them (running row max m, sum l, accumulator rescaled by e^{m_old - m_new};
 * Milakov & Gimelshein 2018, as in FlashAttention). No n x n matrix is ever stored. The mask
 * (softmax_mask.c) gives each query row one key interval; a query tile reads only the key
 * tiles inside the union of its rows' intervals. With the mask's log_decay each score gets
 * |i - j| ln gamma_h by global positions before the online softmax (docs/design.md §8.1 "With
 * decay"); without it nothing is added (the undecayed path's bytes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "la_alloc.h"
#include "la_blas.h"
#include "linattn/baseline.h"
#include "softmax_internal.h"
#include "vexp.h"

enum { BQ = 128, BK = 256 };

/* One thread's scratch: scores then probabilities [BQ, BK], P V [BQ, dv], the per-row
 * rescale, and (whole-sequence entry only) a local state of BQ rows. */
typedef struct {
  void *S, *PV;
  double *alpha, *m, *l, *acc;
} sm_work;

/* The state rows being updated: row i has m[i*ms], l[i*ms], acc[i*as .. i*as+dv). */
typedef struct {
  double *m, *l, *acc;
  int64_t ms, as;
} sm_rows;

static int work_alloc(sm_work *w, size_t es, int dv, int local_state) {
  memset(w, 0, sizeof *w);
  w->S = la_malloc(es * BQ * BK);
  w->PV = la_malloc(es * BQ * (size_t)dv);
  w->alpha = la_malloc(sizeof(double) * BQ);
  if (local_state) {
    w->m = la_malloc(sizeof(double) * BQ);
    w->l = la_malloc(sizeof(double) * BQ);
    w->acc = la_malloc(sizeof(double) * BQ * (size_t)dv);
  }
  return w->S && w->PV && w->alpha && (!local_state || (w->m && w->l && w->acc));
}

static void works_free(sm_work *w, int T) {
  for (int t = 0; w && t < T; t++) {
    free(w[t].S); free(w[t].PV); free(w[t].alpha); free(w[t].m); free(w[t].l); free(w[t].acc);
  }
  free(w);
}

/* The scratch of T threads, allocated before the parallel region (nothing allocates inside
 * one, docs/design.md §5.3): NULL with the reason recorded when out of memory. */
static sm_work *works_alloc(int T, size_t es, int dv, int local_state) {
  sm_work *w = la_calloc((size_t)T, sizeof *w);
  int ok = w != NULL;
  for (int t = 0; ok && t < T; t++) ok = work_alloc(&w[t], es, dv, local_state);
  if (!ok) {
    works_free(w, T);
    la_error(LA_ERR_NOMEM, "softmax baseline: out of memory for the scratch of %d threads "
             "(%d x %d tiles, dv %d)", T, BQ, BK, dv);
    return NULL;
  }
  return w;
}

/* Eight independent lanes: vectorizes without -ffast-math and is deterministic. */
#define LA_SM_LANES(T, SFX, EXPF)                                                        \
  static T rowmax_##SFX(const T *s, int n) {                                             \
    T mx[8];                                                                             \
    for (int u = 0; u < 8; u++) mx[u] = s[0];                                            \
    int j = 0;                                                                           \
    for (; j + 8 <= n; j += 8)                                                           \
      for (int u = 0; u < 8; u++) mx[u] = s[j + u] > mx[u] ? s[j + u] : mx[u];           \
    for (; j < n; j++) mx[0] = s[j] > mx[0] ? s[j] : mx[0];                              \
    for (int u = 1; u < 8; u++) mx[0] = mx[u] > mx[0] ? mx[u] : mx[0];                   \
    return mx[0];                                                                        \
  }                                                                                      \
  /* s[j] <- e^{s[j] - mt} for j < n; returns the float64 sum. */                        \
  static double expsum_##SFX(T *s, int n, T mt) {                                        \
    for (int j = 0; j < n; j++) s[j] = EXPF(s[j] - mt);                                  \
    double a[8] = {0};                                                                   \
    int j = 0;                                                                           \
    for (; j + 8 <= n; j += 8)                                                           \
      for (int u = 0; u < 8; u++) a[u] += (double)s[j + u];                              \
    for (; j < n; j++) a[0] += (double)s[j];                                             \
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));            \
  }                                                                                      \
  /* Online softmax on one score block: row i reads columns [vlo[i], vhi[i]) (the rest  \
   * is masked and set to 0); m' = max(m, max s), p = e^{s - m'}, l = l e^{m - m'} +     \
   * sum p. alpha[i] = e^{m - m'} rescales acc after the P V GEMM. In f32, m' is a float \
   * value, so the f32 exponent and the float64 statistics use the same m'. */           \
  static void rows_##SFX(T *S, int bq, int ncol, const int *vlo, const int *vhi,         \
                         sm_rows st, double *alpha) {                                    \
    for (int i = 0; i < bq; i++) {                                                       \
      T *s = S + (size_t)i * ncol;                                                       \
      const int a = vlo[i], nv = vhi[i] - a;                                             \
      double *m = st.m + i * st.ms, *l = st.l + i * st.ms;                               \
      alpha[i] = 1.0;                                                                    \
      if (nv <= 0) {                                                                     \
        memset(s, 0, sizeof(T) * ncol);                                                  \
        continue;                                                                        \
      }                                                                                  \
      memset(s, 0, sizeof(T) * a);                                                       \
      memset(s + vhi[i], 0, sizeof(T) * (ncol - vhi[i]));                                \
      const double mx = (double)rowmax_##SFX(s + a, nv), mn = *m > mx ? *m : mx;         \
      const double sum = expsum_##SFX(s + a, nv, (T)mn);                                 \
      alpha[i] = *m == -INFINITY ? 0.0 : exp(*m - mn);                                   \
      *l = *l * alpha[i] + sum;                                                          \
      *m = mn;                                                                           \
    }                                                                                    \
  }                                                                                      \
  static void accadd_##SFX(const T *PV, int bq, int dv, const double *alpha, sm_rows st) { \
    for (int i = 0; i < bq; i++) {                                                       \
      double *a = st.acc + i * st.as;                                                    \
      const T *p = PV + (size_t)i * dv;                                                  \
      for (int c = 0; c < dv; c++) a[c] = a[c] * alpha[i] + (double)p[c];                \
    }                                                                                    \
  }
LA_SM_LANES(float, f32, la_vexpf)
LA_SM_LANES(double, f64, la_vexp)

/* Fold keys [0, nk) (global positions k0..) into query rows [0, bq) of one head (global
 * positions qpos..), row r reading the keys [lo[r], hi[r]) (la_sm_rows); q, k, v point at the
 * head's first row, with row strides H*dk and H*dv. Only [lo[0], hi[bq-1]) is visited: the
 * rows' intervals grow with r and their union has no gap, so every key tile visited is read
 * by some row. ld = ln gamma of the head (0: no decay) adds |i - j| ld to each score. */
static void block_update(la_dtype dt, int H, int dk, int dv, double scale, const int64_t *lo,
                         const int64_t *hi, int bq, int64_t qpos, double ld, const void *q,
                         int64_t k0, int64_t nk, const void *k, const void *v, sm_rows st,
                         sm_work *w) {
  const int ldk = H * dk, ldv = H * dv;
  const int64_t a = lo[0] > k0 ? lo[0] : k0, b = hi[bq - 1] < k0 + nk ? hi[bq - 1] : k0 + nk;
  int vlo[BQ], vhi[BQ];
  for (int64_t gk = a; gk < b; gk += BK) {
    const int ncol = (int)(b - gk < BK ? b - gk : BK);
    for (int i = 0; i < bq; i++) {
      const int64_t l = lo[i] - gk, h = hi[i] - gk;
      vlo[i] = (int)(l < 0 ? 0 : l > ncol ? ncol : l);
      vhi[i] = (int)(h < vlo[i] ? vlo[i] : h > ncol ? ncol : h);
    }
    const int64_t j0 = gk - k0;
    if (dt == LA_F32) {
      const float *kj = (const float *)k + j0 * ldk, *vj = (const float *)v + j0 * ldv;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, ncol, dk, (float)scale, q, ldk,
                  kj, ldk, 0.0f, w->S, ncol);
      la_sm_decay_bias_f32(w->S, bq, ncol, ncol, qpos, gk, ld);
      rows_f32(w->S, bq, ncol, vlo, vhi, st, w->alpha);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, dv, ncol, 1.0f, w->S, ncol,
                  vj, ldv, 0.0f, w->PV, dv);
      accadd_f32(w->PV, bq, dv, w->alpha, st);
    } else {
      const double *kj = (const double *)k + j0 * ldk, *vj = (const double *)v + j0 * ldv;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, ncol, dk, scale, q, ldk, kj,
                  ldk, 0.0, w->S, ncol);
      la_sm_decay_bias_f64(w->S, bq, ncol, ncol, qpos, gk, ld);
      rows_f64(w->S, bq, ncol, vlo, vhi, st, w->alpha);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, dv, ncol, 1.0, w->S, ncol, vj,
                  ldv, 0.0, w->PV, dv);
      accadd_f64(w->PV, bq, dv, w->alpha, st);
    }
  }
}

/* out row = acc / l; returns 1 if l == 0 (no key read: zeros written). */
static int finish_row(la_dtype dt, const double *acc, double l, int dv, void *out) {
  const double inv = l > 0 ? 1.0 / l : 0.0;
  if (dt == LA_F32)
    for (int c = 0; c < dv; c++) ((float *)out)[c] = (float)(acc[c] * inv);
  else
    for (int c = 0; c < dv; c++) ((double *)out)[c] = acc[c] * inv;
  return !(l > 0);
}

static int bad_shape(la_dtype dt, int64_t n, int heads, int dk, int dv, double scale) {
  return (dt != LA_F32 && dt != LA_F64) || n < 0 || heads < 1 || dk < 1 || dv < 1 ||
         dk > LA_DIM_MAX || dv > LA_DIM_MAX || !(scale > 0) || !isfinite(scale);
}

la_status la_softmax_attention(la_dtype dt, int64_t n, int heads, int dk, int dv, double scale,
                               la_mode mode, const void *q, const void *k, const void *v,
                               void *out, int threads) {
  LA_CHECK(!bad_shape(dt, n, heads, dk, dv, scale) && (n == 0 || (q && k && v && out)), LA_ERR_ARG,
           "la_softmax_attention: invalid arguments (n %lld, heads %d, dk %d, dv %d, scale %g)",
           (long long)n, heads, dk, dv, scale);
  const size_t es = la_dtype_size(dt);
  const int64_t nqb = (n + BQ - 1) / BQ, items = nqb * heads;
  const la_softmax_mask mask = {mode, NULL, 0, 0, NULL};
  LA_TRY(la_sm_mask_check(&mask, n, "la_softmax_attention"));
  const int T = la_sm_threads(threads);
  sm_work *ws = works_alloc(T, es, dv, 1);
  LA_CHECK(ws, LA_ERR_NOMEM, "softmax baseline: out of memory for the scratch of %d threads (dv %d)",
           T, dv);
  la_blas_single_thread();
#pragma omp parallel num_threads(T)
  {
    sm_work w = ws[la_sm_thread()];
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      const int64_t b = nqb - 1 - it / heads; /* causal: heaviest query blocks first */
      const int h = (int)(it % heads);
      const int64_t i0 = b * BQ;
      const int bq = (int)(n - i0 < BQ ? n - i0 : BQ);
      for (int i = 0; i < bq; i++) w.m[i] = -INFINITY;
      memset(w.l, 0, sizeof(double) * bq);
      memset(w.acc, 0, sizeof(double) * bq * dv);
      sm_rows st = {w.m, w.l, w.acc, 1, dv};
      int64_t lo[BQ], hi[BQ];
      la_sm_rows(&mask, i0, bq, lo, hi);
      block_update(dt, heads, dk, dv, scale, lo, hi, bq, i0, 0.0,
                   (const char *)q + ((size_t)i0 * heads + h) * dk * es, 0, n,
                   (const char *)k + (size_t)h * dk * es, (const char *)v + (size_t)h * dv * es,
                   st, &w);
      for (int i = 0; i < bq; i++)
        finish_row(dt, w.acc + (size_t)i * dv, w.l[i], dv,
                   (char *)out + (((size_t)(i0 + i)) * heads + h) * dv * es);
    }
  }
  works_free(ws, T);
  return LA_OK;
}

la_status la_softmax_state_init(la_softmax_state *s, int64_t nq, int heads, int dv) {
  memset(s, 0, sizeof *s);
  LA_CHECK(nq >= 0 && heads >= 1 && dv >= 1, LA_ERR_ARG,
           "la_softmax_state_init: invalid shape (nq %lld, heads %d, dv %d)", (long long)nq, heads, dv);
  const size_t rows = (size_t)nq * heads;
  s->m = la_malloc(sizeof(double) * (rows ? rows : 1));
  s->l = la_calloc(rows ? rows : 1, sizeof(double));
  s->acc = la_calloc(rows ? rows * dv : 1, sizeof(double));
  if (!s->m || !s->l || !s->acc) {
    la_softmax_state_free(s);
    return la_error(LA_ERR_NOMEM, "softmax baseline: out of memory for the state of %lld "
                    "queries x %d heads (dv %d)", (long long)nq, heads, dv);
  }
  for (size_t i = 0; i < rows; i++) s->m[i] = -INFINITY;
  s->nq = nq;
  s->heads = heads;
  s->dv = dv;
  return LA_OK;
}

void la_softmax_state_free(la_softmax_state *s) {
  if (!s) return;
  free(s->m);
  free(s->l);
  free(s->acc);
  memset(s, 0, sizeof *s);
}

la_status la_softmax_partial_mask(la_softmax_state *s, la_dtype dt, int dk, double scale,
                                  const la_softmax_mask *mask, int64_t q0, const void *q,
                                  int64_t k0, int64_t nk, const void *k, const void *v,
                                  int threads) {
  LA_CHECK(s && !bad_shape(dt, s->nq, s->heads, dk, s->dv, scale) && nk >= 0 && q0 >= 0 && k0 >= 0 &&
           (s->nq == 0 || nk == 0 || (q && k && v)),
           LA_ERR_ARG, "la_softmax_partial_mask: invalid arguments (dk %d, scale %g, q0 %lld, k0 %lld, "
           "nk %lld)", dk, scale, (long long)q0, (long long)k0, (long long)nk);
  const int64_t end = q0 + s->nq > k0 + nk ? q0 + s->nq : k0 + nk;
  LA_TRY(la_sm_mask_check(mask, end, "la_softmax_partial_mask"));
  LA_TRY(la_sm_decay_check(mask, s->heads, "la_softmax_partial_mask"));
  const int H = s->heads, dv = s->dv;
  if (s->nq == 0 || nk == 0) return LA_OK;
  int64_t klo, khi;
  la_softmax_mask_keys(mask, q0, s->nq, &klo, &khi);
  if (khi <= k0 || klo >= k0 + nk) return LA_OK; /* no query reads this block */
  const size_t es = la_dtype_size(dt);
  const int64_t nqb = (s->nq + BQ - 1) / BQ, items = nqb * H;
  const int T = la_sm_threads(threads);
  sm_work *ws = works_alloc(T, es, dv, 0);
  LA_CHECK(ws, LA_ERR_NOMEM, "softmax baseline: out of memory for the scratch of %d threads (dv %d)",
           T, dv);
  la_blas_single_thread();
#pragma omp parallel num_threads(T)
  {
    sm_work w = ws[la_sm_thread()];
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      const int64_t b = nqb - 1 - it / H, i0 = b * BQ;
      const int h = (int)(it % H), bq = (int)(s->nq - i0 < BQ ? s->nq - i0 : BQ);
      const size_t r0 = (size_t)i0 * H + h;
      sm_rows st = {s->m + r0, s->l + r0, s->acc + r0 * dv, H, (int64_t)H * dv};
      int64_t lo[BQ], hi[BQ];
      la_sm_rows(mask, q0 + i0, bq, lo, hi);
      block_update(dt, H, dk, dv, scale, lo, hi, bq, q0 + i0,
                   mask->log_decay ? mask->log_decay[h] : 0.0, (const char *)q + r0 * dk * es, k0, nk,
                   (const char *)k + (size_t)h * dk * es, (const char *)v + (size_t)h * dv * es,
                   st, &w);
    }
  }
  works_free(ws, T);
  return LA_OK;
}

la_status la_softmax_partial(la_softmax_state *s, la_dtype dt, int dk, double scale,
                             la_mode mode, int64_t q0, const void *q, int64_t k0, int64_t nk,
                             const void *k, const void *v, int threads) {
  const la_softmax_mask mask = {mode, NULL, 0, 0, NULL};
  return la_softmax_partial_mask(s, dt, dk, scale, &mask, q0, q, k0, nk, k, v, threads);
}

la_status la_softmax_finish(const la_softmax_state *s, la_dtype dt, void *out) {
  LA_CHECK(s && (dt == LA_F32 || dt == LA_F64) && (s->nq == 0 || out), LA_ERR_ARG,
           "la_softmax_finish: invalid arguments");
  const size_t es = la_dtype_size(dt), rows = (size_t)s->nq * s->heads;
  int64_t empty = 0;
  for (size_t r = 0; r < rows; r++)
    empty += finish_row(dt, s->acc + r * s->dv, s->l[r], s->dv, (char *)out + r * s->dv * es);
  LA_CHECK(!empty, LA_ERR_DENOMINATOR, "softmax baseline: %lld of %lld rows read no key (zeros "
           "written)", (long long)empty, (long long)rows);
  return LA_OK;
}
