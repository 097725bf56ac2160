/* Unit tests of the AVX2 + FMA maps and elementwise kernels (core/simd/kern256_maps.c, its exp in
 * core/simd/vexp256.h) against plain float64 / long double loops and libm written here (no engine
 * code but the generic den_note of denominator.h, which finalize_plain must agree with).
 * Edge shapes throughout: lengths not a multiple of 8, dk = 1, 3, 64 and others, row strides
 * ld > dk, rows of r > dk, prefetch streams NULL and not. Skipped (exit 77) on a CPU without
 * AVX2 and FMA, or a build for another architecture (the kernels are stubs there). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"
#include "../core/simd/kern256_maps.h"
#include "../core/engine/denominator.h"

#include "check.h"
#include "check_gate_fold.h"

static unsigned long long rs = 88172645463325252ULL;
static double urand(void) { /* xorshift64, uniform in [-1, 1) */
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static int irand(int lo, int hi) { return lo + (int)((urand() + 1.0) * 0.5 * (hi - lo + 1)) % (hi - lo + 1); }

/* |y - ref| in units of the float spacing at ref (2^-149 below the normal range). */
static double ulpf(float y, double ref) {
  if ((double)y == ref) return 0;
  int e;
  frexp(ref, &e);
  const double sp = ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
  return fabs((double)y - ref) / sp;
}
/* the same for double against a long double reference (2^-1074 below the normal range) */
static double ulpd(double y, long double ref) {
  if ((long double)y == ref) return 0;
  int e;
  frexpl(ref, &e);
  const long double sp = ldexpl(1.0L, (e - 1 < -1022 ? -1022 : e - 1) - 52);
  return (double)(fabsl((long double)y - ref) / sp);
}

/* ---- the exp ---- */

/* Every float of [-104, 0] through la_k256_elu1 (x <= 0: phi = e^x, the exp of vexp256.h
 * alone) against double exp; every float of [-200, -104) gives +0; -inf, -0, NaN. */
static void test_exp_f32(void) {
  enum { B = 1 << 20 };
  float *x = malloc(sizeof(float) * B), *y = malloc(sizeof(float) * B);
  const uint32_t top = 0x42D00000u; /* 104.0f */
  double worst = 0, worst_sub = 0;
  float wx = 0;
  int64_t count = 0, under_ok = 1;
#ifdef __SANITIZE_ADDRESS__
  /* under ASan (jobs/sanitize.sh: 205 s for every float) every 16th block of 2^20 floats
   * and the last one (the subnormal results), the same accesses; the release suite checks
   * every float */
  const uint32_t step = 16u * B;
#else
  const uint32_t step = B;
#endif
  for (uint32_t u0 = 0; u0 <= top;
       u0 = u0 + step <= top || u0 + B > top ? u0 + step : top + 1 - B) {
    const int nb = top - u0 + 1 < (uint32_t)B ? (int)(top - u0 + 1) : B;
    for (int i = 0; i < nb; i++) {
      const uint32_t u = (u0 + (uint32_t)i) | 0x80000000u; /* -0 .. -104 */
      memcpy(&x[i], &u, 4);
    }
    la_k256_elu1(nb / 8, 8, x, 8, y, 8, NULL); /* whole rows of 8 */
    la_k256_elu1(1, nb % 8, x + nb / 8 * 8, 0, y + nb / 8 * 8, 8, NULL); /* the masked tail */
    for (int i = 0; i < nb; i++) {
      const double ref = exp((double)x[i]), e = ulpf(y[i], ref);
      if (ref < 0x1p-126) worst_sub = worse(worst_sub, e);
      else if (!(e <= worst)) worst = e, wx = x[i];
    }
    count += nb;
  }
  for (uint32_t u0 = top + 1; u0 < 0x43480000u; u0 += B) { /* (104, 200] */
    const int nb = 0x43480000u - u0 < (uint32_t)B ? (int)(0x43480000u - u0) : B;
    for (int i = 0; i < nb; i++) {
      const uint32_t u = (u0 + (uint32_t)i) | 0x80000000u;
      memcpy(&x[i], &u, 4);
    }
    la_k256_elu1(1, nb, x, 0, y, nb, NULL);
    for (int i = 0; i < nb; i++) under_ok &= y[i] == 0.0f && !signbit(y[i]);
  }
  printf("exp float: %lld floats of [-104, 0], worst %.3f ulp at x = %.9g (normal results), "
         "%.3f ulp of 2^-149 on the subnormal results\n", (long long)count, worst, wx, worst_sub);
  CHECK(step != B || count == (int64_t)top + 1, "every float of [-104, 0] checked (%lld)",
        (long long)count);
  /* measured 0.937; a Taylor coefficient off by 1% or a dropped term gives > 2.8 (tried) */
  CHECK(worst <= 1.25, "exp float: within 1.25 ulp of exp over [-104, 0] (worst %.3f)", worst);
  CHECK(worst_sub <= 1.0, "exp float: subnormal results within 1 ulp (gradual underflow, worst %.3f)",
        worst_sub);
  CHECK(under_ok, "exp float: +0 for every x in [-200, -104)");
  float sp[8] = {-INFINITY, -0.0f, 0.0f, NAN, -FLT_MIN, -FLT_TRUE_MIN, -103.97f, -87.33654f}, ys[8];
  la_k256_elu1(1, 8, sp, 8, ys, 8, NULL);
  CHECK(ys[0] == 0.0f && ys[1] == 1.0f && ys[2] == 1.0f && ys[3] == 1.0f && ys[4] == 1.0f &&
            ys[5] == 1.0f && ulpf(ys[6], exp((double)sp[6])) <= 0.5 && ulpf(ys[7], exp((double)sp[7])) <= 1.5,
        "elu1/exp specials: -inf -> 0, -0 and 0 -> 1, NaN -> 1 (as the generic elu1), tiny "
        "-> 1, the underflow edge (%g %g %g %g %g %g %g %g)", ys[0], ys[1], ys[2], ys[3], ys[4],
        ys[5], ys[6], ys[7]);
  free(x), free(y);
}

/* 2^24 evenly spaced points of [-708.4, 0] and 2^20 random ones (through la_k256_elu1_f64)
 * against expl; 0 below -708.396..., NaN kept, -inf gives 0. */
static void test_exp_f64(void) {
  enum { B = 1 << 16, NB = 256 + 16 };
  double *x = malloc(sizeof(double) * B), *y = malloc(sizeof(double) * B);
  const double lo = -708.3964185322641;
  double worst = 0, wx = 0;
  int under_ok = 1;
  for (int b = 0; b < NB; b++) {
    for (int i = 0; i < B; i++)
      x[i] = b < 256 ? -708.4 * ((double)b * B + i) / (256.0 * B) : 708.4 * (urand() - 1.0) / 2.0;
    la_k256_elu1_f64(B / 4 - 1, 4, x, 4, y, 4, NULL);
    la_k256_elu1_f64(1, 3, x + B - 4, 0, y + B - 4, 3, NULL); /* masked tails */
    la_k256_elu1_f64(1, 1, x + B - 1, 0, y + B - 1, 1, NULL);
    for (int i = 0; i < B; i++) {
      if (x[i] < lo) {
        under_ok &= y[i] == 0.0;
        continue;
      }
      const double e = ulpd(y[i], expl((long double)x[i]));
      if (!(e <= worst)) worst = e, wx = x[i];
    }
  }
  printf("exp double: %d points of [-708.4, 0], worst %.3f ulp at x = %.17g (expl)\n", NB * B,
         worst, wx);
  /* measured 0.890; 1/11! off by 4e-4 gives 1.71, a dropped t^13 2.4 (tried) */
  CHECK(worst <= 1.25, "exp double: within 1.25 ulp of expl on [-708.4, 0] (worst %.3f)", worst);
  double sp[6] = {-INFINITY, -0.0, NAN, -709.0, lo, 1e-300}, ys[6];
  la_k256_elu1_f64(1, 6, sp, 6, ys, 6, NULL);
  CHECK(under_ok && ys[0] == 0.0 && ys[1] == 1.0 && isnan(ys[2]) && ys[3] == 0.0 &&
            ulpd(ys[4], expl((long double)lo)) <= 1.5 && ys[5] == 1.0 + 1e-300,
        "exp double specials: 0 below -708.396, -inf -> 0, -0 -> 1, NaN kept, the edge (%g %g)",
        ys[4], ys[5]);
  free(x), free(y);
}

/* la_k256_exp_f64 (the per-feature gates' factors): lengths 1..13 and 1001 (masked tails),
 * points of [-720, 0] against expl within 1.25 ulp (as above), 0 below -708.396..., and the
 * element after the last untouched. */
static void test_exp_array_f64(void) {
  const double lo = -708.3964185322641;
  double worst = 0;
  int under_ok = 1, tail_ok = 1;
  for (int n = 1; n <= 1001; n = n < 13 ? n + 1 : 1001) {
    double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * (n + 1));
    for (int i = 0; i < n; i++) x[i] = i % 3 ? 360.0 * (urand() - 1.0) : -720.0 * i / n;
    y[n] = -1.0;
    la_k256_exp_f64((size_t)n, x, y);
    for (int i = 0; i < n; i++) {
      if (x[i] < lo) under_ok &= y[i] == 0.0;
      else worst = fmax(worst, ulpd(y[i], expl((long double)x[i])));
    }
    tail_ok &= y[n] == -1.0;
    free(x), free(y);
    if (n == 1001) break;
  }
  CHECK(worst <= 1.25 && under_ok && tail_ok, "exp_f64 array: within 1.25 ulp of expl (worst %.3f), "
        "0 below -708.396 %d, nothing written past n %d", worst, under_ok, tail_ok);
}

/* ---- maps on edge shapes ---- */

static const la_simd_pf *pf_of(la_simd_pf *pf, const void *p, int64_t n, int64_t ldb, int bytes,
                               int use) {
  la_simd_pf z = {{(const char *)p, use == 2 ? (const char *)p : NULL}, {ldb, ldb}, {bytes, bytes}, (int)n};
  *pf = z;
  return use ? pf : NULL;
}

static void test_elu1_shapes(void) {
  const int dks[] = {1, 3, 7, 8, 9, 13, 16, 64, 65};
  int ok = 1, ncase = 0;
  double worst = 0, worst64 = 0;
  for (int c = 0; c < 54; c++) {
    const int dk = dks[c % 9], n = irand(1, 40), ld = dk + (c % 2 ? irand(1, 9) : 0), r = dk + irand(0, 5);
    float *x = malloc(sizeof(float) * n * ld), *phi = malloc(sizeof(float) * n * r);
    double *xd = malloc(sizeof(double) * n * ld), *pd = malloc(sizeof(double) * n * r);
    for (int i = 0; i < n * ld; i++) xd[i] = x[i] = (float)(urand() * (c % 3 ? 4 : 100));
    for (int i = 0; i < n * r; i++) phi[i] = -7.0f, pd[i] = -7.0;
    la_simd_pf pf;
    la_k256_elu1(n, dk, x, ld, phi, r, pf_of(&pf, x, n, ld * 4, dk * 4, c % 3));
    la_k256_elu1_f64(n, dk, xd, ld, pd, r, pf_of(&pf, xd, n, ld * 8, dk * 8, c % 3));
    for (int i = 0; i < n; i++)
      for (int j = 0; j < r; j++) {
        const float xv = x[i * ld + j < n * ld ? i * ld + j : 0], y = phi[i * r + j];
        const double y64 = pd[i * r + j];
        if (j >= dk) {
          ok &= y == -7.0f && y64 == -7.0; /* past the row: untouched */
          continue;
        }
        if (xv > 0) ok &= y == xv + 1.0f && y64 == (double)xv + 1.0;
        else {
          worst = worse(worst, ulpf(y, exp((double)xv)));
          worst64 = worse(worst64, ulpd(y64, expl((long double)xv)));
        }
      }
    ncase++;
    free(x), free(phi), free(xd), free(pd);
  }
  CHECK(ok && worst <= 1.5 && worst64 <= 1.5,
        "elu1 and elu1_f64 on %d shapes (dk 1..65, ld > dk, r > dk, pf NULL / 1 / 2 streams): "
        "x + 1 exact, e^x within %.3f / %.3f ulp, the rest of each row untouched",
        ncase, worst, worst64);
}

/* favor+ (hyp 0) and favor-hyp (hyp 1) after the projection against the float64 formula:
 * phi = c e^{u - max u} (hyp: c [e^{u - max|u|}, e^{-u - max|u|}]), a = max - s |x|^2 / 2. */
static void test_favor(void) {
  const int ms[] = {1, 3, 7, 8, 9, 37, 64, 150}, dks[] = {1, 3, 21, 64};
  int ok = 1, ok64 = 1, ncase = 0;
  double wp = 0, wa = 0, wp64 = 0, wa64 = 0;
  for (int c = 0; c < 64; c++) {
    const int m = ms[c % 8], dk = dks[(c / 8) % 4], hyp = (c / 2) % 2;
    const int n = irand(1, 19), ld = dk + (c % 3 ? irand(1, 5) : 0), w = hyp ? 2 * m : m;
    const int r = w + irand(0, 4);
    const double s = 0.3 + urand() * 0.2;
    float *x = malloc(sizeof(float) * n * ld), *phi = malloc(sizeof(float) * n * r);
    double *xd = malloc(sizeof(double) * n * ld), *pd = malloc(sizeof(double) * n * r);
    double *u = malloc(sizeof(double) * n * m), *a = malloc(sizeof(double) * n), *a64 = malloc(sizeof(double) * n);
    for (int i = 0; i < n * ld; i++) xd[i] = x[i] = (float)urand();
    for (int i = 0; i < n; i++)
      for (int j = 0; j < r; j++) {
        /* u spread over [-60, 60], so that u - max reaches below -104: those give 0 */
        const float v = j < m ? (float)(urand() * (c % 4 == 0 ? 60 : 5)) : -7.0f;
        phi[i * r + j] = v, pd[i * r + j] = v;
        if (j < m) u[i * m + j] = v;
      }
    la_simd_pf pf;
    la_k256_favor_post(n, m, dk, x, ld, phi, r, s, a, hyp, pf_of(&pf, x, n, ld * 4, dk * 4, c % 3));
    la_k256_favor_post_f64(n, m, dk, xd, ld, pd, r, s, a64, hyp, pf_of(&pf, xd, n, ld * 8, dk * 8, c % 3));
    const double cf = 1.0 / sqrt((hyp ? 2.0 : 1.0) * m);
    for (int i = 0; i < n; i++) {
      double mx = hyp ? 0 : -INFINITY, n2 = 0;
      for (int j = 0; j < m; j++) mx = fmax(mx, hyp ? fabs(u[i * m + j]) : u[i * m + j]);
      for (int j = 0; j < dk; j++) n2 += xd[i * ld + j] * xd[i * ld + j];
      const double aref = mx - 0.5 * s * n2;
      wa = worse(wa, fabs(a[i] - aref) / fmax(1.0, fabs(aref)));
      wa64 = worse(wa64, fabs(a64[i] - aref) / fmax(1.0, fabs(aref)));
      for (int j = 0; j < r; j++) {
        if (j >= w) {
          ok &= phi[i * r + j] == -7.0f, ok64 &= pd[i * r + j] == -7.0;
          continue;
        }
        /* the argument as the kernels round it: u - max in float (float64) */
        const double uj = j < m ? u[i * m + j] : -u[i * m + j - m];
        const double ref = cf * exp((double)((float)uj - (float)mx));
        const long double ref64 = (long double)cf * expl((long double)(uj - mx));
        /* float: 1.5 ulp of the exp, one rounding of the scale; below the float range 0 */
        if (ref < 0x1p-126) ok &= fabs(phi[i * r + j] - ref) <= 0x1p-149 * 2;
        else wp = worse(wp, fabs(phi[i * r + j] - ref) / ref);
        wp64 = worse(wp64, (double)(fabsl(pd[i * r + j] - ref64) / ref64));
      }
    }
    ncase++;
    free(x), free(phi), free(xd), free(pd), free(u), free(a), free(a64);
  }
  CHECK(ok && wp <= 4 * FLT_EPSILON && wa <= 1e-12,
        "favor_post (hyp 0, 1) on %d shapes (m 1..150, dk 1..64, ld > dk, r > width, pf): "
        "within %.3g rel of c e^(u - max) (float64), a within %.3g, the rest untouched", ncase,
        wp, wa);
  CHECK(ok64 && wp64 <= 4 * DBL_EPSILON && wa64 <= 1e-15,
        "favor_post_f64 on the same shapes: within %.3g rel of the long double formula, a %.3g",
        wp64, wa64);
}

/* taylor2 against the generic form's products written out here (the same bits), and within
 * 2 eps of the float64 features; rows of r = 1 + dk + dk(dk+1)/2 (and one past: untouched). */
static void test_taylor2(void) {
  const int dks[] = {1, 2, 3, 7, 8, 9, 16, 17, 64};
  int same = 1, ncase = 0;
  double rel = 0;
  for (int c = 0; c < 18; c++) {
    const int dk = dks[c % 9], n = irand(1, 11), ld = dk + c % 2 * 3;
    const int r = 1 + dk + dk * (dk + 1) / 2, rp = r + 1;
    const float rsv = (float)sqrt(1.0 / sqrt((double)dk)), cc = (float)sqrt(0.5);
    float *x = malloc(sizeof(float) * n * ld), *phi = malloc(sizeof(float) * n * rp);
    float *ref = malloc(sizeof(float) * r);
    for (int i = 0; i < n * ld; i++) x[i] = (float)(urand() * 3);
    for (int i = 0; i < n * rp; i++) phi[i] = -7.0f;
    la_k256_taylor2(n, dk, x, ld, phi, rp, rsv);
    for (int i = 0; i < n; i++) {
      const float *xi = x + i * ld;
      float *xt = ref + 1, *q = ref + 1 + dk;
      ref[0] = 1;
      for (int j = 0; j < dk; j++) xt[j] = rsv * xi[j];
      for (int j = 0; j < dk; j++) {
        q[0] = xt[j] * (cc * xt[j]);
        for (int l = j + 1; l < dk; l++) q[l - j] = xt[j] * xt[l];
        q += dk - j;
      }
      same &= memcmp(ref, phi + i * rp, sizeof(float) * r) == 0 && phi[i * rp + r] == -7.0f;
      int p = 1 + dk;
      for (int j = 0; j < dk; j++)
        for (int l = j; l < dk; l++, p++) {
          const double xj = (double)rsv * xi[j], xl = (double)rsv * xi[l];
          const double f = l == j ? xj * xj / sqrt(2.0) : xj * xl;
          if (f != 0) rel = worse(rel, fabs(phi[i * rp + p] - f) / fabs(f));
        }
    }
    ncase++;
    free(x), free(phi), free(ref);
  }
  CHECK(same && rel <= 4 * FLT_EPSILON,
        "taylor2 on %d shapes (dk 1..64, ld > dk): the generic loop's bits, the row end "
        "untouched, within %.3g of float64", ncase, rel);
}

/* ---- elementwise ---- */

static void test_moves(void) {
  const int ns[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 1003};
  int ok_add = 1, ok_to = 1, ok_round = 1, ok_sum = 1, ok_scale = 1, ok_mul = 1, ok_dot = 1;
  double wdot = 0;
  enum { N = 1003 };
  static float f[N + 1], g[N + 1], y[N + 1], xm[N + 1];
  static double d[N + 1], d0[N + 1], base[N + 1];
  for (int c = 0; c < 12; c++) {
    const int n = ns[c];
    for (int i = 0; i <= N; i++)
      f[i] = (float)urand(), d0[i] = d[i] = urand() * 1e3, base[i] = urand() * 1e5, xm[i] = (float)urand();
    la_k256_add_to_f64((size_t)n, d, f);
    for (int i = 0; i <= N; i++) ok_add &= d[i] == (i < n ? d0[i] + (double)f[i] : d0[i]);
    y[n] = -7.0f;
    la_k256_to_f32((size_t)n, d, y);
    for (int i = 0; i < n; i++) ok_to &= y[i] == (float)d[i];
    ok_to &= y[n] == -7.0f;
    for (int wb = 0; wb < 2; wb++) {
      for (int i = 0; i <= N; i++) d[i] = d0[i], g[i] = -7.0f;
      la_k256_add_round((size_t)n, d, f, wb ? base : NULL, g);
      for (int i = 0; i < n; i++)
        ok_round &= d[i] == d0[i] + (double)f[i] && g[i] == (float)(wb ? base[i] + d[i] : d[i]);
      ok_round &= d[n] == d0[n] && g[n] == -7.0f;
    }
    y[n] = -7.0f;
    la_k256_sum_to_f32((size_t)n, d0, base, y);
    for (int i = 0; i < n; i++) ok_sum &= y[i] == (float)(d0[i] + base[i]);
    ok_sum &= y[n] == -7.0f;
    y[n] = -7.0f;
    la_k256_scale_row(n, f, 1.0 / 3.0, y);
    for (int i = 0; i < n; i++) ok_scale &= y[i] == (float)((double)f[i] * (1.0 / 3.0));
    ok_scale &= y[n] == -7.0f;
    for (int i = 0; i <= N; i++) g[i] = xm[i];
    la_k256_mul_f32((size_t)n, g, 0.7f);
    for (int i = 0; i <= N; i++) ok_mul &= g[i] == (i < n ? xm[i] * 0.7f : xm[i]);
    double ref = 0, mag = 0;
    for (int i = 0; i < n; i++) ref += (double)f[i] * xm[i], mag += fabs((double)f[i] * xm[i]);
    const double dot = la_k256_dot_f64(n, f, xm), e = fabs(dot - ref);
    ok_dot &= e <= 2 * (n + 1) * DBL_EPSILON * mag;
    if (mag > 0) wdot = worse(wdot, e / mag);
  }
  CHECK(ok_add, "add_to_f64 is the plain float64 sum (n 0..1003), nothing past n");
  CHECK(ok_to, "to_f32 rounds like a cast");
  CHECK(ok_round, "add_round (base NULL and not) is add_to_f64 then the rounded (base +) copy");
  CHECK(ok_sum, "sum_to_f32 is (float)(a + b)");
  CHECK(ok_scale, "scale_row multiplies in float64 and rounds once");
  CHECK(ok_mul, "mul_f32 is the float32 product");
  CHECK(ok_dot, "dot_f64 within 2 (n+1) eps sum|a b| of the float64 sum (worst %.3g)", wdot);
  static char buf[4096];
  la_k256_prefetch(buf, 0, 64, 64);
  la_k256_prefetch(buf, 8, 512, 100);
  CHECK(1, "prefetch of 0 and 8 rows returns");
}

/* ---- finalize_plain ---- */

static uint64_t hist_a[LA_DEN_HIST_BINS], hist_b[LA_DEN_HIST_BINS];
static void stats_clear(la_den_stats *st, uint64_t *h) {
  memset(st, 0, sizeof *st);
  memset(h, 0, sizeof(uint64_t) * LA_DEN_HIST_BINS);
  st->min = INFINITY, st->max = -INFINITY, st->hist = h;
  st->first_bad_token = st->first_overflow_token = -1;
}
static int stats_equal(const la_den_stats *a, const la_den_stats *b) {
  return a->rows == b->rows && a->min == b->min && a->max == b->max &&
         a->count_nonpositive == b->count_nonpositive && a->count_nonfinite == b->count_nonfinite &&
         memcmp(a->hist, b->hist, sizeof(uint64_t) * LA_DEN_HIST_BINS) == 0;
}
/* floor(16 log2 den) from the definition of the table: 16 e + #{j >= 1 : t16[j] <= m} */
static int32_t bin_ref(double den) {
  int e;
  const double m = 2 * frexp(den, &e);
  int32_t k = 16 * (e - 1);
  for (int j = 1; j < 16; j++) k += m >= den_bin16_t[j];
  return k;
}

/* One precision of finalize_plain; f64 = 0: float rows. Case kinds: every row plain
 * (dens over the whole range, powers of 2), or one row zero, negative, +inf, NaN, a float64
 * subnormal (refused), tiny but normal (accepted), or with lsc != 0 / NaN (refused). As
 * finalize_rows does: den_note_plain after a 1, den_note per row after a 0; the statistics
 * must be those of den_note on every row (the generic path). */
static void test_finalize(int f64) {
  static float of[64 * 66], yf[64 * 82] __attribute__((aligned(64)));
  static double od[64 * 66], yd[64 * 82] __attribute__((aligned(64)));
  double lsc[64], mn, mx;
  int32_t bin[64];
  int ok = 1, refused_ok = 1, stats_ok = 1, nacc = 0, nref = 0;
  const int dvs[] = {1, 3, 7, 8, 15, 16, 64, 65};
  la_den_stats sa, sb;
  for (int c = 0; c < 400; c++) {
    const int dv = dvs[c % 8], len = c % 5 == 0 ? 64 : irand(1, 64), dv1 = dv + 1;
    const int ldy = (dv % 16 == 0 && c % 16 < 8) ? dv + 16 : dv + 3; /* streamed or not */
    for (int i = 0; i < len; i++) {
      for (int j = 0; j < dv; j++) of[i * dv1 + j] = (float)(urand() * 100), od[i * dv1 + j] = urand() * 100;
      double den = f64 ? ldexp(1.0 + 0.5 * (urand() + 1.0), irand(-1022, 1022))
                       : (double)ldexpf((float)(1.0 + 0.5 * (urand() + 1.0)), irand(-149, 126));
      if (irand(0, 9) == 0) den = f64 ? ldexp(1.0, irand(-1022, 1023)) : ldexp(1.0, irand(-149, 127));
      of[i * dv1 + dv] = (float)den, od[i * dv1 + dv] = den;
      lsc[i] = 0.0;
    }
    const int kind = c % 3 == 0 ? -1 : irand(0, 7), bad = irand(0, len - 1);
    if (kind >= 0) {
      const double bd[] = {0.0, -1.5, INFINITY, NAN, 0x1p-1030, 0x1p-1022, 1.0, 2.0};
      if (kind < 6) of[bad * dv1 + dv] = (float)bd[kind], od[bad * dv1 + dv] = bd[kind];
      if (kind == 5) of[bad * dv1 + dv] = 0x1p-149f; /* float: its smallest subnormal, a normal double */
      if (kind == 4 && !f64) of[bad * dv1 + dv] = 0.0f; /* float has no double subnormal: zero */
      if (kind >= 6) lsc[bad] = kind == 6 ? 0.5 : NAN;
    }
    const int expect = kind < 0 || kind == 5;
    for (int i = 0; i < 64 * 82; i++) yf[i] = -7.0f, yd[i] = -7.0;
    const int rc = f64 ? la_k256_finalize_plain_f64(len, dv, od, lsc, yd, ldy, den_bin16_t, bin, &mn, &mx)
                       : la_k256_finalize_plain(len, dv, of, lsc, yf, ldy, den_bin16_t, bin, &mn, &mx);
    stats_clear(&sa, hist_a), stats_clear(&sb, hist_b);
    for (int i = 0; i < len; i++) den_note(&sb, f64 ? od[i * dv1 + dv] : (double)of[i * dv1 + dv], lsc[i]);
    if (rc != expect) {
      ok = 0;
      continue;
    }
    if (!rc) {
      int untouched = 1;
      for (int i = 0; i < 64 * 82; i++) untouched &= yf[i] == -7.0f && yd[i] == -7.0;
      refused_ok &= untouched;
      for (int i = 0; i < len; i++) den_note(&sa, f64 ? od[i * dv1 + dv] : (double)of[i * dv1 + dv], lsc[i]);
      stats_ok &= stats_equal(&sa, &sb);
      nref++;
      continue;
    }
    nacc++;
    den_note_plain(&sa, len, bin, mn, mx);
    stats_ok &= stats_equal(&sa, &sb);
    double rmn = INFINITY, rmx = -INFINITY;
    for (int i = 0; i < len; i++) {
      const double den = f64 ? od[i * dv1 + dv] : (double)of[i * dv1 + dv];
      rmn = den < rmn ? den : rmn, rmx = den > rmx ? den : rmx;
      const long double l = 16.0L * log2l((long double)den), fl = floorl(l);
      ok &= bin[i] == bin_ref(den);
      if (bin[i] != (long)fl && !(fabsl(l - roundl(l)) < 1e-12L && labs(bin[i] - (long)fl) == 1)) ok = 0;
      for (int j = 0; j < dv; j++)
        ok &= f64 ? yd[i * ldy + j] == od[i * dv1 + j] * (1.0 / den)
                  : yf[i * ldy + j] == (float)((double)of[i * dv1 + j] * (1.0 / den));
      for (int j = dv; j < ldy && i + 1 < len; j++) ok &= f64 ? yd[i * ldy + j] == -7.0 : yf[i * ldy + j] == -7.0f;
    }
    for (int j = len * ldy; j < 64 * 82; j++) ok &= f64 ? yd[j] == -7.0 : yf[j] == -7.0f;
    ok &= mn == rmn && mx == rmx;
  }
  /* the bounds of len: 0 and 65 are refused */
  refused_ok &= (f64 ? la_k256_finalize_plain_f64(0, 4, od, lsc, yd, 4, den_bin16_t, bin, &mn, &mx)
                     : la_k256_finalize_plain(0, 4, of, lsc, yf, 4, den_bin16_t, bin, &mn, &mx)) == 0;
  CHECK(ok && nacc > 100 && nref > 100,
        "finalize_plain%s: %d accepted blocks (len 1..64, dv 1..65, streamed or not): rows "
        "(float64 product, one rounding), bins (table and log2l), extremes; %d refused", f64 ? "_f64" : "",
        nacc, nref);
  CHECK(refused_ok, "finalize_plain%s refuses a zero, negative, infinite, NaN%s den, an lsc != 0 "
                    "or NaN, len 0, and writes nothing", f64 ? "_f64" : "", f64 ? ", subnormal" : "");
  CHECK(stats_ok, "finalize_plain%s: the statistics (rows, min, max, histogram, nonpositive, "
                  "nonfinite) equal den_note's on every row, accepted or refused", f64 ? "_f64" : "");
}

int main(void) {
#if defined(__x86_64__)
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    printf("no AVX2 + FMA on this CPU: skipped\n");
    return 77;
  }
#else
  printf("not an x86-64 build: the AVX2 kernels are stubs, skipped\n");
  return 77;
#endif
  test_exp_f32();
  test_exp_f64();
  test_exp_array_f64();
  check_gate_fold(la_k256_gate_fold, "la_k256_gate_fold");
  test_elu1_shapes();
  test_favor();
  test_taylor2();
  test_moves();
  test_finalize(0);
  test_finalize(1);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
