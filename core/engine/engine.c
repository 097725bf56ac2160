/* The engine object, docs/design.md §5.1: plan once (dtype, kernels, chunk, threads), with
 * per-thread workspaces sized here so that no kernel allocates; accessors; statistics. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "engine_internal.h"
#include "simd.h"
#include "la_alloc.h"

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

/* The one declaration of OpenBLAS's thread setter (weak: another BLAS lacks it). */
extern void openblas_set_num_threads(int) __attribute__((weak));
void la_blas_set_threads(int n) {
  if (openblas_set_num_threads) openblas_set_num_threads(n > 0 ? n : 1);
}
void la_blas_single_thread(void) { la_blas_set_threads(1); }

static void *xalloc(size_t bytes) { return la_aligned_alloc(64, bytes ? bytes : 64); }

/* OpenMP threads of a plan: cfg->threads, or OpenMP's default. */
int la_plan_threads(const la_config *cfg) {
#ifdef _OPENMP
  return cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
#else
  (void)cfg;
  return 1;
#endif
}

/* The bytes la_engine_create allocates, term by term as it allocates them (keep the two in
 * step; docs/design.md §4.8), plus the window queues (la_window_queue_cap for tokens up to
 * `reach`). Per thread, in elements of the working precision (es bytes):
 *   phiq, phik C r; vp, o, ab C (dv+1); A C^2; sf, tmp r (dv+1); phif, dphi 2C r;
 *   vf 2C (dv+1); Af 2C^2; kT r C; zf r;
 * per-feature gates: gf 2 C r + r doubles;
 * in doubles: aq, ak, mseg C; af, ak2 2C; wsz, wsz2 r (dv+1); segi C ints; tb max(r, dv+1)
 * max(2C, dv+1) elements (float32: counted whether or not the AVX-512 kernels run); the
 * denominator histogram LA_DEN_HIST_BINS uint64; 64 bytes of alignment per allocation.
 * Once: the partial states (H Bmax heads), the scratch state, and every head's summary in the
 * working precision (H r (dv+1) elements: the bidirectional apply, the causal head groups). */
size_t la_engine_plan_bytes(const la_config *cfg, int heads, int r, int dv, la_dtype dt,
                            int64_t reach) {
  const size_t T = (size_t)la_plan_threads(cfg), es = la_dtype_size(dt), R = (size_t)r;
  const size_t C = (size_t)(cfg->chunk > 0 ? cfg->chunk : la_default_chunk(r, dv));
  const size_t dv1 = (size_t)dv + 1, NALLOC = 26;
  size_t per = es * (2 * C * R + 3 * C * dv1 + C * C + 2 * R * dv1 + 4 * C * R + 2 * C * dv1 +
                     2 * C * C + R * C + R);
  per += sizeof(double) * (3 * C + 4 * C + 2 * R * dv1) + sizeof(int) * C;
  per += es * (R > dv1 ? R : dv1) * (2 * C > dv1 ? 2 * C : dv1);
  per += sizeof(uint64_t) * LA_DEN_HIST_BINS + 64 * NALLOC + sizeof(la_work);
  if (cfg->gates == LA_GATES_FEATURE) per += sizeof(double) * (2 * C * R + R) + 64; /* gf */
  if (cfg->window > 0 && reach > 0) {
    const int64_t span = cfg->window < reach ? cfg->window : reach;
    per += la_wq_bytes((int)(span / (int64_t)C) + 8, R * dv1);
    if (cfg->gates) per += sizeof(double) * (((size_t)span / C + 8) * C + 2) + 64; /* wcum */
  }
  const size_t Bmax = (size_t)heads >= T ? 1 : (T + (size_t)heads - 1) / (size_t)heads;
  const size_t part = Bmax * (size_t)heads * (sizeof(double) * (R * dv1 + 1) + sizeof(int));
  return T * per + part + sizeof(double) * R * dv1 + es * (size_t)heads * R * dv1 +
         sizeof(struct la_engine_s);
}

static void work_free(la_work *w) {
  free(w->phiq); free(w->phik); free(w->vp); free(w->A); free(w->o); free(w->sf);
  free(w->tmp); free(w->aq); free(w->ak); free(w->segi); free(w->mseg);
  free(w->wsz); free(w->wsz2); free(w->phif); free(w->vf); free(w->af); free(w->Af);
  free(w->ab); free(w->dphi); free(w->ak2); free(w->gc); free(w->gf); free(w->kT); free(w->zf); free(w->tb);
  la_wq_free(&w->wq);
  free(w->wcum);
  la_den_stats_free(&w->stats);
}

/* --decay (§1.2): gamma_h from la_config (one value, one per head, or RetNet's schedule),
 * checked, and the tables ln gamma_h and gamma_h^d, d = 0..C. No table when every gamma_h is 1:
 * the undecayed operator's own path, bitwise. cfg->decay is not kept. */
static la_status decay_table(la_engine e) {
  const la_config *c = &e->cfg;
  e->gated = c->gates != 0;
  e->gate_w = c->gates == LA_GATES_FEATURE ? e->r : 1;
  /* la_config_check's refusals again: a caller may plan without it, and the reverse passes
   * and the exact paths have no gates (docs/design.md §1.2 "Gates") */
  LA_CHECK(!e->gated || (c->mode == LA_CAUSAL && !c->reproducible),
           c->mode == LA_CAUSAL ? LA_ERR_UNSUPPORTED : LA_ERR_ARG,
           "la_engine_create: --gates are causal, and not yet with --reproducible "
           "(docs/design.md §1.2 \"Gates\")");
  if (!c->decay && !c->decay_retnet && !e->gated) return LA_OK;
  if (!c->decay && !c->decay_retnet) { /* --gates alone: the decayed paths with ln gamma = 0 */
    e->dlog = la_calloc((size_t)e->H, sizeof(double));
    e->dpow = la_malloc(sizeof(double) * (size_t)e->H * (size_t)(e->C + 1));
    LA_CHECK(e->dlog && e->dpow, LA_ERR_NOMEM, "la_engine_create: out of memory for the decay table");
    for (size_t i = 0; i < (size_t)e->H * (size_t)(e->C + 1); i++) e->dpow[i] = 1.0;
    return LA_OK;
  }
  LA_CHECK(c->decay_retnet || c->decay_n == 1 || c->decay_n == e->H, LA_ERR_ARG,
           "--decay: a list of %d values for %d heads (give one value, or one per head)",
           c->decay_n, e->H);
  int any = 0;
  for (int h = 0; h < e->H; h++) {
    const double g = c->decay_retnet ? 1.0 - ldexp(1.0, -5 - h) : c->decay[c->decay_n == 1 ? 0 : h];
    LA_CHECK(g > 0.0 && g <= 1.0, LA_ERR_ARG, "--decay: gamma = %g (head %d) is outside (0, 1]",
             g, h);
    any |= g < 1.0;
  }
  if (!any && !e->gated) {
    e->cfg.decay = NULL; /* the caller's array is not kept */
    return LA_OK;
  }
  e->dlog = la_malloc(sizeof(double) * (size_t)e->H);
  e->dpow = la_malloc(sizeof(double) * (size_t)e->H * (size_t)(e->C + 1));
  LA_CHECK(e->dlog && e->dpow, LA_ERR_NOMEM, "la_engine_create: out of memory for the decay table");
  for (int h = 0; h < e->H; h++) {
    const double g = c->decay_retnet ? 1.0 - ldexp(1.0, -5 - h) : c->decay[c->decay_n == 1 ? 0 : h];
    e->dlog[h] = log(g);
    for (int d = 0; d <= e->C; d++) e->dpow[(size_t)h * (e->C + 1) + d] = exp(d * e->dlog[h]);
  }
  e->cfg.decay = NULL; /* the caller's array is not kept */
  return LA_OK;
}

la_status la_engine_create(const la_config *cfg, const la_featmap fm, la_dtype dt, int dv,
                           la_engine *out) {
  *out = NULL;
  LA_CHECK(dt == LA_F32 || dt == LA_F64, LA_ERR_ARG, "la_engine_create: dtype %s is not f32 or f64",
           la_dtype_name(dt));
  LA_CHECK(dv >= 1 && dv <= LA_DIM_MAX, LA_ERR_ARG, "la_engine_create: dv = %d is outside [1, %d]",
           dv, LA_DIM_MAX);
  LA_CHECK(cfg->chunk >= 0 && cfg->chunk <= LA_CHUNK_MAX, LA_ERR_ARG,
           "la_engine_create: chunk = %d is outside [%d, %d] (0: tuned)", cfg->chunk,
           LA_CHUNK_MIN, LA_CHUNK_MAX);
  LA_CHECK(cfg->threads >= 0, LA_ERR_ARG, "la_engine_create: threads = %d < 0", cfg->threads);
  const la_simd *simd = NULL;
  LA_TRY(la_simd_choose(cfg->kernels, &simd));
  la_engine e = la_calloc(1, sizeof *e);
  if (!e) return la_error(LA_ERR_NOMEM, "la_engine_create: out of memory");
  e->cfg = *cfg;
  e->fm = fm;
  e->dt = dt;
  e->H = fm->heads;
  e->dk = fm->dk;
  e->r = fm->r;
  e->dv = dv;
  e->C = cfg->chunk > 0 ? cfg->chunk : la_default_chunk(fm->r, dv);
  e->T = la_plan_threads(cfg);
  e->stabilized = la_map_is_stabilized(fm->kind);
  e->simd = dt == LA_F32 ? simd : NULL;
  e->kern = dt == LA_F32 ? &la_kernels_f32 : &la_kernels_f64;
  la_blas_single_thread();
  size_t es = la_dtype_size(dt), C = (size_t)e->C, r = (size_t)e->r, dv1 = (size_t)dv + 1;
  e->work = la_calloc((size_t)e->T, sizeof(la_work));
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
    w->wsz2 = xalloc(sizeof(double) * r * dv1);
    /* op(B) = B^T of the chunk GEMMs is at most max(r, dv+1) x max(2C, dv+1): r x (dv+1)
     * (dphi = AB S^T), 2C x r (the window's and backward's phif), C x r and C x (dv+1) */
    w->tb_cap = (r > dv1 ? r : dv1) * (2 * C > dv1 ? 2 * C : dv1);
    const int use_tb = e->simd || e->dt == LA_F64; /* gemm.c's two users of tb */
    w->tb = use_tb ? xalloc(es * w->tb_cap) : NULL;
    if (!use_tb) w->tb_cap = 0;
    w->phif = xalloc(es * 2 * C * r);
    w->vf = xalloc(es * 2 * C * dv1);
    w->af = xalloc(sizeof(double) * 2 * C);
    w->Af = xalloc(es * 2 * C * C);
    w->ab = xalloc(es * C * dv1);
    w->dphi = xalloc(es * 2 * C * r);
    w->ak2 = xalloc(sizeof(double) * 2 * C);
    w->gc = xalloc(sizeof(double) * 3 * C);
    w->gf = cfg->gates == LA_GATES_FEATURE ? xalloc(sizeof(double) * (2 * C * r + r)) : NULL;
    w->kT = xalloc(es * r * C);
    w->zf = xalloc(es * r);
    if (!w->segi || !w->mseg || !w->wsz || !w->wsz2 || (w->tb_cap && !w->tb) || !w->phif || !w->vf || !w->af || !w->Af || !w->ab ||
        !w->dphi || !w->ak2 || !w->gc || (cfg->gates == LA_GATES_FEATURE && !w->gf) || !w->kT || !w->zf)
      goto nomem;
    if (!w->phiq || !w->phik || !w->vp || !w->A || !w->o || !w->sf || !w->tmp || !w->aq ||
        !w->ak || la_den_stats_init(&w->stats) != LA_OK)
      goto nomem;
  }
  const la_status ds = decay_table(e);
  if (ds != LA_OK) {
    la_engine_destroy(&e);
    return ds;
  }
  e->Bmax = e->H >= e->T ? 1 : (e->T + e->H - 1) / e->H;
  if (la_state_init(&e->part, e->H * e->Bmax, e->r, dv) != LA_OK) goto nomem;
  if (e->gate_w > 1 && (la_state_init(&e->hst, e->H, e->r, dv) != LA_OK ||
                        la_state_init(&e->rows, e->H * e->r, 1, dv) != LA_OK))
    goto nomem;
  e->scratch = la_malloc(sizeof(double) * r * dv1);
  e->sfall = la_malloc(es * (size_t)e->H * r * dv1);
  if (!e->scratch || !e->sfall) goto nomem;
  *out = e;
  return LA_OK;
nomem:;
  const int T = e->T;
  la_engine_destroy(&e);
  return la_error(LA_ERR_NOMEM, "la_engine_create: out of memory for the per-thread workspaces "
                  "(chunk %d, r %d, dv %d, %d threads)", (int)C, (int)r, dv, T);
}

la_expv_fn la_engine_expv(const la_engine e) {
  const la_simd *t = e->dt == LA_F32 ? e->simd : e->fm->simd; /* float64: the maps' table */
  return t ? t->exp_f64 : NULL;
}

int la_engine_carve(la_engine e, const size_t *bytes, int n, void **out) {
  size_t tot = 0;
  for (int i = 0; i < n; i++) tot += (bytes[i] + 63) & ~(size_t)63;
  if (tot > e->carve_cap) {
    free(e->carve);
    e->carve = la_aligned_alloc(64, tot);
    e->carve_cap = e->carve ? tot : 0;
  }
  char *p = e->carve;
  for (int i = 0; i < n; i++) {
    out[i] = p && bytes[i] ? p : NULL;
    if (p) p += (bytes[i] + 63) & ~(size_t)63;
  }
  return p != NULL || tot == 0;
}

void la_engine_destroy(la_engine *pe) {
  if (!pe || !*pe) return;
  la_engine e = *pe;
  if (e->work)
    for (int t = 0; t < e->T; t++) work_free(&e->work[t]);
  free(e->work);
  la_state_free(&e->part);
  la_state_free(&e->hst);
  la_state_free(&e->rows);
  free(e->carve);
  free(e->scratch);
  free(e->sfall);
  free(e->dlog);
  free(e->dpow);
  free(e);
  *pe = NULL;
}

int la_engine_chunk(const la_engine e) { return e->C; }

const char *la_engine_kernels(const la_engine e) {
  const la_simd *t = e->dt == LA_F32 ? e->simd : e->fm->simd; /* float64: the maps' table */
  return t ? t->name : "blas";
}
void la_engine_shape(const la_engine e, int *heads, int *r, int *dv) {
  *heads = e->H;
  *r = e->r;
  *dv = e->dv;
}
la_mode la_engine_mode(const la_engine e) { return e->cfg.mode; }
la_dtype la_engine_dtype(const la_engine e) { return e->dt; }
int64_t la_engine_window(const la_engine e) { return e->cfg.window; }
int la_engine_reproducible(const la_engine e) { return e->cfg.reproducible; }
int la_engine_input_dim(const la_engine e) { return e->dk; }
int la_engine_decayed(const la_engine e) { return e->dlog != NULL; }
double la_engine_decay(const la_engine e, int h) {
  return e->dlog && h >= 0 && h < e->H ? exp(e->dlog[h]) : 1.0;
}
double la_engine_log_decay(const la_engine e, int h) {
  return e->dlog && h >= 0 && h < e->H ? e->dlog[h] : 0.0;
}
int la_engine_stabilized(const la_engine e) { return e->stabilized; }
int la_engine_gated(const la_engine e) { return e && e->gated; }

const double *la_engine_gates(const la_engine e, int64_t *token0, int64_t *n) {
  *token0 = e && e->gated ? e->gate0 : 0;
  *n = e && e->gated && e->gates ? e->gate_n : 0;
  return e && e->gated ? e->gates : NULL;
}

/* Whether every g[i] is finite and <= 0: a pass without branches (it vectorizes), the
 * engine's threads on slices of it (per-feature gates are the largest input, §1.2). */
static int gates_all_ok(const la_engine e, const double *g, size_t n) {
  int ok = 1;
#pragma omp parallel for schedule(static) reduction(& : ok) num_threads(e->T) if (n > (1u << 20))
  for (size_t i = 0; i < n; i++) ok &= (g[i] <= 0.0) & (g[i] >= -DBL_MAX);
  (void)e; /* read by the pragma only (a build without OpenMP) */
  return ok;
}

la_status la_engine_set_gates(la_engine e, const double *g, int64_t token0, int64_t n) {
  LA_CHECK(e, LA_ERR_ARG, "la_engine_set_gates: no engine");
  LA_CHECK(e->gated, LA_ERR_ARG,
           "la_engine_set_gates: the engine was not planned with gates (la_config.gates)");
  LA_CHECK(token0 >= 0 && n >= 0 && (g || n == 0), LA_ERR_ARG,
           "la_engine_set_gates: tokens [%lld, +%lld) with %s", (long long)token0,
           (long long)n, g ? "values" : "no values");
  const int gw = e->gate_w;
  if (gates_all_ok(e, g, (size_t)n * e->H * gw)) {
    e->gates = g, e->gate0 = token0, e->gate_n = n;
    return LA_OK;
  }
  for (int64_t t = 0; t < n; t++) /* the first one that is not, for the reason */
    for (int h = 0; h < e->H; h++)
      for (int f = 0; f < gw; f++) {
        const double x = g[(t * e->H + h) * gw + f];
        if (isfinite(x) && x <= 0.0) continue;
        char feat[40] = "";
        if (gw > 1) snprintf(feat, sizeof feat, ", feature %d", f);
        return la_error(isfinite(x) ? LA_ERR_ARG : LA_ERR_NONFINITE,
                        "log-gate %g at (token %lld, head %d%s): log-gates must be finite and "
                        "<= 0 (a gate e^g > 1 would grow the state; docs/design.md §1.2)", x,
                        (long long)(token0 + t), h, feat);
      }
  e->gates = g, e->gate0 = token0, e->gate_n = n;
  return LA_OK;
}

la_status la_engine_gates_cover(const la_engine e, int64_t token0, int64_t n, const char *fn) {
  if (!e->gated || n == 0) return LA_OK;
  LA_CHECK(e->gates && token0 >= e->gate0 && token0 + n <= e->gate0 + e->gate_n, LA_ERR_ARG,
           "%s: the log-gates of tokens [%lld, %lld) were not given (la_engine_set_gates holds "
           "[%lld, %lld))", fn, (long long)token0, (long long)(token0 + n), (long long)e->gate0,
           (long long)(e->gate0 + (e->gates ? e->gate_n : 0)));
  return LA_OK;
}

double la_block_log_decay(const la_engine e, int h, int64_t token0, int64_t n) {
  if (!e->gated) return (double)n * e->dlog[h];
  double s = 0.0;
  const double *g = e->gates + (token0 - e->gate0) * e->H + h;
  for (int64_t t = 0; t < n; t++) s += e->dlog[h] + g[t * e->H];
  return s;
}
int la_engine_threads(const la_engine e) { return e->T; }
int la_config_threads(const la_config *cfg) { return la_plan_threads(cfg); }

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
    la_den_stats_reset(&e->work[t].stats); /* keeps its histogram: nothing to allocate here */
  }
}

la_status la_engine_take_nonfinite(la_engine e) {
  int seen = 0;
  for (int t = 0; t < e->T; t++) {
    seen |= e->work[t].nonfinite;
    e->work[t].nonfinite = 0;
  }
  return seen ? la_error(LA_ERR_NONFINITE, "a non-finite value in the inputs (q, k, v or the "
                                           "output's gradient)")
              : LA_OK;
}

la_status la_engine_set_check_finite(la_engine e, int on) {
  LA_CHECK(e, LA_ERR_ARG, "la_engine_set_check_finite: no engine");
  LA_CHECK(!on || (e->cfg.mode == LA_CAUSAL && e->cfg.window <= 0), LA_ERR_UNSUPPORTED,
           "la_engine_set_check_finite: only causal engines without a window read every row "
           "through the checked path");
  e->check_finite = on != 0;
  for (int t = 0; t < e->T; t++) e->work[t].nonfinite = 0;
  return LA_OK;
}

la_status la_engine_reserve_queues(la_engine e, int cap) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const size_t nc = (size_t)cap * e->C + 2; /* tokens a chunk's window reaches (wcum) */
  for (int t = 0; t < e->T; t++) {
    la_work *w = &e->work[t];
    LA_CHECK(la_wq_reserve(&w->wq, cap, rsz) == 0, LA_ERR_NOMEM,
             "window queue: out of memory for %d summaries of %zu doubles per thread", cap, rsz);
    if (e->gated && w->wcum_cap < nc) {
      free(w->wcum);
      w->wcum = la_malloc(sizeof(double) * nc);
      w->wcum_cap = w->wcum ? nc : 0;
      LA_CHECK(w->wcum, LA_ERR_NOMEM, "window: out of memory for the cumulative log-gates of "
               "%zu tokens per thread", nc);
    }
  }
  return LA_OK;
}

la_status la_engine_state_ok(const la_engine e, const la_state *s, const char *fn,
                             const char *arg) {
  LA_CHECK(s, LA_ERR_ARG, "%s: %s is NULL", fn, arg);
  if (la_gla_row_form(e, s)) return LA_OK; /* per-feature gates' row form (gla_rows.c) */
  LA_CHECK(s->heads == e->H && s->r == e->r && s->dv == e->dv, LA_ERR_ARG,
           "%s: %s has shape (heads %d, r %d, dv %d), the engine (%d, %d, %d)%s", fn, arg,
           s->heads, s->r, s->dv, e->H, e->r, e->dv,
           e->gate_w > 1 ? " or, in row form, (H r, 1, dv) (la_engine_state_init)" : "");
  return LA_OK;
}

int la_engine_gate_width(const la_engine e) { return e->gate_w; }

la_status la_engine_state_init(const la_engine e, la_state *s) {
  return e->gate_w > 1 ? la_state_init(s, e->H * e->r, 1, e->dv) : la_state_init(s, e->H, e->r, e->dv);
}
