/* linattn_smpi_calibrate (docs/simulation.md "What is simulated, what is modelled"): times the
 * real engine (linattn_core) on this machine, outside the simulation's clock, for the phases
 * that the model engine of `linattn_smpi forward` charges (model_engine.c):
 * seconds per token of the causal apply of one rank (la_engine_apply), and of the keys pass,
 * the local apply and the correction of a rank among several (la_engine_accumulate,
 * la_engine_apply_local, la_engine_correct; dist/forward.c), and seconds per double of the
 * scan's combine (la_state_combine_head_right). Single thread (the SMPI build has no OpenMP).
 * Best of `reps` after a warm-up. Its own executable: linattn_smpi links the model engine in
 * place of the real one. Run under smpirun -np 1 (tools/smpi/simulate.sh):
 *   linattn_smpi_calibrate [--tokens n] [--heads H] [--dk d] [--dv d] [--reps k]
 * prints a two-line CSV (docs/sim_calibration.csv). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include "linattn/linattn.h"
#undef clock_gettime /* smpicc maps it to the simulated clock: this file times the real machine */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int calibrate(int64_t n, int H, int dk, int dv, int reps, FILE *out) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.threads = 1;
  la_featmap fm = NULL;
  la_engine eng = NULL;
  if (la_featmap_create(&cfg, H, dk, &fm) != LA_OK || la_engine_create(&cfg, fm, LA_F32, dv, &eng) != LA_OK) {
    fprintf(stderr, "linattn: error: calibrate: cannot create the engine (%s)\n", la_error_message());
    return 1;
  }
  const int r = la_featmap_width(fm);
  float *q = malloc(4 * (size_t)n * H * dk), *k = malloc(4 * (size_t)n * H * dk),
        *v = malloc(4 * (size_t)n * H * dv), *o = malloc(4 * (size_t)n * H * dv),
        *raw = malloc(4 * (size_t)n * H * (dv + 1));
  double *lsc = malloc(8 * (size_t)n * H);
  la_state st, loc;
  if (!q || !k || !v || !o || !raw || !lsc || la_state_init(&st, H, r, dv) != LA_OK ||
      la_state_init(&loc, H, r, dv) != LA_OK) {
    fprintf(stderr, "linattn: error: calibrate: out of memory for %lld tokens\n", (long long)n);
    return 1;
  }
  la_synth_rows(cfg.seed, 0, 0, n, H, dk, 1.0, LA_F32, q);
  la_synth_rows(cfg.seed, 1, 0, n, H, dk, 1.0, LA_F32, k);
  la_synth_rows(cfg.seed, 2, 0, n, H, dv, 1.0, LA_F32, v);
  double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
  for (int rep = 0; rep <= reps; rep++) { /* rep 0 warms up */
    double t[5];
    la_state_reset(&st);
    t[0] = now();
    la_engine_apply(eng, 0, n, q, k, v, &st, o, NULL);
    t[1] = now();
    la_state_reset(&st);
    la_engine_accumulate(eng, 0, n, k, v, &st);
    t[2] = now();
    la_state_reset(&loc);
    la_engine_apply_local(eng, 0, n, q, k, v, &loc, raw, lsc);
    t[3] = now();
    la_engine_correct(eng, 0, n, q, &st, raw, lsc, o, NULL);
    t[4] = now();
    for (int i = 0; rep > 0 && i < 4; i++) best[i] = fmin(best[i], t[i + 1] - t[i]);
  }
  /* the combine: b <- a (+) b over H heads of r (dv + 1) doubles, both nonempty */
  const size_t rsz = (size_t)r * (dv + 1);
  int af = 0, bf = 0;
  double am = 0.5, bm = 0.25, tc = INFINITY;
  for (size_t i = 0; i < rsz * H; i++) st.sz[i] = loc.sz[i] = 1e-3 * (double)(i % 97);
  for (int rep = 0; rep <= reps; rep++) {
    const double t0 = now();
    for (int it = 0; it < 20; it++)
      for (int h = 0; h < H; h++)
        la_state_combine_head_right(st.sz + h * rsz, &am, &af, loc.sz + h * rsz, &bm, &bf, rsz);
    if (rep > 0) tc = fmin(tc, (now() - t0) / (20.0 * (double)(rsz + 3) * H));
    bm = 0.25;
  }
  const double flops = la_useful_flops(&cfg, n, H, dk, dv, r);
  fprintf(out, "tokens,heads,dk,dv,r,apply_s_per_token,accumulate_s_per_token,"
               "apply_local_s_per_token,correct_s_per_token,combine_s_per_double,apply_gflops\n");
  fprintf(out, "%lld,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", (long long)n, H, dk, dv, r,
          best[0] / n, best[1] / n, best[2] / n, best[3] / n, tc, flops / best[0] * 1e-9);
  free(q); free(k); free(v); free(o); free(raw); free(lsc);
  la_state_free(&st);
  la_state_free(&loc);
  la_engine_destroy(&eng);
  la_featmap_destroy(&fm);
  return 0;
}

static const char *opt(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return def;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int rc = rank == 0 ? calibrate(atoll(opt(argc, argv, "--tokens", "262144")),
                                       atoi(opt(argc, argv, "--heads", "4")),
                                       atoi(opt(argc, argv, "--dk", "64")),
                                       atoi(opt(argc, argv, "--dv", "64")),
                                       atoi(opt(argc, argv, "--reps", "2")), stdout)
                           : 0;
  MPI_Finalize();
  return rc;
}
