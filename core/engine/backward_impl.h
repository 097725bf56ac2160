/* Backward kernels for one precision, a template included after chunk_impl.h and
 * window_impl.h by kernels_f32.c and kernels_f64.c; docs/design.md §4.4. With a_i = dL/dnum_i and b_i = dL/dden_i:
 *   dphi(q_i) = (S|z)_i [a_i; b_i],     dphi(k_j) = dS'_j [v_j; 1],     dv_j = dS_j^T phi(k_j),
 *   dS'_j = sum over the queries i that read key j of phi(q_i) [a_i; b_i]^T.
 * Work is done on "pieces": chunks of C tokens further split at segment starts, so each piece
 * lies in one segment and has one key log-scale M. In stabilized form (§2) the query side
 * needs no scale at all (dphi_s * phi_s is the true product); the key side carries e^{-M_i}
 * through a log-scaled suffix state (mu), and every factor e^{a_k + mu} is <= 1.
 * Per (token, head) the replay stores (fa, b, M) so that a_s = fa * G. */

/* Length of the piece starting at relative position p of [0, n) (global token0 + p). Pieces
 * are the intervals between consecutive points of {multiples of C} U {segment starts}, so the
 * replay and the reverse pass cut the block identically. */
static int piece_len(la_engine e, int64_t token0, int64_t p, int64_t n) {
  int64_t end = (p / e->C + 1) * e->C;
  if (end > n) end = n;
  int64_t nxt = la_next_start_after(e, token0 + p) - token0;
  if (nxt < end) end = nxt;
  return (int)(end - p);
}

/* AB row i = [fa g_i | b]. */
static inline void ab_row(la_engine e, const LA_REAL *gi, double fa, double b, LA_REAL *abi) {
  const int dv = e->dv;
#ifdef LA_SIMD_F32
  if (e->simd) e->simd->scale_row(dv, gi, fa, abi);
  else
#endif
  for (int j = 0; j < dv; j++) abi[j] = (LA_REAL)(fa * gi[j]);
  abi[dv] = (LA_REAL)b;
}

/* The coefficients of one row block (§4 "Gradients"): a_s = fa G and b for the denominator
 * policy, from o = [num_s | den_s] with per-row key scales M (lsc = aq + M, w->aq holding aq).
 * Writes AB = [a_s | b] and side = (fa, b, M) per row; notes denominators and violations. */
static void grad_coeffs(la_engine e, la_work *w, int h, int64_t tok0, int len,
                               const LA_REAL *g, const LA_REAL *o, const double *M, LA_REAL *AB,
                               la_side side) {
  const int dv = e->dv, dv1 = dv + 1, H = e->H;
  const la_config *cfg = &e->cfg;
  for (int i = 0; i < len; i++) {
    const int64_t tok = tok0 + i;
    const LA_REAL *gi = g + (int64_t)i * H * dv + (int64_t)h * dv, *oi = o + (size_t)i * dv1;
    const double den_s = (double)oi[dv], lsc = w->aq[i] + M[i];
    double fa = 0, b = 0;
    den_note(&w->stats, den_s, lsc);
    if (cfg->normalize) {
      int zero;
      double d = den_divisor(cfg, &w->stats, den_s, lsc, tok, h, &zero);
      if (!zero) {
        double gn = 0;
#ifdef LA_SIMD_F32
        if (e->simd) gn = e->simd->dot_f64(dv, gi, oi);
        else
#endif
        for (int j = 0; j < dv; j++) gn += (double)gi[j] * oi[j];
        fa = 1.0 / d;
        /* clamp below E: the divisor is the constant E, so no d/dden */
        int constant = cfg->den_policy == LA_DEN_CLAMP && !(den_s >= cfg->den_eps * exp(-lsc));
        b = constant ? 0.0 : -gn / (d * d);
      }
    } else {
      fa = exp(lsc);
      if (!isfinite(fa)) overflow_note(&w->stats, tok, h);
    }
    if (e->rout && tok >= e->rout_row0 && tok - e->rout_row0 < e->rout_n) {
      /* the output itself: num_s / d (normalized) or num_s e^{lsc} (unnormalized) */
      LA_REAL *out = (LA_REAL *)e->rout + ((tok - e->rout_row0) * H + h) * dv;
      for (int j = 0; j < dv; j++) out[j] = (LA_REAL)(fa * oi[j]);
    }
    ab_row(e, gi, fa, b, AB + (size_t)i * dv1);
    la_side_put(side, (int64_t)i * H + h, fa, b, M[i]);
  }
}

/* The generic intra-piece products (float64, and float32 without the AVX-512 kernels): the
 * lower ones by tril_product (chunk_impl.h); out (ld ldo) += triu(X Y^T) Z by LA_INTRA_BLOCKS
 * blocks of rows, rows [j0, j1) of X Y^T computed for the columns i >= j0 only and zeroed
 * below the diagonal. X, Y: len x kx; Z: len x nz (ld ldz); A: len x len scratch. */
static void triu_product(la_engine e, la_work *w, int len, int kx, const LA_REAL *X,
                         const LA_REAL *Y, const LA_REAL *Z, int nz, int ldz, LA_REAL *out,
                         int ldo, LA_REAL *A) {
  const int nb = len >= 8 * LA_INTRA_BLOCKS ? LA_INTRA_BLOCKS : 1;
  for (int b = 0; b < nb; b++) {
    const int j0 = len * b / nb, j1 = len * (b + 1) / nb;
    LA_REAL *Aj = A + (size_t)j0 * len + j0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, j1 - j0, len - j0, kx, (LA_REAL)1,
            X + (size_t)j0 * kx, kx, Y + (size_t)j0 * kx, kx, (LA_REAL)0, Aj, len);
    for (int j = j0; j < j1; j++)
      for (int i = j0; i < j; i++) A[(size_t)j * len + i] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, j1 - j0, nz, len - j0, (LA_REAL)1, Aj,
            len, Z + (size_t)j0 * ldz, ldz, (LA_REAL)1, out + (size_t)j0 * ldo, ldo);
  }
}

/* Forward replay of one piece [p0, p0+len) of head h: outputs are recomputed, the gradient
 * coefficients a, b formed, dq written, (fa, b, M) stored in side, and the rank's reverse-scan
 * element (the queries before the block's first segment start) accumulated into (rsz, rm).
 * Causal, or bidirectional from the complete summary (sz, m), which w->sf already holds. */
static void replay_piece(la_engine e, la_work *w, int h, int64_t token0, int64_t p0, int len,
                         int64_t n, const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                         const LA_REAL *g, double *sz, double *m, int *f, LA_REAL *dq,
                         la_side side, double *rsz_, double *rm, int64_t cut) {
  const int r = e->r, dv = e->dv, dv1 = dv + 1, H = e->H, bidir = e->cfg.mode == LA_BIDIRECTIONAL;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A, *o = w->o, *AB = w->ab, *tmp = w->tmp;
  LA_REAL *dphi = w->dphi;
  const int64_t ldk = (int64_t)H * e->dk;
  double M = bidir ? *m : 0.0, mprev = *m;
  features_at(e, h, p0, len, p0 + len, n, q, w->phiq, w->aq, g, dv);
#ifdef LA_SIMD_F32
  /* float32 on a kernel table (k5, simd.h): causal runs the forward's own chunk (kc; so the
   * replayed outputs are the forward's bits), bidirectional the forward's query rows; then
   * the table's dq products */
  const int k5 = e->simd != NULL, kc = k5 && !bidir;
  const LA_REAL *vrow = v + p0 * (int64_t)H * dv + (int64_t)h * dv;
#else
  const int kc = 0;
#endif
  if (!bidir && !kc) chunk_values(e, h, p0, len, v, w->vp); /* only the intra terms read it */
  if (!bidir) {
    if (la_is_segment_start(e, token0 + p0)) {
      memset(sz, 0, sizeof(double) * rsz);
      *m = mprev = -INFINITY;
      *f = 1;
    }
    features_at(e, h, p0, len, p0 + len, n, k, w->phik, w->ak, v, dv);
    for (int i = 0; i < len; i++) w->segi[i] = 0;
    rescale_keys(e, w, len, 1, 0, sz, m, 0);
    M = w->mseg[0];
#ifdef LA_SIMD_F32
    if (kc) e->simd->to_f32(rsz, sz, sf);
    else
#endif
    for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)sz[i];
  }
  /* [num | den] of the piece */
#ifdef LA_SIMD_F32
  if (kc) {
    la_simd_causal_chunk(e->simd, len, r, dv, w->phiq, w->phik, vrow, (ptrdiff_t)H * dv,
                         mprev != -INFINITY ? sf : NULL, o, tmp, w->kT, A, w->zf, e->C);
    state_add_tmp(e, w, sz, m); /* sz += the key summary; sf keeps the prefix for dq */
  } else if (k5 && mprev != -INFINITY) {
    la_simd_query_apply(e->simd, len, r, dv, w->phiq, sf, o, w->zf);
  } else
#endif
  if (mprev != -INFINITY)
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv1, r, (LA_REAL)1, w->phiq, r, sf,
            dv1, (LA_REAL)0, o, dv1);
  else
    memset(o, 0, sizeof(LA_REAL) * (size_t)len * dv1);
  if (!bidir && !kc) /* o += tril(Phi_q Phi_k^T) [V|1] */
    tril_product(e, w, len, r, w->phiq, w->phik, w->vp, dv1, dv1, o, dv1, A, NULL);
  for (int i = 0; i < len; i++) w->ak2[i] = M;
  grad_coeffs(e, w, h, token0 + p0, len, g + p0 * (int64_t)H * dv, o, w->ak2, AB,
                     la_side_rows(side, p0, H));
  /* dphi_s(q) = AB (S|z)^T (+ intra: tril(AB [V|1]^T) Phi_k) */
#ifdef LA_SIMD_F32
  if (k5)
    la_simd_bwd_dq(e->simd, len, r, dv, AB, mprev != -INFINITY ? sf : NULL, w->phik, vrow,
                   (ptrdiff_t)H * dv, dphi, A, w->tb, e->C, !bidir);
  else
#endif
  if (mprev != -INFINITY)
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, r, dv1, (LA_REAL)1, AB, dv1, sf, dv1,
            (LA_REAL)0, dphi, r);
  else
    memset(dphi, 0, sizeof(LA_REAL) * (size_t)len * r);
  if (!bidir && !kc) /* dphi += tril(AB [V|1]^T) Phi_k */
    tril_product(e, w, len, dv1, AB, w->vp, w->phik, r, r, dphi, r, A, NULL);
  LA_MAP_CHAIN(e->fm, h, len, q + p0 * ldk + (int64_t)h * e->dk, ldk, dphi,
                                   w->phiq, dq + p0 * ldk + (int64_t)h * e->dk, ldk, w->af);
  /* reverse-scan element: queries before the block's first segment start */
  if (token0 + p0 < cut) {
#ifdef LA_SIMD_F32
    if (k5) la_simd_bwd_query_sum(e->simd, len, r, dv, w->phiq, AB, tmp);
    else
#endif
    LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len, (LA_REAL)1, w->phiq, r, AB,
            dv1, (LA_REAL)0, tmp, dv1);
    double *wsz = w->wsz, wm = -M;
    for (size_t i = 0; i < rsz; i++) wsz[i] = (double)tmp[i];
    int f0 = 0, f1 = 0;
    la_state_combine_head(rsz_, rm, &f0, wsz, &wm, &f1, rsz);
  }
  if (!bidir && !kc) state_add(e, w, len, 1, sz, m);
}

/* bwd_replay of heads [h0, h1) together, piece by piece (causal only, or a single head: a
 * bidirectional piece reads w->sf; §4.2 "Head groups"); head h's arrays start at (h - h0) rsz,
 * its scalars at (h - h0). */
static void bwd_replay_heads(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                             int64_t n, const void *q, const void *k, const void *v,
                             const void *g, double *sz, double *m, int *f, void *dq,
                             la_side side, double *rsz_, double *rm, int64_t cut) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  for (int64_t p0 = 0; p0 < n;) {
    const int len = piece_len(e, token0, p0, n);
    for (int h = h0; h < h1; h++) {
      const size_t j = (size_t)(h - h0);
      replay_piece(e, w, h, token0, p0, len, n, q, k, v, g, sz + j * rsz, m + j, f + j, dq,
                   side, rsz_ ? rsz_ + j * rsz : NULL, rm ? rm + j : NULL, cut);
    }
    p0 += len;
  }
}

static void bwd_replay(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                       const void *q, const void *k, const void *v, const void *g, double *sz,
                       double *m, int *f, void *dq, la_side side, double *rsz_, double *rm,
                       int64_t cut) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  if (e->cfg.mode == LA_BIDIRECTIONAL)
    for (size_t i = 0; i < rsz; i++) ((LA_REAL *)w->sf)[i] = (LA_REAL)sz[i];
  bwd_replay_heads(e, w, h, h + 1, token0, n, q, k, v, g, sz, m, f, dq, side, rsz_, rm, cut);
}

/* The start of the piece that ends at p_end (> 0), walking backwards: the later of the chunk
 * grid point and the segment start. */
static int64_t piece_before(la_engine e, int64_t token0, int64_t p_end) {
  int64_t p0 = ((p_end - 1) / e->C) * e->C;
  int64_t ss = la_segment_start(e, token0 + p_end - 1) - token0;
  return ss > p0 ? ss : p0;
}

/* The rows of piece [p0, p0+len) of head h a reverse pass reads: Phi_k, Phi_q (raw, with
 * their log-scales), [V|1]; the previous piece's rows are prefetched, as the pass walks
 * backwards. */
static void reverse_features(la_engine e, la_work *w, int h, int64_t p0, int len,
                             const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                             const LA_REAL *g) {
  const int64_t c1 = p0 >= e->C ? p0 - e->C : (p0 > 0 ? 0 : -1);
  features_at(e, h, p0, len, c1, p0, k, w->phik, w->ak, v, e->dv);
  features_at(e, h, p0, len, c1, p0, q, w->phiq, w->aq, g, e->dv);
  chunk_values(e, h, p0, len, v, w->vp);
}

static void reverse_core(la_engine e, la_work *w, int h, int64_t token0, int64_t p0, int len,
                         const LA_REAL *k, double M, double *dsz, double *mu, LA_REAL *dk,
                         LA_REAL *dvo);

/* Reverse pass over one piece [p0, p0+len) of head h, from the suffix state (dsz, mu) of the
 * queries after it: dk and dv from the stored (fa, b, M). Causal (suffix sums with a causal
 * intra-piece mask) or bidirectional (dsz is the complete sum of the segment, no intra term). */
static void reverse_piece(la_engine e, la_work *w, int h, int64_t token0, int64_t p0, int len,
                          const LA_REAL *q, const LA_REAL *k, const LA_REAL *v,
                          const LA_REAL *g, la_side side, double *dsz, double *mu, LA_REAL *dk,
                          LA_REAL *dvo) {
  const int dv = e->dv, dv1 = dv + 1, H = e->H;
  const int64_t ldv = (int64_t)H * dv;
  double sd0[3];
  la_side_get(side, p0 * (int64_t)H + h, sd0);
  reverse_features(e, w, h, p0, len, q, k, v, g);
  for (int i = 0; i < len; i++) {
    double sd[3];
    la_side_get(side, (p0 + i) * (int64_t)H + h, sd);
    ab_row(e, g + (p0 + i) * ldv + (int64_t)h * dv, sd[0], sd[1], (LA_REAL *)w->ab + (size_t)i * dv1);
  }
  reverse_core(e, w, h, token0, p0, len, k, sd0[2], dsz, mu, dk, dvo);
}

/* The products of the reverse pass on a piece whose rows reverse_features and AB (w->ab)
 * hold, M the piece's key log-scale: dk and dv, and the suffix state advanced. */
static void reverse_core(la_engine e, la_work *w, int h, int64_t token0, int64_t p0, int len,
                         const LA_REAL *k, double M, double *dsz, double *mu, LA_REAL *dk,
                         LA_REAL *dvo) {
  const int r = e->r, dv = e->dv, dv1 = dv + 1, H = e->H, bidir = e->cfg.mode == LA_BIDIRECTIONAL;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A, *AB = w->ab, *tmp = w->tmp, *dphi = w->dphi;
  const int64_t ldk = (int64_t)H * e->dk, ldv = (int64_t)H * dv;
  /* common scale: mu_new = max(mu, -M); queries get e^{-M - mu_new}, keys e^{a_k + mu_new} */
  const double mu_new = (bidir || *mu == -INFINITY || -M > *mu) ? -M : *mu;
  if (!bidir && *mu != -INFINITY && *mu != mu_new) {
    double fct = exp(*mu - mu_new);
    for (size_t i = 0; i < rsz; i++) dsz[i] *= fct;
  }
  if (!bidir) *mu = mu_new;
  const LA_REAL fq = (LA_REAL)exp(-M - mu_new);
  if (fq != (LA_REAL)1)
    for (size_t i = 0; i < (size_t)len * r; i++) ((LA_REAL *)w->phiq)[i] *= fq;
  for (int i = 0; i < len; i++) {
    LA_REAL fk = (LA_REAL)(e->stabilized ? exp(w->ak[i] + mu_new) : 1.0);
    if (fk != (LA_REAL)1)
      for (int j = 0; j < r; j++) ((LA_REAL *)w->phik)[(size_t)i * r + j] *= fk;
  }
  /* inter: dphi_k = [V|1] dS'^T, dv = Keff dS ; intra: masked by i >= j */
  const int have = *mu != -INFINITY || bidir;
  LA_REAL *dvp = dvo + p0 * ldv + (int64_t)h * dv;
#ifdef LA_SIMD_F32
  if (e->simd) { /* the table's: the same products, triangles by tiles */
    if (have) e->simd->to_f32(rsz, dsz, sf);
    la_simd_bwd_reverse(e->simd, len, r, dv, AB, w->phiq, w->phik, w->vp, have ? sf : NULL, dphi, dvp,
                        (ptrdiff_t)ldv, tmp, A, w->kT, w->tb, e->C, !bidir);
    if (!bidir) {
      e->simd->add_to_f64(rsz, dsz, tmp);
      if (la_is_segment_start(e, token0 + p0)) {
        memset(dsz, 0, sizeof(double) * rsz);
        *mu = -INFINITY;
      }
    }
    LA_MAP_CHAIN(e->fm, h, len, k + p0 * ldk + (int64_t)h * e->dk, ldk, dphi, w->phik,
                 dk + p0 * ldk + (int64_t)h * e->dk, ldk, w->af);
    return;
  }
#endif
  if (have) {
    for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)dsz[i];
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, r, dv1, (LA_REAL)1, w->vp, dv1, sf,
            dv1, (LA_REAL)0, dphi, r);
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv, r, (LA_REAL)1, w->phik, r, sf,
            dv1, (LA_REAL)0, dvp, (int)ldv);
  } else {
    memset(dphi, 0, sizeof(LA_REAL) * (size_t)len * r);
    for (int i = 0; i < len; i++) memset(dvp + i * ldv, 0, sizeof(LA_REAL) * dv);
  }
  if (!bidir) {
    /* dphi_k += triu([V|1] AB^T) Phi_q: Sc[j][i] = [v_j;1].[a_i;b_i], i >= j */
    triu_product(e, w, len, dv1, w->vp, AB, w->phiq, r, r, dphi, r, A);
    /* dv += triu(Keff Qs^T) a: Km[j][i] = Keff_j . Qs_i, i >= j */
    triu_product(e, w, len, r, w->phik, w->phiq, AB, dv, dv1, dvp, (int)ldv, A);
    /* dS' += Qs^T AB, then drop it at a segment start */
    LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len, (LA_REAL)1, w->phiq, r, AB, dv1,
            (LA_REAL)0, tmp, dv1);
    for (size_t i = 0; i < rsz; i++) dsz[i] += (double)tmp[i];
    if (la_is_segment_start(e, token0 + p0)) {
      memset(dsz, 0, sizeof(double) * rsz);
      *mu = -INFINITY;
    }
  }
  LA_MAP_CHAIN(e->fm, h, len, k + p0 * ldk + (int64_t)h * e->dk, ldk, dphi,
                                   w->phik, dk + p0 * ldk + (int64_t)h * e->dk, ldk, w->af);
}

/* bwd_reverse of heads [h0, h1) together, piece by piece (§4.2 "Head groups"); head h's
 * suffix state is dsz[(h - h0) rsz], mu[h - h0]. */
static void bwd_reverse_heads(la_engine e, la_work *w, int h0, int h1, int64_t token0,
                              int64_t n, const void *q, const void *k, const void *v,
                              const void *g, la_side side, double *dsz, double *mu, void *dk,
                              void *dvo) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  for (int64_t p_end = n; p_end > 0;) {
    const int64_t p0 = piece_before(e, token0, p_end);
    for (int h = h0; h < h1; h++)
      reverse_piece(e, w, h, token0, p0, (int)(p_end - p0), q, k, v, g, side,
                    dsz + (size_t)(h - h0) * rsz, mu + (h - h0), dk, dvo);
    p_end = p0;
  }
}

/* Reverse pass of one head (the segmented backward's pieces). */
static void bwd_reverse(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                        const void *q, const void *k, const void *v, const void *g,
                        la_side side, double *dsz, double *mu, void *dk, void *dvo) {
  bwd_reverse_heads(e, w, h, h + 1, token0, n, q, k, v, g, side, dsz, mu, dk, dvo);
}

/* The backward from a tape (§4.4 "Tape"), causal, one piece [p0, p0+len) of head h in the
 * reverse walk: AB from the tape's rows, the forward's outputs and G (b = bf G.out); dq from
 * the prefix state the forward's chunk read (a piece that starts its chunk; any other piece
 * starts a segment) plus the intra-piece term, as replay_piece forms them; then dk, dv and the
 * suffix state as reverse_piece does. The rows are read once for the three gradients. */
static void tape_piece(la_engine e, la_work *w, int h, int64_t p0, int len, const LA_REAL *q,
                       const LA_REAL *k, const LA_REAL *v, const LA_REAL *g,
                       const LA_REAL *out, const la_tape_view *tape, LA_REAL *dq, double *dsz,
                       double *mu, LA_REAL *dk, LA_REAL *dvo) {
  const int r = e->r, dv = e->dv, dv1 = dv + 1, H = e->H;
  const size_t rsz = (size_t)r * dv1;
  const int64_t ldk = (int64_t)H * e->dk, ldv = (int64_t)H * dv;
  LA_REAL *AB = w->ab, *dphi = w->dphi, *A = w->A;
  reverse_features(e, w, h, p0, len, q, k, v, g);
  const double M = tape->rows[(p0 * H + h) * 3 + 2];
  for (int i = 0; i < len; i++) {
    const double *t = tape->rows + ((p0 + i) * H + h) * 3;
    const LA_REAL *gi = g + (p0 + i) * ldv + (int64_t)h * dv, *oi = out + (p0 + i) * ldv + (int64_t)h * dv;
    double gn = 0;
    if (t[1] != 0) {
#ifdef LA_SIMD_F32
      if (e->simd) gn = e->simd->dot_f64(dv, gi, oi);
      else
#endif
      for (int j = 0; j < dv; j++) gn += (double)gi[j] * oi[j];
    }
    ab_row(e, gi, t[0], t[1] * gn, AB + (size_t)i * dv1);
  }
  /* the keys on the piece's scale e^{a_k - M} for the intra term (rescale_keys' products);
   * reverse_core scales the raw rows itself */
  LA_REAL *phik = w->phik;
  if (e->stabilized) {
    phik = w->phif;
    for (int i = 0; i < len; i++) {
      const LA_REAL f = (LA_REAL)exp(w->ak[i] - M);
      for (int j = 0; j < r; j++) phik[(size_t)i * r + j] = ((LA_REAL *)w->phik)[(size_t)i * r + j] * f;
    }
  }
  const size_t ci = (size_t)(p0 / e->C) * H + h;
  const LA_REAL *S = p0 % e->C == 0 && tape->cm[ci] != -INFINITY
                         ? (const LA_REAL *)tape->cs + ci * rsz : NULL;
  /* dphi_s(q) = AB (S|z)^T + tril(AB [V|1]^T) Phi_k */
#ifdef LA_SIMD_F32
  if (e->simd)
    la_simd_bwd_dq(e->simd, len, r, dv, AB, S, phik, v + p0 * ldv + (int64_t)h * dv, ldv, dphi, A, w->tb,
                   e->C, 1);
  else
#endif
  {
    if (S)
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, r, dv1, (LA_REAL)1, AB, dv1, S, dv1,
              (LA_REAL)0, dphi, r);
    else
      memset(dphi, 0, sizeof(LA_REAL) * (size_t)len * r);
    tril_product(e, w, len, dv1, AB, w->vp, phik, r, r, dphi, r, A, NULL);
  }
  LA_MAP_CHAIN(e->fm, h, len, q + p0 * ldk + (int64_t)h * e->dk, ldk, dphi, w->phiq,
               dq + p0 * ldk + (int64_t)h * e->dk, ldk, w->af);
  reverse_core(e, w, h, 0, p0, len, k, M, dsz, mu, dk, dvo);
}

static void bwd_tape_heads(la_engine e, la_work *w, int h0, int h1, int64_t n, const void *q,
                           const void *k, const void *v, const void *g, const void *out,
                           const la_tape_view *tape, void *dq, double *dsz, double *mu,
                           void *dk, void *dvo) {
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  for (int64_t p_end = n; p_end > 0;) {
    const int64_t p0 = piece_before(e, 0, p_end);
    for (int h = h0; h < h1; h++)
      tape_piece(e, w, h, p0, (int)(p_end - p0), q, k, v, g, out, tape, dq,
                 dsz + (size_t)(h - h0) * rsz, mu + (h - h0), dk, dvo);
    p_end = p0;
  }
}

/* Bidirectional with segments, one head (§3, §4): every segment piece of the block gets its
 * summary (left/right added at the block's ends, as in the forward), the replay runs per piece,
 * and pieces that lie wholly inside the block are finished at once. The query sums of the
 * first and last piece are returned (head_rev, tail_rev) for the cross-rank scans; their
 * reverse pass runs later (bwd_segmented_ends). */
static void bwd_segmented(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                          const void *q_, const void *k_, const void *v_, const void *g_,
                          const double *lsz, double lm, const double *rsz_, double rm,
                          void *dq_, la_side side, double *hsz, double *hm, double *tsz,
                          double *tm, void *dk_, void *dvo_) {
  const LA_REAL *q = q_;
  const LA_REAL *k = k_;
  const LA_REAL *v = v_;
  const LA_REAL *g = g_;
  LA_REAL *dq = dq_;
  LA_REAL *dk = dk_;
  LA_REAL *dvo = dvo_;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int64_t ldk = (int64_t)e->H * e->dk, ldv = (int64_t)e->H * e->dv, ld1 = e->H;
  double *sz = w->wsz;
  double *qs = w->wsz2; /* the piece's query sum */
  for (int64_t a = 0; a < n;) {
    int64_t b = n, nxt = la_next_start_after(e, token0 + a);
    if (nxt - token0 < b) b = nxt - token0;
    const int first = a == 0 && !la_is_segment_start(e, token0);
    const int last = b == n && !la_is_segment_start(e, token0 + n);
    double m = -INFINITY, qm = -INFINITY;
    int f = 0, zf = 0, of = 0;
    memset(sz, 0, sizeof(double) * rsz);
    if (first) {
      memcpy(sz, lsz, sizeof(double) * rsz);
      m = lm;
    }
    accum_range(e, w, h, token0, a, b, k, v, sz, &m, &f);
    if (last && rm != -INFINITY) la_state_combine_head(sz, &m, &zf, rsz_, &rm, &of, rsz);
    /* replay of the piece's queries against the segment's summary */
    memset(qs, 0, sizeof(double) * rsz);
    int fdummy = 0;
    bwd_replay(e, w, h, token0 + a, b - a, q + a * ldk, k + a * ldk, v + a * ldv,
                      g + a * ldv, sz, &m, &fdummy, dq + a * ldk, la_side_rows(side, a, (int)ld1), qs, &qm,
                      INT64_MAX);
    if (first || last) {
      if (first) { memcpy(hsz, qs, sizeof(double) * rsz); *hm = qm; }
      if (last) { memcpy(tsz, qs, sizeof(double) * rsz); *tm = qm; }
    } else {
      bwd_reverse(e, w, h, token0 + a, b - a, q + a * ldk, k + a * ldk, v + a * ldv,
                         g + a * ldv, la_side_rows(side, a, (int)ld1), qs, &qm, dk + a * ldk, dvo + a * ldv);
    }
    a = b;
  }
}

/* The reverse pass of the first and last piece, once the query sums from the other ranks
 * (lrev from the left, rrev from the right) have arrived. */
static void bwd_segmented_ends(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                               const void *q_, const void *k_, const void *v_, const void *g_,
                               la_side side, const double *lrsz, double lrm, const double *rrsz,
                               double rrm, const double *hsz, double hm, const double *tsz,
                               double tm, void *dk_, void *dvo_) {
  const LA_REAL *q = q_;
  const LA_REAL *k = k_;
  const LA_REAL *v = v_;
  const LA_REAL *g = g_;
  LA_REAL *dk = dk_;
  LA_REAL *dvo = dvo_;
  const size_t rsz = (size_t)e->r * (e->dv + 1);
  const int64_t ldk = (int64_t)e->H * e->dk, ldv = (int64_t)e->H * e->dv, ld1 = e->H;
  double *sz = w->wsz;
  const int64_t b1 = la_next_start_after(e, token0) - token0;          /* end of the first piece */
  const int64_t aL = la_segment_start(e, token0 + n - 1) - token0;      /* start of the last piece */
  const int first = !la_is_segment_start(e, token0), last = !la_is_segment_start(e, token0 + n);
  for (int pass = 0; pass < 2; pass++) {
    int64_t a = pass == 0 ? 0 : (aL > 0 ? aL : 0), b = pass == 0 ? (b1 < n ? b1 : n) : n;
    int is_first = a == 0 && first, is_last = b == n && last;
    if (!is_first && !is_last) continue;
    if (pass == 1 && a == 0) break; /* one piece: done in pass 0 */
    double m = -INFINITY;
    int f0 = 0, f1 = 0;
    memset(sz, 0, sizeof(double) * rsz);
    la_state_combine_head(sz, &m, &f0, is_first ? hsz : tsz, is_first ? &hm : &tm, &f1, rsz);
    f0 = f1 = 0;
    if (is_first && lrm != -INFINITY) la_state_combine_head(sz, &m, &f0, lrsz, &lrm, &f1, rsz);
    f0 = f1 = 0;
    if (is_last && rrm != -INFINITY) la_state_combine_head(sz, &m, &f0, rrsz, &rrm, &f1, rsz);
    double *szc = w->wsz2; /* bwd_reverse advances its suffix state in place */
    memcpy(szc, sz, sizeof(double) * rsz);
    bwd_reverse(e, w, h, token0 + a, b - a, q + a * ldk, k + a * ldk, v + a * ldv,
                       g + a * ldv, la_side_rows(side, a, (int)ld1), szc, &m, dk + a * ldk, dvo + a * ldv);
  }
}

/* Query rows' features, [a | b] and key scales M for global tokens [a0, b0): own rows, or the
 * future halo (t >= token0 + n, rows from flo). phi gets phi_s(q) e^{X - M_i}. */
static void range_queries(la_engine e, int h, int64_t token0, int64_t n, int64_t a0,
                                 int64_t b0, const LA_REAL *q, const LA_REAL *g,
                                 const double *side, int64_t flo, const LA_REAL *fq,
                                 const LA_REAL *fg, const double *fside, double X, LA_REAL *phi,
                                 double *aq, LA_REAL *AB, double *M) {
  const int r = e->r, dv = e->dv, dv1 = dv + 1, H = e->H;
  const int64_t end = token0 + n;
  for (int64_t t0 = a0; t0 < b0;) {
    const int own = t0 < end;
    const int64_t t1 = own ? (b0 < end ? b0 : end) : b0, base = own ? token0 : flo;
    const LA_REAL *qq = own ? q : fq, *gg = own ? g : fg;
    const double *ss = own ? side : fside;
    const int len = (int)(t1 - t0), off = (int)(t0 - a0);
    chunk_features(e, h, t0 - base, len, qq, phi + (size_t)off * r, aq + off);
    for (int i = 0; i < len; i++) {
      const double *sd = ss + ((t0 - base + i) * H + h) * 3;
      const LA_REAL *gi = gg + (t0 - base + i) * (int64_t)H * dv + (int64_t)h * dv;
      LA_REAL *abi = AB + (size_t)(off + i) * dv1;
      for (int j = 0; j < dv; j++) abi[j] = (LA_REAL)(sd[0] * gi[j]);
      abi[dv] = (LA_REAL)sd[1];
      M[off + i] = sd[2];
      if (X != -INFINITY) {
        LA_REAL fct = (LA_REAL)exp(X - sd[2]);
        if (fct != (LA_REAL)1)
          for (int j = 0; j < r; j++) phi[(size_t)(off + i) * r + j] *= fct;
      }
    }
    t0 = t1;
  }
}

/* Summary of the query side over [a0, b0) (one segment): sum phi_s(q_i) [a_i; b_i]^T e^{-M_i},
 * returned on the log-scale m = max(-M_i). */
static void query_summary(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                                 int64_t a0, int64_t b0, const LA_REAL *q, const LA_REAL *g,
                                 const double *side, int64_t flo, const LA_REAL *fq,
                                 const LA_REAL *fg, const double *fside, double *sz, double *m) {
  const int r = e->r, dv1 = e->dv + 1;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *tmp = w->tmp;
  *m = -INFINITY;
  memset(sz, 0, sizeof(double) * rsz);
  for (int64_t a = a0; a < b0;) {
    int len = (int)(b0 - a < e->C ? b0 - a : e->C);
    range_queries(e, h, token0, n, a, a + len, q, g, side, flo, fq, fg, fside, -INFINITY,
                         w->phiq, w->aq, w->ab, w->ak2);
    double mu = -INFINITY;
    for (int i = 0; i < len; i++) mu = -w->ak2[i] > mu ? -w->ak2[i] : mu;
    for (int i = 0; i < len; i++) {
      LA_REAL fct = (LA_REAL)exp(-w->ak2[i] - mu);
      if (fct != (LA_REAL)1)
        for (int j = 0; j < r; j++) ((LA_REAL *)w->phiq)[(size_t)i * r + j] *= fct;
    }
    LA_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r, dv1, len, (LA_REAL)1, w->phiq, r, w->ab,
            dv1, (LA_REAL)0, tmp, dv1);
    double *wz = w->wsz2; /* not w->wsz: callers pass w->wsz as sz */
    for (size_t i = 0; i < rsz; i++) wz[i] = (double)tmp[i];
    la_wq_add(sz, m, wz, mu, rsz);
    a += len;
  }
}

/* Reverse pass of the causal sliding window (§3, §4 "Gradients"), one head: key j receives
 * from the queries i in [j, j+W-1] of its segment. Mirror of apply_window: key chunks from
 * last to first; per chunk the queries split into the chunk itself, a far edge of at most
 * 2C-2 rows (masked per key), and a two-stacks queue of query summaries in between; future
 * rows beyond the rank come as a halo [flo, fhi) plus one summary fmid of [token0+n, flo).
 * Pairs are scaled per segment of the chunk by X = max a_k: keys e^{a_k - X} <= 1,
 * queries e^{X - M_i}. */
static void bwd_window_reverse(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                               const void *q_, const void *k_, const void *v_, const void *g_,
                               const double *side, int64_t flo, int64_t fhi, const void *fq_,
                               const void *fg_, const double *fside, const double *fmidsz,
                               double fmidm, void *dk_, void *dvo_) {
  la_wqueue *Q = &w->wq; /* reserved by the driver (backward.c) */
  const LA_REAL *q = q_;
  const LA_REAL *k = k_;
  const LA_REAL *v = v_;
  const LA_REAL *g = g_;
  const LA_REAL *fq = fq_;
  const LA_REAL *fg = fg_;
  LA_REAL *dk = dk_;
  LA_REAL *dvo = dvo_;
  const int r = e->r, dv = e->dv, dv1 = dv + 1, C = e->C, H = e->H;
  const int64_t W = e->cfg.window, end = token0 + n;
  const int64_t ldk = (int64_t)H * e->dk, ldv = (int64_t)H * dv;
  const size_t rsz = (size_t)r * dv1;
  LA_REAL *sf = w->sf, *A = w->A, *Af = w->Af, *AB = w->ab, *dphi = w->dphi;
  double *sz = w->wsz, qm;
  const int64_t Nlim = fhi > end ? fhi : end; /* no query beyond the halo is ever read */
  la_wq_clear(Q);
  la_wq_set_decay(Q, 0.0); /* the backward has no decay (refused before) */
  /* queue at the last chunk: far-future pieces (farthest first), then the middle summary */
  const int64_t Elast = la_next_start_after(e, end - 1) < Nlim ? la_next_start_after(e, end - 1) : Nlim;
  if (Elast > end && fhi > end) {
    int64_t c0L = ((end - 1) / C) * C;
    if (c0L < token0) c0L = token0;
    int64_t hf = (c0L + W) / C * C;
    hf = hf < Elast ? hf : Elast;
    hf = hf > end ? hf : end;
    for (int64_t b = hf; b > flo;) {
      int64_t a = ((b - 1) / C) * C;
      if (a < flo) a = flo;
      double m;
      query_summary(e, w, h, token0, n, a, b, q, g, side, flo, fq, fg, fside, sz, &m);
      la_wq_push(Q, a, b, sz, m);
      b = a;
    }
  }
  if (flo > end && fmidm != -INFINITY) la_wq_push(Q, end, flo, fmidsz, fmidm);
  for (int64_t cend = end; cend > token0;) {
    int64_t c0 = ((cend - 1) / C) * C;
    if (c0 < token0) c0 = token0;
    const int len = (int)(cend - c0);
    int reset;
    const int nseg = la_seg_layout(e, c0, len, w->segi, &reset);
    const int *segi = w->segi;
    int64_t E = la_next_start_after(e, cend - 1);
    if (E > Nlim) E = Nlim;
    if (E == cend) la_wq_clear(Q); /* the queries after the chunk are another segment */
    int64_t hf = (c0 + W) / C * C;
    hf = hf < E ? hf : E;
    hf = hf > cend ? hf : cend;
    while (Q->count > 0 && Q->a[Q->head] >= hf) la_wq_pop(Q);
    int64_t fe = cend - 1 + W < E ? cend - 1 + W : E;
    const int nf = fe > hf ? (int)(fe - hf) : 0;
    int bl = 0;
    while (segi[bl] != nseg - 1) bl++;
    const int nl = len - bl;
    /* keys, scaled per segment by X_s = max a_k */
    chunk_features(e, h, c0 - token0, len, k, w->phik, w->ak);
    chunk_values(e, h, c0 - token0, len, v, w->vp);
    double *X = w->mseg;
    for (int s = 0; s < nseg; s++) X[s] = -INFINITY;
    for (int i = 0; i < len; i++) X[segi[i]] = w->ak[i] > X[segi[i]] ? w->ak[i] : X[segi[i]];
    if (!e->stabilized)
      for (int s = 0; s < nseg; s++) X[s] = 0;
    for (int i = 0; i < len; i++) {
      LA_REAL fct = (LA_REAL)exp(w->ak[i] - X[segi[i]]);
      if (fct != (LA_REAL)1)
        for (int j = 0; j < r; j++) ((LA_REAL *)w->phik)[(size_t)i * r + j] *= fct;
    }
    /* the chunk's queries, scaled per row by e^{X_seg - M_i} */
    range_queries(e, h, token0, n, c0, cend, q, g, side, flo, fq, fg, fside, -INFINITY,
                         w->phiq, w->aq, AB, w->ak2);
    for (int i = 0; i < len; i++) {
      LA_REAL fct = (LA_REAL)exp(X[segi[i]] - w->ak2[i]);
      if (fct != (LA_REAL)1)
        for (int j = 0; j < r; j++) ((LA_REAL *)w->phiq)[(size_t)i * r + j] *= fct;
    }
    LA_REAL *dvp = dvo + (c0 - token0) * ldv + (int64_t)h * dv;
    memset(dphi, 0, sizeof(LA_REAL) * (size_t)len * r);
    for (int i = 0; i < len; i++) memset(dvp + i * ldv, 0, sizeof(LA_REAL) * dv);
    const double XL = X[nseg - 1];
    la_wq_sum(Q, sz, &qm);
    if (qm != -INFINITY && nl > 0) { /* queue: queries [cend, hf) of the last segment */
      const double fct = exp(qm + XL);
      for (size_t i = 0; i < rsz; i++) sf[i] = (LA_REAL)(sz[i] * fct);
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, nl, r, dv1, (LA_REAL)1,
              (LA_REAL *)w->vp + (size_t)bl * dv1, dv1, sf, dv1, (LA_REAL)0, dphi + (size_t)bl * r, r);
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, nl, dv, r, (LA_REAL)1,
              (LA_REAL *)w->phik + (size_t)bl * r, r, sf, dv1, (LA_REAL)0, dvp + bl * ldv, (int)ldv);
    }
    if (nf > 0 && nl > 0) { /* far edge: queries [hf, fe), key j reads i <= j + W - 1 */
      range_queries(e, h, token0, n, hf, fe, q, g, side, flo, fq, fg, fside, XL, w->phif,
                           w->af, w->vf, w->ak2 + 0);
      /* Sc[j][i] = [v_j;1].[a_i;b_i] */
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, nl, nf, dv1, (LA_REAL)1,
              (LA_REAL *)w->vp + (size_t)bl * dv1, dv1, w->vf, dv1, (LA_REAL)0, Af, nf);
      for (int j = 0; j < nl; j++)
        for (int i = 0; i < nf; i++)
          if (hf + i > c0 + bl + j + W - 1) Af[(size_t)j * nf + i] = 0;
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, nl, r, nf, (LA_REAL)1, Af, nf, w->phif,
              r, (LA_REAL)1, dphi + (size_t)bl * r, r);
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, nl, nf, r, (LA_REAL)1,
              (LA_REAL *)w->phik + (size_t)bl * r, r, w->phif, r, (LA_REAL)0, Af, nf);
      for (int j = 0; j < nl; j++)
        for (int i = 0; i < nf; i++)
          if (hf + i > c0 + bl + j + W - 1) Af[(size_t)j * nf + i] = 0;
      LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, nl, dv, nf, (LA_REAL)1, Af, nf, w->vf,
              dv1, (LA_REAL)1, dvp + bl * ldv, (int)ldv);
    }
    /* intra: i >= j, i - j < W, same segment */
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, dv1, (LA_REAL)1, w->vp, dv1, AB,
            dv1, (LA_REAL)0, A, len);
    for (int j = 0; j < len; j++)
      for (int i = 0; i < len; i++)
        if (i < j || i - j >= W || segi[i] != segi[j]) A[(size_t)j * len + i] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, r, len, (LA_REAL)1, A, len, w->phiq,
            r, (LA_REAL)1, dphi, r);
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, r, (LA_REAL)1, w->phik, r, w->phiq,
            r, (LA_REAL)0, A, len);
    for (int j = 0; j < len; j++)
      for (int i = 0; i < len; i++)
        if (i < j || i - j >= W || segi[i] != segi[j]) A[(size_t)j * len + i] = 0;
    LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, dv, len, (LA_REAL)1, A, len, AB, dv1,
            (LA_REAL)1, dvp, (int)ldv);
    LA_MAP_CHAIN(e->fm, h, len, k + (c0 - token0) * ldk + (int64_t)h * e->dk,
                                     ldk, dphi, w->phik,
                                     dk + (c0 - token0) * ldk + (int64_t)h * e->dk, ldk, w->af);
    /* push the query summary of the chunk's first segment (it continues to earlier chunks) */
    if (nseg > 1) la_wq_clear(Q);
    int b0 = 0;
    while (b0 < len && segi[b0] == 0) b0++;
    double m;
    query_summary(e, w, h, token0, n, c0, c0 + b0, q, g, side, flo, fq, fg, fside, sz, &m);
    la_wq_push(Q, c0, c0 + b0, sz, m);
    cend = c0;
  }
}

/* The table's entry to query_summary on the block's own rows (la_backward_query_summary). */
static void query_summary_rows(la_engine e, la_work *w, int h, int64_t token0, int64_t n,
                               int64_t a, int64_t b, const void *q, const void *g,
                               const double *side, double *sz, double *m) {
  query_summary(e, w, h, token0, n, a, b, q, g, side, token0 + n, NULL, NULL, NULL, sz, m);
}
