/* linattn local (MPI-free) API: configuration, feature maps, scan state, forward operator.
 * Everything here is Not Collective. docs/design.md sections are cited as §N. */
#ifndef LINATTN_CORE_H
#define LINATTN_CORE_H
#include <stdint.h>
#include <stddef.h>
#include "linattn/status.h"
#include "linattn/types.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LA_CAUSAL = 0, LA_BIDIRECTIONAL = 1 } la_mode;

/* §2. The values are stable: a new map is appended (taylor2 and dpfp came after precomputed),
 * so a compiled client's integers keep their meaning. The value indexes the map table. */
typedef enum {
  LA_MAP_ELU1 = 0,
  LA_MAP_RELU,
  LA_MAP_IDENTITY,
  LA_MAP_FAVOR,     /* favor+ */
  LA_MAP_FAVOR_ORF, /* favor+orf */
  LA_MAP_FAVOR_HYP, /* favor-hyp */
  LA_MAP_TRIG,
  LA_MAP_PRECOMPUTED,
  LA_MAP_TAYLOR2, /* Based's second-order Taylor map of exp(s q.k) */
  LA_MAP_DPFP,    /* Schlag et al.'s DPFP-nu, nu = features */
  LA_MAP_COUNT
} la_map_kind;

/* How the causal exscans of the distributed library combine the rank summaries
 * (la_config.scan_algorithm; docs/design.md §4.5 "Scan algorithms"): MPI_Exscan, recursive
 * doubling, LASP's chain, LASP-2's all-gather, or ZeCO's pipelined All-Scan in
 * la_config.scan_pieces pieces. All give the same prefixes up to float64 rounding of the
 * bracketing. LA_SCAN_AUTO picks, at each scan, the point-to-point algorithm that a
 * latency-bandwidth model predicts fastest for that scan's P and state size
 * (la_scan_auto_choice in linattn/dist.h). The bidirectional allreduce is always
 * MPI_Allreduce. The names are la_scan_algorithm_names (linattn/dist.h). */
typedef enum {
  LA_SCAN_AUTO = 0,
  LA_SCAN_EXSCAN,
  LA_SCAN_DOUBLING,
  LA_SCAN_CHAIN,
  LA_SCAN_ALLGATHER,
  LA_SCAN_PIPELINED,
  LA_SCAN_COUNT /* the number of algorithms; a new one goes just before */
} la_scan_algorithm;
#define LA_SCAN_PIECES_DEFAULT 8
#define LA_SCAN_PIECES_MAX 65536

/* §1 denominator policies. */
typedef enum { LA_DEN_ERROR = 0, LA_DEN_ADD, LA_DEN_CLAMP, LA_DEN_ZERO_EMPTY } la_den_policy;

/* Which float32 kernels compute the chunk products (docs/design.md §4.2). auto: the AVX-512
 * kernels where the CPU has AVX-512F, else OpenBLAS. float64 always uses OpenBLAS. The
 * environment variable LINATTN_KERNELS=auto|blas|avx512 overrides the field. */
/* --kernels: which table of kernels computes the products and maps (docs/design.md §5.5).
 * GENERIC is the portable C templates with OpenBLAS's products, as BLAS (the same code). */
typedef enum {
  LA_KERNELS_AUTO = 0,
  LA_KERNELS_BLAS,
  LA_KERNELS_AVX512,
  LA_KERNELS_AVX2,
  LA_KERNELS_GENERIC
} la_kernel_choice;

/* Every tunable is one field, with the CLI flag of the same name (docs/cli.md). */
typedef struct {
  la_mode mode;             /* --mode */
  la_map_kind map;          /* --feature-map */
  int features;             /* --features: m (random maps; r = m or 2m), nu (dpfp; r = 2 dk nu) */
  double scale;             /* --scale s; <= 0 means 1/sqrt(dk) */
  uint64_t seed;            /* --seed */
  int normalize;            /* --normalize on|off */
  la_den_policy den_policy; /* --denominator */
  double den_eps;           /* E of add:E / clamp:E, > 0 */
  int allow_signed;         /* --allow-signed */
  int chunk;                /* --chunk C; 0 = tuned default */
  int threads;              /* --threads; 0 = OpenMP default */
  int64_t window;           /* --window W (causal): keys i-W < j <= i; 0 = none */
  la_kernel_choice kernels; /* --kernels auto|avx512|avx2|generic|blas */
  int reproducible;         /* --reproducible: bitwise the same for any ranks and threads */
  la_scan_algorithm scan_algorithm; /* --scan-algorithm (distributed causal scans only) */
  int scan_pieces;          /* --scan-pieces: pieces of the pipelined scan; 0 = the default, 8 */
  /* --decay (§1.2): per-head decay gamma_h in (0, 1]. decay[decay_n] is read by
   * la_config_check and copied by la_engine_create (the caller keeps it until then):
   * decay_n = 1 gives every head decay[0], decay_n = H one value per head; NULL / 0: none.
   * decay_retnet = 1 (with decay NULL): RetNet's gamma_h = 1 - 2^(-5-h). */
  const double *decay;
  int decay_n;
  int decay_retnet;
  /* --gates (§1.2): LA_GATES_HEAD = the state decays by per-token, per-head log-gates
   * g_t,h <= 0, S_t = e^{g_t,h} S_{t-1} + phi(k_t) v_t^T (Mamba-2's scalar form);
   * LA_GATES_FEATURE = by one log-gate per token, head and feature, g_t,h,f <= 0, row f of the
   * state by e^{g_t,h,f} (GLA's diagonal form; §1.2 "Per-feature gates": the causal forward
   * on one process, from a state, so far). Any --decay goes on top (g + ln gamma_h); the
   * values come by la_engine_set_gates. Causal only. 0: none. */
  int gates;
} la_config;

/* la_config.gates: the log-gates' form (§1.2 "Gates", "Per-feature gates") */
#define LA_GATES_HEAD 1    /* [N, H] */
#define LA_GATES_FEATURE 2 /* [N, H, r], r the feature map's width */

/* Bounds of the tunables. */
#define LA_FEATURES_MAX (1 << 16)
#define LA_CHUNK_MIN 1
#define LA_CHUNK_MAX 4096
#define LA_DIM_MAX (1 << 16)
/* The widest feature map (r) accepted: favor-hyp and trig at LA_FEATURES_MAX. It bounds taylor2
 * (dk <= 510) and dpfp (2 dk nu). */
#define LA_WIDTH_MAX (2 * LA_FEATURES_MAX)

void la_config_default(la_config *cfg);
/* Check the configuration for a head dimension dk: LA_ERR_ARG with its one-line reason
 * recorded (la_error_reason) naming the option. */
la_status la_config_check(const la_config *cfg, int dk);
/* Set den_policy and den_eps from the --denominator spelling: error | add:EPS (EPS >= 0) |
 * clamp:EPS (EPS > 0) | zero-empty. LA_ERR_ARG with the reason recorded (la_error). */
la_status la_config_set_denominator(la_config *cfg, const char *spec);

const char *la_map_name(la_map_kind k);       /* "elu1", "favor+", ... */
int la_map_from_name(const char *s, la_map_kind *k); /* 0 on success */
/* 1 if the map is signed by construction (identity, trig): normalized mode needs
 * allow_signed. precomputed is not refused; its denominators are checked row by row. */
int la_map_is_signed(la_map_kind k);
/* 1 if the map carries a log-scale stabilizer (favor+, favor+orf, favor-hyp, trig). */
int la_map_is_stabilized(la_map_kind k);
/* 1 if the map draws a random projection. */
int la_map_is_random(la_map_kind k);
/* 1 if --features sets the map's width: m of the random maps, nu of dpfp (taylor2: r is fixed
 * by dk). */
int la_map_uses_features(la_map_kind k);
/* Feature width r for input width dk and features m (m of the random maps, nu of dpfp); 0 for
 * an unknown map or a width beyond LA_WIDTH_MAX. */
int la_map_width(la_map_kind k, int dk, int m);
/* Useful flops of evaluating the map on one row (the count of docs/cli.md "linattn bench"). */
double la_map_flops_per_row(la_map_kind k, int dk, int r);

/* ---- Feature maps (§2) ---- */
typedef struct la_featmap_s *la_featmap;

/* heads H, input width dk. For precomputed, dk is the feature width r. */
la_status la_featmap_create(const la_config *cfg, int heads, int dk, la_featmap *fm);
void la_featmap_destroy(la_featmap *fm);
int la_featmap_width(const la_featmap fm); /* r */
int la_featmap_heads(const la_featmap fm);
int la_featmap_input_dim(const la_featmap fm);
/* Projection rows omega, [H, m, dk] float64, or NULL for non-random maps. */
const double *la_featmap_projection(const la_featmap fm, int *m);
/* Replace the projection: shared != 0 means one [m, dk] for every head. */
la_status la_featmap_set_projection(la_featmap fm, const double *omega, int m, int shared);

/* Evaluate the map on n rows of head h (row stride ld elements). Writes phi_s [n, r]
 * (row stride r) and the per-row log-scale a (phi = phi_s * e^a; a = 0 for unstabilized
 * maps). dtype of x and phi_s is dt; a is double. Used by the engine and exposed for tests. */
la_status la_featmap_eval(const la_featmap fm, la_dtype dt, int h, int64_t n, const void *x,
                          int64_t ld, void *phi_s, double *a);

/* ---- Scan state (§4): per head (S | z) as r x (dv+1) float64, log-scale m, flag f, and
 * the block's cumulative log-decay a (§1.2: the sum of ln gamma_h over its tokens; 0 without
 * decay and for the identity) ---- */
typedef struct {
  int heads, r, dv;
  double *sz; /* [H][r][dv+1]: S in columns 0..dv-1, z in column dv */
  double *m;  /* [H]; -INFINITY for the identity element */
  int *f;     /* [H]; segment-start flag */
  double *a;  /* [H]; cumulative log-decay (<= 0) */
} la_state;

la_status la_state_init(la_state *s, int heads, int r, int dv); /* identity element */
void la_state_reset(la_state *s);                                /* back to identity */
void la_state_free(la_state *s);
/* a <- a (+) b (a before b), §4; non-commutative; identities never give NaN. With decay
 * (§1.2) a's summary is decayed by b's cumulative log-decay first (its log-scale moves by
 * b->a), and the result's a is the sum. */
void la_state_combine(la_state *a, const la_state *b);
/* Same on raw per-head arrays (for the MPI operator): len = H*(r*(dv+1)) etc. */
void la_state_combine_head(double *a_sz, double *a_m, int *a_f, const double *b_sz,
                           const double *b_m, const int *b_f, size_t rsz);
/* b <- a (+) b in place (a still before b), bitwise the same result: the MPI operator's
 * inout = in (+) inout without a scratch copy of a. */
void la_state_combine_head_right(const double *a_sz, const double *a_m, const int *a_f,
                                 double *b_sz, double *b_m, int *b_f, size_t rsz);

/* ---- Denominator statistics (§1) ---- */
#define LA_DEN_HIST_PER_OCTAVE 16
#define LA_DEN_HIST_BINS (2200 * LA_DEN_HIST_PER_OCTAVE)
typedef struct {
  double min, max;               /* over finite true denominators */
  int64_t rows;                  /* rows counted */
  int64_t count_nonpositive;     /* den <= 0 */
  int64_t count_nonfinite;       /* den not finite */
  int64_t violations;            /* rows that violate the policy */
  int64_t first_bad_token;       /* smallest violating token, -1 if none */
  int first_bad_head;
  int64_t overflows;             /* unnormalized outputs that overflow */
  int64_t first_overflow_token;
  int first_overflow_head;
  uint64_t *hist;                /* [LA_DEN_HIST_BINS] positive dens by log2 */
} la_den_stats;

la_status la_den_stats_init(la_den_stats *st);
void la_den_stats_free(la_den_stats *st);
void la_den_stats_merge(la_den_stats *into, const la_den_stats *from);
/* Median of positive denominators from the histogram (to 1/16 octave), and the number of
 * rows below 1e-6 * median (rows in bins wholly below the threshold, plus nonpositive). */
double la_den_stats_median(const la_den_stats *st);
int64_t la_den_stats_count_small(const la_den_stats *st);

/* ---- Engine: plan once, run many blocks ---- */
typedef struct la_engine_s *la_engine;

/* Plan for dtype dt, H heads, dv value width; allocates per-thread workspaces (§4 memory
 * bound: O(C (r + dk + dv) + r dv) per thread, independent of N). */
la_status la_engine_create(const la_config *cfg, const la_featmap fm, la_dtype dt, int dv,
                           la_engine *eng);
void la_engine_destroy(la_engine *eng);
/* The bytes la_engine_create would allocate for this plan (r the feature width, threads as
 * cfg->threads resolves them now), plus the window queues of calls that reach `reach`
 * tokens (0: none): the engine's share of the memory estimate (docs/design.md §4.8). */
size_t la_engine_plan_bytes(const la_config *cfg, int heads, int r, int dv, la_dtype dt,
                            int64_t reach);
int la_engine_chunk(const la_engine eng);
/* The chunk length used when la_config.chunk is 0, tuned per feature width r and dv. */
int la_default_chunk(int r, int dv);
/* Which kernels compute the products and maps of this engine, forward and backward: "avx512",
 * "avx2" or "blas" (the generic C templates with OpenBLAS; la_config.kernels, resolved at
 * creation). */
const char *la_engine_kernels(const la_engine eng);
/* Resolve a kernel choice for this process: the environment variable LINATTN_KERNELS
 * (auto | avx512 | avx2 | generic | blas) overrides choice. *name = the table's name, as
 * la_engine_kernels reports it ("avx512", "avx2", "blas"). auto takes the widest the CPU and
 * the build have. LA_ERR_UNSUPPORTED (with its reason, la_error_reason) for an instruction
 * set the CPU or the build lacks. */
la_status la_kernels_resolve(la_kernel_choice choice, const char **name);

/* Which rows of a sequence each of P ranks owns (core/engine/geometry.c; dist.h's collectives use
 * them). */
/* Ownership rule (the only one): rank p owns n_p = N/P + (N%P > p) rows, contiguous, in
 * rank order. Not Collective. */
void la_split_ownership(int64_t N, int P, int rank, int64_t *n_local, int64_t *row0);
/* The rows a rank owns under the engine's rule: la_split_ownership, or on the reproducible
 * grid when the engine's configuration asks for --reproducible. */
void la_engine_ownership(const la_engine eng, int64_t N, int P, int rank, int64_t *n_local,
                         int64_t *row0);

int la_engine_threads(const la_engine eng);
/* The threads an engine planned with cfg would use (cfg->threads, or the OpenMP default). */
int la_config_threads(const la_config *cfg);
void la_engine_shape(const la_engine eng, int *heads, int *r, int *dv);
la_mode la_engine_mode(const la_engine eng);
la_dtype la_engine_dtype(const la_engine eng);
int64_t la_engine_window(const la_engine eng);
int la_engine_reproducible(const la_engine eng); /* la_config.reproducible (§4.7) */
/* 1 if some head has a decay gamma_h < 1 (§1.2); gamma_h of head h (1: none). */
int la_engine_decayed(const la_engine eng);
/* --gates (§1.2 "Gates"): 1 if the engine was planned with la_config.gates. */
int la_engine_gated(const la_engine eng);
/* Log-gates per token and head of la_engine_set_gates: r with per-feature gates
 * (LA_GATES_FEATURE, r > 1), else 1. */
int la_engine_gate_width(const la_engine eng);
/* The log-gates g <= 0 of global tokens [token0, token0 + n), [n, H] float64 (token-major;
 * [n, H, r] with LA_GATES_FEATURE), for every later call on those rows: not copied, so the
 * caller keeps g until the calls are done or another la_engine_set_gates. Every value is
 * checked: LA_ERR_NONFINITE for a NaN or Inf, LA_ERR_ARG for g > 0, each naming (token, head)
 * (and the feature). Calls on rows outside the range fail with LA_ERR_ARG. Not Collective. */
la_status la_engine_set_gates(la_engine eng, const double *g, int64_t token0, int64_t n);
/* The log-gates la_engine_set_gates last gave (NULL and *n = 0 without gates): tokens
 * [*token0, *token0 + *n). The distributed window sends them to the later ranks' halos. */
const double *la_engine_gates(const la_engine eng, int64_t *token0, int64_t *n);
double la_engine_decay(const la_engine eng, int h);
/* ln gamma_h as the engine uses it (0 without decay): the cumulative log-decay of n tokens of
 * head h is n times it (la_state.a). */
double la_engine_log_decay(const la_engine eng, int h);
int la_engine_input_dim(const la_engine eng);
/* 1 if the engine's map carries a log-scale stabilizer (la_map_is_stabilized). */
int la_engine_stabilized(const la_engine eng);

/* The identity of the scan element of eng's summaries, the state la_engine_accumulate adds
 * to and the collectives combine: la_state_init(s, H, r, dv); with per-feature gates
 * (LA_GATES_FEATURE, r > 1) the row form, la_state_init(s, H r, 1, dv): head h's feature f
 * is its own element h r + f (row f of (S|z)) with its own log-scale m, flag and cumulative
 * log-decay a, so that the decayed combine of la_state_combine is the per-feature one,
 * diag(e^{a_2}) (S_1|z_1) + (S_2|z_2) (docs/design.md §1.2 "Per-feature gates"). Such an
 * engine's la_engine_apply, _apply_local and _correct take either form (the row form's a
 * grows by the block's gates, the head form's does not); la_engine_accumulate only the row
 * form. */
la_status la_engine_state_init(const la_engine eng, la_state *s);

/* Keys pass: state <- state (+) summary(keys of this block), for every head. Inputs are
 * [n, H, dk] and [n, H, dv] in the engine's dtype; token0 is the block's first global token.
 * With segments the summary is the tail after the block's last segment start. With decay
 * (§1.2, causal) the summary's cumulative log-decay is n ln gamma_h and the earlier state is
 * decayed over the block. */
la_status la_engine_accumulate(la_engine eng, int64_t token0, int64_t n, const void *k,
                               const void *v, la_state *state);
/* The summary of the block as a reverse scan sees it (bidirectional decay, §1.2): state holds
 * the keys after the block and becomes e^{n ln gamma_h} state + sum_j gamma_h^(j - token0)
 * phi(k_j)^T [v_j | 1]; its a grows by n ln gamma_h. Without decay the same as
 * la_engine_accumulate. A decayed engine with segments is refused (LA_ERR_UNSUPPORTED). */
la_status la_engine_accumulate_reverse(la_engine eng, int64_t token0, int64_t n, const void *k,
                                       const void *v, la_state *state);

/* Packed sequences (§3): offsets 0 = o_0 < ... < o_S = N (global token indices), kept by
 * pointer (the caller owns them until the engine is destroyed). NULL: one segment. The state
 * resets exactly at every o_s; scan elements carry f = 1 when their range holds a start. */
la_status la_engine_set_segments(la_engine eng, const int64_t *offsets, int64_t count);
/* General pairwise masks (§3) are refused: an arbitrary mask breaks the single shared summary
 * phi(q)^T S. Always returns LA_ERR_UNSUPPORTED with why recorded (la_error_reason). Use
 * la_engine_set_segments or la_config.window. */
la_status la_engine_set_mask(la_engine eng, const void *mask);
/* First segment start >= t (INT64_MAX if none; without segments only t <= 0 gives 0). */
int64_t la_engine_segment_at_or_after(const la_engine eng, int64_t t);
int la_engine_has_segments(const la_engine eng);

/* Apply pass on a block of n tokens whose first global token is token0. It reads no window
 * (a window W of at least token0 + n is the plain causal operator; shorter windows go through
 * la_engine_apply_window) and, bidirectional, one summary for every row (segments go through
 * la_engine_apply_segmented).
 * causal: outputs with the incoming prefix `state` (updated to include this block).
 * bidirectional: outputs from the complete summary `state` (k, v unused, may be NULL).
 * out is [n, H, dv]; denominator policy applied; stats accumulated. */
la_status la_engine_apply(la_engine eng, int64_t token0, int64_t n, const void *q,
                          const void *k, const void *v, la_state *state, void *out,
                          la_den_stats *stats);

/* Overlap of the rank prefix with local work (§4, causal only). apply_local runs the block
 * from the state `local` (normally the identity) and stores unfinalized rows
 * raw = [num_s | den_s] ([n, H, dv+1], engine dtype) with their log-scales lsc ([n, H]).
 * correct then adds phi(q_i)^T P for the prefix P that arrived meanwhile, applies the
 * denominator policy, and writes out. The state after the block is prefix (+) local. With
 * decay (§1.2) row i reads gamma_h^(i+1) phi(q_i)^T P. */
la_status la_engine_apply_local(la_engine eng, int64_t token0, int64_t n, const void *q,
                                const void *k, const void *v, la_state *local, void *raw,
                                double *lsc);
la_status la_engine_correct(la_engine eng, int64_t token0, int64_t n, const void *q,
                            const la_state *prefix, const void *raw, const double *lsc,
                            void *out, la_den_stats *stats);

/* Bidirectional with segments (§3, §4), on a rank's whole range [token0, token0+n):
 * every segment piece gets its own summary; the piece at the start adds `left` (the tail of
 * the keys before token0, ignored when token0 starts a segment) and the piece at the end adds
 * `right` (the keys after token0+n up to the segment's end, ignored when token0+n starts a
 * segment or is N). With decay (§1.2, no segments): left is the decayed summary of the keys
 * before token0 (la_engine_accumulate's, exclusive-scanned) and right the reverse summary of
 * the keys after token0 + n (la_engine_accumulate_reverse's, reverse-scanned). */
la_status la_engine_apply_segmented(la_engine eng, int64_t token0, int64_t n, const void *q,
                                    const void *k, const void *v, const la_state *left,
                                    const la_state *right, void *out, la_den_stats *stats);

/* Causal sliding window (§3), on a rank's whole range [token0, token0+n), without
 * subtraction: per chunk, exact masked products for the chunk and for the far edge of the
 * window (at most 2C-2 keys), plus a two-stacks queue of chunk summaries for the rest.
 * The keys before token0 that the window needs come as
 *   halo_k, halo_v: raw rows [la_window_halo(...).lo, .hi) and
 *   mid: the summary of keys [hi, token0) (identity when hi == token0).
 * Memory: O(min(W, N)/C * r * dv) per head for the queue. */
la_status la_engine_apply_window(la_engine eng, int64_t token0, int64_t n, const void *q,
                                 const void *k, const void *v, int64_t halo_lo,
                                 int64_t halo_hi, const void *halo_k, const void *halo_v,
                                 const la_state *mid, void *out, la_den_stats *stats);

/* The halo a rank with range [token0, token0+n) needs for window W and chunk C (§3): raw key
 * rows [*lo, *hi) and the summary of [*hi, token0). Depends only on its arguments (every
 * rank can compute any other rank's halo). With segments the raw rows start no earlier than
 * the segment of token0; a rank starting a segment needs nothing (*lo = *hi = token0). */
void la_window_halo(const la_engine eng, int64_t token0, int64_t n, int64_t *lo, int64_t *hi);
/* The mirror for the backward (keys read the queries after them): raw query rows [*lo, *hi)
 * after the range, and a summary of [token0+n, *lo). N is the sequence length. */
void la_window_future(const la_engine eng, int64_t token0, int64_t n, int64_t N, int64_t *lo,
                      int64_t *hi);

/* One-shot forward on a whole in-memory sequence [0, n): both modes, segments and a causal
 * window (nothing lies before or after the sequence). Not Collective. */
la_status la_forward(la_engine eng, int64_t n, const void *q, const void *k, const void *v,
                     void *out, la_den_stats *stats);

/* Check n*H*d values for non-finite entries; returns LA_ERR_NONFINITE with the first
 * (token, head, column) (token offset by token0). */
la_status la_check_finite(la_dtype dt, const void *x, int64_t n, int heads, int d,
                          int64_t token0, int64_t *bad_token, int *bad_head, int *bad_col);

/* ---- Input files, checked after loading (docs/cli.md "Files"); the callers prefix the path ---- */
/* Segment offsets (§3): count = S+1 values 0 = o_0 < o_1 < ... < o_S = N with S >= 1.
 * LA_OK, or LA_ERR_FORMAT with its one-line reason recorded. count < 2 or off NULL (what a
 * caller passes for a file that is not a 1-D int64 array) is "must be a 1-D int64 array". */
la_status la_segments_check(const int64_t *off, int64_t count, int64_t N);
/* A projection (§2.1) of dtype dt and shape[ndim], whose data holds the product of the shape
 * (as la_npy_load returns it): [heads, m, dk] or [m, dk], float, m = features, every entry
 * finite. LA_OK, or LA_ERR_SHAPE or LA_ERR_NONFINITE with its one-line reason recorded. */
la_status la_projection_check(la_dtype dt, int ndim, const int64_t *shape, const void *data,
                              int heads, int dk, int features);
/* The m a projection of this shape sets: shape[ndim-2] when ndim is 2 or 3 and it lies in
 * [1, LA_FEATURES_MAX]; otherwise features unchanged (la_projection_check then refuses it). */
int la_projection_features(int ndim, const int64_t *shape, int features);

/* Synthetic rows [n, H, d] for tensor 0 (Q), 1 (K), 2 (V), starting at token0, on OpenMP's
 * default team; la_synth_rows_threads on `threads` threads (<= 0: the default). The rows do
 * not depend on the thread count. LA_SYNTH_VERSION names the definition (docs/design.md
 * §2.1): a checkpoint of the synthetic workload records it, and a resume refuses another. */
#define LA_SYNTH_VERSION 4
void la_synth_rows(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads, int d,
                   double scale, la_dtype dt, void *dst);
void la_synth_rows_threads(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                           int d, double scale, la_dtype dt, void *dst, int threads);

#ifdef __cplusplus
}
#endif
#endif
