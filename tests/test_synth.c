/* The synthetic generator (core/random/synth.c, core/random/synth_kernel.h; docs/design.md §2 "Generator"):
 * (a) the AVX-512, AVX2 and generic builds, and the vector and scalar lanes, give the same bits;
 * (b) rows do not depend on how [token0, n) is split, nor on d beyond their own columns;
 * (c) the kernel's float -2 log and sin/cos against long double libm (double where long
 *     double is software quad, ref_t below), in ulps of the float result;
 * (d) the values follow the definition (the uniforms of la_rng_u64) and are N(0, 1): moments
 *     within 6 sigma and the Kolmogorov-Smirnov distance under its 0.001 critical value.
 * Prints ns/element of each build (information only: no timing is checked). The builds the CPU
 * cannot run are skipped, and say so. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "linattn/core.h"
#include "../core/la_core_private.h"
#include "../core/random/synth_kernel.h"

#include "check.h"

/* The references of (c): long double where it is the x87's 64-bit format, in hardware. Where
 * it is IEEE quad (aarch64), gcc emulates it in software, far slower than double: test_math's
 * 2^24 sin/cos and 9.4e6 logs took over 5 minutes under qemu-aarch64 (jobs/aarch64_check.sh).
 * There they are double: 29 bits beyond float put a reference within 2^-28 ulp of the float
 * result, far inside the 1 and 2 ulp bounds. */
#if LDBL_MANT_DIG > 64
typedef double ref_t;
#define REF(f) f
#else
typedef long double ref_t;
#define REF(f) f##l
#endif

static uint64_t rs = 0x2545F4914F6CDD1DULL;
static uint64_t xrand(void) { /* xorshift64* */
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 0x2545F4914F6CDD1DULL;
}

typedef void rows_fn(uint64_t, int, int64_t, int64_t, int, int, double, la_dtype, void *);
typedef void log_fn(size_t, const float *, float *);
typedef void sincos_fn(size_t, const uint32_t *, float *, float *);

/* the vector builds, each compared with the generic one when the CPU can run it */
static struct {
  const char *name;
  rows_fn *rows;
  log_fn *log;
  sincos_fn *sincos;
  int avail;
} vb[] = {{"AVX2", la_synth_rows_avx2, la_synth_m2log_avx2, la_synth_sincos_avx2, 0},
          {"AVX-512", la_synth_rows_avx512, la_synth_m2log_avx512, la_synth_sincos_avx512, 0}};
enum { NVB = sizeof vb / sizeof vb[0] };

static void *gen(rows_fn *f, uint64_t seed, int t, int64_t t0, int64_t n, int H, int d,
                 double scale, la_dtype dt) {
  const size_t esz = dt == LA_F32 ? 4 : 8, sz = (size_t)n * H * d * esz;
  void *p = malloc(sz ? sz : 1);
  f(seed, t, t0, n, H, d, scale, dt, p);
  return p;
}

/* (a) and (b), for vector build b */
static void test_bits(int b) {
  static const struct { int64_t t0, n; int H, d; } sh[] = {
      {0, 37, 3, 64}, {1000003, 29, 2, 7}, {5, 11, 1, 1}, {0, 9, 2, 2},
      {123456789012LL, 5, 4, 129}, {77, 13, 2, 300}, {3, 17, 5, 33}};
  rows_fn *vec = vb[b].rows;
  int same_ab = 1, same_disp = 1, same_split = 1, same_prefix = 1;
  for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
    for (int di = 0; di < 2; di++) {
      const la_dtype dt = di ? LA_F32 : LA_F64;
      const size_t esz = di ? 4 : 8, row = (size_t)sh[k].H * sh[k].d * esz;
      const uint64_t seed = 0x5eed + k;
      const int t = (int)(k % 4);
      char *g = gen(la_synth_rows_generic, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      char *a = gen(vec, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      char *r = gen(la_synth_rows, seed, t, sh[k].t0, sh[k].n, sh[k].H, sh[k].d, 0.75, dt);
      same_ab &= !memcmp(g, a, sh[k].n * row);
      same_disp &= !memcmp(g, r, sh[k].n * row);
      /* random splits of [t0, t0 + n), each piece through both builds alternately */
      for (int rep = 0; rep < 4; rep++) {
        for (int64_t i = 0; i < sh[k].n;) {
          int64_t m = 1 + (int64_t)(xrand() % 7);
          if (m > sh[k].n - i) m = sh[k].n - i;
          char *p = gen((i + rep) % 2 ? vec : la_synth_rows_generic, seed, t, sh[k].t0 + i, m,
                        sh[k].H, sh[k].d, 0.75, dt);
          same_split &= !memcmp(p, g + i * row, m * row);
          free(p);
          i += m;
        }
      }
      /* a narrower d gives the first columns of each row: pair c lands in other vector
       * positions and in the scalar epilogues, and must not change */
      for (int d2 = 1; d2 < sh[k].d && d2 <= 40; d2++) {
        char *p = gen(la_synth_rows_generic, seed, t, sh[k].t0, 2, sh[k].H, d2, 0.75, dt);
        char *q = gen(vec, seed, t, sh[k].t0, 2, sh[k].H, d2, 0.75, dt);
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
  CHECK(same_ab, "%s and generic rows differ", vb[b].name);
  CHECK(same_disp, "la_synth_rows (threads, dispatch) differs from the generic rows");
  CHECK(same_split, "rows depend on the split of [token0, n) (%s and generic pieces)",
        vb[b].name);
  CHECK(same_prefix, "a narrower d changes the first columns (%s or generic)", vb[b].name);
  printf("bits: generic and %s, threaded, split and narrower rows identical\n", vb[b].name);
}

/* (d) the definition (synth_kernel.h, version 4): pair c of row (token, head) is the draw
 * x = la_rng_u64(seed, token, 2^60 | t << 32 | h, c), u1 = float((x >> 24) + 1) 2^-40,
 * u2 = (x mod 2^24) 2^-24, z = sqrt(-2 log u1) (cos, sin)(2 pi u2), column = scale z; here
 * against long double math on the same u1 and u2. The kernel computes z in float: -2 log
 * within 0.87 ulp (relative 0.87 2^-23), so sqrt(-2 log u1) within 0.44 2^-23 + the sqrt's
 * 2^-24; sin and cos within 2 ulp, at most 2^-23 absolute; the product's rounding 2^-24: in
 * all 2.44 2^-23 < 2.5 2^-23 of rad, and scale's product in double adds 2^-53. */
static void test_definition(void) {
  const int H = 3, d = 11, n = 400;
  const double scale = 1.3;
  double *g = gen(la_synth_rows_generic, 99, 2, 4242, n, H, d, scale, LA_F64);
  float *f = gen(la_synth_rows_generic, 99, 2, 4242, n, H, d, scale, LA_F32);
  double *g1 = gen(la_synth_rows_generic, 99, 2, 4242, n, H, d, 1.0, LA_F64);
  double worst = 0;
  int f32ok = 1, unitok = 1;
  for (int i = 0; i < n; i++)
    for (int h = 0; h < H; h++)
      for (int j = 0; j < d; j++) {
        const uint64_t key = (1ULL << 60) | (2ULL << 32) | (uint64_t)h;
        const uint64_t x = la_rng_u64(99, 4242 + (uint64_t)i, key, (uint64_t)(j / 2));
        const float u1 = (float)(double)((x >> 24) + 1) * 0x1p-40f;
        const long double u2 = ldexpl((long double)(x & 0xffffff), -24);
        const long double pi = 3.141592653589793238462643383279502884L;
        const long double rad = sqrtl(-2.0L * logl((long double)u1));
        const long double ref = scale * rad * (j % 2 ? sinl(2 * pi * u2) : cosl(2 * pi * u2));
        const size_t at = ((size_t)i * H + h) * d + j;
        worst = worse(worst, (double)(fabsl(g[at] - ref) / (scale * (rad > 0 ? rad : 1))));
        f32ok &= f[at] == (float)g[at];
        unitok &= g1[at] == (double)(float)g1[at] && g[at] == scale * g1[at];
      }
  CHECK(worst < 2.5 * 0x1p-23, "values differ from scale sqrt(-2 log u1) cos/sin(2 pi u2): "
        "%.3g of rad (bound %.3g)", worst, 2.5 * 0x1p-23);
  CHECK(f32ok, "float32 rows are not the float64 rows rounded");
  CHECK(unitok, "float64 rows at scale 1 are not float values, or scale z is not computed "
        "from them");
  printf("definition: max |x - ref| / (scale rad) = %.3g (%d values; bound %.3g), "
         "f32 = (float) f64, f64 at scale 1 = float z\n", worst, n * H * d, 2.5 * 0x1p-23);
  free(g);
  free(f);
  free(g1);
}

/* ulps of the float nearest ref between got and ref; an exact 0 must be hit exactly */
static double ulpsf(float got, ref_t ref) {
  if (ref == 0) return got == 0 ? 0 : INFINITY;
  int e;
  REF(frexp)(ref, &e);
  return (double)(REF(fabs)((ref_t)got - ref) / REF(ldexp)(1, e - 24));
}

/* sin, cos(2 pi m 2^-24) in ref_t: the quadrant split exactly (4 m 2^-24 = q + r), then
 * sinl/cosl of (pi/2) r, |r| <= 1/2, so the reference keeps its relative accuracy at the
 * zeros where sinl(2 pi u) would lose it to the rounding of 2 pi u. */
static void ref_sincos(uint32_t m, ref_t *s, ref_t *c) {
  const ref_t v = REF(ldexp)((ref_t)m, -22), q = REF(nearbyint)(v), r = v - q;
  const ref_t a = r * (ref_t)1.570796326794896619231321691639751442L;
  const ref_t S = REF(sin)(a), C = REF(cos)(a);
  switch ((int)q & 3) {
  case 0: *s = S, *c = C; break;
  case 1: *s = C, *c = -S; break;
  case 2: *s = -S, *c = -C; break;
  default: *s = -C, *c = S; break;
  }
}

/* (c) -2 log over every float of [1/2, 1] (where the result is smallest and its relative
 * error hardest) and 2^20 others of [2^-40, 1/2) (both ends, powers of two and their
 * neighbours, the reduction's switch at sqrt(2)/2 2^k, random floats of every binade); sin
 * and cos over all 2^24 arguments. (Every float of [2^-40, 1], 3.4e8 of them, was checked
 * once when version 4 was written: at most 0.867 ulp, at u = 0x1.48746cp-1; too slow here.) */
static void test_math(void) {
  enum { NL = (1 << 23) + 1 + (1 << 20), NS = 1 << 24 };
  float *u = malloc(NL * sizeof *u), *lg = malloc(NL * sizeof *lg), *la = malloc(NL * sizeof *la);
  uint32_t *m2 = malloc(NS * sizeof *m2);
  float *sg = malloc(NS * sizeof *sg), *cg = malloc(NS * sizeof *cg);
  float *sa = malloc(NS * sizeof *sa), *ca = malloc(NS * sizeof *ca);
  size_t k = 0;
  for (float x = 0.5f; x <= 1.0f; x = nextafterf(x, 2.0f)) u[k++] = x;
  for (int e = -40; e < 0; e++)
    for (int j = -3; j <= 3; j++) {
      u[k++] = nextafterf(ldexpf(1.0f, e), j < 0 ? 0.0f : 2.0f); /* 2^e and a neighbour */
      const float w = ldexpf(0.70710678f, e);
      u[k++] = j < 0 ? nextafterf(w, 0.0f) : j > 0 ? nextafterf(w, 1.0f) : w;
    }
  for (; k < NL; k++) {
    const int e = -40 + (int)(xrand() % 39); /* [2^e, 2^(e+1)) within [2^-40, 1/2) */
    u[k] = ldexpf(1.0f + (float)(xrand() >> 41) * 0x1p-23f, e);
  }
  for (uint32_t i = 0; i < NS; i++) m2[i] = i;

  la_synth_m2log_generic(NL, u, lg);
  la_synth_sincos_generic(NS, m2, sg, cg);
  for (int b = 0; b < NVB; b++) {
    if (!vb[b].avail) continue;
    vb[b].log(NL, u, la);
    vb[b].sincos(NS, m2, sa, ca);
    int same = !memcmp(lg, la, NL * sizeof *lg);
    same &= !memcmp(sg, sa, NS * sizeof *sg) && !memcmp(cg, ca, NS * sizeof *cg);
    CHECK(same, "the %s log/sincos differ from the generic ones", vb[b].name);
  }
  /* one value at a time: the scalar (non-vector) code */
  int scalar = 1;
  for (size_t i = 0; i < NL; i += 997) {
    float l1, s1, c1;
    la_synth_m2log_generic(1, u + i, &l1);
    la_synth_sincos_generic(1, m2 + i, &s1, &c1);
    scalar &= l1 == lg[i] && !memcmp(&s1, sg + i, 4) && !memcmp(&c1, cg + i, 4);
    for (int b = 0; b < NVB; b++) {
      if (!vb[b].avail) continue;
      vb[b].log(1, u + i, &l1);
      vb[b].sincos(1, m2 + i, &s1, &c1);
      scalar &= l1 == lg[i] && !memcmp(&s1, sg + i, 4) && !memcmp(&c1, cg + i, 4);
    }
  }
  CHECK(scalar, "the scalar log/sincos differ from the vector lanes");
  double elog = 0, esin = 0, ecos = 0;
  size_t wl = 0, ws = 0, wc = 0;
  for (size_t i = 0; i < NL; i++) {
    const double e = ulpsf(lg[i], -2 * REF(log)((ref_t)u[i]));
    if (!(e <= elog)) elog = e, wl = i;
  }
  for (size_t i = 0; i < NS; i++) {
    ref_t s, c;
    ref_sincos(m2[i], &s, &c);
    const double es = ulpsf(sg[i], s), ec = ulpsf(cg[i], c);
    if (!(es <= esin)) esin = es, ws = i;
    if (!(ec <= ecos)) ecos = ec, wc = i;
  }
  printf("-2 log(u), %d floats (all of [1/2, 1]): max %.3f ulp at u = %a\n", NL, elog, u[wl]);
  printf("sin(2 pi m 2^-24), all %d m: max %.3f ulp at m = %zu; cos: max %.3f ulp at m = %zu\n",
         NS, esin, ws, ecos, wc);
  CHECK(elog < 1.0, "-2 log: %.3f ulp", elog);
  CHECK(esin < 2.0 && ecos < 2.0, "sin %.3f ulp, cos %.3f ulp", esin, ecos);
  /* the ends: -2 log(1) = 0 exactly, -2 log(2^-40) = 80 ln 2 correctly rounded; u2 = 0, 1/4,
   * 1/2 give (0, 1), (1, 0), (0, -1) exactly */
  {
    const float e1[2] = {1.0f, 0x1p-40f};
    const uint32_t e2[3] = {0, 1u << 22, 1u << 23};
    float l[2], s[3], c[3];
    la_synth_m2log_generic(2, e1, l);
    la_synth_sincos_generic(3, e2, s, c);
    CHECK(l[0] == 0 && l[1] == (float)(-2.0L * logl(0x1p-40L)), "-2 log(1) = %a, -2 log(2^-40) = %a",
          l[0], l[1]);
    CHECK(s[0] == 0 && c[0] == 1 && s[1] == 1 && c[1] == 0 && s[2] == 0 && c[2] == -1,
          "sincos at 0, 1/4, 1/2: (%a %a) (%a %a) (%a %a)", s[0], c[0], s[1], c[1], s[2], c[2]);
  }
  free(u), free(lg), free(la), free(m2), free(sg), free(cg), free(sa), free(ca);
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

static void timing(void) {
  const int64_t n = 1 << 14;
  const int H = 4, d = 64;
  float *b = malloc((size_t)n * H * d * sizeof *b);
  for (int p = -1; p < NVB; p++) {
    if (p >= 0 && !vb[p].avail) continue;
    rows_fn *f = p < 0 ? la_synth_rows_generic : vb[p].rows;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      const double t0 = now();
      f(1, 0, rep * n, n, H, d, 1.0, LA_F32, b);
      best = fmin(best, now() - t0);
    }
    printf("timing (one thread, float32, information only): %s %.2f ns/element\n",
           p < 0 ? "generic" : vb[p].name, 1e9 * best / ((double)n * H * d));
  }
  free(b);
}

int main(void) {
  vb[0].avail = la_synth_avx2_available();
  vb[1].avail = la_synth_avx512_available();
  for (int b = 0; b < NVB; b++) {
    printf("%s build: %s\n", vb[b].name,
           vb[b].avail ? "tested against the generic one" : "not tested (this CPU lacks it)");
    if (vb[b].avail) test_bits(b);
  }
  test_definition();
  test_math();
  test_distribution();
  timing();
  printf("test_synth: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
