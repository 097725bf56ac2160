/* `linattn run`: the forward operator, streamed in blocks (docs/design.md §4.5).
 * input (file or generator) -> feature map -> local summaries -> collective -> apply ->
 * denominator policy -> output and report. Every rank loops over the same number of blocks
 * so that errors are agreed at each step and no rank is left waiting.
 *
 * The work is a list of lanes (checkpoint.h): one token range per rank of the run that
 * started it, each with its own state. A fresh run has one lane per rank; a run resumed from
 * a checkpoint of L lanes on P ranks takes the lanes [q L / P, (q+1) L / P) on rank q
 * (docs/design.md §6 "Checkpoints"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint.h"
#include "job.h"
#include "la_alloc.h"
#include "run.h"

/* One step of a rank's loop: lane i's tokens [lo, lo + n); i = -1 for an idle step. */
typedef struct {
  int i;
  int64_t lo, n;
} step_t;

/* The s-th step over the lanes from their positions on a grid of B tokens; idle past the
 * end (n = 0 at the end of the last lane). */
static step_t step_at(const la_lane *lanes, int nmy, int64_t B, int64_t s) {
  for (int i = 0; i < nmy; i++) {
    int64_t k = lanes[i].pos >= lanes[i].end ? 0 : (lanes[i].end - lanes[i].pos + B - 1) / B;
    if (s < k) {
      int64_t lo = lanes[i].pos + s * B;
      return (step_t){i, lo, lanes[i].end - lo < B ? lanes[i].end - lo : B};
    }
    s -= k;
  }
  return (step_t){-1, nmy > 0 ? lanes[nmy - 1].end : 0, 0};
}

static int64_t steps_of(const la_lane *lanes, int nmy, int64_t B) {
  int64_t k = 0;
  for (int i = 0; i < nmy; i++)
    k += lanes[i].pos >= lanes[i].end ? 0 : (lanes[i].end - lanes[i].pos + B - 1) / B;
  return k;
}

static void state_copy(la_state *dst, const la_state *src) {
  const size_t n = (size_t)src->heads * src->r * (src->dv + 1);
  memcpy(dst->sz, src->sz, n * sizeof *dst->sz);
  memcpy(dst->m, src->m, (size_t)src->heads * sizeof *dst->m);
  memcpy(dst->f, src->f, (size_t)src->heads * sizeof *dst->f);
}

static int64_t tokens_left(const la_lane *lanes, int nmy) {
  int64_t k = 0;
  for (int i = 0; i < nmy; i++) k += lanes[i].end - lanes[i].pos;
  return k;
}

int la_cmd_run(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  la_job job;
  la_pout out = {0};
  la_den_stats stats = {0};
  la_state state = {0}, local = {0};
  la_xstate xs = {0}; /* --reproducible: the exact prefix or summary (§4.7) */
  la_dist_req req = NULL;
  la_ckpt ck = {0};
  la_lane *lanes = NULL;
  la_state *ls = NULL; /* per lane: pass 1 the partial key sum, pass 2 the prefix state */
  int nmy = 0, L = P, pass = 2, stop = 0;
  int64_t lane0 = 0;
  void *raw = NULL;
  double *lsc = NULL;
  void *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
  char partial[4200] = "";
  int exitc = 1;

  la_error_clear(); /* la_error_reason below reads only what this run records */
  la_status st = la_job_setup(&job, d, o, 0);
  const int r = st == LA_OK ? la_featmap_width(job.fm) : 0;
  if (st == LA_OK) {
    st = la_state_init(&state, job.H, r, job.dv);
    if (st == LA_OK) st = la_state_init(&local, job.H, r, job.dv);
    if (st == LA_OK) st = la_den_stats_init(&stats);
    if (st == LA_OK && o->cfg.reproducible) st = la_xstate_init(&xs, job.H, r, job.dv);
    if (st != LA_OK) la_error_prefix(st, "engine: ");
    st = la_dist_agree(d, st);
  }
  la_engine eng = job.eng;
  /* Windows and bidirectional segments hold the rank's shard in memory (O(N/P)); everything
   * else streams in blocks of --block-tokens rows. */
  const int in_memory = st == LA_OK && ((o->cfg.window > 0 && o->cfg.window < job.N) ||
                                        (job.seg && o->cfg.mode == LA_BIDIRECTIONAL));
  const int repro = o->cfg.reproducible;
  const int bidir = o->cfg.mode == LA_BIDIRECTIONAL;
  if (st == LA_OK && o->checkpoint && (in_memory || repro)) {
    st = la_error(LA_ERR_ARG, "--checkpoint: %s", repro ? "not with --reproducible in this version"
                  : o->cfg.window > 0 ? "a run with --window holds each rank's shard in memory and has "
                  "no streaming position to save"
                  : "a bidirectional run with --segments holds each rank's shard in memory and has no "
                  "streaming position to save");
  }
  if (st == LA_OK && o->checkpoint) {
    st = la_ckpt_init(d, &ck, o, &job, r);
    if (st == LA_OK) st = la_ckpt_load(d, &ck, &nmy, &lane0, &lanes, &ls, &stats);
  }
  int64_t nloc = 0, row0 = 0, B = o->block;
  if (st == LA_OK && !ck.found) { /* a fresh start: one lane per rank */
    la_engine_ownership(eng, job.N, P, rank, &nloc, &row0);
    nmy = 1;
    lane0 = rank;
    lanes = la_calloc(1, sizeof *lanes);
    ls = la_calloc(1, sizeof *ls);
    if (!lanes || !ls || la_state_init(&ls[0], job.H, r, job.dv) != LA_OK) {
      st = la_error(LA_ERR_NOMEM, "out of memory for the scan state");
      nmy = ls ? 1 : 0; /* for la_ckpt_free_lanes */
    } else {
      lanes[0] = (la_lane){row0, row0 + nloc, row0};
    }
    pass = (bidir || P > 1) && !in_memory ? 1 : 2;
    st = la_dist_agree(d, st);
  } else if (st == LA_OK) {
    L = ck.lanes;
    pass = ck.pass;
    job.ckpt_resumed = ck.tokens_done;
    job.ckpt_pass = ck.pass;
    job.ckpt_ranks = ck.lanes;
    if (rank == 0)
      fprintf(stderr, "linattn: resuming from %s/ckpt.%lld: pass %d, %lld tokens of output done, "
              "%d lanes on %d ranks\n", ck.dir, (long long)ck.seq, ck.pass,
              (long long)ck.tokens_done, L, P);
  }
  const int corrected = !bidir && L > 1 && !in_memory && !repro; /* lane starts: local+correct */
  if (st == LA_OK && o->out) {
    int64_t shp[3] = {job.N, job.H, job.dv};
    if (o->checkpoint) {
      int resume = 0;
      snprintf(partial, sizeof partial, "%s.partial", o->out);
      if (rank == 0 && ck.found) {
        resume = la_path_exists(partial);
        if (!resume && pass == 2) {
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
  int64_t maxlen = 0, nsteps = 0;
  if (st == LA_OK) {
    int64_t mine = 0, maxloc = 0;
    for (int i = 0; i < nmy; i++)
      mine = lanes[i].end - lanes[i].start > mine ? lanes[i].end - lanes[i].start : mine;
    MPI_Allreduce(&mine, &maxloc, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    if (repro) { /* streaming blocks on the reproducible grid (§4.7) */
      const int64_t R = la_engine_repro_block(eng);
      B = (B + R - 1) / R * R;
    }
    if (in_memory) B = maxloc > 0 ? maxloc : 1;
    maxlen = B > mine && mine > 0 ? mine : B; /* block buffers */
    size_t es = la_dtype_size(job.dt), hb = (size_t)maxlen * job.H;
    bq = la_alloc_rows(es * hb * job.dk + 1);
    bk = la_alloc_rows(es * hb * job.dk + 1);
    bv = la_alloc_rows(es * hb * job.dv + 1);
    bo = la_alloc_rows(es * hb * job.dv + 1);
    if (corrected) {
      raw = la_alloc_rows(es * hb * (job.dv + 1) + 1);
      lsc = la_malloc(sizeof(double) * hb + 1);
    }
    if (!bq || !bk || !bv || !bo || (corrected && (!raw || !lsc))) {
      st = la_error(LA_ERR_NOMEM, "out of memory for the block buffers of %lld tokens (lower --block-tokens)", (long long)maxlen);
    }
    st = la_dist_agree(d, st);
  }
  /* the lanes' positions at the start of a pass: the steps are counted from them */
  la_lane *at = NULL;
  if (st == LA_OK) {
    at = la_malloc(sizeof *at * (size_t)(nmy > 0 ? nmy : 1));
    st = la_dist_agree(d, at ? LA_OK : la_error(LA_ERR_NOMEM, "out of memory for the lane table"));
  }
  double tp0 = MPI_Wtime(), last = 0;
  int64_t total = st == LA_OK ? tokens_left(lanes, nmy) : 0, done = 0;
  /* Pass 1: key summaries (bidirectional, or the lane totals to be exscanned). */
  if (st == LA_OK && pass == 1) {
    int64_t my = steps_of(lanes, nmy, B);
    MPI_Allreduce(&my, &nsteps, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    memcpy(at, lanes, sizeof *at * (size_t)nmy);
    for (int64_t s = 0; s < nsteps && st == LA_OK && !stop; s++) {
      step_t w = step_at(at, nmy, B, s);
      if (w.n > 0) st = la_job_read(&job, 1, w.lo, w.n, bk);
      if (st == LA_OK && w.n > 0) st = la_job_read(&job, 2, w.lo, w.n, bv);
      double t0 = MPI_Wtime();
      if (st == LA_OK && w.n > 0)
        st = repro ? la_engine_accumulate_exact(eng, w.lo, w.n, bk, bv, &xs)
                   : la_engine_accumulate(eng, w.lo, w.n, bk, bv, &ls[w.i]);
      job.t_compute += MPI_Wtime() - t0;
      if (st == LA_OK && w.n > 0) lanes[w.i].pos = w.lo + w.n;
      done += w.n;
      st = la_dist_agree(d, st);
      la_job_progress(&job, "pass 1/2 (keys)", done, total, tp0, &last);
      if (st == LA_OK && o->checkpoint && s + 1 < nsteps) {
        int f = la_ckpt_poll(d, &ck);
        if (f) st = la_ckpt_write(d, &ck, 1, L, lane0, nmy, lanes, ls, &stats, &out);
        stop = f & LA_CKPT_STOP;
      }
    }
    /* the rank total (lanes in order), then the collective and each lane's prefix */
    if (st == LA_OK && !stop && !repro && nmy == 0) { /* a rank without lanes: identity */
      la_state_reset(&state);
    } else if (st == LA_OK && !stop && !repro) {
      state_copy(&state, &ls[0]);
      for (int i = 1; i < nmy; i++) la_state_combine(&state, &ls[i]);
    }
    if (st == LA_OK && !stop && repro) {
      st = bidir ? la_dist_xallreduce(d, &xs) : la_dist_xexscan(d, &xs);
      if (st == LA_OK && bidir) la_xstate_round(&xs, la_map_is_stabilized(o->cfg.map), &ls[0]);
    } else if (st == LA_OK && !stop && bidir) {
      st = la_dist_allreduce(d, &state);
      for (int i = 0; st == LA_OK && i < nmy; i++) state_copy(&ls[i], &state);
    } else if (st == LA_OK && !stop && L == P && nmy == 1) {
      st = la_dist_iexscan_begin(d, &state, &req); /* ends in the first step of pass 2 */
    } else if (st == LA_OK && !stop) { /* lanes of a resumed run: the rank prefix, then */
      st = la_dist_exscan(d, &state);  /* lane by lane: ls[i] from lane total to prefix */
      for (int i = 0; st == LA_OK && i < nmy; i++) {
        state_copy(&local, &ls[i]);
        state_copy(&ls[i], &state);
        la_state_combine(&state, &local);
      }
    }
    if (st == LA_OK && !stop) {
      pass = 2;
      for (int i = 0; i < nmy; i++) lanes[i].pos = lanes[i].start;
    }
  }
  tp0 = MPI_Wtime();
  last = 0;
  done = 0;
  total = st == LA_OK ? tokens_left(lanes, nmy) : 0;
  /* Pass 2: outputs. */
  if (st == LA_OK && !stop) {
    int64_t my = steps_of(lanes, nmy, B);
    MPI_Allreduce(&my, &nsteps, 1, MPI_INT64_T, MPI_MAX, la_dist_comm(d));
    if (in_memory && nsteps < 1) nsteps = 1; /* la_dist_forward is collective */
  }
  if (st == LA_OK && !stop) memcpy(at, lanes, sizeof *at * (size_t)nmy);
  for (int64_t s = 0; s < nsteps && st == LA_OK && !stop; s++) {
    step_t w = step_at(at, nmy, B, s);
    if (w.n > 0) st = la_job_read(&job, 0, w.lo, w.n, bq);
    if ((!bidir || in_memory) && w.n > 0 && st == LA_OK) st = la_job_read(&job, 1, w.lo, w.n, bk);
    if ((!bidir || in_memory) && w.n > 0 && st == LA_OK) st = la_job_read(&job, 2, w.lo, w.n, bv);
    double t0 = MPI_Wtime();
    if (in_memory) {
      /* one block per rank: la_dist_forward combines the masks across ranks (and merges the
       * denominator statistics over ranks itself) */
      st = la_dist_agree(d, st);
      if (st == LA_OK && (st = la_dist_forward(d, eng, w.n, w.lo, bq, bk, bv, bo, &stats)) != LA_OK)
        la_error_prefix(st, "forward: ");
    } else if (req || (corrected && w.n > 0 && w.lo == lanes[w.i].start)) {
      /* Causal, at the start of a lane of many: the lane's outputs from a zero state (while
       * the rank prefix travels, in a fresh run), then the correction phi(q)^T P and
       * state = P (+) local. A resumed lane start takes the same path: the same bits. */
      la_status lst = st;
      if (lst == LA_OK && w.n > 0) {
        la_state_reset(&local);
        lst = la_engine_apply_local(eng, w.lo, w.n, bq, bk, bv, &local, raw, lsc);
      }
      if (req) {
        st = la_dist_iexscan_end(d, &req, &state);
        if (st == LA_OK) state_copy(&ls[0], &state); /* the one lane's prefix */
      }
      if (st == LA_OK) st = lst;
      if (st == LA_OK && w.n > 0) st = la_engine_correct(eng, w.lo, w.n, bq, &ls[w.i], raw, lsc, bo, &stats);
      if (st == LA_OK && w.n > 0) la_state_combine(&ls[w.i], &local);
    } else if (st == LA_OK && w.n > 0 && repro && !bidir) {
      st = la_engine_apply_exact(eng, w.lo, w.n, bq, bk, bv, &xs, bo, &stats);
    } else if (st == LA_OK && w.n > 0) {
      st = la_engine_apply(eng, w.lo, w.n, bq, bk, bv, &ls[w.i], bo, &stats);
    }
    job.t_compute += MPI_Wtime() - t0;
    if (st == LA_OK && w.n > 0 && o->out) {
      t0 = MPI_Wtime();
      st = la_pout_write(&out, w.lo, w.n, bo);
      job.t_write += MPI_Wtime() - t0;
    }
    if (st == LA_OK && w.n > 0) lanes[w.i].pos = w.lo + w.n;
    done += w.n;
    st = la_dist_agree(d, st);
    la_job_progress(&job, bidir || L > 1 ? "pass 2/2 (outputs)" : "outputs", done, total, tp0, &last);
    if (st == LA_OK && o->checkpoint && s + 1 < nsteps) {
      int f = la_ckpt_poll(d, &ck);
      if (f) st = la_ckpt_write(d, &ck, 2, L, lane0, nmy, lanes, ls, &stats, &out);
      stop = f & LA_CKPT_STOP;
    }
  }
  free(at);
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
  if (st == LA_OK && !in_memory) st = la_dist_reduce_stats(d, &stats);
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
  free(bq);
  free(bk);
  free(bv);
  free(bo);
  free(raw);
  free(lsc);
  la_ckpt_free_lanes(nmy, lanes, ls);
  la_ckpt_free(&ck);
  la_state_free(&state);
  la_state_free(&local);
  la_xstate_free(&xs);
  la_den_stats_free(&stats);
  la_job_close(&job);
  return exitc;
}
