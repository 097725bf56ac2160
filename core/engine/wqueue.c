/* The window's two-stacks queue, docs/design.md §3.2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "linattn/core.h"
#include "la_alloc.h"
#include "wqueue.h"

/* a, b: 2 cap int64; sz, agg: 2 cap rsz; m, aggm: 2 cap; back: rsz */
size_t la_wq_bytes(int cap, size_t rsz) {
  return sizeof(int64_t) * 2 * (size_t)cap + sizeof(double) * ((2 * rsz + 2) * (size_t)cap + rsz);
}

int la_wq_reserve(la_wqueue *Q, int cap, size_t rsz) {
  if (Q->mem && Q->cap >= cap && Q->rsz == rsz) return 0;
  free(Q->mem);
  memset(Q, 0, sizeof *Q);
  char *p = la_malloc(la_wq_bytes(cap, rsz));
  if (!p) return -1;
  Q->mem = p;
  Q->cap = cap;
  Q->rsz = rsz;
  Q->a = (int64_t *)p;
  Q->b = Q->a + cap;
  double *d = (double *)(Q->b + cap);
  Q->sz = d;
  Q->agg = d + rsz * cap;
  Q->m = d + 2 * rsz * cap;
  Q->aggm = Q->m + cap;
  Q->back = Q->aggm + cap;
  la_wq_clear(Q);
  return 0;
}

void la_wq_free(la_wqueue *Q) {
  free(Q->mem);
  memset(Q, 0, sizeof *Q);
}

void la_wq_add(double *dst, double *dm, const double *src, double sm, size_t rsz) {
  int f0 = 0, f1 = 0;
  la_state_combine_head(dst, dm, &f0, src, &sm, &f1, rsz);
}

/* A log-scale m taken as of token `from` moved to token `to` >= from: lower by (to - from)
 * lam, or with gates by the log-decay of tokens [from, to); untouched without decay (lam = 0)
 * or for an empty summary. */
static double decayed_to(const la_wqueue *Q, double m, int64_t from, int64_t to) {
  if (m == -INFINITY || to == from) return m;
  if (Q->cum) return m + (Q->cum[to - Q->cbase] - Q->cum[from - Q->cbase]);
  return Q->lam != 0.0 ? m + (double)(to - from) * Q->lam : m;
}

void la_wq_set_decay(la_wqueue *Q, double lam) {
  Q->lam = lam;
  Q->cum = NULL;
}

void la_wq_set_cum(la_wqueue *Q, const double *cum, int64_t cbase) {
  Q->cum = cum;
  Q->cbase = cbase;
}

void la_wq_clear(la_wqueue *Q) {
  Q->head = Q->count = Q->nfront = 0;
  memset(Q->back, 0, sizeof(double) * Q->rsz);
  Q->backm = -INFINITY;
  Q->backb = Q->frontb = 0;
}

void la_wq_push(la_wqueue *Q, int64_t a, int64_t b, const double *sz, double m) {
  int slot = (Q->head + Q->count) % Q->cap;
  Q->a[slot] = a;
  Q->b[slot] = b;
  memcpy(Q->sz + (size_t)slot * Q->rsz, sz, sizeof(double) * Q->rsz);
  Q->m[slot] = m;
  Q->count++;
  Q->backm = decayed_to(Q, Q->backm, Q->backb, b); /* the back aggregate, now as of b */
  Q->backb = b;
  la_wq_add(Q->back, &Q->backm, sz, m, Q->rsz);
}

void la_wq_pop(la_wqueue *Q) {
  if (Q->nfront == 0) { /* move the back stack over, building suffix aggregates */
    const int last = (Q->head + Q->count - 1) % Q->cap;
    Q->frontb = Q->b[last]; /* every suffix aggregate is taken as of the last one's end */
    for (int kk = Q->count - 1; kk >= 0; kk--) {
      int s = (Q->head + kk) % Q->cap, s1 = (Q->head + kk + 1) % Q->cap;
      double *ag = Q->agg + (size_t)s * Q->rsz;
      memcpy(ag, Q->sz + (size_t)s * Q->rsz, sizeof(double) * Q->rsz);
      Q->aggm[s] = decayed_to(Q, Q->m[s], Q->b[s], Q->frontb);
      if (kk < Q->count - 1) la_wq_add(ag, Q->aggm + s, Q->agg + (size_t)s1 * Q->rsz, Q->aggm[s1], Q->rsz);
    }
    Q->nfront = Q->count;
    memset(Q->back, 0, sizeof(double) * Q->rsz);
    Q->backm = -INFINITY;
    Q->backb = Q->frontb;
  }
  Q->head = (Q->head + 1) % Q->cap;
  Q->count--;
  Q->nfront--;
}

void la_wq_sum_at(const la_wqueue *Q, double *sz, double *m, int64_t *asof) {
  memcpy(sz, Q->back, sizeof(double) * Q->rsz);
  *m = Q->backm;
  *asof = Q->backb;
  if (Q->nfront > 0) {
    const int64_t to = Q->backm != -INFINITY ? Q->backb : Q->frontb;
    const double fm = decayed_to(Q, Q->aggm[Q->head], Q->frontb, to);
    la_wq_add(sz, m, Q->agg + (size_t)Q->head * Q->rsz, fm, Q->rsz);
    *asof = to;
  }
}

void la_wq_sum(const la_wqueue *Q, double *sz, double *m) {
  int64_t asof;
  la_wq_sum_at(Q, sz, m, &asof);
}
