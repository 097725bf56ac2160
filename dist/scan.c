/* The exclusive prefix scan of the rank summaries by a selectable algorithm
 * (docs/design.md §4.5 "Scan algorithms"; `--scan-algorithm`). Elements are `count` heads of
 * `per` doubles: [sz (per - 3) | m | f | a] (scan_element.h), combined by the non-commutative
 * operator of §4.1
 * (la_state_combine_head_right: b <- a (+) b, a earlier). Every algorithm gives each rank
 * p > 0 the combination of the elements of ranks 0..p-1 in rank order; only the bracketing
 * differs, so results agree within float64 rounding (test scan_algorithms). Rank 0's output
 * is left to the caller (the identity), as with MPI_Exscan.
 *
 *   exscan     MPI_Exscan with the user operator (the MPI library's own algorithm);
 *   chain      LASP: rank p receives the prefix from p-1, adds its own, sends to p+1;
 *              P - 1 sequential messages of the whole state;
 *   allgather  LASP-2: every rank gathers all P states and folds its prefix locally; one
 *              collective, P times the state in memory and on the wire per rank;
 *   doubling   recursive doubling over the hypercube (MPICH's exscan): ceil(log2 P) rounds
 *              of whole-state exchanges, any P, non-commutative safe;
 *   pipelined  ZeCO's All-Scan: the chain, with the state cut into K pieces that follow each
 *              other along the ranks; P - 1 + K - 1 piece steps. Each piece carries its
 *              head's (m, f, a), so the operator applies piece by piece. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dist_internal.h"
#include "la_alloc.h"
#include "scan_element.h"
#include "scan_names.h"

enum { LA_SCAN_TAG = 0x5ca7 };

const char *const la_scan_algorithm_names[] = LA_SCAN_ALGORITHM_NAMES; /* scan_names.h */
_Static_assert(sizeof la_scan_algorithm_names / sizeof *la_scan_algorithm_names ==
                   (size_t)LA_SCAN_COUNT + 1,
               "scan_names.h names every la_scan_algorithm, in order, then NULL");

size_t la_scan_scratch_doubles(la_scan_algorithm a, int P, int count, size_t per, int pieces) {
  const size_t total = (size_t)count * per;
  switch (a) {
  case LA_SCAN_CHAIN: return total;                 /* own (+) prefix, to send */
  case LA_SCAN_ALLGATHER: return (size_t)P * total; /* every rank's element */
  case LA_SCAN_DOUBLING: return 2 * total;          /* partial, received */
  case LA_SCAN_PIPELINED: {                         /* received piece, two pieces in flight */
    const size_t rsz = per - LA_SCAN_EL_TAIL, k = pieces < 1 ? 1 : (size_t)pieces > rsz ? rsz : (size_t)pieces;
    return 3 * (size_t)count * ((rsz + k - 1) / k + LA_SCAN_EL_TAIL);
  }
  default: return 0;
  }
}

double la_scan_sent_doubles(la_scan_algorithm a, int rank, int P, int count, size_t per,
                            int pieces) {
  const double total = (double)count * (double)per;
  int rounds = 0;
  switch (a) {
  case LA_SCAN_CHAIN: return rank < P - 1 ? total : 0;
  case LA_SCAN_ALLGATHER: return total * (P - 1); /* a ring or a tree: P - 1 elements out */
  case LA_SCAN_DOUBLING:
    for (int mask = 1; mask < P; mask <<= 1) rounds += (rank ^ mask) < P;
    return total * rounds;
  case LA_SCAN_PIPELINED: {
    const size_t rsz = per - LA_SCAN_EL_TAIL, k = pieces < 1 ? 1 : (size_t)pieces > rsz ? rsz : (size_t)pieces;
    return rank < P - 1 ? total + (double)LA_SCAN_EL_TAIL * count * (double)(k - 1) : 0;
  }
  default: return total;
  }
}

/* The scan's local copies. In a simulation with shared buffers (la_smpi_combine_skip) the
 * contents mean nothing and the copy is skipped: the simulator charges no time for it either
 * way (computation timing is off), but on the host it was most of a large state's run time
 * (docs/simulation.md "What is simulated, what is modelled"). */
static void copy_d(double *dst, const double *src, size_t n) {
#ifdef LA_SMPI
  if (la_smpi_combine_skip) return;
#endif
  memcpy(dst, src, sizeof(double) * n);
}

static int scan_chain(MPI_Comm comm, int rank, int P, const double *in, double *out, int count,
                      size_t per, double *tmp) {
  const int n = (int)((size_t)count * per);
  int rc = MPI_SUCCESS;
  if (rank > 0) rc = MPI_Recv(out, n, MPI_DOUBLE, rank - 1, LA_SCAN_TAG, comm, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS && rank < P - 1) {
    copy_d(tmp, in, (size_t)n);
    if (rank > 0) la_scan_el_combine_right(out, tmp, count, per);
    rc = MPI_Send(tmp, n, MPI_DOUBLE, rank + 1, LA_SCAN_TAG, comm);
  }
  return rc;
}

static int scan_allgather(MPI_Comm comm, int rank, const double *in, double *out, int count,
                          size_t per, double *all) {
  const size_t total = (size_t)count * per;
  int rc = MPI_Allgather(in, (int)total, MPI_DOUBLE, all, (int)total, MPI_DOUBLE, comm);
  if (rc != MPI_SUCCESS || rank == 0) return rc;
  /* fold left in rank order: out = ((e_0 (+) e_1) (+) ...) (+) e_{p-1} */
  copy_d(out, all, total);
  for (int q = 1; q < rank; q++) {
    double *e = all + (size_t)q * total; /* e <- out (+) e, then out <- e */
    la_scan_el_combine_right(out, e, count, per);
    copy_d(out, e, total);
  }
  return rc;
}

/* MPICH's recursive-doubling exscan: after the round with partner rank ^ mask, `partial`
 * holds the combination of this rank's whole aligned group of 2 mask ranks (those below P),
 * and out the combination of the group's ranks below this one. */
static int scan_doubling(MPI_Comm comm, int rank, int P, const double *in, double *out, int count,
                         size_t per, double *scratch) {
  const size_t total = (size_t)count * per;
  double *partial = scratch, *recv = scratch + total;
  copy_d(partial, in, total);
  int have = 0, rc = MPI_SUCCESS;
  for (int mask = 1; mask < P && rc == MPI_SUCCESS; mask <<= 1) {
    const int dst = rank ^ mask;
    if (dst >= P) continue;
    rc = MPI_Sendrecv(partial, (int)total, MPI_DOUBLE, dst, LA_SCAN_TAG, recv, (int)total,
                      MPI_DOUBLE, dst, LA_SCAN_TAG, comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) break;
    if (rank > dst) { /* recv covers ranks below this group half: it goes on the left */
      la_scan_el_combine_right(recv, partial, count, per);
      if (have) la_scan_el_combine_right(recv, out, count, per);
      else copy_d(out, recv, total);
      have = 1;
    } else { /* recv covers ranks above: partial <- partial (+) recv */
      la_scan_el_combine_right(partial, recv, count, per);
      copy_d(partial, recv, total);
    }
  }
  return rc;
}

static int scan_pipelined(MPI_Comm comm, int rank, int P, const double *in, double *out,
                          int count, size_t per, int pieces, double *scratch) {
  const size_t rsz = per - LA_SCAN_EL_TAIL;
  const size_t K = pieces < 1 ? 1 : (size_t)pieces > rsz ? rsz : (size_t)pieces;
  const size_t cap = (size_t)count * ((rsz + K - 1) / K + LA_SCAN_EL_TAIL);
  double *recv = scratch, *send[2] = {scratch + cap, scratch + 2 * cap};
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int rc = MPI_SUCCESS;
  for (size_t j = 0; j < K && rc == MPI_SUCCESS; j++) {
    const size_t lo = j * rsz / K, hi = (j + 1) * rsz / K, L = hi - lo, pp = L + LA_SCAN_EL_TAIL;
    const int n = (int)((size_t)count * pp);
    if (rank > 0) {
      rc = MPI_Recv(recv, n, MPI_DOUBLE, rank - 1, LA_SCAN_TAG, comm, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) break;
      la_scan_el_unpiece(recv, count, per, lo, L, out); /* the prefix's piece, its (m, f, a) */
    }
    if (rank == P - 1) continue;
    double *s = send[j & 1];
    if (req[j & 1] != MPI_REQUEST_NULL) rc = MPI_Wait(&req[j & 1], MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) break;
    la_scan_el_piece(in, count, per, lo, L, s); /* own piece with own (m, f, a) */
    if (rank > 0) la_scan_el_combine_right(recv, s, count, pp);
    rc = MPI_Isend(s, n, MPI_DOUBLE, rank + 1, LA_SCAN_TAG, comm, &req[j & 1]);
  }
  for (int i = 0; i < 2; i++)
    if (req[i] != MPI_REQUEST_NULL) {
      int r2 = MPI_Wait(&req[i], MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS) rc = r2;
    }
  return rc;
}

int la_scan_exclusive(MPI_Comm comm, la_scan_algorithm a, int pieces, const double *in,
                      double *out, int count, size_t per, double *scratch) {
  int rank, P;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &P);
  switch (a) {
  case LA_SCAN_CHAIN: return scan_chain(comm, rank, P, in, out, count, per, scratch);
  case LA_SCAN_ALLGATHER: return scan_allgather(comm, rank, in, out, count, per, scratch);
  case LA_SCAN_DOUBLING: return scan_doubling(comm, rank, P, in, out, count, per, scratch);
  case LA_SCAN_PIPELINED:
    return scan_pipelined(comm, rank, P, in, out, count, per, pieces, scratch);
  default: return MPI_ERR_ARG; /* exscan and auto are MPI_Iexscan in comm.c */
  }
}
