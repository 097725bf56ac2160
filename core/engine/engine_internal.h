/* Private layout of la_engine and its per-thread workspaces (core only), and what the
 * engine's files share: geometry (geometry.c), GEMMs (gemm.c), drivers. docs/design.md §5.1. */
#ifndef LINATTN_ENGINE_INTERNAL_H
#define LINATTN_ENGINE_INTERNAL_H
#include <string.h>
#include "featmap_internal.h"
#include "kernels.h"
#include "la_blas.h"
#include "linattn/core.h"
#include "la_core_private.h"
#include "wqueue.h"

/* One thread's scratch, docs/design.md §4.2: O(C (r + dv) + C^2 + r dv) elements,
 * independent of N, all allocated in la_engine_create (the window queue when a window call
 * first needs it, outside the parallel region). Kernels never allocate. */
struct la_work_s {
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
  double *wsz2;      /* r x (dv+1) float64: a second one (backward query sums) */
  void *phif, *vf;   /* window far edge: 2C x r, 2C x (dv+1) */
  double *af;        /* 2C */
  void *Af;          /* C x 2C */
  void *ab, *dphi;   /* backward: C x (dv+1) coefficients [a | b], C x r feature gradients */
  double *ak2;       /* C */
  double *gc;        /* 3C: a gated chunk's cumulative log-gates G_i, e^{G_i}, e^{-G_i} */
  double *gf;        /* per-feature gates: 2 C r + r, a chunk's G and e^{G - G_0} (C x r
                      * each) and e^{G_0} (gla_impl.h); NULL without them */
  void *kT;          /* r x C: Phi_k^T for the AVX-512 kernels */
  void *zf;          /* r: the state's z, contiguous, for the AVX-512 kernels */
  void *tb;          /* op(B) = B^T transposed for an NN product (gemm.c): the float32
                      * AVX-512 GEMM, and float64's OpenBLAS small-matrix kernels */
  size_t tb_cap;     /* its elements: max(r, dv+1) * max(2C, r) covers every kernel's B */
  la_wqueue wq;      /* the window's queue (window_impl.h, §3.2) */
  double *wcum;      /* with gates and a window: the cumulative log-decay of the tokens a
                      * chunk's window reaches (window_impl.h win_cum), wcum_cap doubles */
  size_t wcum_cap;
  la_den_stats stats;
  int nonfinite;     /* la_engine_set_check_finite: a row read since the last take held one */
  char pad[64];      /* keep neighbouring workspaces off one cache line */
};

struct la_engine_s {
  la_config cfg;
  la_featmap fm;
  la_dtype dt;
  int H, dk, r, dv, C, T;
  int stabilized;
  const la_simd *simd; /* float32: the kernel table of the products and maps (simd.h), or NULL;
                       * float64 engines: NULL (their maps and finalize use fm->simd) */
  const la_kernels *kern; /* la_kernels_f32 or la_kernels_f64, chosen at creation */
  la_work *work; /* [T] */
  int Bmax;      /* superblocks per head for the causal two-pass split */
  la_state part;   /* H*Bmax partial states (heads dimension = H*Bmax) */
  double *scratch; /* r x (dv+1) */
  void *sfall;     /* H x r x (dv+1), working precision: the bidirectional summaries, or the
                     * causal head groups' per-head state copies (chunk_impl.h causal_chunk) */
  const int64_t *seg_off; /* segment offsets o_0 = 0 < ... < o_S = N (caller's), or NULL */
  int64_t seg_count;      /* S + 1 */
  const la_tape_view *tape; /* la_forward_taped: the tape the causal chunks fill, or NULL */
  int check_finite;       /* la_engine_set_check_finite: features_at checks the rows it reads */
  double *dlog;           /* --decay (§1.2): ln gamma_h per head, or NULL: no head decays */
  double *dpow;           /* [H][C + 1]: gamma_h^d, d = 0..C (the chunk's decay factors) */
  int gated;              /* --gates (§1.2 "Gates"): dlog is then set (0 without --decay) */
  int gate_w;             /* values per token and head: 1, or r (LA_GATES_FEATURE) */
  const double *gates;    /* la_engine_set_gates: [gate_n, H, gate_w] log-gates of global tokens */
  void *carve;            /* la_engine_carve's buffer (the decayed backward's rows), kept
                           * between calls; carve_cap bytes */
  size_t carve_cap;
  double *gsum;           /* per-feature gates: NULL, or H r sums of lambda + g that the kernels'
                           * chunks add to as they read the gates (gla_cum), token by token */
  int64_t gate0, gate_n;  /* [gate0, gate0 + gate_n) (the caller's buffer) */
  la_state hst, rows;     /* per-feature gates: a head-form state and a row-form block summary
                           * (gla_rows.c), the entry points' scratch */
  double *gate_grad;      /* la_engine_set_gates_grad: where la_backward writes dL/dg, or NULL */
  void *rout;             /* la_engine_set_replay_output: the replay's outputs, or NULL */
  int64_t rout_row0, rout_n;
};
/* Backward side storage (fa, b, M) per (token, head), docs/design.md §4.4: 24 bytes at a
 * byte stride (la_side, kernels.h), so it can live inside the dV output buffer (stride
 * dv * sizeof(real) >= 24) until the reverse pass overwrites each row after reading it;
 * windows use a separate contiguous array. */

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

/* geometry.c (docs/design.md §3): segment layout of [t0, t0+len) relative to the segment of
 * t0 (returns the number of segments touched; *reset = 1 when t0 starts one); whether t
 * starts a segment; the start of t's segment; the first start after t (INT64_MAX if none);
 * the smallest multiple of C >= x; superblock b of B of a block of n tokens (§4.2). */
int la_seg_layout(const la_engine e, int64_t t0, int len, int *segi, int *reset);
int la_is_segment_start(const la_engine e, int64_t t);
int64_t la_segment_start(const la_engine e, int64_t t);
int64_t la_next_start_after(const la_engine e, int64_t t);
int64_t la_ceil_to(int64_t x, int64_t C);
void la_superblock(int64_t n, int C, int B, int b, int64_t *lo, int64_t *hi);
/* Queue capacity for tokens up to `reach` (§3.2): O(min(W, reach) / C). */
int la_window_queue_cap(const la_engine e, int64_t reach);

/* gemm.c: cblas-shaped GEMMs of the kernels, on the engine's kernels and workspace w. */
void la_gemm_f32(const la_engine e, la_work *w, CBLAS_LAYOUT lay, CBLAS_TRANSPOSE ta,
                 CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void la_gemm_f64(const la_engine e, la_work *w, CBLAS_LAYOUT lay, CBLAS_TRANSPOSE ta,
                 CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double *A,
                 int lda, const double *B, int ldb, double beta, double *C, int ldc);

/* engine.c */
int la_thread_id(void);
/* out[i] = bytes[i] bytes (NULL for 0), 64-byte aligned, for i < n, all carved from one
 * buffer that the engine keeps for its next call (grown when a call needs more, freed by
 * la_engine_destroy): a training loop's backward reuses its pages instead of faulting fresh
 * ones every call. The pointers are valid until the next la_engine_carve. Returns 0 with every
 * out[i] NULL when the buffer cannot grow. */
int la_engine_carve(la_engine e, const size_t *bytes, int n, void **out);
int la_plan_threads(const la_config *cfg); /* the engine's thread count for cfg */
/* Fold every thread's denominator statistics into stats (may be NULL) and reset them. */
void la_engine_merge_stats(la_engine e, la_den_stats *stats);
/* denstats.c: empty statistics again, keeping the histogram (no allocation). */
void la_den_stats_reset(la_den_stats *st);
/* LA_OK if s is a state of the engine's shape, else LA_ERR_ARG with a reason naming the
 * entry point fn and the argument arg (the one check of every forward and backward entry). */
la_status la_engine_state_ok(const la_engine e, const la_state *s, const char *fn,
                             const char *arg);
/* --gates (§1.2 "Gates"): LA_ERR_ARG naming fn unless la_engine_set_gates holds tokens
 * [token0, token0 + n) (LA_OK without gates). */
la_status la_engine_gates_cover(const la_engine e, int64_t token0, int64_t n, const char *fn);
/* gla_rows.c, per-feature gates' row form (§1.2 "Per-feature gates", "Across ranks"): 1 if s
 * is a state of H r heads of width 1 and the engine has per-feature gates; the conversions
 * from rows to one log-scale per head (the largest row's; rows far below it underflow as in
 * the kernels, known bug 5) and back (each row taking its head's log-scale and flag; a is
 * left as it was). */
int la_gla_row_form(const la_engine e, const la_state *s);
void la_gla_rows_to_head(const la_engine e, const la_state *rows, la_state *head);
void la_gla_head_to_rows(const la_engine e, const la_state *head, la_state *rows);
/* The cumulative log-decay of head h over tokens [token0, token0 + n): n ln gamma_h, plus the
 * sum of the log-gates with --gates (the scan element's a, §1.2); scalar gates only. */
double la_block_log_decay(const la_engine e, int h, int64_t token0, int64_t n);
/* Reserve every thread's window queue for `cap` summaries; LA_ERR_NOMEM with its reason. */
la_status la_engine_reserve_queues(la_engine e, int cap);
/* decay_bwd.c: la_backward of a decayed engine (causal, one process, with or without a window, no
 * stabilizer; docs/design.md §1.2 "The backward"); on ranks: la_decay_backward_ranks
 * (la_core_private.h). */
la_status la_decay_backward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                            const void *g, void *dq, void *dk, void *dv, la_den_stats *stats);

/* Element i of an array of the engine's dtype, as a double, and back (the decayed backward's
 * rows, decay_bwd.c and gla_bwd.c). */
static inline double la_rd(la_dtype dt, const void *p, size_t i) {
  return dt == LA_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void la_wr(la_dtype dt, void *p, size_t i, double x) {
  if (dt == LA_F32) ((float *)p)[i] = (float)x;
  else ((double *)p)[i] = x;
}

/* gla_bwd.c: the per-feature gates' product that decays along its values (out [n, H, r]
 * float64; x, y [n, H, wx] and z [n, H, r] of type dt; g [n, H, r]; docs/design.md §1.2
 * "Per-feature gates"), on T threads; rows are global rows t0.. (segments), Tin the state of
 * the rows before t0 ([H][wx][r], or NULL: none), Tout the state after the last row (or NULL);
 * out NULL: the state alone. expv: e^x for x <= 0 on a vector (la_engine_expv), or NULL for
 * libm's exp. */
typedef void (*la_expv_fn)(size_t n, const double *x, double *y);
la_status la_gla_vproduct(la_dtype dt, int T, int64_t n, int H, int wx, int r, const void *x,
                          const void *y, const void *z, const double *g, const double *lam,
                          const int64_t *off, int64_t noff, int64_t t0, const double *Tin,
                          double *out, double *Tout, la_expv_fn expv);
/* engine.c: the kernel table's y = e^x for x <= 0 (simd.h exp_f64), or NULL (libm's exp) */
la_expv_fn la_engine_expv(const la_engine e);

/* With check_finite: LA_ERR_NONFINITE when a thread saw a non-finite row since the last call
 * (the flags are cleared), else LA_OK. */
la_status la_engine_take_nonfinite(la_engine e);

/* forward.c: every head of the window kernel, the forward (out) or the backward replay (g, dq,
 * side), used by la_engine_apply_window and la_backward_window. */
la_status la_window_heads(la_engine e, int64_t token0, int64_t n, const void *q, const void *k,
                          const void *v, int64_t hlo, int64_t hhi, const void *hk,
                          const void *hv, const la_state *mid, void *out, const void *g,
                          void *dq, double *side, la_den_stats *stats);

/* First head of group g of G (g = G: H): H heads in G groups of adjacent heads, sizes
 * differing by at most one (docs/design.md §4.2 "Head groups"). */
static inline int la_head_group(int H, int G, int g) { return (int)((int64_t)H * g / G); }
/* The number of head groups: one per thread, at most one per head. */
static inline int la_head_groups(const struct la_engine_s *e) { return e->H < e->T ? e->H : e->T; }

#endif
