/* bench_kern256_maps: the AVX2 + FMA maps (core/simd/kern256_maps.c) and their exp
 * (core/simd/vexp256.h) timed in cache, in ns per element, against the generic path and against
 * the AVX-512 forms (kern512.c) where the CPU has AVX-512F. docs/design.md §2 (the maps),
 * §5.5 (kernels per instruction set).
 *
 * The generic elu1 is the engine's own (la_featmap_eval with the blas kernels: maps_impl.h
 * with vexp.h, as maps.c is built); the generic exp and favor post are vexp.h's scalar
 * la_vexpf / la_vexp in the loops of maps_impl.h, compiled with maps.c's flags (this file is
 * built without -mavx2, as the engine's generic code). Each time is the best of `reps`
 * samples of a call on rows x dk (or m) elements that stay in L2. A benchmark: nothing is
 * asserted.
 *
 * usage: bench_kern256_maps [--quick] [--rows N] [--dk D] [--m M] [--reps R]
 *   defaults: N = 512, D = 64, M = 256, R = 200 (--quick: R = 5).
 * Exit 0; 77 without AVX2 + FMA; 2 on a bad option. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "linattn/linattn.h"
#include "../core/simd/kern256_maps.h"
#include "../core/simd/kern512.h"
#include "../core/simd/vexp.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include "../core/simd/vexp256.h"
/* la_exp8_nonpos / la_exp4d_nonpos alone over n elements (n a multiple of 8 / 4) */
static void exp8_run(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, la_exp8_nonpos(_mm256_loadu_ps(x + i)));
}
static void exp4d_run(size_t n, const double *x, double *y) {
  for (size_t i = 0; i < n; i += 4) _mm256_storeu_pd(y + i, la_exp4d_nonpos(_mm256_loadu_pd(x + i)));
}
#pragma GCC pop_options
#define HAVE_X86 1
#else /* never called: main returns 77 first */
static void exp8_run(size_t n, const float *x, float *y) { (void)n, (void)x, (void)y; }
static void exp4d_run(size_t n, const double *x, double *y) { (void)n, (void)x, (void)y; }
#define HAVE_X86 0
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* t = the best of reps samples of body, seconds per call */
#define BEST(t, reps, body)                          \
  do {                                               \
    t = 1e30;                                        \
    for (int r_ = 0; r_ < (reps); r_++) {            \
      const double t0_ = now();                      \
      body;                                          \
      const double t_ = now() - t0_;                 \
      if (t_ < t) t = t_;                            \
    }                                                \
  } while (0)

/* the generic loops (maps_impl.h's) on vexp.h */
static void exp_scalar(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = la_vexpf(x[i]);
}
static void exp_scalar_f64(size_t n, const double *x, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = la_vexp(x[i]);
}
static void favor_post_scalar(int64_t n, int m, int dk, const float *x, int64_t ld, float *phi,
                              double s, double *a) {
  const float c = (float)(1.0 / sqrt((double)m));
  for (int64_t i = 0; i < n; i++) {
    float *pi = phi + i * m;
    float umax = pi[0];
    for (int j = 1; j < m; j++) umax = pi[j] > umax ? pi[j] : umax;
    for (int j = 0; j < m; j++) pi[j] = c * la_vexpf(pi[j] - umax);
    double n2 = 0;
    for (int j = 0; j < dk; j++) n2 += (double)x[i * ld + j] * x[i * ld + j];
    a[i] = (double)umax - 0.5 * s * n2;
  }
}
static void favor_post_scalar_f64(int64_t n, int m, int dk, const double *x, int64_t ld,
                                  double *phi, double s, double *a) {
  const double c = 1.0 / sqrt((double)m);
  for (int64_t i = 0; i < n; i++) {
    double *pi = phi + i * m;
    double umax = pi[0];
    for (int j = 1; j < m; j++) umax = pi[j] > umax ? pi[j] : umax;
    for (int j = 0; j < m; j++) pi[j] = c * la_vexp(pi[j] - umax);
    double n2 = 0;
    for (int j = 0; j < dk; j++) n2 += x[i * ld + j] * x[i * ld + j];
    a[i] = umax - 0.5 * s * n2;
  }
}

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "bench_kern256_maps: error: out of memory\n");
    exit(1);
  }
  return p;
}

static void row(const char *name, double generic, double k256, double k512, double elems) {
  printf("%-24s %9.3f %9.3f ", name, generic / elems * 1e9, k256 / elems * 1e9);
  if (k512 > 0) printf("%9.3f ", k512 / elems * 1e9);
  else printf("%9s ", "-");
  printf("%8.2fx", generic / k256);
  if (k512 > 0) printf(" %8.2fx", k512 / k256);
  printf("\n");
}

int main(int argc, char **argv) {
  int rows = 512, dk = 64, m = 256, reps = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) reps = 5;
    else if (i + 1 < argc && !strcmp(argv[i], "--rows")) rows = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--dk")) dk = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--m")) m = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_kern256_maps [--quick] [--rows N] [--dk D] [--m M] [--reps R]\n");
      return 2;
    }
  }
  if (rows < 1 || dk < 1 || m < 1 || reps < 1) {
    fprintf(stderr, "bench_kern256_maps: error: --rows, --dk, --m, --reps must be >= 1\n");
    return 2;
  }
#if HAVE_X86
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    printf("no AVX2 + FMA on this CPU: nothing to time\n");
    return 77;
  }
  const int k5 = la_k512_available();
#else
  const int k5 = 0;
  printf("not an x86-64 build: nothing to time\n");
  return 77;
#endif
  const size_t ne = (size_t)rows * dk, nm = (size_t)rows * m;
  const size_t nmax = ne > nm ? ne : nm;
  float *x = xalloc(4 * nmax), *y = xalloc(4 * nmax), *u = xalloc(4 * nm), *phi = xalloc(4 * nm);
  double *xd = xalloc(8 * nmax), *yd = xalloc(8 * nmax), *ud = xalloc(8 * nm), *phid = xalloc(8 * nm);
  double *a = xalloc(8 * (size_t)rows);
  for (size_t i = 0; i < nmax; i++) { /* elu1's inputs: both signs, in [-4, 4) */
    x[i] = (float)((double)((i * 2654435761u) % 1000) / 125.0 - 4.0);
    xd[i] = x[i];
  }
  for (size_t i = 0; i < nm; i++) { /* projections u: favor's exp arguments in about [-8, 0] */
    u[i] = (float)((double)((i * 40503u) % 997) / 997.0 * 8.0 - 4.0);
    ud[i] = u[i];
  }
  const double s = 1.0 / sqrt((double)dk);
  la_config cfg;
  la_config_default(&cfg);
  cfg.map = LA_MAP_ELU1;
  cfg.kernels = LA_KERNELS_BLAS; /* the generic map (maps_impl.h) */
  la_featmap fm = NULL;
  if (la_featmap_create(&cfg, 1, dk, &fm) != LA_OK) {
    fprintf(stderr, "bench_kern256_maps: error: la_featmap_create: %s\n", la_error_message());
    return 1;
  }
  printf("%d rows, dk %d, m %d, best of %d; ns per element (generic, avx2, avx512), and avx2's "
         "speedup over generic and over avx512 (> 1: avx2 faster)\n", rows, dk, m, reps);
  printf("%-24s %9s %9s %9s %9s %9s\n", "kernel", "generic", "avx2", "avx512", "gen/avx2", "512/avx2");
  double tg, t2, t5 = 0;
  /* elu1, float32 */
  BEST(tg, reps, la_featmap_eval(fm, LA_F32, 0, rows, x, dk, y, a));
  BEST(t2, reps, la_k256_elu1(rows, dk, x, dk, y, dk, NULL));
  if (k5) BEST(t5, reps, la_k512_elu1(rows, dk, x, dk, y, dk, NULL));
  row("elu1 f32", tg, t2, t5, (double)ne);
  /* exp alone, float32, x <= 0 (avx512: its elu1 on x <= 0, the exp and one blend) */
  for (size_t i = 0; i < ne; i++) xd[i] = -fabs((double)x[i]) * 4; /* [-16, 0] */
  float *xn = xalloc(4 * ne);
  for (size_t i = 0; i < ne; i++) xn[i] = (float)xd[i];
  BEST(tg, reps, exp_scalar(ne, xn, y));
  BEST(t2, reps, exp8_run(ne & ~(size_t)7, xn, y));
  t5 = 0;
  if (k5) BEST(t5, reps, la_k512_elu1(rows, dk, xn, dk, y, dk, NULL));
  row("exp f32 (x <= 0)", tg, t2, t5, (double)ne);
  /* favor post, float32 (the projection excluded) */
  BEST(tg, reps, (memcpy(phi, u, 4 * nm), favor_post_scalar(rows, m, dk, x, dk, phi, s, a)));
  BEST(t2, reps, (memcpy(phi, u, 4 * nm), la_k256_favor_post(rows, m, dk, x, dk, phi, m, s, a, 0, NULL)));
  t5 = 0;
  if (k5) BEST(t5, reps, (memcpy(phi, u, 4 * nm), la_k512_favor_post(rows, m, dk, x, dk, phi, m, s, a, 0, NULL)));
  row("favor_post f32 (+copy)", tg, t2, t5, (double)nm);
  /* float64 */
  for (size_t i = 0; i < nmax; i++) xd[i] = x[i];
  BEST(tg, reps, la_featmap_eval(fm, LA_F64, 0, rows, xd, dk, yd, a));
  BEST(t2, reps, la_k256_elu1_f64(rows, dk, xd, dk, yd, dk, NULL));
  t5 = 0;
  if (k5) BEST(t5, reps, la_k512_elu1_f64(rows, dk, xd, dk, yd, dk, NULL));
  row("elu1 f64", tg, t2, t5, (double)ne);
  for (size_t i = 0; i < ne; i++) xd[i] = (double)xn[i];
  BEST(tg, reps, exp_scalar_f64(ne, xd, yd));
  BEST(t2, reps, exp4d_run(ne & ~(size_t)3, xd, yd));
  t5 = 0;
  if (k5) BEST(t5, reps, la_k512_elu1_f64(rows, dk, xd, dk, yd, dk, NULL));
  row("exp f64 (x <= 0)", tg, t2, t5, (double)ne);
  for (size_t i = 0; i < nmax; i++) xd[i] = x[i];
  BEST(tg, reps, (memcpy(phid, ud, 8 * nm), favor_post_scalar_f64(rows, m, dk, xd, dk, phid, s, a)));
  BEST(t2, reps, (memcpy(phid, ud, 8 * nm), la_k256_favor_post_f64(rows, m, dk, xd, dk, phid, m, s, a, 0, NULL)));
  t5 = 0;
  if (k5) BEST(t5, reps, (memcpy(phid, ud, 8 * nm), la_k512_favor_post_f64(rows, m, dk, xd, dk, phid, m, s, a, 0, NULL)));
  row("favor_post f64 (+copy)", tg, t2, t5, (double)nm);
  la_featmap_destroy(&fm);
  free(x), free(y), free(u), free(phi), free(xd), free(yd), free(ud), free(phid), free(a), free(xn);
  return 0;
}
