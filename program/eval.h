/* Private pieces of `linattn eval` (docs/design.md §8), shared by its files. Collective
 * unless noted. */
#ifndef LINATTN_EVAL_H
#define LINATTN_EVAL_H
#include <stdio.h>
#include "cli.h"
#include "linattn/dist.h"
#include "linattn/linattn.h"
#include "linattn/study.h"

/* Rank 0's CSV texts, each rewritten atomically into the output folder as rows arrive. */
typedef struct {
  char *buf;
  size_t len;
  FILE *f; /* open_memstream on rank 0, NULL elsewhere */
  const char *name;
} la_csv;

/* Not Collective: the m positions floor((2a+1) n / 2m), a < m, evenly spread over [0, n)
 * (all of [0, n) when m >= n); returns their count. idx has room for min(m, n). */
int64_t la_even_rows(int64_t n, int64_t m, int64_t *idx);

/* The associative-recall check (recall.csv, docs/design.md §8.5): every (map, width, pairs,
 * trial) is one item, items are dealt to the ranks in turn, counts are summed on rank 0. */
la_status la_eval_recall(la_dist d, const la_cli *o, la_csv *csv);

/* The kernel pass over the kernel rows (program/eval_sample.c; docs/design.md §8.2, §8.7): each
 * rank passes its own keys and values (nk from global position j0) and every kernel row's
 * query (q [nq, H, dk], rows ascending); ss is created here and receives, on every rank, the
 * sums combined over all keys (la_shard_sums, study.h), tv included. The caller frees ss
 * (la_shard_sums_free) whatever the status. */
la_status la_eval_kernel_pass(la_dist d, const la_featmap fm, double scale, int64_t j0, int64_t nk,
                              const double *k, const double *v, int64_t nq, const int64_t *rows,
                              const double *q, int nmodes, const la_mode *modes, int dv,
                              int threads, la_shard_sums *ss);
/* Collective: kernel sums merged over ranks in rank order (the same on every rank). */
la_status la_eval_kernel_sums_allreduce(la_dist d, la_kernel_sums *ks);
/* Not Collective: weights_tv of mode mi from combined sums: the mean over (row, head) of
 * 0.5 sum_j |p_ij - w_ij|; a row whose map weights do not sum to a positive number counts 1. */
double la_eval_weights_tv(const la_shard_sums *ss, int mi);

#endif
