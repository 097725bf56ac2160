/* The JSON run report of docs/cli.md "Report". Not Collective: rank 0 writes it. */
#ifndef LINATTN_REPORT_H
#define LINATTN_REPORT_H
#include <stdint.h>
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *subcommand;        /* "run", "grad", ... */
  la_config cfg;
  const char *den_policy_string; /* as given, e.g. "add:1e-6" */
  la_dtype dtype;
  int64_t n;
  int heads, dk, dv, r, chunk;
  int64_t block_tokens; /* run's streaming block (rows per rank); 0: not streamed (grad) */
  const char *kernels;           /* la_engine_kernels */
  const char *cpu_model;         /* e.g. /proc/cpuinfo "model name"; NULL: null */
  const char *cpu_isa;           /* the CPU's widest vector ISA (avx512f, avx2, ...); NULL: null */
  const char *blas_core;         /* openblas_get_corename(); NULL: null (not OpenBLAS) */
  const char *scan_algorithm;    /* the causal scan's algorithm (la_scan_algorithm_names) */
  double scale;                  /* the similarity scale actually used */
  int ranks, threads;
  int64_t segments;              /* 1 without --segments */
  int64_t window;                /* 0 = none */
  double t_total, t_read, t_compute, t_comm, t_write;
  double gflops, tokens_per_second;
  la_den_stats den;              /* merged over ranks */
  int64_t peak_rss_bytes_max_rank;
  int64_t mem_estimate_bytes_per_rank; /* the memory estimate (linattn run/grad); <= 0: null */
  int64_t mem_limit_bytes_per_rank;    /* the limit it was held to; <= 0: null (none) */
  int64_t comm_bytes_per_rank;
  const char *input;             /* "synthetic" or the Q path */
  const char *output;            /* path or NULL */
  /* --checkpoint (docs/design.md §6 "Checkpoints"); checkpoint_dir NULL: "checkpoint": null */
  const char *checkpoint_dir;
  int64_t resumed_from_token;    /* tokens whose outputs a resumed checkpoint held; -1: fresh */
  int resumed_pass, resumed_ranks; /* the checkpoint's pass (1 keys, 2 outputs) and rank count */
  int checkpoints_written;       /* by this process's run */
} la_report;

/* Useful flops of docs/cli.md: N*H*(4*r*dv + 4*r) + map flops (2*N*H*dk*r for each of q, k
 * with the random maps). */
double la_useful_flops(const la_config *cfg, int64_t n, int heads, int dk, int dv, int r);

/* Write the JSON atomically (temporary name, then rename); a failure records its reason. */
la_status la_report_write(const char *path, const la_report *rep, int force);

#ifdef __cplusplus
}
#endif
#endif
