/* The GEMMs of the chunk kernels (chunk_impl.h, window_impl.h, backward_impl.h),
 * docs/design.md §4.2. float32 runs on the engine's kernel table's GEMM when it has one (simd.h)
 * (alpha = 1, beta in {0, 1}, row-major; op(B) = B^T is first transposed into the thread's
 * workspace, sized at engine creation), otherwise on OpenBLAS. float64 runs the same way on
 * the table's gemm_f64 where it has one (the avx2 table: §5.5 "float64 products"), otherwise
 * on OpenBLAS, with op(B) = B^T transposed the same way: OpenBLAS 0.3.21 runs these small row-major NN
 * products on its small-matrix kernels but packs both operands of an NT one (18 % of the
 * float64 causal time, measured). The float64 transposes are the table's transpose_f64 where
 * there is a table (a scalar loop took 6.9 % of the avx2 float64 causal time). */
#include "engine_internal.h"

void la_gemm_f32(const la_engine e, la_work *w, CBLAS_LAYOUT lay, CBLAS_TRANSPOSE ta,
                 CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
  const la_simd *k = e->simd;
  if (k && lay == CblasRowMajor && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
    const float *Bp = B;
    ptrdiff_t ldbp = ldb;
    if (tb == CblasTrans && M > 0 && N > 0 && K > 0) {
      if ((size_t)K * N > w->tb_cap) goto blas; /* not reached: tb_cap covers every call */
      k->transpose(N, K, B, ldb, w->tb, N);
      Bp = w->tb;
      ldbp = N;
    }
    k->gemm(M, N, K, A, ta == CblasNoTrans ? lda : 1, ta == CblasNoTrans ? 1 : lda, Bp,
            ldbp, C, ldc, beta == 1.0f, 0);
    return;
  }
blas:
  cblas_sgemm(lay, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void la_gemm_f64(const la_engine e, la_work *w, CBLAS_LAYOUT lay, CBLAS_TRANSPOSE ta,
                 CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double *A,
                 int lda, const double *B, int ldb, double beta, double *C, int ldc) {
  const la_simd *k = e->fm->simd; /* float64 engines: the maps' table */
  if (k && k->gemm_f64 && lay == CblasRowMajor && alpha == 1.0 && (beta == 0.0 || beta == 1.0) &&
      (tb == CblasNoTrans || (size_t)K * N <= w->tb_cap)) {
    const double *Bp = B;
    ptrdiff_t ldbp = ldb;
    if (tb == CblasTrans && M > 0 && N > 0 && K > 0) { /* B is N x K: its transpose K x N */
      k->transpose_f64(N, K, B, ldb, w->tb, N);
      Bp = w->tb;
      ldbp = N;
    }
    k->gemm_f64(M, N, K, A, ta == CblasNoTrans ? lda : 1, ta == CblasNoTrans ? 1 : lda, Bp,
                ldbp, C, ldc, beta == 1.0, 0);
    return;
  }
  if (lay == CblasRowMajor && tb == CblasTrans && M > 0 && N > 0 && K > 0 &&
      (size_t)K * N <= w->tb_cap) { /* B is N x K: its transpose K x N, row-major, ld N */
    double *t = w->tb;
    if (k)
      k->transpose_f64(N, K, B, ldb, t, N);
    else
      for (int i = 0; i < N; i++)
        for (int j = 0; j < K; j++) t[(size_t)j * N + i] = B[(size_t)i * ldb + j];
    cblas_dgemm(lay, ta, CblasNoTrans, M, N, K, alpha, A, lda, t, N, beta, C, ldc);
    return;
  }
  cblas_dgemm(lay, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
