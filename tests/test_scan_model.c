/* auto's choice (dist/scan_model.c, docs/design.md §4.5 "auto", docs/simulation.md): at every
 * (P, state) of a grid, la_scan_auto_choice is the candidate of least la_scan_model_seconds
 * (ties: the first of doubling, pipelined, chain, allgather), the same on a second call, never
 * auto or exscan, never allgather when P states exceed 1 GiB, never chain at P = 4096; and at
 * a few points of the simulated study it is the algorithm the fitted model names there
 * (docs/sim_model.csv). No MPI calls: the model is pure. */
#include <math.h>
#include <stdio.h>
#include "linattn/dist.h"

#include "check.h"

static size_t per_of(int r, int dv) { return (size_t)r * (dv + 1) + 3; /* scan_element.h */ }

int main(void) {
  static const la_scan_algorithm cand[] = {LA_SCAN_DOUBLING, LA_SCAN_PIPELINED, LA_SCAN_CHAIN,
                                           LA_SCAN_ALLGATHER};
  const int Ps[] = {1, 2, 3, 7, 16, 64, 100, 256, 1024, 4096};
  const int Hs[] = {1, 4, 32}, rs[] = {8, 64, 128, 256};
  for (size_t pi = 0; pi < sizeof Ps / sizeof *Ps; pi++)
    for (size_t hi = 0; hi < sizeof Hs / sizeof *Hs; hi++)
      for (size_t ri = 0; ri < sizeof rs / sizeof *rs; ri++) {
        const int P = Ps[pi], H = Hs[hi], r = rs[ri];
        const size_t per = per_of(r, r);
        const la_scan_algorithm a = la_scan_auto_choice(P, H, per, 8);
        CHECK(a == la_scan_auto_choice(P, H, per, 8), "P %d H %d r %d: not deterministic", P, H, r);
        CHECK(a != LA_SCAN_AUTO && a != LA_SCAN_EXSCAN, "P %d H %d r %d: auto chose %s", P, H, r,
              la_scan_algorithm_names[a]);
        la_scan_algorithm best = LA_SCAN_DOUBLING;
        double tb = INFINITY;
        for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
          if (cand[i] == LA_SCAN_ALLGATHER && 8.0 * H * per * P > 1024.0 * 1024 * 1024) continue;
          const double t = la_scan_model_seconds(cand[i], P, H, per, 8);
          CHECK(t >= 0 && isfinite(t), "P %d: model time %g", P, t);
          if (t < tb) tb = t, best = cand[i];
        }
        CHECK(a == best, "P %d H %d r %d: auto chose %s, the model's least is %s", P, H, r,
              la_scan_algorithm_names[a], la_scan_algorithm_names[best]);
        if (P == 4096)
          CHECK(a != LA_SCAN_CHAIN && a != LA_SCAN_ALLGATHER, "P 4096 H %d r %d: auto chose %s", H,
                r, la_scan_algorithm_names[a]);
        if (8.0 * H * per * P > 1024.0 * 1024 * 1024)
          CHECK(a != LA_SCAN_ALLGATHER, "P %d H %d r %d: allgather beyond 1 GiB", P, H, r);
        if (P > 1) /* a longer chain never costs less */
          CHECK(la_scan_model_seconds(LA_SCAN_CHAIN, 2 * P, H, per, 8) >
                    la_scan_model_seconds(LA_SCAN_CHAIN, P, H, per, 8),
                "chain model not increasing in P at %d", P);
      }
  /* points of the simulated study (docs/sim_model.csv: the fitted model's choice there) */
  static const struct { int P, H, r; la_scan_algorithm want; } pts[] = {
#include "test_scan_model_points.h"
  };
  for (size_t i = 0; i < sizeof pts / sizeof *pts; i++) {
    const la_scan_algorithm a = la_scan_auto_choice(pts[i].P, pts[i].H, per_of(pts[i].r, pts[i].r), 8);
    CHECK(a == pts[i].want, "P %d H %d r = dv = %d: auto chose %s, docs/sim_model.csv says %s",
          pts[i].P, pts[i].H, pts[i].r, la_scan_algorithm_names[a],
          la_scan_algorithm_names[pts[i].want]);
  }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
