/* GFLOP/s of the AVX2 + FMA GEMM (core/kern256.c) against OpenBLAS's cblas_sgemm and, where the
 * CPU has AVX-512, la_k512_gemm: single thread, operands in cache, row-major C = A B at the
 * chunk products' shapes (docs/design.md §4.2). Best of 300 rounds of >= 0.5 ms each (the
 * machine may be shared: the best round is the uninterrupted one).
 *   ./build/bench_kern256                          OpenBLAS's own choice of core
 *   OPENBLAS_CORETYPE=Haswell ./build/bench_kern256   the fair AVX2 comparison on an AVX-512 CPU
 * Exit 77 where la_k256_available() is 0. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../core/kern256.h"
#include "../core/kern512.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { K256, BLAS, K512 };

static void run(int which, int M, int N, int K, const float *A, const float *B, float *C, int tri) {
  if (which == K256) la_k256_gemm(M, N, K, A, K, 1, B, N, C, N, 0, tri);
  else if (which == K512) la_k512_gemm(M, N, K, A, K, 1, B, N, C, N, 0, tri);
  else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

/* best GFLOP/s (2 M N K flops a call) */
static double rate(int which, int M, int N, int K, const float *A, const float *B, float *C) {
  const double flops = 2.0 * M * N * K;
  double best = 0;
  for (int w = 0; w < 3; w++) run(which, M, N, K, A, B, C, 0);
  /* short rounds: on a shared machine the best one is the one no other process interrupted */
  for (int round = 0; round < 300; round++) {
    long reps = 0;
    const double t0 = now();
    double t;
    do {
      run(which, M, N, K, A, B, C, 0);
      reps++;
      t = now() - t0;
    } while (t < 0.5e-3);
    const double g = flops * (double)reps / t * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

int main(void) {
  if (!la_k256_available()) {
    printf("bench_kern256: no AVX2 + FMA on this CPU or build: skipped\n");
    return 77;
  }
  openblas_set_num_threads(1);
  const int k512 = la_k512_available();
  const int shapes[][3] = {{64, 64, 64}, {64, 64, 128}, {256, 256, 256}, {128, 128, 128},
                           {64, 65, 64}, {100, 64, 64}};
  const int ns = (int)(sizeof shapes / sizeof shapes[0]);
  /* 64-byte aligned, as the engine's row buffers (la_aligned_alloc) */
  float *A = aligned_alloc(64, sizeof(float) * 256 * 256), *B = aligned_alloc(64, sizeof(float) * 256 * 256);
  float *C = aligned_alloc(64, sizeof(float) * 256 * 256), *R = aligned_alloc(64, sizeof(float) * 256 * 256);
  for (int i = 0; i < 256 * 256; i++) A[i] = (float)((i * 37 % 101) - 50) / 50, B[i] = (float)((i * 53 % 97) - 48) / 48;
  printf("openblas core %s; single thread; GFLOP/s (best of 300 rounds of 0.5 ms)\n", openblas_get_corename());
  printf("%-14s %10s %10s %10s %9s\n", "M x N x K", "la_k256", "openblas", "la_k512", "k256/blas");
  int bad = 0;
  for (int s = 0; s < ns; s++) {
    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    /* sanity: the same product as OpenBLAS to float32 accuracy */
    run(BLAS, M, N, K, A, B, R, 0);
    run(K256, M, N, K, A, B, C, 0);
    for (int i = 0; i < M * N; i++)
      if (!(fabsf(C[i] - R[i]) <= 1e-4f * (float)K)) bad = 1;
    const double g256 = rate(K256, M, N, K, A, B, C), gb = rate(BLAS, M, N, K, A, B, C);
    const double g512 = k512 ? rate(K512, M, N, K, A, B, C) : NAN;
    char name[32];
    snprintf(name, sizeof name, "%dx%dx%d", M, N, K);
    printf("%-14s %10.1f %10.1f %10.1f %9.2f\n", name, g256, gb, g512, g256 / gb);
  }
  free(A), free(B), free(C), free(R);
  if (bad) fprintf(stderr, "bench_kern256: la_k256_gemm differs from cblas_sgemm\n");
  return bad;
}
