/* Private pieces of `linattn eval` (docs/design.md §8), shared by its files. Collective
 * unless noted. */
#ifndef LINATTN_EVAL_H
#define LINATTN_EVAL_H
#include <stdio.h>
#include "cli.h"
#include "linattn/dist.h"
#include "linattn/linattn.h"

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
la_status la_eval_recall(la_dist d, const la_cli *o, la_csv *csv, char *err, size_t errlen);

#endif
