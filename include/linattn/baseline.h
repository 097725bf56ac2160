/* Exact softmax attention (docs/design.md §4.6): the float64-statistics reference
 * and the quadratic timing baseline of `linattn bench`. MPI-free, Not Collective.
 * Layout as everywhere: q, k [n, H, dk], v and out [n, H, dv], C order, dtype dt.
 *   out_i = sum_{j in A(i)} exp(s q_i.k_j) v_j / sum_{j in A(i)} exp(s q_i.k_j)
 * with A(i) = all keys (bidirectional) or j <= i (causal). Domain: finite inputs. */
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
 * elsewhere (the ring of dist/bench.c). Per row and head: the running max m of s q.k over
 * the keys seen so far, l = sum exp(s q.k - m), acc = sum exp(s q.k - m) v, all float64.
 * A row that has read no key has m = -inf, l = 0, acc = 0. */
typedef struct {
  int64_t nq;
  int heads, dv;
  double *m;   /* [nq, H] */
  double *l;   /* [nq, H] */
  double *acc; /* [nq, H, dv] */
} la_softmax_state;

la_status la_softmax_state_init(la_softmax_state *s, int64_t nq, int heads, int dv);
void la_softmax_state_free(la_softmax_state *s);

/* Fold one key block into the state. The state's rows are the queries q ([nq, H, dk]) at
 * global positions q0 .. q0+nq-1; the block holds keys k, v ([nk, H, dk], [nk, H, dv]) at
 * global positions k0 .. k0+nk-1. Causal masks key j > query i by these global positions;
 * a block wholly after the last query costs nothing. Blocks may come in any order (the
 * result is the same up to rounding), and each key must be folded exactly once. */
la_status la_softmax_partial(la_softmax_state *s, la_dtype dt, int dk, double scale,
                             la_mode mode, int64_t q0, const void *q, int64_t k0, int64_t nk,
                             const void *k, const void *v, int threads);

/* out = acc / l ([nq, H, dv], dtype dt). A row that read no key (l = 0) gets zeros and makes
 * the call return LA_ERR_DENOMINATOR (after writing every row). */
la_status la_softmax_finish(const la_softmax_state *s, la_dtype dt, void *out);

#ifdef __cplusplus
}
#endif
#endif
