/* fwdbwd: forward plus backward of one attention call through the engine, called from C, as
 * the Python binding calls it (python/capi/binding.c: la_py_op_create, la_py_forward,
 * la_py_backward), for tools/bench_binding.py and jobs/bench_binding.sh (docs/performance.md
 * "Training through the Python binding"). A benchmark: nothing is asserted.
 *
 * The configuration is the binding's for attention(q, k, v, threads=T) with its defaults:
 * la_config_default, map elu1, causal, normalized, denominator "error", chunk tuned; the
 * inputs are [L, H, d] float32 (B = 1, dk = dv = d) of the synthetic generator
 * (la_synth_rows: Q, K, V are tensors 0, 1, 2, the output's gradient G tensor 3, all N(0, 1)).
 *
 * Two ways of calling, both printed (each its own best of R):
 *   fresh   what the binding does on every call: create the feature map and the engine, allocate
 *           out (forward) and dq, dk, dv (backward) with posix_memalign(64), as torch.empty
 *           does (c10's alloc_cpu: 64-byte alignment, no huge-page advice), run, free. All of
 *           it inside the timed region, as it is inside the binding's.
 *   reused  what a C caller would do: engine and buffers made once, the buffers touched before
 *           the clock; only la_forward / la_backward (with their statistics) are timed.
 *   checked reused, with the engine checking every row of q, k, v and G for NaN and Inf where it
 *           reads them (la_engine_set_check_finite), as the binding's engine does: the same
 *           work as the binding's call, from C.
 * binding / fresh is then what the Python layer itself adds (ctypes, checks, autograd); fresh /
 * reused is what planning and allocating on every call cost; checked / reused the check.
 *
 * usage: fwdbwd --L N [--heads H] [--d D] [--threads T] [--repeat R] [--warmup W] [--seed S]
 *               [--modes fresh,reused,checked] [--tape 0|1] [--dump DIR] [--dump-results]
 *   --tape 1         (default) the binding's default since tape=True: la_forward_taped and
 *                    la_backward_taped (docs/design.md §4.4 "Tape"), the tape allocated as the
 *                    binding allocates it; 0: la_forward and la_backward (the replay).
 *   --dump DIR       write q, k, v, g ([L, H, d] <f4 .npy) to DIR for the binding's side;
 *                    with --dump-results also the reused call's out, dq, dk, dv.
 *   --repeat 0       only the dump.
 * Output: one line per mode,
 *   fwdbwd mode=fresh L=... H=... d=... threads=... repeat=... fwd_s=... bwd_s=... total_s=...
 *          kernels=... chunk=... tape=0|1
 * where fwd_s, bwd_s and total_s are each the best of the R calls (total: of the sums).
 * Exit 0; 1 on an engine error; 2 on a bad option. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "linattn/grad.h"
#include "linattn/npy.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, la_status st) {
  fprintf(stderr, "fwdbwd: error: %s: %s (%s)\n", what, la_status_string(st), la_error_message());
  exit(1);
}

/* torch.empty's allocation: c10::alloc_cpu is posix_memalign(64) (no madvise in torch 1.13). */
static float *talloc(size_t count) {
  void *p = NULL;
  if (posix_memalign(&p, 64, count * sizeof(float)) != 0) {
    fprintf(stderr, "fwdbwd: error: out of memory for %zu floats\n", count);
    exit(1);
  }
  return p;
}

typedef struct {
  la_config cfg;
  la_featmap fm;
  la_engine eng;
} plan;

/* la_py_op_create for (elu1, causal, normalize, "error", threads T, f32, heads, d, d);
 * check: the binding's la_engine_set_check_finite. */
static void plan_make(plan *p, int heads, int d, int threads, int check) {
  la_config_default(&p->cfg);
  p->cfg.map = LA_MAP_ELU1;
  p->cfg.mode = LA_CAUSAL;
  p->cfg.normalize = 1;
  la_status st = la_config_set_denominator(&p->cfg, "error");
  if (st != LA_OK) die("denominator", st);
  p->cfg.features = 256; /* the binding's default keyword; unused by elu1 */
  p->cfg.scale = 0.0;
  p->cfg.threads = threads;
  st = la_config_check(&p->cfg, d);
  if (st != LA_OK) {
    fprintf(stderr, "fwdbwd: error: configuration: %s\n", la_error_reason(st));
    exit(1);
  }
  st = la_featmap_create(&p->cfg, heads, d, &p->fm);
  if (st != LA_OK) die("feature map", st);
  st = la_engine_create(&p->cfg, p->fm, LA_F32, d, &p->eng);
  if (st != LA_OK) die("engine", st);
  /* la_py_forward sets the batch's segments: none for B = 1 */
  st = la_engine_set_segments(p->eng, NULL, 0);
  if (st != LA_OK) die("segments", st);
  if (check && (st = la_engine_set_check_finite(p->eng, 1)) != LA_OK) die("check_finite", st);
}

static void plan_free(plan *p) {
  la_engine_destroy(&p->eng);
  la_featmap_destroy(&p->fm);
}

/* la_forward / la_backward with the statistics and the verdict's input, as la_py_forward and
 * la_py_backward run them (without their finiteness checks, which are the binding's own). */
static void fwd(plan *p, int64_t L, const float *q, const float *k, const float *v, float *out,
                void *tape) {
  la_den_stats st;
  if (la_den_stats_init(&st) != LA_OK) die("stats", LA_ERR_NOMEM);
  la_status s = tape ? la_forward_taped(p->eng, L, q, k, v, out, tape, &st)
                     : la_forward(p->eng, L, q, k, v, out, &st);
  if (s != LA_OK) die("la_forward", s);
  if (st.violations) die("la_forward: denominator", LA_ERR_DENOMINATOR);
  (void)la_den_stats_median(&st);
  (void)la_den_stats_count_small(&st);
  la_den_stats_free(&st);
}

static void bwd(plan *p, int64_t L, const float *q, const float *k, const float *v,
                const float *g, float *dq, float *dk, float *dv, const float *out,
                const void *tape) {
  if (tape) { /* the binding's backward with a tape: no statistics (the forward's stand) */
    la_status s = la_backward_taped(p->eng, L, q, k, v, g, out, tape, dq, dk, dv);
    if (s != LA_OK) die("la_backward_taped", s);
    return;
  }
  la_den_stats st;
  if (la_den_stats_init(&st) != LA_OK) die("stats", LA_ERR_NOMEM);
  la_status s = la_backward(p->eng, L, q, k, v, g, dq, dk, dv, &st);
  if (s != LA_OK) die("la_backward", s);
  if (st.violations) die("la_backward: denominator", LA_ERR_DENOMINATOR);
  (void)la_den_stats_median(&st);
  (void)la_den_stats_count_small(&st);
  la_den_stats_free(&st);
}

static void save(const char *dir, const char *name, const float *x, int64_t L, int H, int d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  const int64_t shape[3] = {L, H, d};
  la_status st = la_npy_save(path, LA_F32, 3, shape, x, 1);
  if (st != LA_OK) {
    fprintf(stderr, "fwdbwd: error: %s\n", la_error_reason(st)); /* the reason names the path */
    exit(1);
  }
}

typedef struct {
  double fwd, bwd, total;
} best;

static void keep(best *b, double f, double w) {
  if (f < b->fwd) b->fwd = f;
  if (w < b->bwd) b->bwd = w;
  if (f + w < b->total) b->total = f + w;
}

/* One timed call on a planned engine with the caller's buffers (modes reused and checked). */
static void timed_call(plan *p, int64_t L, const float *q, const float *k, const float *v,
                       const float *g, float *out, float *dq, float *dk, float *dv, void *tape,
                       int timed, best *b) {
  double t0 = now();
  fwd(p, L, q, k, v, out, tape);
  double t1 = now();
  bwd(p, L, q, k, v, g, dq, dk, dv, out, tape);
  double t2 = now();
  if (timed) keep(b, t1 - t0, t2 - t1);
}

int main(int argc, char **argv) {
  int64_t L = 0;
  int H = 4, d = 64, threads = 2, repeat = 3, warmup = 1, dump_results = 0, use_tape = 1;
  uint64_t seed = 1;
  const char *dump = NULL, *modes = "fresh,reused,checked";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && !strcmp(a, "--L")) L = atoll(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--heads")) H = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--d")) d = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--threads")) threads = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--repeat")) repeat = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--seed")) seed = strtoull(argv[++i], NULL, 10);
    else if (i + 1 < argc && !strcmp(a, "--tape")) use_tape = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--modes")) modes = argv[++i];
    else if (i + 1 < argc && !strcmp(a, "--dump")) dump = argv[++i];
    else if (!strcmp(a, "--dump-results")) dump_results = 1;
    else {
      fprintf(stderr,
              "fwdbwd: error: unknown option '%s' (usage: fwdbwd --L N [--heads H] [--d D] "
              "[--threads T] [--repeat R] [--warmup W] [--seed S] [--modes fresh,reused,checked] "
              "[--tape 0|1] [--dump DIR] [--dump-results])\n", a);
      return 2;
    }
  }
  const int do_fresh = strstr(modes, "fresh") != NULL, do_reused = strstr(modes, "reused") != NULL,
            do_checked = strstr(modes, "checked") != NULL;
  if (L < 1 || H < 1 || d < 1 || threads < 1 || repeat < 0 || warmup < 0 ||
      (!do_fresh && !do_reused && !do_checked)) {
    fprintf(stderr, "fwdbwd: error: --L, --heads, --d, --threads must be >= 1, --repeat and "
                    "--warmup >= 0, --modes some of fresh, reused, checked\n");
    return 2;
  }
  const size_t cnt = (size_t)L * (size_t)H * (size_t)d;
  float *q = talloc(cnt), *k = talloc(cnt), *v = talloc(cnt), *g = talloc(cnt);
  la_synth_rows_threads(seed, 0, 0, L, H, d, 1.0, LA_F32, q, threads);
  la_synth_rows_threads(seed, 1, 0, L, H, d, 1.0, LA_F32, k, threads);
  la_synth_rows_threads(seed, 2, 0, L, H, d, 1.0, LA_F32, v, threads);
  la_synth_rows_threads(seed, 3, 0, L, H, d, 1.0, LA_F32, g, threads);
  if (dump) {
    save(dump, "q", q, L, H, d);
    save(dump, "k", k, L, H, d);
    save(dump, "v", v, L, H, d);
    save(dump, "g", g, L, H, d);
  }

  /* reused: one plan, buffers touched once before any clock */
  plan keepp, keepc; /* reused; checked (the same buffers) */
  float *out = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
  void *tape = NULL;
  size_t tape_bytes = 0;
  if (do_checked) plan_make(&keepc, H, d, threads, 1);
  if (do_reused || do_checked || (dump && dump_results)) {
    plan_make(&keepp, H, d, threads, 0);
    out = talloc(cnt), dq = talloc(cnt), dk = talloc(cnt), dv = talloc(cnt);
    tape_bytes = use_tape ? la_tape_size(keepp.eng, L) : 0;
    if (tape_bytes) {
      tape = talloc((tape_bytes + 3) / 4);
      memset(tape, 0, tape_bytes);
    }
    memset(out, 0, cnt * sizeof(float));
    memset(dq, 0, cnt * sizeof(float));
    memset(dk, 0, cnt * sizeof(float));
    memset(dv, 0, cnt * sizeof(float));
  }
  if (dump && dump_results) {
    fwd(&keepp, L, q, k, v, out, tape);
    bwd(&keepp, L, q, k, v, g, dq, dk, dv, out, tape);
    save(dump, "out", out, L, H, d);
    save(dump, "dq", dq, L, H, d);
    save(dump, "dk", dk, L, H, d);
    save(dump, "dv", dv, L, H, d);
  }

  best bf = {1e30, 1e30, 1e30}, br = {1e30, 1e30, 1e30}, bc = {1e30, 1e30, 1e30};
  const char *kern = "?";
  int chunk = 0;
  /* warm-up calls (not timed) then the timed ones; the two modes alternate call by call */
  for (int it = 0; it < warmup + repeat && repeat > 0; it++) {
    const int timed = it >= warmup;
    if (do_fresh) {
      double t0 = now();
      plan p;
      plan_make(&p, H, d, threads, 0);
      float *o = talloc(cnt);
      const size_t tb = use_tape ? la_tape_size(p.eng, L) : 0;
      void *tp = tb ? talloc((tb + 3) / 4) : NULL; /* the binding's tape, an empty tensor */
      fwd(&p, L, q, k, v, o, tp);
      double t1 = now();
      float *gq = talloc(cnt), *gk = talloc(cnt), *gv = talloc(cnt);
      bwd(&p, L, q, k, v, g, gq, gk, gv, o, tp);
      double t2 = now();
      free(tp);
      kern = la_engine_kernels(p.eng);
      chunk = la_engine_chunk(p.eng);
      /* freed after the clock, as the benchmark drops the tensors outside its timed region */
      free(o), free(gq), free(gk), free(gv);
      plan_free(&p);
      if (timed) keep(&bf, t1 - t0, t2 - t1);
    }
    if (do_reused) {
      timed_call(&keepp, L, q, k, v, g, out, dq, dk, dv, tape, timed, &br);
      kern = la_engine_kernels(keepp.eng);
      chunk = la_engine_chunk(keepp.eng);
    }
    if (do_checked) timed_call(&keepc, L, q, k, v, g, out, dq, dk, dv, tape, timed, &bc);
  }
  static const char *const names[3] = {"fresh", "reused", "checked"};
  const int on[3] = {do_fresh, do_reused, do_checked};
  const best *bs[3] = {&bf, &br, &bc};
  for (int m = 0; m < 3 && repeat > 0; m++) {
    if (!on[m]) continue;
    const best *b = bs[m];
    printf("fwdbwd mode=%s L=%lld H=%d d=%d threads=%d repeat=%d fwd_s=%.6f bwd_s=%.6f "
           "total_s=%.6f kernels=%s chunk=%d tape=%d\n",
           names[m], (long long)L, H, d, threads, repeat, b->fwd, b->bwd, b->total, kern, chunk,
           use_tape);
  }
  if (out) {
    free(out), free(dq), free(dk), free(dv), free(tape);
    plan_free(&keepp);
  }
  if (do_checked) plan_free(&keepc);
  free(q), free(k), free(v), free(g);
  return 0;
}
