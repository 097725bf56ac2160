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

/* The causal exscans (la_dist_exscan, _reverse, the nonblocking pair below) combine the rank
 * summaries by cfg->scan_algorithm in cfg->scan_pieces pieces (la_scan_algorithm, core.h;
 * docs/design.md §4.5 "Scan algorithms"); the other fields are not read. A new d uses auto
 * with 8 pieces. Not Collective, but every rank must pass the same. */
extern const char *const la_scan_algorithm_names[]; /* indexed by la_scan_algorithm, NULL-ended */
void la_dist_use_config(la_dist d, const la_config *cfg);
/* The algorithm of the last causal scan on d (auto resolved); before any, the one set
 * (LA_SCAN_AUTO when auto). */
la_scan_algorithm la_dist_scan_algorithm(const la_dist d);
/* auto's model (dist/scan_model.c, docs/simulation.md): the predicted seconds of one exclusive
 * scan of heads elements of per doubles over P ranks by algorithm a, and the algorithm auto
 * takes (never LA_SCAN_AUTO or LA_SCAN_EXSCAN). Pure: the same on every rank. Not Collective. */
double la_scan_model_seconds(la_scan_algorithm a, int P, int heads, size_t per, int pieces);
la_scan_algorithm la_scan_auto_choice(int P, int heads, size_t per, int pieces);

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
 * across ranks (§3, §4). With a window (not reproducible) any split into consecutive rows works
 * (its halos follow the rows as passed), and rows that are not consecutive from 0 are
 * LA_ERR_ARG on every rank. stats (may be NULL) are merged over ranks on every rank. The
 * streaming plan's in-memory form: la_stream_in_memory, one la_stream_feed, la_stream_finish. */
la_status la_dist_forward(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                          const void *q, const void *k, const void *v, void *out,
                          la_den_stats *stats);

/* Collective: the backward on sharded rows (each rank its own n_local rows from row0):
 * dq, dk, dv from g = dL/dout for the loss sum(out * g), for every mode, map, policy, segments
 * (la_engine_set_segments) and window (la_config.window). stats are merged over ranks. */
la_status la_dist_backward(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                           const void *q, const void *k, const void *v, const void *g,
                           void *dq, void *dk, void *dv, la_den_stats *stats);

/* ---- The streaming plan (dist/stream.c; docs/design.md §4.5 "The streaming plan") ----
 *
 * The forward of a sequence of N tokens over the ranks of d, fed from the caller's buffers
 * in blocks of a rank's rows, so that no rank holds more than a block of Q, K, V or outputs.
 * The plan decides which rows come next and which inputs it reads; the caller reads them
 * (from files, a generator, memory) and keeps the outputs it is handed:
 *
 *     la_stream s;  la_stream_block b;
 *     la_stream_create(d, eng, N, block, &s);          // allocate la_stream_block_rows(s) rows
 *     while (la_stream_next(s, &b) == LA_OK && b.pass) {
 *       read rows [b.row0, b.row0 + b.n) of Q (if b.q), K and V (if b.kv) into q, k, v;
 *       if (la_stream_feed(s, read_status, q, k, v, out, &stats) != LA_OK) break;
 *       if (b.out) keep out's b.n rows;                 // rows [b.row0, b.row0 + b.n)
 *     }
 *     la_stream_finish(s, &stats);  la_stream_destroy(&s);
 *
 * Every rank takes the same number of steps (a rank whose rows are done gets idle steps, n =
 * 0, and still calls la_stream_feed), so that errors are agreed at each step. Causal mode
 * with P > 1 takes two passes: pass 1 reads K and V and sums each rank's keys; then the ranks'
 * sums are combined by the scan of la_dist_use_config (overlapped with the first block of
 * pass 2); pass 2 reads Q, K, V and hands out outputs. Bidirectional mode also takes two
 * passes (pass 2 reads only Q). One causal rank takes only pass 2. A window shorter than N,
 * or bidirectional segments, hold each rank's shard in memory: one step of all its rows
 * (la_stream_holds_shard). With la_config.reproducible the blocks lie on the grid of
 * la_engine_repro_block and the outputs are bitwise the same for any ranks, blocks and
 * threads (§4.7).
 *
 * The work is a list of lanes: global token ranges [start, end), done up to pos in the
 * current pass, each with its scan state (pass 1: the partial sum of the lane's keys; pass 2:
 * the prefix at pos). A fresh plan has one lane per rank (la_engine_ownership); a plan resumed
 * from a checkpoint has the lanes the checkpoint gave this rank (docs/design.md §6
 * "Checkpoints"). */
typedef struct {
  int64_t start, end, pos; /* global tokens [start, end); [start, pos) done in this pass */
} la_lane;

typedef struct la_stream_s *la_stream;

/* The next step of a plan (la_stream_next). pass = 0: the plan is done. */
typedef struct {
  int pass;         /* 1: key summaries, 2: outputs; 0: done */
  int64_t row0, n;  /* this rank's global rows [row0, row0 + n); n = 0: an idle step */
  int q, kv;        /* the feed reads Q (q), and K and V (kv), of these rows */
  int out;          /* the feed writes these rows' outputs */
  int last;         /* the last step of this pass */
} la_stream_block;

/* 1 when the plan of this engine for N tokens holds each rank's shard in memory (a window
 * shorter than N, or bidirectional segments): one step of all the rank's rows, and no
 * streaming position to checkpoint. Not Collective. */
int la_stream_holds_shard(const la_engine eng, int64_t N);
/* Collective: a plan for the forward of N tokens with the engine eng (its configuration, its
 * segments and window; the engine must outlive the plan), in blocks of at most `block` rows
 * per rank (< 1: a rank's whole shard; rounded up to the reproducible grid with
 * la_config.reproducible). One lane per rank: its rows by la_engine_ownership. The scan's
 * algorithm is d's (la_dist_use_config). Errors (LA_ERR_ARG, LA_ERR_NOMEM) are agreed. */
la_status la_stream_create(la_dist d, la_engine eng, int64_t N, int64_t block, la_stream *s);
/* Collective: the plan of la_stream_create resumed at a checkpointed position: pass (1 or 2)
 * of a run of L lanes, of which this rank continues nmy (nmy may be 0) from global lane index
 * lane0, with their positions and states (copied). Streaming only: not for a plan that holds
 * the shard, nor with la_config.reproducible (LA_ERR_ARG). */
la_status la_stream_resume(la_dist d, la_engine eng, int64_t N, int64_t block, int pass, int L,
                           int64_t lane0, int nmy, const la_lane *lanes, const la_state *states,
                           la_stream *s);
/* Collective: the in-memory plan of la_dist_forward: one step of the caller's own rows
 * [row0, row0 + n_local) (n_local may be 0; la_split_ownership, or la_engine_ownership with
 * la_config.reproducible), every mask of §3 combined across ranks. */
la_status la_stream_in_memory(la_dist d, la_engine eng, int64_t n_local, int64_t row0,
                              la_stream *s);
/* The most rows a step hands this rank: the caller's buffers hold this many rows of Q, K
 * ([rows, H, dk]), V and outputs ([rows, H, dv]) in the engine's dtype. Not Collective. */
int64_t la_stream_block_rows(const la_stream s);
/* Collective: the next step into *b (b->pass = 0: done). Between the passes it runs the
 * collective of the ranks' key sums. Returns the collective's agreed status. */
la_status la_stream_next(la_stream s, la_stream_block *b);
/* Collective: feed the step of the last la_stream_next: q, k, v hold its rows (those it
 * reads; the others may be NULL) and out receives its outputs when b.out (out is not read
 * otherwise). in is the caller's status for the block (e.g. of reading it): when not LA_OK,
 * the block is not computed and the collective steps still run. Denominator statistics go
 * into stats (may be NULL), on this rank only until la_stream_finish. Returns the status
 * agreed over the ranks (la_dist_agree); after a failure the plan only accepts
 * la_stream_destroy. */
la_status la_stream_feed(la_stream s, la_status in, const void *q, const void *k, const void *v,
                         void *out, la_den_stats *stats);
/* Collective, after the last step: merge stats (may be NULL) over the ranks, in place on
 * every rank. */
la_status la_stream_finish(la_stream s, la_den_stats *stats);
/* Tokens of this rank's lanes not yet done in the current pass. Not Collective. */
int64_t la_stream_tokens_left(const la_stream s);
/* The plan's position, for a checkpoint (not to be changed): the pass, the run's lane count
 * L, this rank's first global lane index and its nmy lanes with their states. Not
 * Collective. */
void la_stream_lanes(const la_stream s, int *pass, int *L, int64_t *lane0, int *nmy,
                     const la_lane **lanes, const la_state **states);
/* Seconds this rank spent computing in la_stream_feed (reading and agreeing excluded). */
double la_stream_compute_seconds(const la_stream s);
/* Not Collective (a plan stopped at a checkpoint is destroyed as it is); NULL-safe. */
void la_stream_destroy(la_stream *s);

/* ---- The streamed backward (dist/stream_backward.c; docs/design.md §4.4 "Streamed") ----
 *
 * la_dist_backward on a sequence of N tokens fed in blocks of a rank's rows, as the forward
 * plan above: no rank holds more than a block of Q, K, V, dL/dout or gradients.
 *
 *     la_bstream s;  la_bstream_block b;
 *     la_bstream_create(d, eng, N, block, &s);         // allocate la_bstream_block_rows(s) rows
 *     while (la_bstream_next(s, &b) == LA_OK && b.pass) {
 *       read rows [b.row0, b.row0 + b.n) of K, V (if b.kv), Q and G (if b.q, b.g), and the
 *       side rows kept from pass 2 (if b.side_in: la_bstream_side_bytes(s, b.n) bytes);
 *       if (la_bstream_feed(s, read_status, q, k, v, g, side, dq, dk, dv, &stats) != LA_OK) break;
 *       keep dq and the side rows (if b.dq, b.side_out), dk and dv (if b.dkdv);
 *     }
 *     la_bstream_finish(s, &stats);  la_bstream_destroy(&s);
 *
 * Pass 1 (causal with P > 1, and bidirectional) reads K and V; pass 2 (blocks in order) hands
 * out dq and the side rows (it uses dv as scratch); pass 3 (blocks in reverse order) reads
 * them back and hands out dk and dv. A window shorter than N, bidirectional segments and decay hold the shard: one step
 * of all the rank's rows (la_bstream_holds_shard), which hands out dq, dk and dv. Rows are
 * la_engine_ownership's; every rank takes the same number of steps, and each step's status is
 * agreed (Collective: every function but block_rows, side_bytes and destroy). */
typedef struct la_bstream_s *la_bstream;
typedef struct {
  int pass;                /* 1, 2, 3; 0: done */
  int64_t row0, n;         /* global rows [row0, row0 + n); n = 0: an idle step */
  int q, kv, g, side_in;   /* what to read */
  int dq, side_out, dkdv;  /* what to keep */
} la_bstream_block;

int la_bstream_holds_shard(const la_engine eng, int64_t N);
la_status la_bstream_create(la_dist d, la_engine eng, int64_t N, int64_t block, la_bstream *s);
/* The most rows of a step (a block, or the shard). */
int64_t la_bstream_block_rows(const la_bstream s);
/* Bytes of the side rows of n rows (3 doubles per token and head; 0 when the plan holds the
 * shard). */
size_t la_bstream_side_bytes(const la_bstream s, int64_t n);
la_status la_bstream_next(la_bstream s, la_bstream_block *b);
la_status la_bstream_feed(la_bstream s, la_status in, const void *q, const void *k,
                          const void *v, const void *g, void *side, void *dq, void *dk, void *dv,
                          la_den_stats *stats);
/* Merges stats over the ranks (la_dist_backward merged them already for a shard plan). */
la_status la_bstream_finish(la_bstream s, la_den_stats *stats);
void la_bstream_destroy(la_bstream *s);

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
