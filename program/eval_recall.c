/* `linattn eval --recall`: a training-free associative-recall check (docs/design.md §8.5).
 * A sequence of p tokens stores p key-value pairs (k_j, v_j ~ N(0, I)); token j's query is a
 * noisy copy of its own key, q_j = k_j + 0.5 e_j (e_j ~ N(0, I)). Bidirectional attention
 * with the usual scale 1/sqrt(dk) gives out_j; the query is answered correctly when the
 * stored value nearest to out_j (Euclidean) is v_j. Softmax with s |k|^2 ~ sqrt(dk) against
 * cross terms ~ N(0, 1) recalls almost every pair; a map of width r stores at most r
 * independent directions in its r x dv summary, which is where linear attention is known to
 * trail softmax (the Zoology studies' MQAR). Items (map, width, pairs, trial) are dealt to
 * the ranks in turn; each runs on one rank with la_forward and la_softmax_attention. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "eval.h"
#include "la_alloc.h"
#include "linattn/baseline.h"

#define RECALL_NOISE 0.5

/* Correct answers among the p outputs: argmin_j |out_i - v_j| == i. */
static int64_t count_correct(int64_t p, int dv, const double *out, const double *v) {
  int64_t ok = 0;
  for (int64_t i = 0; i < p; i++) {
    int64_t best = -1;
    double bd = INFINITY;
    for (int64_t j = 0; j < p; j++) {
      double dd = 0;
      for (int c = 0; c < dv; c++) {
        const double t = out[i * dv + c] - v[j * dv + c];
        dd += t * t;
      }
      if (dd < bd) bd = dd, best = j;
    }
    ok += best == i;
  }
  return ok;
}

/* One trial of p pairs (data from trial t) for the map (or softmax when map < 0). */
static la_status recall_item(const la_cli *o, int map, int m_feat, int64_t p, int t,
                             int64_t *correct, int *width) {
  const int dk = o->dk, dv = o->dv;
  double *q = la_malloc(sizeof(double) * (size_t)(p * dk)), *k = la_malloc(sizeof(double) * (size_t)(p * dk));
  double *v = la_malloc(sizeof(double) * (size_t)(p * dv)), *out = la_malloc(sizeof(double) * (size_t)(p * dv));
  la_status st = q && k && v && out ? LA_OK : la_error(LA_ERR_NOMEM, "recall: out of memory for %lld pairs", (long long)p);
  const uint64_t seed = 0x7EC411ull + (uint64_t)t; /* the data of trial t, the same for every map */
  if (st == LA_OK) {
    la_synth_rows(seed, 1, 0, p, 1, dk, 1.0, LA_F64, k);
    la_synth_rows(seed, 2, 0, p, 1, dv, 1.0, LA_F64, v);
    la_synth_rows(seed, 0, 0, p, 1, dk, RECALL_NOISE, LA_F64, q);
    for (int64_t i = 0; i < p * dk; i++) q[i] += k[i];
  }
  const double s = 1 / sqrt((double)dk);
  if (st == LA_OK && map < 0) {
    st = la_softmax_attention(LA_F64, p, 1, dk, dv, s, LA_BIDIRECTIONAL, q, k, v, out, o->cfg.threads);
  } else if (st == LA_OK) {
    la_config cfg;
    la_config_default(&cfg);
    cfg.mode = LA_BIDIRECTIONAL, cfg.map = (la_map_kind)map, cfg.features = m_feat;
    cfg.seed = (uint64_t)t, cfg.scale = s, cfg.threads = o->cfg.threads;
    cfg.den_policy = LA_DEN_ADD, cfg.den_eps = 0;
    la_featmap fm = NULL;
    la_engine eng = NULL;
    la_den_stats ds = {0};
    st = la_featmap_create(&cfg, 1, dk, &fm);
    if (st == LA_OK) *width = la_featmap_width(fm);
    if (st == LA_OK) st = la_engine_create(&cfg, fm, LA_F64, dv, &eng);
    if (st == LA_OK) st = la_den_stats_init(&ds);
    if (st == LA_OK) st = la_forward(eng, p, q, k, v, out, &ds);
    la_den_stats_free(&ds);
    la_engine_destroy(&eng);
    la_featmap_destroy(&fm);
  }
  if (st == LA_OK) *correct = count_correct(p, dv, out, v);
  free(q), free(k), free(v), free(out);
  return st;
}

la_status la_eval_recall(la_dist d, const la_cli *o, la_csv *csv) {
  const int rank = la_dist_rank(d), P = la_dist_size(d), S = o->seeds;
  const int np = o->recall_pairs.n;
  /* columns: softmax, then every (map, width) */
  int ncol = 1;
  for (int mp = 0; mp < o->maps.n; mp++)
    ncol += la_map_uses_features((la_map_kind)o->maps.i[mp]) ? o->features_list.n : 1;
  const int64_t nitems = (int64_t)ncol * np * S;
  int64_t *hits = la_calloc((size_t)(ncol * np) + 1, sizeof(int64_t));
  int *widths = la_calloc((size_t)ncol + 1, sizeof(int));
  la_status st = hits && widths ? LA_OK : la_error(LA_ERR_NOMEM, "recall: out of memory");
  for (int64_t it = rank; it < nitems && st == LA_OK; it += P) {
    const int col = (int)(it / ((int64_t)np * S)), pi = (int)(it / S % np), t = (int)(it % S);
    int map = -1, m_feat = 0, c = 1;
    for (int mp = 0; mp < o->maps.n && col > 0 && map < 0; mp++) {
      const la_map_kind mk = (la_map_kind)o->maps.i[mp];
      const int nw = la_map_uses_features(mk) ? o->features_list.n : 1;
      if (col < c + nw) map = (int)mk, m_feat = la_map_uses_features(mk) ? (int)o->features_list.i[col - c] : 0;
      c += nw;
    }
    int64_t ok = 0;
    st = recall_item(o, map, m_feat, o->recall_pairs.i[pi], t, &ok, &widths[col]);
    hits[col * np + pi] += ok;
  }
  st = la_dist_agree(d, st);
  if (st == LA_OK) {
    MPI_Allreduce(MPI_IN_PLACE, hits, ncol * np, MPI_INT64_T, MPI_SUM, la_dist_comm(d));
    MPI_Allreduce(MPI_IN_PLACE, widths, ncol, MPI_INT, MPI_MAX, la_dist_comm(d));
  }
  if (st == LA_OK && rank == 0) {
    int col = 1;
    for (int mp = 0; mp < o->maps.n; mp++) {
      const la_map_kind mk = (la_map_kind)o->maps.i[mp];
      const int nw = la_map_uses_features(mk) ? o->features_list.n : 1;
      for (int w = 0; w < nw; w++, col++)
        for (int pi = 0; pi < np; pi++) {
          const double q = (double)o->recall_pairs.i[pi] * S;
          fprintf(csv->f, "%s,%d,%d,%lld,%d,%.0f,%.6g,%.6g\n", la_map_name(mk),
                  la_map_uses_features(mk) ? (int)o->features_list.i[w] : widths[col], widths[col],
                  (long long)o->recall_pairs.i[pi], S, q, hits[col * np + pi] / q, hits[pi] / q);
        }
    }
  }
  free(hits), free(widths);
  return st;
}
