/* The flat C layer the Python package loads with ctypes (docs/design.md §5.4): plain
 * integers, doubles, strings and pointers only, so that ctypes needs no struct layouts.
 * Tensors are C-order [B, L, H, d] buffers of the operator's dtype, passed by pointer (no
 * copy). Batch entries are independent sequences: in one process they run as one packed
 * sequence of B*L tokens whose segments are the batch boundaries and the caller's segments
 * repeated in each entry (§3), so one engine call covers the batch.
 * Every function returns a la_status; la_py_error() is the one-line reason of the last
 * failure on the calling thread. Not thread-safe on one handle. */
#ifndef LINATTN_PY_BINDING_H
#define LINATTN_PY_BINDING_H
#include <stdint.h>

typedef struct la_py_op la_py_op;

/* The denominator statistics a call reports, as doubles in this order (LA_PY_STATS). */
enum {
  LA_PY_ST_MIN, LA_PY_ST_MAX, LA_PY_ST_MEDIAN, LA_PY_ST_ROWS, LA_PY_ST_NONPOSITIVE,
  LA_PY_ST_SMALL, LA_PY_ST_NONFINITE, LA_PY_ST_VIOLATIONS, LA_PY_ST_BAD_BATCH,
  LA_PY_ST_BAD_TOKEN, LA_PY_ST_BAD_HEAD, LA_PY_ST_OVERFLOWS, LA_PY_STATS
};

int la_py_abi(void); /* LA_PY_ABI: the package refuses a library of another version */
int la_py_stats_len(void);
const char *la_py_version(void);
const char *la_py_error(void);
const char *la_py_map_names(void); /* "elu1,relu,..." in la_map_kind order */
const char *la_py_isa(void);       /* "avx512f", "avx2", "generic" */
/* The cache of large output buffers (pool.c; docs/python.md "Speed"): a block of at least
 * bytes, 2 MiB-aligned, huge pages advised, reused from the cache when one of the same rounded
 * size is idle; NULL when memory is short. put returns a block (0; -1: not one of ours);
 * release frees every idle block; usage reads the bytes handed out, idle, and the cap
 * (LINATTN_POOL_MB, default 1024 MiB; 0: nothing is kept). */
void *la_py_pool_get(int64_t bytes);
int la_py_pool_put(void *p);
void la_py_pool_release(void);
void la_py_pool_usage(int64_t *live_bytes, int64_t *idle_bytes, int64_t *cap);

/* The operator for [*, *, heads, dk] queries and keys and [*, *, heads, dv] values. map,
 * mode ("causal" | "bidirectional"), den ("error" | "add:E" | "clamp:E" | "zero-empty") and
 * kernels ("auto" | "blas" | "avx512") are the CLI's spellings. proj: NULL (drawn from the
 * seed) or float64 [heads, m, dk] (proj_shared = 0) or [m, dk] (proj_shared = 1). */
int la_py_op_create(const char *map, int features, const char *mode, int normalize,
                    const char *den, int allow_signed, double scale, uint64_t seed,
                    int64_t window, int chunk, int threads, const char *kernels,
                    int reproducible, int f64, int heads, int dk, int dv, const double *proj,
                    int proj_m, int proj_shared, const double *decay, int decay_n,
                    int decay_retnet, int gated, la_py_op **out);
void la_py_op_destroy(la_py_op *op);
/* gates= (docs/design.md §1.2 "Gates"): the log-gates [B, L, H] float64 of the next calls of
 * an operator created with gated = LA_GATES_HEAD ([B, L, H, r] with LA_GATES_FEATURE; the
 * caller keeps g alive; NULL clears). The calls bind each sequence's rows to the engine
 * (la_engine_set_gates), which checks every value. */
int la_py_op_set_gates(la_py_op *op, const double *g);
/* Where the next backward of a gated operator writes dL/dg ([B, L, H] float64; NULL: not). */
int la_py_op_set_gates_grad(la_py_op *op, double *dg);
int la_py_op_width(const la_py_op *op);                     /* r */
int la_py_op_features(const la_py_op *op);                  /* m of the projection, 0: none */
const char *la_py_op_kernels(const la_py_op *op);           /* "avx512" | "blas" */
int la_py_op_threads(const la_py_op *op);
/* Copy the projection [heads, m, dk] (float64) into buf of cap doubles. */
int la_py_op_projection(const la_py_op *op, double *buf, int64_t cap);

/* One process. seg: NULL or the offsets [nseg] of one batch entry (0 = o_0 < ... = L).
 * stats: LA_PY_STATS doubles or NULL. forward writes out [B, L, H, dv]; backward writes the
 * gradients of sum(out * g) into dq, dk [B, L, H, dk] and dv [B, L, H, dv]. */
int la_py_forward(la_py_op *op, int64_t B, int64_t L, const void *q, const void *k,
                  const void *v, void *out, const int64_t *seg, int64_t nseg, double *stats,
                  void *tape);
int la_py_backward(la_py_op *op, int64_t B, int64_t L, const void *q, const void *k,
                   const void *v, const void *g, void *dq, void *dk, void *dv,
                   const int64_t *seg, int64_t nseg, double *stats, const void *out,
                   const void *tape);
/* The tape (grad.h, docs/design.md §4.4 "Tape") of a B x L call: its bytes, 0 when this
 * operator cannot keep one (bidirectional, a window shorter than B L). forward with a tape of
 * that size keeps it; backward with the same tape and the forward's out reads it instead of
 * replaying the forward, and then leaves stats untouched (no denominators are formed). */
int64_t la_py_tape_size(const la_py_op *op, int64_t B, int64_t L);

/* Many processes (binding_dist.c): comm_f is the Fortran handle of the caller's
 * communicator (mpi4py's comm.py2f()); each rank passes its shard [B, Lloc, H, d], rows
 * [row0, row0 + Lloc) of each sequence of Ltot tokens (la_split_ownership's split). scan:
 * the --scan-algorithm name. Collective; every rank returns the same status. */
int la_py_forward_dist(la_py_op *op, int comm_f, const char *scan, int64_t B, int64_t Lloc,
                       int64_t row0, int64_t Ltot, const void *q, const void *k, const void *v,
                       void *out, const int64_t *seg, int64_t nseg, double *stats);
int la_py_backward_dist(la_py_op *op, int comm_f, const char *scan, int64_t B, int64_t Lloc,
                        int64_t row0, int64_t Ltot, const void *q, const void *k,
                        const void *v, const void *g, void *dq, void *dk, void *dv,
                        const int64_t *seg, int64_t nseg, double *stats);

/* Exact softmax attention (baseline.h, §4.6) on [B, L, H, d]: forward in the dtype
 * (f64 = 0: float32 products with float64 statistics), backward in float64 (all arrays
 * float64). window 0: none (causal only). */
int la_py_softmax_forward(int f64, const char *mode, double scale, int64_t window,
                          int threads, int64_t B, int64_t L, int heads, int dk, int dv,
                          const void *q, const void *k, const void *v, void *out,
                          const int64_t *seg, int64_t nseg);
int la_py_softmax_backward(const char *mode, double scale, int64_t window, int threads,
                           int64_t B, int64_t L, int heads, int dk, int dv, const double *q,
                           const double *k, const double *v, const double *g, double *dq,
                           double *dk_out, double *dv_out, const int64_t *seg, int64_t nseg);
/* The same across ranks (the ring of dist/softmax_ring.c), shards as la_py_forward_dist. */
int la_py_softmax_forward_dist(int comm_f, int f64, const char *mode, double scale,
                               int64_t window, int threads, int64_t B, int64_t Lloc,
                               int64_t row0, int64_t Ltot, int heads, int dk, int dv,
                               const void *q, const void *k, const void *v, void *out,
                               const int64_t *seg, int64_t nseg);
int la_py_softmax_backward_dist(int comm_f, const char *mode, double scale, int64_t window,
                                int threads, int64_t B, int64_t Lloc, int64_t row0,
                                int64_t Ltot, int heads, int dk, int dv, const double *q,
                                const double *k, const double *v, const double *g, double *dq,
                                double *dk_out, double *dv_out, const int64_t *seg,
                                int64_t nseg);

/* ---- shared by binding.c and binding_dist.c ---- */
#include "linattn/core.h"
struct la_py_op {
  la_config cfg;
  la_featmap fm;
  la_engine eng;
  la_dtype dt;
  int H, dk, dv, r;
  int64_t *seg; /* the packed offsets of the last call (the engine keeps them by pointer) */
  int64_t nseg;
  const double *gates; /* la_py_op_set_gates: the next call's log-gates [B, L, H], or NULL */
  double *dgates;      /* la_py_op_set_gates_grad: where the backward writes dL/dg, or NULL */
};
/* The denominator verdict of a finished call (the CLI's la_job_verdict, with tokens as
 * (batch entry, token) of a batch of sequences of L tokens), and the stats array. */
int la_py_verdict(const la_py_op *op, const la_den_stats *st, int64_t L, const char *what);
void la_py_fill_stats(const la_den_stats *st, int64_t L, double *out);
/* Check that x [n, H, d] holds only finite values; the error names (batch, token, head,
 * column): row t is token token0 + t % L of batch entry batch0 + t / L. On `threads` OpenMP
 * threads (<= 0: the default). */
int la_py_check_finite(const char *name, la_dtype dt, const void *x, int64_t n, int H, int d,
                       int64_t L, int64_t token0, int64_t batch0, int threads);
/* The rows [row0, row0 + n) rank `rank` of P passes for sequences of Ltot tokens (the engine's
 * ownership rule with op; la_split_ownership without). binding_dist.c. */
void la_py_shard(const la_py_op *op, int64_t Ltot, int P, int rank, int64_t *n, int64_t *row0);
int la_py_mode(const char *s, la_mode *m);
/* Check seg (one batch entry's offsets) against L (reason recorded). */
int la_py_check_segments(const int64_t *seg, int64_t nseg, int64_t L);
#endif
