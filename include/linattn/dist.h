/* linattn distributed API (docs/design.md §4.5, §5). Every MPI call lives in dist/.
 * The library never calls MPI_Init; it duplicates the caller's communicator. */
#ifndef LINATTN_DIST_H
#define LINATTN_DIST_H
#include <mpi.h>
#include "linattn/baseline.h"
#include "linattn/core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The ownership rules (la_split_ownership, la_split_ownership_grid, la_engine_ownership) are
 * MPI-free and live in core.h. */

typedef struct la_dist_s *la_dist;

/* Collective on comm: duplicates it. Every rank returns the same status (out of memory on
 * one rank fails all of them, with the reason recorded by la_error). */
la_status la_dist_create(MPI_Comm comm, la_dist *d);
/* Collective. */
void la_dist_destroy(la_dist *d);
MPI_Comm la_dist_comm(const la_dist d);
int la_dist_rank(const la_dist d);
int la_dist_size(const la_dist d);
/* Bytes this rank has sent through collectives so far (the report's comm_bytes_per_rank). */
int64_t la_dist_comm_bytes(const la_dist d);
double la_dist_comm_seconds(const la_dist d);

/* Collective: every rank passes its local status, its reason recorded (la_error); all return
 * the status of the lowest failing rank, whose reason (la_error_reason) is recorded on every
 * rank, so la_error_reason(status) names it everywhere (docs/design.md §6 "Errors"). On
 * success the record is cleared: a caller holding an earlier failure does not call it. */
la_status la_dist_agree(la_dist d, la_status st);

/* Collective. Combine per-rank summaries (§4):
 * causal: state <- exclusive prefix (MPI_Exscan with the non-commutative scan operator;
 *         rank 0 gets the identity explicitly);
 * bidirectional: state <- allreduce of the summaries (log-scale aware). */
la_status la_dist_exscan(la_dist d, la_state *state);
la_status la_dist_allreduce(la_dist d, la_state *state);
/* Collective: state <- the combination of the elements of all later ranks, nearest last
 * (a scan over the reversed communicator); the last rank gets the identity. */
la_status la_dist_exscan_reverse(la_dist d, la_state *state);

/* How the causal exscans (la_dist_exscan, _reverse, the nonblocking pair below) combine the
 * rank summaries (docs/design.md §4.5 "Scan algorithms"): MPI_Exscan, recursive doubling,
 * LASP's chain, LASP-2's all-gather, or ZeCO's pipelined All-Scan in `pieces` pieces (< 1:
 * the default, 8). All give the same prefixes up to float64 rounding of the bracketing.
 * LA_SCAN_AUTO picks, at each scan, the point-to-point algorithm that a latency-bandwidth
 * model predicts fastest for that scan's P and state size (la_scan_auto_choice; docs/design.md
 * §4.5 "auto"). Not Collective, but every rank must set the same. The bidirectional
 * allreduce is always MPI_Allreduce. */
typedef enum {
  LA_SCAN_AUTO = 0,
  LA_SCAN_EXSCAN,
  LA_SCAN_DOUBLING,
  LA_SCAN_CHAIN,
  LA_SCAN_ALLGATHER,
  LA_SCAN_PIPELINED
} la_scan_algorithm;
extern const char *const la_scan_algorithm_names[]; /* indexed by la_scan_algorithm, NULL-ended */
void la_dist_set_scan_algorithm(la_dist d, la_scan_algorithm a, int pieces);
/* The algorithm of the last causal scan on d (auto resolved); before any, the one set
 * (LA_SCAN_AUTO when auto). */
la_scan_algorithm la_dist_scan_algorithm(const la_dist d);
/* auto's model (dist/scan_model.c, docs/simulation.md): the predicted seconds of one exclusive
 * scan of heads elements of per doubles over P ranks by algorithm a, and the algorithm auto
 * takes (never LA_SCAN_AUTO or LA_SCAN_EXSCAN). Pure: the same on every rank. Not Collective. */
double la_scan_model_seconds(la_scan_algorithm a, int P, int heads, size_t per, int pieces);
la_scan_algorithm la_scan_auto_choice(int P, int heads, size_t per, int pieces);

/* Collective: the same on exact states (§4.7), whose operator is exactly associative, so
 * the result does not depend on how MPI brackets it. */
la_status la_dist_xexscan(la_dist d, la_xstate *x);
la_status la_dist_xexscan_reverse(la_dist d, la_xstate *x);
la_status la_dist_xallreduce(la_dist d, la_xstate *x);

/* Nonblocking exclusive scan of the rank totals (MPI_Iexscan), to overlap with local work.
 * begin is Collective (every rank must call it); end waits and writes the prefix
 * (rank 0: the identity). */
typedef struct la_dist_req_s *la_dist_req;
la_status la_dist_iexscan_begin(la_dist d, const la_state *total, la_dist_req *req);
la_status la_dist_iexscan_end(la_dist d, la_dist_req *req, la_state *prefix);

/* Collective: merge denominator statistics over ranks, in place on every rank. */
la_status la_dist_reduce_stats(la_dist d, la_den_stats *st);

/* Collective: the whole forward on a sequence sharded by la_split_ownership; each rank
 * passes its own rows (n_local may be 0), with the engine's segments and window combined
 * across ranks (§3, §4). stats are merged over ranks on every rank. */
la_status la_dist_forward(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                          const void *q, const void *k, const void *v, void *out,
                          la_den_stats *stats);

/* Collective: the backward on sharded rows (each rank its own n_local rows from row0):
 * dq, dk, dv from g = dL/dout for the loss sum(out * g), for every mode, map, policy, segments
 * (la_engine_set_segments) and window (la_config.window). stats are merged over ranks. */
la_status la_dist_backward(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                           const void *q, const void *k, const void *v, const void *g,
                           void *dq, void *dk, void *dv, la_den_stats *stats);

/* ---- Exact softmax attention across ranks (dist/softmax_ring.c; docs/design.md §4.6) ---- */

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

#ifdef __cplusplus
}
#endif
#endif
