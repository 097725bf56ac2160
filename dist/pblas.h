/* The PBLAS exact baseline of the dist library (docs/design.md §4.6 "Exact references",
 * ScaLAPACK; pblas.c): private to dist/, as it takes MPI handles; `linattn bench` times it. */
#ifndef LINATTN_PBLAS_H
#define LINATTN_PBLAS_H
#include "linattn/baseline.h"
#include "linattn/dist.h"

/* Rows in and out of the PBLAS baseline (one head, float64). fill writes rows
 * [row0, row0+n) of tensor t (0 = Q, 1 = K, 2 = V) row-major into dst ([n, d]); emit receives
 * a local block of the output, rows [row0, row0+n) x columns [col0, col0+ncol), column-major
 * with leading dimension lda. Called by every rank for its own blocks; Not Collective. */
typedef struct {
  void (*fill)(void *ctx, int t, int64_t row0, int64_t n, double *dst);
  void (*emit)(void *ctx, int64_t row0, int64_t n, int64_t col0, int ncol, const double *a,
               int64_t lda);
  void *ctx;
} la_pblas_io;

/* Collective on comm. Exact attention of one head, the dense quadratic way: on a BLACS grid
 * (pr x pc = P, as square as P allows) with nb x nb blocks, S = scale Q K^T by pdgemm (row
 * panels of the n x n matrix: panel_rows rounded up to a multiple of nb*pr, or with 0 at most
 * 2^26 entries), causal mask, row max over the process
 * row (MPI_MAX on the process row), P = exp(S - max), row sums (Cdgsum2d), O = P V by pdgemm, O /= sums.
 * Float64 throughout; OpenBLAS and the local loops use `threads` threads. seconds gets the
 * compute time (inputs already distributed, output not yet emitted), max over ranks.
 * n must fit in an int (ScaLAPACK's index type). */
la_status la_pblas_attention(MPI_Comm comm, int64_t n, int dk, int dv, double scale,
                             la_mode mode, int nb, int64_t panel_rows, int threads,
                             const la_pblas_io *io, double *seconds);

#endif
