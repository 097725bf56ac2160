/* The flat C layer of the Python package across ranks (binding.h; docs/design.md §5.4): the
 * caller's communicator arrives as its Fortran handle (mpi4py's comm.py2f(), the portable
 * form) and each batch entry is one collective la_dist_forward / la_dist_backward (§4.5) on
 * the rank's shard of that sequence. The library never calls MPI_Init: mpi4py has. */
#include <stdlib.h>
#include <string.h>
#include "binding.h"
#include "linattn/dist.h"
#include "linattn/grad.h"

/* The rows rank `rank` of P must pass for sequences of Ltot tokens (the package checks every
 * rank's shard against this before any collective). Not Collective. */
void la_py_shard(const la_py_op *op, int64_t Ltot, int P, int rank, int64_t *n, int64_t *row0) {
  if (op) la_engine_ownership(op->eng, Ltot, P, rank, n, row0);
  else la_split_ownership(Ltot, P, rank, n, row0);
}

static int open_comm(int comm_f, const char *scan, la_dist *d) {
  int init = 0;
  MPI_Initialized(&init);
  LA_CHECK(init, LA_ERR_ARG, "comm: MPI is not initialized (import mpi4py.MPI first)");
  la_scan_algorithm a = LA_SCAN_AUTO;
  int found = !scan;
  for (int i = 0; scan && la_scan_algorithm_names[i]; i++)
    if (!strcmp(scan, la_scan_algorithm_names[i])) {
      a = (la_scan_algorithm)i;
      found = 1;
    }
  LA_CHECK(found, LA_ERR_ARG, "scan_algorithm '%s' is not auto, exscan, doubling, chain, "
           "allgather or pipelined", scan);
  LA_TRY(la_dist_create(MPI_Comm_f2c((MPI_Fint)comm_f), d));
  la_config cfg;
  la_config_default(&cfg);
  cfg.scan_algorithm = a;
  la_dist_use_config(*d, &cfg);
  return LA_OK;
}

/* Keep the first violation and overflow over the batch as (entry b, token t) = b Ltot + t. */
static void merge_entry(la_den_stats *total, const la_den_stats *one, int64_t b, int64_t Ltot) {
  const int64_t bad = total->first_bad_token, ovf = total->first_overflow_token;
  const int bh = total->first_bad_head, oh = total->first_overflow_head;
  la_den_stats_merge(total, one);
  if (bad >= 0) {
    total->first_bad_token = bad;
    total->first_bad_head = bh;
  } else if (one->first_bad_token >= 0) {
    total->first_bad_token = b * Ltot + one->first_bad_token;
  }
  if (ovf >= 0) {
    total->first_overflow_token = ovf;
    total->first_overflow_head = oh;
  } else if (one->first_overflow_token >= 0) {
    total->first_overflow_token = b * Ltot + one->first_overflow_token;
  }
}

/* The rank's rows against the split (linattn.shard); op NULL: the plain split. */
static la_status shard_check(la_dist d, const la_py_op *op, int64_t Lloc, int64_t row0,
                             int64_t Ltot) {
  int64_t want_n, want_0;
  la_py_shard(op, Ltot, la_dist_size(d), la_dist_rank(d), &want_n, &want_0);
  if (Lloc == want_n && row0 == want_0) return LA_OK;
  return la_error(LA_ERR_SHAPE, "comm: rank %d holds rows [%lld, %lld) of %lld; the split is "
                  "rows [%lld, %lld) (linattn.shard)", la_dist_rank(d), (long long)row0,
                  (long long)(row0 + Lloc), (long long)Ltot, (long long)want_0,
                  (long long)(want_0 + want_n));
}

/* Finiteness of B entries of [Lloc, H, width] rows at x, named by global token. */
static la_status entries_finite(const char *name, la_dtype dt, const void *x, int64_t B,
                                int64_t Lloc, int64_t row0, int H, int width, int threads) {
  const size_t per = (size_t)Lloc * H * width * la_dtype_size(dt);
  la_status s = LA_OK;
  for (int64_t b = 0; b < B && s == LA_OK && Lloc > 0; b++)
    s = la_py_check_finite(name, dt, (const char *)x + b * per, Lloc, H, width, Lloc, row0, b,
                           threads);
  return s;
}

/* One batch entry b of a linear-attention call (forward or backward) on the rank's shard. */
typedef struct {
  const void *q, *k, *v, *g;
  void *out, *dq, *dk, *dv;
} dist_args;
typedef la_status (*dist_entry)(la_dist d, la_py_op *op, int64_t b, int64_t Lloc, int64_t row0,
                                const dist_args *a, la_den_stats *st);

static la_status forward_entry(la_dist d, la_py_op *op, int64_t b, int64_t Lloc, int64_t row0,
                               const dist_args *a, la_den_stats *st) {
  const size_t es = la_dtype_size(op->dt), rk = (size_t)Lloc * op->H * op->dk * es,
               rv = (size_t)Lloc * op->H * op->dv * es;
  /* gates= (§1.2 "Gates"): entry b's rows are global tokens [row0, row0 + Lloc), [B, L, H]
   * or per feature [B, L, H, r] (their summaries in row form, la_engine_state_init) */
  if (op->cfg.gates) {
    const size_t gw = (size_t)la_engine_gate_width(op->eng); /* per feature: r */
    LA_CHECK(op->gates, LA_ERR_ARG, "gates: this operator takes log-gates [B, L, H%s] (gates=)",
             gw > 1 ? ", r" : "");
    LA_TRY(la_engine_set_gates(op->eng, op->gates + (size_t)b * Lloc * op->H * gw, row0, Lloc));
  }
  return la_dist_forward(d, op->eng, Lloc, row0, (const char *)a->q + b * rk,
                         (const char *)a->k + b * rk, (const char *)a->v + b * rv,
                         (char *)a->out + b * rv, st);
}

static la_status backward_entry(la_dist d, la_py_op *op, int64_t b, int64_t Lloc, int64_t row0,
                                const dist_args *a, la_den_stats *st) {
  const size_t es = la_dtype_size(op->dt), rk = (size_t)Lloc * op->H * op->dk * es,
               rv = (size_t)Lloc * op->H * op->dv * es;
  if (op->cfg.gates) { /* the gates of this rank's rows, and where dL/dg goes */
    const size_t gw = (size_t)la_engine_gate_width(op->eng); /* per feature: r */
    LA_CHECK(op->gates, LA_ERR_ARG, "gates: this operator takes log-gates [B, L, H%s] (gates=)",
             gw > 1 ? ", r" : "");
    const size_t at = (size_t)b * Lloc * op->H * gw;
    LA_TRY(la_engine_set_gates(op->eng, op->gates + at, row0, Lloc));
    LA_TRY(la_engine_set_gates_grad(op->eng, op->dgates ? op->dgates + at : NULL));
  }
  return la_dist_backward(d, op->eng, Lloc, row0, (const char *)a->q + b * rk,
                          (const char *)a->k + b * rk, (const char *)a->v + b * rv,
                          (const char *)a->g + b * rv, (char *)a->dq + b * rk,
                          (char *)a->dk + b * rk, (char *)a->dv + b * rv, st);
}

/* The driver of both directions: the local checks (shard, finiteness of the inputs the call
 * reads first, segments), agreed across ranks before any collective of the operator; then one
 * collective per batch entry, statistics merged; the policy's verdict over the batch. */
static la_status run_dist(la_py_op *op, int comm_f, const char *scan, int64_t B, int64_t Lloc,
                          int64_t row0, int64_t Ltot, const dist_args *a, const int64_t *seg,
                          int64_t nseg, double *stats, const char *what, dist_entry entry) {
  la_error_clear();
  la_dist d = NULL;
  LA_TRY(open_comm(comm_f, scan, &d));
  la_den_stats total, one;
  la_status s = la_den_stats_init(&total);
  if (s == LA_OK && (s = la_den_stats_init(&one)) != LA_OK) la_den_stats_free(&total);
  if (s == LA_OK) s = shard_check(d, op, Lloc, row0, Ltot);
  const int T = op->cfg.threads;
  if (s == LA_OK && a->g)
    s = entries_finite("the output's gradient", op->dt, a->g, B, Lloc, row0, op->H, op->dv, T);
  if (s == LA_OK && !a->g) s = entries_finite("q", op->dt, a->q, B, Lloc, row0, op->H, op->dk, T);
  if (s == LA_OK && !a->g) s = entries_finite("k", op->dt, a->k, B, Lloc, row0, op->H, op->dk, T);
  if (s == LA_OK && !a->g) s = entries_finite("v", op->dt, a->v, B, Lloc, row0, op->H, op->dv, T);
  if (s == LA_OK) s = la_py_check_segments(seg, nseg, Ltot);
  if (s == LA_OK && seg) {
    free(op->seg);
    op->seg = malloc(sizeof(int64_t) * (size_t)nseg);
    if (!op->seg) s = la_error(LA_ERR_NOMEM, "out of memory for %lld offsets", (long long)nseg);
    else memcpy(op->seg, seg, sizeof(int64_t) * (size_t)nseg);
    op->nseg = op->seg ? nseg : 0;
  }
  if (s == LA_OK) s = la_engine_set_segments(op->eng, seg ? op->seg : NULL, seg ? nseg : 0);
  s = la_dist_agree(d, s);
  for (int64_t b = 0; b < B && s == LA_OK; b++) {
    la_den_stats_free(&one);
    s = la_den_stats_init(&one);
    s = la_dist_agree(d, s);
    if (s == LA_OK) s = entry(d, op, b, Lloc, row0, a, &one);
    if (s == LA_OK) merge_entry(&total, &one, b, Ltot);
  }
  if (s == LA_OK) s = la_py_verdict(op, &total, Ltot, what);
  if (total.hist) la_py_fill_stats(&total, Ltot, stats);
  la_den_stats_free(&one);
  la_den_stats_free(&total);
  la_dist_destroy(&d);
  return s;
}

int la_py_forward_dist(la_py_op *op, int comm_f, const char *scan, int64_t B, int64_t Lloc,
                       int64_t row0, int64_t Ltot, const void *q, const void *k, const void *v,
                       void *out, const int64_t *seg, int64_t nseg, double *stats) {
  const dist_args a = {.q = q, .k = k, .v = v, .out = out};
  return run_dist(op, comm_f, scan, B, Lloc, row0, Ltot, &a, seg, nseg, stats, "forward",
                  forward_entry);
}

int la_py_backward_dist(la_py_op *op, int comm_f, const char *scan, int64_t B, int64_t Lloc,
                        int64_t row0, int64_t Ltot, const void *q, const void *k,
                        const void *v, const void *g, void *dq, void *dk, void *dv,
                        const int64_t *seg, int64_t nseg, double *stats) {
  const dist_args a = {.q = q, .k = k, .v = v, .g = g, .dq = dq, .dk = dk, .dv = dv};
  return run_dist(op, comm_f, scan, B, Lloc, row0, Ltot, &a, seg, nseg, stats, "backward",
                  backward_entry);
}

/* ---- exact softmax across ranks: the ring (linattn/dist.h) ---- */

static int softmax_open(int comm_f, const char *mode, int64_t window, int64_t Lloc,
                        int64_t row0, int64_t Ltot, const int64_t *seg, int64_t nseg,
                        la_dist *d, la_softmax_mask *mask) {
  LA_TRY(open_comm(comm_f, NULL, d));
  memset(mask, 0, sizeof *mask);
  la_status s = la_py_mode(mode, &mask->mode);
  if (s == LA_OK && window < 0) s = la_error(LA_ERR_ARG, "window must be >= 1");
  if (s == LA_OK && window && mask->mode != LA_CAUSAL)
    s = la_error(LA_ERR_ARG, "window: a sliding window is a causal mask (refused in "
                 "bidirectional mode)");
  if (s == LA_OK) s = la_py_check_segments(seg, nseg, Ltot);
  if (s == LA_OK) s = shard_check(*d, NULL, Lloc, row0, Ltot);
  mask->window = window;
  mask->seg = seg;
  mask->nseg = seg ? nseg : 0;
  s = la_dist_agree(*d, s);
  if (s != LA_OK) la_dist_destroy(d);
  return s;
}

int la_py_softmax_forward_dist(int comm_f, int f64, const char *mode, double scale,
                               int64_t window, int threads, int64_t B, int64_t Lloc,
                               int64_t row0, int64_t Ltot, int heads, int dk, int dv,
                               const void *q, const void *k, const void *v, void *out,
                               const int64_t *seg, int64_t nseg) {
  la_error_clear();
  la_dist d = NULL;
  la_softmax_mask mask;
  LA_TRY(softmax_open(comm_f, mode, window, Lloc, row0, Ltot, seg, nseg, &d, &mask));
  const la_dtype dt = f64 ? LA_F64 : LA_F32;
  const size_t es = la_dtype_size(dt), rk = (size_t)Lloc * heads * dk * es,
               rv = (size_t)Lloc * heads * dv * es;
  la_status s = entries_finite("q", dt, q, B, Lloc, row0, heads, dk, threads);
  if (s == LA_OK) s = entries_finite("k", dt, k, B, Lloc, row0, heads, dk, threads);
  if (s == LA_OK) s = entries_finite("v", dt, v, B, Lloc, row0, heads, dv, threads);
  s = la_dist_agree(d, s);
  for (int64_t b = 0; b < B && s == LA_OK; b++)
    s = la_softmax_ring_mask(d, dt, Ltot, heads, dk, dv, scale, &mask, Lloc, row0,
                             (const char *)q + b * rk, (const char *)k + b * rk,
                             (const char *)v + b * rv, (char *)out + b * rv, threads);
  la_dist_destroy(&d);
  return s;
}

int la_py_softmax_backward_dist(int comm_f, const char *mode, double scale, int64_t window,
                                int threads, int64_t B, int64_t Lloc, int64_t row0,
                                int64_t Ltot, int heads, int dk, int dv, const double *q,
                                const double *k, const double *v, const double *g, double *dq,
                                double *dk_out, double *dv_out, const int64_t *seg,
                                int64_t nseg) {
  la_error_clear();
  la_dist d = NULL;
  la_softmax_mask mask;
  LA_TRY(softmax_open(comm_f, mode, window, Lloc, row0, Ltot, seg, nseg, &d, &mask));
  const size_t rk = (size_t)Lloc * heads * dk, rv = (size_t)Lloc * heads * dv;
  double *out = malloc(sizeof(double) * (rv ? rv : 1));
  la_status s = out ? LA_OK : la_error(LA_ERR_NOMEM, "softmax backward: out of memory");
  if (s == LA_OK)
    s = entries_finite("the output's gradient", LA_F64, g, B, Lloc, row0, heads, dv, threads);
  s = la_dist_agree(d, s);
  for (int64_t b = 0; b < B && s == LA_OK; b++)
    s = la_softmax_ring_grad(d, Ltot, heads, dk, dv, scale, &mask, Lloc, row0, q + b * rk,
                             k + b * rk, v + b * rv, g + b * rv, out, dq + b * rk,
                             dk_out + b * rk, dv_out + b * rv, threads);
  free(out);
  la_dist_destroy(&d);
  return s;
}
