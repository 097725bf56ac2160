/* linattn::core's private interface (docs/design.md §5.1): what dist/, the program, the tools
 * and the tests call but a user of the library does not. The exact arithmetic and the
 * reproducible drivers of --reproducible (§4.7), the generator's raw draws (§2), the kernel
 * probes (§5.5) and OpenBLAS's thread count (§4.9). Not installed; on the private include path
 * of dist/, the program and the tests (core/CMakeLists.txt). */
#ifndef LINATTN_CORE_PRIVATE_H
#define LINATTN_CORE_PRIVATE_H
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- The decayed backward on a rank's rows (core/engine/decay_bwd.c; docs/design.md §1.2
 * "The backward") ----
 * How la_decay_backward_ranks reaches the other ranks. Each function is Collective over the
 * ranks of the sharded sequence, is called by every rank in the same order, agrees on s (the
 * caller's status so far) first and returns the agreed status (LA_OK on every rank or on
 * none). The one-process form (rk = NULL) is la_backward's. */
typedef struct la_decay_ranks {
  void *ctx;
  int64_t row0, N; /* this rank's first row; the sequence's length */
  /* the forward of eng on this rank's n rows starting at row0 (reversed = 0), or on the
   * sequence reversed in time, where they are rows [row0, row0 + n) with row0 = N - the rank's
   * first row - n (reversed = 1, the ranks in reverse order); stats merged over the ranks */
  la_status (*forward)(void *ctx, la_status s, int reversed, la_engine eng, int64_t n,
                       int64_t row0, const void *q, const void *k, const void *v, void *out,
                       la_den_stats *stats);
  /* next[h] = the log-gate of row row0 + n (the first row of the next rank that has rows), 0
   * when row0 + n = N; first: this rank's first row of gates (NULL when n = 0) */
  la_status (*next_gates)(void *ctx, la_status s, int64_t n, const double *first, double *next);
  /* later[h] = the sum of the later ranks' head[h] up to and including the first one with
   * start = 1 (a segment start among its rows) */
  la_status (*later)(void *ctx, la_status s, const double *head, int start, double *later);
  /* x[0..n) <- the largest over the ranks (the stabilized maps' common scales) */
  la_status (*allmax)(void *ctx, la_status s, double *x, int n);
  /* st <- the exclusive scan (§4.1) of the ranks' st in rank order (reversed = 1: in reverse
   * order, the reversed sequence's): the per-feature gates' value-decayed products' states in
   * row form (§1.2 "Per-feature gates", "Across ranks") */
  la_status (*scan)(void *ctx, la_status s, int reversed, la_state *st);
} la_decay_ranks;

/* la_backward of a decayed engine on this rank's n rows [rk->row0, + n) of a sequence sharded
 * by rows in rank order (rk NULL: one process). The gates are bound for those rows. */
la_status la_decay_backward_ranks(la_engine e, int64_t n, const void *q, const void *k,
                                  const void *v, const void *g, void *dq, void *dk, void *dv,
                                  la_den_stats *stats, const la_decay_ranks *rk);

/* ---- Exact scan state for --reproducible (§4.7) ----
 * Each element of (S|z) e^m as LA_XBINS integer bins of 32 bits on one absolute binary grid:
 * addition is exact, so any order or bracketing of the same addends gives the same bits.
 * Per head: int64 [f, non-finite mark, live, r*(dv+1) elements of 1 + LA_XBINS]. */
#define LA_XBINS 4
typedef struct {
  int heads, r, dv;
  int64_t *x; /* [H][la_xhead_len(r, dv)] */
} la_xstate;

size_t la_xhead_len(int r, int dv); /* int64 per head */
la_status la_xstate_init(la_xstate *x, int heads, int r, int dv); /* identity element */
void la_xstate_reset(la_xstate *x);
void la_xstate_free(la_xstate *x);
void la_xhead_reset(int64_t *xh, size_t rsz); /* one head back to the identity */
/* x_h <- x_h (+) (sz e^m, f): with f the head restarts (a segment start), §4.1. */
void la_xhead_add(int64_t *xh, size_t rsz, const double *sz, double m, int f);
/* a <- a (+) b, and b <- a (+) b (a before b; the MPI operator's form). Exact. */
void la_xhead_combine(int64_t *a, const int64_t *b, size_t rsz);
void la_xhead_combine_right(const int64_t *a, int64_t *b, size_t rsz);
/* a <- a + b whatever b's flag (a keeps its flag): the sum of two pieces of one segment. */
void la_xhead_add_x(int64_t *a, const int64_t *b, size_t rsz);
/* The float64 state nearest the exact one (a fixed function of the bins): m = 0 for
 * unstabilized maps, else a multiple of 32 ln 2; -inf for the identity; NaN after a
 * non-finite addend. */
void la_xhead_round(const int64_t *xh, size_t rsz, int stabilized, double *sz, double *m,
                    int *f);
void la_xstate_round(const la_xstate *x, int stabilized, la_state *s);
void la_xstate_add(la_xstate *x, const la_state *s);         /* x <- x (+) s */
void la_xstate_combine(la_xstate *a, const la_xstate *b);    /* a <- a (+) b */

/* OpenBLAS's own threads for the caller's BLAS calls (n < 1: one); a no-op with another BLAS.
 * The engine keeps it at one inside its OpenMP regions (docs/design.md §4.9). */
void la_blas_set_threads(int n);

/* The same rule on whole blocks of G tokens (the last block may be short), for
 * --reproducible with G = la_engine_repro_block (§4.7): every row0 is a multiple of G, and
 * ranks past the last block own nothing. G = 1 is la_split_ownership. Not Collective. */
void la_split_ownership_grid(int64_t N, int P, int rank, int64_t G, int64_t *n_local,
                             int64_t *row0);

/* GFLOP/s of the GEMM kernel of the table `auto` chooses (docs/design.md §5.5) alone: 64 x 64 x
 * 64 float32 products in cache on each of `threads` threads, best of reps; *impl = its bench
 * row name ("k512gemm", "k256gemm"). NAN with the generic kernels; -1 when out of memory
 * (reason recorded, la_error_reason). */
double la_kernel_probe_gflops(int threads, int reps, const char **impl);
/* The same for the table's float64 GEMM (gemm_f64, 64 x 64 x 64 doubles; *impl "k256dgemm"):
 * NAN where the table has none (the float64 products then run on OpenBLAS's DGEMM). */
double la_kernel_probe_gflops_f64(int threads, int reps, const char **impl);

/* Counter-based generator (§2): a standard normal keyed by (seed, a, b, c). */
double la_rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
uint64_t la_rng_u64(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* ---- Reproducible drivers (§4.7): blocks of R tokens on the global grid ----
 * token0 must be a multiple of R (ranks own whole R-blocks; streaming blocks are multiples
 * of R). Outputs are bitwise the same for any split into ranks, blocks and threads. */
#define LA_REPRO_CHUNKS 64
int64_t la_engine_repro_block(const la_engine eng); /* R = LA_REPRO_CHUNKS x the chunk */
/* The bytes the reproducible drivers allocate for a call on n rows (the memory estimate). */
size_t la_repro_plan_bytes(const la_config *cfg, int heads, int r, int dv, int64_t n);
/* x <- x (+) the summary of keys [token0, token0 + n) (flagged with segments). */
la_status la_engine_accumulate_exact(la_engine eng, int64_t token0, int64_t n, const void *k,
                                     const void *v, la_xstate *x);
/* causal: outputs from the prefix x, which advances past the block; bidirectional: outputs
 * from the complete summary x (not changed; k, v unused). */
la_status la_engine_apply_exact(la_engine eng, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_xstate *x, void *out,
                                la_den_stats *stats);
/* Bidirectional segments: tail (+)= the summary after the block's last start (as
 * la_engine_accumulate_exact), head (+)= the summary before its first start (f = 1 if any);
 * then the outputs from left (the current segment's keys before token0) and right (after). */
la_status la_engine_segment_ends_exact(la_engine eng, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_xstate *tail, la_xstate *head);
la_status la_engine_apply_segmented_exact(la_engine eng, int64_t token0, int64_t n,
                                          const void *q, const void *k, const void *v,
                                          const la_xstate *left, const la_xstate *right,
                                          void *out, la_den_stats *stats);
/* Causal window: rows [token0, token0 + n) with the extended keys xk, xv: global tokens
 * [x0, xend), contiguous, from max(0, token0 - W + 1) on to token0 + min(n, W - 1) (the
 * halos of the first blocks read across token0, so they repeat the first own rows); each
 * block of R tokens restarts the window kernel from its own halo and an exactly summed
 * middle. */
la_status la_engine_apply_window_exact(la_engine eng, int64_t token0, int64_t n, const void *q,
                                       const void *k, const void *v, int64_t x0,
                                       int64_t xend, const void *xk, const void *xv,
                                       void *out, la_den_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
