/* The model engine of `linattn_smpi forward` (docs/simulation.md "What is simulated, what is
 * modelled"): the la_engine_* functions that the library's plan (dist/stream.c, dist/forward.c)
 * calls, defined here instead of by linattn_core's engine (link-time substitution: the
 * simulator links the plan's sources and this file, tools/smpi/CMakeLists.txt). Its compute
 * functions read and write no rows: each charges the calibrated seconds per token of its
 * phase (docs/sim_calibration.csv, measured by linattn_smpi_calibrate on the real engine) as
 * flops at the simulated host's speed, and leaves the states as they are (their contents
 * mean nothing in the timing runs). The shape is causal float32, H heads of r (dv + 1), no
 * window, segments, decay, gates or --reproducible; the drivers for those answer
 * LA_ERR_UNSUPPORTED. Each simulated rank has its own engine: nothing here is global
 * (smpi/privatization:no). */
#include <stdint.h>
#include <stdlib.h>
#include <simgrid/host.h>
#include <smpi/smpi.h>
#include "linattn/linattn.h"
#include "la_core_private.h"
#include "simscan.h"

struct la_engine_s {
  int H, r, dk, dv;
  double c[4];    /* seconds per token: apply, accumulate, apply_local, correct */
  double seconds; /* charged so far */
};

la_status la_model_engine_create(int H, int r, int dk, int dv, const double c[4], la_engine *out) {
  *out = NULL;
  LA_CHECK(H > 0 && r > 0 && dk > 0 && dv > 0, LA_ERR_ARG,
           "model engine: shape H %d, r %d, dk %d, dv %d must be positive", H, r, dk, dv);
  la_engine e = calloc(1, sizeof *e);
  LA_CHECK(e, LA_ERR_NOMEM, "model engine: out of memory");
  *e = (struct la_engine_s){.H = H, .r = r, .dk = dk, .dv = dv, .c = {c[0], c[1], c[2], c[3]}};
  *out = e;
  return LA_OK;
}

double la_model_engine_seconds(const la_engine eng) { return eng->seconds; }

void la_engine_destroy(la_engine *eng) {
  if (!eng) return;
  free(*eng);
  *eng = NULL;
}

/* n tokens of phase i, charged at this host's speed */
static la_status charge(la_engine e, int i, int64_t n, const char *what) {
  LA_CHECK(n >= 0, LA_ERR_ARG, "%s: n = %lld < 0", what, (long long)n);
  const double s = (double)n * e->c[i];
  if (s > 0) smpi_execute_flops(s * sg_host_get_speed(sg_host_self()));
  e->seconds += s;
  return LA_OK;
}

la_status la_engine_apply(la_engine eng, int64_t token0, int64_t n, const void *q,
                          const void *k, const void *v, la_state *state, void *out,
                          la_den_stats *stats) {
  (void)token0, (void)q, (void)k, (void)v, (void)state, (void)out, (void)stats;
  return charge(eng, 0, n, "la_engine_apply");
}

la_status la_engine_accumulate(la_engine eng, int64_t token0, int64_t n, const void *k,
                               const void *v, la_state *state) {
  (void)token0, (void)k, (void)v, (void)state;
  return charge(eng, 1, n, "la_engine_accumulate");
}

la_status la_engine_apply_local(la_engine eng, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_state *local, void *raw,
                                double *lsc) {
  (void)token0, (void)q, (void)k, (void)v, (void)local, (void)raw, (void)lsc;
  return charge(eng, 2, n, "la_engine_apply_local");
}

la_status la_engine_correct(la_engine eng, int64_t token0, int64_t n, const void *q,
                            const la_state *prefix, const void *raw, const double *lsc,
                            void *out, la_den_stats *stats) {
  (void)token0, (void)q, (void)prefix, (void)raw, (void)lsc, (void)out, (void)stats;
  return charge(eng, 3, n, "la_engine_correct");
}

/* ---- the queries: causal float32, none of the options ---- */
void la_engine_shape(const la_engine eng, int *heads, int *r, int *dv) {
  *heads = eng->H;
  *r = eng->r;
  *dv = eng->dv;
}
la_mode la_engine_mode(const la_engine eng) { (void)eng; return LA_CAUSAL; }
la_dtype la_engine_dtype(const la_engine eng) { (void)eng; return LA_F32; }
int la_engine_input_dim(const la_engine eng) { return eng->dk; }
int64_t la_engine_window(const la_engine eng) { (void)eng; return 0; }
int la_engine_reproducible(const la_engine eng) { (void)eng; return 0; }
/* never asked (not reproducible); 1 keeps la_engine_ownership's grid the plain split */
int64_t la_engine_repro_block(const la_engine eng) { (void)eng; return 1; }
int la_engine_decayed(const la_engine eng) { (void)eng; return 0; }
int la_engine_gated(const la_engine eng) { (void)eng; return 0; }
int la_engine_gate_width(const la_engine eng) { (void)eng; return 1; }
/* the summaries' form: (H, r, dv), no per-feature gates */
la_status la_engine_state_init(const la_engine eng, la_state *s) {
  return la_state_init(s, eng->H, eng->r, eng->dv);
}
const double *la_engine_gates(const la_engine eng, int64_t *token0, int64_t *n) {
  (void)eng;
  *token0 = *n = 0; /* no gates */
  return NULL;
}
double la_engine_log_decay(const la_engine eng, int h) { (void)eng, (void)h; return 0; }
int la_engine_stabilized(const la_engine eng) { (void)eng; return 0; }
int la_engine_has_segments(const la_engine eng) { (void)eng; return 0; }
int64_t la_engine_segment_at_or_after(const la_engine eng, int64_t t) {
  (void)eng;
  return t <= 0 ? 0 : INT64_MAX; /* one segment */
}
void la_window_halo(const la_engine eng, int64_t token0, int64_t n, int64_t *lo, int64_t *hi) {
  (void)eng, (void)n;
  *lo = *hi = token0; /* no window: no halo */
}

/* ---- outside the model: refused with the reason ---- */
#define LA_MODEL_UNSUPPORTED(fn) \
  la_error(LA_ERR_UNSUPPORTED, "%s: not in the simulator's model engine (causal float32 only, " \
           "tools/smpi/model_engine.c)", fn)

la_status la_engine_accumulate_reverse(la_engine eng, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_state *state) {
  (void)eng, (void)token0, (void)n, (void)k, (void)v, (void)state;
  return LA_MODEL_UNSUPPORTED("la_engine_accumulate_reverse");
}
la_status la_engine_apply_segmented(la_engine eng, int64_t token0, int64_t n, const void *q,
                                    const void *k, const void *v, const la_state *left,
                                    const la_state *right, void *out, la_den_stats *stats) {
  (void)eng, (void)token0, (void)n, (void)q, (void)k, (void)v, (void)left, (void)right;
  (void)out, (void)stats;
  return LA_MODEL_UNSUPPORTED("la_engine_apply_segmented");
}
la_status la_engine_set_gates(la_engine eng, const double *g, int64_t token0, int64_t n) {
  (void)eng, (void)g, (void)token0, (void)n;
  return LA_MODEL_UNSUPPORTED("la_engine_set_gates");
}
la_status la_engine_apply_window(la_engine eng, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, int64_t halo_lo,
                                 int64_t halo_hi, const void *halo_k, const void *halo_v,
                                 const la_state *mid, void *out, la_den_stats *stats) {
  (void)eng, (void)token0, (void)n, (void)q, (void)k, (void)v, (void)halo_lo, (void)halo_hi;
  (void)halo_k, (void)halo_v, (void)mid, (void)out, (void)stats;
  return LA_MODEL_UNSUPPORTED("la_engine_apply_window");
}
la_status la_engine_accumulate_exact(la_engine eng, int64_t token0, int64_t n, const void *k,
                                     const void *v, la_xstate *x) {
  (void)eng, (void)token0, (void)n, (void)k, (void)v, (void)x;
  return LA_MODEL_UNSUPPORTED("la_engine_accumulate_exact");
}
la_status la_engine_apply_exact(la_engine eng, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_xstate *x, void *out,
                                la_den_stats *stats) {
  (void)eng, (void)token0, (void)n, (void)q, (void)k, (void)v, (void)x, (void)out, (void)stats;
  return LA_MODEL_UNSUPPORTED("la_engine_apply_exact");
}
la_status la_engine_segment_ends_exact(la_engine eng, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_xstate *tail, la_xstate *head) {
  (void)eng, (void)token0, (void)n, (void)k, (void)v, (void)tail, (void)head;
  return LA_MODEL_UNSUPPORTED("la_engine_segment_ends_exact");
}
la_status la_engine_apply_segmented_exact(la_engine eng, int64_t token0, int64_t n,
                                          const void *q, const void *k, const void *v,
                                          const la_xstate *left, const la_xstate *right,
                                          void *out, la_den_stats *stats) {
  (void)eng, (void)token0, (void)n, (void)q, (void)k, (void)v, (void)left, (void)right;
  (void)out, (void)stats;
  return LA_MODEL_UNSUPPORTED("la_engine_apply_segmented_exact");
}
la_status la_engine_apply_window_exact(la_engine eng, int64_t token0, int64_t n, const void *q,
                                       const void *k, const void *v, int64_t x0,
                                       int64_t xend, const void *xk, const void *xv,
                                       void *out, la_den_stats *stats) {
  (void)eng, (void)token0, (void)n, (void)q, (void)k, (void)v, (void)x0, (void)xend;
  (void)xk, (void)xv, (void)out, (void)stats;
  return LA_MODEL_UNSUPPORTED("la_engine_apply_window_exact");
}
