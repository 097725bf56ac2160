/* The `linattn` program: MPI_Init_thread(FUNNELED), one subcommand, MPI_Finalize.
 * Errors are one line "linattn: error: ..." from rank 0, and the exit code of CONTRACT.md. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "linattn/linattn.h"
#include "bench.h"
#include "run.h"

static void usage(void) {
  printf("usage: linattn SUBCOMMAND [options]\n\n"
         "  run     the forward operator (see linattn run --help)\n"
         "  grad    the backward pass: dL/dQ, dL/dK, dL/dV (see linattn grad --help)\n"
         "  bench   timing and scaling, exact baselines (see linattn bench --help)\n"
         "  version print the version\n\n"
         "Run as `mpirun -np P linattn ...`, `srun linattn ...`, or plainly as one rank.\n");
}

int main(int argc, char **argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "linattn: error: MPI_Init_thread failed\n");
    return 1;
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  if (provided < MPI_THREAD_FUNNELED) {
    if (rank == 0)
      fprintf(stderr, "linattn: error: the MPI library gives thread level %d, FUNNELED is needed\n",
              provided);
    MPI_Finalize();
    return 1;
  }
  const char *sub = argc > 1 ? argv[1] : NULL;
  if (!sub || !strcmp(sub, "-h") || !strcmp(sub, "--help")) {
    if (rank == 0) usage();
    code = sub ? 0 : 2;
  } else if (!strcmp(sub, "version") || !strcmp(sub, "--version")) {
    if (rank == 0) printf("linattn %s\n", LA_VERSION_STRING);
  } else if (!strcmp(sub, "run") || !strcmp(sub, "grad")) {
    const int grad = !strcmp(sub, "grad");
    la_cli o;
    char err[1024];
    la_status st = grad ? la_cli_parse_grad(argc, argv, 2, &o, err, sizeof err)
                        : la_cli_parse(argc, argv, 2, &o, err, sizeof err);
    if (st != LA_OK) {
      if (rank == 0) fprintf(stderr, "linattn: error: %s\n", err);
      code = la_status_exit_code(st);
    } else if (o.help) {
      if (rank == 0) la_cli_help(sub);
    } else {
      la_dist d;
      if (la_dist_create(MPI_COMM_WORLD, &d) != LA_OK) {
        if (rank == 0) fprintf(stderr, "linattn: error: cannot duplicate MPI_COMM_WORLD\n");
        code = 1;
      } else {
        code = grad ? la_cmd_grad(d, &o) : la_cmd_run(d, &o);
        la_dist_destroy(&d);
      }
    }
  } else if (!strcmp(sub, "bench")) {
    la_dist d;
    if (la_dist_create(MPI_COMM_WORLD, &d) != LA_OK) {
      if (rank == 0) fprintf(stderr, "linattn: error: cannot duplicate MPI_COMM_WORLD\n");
      code = 1;
    } else {
      code = la_cmd_bench(d, argc, argv, 2);
      la_dist_destroy(&d);
    }
  } else {
    if (rank == 0) fprintf(stderr, "linattn: error: unknown subcommand '%s' (try linattn --help)\n", sub);
    code = 2;
  }
  MPI_Finalize();
  return code;
}
