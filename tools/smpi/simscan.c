/* linattn_smpi: the scan algorithms of dist/scan.c and dist/comm.c, and the library's plan of
 * the causal forward, on SimGrid's simulated ranks (docs/simulation.md). Run under smpirun
 * (tools/smpi/simulate.sh); rank 0 prints CSV. Built from the plan's own sources (dist/) and
 * the model engine (model_engine.c) in place of linattn_core's engine; the calibration that
 * the model charges is a separate executable on the real engine (calibrate.c,
 * linattn_smpi_calibrate).
 *
 *   scan --heads H --r r --dv d [--algs a,b,..] [--pieces K] [--combine-seconds x]
 *        [--skip-combines] [--check]
 *       one la_dist_exscan of a state of H heads of r (dv + 1) + 3 doubles per algorithm;
 *       prints the scan's communication time (la_dist_comm_seconds, max over ranks) beside
 *       auto's model (la_scan_model_seconds). --check fills the states with random elements
 *       and compares every rank's prefix with a serial fold of the operator (docs/design.md
 *       §4.1): exit 1 when any differs by more than 1e-12 relative.
 *   forward (--tokens-per-rank n | --tokens N) --calib FILE [--heads H --dk d --dv d]
 *           [--block-tokens B] [--algs ...] [--pieces K] [--combine-seconds x] [--skip-combines]
 *       the library's causal forward on the model engine, whose phases charge the calibrated
 *       seconds per token of FILE (docs/sim_calibration.csv): without B the in-memory plan,
 *       la_dist_forward (dist/forward.c forward_causal: keys pass, the plan's collective,
 *       apply; docs/design.md §4.5 "In memory"); with B the streaming plan of `linattn run
 *       --block-tokens B`, la_stream_create ... la_stream_destroy (dist/stream.c, docs/design.md
 *       §4.5 "The streaming plan"). No rows exist: q, k, v and out are NULL, which the plan
 *       only hands to the engine. Every message is the plan's: its status agreements, step
 *       counts and scan (docs/design.md §4.5 "The plan's collective"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "dist_internal.h"
#include "linattn/linattn.h"
#include "scan_element.h"
#include "simscan.h"

/* No mutable globals: the simulated ranks share them (smpi/privatization:no). */
#define RANK_P                          \
  int rank, P;                          \
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); \
  MPI_Comm_size(MPI_COMM_WORLD, &P)

static void die(const char *msg) {
  RANK_P;
  (void)P;
  if (rank == 0) fprintf(stderr, "linattn: error: %s\n", msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static const char *opt(int argc, char **argv, const char *name, const char *def) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return def;
}
static int flag(int argc, char **argv, const char *name) {
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], name)) return 1;
  return 0;
}

/* --algs list -> algorithms (names of la_scan_algorithm_names) */
static int parse_algs(const char *s, la_scan_algorithm *a, int max) {
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ",")) {
    int k = 0;
    while (la_scan_algorithm_names[k] && strcmp(la_scan_algorithm_names[k], t)) k++;
    if (!la_scan_algorithm_names[k]) die("--algs: unknown scan algorithm");
    a[n++] = (la_scan_algorithm)k;
  }
  return n;
}

/* A deterministic element for rank p, head h (every rank can make every rank's): log-scales
 * in +-30, some empty heads, some segment starts, as in tests/test_scan.c. */
static double urand(uint64_t *rs) {
  *rs = *rs * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*rs >> 11) * 0x1.0p-53;
}
static void make(int p, la_state *e) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  uint64_t rs = 0x9e3779b97f4a7c15ULL * (uint64_t)(p + 1);
  for (int h = 0; h < e->heads; h++) {
    e->m[h] = urand(&rs) < 0.1 ? -INFINITY : 60 * urand(&rs) - 30;
    e->f[h] = urand(&rs) < 0.1;
    for (size_t i = 0; i < rsz; i++) e->sz[h * rsz + i] = e->m[h] == -INFINITY ? 0 : 2 * urand(&rs) - 1;
  }
}

static int cmd_scan(la_dist d, int argc, char **argv) {
  RANK_P;
  const int H = atoi(opt(argc, argv, "--heads", "4")), r = atoi(opt(argc, argv, "--r", "64")),
            dv = atoi(opt(argc, argv, "--dv", "64")), K = atoi(opt(argc, argv, "--pieces", "8"));
  const int check = flag(argc, argv, "--check");
  la_scan_algorithm algs[8];
  const int na = parse_algs(opt(argc, argv, "--algs", "doubling,chain,allgather,pipelined,exscan"), algs, 8);
  la_state s, want, tmp;
  if (la_state_init(&s, H, r, dv) != LA_OK || (check && (la_state_init(&want, H, r, dv) != LA_OK ||
                                                          la_state_init(&tmp, H, r, dv) != LA_OK)))
    die("out of memory for the states");
  const size_t per = la_scan_el_doubles(r, dv), rsz = (size_t)r * (dv + 1); /* la_state's sz */
  if (check) { /* the serial fold of ranks 0..rank-1, from the library's operator */
    for (int q = 0; q < rank; q++) {
      make(q, &tmp);
      la_state_combine(&want, &tmp);
    }
  }
  int bad = 0;
  if (rank == 0) printf("alg,ranks,heads,r,dv,state_bytes,pieces,seconds,model_seconds,used,check_rel\n");
  for (int i = 0; i < na; i++) {
    /* only the scan settings are read (linattn_smpi links no core/base/config.c) */
    const la_config cfg = {.scan_algorithm = algs[i], .scan_pieces = K};
    la_dist_use_config(d, &cfg);
    if (check) make(rank, &s);
    MPI_Barrier(MPI_COMM_WORLD);
    const double c0 = la_dist_comm_seconds(d);
    if (la_dist_exscan(d, &s) != LA_OK) die("the scan failed");
    double t = la_dist_comm_seconds(d) - c0, tmax = 0, rel = 0, relmax = 0;
    if (check) {
      for (int h = 0; h < H; h++) {
        double big = 0, diff = 0;
        for (size_t j = 0; j < rsz; j++) {
          big = fmax(big, fabs(want.sz[h * rsz + j]));
          diff = fmax(diff, fabs(s.sz[h * rsz + j] - want.sz[h * rsz + j]));
        }
        if (big > 0) rel = fmax(rel, diff / big);
        if (!(diff <= 1e-12 * big) || s.m[h] != want.m[h] || !!s.f[h] != !!want.f[h]) {
          if (getenv("LA_SMPI_DEBUG"))
            fprintf(stderr, "rank %d %s head %d: diff %g big %g m %g/%g f %d/%d\n", rank,
                    la_scan_algorithm_names[algs[i]], h, diff, big, s.m[h], want.m[h], s.f[h], want.f[h]);
          bad++;
        }
      }
    }
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&rel, &relmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    const la_scan_algorithm used = la_dist_scan_algorithm(d);
    if (rank == 0) {
      printf("%s,%d,%d,%d,%d,%.0f,%d,%.6g,%.6g,%s,", la_scan_algorithm_names[algs[i]], P, H, r, dv,
             8.0 * H * per, K, tmax, la_scan_model_seconds(used, P, H, per, K),
             la_scan_algorithm_names[used]);
      if (check) printf("%.3g", relmax);
      printf("\n");
      fflush(stdout);
    }
  }
  int allbad = 0;
  MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (check && rank == 0)
    printf("# check: %s (%d heads differ from the serial fold)\n", allbad ? "FAILED" : "ok", allbad);
  la_state_free(&s);
  if (check) { la_state_free(&want); la_state_free(&tmp); }
  return allbad ? 1 : 0;
}

/* The streaming plan's loop (linattn/dist.h "The streaming plan"), without rows. */
static la_status stream_forward(la_dist d, la_engine eng, int64_t N, int64_t B) {
  la_stream s = NULL;
  la_stream_block b;
  la_status st = la_stream_create(d, eng, N, B, &s);
  while (st == LA_OK && (st = la_stream_next(s, &b)) == LA_OK && b.pass)
    st = la_stream_feed(s, LA_OK, NULL, NULL, NULL, NULL, NULL);
  if (st == LA_OK) st = la_stream_finish(s, NULL);
  la_stream_destroy(&s);
  return st;
}

static int cmd_forward(la_dist d, int argc, char **argv) {
  RANK_P;
  const int H = atoi(opt(argc, argv, "--heads", "4")), dk = atoi(opt(argc, argv, "--dk", "64")),
            dv = atoi(opt(argc, argv, "--dv", "64")), K = atoi(opt(argc, argv, "--pieces", "8"));
  const char *calib = opt(argc, argv, "--calib", NULL);
  const int64_t npr = atoll(opt(argc, argv, "--tokens-per-rank", "0"));
  const int64_t B = atoll(opt(argc, argv, "--block-tokens", "0"));
  const int64_t N = npr > 0 ? npr * P : atoll(opt(argc, argv, "--tokens", "0"));
  if (!calib || N <= 0) die("forward needs --calib FILE and --tokens-per-rank n or --tokens N");
  /* seconds per token: apply, accumulate, apply_local, correct (calibrate.c's columns) */
  double c[4];
  FILE *f = fopen(calib, "r");
  char line[1024];
  if (!f || !fgets(line, sizeof line, f) || !fgets(line, sizeof line, f) ||
      sscanf(line, "%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%lf,%lf,%lf,%lf", &c[0], &c[1], &c[2], &c[3]) != 4)
    die("cannot read the calibration CSV (--calib)");
  fclose(f);
  la_scan_algorithm algs[8];
  const int na = parse_algs(opt(argc, argv, "--algs", "doubling,chain,allgather,pipelined,exscan"), algs, 8);
  int64_t n, row0;
  la_split_ownership(N, P, rank, &n, &row0);
  la_engine eng = NULL; /* elu1: the feature width r is dk */
  if (la_model_engine_create(H, dk, dk, dv, c, &eng) != LA_OK) die(la_error_message());
  if (rank == 0) printf("alg,ranks,tokens,tokens_per_rank,heads,dk,dv,seconds,comm_seconds,compute_seconds,used\n");
  for (int i = 0; i < na; i++) {
    /* only the scan settings are read (linattn_smpi links no core/base/config.c) */
    const la_config cfg = {.scan_algorithm = algs[i], .scan_pieces = K};
    la_dist_use_config(d, &cfg);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime(), c0 = la_dist_comm_seconds(d), e0 = la_model_engine_seconds(eng);
    const la_status st = B > 0 ? stream_forward(d, eng, N, B)
                               : la_dist_forward(d, eng, n, row0, NULL, NULL, NULL, NULL, NULL);
    if (st != LA_OK) die(la_error_reason(st)); /* agreed: every rank leaves */
    double v[3] = {MPI_Wtime() - t0, la_dist_comm_seconds(d) - c0,
                   la_model_engine_seconds(eng) - e0}, vmax[3];
    MPI_Reduce(v, vmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%s,%d,%lld,%lld,%d,%d,%d,%.6g,%.6g,%.6g,%s\n", la_scan_algorithm_names[algs[i]], P,
             (long long)N, (long long)(N / P), H, dk, dv, vmax[0], vmax[1], vmax[2],
             la_scan_algorithm_names[la_dist_scan_algorithm(d)]);
      fflush(stdout);
    }
  }
  la_engine_destroy(&eng);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  RANK_P;
  (void)P;
  const char *cmd = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (!strcmp(cmd, "scan") || !strcmp(cmd, "forward")) {
    la_smpi_combine_seconds = atof(opt(argc, argv, "--combine-seconds", "0"));
    la_smpi_combine_skip = flag(argc, argv, "--skip-combines");
    la_dist d = NULL;
    if (la_dist_create(MPI_COMM_WORLD, &d) != LA_OK) die("cannot create the communicators");
    rc = !strcmp(cmd, "scan") ? cmd_scan(d, argc, argv) : cmd_forward(d, argc, argv);
    la_dist_destroy(&d);
  } else if (rank == 0) {
    fprintf(stderr, "linattn: error: usage: linattn_smpi scan|forward [options] "
                    "(tools/smpi/simscan.c; the calibration: linattn_smpi_calibrate)\n");
  }
  MPI_Finalize();
  return rc;
}
