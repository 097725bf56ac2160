/* Chunk kernels for one precision; included by engine.c with LA_REAL, LA_SFX, LA_GEMM,
 * LA_EXPR defined. DESIGN.md §4 (chunkwise causal) and §1 (denominator policies).
 * Per chunk (C tokens, head h), with Phi rows stabilized (§2): keys scaled to one constant M,
 *   O' = Phi_q (S|z) + tril(Phi_q Phi_k^T) [V|1],   (S|z) += Phi_k^T [V|1].
 * (S|z) is float64; the GEMMs run in LA_REAL on a rounded copy. */
#define LA_CAT2(a, b) a##_##b
#define LA_CAT(a, b) LA_CAT2(a, b)
#define LA_FN(name) LA_CAT(name, LA_SFX)

/* Feature rows of chunk [c0, c0+len) of head h from x ([n, H, d] layout). */
static void LA_FN(chunk_features)(la_engine e, int h, int64_t c0, int len, const LA_REAL *x,
                                  LA_REAL *phi, double *a) {
  const int64_t ld = (int64_t)e->H * e->dk;
  LA_CAT(la_featmap_eval, LA_SFX)(e->fm, h, len, x + c0 * ld + (int64_t)h * e->dk, ld, phi, a);
}

/* [V | 1] for the chunk. */
static void LA_FN(chunk_values)(la_engine e, int h, int64_t c0, int len, const LA_REAL *v,
                                LA_REAL *vp) {
  const int dv = e->dv, dv1 = dv + 1;
  const int64_t ld = (int64_t)e->H * dv;
  for (int i = 0; i < len; i++) {
    memcpy(vp + (size_t)i * dv1, v + (c0 + i) * ld + (int64_t)h * dv, sizeof(LA_REAL) * dv);
    vp[(size_t)i * dv1 + dv] = (LA_REAL)1;
  }
}

/* Per-segment log-scales for a chunk (§2, §3): keys of the chunk's segment s are brought to
 * M_s = max a_k over the segment's keys in the chunk, and for s = 0 (the segment continuing
 * from the state) also the state's m. Pairs only meet within a segment, so each segment keeps
 * its own exact scale. reset: the chunk starts a segment, the state is dropped. Keys get
 * e^{a_k - M_s}, the state e^{m - M_0}. Unstabilized maps: M_s = 0. */
static void LA_FN(rescale_keys)(la_engine e, la_work *w, int len, int nseg, int reset,
                                double *sz, double *m) {
  const int r = e->r;
  const size_t rsz = (size_t)r * (e->dv + 1);
  const int *segi = w->segi;
  double *M = w->mseg;
  LA_REAL *phik = w->phik;
  if (reset || *m == -INFINITY) {
    memset(sz, 0, sizeof(double) * rsz);
    *m = -INFINITY;
  }
  if (!e->stabilized) {
    for (int s = 0; s < nseg; s++) M[s] = 0.0;
    return;
  }
  for (int s = 0; s < nseg; s++) M[s] = -INFINITY;
  M[0] = *m;
  for (int i = 0; i < len; i++) M[segi[i]] = w->ak[i] > M[segi[i]] ? w->ak[i] : M[segi[i]];
  if (*m != M[0] && *m != -INFINITY) {
    double f = exp(*m - M[0]);
    for (size_t i = 0; i < rsz; i++) sz[i] *= f;
  }
  *m = M[0];
  for (int i = 0; i < len; i++) {
    LA_REAL f = (LA_REAL)exp(w->ak[i] - M[segi[i]]);
    if (f != (LA_REAL)1)
      for (int j = 0; j < r; j++) phik[(size_t)i * r + j] *= f;
  }
}

/* (S|z) += Phi_k[b:]^T [V|1][b:] in float64; with nseg > 1 the state restarts at the last
 * segment of the chunk (row b) and takes that segment's scale. */
static void LA_FN(state_add)(la_engine e, la_work *w, int len, int nseg, double *sz, double *m) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t rsz = (size_t)r * dv1;
  int b = 0;
  if (nseg > 1) {
    while (w->segi[b] != nseg - 1) b++;
    memset(sz, 0, sizeof(double) * rsz);
    *m = w->mseg[nseg - 1];
  } else {
    *m = w->mseg[0];
  }
  LA_REAL *tmp = w->tmp;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len - b, (LA_REAL)1,
          (LA_REAL *)w->phik + (size_t)b * r, r, (LA_REAL *)w->vp + (size_t)b * dv1, dv1,
          (LA_REAL)0, tmp, dv1);
  for (size_t i = 0; i < rsz; i++) sz[i] += (double)tmp[i];
}

/* Tail summary of tokens [lo, hi) (global token0 + lo ...), combined onto (sz, m, f). */
static void LA_FN(accum_range)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo,
                               int64_t hi, const LA_REAL *k, const LA_REAL *v, double *sz,
                               double *m, int *f) {
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    int len = (int)(hi - c0 < e->C ? hi - c0 : e->C), reset;
    int nseg = seg_layout(e, token0 + c0, len, w->segi, &reset);
    if (reset || nseg > 1) *f = 1;
    LA_FN(chunk_features)(e, h, c0, len, k, w->phik, w->ak);
    LA_FN(rescale_keys)(e, w, len, nseg, reset, sz, m);
    LA_FN(chunk_values)(e, h, c0, len, v, w->vp);
    LA_FN(state_add)(e, w, len, nseg, sz, m);
  }
}

/* Apply the denominator policy (or the unnormalized scale) to len rows of w->o and write
 * them to out. w->aq[i] holds the row's full log-scale (query + keys). */
static void LA_FN(finalize_rows)(la_engine e, la_work *w, int h, int64_t token0, int64_t c0,
                                 int len, LA_REAL *out) {
  const int dv = e->dv, dv1 = dv + 1;
  const int64_t ld = (int64_t)e->H * dv;
  const LA_REAL *o = w->o;
  for (int i = 0; i < len; i++) {
    const LA_REAL *oi = o + (size_t)i * dv1;
    LA_REAL *yi = out + (c0 + i) * ld + (int64_t)h * dv;
    const double den_s = (double)oi[dv], lsc = w->aq[i];
    const int64_t tok = token0 + c0 + i;
    den_note(&w->stats, den_s, lsc);
    if (e->cfg.normalize) {
      int zero;
      double d = den_divisor(&e->cfg, &w->stats, den_s, lsc, tok, h, &zero);
      if (zero) {
        memset(yi, 0, sizeof(LA_REAL) * dv);
        continue;
      }
      const double inv = 1.0 / d;
      for (int j = 0; j < dv; j++) yi[j] = (LA_REAL)((double)oi[j] * inv);
    } else {
      /* Unnormalized: the true scale e^lsc (§2), an overflow is an error. */
      const double sc = exp(lsc);
      int bad = 0;
      for (int j = 0; j < dv; j++) {
        double y = oi[j] == 0 ? 0.0 : (double)oi[j] * sc;
        yi[j] = (LA_REAL)y;
        bad |= !isfinite(yi[j]);
      }
      if (bad) overflow_note(&w->stats, tok, h);
    }
  }
}

/* raw == NULL: finalize into out. Otherwise store the unfinalized rows [num_s | den_s] into
 * raw ([n, H, dv+1]) and their log-scales into lsc ([n, H]) for la_engine_correct. */
static void LA_FN(store_raw)(la_engine e, la_work *w, int h, int64_t c0, int len, LA_REAL *raw,
                             double *lsc) {
  const int dv1 = e->dv + 1, H = e->H;
  for (int i = 0; i < len; i++) {
    const size_t ri = (size_t)(c0 + i) * H + h;
    memcpy(raw + ri * dv1, (const LA_REAL *)w->o + (size_t)i * dv1, sizeof(LA_REAL) * dv1);
    lsc[ri] = w->aq[i];
  }
}

static void LA_FN(apply_causal)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo,
                                int64_t hi, const LA_REAL *q, const LA_REAL *k,
                                const LA_REAL *v, double *sz, double *m, int *f, LA_REAL *out,
                                LA_REAL *raw, double *lsc) {
  const int r = e->r, dv1 = e->dv + 1, C = e->C;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A, *o = w->o;
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    int len = (int)(hi - c0 < C ? hi - c0 : C), reset;
    int nseg = seg_layout(e, token0 + c0, len, w->segi, &reset);
    if (reset || nseg > 1) *f = 1;
    const int *segi = w->segi;
    LA_FN(chunk_features)(e, h, c0, len, k, w->phik, w->ak);
    LA_FN(rescale_keys)(e, w, len, nseg, reset, sz, m);
    LA_FN(chunk_features)(e, h, c0, len, q, w->phiq, w->aq);
    LA_FN(chunk_values)(e, h, c0, len, v, w->vp);
    /* inter-chunk: O' = Phi_q (S|z) for the rows still in the state's segment */
    int n0 = 0;
    while (n0 < len && segi[n0] == 0) n0++;
    if (*m != -INFINITY) {
      for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, dv1, r, (LA_REAL)1, w->phiq, r,
              sf, dv1, (LA_REAL)0, o, dv1);
      if (n0 < len) memset(o + (size_t)n0 * dv1, 0, sizeof(LA_REAL) * (size_t)(len - n0) * dv1);
    } else {
      memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
    }
    /* intra-chunk: O' += (tril and same segment)(Phi_q Phi_k^T) [V|1] */
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, w->phiq, r,
            w->phik, r, (LA_REAL)0, A, len);
    for (int i = 0; i < len; i++)
      for (int j = 0; j < len; j++)
        if (j > i || segi[j] != segi[i]) A[(size_t)i * len + j] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len, w->vp,
            dv1, (LA_REAL)1, o, dv1);
    for (int i = 0; i < len; i++) w->aq[i] += w->mseg[segi[i]];
    if (raw) LA_FN(store_raw)(e, w, h, c0, len, raw, lsc);
    else LA_FN(finalize_rows)(e, w, h, token0, c0, len, out);
    LA_FN(state_add)(e, w, len, nseg, sz, m);
  }
}

static void LA_FN(apply_bidir)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo,
                               int64_t hi, const LA_REAL *q, const double *sz, double m,
                               LA_REAL *out) {
  const int r = e->r, dv1 = e->dv + 1, C = e->C;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf;
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    int len = (int)(hi - c0 < C ? hi - c0 : C);
    LA_FN(chunk_features)(e, h, c0, len, q, w->phiq, w->aq);
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r, sf,
            dv1, (LA_REAL)0, w->o, dv1);
    for (int i = 0; i < len; i++) w->aq[i] += m;
    LA_FN(finalize_rows)(e, w, h, token0, c0, len, out);
  }
}

/* Overlap correction (§4): rows computed from a zero state get the prefix P added,
 *   [num|den] = e^{a_q} (e^{M_i} raw_i + e^{P.m} phi_s(q_i)^T (P_S|P_z)),
 * on the common scale M' = max(M_i, P.m); then the denominator policy as usual. */
static void LA_FN(correct_rows)(la_engine e, la_work *w, int h, int64_t token0, int64_t lo,
                                int64_t hi, const LA_REAL *q, const double *psz, double pm,
                                const LA_REAL *raw, const double *lsc, LA_REAL *out) {
  const int r = e->r, dv1 = e->dv + 1, C = e->C, H = e->H;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *o = w->o;
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)psz[i];
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    int len = (int)(hi - c0 < C ? hi - c0 : C);
    LA_FN(chunk_features)(e, h, c0, len, q, w->phiq, w->aq);
    if (pm != -INFINITY)
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r,
              sf, dv1, (LA_REAL)0, o, dv1);
    for (int i = 0; i < len; i++) {
      const size_t ri = (size_t)(c0 + i) * H + h;
      const LA_REAL *rw = raw + ri * dv1;
      LA_REAL *oi = o + (size_t)i * dv1;
      const double Mi = lsc[ri] - w->aq[i];
      if (pm == -INFINITY) {
        for (int j = 0; j < dv1; j++) oi[j] = rw[j];
        w->aq[i] = lsc[ri];
        continue;
      }
      const double M = Mi > pm ? Mi : pm;
      const LA_REAL fr = (LA_REAL)exp(Mi - M), fp = (LA_REAL)exp(pm - M);
      for (int j = 0; j < dv1; j++) oi[j] = fr * rw[j] + fp * oi[j];
      w->aq[i] += M;
    }
    LA_FN(finalize_rows)(e, w, h, token0, c0, len, out);
  }
}

#undef LA_FN
#undef LA_CAT
#undef LA_CAT2
#undef LA_REAL
#undef LA_SFX
#undef LA_GEMM
#undef LA_EXPR
