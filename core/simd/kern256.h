/* AVX2 + FMA float32 chunk kernels (kern256.c): the GEMM and the chunk products' primitives of
 * the la_simd table (simd.h) for CPUs without AVX-512, docs/design.md §4.2, §4.4, §5.5
 * "Kernels per instruction set"; the products composed of them are simd_compose.c's, shared
 * with every table. Every function computes what its la_k512_ namesake (kern512.h) documents,
 * with the same signature; the maps and elementwise entries of the table are in
 * kern256_maps.c. The register tile is 6 rows x 16 columns (two ymm), so "tile"
 * below means the same 6-row tile as kern512's, and tri has the same meaning. */
#ifndef LINATTN_KERN256_H
#define LINATTN_KERN256_H
#include <stddef.h>
#include "simd.h"

/* kern256_cpu.c (compiled without AVX flags): this build has the kernels (x86_64) and the CPU
 * reports AVX2 and FMA. Nothing below may be called when it returns 0. */
int la_k256_available(void);
/* C[M x N] = (acc ? C : 0) + A B, row-major B and C; A(i, k) = A[i*ars + k*acs].
 * tri = 1: row i only reads A(i, k) for k < min(its 6-row tile's end, K) -- A lower triangular;
 * tri = 2: only columns j < (its 6-row tile's end) are written -- for a lower result;
 * tri = 3: row i only reads A(i, k) for k >= (its 6-row tile's start) -- A upper triangular.
 * (Row tiles start at rows 0, 6, 12, ...; the last one may be shorter.) */
void la_k256_gemm(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                  const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, int tri);
/* dst[j][i] = src[i][j], i < rows, j < cols. */
void la_k256_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst,
                       ptrdiff_t ldd);
/* The same GEMM in float64 (kern256_f64.c): a 6 x 8 register tile, the same 6-row tiles and
 * tri rules. */
void la_k256_gemm_f64(int M, int N, int K, const double *A, ptrdiff_t ars, ptrdiff_t acs,
                      const double *B, ptrdiff_t ldb, double *C, ptrdiff_t ldc, int acc,
                      int tri);
/* dst[j][i] = src[i][j] in float64 (kern256_f64.c), 4 x 4 blocks. */
void la_k256_transpose_f64(int rows, int cols, const double *src, ptrdiff_t lds, double *dst,
                           ptrdiff_t ldd);
/* The den column of a chunk (simd.h's den_column), 8 rows at a time. */
void la_k256_den_column(int len, const float *A, ptrdiff_t lda, const float *phiq, int r,
                        const float *zf, float *out, ptrdiff_t ldo);
/* Weighted column sums (simd.h's colsum), 8 features per register. */
void la_k256_colsum(int len, int r, const float *phi, const float *w, ptrdiff_t ldw, float *out,
                    ptrdiff_t ldo);
#endif
