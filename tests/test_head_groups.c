/* Head groups (docs/design.md §4.2 "Head groups", §4.4) change only the order in which heads
 * are visited, never a head's arithmetic. So with H >= T (one causal pass, no token
 * superblocks within a head) every head's forward output and gradients must be bitwise those
 * of a one-head engine run on that head's columns alone on one thread. This checks it for
 * causal and bidirectional, float32 and float64, H = 3 on T = 1, 2, 3 threads (groups {0,1,2};
 * {0}, {1,2}; {0}, {1}, {2}), with chunk lengths that do and do not divide n. The float64
 * oracles (test_api, test_api_grad, oracle_forward) check the values; this checks that the
 * grouping cannot change a last bit, which a tolerance would not see.
 * Maps without a projection only (elu1, relu): a one-head engine of a random map would draw
 * head 0's projection for every head. Prints "N passed, M failed"; exit status M != 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/linattn.h"

#include "check.h"

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545f4914f6cdd1dULL) >> 11) * 0x1p-52 - 1.0;
}

static size_t esz(la_dtype dt) { return dt == LA_F32 ? sizeof(float) : sizeof(double); }

/* Random [n, H, d] values of type dt; float32 values also exact in float64. */
static void *fill(la_dtype dt, size_t cnt) {
  void *p = malloc(esz(dt) * cnt);
  for (size_t i = 0; i < cnt; i++) {
    const double x = 0.7 * uniform();
    if (dt == LA_F32) ((float *)p)[i] = (float)x;
    else ((double *)p)[i] = x;
  }
  return p;
}

/* Head h's columns of an [n, H, d] array, contiguous as [n, 1, d]. */
static void *slice(la_dtype dt, const void *x, int64_t n, int H, int d, int h) {
  const size_t es = esz(dt), row = es * (size_t)d;
  char *o = malloc(row * (size_t)n);
  for (int64_t i = 0; i < n; i++) memcpy(o + row * i, (const char *)x + row * ((size_t)i * H + h), row);
  return o;
}

static int same_head(la_dtype dt, const void *grouped, const void *single, int64_t n, int H, int d,
                     int h) {
  void *s = slice(dt, grouped, n, H, d, h);
  const int eq = memcmp(s, single, esz(dt) * (size_t)d * n) == 0;
  free(s);
  return eq;
}

typedef struct {
  void *out, *dq, *dk, *dv;
} result;

/* Forward and backward of one engine (H heads, T threads); 0 on success. */
static int run(const la_config *c0, la_dtype dt, int T, int64_t n, int H, int dk, int dv,
               const void *q, const void *k, const void *v, const void *g, result *r) {
  la_config c = *c0;
  c.threads = T;
  la_featmap fm = NULL;
  la_engine e = NULL;
  la_den_stats st;
  la_den_stats_init(&st);
  r->out = malloc(esz(dt) * (size_t)n * H * dv);
  r->dq = malloc(esz(dt) * (size_t)n * H * dk);
  r->dk = malloc(esz(dt) * (size_t)n * H * dk);
  r->dv = malloc(esz(dt) * (size_t)n * H * dv);
  int bad = la_featmap_create(&c, H, dk, &fm) != LA_OK || la_engine_create(&c, fm, dt, dv, &e) != LA_OK;
  bad = bad || la_forward(e, n, q, k, v, r->out, &st) != LA_OK;
  bad = bad || la_backward(e, n, q, k, v, g, r->dq, r->dk, r->dv, &st) != LA_OK;
  la_den_stats_free(&st);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
  return bad;
}

static void result_free(result *r) { free(r->out), free(r->dq), free(r->dk), free(r->dv); }

int main(void) {
  const int H = 3, dk = 24, dv = 20;
  const int64_t n = 301;
  const la_mode modes[] = {LA_CAUSAL, LA_BIDIRECTIONAL};
  const la_map_kind maps[] = {LA_MAP_ELU1, LA_MAP_RELU};
  const la_dtype dts[] = {LA_F32, LA_F64};
  const int chunks[] = {0, 16, 7}; /* 0: the tuned default */
  for (int di = 0; di < 2; di++)
    for (int mi = 0; mi < 2; mi++)
      for (int pi = 0; pi < 2; pi++)
        for (int ci = 0; ci < 3; ci++) {
          const la_dtype dt = dts[di];
          la_config c;
          la_config_default(&c);
          c.mode = modes[mi];
          c.map = maps[pi];
          c.chunk = chunks[ci];
          c.den_policy = LA_DEN_ADD; /* relu rows can have a zero denominator */
          void *q = fill(dt, (size_t)n * H * dk), *k = fill(dt, (size_t)n * H * dk);
          void *v = fill(dt, (size_t)n * H * dv), *g = fill(dt, (size_t)n * H * dv);
          /* the references: one head at a time, one thread */
          result one[3];
          int bad = 0;
          for (int h = 0; h < H; h++) {
            void *qh = slice(dt, q, n, H, dk, h), *kh = slice(dt, k, n, H, dk, h);
            void *vh = slice(dt, v, n, H, dv, h), *gh = slice(dt, g, n, H, dv, h);
            bad |= run(&c, dt, 1, n, 1, dk, dv, qh, kh, vh, gh, &one[h]);
            free(qh), free(kh), free(vh), free(gh);
          }
          for (int T = 1; T <= H; T++) {
            result all = {0};
            const int fail = run(&c, dt, T, n, H, dk, dv, q, k, v, g, &all) || bad;
            int eq[4] = {1, 1, 1, 1};
            for (int h = 0; h < H && !fail; h++) {
              eq[0] &= same_head(dt, all.out, one[h].out, n, H, dv, h);
              eq[1] &= same_head(dt, all.dq, one[h].dq, n, H, dk, h);
              eq[2] &= same_head(dt, all.dk, one[h].dk, n, H, dk, h);
              eq[3] &= same_head(dt, all.dv, one[h].dv, n, H, dv, h);
            }
            CHECK(!fail && eq[0] && eq[1] && eq[2] && eq[3],
                  "%s %s %s chunk %d, H = %d on %d threads: %s; bitwise equal to one head at a "
                  "time: out %d, dQ %d, dK %d, dV %d",
                  la_dtype_name(dt), c.mode == LA_CAUSAL ? "causal" : "bidirectional",
                  c.map == LA_MAP_ELU1 ? "elu1" : "relu", c.chunk, H, T,
                  fail ? "a call failed" : "ran", eq[0], eq[1], eq[2], eq[3]);
            result_free(&all);
          }
          for (int h = 0; h < H; h++) result_free(&one[h]);
          free(q), free(k), free(v), free(g);
        }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
