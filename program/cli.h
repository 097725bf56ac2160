/* The options of every `linattn` subcommand (docs/cli.md), parsed from the one table in
 * cli.c. Not Collective. */
#ifndef LINATTN_CLI_H
#define LINATTN_CLI_H
#include <stdint.h>
#include <stdio.h>
#include "linattn/core.h"
#include "options.h"

/* Subcommands, as bits of la_opt.subs. */
typedef enum { LA_SUB_RUN = 1, LA_SUB_GRAD = 2, LA_SUB_BENCH = 4, LA_SUB_EVAL = 8 } la_sub;

typedef struct {
  la_sub sub; /* first, so that no option field has offset 0 (la_opt.seen) */
  /* run, grad */
  la_config cfg; /* --mode, --feature-map, --features, --scale, --seed, --normalize,
                    --denominator, --allow-signed, --window, --threads, --chunk,
                    --kernels, --reproducible, --scan-algorithm, --scan-pieces */
  const char *q, *k, *v, *out, *report, *projection, *save_projection, *segments;
  const char *grad_out, *grad_q, *grad_k, *grad_v, *grad_gates; /* grad */
  const char *den_string; /* --denominator as given */
  const char *decay_string; /* --decay as given; its values (cfg.decay points here) */
  double decay_vals[LA_LIST_MAX];
  const char *gates_string; /* --gates as given: a file, or "synthetic" */
  const char *gates;        /* the file, or NULL (synthetic gates, or none) */
  int64_t n;              /* synthetic workload; also bench */
  int heads, dk, dv;
  double input_scale;
  int dtype_set; /* --dtype was given (otherwise the inputs' dtype) */
  la_dtype dtype;
  int force, progress;
  int64_t block; /* --block-tokens: streaming block per rank */
  int64_t mem_limit; /* --mem-limit: bytes per rank; 0: the node's MemAvailable (memest.h) */
  const char *checkpoint;  /* --checkpoint DIR (run) */
  double checkpoint_every; /* --checkpoint-every: seconds between timed checkpoints */
  /* bench (with heads, dk, dv, dtype, force, cfg.seed, cfg.chunk) */
  la_list n_list, features_list, threads_list, modes, maps;
  int repeat, baselines, gemm_probe, gemm_size, check, no_linear, pblas_nb;
  int64_t baseline_max_n, pblas_panel;
  const char *csv;
  /* eval (with q, k, v, grad_out, heads, dk, dv, modes, maps, features_list, n_list, force,
   * progress, cfg.scale, cfg.threads) */
  const char *out_dir;
  int seeds, recall;
  la_list input_scales, recall_pairs;
  int64_t kernel_max_n, kernel_rows, floor_max_n, tv_floor_max_n, softmax_max_n, data_seed;
  /* every subcommand */
  int help, print_options;
  int argc; /* the command line, as given to la_cli_parse */
  char **argv;
} la_cli;

/* --baselines */
enum { LA_BASELINES_NONE = 0, LA_BASELINES_SOFTMAX, LA_BASELINES_PBLAS, LA_BASELINES_ALL };

/* The subcommand called `name`, or 0; and the name of a subcommand. */
la_sub la_cli_sub(const char *name);
const char *la_cli_sub_name(la_sub sub);
/* Defaults, then argv[first..argc), then the checks between options, for subcommand sub.
 * Returns LA_OK, or LA_ERR_ARG with a one-line reason naming the option (la_error_reason). */
la_status la_cli_parse(la_sub sub, int argc, char **argv, int first, la_cli *o);
/* `linattn SUB --help`: usage, the options with their values and defaults, exit codes. */
void la_cli_help(FILE *f, la_sub sub);
/* `--print-options`: the parsed options as name=value lines (docs/cli.md "Errors"). */
void la_cli_print(FILE *f, const la_cli *o);
/* la_cli_print without the options a resume may change (LA_OPT_RESUMABLE): the options part
 * of a checkpoint's fingerprint (checkpoint.c). */
void la_cli_print_fingerprint(FILE *f, const la_cli *o);

#endif
