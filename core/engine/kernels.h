/* The kernel ops table, docs/design.md §5.1: one per precision, la_kernels_f32 and
 * la_kernels_f64 (kernels_f32.c, kernels_f64.c), chosen once in la_engine_create. Every entry
 * works on one head h of a block whose first global token is token0, in the thread's
 * workspace w; data pointers are [n, H, d] rows of the engine's dtype. The drivers
 * (forward.c, backward.c) spread heads and superblocks over OpenMP threads. */
#ifndef LINATTN_KERNELS_H
#define LINATTN_KERNELS_H
#include <stdint.h>
#include "linattn/core.h"

typedef struct la_work_s la_work;
typedef struct {
  char *base;
  size_t stride;
} la_side;

/* The tape of a causal forward (docs/design.md §4.4 "Tape"), as the kernels see it: per chunk
 * and head the prefix state the chunk's queries read (working precision, on the log-scale
 * cm; cm = -inf: none), per token and head the row's (fa, bf, M) (den_coeffs, denominator.h,
 * and the key log-scale). */
typedef struct {
  double *cm;   /* [chunks][H] */
  void *cs;     /* [chunks][H][r (dv+1)] */
  double *rows; /* [n][H][3] */
} la_tape_view;

/* Causal rows [lo, hi) of heads [h0, h1) from their prefixes sz[(h - h0) r (dv+1)],
 * m[h - h0], f[h - h0], which advance; raw: the unfinalized rows and their log-scales lsc
 * (apply_causal_heads, decay_causal) */
typedef void (*la_causal_heads_fn)(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                                   int64_t lo, int64_t hi, const void *q, const void *k,
                                   const void *v, double *sz, double *m, int *f, void *out,
                                   void *raw, double *lsc);

/* Raw rows [lo, hi) of head h plus the prefix (psz, pm) that arrived meanwhile (§4.5)
 * (correct_rows, gla_correct) */
typedef void (*la_correct_fn)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo,
                              int64_t hi, const void *q, const double *psz, double pm,
                              const void *raw, const double *lsc, void *out);

typedef struct {
  const char *dtype; /* "f32" or "f64" */
  /* (sz, m, f) <- (sz, m, f) (+) the summary of keys [lo, hi) (§4.1, §4.2) */
  void (*accum_range)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                      const void *k, const void *v, double *sz, double *m, int *f);
  /* accum_range on heads [h0, h1) together, chunk by chunk; the summaries are
   * sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0] (§4.2 "Head groups") */
  void (*accum_heads)(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                      int64_t hi, const void *k, const void *v, double *sz, double *m, int *f);
  /* causal outputs of rows [lo, hi) from the prefix (sz, m, f), which advances; with raw, the
   * unfinalized rows and log-scales for the overlap correction (§4.5); with base (unstabilized
   * maps only, m = 0), the rows read base + (sz) until a segment starts, while (sz) sums the
   * range alone (--reproducible, §4.7) */
  void (*apply_causal)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                       const void *q, const void *k, const void *v, double *sz, double *m,
                       int *f, void *out, void *raw, double *lsc, const double *base);
  /* apply_causal on heads [h0, h1) together, chunk by chunk, without base; the prefixes are
   * sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0] (§4.2 "Head groups") */
  la_causal_heads_fn apply_causal_heads;
  /* rows [lo, hi) from a complete summary (bidirectional) */
  void (*apply_bidir)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                      const void *q, const double *sz, double m, void *out);
  /* apply_bidir on heads [h0, h1), chunk by chunk; summaries sf[h r (dv+1)] in the working
   * precision, m[h] */
  void (*apply_bidir_heads)(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                            int64_t lo, int64_t hi, const void *q, const void *sf,
                            const double *m, void *out);
  /* raw rows [lo, hi) plus the prefix (psz, pm) that arrived meanwhile (§4.5) */
  la_correct_fn correct_rows;
  /* bidirectional with segments on a rank's whole range (§3.1) */
  void (*apply_segmented)(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                          const void *q, const void *k, const void *v, const double *lsz,
                          double lm, const double *rsz, double rm, void *out);
  /* causal window (§3.2): the forward (out), or with g the backward replay (dq, side) */
  void (*apply_window)(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                       const void *q, const void *k, const void *v, int64_t hlo, int64_t hhi,
                       const void *hk, const void *hv, const double *midsz, double midm,
                       void *out, const void *g, void *dq, double *side);
  /* the backward (§4.4): replay, reverse pass, segmented bidirectional, window reverse */
  void (*bwd_replay)(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const void *q,
                     const void *k, const void *v, const void *g, double *sz, double *m, int *f,
                     void *dq, la_side side, double *rsz, double *rm, int64_t cut);
  /* the replay (causal, or one head) and the reverse pass of heads [h0, h1) together, piece
   * by piece: head h's states start at (h - h0) r (dv+1), its scalars at (h - h0) (§4.2
   * "Head groups") */
  void (*bwd_replay_heads)(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t n,
                           const void *q, const void *k, const void *v, const void *g,
                           double *sz, double *m, int *f, void *dq, la_side side, double *rsz,
                           double *rm, int64_t cut);
  void (*bwd_reverse_heads)(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t n,
                            const void *q, const void *k, const void *v, const void *g,
                            la_side side, double *dsz, double *mu, void *dk, void *dv);
  void (*bwd_segmented)(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                        const void *q, const void *k, const void *v, const void *g,
                        const double *lsz, double lm, const double *rsz, double rm, void *dq,
                        la_side side, double *hsz, double *hm, double *tsz, double *tm,
                        void *dk, void *dv);
  void (*bwd_segmented_ends)(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                             const void *q, const void *k, const void *v, const void *g,
                             la_side side, const double *lrsz, double lrm, const double *rrsz,
                             double rrm, const double *hsz, double hm, const double *tsz,
                             double tm, void *dk, void *dv);
  void (*bwd_window_reverse)(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                             const void *q, const void *k, const void *v, const void *g,
                             const double *side, int64_t flo, int64_t fhi, const void *fq,
                             const void *fg, const double *fside, const double *fmidsz,
                             double fmidm, void *dk, void *dv);
  /* the backward from a tape (§4.4 "Tape"), heads [h0, h1) together, pieces from last to
   * first: dq, dk and dv in one pass; head h's suffix state starts at (h - h0) r (dv+1) */
  void (*bwd_tape_heads)(la_engine e, la_work *w, int h0, int h1, int64_t n, const void *q,
                         const void *k, const void *v, const void *g, const void *out,
                         const la_tape_view *tape, void *dq, double *dsz, double *mu,
                         void *dk, void *dv);
  /* the query-side summary of rows [a, b) of the block (window backward, §3.2, §4.4) */
  void (*query_summary)(la_engine e, la_work *w, int h, int64_t token0, int64_t n, int64_t a,
                        int64_t b, const void *q, const void *g, const double *side,
                        double *sz, double *m);
  /* --decay or --gates (§1.2): causal rows [lo, hi) of heads [h0, h1) from their decayed
   * prefixes (sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0]), which advance (raw: unfinalized
   * rows, as apply_causal); the chunk kernels with the decay folded into the rows where the
   * chunk's decay allows, else the generic products */
  la_causal_heads_fn decay_causal;
  /* per-feature gates (§1.2 "Per-feature gates"): decay_causal's contract, head by head, on
   * the generic products (gla_impl.h) */
  la_causal_heads_fn gla_causal;
  /* per-feature gates: decay_accum's forward summaries (gla_accum), and correct_rows with each
   * query row's prefix read through its own per-feature decay (gla_correct) */
  void (*gla_accum)(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                    int64_t hi, const void *k, const void *v, double *sz, double *m, int *f);
  la_correct_fn gla_correct;
  /* the decayed summaries of the keys of rows [lo, hi) of heads [h0, h1) (§1.2, §4.1):
   * (sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0]) advance over them as decay_causal's states
   * do, without the queries; rev = 1: the reverse summaries as of token lo (no segments) */
  void (*decay_accum)(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                      int64_t hi, const void *k, const void *v, int rev, double *sz, double *m,
                      int *f);
  /* bidirectional rows [0, n): a forward pass unfinalized into out (numerators), den and lsc
   * ([n, H] each), then the reverse pass adds the keys after each row and finalizes out */
  void (*decay_bidir)(la_engine e, la_work *w, int h, int64_t token0, int64_t n, const void *q,
                      const void *k, const void *v, void *den, double *lsc, void *out,
                      const double *pre, double pre_m, const double *suf, double suf_m);
} la_kernels;

extern const la_kernels la_kernels_f32, la_kernels_f64;
#endif
