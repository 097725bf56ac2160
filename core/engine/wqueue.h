/* The window's two-stacks queue of key (or query) summaries, docs/design.md §3.2.
 * Summaries cover token ranges [a, b), oldest first. The front stack holds suffix aggregates,
 * the back stack one running aggregate, so the sum of the queue is front (+) back: nothing is
 * ever subtracted. Sums are log-scaled (§4.1); every summary is r x (dv+1) float64.
 * Storage belongs to a per-thread workspace and is reserved outside the parallel regions. */
#ifndef LINATTN_WQUEUE_H
#define LINATTN_WQUEUE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  int cap, head, count, nfront;
  size_t rsz;
  int64_t *a, *b;
  double *sz, *m, *agg, *aggm;
  double *back, backm;
  /* decay (§1.2): ln gamma per token (0: none). A summary of [a, b) is then taken as of its
   * last token b - 1; the back aggregate is as of backb, the front's suffix aggregates as of
   * frontb, and combining moves the earlier operand's log-scale by (later b - its b) lam.
   * With gates (§1.2 "Gates"), by cum[later b - cbase] - cum[its b - cbase] instead, cum[t -
   * cbase] = the sum of (lam + g_l) over tokens cbase <= l < t (la_wq_set_cum). */
  double lam;
  const double *cum;
  int64_t backb, frontb, cbase;
  void *mem; /* one allocation behind every array */
} la_wqueue;

/* Room for cap summaries of rsz doubles; keeps the storage when it is already large enough.
 * 0 on success, -1 when out of memory (the queue is then empty and unusable). */
int la_wq_reserve(la_wqueue *Q, int cap, size_t rsz);
/* The bytes la_wq_reserve allocates for cap summaries of rsz doubles (the memory estimate,
 * docs/design.md §4.8). */
size_t la_wq_bytes(int cap, size_t rsz);
void la_wq_free(la_wqueue *Q);
void la_wq_clear(la_wqueue *Q);
void la_wq_push(la_wqueue *Q, int64_t a, int64_t b, const double *sz, double m);
void la_wq_pop(la_wqueue *Q);
/* sz, m <- the sum of everything in the queue. */
void la_wq_sum(const la_wqueue *Q, double *sz, double *m);
/* The same, and with decay the token it is taken as of (*asof - 1 is its last token). */
void la_wq_sum_at(const la_wqueue *Q, double *sz, double *m, int64_t *asof);
/* ln gamma of the summaries pushed from now on (0: no decay); la_wq_clear keeps it. */
void la_wq_set_decay(la_wqueue *Q, double lam);
/* Gates (§1.2): the cumulative log-decay from token cbase (see cum above; NULL: lam alone).
 * Every position the queue then moves a summary from or to must lie in cum's range. */
void la_wq_set_cum(la_wqueue *Q, const double *cum, int64_t cbase);
/* (dst, dm) <- (dst, dm) (+) (src, sm), a plain log-scaled sum without flags. */
void la_wq_add(double *dst, double *dm, const double *src, double sm, size_t rsz);
#endif
