/* Shared set-up, input, verdict and report of the `linattn` subcommands (job.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "job.h"
#include "la_alloc.h"
#include "memest.h"
#include "sysinfo.h"


static const char *tensor_name(int t) {
  return t == 0 ? "--q" : t == 1 ? "--k" : t == 2 ? "--v" : t == 3 ? "--grad-out" : "--gates";
}

/* Shapes of Q, K, V: [N,H,d] or [N,d]; the same N and H; Q and K the same d. */
static la_status job_shapes(la_job *j) {
  la_cli *o = j->o;
  if (j->synthetic) {
    j->N = o->n;
    j->H = o->heads;
    j->dk = o->dk;
    j->dv = o->dv;
    j->dt = o->dtype;
    return LA_OK;
  }
  const char *paths[3] = {o->q, o->k, o->v};
  int64_t N[3], H[3], D[3];
  for (int t = 0; t < 3; t++) {
    la_status st = la_pin_open(j->d, paths[t], &j->in[t]);
    if (st != LA_OK) return la_name_option(st, tensor_name(t));
    const la_npy_info *I = &j->in[t].info;
    if (I->dtype == LA_I64 || I->ndim < 2 || I->ndim > 3) {
      return la_error(LA_ERR_SHAPE, "%s %s: must be a float array [N,H,d] or [N,d] (got %d dims, %s)",
                      tensor_name(t), paths[t], I->ndim, la_dtype_name(I->dtype));
    }
    N[t] = I->shape[0];
    H[t] = I->ndim == 3 ? I->shape[1] : 1;
    D[t] = I->shape[I->ndim - 1];
    if (H[t] < 1 || D[t] < 1 || H[t] > 4096 || D[t] > LA_DIM_MAX) {
      return la_error(LA_ERR_SHAPE, "%s %s: heads %lld and width %lld must be in [1,4096] and [1,%d]",
                      tensor_name(t), paths[t], (long long)H[t], (long long)D[t], LA_DIM_MAX);
    }
  }
  for (int t = 1; t < 3; t++)
    if (N[t] != N[0] || H[t] != H[0]) {
      return la_error(LA_ERR_SHAPE, "%s %s: shape [N=%lld, H=%lld] disagrees with --q %s [N=%lld, H=%lld]",
                      tensor_name(t), paths[t], (long long)N[t], (long long)H[t], paths[0],
                      (long long)N[0], (long long)H[0]);
    }
  if (D[1] != D[0]) {
    return la_error(LA_ERR_SHAPE, "--k %s: key width %lld disagrees with the query width %lld of --q %s",
                    paths[1], (long long)D[1], (long long)D[0], paths[0]);
  }
  if (!o->dtype_set) {
    for (int t = 1; t < 3; t++)
      if (j->in[t].info.dtype != j->in[0].info.dtype) {
        return la_error(LA_ERR_SHAPE, "%s %s: dtype %s differs from --q %s (%s); pass --dtype to convert",
                        tensor_name(t), paths[t], la_dtype_name(j->in[t].info.dtype), paths[0],
                        la_dtype_name(j->in[0].info.dtype));
      }
    j->dt = j->in[0].info.dtype;
  } else {
    j->dt = o->dtype;
  }
  j->N = N[0];
  j->H = (int)H[0];
  j->dk = (int)D[0];
  j->dv = (int)D[2];
  return LA_OK;
}

/* dL/dout for grad: --grad-out [N,H,dv] (or [N,dv] for H = 1); the generator by default for
 * the synthetic workload. */
static la_status job_grad_input(la_job *j) {
  const char *g = j->o->grad_out;
  if (!g) {
    if (j->synthetic) return LA_OK;
    return la_error(LA_ERR_ARG, "--grad-out: dL/dout [N,H,dv] is required with input files");
  }
  la_status st = la_pin_open(j->d, g, &j->in[3]);
  if (st != LA_OK) return la_name_option(st, "--grad-out");
  const la_npy_info *I = &j->in[3].info;
  int ok = I->dtype != LA_I64 && I->shape[0] == j->N &&
           ((I->ndim == 3 && I->shape[1] == j->H && I->shape[2] == j->dv) ||
            (I->ndim == 2 && j->H == 1 && I->shape[1] == j->dv));
  if (!ok) {
    return la_error(LA_ERR_SHAPE, "--grad-out %s: must be a float array [N=%lld, H=%d, dv=%d]", g,
                    (long long)j->N, j->H, j->dv);
  }
  if (!j->o->dtype_set && I->dtype != j->dt) {
    return la_error(LA_ERR_SHAPE, "--grad-out %s: dtype %s differs from the inputs (%s); pass --dtype to convert", g,
                    la_dtype_name(I->dtype), la_dtype_name(j->dt));
  }
  return LA_OK;
}

/* The shape of an .npy as "[a, b, c]". */
static void shape_string(const la_npy_info *I, char *got, size_t len) {
  int at = snprintf(got, len, "[");
  for (int i = 0; i < I->ndim && at < (int)len - 24; i++)
    at += snprintf(got + at, len - at, "%s%lld", i ? ", " : "", (long long)I->shape[i]);
  snprintf(got + at, len - at, "]");
}

/* --gates F: float [N, H], or [N] for one head; per feature [N, H, r] (GLA's diagonal form,
 * docs/design.md §1.2 "Per-feature gates"), r checked against the map once it is made
 * (job_gates_width) (docs/cli.md "Files"). */
static la_status job_gates_input(la_job *j) {
  const char *g = j->o->gates;
  la_status st = la_pin_open(j->d, g, &j->in[4]);
  if (st != LA_OK) return la_name_option(st, "--gates");
  const la_npy_info *I = &j->in[4].info;
  const int feature = I->ndim == 3 && I->shape[1] == j->H && I->shape[2] >= 1;
  const int ok = I->dtype != LA_I64 && I->shape[0] == j->N &&
                 ((I->ndim == 2 && I->shape[1] == j->H) || (I->ndim == 1 && j->H == 1) || feature);
  char got[96];
  shape_string(I, got, sizeof got);
  LA_CHECK(ok, LA_ERR_SHAPE, "--gates %s: must be a float array of log-gates [N=%lld, H=%d]%s, "
           "or one per feature [N=%lld, H=%d, r] (got %s %s)", g, (long long)j->N, j->H,
           j->H == 1 ? " or [N]" : "", (long long)j->N, j->H, got, la_dtype_name(I->dtype));
  LA_CHECK(!feature || j->o->cfg.window <= 0, LA_ERR_UNSUPPORTED, "--gates %s: per-feature "
           "log-gates %s with --window are not built yet (docs/design.md §1.2 \"Per-feature "
           "gates\"); give one log-gate per token and head, [N=%lld, H=%d]", g, got,
           (long long)j->N, j->H);
  if (feature) { /* the engine's per-feature gates */
    j->o->cfg.gates = LA_GATES_FEATURE;
    j->gw = (int)I->shape[2];
  }
  return LA_OK;
}

/* Per-feature gates: r of the file must be the feature map's width. */
static la_status job_gates_width(la_job *j) {
  if (j->o->cfg.gates != LA_GATES_FEATURE || !j->o->gates) return LA_OK; /* a file's */
  const int r = la_featmap_width(j->fm);
  char got[96];
  shape_string(&j->in[4].info, got, sizeof got);
  LA_CHECK(j->gw == r, LA_ERR_SHAPE, "--gates %s: per-feature log-gates %s have r = %d; the %s "
           "map has r = %d (give [N=%lld, H=%d, %d], or [N, H] for one gate per token and head)",
           j->o->gates, got, j->gw, la_map_name(j->o->cfg.map), r, (long long)j->N, j->H, r);
  return LA_OK;
}

la_status la_job_read_gates(la_job *j, int64_t row0, int64_t n, double *g) {
  double t0 = MPI_Wtime();
  la_status st = LA_OK;
  const int H = j->H;
  if (!j->in[4].path) { /* log sigmoid(3 + u), u ~ N(0, 1), |u| <= 7.45: in [-10.5, -5e-6];
                         * one per token and head, or per feature (gw = r: synthetic-feature) */
    la_synth_rows_threads(j->o->cfg.seed, 4, row0, n, H, j->gw, 1.0, LA_F64, g,
                          j->eng ? la_engine_threads(j->eng) : 0);
    for (int64_t i = 0; i < n * H * j->gw; i++) g[i] = -log1p(exp(-(3.0 + g[i])));
  } else {
    st = la_name_option(la_pin_read(&j->in[4], row0, n, LA_F64, g), "--gates");
  }
  j->t_read += MPI_Wtime() - t0;
  /* bound to the engine, whose check of every value is the one check; the file named */
  if (st == LA_OK && (st = la_engine_set_gates(j->eng, g, row0, n)) != LA_OK && j->in[4].path)
    la_error_prefix(st, "--gates %s: ", j->in[4].path);
  return st;
}

/* Rows [row0, row0+n) of tensor t into buf, then the finite check. */
la_status la_job_read(la_job *j, int t, int64_t row0, int64_t n, void *buf) {
  double t0 = MPI_Wtime();
  int d = t >= 2 ? j->dv : j->dk;
  la_status st = LA_OK;
  if (!j->in[t].path) /* the generator; G (tensor 3) is unit normal */
    la_synth_rows_threads(j->o->cfg.seed, t, row0, n, j->H, d,
                          t == 3 ? 1.0 : j->o->input_scale, j->dt, buf, j->eng ? la_engine_threads(j->eng) : 0);
  else
    st = la_name_option(la_pin_read(&j->in[t], row0, n, j->dt, buf), tensor_name(t));
  if (st != LA_OK) {
    j->t_read += MPI_Wtime() - t0;
    return st;
  }
  int64_t bt;
  int bh, bc;
  /* The finite check is part of reading: the "read" seconds include it. The generator's
   * values are bounded, |x| <= 7.45 |scale| (docs/design.md §2.1 "Synthetic inputs"), so its
   * rows need no check while 8 |scale| is below the dtype's largest value. */
  const double sc = t == 3 ? 1.0 : fabs(j->o->input_scale);
  const int bounded = !j->in[t].path && 8.0 * sc < (j->dt == LA_F32 ? (double)FLT_MAX : DBL_MAX);
  const la_status fin =
      bounded ? LA_OK : la_check_finite(j->dt, buf, n, j->H, d, row0, &bt, &bh, &bc);
  j->t_read += MPI_Wtime() - t0;
  if (fin != LA_OK) {
    return la_error(LA_ERR_NONFINITE, "%s%s%s: non-finite value at (token %lld, head %d, column %d)",
                    tensor_name(t), j->in[t].path ? " " : "", j->in[t].path ? j->in[t].path : "",
                    (long long)bt, bh, bc);
  }
  return LA_OK;
}

static la_status load_projection(la_job *j, la_featmap fm) {
  la_cli *o = j->o;
  la_npy_info I;
  void *data = NULL;
  la_status st = la_npy_load(o->projection, &I, &data);
  if (st != LA_OK) return la_name_option(st, "--projection");
  int shared = I.ndim == 2;
  st = la_projection_check(I.dtype, I.ndim, I.shape, data, j->H, j->dk, o->cfg.features);
  if (st != LA_OK) {
    free(data);
    return la_error_prefix(st, "--projection %s: ", o->projection);
  }
  int64_t m = I.shape[I.ndim - 2];
  double *om = la_malloc(sizeof(double) * (size_t)I.count);
  if (!om) {
    free(data);
    return la_error(LA_ERR_NOMEM, "--projection %s: out of memory for the projection (%lld entries)",
                    o->projection, (long long)I.count);
  }
  for (int64_t i = 0; i < I.count; i++)
    om[i] = I.dtype == LA_F32 ? (double)((float *)data)[i] : ((double *)data)[i];
  free(data);
  st = la_featmap_set_projection(fm, om, (int)m, shared);
  free(om);
  if (st == LA_ERR_NONFINITE)
    return la_error(st, "--projection %s: non-finite projection entry", o->projection);
  return st == LA_OK ? LA_OK : la_error_prefix(st, "--projection %s: ", o->projection);
}

/* Segment offsets (docs/cli.md): int64 [S+1], 0 = o_0 < o_1 < ... < o_S = N. */
static la_status load_segments(const char *path, int64_t N, int64_t **seg, int64_t *count) {
  la_npy_info I;
  void *data = NULL;
  la_status st = la_npy_load(path, &I, &data);
  if (st != LA_OK) return la_name_option(st, "--segments");
  int64_t *o = data;
  const int ok1d = I.dtype == LA_I64 && I.ndim == 1; /* else: no offsets */
  int64_t n = ok1d ? I.shape[0] : 0;
  if ((st = la_segments_check(ok1d ? o : NULL, n, N)) != LA_OK) {
    free(data);
    return la_error_prefix(st, "--segments %s: ", path);
  }
  *seg = o;
  *count = n;
  return LA_OK;
}

void la_job_progress(la_job *j, const char *what, int64_t done, int64_t total, double t0,
                     double *last) {
  if (!j->o->progress || la_dist_rank(j->d) != 0) return;
  double now = MPI_Wtime();
  if (done < total && now - *last < 1.0) return;
  *last = now;
  double rate = done / fmax(now - t0, 1e-9), eta = rate > 0 ? (total - done) / rate : 0;
  fprintf(stderr, "linattn: %s %5.1f%%  %.3g tokens/s per rank  ETA %.0f s\n", what,
          total ? 100.0 * done / total : 100.0, rate, eta);
}

/* The default --block-tokens: one block of the widest tensor is about 2 MiB, so the block
 * just generated or read is still in cache when the chunks reach it. Measured on the main
 * job (2 ranks x 1 thread, H = 4, dk = dv = 64, f32, 2^20 tokens): 16384 tokens (16 MiB)
 * took 2.2 s, 2048 (2 MiB) 1.3 s (docs/design.md §4.5). */
static int64_t auto_block(const la_job *j) {
  const int64_t row = (int64_t)j->H * (j->dk > j->dv ? j->dk : j->dv) *
                      (j->dt == LA_F32 ? 4 : 8);
  int64_t b = 256;
  while (b < 16384 && 2 * b * row <= ((int64_t)1 << 21)) b *= 2;
  return b;
}

la_status la_job_setup(la_job *j, la_dist d, la_cli *o, int want_g) {
  memset(j, 0, sizeof *j);
  j->o = o;
  j->ckpt_resumed = -1;
  j->d = d;
  j->t_start = MPI_Wtime();
  j->synthetic = o->q == NULL;
  j->gw = 1;
  for (int t = 0; t < 5; t++) j->in[t].fh = MPI_FILE_NULL;
  const int rank = la_dist_rank(d);
  la_status st = job_shapes(j);
  if (st == LA_OK && o->block == 0) o->block = auto_block(j);
  if (st == LA_OK && want_g) st = job_grad_input(j);
  if (st == LA_OK && o->cfg.gates && o->gates) st = job_gates_input(j);
  if (st == LA_OK && o->projection && la_map_is_random(o->cfg.map)) {
    /* the projection file sets m */
    la_npy_info I;
    st = la_name_option(la_npy_read_info(o->projection, &I), "--projection");
    if (st == LA_OK) o->cfg.features = la_projection_features(I.ndim, I.shape, o->cfg.features);
  }
  /* --gates synthetic-feature: one per feature of the map (r from the projection's m too) */
  if (st == LA_OK && o->cfg.gates == LA_GATES_FEATURE && !o->gates) {
    j->gw = la_map_width(o->cfg.map, j->dk, o->cfg.features);
    if (o->cfg.window > 0)
      st = la_error(LA_ERR_UNSUPPORTED, "--gates synthetic-feature: per-feature log-gates with "
                    "--window are not built yet (docs/design.md §1.2 \"Per-feature gates\"); "
                    "give --gates synthetic for one per token and head");
  }
  if (st == LA_OK && o->segments) st = load_segments(o->segments, j->N, &j->seg, &j->nseg);
  if (st == LA_OK) st = la_config_check(&o->cfg, j->dk);
  if (st == LA_OK && o->projection && !la_map_is_random(o->cfg.map)) {
    st = la_error(LA_ERR_ARG, "--projection: the %s map has no projection", la_map_name(o->cfg.map));
  }
  st = la_dist_agree(d, st);
  /* The memory estimate against --mem-limit, before the projection, the engine's workspaces
   * and the caller's buffers are allocated (docs/design.md §4.8). */
  if (st == LA_OK) st = la_mem_check(j, want_g);
  /* Every output before anything is computed: refused if it exists (without --force), if
   * its folder is missing or a file cannot be created there; stale temporaries of dead runs
   * removed (docs/cli.md "Files"). */
  if (st == LA_OK) {
    const char *outs[7] = {o->report, o->out, o->grad_q, o->grad_k, o->grad_v, o->save_projection,
                           o->grad_gates};
    const char *opts[7] = {"--report", "--out", "--grad-q", "--grad-k", "--grad-v",
                           "--save-projection", "--grad-gates"};
    st = la_outputs_check(d, outs, opts, 7, o->force);
  }
  if (st == LA_OK) {
    st = la_featmap_create(&o->cfg, j->H, j->dk, &j->fm);
    if (st != LA_OK) la_error_prefix(st, "feature map: ");
    if (st == LA_OK) st = job_gates_width(j);
    if (st == LA_OK && o->projection) st = load_projection(j, j->fm);
    if (st == LA_OK && o->save_projection && rank == 0) {
      int m;
      const double *om = la_featmap_projection(j->fm, &m);
      if (!om) {
        st = la_error(LA_ERR_ARG, "--save-projection: the %s map has no projection", la_map_name(o->cfg.map));
      } else {
        int64_t shp[3] = {j->H, m, j->dk};
        st = la_npy_save(o->save_projection, LA_F64, 3, shp, om, o->force);
      }
    }
    st = la_dist_agree(d, st);
  }
  /* --decay (docs/design.md §1.2): one value or one per head, on any number of ranks (the
   * scan element carries the cumulative decay) */
  if (st == LA_OK && o->cfg.decay && o->cfg.decay_n != 1 && o->cfg.decay_n != j->H)
    st = la_error(LA_ERR_ARG, "--decay: a list of %d values for %d heads (give one value, or one "
                  "per head)", o->cfg.decay_n, j->H);
  if (st == LA_OK) {
    st = la_engine_create(&o->cfg, j->fm, j->dt, j->dv, &j->eng);
    if (st == LA_OK && j->seg) st = la_engine_set_segments(j->eng, j->seg, j->nseg);
    if (st != LA_OK) la_error_prefix(st, "engine: ");
    st = la_dist_agree(d, st);
  }
  return st;
}

void la_job_close(la_job *j) {
  la_engine_destroy(&j->eng);
  la_featmap_destroy(&j->fm);
  for (int t = 0; t < 5; t++) la_pin_close(&j->in[t]);
  free(j->seg);
  j->seg = NULL;
}

la_status la_job_verdict(const la_job *j, const la_den_stats *stats, const char *what) {
  const la_cli *o = j->o;
  if (o->cfg.normalize && stats->violations > 0) {
    return la_error(LA_ERR_DENOMINATOR, "denominator policy '%s': %lld of %lld rows have a denominator %s; first at "
                    "(token %lld, head %d); nothing written (see --denominator)",
                    o->den_string, (long long)stats->violations, (long long)stats->rows,
                    o->cfg.den_policy == LA_DEN_ZERO_EMPTY ? "< 0 or non-finite"
                    : "<= 0 or non-finite",
                    (long long)stats->first_bad_token, stats->first_bad_head);
  }
  if (stats->overflows > 0) {
    return la_error(LA_ERR_OVERFLOW, "%s: unnormalized output overflows the %s range in %lld rows; first at (token %lld, "
                    "head %d); nothing written",
                    what, la_dtype_name(j->dt), (long long)stats->overflows,
                    (long long)stats->first_overflow_token, stats->first_overflow_head);
  }
  return LA_OK;
}

/* This process's peak resident memory: VmHWM of /proc/self/status, which belongs to the
 * program since its exec; getrusage's ru_maxrss also keeps the peak of the process that
 * forked it (a Python driver holding large arrays), so it is only the fallback. */
static int64_t peak_rss(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long long kb = -1;
  while (f && kb < 0 && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %lld kB", &kb) != 1) kb = -1;
  if (f) fclose(f);
  if (kb >= 0) return (int64_t)kb * 1024;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (int64_t)ru.ru_maxrss * 1024;
}

la_status la_job_report(la_job *j, const char *sub, const la_den_stats *stats, const char *out,
                        double flops_factor) {
  la_status st = LA_OK;
  la_dist d = j->d;
  const la_cli *o = j->o;
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  double t_total = MPI_Wtime() - j->t_start;
  {
    int64_t rss = peak_rss(), rss_max = rss, bytes = la_dist_comm_bytes(d), bytes_max;
    double tt[3] = {j->t_read, j->t_compute, j->t_write}, ttm[3];
    MPI_Allreduce(&rss, &rss_max, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    MPI_Allreduce(&bytes, &bytes_max, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    MPI_Allreduce(tt, ttm, 3, MPI_DOUBLE, MPI_MAX, la_dist_comm(d));
    if (rank == 0) {
      la_report rep = {0};
      rep.subcommand = sub;
      rep.cfg = o->cfg;
      rep.den_policy_string = o->den_string;
      rep.dtype = j->dt;
      rep.n = j->N;
      rep.heads = j->H;
      rep.dk = j->dk;
      rep.dv = j->dv;
      rep.r = la_featmap_width(j->fm);
      rep.chunk = la_engine_chunk(j->eng);
      rep.block_tokens = strcmp(sub, "run") == 0 ? o->block : 0;
      rep.kernels = la_engine_kernels(j->eng);
      la_sysinfo si;
      la_sysinfo_get(&si);
      rep.cpu_model = si.model;
      rep.cpu_isa = si.isa;
      rep.blas_core = si.blas_core;
      rep.scan_algorithm = la_scan_algorithm_names[la_dist_scan_algorithm(d)];
      rep.scale = o->cfg.scale > 0 ? o->cfg.scale : 1.0 / sqrt((double)j->dk);
      rep.ranks = P;
      rep.threads = la_engine_threads(j->eng);
      rep.segments = j->seg ? j->nseg - 1 : 1;
      rep.window = o->cfg.window;
      rep.t_total = t_total;
      rep.t_read = ttm[0];
      rep.t_compute = ttm[1];
      rep.t_comm = la_dist_comm_seconds(d);
      rep.t_write = ttm[2];
      double fl = flops_factor * la_useful_flops(&o->cfg, j->N, j->H, j->dk, j->dv, rep.r);
      rep.gflops = ttm[1] > 0 ? fl / ttm[1] * 1e-9 : NAN;
      rep.tokens_per_second = ttm[1] > 0 ? j->N / ttm[1] : NAN;
      rep.den = *stats;
      rep.peak_rss_bytes_max_rank = rss_max;
      rep.mem_estimate_bytes_per_rank = j->mem_estimate;
      rep.mem_limit_bytes_per_rank = j->mem_limit;
      rep.comm_bytes_per_rank = bytes_max;
      rep.input = j->synthetic ? "synthetic" : o->q;
      rep.output = out;
      rep.checkpoint_dir = o->checkpoint;
      rep.resumed_from_token = j->ckpt_resumed;
      rep.resumed_pass = j->ckpt_pass;
      rep.resumed_ranks = j->ckpt_ranks;
      rep.checkpoints_written = j->ckpt_written;
      fprintf(stderr,
              "linattn: %s %s %s %s N=%lld H=%d dk=%d dv=%d r=%d ranks=%d threads=%d: "
              "%.3g s compute, %.4g tokens/s, %.4g GFLOP/s, den min %.3g\n",
              sub, o->cfg.mode == LA_CAUSAL ? "causal" : "bidirectional", la_map_name(o->cfg.map),
              la_dtype_name(j->dt), (long long)j->N, j->H, j->dk, j->dv, rep.r, P,
              rep.threads, ttm[1], rep.tokens_per_second, rep.gflops, stats->min);
      la_sysinfo_warn(&si);
      if (o->report) st = la_report_write(o->report, &rep, o->force);
    }
    st = la_dist_agree(d, st);
  }
  return st;
}
