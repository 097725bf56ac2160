/* Per-head decay (--decay, docs/design.md §1.2) against a float64 quadratic reference written
 * here: for query i, head h and every key j it may read (§3: causal j <= i or bidirectional,
 * same segment), the weight gamma_h^|i-j| phi(q_i).phi(k_j) with the maps of
 * test_api_naive.h (no engine code). The reference takes each row relative to its largest
 * decayed key scale, max_j a_k(j) + |i-j| ln gamma, so it neither overflows nor underflows.
 *
 * Tolerances, row by row (max |o - ref| over the row / max |ref| over the row):
 *  - float64, 1e-12; float32, 1e-5, on the same float32 inputs (test_api.c's reasoning: the
 *    chunk products have K <= C + r terms; the decay factors are <= 1 and add one rounding).
 * Cases: both modes, several maps, both precisions, one gamma / a list per head / RetNet's,
 * segments, blocks carried through the state or through two keys-pass summaries joined by
 * la_state_combine (the scan element's cumulative log-decay), bidirectional blocks from
 * each other's forward and reverse summaries; the long-decay test (gamma = 0.5 over 2^16
 * tokens, and over 2^20 with --long 20, large keys early and late); gamma = 1 - 1e-9 against the undecayed engine; gamma = 1
 * bitwise the undecayed path; the refusals. Prints "N passed, M failed". */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"

#include "check.h"
#include "test_api_naive.h"

#define TOL64 1e-12
#define TOL32 1e-5

typedef struct {
  const double *list; /* gamma per head (n = 1: all heads), or NULL with retnet */
  int n, retnet;
} decay_spec;

static double gamma_of(const decay_spec *d, int h) {
  if (d->retnet) return 1.0 - ldexp(1.0, -5 - h);
  return d->list[d->n == 1 ? 0 : h];
}

/* Reference rows [i0, i1) by step (out [n, H, dv]; others untouched). With gamma_h < 1 the
 * keys farther than W = (max a_k - min a_k + 800) / -ln gamma_h from row i are skipped: their
 * weight relative to the row's own key (j = i, always read) is below e^-800, which is 0 in
 * float64, so the sum is the same; this keeps rows of a 2^20-token sequence cheap. */
static void ref_rows(const nv_map *f, const nv_op *op, int64_t n, int dv, const double *pq,
                     const double *aq, const double *pk, const double *ak, const double *v,
                     const decay_spec *d, int64_t i0, int64_t i1, int64_t step, double *out) {
  const int H = f->heads, r = f->r;
  for (int h = 0; h < H; h++) {
    const double lg = log(gamma_of(d, h));
    double amin = INFINITY, amax = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
      amin = fmin(amin, ak[j * H + h]);
      amax = fmax(amax, ak[j * H + h]);
    }
    const double Wd = lg < 0 ? (amax - amin + 800.0) / -lg + 1 : (double)n;
    const int64_t W = Wd < (double)n ? (int64_t)Wd : n;
    for (int64_t i = i0; i < i1; i += step) {
      const int64_t jlo = i - W > 0 ? i - W : 0, jhi = i + W + 1 < n ? i + W + 1 : n;
      double A = -INFINITY, den = 0, num[64] = {0};
      for (int64_t j = jlo; j < jhi; j++)
        if (nv_reads(op, i, j)) {
          const double e = ak[j * H + h] + (double)llabs(i - j) * lg;
          A = e > A ? e : A;
        }
      const double *p = pq + ((size_t)i * H + h) * r;
      for (int64_t j = jlo; j < jhi; j++) {
        if (!nv_reads(op, i, j)) continue;
        const double *pj = pk + ((size_t)j * H + h) * r;
        double dot = 0;
        for (int l = 0; l < r; l++) dot += p[l] * pj[l];
        const double w = dot * exp(ak[j * H + h] + (double)llabs(i - j) * lg - A);
        for (int c = 0; c < dv; c++) num[c] += w * v[((size_t)j * H + h) * dv + c];
        den += w;
      }
      double *o = out + ((size_t)i * H + h) * dv;
      for (int c = 0; c < dv; c++) /* zero-empty: a query with no features (dpfp) reads 0 */
        o[c] = !op->normalize ? num[c] * exp(aq[i * H + h] + A)
               : den == 0 && op->pol == LA_DEN_ZERO_EMPTY ? 0 : num[c] / den;
    }
  }
}

/* Worst row error over rows [i0, i1) by step. */
static double row_err(const double *x, const double *ref, int64_t i0, int64_t i1, int64_t step,
                      int H, int dv, int64_t *worst_row) {
  double worst = 0;
  for (int64_t i = i0; i < i1; i += step)
    for (int h = 0; h < H; h++) {
      const size_t o = ((size_t)i * H + h) * dv;
      double e = nv_relerr_floor(x + o, ref + o, (size_t)dv, 1e-300);
      if (!(e <= worst)) *worst_row = i;
      worst = worse(worst, e);
    }
  return worst;
}

typedef struct {
  la_mode mode;
  la_map_kind map;
  la_dtype dt;
  decay_spec d;
  int64_t n;
  int H, dk, dv, chunk, threads, normalize;
  const int64_t *off;
  int64_t noff;
  int64_t split; /* causal: two la_engine_apply blocks [0, split), [split, n); 0: la_forward */
  /* with split: the second block's prefix is not the first apply's state but the summary of
   * [0, split) as the ranks form it (§4.1, §1.2): la_engine_accumulate of two halves, each
   * from the identity, joined by la_state_combine (the cumulative log-decay at work) */
  int via_summary;
  int64_t window; /* causal sliding window W (0: none) */
} dcase;

static la_config cfg_of(const dcase *t) {
  la_config c;
  la_config_default(&c);
  c.mode = t->mode;
  c.map = t->map;
  c.features = t->map == LA_MAP_DPFP ? 1 : 16;
  c.chunk = t->chunk;
  c.threads = t->threads;
  c.normalize = t->normalize;
  c.allow_signed = la_map_is_signed(t->map);
  /* relu and dpfp rows can have no features (den = 0): written as zeros, as the reference */
  if (t->map == LA_MAP_RELU || t->map == LA_MAP_DPFP) c.den_policy = LA_DEN_ZERO_EMPTY;
  c.decay = t->d.list;
  c.decay_n = t->d.n;
  c.decay_retnet = t->d.retnet;
  c.window = t->window;
  return c;
}

/* Inputs [n, H, d]: 0.8 N(0, 1) (relu 1 + 0.5 N, dpfp 0.8 + 0.5 N, identity 1 + 0.3 N), f32 rounded. */
static void inputs(const dcase *t, double *q, double *k, double *v, uint64_t seed) {
  double sc = 0.8, of = 0.0; /* relu, dpfp: mostly positive, so no den is 0 */
  if (t->map == LA_MAP_RELU) sc = 0.5, of = 1.0;
  if (t->map == LA_MAP_DPFP) sc = 0.5, of = 0.8;
  if (t->map == LA_MAP_IDENTITY) sc = 0.3, of = 1.0;
  const size_t nq = (size_t)t->n * t->H * t->dk, nv = (size_t)t->n * t->H * t->dv;
  nv_fill(q, nq, seed, sc, of);
  nv_fill(k, nq, seed + 1, sc, of);
  nv_fill(v, nv, seed + 2, 1.0, 0.0);
  if (t->dt == LA_F32) {
    nv_round_f32(q, nq);
    nv_round_f32(k, nq);
    nv_round_f32(v, nv);
  }
}

/* The engine's outputs of case t on inputs (q, k, v) into y (float64); LA_OK or the status. */
static la_status engine_out(const dcase *t, const la_config *c, const double *q, const double *k,
                            const double *v, double *y, nv_map *f) {
  la_featmap fm = NULL;
  la_engine e = NULL;
  la_status st = la_featmap_create(c, t->H, t->dk, &fm);
  if (st == LA_OK) st = la_engine_create(c, fm, t->dt, t->dv, &e);
  if (st == LA_OK && t->off) st = la_engine_set_segments(e, t->off, t->noff);
  const size_t nq = (size_t)t->n * t->H * t->dk, nv = (size_t)t->n * t->H * t->dv;
  void *Q = nv_to_dtype(t->dt, q, nq), *K = nv_to_dtype(t->dt, k, nq), *V = nv_to_dtype(t->dt, v, nv);
  void *O = nv_to_dtype(t->dt, y, nv);
  if (st == LA_OK && t->split > 0 && t->mode == LA_BIDIRECTIONAL) {
    /* two blocks, each reading the other's summary (§1.2 "Across ranks"): [0, split) reads the
     * reverse summary of [split, n), formed in two halves joined by la_state_combine in the
     * reverse scan's order (the later half first); [split, n) reads the forward summary of
     * [0, split) */
    const size_t es = t->dt == LA_F32 ? 4 : 8, sp = (size_t)t->split;
    const int64_t mid = t->split + (t->n - t->split) / 2;
    const size_t ok = (size_t)t->H * t->dk, ov = (size_t)t->H * t->dv;
    la_state pre = {0}, suf = {0}, half = {0}, none = {0};
    const int r = la_featmap_width(fm);
    st = la_state_init(&pre, t->H, r, t->dv);
    if (st == LA_OK) st = la_state_init(&suf, t->H, r, t->dv);
    if (st == LA_OK) st = la_state_init(&half, t->H, r, t->dv);
    if (st == LA_OK) st = la_state_init(&none, t->H, r, t->dv);
    if (st == LA_OK) st = la_engine_accumulate(e, 0, t->split, K, V, &pre);
    if (st == LA_OK)
      st = la_engine_accumulate_reverse(e, mid, t->n - mid, (char *)K + es * (size_t)mid * ok,
                                        (char *)V + es * (size_t)mid * ov, &suf);
    if (st == LA_OK)
      st = la_engine_accumulate_reverse(e, t->split, mid - t->split, (char *)K + es * sp * ok,
                                        (char *)V + es * sp * ov, &half);
    if (st == LA_OK) la_state_combine(&suf, &half); /* reverse order: the later half first */
    if (st == LA_OK) st = la_engine_apply_segmented(e, 0, t->split, Q, K, V, &none, &suf, O, NULL);
    if (st == LA_OK)
      st = la_engine_apply_segmented(e, t->split, t->n - t->split, (char *)Q + es * sp * ok,
                                     (char *)K + es * sp * ok, (char *)V + es * sp * ov, &pre,
                                     &none, (char *)O + es * sp * ov, NULL);
    la_state_free(&pre), la_state_free(&suf), la_state_free(&half), la_state_free(&none);
  } else if (st == LA_OK && t->split > 0) {
    la_state s;
    const size_t es = t->dt == LA_F32 ? 4 : 8, sp = (size_t)t->split;
    st = la_state_init(&s, t->H, la_featmap_width(fm), t->dv);
    if (st == LA_OK) st = la_engine_apply(e, 0, t->split, Q, K, V, &s, O, NULL);
    if (st == LA_OK && t->via_summary == 3) { /* the overlap's form: local rows, corrected */
      const size_t rows = (size_t)(t->n - t->split) * t->H;
      void *raw = malloc(es * rows * (t->dv + 1));
      double *lsc = malloc(sizeof(double) * rows);
      la_state loc = {0};
      st = la_state_init(&loc, t->H, la_featmap_width(fm), t->dv);
      if (st == LA_OK)
        st = la_engine_apply_local(e, t->split, t->n - t->split, (char *)Q + es * sp * t->H * t->dk,
                                   (char *)K + es * sp * t->H * t->dk,
                                   (char *)V + es * sp * t->H * t->dv, &loc, raw, lsc);
      if (st == LA_OK)
        st = la_engine_correct(e, t->split, t->n - t->split, (char *)Q + es * sp * t->H * t->dk,
                               &s, raw, lsc, (char *)O + es * sp * t->H * t->dv, NULL);
      la_state_free(&loc);
      free(raw), free(lsc);
      la_state_free(&s);
      goto done;
    }
    if (st == LA_OK && t->via_summary) {
      la_state b = {0};
      const int64_t h1 = t->split / 2;
      la_state_reset(&s);
      st = la_state_init(&b, t->H, la_featmap_width(fm), t->dv);
      if (st == LA_OK) st = la_engine_accumulate(e, 0, h1, K, V, &s);
      /* 2: the second half accumulated onto the first's summary (the state decays over it) */
      la_state *into = t->via_summary == 2 ? &s : &b;
      if (st == LA_OK)
        st = la_engine_accumulate(e, h1, t->split - h1, (char *)K + es * (size_t)h1 * t->H * t->dk,
                                  (char *)V + es * (size_t)h1 * t->H * t->dv, into);
      for (int h = 0; st == LA_OK && t->via_summary == 1 && h < t->H; h++) {
        const double want = (double)(t->split - h1) * log(la_engine_decay(e, h));
        CHECK(fabs(b.a[h] - want) <= 1e-12 * fabs(want),
              "the summary's cumulative log-decay, head %d: %.17g, want %.17g", h, b.a[h], want);
      }
      if (st == LA_OK && t->via_summary == 1) la_state_combine(&s, &b);
      la_state_free(&b);
    }
    if (st == LA_OK)
      st = la_engine_apply(e, t->split, t->n - t->split, (char *)Q + es * sp * t->H * t->dk,
                           (char *)K + es * sp * t->H * t->dk, (char *)V + es * sp * t->H * t->dv,
                           &s, (char *)O + es * sp * t->H * t->dv, NULL);
    la_state_free(&s);
  } else if (st == LA_OK) {
    st = la_forward(e, t->n, Q, K, V, O, NULL);
  }
done:
  if (st == LA_OK) nv_from_dtype(t->dt, O, y, nv);
  if (f && fm) *f = nv_map_of(c, fm, t->H, t->dk);
  free(Q), free(K), free(V), free(O);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
  return st;
}

/* Case t against the reference on rows [i0, n) by step; returns the worst row error. */
static double run_case(const dcase *t, int64_t i0, int64_t step, uint64_t seed, const char *what,
                       void (*edit)(const dcase *, double *k)) {
  const la_config c = cfg_of(t);
  const size_t nq = (size_t)t->n * t->H * t->dk, nv = (size_t)t->n * t->H * t->dv;
  double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nq);
  double *v = malloc(sizeof(double) * nv), *y = calloc(nv, sizeof(double));
  double *ref = calloc(nv, sizeof(double));
  inputs(t, q, k, v, seed);
  if (edit) edit(t, k);
  nv_map f = {0};
  char err[512];
  la_status st = why(engine_out(t, &c, q, k, v, y, &f), err, sizeof err);
  CHECK(st == LA_OK, "%s: %s", what, err);
  double worst = INFINITY;
  if (st == LA_OK) {
    const int r = f.r, H = t->H;
    double *pq = calloc((size_t)t->n * H * r, sizeof(double)), *aq = calloc((size_t)t->n * H, sizeof(double));
    double *pk = calloc((size_t)t->n * H * r, sizeof(double)), *ak = calloc((size_t)t->n * H, sizeof(double));
    nv_features(&f, t->n, q, pq, aq);
    nv_features(&f, t->n, k, pk, ak);
    nv_op op = {t->mode, t->window, t->off, t->noff, t->normalize, c.den_policy, 0};
    ref_rows(&f, &op, t->n, t->dv, pq, aq, pk, ak, v, &t->d, i0, t->n, step, ref);
    int64_t wr = -1;
    worst = row_err(y, ref, i0, t->n, step, H, t->dv, &wr);
    const double tol = t->dt == LA_F32 ? TOL32 : TOL64;
    CHECK(worst <= tol, "%s: worst row error %.3g > %.0e (token %lld)", what, worst, tol,
          (long long)wr);
    free(pq), free(aq), free(pk), free(ak);
  }
  free((void *)f.omega);
  free(q), free(k), free(v), free(y), free(ref);
  return worst;
}

static const char *dname(const decay_spec *d) {
  return d->retnet ? "retnet" : d->n == 1 ? "one gamma" : "per-head list";
}

/* Modes x maps x precisions x decays x segments, and blocks through the state. */
static void test_matrix(void) {
  static const double one[] = {0.9}, list[] = {0.5, 0.97, 1.0};
  const decay_spec ds[] = {{one, 1, 0}, {list, 3, 0}, {NULL, 0, 1}};
  static const int64_t off[] = {0, 37, 38, 150, 201};
  const la_map_kind maps[] = {LA_MAP_ELU1, LA_MAP_FAVOR, LA_MAP_RELU, LA_MAP_TAYLOR2,
                              LA_MAP_DPFP, LA_MAP_IDENTITY};
  int cases = 0;
  double worst[2] = {0, 0};
  for (int mode = 0; mode < 2; mode++)
    for (int mi = 0; mi < 6; mi++)
      for (int dt = 0; dt < 2; dt++)
        for (int di = 0; di < 3; di++)
          for (int seg = 0; seg < 2; seg++) {
            dcase t = {(la_mode)mode, maps[mi], (la_dtype)dt, ds[di], 201, 3, 4, 5,
                       seg ? 16 : 0, 1 + (di == 1), maps[mi] != LA_MAP_IDENTITY,
                       seg ? off : NULL, seg ? 5 : 0, 0, 0, 0};
            if (maps[mi] == LA_MAP_TAYLOR2) t.dk = 3;
            char what[160];
            snprintf(what, sizeof what, "%s %s %s %s%s", mode ? "bidirectional" : "causal",
                     la_map_name(maps[mi]), dt ? "f64" : "f32", dname(&ds[di]),
                     seg ? " segments" : "");
            worst[dt] = worse(worst[dt], run_case(&t, 0, 1, 11 + (uint64_t)mi, what, NULL));
            cases++;
            if (mode == LA_CAUSAL && di == 0) { /* two blocks, the state carried between */
              t.split = seg ? 38 : 100;
              strncat(what, " in two blocks", sizeof what - strlen(what) - 1);
              worst[dt] = worse(worst[dt], run_case(&t, 0, 1, 11 + (uint64_t)mi, what, NULL));
              cases++;
              t.via_summary = 3; /* the second block local, then corrected by the prefix */
              strncat(what, ", corrected", sizeof what - strlen(what) - 1);
              worst[dt] = worse(worst[dt], run_case(&t, 0, 1, 11 + (uint64_t)mi, what, NULL));
              cases++;
              t.via_summary = 0;
            }
            if (mode == LA_BIDIRECTIONAL) { /* two blocks, each from the other's summary */
              t.split = 77;
              strncat(what, " in two blocks from summaries", sizeof what - strlen(what) - 1);
              worst[dt] = worse(worst[dt], run_case(&t, 0, 1, 11 + (uint64_t)mi, what, NULL));
              cases++;
            }
            if (mode == LA_CAUSAL) { /* sliding windows: shorter than a chunk, and across the
                                      * queue of chunk summaries and the far edge */
              for (int wi = 0; wi < 2; wi++) {
                dcase tw = t;
                tw.split = 0, tw.via_summary = 0, tw.window = wi ? 70 : 5;
                char ww[200];
                snprintf(ww, sizeof ww, "%s window %lld", what, (long long)tw.window);
                worst[dt] = worse(worst[dt], run_case(&tw, 0, 1, 11 + (uint64_t)mi, ww, NULL));
                cases++;
              }
            }
            if (mode == LA_CAUSAL && di > 0) { /* the second block from summaries */
              t.split = seg ? 150 : 120;
              t.via_summary = di;
              strncat(what, di == 1 ? " from two summaries" : " from one summary in two passes",
                      sizeof what - strlen(what) - 1);
              worst[dt] = worse(worst[dt], run_case(&t, 0, 1, 11 + (uint64_t)mi, what, NULL));
              cases++;
            }
          }
  printf("matrix: %d cases, worst row error f32 %.3g, f64 %.3g\n", cases, worst[0], worst[1]);
}

/* Large keys early (t = 100) and late (t = 3 n / 4): x 6 their entries. */
static void big_keys(const dcase *t, double *k) {
  const int64_t at[] = {100, 3 * t->n / 4};
  for (int a = 0; a < 2; a++)
    for (int c = 0; c < t->H * t->dk; c++) k[(size_t)at[a] * t->H * t->dk + c] *= 6.0;
}

/* gamma = 0.5 over 2^lg2 tokens with large keys: finite and exact to rounding on sampled rows
 * (about a thousand spread over the sequence, and all rows around the late large key). */
static void test_long(int lg2) {
  static const double half[] = {0.5};
  for (int mi = 0; mi < 2; mi++)
    for (int dt = 0; dt < 2; dt++) {
      const la_map_kind map = mi ? LA_MAP_FAVOR : LA_MAP_ELU1;
      dcase t = {LA_CAUSAL, map, (la_dtype)dt, {half, 1, 0}, (int64_t)1 << lg2, 1, 8, 4, 0, 2,
                 1, NULL, 0, 0, 0, 0};
      char what[128];
      snprintf(what, sizeof what, "long decay %s %s N = 2^%d", la_map_name(map),
               dt ? "f64" : "f32", lg2);
      const int64_t step = lg2 > 16 ? 997 : 61; /* some 1,000 rows of every length */
      double w = run_case(&t, 0, step, 5, what, big_keys);
      dcase u = t;
      u.n = 3 * t.n / 4 + 200; /* the rows right after the late key, all of them */
      w = worse(w, run_case(&u, 3 * t.n / 4 - 50, 1, 5, what, big_keys));
      dcase b = t;
      b.mode = LA_BIDIRECTIONAL;
      snprintf(what, sizeof what, "long decay bidirectional %s %s N = 2^%d", la_map_name(map),
               dt ? "f64" : "f32", lg2);
      w = worse(w, run_case(&b, 0, step, 5, what, big_keys));
      printf("long decay %s %s N = 2^%d: worst row error %.3g\n", la_map_name(map),
             dt ? "f64" : "f32", lg2, w);
    }
}

/* gamma = 1 - 1e-9: the decayed reference to rounding, and the undecayed engine within
 * rounding plus the exact difference of the weights, |1 - gamma^d| <= n (1 - gamma). gamma = 1:
 * the undecayed path, bitwise. */
static void test_near_one(void) {
  static const double near[] = {1.0 - 1e-9}, unit[] = {1.0};
  for (int mode = 0; mode < 2; mode++)
    for (int dt = 0; dt < 2; dt++) {
      dcase t = {(la_mode)mode, LA_MAP_ELU1, (la_dtype)dt, {near, 1, 0}, 301, 2, 4, 3, 16, 1, 1,
                 NULL, 0, 0, 0, 0};
      run_case(&t, 0, 1, 9, mode ? "near 1, bidirectional" : "near 1, causal", NULL);
      const size_t nq = (size_t)t.n * t.H * t.dk, nv = (size_t)t.n * t.H * t.dv;
      double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nq);
      double *v = malloc(sizeof(double) * nv), *y0 = calloc(nv, 8), *y1 = calloc(nv, 8),
             *y2 = calloc(nv, 8);
      inputs(&t, q, k, v, 9);
      la_config c = cfg_of(&t);
      CHECK(engine_out(&t, &c, q, k, v, y1, NULL) == LA_OK, "near 1 engine");
      c.decay = NULL, c.decay_n = 0;
      CHECK(engine_out(&t, &c, q, k, v, y0, NULL) == LA_OK, "undecayed engine");
      int64_t wr = -1;
      const double e = row_err(y1, y0, 0, t.n, 1, t.H, t.dv, &wr);
      const double bound = (dt ? TOL64 : TOL32) + 2.0 * t.n * 1e-9;
      CHECK(e <= bound, "gamma = 1 - 1e-9 vs undecayed (%s, %s): %.3g > %.3g",
            mode ? "bidirectional" : "causal", dt ? "f64" : "f32", e, bound);
      c.decay = unit, c.decay_n = 1;
      CHECK(engine_out(&t, &c, q, k, v, y2, NULL) == LA_OK, "gamma = 1 engine");
      CHECK(memcmp(y0, y2, sizeof(double) * nv) == 0, "gamma = 1 is bitwise the undecayed "
            "operator (%s, %s)", mode ? "bidirectional" : "causal", dt ? "f64" : "f32");
      free(q), free(k), free(v), free(y0), free(y1), free(y2);
    }
}

/* Refusals, with their reasons. */
static void test_refusals(void) {
  la_config c;
  char err[512];
  static const double bad[][1] = {{0.0}, {1.5}, {-0.5}, {NAN}, {INFINITY}};
  for (int i = 0; i < 5; i++) {
    la_config_default(&c);
    c.decay = bad[i], c.decay_n = 1;
    CHECK(why(la_config_check(&c, 4), err, sizeof err) == LA_ERR_ARG && strstr(err, "--decay"),
          "gamma %g refused (%s)", bad[i][0], err);
  }
  static const double ok[] = {0.9}, two[] = {0.9, 0.8};
  la_config_default(&c);
  c.decay = ok, c.decay_n = 1, c.reproducible = 1;
  CHECK(why(la_config_check(&c, 4), err, sizeof err) == LA_ERR_UNSUPPORTED &&
            strstr(err, "--reproducible"), "decay with --reproducible refused (%s)", err);
  la_config_default(&c);
  c.decay = two, c.decay_n = 2;
  la_featmap fm = NULL;
  la_engine e = NULL;
  CHECK(la_featmap_create(&c, 3, 4, &fm) == LA_OK, "featmap");
  CHECK(why(la_engine_create(&c, fm, LA_F64, 2, &e), err, sizeof err) == LA_ERR_ARG && !e &&
            strstr(err, "2 values for 3 heads"), "a list of 2 for 3 heads refused (%s)", err);
  c.decay = ok, c.decay_n = 1;
  CHECK(la_engine_create(&c, fm, LA_F64, 2, &e) == LA_OK && la_engine_decayed(e), "engine");
  la_state s;
  la_state_init(&s, 3, la_featmap_width(fm), 2);
  double x[3 * 4 * 4] = {0}, g[3 * 4 * 2] = {0}, o[3 * 4 * 2];
  la_engine_destroy(&e);
  c.mode = LA_BIDIRECTIONAL;
  CHECK(la_engine_create(&c, fm, LA_F64, 2, &e) == LA_OK, "bidirectional engine");
  CHECK(la_backward(e, 4, x, x, g, g, x, x, g, NULL) == LA_OK,
        "the bidirectional backward with decay (docs/design.md §1.2 \"The backward\")");
  (void)o;
  la_state_free(&s);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
}

/* test_decay [--long LOG2]: with --long, only the long-decay test at N = 2^LOG2 (ctest's
 * test_decay_long20; the default run keeps 2^16, which qemu can afford). */
int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--long")) {
    const int lg2 = atoi(argv[2]);
    if (lg2 < 10 || lg2 > 24) {
      fprintf(stderr, "test_decay: --long takes 10..24\n");
      return 2;
    }
    test_long(lg2);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
  }
  test_refusals();
  test_near_one();
  test_matrix();
  test_long(16);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
