/* `linattn grad`: the backward pass (docs/cli.md "linattn grad"). The streamed backward of the
 * dist library (la_bstream, dist/stream_backward.c) runs its passes over blocks of each rank's
 * rows; this program reads the blocks of Q, K, V and dL/dout, keeps the side rows of pass 2 in
 * an unlinked scratch file until pass 3 reads them back, and writes dL/dQ, dL/dK, dL/dV (and
 * with --out the outputs, from the replay; with --grad-gates dL/dg of the log-gates, docs/design.md
 * §1.2 "Gates") collectively like `run` writes its output (temporary name, then rename; all or
 * none). A plan that holds the shard (windows, bidirectional segments, decay) takes one step
 * of all the rank's rows. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "job.h"
#include "la_alloc.h"
#include "run.h"

/* The side rows' scratch file: in the folder of the first gradient output (a cluster's node-
 * local /tmp may be small), else $TMPDIR or /tmp; unlinked at once, so that nothing stays.
 * what (what errors name): that output and the file, or the file. */
static la_status side_scratch(const la_cli *o, int rank, int *fd, char *what, size_t wlen) {
  const char *near = o->grad_v ? o->grad_v : o->grad_q ? o->grad_q : o->grad_k;
  const char *opt = o->grad_v ? "--grad-v" : o->grad_q ? "--grad-q" : "--grad-k";
  char dir[4096], path[4200];
  const char *t = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s", near ? near : t && *t ? t : "/tmp");
  snprintf(path, sizeof path, "%s/.linattn-side.%d.%d.XXXXXX", near ? dirname(dir) : dir,
           (int)getpid(), rank);
  *fd = mkstemp(path);
  if (near) snprintf(what, wlen, "%s %s: the side rows' scratch file %s in its folder", opt, near, path);
  else snprintf(what, wlen, "the side rows' scratch file %s", path);
  if (*fd < 0) return la_error(LA_ERR_WRITE, "%s: cannot create it: %s", what, strerror(errno));
  unlink(path);
  return LA_OK;
}

/* n bytes at off of the scratch file, written (wr) or read back; a short write (a full disk)
 * is a failed write of an output (exit 1), with its reason. */
static la_status side_io(int fd, const char *what, void *buf, size_t n, off_t off, int wr) {
  for (size_t done = 0; done < n;) {
    ssize_t k = wr ? pwrite(fd, (char *)buf + done, n - done, off + (off_t)done)
                   : pread(fd, (char *)buf + done, n - done, off + (off_t)done);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return la_error(wr ? LA_ERR_WRITE : LA_ERR_READ, "%s: %s failed: %s", what,
                      wr ? "write" : "read", k < 0 ? strerror(errno) : "end of file");
    }
    done += (size_t)k;
  }
  return LA_OK;
}

int la_cmd_grad(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d);
  la_job job;
  la_den_stats stats = {0};
  la_pout outs[5];
  memset(outs, 0, sizeof outs);
  const char *paths[5] = {o->grad_q, o->grad_k, o->grad_v, o->out, o->grad_gates};
  void *buf[4] = {NULL, NULL, NULL, NULL}, *grad[4] = {NULL, NULL, NULL, NULL}, *side = NULL;
  double *gts = NULL, *dg = NULL; /* --gates: this rank's log-gates and their gradient */
  la_bstream plan = NULL;
  int sfd = -1;
  char swhat[8400] = "";
  la_error_clear(); /* la_error_reason below reads only what this run records */
  la_status st = la_job_setup(&job, d, o, 1);
  if (st == LA_OK) {
    st = la_den_stats_init(&stats);
    st = la_dist_agree(d, st);
  }
  /* gradients: each the shape of its input ([N,H,d], or [N,d] when the input was 2-D); the
   * outputs (t = 3) that of V, as run writes them */
  for (int t = 0; t < 4 && st == LA_OK; t++) {
    if (!paths[t]) continue;
    const int ti = t == 3 ? 2 : t;
    int d3 = job.in[ti].path && t < 3 ? job.in[ti].info.ndim == 3 : 1, w = ti == 2 ? job.dv : job.dk;
    int64_t shp[3] = {job.N, d3 ? job.H : w, w};
    st = la_pout_open(d, paths[t], job.dt, d3 ? 3 : 2, shp, o->force, &outs[t]);
  }
  if (st == LA_OK && paths[4]) { /* dL/dg: float64 [N, H], per feature [N, H, r] */
    int64_t shp[3] = {job.N, job.H, job.gw};
    st = la_pout_open(d, paths[4], LA_F64, job.gw > 1 ? 3 : 2, shp, o->force, &outs[4]);
  }
  if (st == LA_OK) st = la_bstream_create(d, job.eng, job.N, o->block, &plan);
  int64_t n = 0, row0 = 0, rows = 1;
  if (st == LA_OK) { /* the block buffers, of the plan's size */
    la_engine_ownership(job.eng, job.N, la_dist_size(d), rank, &n, &row0);
    rows = la_bstream_block_rows(plan);
    const size_t es = la_dtype_size(job.dt), hb = (size_t)rows * job.H;
    for (int t = 0; t < 4; t++) buf[t] = la_alloc_rows(es * hb * (t == 0 || t == 1 ? job.dk : job.dv) + 1);
    for (int t = 0; t < 4; t++)
      if (t < 3 || paths[3]) grad[t] = la_alloc_rows(es * hb * (t >= 2 ? job.dv : job.dk) + 1);
    for (int t = 0; t < 4 && st == LA_OK; t++)
      if (!buf[t] || ((t < 3 || paths[3]) && !grad[t]))
        st = la_error(LA_ERR_NOMEM, "out of memory for the block buffers of %lld tokens of "
                      "inputs and gradients (lower --block-tokens)", (long long)rows);
    if (st == LA_OK && la_bstream_side_bytes(plan, rows) > 0) {
      if (!(side = la_malloc(la_bstream_side_bytes(plan, rows))))
        st = la_error(LA_ERR_NOMEM, "out of memory for the side rows of %lld tokens", (long long)rows);
      if (st == LA_OK && n > 0) st = side_scratch(o, rank, &sfd, swhat, sizeof swhat);
    }
    /* Touch the gradient buffers now, so that their page faults are set-up time, as the
     * inputs' are, and not counted as compute. */
    for (int t = 0; t < 4 && st == LA_OK; t++)
      if (grad[t]) memset(grad[t], 0, es * hb * (t >= 2 ? job.dv : job.dk));
    if (st == LA_OK && o->cfg.gates) { /* the log-gates, bound; dL/dg when asked for (the
                                          decayed backward holds the shard: rows = n) */
      gts = la_malloc(sizeof(double) * (hb * job.gw + 1));
      dg = paths[4] ? la_calloc(hb * job.gw + 1, sizeof(double)) : NULL;
      if (!gts || (paths[4] && !dg))
        st = la_error(LA_ERR_NOMEM, "out of memory for this rank's %lld rows of gates", (long long)n);
      if (st == LA_OK) st = la_job_read_gates(&job, row0, n, gts);
      if (st == LA_OK) st = la_engine_set_gates_grad(job.eng, dg);
    }
    st = la_dist_agree(d, st);
  }
  /* The plan's steps: read, feed, keep; progress between them. */
  double tp0 = MPI_Wtime(), last = 0;
  int64_t done = 0;
  int pass = 0;
  la_bstream_block b;
  while (st == LA_OK && (st = la_bstream_next(plan, &b)) == LA_OK && b.pass) {
    if (b.pass != pass) { /* a pass begins */
      if (pass) tp0 = MPI_Wtime();
      pass = b.pass;
      done = 0;
      last = 0;
    }
    double t0 = MPI_Wtime();
    la_status rs = b.q ? la_job_read(&job, 0, b.row0, b.n, buf[0]) : LA_OK;
    if (rs == LA_OK && b.kv) rs = la_job_read(&job, 1, b.row0, b.n, buf[1]);
    if (rs == LA_OK && b.kv) rs = la_job_read(&job, 2, b.row0, b.n, buf[2]);
    if (rs == LA_OK && b.g) rs = la_job_read(&job, 3, b.row0, b.n, buf[3]);
    const off_t soff = (off_t)la_bstream_side_bytes(plan, b.row0 - row0);
    if (rs == LA_OK && b.side_in)
      rs = side_io(sfd, swhat, side, la_bstream_side_bytes(plan, b.n), soff, 0);
    /* the replay writes the block's outputs (--out) there */
    if (rs == LA_OK && grad[3] && b.dq) rs = la_engine_set_replay_output(job.eng, grad[3], b.row0, b.n);
    job.t_read += MPI_Wtime() - t0;
    t0 = MPI_Wtime();
    st = la_bstream_feed(plan, rs, buf[0], buf[1], buf[2], buf[3], side, grad[0], grad[1],
                         grad[2], &stats);
    job.t_compute += MPI_Wtime() - t0;
    if (st != LA_OK) la_error_prefix(st, "backward: ");
    t0 = MPI_Wtime();
    la_status ws = LA_OK;
    if (st == LA_OK && b.side_out)
      ws = side_io(sfd, swhat, side, la_bstream_side_bytes(plan, b.n), soff, 1);
    for (int t = 0; t < 4 && st == LA_OK && ws == LA_OK; t++)
      if (paths[t] && ((t == 0 || t == 3) ? b.dq : b.dkdv) && b.n > 0)
        ws = la_pout_write(&outs[t], b.row0, b.n, grad[t]);
    if (st == LA_OK && paths[4] && b.dkdv && b.n > 0 && ws == LA_OK) /* dL/dg: with the shard */
      ws = la_pout_write(&outs[4], b.row0, b.n, dg);
    if (st == LA_OK) st = la_dist_agree(d, ws);
    job.t_write += MPI_Wtime() - t0;
    done += b.n;
    la_job_progress(&job, b.pass == 1 ? "pass 1/3 (keys)" : b.pass == 2 ? "pass 2/3 (dq)"
                    : "pass 3/3 (dk, dv)", done, n, tp0, &last);
  }
  if (st == LA_OK) st = la_bstream_finish(plan, &stats);
  if (st == LA_OK) st = la_job_verdict(&job, &stats, "gradient");
  /* All appear, or none: each is synced and closed, the report written, and then they are
   * renamed into place (docs/design.md §6). */
  for (int t = 0; t < 5; t++) {
    if (!paths[t]) continue;
    la_status cs = la_pout_finish(d, &outs[t], st == LA_OK);
    if (st == LA_OK) st = cs;
  }
  if (st == LA_OK) st = la_job_report(&job, "grad", &stats, o->grad_q, 3.0);
  {
    la_status cs = la_pout_commit(d, outs, 5, st == LA_OK);
    if (st == LA_OK && cs != LA_OK && rank == 0 && o->report) unlink(o->report);
    if (st == LA_OK) st = cs;
  }
  int exitc = 0;
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(st));
    exitc = la_status_exit_code(st);
  }
  la_bstream_destroy(&plan);
  if (sfd >= 0) close(sfd);
  for (int t = 0; t < 4; t++) free(buf[t]);
  for (int t = 0; t < 4; t++) free(grad[t]);
  free(side), free(gts), free(dg);
  la_den_stats_free(&stats);
  la_job_close(&job);
  return exitc;
}
