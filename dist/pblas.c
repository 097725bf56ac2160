/* Dense quadratic baseline with PBLAS on a BLACS grid (docs/design.md §4.6, "ScaLAPACK has two
 * roles"): the n x n score matrix is formed, block-cyclically distributed, one row panel at a
 * time. It exists to be timed against the linear engine, so it is float64 and unblocked in N.
 * The BLACS/PBLAS prototypes: scalapack.h (Debian ships no header). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pblas.h"
#include "la_alloc.h"
#include "la_core_private.h"

#include "scalapack.h"

#define LA_PBLAS_PANEL_ENTRIES ((int64_t)1 << 26) /* 512 MiB of scores per panel, all ranks */
#define LA_PBLAS_TILE 256                          /* rows per thread tile of the local loops */

/* Global index of local index l in a block-cyclic dimension (source process 0). */
static int64_t g_index(int64_t l, int nb, int p, int np) {
  return (l / nb) * (int64_t)nb * np + (int64_t)p * nb + l % nb;
}

typedef struct {
  int m, n, ml, nl, desc[9];
  double *a;
} dmat;

static int dmat_init(dmat *x, int m, int n, int nb, int ctxt, int myr, int myc, int pr, int pc) {
  const int zero = 0;
  x->m = m;
  x->n = n;
  x->ml = numroc_(&m, &nb, &myr, &zero, &pr);
  x->nl = numroc_(&n, &nb, &myc, &zero, &pc);
  int lld = x->ml > 1 ? x->ml : 1, info = 0;
  descinit_(x->desc, &m, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
  x->a = la_malloc(sizeof(double) * ((size_t)lld * (x->nl > 0 ? x->nl : 1)));
  return info == 0 && x->a != NULL;
}

/* Local part of the global [N, d] tensor t, one row block at a time through io->fill. */
static void dmat_fill(dmat *x, int t, int nb, int myr, int myc, int pr, int pc,
                      const la_pblas_io *io, double *rows) {
  const int lld = x->ml > 1 ? x->ml : 1;
  for (int l0 = 0; l0 < x->ml; l0 += nb) {
    int64_t g0 = g_index(l0, nb, myr, pr);
    int cnt = x->ml - l0 < nb ? x->ml - l0 : nb;
    io->fill(io->ctx, t, g0, cnt, rows);
    for (int lc = 0; lc < x->nl; lc++) {
      int64_t gc = g_index(lc, nb, myc, pc);
      for (int i = 0; i < cnt; i++) x->a[(size_t)lc * lld + l0 + i] = rows[(size_t)i * x->n + gc];
    }
  }
}

la_status la_pblas_attention(MPI_Comm comm, int64_t n64, int dk, int dv, double scale,
                             la_mode mode, int nb, int64_t panel_rows, int threads,
                             const la_pblas_io *io, double *seconds) {
  *seconds = 0;
  if (n64 < 1 || n64 > INT_MAX / 2 || dk < 1 || dv < 1 || nb < 1 || !(scale > 0)) {
    return la_error(LA_ERR_ARG, "pblas baseline: n = %lld must be in [1, 2^30]", (long long)n64);
  }
  const int N = (int)n64, causal = mode == LA_CAUSAL, one = 1;
  const double done = 1.0, dzero = 0.0;
  int P, me, np;
  MPI_Comm_size(comm, &P);
  int pc = 1;
  for (int c = 1; (int64_t)c * c <= P; c++)
    if (P % c == 0) pc = c;
  const int pr = P / pc;
  Cblacs_pinfo(&me, &np);
  int sys = Csys2blacs_handle(comm), ctxt = sys, myr, myc, npr, npc;
  Cblacs_gridinit(&ctxt, "Row", pr, pc);
  Cblacs_gridinfo(ctxt, &npr, &npc, &myr, &myc);
  MPI_Comm rowc = MPI_COMM_NULL; /* the processes of this process row */
  MPI_Comm_split(comm, myr, myc, &rowc);
  /* Panel rows: a multiple of nb*pr, so panel row i and Q/O row ia+i share a process row. */
  const int64_t unit = (int64_t)nb * pr;
  int64_t R = (N + unit - 1) / unit * unit, cap = LA_PBLAS_PANEL_ENTRIES / N / unit * unit;
  if (panel_rows > 0) cap = (panel_rows + unit - 1) / unit * unit;
  if (cap < unit) cap = unit;
  if (R > cap) R = cap;
  dmat Q = {0}, K = {0}, V = {0}, O = {0}, S = {0};
  int ok = dmat_init(&Q, N, dk, nb, ctxt, myr, myc, pr, pc) &&
           dmat_init(&K, N, dk, nb, ctxt, myr, myc, pr, pc) &&
           dmat_init(&V, N, dv, nb, ctxt, myr, myc, pr, pc) &&
           dmat_init(&O, N, dv, nb, ctxt, myr, myc, pr, pc) &&
           dmat_init(&S, (int)R, N, nb, ctxt, myr, myc, pr, pc);
  double *rows = la_malloc(sizeof(double) * (size_t)nb * (dk > dv ? dk : dv));
  double *rmax = la_malloc(sizeof(double) * (S.ml > 0 ? S.ml : 1));
  double *rsum = la_malloc(sizeof(double) * (S.ml > 0 ? S.ml : 1));
  int64_t *gcol = la_malloc(sizeof(int64_t) * (S.nl > 0 ? S.nl : 1));
  int64_t *prow = la_malloc(sizeof(int64_t) * (S.ml > 0 ? S.ml : 1));
  ok = ok && rows && rmax && rsum && gcol && prow;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  la_status st = LA_OK;
  if (!all_ok) {
    st = la_error(LA_ERR_NOMEM, "pblas baseline: out of memory for the %lld x %lld score panel (lower "
                  "--baseline-max-n)", (long long)R, (long long)N);
    goto done;
  }
  dmat_fill(&Q, 0, nb, myr, myc, pr, pc, io, rows);
  dmat_fill(&K, 1, nb, myr, myc, pr, pc, io, rows);
  dmat_fill(&V, 2, nb, myr, myc, pr, pc, io, rows);
  for (int lj = 0; lj < S.nl; lj++) gcol[lj] = g_index(lj, nb, myc, pc);
  for (int li = 0; li < S.ml; li++) prow[li] = g_index(li, nb, myr, pr);
  /* Touch the panel before the clock starts: a dense code reuses its score buffer. */
  memset(S.a, 0, sizeof(double) * (size_t)(S.ml > 1 ? S.ml : 1) * (S.nl > 0 ? S.nl : 1));
  la_blas_set_threads(threads > 0 ? threads : 1);
  const int sl = S.ml > 1 ? S.ml : 1, ol = O.ml > 1 ? O.ml : 1;
  MPI_Barrier(comm);
  double t0 = MPI_Wtime();
  for (int64_t ia = 0; ia < N; ia += R) {
    const int m = (int)(N - ia < R ? N - ia : R), ia1 = (int)ia + 1;
    pdgemm_("N", "T", &m, &N, &dk, &scale, Q.a, &ia1, &one, Q.desc, K.a, &one, &one, K.desc,
            &dzero, S.a, &one, &one, S.desc);
    /* Mask (causal: key j > query i) and the local row max, then (after the max over the
     * process row) P = exp(S - max) and the local row sums. S is column-major: threads take
     * tiles of rows and sweep the columns, so the inner loop is contiguous. */
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (int t0 = 0; t0 < S.ml; t0 += LA_PBLAS_TILE) {
      const int t1 = S.ml - t0 < LA_PBLAS_TILE ? S.ml : t0 + LA_PBLAS_TILE;
      for (int li = t0; li < t1; li++) rmax[li] = -INFINITY;
      for (int lj = 0; lj < S.nl; lj++) {
        double *s = S.a + (size_t)lj * sl;
        for (int li = t0; li < t1; li++) {
          if (causal && gcol[lj] > ia + prow[li]) s[li] = -INFINITY;
          rmax[li] = s[li] > rmax[li] ? s[li] : rmax[li];
        }
      }
      for (int li = t0; li < t1; li++) /* rows past this panel: any finite value */
        if (prow[li] >= m) rmax[li] = 0.0;
    }
    /* the row max over the process row: MPI_MAX, not BLACS's Cdgamx2d, which takes the entry
     * of largest ABSOLUTE value (a process without columns contributes -inf, which won) */
    if (S.ml > 0) MPI_Allreduce(MPI_IN_PLACE, rmax, S.ml, MPI_DOUBLE, MPI_MAX, rowc);
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (int t0 = 0; t0 < S.ml; t0 += LA_PBLAS_TILE) {
      const int t1 = S.ml - t0 < LA_PBLAS_TILE ? S.ml : t0 + LA_PBLAS_TILE;
      for (int li = t0; li < t1; li++) rsum[li] = 0.0;
      for (int lj = 0; lj < S.nl; lj++) {
        double *s = S.a + (size_t)lj * sl;
        for (int li = t0; li < t1; li++) {
          s[li] = exp(s[li] - rmax[li]); /* exp(-inf) = 0 for masked entries */
          rsum[li] += s[li];
        }
      }
    }
    if (S.ml > 0) Cdgsum2d(ctxt, "Row", " ", S.ml, 1, rsum, S.ml, -1, -1);
    pdgemm_("N", "N", &m, &dv, &N, &done, S.a, &one, &one, S.desc, V.a, &one, &one, V.desc,
            &dzero, O.a, &ia1, &one, O.desc);
    /* O rows of this panel /= row sums; panel-local row = O-local row - offset (aligned). */
    const int64_t off = ia / unit * nb;
    for (int lo = 0; lo < O.ml; lo++) {
      int64_t gi = g_index(lo, nb, myr, pr);
      if (gi < ia || gi >= ia + m) continue;
      const double inv = 1.0 / rsum[lo - off];
      for (int lc = 0; lc < O.nl; lc++) O.a[(size_t)lc * ol + lo] *= inv;
    }
  }
  double t = MPI_Wtime() - t0;
  MPI_Allreduce(&t, seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  la_blas_set_threads(1);
  if (io->emit)
    for (int l0 = 0; l0 < O.ml; l0 += nb)
      for (int c0 = 0; c0 < O.nl; c0 += nb)
        io->emit(io->ctx, g_index(l0, nb, myr, pr), O.ml - l0 < nb ? O.ml - l0 : nb,
                 g_index(c0, nb, myc, pc), O.nl - c0 < nb ? O.nl - c0 : nb,
                 O.a + (size_t)c0 * ol + l0, ol);
done:
  free(Q.a); free(K.a); free(V.a); free(O.a); free(S.a);
  free(rows); free(rmax); free(rsum); free(gcol); free(prow);
  MPI_Comm_free(&rowc);
  Cblacs_gridexit(ctxt);
  Cfree_blacs_system_handle(sys);
  return st;
}
