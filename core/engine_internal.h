/* Private layout of la_engine (core only). */
#ifndef LINATTN_ENGINE_INTERNAL_H
#define LINATTN_ENGINE_INTERNAL_H
#include <string.h>
#include "featmap_internal.h"
#include "linattn/core.h"

/* One thread's scratch, §4: O(C (r + dv) + C^2 + r dv) elements, independent of N. */
typedef struct {
  void *phiq, *phik; /* C x r */
  void *vp;          /* C x (dv+1): [V | 1] */
  void *A;           /* C x C */
  void *o;           /* C x (dv+1): [num | den] */
  void *sf;          /* r x (dv+1): state in the working precision */
  void *tmp;         /* r x (dv+1) */
  double *aq, *ak;   /* C log-scales */
  int *segi;         /* C: segment of each chunk row, relative to the chunk's first */
  double *mseg;      /* C: log-scale of each of those segments */
  double *wsz;       /* r x (dv+1) float64 scratch state */
  void *phif, *vf;   /* window far edge: 2C x r, 2C x (dv+1) */
  double *af;        /* 2C */
  void *Af;          /* C x 2C */
  void *ab, *dphi;   /* backward: C x (dv+1) coefficients [a | b], C x r feature gradients */
  double *ak2;       /* C */
  void *kT;          /* r x C: Phi_k^T for the AVX-512 kernels */
  void *zf;          /* r: the state's z, contiguous, for the AVX-512 kernels */
  la_den_stats stats;
  char pad[64];      /* keep neighbouring workspaces off one cache line */
} la_work;

struct la_engine_s {
  la_config cfg;
  la_featmap fm;
  la_dtype dt;
  int H, dk, r, dv, C, T;
  int stabilized;
  int k512;      /* float32 chunk products on the AVX-512 kernels (kern512.c) */
  la_work *work; /* [T] */
  int Bmax;      /* superblocks per head for the causal two-pass split */
  la_state part;   /* H*Bmax partial states (heads dimension = H*Bmax) */
  double *scratch; /* r x (dv+1) */
  const int64_t *seg_off; /* segment offsets o_0 = 0 < ... < o_S = N (caller's), or NULL */
  int64_t seg_count;      /* S + 1 */
};
/* Backward side storage (fa, b, M) per (token, head): 24 bytes at a byte stride, so it can
 * live inside the dV output buffer (stride dv * sizeof(real) >= 24) until the reverse pass
 * overwrites each row after reading it; windows use a separate contiguous array. */
typedef struct {
  char *base;
  size_t stride;
} la_side;

static inline void la_side_put(la_side s, int64_t idx, double fa, double b, double M) {
  const double t[3] = {fa, b, M};
  memcpy(s.base + (size_t)idx * s.stride, t, sizeof t);
}
static inline void la_side_get(la_side s, int64_t idx, double t[3]) {
  memcpy(t, s.base + (size_t)idx * s.stride, 3 * sizeof(double));
}
static inline la_side la_side_rows(la_side s, int64_t rows, int H) {
  s.base += (size_t)rows * H * s.stride;
  return s;
}

/* Shared by engine.c and backward.c. */
int la_thread_id(void);
void la_engine_merge_stats(la_engine e, la_den_stats *stats);
void bwd_replay_f32(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const float *q,
                    const float *k, const float *v, const float *g, double *sz, double *m,
                    int *f, float *dq, la_side side, double *rsz, double *rm, int64_t cut);
void bwd_replay_f64(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const double *q,
                    const double *k, const double *v, const double *g, double *sz, double *m,
                    int *f, double *dq, la_side side, double *rsz, double *rm, int64_t cut);
void bwd_reverse_f32(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const float *q,
                     const float *k, const float *v, const float *g, la_side side,
                     double *dsz, double *mu, float *dk, float *dv);
void bwd_reverse_f64(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const double *q,
                     const double *k, const double *v, const double *g, la_side side,
                     double *dsz, double *mu, double *dk, double *dv);
void bwd_segmented_f32(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const float *q,
                       const float *k, const float *v, const float *g, const double *lsz,
                       double lm, const double *rsz, double rm, float *dq, la_side side,
                       double *hsz, double *hm, double *tsz, double *tm, float *dk, float *dv);
void bwd_segmented_f64(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const double *q,
                       const double *k, const double *v, const double *g, const double *lsz,
                       double lm, const double *rsz, double rm, double *dq, la_side side,
                       double *hsz, double *hm, double *tsz, double *tm, double *dk, double *dv);
void bwd_segmented_ends_f32(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                            const float *q, const float *k, const float *v, const float *g,
                            la_side side, const double *lrsz, double lrm,
                            const double *rrsz, double rrm, const double *hsz, double hm,
                            const double *tsz, double tm, float *dk, float *dv);
void bwd_segmented_ends_f64(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                            const double *q, const double *k, const double *v, const double *g,
                            la_side side, const double *lrsz, double lrm,
                            const double *rrsz, double rrm, const double *hsz, double hm,
                            const double *tsz, double tm, double *dk, double *dv);
/* Window backward entry points (engine_impl.h, backward_impl.h). */
void la_window_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const void *q,
                    const void *k, const void *v, int64_t hlo, int64_t hhi, const void *hk,
                    const void *hv, const double *midsz, double midm, void *out, const void *g,
                    void *dq, double *side, int cap, la_status *st);
int la_window_queue_cap(const la_engine e, int64_t reach);
la_status la_window_heads(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, int64_t hlo, int64_t hhi, const void *hk,
                          const void *hv, const la_state *mid, void *out, const void *g,
                          void *dq, double *side, la_den_stats *stats);
void la_window_reverse_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                            const void *q, const void *k, const void *v, const void *g,
                            const double *side, int64_t flo, int64_t fhi, const void *fq,
                            const void *fg, const double *fside, const double *fmidsz,
                            double fmidm, void *dk, void *dv, int cap, la_status *st);
void la_query_summary_head(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                           int64_t a, int64_t b, const void *q, const void *g, const double *side,
                           double *sz, double *m);

#endif
