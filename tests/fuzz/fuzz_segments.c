/* libFuzzer harness: the segments reader (--segments, docs/cli.md "Files"): an .npy file read
 * as program/job.c load_segments does (la_npy_load, then la_segments_check), or raw int64
 * offsets, against a plain statement of the rule (S+1 values, 0 = o_0 < ... < o_S = N).
 * Offsets that pass are handed to the engine as job.c does (la_engine_set_segments) and, for
 * short sequences, la_forward is compared with the quadratic form over the same segments
 * (and window): so accepted offsets must also be offsets the engine computes right with.
 *
 * Input: byte 0 flags: bit 0 N = the last offset (else the next 8 bytes, little-endian, are
 * N); bit 1 the rest is an .npy file (else raw int64 offsets); bit 2 bidirectional; bit 3
 * float32; bits 4..7 a causal window W (0: none). Byte 1: the chunk length, 1 + b % 8. */
#include <math.h>
#include "fuzz_common.h"
#include "linattn/core.h"
#include "linattn/npy.h"

enum { H = 2, DK = 3, DV = 2, NMAX = 96 };

static double elu1(double x) { return x > 0 ? x + 1 : exp(x); }

/* la_forward over [0, N) with these offsets against the quadratic form, in float64. */
static void forward_check(const int64_t *off, int64_t count, int64_t N, unsigned flags,
                          int chunk) {
  la_config cfg;
  la_config_default(&cfg);
  cfg.mode = flags & 4 ? LA_BIDIRECTIONAL : LA_CAUSAL;
  cfg.chunk = chunk;
  cfg.threads = 1;
  cfg.window = cfg.mode == LA_CAUSAL ? (int64_t)(flags >> 4) : 0;
  const la_dtype dt = flags & 8 ? LA_F32 : LA_F64;
  char err[512] = "";
  FUZZ_CHECK(why(la_config_check(&cfg, DK), err, sizeof err) == LA_OK, "%s", err);
  la_featmap fm = NULL;
  la_engine eng = NULL;
  FUZZ_CHECK(la_featmap_create(&cfg, H, DK, &fm) == LA_OK, "featmap");
  FUZZ_CHECK(la_engine_create(&cfg, fm, dt, DV, &eng) == LA_OK, "engine");
  FUZZ_CHECK(la_engine_set_segments(eng, off, count) == LA_OK, "engine refuses checked offsets: %s",
             la_error_message());
  for (int64_t s = 0; s < count; s++) {
    FUZZ_CHECK(la_engine_segment_at_or_after(eng, off[s]) == off[s], "o[%lld]", (long long)s);
    if (s > 0 && off[s] - off[s - 1] > 1)
      FUZZ_CHECK(la_engine_segment_at_or_after(eng, off[s - 1] + 1) == off[s], "after o[%lld]",
                 (long long)(s - 1));
  }
  FUZZ_CHECK(la_engine_segment_at_or_after(eng, N + 1) == INT64_MAX, "past N");

  const size_t es = la_dtype_size(dt);
  void *x[3], *out = malloc(es * (size_t)(N * H * DV));
  double *xd[3];
  for (int t = 0; t < 3; t++) {
    const int d = t == 2 ? DV : DK;
    x[t] = malloc(es * (size_t)(N * H * d));
    xd[t] = malloc(sizeof(double) * (size_t)(N * H * d));
    la_synth_rows(7, t, 0, N, H, d, 1.0, dt, x[t]);
    for (int64_t i = 0; i < N * H * d; i++)
      xd[t][i] = dt == LA_F32 ? ((float *)x[t])[i] : ((double *)x[t])[i];
  }
  la_den_stats st;
  FUZZ_CHECK(la_den_stats_init(&st) == LA_OK, "stats");
  la_status s = la_forward(eng, N, x[0], x[1], x[2], out, &st);
  FUZZ_CHECK(s == LA_OK, "la_forward: %s", la_error_reason(s));
  FUZZ_CHECK(st.violations == 0, "%lld denominator violations", (long long)st.violations);

  const double tol = dt == LA_F32 ? 1e-4 : 1e-11;
  for (int64_t i = 0, si = 0; i < N; i++) {
    while (off[si + 1] <= i) si++; /* segment of i: [off[si], off[si+1]) */
    int64_t lo = off[si], hi = cfg.mode == LA_CAUSAL ? i + 1 : off[si + 1];
    if (cfg.window > 0 && i - cfg.window + 1 > lo) lo = i - cfg.window + 1;
    for (int h = 0; h < H; h++) {
      double num[DV] = {0}, den = 0, scale = 0;
      for (int64_t j = lo; j < hi; j++) {
        double w = 0;
        for (int c = 0; c < DK; c++)
          w += elu1(xd[0][(i * H + h) * DK + c]) * elu1(xd[1][(j * H + h) * DK + c]);
        den += w;
        for (int c = 0; c < DV; c++) num[c] += w * xd[2][(j * H + h) * DV + c];
      }
      for (int c = 0; c < DV; c++) scale = fmax(scale, fabs(num[c] / den));
      for (int c = 0; c < DV; c++) {
        const size_t at = (size_t)((i * H + h) * DV + c);
        const double got = dt == LA_F32 ? ((float *)out)[at] : ((double *)out)[at];
        FUZZ_CHECK(fabs(got - num[c] / den) <= tol * fmax(scale, 1.0),
                   "token %lld head %d col %d: %.17g, reference %.17g (N %lld, %lld segments, "
                   "mode %d, window %lld, chunk %d, %s)",
                   (long long)i, h, c, got, num[c] / den, (long long)N, (long long)(count - 1),
                   (int)cfg.mode, (long long)cfg.window, chunk, la_dtype_name(dt));
      }
    }
  }
  la_den_stats_free(&st);
  for (int t = 0; t < 3; t++) free(x[t]), free(xd[t]);
  free(out);
  la_engine_destroy(&eng);
  la_featmap_destroy(&fm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const unsigned flags = data[0];
  const int chunk = 1 + data[1] % 8;
  const uint8_t *p = data + 2;
  size_t n = size - 2;
  int64_t N = 0;
  if (!(flags & 1)) {
    if (n < 8) return 0;
    memcpy(&N, p, 8);
    p += 8, n -= 8;
  }
  char err[512] = "";
  int64_t *off = NULL, count = 0;
  if (flags & 2) { /* as load_segments in program/job.c */
    la_npy_info I;
    void *arr = NULL;
    if (why(la_npy_load(fuzz_file(p, n), &I, &arr), err, sizeof err) != LA_OK) return 0;
    const int ok1d = I.dtype == LA_I64 && I.ndim == 1;
    off = arr;
    count = ok1d ? I.shape[0] : 0;
  } else {
    count = (int64_t)(n / 8);
    off = malloc(n / 8 * 8 + 1);
    memcpy(off, p, n / 8 * 8);
  }
  if (flags & 1) N = count > 0 ? off[count - 1] : 0;

  const la_status s = why(la_segments_check(count ? off : NULL, count, N), err, sizeof err);
  int valid = count >= 2 && off[0] == 0 && off[count - 1] == N;
  for (int64_t i = 1; valid && i < count; i++) valid = off[i] > off[i - 1];
  FUZZ_CHECK((s == LA_OK) == valid, "la_segments_check %d (%s), rule says %d", (int)s, err, valid);
  if (s != LA_OK)
    FUZZ_CHECK(s == LA_ERR_FORMAT && fuzz_one_line(err), "status %d, message '%s'", (int)s, err);
  else if (N <= NMAX)
    forward_check(off, count, N, flags, chunk);
  free(off);
  return 0;
}
