/* The `linattn` program: MPI_Init_thread(FUNNELED), one subcommand, MPI_Finalize.
 * Errors are one line "linattn: error: ..." from rank 0, with the exit codes of docs/cli.md
 * "Exit codes". */
#include <stdio.h>
#include <string.h>
#include "bench.h"
#include "cli.h"
#include "linattn/linattn.h"
#include "run.h"

/* The subcommands; their options are the table in cli.c. */
static const struct {
  la_sub sub;
  int (*cmd)(la_dist d, la_cli *o);
  const char *what;
} cmds[] = {
    {LA_SUB_RUN, la_cmd_run, "the forward operator"},
    {LA_SUB_GRAD, la_cmd_grad, "the backward pass: dL/dQ, dL/dK, dL/dV"},
    {LA_SUB_BENCH, la_cmd_bench, "timing and scaling, exact baselines"},
    {LA_SUB_EVAL, la_cmd_eval, "error study against exact softmax attention"},
};
enum { NCMDS = (int)(sizeof cmds / sizeof cmds[0]) };

static void usage(void) {
  printf("usage: linattn SUBCOMMAND [options]\n\n");
  for (int i = 0; i < NCMDS; i++) {
    const char *name = la_cli_sub_name(cmds[i].sub);
    printf("  %-7s %s (see linattn %s --help)\n", name, cmds[i].what, name);
  }
  printf("  version print the version\n\n"
         "Run as `mpirun -np P linattn ...`, `srun linattn ...`, or plainly as one rank.\n");
}

/* Parse, then --help, --print-options or the command. Collective. */
static int subcommand(int i, int argc, char **argv, int rank) {
  la_cli o;
  la_status st = la_cli_parse(cmds[i].sub, argc, argv, 2, &o);
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(st));
    return la_status_exit_code(st);
  }
  if (o.help || o.print_options) {
    if (rank == 0 && o.help) la_cli_help(stdout, cmds[i].sub);
    else if (rank == 0) la_cli_print(stdout, &o);
    return 0;
  }
  la_dist d;
  st = la_dist_create(MPI_COMM_WORLD, &d); /* agreed: every rank fails, or none */
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(st));
    return la_status_exit_code(st);
  }
  la_dist_use_config(d, &o.cfg);
  int code = cmds[i].cmd(d, &o);
  la_dist_destroy(&d);
  return code;
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
  const la_sub s = sub ? la_cli_sub(sub) : (la_sub)0;
  int i = 0;
  while (i < NCMDS && cmds[i].sub != s) i++;
  if (!sub || !strcmp(sub, "-h") || !strcmp(sub, "--help")) {
    if (rank == 0) usage();
    code = sub ? 0 : 2;
  } else if (!strcmp(sub, "version") || !strcmp(sub, "--version")) {
    if (rank == 0) printf("linattn %s\n", LA_VERSION_STRING);
  } else if (i < NCMDS) {
    code = subcommand(i, argc, argv, rank);
  } else {
    if (rank == 0)
      fprintf(stderr, "linattn: error: unknown subcommand '%s' (try linattn --help)\n", sub);
    code = 2;
  }
  MPI_Finalize();
  return code;
}
