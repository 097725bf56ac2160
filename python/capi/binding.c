/* The flat C layer of the Python package, one process (binding.h; docs/design.md §5.4).
 * Everything here is a thin adapter over core.h, grad.h and baseline.h: it builds the
 * configuration from the CLI's spellings, packs a batch into segments (§3), checks the inputs
 * as the CLI does, and turns the denominator statistics into the CLI's verdict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#else
#define omp_get_max_threads() 1
#endif
#include "binding.h"
#include "linattn/baseline.h"
#include "linattn/grad.h"
#include "linattn/version.h"

#define LA_PY_ABI 3

int la_py_abi(void) { return LA_PY_ABI; }
int la_py_stats_len(void) { return LA_PY_STATS; }
const char *la_py_version(void) { return LA_VERSION_STRING; }
const char *la_py_error(void) { return la_error_message(); }

const char *la_py_map_names(void) {
  static char names[512];
  if (!names[0]) {
    size_t at = 0;
    for (int k = 0; k < LA_MAP_COUNT && at < sizeof names; k++)
      at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", k ? "," : "",
                             la_map_name((la_map_kind)k));
  }
  return names;
}

const char *la_py_isa(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
#endif
  return "generic";
}

int la_py_mode(const char *s, la_mode *m) {
  if (s && !strcmp(s, "causal")) *m = LA_CAUSAL;
  else if (s && !strcmp(s, "bidirectional")) *m = LA_BIDIRECTIONAL;
  else
    return la_error(LA_ERR_ARG, "mode '%s' is not causal or bidirectional", s ? s : "(null)");
  return LA_OK;
}

static int kernels_from(const char *s, la_kernel_choice *k) {
  if (!s || !strcmp(s, "auto")) *k = LA_KERNELS_AUTO;
  else if (!strcmp(s, "blas")) *k = LA_KERNELS_BLAS;
  else if (!strcmp(s, "avx512")) *k = LA_KERNELS_AVX512;
  else if (!strcmp(s, "avx2")) *k = LA_KERNELS_AVX2;
  else if (!strcmp(s, "generic")) *k = LA_KERNELS_GENERIC;
  else return la_error(LA_ERR_ARG, "kernels '%s' is not auto, avx512, avx2, generic or blas", s);
  return LA_OK;
}

int la_py_check_segments(const int64_t *seg, int64_t nseg, int64_t L) {
  if (!seg) return LA_OK;
  la_status st = la_segments_check(seg, nseg, L);
  return st == LA_OK ? LA_OK : la_error_prefix(LA_ERR_ARG, "segments: ");
}

int la_py_op_create(const char *map, int features, const char *mode, int normalize,
                    const char *den, int allow_signed, double scale, uint64_t seed,
                    int64_t window, int chunk, int threads, const char *kernels,
                    int reproducible, int f64, int heads, int dk, int dv, const double *proj,
                    int proj_m, int proj_shared, const double *decay, int decay_n,
                    int decay_retnet, int gated, la_py_op **out) {
  *out = NULL;
  la_error_clear();
  la_config cfg;
  la_config_default(&cfg);
  LA_CHECK(map && !la_map_from_name(map, &cfg.map), LA_ERR_ARG,
           "feature_map '%s' is not one of %s", map ? map : "(null)", la_py_map_names());
  LA_TRY(la_py_mode(mode, &cfg.mode));
  LA_TRY(la_config_set_denominator(&cfg, den));
  LA_TRY(kernels_from(kernels, &cfg.kernels));
  LA_CHECK(heads >= 1 && heads <= 4096, LA_ERR_SHAPE, "heads = %d is outside [1, 4096]", heads);
  LA_CHECK(dv >= 1 && dv <= LA_DIM_MAX, LA_ERR_SHAPE, "dv = %d is outside [1, %d]", dv, LA_DIM_MAX);
  cfg.features = proj ? proj_m : features;
  cfg.normalize = normalize != 0;
  cfg.allow_signed = allow_signed != 0;
  cfg.scale = scale;
  cfg.seed = seed;
  cfg.window = window;
  cfg.chunk = chunk;
  cfg.threads = threads;
  cfg.reproducible = reproducible != 0;
  cfg.decay = decay; /* decay= (docs/design.md §1.2): copied by la_engine_create */
  cfg.decay_n = decay ? decay_n : 0;
  cfg.decay_retnet = decay_retnet != 0;
  cfg.gates = gated; /* 0, LA_GATES_HEAD or LA_GATES_FEATURE; la_config_check checks it */
  LA_CHECK(isfinite(scale) && scale >= 0, LA_ERR_ARG, "scale must be finite and > 0 (got %g)", scale);
  LA_TRY(la_config_check(&cfg, dk));
  if (proj && !la_map_is_random(cfg.map))
    return la_error(LA_ERR_ARG, "projection: the %s map has no projection", la_map_name(cfg.map));
  la_py_op *op = calloc(1, sizeof *op);
  LA_CHECK(op, LA_ERR_NOMEM, "out of memory for the operator");
  op->cfg = cfg;
  op->dt = f64 ? LA_F64 : LA_F32;
  op->H = heads;
  op->dk = dk;
  op->dv = dv;
  la_status st = la_featmap_create(&cfg, heads, dk, &op->fm);
  if (st == LA_OK && proj) {
    for (int64_t i = 0; i < (int64_t)(proj_shared ? 1 : heads) * proj_m * dk && st == LA_OK; i++)
      if (!isfinite(proj[i]))
        st = la_error(LA_ERR_NONFINITE, "projection: entry %lld is not finite", (long long)i);
    if (st == LA_OK) st = la_featmap_set_projection(op->fm, proj, proj_m, proj_shared);
  }
  if (st == LA_OK) st = la_engine_create(&cfg, op->fm, op->dt, dv, &op->eng);
  if (st != LA_OK) {
    if (!la_error_message()[0]) la_error(st, "operator: %s", la_status_string(st));
    la_py_op_destroy(op);
    return st;
  }
  op->cfg.decay = NULL; /* the engine holds its copy; the caller's array goes away */
  op->r = la_featmap_width(op->fm);
  *out = op;
  return LA_OK;
}

int la_py_op_set_gates(la_py_op *op, const double *g) {
  la_error_clear();
  LA_CHECK(op, LA_ERR_ARG, "no operator");
  LA_CHECK(!g || op->cfg.gates, LA_ERR_ARG, "gates: this operator was created without gates");
  op->gates = g;
  return LA_OK;
}

int la_py_op_set_gates_grad(la_py_op *op, double *dg) {
  la_error_clear();
  LA_CHECK(op, LA_ERR_ARG, "no operator");
  LA_CHECK(!dg || op->cfg.gates, LA_ERR_ARG, "gates: this operator was created without gates");
  op->dgates = dg;
  return LA_OK;
}

/* The bound gates of a call of n packed rows in one process (tokens [0, n)). */
static la_status bind_gates(la_py_op *op, int64_t n) {
  if (!op->cfg.gates) return LA_OK;
  LA_CHECK(op->gates, LA_ERR_ARG, "gates: this operator takes log-gates [B, L, H%s] (gates=)",
           op->cfg.gates == LA_GATES_FEATURE ? ", r" : "");
  return la_engine_set_gates(op->eng, op->gates, 0, n);
}

void la_py_op_destroy(la_py_op *op) {
  if (!op) return;
  la_engine_destroy(&op->eng);
  la_featmap_destroy(&op->fm);
  free(op->seg);
  free(op);
}

int la_py_op_width(const la_py_op *op) { return op->r; }
const char *la_py_op_kernels(const la_py_op *op) { return la_engine_kernels(op->eng); }
int la_py_op_threads(const la_py_op *op) { return la_engine_threads(op->eng); }

int la_py_op_features(const la_py_op *op) {
  int m = 0;
  return la_featmap_projection(op->fm, &m) ? m : 0;
}

int la_py_op_projection(const la_py_op *op, double *buf, int64_t cap) {
  int m = 0;
  const double *om = la_featmap_projection(op->fm, &m);
  LA_CHECK(om, LA_ERR_ARG, "the %s map has no projection", la_map_name(op->cfg.map));
  const int64_t count = (int64_t)op->H * m * op->dk;
  LA_CHECK(cap >= count, LA_ERR_ARG, "projection buffer of %lld doubles < %lld", (long long)cap,
           (long long)count);
  memcpy(buf, om, sizeof(double) * (size_t)count);
  return LA_OK;
}

/* ---- checks and verdicts shared with binding_dist.c ---- */

int la_py_check_finite(const char *name, la_dtype dt, const void *x, int64_t n, int H, int d,
                       int64_t L, int64_t token0, int64_t batch0, int threads) {
  /* blocks of rows on the OpenMP threads (the check reads memory at one thread's bandwidth;
   * 64 MiB took 2.4 ms on one thread, docs/performance.md "Training through the Python
   * binding"); the first failing block names the first bad value */
  const int64_t blk = 1 << 14, nb = (n + blk - 1) / blk;
  int64_t first = nb;
#pragma omp parallel for schedule(static) reduction(min : first) if (nb > 1) \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (int64_t b = 0; b < nb; b++) {
    const int64_t r0 = b * blk, rn = n - r0 < blk ? n - r0 : blk;
    int64_t t;
    int h, c;
    const char *xb = (const char *)x + (size_t)r0 * H * d * la_dtype_size(dt);
    if (b < first && la_check_finite(dt, xb, rn, H, d, r0, &t, &h, &c) != LA_OK) first = b;
  }
  if (first == nb) return LA_OK;
  int64_t t;
  int h, c;
  const int64_t r0 = first * blk, rn = n - r0 < blk ? n - r0 : blk;
  la_check_finite(dt, (const char *)x + (size_t)r0 * H * d * la_dtype_size(dt), rn, H, d, r0,
                  &t, &h, &c);
  return la_error(LA_ERR_NONFINITE, "%s is not finite at (batch %lld, token %lld, head %d, column %d)",
                  name, (long long)(batch0 + t / L), (long long)(token0 + t % L), h, c);
}

int la_py_verdict(const la_py_op *op, const la_den_stats *st, int64_t L, const char *what) {
  if (op->cfg.normalize && st->violations > 0) {
    const char *pol = op->cfg.den_policy == LA_DEN_ERROR   ? "error"
                      : op->cfg.den_policy == LA_DEN_ADD   ? "add"
                      : op->cfg.den_policy == LA_DEN_CLAMP ? "clamp"
                                                           : "zero-empty";
    return la_error(LA_ERR_DENOMINATOR,
                    "%s: denominator policy '%s': %lld of %lld rows have a denominator %s; "
                    "first at (batch %lld, token %lld, head %d)",
                    what, pol, (long long)st->violations, (long long)st->rows,
                    op->cfg.den_policy == LA_DEN_ZERO_EMPTY ? "< 0 or non-finite"
                                                            : "<= 0 or non-finite",
                    (long long)(st->first_bad_token / L), (long long)(st->first_bad_token % L),
                    st->first_bad_head);
  }
  if (st->overflows > 0)
    return la_error(LA_ERR_OVERFLOW,
                    "%s: the unnormalized output overflows the %s range in %lld rows; first at "
                    "(batch %lld, token %lld, head %d)",
                    what, la_dtype_name(op->dt), (long long)st->overflows,
                    (long long)(st->first_overflow_token / L),
                    (long long)(st->first_overflow_token % L), st->first_overflow_head);
  return LA_OK;
}

void la_py_fill_stats(const la_den_stats *st, int64_t L, double *o) {
  if (!o) return;
  o[LA_PY_ST_MIN] = st->rows > 0 ? st->min : NAN;
  o[LA_PY_ST_MAX] = st->rows > 0 ? st->max : NAN;
  o[LA_PY_ST_MEDIAN] = la_den_stats_median(st);
  o[LA_PY_ST_ROWS] = (double)st->rows;
  o[LA_PY_ST_NONPOSITIVE] = (double)st->count_nonpositive;
  o[LA_PY_ST_SMALL] = (double)la_den_stats_count_small(st);
  o[LA_PY_ST_NONFINITE] = (double)st->count_nonfinite;
  o[LA_PY_ST_VIOLATIONS] = (double)st->violations;
  o[LA_PY_ST_BAD_BATCH] = st->first_bad_token >= 0 ? (double)(st->first_bad_token / L) : -1;
  o[LA_PY_ST_BAD_TOKEN] = st->first_bad_token >= 0 ? (double)(st->first_bad_token % L) : -1;
  o[LA_PY_ST_BAD_HEAD] = st->first_bad_token >= 0 ? st->first_bad_head : -1;
  o[LA_PY_ST_OVERFLOWS] = (double)st->overflows;
}

/* The engine's segments for a batch of B sequences of L tokens: the batch boundaries and the
 * caller's offsets in each entry (§3). None at all for one entry without segments. */
static int set_batch_segments(la_py_op *op, int64_t B, int64_t L, const int64_t *seg,
                              int64_t nseg) {
  LA_TRY(la_py_check_segments(seg, nseg, L));
  free(op->seg);
  op->seg = NULL;
  op->nseg = 0;
  if (B == 1 && !seg) return la_engine_set_segments(op->eng, NULL, 0);
  const int64_t per = seg ? nseg - 1 : 1; /* segments per entry */
  op->seg = malloc(sizeof(int64_t) * (size_t)(B * per + 1));
  LA_CHECK(op->seg, LA_ERR_NOMEM, "out of memory for the offsets of %lld sequences", (long long)B);
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < per; s++) op->seg[op->nseg++] = b * L + (seg ? seg[s] : 0);
  op->seg[op->nseg++] = B * L;
  return la_engine_set_segments(op->eng, op->seg, op->nseg);
}

/* The engine checks the inputs in its own pass (la_engine_set_check_finite) where it can. */
static int check_in_engine(la_py_op *op) {
  if (la_engine_set_check_finite(op->eng, 1) == LA_OK) return 1;
  la_error_clear();
  return 0;
}
static int check_qkv(const la_py_op *op, int64_t n, int64_t L, const void *q, const void *k,
                     const void *v) {
  LA_TRY(la_py_check_finite("q", op->dt, q, n, op->H, op->dk, L, 0, 0, op->cfg.threads));
  LA_TRY(la_py_check_finite("k", op->dt, k, n, op->H, op->dk, L, 0, 0, op->cfg.threads));
  return la_py_check_finite("v", op->dt, v, n, op->H, op->dv, L, 0, 0, op->cfg.threads);
}
static int check_g(const la_py_op *op, int64_t n, int64_t L, const void *g) {
  return la_py_check_finite("the output's gradient", op->dt, g, n, op->H, op->dv, L, 0, 0,
                            op->cfg.threads);
}
/* After the engine's LA_ERR_NONFINITE: our scan's status, which names the culprit; LA_OK
 * means this scan found nothing, so the engine's status stands. */
static int culprit(int scan) {
  return scan != LA_OK ? scan : LA_ERR_NONFINITE;
}

static int culprit_bwd(const la_py_op *op, int64_t n, int64_t L, const void *q, const void *k,
                       const void *v, const void *g) {
  int c = check_g(op, n, L, g);
  if (c == LA_OK) c = check_qkv(op, n, L, q, k, v);
  return culprit(c);
}

static int check_call(const la_py_op *op, int64_t B, int64_t L) {
  LA_CHECK(op && op->eng, LA_ERR_ARG, "the operator was destroyed");
  LA_CHECK(B >= 1 && L >= 1, LA_ERR_SHAPE, "batch %lld and length %lld must be >= 1",
           (long long)B, (long long)L);
  LA_CHECK(B <= INT64_MAX / L, LA_ERR_SHAPE, "batch x length overflows");
  return LA_OK;
}

int64_t la_py_tape_size(const la_py_op *op, int64_t B, int64_t L) {
  if (!op || !op->eng || B < 1 || L < 1 || B > INT64_MAX / L) return 0;
  return (int64_t)la_tape_size(op->eng, B * L);
}

int la_py_forward(la_py_op *op, int64_t B, int64_t L, const void *q, const void *k,
                  const void *v, void *out, const int64_t *seg, int64_t nseg, double *stats,
                  void *tape) {
  la_error_clear();
  LA_TRY(check_call(op, B, L));
  const int64_t n = B * L;
  /* causal without a window: the engine checks the rows as it reads them (grad.h), and a
   * scan of ours only runs to name the culprit; else our scans run first */
  const int fused = check_in_engine(op);
  if (!fused) LA_TRY(check_qkv(op, n, L, q, k, v));
  LA_TRY(set_batch_segments(op, B, L, seg, nseg));
  LA_TRY(bind_gates(op, n));
  la_den_stats st;
  LA_TRY(la_den_stats_init(&st));
  la_status s = tape ? la_forward_taped(op->eng, n, q, k, v, out, tape, &st)
                     : la_forward(op->eng, n, q, k, v, out, &st);
  if (s == LA_ERR_NONFINITE && fused) s = culprit(check_qkv(op, n, L, q, k, v));
  if (s == LA_OK) s = la_py_verdict(op, &st, L, "forward");
  la_py_fill_stats(&st, L, stats);
  la_den_stats_free(&st);
  return s;
}

int la_py_backward(la_py_op *op, int64_t B, int64_t L, const void *q, const void *k,
                   const void *v, const void *g, void *dq, void *dk, void *dv,
                   const int64_t *seg, int64_t nseg, double *stats, const void *out,
                   const void *tape) {
  la_error_clear();
  LA_TRY(check_call(op, B, L));
  const int64_t n = B * L;
  const int fused = check_in_engine(op); /* as in la_py_forward */
  if (!fused) LA_TRY(check_g(op, n, L, g));
  LA_TRY(set_batch_segments(op, B, L, seg, nseg));
  LA_TRY(bind_gates(op, n));
  if (op->cfg.gates) LA_TRY(la_engine_set_gates_grad(op->eng, op->dgates));
  if (tape) {
    la_status s = la_backward_taped(op->eng, n, q, k, v, g, out, tape, dq, dk, dv);
    if (s == LA_ERR_NONFINITE && fused) s = culprit_bwd(op, n, L, q, k, v, g);
    return s;
  }
  la_den_stats st;
  LA_TRY(la_den_stats_init(&st));
  la_status s = la_backward(op->eng, n, q, k, v, g, dq, dk, dv, &st);
  if (s == LA_ERR_NONFINITE && fused) s = culprit_bwd(op, n, L, q, k, v, g);
  if (s == LA_OK) s = la_py_verdict(op, &st, L, "backward");
  la_py_fill_stats(&st, L, stats);
  la_den_stats_free(&st);
  return s;
}

/* ---- exact softmax (baseline.h) ---- */

static int softmax_mask(const char *mode, int64_t window, int64_t B, int64_t L,
                        const int64_t *seg, int64_t nseg, la_softmax_mask *mask, int64_t **own) {
  *own = NULL;
  memset(mask, 0, sizeof *mask);
  LA_TRY(la_py_mode(mode, &mask->mode));
  LA_CHECK(window >= 0, LA_ERR_ARG, "window must be >= 1");
  LA_CHECK(!window || mask->mode == LA_CAUSAL, LA_ERR_ARG,
           "window: a sliding window is a causal mask (refused in bidirectional mode)");
  LA_TRY(la_py_check_segments(seg, nseg, L));
  mask->window = window;
  if (B == 1 && !seg) return LA_OK;
  const int64_t per = seg ? nseg - 1 : 1;
  int64_t *o = malloc(sizeof(int64_t) * (size_t)(B * per + 1)), c = 0;
  LA_CHECK(o, LA_ERR_NOMEM, "out of memory for the offsets of %lld sequences", (long long)B);
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < per; s++) o[c++] = b * L + (seg ? seg[s] : 0);
  o[c++] = B * L;
  mask->seg = o;
  mask->nseg = c;
  *own = o;
  return LA_OK;
}

static int softmax_shape(int64_t B, int64_t L, int heads, int dk, int dv, double scale) {
  LA_CHECK(B >= 1 && L >= 1 && B <= INT64_MAX / L, LA_ERR_SHAPE,
           "batch %lld and length %lld must be >= 1", (long long)B, (long long)L);
  LA_CHECK(heads >= 1 && dk >= 1 && dv >= 1, LA_ERR_SHAPE, "heads, dk and dv must be >= 1");
  LA_CHECK(isfinite(scale) && scale > 0, LA_ERR_ARG, "scale must be finite and > 0 (got %g)", scale);
  return LA_OK;
}

int la_py_softmax_forward(int f64, const char *mode, double scale, int64_t window,
                          int threads, int64_t B, int64_t L, int heads, int dk, int dv,
                          const void *q, const void *k, const void *v, void *out,
                          const int64_t *seg, int64_t nseg) {
  la_error_clear();
  LA_TRY(softmax_shape(B, L, heads, dk, dv, scale));
  const la_dtype dt = f64 ? LA_F64 : LA_F32;
  const int64_t n = B * L;
  LA_TRY(la_py_check_finite("q", dt, q, n, heads, dk, L, 0, 0, threads));
  LA_TRY(la_py_check_finite("k", dt, k, n, heads, dk, L, 0, 0, threads));
  LA_TRY(la_py_check_finite("v", dt, v, n, heads, dv, L, 0, 0, threads));
  la_softmax_mask mask;
  int64_t *own;
  LA_TRY(softmax_mask(mode, window, B, L, seg, nseg, &mask, &own));
  la_softmax_state s;
  la_status st = la_softmax_state_init(&s, n, heads, dv);
  if (st == LA_OK) {
    st = la_softmax_partial_mask(&s, dt, dk, scale, &mask, 0, q, 0, n, k, v, threads);
    if (st == LA_OK) st = la_softmax_finish(&s, dt, out);
    la_softmax_state_free(&s);
  }
  free(own);
  return st;
}

int la_py_softmax_backward(const char *mode, double scale, int64_t window, int threads,
                           int64_t B, int64_t L, int heads, int dk, int dv, const double *q,
                           const double *k, const double *v, const double *g, double *dq,
                           double *dk_out, double *dv_out, const int64_t *seg, int64_t nseg) {
  la_error_clear();
  LA_TRY(softmax_shape(B, L, heads, dk, dv, scale));
  const int64_t n = B * L;
  LA_TRY(la_py_check_finite("the output's gradient", LA_F64, g, n, heads, dv, L, 0, 0, threads));
  la_softmax_mask mask;
  int64_t *own;
  LA_TRY(softmax_mask(mode, window, B, L, seg, nseg, &mask, &own));
  la_softmax_state s;
  double *out = NULL, *D = NULL;
  la_status st = la_softmax_state_init(&s, n, heads, dv);
  if (st == LA_OK) {
    out = malloc(sizeof(double) * (size_t)n * heads * dv);
    D = malloc(sizeof(double) * (size_t)n * heads);
    if (!out || !D) st = la_error(LA_ERR_NOMEM, "softmax backward: out of memory for %lld rows", (long long)n);
    /* the forward state (m, l) again, in float64, then FlashAttention-2's backward */
    if (st == LA_OK)
      st = la_softmax_partial_mask(&s, LA_F64, dk, scale, &mask, 0, q, 0, n, k, v, threads);
    if (st == LA_OK) st = la_softmax_finish(&s, LA_F64, out);
    if (st == LA_OK) st = la_softmax_delta(n, heads, dv, out, g, D);
    if (st == LA_OK) {
      memset(dq, 0, sizeof(double) * (size_t)n * heads * dk);
      memset(dk_out, 0, sizeof(double) * (size_t)n * heads * dk);
      memset(dv_out, 0, sizeof(double) * (size_t)n * heads * dv);
      st = la_softmax_backward_partial(&s, D, dk, scale, &mask, 0, q, g, 0, n, k, v, dq,
                                       dk_out, dv_out, threads);
    }
    la_softmax_state_free(&s);
  }
  free(out);
  free(D);
  free(own);
  return st;
}
