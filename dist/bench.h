/* `linattn bench` and the PBLAS exact baseline it times (docs/design.md §4.6 "Exact
 * references", ScaLAPACK); the softmax ring is in linattn/dist.h. Private to dist/: these
 * take MPI handles. */
#ifndef LINATTN_BENCH_H
#define LINATTN_BENCH_H
#include "linattn/baseline.h"
#include "cli.h"
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

/* The CSV header of `linattn bench` (docs/cli.md "linattn bench"), with its newline. */
extern const char la_bench_csv_header[];

/* `linattn bench` with parsed options (la_cli_parse): Collective, returns the exit code.
 * Resolves an empty --threads list to the OpenMP default. */
int la_cmd_bench(la_dist d, la_cli *o);

#endif
