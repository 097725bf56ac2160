/* Naive float64 softmax attention over the masks of docs/design.md §3 and its gradient by
 * hand, for test_softmax.c and test_softmax_ring.c. No engine code: the mask is a pairwise
 * predicate tested on every (i, j), the whole P matrix of each head is formed, and the
 * derivative is the chain rule of out = P V with P = softmax(s Q K^T) written out:
 *   dL/dP_ij = g_i.v_j,  dL/dS_ij = P_ij (dL/dP_ij - sum_l P_il dL/dP_il),
 *   dq_i = s sum_j dL/dS_ij k_j,  dk_j = s sum_i dL/dS_ij q_i,  dv_j = sum_i P_ij g_i.
 * sn_fd_check differentiates sn_forward by central differences to vouch for sn_backward. */
#ifndef LINATTN_TESTS_SOFTMAX_NAIVE_H
#define LINATTN_TESTS_SOFTMAX_NAIVE_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int causal;
  const int64_t *seg; /* offsets 0 < ... < n (count nseg), or NULL */
  int64_t nseg;
  int64_t window; /* 0: none */
} sn_mask;

static inline int64_t sn_segment(const sn_mask *m, int64_t i) {
  int64_t s = 0;
  if (m->seg)
    while (s + 1 < m->nseg && m->seg[s + 1] <= i) s++;
  return s;
}

static inline int sn_allowed(const sn_mask *m, int64_t i, int64_t j) {
  if (m->causal && j > i) return 0;
  if (m->window > 0 && i - j >= m->window) return 0;
  return sn_segment(m, i) == sn_segment(m, j);
}

/* Pseudo-random data, a pure function of (seed, index), the same on every rank. */
static inline double sn_rand(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i + 1;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return 2.0 * ((double)(x >> 11) * 0x1.0p-53) - 1.0; /* uniform in [-1, 1) */
}
static inline void sn_fill(double *x, size_t cnt, double a, uint64_t seed) {
  for (size_t i = 0; i < cnt; i++) x[i] = a * sn_rand(seed, i);
}

/* P [H, n, n] (head, row i, column j; may be NULL) and out [n, H, dv]. A row that reads no
 * key gets P = 0 and out = 0. lg [H] (or NULL): ln gamma_h, the score of (i, j) gains
 * |i - j| lg[h], so the pair weighs exp(s q_i.k_j) gamma_h^|i-j| (eval --decay's reference,
 * docs/design.md §8.1 "With decay"); sn_backward's chain rule holds as the bias is a constant. */
static inline void sn_forward_decay(int64_t n, int H, int dk, int dv, double scale,
                                    const sn_mask *m, const double *lg, const double *q,
                                    const double *k, const double *v, double *P, double *out) {
  double *row = malloc(sizeof(double) * (size_t)(n ? n : 1));
  char *ok = malloc((size_t)(n ? n : 1));
  for (int h = 0; h < H; h++)
    for (int64_t i = 0; i < n; i++) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; j++) {
        ok[j] = (char)sn_allowed(m, i, j);
        if (!ok[j]) continue;
        double d = 0;
        for (int c = 0; c < dk; c++) d += q[(i * H + h) * dk + c] * k[(j * H + h) * dk + c];
        row[j] = scale * d + (lg ? (double)(i > j ? i - j : j - i) * lg[h] : 0.0);
        mx = fmax(mx, row[j]);
      }
      for (int64_t j = 0; j < n; j++) {
        row[j] = ok[j] ? exp(row[j] - mx) : 0.0;
        sum += row[j];
      }
      double *o = out + (i * H + h) * dv;
      memset(o, 0, sizeof(double) * dv);
      for (int64_t j = 0; j < n; j++) {
        const double p = sum > 0 ? row[j] / sum : 0.0;
        if (P) P[((size_t)h * n + i) * n + j] = p;
        for (int c = 0; c < dv; c++) o[c] += p * v[(j * H + h) * dv + c];
      }
    }
  free(row);
  free(ok);
}
static inline void sn_forward(int64_t n, int H, int dk, int dv, double scale, const sn_mask *m,
                       const double *q, const double *k, const double *v, double *P, double *out) {
  sn_forward_decay(n, H, dk, dv, scale, m, NULL, q, k, v, P, out);
}

/* Gradients of L = sum(out * g), given P from sn_forward: dq, dk [n, H, dk], dv [n, H, dv]. */
static inline void sn_backward(int64_t n, int H, int dk, int dv, double scale, const double *P,
                        const double *q, const double *k, const double *v, const double *g,
                        double *dq, double *dkk, double *dvv) {
  memset(dq, 0, sizeof(double) * n * H * dk);
  memset(dkk, 0, sizeof(double) * n * H * dk);
  memset(dvv, 0, sizeof(double) * n * H * dv);
  double *dP = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int h = 0; h < H; h++)
    for (int64_t i = 0; i < n; i++) {
      const double *p = P + ((size_t)h * n + i) * n, *gi = g + (i * H + h) * dv;
      double rs = 0;
      for (int64_t j = 0; j < n; j++) {
        double d = 0;
        for (int c = 0; c < dv; c++) d += gi[c] * v[(j * H + h) * dv + c];
        dP[j] = d;
        rs += p[j] * d;
      }
      for (int64_t j = 0; j < n; j++) {
        const double ds = p[j] * (dP[j] - rs);
        for (int c = 0; c < dk; c++) {
          dq[(i * H + h) * dk + c] += scale * ds * k[(j * H + h) * dk + c];
          dkk[(j * H + h) * dk + c] += scale * ds * q[(i * H + h) * dk + c];
        }
        for (int c = 0; c < dv; c++) dvv[(j * H + h) * dv + c] += p[j] * gi[c];
      }
    }
  free(dP);
}

static inline double sn_loss(int64_t n, int H, int dk, int dv, double scale, const sn_mask *m,
                      const double *q, const double *k, const double *v, const double *g) {
  double *out = malloc(sizeof(double) * n * H * dv), L = 0;
  sn_forward(n, H, dk, dv, scale, m, q, k, v, NULL, out);
  for (int64_t x = 0; x < n * H * dv; x++) L += out[x] * g[x];
  free(out);
  return L;
}

/* max |analytic - central difference| / max |analytic| over every entry of q, k and v. */
static inline double sn_fd_check(int64_t n, int H, int dk, int dv, double scale, const sn_mask *m,
                          double *q, double *k, double *v, const double *g) {
  const size_t nk = (size_t)n * H * dk, nvv = (size_t)n * H * dv;
  double *P = malloc(sizeof(double) * H * n * n), *gq = malloc(8 * nk), *gk = malloc(8 * nk),
         *gv = malloc(8 * nvv);
  double *out = malloc(8 * nvv);
  sn_forward(n, H, dk, dv, scale, m, q, k, v, P, out);
  sn_backward(n, H, dk, dv, scale, P, q, k, v, g, gq, gk, gv);
  double *xs[3] = {q, k, v}, *gs[3] = {gq, gk, gv}, num = 0, den = 0;
  const size_t cnt[3] = {nk, nk, nvv};
  const double eps = 1e-5;
  for (int a = 0; a < 3; a++)
    for (size_t x = 0; x < cnt[a]; x++) {
      const double keep = xs[a][x];
      xs[a][x] = keep + eps;
      const double lp = sn_loss(n, H, dk, dv, scale, m, q, k, v, g);
      xs[a][x] = keep - eps;
      const double lm = sn_loss(n, H, dk, dv, scale, m, q, k, v, g);
      xs[a][x] = keep;
      num = fmax(num, fabs((lp - lm) / (2 * eps) - gs[a][x]));
      den = fmax(den, fabs(gs[a][x]));
    }
  free(P); free(gq); free(gk); free(gv); free(out);
  return den > 0 ? num / den : num;
}

#endif
