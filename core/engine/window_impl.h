/* Causal sliding-window kernel for one precision, a template included after chunk_impl.h
 * (docs/design.md §3.2): per chunk, exact masked products for the chunk and the window's far
 * edge, plus the two-stacks queue (wqueue.h) of chunk summaries for the rest; with g, the
 * backward replay (§4.4). Domain: finite inputs, W >= 1. */

/* ---- Causal sliding window (§3) ---- */

/* Feature rows and [V|1] of global keys [a, b), from the halo (t < token0) or own rows. */
static void range_keys(la_engine e, int h, int64_t token0, int64_t a, int64_t b,
                              const LA_REAL *k, const LA_REAL *v, int64_t hlo,
                              const LA_REAL *hk, const LA_REAL *hv, LA_REAL *phi, double *ak,
                              LA_REAL *vp) {
  const int r = e->r, dv1 = e->dv + 1;
  int64_t mid = a < token0 ? (b < token0 ? b : token0) : a;
  if (mid > a) {
    chunk_features(e, h, a - hlo, (int)(mid - a), hk, phi, ak);
    chunk_values(e, h, a - hlo, (int)(mid - a), hv, vp);
  }
  if (b > mid) {
    chunk_features(e, h, mid - token0, (int)(b - mid), k, phi + (size_t)(mid - a) * r, ak + (mid - a));
    chunk_values(e, h, mid - token0, (int)(b - mid), v, vp + (size_t)(mid - a) * dv1);
  }
}

/* With gates (§1.2 "Gates"): w->wcum[t - base] = sum of (ln gamma + g_l) over global tokens
 * base <= l < t, for t in [base, end], base = max(gate0, c0 - W - 2C): every token chunk c0's
 * window, far edge and queue reach (the queue holds summaries ending after c0 - W - C). The
 * queue reads the same sums (la_wq_set_cum). Recomputed per chunk, so every difference the
 * kernel takes is a sum over fewer than W + 3C gates, never one over the whole sequence. */
static int64_t win_cum(la_engine e, la_work *w, int h, int64_t c0, int64_t end) {
  int64_t base = c0 - e->cfg.window - 2 * (int64_t)e->C;
  if (base < e->gate0) base = e->gate0;
  const double lam = e->dlog[h], *g = e->gates + (base - e->gate0) * e->H + h;
  double s = 0.0;
  w->wcum[0] = 0.0;
  for (int64_t t = base; t < end; t++) {
    s += lam + g[(size_t)(t - base) * e->H];
    w->wcum[t - base + 1] = s;
  }
  la_wq_set_cum(&w->wq, w->wcum, base);
  return base;
}

/* The log-decay of tokens [a, b) (a <= b): (b - a) ln gamma, or with gates from w->wcum. */
static double win_logdecay(la_engine e, la_work *w, double lam, int64_t base, int64_t a,
                           int64_t b) {
  return e->gated ? w->wcum[b - base] - w->wcum[a - base] : (double)(b - a) * lam;
}

/* With decay (§1.2): rows [b0, len) of the scaled key features of the chunk or range that
 * starts at global token t0, key j weighted by the decay of tokens (t0 + j, t0 + len - 1]
 * (gamma^(len-1-j) without gates), so that the summary state_add forms next is taken as of
 * the last key. */
static void window_decay_keys(la_engine e, la_work *w, int h, int64_t t0, int64_t base, int b0,
                              int len) {
  if (!e->dlog) return;
  const int r = e->r;
  const double lam = e->dlog[h];
  for (int j = b0; j < len; j++) {
    const LA_REAL f = (LA_REAL)exp(win_logdecay(e, w, lam, base, t0 + j + 1, t0 + len));
    for (int l = 0; l < r; l++) ((LA_REAL *)w->phik)[(size_t)j * r + l] *= f;
  }
}

/* Summary of global keys [a, b) (one segment) on its own scale (with decay as of b - 1). */
static void range_summary(la_engine e, la_work *w, int h, int64_t token0, int64_t a,
                                 int64_t b, const LA_REAL *k, const LA_REAL *v, int64_t hlo,
                                 const LA_REAL *hk, const LA_REAL *hv, int64_t base, double *sz,
                                 double *m) {
  const int len = (int)(b - a);
  range_keys(e, h, token0, a, b, k, v, hlo, hk, hv, w->phik, w->ak, w->vp);
  for (int i = 0; i < len; i++) w->segi[i] = 0;
  *m = -INFINITY;
  rescale_keys(e, w, len, 1, 1, sz, m, 0);
  window_decay_keys(e, w, h, a, base, 0, len);
  state_add(e, w, len, 1, sz, m);
}

static void apply_window(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                         const void *q_, const void *k_, const void *v_, int64_t hlo,
                         int64_t hhi, const void *hk_, const void *hv_, const double *midsz,
                         double midm, void *out_, const void *g_, void *dq_, double *side) {
  la_wqueue *Q = &w->wq; /* reserved by the driver (forward.c) */
  const LA_REAL *q = q_;
  const LA_REAL *k = k_;
  const LA_REAL *v = v_;
  const LA_REAL *hk = hk_;
  const LA_REAL *hv = hv_;
  LA_REAL *out = out_;
  const LA_REAL *g = g_;
  LA_REAL *dq = dq_;
  const int r = e->r, dv1 = e->dv + 1, C = e->C;
  const int64_t W = e->cfg.window;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A, *o = w->o, *Af = w->Af;
  double *sz = w->wsz, qm;
  /* decay (§1.2; the forward only: the decayed backward is a composition of forwards): the
   * queue's summaries are taken as of their last token, row i of a chunk reads the queue's sum
   * times gamma^(c0+i-asof+1), the far edge and the chunk's own pairs gamma^(i-j); with gates
   * the log-decay of the same tokens from w->wcum (win_cum) */
  const double lam = e->dlog ? e->dlog[h] : 0.0;
  const double *P = e->dlog && !e->gated ? e->dpow + (size_t)h * (C + 1) : NULL;
  const int decayed = e->dlog != NULL; /* with gates dlog is set (0 without --decay) */
  int64_t asof = 0, base = 0; /* base: where w->wcum starts (gates) */
  la_wq_clear(Q);
  la_wq_set_decay(Q, lam);
  if (e->gated) { /* the first chunk's reach, for the halo pushes below */
    const int64_t e0 = (token0 / C + 1) * C;
    base = win_cum(e, w, h, token0, e0 < token0 + n ? e0 : token0 + n);
  }
  /* queue at the first chunk: halo pieces on the chunk grid, then the middle summary */
  if (!la_is_segment_start(e, token0) && hhi > hlo) {
    int64_t c1 = (token0 / C + 1) * C;
    if (c1 > token0 + n) c1 = token0 + n;
    int64_t S0 = la_segment_start(e, token0);
    int64_t lf = la_ceil_to(c1 - W, C);
    lf = lf > S0 ? lf : S0;
    lf = lf < token0 ? lf : token0;
    for (int64_t a = lf; a < hhi;) {
      int64_t b = (a / C + 1) * C;
      if (b > hhi) b = hhi;
      double m;
      range_summary(e, w, h, token0, a, b, k, v, hlo, hk, hv, base, sz, &m);
      la_wq_push(Q, a, b, sz, m);
      a = b;
    }
  }
  if (hhi < token0 && midm != -INFINITY) la_wq_push(Q, hhi, token0, midsz, midm);
  for (int64_t c0 = token0; c0 < token0 + n;) {
    int64_t cend = (c0 / C + 1) * C;
    if (cend > token0 + n) cend = token0 + n;
    const int len = (int)(cend - c0);
    int reset;
    const int nseg = la_seg_layout(e, c0, len, w->segi, &reset);
    const int *segi = w->segi;
    if (e->gated) base = win_cum(e, w, h, c0, cend);
    if (reset) la_wq_clear(Q);
    const int64_t S0 = reset ? c0 : la_segment_start(e, c0);
    int64_t lf = la_ceil_to(c0 + len - W, C);
    lf = lf > S0 ? lf : S0;
    lf = lf < c0 ? lf : c0;
    while (Q->count > 0 && Q->b[Q->head] <= lf) la_wq_pop(Q);
    const int64_t fa = S0 > c0 - W + 1 ? S0 : c0 - W + 1;
    const int nf = lf > fa ? (int)(lf - fa) : 0;
    int n0 = 0;
    while (n0 < len && segi[n0] == 0) n0++;
    /* features: chunk keys, far-edge keys, queries */
    range_keys(e, h, token0, c0, cend, k, v, hlo, hk, hv, w->phik, w->ak, w->vp);
    if (nf > 0) range_keys(e, h, token0, fa, lf, k, v, hlo, hk, hv, w->phif, w->af, w->vf);
    chunk_features(e, h, c0 - token0, len, q, w->phiq, w->aq);
    la_wq_sum_at(Q, sz, &qm, &asof);
    /* scales: segment 0 shares one with the queue and the far edge; later segments own one */
    double *M = w->mseg;
    for (int s = 0; s < nseg; s++) M[s] = e->stabilized ? -INFINITY : 0.0;
    if (e->stabilized) {
      M[0] = qm;
      for (int i = 0; i < len; i++) M[segi[i]] = w->ak[i] > M[segi[i]] ? w->ak[i] : M[segi[i]];
      for (int i = 0; i < nf; i++) M[0] = w->af[i] > M[0] ? w->af[i] : M[0];
      for (int i = 0; i < len; i++) {
        LA_REAL f = (LA_REAL)exp(w->ak[i] - M[segi[i]]);
        for (int j = 0; j < r; j++) ((LA_REAL *)w->phik)[(size_t)i * r + j] *= f;
      }
      for (int i = 0; i < nf; i++) {
        LA_REAL f = (LA_REAL)exp(w->af[i] - M[0]);
        for (int j = 0; j < r; j++) ((LA_REAL *)w->phif)[(size_t)i * r + j] *= f;
      }
    }
    memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
    if (qm != -INFINITY && n0 > 0) { /* queue: chunks [lf, c0) of the segment */
      /* unstabilized maps: M = 0, and qm = 0 undecayed (exp(0) = 1 exactly); a decayed
       * summary may sit lower (the keys pass keeps its state's scale, rescale_keys) */
      const double fq = exp(qm - M[0]);
      for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)(sz[i] * fq);
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, dv1, r, (LA_REAL)1, w->phiq, r,
              sf, dv1, (LA_REAL)0, o, dv1);
      for (int i = 0; decayed && i < n0; i++) {
        const LA_REAL f = (LA_REAL)exp(win_logdecay(e, w, lam, base, asof, c0 + i + 1));
        for (int j = 0; j < dv1; j++) o[(size_t)i * dv1 + j] *= f;
      }
    }
    if (nf > 0 && n0 > 0) { /* far edge: keys [fa, lf), row i reads j >= c0 + i - W + 1 */
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n0, nf, r, (LA_REAL)1, w->phiq, r,
              w->phif, r, (LA_REAL)0, Af, nf);
      for (int i = 0; i < n0; i++)
        for (int j = 0; j < nf; j++)
          if (fa + j < c0 + i - W + 1) Af[(size_t)i * nf + j] = 0;
          else if (decayed)
            Af[(size_t)i * nf + j] *=
                (LA_REAL)exp(win_logdecay(e, w, lam, base, fa + j + 1, c0 + i + 1));
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, dv1, nf, (LA_REAL)1, Af, nf, w->vf,
              dv1, (LA_REAL)1, o, dv1);
    }
    /* intra-chunk: j <= i, i - j < W, same segment */
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, w->phiq, r,
            w->phik, r, (LA_REAL)0, A, len);
    for (int i = 0; i < len; i++)
      for (int j = 0; j < len; j++)
        if (j > i || i - j >= W || segi[j] != segi[i]) A[(size_t)i * len + j] = 0;
        else if (P) A[(size_t)i * len + j] *= (LA_REAL)P[i - j];
        else if (e->gated)
          A[(size_t)i * len + j] *=
              (LA_REAL)exp(win_logdecay(e, w, lam, base, c0 + j + 1, c0 + i + 1));
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len, w->vp,
            dv1, (LA_REAL)1, o, dv1);
    if (g) {
      /* backward replay (§4 "Gradients"): a, b of the rows, then dphi(q) from the same three
       * parts (queue, far edge, chunk) with [a|b] in place of phi(q) */
      const int dv = e->dv, H = e->H;
      const int64_t rel = c0 - token0, ldk = (int64_t)H * e->dk;
      LA_REAL *AB = w->ab, *dphi = w->dphi;
      for (int i = 0; i < len; i++) w->ak2[i] = M[segi[i]];
      grad_coeffs(e, w, h, c0, len, g + rel * H * dv, o, w->ak2, AB,
                         (la_side){(char *)(side + rel * H * 3), 3 * sizeof(double)});
      memset(dphi, 0, sizeof(LA_REAL) * (size_t)len * r);
      if (qm != -INFINITY && n0 > 0)
        LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n0, r, dv1, (LA_REAL)1, AB, dv1, sf, dv1,
                (LA_REAL)0, dphi, r);
      if (nf > 0 && n0 > 0) {
        LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n0, nf, dv1, (LA_REAL)1, AB, dv1, w->vf,
                dv1, (LA_REAL)0, Af, nf);
        for (int i = 0; i < n0; i++)
          for (int j = 0; j < nf; j++)
            if (fa + j < c0 + i - W + 1) Af[(size_t)i * nf + j] = 0;
        LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, r, nf, (LA_REAL)1, Af, nf, w->phif,
                r, (LA_REAL)1, dphi, r);
      }
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, dv1, (LA_REAL)1, AB, dv1, w->vp,
              dv1, (LA_REAL)0, A, len);
      for (int i = 0; i < len; i++)
        for (int j = 0; j < len; j++)
          if (j > i || i - j >= W || segi[j] != segi[i]) A[(size_t)i * len + j] = 0;
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, r, len, (LA_REAL)1, A, len, w->phik,
              r, (LA_REAL)1, dphi, r);
      LA_MAP_CHAIN(e->fm, h, len, q + rel * ldk + (int64_t)h * e->dk, ldk, dphi,
                                       w->phiq, dq + rel * ldk + (int64_t)h * e->dk, ldk, w->af);
    } else {
      for (int i = 0; i < len; i++) w->aq[i] += M[segi[i]];
      finalize_rows(e, w, h, token0, c0 - token0, len, out);
    }
    /* push this chunk's tail (after its last segment start) */
    if (nseg > 1) la_wq_clear(Q);
    int bl = 0;
    while (segi[bl] != nseg - 1) bl++;
    double m;
    memset(sz, 0, sizeof(double) * rsz);
    window_decay_keys(e, w, h, c0, base, bl, len); /* with decay: the tail as of its last key */
    state_add(e, w, len, nseg, sz, &m);
    la_wq_push(Q, c0 + bl, cend, sz, m);
    c0 = cend;
  }
}

