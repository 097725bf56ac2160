/* The quadratic form of a feature map and its kernel error against exp(s q.k)
 * (docs/design.md §8.2): the reassociation reference of `linattn eval`, and kernel_rel_err.
 * For each head, the key features phi(k_j) = phi_s(k_j) e^{a_j} are evaluated once and
 * scaled by e^{a_j - amax}; then tiles of TQ query rows go through two dgemm:
 *   G = phi_s(Q_tile) (phi(K) e^{-amax})^T   (khat_ij = G_ij e^{aq_i + amax})
 *   S = s Q_tile K^T                          (E_ij = e^{S_ij})
 * The quadratic form per mode is (M o G) V / (M o G) 1 (the factor e^{aq_i + amax} cancels),
 * with M the causal mask or all ones. No n x n matrix is stored. */
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

/* Query rows per tile. dgemm packs all n keys' features for every tile, so a tile of 64
 * rows spent ~10% of a run packing (dgemm_incopy, measured at n = 4096, r = 1024); tiles of up to
 * 512 rows amortize it, while each n-wide tile stays <= 2^22 doubles (32 MiB; three per
 * thread) and every thread gets a tile. A multiple of 64, at least 64. */
static int tile_rows(int64_t n, int64_t nq, int T) {
  int64_t t = ((int64_t)1 << 22) / n, per = (nq + T - 1) / T;
  per = (per + 63) / 64 * 64;
  if (t > per) t = per;
  if (t > 512) t = 512;
  t = t / 64 * 64;
  return t < 64 ? 64 : (int)t;
}

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

/* One tile's kernel sums: rows i < nr of G (khat_ij = G_ij e^{lq_i}) and S (E_ij = e^{S_ij}),
 * n keys, shifted by the tile's own largest log value. */
static void tile_sums(int nr, int64_t n, const double *G, const double *S, const double *lq,
                      la_kernel_sums *out) {
  double c = -INFINITY;
  for (int i = 0; i < nr; i++) {
    double gm = 0, sm = -INFINITY;
    const double *Gi = G + i * n, *Si = S + i * n;
#pragma omp simd reduction(max : gm, sm)
    for (int64_t j = 0; j < n; j++) {
      gm = Gi[j] > gm ? Gi[j] : gm;
      sm = Si[j] > sm ? Si[j] : sm;
    }
    if (gm > 0 && log(gm) + lq[i] > c) c = log(gm) + lq[i];
    if (sm > c) c = sm;
  }
  la_kernel_sums t = {c, 0, 0};
  for (int i = 0; i < nr; i++) {
    const double fq = exp(lq[i] - c);
    double e2 = 0, r2 = 0;
#pragma omp simd reduction(+ : e2, r2)
    for (int64_t j = 0; j < n; j++) {
      const double ex = la_vexp(S[i * n + j] - c), d = G[i * n + j] * fq - ex;
      e2 += d * d;
      r2 += ex * ex;
    }
    t.err2 += e2;
    t.ref2 += r2;
  }
  la_kernel_sums_merge(out, &t);
}

la_status la_quadform_rows(const la_featmap fm, double scale, int64_t n, int heads, int dk,
                           int dv, const double *k, const double *v, int64_t nq,
                           const int64_t *rows, const double *q, int nmodes,
                           const la_mode *modes, double *quad, double *lden,
                           la_kernel_sums *ks, int threads) {
  LA_CHECK(fm && n > 0 && heads > 0 && dk > 0 && dv > 0 && nq >= 0 && k && v &&
               (nq == 0 || (rows && q)) && nmodes >= 0 && nmodes <= 2 &&
               (nmodes == 0 || modes) && scale > 0,
           LA_ERR_ARG, "la_quadform_rows: invalid arguments");
  LA_CHECK(la_featmap_heads(fm) == heads && la_featmap_input_dim(fm) == dk, LA_ERR_SHAPE,
           "la_quadform_rows: the map is for %d heads of width %d, not %d of %d",
           la_featmap_heads(fm), la_featmap_input_dim(fm), heads, dk);
  for (int64_t i = 0; i < nq; i++)
    LA_CHECK(rows[i] >= 0 && rows[i] < n && (i == 0 || rows[i] > rows[i - 1]), LA_ERR_ARG,
             "la_quadform_rows: rows must be ascending positions in [0, %lld)", (long long)n);
  if (nq == 0) return LA_OK;
  const int r = la_featmap_width(fm);
#ifdef _OPENMP
  const int T = threads > 0 ? threads : omp_get_max_threads();
#else
  const int T = 1;
  (void)threads;
#endif
  const int TQ = tile_rows(n, nq, T);
  const int64_t ldx = (int64_t)heads * dk, ntiles = (nq + TQ - 1) / TQ;
  double *pk = la_malloc(sizeof(double) * (size_t)n * r);
  double *ak = la_malloc(sizeof(double) * (size_t)n);
  double *scratch = la_malloc(sizeof(double) * (size_t)T * (3 * TQ * (size_t)n + TQ * (size_t)r + 2 * TQ));
  la_kernel_sums *tks = la_malloc(sizeof(la_kernel_sums) * (size_t)T);
  la_status st = pk && ak && scratch && tks ? LA_OK : LA_ERR_NOMEM;
  if (st != LA_OK) {
    free(pk), free(ak), free(scratch), free(tks);
    return la_error(st, "la_quadform_rows: out of memory for the key features (%lld x %d) and "
                        "%d tiles of %d x %lld", (long long)n, r, T, (int)TQ, (long long)n);
  }
  la_blas_single_thread();
  for (int h = 0; h < heads && st == LA_OK; h++) {
    st = la_featmap_eval(fm, LA_F64, h, n, k + (size_t)h * dk, ldx, pk, ak);
    if (st != LA_OK) break;
    double amax = -INFINITY;
    for (int64_t j = 0; j < n; j++) amax = ak[j] > amax ? ak[j] : amax;
    for (int64_t j = 0; j < n; j++) {
      const double w = exp(ak[j] - amax);
      for (int c = 0; c < r; c++) pk[j * r + c] *= w;
    }
    for (int t = 0; t < T; t++) la_kernel_sums_init(&tks[t]);
    int bad = 0;
#pragma omp parallel for num_threads(T) schedule(static) reduction(| : bad)
    for (int64_t tile = 0; tile < ntiles; tile++) {
#ifdef _OPENMP
      const int me = omp_get_thread_num();
#else
      const int me = 0;
#endif
      double *G = scratch + (size_t)me * (3 * TQ * (size_t)n + TQ * (size_t)r + 2 * TQ);
      double *S = G + TQ * (size_t)n, *W = S + TQ * (size_t)n, *pq = W + TQ * (size_t)n;
      double *aq = pq + TQ * (size_t)r, *lq = aq + TQ;
      const int64_t i0 = tile * TQ;
      const int nr = (int)(nq - i0 < TQ ? nq - i0 : TQ);
      const double *qt = q + (size_t)i0 * ldx + (size_t)h * dk;
      if (la_featmap_eval(fm, LA_F64, h, nr, qt, ldx, pq, aq) != LA_OK) {
        bad = 1;
        continue;
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, (int)n, r, 1.0, pq, r, pk, r,
                  0.0, G, (int)n);
      for (int i = 0; i < nr; i++) lq[i] = aq[i] + amax;
      if (ks) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, (int)n, dk, scale, qt,
                    (int)ldx, k + (size_t)h * dk, (int)ldx, 0.0, S, (int)n);
        tile_sums(nr, n, G, S, lq, &tks[me]);
      }
      for (int mi = 0; mi < nmodes && (quad || lden); mi++) {
        const int causal = modes[mi] == LA_CAUSAL;
        /* causal: the tile reads keys j <= its last row; below that, row i's keys j <= i */
        const int64_t ne = causal ? rows[i0 + nr - 1] + 1 : n;
        const double *Wm = G;
        if (causal) {
          for (int i = 0; i < nr; i++) {
            const int64_t last = rows[i0 + i];
            memcpy(W + (size_t)i * n, G + (size_t)i * n, sizeof(double) * (size_t)(last + 1));
            memset(W + (size_t)i * n + last + 1, 0, sizeof(double) * (size_t)(ne - last - 1));
          }
          Wm = W;
        }
        double *qo = quad ? quad + ((size_t)mi * nq + i0) * heads * dv + (size_t)h * dv : NULL;
        if (qo)
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dv, (int)ne, 1.0, Wm,
                      (int)n, v + (size_t)h * dv, heads * dv, 0.0, qo, heads * dv);
        for (int i = 0; i < nr; i++) {
          double den = 0;
          for (int64_t j = 0; j < ne; j++) den += Wm[(size_t)i * n + j];
          if (qo)
            for (int c = 0; c < dv; c++) qo[(size_t)i * heads * dv + c] /= den;
          if (lden)
            lden[((size_t)mi * nq + i0 + i) * heads + h] =
                den > 0 ? log(den) + lq[i] : (den == 0 ? -INFINITY : NAN);
        }
      }
    }
    if (bad) st = la_error(LA_ERR_NOMEM, "la_quadform_rows: the map failed on a query tile");
    for (int t = 0; t < T && ks; t++) la_kernel_sums_merge(ks, &tks[t]);
  }
  free(pk), free(ak), free(scratch), free(tks);
  return st;
}
