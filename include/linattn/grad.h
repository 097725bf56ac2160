/* linattn backward pass (docs/design.md §4.4): dL/dQ, dL/dK, dL/dV from dL/dout for
 * the operator the configuration defines (map, mode, normalization, denominator policy,
 * segments). The projection is held fixed; with `precomputed` the gradients are with
 * respect to phi(Q) and phi(K). Not Collective; dist.h has the distributed driver. */
#ifndef LINATTN_GRAD_H
#define LINATTN_GRAD_H
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Side storage of the replay: 3 doubles (fa, b, M) per (token, head), at the byte stride of
 * a dV row when that holds 24 bytes. Then the dv output buffer itself can be passed as side
 * (la_backward_side_in_dv): the reverse pass reads each row before it overwrites it, and the
 * backward needs no memory that grows with N beyond its inputs and outputs. Otherwise pass
 * la_backward_side_size bytes. (The window entry points take their own contiguous
 * 3 n H doubles: the reverse pass reads rows after the current one.) */
size_t la_backward_side_size(const la_engine eng, int64_t n);
int la_backward_side_in_dv(const la_engine eng);

/* Pass 1 (forward replay) on block [token0, token0+n): recomputes the outputs, forms the
 * coefficients of the denominator policy, writes dq and the side storage, and accumulates
 * into rev the reverse-scan element: the queries' sum phi(q_i) [a_i; b_i]^T before the
 * block's first segment start (causal) or over all queries (bidirectional).
 * causal: state is the prefix and is advanced over the block; bidirectional: state is the
 * complete summary. stats collects the denominator statistics and violations. Causal only:
 * rev may be NULL when no block follows (la_backward), which skips the element's product. */
la_status la_backward_replay(la_engine eng, int64_t token0, int64_t n, const void *q,
                             const void *k, const void *v, const void *g, la_state *state,
                             void *dq, void *side, la_state *rev, la_den_stats *stats);

/* Pass 2 (reverse) on the same block: dk and dv from the side storage, with suffix holding
 * the sum over the queries after the block (causal; advanced backwards over the block) or
 * the complete query sum (bidirectional). */
la_status la_backward_reverse(la_engine eng, int64_t token0, int64_t n, const void *q,
                              const void *k, const void *v, const void *g, const void *side,
                              la_state *suffix, void *dk, void *dv);

/* Bidirectional with segments on a rank's whole range: left/right are the forward summaries
 * of the keys before/after the range (as la_engine_apply_segmented takes them). Pieces inside
 * the range are finished; the query sums of the first and last piece come back in head_rev
 * and tail_rev (flag: the range holds a segment start) for the scans, and
 * la_backward_segmented_ends completes those two pieces from the sums of the other ranks
 * (left_rev: exscan of the tails; right_rev: reverse exscan of the heads). */
la_status la_backward_segmented(la_engine eng, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, const void *g,
                                const la_state *left, const la_state *right, void *dq, void *dk,
                                void *dv, void *side, la_state *head_rev, la_state *tail_rev,
                                la_den_stats *stats);
la_status la_backward_segmented_ends(la_engine eng, int64_t token0, int64_t n, const void *q,
                                     const void *k, const void *v, const void *g,
                                     const void *side, const la_state *left_rev,
                                     const la_state *right_rev, const la_state *head_rev,
                                     const la_state *tail_rev, void *dk, void *dv);

/* Causal sliding window (§3): the replay on a rank's whole range with the forward halo
 * (la_window_halo: raw keys [hlo, hhi) and the summary mid of [hhi, token0)), then the
 * reverse pass with the future halo (la_window_future: the queries' raw rows [flo, fhi) of
 * q, g and the side storage, and the query summary fmid of [token0+n, flo), which the later
 * ranks make with la_backward_query_summary on their own rows). */
la_status la_backward_window(la_engine eng, int64_t token0, int64_t n, const void *q,
                             const void *k, const void *v, const void *g, int64_t hlo,
                             int64_t hhi, const void *halo_k, const void *halo_v,
                             const la_state *mid, void *dq, double *side, la_den_stats *stats);
la_status la_backward_window_reverse(la_engine eng, int64_t token0, int64_t n, const void *q,
                                     const void *k, const void *v, const void *g,
                                     const double *side, int64_t flo, int64_t fhi,
                                     const void *fut_q, const void *fut_g,
                                     const double *fut_side, const la_state *fmid, void *dk,
                                     void *dv);
/* The query-side summary of own rows [a, b) (one segment) of the block [token0, token0+n). */
la_status la_backward_query_summary(la_engine eng, int64_t token0, int64_t n, const void *q,
                                    const void *g, const double *side, int64_t a, int64_t b,
                                    la_state *out);

/* Both passes on one rank's whole sequence. */
/* The backward's replay recomputes the outputs (§4.4); with this set, it also writes those of
 * the global rows [row0, row0 + n) to out ([n, H, dv], the engine's dtype), so that a caller
 * who wants the outputs and the gradients (linattn eval) runs one pass fewer. They equal
 * la_engine_apply's to rounding (out = fa num_s, with fa the denominator policy's factor).
 * out = NULL turns it off. Engines with segments or a window are refused (their replay may
 * visit a row twice): LA_ERR_UNSUPPORTED. Not thread-safe against a running backward. */
la_status la_engine_set_replay_output(la_engine eng, void *out, int64_t row0, int64_t n);

la_status la_backward(la_engine eng, int64_t n, const void *q, const void *k, const void *v,
                      const void *g, void *dq, void *dk, void *dv, la_den_stats *stats);
/* --gates (docs/design.md §1.2 "Gates"): with this set, the next la_backward of a gated engine
 * also writes dL/dg, the gradient of the log-gates of tokens [0, n), to dg ([n, H] float64,
 * or [n, H, r] with per-feature gates, §1.2 "Per-feature gates"; the caller's; 0 at a
 * segment's first token, whose gate acts on nothing). dg = NULL turns it off. LA_ERR_ARG for
 * an engine without gates. Not thread-safe against a running backward. */
la_status la_engine_set_gates_grad(la_engine eng, double *dg);

/* The tape (docs/design.md §4.4 "Tape"): a causal forward on one process that keeps, per
 * chunk and head, the prefix state its queries read and, per token and head, the denominator
 * policy's coefficients, so that the backward walks the sequence once (dq, dk and dv from the
 * same rows) instead of replaying the forward first. la_tape_size: its bytes for n tokens on
 * this engine (with its segments), about (4 / C) r (dv+1) + 24 bytes per token and head in
 * float32; 0 when the engine cannot keep one (bidirectional, a window shorter than n, n < 1).
 * la_forward_taped: la_forward, filling tape (64-byte aligned). la_backward_taped: the
 * gradients from the tape, the forward's outputs out and the output gradient g; the engine
 * and its segments must be those of the forward (checked against the tape's header: a tape
 * of another call is LA_ERR_ARG). It notes no denominator statistics: the forward's stand.
 * Results equal la_backward's to rounding (b is formed from the rounded outputs). */
size_t la_tape_size(const la_engine eng, int64_t n);
/* With on = 1, la_forward, la_backward and the taped forms check every row of q, k, v (and
 * of g in the backward) for non-finite values in the pass that reads it for the products,
 * where it is in cache, and return LA_ERR_NONFINITE (without the position: the caller's own
 * scan finds it) instead of outputs computed from it; a separate scan would read every input
 * once more (docs/python.md "Speed"). Causal engines without a window only (the rows of the
 * other paths are not all read through the checked path): else LA_ERR_UNSUPPORTED. */
la_status la_engine_set_check_finite(la_engine eng, int on);
la_status la_forward_taped(la_engine eng, int64_t n, const void *q, const void *k, const void *v,
                           void *out, void *tape, la_den_stats *stats);
la_status la_backward_taped(la_engine eng, int64_t n, const void *q, const void *k,
                            const void *v, const void *g, const void *out, const void *tape,
                            void *dq, void *dk, void *dv);

#ifdef __cplusplus
}
#endif
#endif
