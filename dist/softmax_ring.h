/* Exact softmax attention across ranks: the quadratic reference that `linattn bench` times
 * (docs/cli.md "linattn bench", impl=softmax) and its masked forward and float64 gradients
 * (docs/design.md §4.6). Private to dist/: it takes MPI handles. */
#ifndef LINATTN_SOFTMAX_RING_H
#define LINATTN_SOFTMAX_RING_H
#include "linattn/baseline.h"
#include "linattn/dist.h"

/* Collective on d. Exact softmax attention of a sequence of n tokens sharded by
 * la_split_ownership: each rank passes its own rows (n_local from row0; q, k [n_local, H, dk],
 * v [n_local, H, dv], dtype dt) and gets
 *     out_i = sum_{j in A(i)} exp(scale q_i.k_j) v_j / sum_{j in A(i)} exp(scale q_i.k_j)
 * for its rows, A(i) as the mask says (baseline.h; segment offsets end at n). The
 * key/value blocks rotate around the ring of ranks; the MPI_Isend/Irecv of the next block
 * overlaps la_softmax_partial_mask on the current one (threads threads; <= 0: the OpenMP
 * default). A block goes only as far round the ring as the last rank whose rows read it
 * (every rank derives the same plan from n, P and the mask), and a rank computes only on
 * blocks its rows read.
 * Memory per rank: the online-softmax state, n_local H (dv + 2) float64, and with P > 1 two
 * (key, value) blocks of ceil(n/P) H (dk + dv) elements of dt. Each step sends at most one
 * block (two messages). Errors are agreed across ranks: LA_ERR_ARG (bad mask, or rows that
 * are not la_split_ownership's), LA_ERR_UNSUPPORTED when a block exceeds an MPI count,
 * LA_ERR_NOMEM, LA_ERR_MPI, LA_ERR_DENOMINATOR for a row that reads no key. */
la_status la_softmax_ring_mask(la_dist d, la_dtype dt, int64_t n, int heads, int dk, int dv,
                               double scale, const la_softmax_mask *mask, int64_t n_local,
                               int64_t row0, const void *q, const void *k, const void *v,
                               void *out, int threads);
/* la_softmax_ring_mask with the mask {mode, NULL, 0, 0}. */
la_status la_softmax_ring(la_dist d, la_dtype dt, int64_t n, int heads, int dk, int dv,
                          double scale, la_mode mode, int64_t n_local, int64_t row0,
                          const void *q, const void *k, const void *v, void *out, int threads);

/* Collective on d. float64: out and the gradients dq, dk_out, dv_out (each rank its own rows:
 * [n_local, H, dk] for dq and dk_out, [n_local, H, dv] for dv_out) of L = sum(out * g), g
 * [n_local, H, dv]. Forward ring (keeping the state), D = rowsum(g * out), then a backward
 * ring in which each key/value block travels with its dK/dV accumulators: the holder adds
 * its rows' contribution (la_softmax_backward_partial) into a fresh accumulator while the
 * incoming one arrives, adds the two and passes the sum on; the last rank that reads the
 * block sends it home. Each backward step sends at most four messages (k, v, dK, dV of one
 * block); the accumulator's send overlaps the next step. Memory per rank: the forward's,
 * plus D (n_local H), three dK/dV buffers of ceil(n/P) H (dk + dv) doubles (one with P = 1),
 * and the backward's (threads - 1) copies of dq. Errors as la_softmax_ring_mask; a local
 * failure inside the backward ring lets the ring finish its messages and is agreed at the
 * end. */
la_status la_softmax_ring_grad(la_dist d, int64_t n, int heads, int dk, int dv, double scale,
                               const la_softmax_mask *mask, int64_t n_local, int64_t row0,
                               const double *q, const double *k, const double *v,
                               const double *g, double *out, double *dq, double *dk_out,
                               double *dv_out, int threads);

#endif
