/* `linattn bench` (docs/cli.md "linattn bench"): times the linear operator on the synthetic
 * workload, and optionally the exact quadratic baselines (softmax ring, PBLAS) and this
 * machine's GEMM rate, and writes one CSV row per measurement. Times are compute only:
 * barrier, MPI_Wtime around the call, max over ranks, best of --repeat. Inputs are generated
 * in memory beforehand.
 *
 * Useful flops (the gflops column):
 *   linear:           la_useful_flops: N H (4 r dv + 4 r) + the map's flops for each of q and
 *                     k (la_map_flops_per_row: 2 N H dk r with the random maps, N H (r + dk)
 *                     with taylor2, N H r with dpfp);
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
#include "la_alloc.h"
#include "la_core_private.h"
#include "cli.h"
#include "pio.h"
#include "linattn/dist.h"
#include "sysinfo.h"
#include "linattn/linattn.h"
#include "linattn/report.h"


/* ---- CSV rows ---- */
typedef struct {
  const char *impl, *mode, *map, *dtype;
  int features, r, heads, dk, dv, ranks, threads, chunk, repeat; /* < 0: empty field */
  int64_t n;
  double seconds, flops, check_err; /* check_err < 0: empty */
  int tokens;                       /* tokens_per_s applies */
  /* the summary collective, linear rows only (NULL: empty): scan = causal's --scan-algorithm
   * as given (the series a scaling study keeps apart), scan_used = the one that ran
   * ("none" on one rank); bidirectional: "allreduce" in both */
  const char *scan, *scan_used;
  const char *decay; /* --decay as given, linear rows only (NULL: empty) */
} la_brow;

typedef struct {
  FILE *f;     /* the rows, in memory (open_memstream); written by la_write_file at the end */
  char *text;
  size_t len;
  /* the best GEMM rate of --gemm-probe per thread count: [0] float32 (OpenBLAS SGEMM or the
   * engine's kernel, the larger), [1] float64 (DGEMM or the table's gemm_f64, the larger);
   * the efficiency column's denominator */
  int nprobe;
  int probe_threads[LA_LIST_MAX + 1];
  double probe_gflops[2][LA_LIST_MAX + 1];
  la_sysinfo sys; /* the isa and blas_core columns */
} la_csv;

const char la_bench_csv_header[] =
    "impl,mode,map,features,r,n,heads,dk,dv,dtype,ranks,threads,chunk,repeat,seconds,gflops,"
    "tokens_per_s,useful_flops,check_err,efficiency,isa,blas_core,scan_algorithm,scan_used,decay\n";

static void put_int(FILE *f, int64_t v) {
  if (v >= 0) fprintf(f, "%lld", (long long)v);
  fputc(',', f);
}

/* The best GEMM rate (GFLOP/s) of one rank with the row's threads and precision; 0: not probed. */
static double probe_best(const la_csv *c, const la_brow *r) {
  for (int i = 0; i < c->nprobe; i++)
    if (c->probe_threads[i] == r->threads) return c->probe_gflops[strcmp(r->dtype, "f64") == 0][i];
  return 0;
}

static void probe_note(la_csv *c, int threads, int dbl, double gflops) {
  int i = 0;
  while (i < c->nprobe && c->probe_threads[i] != threads) i++;
  if (i == c->nprobe) {
    if (i > LA_LIST_MAX) return;
    c->probe_threads[c->nprobe++] = threads;
    c->probe_gflops[0][i] = c->probe_gflops[1][i] = 0;
  }
  if (gflops > c->probe_gflops[dbl][i]) c->probe_gflops[dbl][i] = gflops;
}

static void row_print(FILE *f, const la_csv *c, const la_brow *r) {
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
  /* efficiency: useful GFLOP/s over what the same ranks would do at the best GEMM rate */
  const double best = probe_best(c, r), gf = r->flops / r->seconds * 1e-9;
  fputc(',', f);
  const int probe = strstr(r->impl, "gemm") != NULL; /* the probe rows are the denominator */
  if (!probe && best > 0 && r->ranks > 0) fprintf(f, "%.4g", gf / (r->ranks * best));
  fprintf(f, ",%s,%s,%s,%s,%s\n", c->sys.isa, c->sys.blas_core ? c->sys.blas_core : "",
          r->scan ? r->scan : "", r->scan_used ? r->scan_used : "", r->decay ? r->decay : "");
}

static void emit_row(la_dist d, la_csv *c, const la_brow *r) {
  if (la_dist_rank(d) != 0) return;
  row_print(stdout, c, r);
  fflush(stdout);
  if (c->f) row_print(c->f, c, r);
}

static const char *mode_name(la_mode m) { return m == LA_CAUSAL ? "causal" : "bidirectional"; }

static double exact_flops(int64_t n, int H, int dk, int dv, la_mode m) {
  double pairs = m == LA_CAUSAL ? 0.5 * (double)n * (double)(n + 1) : (double)n * (double)n;
  return 2.0 * (dk + dv) * H * pairs;
}

/* ---- GEMM probe (rank 0): 2 s^3 / best time; -1 when out of memory ---- */
static double gemm_rate(int dbl, int s, int threads, int reps) {
  size_t cnt = (size_t)s * s, es = dbl ? 8 : 4;
  void *a = la_malloc(es * cnt), *b = la_malloc(es * cnt), *c = la_malloc(es * cnt);
  if (!a || !b || !c) { free(a); free(b); free(c); return -1.0; } /* out of memory */
  for (size_t i = 0; i < cnt; i++) {
    double x = (double)((i * 2654435761u) % 1000) / 1000.0 - 0.5;
    if (dbl) { ((double *)a)[i] = x; ((double *)b)[i] = -x; }
    else { ((float *)a)[i] = (float)x; ((float *)b)[i] = (float)-x; }
  }
  la_blas_set_threads(threads);
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
  la_blas_set_threads(1);
  free(a); free(b); free(c);
  return best;
}

/* ---- PBLAS inputs: the synthetic rows of one head; outputs compared when checking ---- */
typedef struct {
  uint64_t seed;
  int h, H, dk, dv;
  const double *ref; /* [N, H, dv] float64 reference, or NULL */
  double err, refmax;
  double *tmp; /* fill's scratch: pblas_nb rows x H x max(dk, dv), allocated by the caller */
} la_pblas_ctx;

static void pblas_fill(void *vc, int t, int64_t row0, int64_t n, double *dst) {
  la_pblas_ctx *c = vc;
  int d = t == 2 ? c->dv : c->dk;
  double *tmp = c->tmp; /* n <= pblas_nb rows (dmat_fill) */
  la_synth_rows(c->seed, t, row0, n, c->H, d, 1.0, LA_F64, tmp);
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * d, tmp + (i * c->H + c->h) * d, sizeof(double) * d);
}

/* max(acc, |x - y|), where a NaN makes it +inf: MPI_MAX and the tolerance check both see it
 * (fmax would drop it). */
static double err_max(double acc, double x, double y) {
  const double d = fabs(x - y);
  return isnan(d) ? INFINITY : (d > acc ? d : acc);
}

static void pblas_emit(void *vc, int64_t row0, int64_t n, int64_t col0, int ncol, const double *a,
                       int64_t lda) {
  la_pblas_ctx *c = vc;
  if (!c->ref) return;
  for (int j = 0; j < ncol; j++)
    for (int64_t i = 0; i < n; i++) {
      double r = c->ref[((row0 + i) * c->H + c->h) * c->dv + col0 + j];
      c->err = err_max(c->err, a[j * lda + i], r);
      c->refmax = fmax(c->refmax, fabs(r));
    }
}

/* Float64 reference of the whole sequence, from inputs generated in dtype dt. */
static la_status reference(const la_cli *o, la_dtype dt, int64_t n, la_mode mode, double **ref) {
  const int H = o->heads;
  const size_t nq = (size_t)n * H * o->dk, nv = (size_t)n * H * o->dv;
  double *x[3] = {la_malloc(8 * nq), la_malloc(8 * nq), la_malloc(8 * nv)};
  *ref = la_malloc(8 * nv);
  la_status s = x[0] && x[1] && x[2] && *ref
                    ? LA_OK
                    : la_error(LA_ERR_NOMEM, "out of memory for the float64 inputs and output "
                               "of n = %lld", (long long)n);
  for (int t = 0; t < 3 && s == LA_OK; t++) {
    int d = t == 2 ? o->dv : o->dk;
    la_synth_rows(o->cfg.seed, t, 0, n, H, d, 1.0, dt, x[t]);
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
  const la_cli *o;
  la_csv *csv;
  int softmax, pblas; /* --baselines */
} la_bctx;

static la_status time_linear(la_bctx *b, la_mode mode, int64_t n, int64_t nloc, int64_t row0,
                             const void *q, const void *k, const void *v, void *out, int T,
                             la_map_kind map, int features) {
  const la_cli *o = b->o;
  la_config cfg;
  la_config_default(&cfg);
  cfg.mode = mode;
  cfg.map = map;
  cfg.features = features;
  cfg.seed = o->cfg.seed;
  cfg.chunk = o->cfg.chunk;
  cfg.kernels = o->cfg.kernels;
  cfg.threads = T;
  cfg.decay = o->cfg.decay; /* --decay (docs/design.md §1.2) */
  cfg.decay_n = o->cfg.decay_n;
  cfg.decay_retnet = o->cfg.decay_retnet;
  la_featmap fm = NULL;
  la_engine eng = NULL;
  la_den_stats stats = {0};
  la_error_clear();
  la_status s = la_config_check(&cfg, o->dk);
  if (s == LA_OK && ((s = la_featmap_create(&cfg, o->heads, o->dk, &fm)) != LA_OK ||
                     (s = la_engine_create(&cfg, fm, o->dtype, o->dv, &eng)) != LA_OK))
    la_error_prefix(s, "engine: ");
  s = la_dist_agree(b->d, s);
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
      s = la_error(LA_ERR_DENOMINATOR, "%s %s n=%lld: %lld rows violate the denominator policy 'error'",
                   la_map_name(map), mode_name(mode), (long long)n, (long long)stats.violations);
    }
    la_den_stats_free(&stats);
  }
  if (s == LA_OK) {
    int r = la_featmap_width(fm);
    la_brow row = {"linear", mode_name(mode), la_map_name(map), la_dtype_name(o->dtype),
                   la_map_uses_features(map) ? features : -1, r, o->heads, o->dk, o->dv,
                   la_dist_size(b->d), T, la_engine_chunk(eng), o->repeat, n, best,
                   la_useful_flops(&cfg, n, o->heads, o->dk, o->dv, r), -1, 1, "allreduce",
                   "allreduce", o->decay_string};
    if (mode == LA_CAUSAL) {
      row.scan = la_scan_algorithm_names[o->cfg.scan_algorithm];
      row.scan_used = la_dist_size(b->d) > 1 ? la_scan_algorithm_names[la_dist_scan_algorithm(b->d)]
                                             : "none";
    }
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
    return la_error(LA_ERR_INTERNAL, "--check: %s differs from la_softmax_attention (float64) by %.3g > %.0e",
                    what, *rel, tol);
  }
  return LA_OK;
}

static la_status bench_one(la_bctx *b, la_mode mode, int64_t n) {
  const la_cli *o = b->o;
  const int P = la_dist_size(b->d), rank = la_dist_rank(b->d), H = o->heads;
  const int base = n <= o->baseline_max_n, do_sm = b->softmax && base, do_pb = b->pblas && base;
  const double scale = 1.0 / sqrt((double)o->dk);
  int64_t nloc, row0;
  la_split_ownership(n, P, rank, &nloc, &row0);
  const size_t es = la_dtype_size(o->dtype), rk = (size_t)(nloc ? nloc : 1) * H * o->dk,
               rv = (size_t)(nloc ? nloc : 1) * H * o->dv;
  void *q = NULL, *k = NULL, *v = NULL, *out = NULL;
  double *ref_dt = NULL, *ref64 = NULL;
  la_status s = LA_OK;
  if (!o->no_linear || do_sm) {
    q = la_alloc_rows(es * rk);
    k = la_alloc_rows(es * rk);
    v = la_alloc_rows(es * rv);
    out = la_alloc_rows(es * rv);
    if (!q || !k || !v || !out) {
      s = la_error(LA_ERR_NOMEM, "out of memory for the inputs of n = %lld (%.3g GB per rank)",
                   (long long)n, (double)es * (2 * rk + 2 * rv) * 1e-9);
    } else {
      la_synth_rows(o->cfg.seed, 0, row0, nloc, H, o->dk, 1.0, o->dtype, q);
      la_synth_rows(o->cfg.seed, 1, row0, nloc, H, o->dk, 1.0, o->dtype, k);
      la_synth_rows(o->cfg.seed, 2, row0, nloc, H, o->dv, 1.0, o->dtype, v);
    }
  }
  if (s == LA_OK && o->check && (do_sm || do_pb)) {
    s = reference(o, LA_F64, n, mode, &ref64);
    if (s == LA_OK && o->dtype == LA_F32 && do_sm) s = reference(o, LA_F32, n, mode, &ref_dt);
    if (s != LA_OK) la_error_prefix(s, "--check: reference: ");
  }
  s = la_dist_agree(b->d, s);
  for (int ti = 0; ti < o->threads_list.n && s == LA_OK; ti++) {
    const int T = (int)o->threads_list.i[ti];
    for (int mi = 0; mi < o->maps.n && !o->no_linear && s == LA_OK; mi++) {
      const la_map_kind map = (la_map_kind)o->maps.i[mi];
      for (int fi = 0; fi < (la_map_uses_features(map) ? o->features_list.n : 1) && s == LA_OK; fi++)
        s = time_linear(b, mode, n, nloc, row0, q, k, v, out, T, map, (int)o->features_list.i[fi]);
    }
    if (do_sm && s == LA_OK) {
      double best = INFINITY, rel = -1;
      for (int rep = 0; rep < o->repeat && s == LA_OK; rep++) {
        MPI_Barrier(la_dist_comm(b->d));
        double t0 = MPI_Wtime();
        s = la_softmax_ring(b->d, o->dtype, n, H, o->dk, o->dv, scale, mode, nloc, row0, q, k, v, out, T);
        double t = MPI_Wtime() - t0, tm;
        MPI_Allreduce(&t, &tm, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(b->d));
        best = fmin(best, tm);
      }
      if (s != LA_OK) la_error_prefix(s, "softmax baseline n=%lld: ", (long long)n);
      if (s == LA_OK && o->check) {
        const double *ref = (o->dtype == LA_F32 ? ref_dt : ref64) + (size_t)row0 * H * o->dv;
        double e = 0, rm = 0;
        for (size_t i = 0; i < (size_t)nloc * H * o->dv; i++) {
          double x = o->dtype == LA_F32 ? ((float *)out)[i] : ((double *)out)[i];
          e = err_max(e, x, ref[i]);
          rm = fmax(rm, fabs(ref[i]));
        }
        char what[96];
        snprintf(what, sizeof what, "softmax %s n=%lld", mode_name(mode), (long long)n);
        s = check_result(b, what, e, rm, o->dtype == LA_F32 ? 1e-5 : 1e-10, &rel);
      }
      la_brow row = {"softmax", mode_name(mode), "", la_dtype_name(o->dtype), -1, -1, H, o->dk, o->dv,
                     P, T, -1, o->repeat, n, best, exact_flops(n, H, o->dk, o->dv, mode), rel, 1, NULL, NULL, NULL};
      if (s == LA_OK) emit_row(b->d, b->csv, &row);
    }
    if (do_pb && s == LA_OK) {
      double best = INFINITY, rel = -1, e = 0, rm = 0;
      double *ptmp = la_malloc(sizeof(double) * (size_t)o->pblas_nb * H * (o->dk > o->dv ? o->dk : o->dv));
      if (!ptmp) {
        s = la_error(LA_ERR_NOMEM, "pblas baseline: out of memory for %d rows of inputs", o->pblas_nb);
      }
      s = la_dist_agree(b->d, s);
      for (int rep = 0; rep < o->repeat && s == LA_OK; rep++) {
        double tot = 0;
        for (int h = 0; h < H && s == LA_OK; h++) {
          la_pblas_ctx c = {o->cfg.seed, h, H, o->dk, o->dv, rep == 0 ? ref64 : NULL, 0, 0, ptmp};
          la_pblas_io io = {pblas_fill, pblas_emit, &c};
          double sec;
          s = la_pblas_attention(la_dist_comm(b->d), n, o->dk, o->dv, scale, mode, o->pblas_nb,
                                 o->pblas_panel, T, &io, &sec);
          tot += sec;
          e = fmax(e, c.err);
          rm = fmax(rm, c.refmax);
        }
        best = fmin(best, tot);
      }
      free(ptmp);
      if (s == LA_OK && o->check) {
        char what[96];
        snprintf(what, sizeof what, "pblas %s n=%lld", mode_name(mode), (long long)n);
        s = check_result(b, what, e, rm, 1e-10, &rel);
      }
      la_brow row = {"pblas", mode_name(mode), "", "f64", -1, -1, H, o->dk, o->dv, P, T, -1,
                     o->repeat, n, best, exact_flops(n, H, o->dk, o->dv, mode), rel, 1, NULL, NULL, NULL};
      if (s == LA_OK) emit_row(b->d, b->csv, &row);
    }
  }
  free(q); free(k); free(v); free(out); free(ref_dt); free(ref64);
  return s;
}

/* The OpenMP default, as the engine resolves it (--threads not given). */
static int default_threads(void) {
  la_config c;
  la_config_default(&c);
  la_engine e = NULL;
  la_featmap fm = NULL;
  int t = 1;
  if (la_featmap_create(&c, 1, 1, &fm) == LA_OK && la_engine_create(&c, fm, LA_F32, 1, &e) == LA_OK)
    t = la_engine_threads(e);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
  return t;
}

int la_cmd_bench(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d);
  la_status s = LA_OK;
  if (o->threads_list.n == 0) o->threads_list = (la_list){.n = 1, .i = {default_threads()}};
  la_error_clear(); /* la_error_reason below reads only what this run records */
  la_csv csv = {0};
  la_sysinfo_get(&csv.sys);
  if (o->csv && rank == 0) {
    if (!o->force && access(o->csv, F_OK) == 0) {
      s = la_error(LA_ERR_EXISTS, "--csv %s: exists (use --force to overwrite)", o->csv);
    } else {
      /* its folder, before any timing */
      s = la_name_option(la_output_check(o->csv, 1), "--csv");
      if (s == LA_OK && !(csv.f = la_open_memstream(&csv.text, &csv.len))) {
        s = la_error(LA_ERR_NOMEM, "--csv %s: out of memory for the table", o->csv);
      }
    }
  }
  s = la_dist_agree(d, s);
  if (s == LA_OK && rank == 0) {
    fputs(la_bench_csv_header, stdout);
    if (csv.f) fputs(la_bench_csv_header, csv.f);
  }
  if (s == LA_OK && o->gemm_probe) {
    if (rank == 0) {
      int tl[LA_LIST_MAX + 1] = {1}, nt = 1;
      for (int i = 0; i < o->threads_list.n; i++) {
        int dup = 0;
        for (int j = 0; j < nt; j++) dup |= tl[j] == o->threads_list.i[i];
        if (!dup) tl[nt++] = (int)o->threads_list.i[i];
      }
      const int64_t g = o->gemm_size;
      const int reps = o->repeat > 10 ? o->repeat : 10;
      for (int i = 0; i < nt && s == LA_OK; i++)
        for (int dbl = 0; dbl < 2 && s == LA_OK; dbl++) {
          double t = gemm_rate(dbl, o->gemm_size, tl[i], reps);
          if (t < 0) {
            s = la_error(LA_ERR_NOMEM, "--gemm-probe: out of memory for three %lld x %lld matrices",
                         (long long)g, (long long)g);
            break;
          }
          la_brow row = {dbl ? "dgemm" : "sgemm", "", "", dbl ? "f64" : "f32", -1, -1, -1, -1, -1,
                         1, tl[i], -1, reps, g, t, 2.0 * g * g * g, -1, 0, NULL, NULL, NULL};
          probe_note(&csv, tl[i], dbl, 2.0 * g * g * g / t * 1e-9);
          emit_row(d, &csv, &row);
        }
      /* the kernel table's GEMMs: their own ceilings (float64 where the table has one) */
      for (int dbl = 0; dbl < 2 && s == LA_OK; dbl++)
        for (int i = 0; i < nt && s == LA_OK; i++) {
          const char *impl = "";
          const double gf = dbl ? la_kernel_probe_gflops_f64(tl[i], reps, &impl)
                                : la_kernel_probe_gflops(tl[i], reps, &impl);
          if (gf < 0) {
            s = la_error_prefix(LA_ERR_NOMEM, "--gemm-probe: ");
            break;
          }
          if (!isfinite(gf)) continue;
          const double fl = 2.0 * 64 * 64 * 64 * 2000 * tl[i];
          la_brow row = {impl, "", "", dbl ? "f64" : "f32", -1, -1, -1, -1, -1, 1, tl[i], -1, reps,
                         64, fl / (gf * 1e9), fl, -1, 0, NULL, NULL, NULL};
          probe_note(&csv, tl[i], dbl, gf);
          emit_row(d, &csv, &row);
        }
    }
    s = la_dist_agree(d, s); /* rank 0 probed; its failure is everyone's */
  }
  const int all = o->baselines == LA_BASELINES_ALL;
  la_bctx b = {d, o, &csv, all || o->baselines == LA_BASELINES_SOFTMAX,
               all || o->baselines == LA_BASELINES_PBLAS};
  for (int mi = 0; mi < o->modes.n && s == LA_OK; mi++)
    for (int ni = 0; ni < o->n_list.n && s == LA_OK; ni++) {
      const int64_t n = o->n_list.i[ni];
      if (o->no_linear && !((b.softmax || b.pblas) && n <= o->baseline_max_n)) continue;
      s = bench_one(&b, (la_mode)o->modes.i[mi], n);
    }
  if (csv.f) {
    int bad = ferror(csv.f);
    bad |= fclose(csv.f) != 0;
    if (s == LA_OK && bad) {
      s = la_error(LA_ERR_NOMEM, "--csv %s: out of memory", o->csv);
    }
    if (s == LA_OK) s = la_write_file(o->csv, csv.text, csv.len, NULL, 0, o->force);
    free(csv.text);
  }
  s = la_dist_agree(d, s);
  if (s != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(s));
    return la_status_exit_code(s);
  }
  if (rank == 0) la_sysinfo_warn(&csv.sys);
  return 0;
}
