/* `linattn bench` (CONTRACT.md): times the linear operator on the synthetic workload, and
 * optionally the exact quadratic baselines (softmax ring, PBLAS) and this machine's GEMM rate,
 * and writes one CSV row per measurement. Times are compute only: barrier, MPI_Wtime around
 * the call, max over ranks, best of --repeat. Inputs are generated in memory beforehand.
 *
 * Useful flops (the gflops column):
 *   linear:           la_useful_flops (CONTRACT.md): N H (4 r dv + 4 r) + 2 N H dk r for each
 *                     of q and k with the random maps;
 *   softmax, pblas:   2 (dk + dv) H pairs, pairs = N^2 (bidirectional) or N (N+1) / 2 (causal):
 *                     the two GEMMs on the scores a query may read; exp, max and sums are not
 *                     counted. PBLAS computes all N^2 scores in causal mode too (it masks), so
 *                     its causal gflops understate the work it does by half.
 *   sgemm, dgemm:     2 s^3 for one s x s product (--gemm-probe). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cblas.h>
#include "bench.h"
#include "cli.h"
#include "softmax_ring.h"
#include "linattn/linattn.h"
#include "linattn/report.h"

extern void openblas_set_num_threads(int) __attribute__((weak));

#define LA_LIST_MAX 64

typedef struct {
  int64_t n[LA_LIST_MAX];
  int nn;
  int features[LA_LIST_MAX], nf;
  int threads[LA_LIST_MAX], nt;
  la_mode modes[2];
  int nm;
  la_map_kind maps[LA_MAP_COUNT];
  int nmaps;
  int heads, dk, dv, repeat, chunk, gemm_size, pblas_nb;
  int64_t pblas_panel;
  la_dtype dt;
  int softmax, pblas, linear, gemm_probe, check, force, help;
  int64_t baseline_max_n;
  uint64_t seed;
  const char *csv;
} la_bopts;

static void bench_help(void) {
  printf(
      "usage: linattn bench [options]\n"
      "\n"
      "Times the feature-map (linear) operator on the built-in synthetic workload, and the\n"
      "exact quadratic baselines, and writes one CSV row per measurement (to stdout, and to\n"
      "--csv F). Columns: impl (linear | softmax | pblas | sgemm | dgemm | k512gemm), mode, map, features,\n"
      "r, n, heads, dk, dv, dtype, ranks, threads, chunk, repeat, seconds, gflops,\n"
      "tokens_per_s, useful_flops, check_err. seconds is the compute time (max over ranks,\n"
      "best of --repeat); inputs are generated in memory first and are not timed.\n"
      "\n"
      "Workload (lists are comma-separated; every combination is timed):\n"
      "  --n LIST                 sequence lengths (default 65536)\n"
      "  --heads H --dk D --dv D  heads and widths (default 4, 64, 64)\n"
      "  --modes LIST             causal, bidirectional (default causal)\n"
      "  --feature-maps LIST      elu1, relu, favor+, favor+orf, favor-hyp (default elu1); the\n"
      "                           signed maps and precomputed are not timed here\n"
      "  --features LIST          m for the random maps (default 256); r = m, 2m for favor-hyp\n"
      "  --dtype f32|f64          precision of linear and softmax (default f32); pblas is f64\n"
      "  --seed S                 synthetic data and projections (default 0)\n"
      "Execution:\n"
      "  --threads LIST           OpenMP threads per rank (default OMP_NUM_THREADS)\n"
      "  --chunk C                causal chunk length of the linear engine (default: tuned)\n"
      "  --repeat K               best of K timings (default 3)\n"
      "Baselines (exact softmax attention, same data; DESIGN.md section 4):\n"
      "  --baselines B            none | softmax | pblas | all (default none). softmax: blocked\n"
      "                           online softmax, key/value blocks rotating in a ring over the\n"
      "                           ranks; pblas: dense n x n scores with pdgemm on a BLACS grid\n"
      "  --baseline-max-n N       skip the baselines above this n (default 32768)\n"
      "  --pblas-block NB         ScaLAPACK block size (default 64)\n"
      "  --pblas-panel-rows R     score rows per pdgemm panel (default 0: at most 2^26 scores)\n"
      "  --no-linear              time only the baselines (and the GEMM probe)\n"
      "  --check                  also compare the baselines with la_softmax_attention in\n"
      "                           float64 (n <= 4096); exit 1 if the error exceeds 1e-10 (f64)\n"
      "                           or 1e-5 (f32) in max |x - ref| / max |ref|\n"
      "GEMM probe:\n"
      "  --gemm-probe             rows impl=sgemm and dgemm: OpenBLAS square products on rank 0,\n"
      "                           with 1 thread and with each --threads value (best of\n"
      "                           max(K, 10): it takes ~10 ms and a shared node disturbs it),\n"
      "                           so efficiency = gflops / sgemm gflops is measured\n"
      "                           in the same run; and rows impl=k512gemm: the engine's own\n"
      "                           AVX-512 kernel on 64 x 64 x 64 products in cache, the\n"
      "                           ceiling of its chunk products (absent without AVX-512)\n"
      "  --gemm-size S            matrix size of the probe (default 1024)\n"
      "Output:\n"
      "  --csv F                  also write the rows to F (atomically; an existing F needs --force)\n"
      "  --force                  overwrite --csv F\n"
      "  -h, --help               this text\n"
      "\n"
      "Exit codes: 0 ok, 2 usage error, 3 denominator policy violated, 1 other.\n");
}

/* Comma-separated items into tok[] (modifies a copy in buf). Returns the count, -1 if > max
 * or an item is empty. */
static int split(const char *s, char *buf, size_t bl, char **tok, int max) {
  snprintf(buf, bl, "%s", s);
  int c = 0;
  for (char *p = buf;; p++) {
    char *q = strchr(p, ',');
    if (q) *q = 0;
    if (!*p || c >= max) return -1;
    tok[c++] = p;
    if (!q) return c;
    p = q;
  }
}

static la_status bench_parse(int argc, char **argv, int first, la_bopts *o, char *err,
                             size_t errlen) {
  memset(o, 0, sizeof *o);
  o->n[0] = 65536;
  o->nn = 1;
  o->features[0] = 256;
  o->nf = 1;
  o->nt = 0;
  o->modes[0] = LA_CAUSAL;
  o->nm = 1;
  o->maps[0] = LA_MAP_ELU1;
  o->nmaps = 1;
  o->heads = 4;
  o->dk = 64;
  o->dv = 64;
  o->repeat = 3;
  o->gemm_size = 1024;
  o->pblas_nb = 64;
  o->dt = LA_F32;
  o->linear = 1;
  o->baseline_max_n = 32768;
#define BAD(...)                        \
  do {                                  \
    snprintf(err, errlen, __VA_ARGS__); \
    return LA_ERR_ARG;                  \
  } while (0)
  char buf[4096], *tok[LA_LIST_MAX];
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    int64_t iv;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { o->help = 1; continue; }
    if (!strcmp(a, "--force")) { o->force = 1; continue; }
    if (!strcmp(a, "--gemm-probe")) { o->gemm_probe = 1; continue; }
    if (!strcmp(a, "--check")) { o->check = 1; continue; }
    if (!strcmp(a, "--no-linear")) { o->linear = 0; continue; }
    if (strncmp(a, "--", 2) != 0) BAD("unexpected argument '%s'", a);
    if (i + 1 >= argc) BAD("option %s needs a value", a);
    const char *val = argv[++i];
    if (!strcmp(a, "--n") || !strcmp(a, "--features") || !strcmp(a, "--threads")) {
      int c = split(val, buf, sizeof buf, tok, LA_LIST_MAX);
      if (c < 0) BAD("%s: '%s' is not a comma-separated list of at most %d values", a, val, LA_LIST_MAX);
      for (int j = 0; j < c; j++) {
        if (a[2] == 'n') {
          if (la_parse_i64(tok[j], 1, (int64_t)1 << 40, &o->n[j])) BAD("--n: '%s' is not an integer in [1, 2^40]", tok[j]);
        } else if (a[2] == 'f') {
          if (la_parse_i64(tok[j], 1, LA_FEATURES_MAX, &iv)) BAD("--features: '%s' is not in [1, %d]", tok[j], LA_FEATURES_MAX);
          o->features[j] = (int)iv;
        } else {
          if (la_parse_i64(tok[j], 1, 4096, &iv)) BAD("--threads: '%s' is not in [1, 4096]", tok[j]);
          o->threads[j] = (int)iv;
        }
      }
      *(a[2] == 'n' ? &o->nn : a[2] == 'f' ? &o->nf : &o->nt) = c;
    } else if (!strcmp(a, "--modes")) {
      int c = split(val, buf, sizeof buf, tok, 2);
      if (c < 0) BAD("--modes: '%s' is not a list of causal, bidirectional", val);
      for (int j = 0; j < c; j++) {
        if (!strcmp(tok[j], "causal")) o->modes[j] = LA_CAUSAL;
        else if (!strcmp(tok[j], "bidirectional")) o->modes[j] = LA_BIDIRECTIONAL;
        else BAD("--modes: '%s' is not causal or bidirectional", tok[j]);
      }
      o->nm = c;
    } else if (!strcmp(a, "--feature-maps")) {
      int c = split(val, buf, sizeof buf, tok, LA_MAP_COUNT);
      if (c < 0) BAD("--feature-maps: '%s' is not a comma-separated list of maps", val);
      for (int j = 0; j < c; j++) {
        if (la_map_from_name(tok[j], &o->maps[j]))
          BAD("--feature-maps: unknown map '%s' (elu1, relu, favor+, favor+orf, favor-hyp)", tok[j]);
        if (la_map_is_signed(o->maps[j]) || o->maps[j] == LA_MAP_PRECOMPUTED)
          BAD("--feature-maps: %s is not timed by bench (its denominators can be <= 0 on the "
              "synthetic workload); use elu1, relu, favor+, favor+orf or favor-hyp", tok[j]);
      }
      o->nmaps = c;
    } else if (!strcmp(a, "--heads")) {
      if (la_parse_i64(val, 1, 4096, &iv)) BAD("--heads: '%s' is not in [1, 4096]", val);
      o->heads = (int)iv;
    } else if (!strcmp(a, "--dk") || !strcmp(a, "--dv")) {
      if (la_parse_i64(val, 1, LA_DIM_MAX, &iv)) BAD("%s: '%s' is not in [1, %d]", a, val, LA_DIM_MAX);
      *(a[3] == 'k' ? &o->dk : &o->dv) = (int)iv;
    } else if (!strcmp(a, "--dtype")) {
      if (!strcmp(val, "f32")) o->dt = LA_F32;
      else if (!strcmp(val, "f64")) o->dt = LA_F64;
      else BAD("--dtype: '%s' is not f32 or f64", val);
    } else if (!strcmp(a, "--repeat")) {
      if (la_parse_i64(val, 1, 1000, &iv)) BAD("--repeat: '%s' is not in [1, 1000]", val);
      o->repeat = (int)iv;
    } else if (!strcmp(a, "--chunk")) {
      if (la_parse_i64(val, LA_CHUNK_MIN, LA_CHUNK_MAX, &iv)) BAD("--chunk: '%s' is not in [%d, %d]", val, LA_CHUNK_MIN, LA_CHUNK_MAX);
      o->chunk = (int)iv;
    } else if (!strcmp(a, "--baselines")) {
      if (!strcmp(val, "none")) o->softmax = o->pblas = 0;
      else if (!strcmp(val, "softmax")) { o->softmax = 1; o->pblas = 0; }
      else if (!strcmp(val, "pblas")) { o->softmax = 0; o->pblas = 1; }
      else if (!strcmp(val, "all")) o->softmax = o->pblas = 1;
      else BAD("--baselines: '%s' is not none, softmax, pblas or all", val);
    } else if (!strcmp(a, "--baseline-max-n")) {
      if (la_parse_i64(val, 0, (int64_t)1 << 30, &o->baseline_max_n)) BAD("--baseline-max-n: '%s' is not in [0, 2^30]", val);
    } else if (!strcmp(a, "--pblas-block")) {
      if (la_parse_i64(val, 1, 4096, &iv)) BAD("--pblas-block: '%s' is not in [1, 4096]", val);
      o->pblas_nb = (int)iv;
    } else if (!strcmp(a, "--pblas-panel-rows")) {
      if (la_parse_i64(val, 0, (int64_t)1 << 30, &o->pblas_panel)) BAD("--pblas-panel-rows: '%s' is not in [0, 2^30]", val);
    } else if (!strcmp(a, "--gemm-size")) {
      if (la_parse_i64(val, 16, 16384, &iv)) BAD("--gemm-size: '%s' is not in [16, 16384]", val);
      o->gemm_size = (int)iv;
    } else if (!strcmp(a, "--seed")) {
      if (la_parse_i64(val, 0, INT64_MAX, &iv)) BAD("--seed: '%s' is not an integer >= 0", val);
      o->seed = (uint64_t)iv;
    } else if (!strcmp(a, "--csv")) {
      o->csv = val;
    } else {
      BAD("unknown option '%s' (see linattn bench --help)", a);
    }
  }
  if (o->nt == 0) {
    la_config c;
    la_config_default(&c);
    la_engine e = NULL; /* the OpenMP default, as the engine resolves it */
    la_featmap fm = NULL;
    o->threads[0] = 1;
    if (la_featmap_create(&c, 1, 1, &fm) == LA_OK && la_engine_create(&c, fm, LA_F32, 1, &e) == LA_OK)
      o->threads[0] = la_engine_threads(e);
    la_engine_destroy(&e);
    la_featmap_destroy(&fm);
    o->nt = 1;
  }
  if (o->check)
    for (int j = 0; j < o->nn; j++)
      if (o->n[j] > 4096 && o->n[j] <= o->baseline_max_n && (o->softmax || o->pblas))
        BAD("--check: n = %lld is too large for the float64 check (at most 4096)", (long long)o->n[j]);
  return LA_OK;
#undef BAD
}

/* ---- CSV rows ---- */
typedef struct {
  const char *impl, *mode, *map, *dtype;
  int features, r, heads, dk, dv, ranks, threads, chunk, repeat; /* < 0: empty field */
  int64_t n;
  double seconds, flops, check_err; /* check_err < 0: empty */
  int tokens;                       /* tokens_per_s applies */
} la_brow;

typedef struct {
  FILE *f;
  char tmp[4200];
} la_csv;

static const char *csv_header =
    "impl,mode,map,features,r,n,heads,dk,dv,dtype,ranks,threads,chunk,repeat,seconds,gflops,"
    "tokens_per_s,useful_flops,check_err\n";

static void put_int(FILE *f, int64_t v) {
  if (v >= 0) fprintf(f, "%lld", (long long)v);
  fputc(',', f);
}

static void row_print(FILE *f, const la_brow *r) {
  fprintf(f, "%s,%s,%s,", r->impl, r->mode, r->map);
  put_int(f, r->features);
  put_int(f, r->r);
  put_int(f, r->n);
  put_int(f, r->heads);
  put_int(f, r->dk);
  put_int(f, r->dv);
  fprintf(f, "%s,", r->dtype);
  put_int(f, r->ranks);
  put_int(f, r->threads);
  put_int(f, r->chunk);
  put_int(f, r->repeat);
  fprintf(f, "%.6g,%.6g,", r->seconds, r->flops / r->seconds * 1e-9);
  if (r->tokens) fprintf(f, "%.6g", (double)r->n / r->seconds);
  fprintf(f, ",%.6g,", r->flops);
  if (r->check_err >= 0) fprintf(f, "%.3g", r->check_err);
  fputc('\n', f);
}

static void emit_row(la_dist d, la_csv *c, const la_brow *r) {
  if (la_dist_rank(d) != 0) return;
  row_print(stdout, r);
  fflush(stdout);
  if (c->f) row_print(c->f, r);
}

static const char *mode_name(la_mode m) { return m == LA_CAUSAL ? "causal" : "bidirectional"; }

static double exact_flops(int64_t n, int H, int dk, int dv, la_mode m) {
  double pairs = m == LA_CAUSAL ? 0.5 * (double)n * (double)(n + 1) : (double)n * (double)n;
  return 2.0 * (dk + dv) * H * pairs;
}

/* ---- GEMM probe (rank 0): 2 s^3 / best time ---- */
static double gemm_rate(int dbl, int s, int threads, int reps) {
  size_t cnt = (size_t)s * s, es = dbl ? 8 : 4;
  void *a = malloc(es * cnt), *b = malloc(es * cnt), *c = malloc(es * cnt);
  if (!a || !b || !c) { free(a); free(b); free(c); return NAN; }
  for (size_t i = 0; i < cnt; i++) {
    double x = (double)((i * 2654435761u) % 1000) / 1000.0 - 0.5;
    if (dbl) { ((double *)a)[i] = x; ((double *)b)[i] = -x; }
    else { ((float *)a)[i] = (float)x; ((float *)b)[i] = (float)-x; }
  }
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
  double best = INFINITY;
  for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
    double t0 = MPI_Wtime();
    if (dbl)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0, a, s, b, s, 0.0, c, s);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, a, s, b, s, 0.0f, c, s);
    double t = MPI_Wtime() - t0;
    if (r > 0 && t < best) best = t;
  }
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  free(a); free(b); free(c);
  return best;
}

/* ---- PBLAS inputs: the synthetic rows of one head; outputs compared when checking ---- */
typedef struct {
  uint64_t seed;
  int h, H, dk, dv;
  const double *ref; /* [N, H, dv] float64 reference, or NULL */
  double err, refmax;
} la_pblas_ctx;

static void pblas_fill(void *vc, int t, int64_t row0, int64_t n, double *dst) {
  la_pblas_ctx *c = vc;
  int d = t == 2 ? c->dv : c->dk;
  double *tmp = malloc(sizeof(double) * (size_t)n * c->H * d);
  if (!tmp) { memset(dst, 0, sizeof(double) * n * d); return; }
  la_synth_rows(c->seed, t, row0, n, c->H, d, 1.0, LA_F64, tmp);
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * d, tmp + (i * c->H + c->h) * d, sizeof(double) * d);
  free(tmp);
}

static void pblas_emit(void *vc, int64_t row0, int64_t n, int64_t col0, int ncol, const double *a,
                       int64_t lda) {
  la_pblas_ctx *c = vc;
  if (!c->ref) return;
  for (int j = 0; j < ncol; j++)
    for (int64_t i = 0; i < n; i++) {
      double r = c->ref[((row0 + i) * c->H + c->h) * c->dv + col0 + j];
      c->err = fmax(c->err, fabs(a[j * lda + i] - r));
      c->refmax = fmax(c->refmax, fabs(r));
    }
}

/* Float64 reference of the whole sequence, from inputs generated in dtype dt. */
static la_status reference(const la_bopts *o, la_dtype dt, int64_t n, la_mode mode, double **ref) {
  const int H = o->heads;
  const size_t nq = (size_t)n * H * o->dk, nv = (size_t)n * H * o->dv;
  double *x[3] = {malloc(8 * nq), malloc(8 * nq), malloc(8 * nv)};
  *ref = malloc(8 * nv);
  la_status s = x[0] && x[1] && x[2] && *ref ? LA_OK : LA_ERR_NOMEM;
  for (int t = 0; t < 3 && s == LA_OK; t++) {
    int d = t == 2 ? o->dv : o->dk;
    la_synth_rows(o->seed, t, 0, n, H, d, 1.0, dt, x[t]);
    if (dt == LA_F32) /* widen in place, from the back */
      for (size_t i = (size_t)n * H * d; i-- > 0;) x[t][i] = ((float *)x[t])[i];
  }
  if (s == LA_OK)
    s = la_softmax_attention(LA_F64, n, H, o->dk, o->dv, 1.0 / sqrt((double)o->dk), mode, x[0],
                             x[1], x[2], *ref, 0);
  for (int t = 0; t < 3; t++) free(x[t]);
  return s;
}

/* ---- One sequence length and mode ---- */
typedef struct {
  la_dist d;
  const la_bopts *o;
  la_csv *csv;
  char *err;
  size_t errlen;
} la_bctx;

static la_status time_linear(la_bctx *b, la_mode mode, int64_t n, int64_t nloc, int64_t row0,
                             const void *q, const void *k, const void *v, void *out, int T,
                             la_map_kind map, int features) {
  const la_bopts *o = b->o;
  la_config cfg;
  la_config_default(&cfg);
  cfg.mode = mode;
  cfg.map = map;
  cfg.features = features;
  cfg.seed = o->seed;
  cfg.chunk = o->chunk;
  cfg.threads = T;
  la_featmap fm = NULL;
  la_engine eng = NULL;
  la_den_stats stats = {0};
  la_status s = la_config_check(&cfg, o->dk, b->err, b->errlen);
  if (s == LA_OK) s = la_featmap_create(&cfg, o->heads, o->dk, &fm);
  if (s == LA_OK) s = la_engine_create(&cfg, fm, o->dt, o->dv, &eng);
  if (s != LA_OK && !b->err[0]) snprintf(b->err, b->errlen, "engine: %s", la_status_string(s));
  s = la_dist_agree(b->d, s, b->err, b->errlen);
  double best = INFINITY;
  for (int rep = 0; rep < o->repeat && s == LA_OK; rep++) {
    s = la_den_stats_init(&stats);
    MPI_Barrier(la_dist_comm(b->d));
    double t0 = MPI_Wtime();
    if (s == LA_OK) s = la_dist_forward(b->d, eng, nloc, row0, q, k, v, out, &stats);
    double t = MPI_Wtime() - t0, tm;
    MPI_Allreduce(&t, &tm, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(b->d));
    best = fmin(best, tm);
    if (s == LA_OK && (stats.violations > 0 || stats.overflows > 0)) {
      snprintf(b->err, b->errlen, "%s %s n=%lld: %lld rows violate the denominator policy 'error'",
               la_map_name(map), mode_name(mode), (long long)n, (long long)stats.violations);
      s = LA_ERR_DENOMINATOR;
    }
    la_den_stats_free(&stats);
  }
  if (s == LA_OK) {
    int r = la_featmap_width(fm);
    la_brow row = {"linear", mode_name(mode), la_map_name(map), la_dtype_name(o->dt),
                   la_map_is_random(map) ? features : -1, r, o->heads, o->dk, o->dv,
                   la_dist_size(b->d), T, la_engine_chunk(eng), o->repeat, n, best,
                   la_useful_flops(&cfg, n, o->heads, o->dk, o->dv, r), -1, 1};
    emit_row(b->d, b->csv, &row);
  }
  la_engine_destroy(&eng);
  la_featmap_destroy(&fm);
  return s;
}

static la_status check_result(la_bctx *b, const char *what, double err, double refmax, double tol,
                              double *rel) {
  double e[2] = {err, refmax}, m[2];
  MPI_Allreduce(e, m, 2, MPI_DOUBLE, MPI_MAX, la_dist_comm(b->d));
  *rel = m[1] > 0 ? m[0] / m[1] : m[0];
  if (!(*rel <= tol)) {
    snprintf(b->err, b->errlen, "--check: %s differs from la_softmax_attention (float64) by %.3g > %.0e",
             what, *rel, tol);
    return LA_ERR_INTERNAL;
  }
  return LA_OK;
}

static la_status bench_one(la_bctx *b, la_mode mode, int64_t n) {
  const la_bopts *o = b->o;
  const int P = la_dist_size(b->d), rank = la_dist_rank(b->d), H = o->heads;
  const int base = n <= o->baseline_max_n, do_sm = o->softmax && base, do_pb = o->pblas && base;
  const double scale = 1.0 / sqrt((double)o->dk);
  int64_t nloc, row0;
  la_split_ownership(n, P, rank, &nloc, &row0);
  const size_t es = la_dtype_size(o->dt), rk = (size_t)(nloc ? nloc : 1) * H * o->dk,
               rv = (size_t)(nloc ? nloc : 1) * H * o->dv;
  void *q = NULL, *k = NULL, *v = NULL, *out = NULL;
  double *ref_dt = NULL, *ref64 = NULL;
  la_status s = LA_OK;
  if (o->linear || do_sm) {
    q = la_alloc_rows(es * rk);
    k = la_alloc_rows(es * rk);
    v = la_alloc_rows(es * rv);
    out = la_alloc_rows(es * rv);
    if (!q || !k || !v || !out) {
      snprintf(b->err, b->errlen, "cannot allocate the inputs of n = %lld (%.3g GB per rank)",
               (long long)n, (double)es * (2 * rk + 2 * rv) * 1e-9);
      s = LA_ERR_NOMEM;
    } else {
      la_synth_rows(o->seed, 0, row0, nloc, H, o->dk, 1.0, o->dt, q);
      la_synth_rows(o->seed, 1, row0, nloc, H, o->dk, 1.0, o->dt, k);
      la_synth_rows(o->seed, 2, row0, nloc, H, o->dv, 1.0, o->dt, v);
    }
  }
  if (s == LA_OK && o->check && (do_sm || do_pb)) {
    s = reference(o, LA_F64, n, mode, &ref64);
    if (s == LA_OK && o->dt == LA_F32 && do_sm) s = reference(o, LA_F32, n, mode, &ref_dt);
    if (s != LA_OK) snprintf(b->err, b->errlen, "--check: reference: %s", la_status_string(s));
  }
  s = la_dist_agree(b->d, s, b->err, b->errlen);
  for (int ti = 0; ti < o->nt && s == LA_OK; ti++) {
    const int T = o->threads[ti];
    for (int mi = 0; mi < o->nmaps && o->linear && s == LA_OK; mi++)
      for (int fi = 0; fi < (la_map_is_random(o->maps[mi]) ? o->nf : 1) && s == LA_OK; fi++)
        s = time_linear(b, mode, n, nloc, row0, q, k, v, out, T, o->maps[mi], o->features[fi]);
    if (do_sm && s == LA_OK) {
      double best = INFINITY, rel = -1;
      for (int rep = 0; rep < o->repeat && s == LA_OK; rep++) {
        MPI_Barrier(la_dist_comm(b->d));
        double t0 = MPI_Wtime();
        s = la_softmax_ring(b->d, o->dt, n, H, o->dk, o->dv, scale, mode, nloc, row0, q, k, v, out, T);
        double t = MPI_Wtime() - t0, tm;
        MPI_Allreduce(&t, &tm, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(b->d));
        best = fmin(best, tm);
      }
      if (s != LA_OK) snprintf(b->err, b->errlen, "softmax baseline n=%lld: %s", (long long)n, la_status_string(s));
      if (s == LA_OK && o->check) {
        const double *ref = (o->dt == LA_F32 ? ref_dt : ref64) + (size_t)row0 * H * o->dv;
        double e = 0, rm = 0;
        for (size_t i = 0; i < (size_t)nloc * H * o->dv; i++) {
          double x = o->dt == LA_F32 ? ((float *)out)[i] : ((double *)out)[i];
          e = fmax(e, fabs(x - ref[i]));
          rm = fmax(rm, fabs(ref[i]));
        }
        char what[96];
        snprintf(what, sizeof what, "softmax %s n=%lld", mode_name(mode), (long long)n);
        s = check_result(b, what, e, rm, o->dt == LA_F32 ? 1e-5 : 1e-10, &rel);
      }
      la_brow row = {"softmax", mode_name(mode), "", la_dtype_name(o->dt), -1, -1, H, o->dk, o->dv,
                     P, T, -1, o->repeat, n, best, exact_flops(n, H, o->dk, o->dv, mode), rel, 1};
      if (s == LA_OK) emit_row(b->d, b->csv, &row);
    }
    if (do_pb && s == LA_OK) {
      double best = INFINITY, rel = -1, e = 0, rm = 0;
      for (int rep = 0; rep < o->repeat && s == LA_OK; rep++) {
        double tot = 0;
        for (int h = 0; h < H && s == LA_OK; h++) {
          la_pblas_ctx c = {o->seed, h, H, o->dk, o->dv, rep == 0 ? ref64 : NULL, 0, 0};
          la_pblas_io io = {pblas_fill, pblas_emit, &c};
          double sec;
          s = la_pblas_attention(la_dist_comm(b->d), n, o->dk, o->dv, scale, mode, o->pblas_nb,
                                 o->pblas_panel, T, &io, &sec, b->err, b->errlen);
          tot += sec;
          e = fmax(e, c.err);
          rm = fmax(rm, c.refmax);
        }
        best = fmin(best, tot);
      }
      if (s == LA_OK && o->check) {
        char what[96];
        snprintf(what, sizeof what, "pblas %s n=%lld", mode_name(mode), (long long)n);
        s = check_result(b, what, e, rm, 1e-10, &rel);
      }
      la_brow row = {"pblas", mode_name(mode), "", "f64", -1, -1, H, o->dk, o->dv, P, T, -1,
                     o->repeat, n, best, exact_flops(n, H, o->dk, o->dv, mode), rel, 1};
      if (s == LA_OK) emit_row(b->d, b->csv, &row);
    }
  }
  free(q); free(k); free(v); free(out); free(ref_dt); free(ref64);
  return s;
}

int la_cmd_bench(la_dist d, int argc, char **argv, int first) {
  const int rank = la_dist_rank(d);
  char err[1024] = "";
  la_bopts o;
  la_status s = bench_parse(argc, argv, first, &o, err, sizeof err);
  if (s == LA_OK && o.help) {
    if (rank == 0) bench_help();
    return 0;
  }
  la_csv csv = {0};
  if (s == LA_OK && o.csv && rank == 0) {
    if (!o.force && access(o.csv, F_OK) == 0) {
      snprintf(err, sizeof err, "--csv %s: exists (use --force to overwrite)", o.csv);
      s = LA_ERR_EXISTS;
    } else {
      snprintf(csv.tmp, sizeof csv.tmp, "%s.tmp.%ld", o.csv, (long)getpid());
      if (!(csv.f = fopen(csv.tmp, "w"))) {
        snprintf(err, sizeof err, "--csv %s: cannot create a temporary file beside it: %s", o.csv,
                 strerror(errno));
        s = LA_ERR_IO;
      }
    }
  }
  s = la_dist_agree(d, s, err, sizeof err);
  if (s == LA_OK && rank == 0) {
    fputs(csv_header, stdout);
    if (csv.f) fputs(csv_header, csv.f);
  }
  if (s == LA_OK && o.gemm_probe) {
    if (rank == 0) {
      int tl[LA_LIST_MAX + 1] = {1}, nt = 1;
      for (int i = 0; i < o.nt; i++) {
        int dup = 0;
        for (int j = 0; j < nt; j++) dup |= tl[j] == o.threads[i];
        if (!dup) tl[nt++] = o.threads[i];
      }
      const int64_t g = o.gemm_size;
      const int reps = o.repeat > 10 ? o.repeat : 10;
      for (int i = 0; i < nt; i++)
        for (int dbl = 0; dbl < 2; dbl++) {
          double t = gemm_rate(dbl, o.gemm_size, tl[i], reps);
          la_brow row = {dbl ? "dgemm" : "sgemm", "", "", dbl ? "f64" : "f32", -1, -1, -1, -1, -1,
                         1, tl[i], -1, reps, g, t, 2.0 * g * g * g, -1, 0};
          emit_row(d, &csv, &row);
        }
      for (int i = 0; i < nt; i++) { /* the AVX-512 chunk kernel's own ceiling */
        const double gf = la_kernel_probe_gflops(tl[i], reps);
        if (!isfinite(gf)) continue;
        const double fl = 2.0 * 64 * 64 * 64 * 2000 * tl[i];
        la_brow row = {"k512gemm", "", "", "f32", -1, -1, -1, -1, -1, 1, tl[i], -1, reps, 64,
                       fl / (gf * 1e9), fl, -1, 0};
        emit_row(d, &csv, &row);
      }
    }
    MPI_Barrier(la_dist_comm(d));
  }
  la_bctx b = {d, &o, &csv, err, sizeof err};
  for (int mi = 0; mi < o.nm && s == LA_OK; mi++)
    for (int ni = 0; ni < o.nn && s == LA_OK; ni++) {
      if (!o.linear && !((o.softmax || o.pblas) && o.n[ni] <= o.baseline_max_n)) continue;
      s = bench_one(&b, o.modes[mi], o.n[ni]);
    }
  if (csv.f) {
    int bad = fclose(csv.f) != 0;
    if (s == LA_OK && (bad || rename(csv.tmp, o.csv) != 0)) {
      snprintf(err, sizeof err, "--csv %s: cannot write: %s", o.csv, strerror(errno));
      s = LA_ERR_IO;
    }
    if (s != LA_OK) remove(csv.tmp);
  }
  s = la_dist_agree(d, s, err, sizeof err);
  if (s != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", err[0] ? err : la_status_string(s));
    return la_status_exit_code(s);
  }
  return 0;
}
