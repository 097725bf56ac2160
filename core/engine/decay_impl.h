/* Decayed chunk kernels for one precision, a template included after chunk_impl.h by
 * kernels_f32.c and kernels_f64.c (docs/design.md §1.2 "Decay", "The chunkwise form"). The
 * products are the generic ones (LA_GEMM: OpenBLAS, or the float32 table's GEMM), never the
 * fused chunk kernels of the SIMD tables, which have no decay. Chunk [c0, c0+len) of head h,
 * lambda = ln gamma_h, P[d] = gamma_h^d (e->dpow), rows i, j = 0..len-1 of the chunk:
 *   forward:  O'_i = P[i+1] Phi_q,i (S|z) + sum_{j<=i} P[i-j] (Phi_q,i . Phi_k,j) [V|1]_j
 *             (S|z) <- P[len] (S|z) + sum_j P[len-1-j] Phi_k,j^T [V|1]_j
 *   reverse:  O'_i = P[len-i] Phi_q,i (R|z) + sum_{j>i} P[j-i] (Phi_q,i . Phi_k,j) [V|1]_j
 *             (R|z) <- P[len] (R|z) + sum_j P[j] Phi_k,j^T [V|1]_j
 * pairs only within one segment. The decay of the state is folded into its key log-scale m
 * (§1.2), so every factor applied is <= 1. Domain: finite inputs, gamma_h in (0, 1].
 * With --gates (forward only, §1.2 "Gates") the powers become the chunk's cumulative log-gates
 * G_i = sum_{l<=i} (lambda + g_l): P[i-j] -> e^{G_i - G_j}, P[i+1] -> e^{G_i}, and the update's
 * (len-1-j) lambda -> G_{len-1} - G_j, len lambda -> G_{len-1} (gate_cum). */

/* The cumulative log-gates of rows [0, len) of head h from global token t0 (G_i above) in
 * w->gc, or NULL without --gates (the powers P then serve, bitwise as before). */
static const double *gate_cum(la_engine e, la_work *w, int h, int64_t t0, int len) {
  if (!e->gated) return NULL;
  const double lam = e->dlog[h], *g = e->gates + (t0 - e->gate0) * e->H + h;
  double s = 0.0;
  for (int i = 0; i < len; i++) {
    s += lam + g[(size_t)i * e->H];
    w->gc[i] = s;
  }
  return w->gc;
}

/* The scales of a decayed chunk (§1.2, §2.2): M[s] = max a_k over segment s's keys, and for
 * segment sseg (the one that continues the state: 0 forward, nseg - 1 in reverse) also the
 * state's m; the state is brought to M[sseg]. Every map takes part, unstabilized ones with
 * a_k = 0, since the decay moves m. reset: the state is dropped first. Keys are not scaled. */
static void decay_scales(la_engine e, la_work *w, int len, int nseg, int sseg, int reset,
                         double *sz, double *m) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  double *M = w->mseg;
  if (reset || *m == -INFINITY) {
    memset(sz, 0, sizeof(double) * rsz);
    *m = -INFINITY;
  }
  for (int s = 0; s < nseg; s++) M[s] = -INFINITY;
  M[sseg] = *m;
  for (int i = 0; i < len; i++) M[w->segi[i]] = w->ak[i] > M[w->segi[i]] ? w->ak[i] : M[w->segi[i]];
  if (*m != -INFINITY && *m != M[sseg]) {
    const double f = exp(*m - M[sseg]);
    for (size_t i = 0; i < rsz; i++) sz[i] *= f;
  }
  if (*m != -INFINITY) *m = M[sseg];
}

/* dst row i = src row i * e^{x_i}, rows of r entries (x_i <= 0). */
static void decay_scale_rows(int len, int r, const LA_REAL *src, LA_REAL *dst, const double *x) {
  for (int i = 0; i < len; i++) {
    const LA_REAL f = (LA_REAL)exp(x[i]);
    for (int j = 0; j < r; j++) dst[(size_t)i * r + j] = src[(size_t)i * r + j] * f;
  }
}

/* out += (D o (X Y^T)) Z over the pairs of one segment: rev = 0, j <= i and D_ij = P[i-j];
 * rev = 1, j > i and D_ij = P[j-i]. X, Y: len x r; Z: len x (dv+1). */
static void decay_intra(la_engine e, la_work *w, int len, const LA_REAL *X, const LA_REAL *Y,
                        const LA_REAL *Z, LA_REAL *out, const double *P, const double *G,
                        int rev) {
  const int r = e->r, dv1 = e->dv + 1;
  const int *segi = w->segi;
  LA_REAL *A = w->A;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, X, r, Y, r,
          (LA_REAL)0, A, len);
  if (G) { /* gated (forward): e^{G_i - G_j} as e^{G_i} e^{-G_j} while both stay normal and
            * finite (the chunk's G >= -700), else one exp per pair */
    double *E = w->gc + len, *F = w->gc + 2 * len;
    const int split = G[len - 1] >= -700.0;
    for (int i = 0; split && i < len; i++) E[i] = exp(G[i]), F[i] = exp(-G[i]);
    for (int i = 0; i < len; i++)
      for (int j = 0; j < len; j++) {
        LA_REAL *a = A + (size_t)i * len + j;
        const int keep = j <= i && segi[j] == segi[i];
        *a = keep ? (LA_REAL)((double)*a * (split ? E[i] * F[j] : exp(G[i] - G[j]))) : (LA_REAL)0;
      }
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len, Z, dv1,
            (LA_REAL)1, out, dv1);
    return;
  }
  for (int i = 0; i < len; i++)
    for (int j = 0; j < len; j++) {
      LA_REAL *a = A + (size_t)i * len + j;
      const int keep = (rev ? j > i : j <= i) && segi[j] == segi[i];
      *a = keep ? (LA_REAL)((double)*a * P[rev ? j - i : i - j]) : (LA_REAL)0;
    }
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, len, (LA_REAL)1, A, len, Z, dv1,
          (LA_REAL)1, out, dv1);
}

/* O' rows [i0, i1) = fac_i Phi_q,i (S|z) (working-precision copy of the state), the other
 * rows 0; fac_i = P[i+1] forward, P[len-i] in reverse. m = -inf: all rows 0. */
static void decay_inter(la_engine e, la_work *w, int len, int i0, int i1, const double *sz,
                        double m, const double *P, const double *G, int rev) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *o = w->o;
  memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
  if (m == -INFINITY || i1 <= i0) return;
#ifdef LA_REAL_IS_F64
  const LA_REAL *S = sz;
  (void)rsz;
#else
  LA_REAL *S = w->sf;
  for (size_t i = 0; i < rsz; i++) S[i] = (LA_REAL)sz[i];
#endif
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, dv1, r, (LA_REAL)1,
          (const LA_REAL *)w->phiq + (size_t)i0 * r, r, S, dv1, (LA_REAL)0,
          o + (size_t)i0 * dv1, dv1);
  for (int i = i0; i < i1; i++) {
    const LA_REAL f = (LA_REAL)(G ? exp(G[i]) : P[rev ? len - i : i + 1]);
    for (int j = 0; j < dv1; j++) o[(size_t)i * dv1 + j] *= f;
  }
}

/* (S|z) <- decayed state + keys [j0, j1) of the chunk, at the new scale (§1.2):
 *   Ms = m + len lambda (the state decayed over the chunk; -inf if dropped),
 *   Mn = max(Ms, max_j a_k,j + e_j lambda),  e_j = len-1-j forward, j in reverse,
 *   (S|z) <- e^{Ms - Mn} (S|z) + sum_j e^{a_k,j + e_j lambda - Mn} phi_s(k_j)^T [V|1]_j.
 * keep = 0: the state is dropped (a segment boundary inside the chunk). w->phik holds the
 * unscaled phi_s rows; they are scaled here. */
static void decay_update(la_engine e, la_work *w, int len, int j0, int j1, int keep, double lam,
                         const double *G, int rev, double *sz, double *m) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t rsz = (size_t)r * dv1;
  double *x = w->ak2;
  const double Ms = keep && *m != -INFINITY ? *m + (G ? G[len - 1] : len * lam) : -INFINITY;
  double Mn = Ms;
  for (int j = j0; j < j1; j++) {
    x[j] = w->ak[j] + (G ? G[len - 1] - G[j] : (rev ? j : len - 1 - j) * lam);
    Mn = x[j] > Mn ? x[j] : Mn;
  }
  if (Ms == -INFINITY) memset(sz, 0, sizeof(double) * rsz);
  else if (Ms != Mn) {
    const double f = exp(Ms - Mn);
    for (size_t i = 0; i < rsz; i++) sz[i] *= f;
  }
  for (int j = j0; j < j1; j++) x[j] -= Mn;
  LA_REAL *pk = (LA_REAL *)w->phik + (size_t)j0 * r;
  decay_scale_rows(j1 - j0, r, pk, pk, x + j0);
  LA_REAL *tmp = w->tmp;
  LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, j1 - j0, (LA_REAL)1, pk, r,
          (const LA_REAL *)w->vp + (size_t)j0 * dv1, dv1, (LA_REAL)0, tmp, dv1);
  for (size_t i = 0; i < rsz; i++) sz[i] += (double)tmp[i];
  *m = Mn;
}

/* From the keys' features the caller put in w->phik (unscaled, with a_k): the keys as the
 * chunk's pairs see them, e^{a_k - M_seg} phi_s(k), in w->dphi; then phi_s(q), a_q; [V|1]. */
static void decay_inputs(la_engine e, la_work *w, int h, int64_t c0, int len, int64_t pf,
                         int64_t hi, const LA_REAL *q, const LA_REAL *v) {
  double *x = w->ak2;
  features_at(e, h, c0, len, pf, hi, q, w->phiq, w->aq, NULL, 0);
  for (int i = 0; i < len; i++) x[i] = w->ak[i] - w->mseg[w->segi[i]];
  decay_scale_rows(len, e->r, w->phik, w->dphi, x);
  chunk_values(e, h, c0, len, v, w->vp);
}

/* The unfinalized rows of the chunk split for the bidirectional passes: the numerators into
 * out's own rows ([n, H, dv]), the denominators into den ([n, H]) and the log-scales into lsc;
 * the reverse pass finalizes out in place. Same precision as store_raw, a tenth of its extra
 * memory at dv = 64. */
static void decay_store(la_engine e, la_work *w, int h, int64_t c0, int len, LA_REAL *out,
                        LA_REAL *den, double *lsc) {
  const int dv = e->dv, dv1 = dv + 1, H = e->H;
  for (int i = 0; i < len; i++) {
    const size_t ri = (size_t)(c0 + i) * H + h;
    memcpy(out + ri * dv, (const LA_REAL *)w->o + (size_t)i * dv1, sizeof(LA_REAL) * dv);
    den[ri] = ((const LA_REAL *)w->o)[(size_t)i * dv1 + dv];
    lsc[ri] = w->aq[i];
  }
}

/* One forward chunk; raw == NULL: finalize into out, else store the unfinalized rows (raw's
 * [n, H, dv+1] layout, or with den the split one of decay_store). */
static void decay_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0, int len,
                        int64_t hi, const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                        double *sz, double *m, int *f, LA_REAL *out, LA_REAL *raw,
                        double *lsc, LA_REAL *den) {
  const double *P = e->dpow + (size_t)h * (e->C + 1);
  int reset;
  const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  if (reset || nseg > 1) *f = 1;
  features_at(e, h, c0, len, -1, hi, k, w->phik, w->ak, v, e->dv); /* checks v too */
  decay_scales(e, w, len, nseg, 0, reset, sz, m);
  decay_inputs(e, w, h, c0, len, c0 + e->C, hi, q, v);
  int n0 = 0; /* rows still in the state's segment */
  while (n0 < len && w->segi[n0] == 0) n0++;
  const double *G = gate_cum(e, w, h, token0 + c0, len);
  decay_inter(e, w, len, 0, n0, sz, *m, P, G, 0);
  decay_intra(e, w, len, w->phiq, w->dphi, w->vp, w->o, P, G, 0);
  for (int i = 0; i < len; i++) w->aq[i] += w->mseg[w->segi[i]];
  if (den) decay_store(e, w, h, c0, len, out, den, lsc);
  else if (raw) store_raw(e, w, h, c0, len, raw, lsc);
  else finalize_rows(e, w, h, token0, c0, len, out);
  int b = 0; /* the state continues with the chunk's last segment */
  while (w->segi[b] != nseg - 1) b++;
  decay_update(e, w, len, b, len, nseg == 1, e->dlog[h], G, 0, sz, m);
}

/* The chunk's cumulative log-decay G_i in w->gc ((i+1) ln gamma_h, or gate_cum's), or NULL
 * when -G_{len-1} exceeds LA_DECAY_SPLIT or a tape is recorded: the chunk then runs on
 * decay_chunk's generic products. */
static const double *decay_split(la_engine e, la_work *w, int h, int64_t t0, int len) {
  if (e->tape) return NULL;
  const double *G = gate_cum(e, w, h, t0, len);
  if (!G) {
    for (int i = 0; i < len; i++) w->gc[i] = (i + 1) * e->dlog[h];
    G = w->gc;
  }
  return -G[len - 1] <= LA_DECAY_SPLIT ? G : NULL;
}

/* Causal rows [lo, hi) of heads [h0, h1) from their decayed prefixes (sz[(h - h0) r (dv+1)],
 * m[h - h0], f[h - h0]), which advance to the last row (docs/design.md §1.2), chunk by chunk
 * and head by head: the undecayed chunk with the decay folded into its rows (causal_chunk,
 * decay_fold) where decay_split allows, else decay_chunk. */
static void decay_causal(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                         int64_t hi, const void *q, const void *k, const void *v, double *sz,
                         double *m, int *f, void *out, void *raw, double *lsc) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  int sfok = 0; /* e->sfall holds every head's state (causal_chunk), as in apply_causal_heads */
  for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
    const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
    int next = 1;
    for (int h = h0; h < h1; h++) {
      double *szh = sz + (size_t)(h - h0) * rsz, *mh = m + (h - h0);
      int *fh = f + (h - h0);
      const double *G = decay_split(e, w, h, token0 + c0, len);
      const double *base = NULL;
      if (G)
        next &= causal_chunk(e, w, h, token0, c0, len, hi, q, k, v, szh, mh, fh, out, raw, lsc,
                             &base, (LA_REAL *)e->sfall + (size_t)h * rsz, sfok, G, 1);
      else {
        decay_chunk(e, w, h, token0, c0, len, hi, q, k, v, szh, mh, fh, out, raw, lsc, NULL);
        next = 0; /* sfall's copy of this head is stale */
      }
    }
    sfok = next;
  }
}

/* One chunk of the decayed keys pass of head h (forward): the undecayed keys pass with the
 * decay folded into the keys (accum_chunk) where decay_split allows, else per chunk the state
 * decays over the chunk and takes the keys of its last segment, as in decay_chunk, with no
 * query read. A segment start drops the state and sets the flag. */
static void decay_accum_chunk(la_engine e, la_work *w, int h, int64_t token0, int64_t c0,
                              int len, int64_t hi, const void *k, const void *v, double *sz,
                              double *m, int *f) {
  const double *G = decay_split(e, w, h, token0 + c0, len);
  if (G) {
    accum_chunk(e, w, h, token0, c0, len, hi, k, v, sz, m, f, G, 1);
    return;
  }
  int reset;
  const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  if (reset || nseg > 1) *f = 1;
  if (reset) {
    memset(sz, 0, sizeof(double) * (size_t)e->r * (e->dv + 1));
    *m = -INFINITY;
  }
  features_at(e, h, c0, len, -1, hi, (const LA_REAL *)k, w->phik, w->ak, v, e->dv);
  chunk_values(e, h, c0, len, (const LA_REAL *)v, w->vp);
  int b = 0; /* the state continues with the chunk's last segment */
  while (w->segi[b] != nseg - 1) b++;
  decay_update(e, w, len, b, len, nseg == 1, e->dlog[h], gate_cum(e, w, h, token0 + c0, len), 0,
               sz, m);
}

/* The summaries of the keys of rows [lo, hi) of heads [h0, h1) (docs/design.md §4.1, §1.2),
 * head h's in sz[(h - h0) r (dv+1)], m[h - h0], f[h - h0]: forward, chunk by chunk with the
 * heads together (decay_accum_chunk). rev = 1: head by head, the reverse summary as of token
 * lo, sum_j gamma^(j - lo) phi(k_j)^T [V|1]_j over the keys before the first segment start
 * after lo, the chunks walked from the last with decay_chunk_rev's update; the flag is set
 * when a segment starts in the rows (it hides the keys after them from the rows before). */
static void decay_accum(la_engine e, la_work *w, int h0, int h1, int64_t token0, int64_t lo,
                        int64_t hi, const void *k, const void *v, int rev, double *sz_,
                        double *m_, int *f_) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  if (!rev) {
    for (int64_t c0 = lo; c0 < hi; c0 += e->C) {
      const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
      for (int h = h0; h < h1; h++)
        decay_accum_chunk(e, w, h, token0, c0, len, hi, k, v, sz_ + (size_t)(h - h0) * rsz,
                          m_ + (h - h0), f_ + (h - h0));
    }
    return;
  }
  for (int h = h0; h < h1; h++) {
    double *sz = sz_ + (size_t)(h - h0) * rsz, *m = m_ + (h - h0);
    int *f = f_ + (h - h0);
    for (int64_t c0 = lo + (hi - 1 - lo) / e->C * e->C; c0 >= lo; c0 -= e->C) {
      const int len = (int)(hi - c0 < e->C ? hi - c0 : e->C);
      int reset;
      const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
      if (reset || nseg > 1) *f = 1;
      if (la_is_segment_start(e, token0 + c0 + len)) { /* the keys after are another segment */
        memset(sz, 0, sizeof(double) * rsz);
        *m = -INFINITY;
      }
      features_at(e, h, c0, len, -1, hi, (const LA_REAL *)k, w->phik, w->ak, v, e->dv);
      chunk_values(e, h, c0, len, (const LA_REAL *)v, w->vp);
      int b0 = 0; /* the summary continues with the chunk's first segment */
      while (b0 < len && w->segi[b0] == 0) b0++;
      decay_update(e, w, len, 0, b0, nseg == 1, e->dlog[h], NULL, 1, sz, m);
    }
  }
}

/* One reverse chunk (bidirectional): the keys after each row, added to the forward pass's
 * unfinalized rows (numerators in out, den, lsc; decay_store) on a common log-scale, then
 * finalized into out. (sz, m) is the
 * suffix state as of token c0 + len. */
static void decay_chunk_rev(la_engine e, la_work *w, int h, int64_t token0, int64_t c0,
                            int len, const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                            double *sz, double *m, LA_REAL *out, const LA_REAL *den,
                            const double *lsc) {
  const double *P = e->dpow + (size_t)h * (e->C + 1);
  const int dv1 = e->dv + 1, H = e->H;
  int reset;
  const int nseg = la_seg_layout(e, token0 + c0, len, w->segi, &reset);
  /* a segment that starts right after the chunk hides the suffix */
  const int cut = la_is_segment_start(e, token0 + c0 + len);
  features_at(e, h, c0, len, c0 - e->C, c0 + len, k, w->phik, w->ak, NULL, 0);
  decay_scales(e, w, len, nseg, nseg - 1, cut, sz, m);
  decay_inputs(e, w, h, c0, len, c0 - e->C, c0 + len, q, v);
  int bl = len; /* rows of the last segment read the suffix */
  while (bl > 0 && w->segi[bl - 1] == nseg - 1) bl--;
  decay_inter(e, w, len, bl, len, sz, *m, P, NULL, 1);
  decay_intra(e, w, len, w->phiq, w->dphi, w->vp, w->o, P, NULL, 1);
  LA_REAL *o = w->o;
  const int dv = e->dv;
  for (int i = 0; i < len; i++) { /* forward (out, den, lsc) + reverse, on M = max of the two */
    const size_t ri = (size_t)(c0 + i) * H + h;
    const double a = w->aq[i] + w->mseg[w->segi[i]], b = lsc[ri];
    const double M = a > b ? a : b;
    const LA_REAL fo = (LA_REAL)exp(a - M), fr = (LA_REAL)exp(b - M);
    for (int j = 0; j < dv1; j++)
      o[(size_t)i * dv1 + j] =
          fo * o[(size_t)i * dv1 + j] + fr * (j < dv ? out[ri * dv + j] : den[ri]);
    w->aq[i] = M;
  }
  finalize_rows(e, w, h, token0, c0, len, out);
  int b0 = 0; /* the suffix continues with the chunk's first segment */
  while (b0 < len && w->segi[b0] == 0) b0++;
  decay_update(e, w, len, 0, b0, nseg == 1, e->dlog[h], NULL, 1, sz, m);
}

/* Bidirectional rows [0, n) of head h (token0 the first global token): the forward pass
 * (keys j <= i) unfinalized into out, den and lsc, then the reverse pass (keys j > i) adds and
 * finalizes. pre
 * (sz, m; NULL: none) is the decayed summary of the keys before the block, suf that of the
 * keys after it as of token token0 + n (the reverse summary; §1.2 "Across ranks"). */
static void decay_bidir(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                        const void *q, const void *k, const void *v, void *den, double *lsc,
                        void *out, const double *pre, double pre_m, const double *suf,
                        double suf_m) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  double m = pre ? pre_m : -INFINITY;
  int f = 0;
  if (pre) memcpy(w->wsz2, pre, sizeof(double) * rsz);
  else memset(w->wsz2, 0, sizeof(double) * rsz);
  for (int64_t c0 = 0; c0 < n; c0 += e->C) {
    const int len = (int)(n - c0 < e->C ? n - c0 : e->C);
    decay_chunk(e, w, h, token0, c0, len, n, q, k, v, w->wsz2, &m, &f, out, NULL, lsc, den);
  }
  m = suf ? suf_m : -INFINITY;
  if (suf) memcpy(w->wsz, suf, sizeof(double) * rsz);
  else memset(w->wsz, 0, sizeof(double) * rsz);
  for (int64_t c0 = (n - 1) / e->C * e->C; c0 >= 0; c0 -= e->C) {
    const int len = (int)(n - c0 < e->C ? n - c0 : e->C);
    decay_chunk_rev(e, w, h, token0, c0, len, q, k, v, w->wsz, &m, out, den, lsc);
  }
}
