/* GFLOP/s of the AVX2 + FMA GEMM (core/simd/kern256.c) against OpenBLAS's cblas_sgemm and, where the
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
#include "../core/simd/kern256.h"
#include "../core/simd/simd_compose.h"
#include "../core/simd/kern512.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { K256, BLAS, K512 };

static int ldpad; /* B and C rows of N + ldpad floats (1: the engine's [S|z] and [o|den], dv + 1) */

static void run(int which, int M, int N, int K, const float *A, const float *B, float *C, int tri) {
  const int ld = N + ldpad;
  if (which == K256) la_k256_gemm(M, N, K, A, K, 1, B, ld, C, ld, 0, tri);
  else if (which == K512) la_k512_gemm(M, N, K, A, K, 1, B, ld, C, ld, 0, tri);
  else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, ld, 0.0f, C, ld);
}

/* One chunk kernel (kk) on the AVX2 (isa 0) or AVX-512 (isa 1) table at len = C = r = dv = 64:
 * operands carved from the bench's buffers (X, Y inputs; Z, W outputs and scratch). */
static void chunk_call(int kk, int isa, const float *X, const float *Y, float *Z, float *W) {
  enum { L = 64, R = 64, D = 64, D1 = 65 };
  const float *pq = X, *pk = X + L * R, *V = Y, *sf = Y + L * D, *ab = Y + 2 * L * D1;
  float *o = Z, *tmp = Z + L * D1, *kT = Z + 2 * L * D1, *Asc = W, *zf = W + L * L;
  float *tb = W + 2 * L * L, *dv = Z + 4 * L * D1;
  switch (kk) {
  case 0:
    if (isa) la_k512_gemm(L, L, R, pq, R, 1, pk, L, Asc, L, 0, 2);
    else la_k256_gemm(L, L, R, pq, R, 1, pk, L, Asc, L, 0, 2);
    break;
  case 1:
    if (isa) la_simd_causal_chunk(&la_simd_avx512, L, R, D, pq, pk, V, D, sf, o, tmp, kT, Asc, zf, L);
    else la_simd_causal_chunk(&la_simd_avx2, L, R, D, pq, pk, V, D, sf, o, tmp, kT, Asc, zf, L);
    break;
  case 2:
    if (isa) la_simd_key_summary(&la_simd_avx512, L, R, D, pk, V, D, tmp);
    else la_simd_key_summary(&la_simd_avx2, L, R, D, pk, V, D, tmp);
    break;
  case 3:
    if (isa) la_simd_bwd_dq(&la_simd_avx512, L, R, D, ab, sf, pk, V, D, o, Asc, tb, L, 1);
    else la_simd_bwd_dq(&la_simd_avx2, L, R, D, ab, sf, pk, V, D, o, Asc, tb, L, 1);
    break;
  default:
    if (isa) la_simd_bwd_reverse(&la_simd_avx512, L, R, D, ab, pq, pk, ab, sf, o, dv, D, tmp, Asc, kT, tb, L, 1);
    else la_simd_bwd_reverse(&la_simd_avx2, L, R, D, ab, pq, pk, ab, sf, o, dv, D, tmp, Asc, kT, tb, L, 1);
    break;
  }
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
  const int shapes[][4] = {{64, 64, 64, 0}, {64, 64, 128, 0}, {256, 256, 256, 0},
                           {128, 128, 128, 0}, {64, 65, 64, 0}, {100, 64, 64, 0}, {64, 64, 64, 1}};
  const int ns = (int)(sizeof shapes / sizeof shapes[0]);
  /* 64-byte aligned, as the engine's row buffers (la_aligned_alloc) */
  float *A = aligned_alloc(64, sizeof(float) * 256 * 256), *B = aligned_alloc(64, sizeof(float) * 256 * 256);
  float *C = aligned_alloc(64, sizeof(float) * 256 * 256), *R = aligned_alloc(64, sizeof(float) * 256 * 256);
  for (int i = 0; i < 256 * 256; i++) A[i] = (float)((i * 37 % 101) - 50) / 50, B[i] = (float)((i * 53 % 97) - 48) / 48;
  printf("openblas core %s; single thread; GFLOP/s (best of 300 rounds of 0.5 ms)\n", openblas_get_corename());
  printf("%-16s %10s %10s %10s %9s\n", "M x N x K", "la_k256", "openblas", "la_k512", "k256/blas");
  int bad = 0;
  for (const double t0 = now(); now() - t0 < 0.2;) /* the clock up before the first row */
    run(K256, 64, 64, 64, A, B, C, 0);
  for (int s = 0; s < ns; s++) {
    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    ldpad = shapes[s][3];
    /* sanity: the same product as OpenBLAS to float32 accuracy */
    run(BLAS, M, N, K, A, B, R, 0);
    run(K256, M, N, K, A, B, C, 0);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++)
        if (!(fabsf(C[i * (N + ldpad) + j] - R[i * (N + ldpad) + j]) <= 1e-4f * (float)K)) bad = 1;
    const double g256 = rate(K256, M, N, K, A, B, C), gb = rate(BLAS, M, N, K, A, B, C);
    const double g512 = k512 ? rate(K512, M, N, K, A, B, C) : NAN;
    char name[48];
    snprintf(name, sizeof name, "%dx%dx%d%s", M, N, K, ldpad ? " ld+1" : "");
    printf("%-16s %10.1f %10.1f %10.1f %9.2f\n", name, g256, gb, g512, g256 / gb);
  }
  /* the chunk kernels at the engine's shape (len = C = 64, r = dv = 64), microseconds a call */
  printf("\n%-30s %10s %10s\n", "chunk kernel (len=C=r=dv=64)", "k256 us", "k512 us");
  for (int kk = 0; kk < 5; kk++) {
    static const char *names[] = {"gemm tri=2 (tril Phi_q Phi_k^T)", "causal_chunk (with state)",
                                  "key_summary", "bwd_dq (causal, state)", "bwd_reverse (causal)"};
    double us[2] = {NAN, NAN};
    for (int isa = 0; isa < 2 && (isa == 0 || k512); isa++) {
      double best = INFINITY;
      for (int round = 0; round < 300; round++) {
        long reps = 0;
        const double t0 = now();
        double t;
        do {
          chunk_call(kk, isa, A, B, C, R);
          reps++;
          t = now() - t0;
        } while (t < 0.5e-3);
        if (t / (double)reps < best) best = t / (double)reps;
      }
      us[isa] = best * 1e6;
    }
    printf("%-30s %10.2f %10.2f\n", names[kk], us[0], us[1]);
  }
  free(A), free(B), free(C), free(R);
  if (bad) fprintf(stderr, "bench_kern256: la_k256_gemm differs from cblas_sgemm\n");
  return bad;
}
