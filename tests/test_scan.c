/* The scan algorithms of --scan-algorithm (dist/scan.c, docs/design.md §4.5): for every
 * algorithm, la_dist_exscan and la_dist_exscan_reverse give each rank the combination of the
 * other ranks' elements in rank order, against a serial fold written here from the
 * operator's definition (docs/design.md §4.1; it shares no code with the library):
 *   (S_a, m_a, f_a) (+) (S_b, m_b, f_b) = b if f_b; else (e^{m_a - M} S_a + e^{m_b - M} S_b,
 *   M = max(m_a, m_b), f_a), with an empty element (m = -inf) the identity.
 * Elements are random, with some empty heads, some segment starts, and log-scales spread over
 * +-30, so the rescaling matters. Tolerance: 1e-13 of the largest |entry| of the expected
 * prefix (float64 rounding of a different bracketing; the fold has at most 6 steps). Also:
 * every algorithm agrees with MPI_Exscan within the same tolerance, m and f exactly, and the
 * pipelined scan with pieces 1, 3 and more pieces than entries. Then the plan's collective
 * (la_plan_combine, dist/plan_combine.c, docs/design.md §4.5 "The plan's collective") in each
 * of its forms against the same fold: causal forward and reverse, bidirectional (every rank's
 * fold, flags 0), the segments' pair (tails forward, heads reverse), and its agreement on a
 * failed rank's status. Run at 1 to 7 ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "linattn/linattn.h"
#include "linattn/dist.h"
#include "dist_internal.h" /* la_plan_combine (dist/, private) */

static int fails = 0, checks = 0;
#define CHECK(c, ...)                                            \
  do {                                                           \
    checks++;                                                    \
    if (!(c)) {                                                  \
      fails++;                                                   \
      fprintf(stderr, "FAIL (rank %d): ", rank);                 \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
    }                                                            \
  } while (0)

enum { H = 3, R = 5, DV = 4, RSZ = R * (DV + 1) };

typedef struct {
  double sz[H][RSZ], m[H];
  int f[H];
} elem;

static unsigned long long rng_state;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* The element of rank p (every rank can make every rank's element). */
static void make(int p, int seed, elem *e) {
  rng_state = 0x9e3779b97f4a7c15ULL * (unsigned long long)(p + 1) + (unsigned long long)seed;
  for (int h = 0; h < H; h++) {
    const double u = urand();
    e->m[h] = u < 0.15 ? -INFINITY : 60 * urand() - 30;
    e->f[h] = urand() < 0.2;
    for (int i = 0; i < RSZ; i++) e->sz[h][i] = e->m[h] == -INFINITY ? 0 : 2 * urand() - 1;
  }
}

/* b <- a (+) b, from the definition. */
static void fold(const elem *a, elem *b) {
  for (int h = 0; h < H; h++) {
    if (b->f[h]) continue;
    if (b->m[h] == -INFINITY) {
      memcpy(b->sz[h], a->sz[h], sizeof b->sz[h]);
      b->m[h] = a->m[h];
      b->f[h] = a->f[h];
      continue;
    }
    b->f[h] = a->f[h];
    if (a->m[h] == -INFINITY) continue;
    const double M = fmax(a->m[h], b->m[h]), sa = exp(a->m[h] - M), sb = exp(b->m[h] - M);
    for (int i = 0; i < RSZ; i++) b->sz[h][i] = a->sz[h][i] * sa + b->sz[h][i] * sb;
    b->m[h] = M;
  }
}

static void identity(elem *e) {
  for (int h = 0; h < H; h++) {
    for (int i = 0; i < RSZ; i++) e->sz[h][i] = 0;
    e->m[h] = -INFINITY;
    e->f[h] = 0;
  }
}

static void to_state(const elem *e, la_state *s) {
  for (int h = 0; h < H; h++) {
    memcpy(s->sz + h * RSZ, e->sz[h], sizeof e->sz[h]);
    s->m[h] = e->m[h];
    s->f[h] = e->f[h];
  }
}

/* max |s - e| over heads, against tol * max |e|; m and f must match exactly. */
static int same(const la_state *s, const elem *e, double tol, double *worst) {
  int ok = 1;
  for (int h = 0; h < H; h++) {
    double big = 0, d = 0;
    for (int i = 0; i < RSZ; i++) {
      big = fmax(big, fabs(e->sz[h][i]));
      d = fmax(d, fabs(s->sz[h * RSZ + i] - e->sz[h][i]));
    }
    if (big > 0) *worst = fmax(*worst, d / big);
    ok &= d <= tol * big && (s->m[h] == e->m[h]) && (!!s->f[h] == !!e->f[h]);
  }
  return ok;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  la_dist d = NULL;
  if (la_dist_create(MPI_COMM_WORLD, &d) != LA_OK) {
    fprintf(stderr, "la_dist_create failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  la_state s, ref;
  la_state_init(&s, H, R, DV);
  la_state_init(&ref, H, R, DV);
  const struct { la_scan_algorithm a; int pieces; const char *name; } algs[] = {
      {LA_SCAN_EXSCAN, 0, "exscan"},       {LA_SCAN_DOUBLING, 0, "doubling"},
      {LA_SCAN_CHAIN, 0, "chain"},         {LA_SCAN_ALLGATHER, 0, "allgather"},
      {LA_SCAN_PIPELINED, 1, "pipelined/1"}, {LA_SCAN_PIPELINED, 3, "pipelined/3"},
      {LA_SCAN_PIPELINED, 8, "pipelined/8"}, {LA_SCAN_PIPELINED, 1000, "pipelined/1000"},
      {LA_SCAN_AUTO, 0, "auto"}};
  const double tol = 1e-13;
  double worst = 0;
  for (int seed = 0; seed < 5; seed++) {
    elem mine, want, tmp;
    make(rank, seed, &mine);
    for (int dir = 0; dir < 2; dir++) {
      /* expected: forward, ranks 0..rank-1 folded left to right; reverse, ranks P-1..rank+1
       * (the nearest last, as the reversed communicator orders them) */
      identity(&want);
      if (dir == 0)
        for (int q = 0; q < rank; q++) { make(q, seed, &tmp); fold(&want, &tmp); want = tmp; }
      else
        for (int q = P - 1; q > rank; q--) { make(q, seed, &tmp); fold(&want, &tmp); want = tmp; }
      for (size_t ai = 0; ai < sizeof algs / sizeof *algs; ai++) {
        la_config cfg;
        la_config_default(&cfg);
        cfg.scan_algorithm = algs[ai].a;
        cfg.scan_pieces = algs[ai].pieces;
        la_dist_use_config(d, &cfg);
        to_state(&mine, &s);
        la_status st = dir == 0 ? la_dist_exscan(d, &s) : la_dist_exscan_reverse(d, &s);
        CHECK(st == LA_OK, "%s %s seed %d: status %d", algs[ai].name, dir ? "reverse" : "forward",
              seed, (int)st);
        CHECK(same(&s, &want, tol, &worst), "%s %s seed %d: prefix differs from the serial fold",
              algs[ai].name, dir ? "reverse" : "forward", seed);
        if (algs[ai].a == LA_SCAN_EXSCAN) { /* keep MPI_Exscan's answer for the comparison */
          memcpy(ref.sz, s.sz, sizeof(double) * H * RSZ);
          memcpy(ref.m, s.m, sizeof(double) * H);
          memcpy(ref.f, s.f, sizeof(int) * H);
        } else {
          elem e;
          for (int h = 0; h < H; h++) {
            memcpy(e.sz[h], ref.sz + h * RSZ, sizeof e.sz[h]);
            e.m[h] = ref.m[h];
            e.f[h] = ref.f[h];
          }
          double w2 = 0;
          CHECK(same(&s, &e, tol, &w2), "%s %s seed %d: differs from MPI_Exscan by %.3g",
                algs[ai].name, dir ? "reverse" : "forward", seed, w2);
        }
        CHECK(la_dist_scan_algorithm(d) == (algs[ai].a == LA_SCAN_AUTO
                                                ? la_scan_auto_choice(P, H, RSZ + 2, algs[ai].pieces)
                                                : algs[ai].a),
              "%s: la_dist_scan_algorithm", algs[ai].name);
      }
    }
  }
  /* The plan's collective: every form against the fold (flags 0 for bidirectional) */
  for (int seed = 10; seed < 13; seed++) {
    la_config cfg;
    la_config_default(&cfg);
    cfg.scan_algorithm = (la_scan_algorithm)(seed % 2 ? LA_SCAN_PIPELINED : LA_SCAN_AUTO);
    la_dist_use_config(d, &cfg);
    elem mine, mine2, want, want2, tmp;
    la_state s2;
    la_state_init(&s2, H, R, DV);
    for (int form = 0; form < 4; form++) { /* causal, causal reverse, bidirectional, segments */
      const int bidir = form >= 2, rev = form == 1;
      make(rank, seed, &mine);
      make(rank, seed + 100, &mine2);
      if (form == 2)
        for (int h = 0; h < H; h++) mine.f[h] = 0;
      identity(&want);
      identity(&want2);
      for (int i = 0; i < P; i++) { /* want: fold of the ranks the form reads, in rank order */
        const int q = rev ? P - 1 - i : i;   /* (reverse: the later ranks, nearest last) */
        if (!(form == 2 || (rev ? q > rank : q < rank))) continue;
        make(q, seed, &tmp);
        if (form == 2)
          for (int h = 0; h < H; h++) tmp.f[h] = 0;
        fold(&want, &tmp);
        want = tmp;
      }
      for (int q = P - 1; q > rank; q--) { /* want2: the heads' suffix, nearest last */
        make(q, seed + 100, &tmp);
        fold(&want2, &tmp);
        want2 = tmp;
      }
      to_state(&mine, &s);
      to_state(&mine2, &s2);
      la_status st = la_plan_combine(d, LA_OK, bidir, rev, &s, form == 3 ? &s2 : NULL);
      CHECK(st == LA_OK, "plan form %d seed %d: status %d", form, seed, (int)st);
      CHECK(same(&s, &want, tol, &worst), "plan form %d seed %d: differs from the serial fold",
            form, seed);
      if (form == 3)
        CHECK(same(&s2, &want2, tol, &worst), "plan segments seed %d: the heads' suffix differs",
              seed);
    }
    /* a failed pass on the last rank: every rank gets its status, and nothing is combined */
    make(rank, seed, &mine);
    to_state(&mine, &s);
    la_status in = rank == P - 1 ? la_error(LA_ERR_NOMEM, "test: rank %d failed its pass", rank)
                                 : LA_OK;
    la_status st = la_plan_combine(d, in, 0, 0, &s, NULL);
    double w0 = 0;
    CHECK(st == LA_ERR_NOMEM && strstr(la_error_reason(st), "failed its pass"),
          "plan: a failed rank's status is not agreed (%d)", (int)st);
    CHECK(same(&s, &mine, 0, &w0), "plan: the summary changed after a failed pass");
    la_dist_req req = NULL;
    st = la_plan_combine_begin(d, in, &s, &req);
    CHECK(st == LA_ERR_NOMEM && !req, "plan begin: a failed rank's status is not agreed (%d)",
          (int)st);
    la_error_clear();
    la_state_free(&s2);
  }
  int f = fails, c = checks;
  double w = worst;
  MPI_Allreduce(MPI_IN_PLACE, &f, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &c, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_scan: %d ranks, %d checks, %d failed; worst relative difference %.3g\n", P, c, f, w);
  la_state_free(&s);
  la_state_free(&ref);
  la_dist_destroy(&d);
  MPI_Finalize();
  return f ? 1 : 0;
}
