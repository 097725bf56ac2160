/* `linattn grad`: the backward pass (docs/cli.md "linattn grad"). Each rank holds its shard
 * of Q, K, V and dL/dout in memory, la_dist_backward combines across ranks, and dL/dQ, dL/dK,
 * dL/dV (and with --out the outputs, from the replay; with --grad-gates dL/dg of the log-gates,
 * docs/design.md §1.2 "Gates") are written collectively like `run` writes its output
 * (temporary name, then rename; all or none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "job.h"
#include "la_alloc.h"
#include "run.h"

int la_cmd_grad(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  la_job job;
  la_den_stats stats = {0};
  la_pout outs[5];
  memset(outs, 0, sizeof outs);
  const char *paths[5] = {o->grad_q, o->grad_k, o->grad_v, o->out, o->grad_gates};
  void *buf[4] = {NULL, NULL, NULL, NULL}, *grad[4] = {NULL, NULL, NULL, NULL};
  double *gts = NULL, *dg = NULL; /* --gates: this rank's log-gates and their gradient */
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
  if (st == LA_OK && paths[4]) { /* dL/dg: float64 [N, H] */
    int64_t shp[2] = {job.N, job.H};
    st = la_pout_open(d, paths[4], LA_F64, 2, shp, o->force, &outs[4]);
  }
  int64_t n = 0, row0 = 0;
  if (st == LA_OK) {
    la_split_ownership(job.N, P, rank, &n, &row0);
    size_t es = la_dtype_size(job.dt), rows = (size_t)(n > 0 ? n : 1) * job.H;
    for (int t = 0; t < 4; t++) buf[t] = la_alloc_rows(es * rows * (t == 0 || t == 1 ? job.dk : job.dv));
    for (int t = 0; t < 4; t++)
      if (t < 3 || paths[3]) grad[t] = la_alloc_rows(es * rows * (t >= 2 ? job.dv : job.dk));
    for (int t = 0; t < 4 && st == LA_OK; t++)
      if (!buf[t] || ((t < 3 || paths[3]) && !grad[t]))
        st = la_error(LA_ERR_NOMEM, "out of memory for this rank's %lld rows of inputs and gradients",
                      (long long)n);
    for (int t = 0; t < 4 && st == LA_OK && n > 0; t++)
      st = la_job_read(&job, t, row0, n, buf[t]);
    /* Touch the gradient buffers now, so that their page faults (3 GB at N = 2^20, H = 4,
     * d = 64) are set-up time, as the inputs' are, and not counted as compute. */
    for (int t = 0; t < 4 && st == LA_OK; t++)
      if (grad[t]) memset(grad[t], 0, la_dtype_size(job.dt) * rows * (t >= 2 ? job.dv : job.dk));
    if (st == LA_OK && grad[3] && n > 0) /* the replay writes this rank's outputs there */
      st = la_engine_set_replay_output(job.eng, grad[3], row0, n);
    if (st == LA_OK && o->cfg.gates) { /* the log-gates, bound; dL/dg when asked for */
      gts = la_malloc(sizeof(double) * rows);
      dg = paths[4] ? la_calloc(rows, sizeof(double)) : NULL;
      if (!gts || (paths[4] && !dg))
        st = la_error(LA_ERR_NOMEM, "out of memory for this rank's %lld rows of gates", (long long)n);
      if (st == LA_OK) st = la_job_read_gates(&job, row0, n, gts);
      if (st == LA_OK) st = la_engine_set_gates_grad(job.eng, dg);
    }
    st = la_dist_agree(d, st);
  }
  if (st == LA_OK) {
    double t0 = MPI_Wtime();
    st = la_dist_backward(d, job.eng, n, row0, buf[0], buf[1], buf[2], buf[3], grad[0], grad[1],
                          grad[2], &stats);
    job.t_compute += MPI_Wtime() - t0;
    if (st != LA_OK) la_error_prefix(st, "backward: ");
  }
  if (st == LA_OK) st = la_job_verdict(&job, &stats, "gradient");
  for (int t = 0; t < 5 && st == LA_OK; t++) {
    if (!paths[t]) continue;
    double t0 = MPI_Wtime();
    if (n > 0) st = la_pout_write(&outs[t], row0, n, t == 4 ? (void *)dg : grad[t]);
    st = la_dist_agree(d, st);
    job.t_write += MPI_Wtime() - t0;
  }
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
  for (int t = 0; t < 4; t++) free(buf[t]);
  for (int t = 0; t < 4; t++) free(grad[t]);
  free(gts), free(dg);
  la_den_stats_free(&stats);
  la_job_close(&job);
  return exitc;
}
