/* Forward chunk kernels for one precision, a template: kernels_f32.c and kernels_f64.c
 * include it with LA_REAL, LA_GEMM, LA_MAP_EVAL, and the kernel table's hooks (simd.h,
 * docs/design.md §5.5): LA_SIMD_F32 (float32: the products on e->simd), LA_SIMD_ANY(e) (the
 * table of the maps, finalize_rows' common case and the prefetches), LA_FINALIZE_PLAIN(t)
 * and LA_MAP_EVAL_PF (that precision's entries) defined, and end in
 * the named tables la_kernels_f32 / la_kernels_f64 (kernels.h). docs/design.md §4.2 (the
 * chunkwise kernel), §1.1 (denominator policies), §2.2 (the stabilizer).
 * Per chunk (C tokens, head h), with Phi rows stabilized: keys scaled to one constant M,
 *   O' = Phi_q (S|z) + tril(Phi_q Phi_k^T) [V|1],   (S|z) += Phi_k^T [V|1].
 * (S|z) is float64; the GEMMs run in LA_REAL on a rounded copy. Domain: finite inputs. */

#ifndef LA_INTRA_BLOCKS
#define LA_INTRA_BLOCKS 3
#endif

/* window_impl.h uses it before backward_impl.h defines it */
static void grad_coeffs(la_engine e, la_work *w, int h, int64_t tok0, int len,
                               const LA_REAL *g, const LA_REAL *o, const double *M, LA_REAL *AB,
                               la_side side);

/* Feature rows of chunk [c0, c0+len) of head h from x ([n, H, d] layout). */
static void chunk_features(la_engine e, int h, int64_t c0, int len, const LA_REAL *x,
                                  LA_REAL *phi, double *a) {
  const int64_t ld = (int64_t)e->H * e->dk;
  LA_MAP_EVAL(e->fm, h, len, x + c0 * ld + (int64_t)h * e->dk, ld, phi, a);
}

/* [V | 1] for the chunk. */
static void chunk_values(la_engine e, int h, int64_t c0, int len, const LA_REAL *v,
                                LA_REAL *vp) {
  const int dv = e->dv, dv1 = dv + 1;
  const int64_t ld = (int64_t)e->H * dv;
  for (int i = 0; i < len; i++) {
    memcpy(vp + (size_t)i * dv1, v + (c0 + i) * ld + (int64_t)h * dv, sizeof(LA_REAL) * dv);
    vp[(size_t)i * dv1 + dv] = (LA_REAL)1;
  }
}

/* How far a decayed chunk on the undecayed products may scale its rows (decay_fold): the
 * decay folded into them, -G_{len-1} (decay_split, decay_impl.h), and the keys' scale above
 * the state's kept (rescale_keys) are each at most this many nats: keys grow by e^16 at most
 * in float32 (of its +-87 nats), e^128 in float64 (of +-708), and queries shrink by as much
 * (decay_fold), so features of normal size stay far from overflow and from subnormals. RetNet's
 * gammas (>= 0.969, 2 nats per 64 rows) and gates of up to 1/8 nat per token stay on the
 * undecayed products at C = 64. */
#ifdef LA_REAL_IS_F64
#define LA_DECAY_SPLIT 64.0
#else
#define LA_DECAY_SPLIT 8.0
#endif

/* Per-segment log-scales for a chunk (§2, §3): keys of the chunk's segment s are brought to
 * M_s = max a_k over the segment's keys in the chunk, and for s = 0 (the segment continuing
 * from the state) also the state's m. Pairs only meet within a segment, so each segment keeps
 * its own exact scale. reset: the chunk starts a segment, the state is dropped. Keys get
 * e^{a_k - M_s}, the state e^{m - M_0}. Unstabilized maps: M_s = 0. Returns 1 when it
 * cleared or rescaled sz (a working-precision copy of it is then stale), else 0.
 * decayed (decay_fold): every map takes part (unstabilized ones with a_k = 0), since the
 * decay moves m; the state keeps its scale, M_0 = m, while the keys are at most
 * LA_DECAY_SPLIT nats above it (the state then needs no pass per chunk), and the keys are
 * left to decay_fold, which scales them once. */
static int rescale_keys(la_engine e, la_work *w, int len, int nseg, int reset,
                                double *sz, double *m, int decayed) {
  const int r = e->r;
  const size_t rsz = (size_t)r * (e->dv + 1);
  const int *segi = w->segi;
  double *M = w->mseg;
  LA_REAL *phik = w->phik;
  int changed = 0;
  if (reset || *m == -INFINITY) {
    memset(sz, 0, sizeof(double) * rsz);
    *m = -INFINITY;
    changed = 1;
  }
  if (!e->stabilized && !decayed) {
    for (int s = 0; s < nseg; s++) M[s] = 0.0;
    return changed;
  }
  for (int s = 0; s < nseg; s++) M[s] = -INFINITY;
  M[0] = *m;
  for (int i = 0; i < len; i++) M[segi[i]] = w->ak[i] > M[segi[i]] ? w->ak[i] : M[segi[i]];
  if (decayed && *m != -INFINITY && M[0] - *m <= LA_DECAY_SPLIT) M[0] = *m;
  if (*m != M[0] && *m != -INFINITY) {
    double f = exp(*m - M[0]);
    for (size_t i = 0; i < rsz; i++) sz[i] *= f;
    changed = 1;
  }
  *m = M[0];
  for (int i = 0; i < len && !decayed; i++) {
    LA_REAL f = (LA_REAL)exp(w->ak[i] - M[segi[i]]);
    if (f == (LA_REAL)1) continue;
#ifdef LA_SIMD_F32
    if (e->simd) { /* the same float products, on vector lanes */
      e->simd->mul_f32((size_t)r, phik + (size_t)i * r, f);
      continue;
    }
#endif
    for (int j = 0; j < r; j++) phik[(size_t)i * r + j] *= f;
  }
  return changed;
}

/* Row i of x (len rows of r) times f[i], in the working precision. */
static void fold_rows(la_engine e, int len, LA_REAL *x, const double *f) {
  const int r = e->r;
  for (int i = 0; i < len; i++) {
    const LA_REAL fi = (LA_REAL)f[i];
#ifdef LA_SIMD_F32
    if (e->simd) {
      e->simd->mul_f32((size_t)r, x + (size_t)i * r, fi);
      continue;
    }
#endif
    for (int j = 0; j < r; j++) x[(size_t)i * r + j] *= fi;
  }
}

/* The keys alone (the keys pass, accum_chunk): e^{a_k - M_s - G_j}. */
static void decay_fold_keys(la_engine e, la_work *w, int len, const double *G) {
  double *f = w->ak2;
  for (int i = 0; i < len; i++) f[i] = exp(w->ak[i] - w->mseg[w->segi[i]] - G[i]);
  fold_rows(e, len, w->phik, f);
}

/* Decay folded into the chunk's rows (docs/design.md §1.2 "Kernels"): with G_i the
 * chunk's cumulative log-decay ((i+1) ln gamma, or the cumulative log-gates), queries get
 * e^{G_i} and keys e^{a_k - M_s - G_j} (rescale_keys' scale with the decay), so the undecayed
 * products give e^{G_i - G_j} phi_q,i . phi_k,j in the chunk, e^{G_i} phi_q,i (S|z) from
 * the state, and the update (S|z) + Phi_k^T [V|1] is the new state on the log-scale
 * M_0 + G_{len-1}. The caller bounds -G_{len-1} by LA_DECAY_SPLIT (decay_split).
 * Unstabilized maps (a = 0, -LA_DECAY_SPLIT <= M_s <= 0) also fold the keys' scale into the
 * queries, e^{G_i + M_s}, so that their rows come out on log-scale 0, which finalize_rows'
 * common case needs; returns 1 then (the rows' log-scales stay 0), else 0. */
static int decay_fold(la_engine e, la_work *w, int len, const double *G) {
  const int fold = !e->stabilized;
  double *f = w->ak2;
  for (int i = 0; i < len; i++) f[i] = exp(G[i] + (fold ? w->mseg[w->segi[i]] : 0.0));
  fold_rows(e, len, w->phiq, f);
  decay_fold_keys(e, w, len, G);
  return fold;
}

/* y[i] = e^{x[i]}, x[i] <= 0: the table's vector exp (0 below -708.39, within 2 ulp of libm's)
 * when the engine has one, else libm's. */
static void exp_nonpos(la_engine e, size_t n, const double *x, double *y) {
#ifdef LA_SIMD_ANY
  const la_simd *t = LA_SIMD_ANY(e);
  if (t && t->exp_f64) {
    t->exp_f64(n, x, y);
    return;
  }
#else
  (void)e;
#endif
  for (size_t i = 0; i < n; i++) y[i] = exp(x[i]);
}

/* decay_fold with per-feature gates (§1.2 "Per-feature gates", "Kernels"): G is len x r (the
 * chunk's cumulative log-gates by feature), queries get e^{G_i,f} (times e^{M_s} when
 * unstabilized, as decay_fold) and keys e^{a_k - M_s - G_j,f}, so the undecayed products give
 * (Phi_q,i o e^{G_i}) . (Phi_k,j o e^{-G_j}) in the chunk and (Phi_q,i o e^{G_i}) (S|z) from
 * the state; gate_rows_decay then decays the state's rows. The caller bounds -G_{len-1,f} by
 * LA_DECAY_SPLIT for every f (gla_causal): every factor is as bounded as decay_fold's.
 * keys_only: the keys pass (accum_chunk), the queries left alone. */
static int decay_fold_rows(la_engine e, la_work *w, int len, const double *G, int keys_only) {
  const int r = e->r, fold = !e->stabilized && !keys_only;
  double *E = w->gf + (size_t)e->C * r, *qs = w->gc, *ks = w->gc + len;
  exp_nonpos(e, (size_t)len * r, G, E);
  for (int i = 0; i < len; i++) {
    const double M = w->mseg[w->segi[i]];
    qs[i] = fold ? exp(M) : 1.0;
    ks[i] = exp(w->ak[i] - M);
  }
  LA_REAL *q = keys_only ? NULL : w->phiq, *k = w->phik;
#ifdef LA_SIMD_F32
  if (e->simd && e->simd->gate_fold) {
    e->simd->gate_fold(len, r, q, k, E, qs, ks);
    return fold;
  }
#endif
  for (int i = 0; i < len; i++) {
    const double *Ei = E + (size_t)i * r;
    LA_REAL *qi = q ? q + (size_t)i * r : NULL, *ki = k + (size_t)i * r;
    for (int f = 0; q && f < r; f++) qi[f] = (LA_REAL)((double)qi[f] * (qs[i] * Ei[f]));
    for (int f = 0; f < r; f++) ki[f] = (LA_REAL)((double)ki[f] * (ks[i] / Ei[f]));
  }
  return fold;
}

/* After a chunk folded by decay_fold_rows: row f of (S|z) decays by e^{GL_f} (GL = G_{len-1}),
 * taken as e^{max_f GL_f} on the log-scale m and e^{GL_f - max} <= 1 on the rows. */
static void gate_rows_decay(la_engine e, la_work *w, const double *GL, double *sz, double *m) {
  const int r = e->r, dv1 = e->dv + 1;
  double gmax = -INFINITY, *x = w->gf + (size_t)2 * e->C * r;
  for (int f = 0; f < r; f++) gmax = GL[f] > gmax ? GL[f] : gmax;
  for (int f = 0; f < r; f++) x[f] = GL[f] - gmax;
  exp_nonpos(e, (size_t)r, x, x);
  for (int f = 0; f < r; f++) {
    double *row = sz + (size_t)f * dv1;
    for (int c = 0; c < dv1; c++) row[c] *= x[f];
  }
  *m += gmax;
}

/* (S|z) += Phi_k[b:]^T [V|1][b:] in float64; with nseg > 1 the state restarts at the last
 * segment of the chunk (row b) and takes that segment's scale. */
static void state_add(la_engine e, la_work *w, int len, int nseg, double *sz, double *m) {
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
#ifdef LA_REAL_IS_F64 /* the state's own precision: the product adds into it in place */
  (void)rsz;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len - b, (LA_REAL)1,
          (LA_REAL *)w->phik + (size_t)b * r, r, (LA_REAL *)w->vp + (size_t)b * dv1, dv1,
          (LA_REAL)1, sz, dv1);
#else
  LA_REAL *tmp = w->tmp;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len - b, (LA_REAL)1,
          (LA_REAL *)w->phik + (size_t)b * r, r, (LA_REAL *)w->vp + (size_t)b * dv1, dv1,
          (LA_REAL)0, tmp, dv1);
  for (size_t i = 0; i < rsz; i++) sz[i] += (double)tmp[i];
#endif
}

#ifdef LA_SIMD_F32
/* (S|z) += tmp (the chunk summary from kern512.c, one segment) in float64. */
static void state_add_tmp(la_engine e, la_work *w, double *sz, double *m) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const LA_REAL *tmp = w->tmp;
  *m = w->mseg[0];
  e->simd->add_to_f64(rsz, sz, tmp);
}
#endif

#ifdef LA_SIMD_ANY
/* Prefetch chunk [c1, c1 + C) ∩ [., hi) of head h from x ([n, H, d] layout). */
static void prefetch_chunk(la_engine e, int h, int64_t c1, int64_t hi, const LA_REAL *x,
                                  int d) {
  if (!x || c1 >= hi) return;
  const int rows = (int)(hi - c1 < e->C ? hi - c1 : e->C);
  const int64_t ld = (int64_t)e->H * d;
  LA_SIMD_ANY(e)->prefetch(x + c1 * ld + (int64_t)h * d, rows, ld * (int64_t)sizeof(LA_REAL),
                   d * (int)sizeof(LA_REAL));
}
#endif

/* chunk_features of x for rows [c0, c0+len); on the AVX-512 path it also prefetches rows
 * [c1, min(c1 + C, hi)) of x and of y (dy columns; NULL: none): the next chunk (c1 = c0 + C),
 * or the previous one in a reverse pass (c1 < 0: none). A map whose AVX-512 form takes the
 * prefetches (simd_prefetch in the map table, maps.c: elu1 and the favor maps) spreads them
 * over its rows; for the other maps they are issued at once. */
/* Whether any of len rows (d entries, stride ld) is non-finite: x - x is 0 for a finite x
 * and NaN for an infinite or NaN one, and the or of the comparisons vectorizes. */
static int rows_nonfinite(const LA_REAL *x, int64_t ld, int len, int d) {
  int bad = 0;
  for (int i = 0; i < len; i++) {
    const LA_REAL *xi = x + i * ld;
    for (int j = 0; j < d; j++) bad |= xi[j] - xi[j] != 0;
  }
  return bad;
}

/* la_engine_set_check_finite: rows [c0, c0+len) of head h of x (d columns) and of y (dy;
 * NULL: none), as features_at reads them; a bad row sets w->nonfinite (§6). */
static void check_rows(la_engine e, int h, int64_t c0, int len, const LA_REAL *x,
                       const LA_REAL *y, int dy) {
  const int64_t ld = (int64_t)e->H * e->dk, ldy = (int64_t)e->H * dy;
  int bad = rows_nonfinite(x + c0 * ld + (int64_t)h * e->dk, ld, len, e->dk);
  if (y) bad |= rows_nonfinite(y + c0 * ldy + (int64_t)h * dy, ldy, len, dy);
  if (bad) e->work[la_thread_id()].nonfinite = 1;
}

static void features_at(la_engine e, int h, int64_t c0, int len, int64_t c1, int64_t hi,
                               const LA_REAL *x, LA_REAL *phi, double *a, const LA_REAL *y,
                               int dy) {
  if (e->check_finite) check_rows(e, h, c0, len, x, y, dy);
#ifdef LA_SIMD_ANY
  const la_map_info *mi = e->fm->map;
  if (LA_SIMD_ANY(e) && e->fm->simd && mi->simd_prefetch && mi->LA_MAP_EVAL_PF && c1 >= 0 &&
      c1 < hi) {
    const int64_t ld = (int64_t)e->H * e->dk, ldy = (int64_t)e->H * dy;
    la_simd_pf pf = {{(const char *)(x + c1 * ld + (int64_t)h * e->dk),
                      y ? (const char *)(y + c1 * ldy + (int64_t)h * dy) : NULL},
                     {ld * (ptrdiff_t)sizeof(LA_REAL), ldy * (ptrdiff_t)sizeof(LA_REAL)},
                     {e->dk * (int)sizeof(LA_REAL), dy * (int)sizeof(LA_REAL)},
                     (int)(hi - c1 < e->C ? hi - c1 : e->C)};
    mi->LA_MAP_EVAL_PF(e->fm, h, len, x + c0 * ld + (int64_t)h * e->dk, ld, phi, a, &pf);
    return;
  }
  if (LA_SIMD_ANY(e) && c1 >= 0) {
    prefetch_chunk(e, h, c1, hi, x, e->dk);
    prefetch_chunk(e, h, c1, hi, y, dy);
  }
#else
  (void)c1, (void)hi, (void)y, (void)dy;
#endif
  chunk_features(e, h, c0, len, x, phi, a);
}

/* features_at with the next chunk prefetched. */
static void features_pf(la_engine e, int h, int64_t c0, int len, int64_t hi,
                               const LA_REAL *x, LA_REAL *phi, double *a, const LA_REAL *y,
                               int dy) {
  features_at(e, h, c0, len, c0 + e->C, hi, x, phi, a, y, dy);
}

/* One chunk [c0, c0+len) of accum_range; hi ends the range (the prefetch stops there). */
static void accum_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0, int len,
                        int64_t hi, const LA_REAL *k, const LA_REAL *v, double *sz, double *m,
                        int *f, const double *G, int gr) {
  int reset;
  int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  if (reset || nseg > 1) *f = 1;
  features_pf(e, h, c0, len, hi, k, w->phik, w->ak, v, e->dv);
  rescale_keys(e, w, len, nseg, reset, sz, m, G != NULL);
  if (G && gr > 1) decay_fold_rows(e, w, len, G, 1); /* gate_rows_decay below */
  else if (G) decay_fold_keys(e, w, len, G); /* decayed (decay_fold): m + G_{len-1} below */
#ifdef LA_SIMD_F32
  if (e->simd && nseg == 1) {
    const int64_t ldv = (int64_t)e->H * e->dv;
    la_simd_key_summary(e->simd, len, e->r, e->dv, w->phik, v + c0 * ldv + (int64_t)h * e->dv, ldv,
                        w->tmp);
    state_add_tmp(e, w, sz, m);
  } else
#endif
  {
    chunk_values(e, h, c0, len, v, w->vp);
    state_add(e, w, len, nseg, sz, m);
  }
  if (G && gr > 1) gate_rows_decay(e, w, G + (size_t)(len - 1) * e->r, sz, m);
  else if (G) *m += G[len - 1];
}

/* Tail summary of tokens [lo, hi) (global token0 + lo ...), combined onto (sz, m, f). */
/* accum_range for heads [h0, h1) together, chunk by chunk (§4.2 "Head groups"); head h's
 * summary is sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0]. */
static void accum_heads(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                        int64_t hi, const void *k, const void *v, double *sz, double *m,
                        int *f) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    for (int h = h0; h < h1; h++)
      accum_chunk(e, w, h, token0, c0, len, hi, k, v, sz + (size_t)(h - h0) * rsz,
                  m + (h - h0), f + (h - h0), NULL, 0);
  }
}

static void accum_range(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                        const void *k, const void *v, double *sz, double *m, int *f) {
  accum_heads(e, w, h, h + 1, token0, lo, hi, k, v, sz, m, f);
}

/* Apply the denominator policy (or the unnormalized scale) to row oi of w->o, token tok, and
 * write it to yi. lsc: the row's full log-scale (query + keys). */
static inline void finalize_row(la_engine e, la_work *w, int h, int64_t tok, const LA_REAL *oi,
                                double lsc, LA_REAL *yi) {
  const int dv = e->dv;
  const double den_s = (double)oi[dv];
  den_note(&w->stats, den_s, lsc);
  if (e->cfg.normalize) {
    int zero;
    double d = den_divisor(&e->cfg, &w->stats, den_s, lsc, tok, h, &zero);
    if (zero) {
      memset(yi, 0, sizeof(LA_REAL) * dv);
      return;
    }
    const double inv = 1.0 / d;
#ifdef LA_SIMD_F32
    if (e->simd) {
      e->simd->scale_row(dv, oi, inv, yi);
      return;
    }
#endif
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

/* finalize_row for len rows of w->o (w->aq[i] holds row i's log-scale) into out. On the
 * AVX-512 path, blocks of rows that are all in the common case -- normalized, log-scale 0,
 * a positive normal den_s, and a policy that then divides by den_s -- go through
 * LA_FINALIZE_PLAIN (the table's finalize_plain and its float64 form): the same divisor, bins
 * and extremes, 8 rows at a time (docs/design.md §1.1). */
static void finalize_rows(la_engine e, la_work *w, int h, int64_t token0, int64_t c0,
                                 int len, LA_REAL *out) {
  const int dv1 = e->dv + 1;
  const int64_t ld = (int64_t)e->H * e->dv;
  const LA_REAL *o = w->o;
#ifdef LA_FINALIZE_PLAIN
  const la_config *cfg = &e->cfg;
  const la_simd *t = LA_SIMD_ANY(e);
  const int plain = t && cfg->normalize &&
                    (cfg->den_policy == LA_DEN_ERROR || cfg->den_policy == LA_DEN_ZERO_EMPTY ||
                     (cfg->den_policy == LA_DEN_ADD && cfg->den_eps == 0));
#endif
  for (int i0 = 0; i0 < len; i0 += 64) {
    const int nb = len - i0 < 64 ? len - i0 : 64;
#ifdef LA_FINALIZE_PLAIN
    LA_REAL *y0 = out + (c0 + i0) * ld + (int64_t)h * e->dv;
    int32_t bin[64];
    double mn, mx;
    if (plain && LA_FINALIZE_PLAIN(t)(nb, e->dv, o + (size_t)i0 * dv1, w->aq + i0, y0, ld,
                                   den_bin16_t, bin, &mn, &mx)) {
      den_note_plain(&w->stats, nb, bin, mn, mx);
      continue;
    }
#endif
    for (int i = i0; i < i0 + nb; i++)
      finalize_row(e, w, h, token0 + c0 + i, o + (size_t)i * dv1, w->aq[i],
                   out + (c0 + i) * ld + (int64_t)h * e->dv);
  }
}

/* raw == NULL: finalize into out. Otherwise store the unfinalized rows [num_s | den_s] into
 * raw ([n, H, dv+1]) and their log-scales into lsc ([n, H]) for la_engine_correct. */
static void store_raw(la_engine e, la_work *w, int h, int64_t c0, int len, LA_REAL *raw,
                             double *lsc) {
  const int dv1 = e->dv + 1, H = e->H;
  for (int i = 0; i < len; i++) {
    const size_t ri = (size_t)(c0 + i) * H + h;
    memcpy(raw + ri * dv1, (const LA_REAL *)w->o + (size_t)i * dv1, sizeof(LA_REAL) * dv1);
    lsc[ri] = w->aq[i];
  }
}

/* sf = base + sz in float64, rounded once to the working precision (§4.7). sz is zero when
 * the range's own state is still empty (rescale_keys clears it). */
static void base_plus(size_t rsz, const double *base, const double *sz, LA_REAL *sf) {
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)(base[i] + sz[i]);
}

/* out (ld ldo) += M Z with M = tril(X Y^T), and with segi also zero where segi[j] != segi[i]
 * (pairs in different segments), for the generic products (float64, and float32 without the
 * AVX-512 kernels; the backward's pieces too). By LA_INTRA_BLOCKS blocks of rows: rows
 * [i0, i1) of X Y^T are computed for the columns j < i1 only, so the products skip most of
 * the upper triangle. X, Y: len x kx; Z: len x nz (ld ldz); A: len x len scratch. */
static void tril_product(la_engine e, la_work *w, int len, int kx, const LA_REAL *X,
                         const LA_REAL *Y, const LA_REAL *Z, int nz, int ldz, LA_REAL *out,
                         int ldo, LA_REAL *A, const int *segi) {
  const int nb = len >= 8 * LA_INTRA_BLOCKS ? LA_INTRA_BLOCKS : 1;
  for (int b = 0; b < nb; b++) {
    const int i0 = len * b / nb, i1 = len * (b + 1) / nb;
    LA_REAL *Ai = A + (size_t)i0 * len;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, i1 - i0, i1, kx, (LA_REAL)1,
            X + (size_t)i0 * kx, kx, Y, kx, (LA_REAL)0, Ai, len);
    for (int i = i0; i < i1; i++)
      for (int j = segi ? 0 : i + 1; j < i1; j++)
        if (j > i || segi[j] != segi[i]) A[(size_t)i * len + j] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, nz, i1, (LA_REAL)1, Ai, len, Z,
            ldz, (LA_REAL)1, out + (size_t)i0 * ldo, ldo);
  }
}

/* The tape (§4.4 "Tape", la_forward_taped): the prefix S the chunk's queries read, on its
 * log-scale m (S == NULL: none), and after the rows are finalized, each row's (fa, bf, M)
 * from w->o, w->aq (the full log-scale) and the key scale of its segment. c0 is a multiple
 * of C: the tape is filled by la_forward, token0 = 0. */
static void tape_chunk(la_engine e, int h, int64_t c0, const LA_REAL *S, double m) {
  const size_t rsz = (size_t)e->r * (e->dv + 1), idx = (size_t)(c0 / e->C) * e->H + h;
  e->tape->cm[idx] = S ? m : -INFINITY;
  if (S) memcpy((LA_REAL *)e->tape->cs + idx * rsz, S, sizeof(LA_REAL) * rsz);
}
static void tape_rows(la_engine e, la_work *w, int h, int64_t c0, int len) {
  const int dv = e->dv, dv1 = dv + 1;
  const LA_REAL *o = w->o;
  for (int i = 0; i < len; i++) {
    double *t = e->tape->rows + ((c0 + i) * e->H + h) * 3;
    den_coeffs(&e->cfg, (double)o[(size_t)i * dv1 + dv], w->aq[i], t, t + 1);
    t[2] = w->mseg[w->segi[i]];
  }
}

/* One chunk [c0, c0+len) of head h of apply_causal; hi ends the range (the prefetch stops
 * there). *base (may be NULL) is dropped when a segment starts in the chunk. sf (r x (dv+1),
 * working precision) receives base + sz rounded once; sfok: the previous chunk of this head
 * returned 1, so sf already holds it unless rescale_keys changes sz. Returns 1 when the chunk
 * leaves sf = base + sz updated (the AVX-512 path, which rounds the new state in the same
 * pass as it adds the chunk's summary: docs/design.md §4.2), else 0. The return depends on
 * the chunk's segments only, not on the head. */
static int causal_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0, int len,
                        int64_t hi, const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                        double *sz, double *m, int *f, LA_REAL *out, LA_REAL *raw, double *lsc,
                        const double **basep, LA_REAL *sf, int sfok, const double *G,
                        int gr) {
  const int r = e->r, dv1 = e->dv + 1, C = e->C;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *A = w->A, *o = w->o;
  const double *base = *basep;
  int reset;
  int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  if (reset) base = *basep = NULL; /* a segment starts here: what came before the range is gone */
  if (reset || nseg > 1) *f = 1;
  const int *segi = w->segi;
  features_pf(e, h, c0, len, hi, k, w->phik, w->ak, v, e->dv);
  if (rescale_keys(e, w, len, nseg, reset, sz, m, G != NULL)) sfok = 0;
  features_pf(e, h, c0, len, hi, q, w->phiq, w->aq, NULL, 0);
  const int folded = G && (gr > 1 ? decay_fold_rows(e, w, len, G, 0) : decay_fold(e, w, len, G));
#ifdef LA_SIMD_F32
  if (e->simd && nseg == 1) { /* the same products on the table's kernels */
    const int64_t ldv = (int64_t)e->H * e->dv;
    const int live = *m != -INFINITY || base;
    if (sfok) { /* sf = base + sz already, from the previous chunk's update */
    } else if (base) e->simd->sum_to_f32(rsz, base, sz, sf); /* base_plus, vectorized */
    else if (live) e->simd->to_f32(rsz, sz, sf);
    la_simd_causal_chunk(e->simd, len, r, e->dv, w->phiq, w->phik, v + c0 * ldv + (int64_t)h * e->dv,
                         ldv, live ? sf : NULL, o, w->tmp, w->kT, A, w->zf, C);
    for (int i = 0; i < len && !folded; i++) w->aq[i] += w->mseg[0];
    if (raw) store_raw(e, w, h, c0, len, raw, lsc);
    else finalize_rows(e, w, h, token0, c0, len, out);
    if (e->tape) {
      tape_chunk(e, h, c0, live ? sf : NULL, *m);
      tape_rows(e, w, h, c0, len);
    }
    *m = w->mseg[0]; /* state_add_tmp, and sf = base + sz for the next chunk */
    if (G && gr > 1) { /* decay_fold_rows: the rows' decay leaves any rounded sf behind */
      e->simd->add_to_f64(rsz, sz, w->tmp);
      gate_rows_decay(e, w, G + (size_t)(len - 1) * r, sz, m);
      return 0;
    }
    e->simd->add_round(rsz, sz, w->tmp, base, sf);
    if (G) *m += G[len - 1]; /* decay_fold: the state decays over the chunk */
    return 1;
  }
#else
  (void)C, (void)sfok;
#endif
  chunk_values(e, h, c0, len, v, w->vp);
  /* inter-chunk: O' = Phi_q (S|z) for the rows still in the state's segment */
  int n0 = 0;
  while (n0 < len && segi[n0] == 0) n0++;
  if (*m != -INFINITY || base) {
    const LA_REAL *S = sf;
    if (base) base_plus(rsz, base, sz, sf);
#ifdef LA_REAL_IS_F64
    else S = sz; /* float64: the state is already in the working precision */
#else
    else for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
#endif
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, dv1, r, (LA_REAL)1, w->phiq, r,
            S, dv1, (LA_REAL)0, o, dv1);
    if (n0 < len) memset(o + (size_t)n0 * dv1, 0, sizeof(LA_REAL) * (size_t)(len - n0) * dv1);
    if (e->tape) tape_chunk(e, h, c0, S, *m);
  } else {
    memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
    if (e->tape) tape_chunk(e, h, c0, NULL, *m);
  }
  /* intra-chunk: O' += (tril and same segment)(Phi_q Phi_k^T) [V|1] */
  tril_product(e, w, len, r, w->phiq, w->phik, w->vp, dv1, dv1, o, dv1, A, segi);
  for (int i = 0; i < len && !folded; i++) w->aq[i] += w->mseg[segi[i]];
  if (raw) store_raw(e, w, h, c0, len, raw, lsc);
  else finalize_rows(e, w, h, token0, c0, len, out);
  if (e->tape) tape_rows(e, w, h, c0, len);
  state_add(e, w, len, nseg, sz, m);
  if (G && gr > 1) gate_rows_decay(e, w, G + (size_t)(len - 1) * r, sz, m);
  else if (G) *m += G[len - 1]; /* decay_fold: the state decays over the chunk */
  if (nseg > 1) *basep = NULL;
  return 0;
}

static void apply_causal(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                         const void *q, const void *k, const void *v, double *sz, double *m,
                         int *f, void *out, void *raw, double *lsc, const double *base) {
  int sfok = 0;
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    sfok = causal_chunk(e, w, h, token0, c0, len, hi, q, k, v, sz, m, f, out, raw, lsc, &base,
                        w->sf, sfok, NULL, 0);
  }
}

/* apply_causal for heads [h0, h1) at once, chunk by chunk: head h's prefix is sz[(h - h0)
 * rsz], m[h - h0], f[h - h0]. A thread then reads (h1 - h0) adjacent head slices of every
 * token row instead of one strided slice (§4.2 "Head groups"). No base. Head h keeps its
 * working-precision state in e->sfall[h rsz] (the thread owns the head here). */
static void apply_causal_heads(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                               int64_t lo, int64_t hi, const void *q, const void *k,
                               const void *v, double *sz, double *m, int *f, void *out,
                               void *raw, double *lsc) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  int sfok = 0;
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    int next = 0;
    for (int h = h0; h < h1; h++) {
      const double *base = NULL;
      next = causal_chunk(e, w, h, token0, c0, len, hi, q, k, v, sz + (size_t)(h - h0) * rsz,
                          m + (h - h0), f + (h - h0), out, raw, lsc, &base,
                          (LA_REAL *)e->sfall + (size_t)h * rsz, sfok, NULL, 0);
    }
    sfok = next;
  }
}

/* Rows [c0, c0+len) of head h from its complete summary sf (working precision) and m. */
static void bidir_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0, int len,
                        int64_t hi, const LA_REAL *q, const LA_REAL *sf, double m,
                        LA_REAL *out) {
  const int r = e->r, dv1 = e->dv + 1;
  features_pf(e, h, c0, len, hi, q, w->phiq, w->aq, NULL, 0);
#ifdef LA_SIMD_F32
  if (e->simd) la_simd_query_apply(e->simd, len, r, e->dv, w->phiq, sf, w->o, w->zf);
  else
#endif
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r, sf,
          dv1, (LA_REAL)0, w->o, dv1);
  for (int i = 0; i < len; i++) w->aq[i] += m;
  finalize_rows(e, w, h, token0, c0, len, out);
}

static void apply_bidir(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                        const void *q, const double *sz, double m, void *out) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  LA_REAL *sf = w->sf;
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    bidir_chunk(e, w, h, token0, c0, len, hi, q, sf, m, out);
  }
}

/* apply_bidir for heads [h0, h1) together, chunk by chunk (§4.2 "Head groups"); head h's
 * summary is sf[h r (dv+1)] in the working precision, and m[h]. */
static void apply_bidir_heads(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                              int64_t lo, int64_t hi, const void *q, const void *sf,
                              const double *m, void *out) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    for (int h = h0; h < h1; h++)
      bidir_chunk(e, w, h, token0, c0, len, hi, q, (const LA_REAL *)sf + (size_t)h * rsz, m[h],
                  out);
  }
}

/* Overlap correction (§4): rows computed from a zero state get the prefix P added (only rows
 * before the block's first segment start),
 *   [num|den] = e^{a_q} (e^{M_i} raw_i + e^{P.m} phi_s(q_i)^T (P_S|P_z)),
 * on the common scale M' = max(M_i, P.m); then the denominator policy as usual. */
static void correct_rows(la_engine e, la_work *w, int h, int64_t token0, int64_t lo, int64_t hi,
                         const void *q_, const double *psz, double pm, const void *raw_,
                         const double *lsc, void *out_) {
  const LA_REAL *q = q_;
  const LA_REAL *raw = raw_;
  LA_REAL *out = out_;
  const int r = e->r, dv1 = e->dv + 1, C = e->C, H = e->H;
  /* rows from the first segment start on do not read the prefix */
  const int64_t cut = la_engine_segment_at_or_after(e, token0 > 0 ? token0 : 1);
  /* decay (§1.2): row i of the block reads the prefix decayed by gamma^(i+1), a log-scale
   * (i+1) ln gamma lower; without decay lam = 0 and pm is untouched */
  const double lam = e->dlog ? e->dlog[h] : 0.0;
  /* --gates: the prefix's log-scale lower by the log-gates of rows 0..i of the block (gs) */
  const double *gt = e->gated ? e->gates + (token0 - e->gate0) * H + h : NULL;
  double gs = 0.0;
  for (int64_t t = 0; gt && t < lo; t++) gs += lam + gt[t * H];
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *o = w->o;
  for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)psz[i];
  for (int64_t c0 = lo; c0 < hi; c0 += C) {
    int len = (int)(hi - c0 < C ? hi - c0 : C);
    chunk_features(e, h, c0, len, q, w->phiq, w->aq);
    if (pm != -INFINITY)
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r,
              sf, dv1, (LA_REAL)0, o, dv1);
    for (int i = 0; i < len; i++) {
      const size_t ri = (size_t)(c0 + i) * H + h;
      const LA_REAL *rw = raw + ri * dv1;
      LA_REAL *oi = o + (size_t)i * dv1;
      const double Mi = lsc[ri] - w->aq[i];
      if (gt) gs += lam + gt[(c0 + i) * H];
      if (pm == -INFINITY || token0 + c0 + i >= cut) { /* cut: a segment restarted */
        for (int j = 0; j < dv1; j++) oi[j] = rw[j];
        w->aq[i] = lsc[ri];
        continue;
      }
      const double pmi = gt ? pm + gs : lam != 0.0 ? pm + (double)(c0 + i + 1) * lam : pm;
      const double M = Mi > pmi ? Mi : pmi;
      const LA_REAL fr = (LA_REAL)exp(Mi - M), fp = (LA_REAL)exp(pmi - M);
      for (int j = 0; j < dv1; j++) oi[j] = fr * rw[j] + fp * oi[j];
      w->aq[i] += M;
    }
    finalize_rows(e, w, h, token0, c0, len, out);
  }
}


/* ---- Segmented bidirectional (§3, §4) ---- */

/* One head: every segment piece [a, b) of [lo, hi) gets its own summary (plus left/right at
 * the ends of the rank's range), then its queries are applied. */
static void apply_segmented(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                            const void *q_, const void *k_, const void *v_, const double *lsz,
                            double lm, const double *rsz_, double rm, void *out_) {
  const LA_REAL *q = q_;
  const LA_REAL *k = k_;
  const LA_REAL *v = v_;
  LA_REAL *out = out_;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  double *sz = w->wsz;
  for (int64_t a = 0; a < n;) {
    int64_t b = n;
    int64_t nxt = la_next_start_after(e, token0 + a);
    if (nxt - token0 < b) b = nxt - token0;
    double m = -INFINITY;
    int f = 0, zf = 0;
    memset(sz, 0, sizeof(double) * rsz);
    if (a == 0 && !la_is_segment_start(e, token0)) { /* the segment began on an earlier rank */
      memcpy(sz, lsz, sizeof(double) * rsz);
      m = lm;
    }
    /* keys of the piece; accum_range resets at a segment start, which is what we want */
    accum_range(e, w, h, token0, a, b, k, v, sz, &m, &f);
    if (b == n && rm != -INFINITY && !la_is_segment_start(e, token0 + n)) {
      int rf = 0;
      la_state_combine_head(sz, &m, &zf, rsz_, &rm, &rf, rsz); /* plain log-scaled sum */
    }
    apply_bidir(e, w, h, token0, a, b, q, sz, m, out);
    a = b;
  }
}

