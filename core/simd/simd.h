/* The kernels of one instruction set, registered in a table as BLIS registers its
 * micro-kernels in a context (docs/design.md §5.5 "Kernels per instruction set"). The engine
 * picks one table when it is created (la_simd_choose, simd_cpu.c), from what the CPU reports
 * or from --kernels; NULL means the generic C templates with OpenBLAS for the products. Every
 * entry computes what the generic template beside its call computes, and every entry of a
 * table but gemm_f64 is set (tests/test_simd.c checks it). Adding an instruction set means adding a table,
 * not editing the templates (chunk_impl.h, backward_impl.h, maps.c, gemm.c).
 *
 * Conventions shared by every table (the AVX-512 one, kern512.c, documents them in full):
 * row-major float32 unless the name says f64; a GEMM's A(i, k) = A[i ars + k acs]; tri as in
 * gemm below; sf = [S | z] is r x (dv+1) in float32 (NULL: a zero state). */
#ifndef LINATTN_SIMD_H
#define LINATTN_SIMD_H
#include <stddef.h>
#include <stdint.h>
#include "linattn/core.h"

/* Up to two row streams to prefetch while a loop runs over rows: row i of stream s is
 * bytes[s] at p[s] + i * ld[s] (bytes), for i < rows; p[s] NULL: unused. */
typedef struct {
  const char *p[2];
  ptrdiff_t ld[2];
  int bytes[2];
  int rows;
} la_simd_pf;

typedef struct la_simd_s {
  const char *name; /* "avx512", "avx2": the report's "kernels" */
  /* C[M x N] = (acc ? C : 0) + A B, row-major B and C; A(i, k) = A[i*ars + k*acs].
   * tri = 1: row i only reads A(i, k) for k < (its 6-row tile's end) -- A lower triangular;
   * tri = 2: only columns j < (its 6-row tile's end) are written -- for a lower result;
   * tri = 3: row i only reads A(i, k) for k >= (its 6-row tile's start) -- A upper. */
  void (*gemm)(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
               const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri);
  void (*transpose)(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                    ptrdiff_t ldd);
  /* gemm in float64 (the float64 engine's chunk products, core/engine/gemm.c): the only entry that
   * may be NULL, where OpenBLAS's small DGEMM is the faster (measured: docs/design.md §5.5
   * "float64 products"); then the float64 products stay on OpenBLAS. */
  void (*gemm_f64)(int M, int N, int K, const double *A, ptrdiff_t ars, ptrdiff_t acs,
                   const double *B, ptrdiff_t ldb, double *C, ptrdiff_t ldc, int acc, int tri);
  /* transpose in float64 (la_gemm_f64's op(B) = B^T, on either path: the table's gemm_f64 or
   * OpenBLAS's NN product) */
  void (*transpose_f64)(int rows, int cols, const double *src, ptrdiff_t lds, double *dst,
                        ptrdiff_t ldd);
  /* the chunk products' own reductions; the products themselves are composed of these and
   * gemm / transpose once for every table (simd_compose.h, docs/design.md §5.5):
   * den_column: out[i ldo] = sum_{j <= i} A[i][j] (A lower triangular, ld lda, read up to
   *   j = i; NULL: none) + phiq_i . zf (phiq rows of r; zf NULL: none), i < len;
   * colsum: out[i ldo] = sum_{k < len} w[k ldw] phi[k r + i] in k order, i < r (w NULL: the
   *   plain column sums). */
  void (*den_column)(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                     const float *zf, float *out, ptrdiff_t ldo);
  void (*colsum)(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                 ptrdiff_t ldo);
  /* the maps' vector forms (maps.c registers them per map) */
  void (*elu1)(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r,
               const la_simd_pf *pf);
  void (*elu1_f64)(int64_t n, int dk, const double *x, int64_t ld, double *phi, int r,
                   const la_simd_pf *pf);
  void (*favor_post)(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi, int r,
                     double s, double *a, int hyp, const la_simd_pf *pf);
  void (*favor_post_f64)(int64_t n, int m, int dk, const double *x, int64_t ld, double *phi,
                         int r, double s, double *a, int hyp, const la_simd_pf *pf);
  void (*taylor2)(int64_t n, int dk, const float *x, int64_t ld, float *phi, int r, float rs);
  /* state updates, row scalings, the denominator's common case, prefetch */
  void (*add_to_f64)(size_t n, double *dst, const float *src);
  void (*add_round)(size_t n, double *dst, const float *src, const double *base, float *f);
  void (*to_f32)(size_t n, const double *src, float *dst);
  void (*sum_to_f32)(size_t n, const double *a, const double *b, float *dst);
  void (*scale_row)(int n, const float *o, double f, float *y);
  void (*mul_f32)(size_t n, float *x, float f);
  double (*dot_f64)(int n, const float *a, const float *b);
  /* y[i] = e^{x[i]} for x[i] <= 0 (0 below -708.39...; within 2 ulp of libm's exp): the
   * per-feature gates' factors (engine/gla_impl.h) */
  void (*exp_f64)(size_t n, const double *x, double *y);
  int (*finalize_plain)(int len, int dv, const float *o, const double *lsc, float *y,
                        ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                        double *mx);
  int (*finalize_plain_f64)(int len, int dv, const double *o, const double *lsc, double *y,
                            ptrdiff_t ldy, const double t16[16], int32_t *bin, double *mn,
                            double *mx);
  void (*prefetch)(const void *base, int rows, ptrdiff_t ld_bytes, int bytes);
  /* per-feature gates folded into a chunk's rows (docs/design.md §1.2 "Kernels"), len rows
   * of r: q[i,f] *= qs[i] E[i,f] and k[i,f] *= ks[i] / E[i,f], each product in float64,
   * rounded once; q NULL: the keys alone (qs unread) */
  void (*gate_fold)(int len, int r, float *q, float *k, const double *E, const double *qs,
                    const double *ks);
} la_simd;

/* The tables (simd_tables.c); each ISA's kernels are built in their own files. */
extern const la_simd la_simd_avx512; /* kern512.c */
extern const la_simd la_simd_avx2;   /* kern256.c, kern256_maps.c */

/* *out = the table for choice (LINATTN_KERNELS overrides it; simd_cpu.c), or NULL for the
 * generic C templates with OpenBLAS (blas, generic, or auto on a CPU without a table).
 * LA_ERR_UNSUPPORTED with its reason for an instruction set the CPU or the build lacks. */
la_status la_simd_choose(la_kernel_choice choice, const la_simd **out);
#endif
