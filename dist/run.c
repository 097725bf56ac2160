/* `linattn run`: the forward operator, streamed in blocks (docs/design.md §4.5).
 * input (file or generator) -> feature map -> local summaries -> collective -> apply ->
 * denominator policy -> output and report. Every rank loops over the same number of blocks
 * so that errors are agreed at each step and no rank is left waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "job.h"
#include "la_alloc.h"
#include "run.h"

int la_cmd_run(la_dist d, la_cli *o) {
  char err[1024] = "";
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  la_job job;
  la_pout out = {0};
  la_den_stats stats = {0};
  la_state state = {0}, local = {0};
  la_xstate xs = {0}; /* --reproducible: the exact prefix or summary (§4.7) */
  la_dist_req req = NULL;
  void *raw = NULL;
  double *lsc = NULL;
  void *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
  int exitc = 1;

  la_error_clear(); /* la_error_reason below reads only what this run records */
  la_status st = la_job_setup(&job, d, o, 0, err, sizeof err);
  if (st == LA_OK) {
    st = la_state_init(&state, job.H, la_featmap_width(job.fm), job.dv);
    if (st == LA_OK) st = la_state_init(&local, job.H, la_featmap_width(job.fm), job.dv);
    if (st == LA_OK) st = la_den_stats_init(&stats);
    if (st == LA_OK && o->cfg.reproducible)
      st = la_xstate_init(&xs, job.H, la_featmap_width(job.fm), job.dv);
    if (st != LA_OK) snprintf(err, sizeof err, "engine: %s", la_error_reason(st));
    st = la_dist_agree(d, st, err, sizeof err);
  }
  la_engine eng = job.eng;
  if (st == LA_OK && o->out) {
    int64_t shp[3] = {job.N, job.H, job.dv};
    st = la_pout_open(d, o->out, job.dt, 3, shp, o->force, &out, err, sizeof err);
  }
  /* Windows and bidirectional segments hold the rank's shard in memory (O(N/P)); everything
   * else streams in blocks of --block-tokens rows. */
  const int in_memory = (o->cfg.window > 0 && o->cfg.window < job.N) ||
                        (job.seg && o->cfg.mode == LA_BIDIRECTIONAL);
  const int repro = o->cfg.reproducible;
  int64_t nloc = 0, row0 = 0, B = o->block, nblk = 0;
  if (st == LA_OK) {
    la_engine_ownership(eng, job.N, P, rank, &nloc, &row0);
    int64_t maxloc = 0;
    for (int p = 0; p < P; p++) {
      int64_t np, p0;
      la_engine_ownership(eng, job.N, P, p, &np, &p0);
      maxloc = np > maxloc ? np : maxloc;
    }
    if (repro) { /* streaming blocks on the reproducible grid (§4.7) */
      const int64_t R = la_engine_repro_block(eng);
      B = (B + R - 1) / R * R;
    }
    if (in_memory) B = maxloc > 0 ? maxloc : 1;
    nblk = (maxloc + B - 1) / B;
    if (B > nloc && nloc > 0) B = nloc;
    size_t es = la_dtype_size(job.dt), hb = (size_t)B * job.H;
    bq = la_alloc_rows(es * hb * job.dk + 1);
    bk = la_alloc_rows(es * hb * job.dk + 1);
    bv = la_alloc_rows(es * hb * job.dv + 1);
    bo = la_alloc_rows(es * hb * job.dv + 1);
    if (o->cfg.mode == LA_CAUSAL && P > 1 && !in_memory && !repro) { /* overlap buffers for block 0 */
      raw = la_alloc_rows(es * hb * (job.dv + 1) + 1);
      lsc = la_malloc(sizeof(double) * hb + 1);
    }
    if (!bq || !bk || !bv || !bo || (o->cfg.mode == LA_CAUSAL && P > 1 && !in_memory && !repro && (!raw || !lsc))) {
      snprintf(err, sizeof err, "out of memory for the block buffers of %lld tokens (lower --block-tokens)", (long long)B);
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
      if (n > 0) st = la_job_read(&job, 1, row0 + lo, n, bk, err, sizeof err);
      if (st == LA_OK && n > 0) st = la_job_read(&job, 2, row0 + lo, n, bv, err, sizeof err);
      double t0 = MPI_Wtime();
      if (st == LA_OK && n > 0)
        st = repro ? la_engine_accumulate_exact(eng, row0 + lo, n, bk, bv, &xs)
                   : la_engine_accumulate(eng, row0 + lo, n, bk, bv, &state);
      job.t_compute += MPI_Wtime() - t0;
      st = la_dist_agree(d, st, err, sizeof err);
      la_job_progress(&job, "pass 1/2 (keys)", (b + 1) * B > nloc ? nloc : (b + 1) * B, nloc, tp0, &last);
    }
    if (st == LA_OK && repro) {
      st = bidir ? la_dist_xallreduce(d, &xs) : la_dist_xexscan(d, &xs);
      if (st == LA_OK && bidir) la_xstate_round(&xs, la_map_is_stabilized(o->cfg.map), &state);
    } else if (st == LA_OK && bidir) {
      st = la_dist_allreduce(d, &state);
    } else if (st == LA_OK) {
      st = la_dist_iexscan_begin(d, &state, &req);
    }
  }
  tp0 = MPI_Wtime();
  last = 0;
  /* Pass 2: outputs. */
  for (int64_t b = 0; b < nblk && st == LA_OK; b++) {
    int64_t lo = b * B, n = lo >= nloc ? 0 : (nloc - lo < B ? nloc - lo : B);
    if (n > 0) st = la_job_read(&job, 0, row0 + lo, n, bq, err, sizeof err);
    if ((!bidir || in_memory) && n > 0 && st == LA_OK) st = la_job_read(&job, 1, row0 + lo, n, bk, err, sizeof err);
    if ((!bidir || in_memory) && n > 0 && st == LA_OK) st = la_job_read(&job, 2, row0 + lo, n, bv, err, sizeof err);
    double t0 = MPI_Wtime();
    if (in_memory) {
      /* one block per rank: la_dist_forward combines the masks across ranks (and merges the
       * denominator statistics over ranks itself) */
      st = la_dist_agree(d, st, err, sizeof err);
      if (st == LA_OK) st = la_dist_forward(d, eng, n, row0 + lo, bq, bk, bv, bo, &stats);
      if (st != LA_OK && !err[0]) snprintf(err, sizeof err, "forward: %s", la_error_reason(st));
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
    } else if (st == LA_OK && n > 0 && repro && !bidir) {
      st = la_engine_apply_exact(eng, row0 + lo, n, bq, bk, bv, &xs, bo, &stats);
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
    la_job_progress(&job, bidir || P > 1 ? "pass 2/2 (outputs)" : "outputs", (b + 1) * B > nloc ? nloc : (b + 1) * B, nloc, tp0, &last);
  }
  if (st == LA_OK && !in_memory) st = la_dist_reduce_stats(d, &stats);
  if (st == LA_OK) st = la_job_verdict(&job, &stats, "output", err, sizeof err);
  /* The output is synced and closed, the report written, and only then is the output renamed
   * into place: a failure anywhere leaves nothing under the final names (docs/design.md §6). */
  if (o->out) {
    double t0 = MPI_Wtime();
    la_status cs = la_pout_finish(d, &out, st == LA_OK, err, sizeof err);
    job.t_write += MPI_Wtime() - t0;
    if (st == LA_OK) st = cs;
  }
  if (st == LA_OK) st = la_job_report(&job, "run", &stats, o->out, 1.0, err, sizeof err);
  if (o->out) {
    la_status cs = la_pout_commit(d, &out, 1, st == LA_OK, err, sizeof err);
    if (st == LA_OK && cs != LA_OK && rank == 0 && o->report) unlink(o->report);
    if (st == LA_OK) st = cs;
  }
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", err[0] ? err : la_error_reason(st));
    exitc = la_status_exit_code(st);
  } else {
    exitc = 0;
  }
  free(bq);
  free(bk);
  free(bv);
  free(bo);
  free(raw);
  free(lsc);
  la_state_free(&state);
  la_state_free(&local);
  la_xstate_free(&xs);
  la_den_stats_free(&stats);
  la_job_close(&job);
  return exitc;
}
