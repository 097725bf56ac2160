/* The cost model behind --scan-algorithm auto (docs/design.md §4.5 "auto"; fitted in
 * docs/simulation.md). For one exclusive scan of n = heads * per doubles (s = 8 n bytes) over
 * P ranks, each algorithm's critical path is
 *
 *   T_a(P, s) = rounds_a(P) alpha_a + bytes_a(P, s) beta_a + combined_a(P, n) gamma
 *
 * with rounds = messages on the critical path, bytes = bytes along it, combined = doubles
 * combined (§4.1 operator) along it; gamma is the combine time per double, the others are
 * least-squares fits to the simulated times (tools/smpi/collect.py). Domain: P >= 1,
 * heads >= 1, per >= 3, pieces >= 1 (< 1: the default 8). Pure and deterministic: every rank
 * computes the same choice from the same (P, heads, per, pieces). */
#include <math.h>
#include "linattn/dist.h"

/* Fitted coefficients [alpha s/message, beta s/byte] per algorithm (docs/simulation.md,
 * "The fitted model"); gamma s/double. */
static const double coef[][2] = {
    [LA_SCAN_EXSCAN] = {7.154e-07, 1.629e-10},
    [LA_SCAN_DOUBLING] = {1.404e-05, 1.41e-10},
    [LA_SCAN_CHAIN] = {6.864e-06, 6.879e-11},
    [LA_SCAN_ALLGATHER] = {1.387e-05, 1.781e-10},
    [LA_SCAN_PIPELINED] = {2.402e-06, 8.759e-11},
};
static const double gamma_combine = 1.733e-10;

/* allgather holds P states per rank (§4.5 table): beyond this it is not a candidate */
#define LA_SCAN_ALLGATHER_MAX_BYTES (1024.0 * 1024 * 1024)

static int ceil_log2(int P) {
  int L = 0;
  while ((1 << L) < P && L < 30) L++;
  return L;
}

double la_scan_model_seconds(la_scan_algorithm a, int P, int heads, size_t per, int pieces) {
  if (P <= 1) return 0;
  const double n = (double)heads * (double)per, s = 8 * n;
  const double K = pieces < 1 ? 8 : pieces > (int)(per - 2) ? (double)(per - 2) : pieces;
  double rounds, bytes, comb;
  switch (a) {
  case LA_SCAN_DOUBLING: /* ceil(log2 P) exchanges; rank P-1 combines twice per round */
    rounds = ceil_log2(P), bytes = rounds * s, comb = 2 * rounds * n;
    break;
  case LA_SCAN_ALLGATHER: /* a ring: P - 1 steps of s; the last rank folds P - 2 */
    rounds = P - 1, bytes = (P - 1) * s, comb = (P - 2) * n;
    break;
  case LA_SCAN_PIPELINED: /* P - 1 + K - 1 steps of a piece (s / K plus 16 heads bytes) */
    rounds = P - 1 + K - 1, bytes = rounds * (s / K + 16.0 * heads), comb = rounds * n / K;
    break;
  case LA_SCAN_CHAIN: /* P - 1 messages of s, P - 2 combines in sequence */
  case LA_SCAN_EXSCAN: /* modelled as Open MPI's linear exscan: the chain */
  default:
    rounds = P - 1, bytes = (P - 1) * s, comb = (P - 2) * n;
    break;
  }
  const int i = a >= LA_SCAN_EXSCAN && a <= LA_SCAN_PIPELINED ? (int)a : (int)LA_SCAN_CHAIN;
  return rounds * coef[i][0] + bytes * coef[i][1] + comb * gamma_combine;
}

/* The candidates are the point-to-point algorithms, in a fixed order (ties: the first).
 * exscan is not one: its algorithm is the MPI library's, which the model cannot know (SimGrid's
 * does not scale past a few hundred ranks, docs/simulation.md). */
la_scan_algorithm la_scan_auto_choice(int P, int heads, size_t per, int pieces) {
  static const la_scan_algorithm cand[] = {LA_SCAN_DOUBLING, LA_SCAN_PIPELINED, LA_SCAN_CHAIN,
                                           LA_SCAN_ALLGATHER};
  la_scan_algorithm best = LA_SCAN_DOUBLING;
  double tbest = INFINITY;
  for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
    if (cand[i] == LA_SCAN_ALLGATHER &&
        8.0 * heads * (double)per * P > LA_SCAN_ALLGATHER_MAX_BYTES)
      continue;
    const double t = la_scan_model_seconds(cand[i], P, heads, per, pieces);
    if (t < tbest) tbest = t, best = cand[i];
  }
  return best;
}
