/* Unit tests of the distributed C API (include/linattn/dist.h), at any rank count (ctest runs
 * 1, 2, 3, 4 and 7): la_split_ownership, la_dist_create/destroy, la_dist_agree, the summary
 * collectives (exscan, reverse exscan, allreduce, iexscan) against the scan operator of
 * docs/design.md §4 folded in the test, and la_dist_forward / la_dist_backward on each rank's own
 * rows of a sequence that every rank generates identically, against the naive float64
 * quadratic form and its chain-rule gradient over the whole sequence (tests/test_api_naive.h,
 * no engine code): causal and bidirectional, packed sequences that span ranks, causal
 * windows that reach back across several ranks, both precisions, ranks with no rows.
 * Tolerances as in test_api.c (normwise over the whole sequence, f64 1e-12, f32 1e-5; the
 * rank split only changes the summation order). The streaming plan (la_stream_*) is driven in
 * blocks of 1, 3 and 7 rows (and whole shards, reproducible) on the same rows, against the same reference and,
 * where it holds the shard or is reproducible, bitwise against la_dist_forward (--reproducible:
 * N = 300 on a grid of 64 tokens). Every rank counts its failures; the exit status is the
 * MPI_MAX over ranks (SUNDIALS style) and rank 0 prints the summary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "linattn/dist.h"
#include "linattn/grad.h"

#include "check.h"
#include "test_api_naive.h"

#define TOL64 1e-12
#define TOL32 1e-5
static double tol_of(la_dtype dt) { return dt == LA_F32 ? TOL32 : TOL64; }
static size_t esz(la_dtype dt) { return dt == LA_F32 ? sizeof(float) : sizeof(double); }
static int RANK, SIZE;
static int REPRO; /* run_dist: la_config.reproducible (forward and the plan only) */
static int STREAM; /* run_dist: also drive the streaming plan */
static double worst_err[2];
static double maxabs(const double *x, size_t cnt) {
  double m = 0;
  for (size_t i = 0; i < cnt; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

static void test_split(void) {
  const int64_t Ns[] = {0, 1, 5, 7, 53, 1000, 1000003};
  for (int a = 0; a < 7; a++)
    for (int P = 1; P <= 9; P++) {
      int64_t N = Ns[a], next = 0, total = 0;
      int ok = 1;
      for (int p = 0; p < P; p++) {
        int64_t n, r0;
        la_split_ownership(N, P, p, &n, &r0);
        ok &= r0 == next && n == N / P + (N % P > p);
        next = r0 + n;
        total += n;
      }
      CHECK(ok && total == N, "la_split_ownership(N = %lld, P = %d): n_p = N/P + (N%%P > p), contiguous",
            (long long)N, P);
    }
}

static void test_create_agree(void) {
  la_dist d = NULL;
  CHECK(la_dist_create(MPI_COMM_WORLD, &d) == LA_OK && d, "la_dist_create");
  int cmp;
  MPI_Comm_compare(la_dist_comm(d), MPI_COMM_WORLD, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "the communicator is a duplicate (congruent, not identical): %d", cmp);
  CHECK(la_dist_rank(d) == RANK && la_dist_size(d) == SIZE, "rank and size");
  CHECK(la_dist_comm_bytes(d) == 0, "no bytes sent yet");
  /* agree: everybody OK, and the record is cleared */
  la_error(LA_ERR_IO, "an earlier reason");
  CHECK(la_dist_agree(d, LA_OK) == LA_OK && !la_error_message()[0], "agree on OK clears the record");
  /* ranks first and first + 2 (of those that exist) fail, each with its own recorded reason:
   * all get the status and the reason of the first */
  for (int first = 0; first < SIZE && first < 3; first++) {
    la_status mine = LA_OK;
    la_error_clear();
    if (RANK == first) mine = la_error(LA_ERR_SHAPE, "failed on rank %d", RANK);
    if (RANK == first + 2) mine = la_error(LA_ERR_IO, "failed on rank %d", RANK);
    la_status got = la_dist_agree(d, mine);
    char want[64];
    snprintf(want, sizeof want, "failed on rank %d", first);
    CHECK(got == LA_ERR_SHAPE && !strcmp(la_error_reason(got), want),
          "agree (first failing rank %d): status %d reason '%s'", first, (int)got, la_error_reason(got));
  }
  /* a failure without a recorded reason travels as its status string */
  la_error_clear();
  la_status got = la_dist_agree(d, RANK == SIZE - 1 ? LA_ERR_NOMEM : LA_OK);
  CHECK(got == LA_ERR_NOMEM && !strcmp(la_error_reason(got), "out of memory"),
        "agree without a reason: '%s'", la_error_reason(got));
  la_dist_destroy(&d);
  CHECK(d == NULL, "la_dist_destroy sets NULL");
  la_dist_destroy(&d);
}

/* ---- Summary collectives against the §4 operator folded here ---- */
#define SH 3
#define SR 2
#define SDV 2
#define SRSZ (SR * (SDV + 1))
typedef struct {
  double sz[SH][SRSZ], m[SH];
  int f[SH];
} elem;

/* Rank p's element: head 0 varied scales, head 1 an identity on rank 1, head 2 large gaps. */
static elem elem_of(int p, int flags) {
  elem e;
  for (int h = 0; h < SH; h++) {
    for (int i = 0; i < SRSZ; i++) e.sz[h][i] = nv_normal(77, (uint64_t)(p * 100 + h * 10 + i));
    e.m[h] = h == 0 ? 0.75 * (p % 3) - 1 : h == 1 ? (p == 1 ? -INFINITY : 0.0) : 40.0 * (p % 2);
    if (e.m[h] == -INFINITY)
      for (int i = 0; i < SRSZ; i++) e.sz[h][i] = 0;
    e.f[h] = flags && ((p + h) % 3 == 1);
  }
  return e;
}
/* a <- a (+) b, a before b: a segment start in b hides a; else the log-scaled sum. */
static void fold(elem *a, const elem *b) {
  for (int h = 0; h < SH; h++) {
    if (b->f[h]) {
      memcpy(a->sz[h], b->sz[h], sizeof a->sz[h]);
      a->m[h] = b->m[h];
      a->f[h] = 1;
      continue;
    }
    if (b->m[h] == -INFINITY) continue;
    double M = a->m[h] > b->m[h] ? a->m[h] : b->m[h];
    double sa = a->m[h] == -INFINITY ? 0 : exp(a->m[h] - M), sb = exp(b->m[h] - M);
    for (int i = 0; i < SRSZ; i++) a->sz[h][i] = a->sz[h][i] * sa + b->sz[h][i] * sb;
    a->m[h] = M;
  }
}
static elem identity_elem(void) {
  elem e;
  memset(&e, 0, sizeof e);
  for (int h = 0; h < SH; h++) e.m[h] = -INFINITY;
  return e;
}
static void to_state(const elem *e, la_state *s) {
  for (int h = 0; h < SH; h++) {
    memcpy(s->sz + h * SRSZ, e->sz[h], sizeof e->sz[h]);
    s->m[h] = e->m[h];
    s->f[h] = e->f[h];
  }
}
/* Compare true summaries e^m (S|z) and the flags. */
static void check_state(const la_state *s, const elem *want, const char *what) {
  double worst = 0;
  int flags = 1;
  for (int h = 0; h < SH; h++) {
    double got[SRSZ], ref[SRSZ];
    for (int i = 0; i < SRSZ; i++) {
      got[i] = s->m[h] == -INFINITY ? 0 : s->sz[h * SRSZ + i] * exp(s->m[h]);
      ref[i] = want->m[h] == -INFINITY ? 0 : want->sz[h][i] * exp(want->m[h]);
    }
    worst = fmax(worst, nv_relerr(got, ref, SRSZ));
    flags &= s->f[h] == want->f[h];
    /* an empty prefix stays the identity, never NaN */
    if (want->m[h] == -INFINITY) flags &= s->m[h] == -INFINITY;
  }
  CHECK(worst <= 1e-14 && flags, "%s on rank %d of %d: rel err %.3g, flags/identity %s", what, RANK, SIZE,
        worst, flags ? "ok" : "WRONG");
}

static void test_collectives(void) {
  la_dist d;
  la_dist_create(MPI_COMM_WORLD, &d);
  la_state s;
  la_state_init(&s, SH, SR, SDV);
  for (int flags = 0; flags < 2; flags++) {
    elem mine = elem_of(RANK, flags), want = identity_elem();
    /* exclusive prefix: e_0 (+) ... (+) e_{p-1}; rank 0 the identity */
    for (int p = 0; p < RANK; p++) {
      elem e = elem_of(p, flags);
      fold(&want, &e);
    }
    to_state(&mine, &s);
    CHECK(la_dist_exscan(d, &s) == LA_OK, "la_dist_exscan");
    check_state(&s, &want, flags ? "exscan with segment flags" : "exscan");
    /* nonblocking, overlapped with nothing */
    to_state(&mine, &s);
    la_dist_req req = NULL;
    la_state pre;
    la_state_init(&pre, SH, SR, SDV);
    CHECK(la_dist_iexscan_begin(d, &s, &req) == LA_OK && req, "la_dist_iexscan_begin");
    CHECK(la_dist_iexscan_end(d, &req, &pre) == LA_OK && req == NULL, "la_dist_iexscan_end");
    check_state(&pre, &want, "iexscan");
    la_state_free(&pre);
    /* reverse: e_{P-1} (+) ... (+) e_{p+1}, the nearest rank last; the last rank the identity */
    want = identity_elem();
    for (int p = SIZE - 1; p > RANK; p--) {
      elem e = elem_of(p, flags);
      fold(&want, &e);
    }
    to_state(&mine, &s);
    CHECK(la_dist_exscan_reverse(d, &s) == LA_OK, "la_dist_exscan_reverse");
    check_state(&s, &want, flags ? "reverse exscan with segment flags" : "reverse exscan");
  }
  /* allreduce of summaries without flags: the log-scaled sum over every rank */
  elem mine = elem_of(RANK, 0), want = identity_elem();
  for (int p = 0; p < SIZE; p++) {
    elem e = elem_of(p, 0);
    fold(&want, &e);
  }
  to_state(&mine, &s);
  CHECK(la_dist_allreduce(d, &s) == LA_OK, "la_dist_allreduce");
  check_state(&s, &want, "allreduce");
  CHECK(la_dist_comm_bytes(d) > 0, "collectives count their bytes (%lld)", (long long)la_dist_comm_bytes(d));
  la_state_free(&s);
  la_dist_destroy(&d);
}

/* ---- Distributed forward and backward against the naive whole-sequence reference ---- */
typedef struct {
  la_mode mode;
  la_map_kind map;
  int64_t window;
  int segments;
} dcase;

/* The streaming plan (la_stream_*) in blocks of `block` rows (< 1: whole shards) on the same
 * rows: every rank takes the same steps, each block's outputs land at their rows, and the
 * result matches the naive reference; a plan that holds the shard, and any reproducible plan,
 * are bitwise la_dist_forward's. */
static void run_stream(la_dist d, la_engine e, la_dtype dt, int64_t N, const double *q,
                       const double *k, const double *v, const double *ref, const void *fwd,
                       int64_t n, int64_t block, const char *label) {
  int H, r, dv;
  la_engine_shape(e, &H, &r, &dv);
  const int dk = la_engine_input_dim(e);
  const size_t es = esz(dt);
  la_stream s = NULL;
  la_status st = la_stream_create(d, e, N, block, &s);
  CHECK(st == LA_OK && s, "la_stream_create %s block %lld: status %d", label, (long long)block, (int)st);
  if (st != LA_OK) return;
  const int64_t rows = la_stream_block_rows(s);
  CHECK(rows >= 1 && (block < 1 || rows <= block || la_engine_reproducible(e) || la_stream_holds_shard(e, N)),
        "la_stream_block_rows %s: %lld for block %lld", label, (long long)rows, (long long)block);
  int64_t mine, row0;
  la_engine_ownership(e, N, SIZE, RANK, &mine, &row0);
  CHECK(mine == n, "la_stream %s: the plan's rows are the caller's (%lld, %lld)", label,
        (long long)mine, (long long)n);
  char *all = malloc(es * (size_t)(mine + 1) * H * dv);
  void *bo = malloc(es * (size_t)rows * H * dv);
  la_den_stats stats;
  la_den_stats_init(&stats);
  la_stream_block b;
  int steps[2] = {0, 0}, bad = 0;
  int64_t got_rows = 0;
  while ((st = la_stream_next(s, &b)) == LA_OK && b.pass) {
    steps[b.pass - 1]++;
    bad |= b.n < 0 || b.n > rows || (b.n > 0 && (b.row0 < row0 || b.row0 + b.n > row0 + mine));
    void *bq = b.q ? nv_to_dtype(dt, q + (size_t)b.row0 * H * dk, (size_t)b.n * H * dk) : NULL;
    void *bk = b.kv ? nv_to_dtype(dt, k + (size_t)b.row0 * H * dk, (size_t)b.n * H * dk) : NULL;
    void *bv = b.kv ? nv_to_dtype(dt, v + (size_t)b.row0 * H * dv, (size_t)b.n * H * dv) : NULL;
    st = la_stream_feed(s, LA_OK, bq, bk, bv, bo, &stats);
    if (st == LA_OK && b.out) {
      memcpy(all + es * (size_t)(b.row0 - row0) * H * dv, bo, es * (size_t)b.n * H * dv);
      got_rows += b.n;
    }
    free(bq); free(bk); free(bv);
    if (st != LA_OK) break;
  }
  CHECK(st == LA_OK && !bad && got_rows == mine && la_stream_tokens_left(s) == 0,
        "la_stream %s block %lld: status %d, blocks within the rank's rows %d, %lld of %lld rows out",
        label, (long long)block, (int)st, !bad, (long long)got_rows, (long long)mine);
  int mx[2], mn[2];
  MPI_Allreduce(steps, mx, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(steps, mn, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CHECK(mx[0] == mn[0] && mx[1] == mn[1], "la_stream %s block %lld: every rank takes the same steps "
        "(pass 1 %d..%d, pass 2 %d..%d)", label, (long long)block, mn[0], mx[0], mn[1], mx[1]);
  if (st == LA_OK) st = la_stream_finish(s, &stats);
  CHECK(st == LA_OK && stats.rows == N * H, "la_stream_finish %s: merged stats rows %lld", label,
        (long long)stats.rows);
  double *gd = malloc(sizeof(double) * (size_t)(mine + 1) * H * dv);
  nv_from_dtype(dt, all, gd, (size_t)mine * H * dv);
  double err = nv_relerr_floor(gd, ref + (size_t)row0 * H * dv, (size_t)mine * H * dv,
                               maxabs(ref, (size_t)N * H * dv));
  CHECK(err <= tol_of(dt), "la_stream %s block %lld: rel err %.3g", label, (long long)block, err);
  if (fwd && (la_engine_reproducible(e) || la_stream_holds_shard(e, N)))
    CHECK(!memcmp(all, fwd, es * (size_t)mine * H * dv), "la_stream %s block %lld: bitwise "
          "la_dist_forward's outputs", label, (long long)block);
  la_den_stats_free(&stats);
  la_stream_destroy(&s);
  CHECK(s == NULL, "la_stream_destroy sets the handle to NULL");
  free(all); free(bo); free(gd);
}

static void run_dist(la_dist d, const dcase *dc, int64_t N, la_dtype dt, int chunk, int threads,
                     const int64_t *off, int noff) {
  const int H = 2, dk = 4, dv = 3, m = 5;
  const size_t nq = (size_t)N * H * dk, nvv = (size_t)N * H * dv;
  double xs = dc->map == LA_MAP_FAVOR ? 1.5 : 0.8; /* favor+: key scales spread over ranks */
  double *q = malloc(sizeof(double) * (nq + 1)), *k = malloc(sizeof(double) * (nq + 1));
  double *v = malloc(sizeof(double) * (nvv + 1)), *g = malloc(sizeof(double) * (nvv + 1));
  uint64_t seed = 9000 + 13 * (uint64_t)dc->map + (uint64_t)N;
  nv_fill(q, nq, seed, xs, 0);
  nv_fill(k, nq, seed + 1, xs, 0);
  nv_fill(v, nvv, seed + 2, 1, 0);
  nv_fill(g, nvv, seed + 3, 1, 0);
  if (dt == LA_F32) {
    nv_round_f32(q, nq);
    nv_round_f32(k, nq);
    nv_round_f32(v, nvv);
    nv_round_f32(g, nvv);
  }
  la_config c;
  la_config_default(&c);
  c.mode = dc->mode;
  c.map = dc->map;
  c.features = m;
  c.seed = 4;
  c.chunk = chunk;
  c.threads = threads;
  c.window = dc->window;
  c.reproducible = REPRO;
  la_featmap fm;
  la_featmap_create(&c, H, dk, &fm);
  la_engine e;
  la_engine_create(&c, fm, dt, dv, &e);
  if (dc->segments) la_engine_set_segments(e, off, noff);
  nv_map f = nv_map_make(c.map, H, dk, m, 0, la_featmap_projection(fm, NULL));
  nv_op op = {c.mode, c.window, dc->segments ? off : NULL, dc->segments ? noff : 0, 1, LA_DEN_ERROR, 0};
  double *ref = malloc(sizeof(double) * (nvv + 1)), *rq = malloc(sizeof(double) * (nq + 1));
  double *rk = malloc(sizeof(double) * (nq + 1)), *rv = malloc(sizeof(double) * (nvv + 1));
  nv_den ds;
  nv_forward(&f, &op, N, dv, q, k, v, ref, &ds);
  nv_backward(&f, &op, N, dv, q, k, v, g, rq, rk, rv);
  /* this rank's rows */
  int64_t n, row0;
  la_engine_ownership(e, N, SIZE, RANK, &n, &row0); /* la_split_ownership unless REPRO */
  void *qe = nv_to_dtype(dt, q + (size_t)row0 * H * dk, (size_t)n * H * dk);
  void *ke = nv_to_dtype(dt, k + (size_t)row0 * H * dk, (size_t)n * H * dk);
  void *ve = nv_to_dtype(dt, v + (size_t)row0 * H * dv, (size_t)n * H * dv);
  void *ge = nv_to_dtype(dt, g + (size_t)row0 * H * dv, (size_t)n * H * dv);
  void *out = malloc(esz(dt) * (size_t)(n + 1) * H * dv), *dq = malloc(esz(dt) * (size_t)(n + 1) * H * dk);
  void *dke = malloc(esz(dt) * (size_t)(n + 1) * H * dk), *dve = malloc(esz(dt) * (size_t)(n + 1) * H * dv);
  double *got = malloc(sizeof(double) * (size_t)(n + 1) * H * (dk > dv ? dk : dv));
  memset(out, 0xff, esz(dt) * (size_t)n * H * dv);
  char label[160];
  snprintf(label, sizeof label, "%s %s %s N %lld window %lld segments %d chunk %d threads %d",
           la_map_name(c.map), c.mode ? "bidir" : "causal", la_dtype_name(dt), (long long)N,
           (long long)c.window, dc->segments, la_engine_chunk(e), threads);
  la_den_stats st;
  la_den_stats_init(&st);
  la_status s = la_dist_forward(d, e, n, row0, qe, ke, ve, out, &st);
  nv_from_dtype(dt, out, got, (size_t)n * H * dv);
  /* normwise over the whole sequence (max |ref| over all N rows): a rank's rows alone can
   * have an exactly vanishing reference (a shard of segment starts: dQ = 0) */
  double err = nv_relerr_floor(got, ref + (size_t)row0 * H * dv, (size_t)n * H * dv, maxabs(ref, nvv));
  worst_err[dt] = err > worst_err[dt] && err < INFINITY ? err : worst_err[dt];
  CHECK(s == LA_OK && err <= tol_of(dt), "la_dist_forward %s: status %d rel err %.3g", label, (int)s, err);
  CHECK(st.rows == N * H && st.violations == ds.violations,
        "la_dist_forward %s: merged stats rows %lld (want %lld) violations %lld", label, (long long)st.rows,
        (long long)(N * H), (long long)st.violations);
  if (N > 0)
    CHECK(fabs(st.min - ds.min) <= 10 * tol_of(dt) * ds.min && fabs(st.max - ds.max) <= 10 * tol_of(dt) * ds.max,
          "la_dist_forward %s: merged den min/max %.17g %.17g, want %.17g %.17g", label, st.min, st.max, ds.min,
          ds.max);
  la_den_stats_free(&st);
  /* the streaming plan in odd blocks, and whole shards */
  if (STREAM) { /* odd blocks on the small sequence, 3 and whole shards on the larger */
    const int64_t blocks[] = {N < 10 ? 1 : 3, N < 10 ? 0 : 7, 0};
    for (int i = 0; i < 3; i++)
      if (i < 2 || REPRO) run_stream(d, e, dt, N, q, k, v, ref, s == LA_OK ? out : NULL, n, blocks[i], label);
  }
  if (REPRO) { /* grad refuses --reproducible */
    free(q); free(k); free(v); free(g); free(ref); free(rq); free(rk); free(rv);
    free(qe); free(ke); free(ve); free(ge); free(out); free(dq); free(dke); free(dve); free(got);
    la_engine_destroy(&e);
    la_featmap_destroy(&fm);
    return;
  }
  /* backward */
  memset(dq, 0xff, esz(dt) * (size_t)n * H * dk);
  memset(dke, 0xff, esz(dt) * (size_t)n * H * dk);
  memset(dve, 0xff, esz(dt) * (size_t)n * H * dv);
  la_den_stats_init(&st);
  s = la_dist_backward(d, e, n, row0, qe, ke, ve, ge, dq, dke, dve, &st);
  const void *gs[3] = {dq, dke, dve};
  const double *refs[3] = {rq, rk, rv};
  const int wd[3] = {dk, dk, dv};
  const char *nm[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; t++) {
    size_t cnt = (size_t)n * H * wd[t];
    nv_from_dtype(dt, gs[t], got, cnt);
    /* window 1: out_i = v_i, so dQ = dK = 0 exactly: errors on the O(1) scale of |g|, |v| */
    double scale = maxabs(refs[t], (size_t)N * H * wd[t]);
    double er = nv_relerr_floor(got, refs[t] + (size_t)row0 * H * wd[t], cnt,
                                c.window == 1 && t < 2 ? 1.0 : scale);
    worst_err[dt] = er > worst_err[dt] && er < INFINITY ? er : worst_err[dt];
    CHECK(s == LA_OK && er <= tol_of(dt), "la_dist_backward %s: %s status %d rel err %.3g", label, nm[t], (int)s, er);
  }
  CHECK(st.rows == N * H && st.violations == 0, "la_dist_backward %s: merged stats rows %lld", label,
        (long long)st.rows);
  la_den_stats_free(&st);
  free(q); free(k); free(v); free(g); free(ref); free(rq); free(rk); free(rv);
  free(qe); free(ke); free(ve); free(ge); free(out); free(dq); free(dke); free(dve); free(got);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
}

static void test_dist_operator(void) {
  la_dist d;
  la_dist_create(MPI_COMM_WORLD, &d);
  /* N = 53: shards of 7-53 rows; segments start on some rank boundaries (8 at P = 7) and span
   * two or three ranks ([21, 35)); N = 5: at P = 7 two ranks own no rows */
  const int64_t off53[] = {0, 1, 8, 9, 20, 21, 35, 52, 53}, off5[] = {0, 2, 5};
  const dcase cases[] = {
      {LA_CAUSAL, LA_MAP_ELU1, 0, 0},         {LA_BIDIRECTIONAL, LA_MAP_ELU1, 0, 0},
      {LA_CAUSAL, LA_MAP_ELU1, 0, 1},         {LA_BIDIRECTIONAL, LA_MAP_ELU1, 0, 1},
      {LA_CAUSAL, LA_MAP_ELU1, 1, 0},         {LA_CAUSAL, LA_MAP_ELU1, 3, 0},
      {LA_CAUSAL, LA_MAP_ELU1, 10, 0},        {LA_CAUSAL, LA_MAP_ELU1, 25, 1},
      {LA_CAUSAL, LA_MAP_ELU1, 60, 0},        {LA_CAUSAL, LA_MAP_FAVOR, 0, 0},
      {LA_BIDIRECTIONAL, LA_MAP_FAVOR, 0, 0}, {LA_CAUSAL, LA_MAP_FAVOR, 0, 1},
      {LA_BIDIRECTIONAL, LA_MAP_FAVOR, 0, 1}, {LA_CAUSAL, LA_MAP_FAVOR, 7, 0},
      {LA_CAUSAL, LA_MAP_FAVOR, 12, 1},
  };
  const int ncase = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < ncase; i++)
    for (int dt = 0; dt < 2; dt++)
      for (int v = 0; v < 2; v++) { /* chunk 4 on one thread, the default chunk on two */
        /* the plan once per case and dtype, float64 only above 4 ranks (every step of a plan is
         * collective, and 7 ranks share 2 cores in CI) */
        STREAM = v == 0 && (dt == LA_F64 || SIZE <= 4);
        run_dist(d, &cases[i], 53, (la_dtype)dt, v ? 0 : 4, v ? 2 : 1, off53, 9);
        if (v == 0 && i < 9) run_dist(d, &cases[i], 5, (la_dtype)dt, 2, 1, off5, 3);
      }
  /* --reproducible: chunk 1, so the grid's blocks are 64 tokens and N = 300 spans 5 of them;
   * the plan in any blocks is bitwise la_dist_forward (on la_engine_ownership's rows) */
  const int64_t off300[] = {0, 1, 64, 65, 200, 299, 300};
  REPRO = STREAM = 1;
  for (int i = 0; i < ncase; i += SIZE > 4 ? 2 : 1)
    /* windows also where a rank owns no grid block (7 ranks, 5 blocks): such a rank posts no
     * receive (forward_window_exact; it once waited there for rows nobody sent) */
    if (cases[i].window != 1)
      run_dist(d, &cases[i], 300, LA_F64, 1, 1, off300, 7);
  run_dist(d, &cases[1], 300, LA_F32, 1, 2, off300, 7);
  REPRO = 0;
  la_dist_destroy(&d);
}

/* den = 0 on later ranks: the merged statistics name the first offending (token, head). */
static void test_dist_violations(void) {
  la_dist d;
  la_dist_create(MPI_COMM_WORLD, &d);
  const int64_t N = 40;
  const int H = 2, dk = 3, dv = 2;
  for (int mode = 0; mode < 2; mode++) {
    double *q = malloc(sizeof(double) * N * H * dk), *k = malloc(sizeof(double) * N * H * dk);
    double *v = malloc(sizeof(double) * N * H * dv);
    nv_fill(q, (size_t)N * H * dk, 61, 0.4, 0.9);
    nv_fill(k, (size_t)N * H * dk, 62, 0.4, 0.9);
    nv_fill(v, (size_t)N * H * dv, 63, 1, 0);
    const int bad[][2] = {{30, 1}, {37, 0}, {37, 1}}; /* (token, head): relu(q) = 0 */
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < dk; c++) q[((size_t)bad[b][0] * H + bad[b][1]) * dk + c] = -1.0;
    la_config c;
    la_config_default(&c);
    c.mode = (la_mode)mode;
    c.map = LA_MAP_RELU;
    c.chunk = 4;
    c.threads = 1;
    la_featmap fm;
    la_featmap_create(&c, H, dk, &fm);
    la_engine e;
    la_engine_create(&c, fm, LA_F64, dv, &e);
    int64_t n, row0;
    la_split_ownership(N, SIZE, RANK, &n, &row0);
    double *out = malloc(sizeof(double) * (size_t)(n + 1) * H * dv);
    la_den_stats st;
    la_den_stats_init(&st);
    la_status s = la_dist_forward(d, e, n, row0, q + (size_t)row0 * H * dk, k + (size_t)row0 * H * dk,
                                  v + (size_t)row0 * H * dv, out, &st);
    CHECK(s == LA_OK && st.violations == 3 && st.first_bad_token == 30 && st.first_bad_head == 1 &&
              st.count_nonpositive == 3 && st.rows == N * H && st.min == 0,
          "%s relu den = 0 on rank %d: violations %lld first (%lld, %d) nonpositive %lld rows %lld min %g, "
          "want 3 (30, 1) 3 %lld 0",
          mode ? "bidir" : "causal", RANK, (long long)st.violations, (long long)st.first_bad_token,
          st.first_bad_head, (long long)st.count_nonpositive, (long long)st.rows, st.min, (long long)(N * H));
    la_den_stats_free(&st);
    free(q); free(k); free(v); free(out);
    la_engine_destroy(&e);
    la_featmap_destroy(&fm);
  }
  la_dist_destroy(&d);
}

/* The window's halos follow the rows as the ranks pass them (la_dist_row_ranges): a split
 * other than la_split_ownership's (the reversed one, as the decayed backward's anti-causal
 * products pass) gives the same output to rounding, and rows that are not consecutive are
 * refused with the reason on every rank. */
static void test_window_rows(void) {
  la_dist d;
  la_dist_create(MPI_COMM_WORLD, &d);
  const int64_t N = 50;
  const int H = 2, dk = 3, dv = 2;
  double *q = malloc(sizeof(double) * N * H * dk), *k = malloc(sizeof(double) * N * H * dk);
  double *v = malloc(sizeof(double) * N * H * dv), *all[2];
  nv_fill(q, (size_t)N * H * dk, 71, 0.5, 0);
  nv_fill(k, (size_t)N * H * dk, 72, 0.5, 0);
  nv_fill(v, (size_t)N * H * dv, 73, 1, 0);
  la_config c;
  la_config_default(&c);
  c.mode = LA_CAUSAL;
  c.map = LA_MAP_ELU1;
  c.chunk = 4;
  c.threads = 1;
  c.window = 7;
  la_featmap fm;
  la_featmap_create(&c, H, dk, &fm);
  la_engine e;
  la_engine_create(&c, fm, LA_F64, dv, &e);
  int *cnt = malloc(sizeof(int) * SIZE), *dsp = malloc(sizeof(int) * SIZE);
  for (int split = 0; split < 2; split++) {
    int64_t n, row0;
    la_split_ownership(N, SIZE, split ? SIZE - 1 - RANK : RANK, &n, &row0);
    if (split) row0 = N - row0 - n; /* the reversed split: rank p holds rank P-1-p's count */
    double *out = malloc(sizeof(double) * (size_t)(n + 1) * H * dv);
    all[split] = malloc(sizeof(double) * (size_t)N * H * dv);
    la_status s = la_dist_forward(d, e, n, row0, q + (size_t)row0 * H * dk,
                                  k + (size_t)row0 * H * dk, v + (size_t)row0 * H * dv, out, NULL);
    CHECK(s == LA_OK, "window rows, split %d: %s", split, la_error_reason(s));
    int mine = (int)(n * H * dv);
    MPI_Allgather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, MPI_COMM_WORLD);
    for (int p = 0, o = 0; p < SIZE; p++) dsp[p] = o, o += cnt[p];
    MPI_Allgatherv(out, mine, MPI_DOUBLE, all[split], cnt, dsp, MPI_DOUBLE, MPI_COMM_WORLD);
    free(out);
  }
  double err = 0;
  for (size_t i = 0; i < (size_t)N * H * dv; i++)
    err = fmax(err, fabs(all[0][i] - all[1][i]));
  CHECK(err <= TOL64 * maxabs(all[0], (size_t)N * H * dv),
        "window 7 on the reversed split equals la_split_ownership's (max diff %.3g)", err);
  if (SIZE > 1) { /* rank 1 starts one row late: a gap */
    int64_t n, row0;
    la_split_ownership(N, SIZE, RANK, &n, &row0);
    if (RANK == 1) row0 += 1, n -= 1;
    double *out = malloc(sizeof(double) * (size_t)(n + 1) * H * dv);
    la_status s = la_dist_forward(d, e, n, row0, q + (size_t)row0 * H * dk,
                                  k + (size_t)row0 * H * dk, v + (size_t)row0 * H * dv, out, NULL);
    CHECK(s == LA_ERR_ARG && strstr(la_error_reason(s), "consecutive"),
          "window rows with a gap: LA_ERR_ARG naming consecutive rows (%d: %s)", (int)s,
          la_error_reason(s));
    free(out);
  }
  free(all[0]); free(all[1]); free(q); free(k); free(v); free(cnt); free(dsp);
  la_engine_destroy(&e);
  la_featmap_destroy(&fm);
  la_dist_destroy(&d);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &RANK);
  MPI_Comm_size(MPI_COMM_WORLD, &SIZE);
  char tag[32];
  snprintf(tag, sizeof tag, "[rank %d/%d] ", RANK, SIZE);
  check_tag = tag;
  double t0 = MPI_Wtime();
  test_split();
  test_create_agree();
  test_collectives();
  test_dist_operator();
  test_dist_violations();
  test_window_rows();
  int counts[2] = {nfail, npass}, maxc[2], sumc[2];
  double worst[2] = {worst_err[0], worst_err[1]}, gworst[2];
  MPI_Allreduce(counts, maxc, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(counts, sumc, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(worst, gworst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (RANK == 0) {
    printf("api_dist on %d ranks (%.1f s): largest normwise error f64 %.2g (tolerance %.0g), f32 %.2g (tolerance %.0g)\n",
           SIZE, MPI_Wtime() - t0, gworst[LA_F64], TOL64, gworst[LA_F32], TOL32);
    printf("%d passed, %d failed (summed over ranks; worst rank %d failed)\n", sumc[1], sumc[0], maxc[0]);
  }
  MPI_Finalize();
  return maxc[0] != 0;
}
