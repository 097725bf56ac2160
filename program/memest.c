/* The memory estimate per rank and --mem-limit (memest.h; docs/design.md §4.8). Every term
 * is an upper bound of what its code allocates for the rank with the most rows, nmax =
 * ceil(N/P); es is the compute dtype's size, H the heads, r the feature width, and a scan
 * state (la_state) is H (r (dv+1) + 1) doubles and H ints. The synthetic generator
 * (la_synth_rows) allocates nothing: it writes into the block buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memest.h"
#include "la_core_private.h"

/* Scan states a path holds at once, with MPI's copies of them (comm.c: pack buffers in and
 * out): streaming run: state and local (run.c), in and out; in-memory run: those and st,
 * local or head, mid and part (dist/forward.c); grad: st and rev, then the six of
 * backward_segmented or mid, fmid and part (dist/backward.c), in and out. */
enum { STATES_STREAM = 4, STATES_IN_MEMORY = 8, STATES_GRAD = 10 };
/* Denominator histograms outside the engine: the caller's statistics and MPI's copy in the
 * reduction (comm.c), and one spare. */
enum { HISTOGRAMS = 3 };

static void add(la_mem_estimate *m, const char *what, double bytes) {
  if (bytes <= 0 || m->n >= LA_MEM_TERMS) return;
  m->term[m->n].what = what;
  m->term[m->n].bytes = (int64_t)bytes;
  m->total += (int64_t)bytes;
  m->n++;
}

static double state_bytes(int H, int r, int dv) { /* la_state: sz, m, a; f */
  return (double)H * ((double)r * (dv + 1) + 2) * sizeof(double) + (double)H * sizeof(int);
}

/* Some head decays (gamma < 1), as la_engine_create decides (core/engine/engine.c). */
static int decayed(const la_config *c) {
  if (c->decay_retnet || c->gates) return 1; /* --gates takes the decayed paths */
  for (int i = 0; c->decay && i < c->decay_n; i++)
    if (c->decay[i] < 1.0) return 1;
  return 0;
}

/* As program/run.c decides (la_stream_holds_shard): windows shorter than N, bidirectional
 * segments and bidirectional decay hold the shard. */
static int run_in_memory(const la_job *j) {
  const la_config *c = &j->o->cfg;
  return (c->window > 0 && c->window < j->N) ||
         (c->mode == LA_BIDIRECTIONAL && (j->seg || decayed(c)));
}

/* Rows per block on the largest rank, as program/run.c sizes its buffers. */
static int64_t run_block_rows(const la_job *j, int64_t nmax) {
  if (run_in_memory(j)) return nmax > 0 ? nmax : 1;
  return nmax > 0 && j->o->block > nmax ? nmax : j->o->block;
}

/* As la_bstream_holds_shard decides (dist/stream_backward.c): windows shorter than N,
 * decay and gates, and bidirectional segments hold the shard in grad. */
static int grad_in_memory(const la_job *j) {
  const la_config *c = &j->o->cfg;
  return (c->window > 0 && c->window < j->N) || decayed(c) ||
         (c->mode == LA_BIDIRECTIONAL && j->seg);
}

/* Rows per block of the streamed backward on the largest rank (la_bstream_create). */
static int64_t grad_block_rows(const la_job *j, int64_t nmax) {
  return nmax > 0 && (j->o->block < 1 || j->o->block > nmax) ? nmax : j->o->block > 0 ? j->o->block : 1;
}

/* The largest row of an input file stored wider than the compute dtype (f64 read as f32):
 * la_pin_read reads it into a temporary of rows x that width (pio.c), and counted twice: a
 * freed temporary of up to 32 MiB stays in glibc's heap (its dynamic mmap threshold), and
 * the next one, of another size, may not fit in its place (measured: +21 MiB on 3 ranks). */
static double conversion_row_bytes(const la_job *j, int tensors) {
  double w = 0;
  for (int t = 0; t < tensors; t++) {
    if (!j->in[t].path || la_dtype_size(j->in[t].info.dtype) <= la_dtype_size(j->dt)) continue;
    double b = (double)j->in[t].row_elems * la_dtype_size(j->in[t].info.dtype);
    w = b > w ? b : w;
  }
  return 2 * w;
}

void la_mem_estimate_job(const la_job *j, int grad, la_mem_estimate *m) {
  memset(m, 0, sizeof *m);
  const la_cli *o = j->o;
  const la_config *c = &o->cfg;
  const int P = la_dist_size(j->d), H = j->H, dk = j->dk, dv = j->dv;
  const int r = la_map_width(c->map, dk, c->features);
  const double es = (double)la_dtype_size(j->dt), per = (double)r * (dv + 1) + 2;
  const int repro = c->reproducible && !grad; /* grad refuses it */
  const int64_t C = c->chunk > 0 ? c->chunk : la_default_chunk(r, dv), R = LA_REPRO_CHUNKS * C;
  /* --reproducible: ranks own whole blocks of R rows (la_split_ownership_grid) */
  int64_t nmax = (j->N + P - 1) / P;
  if (repro) {
    const int64_t nb = (j->N + R - 1) / R, per_rank = (nb + P - 1) / P * R;
    nmax = per_rank < j->N ? per_rank : j->N;
  }
  const int win = c->window > 0 && c->window < j->N;
  const double Wr = win ? (double)c->window : 0; /* halo rows: fewer than W each way (§3.2) */
  if (!grad) {
    int64_t B = run_block_rows(j, nmax);
    if (repro && !run_in_memory(j)) { /* streaming blocks are whole multiples of R (run.c) */
      B = (B + R - 1) / R * R;
      B = B > nmax && nmax > 0 ? nmax : B;
    }
    /* bq, bk, bv, bo: B H (2 dk + 2 dv) elements (run.c) */
    add(m, "block buffers", es * B * H * (2.0 * dk + 2.0 * dv) +
                                (c->gates ? sizeof(double) * B * H * j->gw : 0.0)); /* run.c's bg */
    /* causal, streaming, P > 1: raw B H (dv+1) elements and lsc B H doubles (run.c) */
    if (c->mode == LA_CAUSAL && P > 1 && !run_in_memory(j) && !repro)
      add(m, "overlap buffers", (es * (dv + 1) + sizeof(double)) * B * H);
    add(m, "input conversion", conversion_row_bytes(j, 3) * B);
    /* decayed bidirectional: each row's denominator and log-scale between the passes
     * (core/engine/forward.c decay_bidir_all) */
    if (c->mode == LA_BIDIRECTIONAL && decayed(c))
      add(m, "decay row sums", (es + sizeof(double)) * B * H);
    if (repro) { /* exact states: run's and MPI's copy, or forward_exact's two and MPI's; the
                    drivers' block summaries (core/exact/repro.c) */
      const double xs = sizeof(int64_t) * (double)la_xhead_len(r, dv) * H;
      add(m, "reproducible states", (run_in_memory(j) ? 3 : 2) * xs +
                                         (double)la_repro_plan_bytes(c, H, r, dv, B));
    }
  } else if (!grad_in_memory(j)) { /* the streamed backward: blocks (grad.c, la_bstream) */
    const double B = (double)grad_block_rows(j, nmax);
    /* q, k, v, G: B H (2 dk + 2 dv); dq, dk, dv: B H (2 dk + dv) elements */
    add(m, "block buffers", es * B * H * (4.0 * dk + 3.0 * dv) + (o->out ? es * B * H * dv : 0));
    /* side rows: the engine's, at a dV row's stride when that holds 24 bytes
     * (la_backward_side_size), and packed (24 bytes) for the scratch file */
    const double stride = es * dv >= 3 * sizeof(double) ? es * dv : 3.0 * sizeof(double);
    add(m, "side rows of a block", (stride + 3.0 * sizeof(double)) * B * H);
    add(m, "input conversion", conversion_row_bytes(j, 4) * B);
  } else {
    const double n = nmax > 0 ? (double)nmax : 1;
    /* q, k, v, G: n H (2 dk + 2 dv); dq, dk, dv: n H (2 dk + dv) elements (grad.c) */
    add(m, "shards of inputs and gradients", es * n * H * (4.0 * dk + 3.0 * dv));
    if (o->out) add(m, "outputs (--out)", es * n * H * dv); /* the replay's, grad.c */
    /* side rows (fa, b, M): 24 bytes per (token, head) of their own with a window, or when
     * a dV row is shorter than 24 bytes (backward.c), else inside dV */
    if (win || es * dv < 3 * sizeof(double)) add(m, "side storage", 3.0 * sizeof(double) * n * H);
    add(m, "input conversion", conversion_row_bytes(j, 4) * n);
    /* the backward with decay (core/engine/decay_bwd.c): features, [V|1], the forward's rows, the
     * coefficients and four scratch arrays of rows, per token and head; one head's features
     * and two doubles per token */
    if (decayed(c)) {
      const double w = r > dv + 1 ? r : dv + 1;
      add(m, "decayed backward rows",
          es * n * H * (3.0 * r + 3.0 * (dv + 1) + 2.0 * dv + 4.0 * w) + es * n * 2.0 * r +
              2.0 * sizeof(double) * n);
    }
    /* --gates: the shard's log-gates, dL/dg (grad.c) and the reversed gates (decay_bwd.c) */
    if (c->gates) add(m, "gates and their gradient", 3.0 * sizeof(double) * n * H * j->gw);
  }
  if (win) {
    /* past halo: raw key rows Wr H (dk + dv) elements, and two P H per doubles of middle
     * summaries (dist/forward.c); grad adds the future halo: query and G rows Wr H (dk + dv)
     * elements, side rows Wr H 3 doubles, and two more P H per (dist/backward.c) */
    double halo = es * Wr * H * (dk + dv) + 2.0 * sizeof(double) * P * H * per;
    /* --reproducible: the W - 1 rows before the rank and its first W - 1 (dist/forward.c) */
    if (repro) halo = es * 2.0 * Wr * H * (dk + dv);
    if (grad) halo += es * Wr * H * (dk + dv) + 3.0 * sizeof(double) * Wr * H +
                      2.0 * sizeof(double) * P * H * per;
    add(m, "window halo", halo);
  }
  add(m, "engine workspaces",
      (double)la_engine_plan_bytes(c, H, r, dv, j->dt, win ? j->N : 0));
  const int states = grad ? STATES_GRAD : run_in_memory(j) ? STATES_IN_MEMORY : STATES_STREAM;
  add(m, "scan states", states * state_bytes(H, r, dv) +
                            HISTOGRAMS * sizeof(uint64_t) * (double)LA_DEN_HIST_BINS);
  if (la_map_is_random(c->map)) {
    /* omega, omega_s (double) and omega_f, omega_ft (float): H m dk each (featmap.c); the
     * orthogonal draw's dk x dk scratch; --projection: the file and its float64 copy */
    const double hmd = (double)H * c->features * dk;
    add(m, "projection", hmd * 24 + 3.0 * sizeof(double) * dk * dk +
                             (o->projection ? hmd * 16 : 0));
  }
  if (j->seg) add(m, "segment offsets", (double)j->nseg * sizeof(int64_t));
}

/* "3.2 GiB", "512 B". */
static void human(int64_t b, char *buf, size_t len) {
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) {
    snprintf(buf, len, "%lld B", (long long)b);
    return;
  }
  double x = (double)b / 1024;
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    u++;
  }
  snprintf(buf, len, "%.1f %s", x, unit[u]);
}

/* "3.2 GiB per rank (block buffers 2.0 GiB, engine workspaces 0.1 GiB, other 3.0 KiB)": the
 * terms from the largest, each of at least 1 % of the total, the rest as "other". */
static void describe(const la_mem_estimate *m, char *buf, size_t len) {
  int order[LA_MEM_TERMS], n = m->n;
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort, largest first */
    for (int k = i; k > 0 && m->term[order[k]].bytes > m->term[order[k - 1]].bytes; k--) {
      int t = order[k];
      order[k] = order[k - 1];
      order[k - 1] = t;
    }
  char h[32];
  human(m->total, h, sizeof h);
  snprintf(buf, len, "%s per rank (", h);
  int64_t other = 0;
  int shown = 0;
  for (int i = 0; i < n; i++) {
    const int64_t b = m->term[order[i]].bytes;
    if (b * 100 < m->total) {
      other += b;
      continue;
    }
    human(b, h, sizeof h);
    size_t l = strlen(buf);
    snprintf(buf + l, len - l, "%s%s %s", shown++ ? ", " : "", m->term[order[i]].what, h);
  }
  if (other > 0) {
    human(other, h, sizeof h);
    size_t l = strlen(buf);
    snprintf(buf + l, len - l, "%sother %s", shown ? ", " : "", h);
  }
  size_t l = strlen(buf);
  snprintf(buf + l, len - l, ")");
}

int64_t la_mem_available(void) {
  const char *path = getenv("LINATTN_MEMINFO");
  FILE *f = fopen(path && *path ? path : "/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  while (kb < 0 && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kb) != 1) kb = -1;
  fclose(f);
  return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

/* The ranks of this node (MPI_COMM_TYPE_SHARED) and its MemAvailable, read by the node's
 * first rank. Collective. */
static void node_memory(la_dist d, int *ranks, int64_t *avail) {
  MPI_Comm node;
  *ranks = 1;
  *avail = -1;
  if (MPI_Comm_split_type(la_dist_comm(d), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS) {
    *avail = la_mem_available();
    return;
  }
  int me = 0;
  MPI_Comm_rank(node, &me);
  MPI_Comm_size(node, ranks);
  if (me == 0) *avail = la_mem_available();
  MPI_Bcast(avail, 1, MPI_INT64_T, 0, node);
  MPI_Comm_free(&node);
}

la_status la_mem_check(la_job *j, int grad) {
  la_mem_estimate m;
  la_mem_estimate_job(j, grad, &m);
  const int64_t limit = j->o->mem_limit; /* 0: the default */
  const int streaming = grad ? !grad_in_memory(j) : !run_in_memory(j);
  int K = 1;
  int64_t avail = limit;
  if (!limit) node_memory(j->d, &K, &avail);
  j->mem_estimate = m.total;
  j->mem_limit = avail < 0 ? -1 : limit ? limit : avail / K;
  la_status st = LA_OK;
  char est[640], lim[32], need[32];
  if (avail >= 0 && (double)m.total * K > (double)avail) {
    describe(&m, est, sizeof est);
    human(avail, lim, sizeof lim);
    human(m.total * K, need, sizeof need);
    if (limit)
      st = la_error(LA_ERR_ARG, "--mem-limit: this run needs an estimated %s, above the limit %s "
                    "(%suse more ranks, or raise --mem-limit)", est, lim,
                    streaming ? "lower --block-tokens, " : "");
    else
      st = la_error(LA_ERR_ARG, "--mem-limit: this run needs an estimated %s, %s for the %d "
                    "rank%s on this node, above the node's available memory %s (MemAvailable, the "
                    "default limit; %sspread the ranks over more nodes, or set --mem-limit)", est,
                    need, K, K == 1 ? "" : "s", lim, streaming ? "lower --block-tokens, " : "");
  }
  return la_dist_agree(j->d, st);
}
