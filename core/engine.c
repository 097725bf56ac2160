/* The forward operator on one rank, DESIGN.md §1, §3, §4: plan, accumulate keys, apply.
 * Causal is chunkwise (GEMMs over C-token chunks); heads and superblocks of chunks are
 * spread over OpenMP threads in two passes (superblock totals, then outputs from their
 * prefixes). Denominators ride along as an extra column of ones in V (S|z in one GEMM). */
#include <float.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "engine_internal.h"
#include "kern512.h"
#include "la_blas.h"

/* Default chunk length per (r, dv), from the sweep `bash jobs/tune_chunk.sh` (causal, float32,
 * 2 threads, AVX-512 kernels; docs/chunk_sweep.csv): C = 32 wins for r, dv <= 32, C = 48 for
 * r <= 128 (48 = 8 row tiles of 6; 3-5 % over 64 at r = dv = 64 and 128, rerun at N = 2^20),
 * and at r = 256 (favor+, m = 256) 48 and 64 tie within noise, so 64 keeps the intra-chunk
 * share low. It depends on (r, dv) only, never on the CPU, so that every rank of a job uses
 * the same chunk grid (windows need it). */
int la_default_chunk(int r, int dv) {
  if (r <= 32 && dv <= 32) return 32;
  if (r <= 128) return 48;
  return 64;
}

extern void openblas_set_num_threads(int) __attribute__((weak));
/* Decided once per process (the environment and the CPU do not change); a racing first call
 * from two threads writes the same value. */
int la_k512_enabled(void) {
  static int on = -1;
  if (on >= 0) return on;
#if defined(__x86_64__) && defined(__GNUC__)
  const char *v = getenv("LINATTN_KERNELS");
  __builtin_cpu_init();
  on = !(v && !strcmp(v, "blas")) && __builtin_cpu_supports("avx512f") != 0; /* a bit, not 1 */
#else
  on = 0;
#endif
  return on;
}


void la_blas_single_thread(void) {
  if (openblas_set_num_threads) openblas_set_num_threads(1);
}

static void *xalloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
  return p;
}

static void work_free(la_work *w) {
  free(w->phiq); free(w->phik); free(w->vp); free(w->A); free(w->o); free(w->sf);
  free(w->tmp); free(w->aq); free(w->ak); free(w->segi); free(w->mseg);
  free(w->wsz); free(w->phif); free(w->vf); free(w->af); free(w->Af);
  free(w->ab); free(w->dphi); free(w->ak2); free(w->kT); free(w->zf);
  la_den_stats_free(&w->stats);
}

la_status la_engine_create(const la_config *cfg, const la_featmap fm, la_dtype dt, int dv,
                           la_engine *out) {
  *out = NULL;
  if ((dt != LA_F32 && dt != LA_F64) || dv < 1 || dv > LA_DIM_MAX) return LA_ERR_ARG;
  la_engine e = calloc(1, sizeof *e);
  if (!e) return LA_ERR_NOMEM;
  e->cfg = *cfg;
  e->fm = fm;
  e->dt = dt;
  e->H = fm->heads;
  e->dk = fm->dk;
  e->r = fm->r;
  e->dv = dv;
  e->C = cfg->chunk > 0 ? cfg->chunk : la_default_chunk(fm->r, dv);
#ifdef _OPENMP
  e->T = cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
#else
  e->T = 1;
#endif
  e->stabilized = la_map_is_stabilized(fm->kind);
  e->k512 = dt == LA_F32 && la_k512_enabled();
  la_blas_single_thread();
  size_t es = la_dtype_size(dt), C = (size_t)e->C, r = (size_t)e->r, dv1 = (size_t)dv + 1;
  e->work = calloc((size_t)e->T, sizeof(la_work));
  if (!e->work) goto nomem;
  for (int t = 0; t < e->T; t++) {
    la_work *w = &e->work[t];
    w->phiq = xalloc(es * C * r);
    w->phik = xalloc(es * C * r);
    w->vp = xalloc(es * C * dv1);
    w->A = xalloc(es * C * C);
    w->o = xalloc(es * C * dv1);
    w->sf = xalloc(es * r * dv1);
    w->tmp = xalloc(es * r * dv1);
    w->aq = xalloc(sizeof(double) * C);
    w->ak = xalloc(sizeof(double) * C);
    w->segi = xalloc(sizeof(int) * C);
    w->mseg = xalloc(sizeof(double) * C);
    w->wsz = xalloc(sizeof(double) * r * dv1);
    w->phif = xalloc(es * 2 * C * r);
    w->vf = xalloc(es * 2 * C * dv1);
    w->af = xalloc(sizeof(double) * 2 * C);
    w->Af = xalloc(es * 2 * C * C);
    w->ab = xalloc(es * C * dv1);
    w->dphi = xalloc(es * 2 * C * r);
    w->ak2 = xalloc(sizeof(double) * 2 * C);
    w->kT = xalloc(es * r * C);
    w->zf = xalloc(es * r);
    if (!w->segi || !w->mseg || !w->wsz || !w->phif || !w->vf || !w->af || !w->Af || !w->ab ||
        !w->dphi || !w->ak2 || !w->kT || !w->zf)
      goto nomem;
    if (!w->phiq || !w->phik || !w->vp || !w->A || !w->o || !w->sf || !w->tmp || !w->aq ||
        !w->ak || la_den_stats_init(&w->stats) != LA_OK)
      goto nomem;
  }
  e->Bmax = e->H >= e->T ? 1 : (e->T + e->H - 1) / e->H;
  if (la_state_init(&e->part, e->H * e->Bmax, e->r, dv) != LA_OK) goto nomem;
  e->scratch = malloc(sizeof(double) * r * dv1);
  if (!e->scratch) goto nomem;
  *out = e;
  return LA_OK;
nomem:
  la_engine_destroy(&e);
  return LA_ERR_NOMEM;
}

void la_engine_destroy(la_engine *pe) {
  if (!pe || !*pe) return;
  la_engine e = *pe;
  if (e->work)
    for (int t = 0; t < e->T; t++) work_free(&e->work[t]);
  free(e->work);
  la_state_free(&e->part);
  free(e->scratch);
  free(e);
  *pe = NULL;
}

int la_engine_chunk(const la_engine e) { return e->C; }

const char *la_engine_kernels(const la_engine e, int backward) {
  (void)backward; /* the backward's products go through gemm_f32 as well */
  return e->k512 ? "avx512" : "blas";
}
void la_engine_shape(const la_engine e, int *heads, int *r, int *dv) {
  *heads = e->H;
  *r = e->r;
  *dv = e->dv;
}
la_mode la_engine_mode(const la_engine e) { return e->cfg.mode; }
la_dtype la_engine_dtype(const la_engine e) { return e->dt; }
int64_t la_engine_window(const la_engine e) { return e->cfg.window; }
int la_engine_input_dim(const la_engine e) { return e->dk; }
int la_engine_threads(const la_engine e) { return e->T; }

/* Row finalization: the denominator policy of §1 on the true scale. o_row = [num_s | den_s]
 * with true (num, den) = e^lsc (num_s, den_s); lsc = log-scale of query + keys. */
static inline void den_note(la_den_stats *st, double den_s, double lsc) {
  st->rows++;
  if (!isfinite(den_s) || isnan(lsc)) {
    st->count_nonfinite++;
    return;
  }
  if (den_s <= 0) {
    st->count_nonpositive++;
    if (den_s == 0) { if (st->min > 0) st->min = 0; if (st->max < 0) st->max = 0; return; }
    double d = den_s * exp(lsc);
    if (d < st->min) st->min = d;
    if (d > st->max) st->max = d;
    return;
  }
  double d = lsc == 0 ? den_s : den_s * exp(lsc);
  if (d < st->min) st->min = d;
  if (d > st->max) st->max = d;
  double l2 = log2(den_s) + lsc / M_LN2; /* log2 of the true den, overflow-free */
  long bin = lround(floor(l2 * LA_DEN_HIST_PER_OCTAVE)) + (LA_DEN_HIST_BINS / 2);
  if (bin < 0) bin = 0;
  if (bin >= LA_DEN_HIST_BINS) bin = LA_DEN_HIST_BINS - 1;
  st->hist[bin]++;
}

static inline void den_violation(la_den_stats *st, int64_t tok, int h) {
  st->violations++;
  if (st->first_bad_token < 0 || tok < st->first_bad_token ||
      (tok == st->first_bad_token && h < st->first_bad_head)) {
    st->first_bad_token = tok;
    st->first_bad_head = h;
  }
}

static inline void overflow_note(la_den_stats *st, int64_t tok, int h) {
  st->overflows++;
  if (st->first_overflow_token < 0 || tok < st->first_overflow_token ||
      (tok == st->first_overflow_token && h < st->first_overflow_head)) {
    st->first_overflow_token = tok;
    st->first_overflow_head = h;
  }
}

/* Returns the divisor for a normalized row, or 0 when the row's output is exactly 0
 * (zero-empty) or the row violates the policy (then noted). */
static inline double den_divisor(const la_config *cfg, la_den_stats *st, double den_s,
                                 double lsc, int64_t tok, int h, int *zero) {
  *zero = 0;
  switch (cfg->den_policy) {
  case LA_DEN_ERROR:
    if (!(den_s > 0) || !isfinite(den_s)) break;
    return den_s;
  case LA_DEN_ZERO_EMPTY:
    if (den_s == 0) { *zero = 1; return 0; }
    if (!(den_s > 0) || !isfinite(den_s)) break;
    return den_s;
  case LA_DEN_ADD: { /* num / (den + E)  ==  num_s / (den_s + E e^{-lsc}) */
    double d = den_s + cfg->den_eps * exp(-lsc);
    if (d == 0 || isnan(d)) break;
    return d;
  }
  case LA_DEN_CLAMP: { /* num / max(den, E) */
    double d = fmax(den_s, cfg->den_eps * exp(-lsc));
    if (!(d > 0) || isnan(d)) break;
    return d;
  }
  }
  den_violation(st, tok, h);
  *zero = 1;
  return 0;
}

la_status la_engine_set_segments(la_engine e, const int64_t *offsets, int64_t count) {
  if (!offsets || count < 2) {
    e->seg_off = NULL;
    e->seg_count = 0;
    return LA_OK;
  }
  if (offsets[0] != 0) return LA_ERR_ARG;
  for (int64_t i = 1; i < count; i++)
    if (offsets[i] <= offsets[i - 1]) return LA_ERR_ARG;
  e->seg_off = offsets;
  e->seg_count = count;
  return LA_OK;
}

/* Index of the first offset >= t (binary search; seg_count if none). */
static int64_t first_offset_at_or_after(const la_engine e, int64_t t) {
  int64_t lo = 0, hi = e->seg_count;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (e->seg_off[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Segment layout of global tokens [t0, t0+len) (§3): segi[i] = segment of token i counted
 * from the segment of t0; *reset = 1 when t0 starts a segment. Returns the number of
 * segments touched. Without segments: one segment, no reset. */
static int seg_layout(const la_engine e, int64_t t0, int len, int *segi, int *reset) {
  *reset = 0;
  if (!e->seg_off) {
    memset(segi, 0, sizeof(int) * (size_t)len);
    return 1;
  }
  int64_t idx = first_offset_at_or_after(e, t0);
  if (idx < e->seg_count && e->seg_off[idx] == t0) {
    *reset = 1;
    idx++;
  }
  int s = 0;
  for (int i = 0; i < len; i++) {
    if (idx < e->seg_count && e->seg_off[idx] == t0 + i && i > 0) {
      s++;
      idx++;
    }
    segi[i] = s;
  }
  return s + 1;
}

/* Smallest multiple of C that is >= x (0 for x <= 0): the global chunk grid of windows. */
static int64_t la_ceil_to(int64_t x, int64_t C) { return x <= 0 ? 0 : ((x + C - 1) / C) * C; }

/* 1 if global token t starts a segment (o_s = t with s < S, or t = N = o_S). */
static int is_segment_start(const la_engine e, int64_t t) {
  if (!e->seg_off) return t == 0;
  int64_t i = first_offset_at_or_after(e, t);
  return i < e->seg_count && e->seg_off[i] == t;
}

/* Start of the segment holding global token t. */
static int64_t segment_start(const la_engine e, int64_t t) {
  if (!e->seg_off) return 0;
  int64_t i = first_offset_at_or_after(e, t + 1); /* first offset > t */
  return i > 0 ? e->seg_off[i - 1] : 0;
}

/* First segment start after global token t (INT64_MAX if none). */
static int64_t next_start_after(const la_engine e, int64_t t) {
  if (!e->seg_off) return INT64_MAX;
  int64_t i = first_offset_at_or_after(e, t + 1);
  return i < e->seg_count ? e->seg_off[i] : INT64_MAX;
}

int64_t la_engine_segment_at_or_after(const la_engine e, int64_t t) {
  if (!e->seg_off) return t <= 0 ? 0 : INT64_MAX;
  int64_t i = first_offset_at_or_after(e, t);
  return i < e->seg_count ? e->seg_off[i] : INT64_MAX;
}
int la_engine_has_segments(const la_engine e) { return e->seg_off != NULL; }

la_status la_engine_set_mask(la_engine e, const void *mask, char *err, size_t errlen) {
  (void)e;
  (void)mask;
  snprintf(err, errlen, "general pairwise masks are not supported: an arbitrary mask breaks the "
           "single shared summary phi(q)^T S (DESIGN.md section 3); use segments or a causal window");
  return LA_ERR_UNSUPPORTED;
}

/* float32 GEMMs of the chunk kernels (engine_impl.h, backward_impl.h): on the AVX-512 kernel
 * when it is in use (alpha = 1, beta in {0, 1}, row-major; op(B) = B^T is transposed into a
 * per-thread scratch first), otherwise OpenBLAS. */
static _Thread_local float *tb_buf;
static _Thread_local size_t tb_cap;
static void gemm_f32(CBLAS_LAYOUT lay, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N,
                     int K, float alpha, const float *A, int lda, const float *B, int ldb,
                     float beta, float *C, int ldc) {
  if (la_k512_enabled() && lay == CblasRowMajor && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
    const float *Bp = B;
    ptrdiff_t ldbp = ldb;
    if (tb == CblasTrans && M > 0 && N > 0 && K > 0) {
      const size_t need = (size_t)K * N;
      if (need > tb_cap) {
        float *nb = realloc(tb_buf, sizeof(float) * need);
        if (!nb) goto blas;
        tb_buf = nb;
        tb_cap = need;
      }
      la_k512_transpose(N, K, B, ldb, tb_buf, N);
      Bp = tb_buf;
      ldbp = N;
    }
    la_k512_gemm(M, N, K, A, ta == CblasNoTrans ? lda : 1, ta == CblasNoTrans ? 1 : lda, Bp,
                 ldbp, C, ldc, beta == 1.0f, 0);
    return;
  }
blas:
  cblas_sgemm(lay, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#define LA_REAL float
#define LA_SFX f32
#define LA_GEMM gemm_f32
#define LA_EXPR expf
#define LA_K512 1
#include "engine_impl.h"
#define LA_REAL double
#define LA_SFX f64
#define LA_GEMM cblas_dgemm
#define LA_EXPR exp
#include "engine_impl.h"

int la_thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

void la_engine_merge_stats(la_engine e, la_den_stats *stats) {
  for (int t = 0; t < e->T; t++) {
    if (stats) la_den_stats_merge(stats, &e->work[t].stats);
    la_den_stats_free(&e->work[t].stats);
    la_den_stats_init(&e->work[t].stats);
  }
}

/* Superblock bounds: b of B, chunk-aligned. */
static void superblock(int64_t n, int C, int B, int b, int64_t *lo, int64_t *hi) {
  int64_t nch = (n + C - 1) / C;
  *lo = (nch * b / B) * C;
  *hi = (nch * (b + 1) / B) * C;
  if (*lo > n) *lo = n;
  if (*hi > n) *hi = n;
}

static void accum_range(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                        const void *k, const void *v, double *sz, double *m, int *f) {
  if (e->dt == LA_F32) accum_range_f32(e, w, h, token0, lo, hi, k, v, sz, m, f);
  else accum_range_f64(e, w, h, token0, lo, hi, k, v, sz, m, f);
}

la_status la_engine_accumulate(la_engine e, int64_t token0, int64_t n, const void *k,
                               const void *v, la_state *state) {
  if (n < 0 || !state || state->heads != e->H || state->r != e->r || state->dv != e->dv)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  const int H = e->H, B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  la_state_reset(&e->part);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int it = 0; it < H * B; it++) {
    int h = it / B, b = it % B;
    int64_t lo, hi;
    superblock(n, e->C, B, b, &lo, &hi);
    accum_range(e, &e->work[la_thread_id()], h, token0, lo, hi, k, v, e->part.sz + (size_t)it * rsz,
                e->part.m + it, e->part.f + it);
  }
  for (int h = 0; h < H; h++)
    for (int b = 0; b < B; b++)
      la_state_combine_head(state->sz + (size_t)h * rsz, state->m + h, state->f + h,
                            e->part.sz + (size_t)(h * B + b) * rsz, e->part.m + h * B + b,
                            e->part.f + h * B + b, rsz);
  return LA_OK;
}

static la_status causal_apply(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, la_state *state, void *out,
                              la_den_stats *stats, void *raw, double *lsc);

la_status la_engine_apply(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, la_state *state, void *out, la_den_stats *stats) {
  if (n < 0 || !state || state->heads != e->H || state->r != e->r || state->dv != e->dv)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  if (e->cfg.mode == LA_BIDIRECTIONAL) {
    int B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int it = 0; it < H * B; it++) {
      int h = it / B, b = it % B;
      int64_t lo, hi;
      superblock(n, e->C, B, b, &lo, &hi);
      la_work *w = &e->work[la_thread_id()];
      if (e->dt == LA_F32)
        apply_bidir_f32(e, w, h, token0, lo, hi, q, state->sz + h * rsz, state->m[h], out);
      else
        apply_bidir_f64(e, w, h, token0, lo, hi, q, state->sz + h * rsz, state->m[h], out);
    }
    la_engine_merge_stats(e, stats);
    return LA_OK;
  }
  return causal_apply(e, token0, n, q, k, v, state, out, stats, NULL, NULL);
}

la_status la_engine_apply_local(la_engine e, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_state *local, void *raw,
                                double *lsc) {
  if (e->cfg.mode != LA_CAUSAL || n < 0 || !local || local->heads != e->H ||
      local->r != e->r || local->dv != e->dv || !raw || !lsc)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  return causal_apply(e, token0, n, q, k, v, local, NULL, NULL, raw, lsc);
}

la_status la_engine_correct(la_engine e, int64_t token0, int64_t n, const void *q,
                            const la_state *prefix, const void *raw, const double *lsc,
                            void *out, la_den_stats *stats) {
  if (n < 0 || !prefix || prefix->heads != e->H || prefix->r != e->r || prefix->dv != e->dv)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  const int H = e->H, B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int it = 0; it < H * B; it++) {
    int h = it / B, b = it % B;
    int64_t lo, hi;
    superblock(n, e->C, B, b, &lo, &hi);
    la_work *w = &e->work[la_thread_id()];
    if (e->dt == LA_F32)
      correct_rows_f32(e, w, h, token0, lo, hi, q, prefix->sz + h * rsz, prefix->m[h], raw, lsc, out);
    else
      correct_rows_f64(e, w, h, token0, lo, hi, q, prefix->sz + h * rsz, prefix->m[h], raw, lsc, out);
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

/* Causal, two passes when heads alone cannot occupy the threads (§4). */
static la_status causal_apply(la_engine e, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, la_state *state, void *out,
                              la_den_stats *stats, void *raw, double *lsc) {
  const int H = e->H;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int B = (int)(n / e->C) >= e->Bmax ? e->Bmax : 1;
  la_state_reset(&e->part);
  if (B > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
    for (int it = 0; it < H * B; it++) {
      int h = it / B, b = it % B;
      if (b == B - 1) continue; /* the last superblock's total is not needed */
      int64_t lo, hi;
      superblock(n, e->C, B, b, &lo, &hi);
      accum_range(e, &e->work[la_thread_id()], h, token0, lo, hi, k, v,
                  e->part.sz + (size_t)it * rsz, e->part.m + it, e->part.f + it);
    }
  }
  /* Exclusive prefix over superblocks, in place: part[h,b] <- state_h (+) tot_0..tot_{b-1};
   * state_h is the running prefix, e->scratch holds one total while it is swapped out. */
  for (int h = 0; h < H; h++) {
    double *run = state->sz + (size_t)h * rsz;
    for (int b = 0; b < B; b++) {
      size_t idx = (size_t)h * B + b;
      double *p = e->part.sz + idx * rsz, tot_m = e->part.m[idx];
      int tot_f = e->part.f[idx];
      memcpy(e->scratch, p, sizeof(double) * rsz);
      memcpy(p, run, sizeof(double) * rsz);
      e->part.m[idx] = state->m[h];
      e->part.f[idx] = state->f[h];
      if (b < B - 1)
        la_state_combine_head(run, state->m + h, state->f + h, e->scratch, &tot_m, &tot_f, rsz);
    }
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int it = 0; it < H * B; it++) {
    int h = it / B, b = it % B;
    int64_t lo, hi;
    superblock(n, e->C, B, b, &lo, &hi);
    la_work *w = &e->work[la_thread_id()];
    if (e->dt == LA_F32)
      apply_causal_f32(e, w, h, token0, lo, hi, q, k, v, e->part.sz + (size_t)it * rsz,
                       e->part.m + it, e->part.f + it, out, raw, lsc);
    else
      apply_causal_f64(e, w, h, token0, lo, hi, q, k, v, e->part.sz + (size_t)it * rsz,
                       e->part.m + it, e->part.f + it, out, raw, lsc);
  }
  /* The last superblock's state now covers the whole block. */
  for (int h = 0; h < H; h++) {
    size_t idx = (size_t)h * B + (B - 1);
    memcpy(state->sz + (size_t)h * rsz, e->part.sz + idx * rsz, sizeof(double) * rsz);
    state->m[h] = e->part.m[idx];
    state->f[h] = e->part.f[idx];
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}


la_status la_engine_apply_segmented(la_engine e, int64_t token0, int64_t n, const void *q,
                                    const void *k, const void *v, const la_state *left,
                                    const la_state *right, void *out, la_den_stats *stats) {
  if (e->cfg.mode != LA_BIDIRECTIONAL || n < 0 || !left || !right || left->heads != e->H ||
      right->heads != e->H || left->r != e->r || left->dv != e->dv)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_work *w = &e->work[la_thread_id()];
    if (e->dt == LA_F32)
      apply_segmented_f32(e, w, h, token0, n, q, k, v, left->sz + h * rsz, left->m[h],
                          right->sz + h * rsz, right->m[h], out);
    else
      apply_segmented_f64(e, w, h, token0, n, q, k, v, left->sz + h * rsz, left->m[h],
                          right->sz + h * rsz, right->m[h], out);
  }
  la_engine_merge_stats(e, stats);
  return LA_OK;
}

void la_window_halo(const la_engine e, int64_t token0, int64_t n, int64_t *lo, int64_t *hi) {
  const int64_t W = e->cfg.window, C = e->C;
  *lo = *hi = token0;
  if (W <= 0 || n <= 0 || is_segment_start(e, token0)) return;
  int64_t S0 = segment_start(e, token0);
  int64_t l = token0 - W + 1;
  l = l > S0 ? l : S0;
  l = l > 0 ? l : 0;
  int64_t c0_last = ((token0 + n - 1) / C) * C;
  if (c0_last < token0) c0_last = token0;
  int64_t A = la_ceil_to(token0 + n - W, C); /* c0_last + len_last = token0 + n */
  A = A < token0 ? A : token0;
  *lo = l < token0 ? l : token0;
  *hi = A > *lo ? A : *lo;
}

/* Queue storage for one head: O(min(W, N)/C) summaries (§3). */
typedef struct {
  int64_t *ab;
  double *store;
} qstore;

static int qstore_alloc(qstore *qs, int cap, size_t rsz) {
  qs->ab = malloc(sizeof(int64_t) * 2 * cap);
  qs->store = malloc(sizeof(double) * ((2 * rsz + 2) * cap + rsz));
  if (qs->ab && qs->store) return 0;
  free(qs->ab);
  free(qs->store);
  return -1;
}

#define QUEUE_INIT(T, qs, cap, rsz)                                                        \
  T Q = {cap, 0, 0, 0, rsz, qs.ab, qs.ab + cap, qs.store, qs.store + 2 * rsz * cap,       \
         qs.store + rsz * cap, qs.store + 2 * rsz * cap + cap,                              \
         qs.store + 2 * rsz * cap + 2 * cap, -INFINITY}

/* One head of the window kernel (§3) with its queue: the forward (out) or, with g, the
 * backward replay (dq and side). */
void la_window_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const void *q,
                    const void *k, const void *v, int64_t hlo, int64_t hhi, const void *hk,
                    const void *hv, const double *midsz, double midm, void *out, const void *g,
                    void *dq, double *side, int cap, la_status *st) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  qstore qs;
  if (qstore_alloc(&qs, cap, rsz)) {
    *st = LA_ERR_NOMEM;
    return;
  }
  if (e->dt == LA_F32) {
    QUEUE_INIT(wqueue_f32, qs, cap, rsz);
    apply_window_f32(e, w, h, token0, n, q, k, v, hlo, hhi, hk, hv, midsz, midm, &Q, out, g, dq, side);
  } else {
    QUEUE_INIT(wqueue_f64, qs, cap, rsz);
    apply_window_f64(e, w, h, token0, n, q, k, v, hlo, hhi, hk, hv, midsz, midm, &Q, out, g, dq, side);
  }
  free(qs.ab);
  free(qs.store);
}

void la_window_reverse_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                            const void *q, const void *k, const void *v, const void *g,
                            const double *side, int64_t flo, int64_t fhi, const void *fq,
                            const void *fg, const double *fside, const double *fmidsz,
                            double fmidm, void *dk, void *dv, int cap, la_status *st) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  qstore qs;
  if (qstore_alloc(&qs, cap, rsz)) {
    *st = LA_ERR_NOMEM;
    return;
  }
  if (e->dt == LA_F32) {
    QUEUE_INIT(wqueue_f32, qs, cap, rsz);
    bwd_window_reverse_f32(e, w, h, token0, n, q, k, v, g, side, flo, fhi, fq, fg, fside, fmidsz,
                           fmidm, &Q, dk, dv);
  } else {
    QUEUE_INIT(wqueue_f64, qs, cap, rsz);
    bwd_window_reverse_f64(e, w, h, token0, n, q, k, v, g, side, flo, fhi, fq, fg, fside, fmidsz,
                           fmidm, &Q, dk, dv);
  }
  free(qs.ab);
  free(qs.store);
}

void la_query_summary_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                           int64_t a, int64_t b, const void *q, const void *g, const double *side,
                           double *sz, double *m) {
  if (e->dt == LA_F32)
    query_summary_f32(e, w, h, token0, n, a, b, q, g, side, token0 + n, NULL, NULL, NULL, sz, m);
  else
    query_summary_f64(e, w, h, token0, n, a, b, q, g, side, token0 + n, NULL, NULL, NULL, sz, m);
}

void la_window_future(const la_engine e, int64_t token0, int64_t n, int64_t N, int64_t *lo,
                      int64_t *hi) {
  const int64_t W = e->cfg.window, C = e->C, end = token0 + n;
  *lo = *hi = end;
  if (W <= 0 || n <= 0 || end >= N) return;
  int64_t E = next_start_after(e, end - 1);
  if (E > N) E = N;
  if (E <= end) return;
  int64_t S = segment_start(e, end - 1), c0 = (S / C) * C;
  if (c0 < token0) c0 = token0;
  int64_t A = (c0 + W) / C * C;
  A = A < E ? A : E;
  A = A > end ? A : end;
  int64_t R = end - 1 + W < E ? end - 1 + W : E;
  *lo = A;
  *hi = R > A ? R : A;
}

/* Capacity of the window queue for tokens up to `reach` (§3): O(min(W, reach) / C) chunks. */
int la_window_queue_cap(const la_engine e, int64_t reach) {
  const int64_t span = e->cfg.window < reach ? e->cfg.window : reach;
  return (int)(span / e->C) + 8;
}

/* Every head through la_window_head: the forward (out) or the backward replay (g, dq, side). */
la_status la_window_heads(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, int64_t hlo, int64_t hhi, const void *hk,
                          const void *hv, const la_state *mid, void *out, const void *g,
                          void *dq, double *side, la_den_stats *stats) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int cap = la_window_queue_cap(e, token0 + n);
  la_status st = LA_OK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->T)
  for (int h = 0; h < e->H; h++) {
    la_status hs = LA_OK;
    la_window_head(e, &e->work[la_thread_id()], h, token0, n, q, k, v, hlo, hhi, hk, hv,
                   mid->sz + h * rsz, mid->m[h], out, g, dq, side, cap, &hs);
    if (hs != LA_OK) {
#pragma omp critical
      st = hs;
    }
  }
  la_engine_merge_stats(e, stats);
  return st;
}

la_status la_engine_apply_window(la_engine e, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, int64_t hlo, int64_t hhi,
                                 const void *hk, const void *hv, const la_state *mid, void *out,
                                 la_den_stats *stats) {
  if (e->cfg.mode != LA_CAUSAL || e->cfg.window <= 0 || n < 0 || hlo > hhi || hhi > token0 ||
      !mid || mid->heads != e->H || mid->r != e->r || mid->dv != e->dv)
    return LA_ERR_ARG;
  if (n == 0) return LA_OK;
  return la_window_heads(e, token0, n, q, k, v, hlo, hhi, hk, hv, mid, out, NULL, NULL, NULL,
                         stats);
}

la_status la_forward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                     void *out, la_den_stats *stats) {
  la_state st;
  la_status s = la_state_init(&st, e->H, e->r, e->dv);
  if (s != LA_OK) return s;
  if (e->cfg.mode == LA_BIDIRECTIONAL) s = la_engine_accumulate(e, 0, n, k, v, &st);
  if (s == LA_OK) s = la_engine_apply(e, 0, n, q, k, v, &st, out, stats);
  la_state_free(&st);
  return s;
}
