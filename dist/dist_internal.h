/* Private layout of la_dist (dist/ only). */
#ifndef LINATTN_DIST_INTERNAL_H
#define LINATTN_DIST_INTERNAL_H
#include "linattn/dist.h"
#include "../core/la_core_private.h"

struct la_dist_s {
  MPI_Comm comm; /* duplicate of the caller's communicator */
  MPI_Comm rev;  /* the same ranks in reverse order (suffix scans) */
  int rank, size;
  int64_t bytes;
  double comm_seconds;
  la_scan_algorithm scan; /* the causal exscans' algorithm as set (scan.c); may be auto */
  la_scan_algorithm scan_used; /* that of the last causal scan (auto resolved) */
  int scan_pieces;        /* pieces of the pipelined scan */
};

/* scan.c: the exclusive scan of count elements of per doubles ([sz | m | f] per head) by
 * algorithm a (not exscan or auto: those are MPI_Iexscan in comm.c), into out (rank 0's out
 * is not written). scratch holds la_scan_scratch_doubles(a, P, count, per, pieces) doubles.
 * Collective; returns an MPI error code. */
int la_scan_exclusive(MPI_Comm comm, la_scan_algorithm a, int pieces, const double *in,
                      double *out, int count, size_t per, double *scratch);
size_t la_scan_scratch_doubles(la_scan_algorithm a, int P, int count, size_t per, int pieces);
/* Doubles this rank sends in one scan of count x per doubles (the report's comm bytes). */
double la_scan_sent_doubles(la_scan_algorithm a, int rank, int P, int count, size_t per,
                            int pieces);

/* plan_combine.c: the plan's collective between two passes (docs/design.md §4.5 "The plan's
 * collective"). Agrees on in (this rank's status for the pass that made the summaries), then:
 * causal (bidir = 0): *a <- the combination of the earlier ranks' summaries by d's scan
 * algorithm (rank 0: the identity); reverse: of the later ranks' (the last: the identity);
 * bidirectional: *a <- every rank's (allreduce); with b (bidirectional segments, §3.1): *a <-
 * the exclusive prefix of the tails, *b <- the reversed one of the heads. One rank: causal a,
 * and the segments' pair, the identity; bidirectional a unchanged. Collective; returns the
 * agreed status. */
la_status la_plan_combine(la_dist d, la_status in, int bidir, int reverse, la_state *a,
                          la_state *b);
/* The nonblocking causal form (the streaming plan's overlap with block 0): agree on in, then
 * la_dist_iexscan_begin of total; la_dist_iexscan_end completes it. Collective. */
la_status la_plan_combine_begin(la_dist d, la_status in, const la_state *total,
                                la_dist_req *req);

#ifdef LA_SMPI
/* smpi_model.c (SimGrid builds only, docs/simulation.md): charges the simulated time of
 * combining `doubles` doubles (the measured seconds per double, 0 by default) and returns
 * nonzero when the arithmetic itself is to be skipped (buffers shared between ranks). */
int la_smpi_combine(size_t doubles);
extern double la_smpi_combine_seconds; /* per double */
extern int la_smpi_combine_skip;
#endif

/* forward.c: the forward of this rank's whole shard [row0, row0 + n_local) of N tokens, every
 * mask of §3 combined across ranks; stats on this rank only. The step of a plan that holds
 * the shard (stream.c). Errors agreed. Collective. */
la_status la_forward_shard(la_dist d, la_engine eng, int64_t N, int64_t n_local, int64_t row0,
                           const void *q, const void *k, const void *v, void *out,
                           la_den_stats *stats);

/* comm.c: every rank's rows [row0, row0 + n) in rank order, first rows in r0[p] and counts
 * in rn[p] (each of d->size entries; the caller frees both), so that the window's halos
 * follow the rows as passed and not an ownership rule: the reversed sequence of the decayed
 * backward splits N otherwise (docs/design.md §1.2 "The backward"). LA_ERR_ARG unless the
 * ranks pass consecutive rows from 0 in rank order. Agrees on s first.
 * Collective. */
la_status la_dist_row_ranges(la_dist d, la_status s, int64_t n, int64_t row0, int64_t **r0,
                             int64_t **rn);

/* forward.c: the window's halo from the earlier ranks (keys); r0, rn every rank's rows
 * (la_dist_row_ranges). Collective. */
la_status la_window_fetch_past(la_dist d, la_engine eng, int64_t n, int64_t row0,
                               const int64_t *r0, const int64_t *rn, const void *k, const void *v, int64_t *lo, int64_t *hi,
                               char **hk, char **hv, la_state *mid);

/* Collective: the exclusive scan, its reverse and the allreduce on exact states (§4.7),
 * whose operator is exactly associative, so the result does not depend on how MPI brackets
 * it. */
la_status la_dist_xexscan(la_dist d, la_xstate *x);
la_status la_dist_xexscan_reverse(la_dist d, la_xstate *x);
la_status la_dist_xallreduce(la_dist d, la_xstate *x);

#endif
