/* The backward with decay (docs/design.md §1.2 "The backward"), causal or bidirectional, every
 * map, on one process or on a rank's rows of a sharded sequence (la_decay_ranks: the dist
 * library's forward across ranks, dist/backward.c). With pair weights w_ij = gamma^(i-j) (j <= i, same segment),
 * out_i = num_i / D(den_i) and c_i = [G_i / D_i | -(G_i . out_i) D'(den_i) / D_i] (dv + 1):
 *   dphi(q_i) = sum_{j<=i} w_ij ([v_j|1] . c_i) phi(k_j)     causal
 *   dphi(k_j) = sum_{i>=j} w_ij ([v_j|1] . c_i) phi(q_i)     anti-causal
 *   dv_j      = sum_{i>=j} w_ij (phi(q_i) . phi(k_j)) c_i[:dv] anti-causal
 * Each is a decayed linear attention without normalization on features given as they are
 * (the precomputed map), so they run on the engine's own decayed chunk kernels: the
 * anti-causal ones on the sequence reversed in time (w_ij depends on i - j only, and the
 * reversed segments are the same pieces). num and den come from one more such call on
 * [V|1]; the map's chain rule (maps.c) takes dphi to dq and dk.
 * Bidirectional (w_ij = gamma^|i-j|, same segment): the sums run over every j (or i), and
 * since w_ij = w_ji all four products are decayed bidirectional forwards in the sequence's
 * own order (no reversal; gates are causal, so none).
 * With --gates (§1.2 "Gates") w_ij = exp(g_{j+1} + ... + g_i): the inner engines take the
 * gates, the reversed ones g'_t = g_{n-t} (t >= 1; the pair (i, j) reversed sums the same
 * gates), and dL/dg_l = sum over the pairs j < l <= i of a_ij = w_ij ([v_j|1] . c_i), which is
 * sum_{i >= l} (R_i - K_i) with R_i = phi(q_i) . dphi(q_i) (row sums) and K_i =
 * phi(k_i) . dphi(k_i) (column sums): a reverse cumulative sum within the segment.
 * On ranks: every product is la_dist_forward's (the reversed ones on the ranks in reverse
 * order, rows [N - row0 - n, N - row0) of the reversed sequence); a rank's reversed gates read
 * the gate of row row0 + n, the next rank's first; dL/dg adds the later ranks' sums up to the
 * first segment start.
 * Stabilized maps (the favor family, phi = phi_s e^a): the products run on phi_s(q), the keys
 * as phi~(k) = phi_s(k) e^{a_k - M} (M the head's largest a_k over the ranks) and c~ = c e^{a_q
 * + M} (stab_coeffs: a shape and its log-scale lc per row); dq, dk and dv are scaled back per
 * row after the linear chain rules. Refused when a head's keys or c span more than the
 * precision holds (600 nats float64, 60 float32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine_internal.h"
#include "featmap_internal.h"
#include "la_alloc.h"

/* rows [n, H, w] reversed in time */
static void reverse_rows(la_dtype dt, const void *x, void *y, int64_t n, size_t row) {
  const size_t es = la_dtype_size(dt);
  for (int64_t t = 0; t < n; t++)
    memcpy((char *)y + es * row * (size_t)(n - 1 - t), (const char *)x + es * row * (size_t)t,
           es * row);
}

typedef struct {
  la_featmap fm;
  la_engine eng;
} inner;

/* A decayed engine on given features (dk' -> dv'), unnormalized, in the outer engine's mode,
 * with its gammas, threads, chunk and kernels; segments as given (the outer's, or reversed in
 * time). */
static la_status inner_make(const la_engine e, int dk, int dv, const double *gam,
                            const int64_t *off, int64_t noff, inner *in) {
  la_config c;
  la_config_default(&c);
  c.mode = e->cfg.mode;
  c.map = LA_MAP_PRECOMPUTED;
  c.normalize = 0;
  c.allow_signed = 1;
  c.threads = e->cfg.threads;
  c.chunk = e->cfg.chunk;
  c.kernels = e->cfg.kernels;
  c.decay = gam;
  c.decay_n = e->H;
  c.gates = e->cfg.gates; /* the form: per head, or per feature (then dk = r, the outer's) */
  c.window = e->cfg.window; /* a pair (i, j) reversed in time keeps i - j: the same window */
  in->fm = NULL, in->eng = NULL;
  LA_TRY(la_featmap_create(&c, e->H, dk, &in->fm));
  LA_TRY(la_engine_create(&c, in->fm, e->dt, dv, &in->eng));
  if (off) LA_TRY(la_engine_set_segments(in->eng, off, noff));
  return LA_OK;
}

static void inner_free(inner *in) {
  la_engine_destroy(&in->eng);
  la_featmap_destroy(&in->fm);
}

/* An anti-causal product: the inner engine `in` (reversed segments and gates) on queries x,
 * keys y and values z ([n, H, w] rows of widths wx, wy, wz) reversed in time into ra, rb, rc,
 * its outputs (width wo) into rd, reversed back into out (which may be ra). */
static la_status anticausal(const la_engine e, const la_decay_ranks *rk, la_status s,
                            const inner *in, int64_t n, const void *x, int wx, const void *y,
                            int wy, const void *z, int wz, int wo, void *ra, void *rb, void *rc,
                            void *rd, void *out) {
  const la_dtype dt = e->dt;
  const size_t H = (size_t)e->H;
  if (s == LA_OK) {
    reverse_rows(dt, x, ra, n, H * wx);
    reverse_rows(dt, y, rb, n, H * wy);
    reverse_rows(dt, z, rc, n, H * wz);
  }
  s = rk->forward(rk->ctx, s, 1, in->eng, n, rk->N - rk->row0 - n, ra, rb, rc, rd, NULL);
  if (s == LA_OK) reverse_rows(dt, rd, out, n, H * wo);
  return s;
}

/* This rank's gates reversed in time into gr (see inner_gates), rows of H gate_w. */
static void reverse_gates(const la_engine e, const la_decay_ranks *rk, int64_t n, double *gr,
                          const double *next) {
  const size_t row = (size_t)e->H * e->gate_w;
  for (int64_t t = 0; t < n; t++)
    for (size_t i = 0; i < row; i++)
      gr[t * row + i] = t == 0 ? next[i] : e->gates[(size_t)(rk->row0 + n - t - e->gate0) * row + i];
}

/* Gates for an inner engine: the outer's over this rank's rows (gr NULL), or reversed into gr:
 * reversed row t reads g'_t = g_{N-t} (0 at t = 0, the reversed sequence's start), so local
 * row 0 reads next, the gates of row row0 + n. */
static la_status inner_gates(const la_engine e, const la_decay_ranks *rk, inner *in, int64_t n,
                             double *gr, const double *next) {
  if (!e->gated) return LA_OK;
  const int64_t row0 = rk->row0;
  const int H = e->H, gw = e->gate_w; /* per feature: rows [H, r] */
  if (!gr) return la_engine_set_gates(in->eng, e->gates + (row0 - e->gate0) * H * gw, row0, n);
  reverse_gates(e, rk, n, gr, next);
  return la_engine_set_gates(in->eng, gr, rk->N - row0 - n, n);
}

/* la_decay_ranks of one process (row0 = 0, N = n): the products are la_forward's. */
static la_status one_forward(void *ctx, la_status s, int reversed, la_engine eng, int64_t n,
                             int64_t row0, const void *q, const void *k, const void *v,
                             void *out, la_den_stats *stats) {
  (void)ctx, (void)reversed, (void)row0;
  return s == LA_OK ? la_forward(eng, n, q, k, v, out, stats) : s;
}
static la_status one_next(void *ctx, la_status s, int64_t n, const double *first, double *next) {
  (void)ctx, (void)n, (void)first, (void)next; /* next stays 0: row n ends the sequence */
  return s;
}
static la_status one_later(void *ctx, la_status s, const double *head, int start, double *later) {
  (void)ctx, (void)head, (void)start, (void)later; /* no later rows */
  return s;
}
static la_status one_allmax(void *ctx, la_status s, double *x, int n) {
  (void)ctx, (void)x, (void)n; /* one rank: its own maxima */
  return s;
}
static la_status one_scan(void *ctx, la_status s, int reversed, la_state *st) {
  (void)ctx, (void)reversed; /* nothing before the one rank */
  la_state_reset(st);
  return s;
}

/* la_gla_vproduct on this rank's rows of the sequence (reversed: of the reversed sequence,
 * whose rows here are rk->N - rk->row0 - n..; g, off the gates and segments it reads), with
 * the state of the earlier ranks' rows: the rank's own state from zero, its row form (element
 * h r + f: column f of head h's T with the columns' cumulative log-decay over the rows, and
 * the flag of a segment start among them), the exclusive scan of those (rk->scan), then the
 * product from it (§1.2 "Per-feature gates", "Across ranks"). One process: the product alone. */
static la_status vproduct_ranks(const la_engine e, const la_decay_ranks *rk, la_status s,
                                int reversed, int64_t n, int wx, const void *x, const void *y,
                                const void *z, const double *g, const int64_t *off,
                                double *out) {
  const int H = e->H, r = e->r;
  const int64_t t0 = reversed ? rk->N - rk->row0 - n : rk->row0;
  if (rk->scan == one_scan) /* one process: nothing before */
    return s == LA_OK ? la_gla_vproduct(e->dt, e->T, n, H, wx, r, x, y, z, g, e->dlog, off,
                                        e->seg_count, t0, NULL, out, NULL, la_engine_expv(e)) : s;
  const size_t HWR = (size_t)H * wx * r;
  double *T = la_malloc(sizeof(double) * (HWR + 1));
  la_state st = {0};
  if (s == LA_OK && !T)
    s = la_error(LA_ERR_NOMEM, "la_backward: out of memory for the per-feature gates' states");
  if (s == LA_OK) s = la_state_init(&st, H * r, 1, wx - 1);
  if (s == LA_OK && n > 0)
    s = la_gla_vproduct(e->dt, e->T, n, H, wx, r, x, y, z, g, e->dlog, off, e->seg_count, t0,
                        NULL, NULL, T, la_engine_expv(e));
  if (s == LA_OK && n > 0) {
    int start = 0; /* a segment start among rows [t0, t0 + n) */
    for (int64_t i = 1; off && i + 1 < e->seg_count; i++) start |= off[i] >= t0 && off[i] < t0 + n;
    for (int h = 0; h < H; h++)
      for (int f = 0; f < r; f++) {
        const size_t el = (size_t)h * r + f;
        double a = 0.0;
        for (int64_t t = 0; t < n; t++) a += e->dlog[h] + g[((size_t)t * H + h) * r + f];
        for (int c = 0; c < wx; c++) st.sz[el * wx + c] = T[((size_t)h * wx + c) * r + f];
        st.m[el] = 0.0;
        st.f[el] = start;
        st.a[el] = a;
      }
  }
  s = rk->scan(rk->ctx, s, reversed, &st);
  if (s == LA_OK) {
    for (int h = 0; h < H; h++)
      for (int f = 0; f < r; f++) {
        const size_t el = (size_t)h * r + f;
        const double sc = st.m[el] == -INFINITY ? 0.0 : exp(st.m[el]);
        for (int c = 0; c < wx; c++) T[((size_t)h * wx + c) * r + f] = st.sz[el * wx + c] * sc;
      }
    if (n > 0)
      s = la_gla_vproduct(e->dt, e->T, n, H, wx, r, x, y, z, g, e->dlog, off, e->seg_count, t0,
                          T, out, NULL, la_engine_expv(e));
  }
  la_state_free(&st);
  free(T);
  return s;
}

la_status la_engine_set_gates_grad(la_engine e, double *dg) {
  LA_CHECK(e && (e->gated || !dg), LA_ERR_ARG,
           "la_engine_set_gates_grad: the engine was not planned with gates");
  e->gate_grad = dg;
  return LA_OK;
}

/* dL/dg (see the top) of this rank's rows (global row0 + t): R_i - K_i per token and head,
 * summed from the segment's end down to each token; 0 at a segment's first token. The sums
 * from this rank's end (the later ranks' share, added by gates_grad_later) are not in dg yet.
 * head[h]: the sum over the rows before the rank's first segment start (all rows if none);
 * returns whether the rank has a segment start. pq, dpq, pk, dpk: [n, H, r]. Per-feature
 * gates (gate_w = r): the same per feature, R_i,f = phi(q_i)_f dphi(q_i)_f and K_i,f likewise
 * (§1.2 "Per-feature gates"), dg and head of rows [H, r]. */
static int gates_grad(const la_engine e, int64_t row0, int64_t n, const void *pq,
                      const void *dpq, const void *pk, const void *dpk, const double *lq,
                      const double *lk, double *dg, double *head) {
  const la_dtype dt = e->dt;
  const int H = e->H, r = e->r, gw = e->gate_w;
  const size_t HG = (size_t)H * gw;
  double *s = head; /* the running sums of every (head, feature), token by token backwards */
  for (size_t i = 0; i < HG; i++) s[i] = 0.0;
  int any = 0;
  for (int64_t t = n - 1; t >= 0; t--) { /* rows in order of memory, each sum in t's order */
    const int start = la_is_segment_start(e, row0 + t) || row0 + t == 0;
    any |= start;
    for (int h = 0; h < H; h++) {
      const size_t o = ((size_t)t * H + h) * r;
      const double eq = lq ? exp(lq[t * H + h]) : 1.0, ek = lk ? exp(lk[t * H + h]) : 1.0;
      for (int f = 0; f < gw; f++) {
        double R = 0.0, K = 0.0;
        for (int c = gw > 1 ? f : 0; c < (gw > 1 ? f + 1 : r); c++) {
          R += la_rd(dt, pq, o + c) * la_rd(dt, dpq, o + c);
          K += la_rd(dt, pk, o + c) * la_rd(dt, dpk, o + c);
        }
        if (lq) R = R == 0.0 ? 0.0 : R * eq; /* stabilized: the rows' scales */
        if (lk) K = K == 0.0 ? 0.0 : K * ek;
        double *sp = s + (size_t)h * gw + f;
        *sp += R - K;
        if (dg) dg[((size_t)t * H + h) * gw + f] = start ? 0.0 : *sp;
        if (start) *sp = 0.0; /* the segment before sums on its own */
      }
    }
  }
  return any;
}

/* The later ranks' share of dL/dg: later[h gate_w + f] added to the rows after the rank's last
 * segment start (every row if it has none). */
static void gates_grad_later(const la_engine e, int64_t row0, int64_t n, const double *later,
                             double *dg) {
  const size_t row = (size_t)e->H * e->gate_w;
  for (int64_t t = n - 1; t >= 0; t--) {
    if (la_is_segment_start(e, row0 + t) || row0 + t == 0) break;
    for (size_t i = 0; i < row; i++) dg[t * row + i] += later[i];
  }
}

/* A stabilized map's c (see the top) for row t, whose true denominator is den~ e^x (x = a_q +
 * M): c~ = c e^x, written as its shape into cc and cu (largest |entry| 1) and returned as its
 * log-scale lc (-inf for a row of zeros). Every policy in the log domain: add:E divides by
 * den~ + E e^{-x}, clamp:E compares ln den~ + x with ln E; unnormalized, c~ = [G e^x | 0]. */
static double stab_coeffs(const la_engine e, size_t t, double x, const void *nd, const void *g,
                          const void *out, void *cc, void *cu) {
  const la_dtype dt = e->dt;
  const int DV = e->dv, dv1 = DV + 1;
  const double den = la_rd(dt, nd, t * dv1 + DV);
  double go = 0.0, gmax = 0.0, c[2];
  for (int j = 0; j < DV; j++) {
    const double gj = la_rd(dt, g, t * DV + j);
    go += gj * la_rd(dt, out, t * DV + j);
    gmax = fabs(gj) > gmax ? fabs(gj) : gmax;
  }
  /* c~ = [G u | w]: u = 1 / D~, w = -(G . out) D' / D~; or with a scale taken out, lg */
  double u = 0.0, wv = 0.0, lg = 0.0;
  const la_den_policy pol = e->cfg.den_policy;
  const double E = e->cfg.den_eps;
  if (!e->cfg.normalize) u = 1.0, lg = x;
  else if (pol == LA_DEN_CLAMP && log(den) + x < log(E)) u = 1.0, lg = x - log(E);
  else if (pol == LA_DEN_ZERO_EMPTY && den == 0.0) u = 0.0;
  else {
    const double D = pol == LA_DEN_ADD ? den + exp(log(E) - x) : den;
    u = D > 0.0 && isfinite(D) ? 1.0 / D : 0.0;
    wv = -go * u;
  }
  c[0] = gmax * fabs(u), c[1] = fabs(wv);
  const double cm = c[0] > c[1] ? c[0] : c[1];
  if (!(cm > 0.0) || !isfinite(cm)) {
    for (int j = 0; j < dv1; j++) la_wr(dt, cc, t * dv1 + j, 0.0);
    for (int j = 0; j < DV; j++) la_wr(dt, cu, t * DV + j, 0.0);
    return -INFINITY;
  }
  for (int j = 0; j < DV; j++) {
    const double cj = la_rd(dt, g, t * DV + j) * u / cm;
    la_wr(dt, cc, t * dv1 + j, cj);
    la_wr(dt, cu, t * DV + j, cj);
  }
  la_wr(dt, cc, t * dv1 + DV, wv / cm);
  return log(cm) + lg;
}

la_status la_decay_backward(la_engine e, int64_t n, const void *q, const void *k, const void *v,
                            const void *g, void *dq, void *dk, void *dv, la_den_stats *stats) {
  return la_decay_backward_ranks(e, n, q, k, v, g, dq, dk, dv, stats, NULL);
}

/* Every call of rk's collectives is made on every rank in the same order, with the status so
 * far (rk agrees it first): a rank that failed still joins them. */
la_status la_decay_backward_ranks(la_engine e, int64_t n, const void *q, const void *k,
                                  const void *v, const void *g, void *dq, void *dk, void *dv,
                                  la_den_stats *stats, const la_decay_ranks *rk) {
  const la_decay_ranks one = {NULL, 0, n, one_forward, one_next, one_later, one_allmax, one_scan};
  if (!rk) rk = &one;
  const int pf = e->gate_w > 1; /* per-feature gates (§1.2 "Per-feature gates") */
  const int64_t row0 = rk->row0, Nt = rk->N;
  const char *what = e->gated ? "--gates" : "--decay";
  if (rk == &one && n == 0) return LA_OK;
  la_status s = la_engine_gates_cover(e, row0, n, "la_backward");
  const la_dtype dt = e->dt;
  const int H = e->H, r = e->r, DV = e->dv, dk0 = la_engine_input_dim(e), dv1 = DV + 1;
  const size_t es = la_dtype_size(dt), N = (size_t)n, N1 = n > 0 ? N : 1;
  const int bidir = e->cfg.mode == LA_BIDIRECTIONAL; /* all four products in order */
  /* features, [V|1], the forward's rows and the coefficients, and the three products */
  const size_t wmax = (size_t)(dv1 > r ? dv1 : r);
  const size_t GW = (size_t)e->gate_w, NH = N1 * H;
  const int stab = e->stabilized;
  enum { GAM, ROFF, PQ, PK, V1, ND, OUT, CC, CU, DPQ, T1, T2, T3, T4, PH, DPH, A, SUMS, GR, HX,
         PD, AQ, AK, LC, HS, PKT, NBUF };
  const size_t hxn = 3 * (size_t)H * GW + 1, bytes[NBUF] = {
      [GAM] = sizeof(double) * (size_t)H,
      [ROFF] = e->seg_off ? sizeof(int64_t) * (size_t)e->seg_count : 0,
      [PQ] = es * NH * r, [PK] = es * NH * r, [V1] = es * NH * dv1, [ND] = es * NH * dv1,
      [OUT] = es * NH * DV, [CC] = es * NH * dv1, [CU] = es * NH * DV, [DPQ] = es * NH * r,
      [T1] = es * NH * wmax, [T2] = es * NH * wmax, [T3] = es * NH * wmax, [T4] = es * NH * wmax,
      [PH] = es * N1 * (size_t)r, [DPH] = es * N1 * (size_t)r,
      [A] = sizeof(double) * N1, [SUMS] = sizeof(double) * N1,
      [GR] = e->gated ? sizeof(double) * NH * GW : 0, [HX] = sizeof(double) * hxn,
      [PD] = pf ? sizeof(double) * NH * r : 0,
      [AQ] = stab ? sizeof(double) * NH : 0, [AK] = stab ? sizeof(double) * NH : 0,
      [LC] = stab ? sizeof(double) * NH : 0, [HS] = stab ? sizeof(double) * 4 * (size_t)H : 0,
      [PKT] = stab ? es * NH * r : 0};
  void *buf[NBUF];
  const int have = la_engine_carve(e, bytes, NBUF, buf);
  double *gam = buf[GAM], *a = buf[A], *sums = buf[SUMS], *gr = buf[GR], *hx = buf[HX], *pd = buf[PD];
  double *aq = buf[AQ], *ak = buf[AK], *lc = buf[LC], *hs = buf[HS];
  int64_t *roff = buf[ROFF];
  void *pq = buf[PQ], *pk = buf[PK], *v1 = buf[V1], *nd = buf[ND], *out = buf[OUT], *cc = buf[CC];
  void *cu = buf[CU], *dpq = buf[DPQ], *t1 = buf[T1], *t2 = buf[T2], *t3 = buf[T3], *t4 = buf[T4];
  void *ph = buf[PH], *dph = buf[DPH], *pkt = buf[PKT];
  if (have) memset(hx, 0, sizeof(double) * hxn);
  inner e1 = {0}, e2 = {0}, e3 = {0}, e4 = {0};
  if (s == LA_OK && !have)
    s = la_error(LA_ERR_NOMEM, "la_backward: out of memory for the decayed backward's rows "
                 "(%lld tokens x %d heads)", (long long)n, H);
  double *next = hx, *head = hx + H * GW, *later = hx + 2 * H * GW;
  for (int h = 0; s == LA_OK && h < H; h++) gam[h] = la_engine_decay(e, h);
  if (s == LA_OK && roff)
    for (int64_t i = 0; i < e->seg_count; i++)
      roff[i] = Nt - e->seg_off[e->seg_count - 1 - i];
  /* the forward (its outputs after the policy, and the statistics; with
   * la_engine_set_check_finite it checks q, k and v); with la_engine_set_replay_output
   * (linattn grad --out) they are the outputs asked for */
  s = rk->forward(rk->ctx, s, 0, e, n, row0, q, k, v, out, stats);
  if (s == LA_OK && e->check_finite) { /* and G, which no forward reads */
    int64_t bt;
    int bh, bc;
    s = la_check_finite(dt, g, n, H, DV, 0, &bt, &bh, &bc);
  }
  if (s == LA_OK && e->rout && e->rout_row0 == row0 && e->rout_n == n)
    memcpy(e->rout, out, es * N * H * DV);
  /* features [n, H, r] and [V|1]; a stabilized map's rows come with log-scales a (phi =
   * phi_s e^a), which unstabilized maps leave at 0 */
  for (int h = 0; s == LA_OK && n > 0 && h < H; h++)
    for (int w = 0; w < 2 && s == LA_OK; w++) {
      s = la_featmap_eval(e->fm, dt, h, n, (const char *)(w ? k : q) + es * (size_t)h * dk0,
                          (int64_t)H * dk0, ph, a);
      for (size_t t = 0; s == LA_OK && t < N; t++) {
        memcpy((char *)(w ? pk : pq) + es * ((t * H + h) * r), (char *)ph + es * t * r,
               es * r);
        if (stab) (w ? ak : aq)[t * H + h] = a[t];
      }
    }
  /* stabilized: M_h = the largest key log-scale over every rank, phi~(k) = phi_s(k) e^{a_k - M}
   * (products 1 and 2); refused when the keys span more than the precision holds */
  const double span_max = dt == LA_F32 ? 60.0 : 600.0;
  if (stab) {
    for (int h = 0; h < 2 * H; h++) hs[h] = -INFINITY;
    for (size_t t = 0; s == LA_OK && t < N * H; t++) {
      const size_t h = t % H;
      hs[h] = ak[t] > hs[h] ? ak[t] : hs[h];
      hs[H + h] = -ak[t] > hs[H + h] ? -ak[t] : hs[H + h];
    }
    s = rk->allmax(rk->ctx, s, hs, 2 * H);
    for (int h = 0; s == LA_OK && h < H; h++)
      if (hs[h] + hs[H + h] > span_max)
        s = la_error(LA_ERR_UNSUPPORTED, "la_backward: the backward with %s of %s holds each "
                     "head's keys on one scale (docs/design.md §1.2 \"The backward\"): the "
                     "keys' log-scales of head %d span %.1f nats, more than %s resolves there "
                     "(%.0f)", what, la_map_name(e->cfg.map), h, hs[h] + hs[H + h],
                     la_dtype_name(dt), span_max);
    for (size_t t = 0; s == LA_OK && t < N * H; t++) {
      const double f = exp(ak[t] - hs[t % H]);
      for (int c = 0; c < r; c++) la_wr(dt, pkt, t * r + c, la_rd(dt, pk, t * r + c) * f);
    }
  }
  for (size_t t = 0; s == LA_OK && t < N * H; t++) {
    memcpy((char *)v1 + es * t * dv1, (const char *)v + es * t * DV, es * DV);
    la_wr(dt, v1, t * dv1 + DV, 1.0);
  }
  /* (num | den) of every row */
  if (s == LA_OK) s = inner_make(e, r, dv1, gam, e->seg_off, e->seg_count, &e1);
  if (s == LA_OK) s = inner_gates(e, rk, &e1, n, NULL, NULL);
  s = rk->forward(rk->ctx, s, 0, e1.eng, n, row0, pq, stab ? pkt : pk, v1, nd, NULL);
  /* c = [G / D | -(G . out) D' / D] by the denominator policy (§1.1) */
  for (size_t t = 0; s == LA_OK && stab && t < N * H; t++)
    lc[t] = stab_coeffs(e, t, aq[t] + hs[t % H], nd, g, out, cc, cu);
  for (size_t t = 0; s == LA_OK && !stab && t < N * H; t++) {
    const double den = la_rd(dt, nd, t * dv1 + DV);
    double D = den, dD = 1.0, go = 0.0;
    int zero = 0;
    if (!e->cfg.normalize) D = 1.0, dD = 0.0;
    else if (e->cfg.den_policy == LA_DEN_ADD) D = den + e->cfg.den_eps;
    else if (e->cfg.den_policy == LA_DEN_CLAMP && den < e->cfg.den_eps) D = e->cfg.den_eps, dD = 0.0;
    else if (e->cfg.den_policy == LA_DEN_ZERO_EMPTY && den == 0.0) zero = 1;
    for (int c = 0; c < DV; c++) go += la_rd(dt, g, t * DV + c) * la_rd(dt, out, t * DV + c);
    for (int c = 0; c < DV; c++) {
      const double u = zero ? 0.0 : la_rd(dt, g, t * DV + c) / D;
      la_wr(dt, cc, t * dv1 + c, u);
      la_wr(dt, cu, t * DV + c, u);
    }
    la_wr(dt, cc, t * dv1 + DV, zero ? 0.0 : -go * dD / D);
  }
  /* dphi(q): causal, queries c, keys [V|1], values phi(k); per-feature gates decay it along
   * the values (la_gla_vproduct) */
  if (pf) {
    s = vproduct_ranks(e, rk, s, 0, n, dv1, cc, v1, stab ? pkt : pk,
                       e->gates + (row0 - e->gate0) * H * GW, e->seg_off, pd);
    for (size_t i = 0; s == LA_OK && i < N * H * r; i++) la_wr(dt, dpq, i, pd[i]);
  } else {
    if (s == LA_OK) s = inner_make(e, dv1, r, gam, e->seg_off, e->seg_count, &e2);
    if (s == LA_OK) s = inner_gates(e, rk, &e2, n, NULL, NULL);
    s = rk->forward(rk->ctx, s, 0, e2.eng, n, row0, cc, v1, stab ? pkt : pk, dpq, NULL);
  }
  /* stabilized: c on the head's common scale C = the largest lc over the ranks, for the two
   * products that sum over the queries */
  if (stab) {
    for (int h = 0; h < 2 * H; h++) hs[2 * H + h] = -INFINITY;
    for (size_t t = 0; s == LA_OK && t < N * H; t++) {
      const size_t h = t % H;
      if (lc[t] == -INFINITY) continue;
      hs[2 * H + h] = lc[t] > hs[2 * H + h] ? lc[t] : hs[2 * H + h];
      hs[3 * H + h] = -lc[t] > hs[3 * H + h] ? -lc[t] : hs[3 * H + h];
    }
    s = rk->allmax(rk->ctx, s, hs + 2 * H, 2 * H);
    for (int h = 0; s == LA_OK && h < H; h++)
      if (hs[2 * H + h] + hs[3 * H + h] > span_max)
        s = la_error(LA_ERR_UNSUPPORTED, "la_backward: the backward with %s of %s holds each "
                     "head's output gradients on one scale (docs/design.md §1.2 \"The "
                     "backward\"): they span %.1f nats in head %d, more than %s resolves there "
                     "(%.0f)", what, la_map_name(e->cfg.map), hs[2 * H + h] + hs[3 * H + h], h,
                     la_dtype_name(dt), span_max);
    for (size_t t = 0; s == LA_OK && t < N * H; t++) {
      const double f = lc[t] == -INFINITY ? 0.0 : exp(lc[t] - hs[2 * H + t % H]);
      for (int c = 0; c < dv1; c++) la_wr(dt, cc, t * dv1 + c, la_rd(dt, cc, t * dv1 + c) * f);
      for (int c = 0; c < DV; c++) la_wr(dt, cu, t * DV + c, la_rd(dt, cu, t * DV + c) * f);
    }
  }
  /* the reversed gates' first row: the gates of row row0 + n */
  if (e->gated)
    s = rk->next_gates(rk->ctx, s, n, s == LA_OK && n > 0 ? e->gates + (row0 - e->gate0) * H * GW
                                                           : NULL, next);
  /* dphi(k): anti-causal, queries [V|1], keys c, values phi(q), in reversed time; t1: dphi(k)
   * [n, H, r]. Per-feature gates: la_gla_vproduct on the reversed rows, gates and segments */
  if (pf) {
    if (s == LA_OK) {
      reverse_rows(dt, v1, t2, n, (size_t)H * dv1);
      reverse_rows(dt, cc, t3, n, (size_t)H * dv1);
      reverse_rows(dt, pq, t4, n, (size_t)H * r);
      reverse_gates(e, rk, n, gr, next);
    }
    s = vproduct_ranks(e, rk, s, 1, n, dv1, t2, t3, t4, gr, roff, pd);
    for (int64_t t = 0; s == LA_OK && t < n; t++)
      for (size_t i = 0; i < (size_t)H * r; i++)
        la_wr(dt, t1, (size_t)t * H * r + i, pd[(size_t)(n - 1 - t) * H * r + i]);
  } else {
    if (s == LA_OK) s = inner_make(e, dv1, r, gam, bidir ? e->seg_off : roff, e->seg_count, &e3);
    if (s == LA_OK) s = inner_gates(e, rk, &e3, n, gr, next);
    if (bidir) s = rk->forward(rk->ctx, s, 0, e3.eng, n, row0, v1, cc, pq, t1, NULL);
    else s = anticausal(e, rk, s, &e3, n, v1, dv1, cc, dv1, pq, r, r, t1, t2, t3, t4, t1);
  }
  /* dv: anti-causal, queries phi(k), keys phi(q), values c[:dv] */
  if (s == LA_OK) s = inner_make(e, r, DV, gam, bidir ? e->seg_off : roff, e->seg_count, &e4);
  if (s == LA_OK) s = inner_gates(e, rk, &e4, n, gr, next);
  if (bidir) s = rk->forward(rk->ctx, s, 0, e4.eng, n, row0, pk, pq, cu, dv, NULL);
  else s = anticausal(e, rk, s, &e4, n, pk, r, pq, r, cu, DV, DV, t2, t3, t4, nd, dv);
  /* stabilized: the log-scales the products left out, per (token, head) row: lc for dq,
   * C + a_k - M for dk and dv (kept in lc and aq, no longer needed as they were) */
  for (size_t t = 0; s == LA_OK && stab && t < N * H; t++) {
    const size_t h = t % H;
    aq[t] = hs[2 * H + h] + ak[t] - hs[h];
    if (hs[2 * H + h] == -INFINITY) aq[t] = -INFINITY; /* every c of the head is 0 */
  }
  for (size_t t = 0; s == LA_OK && stab && t < N * H; t++) {
    const double f = aq[t] == -INFINITY ? 0.0 : exp(aq[t]);
    for (int c = 0; c < DV; c++) la_wr(dt, dv, t * DV + c, la_rd(dt, dv, t * DV + c) * f);
  }
  if (e->gated) { /* dL/dg: this rank's sums, then the later ranks' share */
    int start = 0;
    if (s == LA_OK && e->gate_grad)
      start = gates_grad(e, row0, n, pq, dpq, pk, t1, stab ? lc : NULL, stab ? aq : NULL,
                         e->gate_grad, head);
    s = rk->later(rk->ctx, s, head, start, later);
    if (s == LA_OK && e->gate_grad) gates_grad_later(e, row0, n, later, e->gate_grad);
  }
  /* the map's chain rule: dq from dphi(q), dk from dphi(k) */
  for (int h = 0; s == LA_OK && n > 0 && h < H; h++)
    for (int w = 0; w < 2 && s == LA_OK; w++) {
      const void *x = w ? k : q, *P = w ? pk : pq, *D = w ? t1 : dpq;
      void *dx = w ? dk : dq;
      for (size_t t = 0; t < N; t++) {
        memcpy((char *)ph + es * t * r, (const char *)P + es * ((t * H + h) * r), es * r);
        memcpy((char *)dph + es * t * r, (const char *)D + es * ((t * H + h) * r), es * r);
      }
      const int64_t ld = (int64_t)H * dk0;
      if (dt == LA_F32)
        la_featmap_chain_f32(e->fm, h, n, (const float *)x + (size_t)h * dk0, ld, dph, ph,
                             (float *)dx + (size_t)h * dk0, ld, sums);
      else
        la_featmap_chain_f64(e->fm, h, n, (const double *)x + (size_t)h * dk0, ld, dph, ph,
                             (double *)dx + (size_t)h * dk0, ld, sums);
      for (size_t t = 0; stab && t < N; t++) { /* the row's scale (chain rules are linear) */
        const double l = (w ? aq : lc)[t * H + h], f = l == -INFINITY ? 0.0 : exp(l);
        for (int c = 0; c < dk0; c++) {
          const size_t i = (t * H + h) * dk0 + c;
          la_wr(dt, dx, i, la_rd(dt, dx, i) * f);
        }
      }
    }
  inner_free(&e1), inner_free(&e2), inner_free(&e3), inner_free(&e4);
  return s; /* the rows stay with the engine for its next backward (la_engine_carve) */
}
