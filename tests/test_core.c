/* Unit tests of core/ pieces that the NumPy oracle cannot see directly: the scan operator's
 * algebra (§4), the counter-based generator (§2), orthogonal blocks of favor+orf, the
 * feature-map stabilizer, and the denominator histogram. Prints "N passed, M failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"
#include "../core/la_core_private.h"
#include "../core/simd/vexp.h"
#include "../core/la_crc64.h"
#include "../core/engine/denominator.h"

#include "check.h"

static void fill(la_state *s, int h, double m, int f, unsigned seed) {
  size_t rsz = (size_t)s->r * (s->dv + 1);
  for (size_t i = 0; i < rsz; i++) s->sz[h * rsz + i] = la_rng_normal(seed, 1, 2, i);
  s->m[h] = m;
  s->f[h] = f;
}

/* True summary of head 0 = e^m (S|z), compared elementwise. */
static double diff(const la_state *a, const la_state *b) {
  size_t rsz = (size_t)a->r * (a->dv + 1);
  double d = 0;
  for (size_t i = 0; i < rsz; i++) {
    double x = a->m[0] == -INFINITY ? 0 : a->sz[i] * exp(a->m[0]);
    double y = b->m[0] == -INFINITY ? 0 : b->sz[i] * exp(b->m[0]);
    d = worse(d, fabs(x - y) / fmax(1.0, fabs(y)));
  }
  return d + (a->f[0] != b->f[0]);
}

static void test_scan_algebra(void) {
  la_state a, b, c, ab_c, a_bc, t, id;
  la_state_init(&a, 1, 3, 2); la_state_init(&b, 1, 3, 2); la_state_init(&c, 1, 3, 2);
  la_state_init(&ab_c, 1, 3, 2); la_state_init(&a_bc, 1, 3, 2); la_state_init(&t, 1, 3, 2);
  la_state_init(&id, 1, 3, 2);
  const double ms[3] = {0.5, 3.0, -2.0};
  for (int fa = 0; fa < 2; fa++)
    for (int fb = 0; fb < 2; fb++)
      for (int fc = 0; fc < 2; fc++) {
        fill(&a, 0, ms[0], fa, 1); fill(&b, 0, ms[1], fb, 2); fill(&c, 0, ms[2], fc, 3);
        /* (a+b)+c */
        la_state_reset(&ab_c); la_state_combine(&ab_c, &a); la_state_combine(&ab_c, &b);
        la_state_combine(&ab_c, &c);
        /* a+(b+c) */
        la_state_reset(&t); la_state_combine(&t, &b); la_state_combine(&t, &c);
        la_state_reset(&a_bc); la_state_combine(&a_bc, &a); la_state_combine(&a_bc, &t);
        CHECK(diff(&ab_c, &a_bc) < 1e-14, "associativity f=(%d,%d,%d): %g", fa, fb, fc,
              diff(&ab_c, &a_bc));
        /* a segment start hides everything before it */
        if (fc) {
          la_state_reset(&t); la_state_combine(&t, &c);
          CHECK(diff(&ab_c, &t) < 1e-15, "segment reset at c");
        }
      }
  /* identity on both sides, and identity (+) identity stays identity without NaN */
  fill(&a, 0, 1.25, 0, 7);
  la_state_reset(&t); la_state_combine(&t, &a); la_state_combine(&t, &id);
  CHECK(diff(&t, &a) == 0, "right identity");
  la_state_reset(&t); la_state_combine(&t, &id);
  CHECK(t.m[0] == -INFINITY && t.sz[0] == 0 && !isnan(t.sz[0]), "identity (+) identity");
  /* non-commutative with a flag */
  fill(&a, 0, 0, 0, 1); fill(&b, 0, 0, 1, 2);
  la_state_reset(&t); la_state_combine(&t, &a); la_state_combine(&t, &b);
  la_state_reset(&ab_c); la_state_combine(&ab_c, &b); la_state_combine(&ab_c, &a);
  CHECK(diff(&t, &ab_c) > 1e-3, "operator must not commute when b starts a segment");
  /* huge log-scale gap: the smaller summary underflows to 0 relative, never NaN/inf */
  fill(&a, 0, 0, 0, 1); fill(&b, 0, 2000, 0, 2);
  la_state_reset(&t); la_state_combine(&t, &a); la_state_combine(&t, &b);
  CHECK(t.m[0] == 2000 && isfinite(t.sz[0]), "log-scale combine with a gap of 2000");
  la_state_free(&a); la_state_free(&b); la_state_free(&c); la_state_free(&ab_c);
  la_state_free(&a_bc); la_state_free(&t); la_state_free(&id);
}

/* The MPI operator's in-place form (inout <- in (+) inout, dist/comm.c) is bitwise the
 * operator on a copy of in, for every flag and every empty/non-empty pair, and for a huge gap. */
static void test_scan_in_place(void) {
  enum { RSZ = 7 };
  const double ms[4] = {-INFINITY, 0.75, -3.5, 2000};
  int bad = 0, cases = 0;
  for (int ia = 0; ia < 4; ia++)
    for (int ib = 0; ib < 4; ib++)
      for (int fa = 0; fa < 2; fa++)
        for (int fb = 0; fb < 2; fb++) {
          double a[RSZ], b[RSZ], ref[RSZ], am = ms[ia], bm = ms[ib], rm = am;
          for (int i = 0; i < RSZ; i++) {
            a[i] = ia ? la_rng_normal(3, 1, (uint64_t)ia, (uint64_t)i) : 0.0;
            b[i] = ib ? la_rng_normal(4, 1, (uint64_t)ib, (uint64_t)i) : 0.0;
            ref[i] = a[i];
          }
          int rf = fa, af = fa, bf = fb;
          la_state_combine_head(ref, &rm, &rf, b, &bm, &bf, RSZ); /* ref = copy of a, (+) b */
          la_state_combine_head_right(a, &am, &af, b, &bm, &bf, RSZ);
          cases++;
          bad += memcmp(ref, b, sizeof ref) != 0 || memcmp(&rm, &bm, sizeof rm) != 0 || rf != bf;
        }
  CHECK(bad == 0, "la_state_combine_head_right differs from the copy form in %d of %d cases",
        bad, cases);
}

static void test_rng(void) {
  CHECK(la_rng_u64(1, 2, 3, 4) == la_rng_u64(1, 2, 3, 4), "rng is a pure function");
  CHECK(la_rng_u64(1, 2, 3, 4) != la_rng_u64(2, 2, 3, 4), "seed changes the draw");
  CHECK(la_rng_u64(1, 2, 3, 4) != la_rng_u64(1, 2, 3, 5), "counter changes the draw");
  /* moments of 200000 normals: mean 0 +- 0.01, variance 1 +- 0.02 (> 4 sigma margins) */
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    double x = la_rng_normal(42, 0, 0, (uint64_t)i);
    s += x;
    s2 += x * x;
  }
  double mean = s / n, var = s2 / n - mean * mean;
  CHECK(fabs(mean) < 0.01 && fabs(var - 1) < 0.02, "normal moments mean %g var %g", mean, var);
}

static void test_orf(void) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.map = LA_MAP_FAVOR_ORF;
  cfg.features = 20; /* two full blocks of 8 and a partial block of 4 */
  la_featmap fm;
  CHECK(la_featmap_create(&cfg, 2, 8, &fm) == LA_OK, "orf create");
  int m;
  const double *om = la_featmap_projection(fm, &m);
  double worst = 0;
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < m; i++)
      for (int j = i + 1; j < m && j / 8 == i / 8; j++) {
        const double *a = om + ((size_t)h * m + i) * 8, *b = om + ((size_t)h * m + j) * 8;
        double dot = 0, na = 0, nb = 0;
        for (int c = 0; c < 8; c++) { dot += a[c] * b[c]; na += a[c] * a[c]; nb += b[c] * b[c]; }
        worst = worse(worst, fabs(dot) / sqrt(na * nb));
      }
  CHECK(worst < 1e-12, "rows within an orf block are orthogonal (worst cosine %g)", worst);
  CHECK(memcmp(om, om + (size_t)m * 8, sizeof(double) * 8) != 0, "heads get different projections");
  la_featmap_destroy(&fm);
  CHECK(fm == NULL, "destroy sets the handle to NULL");
}

/* favor+ with a huge input: phi_s stays finite and phi_s * e^a equals the direct formula. */
static void test_stabilizer(void) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.map = LA_MAP_FAVOR;
  cfg.features = 8;
  la_featmap fm;
  la_featmap_create(&cfg, 1, 4, &fm);
  double x[4] = {300, -200, 100, 50}, phi[8], a;
  la_featmap_eval(fm, LA_F64, 0, 1, x, 4, phi, &a);
  int m;
  const double *om = la_featmap_projection(fm, &m);
  double s = 0.5, n2 = 0, maxrel = 0; /* s = 1/sqrt(4) */
  for (int c = 0; c < 4; c++) n2 += s * x[c] * x[c];
  for (int i = 0; i < m; i++) {
    double u = 0;
    for (int c = 0; c < 4; c++) u += om[i * 4 + c] * sqrt(s) * x[c];
    double logphi = u - n2 / 2 - 0.5 * log((double)m); /* log of the true feature */
    double got = log(phi[i]) + a;
    if (phi[i] > 1e-300) maxrel = worse(maxrel, fabs(got - logphi) / fmax(1, fabs(logphi)));
    CHECK(isfinite(phi[i]) && phi[i] <= 1.0, "stabilized feature %d finite and <= 1", i);
  }
  CHECK(maxrel < 1e-13, "log phi_s + a equals the direct exponent (rel %g)", maxrel);
  la_featmap_destroy(&fm);
}

static void test_den_hist(void) {
  la_den_stats st;
  la_den_stats_init(&st);
  /* emulate 1001 rows: 1000 at den 1000 and one tiny at 1e-5, plus two zeros */
  st.rows = 1003;
  st.count_nonpositive = 2;
  st.hist[(LA_DEN_HIST_BINS / 2) + (int)floor(log2(1000.0) * LA_DEN_HIST_PER_OCTAVE)] = 1000;
  st.hist[(LA_DEN_HIST_BINS / 2) + (int)floor(log2(1e-5) * LA_DEN_HIST_PER_OCTAVE)] = 1;
  double med = la_den_stats_median(&st);
  CHECK(fabs(log2(med) - log2(1000.0)) <= 1.0 / LA_DEN_HIST_PER_OCTAVE, "median %g ~ 1000", med);
  CHECK(la_den_stats_count_small(&st) == 3, "count_small = 2 zeros + 1 tiny, got %lld",
        (long long)la_den_stats_count_small(&st));
  la_den_stats_free(&st);
}

static void test_config(void) {
  la_config cfg;
  char err[256];
  la_config_default(&cfg);
  cfg.map = LA_MAP_IDENTITY;
  CHECK(why(la_config_check(&cfg, 8), err, sizeof err) == LA_ERR_ARG && strstr(err, "signed"),
        "identity normalized without allow_signed is refused: %s", err);
  cfg.allow_signed = 1;
  CHECK(why(la_config_check(&cfg, 8), err, sizeof err) == LA_OK, "identity with allow_signed");
  cfg.allow_signed = 0;
  cfg.normalize = 0;
  CHECK(why(la_config_check(&cfg, 8), err, sizeof err) == LA_OK, "identity unnormalized");
  CHECK(la_status_exit_code(LA_ERR_DENOMINATOR) == 3 && la_status_exit_code(LA_ERR_FORMAT) == 2 &&
            la_status_exit_code(LA_OK) == 0 && la_status_exit_code(LA_ERR_NOMEM) == 1,
        "exit codes of docs/cli.md");
}

/* The vectorizable exp against libm: at most 2 ulp over the range where the result is
 * normal, exactly 0 below the clamp, +inf above. */
static void test_vexp(void) {
  double worstf = 0, worstd = 0;
  for (int i = 0; i <= 2000000; i++) {
    float xf = -87.0f + (float)i * (88.0f + 87.0f) / 2000000.0f;
    float yf = la_vexpf(xf), rf = expf(xf);
    worstf = worse(worstf, fabsf(yf - rf) / (nextafterf(rf, INFINITY) - rf));
    double xd = -708.0 + i * (709.0 + 708.0) / 2000000.0;
    double yd = la_vexp(xd), rd = exp(xd);
    worstd = worse(worstd, fabs(yd - rd) / (nextafter(rd, INFINITY) - rd));
  }
  CHECK(worstf <= 2.0, "la_vexpf within 2 ulp of expf (worst %.2f ulp)", worstf);
  CHECK(worstd <= 2.0, "la_vexp within 2 ulp of exp (worst %.2f ulp)", worstd);
  CHECK(la_vexpf(-200.0f) == 0.0f && la_vexp(-1000.0) == 0.0, "underflow gives 0");
  CHECK(isinf(la_vexpf(100.0f)) && isinf(la_vexp(800.0)), "overflow gives inf");
  CHECK(la_vexpf(0.0f) == 1.0f && la_vexp(0.0) == 1.0, "exp(0) = 1 exactly");
}

static double unif(unsigned seed, int a, int b, int c) {
  return (double)(la_rng_u64(seed, (uint64_t)a, (uint64_t)b, (uint64_t)c) >> 11) * 0x1p-53;
}

/* Exact summaries (§4.7): any order and bracketing of the same addends gives the same bits,
 * the rounded sum is within an ulp of the exact one, cancellation within the 128-bit window
 * is exact, flags drop what came before, and a non-finite addend poisons the head. */
static void test_exact(void) {
  enum { R = 2, DV = 2, RSZ = R * (DV + 1), K = 400 };
  const size_t len = la_xhead_len(R, DV);
  int64_t *a = calloc(len, 8), *b = calloc(len, 8), *parts = calloc(4 * len, 8);
  static double val[K][RSZ], mm[K];
  __int128 exact[RSZ] = {0}; /* sum of k 2^(e+40), e in [-40, 40]: below 2^110 */
  long double lexact[RSZ] = {0};
  unsigned seed = 7;
  for (int i = 0; i < K; i++) {
    mm[i] = (unif(seed, 3, 0, i) - 0.5) * 60; /* for the stabilized sums */
    for (int j = 0; j < RSZ; j++) {
      int64_t kk = (int64_t)(unif(seed, 1, i, j) * 2097152.0) - 1048576;
      int e = (int)(unif(seed, 2, i, j) * 81) - 40;
      val[i][j] = ldexp((double)kk, e);
      exact[j] += (__int128)kk * ((__int128)1 << (e + 40)); /* no shift of a negative */
      lexact[j] += (long double)val[i][j] * expl((long double)mm[i]);
    }
  }
  /* unstabilized: forward, backward, and four parts combined in two bracketings */
  double s1[RSZ], s2[RSZ], s3[RSZ], m1, m2, m3;
  int f1, f2, f3;
  la_xstate one;
  la_xstate_init(&one, 1, R, DV);
  memcpy(a, one.x, len * 8);
  memcpy(b, one.x, len * 8);
  for (int p = 0; p < 4; p++) memcpy(parts + p * len, one.x, len * 8);
  for (int i = 0; i < K; i++) la_xhead_add(a, RSZ, val[i], 0.0, 0);
  for (int i = K - 1; i >= 0; i--) la_xhead_add(b, RSZ, val[i], 0.0, 0);
  CHECK(!memcmp(a, b, len * 8), "forward and backward sums differ in their bins");
  for (int i = 0; i < K; i++) la_xhead_add(parts + (i * 7 % 4) * len, RSZ, val[i], 0.0, 0);
  memcpy(b, parts + 3 * len, len * 8); /* p0 + (p1 + (p2 + p3)), right forms */
  la_xhead_combine_right(parts + 2 * len, b, RSZ);
  la_xhead_combine_right(parts + 1 * len, b, RSZ);
  la_xhead_combine_right(parts, b, RSZ);
  la_xhead_combine(parts, parts + 1 * len, RSZ); /* (p0 + p1) + (p2 + p3) */
  la_xhead_combine(parts + 2 * len, parts + 3 * len, RSZ);
  la_xhead_combine(parts, parts + 2 * len, RSZ);
  la_xhead_round(a, RSZ, 0, s1, &m1, &f1);
  la_xhead_round(b, RSZ, 0, s2, &m2, &f2);
  la_xhead_round(parts, RSZ, 0, s3, &m3, &f3);
  double worst = 0;
  for (int j = 0; j < RSZ; j++) {
    CHECK(!memcmp(&s1[j], &s2[j], 8) && !memcmp(&s1[j], &s3[j], 8),
          "element %d: %.17g %.17g %.17g differ in bits", j, s1[j], s2[j], s3[j]);
    double want = ldexp((double)exact[j], -40); /* one rounding of the exact sum */
    worst = worse(worst, fabs(s1[j] - want) / fabs(want));
  }
  CHECK(m1 == 0 && f1 == 0, "unstabilized sums keep m = 0 (m = %g, f = %d)", m1, f1);
  CHECK(worst <= 0x1p-52, "rounded exact sum off by %.3g relative (at most 2^-52)", worst);
  /* stabilized: (val_i, m_i) pairs in two orders, against a long double sum */
  memcpy(a, one.x, len * 8);
  memcpy(b, one.x, len * 8);
  for (int i = 0; i < K; i++) la_xhead_add(a, RSZ, val[i], mm[i], 0);
  for (int i = K - 1; i >= 0; i--) la_xhead_add(b, RSZ, val[i], mm[i], 0);
  CHECK(!memcmp(a, b, len * 8), "stabilized sums in two orders differ in their bins");
  la_xhead_round(a, RSZ, 1, s1, &m1, &f1);
  worst = 0;
  for (int j = 0; j < RSZ; j++)
    worst = worse(worst, (double)(fabsl((long double)s1[j] * expl((long double)m1) - lexact[j]) /
                                  fabsl(lexact[j])));
  CHECK(worst <= 1e-13, "stabilized exact sum off by %.3g relative", worst);
  /* cancellation: 2^100 + 1 - 2^100 = 1 exactly (float64 gives 0) */
  double big[RSZ], unit[RSZ], nbig[RSZ];
  for (int j = 0; j < RSZ; j++) big[j] = 0x1p100, unit[j] = 1.0, nbig[j] = -0x1p100;
  memcpy(a, one.x, len * 8);
  la_xhead_add(a, RSZ, big, 0.0, 0);
  la_xhead_add(a, RSZ, unit, 0.0, 0);
  la_xhead_add(a, RSZ, nbig, 0.0, 0);
  la_xhead_round(a, RSZ, 0, s1, &m1, &f1);
  CHECK(s1[0] == 1.0 && s1[RSZ - 1] == 1.0, "2^100 + 1 - 2^100 = %g, not 1", s1[0]);
  /* a flag drops what came before it */
  la_xhead_add(a, RSZ, unit, 0.0, 1);
  la_xhead_add(a, RSZ, unit, 0.0, 0);
  la_xhead_round(a, RSZ, 0, s1, &m1, &f1);
  CHECK(s1[0] == 2.0 && f1 == 1, "after a flagged addend: %g (f = %d), not 2 (f = 1)", s1[0], f1);
  /* the identity rounds to m = -inf; a non-finite addend to NaN */
  la_xhead_round(one.x, RSZ, 1, s1, &m1, &f1);
  CHECK(m1 == -INFINITY && s1[0] == 0, "the identity rounds to m = %g", m1);
  unit[1] = INFINITY;
  la_xhead_add(a, RSZ, unit, 0.0, 0);
  la_xhead_round(a, RSZ, 0, s1, &m1, &f1);
  CHECK(isnan(s1[0]) && isnan(s1[1]), "a non-finite addend gives %g, not NaN", s1[1]);
  la_xstate_free(&one);
  free(a);
  free(b);
  free(parts);
}

/* CRC-64/XZ: the catalogue's check value, incremental = whole, and one flipped bit seen. */
static void test_crc64(void) {
  CHECK(la_crc64("123456789", 9) == 0x995dc9bbdf1939faULL, "crc64 check value %016llx",
        (unsigned long long)la_crc64("123456789", 9));
  CHECK(la_crc64_update(la_crc64("1234", 4), "56789", 5) == la_crc64("123456789", 9),
        "crc64 incremental");
  CHECK(la_crc64("", 0) == 0, "crc64 of nothing");
  char b[64];
  for (int i = 0; i < 64; i++) b[i] = (char)(i * 7);
  uint64_t c = la_crc64(b, sizeof b);
  b[17] ^= 4;
  CHECK(la_crc64(b, sizeof b) != c, "crc64 sees a flipped bit");
}

/* den_bin16 (the histogram bin without log2) against floor(16 log2 x) in long double, over
 * 2e5 normal values spread over the whole exponent range, and at the powers of 2. */
static void test_den_bin16(void) {
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    double u = (double)(la_rng_u64(7, 3, 0, (uint64_t)i) >> 11) * 0x1p-53; /* [0, 1) */
    double x = ldexp(1.0 + u, (int)(i % 2045) - 1022);
    long want = (long)floorl(16.0L * log2l((long double)x));
    long got = den_bin16(x);
    /* within an ulp of a boundary the two may differ by one bin: count only real misses */
    long double f = 16.0L * log2l((long double)x) - (long double)want;
    if (got != want && !(f < 1e-12L || f > 1 - 1e-12L)) bad++;
  }
  CHECK(bad == 0, "den_bin16: %d of 200000 bins differ from floor(16 log2 x)", bad);
  for (int e = -1022; e <= 1023; e += 7)
    CHECK(den_bin16(ldexp(1.0, e)) == 16L * e, "den_bin16(2^%d) = %ld", e, den_bin16(ldexp(1.0, e)));
}

/* la_check_finite (core/base/finite.c): the first non-finite value by (token, head, column), at
 * every position of small blocks, in both dtypes, for NaN, +inf and -inf; and the extremes
 * that are finite (largest, smallest subnormal, -0) pass. */
static void test_finite(void) {
  const int n = 5, H = 3, d = 7, tot = n * H * d;
  float xf[5 * 3 * 7];
  double xd[5 * 3 * 7];
  const double bads[3] = {NAN, INFINITY, -INFINITY};
  int wrong = 0;
  for (int dt = 0; dt < 2; dt++)
    for (int b = 0; b < 3; b++)
      for (int at = 0; at < tot; at++) {
        for (int i = 0; i < tot; i++) { /* finite extremes everywhere else */
          const double ok[4] = {dt ? 1.7976931348623157e308 : 3.4028234663852886e38, -0.0,
                                dt ? 4.9406564584124654e-324 : 1.401298464324817e-45, -1.5};
          xd[i] = ok[i % 4];
          xf[i] = (float)ok[i % 4];
        }
        xd[at] = bads[b];
        xf[at] = (float)bads[b];
        if (at + 3 < tot) xd[at + 3] = xf[at + 3] = NAN; /* a later one is not reported */
        int64_t bt = -1;
        int bh = -1, bc = -1;
        la_status st = la_check_finite(dt ? LA_F64 : LA_F32, dt ? (void *)xd : (void *)xf, n, H,
                                       d, 100, &bt, &bh, &bc);
        wrong += st != LA_ERR_NONFINITE || bt != 100 + at / (H * d) || bh != at / d % H ||
                 bc != at % d;
      }
  CHECK(wrong == 0, "la_check_finite: %d of %d bad values misplaced or missed", wrong, 6 * tot);
  for (int dt = 0; dt < 2; dt++) {
    for (int i = 0; i < tot; i++) {
      const double ok[4] = {dt ? 1.7976931348623157e308 : 3.4028234663852886e38, -0.0,
                            dt ? 4.9406564584124654e-324 : 1.401298464324817e-45, -1.5};
      xd[i] = ok[i % 4];
      xf[i] = (float)ok[i % 4];
    }
    int64_t bt;
    int bh, bc;
    CHECK(la_check_finite(dt ? LA_F64 : LA_F32, dt ? (void *)xd : (void *)xf, n, H, d, 0, &bt,
                          &bh, &bc) == LA_OK,
          "la_check_finite refuses finite extremes (%s)", dt ? "f64" : "f32");
  }
}

int main(void) {
  test_finite();
  test_crc64();
  test_den_bin16();
  test_vexp();
  test_scan_algebra();
  test_scan_in_place();
  test_rng();
  test_orf();
  test_stabilizer();
  test_den_hist();
  test_config();
  test_exact();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
