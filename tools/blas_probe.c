/* blas_probe: is this OpenBLAS core correct here, and how fast? (docs/design.md §4.9)
 * jobs/blas_core.sh runs it once per candidate OPENBLAS_CORETYPE and keeps the fastest
 * correct one. It prints one line:
 *   core=<openblas_get_corename()> ok=<0|1> sgemm=<GFLOP/s> dgemm=<GFLOP/s> err=<worst>
 * Correctness: sgemm and dgemm on odd shapes, every transposition, alpha and beta not 0 or 1,
 * against a plain float64 loop; each entry within 2 gamma_(K+2) (|alpha| |A| |B| + |beta| |C|)
 * (gamma_n = n u / (1 - n u), u the unit roundoff of the precision; "err" is the worst ratio
 * to that bound, a NaN counts as wrong). Speed: the best of 5 products of the two shapes
 * linattn leans on, square 1024 and a tall-skinny 4096 x 512 x 1024, one thread; the figure
 * is the smaller of the two rates. A core that crashes kills only this process, which the
 * script treats as wrong. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static unsigned long long rs = 0x9E3779B97F4A7C15ULL;
static double urand(void) { /* xorshift64*, uniform in [-1, 1) */
  rs ^= rs >> 12, rs ^= rs << 25, rs ^= rs >> 27;
  return (double)((rs * 2685821657736338717ULL) >> 11) * 0x1.0p-52 - 1.0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Worst |got - ref| / bound over C = alpha op(A) op(B) + beta C0 (row-major M x N), or
 * INFINITY when out of memory; a NaN anywhere gives NaN. */
static double check(int sgl, int ta, int tb, int M, int N, int K) {
  const double alpha = 0.75, beta = -0.5, u = sgl ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
  const double gam = (K + 2) * u / (1 - (K + 2) * u);
  const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  double *A = malloc(sizeof(double) * na), *B = malloc(sizeof(double) * nb);
  double *C0 = malloc(sizeof(double) * nc), *C = malloc(sizeof(double) * nc);
  float *Af = malloc(sizeof(float) * na), *Bf = malloc(sizeof(float) * nb);
  float *Cf = malloc(sizeof(float) * nc);
  double worst = INFINITY;
  if (A && B && C0 && C && Af && Bf && Cf) {
    /* float data is exactly representable in both precisions */
    for (size_t i = 0; i < na; i++) Af[i] = (float)urand(), A[i] = sgl ? Af[i] : urand();
    for (size_t i = 0; i < nb; i++) Bf[i] = (float)urand(), B[i] = sgl ? Bf[i] : urand();
    for (size_t i = 0; i < nc; i++) Cf[i] = (float)urand(), C0[i] = C[i] = sgl ? Cf[i] : urand();
    /* op(A) is M x K, stored K x M when transposed; op(B) is K x N, stored N x K */
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const enum CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
    if (sgl) cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, (float)alpha, Af, lda, Bf, ldb, (float)beta, Cf, N);
    else cblas_dgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    worst = 0;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double acc = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          const double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
          const double b = tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
          acc += a * b, mag += fabs(a * b);
        }
        const size_t ij = (size_t)i * N + j;
        const double ref = alpha * acc + beta * C0[ij];
        const double got = sgl ? (double)Cf[ij] : C[ij];
        const double bound = 2 * gam * (fabs(alpha) * mag + fabs(beta * C0[ij])) + DBL_MIN;
        const double e = fabs(got - ref) / bound;
        if (!(e <= worst)) worst = e; /* NaN propagates */
      }
  }
  free(A), free(B), free(C0), free(C), free(Af), free(Bf), free(Cf);
  return worst;
}

/* Best GFLOP/s of 5 row-major products C = A B^T (M x K by N x K), one thread. */
static double rate(int sgl, int M, int N, int K) {
  const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
  const size_t es = sgl ? sizeof(float) : sizeof(double);
  void *A = malloc(es * na), *B = malloc(es * nb), *C = calloc(nc, es);
  double best = 0;
  if (A && B && C) {
    for (size_t i = 0; i < na; i++)
      if (sgl) ((float *)A)[i] = (float)urand(); else ((double *)A)[i] = urand();
    for (size_t i = 0; i < nb; i++)
      if (sgl) ((float *)B)[i] = (float)urand(); else ((double *)B)[i] = urand();
    for (int rep = 0; rep < 6; rep++) { /* the first is a warm-up */
      const double t0 = now();
      if (sgl) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
      else cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0, A, K, B, K, 0.0, C, N);
      const double g = 2.0 * M * N * K / (now() - t0) * 1e-9;
      if (rep > 0 && g > best) best = g;
    }
  }
  free(A), free(B), free(C);
  return best;
}

int main(int argc, char **argv) {
  openblas_set_num_threads(1);
  const int quick = argc > 1 && strcmp(argv[1], "--check-only") == 0;
  static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {37, 29, 65}, {130, 67, 257}, {64, 300, 1024}};
  double err = 0;
  for (int sgl = 0; sgl < 2; sgl++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++) {
        const double e = check(sgl, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2]);
        if (!(e <= err)) err = e;
      }
  const int ok = err <= 1.0;
  double sg = 0, dg = 0;
  if (ok && !quick) {
    const double s1 = rate(1, 1024, 1024, 1024), s2 = rate(1, 4096, 512, 1024);
    const double d1 = rate(0, 1024, 1024, 1024), d2 = rate(0, 4096, 512, 1024);
    sg = s1 < s2 ? s1 : s2, dg = d1 < d2 ? d1 : d2;
  }
  printf("core=%s ok=%d sgemm=%.1f dgemm=%.1f err=%.3g\n", openblas_get_corename(), ok, sg, dg, err);
  return ok ? 0 : 1;
}
