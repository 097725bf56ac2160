/* Exact summaries for --reproducible, docs/design.md §4.7.
 *
 * Every element of (S|z) e^m is held as integer bins of 32 bits on one absolute binary grid
 * (bin b holds the bits of weight 2^{32b} .. 2^{32b+31}). An element keeps the LA_XBINS bins
 * below the highest bin any of its addends reached; bin b is the exact integer sum of the
 * slices at b of every addend. Adding is integer addition, so the result does not depend on
 * the order or the bracketing of the additions, and bins below the window are dropped for
 * every addend alike: the kept bins are sum_i slice_b(x_i) for every kept b whatever the
 * order. Each bin takes at most 2^31 addends of |slice| < 2^32 before int64 could overflow.
 * Domain: finite values; a non-finite addend marks the head (its rounded state is NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "la_alloc.h"
#include "linattn/core.h"
#include "la_core_private.h"

#define XBITS 32
#define EMPTY INT64_MIN
#define HDR 3 /* per head: flag f, non-finite mark, live (something was added) */
#define EL (1 + LA_XBINS)

size_t la_xhead_len(int r, int dv) { return HDR + (size_t)r * (size_t)(dv + 1) * EL; }

static int64_t bin_of(int64_t p) { return p >= 0 ? p / XBITS : -((-p + XBITS - 1) / XBITS); }

void la_xhead_reset(int64_t *xh, size_t rsz) {
  xh[0] = xh[1] = xh[2] = 0;
  int64_t *el = xh + HDR;
  for (size_t i = 0; i < rsz; i++, el += EL) {
    el[0] = EMPTY;
    for (int k = 1; k < EL; k++) el[k] = 0;
  }
}

la_status la_xstate_init(la_xstate *x, int heads, int r, int dv) {
  memset(x, 0, sizeof *x);
  LA_CHECK(heads >= 1 && r >= 1 && dv >= 1, LA_ERR_ARG,
           "la_xstate_init: invalid shape (%d heads, r %d, dv %d)", heads, r, dv);
  x->heads = heads;
  x->r = r;
  x->dv = dv;
  x->x = la_malloc(sizeof(int64_t) * la_xhead_len(r, dv) * (size_t)heads);
  if (!x->x)
    return la_error(LA_ERR_NOMEM, "out of memory for an exact scan state (%d heads x %d x %d "
                    "elements of %d bins)", heads, r, dv + 1, LA_XBINS);
  la_xstate_reset(x);
  return LA_OK;
}

void la_xstate_reset(la_xstate *x) {
  size_t rsz = (size_t)x->r * (x->dv + 1), len = la_xhead_len(x->r, x->dv);
  for (int h = 0; h < x->heads; h++) la_xhead_reset(x->x + h * len, rsz);
}

void la_xstate_free(la_xstate *x) {
  free(x->x);
  memset(x, 0, sizeof *x);
}

/* Raise element el's window so that its top bin is t (> el[0]), dropping the bins below. */
static void raise_top(int64_t *el, int64_t t) {
  if (el[0] == EMPTY) {
    for (int k = 1; k < EL; k++) el[k] = 0;
  } else {
    int64_t s = t - el[0];
    for (int k = LA_XBINS - 1; k >= 0; k--) el[1 + k] = k - s >= 0 ? el[1 + k - s] : 0;
  }
  el[0] = t;
}

/* el += y 2^j, exactly down to the window's lowest bin. The integer significand and the
 * exponent come straight from the IEEE bits (frexp/ldexp were a third of the mode's cost);
 * the top bin is that of y's highest set bit, a function of y alone, subnormals included. */
static void add_value(int64_t *el, double y, int64_t j) {
  uint64_t bits;
  memcpy(&bits, &y, sizeof bits);
  const int eraw = (int)((bits >> 52) & 0x7ff);
  const uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
  const uint64_t M = eraw ? frac | (UINT64_C(1) << 52) : frac; /* y = +-M 2^(e - 1075) */
  const int64_t p0 = (int64_t)(eraw ? eraw : 1) - 1075 + j;    /* weight of M's bit 0 */
  const int64_t bt = bin_of(p0 + 63 - __builtin_clzll(M)), bl = bin_of(p0);
  if (el[0] == EMPTY || bt > el[0]) raise_top(el, bt);
  const int64_t top = el[0];
  const int neg = (int)(bits >> 63);
  for (int64_t b = bt; b >= bl && b > top - LA_XBINS; b--) {
    const int64_t sh = XBITS * b - p0; /* in (-32, 52] */
    const uint64_t sl = (sh >= 0 ? M >> sh : M << -sh) & 0xffffffffu;
    el[1 + (top - b)] += neg ? -(int64_t)sl : (int64_t)sl;
  }
}

/* a += b, element by element (both on the absolute grid). */
static void add_element(int64_t *a, const int64_t *b) {
  if (b[0] == EMPTY) return;
  if (a[0] == EMPTY || b[0] > a[0]) raise_top(a, b[0]);
  for (int k = 0; k < LA_XBINS; k++) {
    const int64_t bin = b[0] - k; /* absolute index of b's bin k */
    if (bin > a[0] - LA_XBINS) a[1 + (a[0] - bin)] += b[1 + k];
  }
}

void la_xhead_add(int64_t *xh, size_t rsz, const double *sz, double m, int f) {
  if (f) {
    la_xhead_reset(xh, rsz);
    xh[0] = 1;
  }
  if (m == -INFINITY) return; /* the identity */
  xh[2] = 1;
  if (!(fabs(m) < 0x1p50)) { /* a log-scale beyond any double's range, or NaN */
    xh[1] = 1;
    return;
  }
  /* e^m = 2^j fac with 1 <= fac < 2 (about): one rounding per element, a function of
   * (sz, m) only; unstabilized maps have m = 0 and fac = 1 exactly */
  const int64_t j = (int64_t)floor(m / M_LN2);
  const double fac = exp(m - (double)j * M_LN2);
  int64_t *el = xh + HDR;
  for (size_t i = 0; i < rsz; i++, el += EL) {
    const double y = fac == 1.0 ? sz[i] : sz[i] * fac;
    if (!isfinite(y)) xh[1] = 1;
    else if (y != 0) add_value(el, y, j);
  }
}

void la_xhead_combine(int64_t *a, const int64_t *b, size_t rsz) {
  if (b[0]) { /* b starts a segment: a is not visible after it */
    memcpy(a, b, sizeof(int64_t) * (HDR + rsz * EL));
    return;
  }
  a[1] |= b[1];
  a[2] |= b[2];
  const int64_t *be = b + HDR;
  int64_t *ae = a + HDR;
  for (size_t i = 0; i < rsz; i++, ae += EL, be += EL) add_element(ae, be);
}

void la_xhead_add_x(int64_t *a, const int64_t *b, size_t rsz) {
  a[1] |= b[1];
  a[2] |= b[2];
  const int64_t *be = b + HDR;
  int64_t *ae = a + HDR;
  for (size_t i = 0; i < rsz; i++, ae += EL, be += EL) add_element(ae, be);
}

void la_xhead_combine_right(const int64_t *a, int64_t *b, size_t rsz) {
  if (b[0]) return;
  b[0] = a[0];
  b[1] |= a[1];
  b[2] |= a[2];
  const int64_t *ae = a + HDR;
  int64_t *be = b + HDR;
  for (size_t i = 0; i < rsz; i++, ae += EL, be += EL) add_element(be, ae);
}

/* 2^e for a normal result, built from its bits; ldexp only outside that range. */
static double pow2(int64_t e) {
  if (e < -1022 || e > 1023) return ldexp(1.0, (int)(e < -4400 ? -4400 : e > 4400 ? 4400 : e));
  const uint64_t bits = (uint64_t)(e + 1023) << 52;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* The element's value times 2^-J, summed from the lowest bin up (a fixed order). Each term
 * is (double)bin, one rounding, times an exact power of two. */
static double element_value(const int64_t *el, int64_t J) {
  if (el[0] == EMPTY) return 0.0;
  double v = 0.0;
  for (int k = LA_XBINS - 1; k >= 0; k--)
    if (el[1 + k]) v += (double)el[1 + k] * pow2(XBITS * (el[0] - k) - J);
  return v;
}

void la_xhead_round(const int64_t *xh, size_t rsz, int stabilized, double *sz, double *m,
                    int *f) {
  *f = (int)xh[0];
  if (!xh[2]) { /* nothing was added: the identity */
    memset(sz, 0, sizeof(double) * rsz);
    *m = -INFINITY;
    return;
  }
  const int64_t *el = xh + HDR;
  if (xh[1]) {
    for (size_t i = 0; i < rsz; i++) sz[i] = NAN;
    *m = 0.0;
    return;
  }
  /* unstabilized maps keep m = 0 (the kernels never rescale their state); stabilized maps
   * take the scale 2^J, J a multiple of 32 near the largest element */
  int64_t J = 0;
  if (stabilized) {
    int64_t top = EMPTY;
    for (size_t i = 0; i < rsz; i++)
      if (el[i * EL] > top) top = el[i * EL];
    J = top == EMPTY ? 0 : XBITS * top;
  }
  for (size_t i = 0; i < rsz; i++) sz[i] = element_value(el + i * EL, J);
  *m = (double)J * M_LN2;
}

void la_xstate_round(const la_xstate *x, int stabilized, la_state *s) {
  size_t rsz = (size_t)x->r * (x->dv + 1), len = la_xhead_len(x->r, x->dv);
  for (int h = 0; h < x->heads; h++)
    la_xhead_round(x->x + h * len, rsz, stabilized, s->sz + h * rsz, s->m + h, s->f + h);
}

void la_xstate_add(la_xstate *x, const la_state *s) {
  size_t rsz = (size_t)x->r * (x->dv + 1), len = la_xhead_len(x->r, x->dv);
  for (int h = 0; h < x->heads; h++)
    la_xhead_add(x->x + h * len, rsz, s->sz + h * rsz, s->m[h], s->f[h]);
}

void la_xstate_combine(la_xstate *a, const la_xstate *b) {
  size_t rsz = (size_t)a->r * (a->dv + 1), len = la_xhead_len(a->r, a->dv);
  for (int h = 0; h < a->heads; h++) la_xhead_combine(a->x + h * len, b->x + h * len, rsz);
}
