/* JSON report (docs/cli.md "Report"), written atomically. Non-finite numbers become null. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "la_alloc.h"
#include "linattn/outfile.h"
#include "linattn/report.h"
#include "linattn/version.h"

double la_useful_flops(const la_config *cfg, int64_t n, int heads, int dk, int dv, int r) {
  double nh = (double)n * heads;
  double f = nh * (4.0 * r * dv + 4.0 * r);
  f += 2.0 * nh * la_map_flops_per_row(cfg->map, dk, r); /* q and k rows (maps.c) */
  return f;
}

static void num(FILE *f, const char *key, double x, const char *sep) {
  if (isfinite(x)) fprintf(f, "\"%s\": %.17g%s", key, x, sep);
  else fprintf(f, "\"%s\": null%s", key, sep);
}

/* "key": x, or null when x <= 0 (not known). */
static void opt_int(FILE *f, const char *key, int64_t x) {
  if (x > 0) fprintf(f, "  \"%s\": %lld,\n", key, (long long)x);
  else fprintf(f, "  \"%s\": null,\n", key);
}

static const char *policy_name(la_den_policy p) {
  switch (p) {
  case LA_DEN_ERROR: return "error";
  case LA_DEN_ADD: return "add";
  case LA_DEN_CLAMP: return "clamp";
  case LA_DEN_ZERO_EMPTY: return "zero-empty";
  }
  return "?";
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void opt_str(FILE *f, const char *s) {
  if (s) json_str(f, s);
  else fputs("null", f);
}

la_status la_report_write(const char *path, const la_report *p, int force) {
  LA_CHECK(force || access(path, F_OK) != 0, LA_ERR_EXISTS, "%s: exists (use --force to overwrite)",
           path);
  /* The JSON is composed in memory, then written and renamed by la_write_file, which checks
   * every write, the fsync and the close. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = la_open_memstream(&text, &len);
  LA_CHECK(f, LA_ERR_NOMEM, "%s: out of memory for the report", path);
  const la_config *c = &p->cfg;
  fprintf(f, "{\n  \"version\": \"%s\",\n  \"subcommand\": ", LA_VERSION_STRING);
  json_str(f, p->subcommand);
  fprintf(f, ",\n  \"mode\": \"%s\",\n  \"feature_map\": \"%s\",\n  \"features\": %d,\n",
          c->mode == LA_CAUSAL ? "causal" : "bidirectional", la_map_name(c->map), p->r);
  fprintf(f, "  \"projection_rows\": %d,\n", la_map_is_random(c->map) ? c->features : 0);
  fprintf(f, "  \"normalize\": %s,\n  \"denominator_policy\": ", c->normalize ? "true" : "false");
  json_str(f, p->den_policy_string ? p->den_policy_string : policy_name(c->den_policy));
  fprintf(f, ",\n  \"denominator_epsilon\": ");
  if (c->den_policy == LA_DEN_ADD || c->den_policy == LA_DEN_CLAMP) fprintf(f, "%.17g", c->den_eps);
  else fprintf(f, "null");
  fprintf(f, ",\n  \"allow_signed\": %s,\n  \"dtype\": \"%s\",\n", c->allow_signed ? "true" : "false",
          la_dtype_name(p->dtype));
  fprintf(f, "  \"n\": %lld,\n  \"heads\": %d,\n  \"dk\": %d,\n  \"dv\": %d,\n", (long long)p->n,
          p->heads, p->dk, p->dv);
  fprintf(f, "  \"scale\": %.17g,\n  \"seed\": %llu,\n  \"chunk\": %d,\n", p->scale,
          (unsigned long long)c->seed, p->chunk);
  fprintf(f, "  \"block_tokens\": %lld,\n", (long long)p->block_tokens);
  fprintf(f, "  \"kernels\": ");
  opt_str(f, p->kernels); /* never guessed: null when the caller did not say */
  fprintf(f, ",\n  \"cpu\": {\"model\": ");
  opt_str(f, p->cpu_model);
  fprintf(f, ", \"isa\": ");
  opt_str(f, p->cpu_isa);
  fprintf(f, "},\n  \"blas_core\": ");
  opt_str(f, p->blas_core);
  fprintf(f, ",\n  \"scan_algorithm\": ");
  opt_str(f, p->scan_algorithm);
  fprintf(f, ",\n  \"segments\": %lld,\n  \"window\": ", (long long)p->segments);
  if (p->window > 0) fprintf(f, "%lld", (long long)p->window);
  else fprintf(f, "null");
  fprintf(f, ",\n  \"reproducible\": %s", c->reproducible ? "true" : "false");
  fprintf(f, ",\n  \"decay\": "); /* gamma_h per head (docs/design.md §1.2), or null */
  if ((c->decay && c->decay_n >= 1) || c->decay_retnet) {
    for (int h = 0; h < p->heads; h++)
      fprintf(f, "%s%.17g", h ? ", " : "[",
              c->decay_retnet ? 1.0 - ldexp(1.0, -5 - h) : c->decay[c->decay_n == 1 ? 0 : h]);
    fprintf(f, "]");
  } else {
    fprintf(f, "null");
  }
  /* --gates (§1.2 "Gates"): data-dependent log-gates per token and head (and feature), or none */
  fprintf(f, ",\n  \"gates\": %s",
          c->gates == LA_GATES_FEATURE ? "\"token-head-feature\"" : c->gates ? "\"token-head\"" : "null");
  fprintf(f, ",\n  \"checkpoint\": ");
  if (!p->checkpoint_dir) {
    fprintf(f, "null");
  } else {
    fprintf(f, "{\"dir\": ");
    json_str(f, p->checkpoint_dir);
    if (p->resumed_from_token < 0)
      fprintf(f, ", \"resumed_from_token\": null, \"resumed_pass\": null, \"resumed_ranks\": null");
    else
      fprintf(f, ", \"resumed_from_token\": %lld, \"resumed_pass\": %d, \"resumed_ranks\": %d",
              (long long)p->resumed_from_token, p->resumed_pass, p->resumed_ranks);
    fprintf(f, ", \"written\": %d}", p->checkpoints_written);
  }
  fprintf(f, ",\n  \"ranks\": %d,\n  \"threads\": %d,\n  \"input\": ", p->ranks, p->threads);
  json_str(f, p->input ? p->input : "synthetic");
  fprintf(f, ",\n  \"output\": ");
  if (p->output) json_str(f, p->output);
  else fprintf(f, "null");
  fprintf(f, ",\n  \"seconds\": {");
  num(f, "total", p->t_total, ", ");
  num(f, "read", p->t_read, ", ");
  num(f, "compute", p->t_compute, ", ");
  num(f, "comm", p->t_comm, ", ");
  num(f, "write", p->t_write, "},\n  ");
  num(f, "gflops", p->gflops, ",\n  ");
  num(f, "tokens_per_second", p->tokens_per_second, ",\n");
  fprintf(f, "  \"denominator\": {");
  num(f, "min", p->den.rows ? p->den.min : NAN, ", ");
  num(f, "max", p->den.rows ? p->den.max : NAN, ", ");
  num(f, "median", p->den.hist ? la_den_stats_median(&p->den) : NAN, ", ");
  fprintf(f, "\"count_nonpositive\": %lld, \"count_nonfinite\": %lld, \"count_small\": %lld, "
             "\"violations\": %lld, \"median_resolution_octaves\": %.6g},\n",
          (long long)p->den.count_nonpositive, (long long)p->den.count_nonfinite,
          (long long)(p->den.hist ? la_den_stats_count_small(&p->den) : 0),
          (long long)p->den.violations, 1.0 / LA_DEN_HIST_PER_OCTAVE);
  fprintf(f, "  \"peak_rss_bytes_max_rank\": %lld,\n", (long long)p->peak_rss_bytes_max_rank);
  opt_int(f, "mem_estimate_bytes_per_rank", p->mem_estimate_bytes_per_rank);
  opt_int(f, "mem_limit_bytes_per_rank", p->mem_limit_bytes_per_rank);
  fprintf(f, "  \"comm_bytes_per_rank\": %lld\n}\n", (long long)p->comm_bytes_per_rank);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  la_status st = bad ? la_error(LA_ERR_NOMEM, "%s: out of memory for the report", path)
                     : la_write_file(path, text, len, NULL, 0, force);
  free(text);
  return st;
}
