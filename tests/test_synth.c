/* The synthetic generator (core/synth.c, core/synth_kernel.h; docs/design.md §2 "Generator"):
 * (a) the AVX-512 and the generic builds, and the vector and scalar lanes, give the same bits;
 * (b) rows do not depend on how [token0, n) is split, nor on d beyond their own columns;
 * (c) the kernel's log and sin/cos against long double libm, in ulps of the double result;
 * (d) the values follow the definition (the uniforms of la_rng_u64) and are N(0, 1): moments
 *     within 6 sigma and the Kolmogorov-Smirnov distance under its 0.001 critical value.
 * Prints ns/element of both builds (information only: no timing is checked). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "linattn/core.h"
#include "../core/synth_kernel.h"

#include "check.h"

static uint64_t rs = 0x2545F4914F6CDD1DULL;
static uint64_t xrand(void) { /* xorshift64* */
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 0x2545F4914F6CDD1DULL;
}

typedef void rows_fn(uint64_t, int, int64_t, int64_t, int, int, double, la_dtype, void *);

static void *gen(rows_fn *f, uint64_t seed, int t, int64_t t0, int64_t n, int H, int d,
                 double scale, la_dtype dt) {
  const size_t esz = dt == LA_F32 ? 4 : 8, sz = (size_t)n * H * d * esz;
  void *p = malloc(sz ? sz : 1);
  f(seed, t, t0, n, H, d, scale, dt, p);
  return p;
}

/* (a) and (b) */
static void test_bits(int avx) {
  static const struct { int64_t t0, n; int H, d; } sh[] = {
      {0, 37, 3, 64}, {1000003, 29, 2, 7}, {5, 11, 1, 1}, {0, 9, 2, 2},
      {123456789012LL, 5, 4, 129}, {77, 13, 2, 300}, {3, 17, 5, 33}};
  int same_ab = 1, same_disp = 1, same_split = 1, same_prefix = 1;
  for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
    for (int di = 0; di < 2; di++) {
      const la_dtype dt = di ? LA_F32 : LA_F64;
      const size_t esz = di ? 4 : 8, row = (size_t)sh[k].H * sh[k].d * esz;
      const uint64_t seed = 0x5eed + k;
      const int t = (int)(k % 4);
      char *g = gen(la_synth_rows_generic, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      char *a = gen(la_synth_rows_avx512, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      char *r = gen(la_synth_rows, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      if (avx) same_ab &= !memcmp(g, a, sh[k].n * row);
      same_disp &= !memcmp(g, r, sh[k].n * row);
      /* random splits of [t0, t0 + n), each piece through both builds alternately */
      for (int rep = 0; rep < 4; rep++) {
        for (int64_t i = 0; i < sh[k].n;) {
          int64_t m = 1 + (int64_t)(xrand() % 7);
          if (m > sh[k].n - i) m = sh[k].n - i;
          char *p = gen((i + rep) % 2 ? la_synth_rows_avx512 : la_synth_rows_generic, seed, t,
                        sh[k].t0 + i, m, sh[k].H, sh[k].d, 0.75, dt);
          same_split &= !memcmp(p, g + i * row, m * row);
          free(p);
          i += m;
        }
      }
      /* a narrower d gives the first columns of each row: pair c lands in other vector
       * positions and in the scalar epilogues, and must not change */
      for (int d2 = 1; d2 < sh[k].d && d2 <= 40; d2++) {
        char *p = gen(la_synth_rows_generic, seed, t, sh[k].t0, 2, sh[k].H, d2, 0.75, dt);
        char *q = gen(la_synth_rows_avx512, seed, t, sh[k].t0, 2, sh[k].H, d2, 0.75, dt);
        for (int64_t i = 0; i < 2 && i < sh[k].n; i++)
          for (int h = 0; h < sh[k].H; h++) {
            const char *full = g + i * row + (size_t)h * sh[k].d * esz;
            same_prefix &= !memcmp(p + ((size_t)i * sh[k].H + h) * d2 * esz, full, d2 * esz);
            same_prefix &= !memcmp(q + ((size_t)i * sh[k].H + h) * d2 * esz, full, d2 * esz);
          }
        free(p);
        free(q);
      }
      free(g);
      free(a);
      free(r);
    }
  if (avx) CHECK(same_ab, "AVX-512 and generic rows differ");
  CHECK(same_disp, "la_synth_rows (threads, dispatch) differs from the generic rows");
  CHECK(same_split, "rows depend on the split of [token0, n)");
  CHECK(same_prefix, "a narrower d changes the first columns");
  printf("bits: generic%s, threaded, split and narrower rows identical\n",
         avx ? " = AVX-512" : " (no AVX-512 on this CPU)");
}

/* (d) the definition: column 2c, 2c+1 = scale sqrt(-2 log u1) (cos, sin)(2 pi u2) with the
 * uniforms of la_rng_u64(seed, token, 2^60 | t << 32 | h, c), against long double math. */
static void test_definition(void) {
  const int H = 3, d = 11, n = 200;
  const double scale = 1.3;
  double *g = gen(la_synth_rows_generic, 99, 2, 4242, n, H, d, scale, LA_F64);
  float *f = gen(la_synth_rows_generic, 99, 2, 4242, n, H, d, scale, LA_F32);
  double worst = 0;
  int f32ok = 1;
  for (int i = 0; i < n; i++)
    for (int h = 0; h < H; h++)
      for (int j = 0; j < d; j++) {
        const uint64_t key = (1ULL << 60) | (2ULL << 32) | (uint64_t)h;
        double u1, u2; /* from la_rng_u64(99, token, key, c), as before the fast kernel */
        la_rng_uniform2(99, 4242 + (uint64_t)i, key, (uint64_t)(j / 2), &u1, &u2);
        const long double pi = 3.141592653589793238462643383279502884L;
        const long double rad = scale * sqrtl(-2.0L * logl((long double)u1));
        const long double ref = rad * (j % 2 ? sinl(2 * pi * u2) : cosl(2 * pi * u2));
        const double got = g[((size_t)i * H + h) * d + j];
        /* absolute error against rad: the angle's own rounding in long double is ~1e-18 */
        worst = worse(worst, fabs((double)(got - ref)) / (double)(rad > 1e-300L ? rad : 1));
        f32ok &= f[((size_t)i * H + h) * d + j] == (float)got;
      }
  CHECK(worst < 1e-15, "values differ from scale sqrt(-2 log u1) cos/sin(2 pi u2): %.3g", worst);
  CHECK(f32ok, "float32 rows are not the float64 rows rounded");
  printf("definition: max |x - ref| / rad = %.3g (%d values), f32 = (float) f64\n", worst,
         n * H * d);
  free(g);
  free(f);
}

/* ulps of the double nearest ref between got and ref; an exact 0 must be hit exactly */
static double ulps(double got, long double ref) {
  if (ref == 0) return got == 0 ? 0 : INFINITY;
  int e;
  frexpl(ref, &e);
  return (double)(fabsl((long double)got - ref) / ldexpl(1.0L, e - 53));
}

/* sin, cos(2 pi m 2^-53) in long double: the quadrant split exactly (4 m 2^-53 = q + r), then
 * sinl/cosl of (pi/2) r, |r| <= 1/2, so the reference keeps its relative accuracy at the
 * zeros (~2^-62) where sinl(2 pi u) would lose it to the rounding of 2 pi u. */
static void ref_sincos(uint64_t m, long double *s, long double *c) {
  const long double v = ldexpl((long double)m, -51), q = nearbyintl(v), r = v - q;
  const long double a = r * 1.570796326794896619231321691639751442L;
  const long double S = sinl(a), C = cosl(a);
  switch ((int)q & 3) {
  case 0: *s = S, *c = C; break;
  case 1: *s = C, *c = -S; break;
  case 2: *s = -S, *c = -C; break;
  default: *s = -C, *c = S; break;
  }
}

/* (c) */
static void test_math(int avx) {
  enum { N = 1 << 21 };
  uint64_t *m1 = malloc(N * sizeof *m1), *m2 = malloc(N * sizeof *m2);
  double *lg = malloc(N * sizeof *lg), *la = malloc(N * sizeof *la);
  double *sg = malloc(N * sizeof *sg), *cg = malloc(N * sizeof *cg);
  double *sa = malloc(N * sizeof *sa), *ca = malloc(N * sizeof *ca);
  size_t k = 0;
  /* log: u1 = m1 2^-53, m1 in [1, 2^53]: both ends, powers of two and their neighbours, the
   * reduction's switch at sqrt(2)/2 2^k, then uniform m1, then m1 of every binade */
  for (uint64_t j = 1; j <= 1000; j++) m1[k++] = j, m1[k++] = (1ULL << 53) + 1 - j;
  for (int e = 0; e <= 53; e++)
    for (int j = -3; j <= 3; j++) {
      const int64_t v = (int64_t)(1ULL << e) + j;
      if (v >= 1 && v <= (int64_t)(1ULL << 53)) m1[k++] = (uint64_t)v;
      const int64_t w = (int64_t)ldexp(0.70710678118654752440, e) + j;
      if (e > 3 && w >= 1 && w <= (int64_t)(1ULL << 53)) m1[k++] = (uint64_t)w;
    }
  const size_t k1 = k;
  for (; k < N / 2; k++) m1[k] = (xrand() >> 11) + 1;
  for (; k < N; k++) m1[k] = ((xrand() >> 11) >> (xrand() % 53)) + 1;
  /* sin/cos: u2 = m2 2^-53, m2 in [0, 2^53): around every eighth of the circle (the quadrant
   * centres and the ends of the reduced range), then uniform */
  k = 0;
  for (uint64_t o = 0; o <= 8; o++)
    for (int64_t j = -400; j <= 400; j++) {
      const int64_t v = (int64_t)(o << 50) + j;
      if (v >= 0 && v < (int64_t)(1ULL << 53)) m2[k++] = (uint64_t)v;
    }
  for (uint64_t o = 0; o < 8; o++) /* the exact eighths and their last bits */
    for (int b = 0; b < 50; b++) {
      m2[k++] = (o << 50) | (1ULL << b);
      if (o > 0) m2[k++] = (o << 50) - (1ULL << b);
    }
  for (; k < N; k++) m2[k] = xrand() >> 11;

  la_synth_log_generic(N, m1, lg);
  la_synth_sincos_generic(N, m2, sg, cg);
  la_synth_log_avx512(N, m1, la);
  la_synth_sincos_avx512(N, m2, sa, ca);
  int same = 1, scalar = 1;
  if (avx) {
    same &= !memcmp(lg, la, N * sizeof *lg);
    same &= !memcmp(sg, sa, N * sizeof *sg) && !memcmp(cg, ca, N * sizeof *cg);
    CHECK(same, "the AVX-512 log/sincos differ from the generic ones");
  }
  /* one value at a time: the scalar (non-vector) code */
  for (size_t i = 0; i < N; i += 997) {
    double l1, s1, c1;
    la_synth_log_generic(1, m1 + i, &l1);
    la_synth_sincos_generic(1, m2 + i, &s1, &c1);
    scalar &= !memcmp(&l1, lg + i, 8) && !memcmp(&s1, sg + i, 8) && !memcmp(&c1, cg + i, 8);
    if (!avx) continue;
    la_synth_log_avx512(1, m1 + i, &l1);
    la_synth_sincos_avx512(1, m2 + i, &s1, &c1);
    scalar &= !memcmp(&l1, lg + i, 8) && !memcmp(&s1, sg + i, 8) && !memcmp(&c1, cg + i, 8);
  }
  CHECK(scalar, "the scalar log/sincos differ from the vector lanes");
  double elog = 0, elibm = 0, esin = 0, ecos = 0, elibs = 0;
  size_t wl = 0, ws = 0, wc = 0;
  for (size_t i = 0; i < N; i++) {
    const long double u1 = ldexpl((long double)m1[i], -53), r = logl(u1);
    const double e = ulps(lg[i], r);
    if (!(e <= elog)) elog = e, wl = i;
    elibm = worse(elibm, ulps(log((double)u1), r));
    long double s, c;
    ref_sincos(m2[i], &s, &c);
    const double es = ulps(sg[i], s), ec = ulps(cg[i], c);
    if (!(es <= esin)) esin = es, ws = i;
    if (!(ec <= ecos)) ecos = ec, wc = i;
    const double ang = 6.283185307179586476925 * ldexp((double)m2[i], -53);
    if (fabsl(s) > 0.01L) elibs = worse(elibs, ulps(sin(ang), s));
  }
  printf("log(u1), %d args (%zu edge ones): max %.3f ulp at u1 = %a (libm log: %.3f ulp)\n", N,
         k1, elog, ldexp((double)m1[wl], -53), elibm);
  printf("sin(2 pi u2), %d args: max %.3f ulp at u2 = %a; cos: max %.3f ulp at u2 = %a\n", N,
         esin, ldexp((double)m2[ws], -53), ecos, ldexp((double)m2[wc], -53));
  printf("  (libm sin(2 pi u2) in double, |sin| > 0.01: max %.3f ulp; it rounds 2 pi u2 first)\n",
         elibs);
  CHECK(elog <= 1.0, "log: %.3f ulp", elog);
  CHECK(esin <= 1.0 && ecos <= 1.0, "sin %.3f ulp, cos %.3f ulp", esin, ecos);
  /* the ends: u1 = 1 gives 0 exactly, u2 = 0 gives (0, 1), u2 = 1/4 gives (1, 0) exactly */
  {
    const uint64_t e1[2] = {1ULL << 53, 1}, e2[3] = {0, 1ULL << 51, 1ULL << 52};
    double l[2], s[3], c[3];
    la_synth_log_generic(2, e1, l);
    la_synth_sincos_generic(3, e2, s, c);
    CHECK(l[0] == 0 && l[1] == (double)logl(0x1p-53L), "log(1) = %a, log(2^-53) = %a", l[0], l[1]);
    CHECK(s[0] == 0 && c[0] == 1 && s[1] == 1 && c[1] == 0 && s[2] == 0 && c[2] == -1,
          "sincos at 0, 1/4, 1/2: (%a %a) (%a %a) (%a %a)", s[0], c[0], s[1], c[1], s[2], c[2]);
  }
  free(m1), free(m2), free(lg), free(la), free(sg), free(cg), free(sa), free(ca);
}

static int cmpd(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* (d) moments and KS of 2^22 values (pairs are independent, so all values are i.i.d.) */
static void test_distribution(void) {
  const int64_t n = 1 << 14;
  const int H = 4, d = 64;
  const size_t N = (size_t)n * H * d;
  double *x = gen(la_synth_rows, 2024, 1, 777, n, H, d, 1.0, LA_F64);
  long double s1 = 0, s2 = 0, s4 = 0;
  for (size_t i = 0; i < N; i++) {
    const long double v = x[i], v2 = v * v;
    s1 += v, s2 += v2, s4 += v2 * v2;
  }
  const double m1 = (double)(s1 / N), m2 = (double)(s2 / N), m4 = (double)(s4 / N);
  /* sd of the sample mean of x, x^2, x^4 for N(0,1): sqrt(1/N), sqrt(2/N), sqrt(96/N) */
  const double sd1 = sqrt(1.0 / N), sd2 = sqrt(2.0 / N), sd4 = sqrt(96.0 / N);
  printf("moments of %zu values: mean %.2e (%.2f sd), E x^2 - 1 = %.2e (%.2f sd), "
         "E x^4 - 3 = %.2e (%.2f sd)\n", N, m1, m1 / sd1, m2 - 1, (m2 - 1) / sd2, m4 - 3,
         (m4 - 3) / sd4);
  CHECK(fabs(m1) < 6 * sd1, "mean %g", m1);
  CHECK(fabs(m2 - 1) < 6 * sd2, "E x^2 %g", m2);
  CHECK(fabs(m4 - 3) < 6 * sd4, "E x^4 %g", m4);
  qsort(x, N, sizeof *x, cmpd);
  double D = 0;
  for (size_t i = 0; i < N; i++) {
    const double F = 0.5 * erfc(-x[i] / sqrt(2.0));
    D = fmax(D, fmax((double)(i + 1) / N - F, F - (double)i / N));
  }
  const double crit = sqrt(-0.5 * log(0.001 / 2)) / sqrt((double)N); /* alpha = 0.001 */
  printf("Kolmogorov-Smirnov distance to N(0,1): %.3e (critical value at 0.001: %.3e)\n", D,
         crit);
  CHECK(D < crit, "KS distance %g >= %g", D, crit);
  free(x);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void timing(int avx) {
  const int64_t n = 1 << 14;
  const int H = 4, d = 64;
  float *b = malloc((size_t)n * H * d * sizeof *b);
  for (int p = 0; p < 2; p++) {
    if (p == 1 && !avx) break;
    rows_fn *f = p ? la_synth_rows_avx512 : la_synth_rows_generic;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      const double t0 = now();
      f(1, 0, rep * n, n, H, d, 1.0, LA_F32, b);
      best = fmin(best, now() - t0);
    }
    printf("timing (one thread, float32, information only): %s %.2f ns/element\n",
           p ? "AVX-512" : "generic", 1e9 * best / ((double)n * H * d));
  }
  free(b);
}

int main(void) {
  const int avx = la_synth_avx512_available();
  printf("AVX-512 build in use: %s\n", avx ? "yes" : "no (only the generic one is tested)");
  test_bits(avx);
  test_definition();
  test_math(avx);
  test_distribution();
  timing(avx);
  printf("test_synth: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
