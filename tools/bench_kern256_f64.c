/* GFLOP/s of the AVX2 + FMA float64 GEMM (core/simd/kern256_f64.c, la_k256_gemm_f64) against
 * OpenBLAS's cblas_dgemm, single thread, operands in cache, at the shapes the float64 chunk
 * templates issue (docs/design.md §4.2; core/engine/chunk_impl.h, backward_impl.h through
 * core/engine/gemm.c's la_gemm_f64): the chunk C = 48 (the tuned chunk for r <= 128), r = 64,
 * dv + 1 = 65, the triangle's three 16-row blocks (tril_product), and the key summary's
 * transposed A; then the whole sequence of one causal chunk's products. Best of 200 rounds of
 * >= 0.5 ms each (a shared machine: the best round is the uninterrupted one).
 *   OPENBLAS_CORETYPE=Haswell ./build/bench_kern256_f64   the AVX2 comparison on any x86 CPU
 * Exit 77 where la_k256_available() is 0. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../core/simd/kern256.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* one product: C[M x N] (+)= op(A) B, row-major, ldb = ldc = ld; ta: A stored K x M */
typedef struct {
  const char *name;
  int M, N, K, ld, ta, acc;
} shape;

static void run(int hand, const shape *s, const double *A, const double *B, double *C) {
  const int lda = s->ta ? s->M : s->K;
  if (hand)
    la_k256_gemm_f64(s->M, s->N, s->K, A, s->ta ? 1 : lda, s->ta ? lda : 1, B, s->ld, C, s->ld,
                     s->acc, 0);
  else
    cblas_dgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, CblasNoTrans, s->M, s->N, s->K,
                1.0, A, lda, B, s->ld, s->acc ? 1.0 : 0.0, C, s->ld);
}

/* best seconds a call of f over rounds of >= 0.5 ms */
#define BEST(res, call)                                                                       \
  do {                                                                                        \
    double best_ = INFINITY;                                                                  \
    for (int round_ = 0; round_ < 200; round_++) {                                            \
      long reps_ = 0;                                                                         \
      const double t0_ = now();                                                               \
      double t_;                                                                              \
      do {                                                                                    \
        call;                                                                                 \
        reps_++;                                                                              \
        t_ = now() - t0_;                                                                     \
      } while (t_ < 0.5e-3);                                                                  \
      if (t_ / (double)reps_ < best_) best_ = t_ / (double)reps_;                             \
    }                                                                                         \
    res = best_;                                                                              \
  } while (0)

int main(void) {
  if (!la_k256_available()) {
    printf("bench_kern256_f64: no AVX2 + FMA on this CPU or build: skipped\n");
    return 77;
  }
  openblas_set_num_threads(1);
  /* the float64 causal chunk (C = 48, r = 64, dv = 64) as chunk_impl.h issues it:
   * Phi_q (S|z); per 16-row block b of tril_product, X_b Y^T (NN after gemm.c's transpose)
   * and A_b [V|1] accumulated; the key summary Phi_k^T [V|1] (A transposed) */
  const shape sh[] = {
      {"64x64x64", 64, 64, 64, 64, 0, 0},
      {"64x65x64 (ld 65)", 64, 65, 64, 65, 0, 0},
      {"48x65x64 PhiQ S", 48, 65, 64, 65, 0, 0},
      {"16x16x64 tril b0", 16, 16, 64, 16, 0, 0},
      {"16x32x64 tril b1", 16, 32, 64, 32, 0, 0},
      {"16x48x64 tril b2", 16, 48, 64, 48, 0, 0},
      {"16x65x16 +A0 V", 16, 65, 16, 65, 0, 1},
      {"16x65x32 +A1 V", 16, 65, 32, 65, 0, 1},
      {"16x65x48 +A2 V", 16, 65, 48, 65, 0, 1},
      {"64x65x48 T PhiK^T V", 64, 65, 48, 65, 1, 0},
      {"64x65x64 T (C=64)", 64, 65, 64, 65, 1, 0},
  };
  const int ns = (int)(sizeof sh / sizeof sh[0]);
  double *A = aligned_alloc(64, sizeof(double) * 128 * 128), *B = aligned_alloc(64, sizeof(double) * 128 * 128);
  double *C = aligned_alloc(64, sizeof(double) * 128 * 128), *R = aligned_alloc(64, sizeof(double) * 128 * 128);
  for (int i = 0; i < 128 * 128; i++)
    A[i] = (double)((i * 37 % 101) - 50) / 50, B[i] = (double)((i * 53 % 97) - 48) / 48;
  printf("openblas core %s; single thread; GFLOP/s (best of 200 rounds of 0.5 ms)\n",
         openblas_get_corename());
  printf("%-22s %10s %10s %9s\n", "M x N x K", "la_k256", "openblas", "k256/blas");
  for (const double t0 = now(); now() - t0 < 0.2;) run(1, &sh[0], A, B, C); /* clock up */
  int bad = 0;
  double tseq[2] = {0, 0};
  for (int s = 0; s < ns; s++) {
    for (int i = 0; i < 128 * 128; i++) C[i] = R[i] = 0.5;
    run(0, &sh[s], A, B, R);
    run(1, &sh[s], A, B, C);
    for (int i = 0; i < sh[s].M; i++) /* sanity: OpenBLAS's product to float64 accuracy */
      for (int j = 0; j < sh[s].N; j++)
        if (!(fabs(C[i * sh[s].ld + j] - R[i * sh[s].ld + j]) <= 1e-12 * sh[s].K)) bad = 1;
    double t[2];
    for (int hand = 0; hand < 2; hand++) BEST(t[hand], run(hand, &sh[s], A, B, C));
    if (s >= 2 && s <= 9) tseq[0] += t[0], tseq[1] += t[1];
    const double fl = 2.0 * sh[s].M * sh[s].N * sh[s].K * 1e-9;
    printf("%-22s %10.1f %10.1f %9.2f\n", sh[s].name, fl / t[1], fl / t[0], t[0] / t[1]);
  }
  double ts[2];
  for (int hand = 0; hand < 2; hand++)
    BEST(ts[hand], for (int s = 2; s <= 9; s++) run(hand, &sh[s], A, B, C));
  printf("one f64 causal chunk's products (rows 3-10): %.2f us hand, %.2f us OpenBLAS (%.2fx); "
         "sum of the rows %.2f / %.2f us\n",
         ts[1] * 1e6, ts[0] * 1e6, ts[0] / ts[1], tseq[1] * 1e6, tseq[0] * 1e6);
  if (bad) printf("MISMATCH against OpenBLAS\n");
  return bad;
}
