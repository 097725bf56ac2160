/* The cost model behind --scan-algorithm auto (docs/design.md §4.5 "auto"; fitted in
 * docs/simulation.md). For one exclusive scan of n = heads * per doubles (s = 8 n bytes) over
 * P ranks, each algorithm's critical path is rounds_a(P) messages of m_a bytes each, and
 *
 *   T_a(P, s) = rounds_a(P) (alpha_a lat_f(m_a) + m_a beta_a / bw_f(m_a)) + combined_a(P, n) gamma
 *
 * with m_a = s (doubling, chain, allgather) or s / K + 24 heads (pipelined), combined = doubles
 * combined (§4.1 operator) along the path; gamma is the combine time per double. lat_f and bw_f
 * are SMPI's piecewise latency and bandwidth factors by message size (the simulation's network
 * model), so alpha_a and beta_a are the route's latency and inverse bandwidth before them:
 * least-squares fits to the simulated times (tools/smpi/collect.py, same formula). Domain:
 * P >= 1, heads >= 1, per >= 4, pieces >= 1 (< 1: the default 8). Pure and deterministic: every
 * rank computes the same choice from the same (P, heads, per, pieces). */
#include <math.h>
#include "linattn/dist.h"
#include "scan_element.h"

/* Fitted coefficients [alpha s/message, beta s/byte] per algorithm, before SMPI's factors
 * (docs/simulation.md, "The fitted model"); gamma s/double. */
static const double coef[][2] = {
    [LA_SCAN_EXSCAN] = {6.144e-08, 1.532e-10},
    [LA_SCAN_DOUBLING] = {1.206e-06, 1.327e-10},
    [LA_SCAN_CHAIN] = {5.895e-07, 6.471e-11},
    [LA_SCAN_ALLGATHER] = {1.393e-06, 1.714e-10},
    [LA_SCAN_PIPELINED] = {6.052e-07, 6.874e-11},
};
static const double gamma_combine = 1.733e-10;

/* SMPI's factors (SimGrid 3.32 defaults of smpi/lat-factor and smpi/bw-factor, which
 * tools/smpi/simulate.sh keeps; docs/simulation.md "The fitted model"): a message of m > 0
 * bytes takes the row of the largest threshold below m (m equal to a threshold: the row
 * before), m <= 0 takes 1. */
static const struct {
  double above, lat, bw;
} smpi_factor[] = {
    {0, 2.01467, 0.812084},    {257, 1.95341, 0.338112},   {732, 1.9503, 0.341987},
    {1426, 1.61075, 0.608902}, {3484, 1.88101, 0.77493},   {5776, 2.18796, 1.08739},
    {9376, 2.59299, 0.58729},  {15424, 3.48845, 0.697866}, {65472, 11.6436, 0.940694},
};

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
  const double K = pieces < 1 ? 8 : pieces > (int)(per - LA_SCAN_EL_TAIL) ? (double)(per - LA_SCAN_EL_TAIL) : pieces;
  double rounds, msg, comb; /* messages on the path, bytes per message, doubles combined */
  switch (a) {
  case LA_SCAN_DOUBLING: /* ceil(log2 P) exchanges; rank P-1 combines twice per round */
    rounds = ceil_log2(P), msg = s, comb = 2 * rounds * n;
    break;
  case LA_SCAN_ALLGATHER: /* a ring: P - 1 steps of s; the last rank folds P - 2 */
    rounds = P - 1, msg = s, comb = (P - 2) * n;
    break;
  case LA_SCAN_PIPELINED: /* P - 1 + K - 1 steps of a piece (s / K plus 8 LA_SCAN_EL_TAIL heads bytes) */
    rounds = P - 1 + K - 1, msg = s / K + 8.0 * LA_SCAN_EL_TAIL * heads, comb = rounds * n / K;
    break;
  case LA_SCAN_CHAIN: /* P - 1 messages of s, P - 2 combines in sequence */
  case LA_SCAN_EXSCAN: /* modelled as Open MPI's linear exscan: the chain */
  default:
    rounds = P - 1, msg = s, comb = (P - 2) * n;
    break;
  }
  double lat_f = 1, bw_f = 1;
  for (size_t j = 0; j < sizeof smpi_factor / sizeof *smpi_factor; j++)
    if (msg > smpi_factor[j].above) lat_f = smpi_factor[j].lat, bw_f = smpi_factor[j].bw;
  /* an algorithm without fitted coefficients is costed as the chain */
  const int i = a >= LA_SCAN_EXSCAN && a <= LA_SCAN_PIPELINED ? (int)a : (int)LA_SCAN_CHAIN;
  return rounds * (coef[i][0] * lat_f + msg * coef[i][1] / bw_f) + comb * gamma_combine;
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
