/* `linattn run`: the forward operator, streamed in blocks (DESIGN.md §4 "Streaming").
 * input (file or generator) -> feature map -> local summaries -> collective -> apply ->
 * denominator policy -> output and report. Every rank loops over the same number of blocks
 * so that errors are agreed at each step and no rank is left waiting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "cli.h"
#include "linattn/linattn.h"
#include "linattn/report.h"
#include "pio.h"
#include "run.h"

typedef struct {
  la_cli *o;
  la_dist d;
  int synthetic;
  la_pin in[3]; /* q, k, v */
  int64_t N;
  int H, dk, dv;
  la_dtype dt;
  double t_read, t_write, t_compute;
} la_job;

static const char *tensor_name(int t) { return t == 0 ? "--q" : t == 1 ? "--k" : "--v"; }

/* Shapes of Q, K, V: [N,H,d] or [N,d]; the same N and H; Q and K the same d. */
static la_status job_shapes(la_job *j, char *err, size_t errlen) {
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
    la_status st = la_pin_open(j->d, paths[t], &j->in[t], err, errlen);
    if (st != LA_OK) return st;
    const la_npy_info *I = &j->in[t].info;
    if (I->dtype == LA_I64 || I->ndim < 2 || I->ndim > 3) {
      snprintf(err, errlen, "%s: %s must be a float array [N,H,d] or [N,d] (got %d dims, %s)",
               paths[t], tensor_name(t), I->ndim, la_dtype_name(I->dtype));
      return LA_ERR_SHAPE;
    }
    N[t] = I->shape[0];
    H[t] = I->ndim == 3 ? I->shape[1] : 1;
    D[t] = I->shape[I->ndim - 1];
    if (H[t] < 1 || D[t] < 1 || H[t] > 4096 || D[t] > LA_DIM_MAX) {
      snprintf(err, errlen, "%s: heads %lld and width %lld must be in [1,4096] and [1,%d]",
               paths[t], (long long)H[t], (long long)D[t], LA_DIM_MAX);
      return LA_ERR_SHAPE;
    }
  }
  for (int t = 1; t < 3; t++)
    if (N[t] != N[0] || H[t] != H[0]) {
      snprintf(err, errlen, "%s: shape [N=%lld, H=%lld] disagrees with %s [N=%lld, H=%lld]",
               paths[t], (long long)N[t], (long long)H[t], paths[0], (long long)N[0],
               (long long)H[0]);
      return LA_ERR_SHAPE;
    }
  if (D[1] != D[0]) {
    snprintf(err, errlen, "%s: key width %lld disagrees with the query width %lld of %s",
             paths[1], (long long)D[1], (long long)D[0], paths[0]);
    return LA_ERR_SHAPE;
  }
  if (!o->dtype_set) {
    for (int t = 1; t < 3; t++)
      if (j->in[t].info.dtype != j->in[0].info.dtype) {
        snprintf(err, errlen, "%s: dtype %s differs from %s (%s); pass --dtype to convert",
                 paths[t], la_dtype_name(j->in[t].info.dtype), paths[0],
                 la_dtype_name(j->in[0].info.dtype));
        return LA_ERR_SHAPE;
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

/* Rows [row0, row0+n) of tensor t into buf, then the finite check. */
static la_status job_read(la_job *j, int t, int64_t row0, int64_t n, void *buf, char *err,
                          size_t errlen) {
  double t0 = MPI_Wtime();
  int d = t == 2 ? j->dv : j->dk;
  la_status st = LA_OK;
  if (j->synthetic)
    la_synth_rows(j->o->cfg.seed, t, row0, n, j->H, d, j->o->input_scale, j->dt, buf);
  else
    st = la_pin_read(&j->in[t], row0, n, j->dt, buf, err, errlen);
  j->t_read += MPI_Wtime() - t0;
  if (st != LA_OK) return st;
  int64_t bt;
  int bh, bc;
  if (la_check_finite(j->dt, buf, n, j->H, d, row0, &bt, &bh, &bc) != LA_OK) {
    snprintf(err, errlen, "%s: non-finite value at (token %lld, head %d, column %d)",
             j->synthetic ? tensor_name(t) : (t == 0 ? j->o->q : t == 1 ? j->o->k : j->o->v),
             (long long)bt, bh, bc);
    return LA_ERR_NONFINITE;
  }
  return LA_OK;
}

static la_status load_projection(la_job *j, la_featmap fm, char *err, size_t errlen) {
  la_cli *o = j->o;
  la_npy_info I;
  void *data = NULL;
  la_status st = la_npy_load(o->projection, &I, &data, err, errlen);
  if (st != LA_OK) return st;
  int shared = I.ndim == 2;
  int64_t m = I.ndim >= 2 ? I.shape[I.ndim - 2] : 0, dk = I.ndim >= 2 ? I.shape[I.ndim - 1] : 0;
  if (I.dtype == LA_I64 || (I.ndim != 2 && I.ndim != 3) || (I.ndim == 3 && I.shape[0] != j->H) ||
      dk != j->dk || m != o->cfg.features) {
    snprintf(err, errlen, "%s: projection must be [H=%d, m, dk=%d] or [m, dk=%d] float, "
             "with m = --features (%d)", o->projection, j->H, j->dk, j->dk, o->cfg.features);
    free(data);
    return LA_ERR_SHAPE;
  }
  double *om = malloc(sizeof(double) * (size_t)I.count);
  if (!om) { free(data); return LA_ERR_NOMEM; }
  for (int64_t i = 0; i < I.count; i++)
    om[i] = I.dtype == LA_F32 ? (double)((float *)data)[i] : ((double *)data)[i];
  free(data);
  st = la_featmap_set_projection(fm, om, (int)m, shared);
  free(om);
  if (st == LA_ERR_NONFINITE) snprintf(err, errlen, "%s: non-finite projection entry", o->projection);
  return st;
}

/* Segment offsets (CONTRACT.md): int64 [S+1], 0 = o_0 < o_1 < ... < o_S = N. */
static la_status load_segments(const char *path, int64_t N, int64_t **seg, int64_t *count,
                               char *err, size_t errlen) {
  la_npy_info I;
  void *data = NULL;
  la_status st = la_npy_load(path, &I, &data, err, errlen);
  if (st != LA_OK) return st;
  int64_t *o = data;
  if (I.dtype != LA_I64 || I.ndim != 1 || I.shape[0] < 2) {
    snprintf(err, errlen, "%s: segment offsets must be a 1-D int64 (<i8) array [S+1] with S >= 1", path);
    free(data);
    return LA_ERR_FORMAT;
  }
  int64_t n = I.shape[0];
  if (o[0] != 0 || o[n - 1] != N) {
    snprintf(err, errlen, "%s: offsets must start at 0 and end at N = %lld (got %lld ... %lld)",
             path, (long long)N, (long long)o[0], (long long)o[n - 1]);
    free(data);
    return LA_ERR_FORMAT;
  }
  for (int64_t i = 1; i < n; i++)
    if (o[i] <= o[i - 1]) {
      snprintf(err, errlen, "%s: offsets must increase strictly: o[%lld] = %lld after o[%lld] = %lld",
               path, (long long)i, (long long)o[i], (long long)(i - 1), (long long)o[i - 1]);
      free(data);
      return LA_ERR_FORMAT;
    }
  *seg = o;
  *count = n;
  return LA_OK;
}

static void progress(la_job *j, const char *what, int64_t done, int64_t total, double t0,
                     double *last) {
  if (!j->o->progress || la_dist_rank(j->d) != 0) return;
  double now = MPI_Wtime();
  if (done < total && now - *last < 1.0) return;
  *last = now;
  double rate = done / fmax(now - t0, 1e-9), eta = rate > 0 ? (total - done) / rate : 0;
  fprintf(stderr, "linattn: %s %5.1f%%  %.3g tokens/s per rank  ETA %.0f s\n", what,
          total ? 100.0 * done / total : 100.0, rate, eta);
}

int la_cmd_run(la_dist d, la_cli *o) {
  char err[1024] = "";
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  double t_start = MPI_Wtime();
  la_job job = {0};
  job.o = o;
  job.d = d;
  job.synthetic = o->q == NULL;
  for (int t = 0; t < 3; t++) job.in[t].fh = MPI_FILE_NULL;
  la_featmap fm = NULL;
  la_engine eng = NULL;
  la_pout out = {0};
  la_den_stats stats = {0};
  la_state state = {0}, local = {0};
  la_dist_req req = NULL;
  void *raw = NULL;
  double *lsc = NULL;
  void *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
  int exitc = 1;

  int64_t *seg = NULL, nseg = 0;
  la_status st = job_shapes(&job, err, sizeof err);
  if (st == LA_OK && o->projection && la_map_is_random(o->cfg.map)) {
    /* the projection file sets m */
    la_npy_info I;
    st = la_npy_read_info(o->projection, &I, err, sizeof err);
    if (st == LA_OK && (I.ndim == 2 || I.ndim == 3) && I.shape[I.ndim - 2] >= 1 &&
        I.shape[I.ndim - 2] <= LA_FEATURES_MAX)
      o->cfg.features = (int)I.shape[I.ndim - 2];
  }
  if (st == LA_OK && o->segments) st = load_segments(o->segments, job.N, &seg, &nseg, err, sizeof err);
  if (st == LA_OK) {
    st = la_config_check(&o->cfg, job.dk, err, sizeof err);
  }
  if (st == LA_OK && o->projection && !la_map_is_random(o->cfg.map)) {
    snprintf(err, sizeof err, "--projection: the %s map has no projection", la_map_name(o->cfg.map));
    st = LA_ERR_ARG;
  }
  if (st == LA_OK && o->report && !o->force && rank == 0 && la_path_exists(o->report)) {
    snprintf(err, sizeof err, "%s: exists (use --force to overwrite)", o->report);
    st = LA_ERR_EXISTS;
  }
  st = la_dist_agree(d, st, err, sizeof err);
  if (st == LA_OK) {
    st = la_featmap_create(&o->cfg, job.H, job.dk, &fm);
    if (st == LA_OK && o->projection) st = load_projection(&job, fm, err, sizeof err);
    if (st == LA_OK && o->save_projection && rank == 0) {
      int m;
      const double *om = la_featmap_projection(fm, &m);
      if (!om) {
        snprintf(err, sizeof err, "--save-projection: the %s map has no projection", la_map_name(o->cfg.map));
        st = LA_ERR_ARG;
      } else {
        int64_t shp[3] = {job.H, m, job.dk};
        st = la_npy_save(o->save_projection, LA_F64, 3, shp, om, o->force, err, sizeof err);
      }
    }
    if (st != LA_OK && !err[0]) snprintf(err, sizeof err, "feature map: %s", la_status_string(st));
    st = la_dist_agree(d, st, err, sizeof err);
  }
  if (st == LA_OK) {
    st = la_engine_create(&o->cfg, fm, job.dt, job.dv, &eng);
    if (st == LA_OK && seg) st = la_engine_set_segments(eng, seg, nseg);
    if (st == LA_OK) st = la_state_init(&state, job.H, la_featmap_width(fm), job.dv);
    if (st == LA_OK) st = la_state_init(&local, job.H, la_featmap_width(fm), job.dv);
    if (st == LA_OK) st = la_den_stats_init(&stats);
    if (st != LA_OK) snprintf(err, sizeof err, "engine: %s", la_status_string(st));
    st = la_dist_agree(d, st, err, sizeof err);
  }
  if (st == LA_OK && o->out) {
    int64_t shp[3] = {job.N, job.H, job.dv};
    st = la_pout_open(d, o->out, job.dt, 3, shp, o->force, &out, err, sizeof err);
  }
  /* Windows and bidirectional segments hold the rank's shard in memory (O(N/P)); everything
   * else streams in blocks of --block-tokens rows. */
  const int in_memory = (o->cfg.window > 0 && o->cfg.window < job.N) ||
                        (seg && o->cfg.mode == LA_BIDIRECTIONAL);
  int64_t nloc = 0, row0 = 0, B = o->block, nblk = 0;
  if (st == LA_OK) {
    la_split_ownership(job.N, P, rank, &nloc, &row0);
    int64_t maxloc = job.N / P + (job.N % P ? 1 : 0);
    if (in_memory) B = maxloc > 0 ? maxloc : 1;
    nblk = (maxloc + B - 1) / B;
    if (B > nloc && nloc > 0) B = nloc;
    size_t es = la_dtype_size(job.dt), hb = (size_t)B * job.H;
    bq = malloc(es * hb * job.dk + 1);
    bk = malloc(es * hb * job.dk + 1);
    bv = malloc(es * hb * job.dv + 1);
    bo = malloc(es * hb * job.dv + 1);
    if (o->cfg.mode == LA_CAUSAL && P > 1 && !in_memory) { /* overlap buffers for block 0 */
      raw = malloc(es * hb * (job.dv + 1) + 1);
      lsc = malloc(sizeof(double) * hb + 1);
    }
    if (!bq || !bk || !bv || !bo || (o->cfg.mode == LA_CAUSAL && P > 1 && !in_memory && (!raw || !lsc))) {
      snprintf(err, sizeof err, "cannot allocate block buffers of %lld tokens (lower --block-tokens)", (long long)B);
      st = LA_ERR_NOMEM;
    }
    st = la_dist_agree(d, st, err, sizeof err);
  }
  const int bidir = o->cfg.mode == LA_BIDIRECTIONAL;
  double tp0 = MPI_Wtime(), last = 0;
  /* Pass 1: key summaries (bidirectional, or the rank total to be exscanned). */
  if (st == LA_OK && (bidir || P > 1) && !in_memory) {
    for (int64_t b = 0; b < nblk && st == LA_OK; b++) {
      int64_t lo = b * B, n = lo >= nloc ? 0 : (nloc - lo < B ? nloc - lo : B);
      if (n > 0) st = job_read(&job, 1, row0 + lo, n, bk, err, sizeof err);
      if (st == LA_OK && n > 0) st = job_read(&job, 2, row0 + lo, n, bv, err, sizeof err);
      double t0 = MPI_Wtime();
      if (st == LA_OK && n > 0) st = la_engine_accumulate(eng, row0 + lo, n, bk, bv, &state);
      job.t_compute += MPI_Wtime() - t0;
      st = la_dist_agree(d, st, err, sizeof err);
      progress(&job, "pass 1/2 (keys)", (b + 1) * B > nloc ? nloc : (b + 1) * B, nloc, tp0, &last);
    }
    if (st == LA_OK && bidir) st = la_dist_allreduce(d, &state);
    if (st == LA_OK && !bidir) st = la_dist_iexscan_begin(d, &state, &req);
  }
  tp0 = MPI_Wtime();
  last = 0;
  /* Pass 2: outputs. */
  for (int64_t b = 0; b < nblk && st == LA_OK; b++) {
    int64_t lo = b * B, n = lo >= nloc ? 0 : (nloc - lo < B ? nloc - lo : B);
    if (n > 0) st = job_read(&job, 0, row0 + lo, n, bq, err, sizeof err);
    if ((!bidir || in_memory) && n > 0 && st == LA_OK) st = job_read(&job, 1, row0 + lo, n, bk, err, sizeof err);
    if ((!bidir || in_memory) && n > 0 && st == LA_OK) st = job_read(&job, 2, row0 + lo, n, bv, err, sizeof err);
    double t0 = MPI_Wtime();
    if (in_memory) {
      /* one block per rank: la_dist_forward combines the masks across ranks (and merges the
       * denominator statistics over ranks itself) */
      st = la_dist_agree(d, st, err, sizeof err);
      if (st == LA_OK) st = la_dist_forward(d, eng, n, row0 + lo, bq, bk, bv, bo, &stats);
      if (st != LA_OK && !err[0]) snprintf(err, sizeof err, "forward: %s", la_status_string(st));
    } else if (req) {
      /* Causal block 0 on many ranks: local outputs from a zero state while the rank prefix
       * travels (MPI_Iexscan), then the correction phi(q)^T P and state = P (+) local. */
      la_status ls = st;
      if (ls == LA_OK && n > 0) {
        la_state_reset(&local);
        ls = la_engine_apply_local(eng, row0 + lo, n, bq, bk, bv, &local, raw, lsc);
      }
      st = la_dist_iexscan_end(d, &req, &state);
      if (st == LA_OK) st = ls;
      if (st == LA_OK && n > 0) st = la_engine_correct(eng, row0 + lo, n, bq, &state, raw, lsc, bo, &stats);
      if (st == LA_OK) la_state_combine(&state, &local);
    } else if (st == LA_OK && n > 0) {
      st = la_engine_apply(eng, row0 + lo, n, bq, bk, bv, &state, bo, &stats);
    }
    job.t_compute += MPI_Wtime() - t0;
    if (st == LA_OK && n > 0 && o->out) {
      t0 = MPI_Wtime();
      st = la_pout_write(&out, row0 + lo, n, bo, err, sizeof err);
      job.t_write += MPI_Wtime() - t0;
    }
    st = la_dist_agree(d, st, err, sizeof err);
    progress(&job, bidir || P > 1 ? "pass 2/2 (outputs)" : "outputs", (b + 1) * B > nloc ? nloc : (b + 1) * B, nloc, tp0, &last);
  }
  if (st == LA_OK && !in_memory) st = la_dist_reduce_stats(d, &stats);
  if (st == LA_OK && o->cfg.normalize && stats.violations > 0) {
    snprintf(err, sizeof err,
             "denominator policy '%s': %lld of %lld rows have a denominator %s; first at "
             "(token %lld, head %d); no output written (see --denominator)",
             o->den_string, (long long)stats.violations, (long long)stats.rows,
             o->cfg.den_policy == LA_DEN_ZERO_EMPTY ? "< 0 or non-finite"
                                                    : "<= 0 or non-finite",
             (long long)stats.first_bad_token, stats.first_bad_head);
    st = LA_ERR_DENOMINATOR;
  }
  if (st == LA_OK && stats.overflows > 0) {
    snprintf(err, sizeof err,
             "unnormalized output overflows the %s range in %lld rows; first at (token %lld, "
             "head %d); no output written",
             la_dtype_name(job.dt), (long long)stats.overflows,
             (long long)stats.first_overflow_token, stats.first_overflow_head);
    st = LA_ERR_OVERFLOW;
  }
  if (o->out) {
    double t0 = MPI_Wtime();
    la_status cs = la_pout_close(d, &out, st == LA_OK, err, sizeof err);
    job.t_write += MPI_Wtime() - t0;
    if (st == LA_OK) st = cs;
  }
  double t_total = MPI_Wtime() - t_start;
  if (st == LA_OK) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t rss = (int64_t)ru.ru_maxrss * 1024, rss_max = rss, bytes = la_dist_comm_bytes(d), bytes_max;
    double tt[3] = {job.t_read, job.t_compute, job.t_write}, ttm[3];
    MPI_Allreduce(&rss, &rss_max, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    MPI_Allreduce(&bytes, &bytes_max, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    MPI_Allreduce(tt, ttm, 3, MPI_DOUBLE, MPI_MAX, la_dist_comm(d));
    if (rank == 0) {
      la_report rep = {0};
      rep.subcommand = "run";
      rep.cfg = o->cfg;
      rep.den_policy_string = o->den_string;
      rep.dtype = job.dt;
      rep.n = job.N;
      rep.heads = job.H;
      rep.dk = job.dk;
      rep.dv = job.dv;
      rep.r = la_featmap_width(fm);
      rep.chunk = la_engine_chunk(eng);
      rep.scale = o->cfg.scale > 0 ? o->cfg.scale : 1.0 / sqrt((double)job.dk);
      rep.ranks = P;
      rep.threads = la_engine_threads(eng);
      rep.segments = seg ? nseg - 1 : 1;
      rep.window = o->cfg.window;
      rep.t_total = t_total;
      rep.t_read = ttm[0];
      rep.t_compute = ttm[1];
      rep.t_comm = la_dist_comm_seconds(d);
      rep.t_write = ttm[2];
      double fl = la_useful_flops(&o->cfg, job.N, job.H, job.dk, job.dv, rep.r);
      rep.gflops = ttm[1] > 0 ? fl / ttm[1] * 1e-9 : NAN;
      rep.tokens_per_second = ttm[1] > 0 ? job.N / ttm[1] : NAN;
      rep.den = stats;
      rep.peak_rss_bytes_max_rank = rss_max;
      rep.comm_bytes_per_rank = bytes_max;
      rep.input = job.synthetic ? "synthetic" : o->q;
      rep.output = o->out;
      fprintf(stderr,
              "linattn: run %s %s %s N=%lld H=%d dk=%d dv=%d r=%d ranks=%d threads=%d: "
              "%.3g s compute, %.4g tokens/s, %.4g GFLOP/s, den min %.3g\n",
              o->cfg.mode == LA_CAUSAL ? "causal" : "bidirectional", la_map_name(o->cfg.map),
              la_dtype_name(job.dt), (long long)job.N, job.H, job.dk, job.dv, rep.r, P,
              rep.threads, ttm[1], rep.tokens_per_second, rep.gflops, stats.min);
      if (o->report) st = la_report_write(o->report, &rep, o->force, err, sizeof err);
    }
    st = la_dist_agree(d, st, err, sizeof err);
  }
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", err[0] ? err : la_status_string(st));
    exitc = la_status_exit_code(st);
  } else {
    exitc = 0;
  }
  free(seg);
  free(bq);
  free(bk);
  free(bv);
  free(bo);
  free(raw);
  free(lsc);
  la_state_free(&state);
  la_state_free(&local);
  la_den_stats_free(&stats);
  la_engine_destroy(&eng);
  la_featmap_destroy(&fm);
  for (int t = 0; t < 3; t++) la_pin_close(&job.in[t]);
  return exitc;
}
