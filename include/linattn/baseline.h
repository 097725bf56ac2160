/* Exact softmax attention (docs/design.md §4.6): the float64-statistics reference
 * and the quadratic timing baseline of `linattn bench`, its masks and its float64 backward.
 * MPI-free, Not Collective. Layout as everywhere: q, k [n, H, dk], v and out [n, H, dv],
 * C order, dtype dt.
 *   out_i = sum_{j in A(i)} exp(s q_i.k_j) v_j / sum_{j in A(i)} exp(s q_i.k_j)
 * with A(i) = all keys (bidirectional) or j <= i (causal), further restricted by a mask
 * (la_softmax_mask). Domain: finite inputs. */
#ifndef LINATTN_BASELINE_H
#define LINATTN_BASELINE_H
#include <stdint.h>
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Whole sequence in memory. Query blocks x key blocks through GEMMs with an online softmax,
 * so no n x n matrix is stored: memory is O(threads * (block^2 + block * dv)). f64 computes in
 * float64; f32 runs f32 GEMMs and exponentials, with float64 row max, row sum and output
 * accumulator. OpenMP over (head, query block); threads <= 0 means the OpenMP default. */
la_status la_softmax_attention(la_dtype dt, int64_t n, int heads, int dk, int dv, double scale,
                               la_mode mode, const void *q, const void *k, const void *v,
                               void *out, int threads);

/* Online-softmax state of nq query rows (all heads), for keys that arrive in blocks from
 * elsewhere (the ring of program/bench.c). Per row and head: the running max m of s q.k over
 * the keys seen so far, l = sum exp(s q.k - m), acc = sum exp(s q.k - m) v, all float64.
 * A row that has read no key has m = -inf, l = 0, acc = 0. */
typedef struct {
  int64_t nq;
  int heads, dv;
  double *m;   /* [nq, H] */
  double *l;   /* [nq, H] */
  double *acc; /* [nq, H, dv] */
} la_softmax_state;

/* Which keys query i reads (docs/design.md §3): mode (causal: j <= i), packed segments
 * (only j in the segment of i) and a causal sliding window (i - W < j <= i). With log_decay,
 * the pair (i, j) of head h weighs exp(s q_i.k_j) gamma_h^|i-j| (docs/design.md §8.1 "With
 * decay"): the score gets the bias |i - j| ln gamma_h by global positions, normalized over the
 * keys A(i) as before. NULL is the undecayed reference, bitwise. */
typedef struct {
  la_mode mode;
  const int64_t *seg;  /* segment offsets 0 = o_0 < ... < o_S = N (count S+1), or NULL: one segment */
  int64_t nseg;        /* count of offsets (S+1) */
  int64_t window;      /* causal only: W >= 1, or 0 = no window */
  const double *log_decay; /* [heads]: ln gamma_h <= 0 and finite, or NULL: no decay */
} la_softmax_mask;

/* The keys that queries q0..q0+nq-1 read under mask lie in [*lo, *hi): each query's keys
 * form one interval whose ends never decrease with i, and the union over consecutive
 * queries has no gap, so this is [lo(q0), hi(q0+nq-1)). *hi = INT64_MAX when the mask sets
 * no end (bidirectional without segments); *lo = *hi = q0 when nq = 0. LA_ERR_ARG (reason
 * recorded) for a bad mask or a query past the last segment offset. */
la_status la_softmax_mask_keys(const la_softmax_mask *mask, int64_t q0, int64_t nq, int64_t *lo,
                               int64_t *hi);

la_status la_softmax_state_init(la_softmax_state *s, int64_t nq, int heads, int dv);
void la_softmax_state_free(la_softmax_state *s);

/* Fold one key block into the state. The state's rows are the queries q ([nq, H, dk]) at
 * global positions q0 .. q0+nq-1; the block holds keys k, v ([nk, H, dk], [nk, H, dv]) at
 * global positions k0 .. k0+nk-1. The mask is applied by these global positions: masked
 * pairs get probability exactly 0, and key tiles that no query of a query tile reads are
 * skipped (causal beyond the diagonal, other segments, outside the window), so with
 * segments or a window the cost is O(nq (segment or W + tile)) rather than O(nq nk); a
 * block no query reads costs nothing. Blocks may come in any order (the result is the same
 * up to rounding), and each key must be folded exactly once. LA_ERR_ARG for a bad mask
 * (la_softmax_mask_keys) or positions past its last offset. */
la_status la_softmax_partial_mask(la_softmax_state *s, la_dtype dt, int dk, double scale,
                                  const la_softmax_mask *mask, int64_t q0, const void *q,
                                  int64_t k0, int64_t nk, const void *k, const void *v, int threads);
/* la_softmax_partial_mask with the mask {mode, NULL, 0, 0}. */
la_status la_softmax_partial(la_softmax_state *s, la_dtype dt, int dk, double scale,
                             la_mode mode, int64_t q0, const void *q, int64_t k0, int64_t nk,
                             const void *k, const void *v, int threads);

/* out = acc / l ([nq, H, dv], dtype dt). A row that read no key (l = 0) gets zeros and makes
 * the call return LA_ERR_DENOMINATOR (after writing every row). */
la_status la_softmax_finish(const la_softmax_state *s, la_dtype dt, void *out);

/* The backward (core/softmax/softmax_bwd.c, float64), for the loss L = sum(out * G), with the final
 * forward state (m, l) of each query row and P_ij = exp(s q_i.k_j - m_i) / l_i on the mask:
 *   D_i = sum_c G_ic out_ic,   dP_ij = G_i.v_j,   dS_ij = P_ij (dP_ij - D_i),
 *   dV_j += sum_i P_ij G_i,   dQ_i += s sum_j dS_ij k_j,   dK_j += s sum_i dS_ij q_i
 * (FlashAttention-2's backward). With the mask's log_decay, s q_i.k_j gets the forward's bias
 * |i - j| ln gamma_h in P (a constant, so the formulas hold as written). Domain: finite inputs,
 * l_i > 0 (a row with l_i = 0 read no key and contributes nothing). */

/* D [nq, H] from out [nq, H, dv] and G [nq, H, dv]. */
la_status la_softmax_delta(int64_t nq, int heads, int dv, const double *out, const double *g,
                           double *D);

/* Accumulate the gradients of query rows q0..q0+nq-1 (q, G: [nq,H,dk],[nq,H,dv]; fwd: their
 * final forward state, D: [nq,H]) against the key block k0..k0+nk-1 (k, v): dq [nq,H,dk] +=,
 * dk_blk [nk,H,dk] +=, dv_blk [nk,H,dv] +=. float64.
 * Tiles of 128 x 128 are recomputed (S, P, dP) and go through five GEMMs; nothing nq x nk is
 * stored, and tiles the mask excludes are skipped as in la_softmax_partial_mask. OpenMP over
 * (key tile, head) items, statically scheduled: each item owns its rows of dk_blk and
 * dv_blk, and thread t > 0 adds into a private copy of dq that is summed into dq in thread
 * order at the end, so the result depends only on the thread count. Memory:
 * (threads - 1) nq H dk + 2 (nq + threads 128^2) doubles. */
la_status la_softmax_backward_partial(const la_softmax_state *fwd, const double *D, int dk,
                                      double scale, const la_softmax_mask *mask, int64_t q0,
                                      const double *q, const double *g, int64_t k0, int64_t nk,
                                      const double *k, const double *v, double *dq,
                                      double *dk_blk, double *dv_blk, int threads);

#ifdef __cplusplus
}
#endif
#endif
