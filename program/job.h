/* What `linattn run` and `linattn grad` share: inputs (files or the generator), the feature
 * map and engine set-up, the policy verdict, progress and the report. Collective unless
 * noted. */
#ifndef LINATTN_JOB_H
#define LINATTN_JOB_H
#include "cli.h"
#include "linattn/linattn.h"
#include "pio.h"

typedef struct {
  la_cli *o;
  la_dist d;
  int synthetic;
  la_pin in[5]; /* q, k, v, dL/dout for grad, log-gates (--gates); path NULL = the generator */
  int64_t N;
  int H, dk, dv;
  int gw; /* log-gates per token and head: 1, or r for per-feature gates [N, H, r] */
  la_dtype dt;
  int64_t *seg, nseg; /* segment offsets, or NULL */
  la_featmap fm;
  la_engine eng;
  double t_start, t_read, t_write, t_compute;
  int64_t mem_estimate, mem_limit; /* bytes per rank (memest.h); mem_limit -1: none */
  /* for the report's "checkpoint" (run with --checkpoint; checkpoint.h) */
  int64_t ckpt_resumed; /* tokens done when resumed; -1: not resumed */
  int ckpt_pass, ckpt_ranks, ckpt_written;
} la_job;

/* Open inputs, check shapes and options, hold the memory estimate to --mem-limit (memest.h)
 * before anything large is allocated, build the feature map (loading or saving the
 * projection) and the engine. want_g: also open --grad-out (grad). Agreed across ranks. */
la_status la_job_setup(la_job *j, la_dist d, la_cli *o, int want_g);
void la_job_close(la_job *j);
/* Not Collective: rows [row0, row0+n) of tensor t (0 q, 1 k, 2 v, 3 dL/dout), finite check. */
la_status la_job_read(la_job *j, int t, int64_t row0, int64_t n, void *buf);
/* Not Collective: the log-gates of rows [row0, row0+n) ([n, H] float64, [n, H, r] per feature:
 * [n, H, gw]) into g, from --gates F
 * or drawn (--gates synthetic: log sigmoid(3 + N(0, 1)), keyed by --seed, token and head), and
 * bound to the engine for those rows (la_engine_set_gates, which checks every value: finite
 * and <= 0, naming (token, head); the reason then names the file too). */
la_status la_job_read_gates(la_job *j, int64_t row0, int64_t n, double *g);
/* Not Collective: the verdict of the denominator policy / overflow on merged statistics. */
la_status la_job_verdict(const la_job *j, const la_den_stats *st, const char *what);
/* Rank 0 prints a progress line (rate, ETA) when enabled. Not Collective. */
void la_job_progress(la_job *j, const char *what, int64_t done, int64_t total, double t0,
                     double *last);
/* Collective: gather timings, RSS and bytes, print the summary line and write the report.
 * flops_factor scales the useful flops (1 forward, 3 backward). */
la_status la_job_report(la_job *j, const char *sub, const la_den_stats *st, const char *out,
                        double flops_factor);

#endif
