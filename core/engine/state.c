/* Scan element (S, z, m, f, a) and its non-commutative operator, docs/design.md §4.1, §1.2.
 * (S|z) is stored as r x (dv+1) float64; the true summary is e^m (S|z); a is the block's
 * cumulative log-decay. Identity: (0, 0, -inf, 0, 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "la_alloc.h"
#include "linattn/core.h"

la_status la_state_init(la_state *s, int heads, int r, int dv) {
  memset(s, 0, sizeof *s);
  LA_CHECK(heads >= 1 && r >= 1 && dv >= 1, LA_ERR_ARG,
           "la_state_init: invalid shape (%d heads, r %d, dv %d)", heads, r, dv);
  s->heads = heads;
  s->r = r;
  s->dv = dv;
  s->sz = la_malloc(sizeof(double) * (size_t)heads * (size_t)r * (size_t)(dv + 1));
  s->m = la_malloc(sizeof(double) * (size_t)heads);
  s->f = la_malloc(sizeof(int) * (size_t)heads);
  s->a = la_malloc(sizeof(double) * (size_t)heads);
  if (!s->sz || !s->m || !s->f || !s->a) {
    la_state_free(s);
    return la_error(LA_ERR_NOMEM, "out of memory for a scan state (%d heads x %d x %d doubles)",
                    heads, r, dv + 1);
  }
  la_state_reset(s);
  return LA_OK;
}

void la_state_reset(la_state *s) {
  memset(s->sz, 0, sizeof(double) * (size_t)s->heads * (size_t)s->r * (size_t)(s->dv + 1));
  for (int h = 0; h < s->heads; h++) {
    s->m[h] = -INFINITY;
    s->f[h] = 0;
    s->a[h] = 0.0;
  }
}

void la_state_free(la_state *s) {
  free(s->sz);
  free(s->m);
  free(s->f);
  free(s->a);
  memset(s, 0, sizeof *s);
}

/* e^{x - M}, with e^{-inf - M} = 0 and M = -inf only when both are -inf (then unused). */
static inline double scale_to(double x, double M) { return x == -INFINITY ? 0.0 : exp(x - M); }

void la_state_combine_head(double *a_sz, double *a_m, int *a_f, const double *b_sz,
                           const double *b_m, const int *b_f, size_t rsz) {
  if (*b_f) { /* b starts a segment: a is not visible after it */
    memcpy(a_sz, b_sz, sizeof(double) * rsz);
    *a_m = *b_m;
    *a_f = 1;
    return;
  }
  if (*b_m == -INFINITY) return; /* b is empty: a (+) 0 = a */
  if (*a_m == -INFINITY) {       /* a is empty */
    memcpy(a_sz, b_sz, sizeof(double) * rsz);
    *a_m = *b_m;
    return;
  }
  double M = fmax(*a_m, *b_m);
  double sa = scale_to(*a_m, M), sb = scale_to(*b_m, M);
  for (size_t i = 0; i < rsz; i++) a_sz[i] = a_sz[i] * sa + b_sz[i] * sb;
  *a_m = M;
}

/* The same operator with the result in b: the MPI operator's form (inout = in (+) inout),
 * which needs no copy of a. Each case and each expression is the one above, so the result is
 * bitwise that of copying a, combining b into the copy and copying it back. */
void la_state_combine_head_right(const double *a_sz, const double *a_m, const int *a_f,
                                 double *b_sz, double *b_m, int *b_f, size_t rsz) {
  if (*b_f) return; /* b starts a segment: a is not visible after it */
  if (*b_m == -INFINITY) { /* b is empty: a (+) 0 = a */
    memcpy(b_sz, a_sz, sizeof(double) * rsz);
    *b_m = *a_m;
    *b_f = *a_f;
    return;
  }
  *b_f = *a_f;
  if (*a_m == -INFINITY) return; /* a is empty: b, with a's flag */
  double M = fmax(*a_m, *b_m);
  double sa = scale_to(*a_m, M), sb = scale_to(*b_m, M);
  for (size_t i = 0; i < rsz; i++) b_sz[i] = a_sz[i] * sa + b_sz[i] * sb;
  *b_m = M;
}

void la_state_combine(la_state *a, const la_state *b) {
  size_t rsz = (size_t)a->r * (size_t)(a->dv + 1);
  for (int h = 0; h < a->heads; h++) {
    if (b->a[h] != 0.0 && a->m[h] != -INFINITY) a->m[h] += b->a[h]; /* decayed over b (§1.2) */
    la_state_combine_head(a->sz + h * rsz, a->m + h, a->f + h, b->sz + h * rsz, b->m + h,
                          b->f + h, rsz);
    a->a[h] += b->a[h];
  }
}
