/* `linattn run`: the forward operator of the streaming plan (la_stream_*, linattn/dist.h;
 * docs/design.md §4.5), fed from the input files or the generator: read the block the plan
 * asks for, feed it, write its outputs, checkpoint, and the report. The algorithm (passes,
 * collective, correction, reproducible path, lanes) is the plan's, in dist/stream.c.
 *
 * A run resumed from a checkpoint of L lanes on P ranks takes the lanes [q L / P, (q+1) L / P)
 * on rank q (docs/design.md §6 "Checkpoints"), and the plan continues them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint.h"
#include "job.h"
#include "la_alloc.h"
#include "run.h"

int la_cmd_run(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  la_job job;
  la_pout out = {0};
  la_den_stats stats = {0};
  la_ckpt ck = {0};
  la_stream plan = NULL;
  la_lane *lanes = NULL; /* from a checkpoint */
  la_state *ls = NULL;
  int nmy = 0, stop = 0;
  int64_t lane0 = 0;
  void *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
  double *bg = NULL; /* --gates: the block's log-gates */
  char partial[4200] = "";
  int exitc = 1;

  la_error_clear(); /* la_error_reason below reads only what this run records */
  la_status st = la_job_setup(&job, d, o, 0);
  const int r = st == LA_OK ? la_featmap_width(job.fm) : 0;
  if (st == LA_OK) {
    st = la_den_stats_init(&stats);
    if (st != LA_OK) la_error_prefix(st, "engine: ");
    st = la_dist_agree(d, st);
  }
  const int in_memory = st == LA_OK && la_stream_holds_shard(job.eng, job.N);
  const int repro = o->cfg.reproducible;
  if (st == LA_OK && o->checkpoint && (in_memory || repro)) {
    st = la_error(LA_ERR_ARG, "--checkpoint: %s", repro ? "not with --reproducible in this version"
                  : la_engine_decayed(job.eng) ? "a bidirectional run with --decay holds each "
                  "rank's shard in memory and has no streaming position to save"
                  : o->cfg.window > 0 ? "a run with --window holds each rank's shard in memory and has "
                  "no streaming position to save"
                  : "a bidirectional run with --segments holds each rank's shard in memory and has no "
                  "streaming position to save");
  }
  if (st == LA_OK && o->checkpoint) {
    st = la_ckpt_init(d, &ck, o, &job, r);
    if (st == LA_OK) st = la_ckpt_load(d, &ck, &nmy, &lane0, &lanes, &ls, &stats);
  }
  if (st == LA_OK && !ck.found) { /* a fresh start: one lane per rank */
    st = la_stream_create(d, job.eng, job.N, o->block, &plan);
  } else if (st == LA_OK) {
    st = la_stream_resume(d, job.eng, job.N, o->block, ck.pass, ck.lanes, lane0, nmy, lanes, ls,
                          &plan);
    job.ckpt_resumed = ck.tokens_done;
    job.ckpt_pass = ck.pass;
    job.ckpt_ranks = ck.lanes;
    if (rank == 0 && st == LA_OK)
      fprintf(stderr, "linattn: resuming from %s/ckpt.%lld: pass %d, %lld tokens of output done, "
              "%d lanes on %d ranks\n", ck.dir, (long long)ck.seq, ck.pass,
              (long long)ck.tokens_done, ck.lanes, P);
  }
  la_ckpt_free_lanes(nmy, lanes, ls); /* the plan holds its copy */
  if (st == LA_OK && o->out) {
    int64_t shp[3] = {job.N, job.H, job.dv};
    if (o->checkpoint) {
      int resume = 0;
      snprintf(partial, sizeof partial, "%s.partial", o->out);
      if (rank == 0 && ck.found) {
        resume = la_path_exists(partial);
        if (!resume && ck.pass == 2) {
          st = la_error(LA_ERR_IO, "--checkpoint: %s/ckpt.%lld holds outputs in %s, which is "
                        "missing (remove the folder to start over)", ck.dir, (long long)ck.seq, partial);
        }
      }
      st = la_dist_agree(d, st);
      MPI_Bcast(&resume, 1, MPI_INT, 0, la_dist_comm(d));
      if (st == LA_OK)
        st = la_pout_open_partial(d, o->out, partial, resume, job.dt, 3, shp, o->force, &out);
    } else {
      st = la_pout_open(d, o->out, job.dt, 3, shp, o->force, &out);
    }
  }
  if (st == LA_OK) { /* the caller's block buffers, of the plan's size */
    const int64_t rows = la_stream_block_rows(plan);
    size_t es = la_dtype_size(job.dt), hb = (size_t)rows * job.H;
    bq = la_alloc_rows(es * hb * job.dk + 1);
    bk = la_alloc_rows(es * hb * job.dk + 1);
    bv = la_alloc_rows(es * hb * job.dv + 1);
    bo = la_alloc_rows(es * hb * job.dv + 1);
    if (o->cfg.gates) bg = la_malloc(sizeof(double) * (hb * job.gw + 1)); /* [rows, H, gw] */
    if (!bq || !bk || !bv || !bo || (o->cfg.gates && !bg))
      st = la_error(LA_ERR_NOMEM, "out of memory for the block buffers of %lld tokens (lower --block-tokens)", (long long)rows);
    st = la_dist_agree(d, st);
  }
  /* The plan's steps: read, feed, write; progress and checkpoints between them. */
  double tp0 = MPI_Wtime(), last = 0;
  int64_t total = 0, done = 0;
  int pass = 0;
  la_stream_block b;
  while (st == LA_OK && !stop && (st = la_stream_next(plan, &b)) == LA_OK && b.pass) {
    if (b.pass != pass) { /* a pass begins */
      if (pass) tp0 = MPI_Wtime();
      pass = b.pass;
      total = la_stream_tokens_left(plan);
      done = 0;
      last = 0;
    }
    la_status rs = b.q ? la_job_read(&job, 0, b.row0, b.n, bq) : LA_OK;
    if (rs == LA_OK && b.kv) rs = la_job_read(&job, 1, b.row0, b.n, bk);
    if (rs == LA_OK && b.kv) rs = la_job_read(&job, 2, b.row0, b.n, bv);
    /* --gates: the block's log-gates, bound to the engine for the calls of this feed */
    if (rs == LA_OK && bg && b.n > 0) rs = la_job_read_gates(&job, b.row0, b.n, bg);
    st = la_stream_feed(plan, rs, bq, bk, bv, bo, &stats);
    if (st == LA_OK && o->out && b.pass == 2) { /* every rank agrees, idle or not */
      double t0 = MPI_Wtime();
      if (b.out) st = la_pout_write(&out, b.row0, b.n, bo);
      job.t_write += MPI_Wtime() - t0;
      st = la_dist_agree(d, st);
    }
    done += b.n;
    int L = 0, pn = 0, n2 = 0;
    int64_t l0 = 0;
    const la_lane *pl = NULL;
    const la_state *ps = NULL;
    la_stream_lanes(plan, &pn, &L, &l0, &n2, &pl, &ps);
    la_job_progress(&job, b.pass == 1 ? "pass 1/2 (keys)" : o->cfg.mode == LA_BIDIRECTIONAL || L > 1
                    ? "pass 2/2 (outputs)" : "outputs", done, total, tp0, &last);
    if (st == LA_OK && o->checkpoint && !b.last) {
      int f = la_ckpt_poll(d, &ck);
      if (f) st = la_ckpt_write(d, &ck, pn, L, l0, n2, pl, ps, &stats, &out);
      stop = f & LA_CKPT_STOP;
    }
  }
  if (plan) job.t_compute += la_stream_compute_seconds(plan);
  job.ckpt_written = ck.written;
  if (st == LA_OK && stop) { /* checkpointed on a signal: keep the partial output, exit 75 */
    la_status cs = o->out ? la_pout_finish(d, &out, 1) : LA_OK;
    if (cs == LA_OK) {
      if (rank == 0)
        fprintf(stderr, "linattn: stopped at checkpoint %s/ckpt.%lld on a signal; run the same "
                "command again to resume\n", ck.dir, (long long)ck.seq);
      exitc = 75;
      goto cleanup;
    }
    st = cs;
  }
  if (st == LA_OK) st = la_stream_finish(plan, &stats);
  if (st == LA_OK) st = la_job_verdict(&job, &stats, "output");
  /* a failure before any checkpoint existed has nothing to resume: no partial output stays */
  if (st != LA_OK && o->checkpoint && !ck.found && ck.written == 0) out.keep = 0;
  /* The output is synced and closed, the report written, and only then is the output renamed
   * into place: a failure anywhere leaves nothing under the final names (docs/design.md §6). */
  if (o->out) {
    double t0 = MPI_Wtime();
    la_status cs = la_pout_finish(d, &out, st == LA_OK);
    job.t_write += MPI_Wtime() - t0;
    if (st == LA_OK) st = cs;
  }
  if (st == LA_OK) st = la_job_report(&job, "run", &stats, o->out, 1.0);
  if (o->out) {
    la_status cs = la_pout_commit(d, &out, 1, st == LA_OK);
    if (st == LA_OK && cs != LA_OK && rank == 0 && o->report) unlink(o->report);
    if (st == LA_OK) st = cs;
  }
  /* done: the checkpoints are spent (a failure keeps them, and the partial output, to resume) */
  if (st == LA_OK && o->checkpoint && rank == 0) la_ckpt_remove_all(&ck);
  if (st != LA_OK && o->checkpoint && ck.dir && rank == 0) rmdir(ck.dir); /* only if empty */
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(st));
    exitc = la_status_exit_code(st);
  } else {
    exitc = 0;
  }
cleanup:
  free(bg);
  free(bq);
  free(bk);
  free(bv);
  free(bo);
  la_stream_destroy(&plan);
  la_ckpt_free(&ck);
  la_den_stats_free(&stats);
  la_job_close(&job);
  return exitc;
}
