/* The scan element's packed layout (scan_element.h; docs/design.md §4.1, §1.2). */
#include <math.h>
#include <string.h>
#include "dist_internal.h"
#include "scan_element.h"

enum { TAIL = LA_SCAN_EL_TAIL };

size_t la_scan_el_doubles(int r, int dv) { return (size_t)r * (size_t)(dv + 1) + TAIL; }

void la_scan_el_pack(const la_state *s, double *buf) {
  const size_t rsz = (size_t)s->r * (s->dv + 1), per = rsz + TAIL;
  for (int h = 0; h < s->heads; h++) {
    memcpy(buf + h * per, s->sz + h * rsz, sizeof(double) * rsz);
    buf[h * per + rsz] = s->m[h];
    buf[h * per + rsz + 1] = s->f[h];
    buf[h * per + rsz + 2] = s->a[h];
  }
}

void la_scan_el_unpack(const double *buf, la_state *s) {
  const size_t rsz = (size_t)s->r * (s->dv + 1), per = rsz + TAIL;
  for (int h = 0; h < s->heads; h++) {
    memcpy(s->sz + h * rsz, buf + h * per, sizeof(double) * rsz);
    s->m[h] = buf[h * per + rsz];
    s->f[h] = buf[h * per + rsz + 1] != 0;
    s->a[h] = buf[h * per + rsz + 2];
  }
}

/* a's log-scale as b sees it: a decayed over b's tokens (§1.2), untouched without decay. */
static double decayed_m(double am, double ba) { return ba != 0.0 && am != -INFINITY ? am + ba : am; }

void la_scan_el_combine_right(const double *a, double *b, int count, size_t per) {
  const size_t rsz = per - TAIL;
#ifdef LA_SMPI
  if (la_smpi_combine((size_t)count * per)) return; /* simulated cost (docs/simulation.md) */
#endif
  for (int h = 0; h < count; h++) {
    const double *ah = a + h * per;
    double *bh = b + h * per;
    int af = ah[rsz + 1] != 0, bf = bh[rsz + 1] != 0;
    const double am = decayed_m(ah[rsz], bh[rsz + 2]);
    la_state_combine_head_right(ah, &am, &af, bh, bh + rsz, &bf, rsz);
    bh[rsz + 1] = bf;
    bh[rsz + 2] += ah[rsz + 2];
  }
}

void la_scan_el_fold(la_state *s, const double *buf, int with_flags) {
  const size_t rsz = (size_t)s->r * (s->dv + 1), per = rsz + TAIL;
  for (int h = 0; h < s->heads; h++) {
    const double *b = buf + h * per;
    int f0 = 0, f1 = with_flags && b[rsz + 1] != 0;
    s->m[h] = decayed_m(s->m[h], b[rsz + 2]);
    la_state_combine_head(s->sz + h * rsz, s->m + h, with_flags ? s->f + h : &f0, b, b + rsz,
                          &f1, rsz);
    s->a[h] += b[rsz + 2];
  }
}

/* The copies skip the arithmetic's data in a simulation with shared buffers, as the scans'
 * own copies do (scan.c copy_d; docs/simulation.md): the (m, f, a) tail is always written. */
static void copy_sz(double *dst, const double *src, size_t n) {
#ifdef LA_SMPI
  if (la_smpi_combine_skip) return;
#endif
  memcpy(dst, src, sizeof(double) * n);
}

void la_scan_el_piece(const double *el, int count, size_t per, size_t lo, size_t L,
                      double *piece) {
  const size_t rsz = per - TAIL, pp = L + TAIL;
  for (int h = 0; h < count; h++) {
    copy_sz(piece + h * pp, el + h * per + lo, L);
    memcpy(piece + h * pp + L, el + h * per + rsz, sizeof(double) * TAIL);
  }
}

void la_scan_el_unpiece(const double *piece, int count, size_t per, size_t lo, size_t L,
                        double *el) {
  const size_t rsz = per - TAIL, pp = L + TAIL;
  for (int h = 0; h < count; h++) {
    copy_sz(el + h * per + lo, piece + h * pp, L);
    memcpy(el + h * per + rsz, piece + h * pp + L, sizeof(double) * TAIL);
  }
}

void la_scan_el_copy(la_state *dst, const la_state *src) {
  const size_t n = (size_t)src->heads * src->r * (src->dv + 1);
  memcpy(dst->sz, src->sz, n * sizeof *dst->sz);
  memcpy(dst->m, src->m, (size_t)src->heads * sizeof *dst->m);
  memcpy(dst->f, src->f, (size_t)src->heads * sizeof *dst->f);
  memcpy(dst->a, src->a, (size_t)src->heads * sizeof *dst->a);
}
