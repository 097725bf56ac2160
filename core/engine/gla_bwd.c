/* The backward's products with per-feature gates that decay along their values (docs/design.md
 * §1.2 "Per-feature gates", "The backward"): for rows t of [n, H, w] arrays and head h,
 *   out_i = sum_{j<=i, same segment} (x_i . y_j) (z_j o e^{L_ij}),  L_ij,f = sum_{l=j+1..i} (g_l,f + lam_h)
 * with x, y of width wx and z, out of width r, the log-gates g [n, H, r]. dphi(q) is this
 * with x = c, y = [V|1], z = phi(k); dphi(k) the same on the sequence reversed in time (the
 * caller reverses rows, gates and segments, as for the other anti-causal products).
 * Chunkwise in float64, as gla_impl.h: T = sum_j y_j (z_j o e^{L})^T (wx x r) is the state,
 * decayed by column; in a chunk with E_i = e^{G_i - G_0} in (0, 1],
 *   out_i = E_i o e^{G_0} o (x_i^T T) + E_i o sum_{j<=i} (x_i . y_j) (z_j / E_j),
 *   T <- T diag(E_{L-1} e^{G_0}) + sum_j y_j (z_j o E_{L-1} / E_j)^T,
 * chunks cut where a column's gates after the first row fall below -300 nats, so every factor
 * stays normal. On ranks (decay_bwd.c) the rows are global rows t0.. of the (possibly
 * reversed) sequence: Tin (per head W x R, or NULL) is the state of the earlier rows, read by
 * the rows of row t0 - 1's segment, and Tout receives the state after the last row; out NULL
 * computes the state alone. Without a log-scale: the maps it serves are unstabilized (their features and
 * c finite), and every factor applied is <= 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine_internal.h"
#include "la_alloc.h"
#include "la_blas.h"

#define VP_CHUNK 64
#define VP_SPAN 300.0

/* segment of token t: the number of offsets off[1..noff-2] <= t (0 without segments) */
static int64_t seg_at(const int64_t *off, int64_t noff, int64_t t, int64_t *s) {
  while (off && *s + 1 < noff - 1 && off[*s + 1] <= t) (*s)++;
  return *s;
}

/* dst[c] = x[o + c], c < n, in float64 from dt (a loop per type, which vectorizes) */
static void row_f64(la_dtype dt, const void *x, size_t o, size_t n, double *dst) {
  if (dt == LA_F64) {
    memcpy(dst, (const double *)x + o, sizeof(double) * n);
    return;
  }
  const float *xf = (const float *)x + o;
  for (size_t c = 0; c < n; c++) dst[c] = (double)xf[c];
}

la_status la_gla_vproduct(la_dtype dt, int T_, int64_t n, int H, int wx, int r, const void *x,
                          const void *y, const void *z, const double *g, const double *lam,
                          const int64_t *off, int64_t noff, int64_t t0, const double *Tin,
                          double *out, double *Tout, la_expv_fn expv) {
  const size_t C = VP_CHUNK, R = (size_t)r, W = (size_t)wx;
  la_status st = LA_OK;
  (void)T_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(T_)
  for (int h = 0; h < H; h++) {
    double *T = la_calloc(W * R, sizeof(double)), *G = la_malloc(sizeof(double) * C * R);
    double *E = la_malloc(sizeof(double) * C * R), *E0 = la_malloc(sizeof(double) * R);
    double *X = la_malloc(sizeof(double) * C * W), *Y = la_malloc(sizeof(double) * C * W);
    double *Z = la_malloc(sizeof(double) * C * R), *B = la_malloc(sizeof(double) * C * C);
    double *O = la_malloc(sizeof(double) * C * R), *F = la_malloc(sizeof(double) * R);
    double *P = la_malloc(sizeof(double) * C * R); /* the prefix rows X T */
    int64_t *sg = la_malloc(sizeof(int64_t) * C);
    if (!T || !G || !E || !E0 || !X || !Y || !Z || !B || !O || !F || !P || !sg) {
#pragma omp critical
      st = la_error(LA_ERR_NOMEM, "la_backward: out of memory for the per-feature gates' "
                    "product (head %d)", h);
    } else {
      int64_t sc = 0, sstate = -1; /* the segment cursor; the state's segment (-1: empty) */
      if (Tin && t0 > 0) { /* the earlier rows' state, in row t0 - 1's segment */
        memcpy(T, Tin + (size_t)h * W * R, sizeof(double) * W * R);
        sstate = seg_at(off, noff, t0 - 1, &sc);
      }
      for (int64_t c0 = 0; c0 < n;) {
        /* the chunk: at most C rows, cut where a column's gates fall VP_SPAN below its first */
        const size_t ld = (size_t)H * R;
        const double *gc = g + ((size_t)c0 * H + h) * R;
        int len = 1;
        for (size_t f = 0; f < R; f++) G[f] = lam[h] + gc[f];
        while (len < (int)C && c0 + len < n) {
          double *Gi = G + (size_t)len * R;
          const double *p = Gi - R, *gi = gc + (size_t)len * ld;
          int over = 0;
          for (size_t f = 0; f < R; f++) {
            Gi[f] = p[f] + (lam[h] + gi[f]);
            over |= G[f] - Gi[f] > VP_SPAN;
          }
          if (over) break;
          len++;
        }
        /* E = e^{G - G_0} (<= 1) and E0 = e^{G_0}, by the table's vector exp where given */
        for (size_t f = 0; f < R; f++) E[f] = 1.0;
        for (size_t i = 1; i < (size_t)len; i++)
          for (size_t f = 0; f < R; f++) E[i * R + f] = G[i * R + f] - G[f];
        if (expv) expv((size_t)(len - 1) * R, E + R, E + R), expv(R, G, E0);
        else {
          for (size_t i = R; i < (size_t)len * R; i++) E[i] = exp(E[i]);
          for (size_t f = 0; f < R; f++) E0[f] = exp(G[f]);
        }
        for (int i = 0; i < len; i++) {
          const size_t row = (size_t)(c0 + i) * H + h;
          sg[i] = seg_at(off, noff, t0 + c0 + i, &sc);
          row_f64(dt, x, row * W, W, X + i * W);
          row_f64(dt, y, row * W, W, Y + i * W);
          row_f64(dt, z, row * R, R, Z + i * R);
          for (size_t f = 0; f < R; f++) Z[i * R + f] /= E[i * R + f];
        }
        if (out) { /* (out NULL: the state alone) */
          /* the pairs: B = X Y^T on the chunk's mask, O = B Z */
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, wx, 1.0, X, wx, Y, wx,
                      0.0, B, len);
          for (int i = 0; i < len; i++)
            for (int j = 0; j < len; j++)
              if (j > i || sg[j] != sg[i]) B[(size_t)i * len + j] = 0.0;
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, r, len, 1.0, B, len, Z, r,
                      0.0, O, r);
          /* the prefix, for the rows of the state's segment: O += (X T) o e^{G_0} */
          int n0 = 0;
          while (n0 < len && sg[n0] == sstate) n0++;
          if (n0 > 0) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n0, r, wx, 1.0, X, wx, T, r,
                        0.0, P, r);
            for (int i = 0; i < n0; i++)
              for (size_t f = 0; f < R; f++) O[i * R + f] += P[i * R + f] * E0[f];
          }
          for (int i = 0; i < len; i++)
            for (size_t f = 0; f < R; f++)
              out[((size_t)(c0 + i) * H + h) * R + f] = O[i * R + f] * E[i * R + f];
        }
        /* the state continues with the chunk's last segment: decayed if it is the state's */
        const double *EL = E + (size_t)(len - 1) * R;
        int b = len - 1;
        while (b > 0 && sg[b - 1] == sg[len - 1]) b--;
        if (b == 0 && sg[0] == sstate) {
          for (size_t f = 0; f < R; f++) F[f] = EL[f] * E0[f];
          for (size_t c = 0; c < W; c++)
            for (size_t f = 0; f < R; f++) T[c * R + f] *= F[f];
        } else {
          memset(T, 0, sizeof(double) * W * R);
        }
        for (int j = b; j < len; j++)
          for (size_t f = 0; f < R; f++) Z[j * R + f] *= EL[f]; /* z_j o E_{L-1} / E_j */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, wx, r, len - b, 1.0,
                    Y + (size_t)b * W, wx, Z + (size_t)b * R, r, 1.0, T, r);
        sstate = sg[len - 1];
        c0 += len;
      }
      if (Tout) memcpy(Tout + (size_t)h * W * R, T, sizeof(double) * W * R);
    }
    free(T), free(G), free(E), free(E0), free(X), free(Y), free(Z), free(B), free(O), free(F);
    free(P);
    free(sg);
  }
  return st;
}
