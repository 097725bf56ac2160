/* Per-feature gates (GLA's diagonal form; docs/design.md §1.2 "Per-feature gates"): the causal
 * forward of one precision, a template included after decay_impl.h by kernels_f32.c and
 * kernels_f64.c. Head h's state decays by feature: row f of (S|z) by e^{g_t,h,f + ln gamma_h}
 * at token t. In a chunk [c0, c0+len) with the cumulative log-gates
 * G_i,f = sum_{l<=i} (g_{c0+l},f + ln gamma), rows i, j = 0..len-1 of the chunk:
 *   O'_i = (Phi_q,i o e^{G_i}) (S|z) + sum_{j<=i} ((Phi_q,i o e^{G_i}) . (Phi_k,j o e^{-G_j})) [V|1]_j
 *   (S|z) <- diag(e^{G_{len-1}}) (S|z) + sum_j (Phi_k,j o e^{G_{len-1} - G_j})^T [V|1]_j
 * (o: elementwise; pairs only within one segment). The pairs' product is taken on the factors
 * E_i,f = e^{G_i,f - G_0,f} (in (0, 1]) as (Phi_q,i o E_i) . (Phi_k,j / E_j), so a chunk is cut
 * where a feature's gates after its first row sum below -LA_GLA_SPAN nats (gla_cum): then
 * every factor stays finite and normal, whatever the gates (a single token gated by -1000
 * is a chunk of its own). The state keeps one log-scale m per head: its rows decay by their
 * own factors (<= 1) on it, so a row gated more than ~745 nats below the state's largest
 * underflows to 0 there (§1.2). Domain: finite inputs and log-gates <= 0. */

#ifdef LA_REAL_IS_F64
#define LA_GLA_SPAN 300.0
#else
#define LA_GLA_SPAN 30.0
#endif

/* The cumulative log-gates of rows [0, len) of head h from global token t0, G in w->gf
 * (len x r); returns the rows the chunk keeps (>= 1): it ends before the first row i >= 1
 * with G_0,f - G_i,f > LA_GLA_SPAN for some feature f (G_0 - G_i grows with i: every
 * log-gate and ln gamma is <= 0, so the last row tells whether any is cut). With e->gsum the
 * kept rows' lambda + g are also added to head h's r sums there, token by token
 * (the block's cumulative log-decay a of the row form, §1.2). */
static int gla_cum(la_engine e, la_work *w, int h, int64_t t0, int len) {
  const int r = e->r;
  const double lam = e->dlog[h];
  const double *g = e->gates + ((size_t)(t0 - e->gate0) * e->H + h) * r;
  const size_t ld = (size_t)e->H * r;
  double *G = w->gf;
  for (int f = 0; f < r; f++) G[f] = lam + g[f];
  for (int i = 1; i < len; i++) {
    const double *gi = g + (size_t)i * ld, *p = G + (size_t)(i - 1) * r;
    double *Gi = G + (size_t)i * r;
    for (int f = 0; f < r; f++) Gi[f] = p[f] + (lam + gi[f]);
  }
  int keep = len, over = 0;
  const double *GL = G + (size_t)(len - 1) * r;
  for (int f = 0; f < r; f++) over |= G[f] - GL[f] > LA_GLA_SPAN;
  for (int i = 1; over && i < len; i++) { /* the first row past the span */
    const double *Gi = G + (size_t)i * r;
    int o = 0;
    for (int f = 0; f < r; f++) o |= G[f] - Gi[f] > LA_GLA_SPAN;
    if (o) keep = i, over = 0;
  }
  if (e->gsum) {
    double *a = e->gsum + (size_t)h * r;
    for (int i = 0; i < keep; i++)
      for (int f = 0; f < r; f++) a[f] += lam + g[(size_t)i * ld + f];
  }
  return keep;
}

/* Whether the chunk gla_cum just summed (len of the full rows) runs on the undecayed kernels
 * with its gates folded into the rows (decay_fold_rows): it was not cut, no tape is recorded,
 * and its most gated feature falls by at most LA_DECAY_SPLIT (decay_split's bound). */
static int gla_foldable(la_engine e, const la_work *w, int len, int full) {
  if (len != full || e->tape) return 0;
  const double *GL = w->gf + (size_t)(len - 1) * e->r;
  double s = 0.0;
  for (int f = 0; f < e->r; f++) s = -GL[f] > s ? -GL[f] : s;
  return s <= LA_DECAY_SPLIT;
}

/* (S|z) <- diag(e^{G_{len-1}}) (S|z) + the keys [j0, len) (the chunk's last segment), at the
 * new scale Mn = max(m + max_f G_{len-1,f}, max_j (a_k,j + max_f (G_{len-1,f} - G_j,f))):
 * every factor applied is <= 1. keep = 0: the state is dropped first. E = e^{G - G_0}
 * (gla_chunk); w->phik holds the unscaled keys. */
static void gla_update(la_engine e, la_work *w, int len, int j0, int keep, const double *G,
                       const double *E, double *sz, double *m) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t rsz = (size_t)r * dv1;
  const double *GL = G + (size_t)(len - 1) * r, *EL = E + (size_t)(len - 1) * r;
  double gmax = -INFINITY;
  for (int f = 0; f < r; f++) gmax = GL[f] > gmax ? GL[f] : gmax;
  const double Ms = keep && *m != -INFINITY ? *m + gmax : -INFINITY;
  double Mn = Ms, *x = w->ak2;
  for (int j = j0; j < len; j++) {
    const double *Gj = G + (size_t)j * r;
    double d = -INFINITY;
    for (int f = 0; f < r; f++) d = GL[f] - Gj[f] > d ? GL[f] - Gj[f] : d;
    x[j] = w->ak[j] + d;
    Mn = x[j] > Mn ? x[j] : Mn;
  }
  if (Ms == -INFINITY) memset(sz, 0, sizeof(double) * rsz);
  else
    for (int f = 0; f < r; f++) {
      const double fac = exp(*m + GL[f] - Mn);
      double *row = sz + (size_t)f * dv1;
      for (int c = 0; c < dv1; c++) row[c] *= fac;
    }
  LA_REAL *K = (LA_REAL *)w->kT; /* (len - j0) x r: the keys as the update weighs them */
  const LA_REAL *pk = (const LA_REAL *)w->phik;
  for (int j = j0; j < len; j++) {
    const double s = exp(w->ak[j] - Mn), *Ej = E + (size_t)j * r;
    LA_REAL *Kj = K + (size_t)(j - j0) * r;
    for (int f = 0; f < r; f++) Kj[f] = (LA_REAL)((double)pk[(size_t)j * r + f] * s * (EL[f] / Ej[f]));
  }
  LA_REAL *tmp = w->tmp;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len - j0, (LA_REAL)1, K, r,
          (const LA_REAL *)w->vp + (size_t)j0 * dv1, dv1, (LA_REAL)0, tmp, dv1);
  for (size_t i = 0; i < rsz; i++) sz[i] += (double)tmp[i];
  *m = Mn;
}

/* One chunk [c0, c0+len) of head h (len from gla_cum, G in w->gf): finalize into out, or with
 * raw the unfinalized rows and their log-scales (store_raw). */
static void gla_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0, int len,
                      int64_t hi, const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                      double *sz, double *m, int *f, LA_REAL *out, LA_REAL *raw, double *lsc) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t cr = (size_t)e->C * r;
  int reset;
  const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  if (reset || nseg > 1) *f = 1;
  features_at(e, h, c0, len, -1, hi, k, w->phik, w->ak, v, e->dv); /* checks v too */
  decay_scales(e, w, len, nseg, 0, reset, sz, m);
  decay_inputs(e, w, h, c0, len, c0 + len, hi, q, v); /* phiq, aq; dphi = keys at M_seg */
  int n0 = 0; /* rows still in the state's segment */
  while (n0 < len && w->segi[n0] == 0) n0++;
  double *G = w->gf, *E = w->gf + cr; /* E = e^{G - G_0}, in (0, 1], >= e^{-LA_GLA_SPAN} */
  for (int c = 0; c < r; c++) E[c] = 1.0;
  for (int i = 1; i < len; i++) {
    const double *Gi = G + (size_t)i * r;
    double *Ei = E + (size_t)i * r;
    for (int c = 0; c < r; c++) Ei[c] = Gi[c] - G[c];
  }
  exp_nonpos(e, (size_t)(len - 1) * r, E + r, E + r);
  const LA_REAL *pq = (const LA_REAL *)w->phiq, *dk = (const LA_REAL *)w->dphi;
  LA_REAL *Xi = w->phif, *Xs = Xi + cr, *Yi = (LA_REAL *)w->dphi + cr, *o = w->o;
  for (size_t i = 0; i < (size_t)len * r; i++) {
    Xi[i] = (LA_REAL)((double)pq[i] * E[i]);
    Yi[i] = (LA_REAL)((double)dk[i] / E[i]);
  }
  memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
  if (*m != -INFINITY && n0 > 0) { /* the prefix: rows of the state's segment read e^{G_i} S */
    double *E0 = w->gf + 2 * cr; /* e^{G_0}: may underflow (the prefix is then gated out) */
    exp_nonpos(e, (size_t)r, G, E0);
    for (int i = 0; i < n0; i++)
      for (int c = 0; c < r; c++) {
        const size_t ic = (size_t)i * r + c;
        Xs[ic] = (LA_REAL)((double)pq[ic] * (E[ic] * E0[c]));
      }
#ifdef LA_REAL_IS_F64
    const LA_REAL *S = sz;
#else
    LA_REAL *S = w->sf;
    for (size_t i = 0; i < (size_t)r * dv1; i++) S[i] = (LA_REAL)sz[i];
#endif
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, dv1, r, (LA_REAL)1, Xs, r, S, dv1,
            (LA_REAL)0, o, dv1);
  }
  LA_REAL *A = w->A;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, Xi, r, Yi, r,
          (LA_REAL)0, A, len);
  for (int i = 0; i < len; i++)
    for (int j = 0; j < len; j++)
      if (j > i || w->segi[j] != w->segi[i]) A[(size_t)i * len + j] = (LA_REAL)0;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len,
          (const LA_REAL *)w->vp, dv1, (LA_REAL)1, o, dv1);
  for (int i = 0; i < len; i++) w->aq[i] += w->mseg[w->segi[i]];
  if (raw) store_raw(e, w, h, c0, len, raw, lsc);
  else finalize_rows(e, w, h, token0, c0, len, out);
  int b = 0; /* the state continues with the chunk's last segment */
  while (w->segi[b] != nseg - 1) b++;
  gla_update(e, w, len, b, nseg == 1, G, E, sz, m);
}

/* Causal rows [lo, hi) of heads [h0, h1) from their prefixes (sz[(h - h0) r (dv+1)],
 * m[h - h0], f[h - h0]), which advance; in chunks of at most C rows cut further where the
 * gates are strong (gla_cum), the heads of the group in rounds of one chunk each, so that
 * they read the token rows together while no chunk is cut (§4.2 "Head groups"); every head's
 * chunks and so its bits are those of walking it alone. */
static void gla_causal(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                       int64_t hi, const void *q, const void *k, const void *v, double *sz,
                       double *m, int *f, void *out, void *raw, double *lsc) {
  enum { NH = 64 }; /* heads per round (kernels do not allocate) */
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  int64_t c0[NH];
  for (int g0 = h0; g0 < h1; g0 += NH) {
    const int g1 = h1 - g0 < NH ? h1 : g0 + NH;
    for (int h = g0; h < g1; h++) c0[h - g0] = lo;
    for (int more = 1; more;) {
      more = 0;
      for (int h = g0; h < g1; h++) {
        int64_t *p = &c0[h - g0];
        if (*p >= hi) continue;
        const int full = (int)(hi - *p < e->C ? hi - *p : e->C);
        const int len = gla_cum(e, w, h, token0 + *p, full);
        double *szh = sz + (size_t)(h - h0) * rsz;
        if (gla_foldable(e, w, len, full)) {
          const double *base = NULL; /* the undecayed products, the gates folded into rows */
          causal_chunk(e, w, h, token0, *p, len, hi, q, k, v, szh, m + (h - h0), f + (h - h0),
                       out, raw, lsc, &base, w->sf, 0, w->gf, e->r);
        } else
          gla_chunk(e, w, h, token0, *p, len, hi, q, k, v, szh, m + (h - h0), f + (h - h0),
                    out, raw, lsc);
        *p += len;
        more |= *p < hi;
      }
    }
  }
}

/* The summaries of the keys of rows [lo, hi) of heads [h0, h1) (§4.1, §1.2 "Per-feature
 * gates"): (sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0]) advance over them as gla_causal's
 * states do (the same chunks, factors and update), without the queries. A segment start drops
 * the state and sets the flag. */
static void gla_accum(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                      int64_t hi, const void *k, const void *v, double *sz_, double *m_,
                      int *f_) {
  const int r = e->r;
  const size_t rsz = (size_t)r * (e->dv + 1), cr = (size_t)e->C * r;
  for (int h = h0; h < h1; h++) {
    double *sz = sz_ + (size_t)(h - h0) * rsz, *m = m_ + (h - h0);
    int *f = f_ + (h - h0);
    for (int64_t c0 = lo; c0 < hi;) {
      const int full = (int)(hi - c0 < e->C ? hi - c0 : e->C);
      const int len = gla_cum(e, w, h, token0 + c0, full);
      if (gla_foldable(e, w, len, full)) {
        accum_chunk(e, w, h, token0, c0, len, hi, k, v, sz, m, f, w->gf, r); /* folded */
        c0 += len;
        continue;
      }
      int reset;
      const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
      if (reset || nseg > 1) *f = 1;
      if (reset) {
        memset(sz, 0, sizeof(double) * rsz);
        *m = -INFINITY;
      }
      features_at(e, h, c0, len, -1, hi, (const LA_REAL *)k, w->phik, w->ak, v, e->dv);
      chunk_values(e, h, c0, len, (const LA_REAL *)v, w->vp);
      double *G = w->gf, *E = w->gf + cr;
      for (int c = 0; c < r; c++) E[c] = 1.0;
      for (size_t i = (size_t)r; i < (size_t)len * r; i++) E[i] = G[i] - G[i % r];
      exp_nonpos(e, (size_t)(len - 1) * r, E + r, E + r);
      int b = 0; /* the state continues with the chunk's last segment */
      while (w->segi[b] != nseg - 1) b++;
      gla_update(e, w, len, b, nseg == 1, G, E, sz, m);
      c0 += len;
    }
  }
}

/* Raw rows [lo, hi) of head h plus the prefix (psz, pm) that arrived meanwhile (§4.5), with
 * per-feature gates: row i reads the prefix through phi(q_i) o e^{G_i}, G_i,f the gates of the
 * block's rows 0..i of feature f (plus i+1 ln gamma_h), taken as e^{Gmax_i} (phi(q_i) o
 * e^{G_i - Gmax_i}), Gmax_i = max_f G_i,f, so that the prefix's log-scale moves by Gmax_i and
 * every factor is <= 1 (correct_rows' contract otherwise). */
static void gla_correct(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                        const void *q_, const double *psz, double pm, const void *raw_,
                        const double *lsc, void *out_) {
  const LA_REAL *q = q_, *raw = raw_;
  LA_REAL *out = out_;
  const int r = e->r, dv1 = e->dv + 1, C = e->C, H = e->H;
  const int64_t cut = la_engine_segment_at_or_after(e, token0 > 0 ? token0 : 1);
  const double lam = e->dlog[h];
  const size_t ld = (size_t)H * r;
  const double *gt = e->gates + ((size_t)(token0 - e->gate0) * H + h) * r;
  double *gs = w->gf, *X = w->gf + r, *gm = w->ak2;
  for (int c = 0; c < r; c++) gs[c] = 0.0;
  for (int64_t t = 0; t < lo; t++)
    for (int c = 0; c < r; c++) gs[c] += lam + gt[(size_t)t * ld + c];
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *o = w->o, *xq = w->phif;
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)psz[i];
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    const int len = (int)(hi - c0 < C ? hi - c0 : C);
    chunk_features(e, h, c0, len, q, w->phiq, w->aq);
    for (int i = 0; i < len; i++) {
      const double *gi = gt + (size_t)(c0 + i) * ld;
      double mx = -INFINITY, *Xi = X + (size_t)i * r;
      for (int c = 0; c < r; c++) {
        gs[c] += lam + gi[c];
        mx = gs[c] > mx ? gs[c] : mx;
      }
      for (int c = 0; c < r; c++) Xi[c] = gs[c] - mx;
      gm[i] = mx;
    }
    if (pm != -INFINITY) {
      exp_nonpos(e, (size_t)len * r, X, X);
      const LA_REAL *pq = (const LA_REAL *)w->phiq;
      for (size_t i = 0; i < (size_t)len * r; i++) xq[i] = (LA_REAL)((double)pq[i] * X[i]);
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, xq, r, sf,
              dv1, (LA_REAL)0, o, dv1);
    }
    for (int i = 0; i < len; i++) {
      const size_t ri = (size_t)(c0 + i) * H + h;
      const LA_REAL *rw = raw + ri * dv1;
      LA_REAL *oi = o + (size_t)i * dv1;
      const double Mi = lsc[ri] - w->aq[i];
      if (pm == -INFINITY || token0 + c0 + i >= cut) { /* cut: a segment restarted */
        for (int j = 0; j < dv1; j++) oi[j] = rw[j];
        w->aq[i] = lsc[ri];
        continue;
      }
      const double pmi = pm + gm[i];
      const double M = Mi > pmi ? Mi : pmi;
      const LA_REAL fr = (LA_REAL)exp(Mi - M), fp = (LA_REAL)exp(pmi - M);
      for (int j = 0; j < dv1; j++) oi[j] = fr * rw[j] + fp * oi[j];
      w->aq[i] += M;
    }
    finalize_rows(e, w, h, token0, c0, len, out);
  }
}
