/* The error study's numerical pieces (core/engine/shardpass.c, core/softmax/studystats.c) against naive
 * float64 computations written here: features computed in the test from their definitions
 * (elu1; favor+ from the map's projection omega), the kernel and the quadratic form formed
 * explicitly, and the sign-flip test on Gram matrices with known answers and on simulated
 * seeds (its false-alarm rate at level 0.05, and its power). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/study.h"

static int passed, failed;
#define CHECK(c, ...)                      \
  do {                                     \
    if (c) {                               \
      passed++;                            \
    } else {                               \
      failed++;                            \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                 \
      printf("\n");                        \
    }                                      \
  } while (0)

static uint64_t rs = 12345;
static double unif(void) {
  rs = rs * 6364136223846793005ull + 1442695040888963407ull;
  return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif()); }

/* phi(x) of head h in float64, from the definitions (docs/design.md §2). */
static void naive_phi(la_map_kind map, const double *om, int m, int dk, double s,
                      const double *x, double *phi, int r) {
  if (map == LA_MAP_ELU1) {
    for (int c = 0; c < dk; c++) phi[c] = x[c] > 0 ? x[c] + 1 : exp(x[c]);
    return;
  }
  double n2 = 0;
  for (int c = 0; c < dk; c++) n2 += s * x[c] * x[c];
  for (int i = 0; i < m && i < r; i++) {
    double u = 0;
    for (int c = 0; c < dk; c++) u += om[i * dk + c] * sqrt(s) * x[c];
    phi[i] = exp(u - n2 / 2) / sqrt((double)m);
  }
}

static void quadform_case(la_map_kind map, int64_t n, int H, int dk, int dv, double in_scale,
                          int64_t stride) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.map = map, cfg.features = 24, cfg.seed = 3;
  const double s = 1 / sqrt((double)dk);
  cfg.scale = s;
  la_featmap fm;
  if (la_featmap_create(&cfg, H, dk, &fm) != LA_OK) {
    CHECK(0, "featmap_create");
    return;
  }
  const int r = la_featmap_width(fm);
  int m = 0;
  const double *om = la_featmap_projection(fm, &m);
  double *q = malloc(sizeof(double) * n * H * dk), *k = malloc(sizeof(double) * n * H * dk);
  double *v = malloc(sizeof(double) * n * H * dv);
  for (int64_t i = 0; i < n * H * dk; i++) q[i] = in_scale * gauss(), k[i] = in_scale * gauss();
  for (int64_t i = 0; i < n * H * dv; i++) v[i] = gauss();
  int64_t nq = 0, *rows = malloc(sizeof(int64_t) * n);
  for (int64_t i = 1; i < n; i += stride) rows[nq++] = i;
  double *qr = malloc(sizeof(double) * nq * H * dk);
  for (int64_t i = 0; i < nq; i++) memcpy(qr + i * H * dk, q + rows[i] * H * dk, sizeof(double) * H * dk);
  la_mode modes[2] = {LA_CAUSAL, LA_BIDIRECTIONAL};
  /* one shard holding every key: the quadratic form is map_out / map_den */
  la_shard_sums ss;
  CHECK(la_shard_sums_create(nq, H, dv, 2, &ss) == LA_OK, "shard_sums_create");
  la_status st = la_shard_pass(fm, s, 1, 0, n, k, v, rows, qr, modes, &ss, 2);
  CHECK(st == LA_OK, "shard_pass status %d", (int)st);
  const la_kernel_sums ks = ss.ks;
  /* naive */
  double *pq = malloc(sizeof(double) * r), *pk = malloc(sizeof(double) * n * r);
  double e2 = 0, r2 = 0, maxerr = 0, lderr = 0;
  for (int h = 0; h < H; h++) {
    const double *omh = om ? om + (size_t)h * m * dk : NULL;
    for (int64_t j = 0; j < n; j++) naive_phi(map, omh, m, dk, s, k + (j * H + h) * dk, pk + j * r, r);
    for (int64_t a = 0; a < nq; a++) {
      const int64_t i = rows[a];
      naive_phi(map, omh, m, dk, s, q + (i * H + h) * dk, pq, r);
      for (int mi = 0; mi < 2; mi++) {
        double num[64] = {0}, den = 0;
        const int64_t last = mi == 0 ? i : n - 1;
        for (int64_t j = 0; j <= last; j++) {
          double w = 0;
          for (int c = 0; c < r; c++) w += pq[c] * pk[j * r + c];
          den += w;
          for (int c = 0; c < dv; c++) num[c] += w * v[(j * H + h) * dv + c];
        }
        const int64_t x = (mi * nq + a) * H + h;
        for (int c = 0; c < dv; c++) {
          const double ref = num[c] / den, got = ss.map_out[x * dv + c] / ss.map_den[x];
          maxerr = fmax(maxerr, fabs(got - ref) / (1 + fabs(ref)));
        }
        /* khat = G e^{aq + c}: the log of the denominator */
        lderr = fmax(lderr, fabs(log(ss.map_den[x]) + ss.aq[a * H + h] + ss.c[h] - log(den)));
      }
      for (int64_t j = 0; j < n; j++) {
        double w = 0, e = 0;
        for (int c = 0; c < r; c++) w += pq[c] * pk[j * r + c];
        for (int c = 0; c < dk; c++) e += q[(i * H + h) * dk + c] * k[(j * H + h) * dk + c];
        e = exp(s * e);
        e2 += (w - e) * (w - e), r2 += e * e;
      }
    }
  }
  const double kr = sqrt(e2 / r2), got = sqrt(ks.err2 / ks.ref2);
  CHECK(maxerr < 1e-12, "%s n=%lld scale %g: quadratic form max error %.3g", la_map_name(map), (long long)n, in_scale, maxerr);
  CHECK(lderr < 1e-12, "%s: log denominator error %.3g", la_map_name(map), lderr);
  CHECK(fabs(got - kr) <= 1e-12 * kr, "%s n=%lld: kernel_rel_err %.15g, naive %.15g", la_map_name(map), (long long)n, got, kr);
  printf("quadform %s n=%lld H=%d scale %g rows %lld: max err %.2g, kernel_rel_err %.6g (naive %.6g)\n",
         la_map_name(map), (long long)n, H, in_scale, (long long)nq, maxerr, got, kr);
  la_shard_sums_free(&ss);
  free(q), free(k), free(v), free(rows), free(qr), free(pq), free(pk);
  la_featmap_destroy(&fm);
}

static void signflip_cases(void) {
  enum { S = 8 };
  double A[S * S];
  /* every seed the same vector: the strongest evidence, p = 2^-(S-1) */
  for (int i = 0; i < S * S; i++) A[i] = 1;
  CHECK(fabs(la_signflip_pvalue(A, S) - 1.0 / 128) < 1e-15, "equal vectors: p %g", la_signflip_pvalue(A, S));
  /* orthogonal vectors: T = 0 for every pattern, p = 1 */
  for (int i = 0; i < S * S; i++) A[i] = i % (S + 1) == 0;
  CHECK(la_signflip_pvalue(A, S) == 1, "orthogonal: p %g", la_signflip_pvalue(A, S));
  double mn, ns;
  la_gram_mean_noise(A, S, &mn, &ns);
  /* Y_s = e_s: mean norm sqrt(S)/S, noise sqrt(sum |e_s - mean|^2 / (S-1) / S) */
  CHECK(fabs(mn - sqrt(1.0 / S)) < 1e-15 && fabs(ns - sqrt(1.0 / S)) < 1e-15, "mean %g noise %g", mn, ns);
  /* simulated seeds, D = 200 values each: size and power at level 0.05 */
  enum { D = 200, REPS = 400 };
  static double Y[S][D];
  int rej0 = 0, rej1 = 0;
  for (int rep = 0; rep < REPS; rep++)
    for (int shifted = 0; shifted < 2; shifted++) {
      for (int s = 0; s < S; s++)
        for (int i = 0; i < D; i++) Y[s][i] = gauss() + (shifted ? 0.25 : 0);
      for (int s = 0; s < S; s++)
        for (int t = 0; t < S; t++) {
          double a = 0;
          for (int i = 0; i < D; i++) a += Y[s][i] * Y[t][i];
          A[s * S + t] = a;
        }
      const int rej = la_signflip_pvalue(A, S) <= 0.05;
      if (shifted) rej1 += rej;
      else rej0 += rej;
    }
  /* size: binomial(400, 0.05) has sd 4.4; 0.05 + 4 sd = 0.094 */
  CHECK(rej0 <= 0.094 * REPS, "false alarms %d of %d at level 0.05", rej0, REPS);
  /* a shift of 0.25 sd over 200 values is |mean|^2 = 12.5 against noise 200/8 = 25 per seed-mean */
  CHECK(rej1 >= 0.8 * REPS, "power %d of %d", rej1, REPS);
  printf("sign-flip test, S = %d: false alarms %d/%d, detections %d/%d\n", S, rej0, REPS, rej1, REPS);
  /* too few seeds: nothing can be detected at 0.05 */
  for (int i = 0; i < 16; i++) A[i] = 1;
  CHECK(la_signflip_pvalue(A, 4) == 0.125, "S = 4: p %g", la_signflip_pvalue(A, 4));
}

/* la_shard_pass over key shards (one of them longer than a key block, one empty), combined as
 * program/eval_sample.c does (max, rescale, sum), against naive float64 softmax, quadratic form
 * and weights TV (docs/design.md §8.2, §8.7). */
static void shard_case(la_map_kind map, int64_t n, int H, int dk, int dv, double in_scale) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.map = map, cfg.features = 16, cfg.seed = 5;
  const double s = 1 / sqrt((double)dk);
  cfg.scale = s;
  la_featmap fm;
  if (la_featmap_create(&cfg, H, dk, &fm) != LA_OK) {
    CHECK(0, "featmap_create");
    return;
  }
  const int r = la_featmap_width(fm);
  int m = 0;
  const double *om = la_featmap_projection(fm, &m);
  double *q = malloc(sizeof(double) * n * H * dk), *k = malloc(sizeof(double) * n * H * dk);
  double *v = malloc(sizeof(double) * n * H * dv);
  for (int64_t i = 0; i < n * H * dk; i++) q[i] = in_scale * gauss(), k[i] = in_scale * gauss();
  for (int64_t i = 0; i < n * H * dv; i++) v[i] = gauss();
  int64_t nq = 0, *rows = malloc(sizeof(int64_t) * n);
  for (int64_t i = 3; i < n; i += n / 37) rows[nq++] = i;
  double *qr = malloc(sizeof(double) * nq * H * dk);
  for (int64_t i = 0; i < nq; i++) memcpy(qr + i * H * dk, q + rows[i] * H * dk, sizeof(double) * H * dk);
  la_mode modes[2] = {LA_CAUSAL, LA_BIDIRECTIONAL};
  enum { NS = 3 };
  const int64_t cut[NS + 1] = {0, n / 5, n / 5, n}; /* the second shard is empty */
  la_shard_sums ss[NS];
  for (int p = 0; p < NS; p++) {
    CHECK(la_shard_sums_create(nq, H, dv, 2, &ss[p]) == LA_OK, "shard_sums_create");
    CHECK(la_shard_pass(fm, s, 1, cut[p], cut[p + 1] - cut[p], k + cut[p] * H * dk, v + cut[p] * H * dv,
                        rows, qr, modes, &ss[p], 2) == LA_OK, "shard_pass phase 1");
  }
  const int64_t rh = 2 * nq * H;
  la_shard_sums *a = &ss[0];
  for (int h = 0; h < H; h++) { /* combine into ss[0], as program/eval_sample.c across ranks */
    double C = -INFINITY;
    for (int p = 0; p < NS; p++) C = fmax(C, ss[p].c[h]);
    for (int p = 0; p < NS; p++) {
      const double f = ss[p].c[h] == -INFINITY ? 0 : exp(ss[p].c[h] - C);
      for (int64_t x = 0; x < 2 * nq; x++) {
        ss[p].map_den[x * H + h] *= f;
        for (int c = 0; c < dv; c++) ss[p].map_out[(x * H + h) * dv + c] *= f;
      }
    }
    for (int p = 0; p < NS; p++) ss[p].c[h] = C;
  }
  for (int64_t x = 0; x < rh; x++) {
    double M = -INFINITY;
    for (int p = 0; p < NS; p++) M = fmax(M, ss[p].sm_max[x]);
    double l = 0, d = 0, o[8] = {0}, mo[8] = {0};
    for (int p = 0; p < NS; p++) {
      const double f = ss[p].sm_max[x] == -INFINITY ? 0 : exp(ss[p].sm_max[x] - M);
      l += f * ss[p].sm_sum[x], d += ss[p].map_den[x];
      for (int c = 0; c < dv; c++) o[c] += f * ss[p].sm_out[x * dv + c], mo[c] += ss[p].map_out[x * dv + c];
    }
    for (int p = 0; p < NS; p++) {
      ss[p].sm_max[x] = M, ss[p].sm_sum[x] = l, ss[p].map_den[x] = d;
      for (int c = 0; c < dv; c++) ss[p].sm_out[x * dv + c] = o[c], ss[p].map_out[x * dv + c] = mo[c];
    }
  }
  for (int p = 0; p < NS; p++)
    CHECK(la_shard_pass(fm, s, 2, cut[p], cut[p + 1] - cut[p], k + cut[p] * H * dk, v + cut[p] * H * dv,
                        rows, qr, modes, &ss[p], 2) == LA_OK, "shard_pass phase 2");
  /* naive */
  double *pq = malloc(sizeof(double) * r), *pk = malloc(sizeof(double) * n * r);
  double *w = malloc(sizeof(double) * n), *e = malloc(sizeof(double) * n);
  double qerr = 0, serr = 0, tverr = 0;
  for (int h = 0; h < H; h++) {
    const double *omh = om ? om + (size_t)h * m * dk : NULL;
    for (int64_t j = 0; j < n; j++) naive_phi(map, omh, m, dk, s, k + (j * H + h) * dk, pk + j * r, r);
    for (int64_t b = 0; b < nq; b++) {
      const int64_t i = rows[b];
      naive_phi(map, omh, m, dk, s, q + (i * H + h) * dk, pq, r);
      double emax = -INFINITY;
      for (int64_t j = 0; j < n; j++) {
        double g = 0, x = 0;
        for (int c = 0; c < r; c++) g += pq[c] * pk[j * r + c];
        for (int c = 0; c < dk; c++) x += q[(i * H + h) * dk + c] * k[(j * H + h) * dk + c];
        w[j] = g, e[j] = s * x;
      }
      for (int mi = 0; mi < 2; mi++) {
        const int64_t last = mi == 0 ? i : n - 1, x = (mi * nq + b) * H + h;
        emax = -INFINITY;
        for (int64_t j = 0; j <= last; j++) emax = fmax(emax, e[j]);
        double W = 0, L = 0, tv = 0;
        for (int64_t j = 0; j <= last; j++) W += w[j], L += exp(e[j] - emax);
        for (int c = 0; c < dv; c++) {
          double num = 0, sm = 0;
          for (int64_t j = 0; j <= last; j++)
            num += w[j] * v[(j * H + h) * dv + c], sm += exp(e[j] - emax) * v[(j * H + h) * dv + c];
          qerr = fmax(qerr, fabs(a->map_out[x * dv + c] / a->map_den[x] - num / W) / (1 + fabs(num / W)));
          serr = fmax(serr, fabs(a->sm_out[x * dv + c] / a->sm_sum[x] - sm / L) / (1 + fabs(sm / L)));
        }
        for (int64_t j = 0; j <= last; j++) tv += fabs(exp(e[j] - emax) / L - w[j] / W);
        double got = 0;
        for (int p = 0; p < NS; p++) got += ss[p].tv[x];
        tverr = fmax(tverr, fabs(got - tv));
      }
    }
  }
  CHECK(qerr < 1e-12 && serr < 1e-12 && tverr < 1e-12,
        "shards %s n=%lld: quadratic form %.3g, softmax %.3g, TV %.3g", la_map_name(map), (long long)n, qerr, serr, tverr);
  printf("shard_pass %s n=%lld H=%d scale %g rows %lld (3 shards, one empty): max err quad %.2g softmax %.2g tv %.2g\n",
         la_map_name(map), (long long)n, H, in_scale, (long long)nq, qerr, serr, tverr);
  for (int p = 0; p < NS; p++) la_shard_sums_free(&ss[p]);
  free(q), free(k), free(v), free(rows), free(qr), free(pq), free(pk), free(w), free(e);
  la_featmap_destroy(&fm);
}
int main(void) {
  quadform_case(LA_MAP_ELU1, 200, 2, 8, 5, 1.0, 1);
  quadform_case(LA_MAP_ELU1, 130, 1, 5, 3, 2.0, 7);
  quadform_case(LA_MAP_FAVOR, 150, 2, 6, 4, 1.0, 1);
  quadform_case(LA_MAP_FAVOR, 190, 3, 6, 4, 3.0, 3);
  shard_case(LA_MAP_ELU1, 2300, 2, 4, 3, 1.0); /* a shard of 1840 keys: one block; n/5 = 460 */
  shard_case(LA_MAP_FAVOR, 5000, 2, 4, 3, 1.5); /* a shard of 4000 keys: two blocks of 2048 */
  signflip_cases();
  printf("test_study: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
