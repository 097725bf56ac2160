/* The memory estimate per rank of `linattn run` and `linattn grad`, and --mem-limit
 * (docs/design.md §4.8, docs/cli.md "--mem-limit"): what a rank will allocate, worked out
 * from the job's shape before any large allocation, term by term. */
#ifndef LINATTN_MEMEST_H
#define LINATTN_MEMEST_H
#include <stdint.h>
#include "job.h"

enum { LA_MEM_TERMS = 12 };

typedef struct {
  int64_t total; /* bytes per rank: the sum of the terms */
  int n;         /* terms in use */
  struct {
    const char *what; /* "block buffers", ... as the error message names them */
    int64_t bytes;
  } term[LA_MEM_TERMS];
} la_mem_estimate;

/* Not Collective: the estimate for the rank with the most rows (every rank computes the same
 * value) of job j, after job_shapes and the segments (grad: `linattn grad`, else `run`).
 * Counts linattn's own allocations only, not the MPI and BLAS runtime already resident. */
void la_mem_estimate_job(const la_job *j, int grad, la_mem_estimate *m);

/* Collective: the estimate held to --mem-limit (per rank), or by default, the estimate times
 * the ranks on each node to that node's MemAvailable (/proc/meminfo; no limit when it cannot
 * be read). Sets j->mem_estimate and j->mem_limit (-1: none). A refusal is LA_ERR_ARG with
 * one line in err naming --mem-limit, the estimate and the limit; agreed across ranks. */
la_status la_mem_check(la_job *j, int grad);

/* The node's MemAvailable in bytes from /proc/meminfo (or the file $LINATTN_MEMINFO, for
 * tests), or -1 when it cannot be read. Not Collective. */
int64_t la_mem_available(void);

#endif
