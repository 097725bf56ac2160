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

/* Bring the state and this chunk's keys to a common log-scale M = max(m, max a_k);
 * keys get e^{a_k - M}, the state e^{m - M} (m = -inf: empty state, stays 0). */
static double LA_FN(rescale_keys)(la_engine e, int len, LA_REAL *phik, const double *ak,
                                  double *sz, double m) {
  const int r = e->r;
  const size_t rsz = (size_t)r * (e->dv + 1);
  if (!e->stabilized) {
    if (m == -INFINITY) memset(sz, 0, sizeof(double) * rsz);
    return 0.0;
  }
  double M = m;
  for (int i = 0; i < len; i++) M = ak[i] > M ? ak[i] : M;
  if (m != M && m != -INFINITY) {
    double f = exp(m - M);
    for (size_t i = 0; i < rsz; i++) sz[i] *= f;
  }
  for (int i = 0; i < len; i++) {
    LA_REAL f = (LA_REAL)exp(ak[i] - M);
    if (f != (LA_REAL)1)
      for (int j = 0; j < r; j++) phik[(size_t)i * r + j] *= f;
  }
  return M;
}

/* (S|z) += Phi_k^T [V|1], accumulated in float64. */
static void LA_FN(state_add)(la_engine e, la_work *w, int len, double *sz) {
  const int r = e->r, dv1 = e->dv + 1;
  LA_REAL *tmp = w->tmp;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len, (LA_REAL)1, w->phik, r, w->vp,
          dv1, (LA_REAL)0, tmp, dv1);
  const size_t rsz = (size_t)r * dv1;
  for (size_t i = 0; i < rsz; i++) sz[i] += (double)tmp[i];
}

static void LA_FN(accum_range)(la_engine e, la_work *w, int h, int64_t lo, int64_t hi,
                               const LA_REAL *k, const LA_REAL *v, double *sz, double *m) {
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    LA_FN(chunk_features)(e, h, c0, len, k, w->phik, w->ak);
    *m = LA_FN(rescale_keys)(e, len, w->phik, w->ak, sz, *m);
    LA_FN(chunk_values)(e, h, c0, len, v, w->vp);
    LA_FN(state_add)(e, w, len, sz);
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
                                const LA_REAL *v, double *sz, double *m, LA_REAL *out,
                                LA_REAL *raw, double *lsc) {
  const int r = e->r, dv1 = e->dv + 1, C = e->C;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A;
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    int len = (int)(hi - c0 < C ? hi - c0 : C);
    LA_FN(chunk_features)(e, h, c0, len, k, w->phik, w->ak);
    *m = LA_FN(rescale_keys)(e, len, w->phik, w->ak, sz, *m);
    LA_FN(chunk_features)(e, h, c0, len, q, w->phiq, w->aq);
    LA_FN(chunk_values)(e, h, c0, len, v, w->vp);
    for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
    /* inter-chunk: O' = Phi_q (S|z) */
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r, sf,
            dv1, (LA_REAL)0, w->o, dv1);
    /* intra-chunk: O' += tril(Phi_q Phi_k^T) [V|1] */
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, w->phiq, r,
            w->phik, r, (LA_REAL)0, A, len);
    for (int i = 0; i < len; i++)
      for (int j = i + 1; j < len; j++) A[(size_t)i * len + j] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len, w->vp,
            dv1, (LA_REAL)1, w->o, dv1);
    for (int i = 0; i < len; i++) w->aq[i] += *m;
    if (raw) LA_FN(store_raw)(e, w, h, c0, len, raw, lsc);
    else LA_FN(finalize_rows)(e, w, h, token0, c0, len, out);
    LA_FN(state_add)(e, w, len, sz);
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
