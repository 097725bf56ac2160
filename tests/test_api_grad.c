/* Unit tests of la_backward (include/linattn/grad.h): dQ, dK, dV of L = sum(out * G) against
 * the naive float64 chain rule of tests/test_api_naive.h (nv_backward, no engine code), for
 * every map with a written-out gradient, both modes, normalized (error, add:E, clamp:E) and
 * unnormalized, packed sequences, causal windows, both precisions, chunk lengths from 1 to
 * more than n, thread counts 1-3, and dV rows shorter and longer than the 24-byte side rows.
 * The tape (la_forward_taped, la_backward_taped) is checked on every case and both kernels
 * against the same naive gradients, and la_engine_set_check_finite on non-finite entries.
 * The naive gradient is itself checked first against central differences of the naive
 * forward (nv_forward), so the reference is independent of the engine and of itself.
 *
 * Tolerances (normwise, max |x - ref| / max |ref| per gradient tensor):
 *  - float64 1e-12 and float32 1e-5, as in test_api.c: the gradient is again sums of
 *    O(n + r) products per entry. The subtraction g.(v_j - out_i) cancels by at most a
 *    factor ~|v|/|v - out| ~ 3 for these inputs; the worst errors seen are printed.
 *  - central differences, 1e-6: step h = 1e-5 |x|, truncation O(h^2) ~ 1e-10 and rounding
 *    O(u |L| / h) ~ 1e-11 relative; 1e-6 only has to tell a right formula from a wrong one.
 * Prints "N passed, M failed"; the exit status is M != 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"

#include "check.h"
#include "test_api_naive.h"

#define TOL64 1e-12
#define TOL32 1e-5
#define TOL_FD 1e-6

static double worst_err[2], worst_fd;
static double tol_of(la_dtype dt) { return dt == LA_F32 ? TOL32 : TOL64; }
static size_t esz(la_dtype dt) { return dt == LA_F32 ? sizeof(float) : sizeof(double); }

typedef struct {
  const char *name;
  la_mode mode;
  la_map_kind map;
  int normalize;
  la_den_policy pol;
  double eps;
  int64_t window;
  int segments;
  double xscale, xoffset;
} gcase;

static const int64_t OFF[] = {0, 1, 6, 16, 17, 30, 37};
static const int NOFF = 7;

static nv_op op_for(const gcase *gc) {
  nv_op op = {gc->mode, gc->window, gc->segments ? OFF : NULL, gc->segments ? NOFF : 0,
              gc->normalize, gc->pol, gc->eps};
  return op;
}

static double loss(const nv_map *f, const nv_op *op, int64_t n, int dv, const double *q,
                   const double *k, const double *v, const double *g, double *out) {
  nv_forward(f, op, n, dv, q, k, v, out, NULL);
  double L = 0;
  for (size_t i = 0; i < (size_t)n * f->heads * dv; i++) L += out[i] * g[i];
  return L;
}

/* Central differences of the naive forward against nv_backward, every input entry. */
static void fd_check(const gcase *gc, const nv_map *f, int64_t n, int dv, double *q, double *k,
                     double *v, const double *g) {
  const int H = f->heads, dk = f->dk;
  nv_op op = op_for(gc);
  size_t nq = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *dq = malloc(sizeof(double) * nq), *dk_ = malloc(sizeof(double) * nq);
  double *dv_ = malloc(sizeof(double) * nvv), *out = malloc(sizeof(double) * nvv);
  double *fd = malloc(sizeof(double) * (nq > nvv ? nq : nvv));
  nv_backward(f, &op, n, dv, q, k, v, g, dq, dk_, dv_);
  double *xs[3] = {q, k, v}, *an[3] = {dq, dk_, dv_};
  size_t cnt[3] = {nq, nq, nvv};
  const char *nm[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; t++) {
    for (size_t i = 0; i < cnt[t]; i++) {
      double x0 = xs[t][i], h = 1e-5 * fmax(1.0, fabs(x0));
      xs[t][i] = x0 + h;
      double lp = loss(f, &op, n, dv, q, k, v, g, out);
      xs[t][i] = x0 - h;
      double lm = loss(f, &op, n, dv, q, k, v, g, out);
      xs[t][i] = x0;
      fd[i] = (lp - lm) / (2 * h);
    }
    double e = nv_relerr_floor(an[t], fd, cnt[t], gc->window == 1 && t < 2 ? 1.0 : 0.0);
    worst_fd = e > worst_fd ? e : worst_fd;
    CHECK(e <= TOL_FD, "naive %s of %s against central differences: rel err %.3g", nm[t], gc->name, e);
  }
  free(dq); free(dk_); free(dv_); free(out); free(fd);
}

/* The tape on engine e: refused with a clear status where the engine cannot keep one (a
 * window, bidirectional); else the forward's outputs against the naive forward (ref_out) and
 * the gradients against the naive ones (refs), at the precision's tolerance; a tape of another
 * call (other n) and an unfilled tape are refused. */
static void tape_case(const gcase *gc, la_engine e, la_dtype dt, int dv, int64_t n, int H,
                      int dk, const void *qe, const void *ke, const void *ve, const void *ge,
                      const double *ref_out, const double *const refs[3], int64_t violations) {
  const size_t nq = (size_t)n * H * dk, nvv = (size_t)n * H * dv, bytes = la_tape_size(e, n);
  const int want = gc->mode == LA_CAUSAL && !(gc->window > 0 && gc->window < n);
  CHECK(want == (bytes > 0), "la_tape_size %s: %zu bytes", gc->name, bytes);
  void *tape = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : aligned_alloc(64, 64);
  void *out = malloc(esz(dt) * nvv), *dq = malloc(esz(dt) * nq), *dk_ = malloc(esz(dt) * nq);
  void *dv_ = malloc(esz(dt) * nvv);
  double *got = malloc(sizeof(double) * (nq > nvv ? nq : nvv));
  la_den_stats st;
  la_den_stats_init(&st);
  memset(out, 0xff, esz(dt) * nvv);
  la_status s = la_forward_taped(e, n, qe, ke, ve, out, tape, &st);
  if (!want) {
    CHECK(s == LA_ERR_UNSUPPORTED && strstr(la_error_message(), "no tape with"),
          "la_forward_taped %s: status %d (%s), want unsupported", gc->name, (int)s,
          la_error_message());
  } else if (violations) {
    CHECK(st.violations == violations, "la_forward_taped %s: %lld violations, want %lld",
          gc->name, (long long)st.violations, (long long)violations);
  } else {
    nv_from_dtype(dt, out, got, nvv);
    double er = nv_relerr_floor(got, ref_out, nvv, 0.0);
    CHECK(s == LA_OK && er <= tol_of(dt), "la_forward_taped %s %s %s chunk %d: status %d "
          "outputs rel err %.3g", gc->name, la_dtype_name(dt), la_engine_kernels(e),
          la_engine_chunk(e), (int)s, er);
    memset(dq, 0xff, esz(dt) * nq); /* NaN: every entry must be written */
    memset(dk_, 0xff, esz(dt) * nq);
    memset(dv_, 0xff, esz(dt) * nvv);
    s = la_backward_taped(e, n, qe, ke, ve, ge, out, tape, dq, dk_, dv_);
    const void *gs[3] = {dq, dk_, dv_};
    const size_t cnt[3] = {nq, nq, nvv};
    const char *nm[3] = {"dQ", "dK", "dV"};
    for (int t = 0; t < 3; t++) {
      nv_from_dtype(dt, gs[t], got, cnt[t]);
      er = nv_relerr_floor(got, refs[t], cnt[t], 0.0);
      if (er > worst_err[dt] && er < INFINITY) worst_err[dt] = er;
      CHECK(s == LA_OK && er <= tol_of(dt), "la_backward_taped %s %s %s dv %d chunk %d: %s "
            "status %d rel err %.3g > %.0g", gc->name, la_dtype_name(dt), la_engine_kernels(e),
            dv, la_engine_chunk(e), nm[t], (int)s, er, tol_of(dt));
    }
    s = la_backward_taped(e, n - 1, qe, ke, ve, ge, out, tape, dq, dk_, dv_);
    CHECK(s == LA_ERR_ARG && strstr(la_error_message(), "another call"),
          "la_backward_taped %s with another n: status %d (%s)", gc->name, (int)s,
          la_error_message());
    memset(tape, 0, 64);
    s = la_backward_taped(e, n, qe, ke, ve, ge, out, tape, dq, dk_, dv_);
    CHECK(s == LA_ERR_ARG && strstr(la_error_message(), "not filled"),
          "la_backward_taped %s on an unfilled tape: status %d (%s)", gc->name, (int)s,
          la_error_message());
  }
  la_den_stats_free(&st);
  free(tape); free(out); free(dq); free(dk_); free(dv_); free(got);
}

static void run_case(const gcase *gc, la_dtype dt, int dv, int do_fd, int *nrun) {
  const int64_t n = 37;
  const int H = 2, dk = 4, m = 5;
  const size_t nq = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nq);
  double *v = malloc(sizeof(double) * nvv), *g = malloc(sizeof(double) * nvv);
  uint64_t seed = 4000 + 31 * (uint64_t)gc->map + 7 * (uint64_t)gc->mode + (uint64_t)dv;
  nv_fill(q, nq, seed, gc->xscale, gc->xoffset);
  nv_fill(k, nq, seed + 1, gc->xscale, gc->xoffset);
  nv_fill(v, nvv, seed + 2, 1.0, 0.0);
  nv_fill(g, nvv, seed + 3, 1.0, 0.0);
  if (dt == LA_F32) {
    nv_round_f32(q, nq);
    nv_round_f32(k, nq);
    nv_round_f32(v, nvv);
    nv_round_f32(g, nvv);
  }
  la_config c0;
  la_config_default(&c0);
  c0.mode = gc->mode;
  c0.map = gc->map;
  c0.features = m;
  c0.seed = 9;
  c0.normalize = gc->normalize;
  c0.den_policy = gc->pol;
  c0.den_eps = gc->eps;
  c0.window = gc->window;
  c0.allow_signed = la_map_is_signed(gc->map);
  la_featmap fm;
  la_featmap_create(&c0, H, dk, &fm);
  nv_map f = nv_map_make(gc->map, H, dk, m, 0, la_featmap_projection(fm, NULL));
  nv_op op = op_for(gc);
  if (do_fd) fd_check(gc, &f, n, dv, q, k, v, g);
  double *rq = malloc(sizeof(double) * nq), *rk = malloc(sizeof(double) * nq);
  double *rv = malloc(sizeof(double) * nvv), *tmp = malloc(sizeof(double) * nvv);
  nv_den ds;
  nv_forward(&f, &op, n, dv, q, k, v, tmp, &ds); /* for the statistics */
  nv_backward(&f, &op, n, dv, q, k, v, g, rq, rk, rv);
  void *qe = nv_to_dtype(dt, q, nq), *ke = nv_to_dtype(dt, k, nq), *ve = nv_to_dtype(dt, v, nvv);
  void *ge = nv_to_dtype(dt, g, nvv);
  void *dq = malloc(esz(dt) * nq), *dke = malloc(esz(dt) * nq), *dve = malloc(esz(dt) * nvv);
  double *got = malloc(sizeof(double) * (nq > nvv ? nq : nvv));
  void *fo = malloc(esz(dt) * nvv);
  const int chunks[] = {1, 3, 8, 0, 50};
  const double *const refs[3] = {rq, rk, rv};
  for (int ci = 0; ci < 5; ci++)
    for (int T = 1; T <= 3; T += 2) {
      la_config c = c0;
      c.chunk = chunks[ci];
      c.threads = T;
      char err[256];
      if (why(la_config_check(&c, dk), err, sizeof err) != LA_OK) {
        CHECK(0, "%s: config refused: %s", gc->name, err);
        continue;
      }
      la_engine e;
      la_engine_create(&c, fm, dt, dv, &e);
      /* the replay's outputs (la_engine_set_replay_output): refused with segments or a
       * window, else equal to the naive forward */
      const int fused = !gc->segments && gc->window <= 0;
      if (gc->segments) la_engine_set_segments(e, OFF, NOFF);
      la_status so = la_engine_set_replay_output(e, fo, 0, n);
      CHECK(fused ? so == LA_OK : so == LA_ERR_UNSUPPORTED,
            "la_engine_set_replay_output %s: status %d", gc->name, (int)so);
      memset(fo, 0xff, esz(dt) * nvv);
      memset(dq, 0xff, esz(dt) * nq); /* NaN: every entry must be written */
      memset(dke, 0xff, esz(dt) * nq);
      memset(dve, 0xff, esz(dt) * nvv);
      la_den_stats st;
      la_den_stats_init(&st);
      la_status s = la_backward(e, n, qe, ke, ve, ge, dq, dke, dve, &st);
      const void *gs[3] = {dq, dke, dve};
      size_t cnt[3] = {nq, nq, nvv};
      const char *nm[3] = {"dQ", "dK", "dV"};
      for (int t = 0; t < 3; t++) {
        nv_from_dtype(dt, gs[t], got, cnt[t]);
        /* W = 1: out_i = v_i, so dQ = dK = 0 exactly; errors relative to the O(1) scale of
         * the gradients of these inputs (|g|, |v| ~ 1) */
        double er = nv_relerr_floor(got, refs[t], cnt[t], gc->window == 1 && t < 2 ? 1.0 : 0.0);
        if (er > worst_err[dt] && er < INFINITY) worst_err[dt] = er;
        CHECK(s == LA_OK && er <= tol_of(dt), "la_backward %s %s dv %d chunk %d threads %d: %s status %d rel err %.3g > %.0g",
              gc->name, la_dtype_name(dt), dv, la_engine_chunk(e), T, nm[t], (int)s, er, tol_of(dt));
      }
      if (fused) {
        nv_from_dtype(dt, fo, got, nvv);
        const double er = nv_relerr_floor(got, tmp, nvv, 0.0);
        CHECK(s == LA_OK && er <= tol_of(dt), "replay outputs %s %s dv %d chunk %d threads %d: "
              "rel err %.3g > %.0g", gc->name, la_dtype_name(dt), dv, la_engine_chunk(e), T, er,
              tol_of(dt));
      }
      CHECK(st.rows == n * H && st.violations == ds.violations,
            "la_backward %s %s chunk %d: stats rows %lld violations %lld (want %lld)", gc->name,
            la_dtype_name(dt), la_engine_chunk(e), (long long)st.rows, (long long)st.violations,
            (long long)ds.violations);
      la_den_stats_free(&st);
      la_engine_destroy(&e);
      /* the tape (la_forward_taped, la_backward_taped), on every kernel the CPU has */
      for (int kc = 0; kc < 2; kc++) {
        c.kernels = kc ? LA_KERNELS_BLAS : LA_KERNELS_AUTO;
        if (la_engine_create(&c, fm, dt, dv, &e) != LA_OK) continue;
        if (gc->segments) la_engine_set_segments(e, OFF, NOFF);
        tape_case(gc, e, dt, dv, n, H, dk, qe, ke, ve, ge, tmp, refs, ds.violations);
        la_engine_destroy(&e);
      }
      (*nrun)++;
    }
  free(q); free(k); free(v); free(g); free(rq); free(rk); free(rv); free(tmp);
  free(qe); free(ke); free(ve); free(ge); free(dq); free(dke); free(dve); free(got); free(fo);
  la_featmap_destroy(&fm);
}

/* la_engine_set_check_finite: refused where the rows are not all read through the checked
 * path; else a non-finite entry anywhere in q, k, v (forward) or g (backward, both forms)
 * makes the call return LA_ERR_NONFINITE, and finite inputs pass. */
static void check_finite_case(void) {
  const int64_t n = 41;
  const int H = 2, d = 5;
  const size_t cnt = (size_t)n * H * d;
  la_config c;
  la_config_default(&c);
  c.map = LA_MAP_ELU1;
  c.chunk = 8;
  la_featmap fm;
  la_engine e;
  CHECK(la_featmap_create(&c, H, d, &fm) == LA_OK, "check_finite: feature map");
  c.mode = LA_BIDIRECTIONAL;
  la_engine_create(&c, fm, LA_F64, d, &e);
  CHECK(la_engine_set_check_finite(e, 1) == LA_ERR_UNSUPPORTED, "check_finite: bidirectional");
  la_engine_destroy(&e);
  c.mode = LA_CAUSAL;
  la_engine_create(&c, fm, LA_F64, d, &e);
  CHECK(la_engine_set_check_finite(e, 1) == LA_OK, "check_finite: causal refused");
  double *x[8];
  for (int i = 0; i < 8; i++) {
    x[i] = malloc(sizeof(double) * cnt);
    nv_fill(x[i], cnt, 77 + (uint64_t)i, 0.8, 0.0);
  }
  void *tape = aligned_alloc(64, (la_tape_size(e, n) + 63) / 64 * 64);
  la_den_stats st;
  la_den_stats_init(&st);
  CHECK(la_forward(e, n, x[0], x[1], x[2], x[4], &st) == LA_OK, "check_finite: finite forward");
  CHECK(la_backward(e, n, x[0], x[1], x[2], x[3], x[5], x[6], x[7], &st) == LA_OK,
        "check_finite: finite backward");
  const char *nm[4] = {"q", "k", "v", "g"};
  const size_t at[3] = {0, cnt / 2 + 3, cnt - 1}; /* first, middle, last entry */
  for (int t = 0; t < 4; t++)
    for (int a = 0; a < 3; a++) {
      const double keep = x[t][at[a]];
      x[t][at[a]] = a == 1 ? NAN : (a ? -INFINITY : INFINITY);
      la_status s1 = la_forward_taped(e, n, x[0], x[1], x[2], x[4], tape, &st);
      la_status s2 = la_backward(e, n, x[0], x[1], x[2], x[3], x[5], x[6], x[7], &st);
      x[t][at[a]] = keep;
      la_status s3 = la_forward_taped(e, n, x[0], x[1], x[2], x[4], tape, &st);
      x[t][at[a]] = a == 1 ? NAN : INFINITY;
      la_status s4 = la_backward_taped(e, n, x[0], x[1], x[2], x[3], x[4], tape, x[5], x[6], x[7]);
      x[t][at[a]] = keep;
      CHECK((t == 3 ? s1 == LA_OK : s1 == LA_ERR_NONFINITE) && s2 == LA_ERR_NONFINITE &&
                s3 == LA_OK && s4 == LA_ERR_NONFINITE,
            "check_finite: %s entry %zu: statuses %d %d %d %d", nm[t], at[a], (int)s1, (int)s2,
            (int)s3, (int)s4);
    }
  la_den_stats_free(&st);
  for (int i = 0; i < 8; i++) free(x[i]);
  free(tape);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
}

int main(void) {
  check_finite_case();
  /* identity: positive offset so that q.k > 0 (well-conditioned normalized ratio); relu: an
   * offset keeps inputs away from the kink at 0 and the denominators away from 0 */
  const gcase cases[] = {
      {"elu1 causal", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"elu1 bidir", LA_BIDIRECTIONAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"relu causal", LA_CAUSAL, LA_MAP_RELU, 1, LA_DEN_ERROR, 0, 0, 0, 0.4, 0.9},
      {"relu bidir", LA_BIDIRECTIONAL, LA_MAP_RELU, 1, LA_DEN_ERROR, 0, 0, 0, 0.4, 0.9},
      {"identity causal", LA_CAUSAL, LA_MAP_IDENTITY, 1, LA_DEN_ERROR, 0, 0, 0, 0.3, 1.0},
      {"identity bidir", LA_BIDIRECTIONAL, LA_MAP_IDENTITY, 1, LA_DEN_ERROR, 0, 0, 0, 0.3, 1.0},
      {"favor+ causal", LA_CAUSAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      {"favor+ bidir", LA_BIDIRECTIONAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      {"favor+orf causal", LA_CAUSAL, LA_MAP_FAVOR_ORF, 1, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      {"favor-hyp bidir", LA_BIDIRECTIONAL, LA_MAP_FAVOR_HYP, 1, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      {"favor-hyp causal", LA_CAUSAL, LA_MAP_FAVOR_HYP, 1, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      /* unnormalized: a different operator */
      {"elu1 causal unnormalized", LA_CAUSAL, LA_MAP_ELU1, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"identity bidir unnormalized", LA_BIDIRECTIONAL, LA_MAP_IDENTITY, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"favor+ causal unnormalized", LA_CAUSAL, LA_MAP_FAVOR, 0, LA_DEN_ERROR, 0, 0, 0, 1.0, 0},
      {"trig causal unnormalized", LA_CAUSAL, LA_MAP_TRIG, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"trig bidir unnormalized", LA_BIDIRECTIONAL, LA_MAP_TRIG, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      /* denominator policies: E comparable to the denominators (elu1 dens ~ 1.5 per key) */
      {"elu1 causal add:2", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ADD, 2.0, 0, 0, 0.8, 0},
      {"elu1 causal clamp:4", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_CLAMP, 4.0, 0, 0, 0.8, 0},
      {"favor+ bidir clamp:0.5", LA_BIDIRECTIONAL, LA_MAP_FAVOR, 1, LA_DEN_CLAMP, 0.5, 0, 0, 1.0, 0},
      /* packed sequences */
      {"elu1 causal segments", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 0, 1, 0.8, 0},
      {"elu1 bidir segments", LA_BIDIRECTIONAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 0, 1, 0.8, 0},
      {"favor+ causal segments", LA_CAUSAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 0, 1, 1.0, 0},
      {"favor+ bidir segments", LA_BIDIRECTIONAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 0, 1, 1.0, 0},
      /* causal windows, with and without segments; W >= n is the plain causal operator */
      {"elu1 window 1", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 1, 0, 0.8, 0},
      {"elu1 window 5", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 5, 0, 0.8, 0},
      {"elu1 window 12 segments", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 12, 1, 0.8, 0},
      {"favor+ window 9", LA_CAUSAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 9, 0, 1.0, 0},
      {"favor+ window 20 segments", LA_CAUSAL, LA_MAP_FAVOR, 1, LA_DEN_ERROR, 0, 20, 1, 1.0, 0},
      {"relu window 7", LA_CAUSAL, LA_MAP_RELU, 1, LA_DEN_ERROR, 0, 7, 0, 0.4, 0.9},
      {"elu1 window 36", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 36, 0, 0.8, 0},
      {"elu1 window 100", LA_CAUSAL, LA_MAP_ELU1, 1, LA_DEN_ERROR, 0, 100, 0, 0.8, 0},
      /* taylor2 (signed features, positive kernel) and dpfp (nu = m = 5; an offset keeps its
       * denominators away from 0, like relu's) */
      {"taylor2 causal", LA_CAUSAL, LA_MAP_TAYLOR2, 1, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"taylor2 bidir", LA_BIDIRECTIONAL, LA_MAP_TAYLOR2, 1, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"taylor2 causal unnormalized", LA_CAUSAL, LA_MAP_TAYLOR2, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"taylor2 bidir segments", LA_BIDIRECTIONAL, LA_MAP_TAYLOR2, 1, LA_DEN_ERROR, 0, 0, 1, 0.8, 0},
      {"taylor2 window 9 segments", LA_CAUSAL, LA_MAP_TAYLOR2, 1, LA_DEN_ERROR, 0, 9, 1, 0.8, 0},
      {"dpfp causal", LA_CAUSAL, LA_MAP_DPFP, 1, LA_DEN_ERROR, 0, 0, 0, 0.5, 0.8},
      {"dpfp bidir", LA_BIDIRECTIONAL, LA_MAP_DPFP, 1, LA_DEN_ERROR, 0, 0, 0, 0.5, 0.8},
      {"dpfp bidir unnormalized", LA_BIDIRECTIONAL, LA_MAP_DPFP, 0, LA_DEN_ERROR, 0, 0, 0, 0.8, 0},
      {"dpfp causal segments", LA_CAUSAL, LA_MAP_DPFP, 1, LA_DEN_ERROR, 0, 0, 1, 0.5, 0.8},
      {"dpfp window 7", LA_CAUSAL, LA_MAP_DPFP, 1, LA_DEN_ERROR, 0, 7, 0, 0.5, 0.8},
  };
  const int ncase = (int)(sizeof cases / sizeof cases[0]);
  int nrun = 0;
  for (int i = 0; i < ncase; i++)
    for (int dt = 0; dt < 2; dt++)
      for (int dvi = 0; dvi < 2; dvi++)
        run_case(&cases[i], (la_dtype)dt, dvi ? 6 : 2, dt == LA_F64 && dvi == 0, &nrun);
  printf("naive gradient against central differences: largest error %.2g (tolerance %.0g)\n",
         worst_fd, TOL_FD);
  printf("%d engine configurations; largest normwise error: f64 %.2g (tolerance %.0g), f32 %.2g (tolerance %.0g)\n",
         nrun, worst_err[LA_F64], TOL64, worst_err[LA_F32], TOL32);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
