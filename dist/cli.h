/* Command-line options of `linattn run` (CONTRACT.md). Not Collective. */
#ifndef LINATTN_CLI_H
#define LINATTN_CLI_H
#include <stdint.h>
#include "linattn/core.h"

typedef struct {
  la_config cfg;
  const char *q, *k, *v, *out, *report, *projection, *save_projection, *segments;
  const char *checkpoint;
  const char *grad_out, *grad_q, *grad_k, *grad_v; /* linattn grad */
  const char *den_string; /* --denominator as given */
  int64_t n;              /* synthetic */
  int heads, dk, dv;
  double input_scale;
  int dtype_set;
  la_dtype dtype;
  int64_t window;
  int force, progress, reproducible, help;
  int is_grad;
  int64_t block; /* --block-tokens: streaming block per rank */
} la_cli;

/* Parse argv[first..argc). Returns LA_OK, or LA_ERR_ARG with a one-line reason naming the
 * option. */
la_status la_cli_parse(int argc, char **argv, int first, la_cli *o, char *err, size_t errlen);
/* The same for `linattn grad` (every run option plus --grad-out/-q/-k/-v). */
la_status la_cli_parse_grad(int argc, char **argv, int first, la_cli *o, char *err,
                            size_t errlen);
/* Strict number parsing for option values: the whole string, in range. 0 on success. */
int la_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int la_parse_f64(const char *s, double *out);
void la_cli_help(const char *subcommand); /* "run" or "grad" */

#endif
