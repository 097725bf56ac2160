/* kernel_cycles: the AVX-512 chunk kernels (core/simd/kern512.c) timed in cache, each against the
 * engine's own GEMM rate measured in the same run (docs/performance.md "Kernels in cache").
 *
 * On a noisy shared machine a whole-run timing moves by 10-20 % from run to run; a kernel
 * called thousands of times on operands that stay in L1/L2, best of the calls, moves by a
 * few percent. Each line gives the kernel's time per call, its flops, and its rate as a
 * fraction of la_k512_gemm on a 64 x 64 x 64 product timed the same way (the probe's shape;
 * compare fractions, never absolute times, across runs). Not la_kernel_probe_gflops, bench's
 * probe: that one averages 2000 calls per sample, and the denominator must be timed the way
 * the kernels are. The feature maps are given per vector (16 float or 8 double lanes), and
 * the synthetic generator's AVX-512 build (core/random/synth_kernel.h) per 16 pairs of values, on
 * blocks of 16 tokens x 4 heads x 64 columns (the engine's calls; docs/design.md §2.1). Nothing
 * here is asserted: it is a benchmark (the ctest only runs --quick).
 *
 * usage: kernel_cycles [--quick] [--len C] [--r R] [--dv DV]
 *   defaults: C = 48 (the engine's chunk at r = dv = 64), R = DV = 64.
 * Exit 0; 77 where the AVX-512 kernels are not in use (no AVX-512F, or a build without them);
 * 2 on a bad option. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../core/simd/kern512.h"
#include "../core/simd/simd_compose.h"
#include "../core/random/synth_kernel.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *fbuf(size_t n, float lo, float hi) {
  float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "kernel_cycles: error: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)((i * 2654435761u) % 1000) / 1000;
  return p;
}

/* t = the best time of `calls` samples of body, in seconds per call (a sample: `inner` calls). */
#define BEST(t, calls, inner, body)                                                        \
  do {                                                                                     \
    t = 1e30;                                                                              \
    for (int c_ = 0; c_ < (calls); c_++) {                                                 \
      const double t0_ = now();                                                            \
      for (int i_ = 0; i_ < (inner); i_++) { body; }                                       \
      const double t_ = (now() - t0_) / (inner);                                           \
      if (t_ < t) t = t_;                                                                  \
    }                                                                                      \
  } while (0)

static void line(const char *name, double sec, double flops, double peak) {
  if (flops > 0)
    printf("%-38s %9.3f us %10.0f flop  %.3f of the 64^3 rate\n", name, sec * 1e6, flops,
           flops / sec / peak);
  else
    printf("%-38s %9.3f us\n", name, sec * 1e6);
}

int main(int argc, char **argv) {
  int len = 48, r = 64, dv = 64, quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--len")) len = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--r")) r = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--dv")) dv = atoi(argv[++i]);
    else {
      fprintf(stderr, "kernel_cycles: error: unknown option '%s' (usage: kernel_cycles "
                      "[--quick] [--len C] [--r R] [--dv DV])\n", argv[i]);
      return 2;
    }
  }
  if (len < 1 || len > 4096 || r < 1 || r > 4096 || dv < 1 || dv > 4096) {
    fprintf(stderr, "kernel_cycles: error: --len, --r and --dv must be in [1, 4096]\n");
    return 2;
  }
  if (!la_k512_enabled()) {
    printf("kernel_cycles: the AVX-512 kernels are not in use here (no AVX-512F, or a build "
           "without them)\n");
    return 77;
  }
  const int C = len, dv1 = dv + 1, H = 4, reps = quick ? 3 : 400, inner = quick ? 1 : 8;
  const ptrdiff_t ldv = (ptrdiff_t)H * dv; /* V read in place from [n, H, dv] rows */
  float *pq = fbuf((size_t)C * r, 0.5f, 1.5f), *pk = fbuf((size_t)C * r, 0.5f, 1.5f);
  float *V = fbuf((size_t)C * ldv, -1, 1), *sf = fbuf((size_t)r * dv1, 0.5f, 1.5f);
  float *o = fbuf((size_t)C * dv1, 0, 0), *tmp = fbuf((size_t)r * dv1, 0, 0);
  float *kT = fbuf((size_t)r * C, 0, 0), *A = fbuf((size_t)C * C, 0, 0), *zf = fbuf((size_t)r, 0, 0);
  float *ga = fbuf(64 * 64, -1, 1), *gb = fbuf(64 * 64, -1, 1), *gc = fbuf(64 * 64, 0, 0);
  float *x = fbuf((size_t)C * H * 64, -3, 3), *phi = fbuf((size_t)C * 64, 0, 0);

  /* the reference rate: the engine's GEMM on 64^3 in cache (bench --gemm-probe's k512gemm) */
  double t;
  BEST(t, reps, inner * 4, la_k512_gemm(64, 64, 64, ga, 64, 1, gb, 64, gc, 64, 0, 0));
  const double peak = 2.0 * 64 * 64 * 64 / t;
  printf("kernel_cycles: len %d, r %d, dv %d; the 64^3 GEMM: %.1f GFLOP/s on this thread\n", len,
         r, dv, peak * 1e-9);
  /* flops as executed: the lower tiles of A (row tile i0 has i0 + 6 columns), A V over the
   * columns each row tile reads, the two r x dv products */
  double ftri = 0, fav = 0;
  for (int i0 = 0; i0 < len; i0 += 6) {
    const int mt = len - i0 < 6 ? len - i0 : 6, w = i0 + 6 < len ? i0 + 6 : len;
    ftri += 2.0 * mt * w * r;
    fav += 2.0 * mt * w * dv;
  }
  const double fqs = 2.0 * len * r * dv, fks = 2.0 * len * r * dv;
  BEST(t, reps, inner, la_simd_causal_chunk(&la_simd_avx512, len, r, dv, pq, pk, V, ldv, sf, o, tmp, kT, A, zf, C));
  line("causal chunk (la_simd_causal_chunk, avx512)", t, ftri + fav + fqs + fks, peak);
  BEST(t, reps, inner, la_k512_transpose(len, r, pk, r, kT, C));
  line("  transpose Phi_k", t, 0, peak);
  BEST(t, reps, inner, la_k512_gemm(len, len, r, pq, r, 1, kT, C, A, C, 0, 2));
  line("  A = lower tiles of Phi_q Phi_k^T", t, ftri, peak);
  BEST(t, reps, inner, la_k512_gemm(len, dv, r, pq, r, 1, sf, dv1, o, dv1, 0, 0));
  line("  Phi_q S", t, fqs, peak);
  BEST(t, reps, inner, la_k512_gemm(len, dv, len, A, C, 1, V, ldv, o, dv1, 1, 1));
  line("  A V (lower)", t, fav, peak);
  BEST(t, reps, inner, la_simd_key_summary(&la_simd_avx512, len, r, dv, pk, V, ldv, tmp));
  line("  key summary (la_simd_key_summary)", t, fks, peak);
  BEST(t, reps, inner, la_simd_query_apply(&la_simd_avx512, len, r, dv, pq, sf, o, zf));
  line("bidirectional rows (la_simd_query_apply)", t, fqs, peak);
  /* the causal backward's pieces (simd_compose.c): ab = [a | b] (len x (dv+1)); the triangles
   * counted by the tiles computed, as above (tri = 3 mirrors tri = 1: row tile i0 reads the
   * len - i0 rows from i0) */
  {
    float *ab = fbuf((size_t)C * dv1, -1, 1), *dphi = fbuf((size_t)C * r, 0, 0);
    float *dvo = fbuf((size_t)C * ldv, 0, 0), *vp = fbuf((size_t)C * dv1, -1, 1);
    const int wmax = r > C ? r : C;
    float *tb = fbuf((size_t)dv1 * wmax, 0, 0);
    double fT = 0, fTr = 0, fup = 0, fupv = 0;
    for (int i0 = 0; i0 < len; i0 += 6) {
      const int mt = len - i0 < 6 ? len - i0 : 6, w = i0 + 6 < len ? i0 + 6 : len;
      fT += 2.0 * mt * w * dv1;         /* tril(ab [V|1]^T) */
      fTr += 2.0 * mt * w * r;          /* tril(...) Phi_k */
      fup += 2.0 * mt * (len - i0) * r; /* triu(...) Phi_q */
      fupv += 2.0 * mt * (len - i0) * dv;
    }
    const double f1 = 2.0 * len * r * dv1; /* ab S'^T, [V|1] dS'^T, Phi_q^T ab */
    BEST(t, reps, inner, la_simd_bwd_dq(&la_simd_avx512, len, r, dv, ab, sf, pk, V, ldv, dphi, A, tb, C, 1));
    line("backward dq (la_simd_bwd_dq)", t, f1 + fT + fTr, peak);
    BEST(t, reps, inner,
         la_simd_bwd_reverse(&la_simd_avx512, len, r, dv, ab, pq, pk, vp, sf, dphi, dvo, ldv, tmp, A, kT, tb, C, 1));
    line("backward reverse (la_simd_bwd_reverse)", t,
         f1 + fqs + fT + fup + ftri + fupv + f1, peak);
    free(ab), free(dphi), free(dvo), free(vp), free(tb);
  }
  /* elu1 on len rows of one head of 4 (rows of 4 x 64 floats), per 16 lanes */
  BEST(t, reps, inner * 4, la_k512_elu1(len, 64, x, H * 64, phi, 64, NULL));
  printf("%-38s %9.3f ns per 16 lanes (%d rows of 64)\n", "elu1 (la_k512_elu1)",
         t * 1e9 / (len * 4.0), len);
  /* favor+'s post-projection loop (max, exp, |x|^2) on len rows of m = 256 projections, per
   * 16 lanes; each call starts from the same projections (copied back, timed apart) */
  {
    const int fm = 256;
    float *u0 = fbuf((size_t)len * fm, -4, 4), *u = fbuf((size_t)len * fm, 0, 0);
    double *av = aligned_alloc(64, sizeof(double) * (size_t)len);
    double tc;
    BEST(tc, reps, inner, memcpy(u, u0, sizeof(float) * (size_t)len * fm));
    BEST(t, reps, inner,
         (memcpy(u, u0, sizeof(float) * (size_t)len * fm),
          la_k512_favor_post(len, fm, 64, x, H * 64, u, fm, 1.0, av, 0, NULL)));
    printf("%-38s %9.3f ns per 16 lanes (%d rows of m = %d)\n", "favor+ post (la_k512_favor_post)",
           (t - tc) * 1e9 / (len * fm / 16.0), len, fm);
    free(u0), free(u), free(av);
  }
  /* the same in float64, per 8 lanes (rows of 4 x 64 doubles) */
  double *x64 = aligned_alloc(64, sizeof(double) * (size_t)len * H * 64);
  double *phi64 = aligned_alloc(64, sizeof(double) * (size_t)len * 64);
  if (!x64 || !phi64) {
    fprintf(stderr, "kernel_cycles: error: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < (size_t)len * H * 64; i++) x64[i] = (double)x[i];
  BEST(t, reps, inner * 4, la_k512_elu1_f64(len, 64, x64, H * 64, phi64, 64, NULL));
  printf("%-38s %9.3f ns per 8 lanes (%d rows of 64)\n", "elu1 f64 (la_k512_elu1_f64)",
         t * 1e9 / (len * 8.0), len);
  free(x64), free(phi64);
  /* the synthetic generator: 8 blocks of 16 tokens x 4 heads x 64 float columns (128 KiB) */
  if (la_synth_avx512_available()) {
    float *g = fbuf((size_t)8 * 16 * 4 * 64, 0, 1);
    int64_t tok = 0;
    BEST(t, reps / 4 + 1, 4, for (int b = 0; b < 8; b++) {
      la_synth_rows_avx512(42, 1, tok, 16, 4, 64, 1.0, LA_F32, g + (size_t)b * 16 * 4 * 64);
      tok += 16;
    });
    printf("%-38s %9.3f ns per 16 pairs (blocks of 16 tokens x 4 heads x 64)\n",
           "synthetic generator (la_synth_rows)", t * 1e9 / (8.0 * 16 * 4 * 32 / 16));
    free(g);
  } else {
    printf("%-38s not timed: no AVX-512 build of it here\n", "synthetic generator (la_synth_rows)");
  }
  free(pq), free(pk), free(V), free(sf), free(o), free(tmp), free(kT), free(A), free(zf);
  free(ga), free(gb), free(gc), free(x), free(phi);
  return 0;
}
