/* The options of `linattn run`, `grad` and `bench` (docs/cli.md): one table that options.c
 * turns into the parser, --help and --print-options. Values are checked here, with a
 * message naming the option; engine-level checks follow in la_config_check. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench.h"
#include "cli.h"
#include "scan_names.h"

_Static_assert(sizeof(la_mode) == sizeof(int) && sizeof(la_map_kind) == sizeof(int) &&
                   sizeof(la_dtype) == sizeof(int),
               "enum options are stored as int");
_Static_assert(sizeof(la_kernel_choice) == sizeof(int), "enum options are stored as int");
_Static_assert(LA_F32 == 0 && LA_F64 == 1 && LA_CAUSAL == 0 && LA_BIDIRECTIONAL == 1 &&
                   LA_KERNELS_AUTO == 0 && LA_KERNELS_BLAS == 1 && LA_KERNELS_AVX512 == 2 &&
                   LA_KERNELS_AVX2 == 3 && LA_KERNELS_GENERIC == 4,
               "enum options are stored as the index of their name");

static const la_opt_sub la_subs[] = {
    {"run", LA_SUB_RUN}, {"grad", LA_SUB_GRAD}, {"bench", LA_SUB_BENCH}, {"eval", LA_SUB_EVAL}};
enum { NSUBS = (int)(sizeof la_subs / sizeof la_subs[0]) };

/* ---- values that need code ---- */

static const char *const mode_names[] = {"causal", "bidirectional", NULL};
static const char *const onoff_names[] = {"on", "off", NULL};
static const int onoff_values[] = {1, 0};
static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const baseline_names[] = {"none", "softmax", "pblas", "all", NULL};
static const char *const kernel_names[] = {"auto", "blas", "avx512", "avx2", "generic", NULL};
static const char *const scan_names[] = LA_SCAN_ALGORITHM_NAMES; /* scan_names.h */
_Static_assert(sizeof(la_scan_algorithm) == sizeof(int) && LA_SCAN_AUTO == 0,
               "--scan-algorithm is stored as the int index of its name");

/* Feature maps come from the library, in la_map_kind order. */
static const char *map_name(int v) {
  return v >= 0 && v < LA_MAP_COUNT ? la_map_name((la_map_kind)v) : NULL;
}
static int map_lookup(const char *s, int *v) {
  la_map_kind k;
  if (la_map_from_name(s, &k)) return -1;
  *v = (int)k;
  return 0;
}
/* bench times only the maps whose denominators stay positive on its synthetic workload. */
static const char *bench_map_refused(int v) {
  return la_map_is_signed((la_map_kind)v) || v == LA_MAP_PRECOMPUTED
             ? "is not timed by bench (its denominators can be <= 0 on the synthetic workload)"
             : NULL;
}

/* eval measures the maps whose denominators are positive by construction. */
static const char *eval_map_refused(int v) {
  return la_map_is_signed((la_map_kind)v) || v == LA_MAP_PRECOMPUTED
             ? "is not studied by eval (signed maps can give denominators <= 0, and precomputed "
               "features have no map to study)"
             : NULL;
}

/* --denominator error | add:EPS | clamp:EPS | zero-empty (docs/cli.md "linattn run"); the
 * parser is core's (la_config_set_denominator), shared with the Python binding. */
static la_status den_set(const la_opt *r, const char *val, void *vo) {
  la_cli *o = vo;
  la_status st = la_config_set_denominator(&o->cfg, val);
  if (st != LA_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", la_error_message());
    return la_error(st, "%s: %s", r->name, why);
  }
  return LA_OK;
}

/* --gates F | synthetic | synthetic-feature (docs/cli.md, docs/design.md §1.2 "Gates"):
 * log-gates [N, H] or [N, H, r] from an .npy, or drawn from --seed with the synthetic
 * workload, one per token and head or (synthetic-feature) per feature. */
static la_status gates_set(const la_opt *r, const char *val, void *vo) {
  la_cli *o = vo;
  LA_CHECK(*val, LA_ERR_ARG, "%s: give an .npy file of log-gates [N, H] or [N, H, r], synthetic "
           "or synthetic-feature", r->name);
  const int feature = !strcmp(val, "synthetic-feature");
  o->cfg.gates = feature ? LA_GATES_FEATURE : LA_GATES_HEAD;
  o->gates = strcmp(val, "synthetic") && !feature ? val : NULL;
  return LA_OK;
}

/* --decay G | G1,G2,... | retnet (docs/cli.md, docs/design.md §1.2): gamma in (0, 1], one for
 * every head or one per head (the count against H is checked by la_engine_create). */
static la_status decay_set(const la_opt *r, const char *val, void *vo) {
  la_cli *o = vo;
  o->cfg.decay = NULL, o->cfg.decay_n = 0, o->cfg.decay_retnet = 0;
  if (!strcmp(val, "retnet")) {
    o->cfg.decay_retnet = 1;
    return LA_OK;
  }
  int n = 0;
  for (const char *p = val;;) {
    char *end;
    errno = 0;
    const double g = strtod(p, &end);
    LA_CHECK(end != p && (*end == ',' || !*end) && !errno, LA_ERR_ARG,
             "%s: '%s' is not a number in (0, 1], a comma list of them (one per head) or retnet",
             r->name, val);
    LA_CHECK(g > 0.0 && g <= 1.0, LA_ERR_ARG, "%s: gamma = %.*s is outside (0, 1]", r->name,
             (int)(end - p), p);
    LA_CHECK(n < LA_LIST_MAX, LA_ERR_ARG, "%s: more than %d values", r->name, LA_LIST_MAX);
    o->decay_vals[n++] = g;
    if (!*end) break;
    p = end + 1;
  }
  o->cfg.decay = o->decay_vals;
  o->cfg.decay_n = n;
  return LA_OK;
}

static void progress_init(const la_opt *r, void *o) {
  (void)r;
  ((la_cli *)o)->progress = isatty(2);
}

/* ---- the table ---- */

#define F(f) LA_OPT_FIELD(la_cli, f)
enum { RUN = LA_SUB_RUN, GRAD = LA_SUB_GRAD, BENCH = LA_SUB_BENCH, EVAL = LA_SUB_EVAL,
       RG = RUN | GRAD, RGE = RUN | GRAD | EVAL, ALL = RUN | GRAD | BENCH | EVAL };
enum { G_INPUT, G_OPERATOR, G_EXEC, G_BASELINE, G_PROBE, G_STUDY, G_OUTPUT, G_GRAD, G_OTHER };
static const char *const group_titles[] = {
    "Inputs (default: the built-in synthetic workload)", "Operator", "Execution",
    "Baselines (exact softmax attention on the same data)", "GEMM probe",
    "Study (every combination of the lists is one row of results.csv)", "Outputs",
    "Gradients (the loss is sum(out * G); the projection is held fixed)", "Other", NULL};

/* grad reads the whole shard twice (forward, then the reverse scan) and its cost is minutes
 * where run's is hours; its checkpoint would need both scans' states (docs/design.md §6). */
#define GRAD_NO_CKPT                                                                         \
  "grad does not checkpoint (it makes a forward and a reverse pass over each rank's "        \
  "shard; rerun it instead)"

/* One row per option and subcommand set (options.h). An option name may have several rows
 * when subcommands read it differently (--n is one length for run, a list for bench); a
 * name has at most one row per subcommand. Rows show in --help in this order, by group.
 *
 * Adding `linattn eval` (docs/cli.md) is adding rows: LA_SUB_EVAL = 8 in cli.h and
 * {"eval", LA_SUB_EVAL} in la_subs; its usage line in la_cli_help; OR LA_SUB_EVAL into
 * the subs of the rows it shares (--q, --k, --v, --heads, --dk, --dv, --grad-out, --force,
 * and --modes, --features LIST of bench); new rows for its own options into new la_cli
 * fields (--out-dir STR; --n and --feature-maps as lists that accept every map; --seeds
 * INT; --input-scales F64 with .list; --recall FLAG; --kernel-max-n, --floor-max-n INT);
 * its cross-option checks in la_cli_parse; la_cmd_eval in main.c's command table; and its
 * section in docs/cli.md, which tests/cli/check_help_defaults.py then holds to the table. */
static const la_opt rows[] = {
    /* Inputs */
    {.name = "--q", .meta = "F", .subs = RGE, .group = G_INPUT, .kind = LA_OPT_STR, F(q),
     .help = "queries [N,H,dk] (.npy, or [N,d] for H = 1); with --k and --v"},
    {.name = "--k", .meta = "F", .subs = RGE, .group = G_INPUT, .kind = LA_OPT_STR, F(k),
     .help = "keys [N,H,dk]"},
    {.name = "--v", .meta = "F", .subs = RGE, .group = G_INPUT, .kind = LA_OPT_STR, F(v),
     .help = "values [N,H,dv]"},
    {.name = "--n", .meta = "N", .subs = RG, .group = G_INPUT, .kind = LA_OPT_INT, F(n),
     .lo = 0, .hi = INT64_MAX / 2, .def = "65536", .help = "synthetic workload: tokens"},
    {.name = "--n", .meta = "LIST", .subs = BENCH, .group = G_INPUT, .kind = LA_OPT_INT,
     .list = LA_LIST_MAX, F(n_list), .lo = 1, .hi = (int64_t)1 << 40,
     .range = "an integer in [1, 2^40]", .def = "65536", .help = "sequence lengths"},
    {.name = "--n", .meta = "LIST", .subs = EVAL, .group = G_INPUT, .kind = LA_OPT_INT,
     .list = LA_LIST_MAX, F(n_list), .lo = 2, .hi = (int64_t)1 << 30,
     .range = "an integer in [2, 2^30]", .def = "4096",
     .help = "synthetic workload: sequence lengths"},
    {.name = "--heads", .meta = "H", .subs = ALL, .group = G_INPUT, .kind = LA_OPT_INT, F(heads),
     .lo = 1, .hi = 4096, .def = "4", .help = "synthetic workload: heads"},
    {.name = "--dk", .meta = "D", .subs = ALL, .group = G_INPUT, .kind = LA_OPT_INT, F(dk),
     .lo = 1, .hi = LA_DIM_MAX, .def = "64", .help = "synthetic workload: key width"},
    {.name = "--dv", .meta = "D", .subs = ALL, .group = G_INPUT, .kind = LA_OPT_INT, F(dv),
     .lo = 1, .hi = LA_DIM_MAX, .def = "64", .help = "synthetic workload: value width"},
    {.name = "--input-scale", .meta = "A", .subs = RG, .group = G_INPUT, .kind = LA_OPT_F64,
     F(input_scale), .flo = 0, .fhi = 1e30, .def = "1",
     .help = "synthetic workload: entries are N(0,1) x A"},
    {.name = "--input-scales", .meta = "LIST", .subs = EVAL, .group = G_INPUT,
     .kind = LA_OPT_F64, .list = LA_LIST_MAX, F(input_scales), .flo = 0, .open_lo = 1,
     .fhi = 1e6, .def = "1", .help = "multiply Q and K by each (the synthetic rows, or the files)"},
    {.name = "--data-seed", .meta = "S", .subs = EVAL, .group = G_INPUT, .kind = LA_OPT_INT,
     F(data_seed), .lo = 0, .hi = INT64_MAX, .def = "0",
     .help = "synthetic workload: the rows of `run --seed S` (and G of `grad --seed S`)"},
    /* Operator */
    {.name = "--mode", .meta = "M", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_ENUM,
     F(cfg.mode), .names = mode_names, .def = "causal", .help = "which keys a query reads"},
    {.name = "--modes", .meta = "LIST", .subs = BENCH, .group = G_OPERATOR, .kind = LA_OPT_ENUM,
     .list = 2, F(modes), .names = mode_names, .def = "causal", .help = "modes to time"},
    {.name = "--modes", .meta = "LIST", .subs = EVAL, .group = G_OPERATOR, .kind = LA_OPT_ENUM,
     .list = 2, F(modes), .names = mode_names, .def = "causal,bidirectional",
     .help = "modes to study"},
    {.name = "--feature-map", .meta = "M", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_ENUM,
     F(cfg.map), .name_of = map_name, .lookup = map_lookup, .noun = "map", .def = "elu1",
     .help = "the feature map phi (taylor2: Based's 1 + t + t^2/2 of t = S q.k, r = 1 + dk + "
             "dk(dk+1)/2; dpfp: Schlag et al.'s DPFP-nu, r = 2 dk nu)"},
    {.name = "--feature-maps", .meta = "LIST", .subs = BENCH, .group = G_OPERATOR,
     .kind = LA_OPT_ENUM, .list = LA_MAP_COUNT, F(maps), .name_of = map_name,
     .lookup = map_lookup, .refuse_value = bench_map_refused, .noun = "map", .def = "elu1",
     .help = "maps to time (not the signed maps, nor precomputed)"},
    {.name = "--feature-maps", .meta = "LIST", .subs = EVAL, .group = G_OPERATOR,
     .kind = LA_OPT_ENUM, .list = LA_MAP_COUNT, F(maps), .name_of = map_name,
     .lookup = map_lookup, .refuse_value = eval_map_refused, .noun = "map",
     .def = "elu1,favor+", .help = "maps to study (not the signed maps, nor precomputed)"},
    {.name = "--features", .meta = "m", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_INT,
     F(cfg.features), .lo = 1, .hi = LA_FEATURES_MAX, .def = "256",
     .help = "random projections of the random maps (favor-hyp and trig give r = 2m); dpfp's "
             "nu, 1 <= nu <= 2 dk - 1; ignored by taylor2 and the other maps"},
    {.name = "--features", .meta = "LIST", .subs = BENCH, .group = G_OPERATOR,
     .kind = LA_OPT_INT, .list = LA_LIST_MAX, F(features_list), .lo = 1, .hi = LA_FEATURES_MAX,
     .def = "256", .help = "m for the random maps (r = m, or 2m for favor-hyp); nu for dpfp "
                           "(r = 2 dk nu, nu <= 2 dk - 1)"},
    {.name = "--features", .meta = "LIST", .subs = EVAL, .group = G_OPERATOR,
     .kind = LA_OPT_INT, .list = LA_LIST_MAX, F(features_list), .lo = 1, .hi = LA_FEATURES_MAX,
     .def = "16,64,256", .help = "m for the random maps (r = m, or 2m for favor-hyp); nu for "
                                 "dpfp (r = 2 dk nu, nu <= 2 dk - 1); the other maps have one "
                                 "width (dk; taylor2 1 + dk + dk(dk+1)/2)"},
    {.name = "--scale", .meta = "S", .subs = RGE, .group = G_OPERATOR, .kind = LA_OPT_F64,
     F(cfg.scale), .flo = 0, .open_lo = 1, .fhi = 1e30, .def_text = "1/sqrt(dk)",
     .help = "similarity exp(S q.k) that the random maps and taylor2 target"},
    {.name = "--seed", .meta = "S", .subs = RG | BENCH, .group = G_OPERATOR, .kind = LA_OPT_INT,
     F(cfg.seed), .lo = 0, .hi = INT64_MAX, .def = "0",
     .help = "seed of the projections and of the synthetic workload"},
    {.name = "--projection", .meta = "F", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_STR,
     F(projection), .help = "load the projection [H,m,dk] or [m,dk] (.npy) instead of drawing it"},
    {.name = "--save-projection", .flags = LA_OPT_RESUMABLE, .meta = "F", .subs = RG, .group = G_OPERATOR,
     .kind = LA_OPT_STR, F(save_projection), .help = "save the projection used, [H,m,dk] (.npy)"},
    {.name = "--normalize", .meta = "on|off", .subs = RG, .group = G_OPERATOR,
     .kind = LA_OPT_ENUM, F(cfg.normalize), .names = onoff_names, .values = onoff_values,
     .def = "on",
     .help = "normalized or unnormalized operator"},
    {.name = "--denominator", .meta = "P", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_CUSTOM,
     F(den_string), .set = den_set, .def = "error",
     .help = "denominator policy of the normalized operator (refused with --normalize off): "
             "error | add:EPS (EPS >= 0; add:0 is the raw ratio) | clamp:EPS (EPS > 0) | zero-empty"},
    {.name = "--allow-signed", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_FLAG,
     F(cfg.allow_signed), .lo = 1, .def = "off",
     .help = "allow the signed maps identity and trig in normalized mode"},
    {.name = "--window", .meta = "W", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_INT,
     F(cfg.window), .lo = 1, .hi = INT64_MAX,
     .help = "causal sliding window: query i reads keys i-W < j <= i"},
    {.name = "--decay", .meta = "G", .subs = ALL, .group = G_OPERATOR, .kind = LA_OPT_CUSTOM,
     F(decay_string), .set = decay_set,
     .help = "per-head decay gamma in (0, 1]: one value, a comma list (one per head), or retnet "
             "(gamma_h = 1 - 2^(-5-h)); pair weights gamma^(i-j) (causal), gamma^abs(i-j) "
             "(bidirectional); any number of ranks, with --segments and --window; not with "
             "--reproducible; grad takes it in both modes on any number of ranks (windows "
             "too), every map (the favor family's keys within 600 nats, 60 in f32); eval "
             "measures every map with it against softmax with the same decay (not with "
             "--recall; n up to --softmax-max-n); bench times the decayed operator (its decay "
             "column; not with --baselines or --check)"},
    {.name = "--gates", .meta = "F", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_CUSTOM,
     F(gates_string), .set = gates_set,
     .help = "data-dependent log-gates g <= 0, one per token and head: an .npy [N,H] ([N] for "
             "one head) with --q/--k/--v, or synthetic with the synthetic workload "
             "(log sigmoid(3 + N(0,1)) from --seed); S_t = e^g_t S_{t-1} + phi(k_t) v_t^T, with "
             "--decay on top; causal; any number of ranks, with --segments, --window and "
             "--checkpoint; not with --reproducible (not built yet); grad takes it on any "
             "number of ranks, every map as --decay (--grad-gates writes dL/dg). Or one per "
             "feature, an .npy [N,H,r] with r the map's width (GLA's diagonal form: row f of "
             "the state decays by e^g_t,f), or synthetic-feature (drawn as synthetic, per "
             "feature): run and grad on any number of ranks, with --segments and "
             "--checkpoint (dL/dg [N,H,r]); not with --window"},
    {.name = "--segments", .meta = "F", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_STR,
     F(segments), .help = "packed sequences: int64 offsets [S+1], 0 = o_0 < ... < o_S = N, "
                          "where the state resets"},
    {.name = "--mask", .meta = "F", .subs = RG, .group = G_OPERATOR, .kind = LA_OPT_STR,
     .refuse = "general pairwise masks are refused: an arbitrary mask breaks the single shared "
               "summary phi(q)^T S that makes attention linear (docs/design.md §3.3); use "
               "--segments for packed sequences or --window W for a causal sliding window",
     .help = "refused: general pairwise masks break the shared-summary factorization (use "
             "--segments or --window)"},
    /* Execution */
    {.name = "--dtype", .meta = "f32|f64", .subs = RG, .group = G_EXEC, .kind = LA_OPT_ENUM,
     F(dtype), .seen = offsetof(la_cli, dtype_set), .names = dtype_names,
     .def_text = "the dtype of --q, f32 if synthetic",
     .help = "compute precision (inputs are converted)"},
    {.name = "--dtype", .meta = "f32|f64", .subs = BENCH, .group = G_EXEC, .kind = LA_OPT_ENUM,
     F(dtype), .names = dtype_names, .def = "f32",
     .help = "precision of linear and softmax (pblas is f64)"},
    {.name = "--threads", .flags = LA_OPT_RESUMABLE, .meta = "T", .subs = RGE, .group = G_EXEC, .kind = LA_OPT_INT,
     F(cfg.threads), .lo = 1, .hi = 4096, .def_text = "OMP_NUM_THREADS",
     .help = "OpenMP threads per rank"},
    {.name = "--threads", .flags = LA_OPT_RESUMABLE, .meta = "LIST", .subs = BENCH, .group = G_EXEC, .kind = LA_OPT_INT,
     .list = LA_LIST_MAX, F(threads_list), .lo = 1, .hi = 4096, .def_text = "OMP_NUM_THREADS",
     .help = "OpenMP threads per rank"},
    {.name = "--kernels", .flags = LA_OPT_RESUMABLE, .meta = "K", .subs = RG | BENCH, .group = G_EXEC, .kind = LA_OPT_ENUM,
     F(cfg.kernels), .names = kernel_names, .def = "auto",
     .help = "the kernel table of the chunk products and the maps: avx512, avx2 (with FMA), or "
             "generic (portable C, the products by OpenBLAS; blas is the same); auto: the "
             "widest the CPU has. The environment variable LINATTN_KERNELS overrides it"},
    {.name = "--chunk", .flags = LA_OPT_RESUMABLE, .meta = "C", .subs = ALL, .group = G_EXEC, .kind = LA_OPT_INT,
     F(cfg.chunk), .lo = LA_CHUNK_MIN, .hi = LA_CHUNK_MAX,
     .def_text = "tuned: 32 if r, dv <= 32, 48 if r <= 128, else 64",
     .help = "causal chunk length"},
    {.name = "--block-tokens", .flags = LA_OPT_RESUMABLE, .meta = "B", .subs = RG, .group = G_EXEC, .kind = LA_OPT_INT,
     F(block), .lo = 1, .hi = (int64_t)1 << 30,
     .def_text = "auto: the largest power of 2 from 256 to 16384 whose block of the widest "
                 "tensor fits in 2 MiB",
     .help = "streaming block per rank"},
    {.name = "--scan-algorithm", .flags = LA_OPT_RESUMABLE, .meta = "A", .subs = RG | BENCH, .group = G_EXEC,
     .kind = LA_OPT_ENUM, F(cfg.scan_algorithm), .names = scan_names, .def = "auto",
     .help = "how the ranks' summaries are combined in causal mode (docs/design.md §4.5): "
             "exscan (MPI_Exscan), doubling (recursive doubling), chain (LASP's chain of "
             "states), allgather (LASP-2: every rank gathers all states), pipelined (ZeCO's "
             "All-Scan, the state cut into --scan-pieces pieces); auto: the fastest by a "
             "latency-bandwidth model fitted to simulations (docs/simulation.md)"},
    {.name = "--scan-pieces", .flags = LA_OPT_RESUMABLE, .meta = "K", .subs = RG | BENCH, .group = G_EXEC,
     .kind = LA_OPT_INT, F(cfg.scan_pieces), .lo = 1, .hi = 65536, .def = "8",
     .help = "pieces of the pipelined scan's state"},
    {.name = "--mem-limit", .flags = LA_OPT_RESUMABLE, .meta = "BYTES", .subs = RG, .group = G_EXEC, .kind = LA_OPT_BYTES,
     F(mem_limit), .lo = 1, .hi = INT64_MAX, .def_text = "the node's available memory",
     .help = "refuse, before allocating, a run whose memory estimate per rank exceeds this "
             "(by default: the estimate times the ranks on the node against MemAvailable of "
             "/proc/meminfo; no limit when it cannot be read)"},
    {.name = "--repeat", .meta = "K", .subs = BENCH, .group = G_EXEC, .kind = LA_OPT_INT,
     F(repeat), .lo = 1, .hi = 1000, .def = "3", .help = "best of K timings"},
    /* Baselines (bench) */
    {.name = "--baselines", .meta = "B", .subs = BENCH, .group = G_BASELINE, .kind = LA_OPT_ENUM,
     F(baselines), .names = baseline_names, .def = "none",
     .help = "exact baselines to time (softmax: blocked online softmax, key/value blocks "
             "rotating in a ring over the ranks; pblas: dense n x n scores with pdgemm on a "
             "BLACS grid, float64)"},
    {.name = "--baseline-max-n", .meta = "N", .subs = BENCH, .group = G_BASELINE,
     .kind = LA_OPT_INT, F(baseline_max_n), .lo = 0, .hi = (int64_t)1 << 30, .def = "32768",
     .help = "skip the baselines above this n"},
    {.name = "--pblas-block", .meta = "NB", .subs = BENCH, .group = G_BASELINE,
     .kind = LA_OPT_INT, F(pblas_nb), .lo = 1, .hi = 4096, .def = "64",
     .help = "ScaLAPACK block size"},
    {.name = "--pblas-panel-rows", .meta = "R", .subs = BENCH, .group = G_BASELINE,
     .kind = LA_OPT_INT, F(pblas_panel), .lo = 0, .hi = (int64_t)1 << 30, .def = "0",
     .help = "score rows per pdgemm panel (0: at most 2^26 scores)"},
    {.name = "--no-linear", .subs = BENCH, .group = G_BASELINE, .kind = LA_OPT_FLAG,
     F(no_linear), .lo = 1, .def = "off", .help = "time only the baselines (and the GEMM probe)"},
    {.name = "--check", .subs = BENCH, .group = G_BASELINE, .kind = LA_OPT_FLAG, F(check),
     .lo = 1, .def = "off",
     .help = "also compare the baselines with la_softmax_attention in float64 (n <= 4096), "
             "and exit 1 if max |x - ref| / max |ref| exceeds 1e-10 (f64) or 1e-5 (f32)"},
    /* GEMM probe (bench) */
    {.name = "--gemm-probe", .subs = BENCH, .group = G_PROBE, .kind = LA_OPT_FLAG, F(gemm_probe),
     .lo = 1, .def = "off",
     .help = "rows impl=sgemm and dgemm: OpenBLAS square products on rank 0, with 1 thread and "
             "each --threads value (best of max(K, 10)); and rows impl=k512gemm (k256gemm): the "
             "engine's AVX-512 (AVX2) GEMM kernel on 64 x 64 x 64 products in cache, for the "
             "table auto chooses (absent with generic kernels). They "
             "fill the efficiency column: gflops / (ranks x the best GEMM rate at the row's "
             "threads and precision: max(sgemm, k512gemm or k256gemm) for f32, dgemm for f64)"},
    {.name = "--gemm-size", .meta = "S", .subs = BENCH, .group = G_PROBE, .kind = LA_OPT_INT,
     F(gemm_size), .lo = 16, .hi = 16384, .def = "1024", .help = "matrix size of the probe"},
    /* Study (eval) */
    {.name = "--seeds", .meta = "K", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(seeds), .lo = 1, .hi = 256, .def = "4",
     .help = "seeds 0..K-1 of the random maps (seed s draws the projection of `run --seed s`)"},
    {.name = "--kernel-max-n", .meta = "N", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(kernel_max_n), .lo = 0, .hi = (int64_t)1 << 30, .def = "8192",
     .help = "kernel_rel_err over all n x n entries up to this n; above, over --kernel-rows "
             "query rows per head against every key"},
    {.name = "--kernel-rows", .meta = "R", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(kernel_rows), .lo = 1, .hi = (int64_t)1 << 30, .def = "512",
     .help = "query rows per head sampled (evenly spaced) above --kernel-max-n"},
    {.name = "--tv-floor-max-n", .meta = "N", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(tv_floor_max_n), .lo = 0, .hi = 46340, .def = "2048",
     .help = "weights_tv_floor up to this n (and --floor-max-n): LAPACK dgesdd of the n x n "
             "matrix per head on one rank, ~20 n^3 flops and 24 n^2 bytes there; empty above"},
    {.name = "--softmax-max-n", .meta = "N", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(softmax_max_n), .lo = 0, .hi = (int64_t)1 << 30, .def = "16384",
     .help = "out_rel_err and the gradient columns over every row up to this n (exact softmax "
             "forward and backward, O(n^2)); above, out_rel_err over the kernel rows only (exact "
             "softmax for those rows, O(rows n), every rank holding only its own keys) and no "
             "gradient columns"},
    {.name = "--floor-max-n", .meta = "N", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_INT,
     F(floor_max_n), .lo = 0, .hi = 46340, .def = "4096",
     .help = "the rank-r floor (pdgesvd of the n x n matrix exp(s Q K^T) per head, O(n^3) "
             "flops and 8 n^2 / P bytes per rank) up to this n; empty above"},
    {.name = "--recall", .subs = EVAL, .group = G_STUDY, .kind = LA_OPT_FLAG, F(recall),
     .lo = 1, .def = "off",
     .help = "also the associative-recall check (recall.csv): store key-value pairs, query "
             "noisy copies of the keys"},
    {.name = "--recall-pairs", .meta = "LIST", .subs = EVAL, .group = G_STUDY,
     .kind = LA_OPT_INT, .list = LA_LIST_MAX, F(recall_pairs), .lo = 2, .hi = 1 << 20,
     .def = "16,64,256,1024", .help = "numbers of stored pairs of --recall"},
    /* Outputs */
    {.name = "--out-dir", .meta = "DIR", .subs = EVAL, .group = G_OUTPUT, .kind = LA_OPT_STR,
     F(out_dir), .help = "results.csv, bias.csv, rows.csv, refs.csv, report.md and the PNG "
                         "plots (DIR must not exist, or be empty, unless --force)"},
    {.name = "--out", .meta = "F", .subs = RG, .group = G_OUTPUT, .kind = LA_OPT_STR, F(out),
     .help = "output array [N,H,dv] (.npy, written atomically; without it, compute and "
             "report only; grad: its replay's outputs, not with --segments or --window)"},
    {.name = "--report", .flags = LA_OPT_RESUMABLE, .meta = "F", .subs = RG, .group = G_OUTPUT, .kind = LA_OPT_STR,
     F(report), .help = "JSON report"},
    {.name = "--csv", .meta = "F", .subs = BENCH, .group = G_OUTPUT, .kind = LA_OPT_STR, F(csv),
     .help = "also write the rows to F (atomically)"},
    {.name = "--force", .flags = LA_OPT_RESUMABLE, .subs = ALL, .group = G_OUTPUT, .kind = LA_OPT_FLAG, F(force), .lo = 1,
     .def = "off", .help = "overwrite existing outputs"},
    {.name = "--progress", .flags = LA_OPT_RESUMABLE, .subs = RGE, .group = G_OUTPUT, .kind = LA_OPT_FLAG, F(progress),
     .lo = 1, .def_text = "on if stderr is a terminal", .init = progress_init,
     .help = "a progress line with rate and ETA on stderr (rank 0)"},
    {.name = "--no-progress", .subs = RGE, .group = G_OUTPUT, .kind = LA_OPT_FLAG, F(progress),
     .lo = 0, .help = "no progress line"},
    {.name = "--checkpoint", .flags = LA_OPT_RESUMABLE, .meta = "DIR", .subs = RG, .group = G_OUTPUT, .kind = LA_OPT_STR,
     F(checkpoint),
     .help = "save the scan state and position here; resume from the newest valid checkpoint "
             "(run; grad refuses it)"},
    {.name = "--checkpoint-every", .flags = LA_OPT_RESUMABLE, .meta = "S", .subs = RG, .group = G_OUTPUT,
     .kind = LA_OPT_F64, F(checkpoint_every), .flo = 0, .open_lo = 1, .fhi = INFINITY,
     .range = "a positive number of seconds", .def = "600",
     .help = "seconds between checkpoints (and one on SIGUSR1 or SIGTERM, then exit 75); "
             "needs --checkpoint"},
    {.name = "--reproducible", .subs = RG, .group = G_OUTPUT, .kind = LA_OPT_FLAG,
     F(cfg.reproducible), .lo = 1, .def = "off",
     .help = "outputs bitwise identical for every rank and thread count: blocks of 64 chunks "
             "on a global grid, their summaries combined in exact integer arithmetic "
             "(run; grad refuses it)"},
    /* Gradients (grad) */
    {.name = "--grad-out", .meta = "F", .subs = GRAD | EVAL, .group = G_GRAD, .kind = LA_OPT_STR,
     F(grad_out), .help = "G = dL/dout [N,H,dv] (without it, G is drawn from the seed)"},
    {.name = "--grad-q", .meta = "F", .subs = GRAD, .group = G_GRAD, .kind = LA_OPT_STR,
     F(grad_q), .help = "write dL/dQ, the shape of --q (precomputed: dL/dphi(Q))"},
    {.name = "--grad-k", .meta = "F", .subs = GRAD, .group = G_GRAD, .kind = LA_OPT_STR,
     F(grad_k), .help = "write dL/dK, the shape of --k (precomputed: dL/dphi(K))"},
    {.name = "--grad-v", .meta = "F", .subs = GRAD, .group = G_GRAD, .kind = LA_OPT_STR,
     F(grad_v), .help = "write dL/dV, the shape of --v"},
    {.name = "--grad-gates", .meta = "F", .subs = GRAD, .group = G_GRAD, .kind = LA_OPT_STR,
     F(grad_gates), .help = "write dL/dg of the log-gates (--gates), float64 [N,H]; 0 at each "
                            "segment's first token"},
    /* Other */
    {.name = "--help", .alias = "-h", .subs = ALL, .group = G_OTHER, .kind = LA_OPT_FLAG,
     F(help), .lo = 1, .help = "this text", .flags = LA_OPT_NOPRINT},
    {.name = "--print-options", .subs = ALL, .group = G_OTHER, .kind = LA_OPT_FLAG,
     F(print_options), .lo = 1, .help = "print the parsed options as name=value lines, and exit",
     .flags = LA_OPT_HIDDEN | LA_OPT_NOPRINT},
};
enum { NROWS = (int)(sizeof rows / sizeof rows[0]) };

la_sub la_cli_sub(const char *name) {
  for (int i = 0; i < NSUBS; i++)
    if (!strcmp(name, la_subs[i].name)) return (la_sub)la_subs[i].bit;
  return (la_sub)0;
}

static int sub_index(la_sub sub) {
  for (int i = 0; i < NSUBS; i++)
    if (la_subs[i].bit == (unsigned)sub) return i;
  return 0;
}

const char *la_cli_sub_name(la_sub sub) { return la_subs[sub_index(sub)].name; }

/* --q, --k and --v come together, and then none of the synthetic workload's shape options
 * (NULL-ended names) is given: the files give N, H and the widths. */
static la_status inputs_or_synthetic(const la_cli *o, const unsigned char *given,
                                     const char *const *synth) {
  const int nin = !!o->q + !!o->k + !!o->v;
  LA_CHECK(nin == 0 || nin == 3, LA_ERR_ARG, "--q, --k and --v must be given together");
  for (int j = 0; j < NROWS && nin; j++)
    for (const char *const *s = synth; *s; s++)
      LA_CHECK(!(given[j] && !strcmp(rows[j].name, *s)), LA_ERR_ARG,
               "%s shapes the synthetic workload and conflicts with --q/--k/--v (the files "
               "give N, H and the widths)", *s);
  return LA_OK;
}

la_status la_cli_parse(la_sub sub, int argc, char **argv, int first, la_cli *o) {
  memset(o, 0, sizeof *o);
  o->sub = sub;
  o->argc = argc, o->argv = argv;
  la_config_default(&o->cfg); /* what no row sets: scale, chunk, threads 0 = worked out */
  LA_TRY(la_opts_defaults(rows, NROWS, sub, o));
  unsigned char given[NROWS];
  LA_TRY(la_opts_parse(rows, NROWS, la_subs, NSUBS, sub_index(sub), argc, argv, first, o,
                       given));
  if (o->help) return LA_OK;
  /* checks between options */
  if (sub & RG) {
    static const char *const synth[] = {"--n", "--heads", "--dk", "--dv", "--input-scale", NULL};
    LA_TRY(inputs_or_synthetic(o, given, synth));
  }
  /* bench --decay: its baselines and --check are undecayed softmax */
  LA_CHECK(sub != LA_SUB_BENCH || !(o->cfg.decay_retnet || o->cfg.decay_n > 0) ||
               (o->baselines == LA_BASELINES_NONE && !o->check),
           LA_ERR_ARG, "--decay: bench's baselines and --check are undecayed softmax; time them "
           "in a call without --decay");
  if (sub == LA_SUB_EVAL) {
    static const char *const synth[] = {"--n", "--heads", "--dk", "--dv", "--data-seed", NULL};
    LA_CHECK(o->out_dir, LA_ERR_ARG, "--out-dir DIR is required (where results.csv goes)");
    LA_TRY(inputs_or_synthetic(o, given, synth));
    const int nin = o->q != NULL;
    LA_CHECK(!o->grad_out || nin, LA_ERR_ARG,
             "--grad-out needs --q/--k/--v (with the synthetic workload G is drawn from "
             "--data-seed, for every n)");
    /* --decay (docs/design.md §8.1 "With decay"): recall's task has no decayed form, and the
     * sampled rows above --softmax-max-n are against undecayed softmax (files: eval_data.c) */
    const int decayed = o->cfg.decay_retnet || o->cfg.decay_n > 0;
    LA_CHECK(!decayed || !o->recall, LA_ERR_ARG, "--decay: --recall has no decayed form (its "
             "stored pairs are read by position-free attention); run --recall in an eval without "
             "--decay");
    for (int j = 0; decayed && !nin && j < o->n_list.n; j++)
      LA_CHECK(o->n_list.i[j] <= o->softmax_max_n, LA_ERR_ARG, "--decay: n = %lld is above "
               "--softmax-max-n %lld, where the output error is over sampled rows against an "
               "undecayed softmax; eval takes --decay up to --softmax-max-n (raise it, or lower "
               "--n)", (long long)o->n_list.i[j], (long long)o->softmax_max_n);
  }
  LA_CHECK(!(sub == LA_SUB_GRAD && o->checkpoint), LA_ERR_ARG, "--checkpoint: %s", GRAD_NO_CKPT);
  LA_CHECK(!(sub == LA_SUB_GRAD && o->grad_gates && !o->cfg.gates), LA_ERR_ARG,
           "--grad-gates: dL/dg needs log-gates (--gates F, or synthetic)");
  /* --gates: a file with the files, synthetic with the synthetic workload (docs/cli.md) */
  if ((sub & RG) && o->cfg.gates) {
    LA_CHECK(!o->q || o->gates, LA_ERR_ARG, "--gates synthetic draws gates for the synthetic "
             "workload; with --q/--k/--v give the gates as an .npy [N, H]");
    LA_CHECK(o->q || !o->gates, LA_ERR_ARG, "--gates %s: a gates file goes with --q/--k/--v; "
             "with the synthetic workload use --gates synthetic (drawn from --seed)", o->gates);
  }
  /* grad's outputs are its replay's (la_engine_set_replay_output), which keeps one state per
   * head and has no form for segment resets or a window's far edge */
  LA_CHECK(!(sub == LA_SUB_GRAD && o->out && (o->segments || o->cfg.window > 0)), LA_ERR_ARG,
           "--out: grad writes the outputs only without --segments and --window (write them "
           "with linattn run)");
  /* a policy for a denominator the operator does not have would be named in the report and
   * never applied (docs/design.md §1.1): refused */
  for (int j = 0; j < NROWS && (sub & RG); j++)
    LA_CHECK(!(given[j] && !strcmp(rows[j].name, "--denominator") && !o->cfg.normalize),
             LA_ERR_ARG, "--denominator applies to the normalized operator; with --normalize off "
             "there is no denominator (drop one of them)");
  /* a period without a place would be silently ignored: the user expects checkpoints */
  for (int j = 0; j < NROWS; j++)
    LA_CHECK(!(given[j] && !strcmp(rows[j].name, "--checkpoint-every") && !o->checkpoint),
             LA_ERR_ARG, "--checkpoint-every needs --checkpoint DIR (where the checkpoints go)");
  LA_CHECK(!(sub == LA_SUB_GRAD && o->cfg.reproducible), LA_ERR_ARG,
           "--reproducible: grad does not offer it in this version (the backward's reverse "
           "scan is not yet on the exact grid, docs/design.md §4.7); run does");
  if (sub == LA_SUB_BENCH && o->check && o->baselines != LA_BASELINES_NONE)
    for (int j = 0; j < o->n_list.n; j++)
      LA_CHECK(o->n_list.i[j] <= 4096 || o->n_list.i[j] > o->baseline_max_n, LA_ERR_ARG,
               "--check: n = %lld is too large for the float64 check (at most 4096)",
               (long long)o->n_list.i[j]);
  return LA_OK;
}

void la_cli_help(FILE *f, la_sub sub) {
  fprintf(f, "usage: linattn %s [options]\n\n", la_subs[sub_index(sub)].name);
  if (sub == LA_SUB_RUN)
    fputs("Feature-map (linear) attention: out_i = phi(q_i)^T S / phi(q_i).z over the keys\n"
          "query i may read. Run under mpirun/srun for many ranks, or plainly as one.\n", f);
  if (sub == LA_SUB_GRAD)
    fputs("The backward pass of `linattn run`: dL/dQ, dL/dK and dL/dV for the loss\n"
          "sum(out * G). Takes every option of run, and the gradient options below.\n", f);
  if (sub == LA_SUB_BENCH)
    fprintf(f,
            "Times the feature-map (linear) operator on the built-in synthetic workload, and\n"
            "the exact quadratic baselines, and writes one CSV row per measurement (stdout,\n"
            "and --csv F). Lists are comma-separated; every combination is timed. seconds is\n"
            "the compute time (max over ranks, best of --repeat); inputs are generated in\n"
            "memory first and are not timed. Columns:\n  %s", la_bench_csv_header);
  if (sub == LA_SUB_EVAL)
    fputs("How far each feature map is from exact softmax attention, in outputs and\n"
          "gradients, over maps, widths, seeds, lengths, input scales and modes; with the\n"
          "rank-r floor no map of width r can beat, the bias of the normalized output over\n"
          "seeds, and the reassociation error (linear form against the quadratic form of the\n"
          "same map), which says nothing about softmax. Computes in float64. Writes\n"
          "results.csv, bias.csv, rows.csv, refs.csv, report.md and PNG plots into --out-dir.\n",
          f);
  fputs("\n", f);
  la_opts_help(f, rows, NROWS, sub, group_titles);
  fputs("\nExit codes: 0 ok, 2 usage error or bad input, 3 denominator policy violated,\n"
        "75 stopped at a checkpoint (run --checkpoint: run again to resume), 1 other.\n"
        "See docs/cli.md.\n", f);
}

void la_cli_print(FILE *f, const la_cli *o) { la_opts_print(f, rows, NROWS, o->sub, o, 0); }
void la_cli_print_fingerprint(FILE *f, const la_cli *o) {
  la_opts_print(f, rows, NROWS, o->sub, o, LA_OPT_RESUMABLE);
}
