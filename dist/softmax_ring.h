/* Exact softmax attention across ranks: the quadratic reference that `linattn bench` times
 * (docs/cli.md "linattn bench", impl=softmax). Private to dist/: it takes MPI handles. */
#ifndef LINATTN_SOFTMAX_RING_H
#define LINATTN_SOFTMAX_RING_H
#include "linattn/baseline.h"
#include "linattn/dist.h"

/* Collective on d. Exact softmax attention of a sequence of n tokens sharded by
 * la_split_ownership: each rank passes its own rows (n_local from row0; q, k [n_local, H, dk],
 * v [n_local, H, dv], dtype dt) and gets
 *     out_i = sum_{j in A(i)} exp(scale q_i.k_j) v_j / sum_{j in A(i)} exp(scale q_i.k_j)
 * for its rows (A(i) = all keys, or j <= i in causal mode), as baseline.h defines it. The
 * key/value blocks rotate around the ring of ranks in P steps; the MPI_Isend/Irecv of the
 * next block overlaps la_softmax_partial on the current one (threads threads; <= 0: the
 * OpenMP default).
 * Memory per rank: the online-softmax state, n_local H (dv + 2) float64, and with P > 1 two
 * (key, value) blocks of ceil(n/P) H (dk + dv) elements of dt. Each step sends one block.
 * Errors are agreed across ranks: LA_ERR_UNSUPPORTED when a block exceeds an MPI count,
 * LA_ERR_NOMEM, LA_ERR_MPI, LA_ERR_DENOMINATOR for a row that reads no key. */
la_status la_softmax_ring(la_dist d, la_dtype dt, int64_t n, int heads, int dk, int dv,
                          double scale, la_mode mode, int64_t n_local, int64_t row0,
                          const void *q, const void *k, const void *v, void *out, int threads);

#endif
