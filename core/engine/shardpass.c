/* The kernel pass of `linattn eval` over one shard of keys (docs/design.md §8.2, §8.7): for
 * nq query rows (every rank holds them) against the keys j0 .. j0+nk-1 this rank owns, the
 * partial sums that combine across ranks into
 *   - softmax on those rows: running max, sum e^{S - max}, sum e^{S - max} v (S = s q.k);
 *   - the map's quadratic form: sum khat, sum khat v, at the key stabilizer c_h (§2.2);
 *   - kernel_rel_err's sums (no mask);
 *   - phase 2, given the combined normalizers: sum_j |p_ij - w_ij| (weights_tv).
 * Keys go in blocks of KB, query rows in tiles of TQ through two dgemm (G = phi(Q) phi(K)^T,
 * S = s Q K^T): memory O(nq (dv + r) + threads TQ KB), never O(n). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "la_alloc.h"
#include "la_blas.h"
#include "linattn/study.h"
#include "vexp.h"

#define TQ 64   /* query rows per tile */
#define KB 2048 /* keys per block: three TQ x KB tiles per thread = 3 MiB */

void la_kernel_sums_init(la_kernel_sums *a) {
  a->shift = -INFINITY;
  a->err2 = a->ref2 = 0;
}

void la_kernel_sums_merge(la_kernel_sums *a, const la_kernel_sums *b) {
  if (b->shift == -INFINITY) return;
  if (a->shift == -INFINITY) {
    *a = *b;
    return;
  }
  const double c = a->shift > b->shift ? a->shift : b->shift;
  const double fa = exp(-2 * (c - a->shift)), fb = exp(-2 * (c - b->shift));
  a->err2 = a->err2 * fa + b->err2 * fb;
  a->ref2 = a->ref2 * fa + b->ref2 * fb;
  a->shift = c;
}

la_status la_shard_sums_create(int64_t nq, int heads, int dv, int nmodes, la_shard_sums *ss) {
  memset(ss, 0, sizeof *ss);
  LA_CHECK(nq >= 0 && heads > 0 && dv > 0 && nmodes >= 1 && nmodes <= 2, LA_ERR_ARG,
           "la_shard_sums_create: invalid arguments");
  ss->nq = nq, ss->heads = heads, ss->dv = dv, ss->nmodes = nmodes;
  const size_t rh = (size_t)nmodes * (size_t)(nq > 0 ? nq : 1) * heads;
  ss->sm_max = la_malloc(sizeof(double) * rh), ss->sm_sum = la_calloc(rh, sizeof(double));
  ss->sm_out = la_calloc(rh * dv, sizeof(double));
  ss->map_den = la_calloc(rh, sizeof(double)), ss->map_out = la_calloc(rh * dv, sizeof(double));
  ss->tv = la_calloc(rh, sizeof(double));
  ss->aq = la_calloc((size_t)(nq > 0 ? nq : 1) * heads, sizeof(double));
  ss->c = la_malloc(sizeof(double) * heads);
  if (!ss->sm_max || !ss->sm_sum || !ss->sm_out || !ss->map_den || !ss->map_out || !ss->tv ||
      !ss->aq || !ss->c) {
    la_shard_sums_free(ss);
    return la_error(LA_ERR_NOMEM, "eval: out of memory for the sums of %lld query rows",
                    (long long)nq);
  }
  for (size_t i = 0; i < rh; i++) ss->sm_max[i] = -INFINITY;
  for (int h = 0; h < heads; h++) ss->c[h] = -INFINITY;
  la_kernel_sums_init(&ss->ks);
  return LA_OK;
}

void la_shard_sums_free(la_shard_sums *ss) {
  free(ss->sm_max), free(ss->sm_sum), free(ss->sm_out), free(ss->map_den), free(ss->map_out);
  free(ss->tv), free(ss->aq), free(ss->c);
  memset(ss, 0, sizeof *ss);
}

/* One tile's kernel sums: khat_ij = G_ij e^{lq_i}, E_ij = e^{S_ij}. */
static void tile_sums(int nr, int nb, const double *G, const double *S, const double *lq,
                      la_kernel_sums *out) {
  double c = -INFINITY;
  for (int i = 0; i < nr; i++) {
    double gm = 0, sm = -INFINITY;
    for (int j = 0; j < nb; j++) {
      gm = G[i * KB + j] > gm ? G[i * KB + j] : gm;
      sm = S[i * KB + j] > sm ? S[i * KB + j] : sm;
    }
    if (gm > 0 && log(gm) + lq[i] > c) c = log(gm) + lq[i];
    if (sm > c) c = sm;
  }
  la_kernel_sums t = {c, 0, 0};
  for (int i = 0; i < nr; i++) {
    const double fq = exp(lq[i] - c);
    double e2 = 0, r2 = 0;
#pragma omp simd reduction(+ : e2, r2)
    for (int j = 0; j < nb; j++) {
      const double ex = la_vexp(S[i * KB + j] - c), d = G[i * KB + j] * fq - ex;
      e2 += d * d, r2 += ex * ex;
    }
    t.err2 += e2, t.ref2 += r2;
  }
  la_kernel_sums_merge(out, &t);
}

la_status la_shard_pass(const la_featmap fm, double scale, int phase, int64_t j0, int64_t nk,
                        const double *k, const double *v, const int64_t *rows, const double *q,
                        const la_mode *modes, la_shard_sums *ss, int threads) {
  const int64_t nq = ss->nq;
  const int heads = ss->heads, dv = ss->dv, nm = ss->nmodes;
  LA_CHECK(fm && scale > 0 && (phase == 1 || phase == 2) && j0 >= 0 && nk >= 0 &&
               (nk == 0 || (k && v)) && (nq == 0 || (rows && q)) && modes,
           LA_ERR_ARG, "la_shard_pass: invalid arguments");
  LA_CHECK(la_featmap_heads(fm) == heads, LA_ERR_SHAPE, "la_shard_pass: the map is for %d heads, not %d",
           la_featmap_heads(fm), heads);
  if (nq == 0) return LA_OK;
  const int r = la_featmap_width(fm), dk = la_featmap_input_dim(fm);
#ifdef _OPENMP
  const int T = threads > 0 ? threads : omp_get_max_threads();
#else
  const int T = 1;
  (void)threads;
#endif
  const int64_t ldx = (int64_t)heads * dk, ldv = (int64_t)heads * dv, ntiles = (nq + TQ - 1) / TQ;
  const size_t per = 3 * (size_t)TQ * KB + TQ;
  double *pq = la_malloc(sizeof(double) * (size_t)nq * r), *pk = la_malloc(sizeof(double) * (size_t)KB * r);
  double *ak = la_malloc(sizeof(double) * KB), *scratch = la_malloc(sizeof(double) * per * (size_t)T);
  la_kernel_sums *tks = la_malloc(sizeof(la_kernel_sums) * (size_t)T);
  la_status st = pq && pk && ak && scratch && tks ? LA_OK : LA_ERR_NOMEM;
  if (st != LA_OK) {
    free(pq), free(pk), free(ak), free(scratch), free(tks);
    return la_error(st, "la_shard_pass: out of memory for %lld x %d query features and %d tiles of "
                    "%d x %d", (long long)nq, r, T, TQ, KB);
  }
  la_blas_single_thread();
  for (int h = 0; h < heads && st == LA_OK; h++) {
    /* the query features, once per head; a_q kept in ss->aq */
    double *aq = la_malloc(sizeof(double) * (size_t)nq);
    if (!aq) {
      st = la_error(LA_ERR_NOMEM, "la_shard_pass: out of memory");
      break;
    }
    st = la_featmap_eval(fm, LA_F64, h, nq, q + (size_t)h * dk, ldx, pq, aq);
    for (int64_t i = 0; i < nq && st == LA_OK; i++) ss->aq[i * heads + h] = aq[i];
    free(aq);
    for (int64_t b0 = 0; b0 < nk && st == LA_OK; b0 += KB) {
      const int nb = (int)(nk - b0 < KB ? nk - b0 : KB);
      const int64_t g0 = j0 + b0; /* global position of the block's first key */
      /* phase 2, causal: rows before the block read none of it (phase 1's kernel sums read
       * every key) */
      if (phase == 2 && rows[nq - 1] < g0 && modes[0] == LA_CAUSAL &&
          (nm == 1 || modes[1] == LA_CAUSAL))
        break;
      st = la_featmap_eval(fm, LA_F64, h, nb, k + (size_t)b0 * ldx + (size_t)h * dk, ldx, pk, ak);
      if (st != LA_OK) break;
      double bmax = -INFINITY;
      for (int j = 0; j < nb; j++) bmax = ak[j] > bmax ? ak[j] : bmax;
      if (phase == 1 && bmax > ss->c[h]) { /* the key stabilizer grows: rescale this head's sums */
        const double f = ss->c[h] == -INFINITY ? 0 : exp(ss->c[h] - bmax);
        for (int64_t x = 0; x < (int64_t)nm * nq; x++) {
          ss->map_den[x * heads + h] *= f;
          for (int c = 0; c < dv; c++) ss->map_out[(x * heads + h) * dv + c] *= f;
        }
        ss->c[h] = bmax;
      }
      const double ch = ss->c[h];
      for (int j = 0; j < nb; j++) {
        const double w = exp(ak[j] - ch);
        for (int c = 0; c < r; c++) pk[(size_t)j * r + c] *= w;
      }
      for (int t = 0; t < T; t++) la_kernel_sums_init(&tks[t]);
#pragma omp parallel for num_threads(T) schedule(dynamic)
      for (int64_t tile = 0; tile < ntiles; tile++) {
#ifdef _OPENMP
        const int me = omp_get_thread_num();
#else
        const int me = 0;
#endif
        double *G = scratch + (size_t)me * per, *S = G + (size_t)TQ * KB, *W = S + (size_t)TQ * KB;
        double *lq = W + (size_t)TQ * KB;
        const int64_t i0 = tile * TQ;
        const int nr = (int)(nq - i0 < TQ ? nq - i0 : TQ);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nb, r, 1.0, pq + (size_t)i0 * r, r,
                    pk, r, 0.0, G, KB);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nb, dk, scale,
                    q + (size_t)i0 * ldx + (size_t)h * dk, (int)ldx, k + (size_t)b0 * ldx + (size_t)h * dk,
                    (int)ldx, 0.0, S, KB);
        if (phase == 1) {
          for (int i = 0; i < nr; i++) lq[i] = ss->aq[(i0 + i) * heads + h] + ch;
          tile_sums(nr, nb, G, S, lq, &tks[me]);
        }
        for (int mi = 0; mi < nm; mi++) {
          const int causal = modes[mi] == LA_CAUSAL;
          for (int i = 0; i < nr; i++) {
            const int64_t row = rows[i0 + i], x = ((int64_t)mi * nq + i0 + i) * heads + h;
            const int64_t lim = causal ? row - g0 + 1 : nb; /* keys of the block this row reads */
            const int ne = (int)(lim < 0 ? 0 : (lim > nb ? nb : lim));
            const double *Si = S + (size_t)i * KB, *Gi = G + (size_t)i * KB;
            double *Wi = W + (size_t)i * KB;
            if (phase == 2) { /* sum |p - w|, p = e^{S - M} / L, w = G / D (§8.2) */
              const double M = ss->sm_max[x], iL = 1 / ss->sm_sum[x], D = ss->map_den[x];
              const double iD = D > 0 ? 1 / D : 0;
              double acc = 0;
#pragma omp simd reduction(+ : acc)
              for (int j = 0; j < ne; j++) acc += fabs(la_vexp(Si[j] - M) * iL - Gi[j] * iD);
              ss->tv[x] += acc;
              continue;
            }
            if (ne == 0) {
              memset(Wi, 0, sizeof(double) * (size_t)nb);
              continue;
            }
            /* softmax: online max over the blocks */
            double mx = -INFINITY;
            for (int j = 0; j < ne; j++) mx = Si[j] > mx ? Si[j] : mx;
            if (mx > ss->sm_max[x]) {
              const double f = ss->sm_max[x] == -INFINITY ? 0 : exp(ss->sm_max[x] - mx);
              ss->sm_sum[x] *= f;
              for (int c = 0; c < dv; c++) ss->sm_out[x * dv + c] *= f;
              ss->sm_max[x] = mx;
            }
            const double m = ss->sm_max[x];
            double l = 0, dg = 0;
#pragma omp simd reduction(+ : l)
            for (int j = 0; j < ne; j++) {
              Wi[j] = la_vexp(Si[j] - m);
              l += Wi[j];
            }
            for (int j = ne; j < nb; j++) Wi[j] = 0;
            for (int j = 0; j < ne; j++) dg += Gi[j];
            ss->sm_sum[x] += l, ss->map_den[x] += dg;
          }
          if (phase == 2) continue;
          double *so = ss->sm_out + (((size_t)mi * nq + i0) * heads + h) * dv;
          double *mo = ss->map_out + (((size_t)mi * nq + i0) * heads + h) * dv;
          const double *vb = v + (size_t)b0 * ldv + (size_t)h * dv;
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dv, nb, 1.0, W, KB, vb, (int)ldv,
                      1.0, so, (int)ldv);
          if (causal) /* the map's weights, masked as the softmax's (W is free again) */
            for (int i = 0; i < nr; i++) {
              const int64_t lim = rows[i0 + i] - g0 + 1;
              const int ne = (int)(lim < 0 ? 0 : (lim > nb ? nb : lim));
              memcpy(W + (size_t)i * KB, G + (size_t)i * KB, sizeof(double) * (size_t)ne);
              memset(W + (size_t)i * KB + ne, 0, sizeof(double) * (size_t)(nb - ne));
            }
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dv, nb, 1.0, causal ? W : G, KB,
                      vb, (int)ldv, 1.0, mo, (int)ldv);
        }
      }
      if (phase == 1)
        for (int t = 0; t < T; t++) la_kernel_sums_merge(&ss->ks, &tks[t]);
    }
  }
  free(pq), free(pk), free(ak), free(scratch), free(tks);
  return st;
}
