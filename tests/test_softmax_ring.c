/* The softmax ring (dist/softmax_ring.c) at any rank count (ctest runs 1, 2, 3 and 4): every
 * rank generates the whole sequence identically, computes the naive float64 reference
 * (test_softmax_naive.h: the full P matrix, the gradient by hand; no engine code) and
 * compares la_softmax_ring_mask (f64 1e-12, f32 1e-5) and la_softmax_ring_grad (out, dq, dk,
 * dv: 1e-12) on its own rows. Errors are max |x - ref| / max |ref| over the whole sequence.
 * Masks: causal, bidirectional, segments with boundaries on and off the rank edges (and
 * fewer segments than ranks), windows of 1, 5 and 100 (reaching back over several ranks),
 * segments with a window, and n < P (ranks owning no rows). Errors agreed: one rank passing
 * rows that are not its own fails every rank with LA_ERR_ARG.
 * --oom: one gradient case only; exit 0 when every rank returns the same status and it is
 * LA_OK with the right result or LA_ERR_NOMEM saying "out of memory" (tests/mpi/
 * softmax_ring_oom.sh runs it under LINATTN_FAIL_ALLOC=N); prints "status: ok" or
 * "status: nomem" on rank 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "linattn/dist.h"
#include "linattn/dist.h"

#include "check.h"
#include "test_softmax_naive.h"

static int RANK, SIZE;
static double worst[3]; /* f64 forward, f32 forward, gradients */

/* max |x - ref| over this rank's rows / max |ref| over the whole sequence, all ranks agreeing */
static double err_rows(const double *x, const double *ref_all, size_t off, size_t cnt, size_t all) {
  double num = 0, den = 0;
  for (size_t i = 0; i < cnt; i++)
    num = isnan(x[i]) ? INFINITY : fmax(num, fabs(x[i] - ref_all[off + i]));
  for (size_t i = 0; i < all; i++) den = fmax(den, fabs(ref_all[i]));
  double g;
  MPI_Allreduce(&num, &g, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return den > 0 ? g / den : g;
}

typedef struct {
  la_status st;
  double e_out, e_dq, e_dk, e_dv;
} grad_result;

static grad_result grad_case(la_dist d, int64_t n, int H, int dk, int dv, double a,
                             const sn_mask *nm, int threads, int compare) {
  const double scale = 1.0 / sqrt((double)dk);
  const size_t nqk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *q = malloc(8 * nqk + 8), *k = malloc(8 * nqk + 8), *v = malloc(8 * nvv + 8),
         *g = malloc(8 * nvv + 8);
  sn_fill(q, nqk, a, 31 + n);
  sn_fill(k, nqk, a, 32 + n);
  sn_fill(v, nvv, 1.0, 33 + n);
  sn_fill(g, nvv, 1.0, 34 + n);
  int64_t nl, r0;
  la_split_ownership(n, SIZE, RANK, &nl, &r0);
  const size_t oq = (size_t)r0 * H * dk, ov = (size_t)r0 * H * dv;
  const size_t lq = (size_t)nl * H * dk, lv = (size_t)nl * H * dv;
  double *out = malloc(8 * lv + 8), *dq = malloc(8 * lq + 8), *gk = malloc(8 * lq + 8),
         *gv = malloc(8 * lv + 8);
  const la_softmax_mask lm = {nm->causal ? LA_CAUSAL : LA_BIDIRECTIONAL, nm->seg, nm->nseg,
                              nm->window};
  grad_result r = {LA_OK, 0, 0, 0, 0};
  r.st = la_softmax_ring_grad(d, n, H, dk, dv, scale, &lm, nl, r0, q + oq, k + oq, v + ov,
                              g + ov, out, dq, gk, gv, threads);
  if (compare && r.st == LA_OK) {
    double *P = malloc(sizeof(double) * H * n * n + 8), *ro = malloc(8 * nvv + 8),
           *rq = malloc(8 * nqk + 8), *rk = malloc(8 * nqk + 8), *rv = malloc(8 * nvv + 8);
    sn_forward(n, H, dk, dv, scale, nm, q, k, v, P, ro);
    sn_backward(n, H, dk, dv, scale, P, q, k, v, g, rq, rk, rv);
    r.e_out = err_rows(out, ro, ov, lv, nvv);
    r.e_dq = err_rows(dq, rq, oq, lq, nqk);
    r.e_dk = err_rows(gk, rk, oq, lq, nqk);
    r.e_dv = err_rows(gv, rv, ov, lv, nvv);
    free(P); free(ro); free(rq); free(rk); free(rv);
  }
  free(q); free(k); free(v); free(g); free(out); free(dq); free(gk); free(gv);
  return r;
}

static void one_case(la_dist d, const char *name, int64_t n, int H, int dk, int dv, double a,
                     const sn_mask *nm, int threads) {
  char what[160];
  snprintf(what, sizeof what, "%s n=%lld H=%d dk=%d dv=%d T=%d on %d ranks", name,
           (long long)n, H, dk, dv, threads, SIZE);
  const double scale = 1.0 / sqrt((double)dk);
  const size_t nqk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *q = malloc(8 * nqk + 8), *k = malloc(8 * nqk + 8), *v = malloc(8 * nvv + 8),
         *ref = malloc(8 * nvv + 8);
  sn_fill(q, nqk, a, 31 + n);
  sn_fill(k, nqk, a, 32 + n);
  sn_fill(v, nvv, 1.0, 33 + n);
  int64_t nl, r0;
  la_split_ownership(n, SIZE, RANK, &nl, &r0);
  const size_t oq = (size_t)r0 * H * dk, ov = (size_t)r0 * H * dv, lv = (size_t)nl * H * dv;
  const la_softmax_mask lm = {nm->causal ? LA_CAUSAL : LA_BIDIRECTIONAL, nm->seg, nm->nseg,
                              nm->window};
  /* f64 forward */
  double *out = malloc(8 * lv + 8);
  sn_forward(n, H, dk, dv, scale, nm, q, k, v, NULL, ref);
  la_status st = la_softmax_ring_mask(d, LA_F64, n, H, dk, dv, scale, &lm, nl, r0, q + oq,
                                      k + oq, v + ov, out, threads);
  double e = st == LA_OK ? err_rows(out, ref, ov, lv, nvv) : INFINITY;
  worst[0] = worse(worst[0], e);
  CHECK(st == LA_OK && e <= 1e-12, "ring forward f64 %s: status %d, rel err %.3g", what, (int)st, e);
  /* f32 forward, against the reference on the rounded inputs */
  float *qf = malloc(4 * nqk + 4), *kf = malloc(4 * nqk + 4), *vf = malloc(4 * nvv + 4),
        *of = malloc(4 * lv + 4);
  for (size_t x = 0; x < nqk; x++) q[x] = qf[x] = (float)q[x], k[x] = kf[x] = (float)k[x];
  for (size_t x = 0; x < nvv; x++) v[x] = vf[x] = (float)v[x];
  sn_forward(n, H, dk, dv, scale, nm, q, k, v, NULL, ref);
  st = la_softmax_ring_mask(d, LA_F32, n, H, dk, dv, scale, &lm, nl, r0, qf + oq, kf + oq,
                            vf + ov, of, threads);
  for (size_t x = 0; x < lv; x++) out[x] = of[x];
  e = st == LA_OK ? err_rows(out, ref, ov, lv, nvv) : INFINITY;
  worst[1] = worse(worst[1], e);
  CHECK(st == LA_OK && e <= 1e-5, "ring forward f32 %s: status %d, rel err %.3g", what, (int)st, e);
  free(q); free(k); free(v); free(ref); free(out); free(qf); free(kf); free(vf); free(of);
  /* gradients */
  grad_result r = grad_case(d, n, H, dk, dv, a, nm, threads, 1);
  const double eg = worse(worse(r.e_out, r.e_dq), worse(r.e_dk, r.e_dv));
  worst[2] = worse(worst[2], eg);
  CHECK(r.st == LA_OK && eg <= 1e-12, "ring grad %s: status %d, rel err out %.3g dq %.3g "
        "dk %.3g dv %.3g", what, (int)r.st, r.e_out, r.e_dq, r.e_dk, r.e_dv);
}

/* Offsets 0 < ... < n: the given ones in (0, n) plus, with edges, every rank edge. */
static int64_t make_segments(int64_t n, const int64_t *cuts, int nc, int edges, int64_t *seg) {
  int64_t cnt = 0;
  seg[cnt++] = 0;
  for (int64_t x = 1; x < n; x++) {
    int take = 0;
    for (int c = 0; c < nc; c++) take |= cuts[c] == x;
    for (int p = 1; edges && p < SIZE; p++) {
      int64_t nl, r0;
      la_split_ownership(n, SIZE, p, &nl, &r0);
      take |= r0 == x;
    }
    if (take) seg[cnt++] = x;
  }
  seg[cnt++] = n;
  return cnt;
}

static int run_oom(la_dist d) {
  int64_t seg[8];
  const int64_t cuts[] = {1, 37, 38, 150};
  const int64_t ns = make_segments(200, cuts, 4, 0, seg);
  const sn_mask m = {1, seg, ns, 60};
  grad_result r = grad_case(d, 200, 2, 8, 5, 1.0, &m, 2, 1);
  int mine[2] = {(int)r.st, -(int)r.st}, agg[2];
  MPI_Allreduce(mine, agg, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const int same = agg[0] == -agg[1];
  const double eg = worse(worse(r.e_out, r.e_dq), worse(r.e_dk, r.e_dv));
  int ok = same && ((r.st == LA_OK && eg <= 1e-12) ||
                    (r.st == LA_ERR_NOMEM && strstr(la_error_reason(r.st), "out of memory")));
  if (!ok)
    printf("[rank %d] FAIL --oom: status %d (%s), ranks agree %d, rel err %.3g\n", RANK,
           (int)r.st, la_error_reason(r.st), same, eg);
  int all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (RANK == 0 && all) printf("status: %s\n", r.st == LA_OK ? "ok" : "nomem");
  return !all;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &RANK);
  MPI_Comm_size(MPI_COMM_WORLD, &SIZE);
  char tag[32];
  snprintf(tag, sizeof tag, "[rank %d/%d] ", RANK, SIZE);
  check_tag = tag;
  la_dist d = NULL;
  la_status ds = la_dist_create(MPI_COMM_WORLD, &d);
  if (argc > 1 && !strcmp(argv[1], "--oom")) {
    int rc = 0;
    if (ds == LA_OK) rc = run_oom(d);
    else if (RANK == 0) printf("status: nomem\n"); /* la_dist_create agreed on it */
    la_dist_destroy(&d);
    MPI_Finalize();
    return ds == LA_OK || ds == LA_ERR_NOMEM ? rc : 1;
  }
  CHECK(ds == LA_OK, "la_dist_create");
  const double t0 = MPI_Wtime();
  const int64_t n = 300;
  const sn_mask causal = {1, NULL, 0, 0}, bidir = {0, NULL, 0, 0};
  one_case(d, "causal", n, 2, 8, 5, 1.0, &causal, 2);
  one_case(d, "bidirectional", n, 2, 8, 5, 1.0, &bidir, 1);
  one_case(d, "causal, large scores", 257, 1, 16, 16, 3.0, &causal, 2);

  int64_t seg[64];
  const int64_t off_edges[] = {1, 37, 38, 150, 151, 299};
  for (int c = 0; c < 2; c++) {
    const char *mode = c ? "causal" : "bidirectional";
    char name[96];
    sn_mask m = {c, seg, make_segments(n, off_edges, 6, 1, seg), 0};
    snprintf(name, sizeof name, "%s segments on and off rank edges", mode);
    one_case(d, name, n, 2, 8, 5, 1.0, &m, 2);
    const int64_t two[] = {161}; /* fewer segments than ranks: each spans several */
    m.nseg = make_segments(n, two, 1, 0, seg);
    snprintf(name, sizeof name, "%s two segments", mode);
    one_case(d, name, n, 2, 8, 5, 1.0, &m, 1);
  }
  const int64_t W[] = {1, 5, 100};
  for (int w = 0; w < 3; w++) {
    char name[96];
    sn_mask m = {1, NULL, 0, W[w]};
    snprintf(name, sizeof name, "window %lld", (long long)W[w]);
    one_case(d, name, n, 2, 8, 5, 1.0, &m, 2);
    m.seg = seg;
    m.nseg = make_segments(n, off_edges, 6, 0, seg);
    snprintf(name, sizeof name, "segments + window %lld", (long long)W[w]);
    one_case(d, name, n, 2, 8, 5, 1.0, &m, 1);
  }
  /* n < P where P > 1: the last ranks own no rows */
  const int64_t small[] = {1, 2, 3};
  for (int s = 0; s < 3; s++) {
    const int64_t ns = small[s];
    const int64_t cut1[] = {1};
    sn_mask m = {1, seg, make_segments(ns, cut1, 1, 0, seg), 0};
    one_case(d, "causal, small n", ns, 2, 4, 3, 1.0, &causal, 1);
    one_case(d, "bidirectional, small n", ns, 2, 4, 3, 1.0, &bidir, 2);
    one_case(d, "causal segments, small n", ns, 1, 4, 3, 1.0, &m, 1);
    m.causal = 0;
    one_case(d, "bidirectional segments, small n", ns, 1, 4, 3, 1.0, &m, 1);
    m.causal = 1;
    m.window = 1;
    one_case(d, "segments + window 1, small n", ns, 1, 4, 3, 1.0, &m, 1);
  }

  /* errors are agreed: the last rank passes one row too many */
  {
    int64_t nl, r0;
    la_split_ownership(10, SIZE, RANK, &nl, &r0);
    if (RANK == SIZE - 1) nl++;
    double x[64] = {0};
    const la_softmax_mask m = {LA_CAUSAL, NULL, 0, 0};
    la_status st = la_softmax_ring_grad(d, 10, 1, 2, 2, 1.0, &m, nl, r0, x, x, x, x, x, x, x, x, 1);
    CHECK(st == LA_ERR_ARG, "wrong rows on the last rank: every rank gets LA_ERR_ARG (got %d)", (int)st);
    st = la_softmax_ring_mask(d, LA_F64, 10, 1, 2, 2, 1.0, &m, nl, r0, x, x, x, x, 1);
    CHECK(st == LA_ERR_ARG, "forward, wrong rows on the last rank: LA_ERR_ARG (got %d)", (int)st);
    la_split_ownership(10, SIZE, RANK, &nl, &r0);
    const int64_t short_seg[] = {0, 4, 9}; /* ends before n */
    const la_softmax_mask m2 = {LA_CAUSAL, short_seg, 3, 0};
    st = la_softmax_ring_mask(d, LA_F64, 10, 1, 2, 2, 1.0, &m2, nl, r0, x, x, x, x, 1);
    CHECK(st == LA_ERR_ARG, "segments that end before n: LA_ERR_ARG (got %d)", (int)st);
  }

  la_dist_destroy(&d);
  int counts[2] = {nfail, npass}, maxc[2], sumc[2];
  double gw[3];
  MPI_Allreduce(counts, maxc, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(counts, sumc, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(worst, gw, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (RANK == 0) {
    printf("softmax ring on %d ranks (%.1f s): largest error forward f64 %.2g (tol 1e-12), "
           "f32 %.2g (tol 1e-5), gradients %.2g (tol 1e-12)\n",
           SIZE, MPI_Wtime() - t0, gw[0], gw[1], gw[2]);
    printf("%d passed, %d failed (summed over ranks; worst rank %d failed)\n", sumc[1], sumc[0],
           maxc[0]);
  }
  MPI_Finalize();
  return maxc[0] != 0;
}
