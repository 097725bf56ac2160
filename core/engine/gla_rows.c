/* Per-feature gates' summaries in row form (docs/design.md §1.2 "Per-feature gates", "Across
 * ranks"): the scan element of head h's feature f is row f of its (S|z) with its own log-scale
 * m, flag and cumulative log-decay a, at index h r + f of a state of H r heads of width 1. The
 * decayed combine of §4.1 then applies row by row unchanged (la_state_combine), which is the
 * per-feature combine diag(e^{a_2}) (S_1|z_1) + (S_2|z_2). The engine's kernels keep one
 * log-scale per head (head form); these convert. */
#include <math.h>
#include <string.h>
#include "engine_internal.h"

int la_gla_row_form(const la_engine e, const la_state *s) {
  return e->gate_w > 1 && s->heads == e->H * e->r && s->r == 1 && s->dv == e->dv;
}

void la_gla_rows_to_head(const la_engine e, const la_state *rows, la_state *head) {
  const int r = e->r, dv1 = e->dv + 1;
  for (int h = 0; h < e->H; h++) {
    const int i0 = h * r;
    double M = -INFINITY;
    int f = 0;
    for (int c = 0; c < r; c++) {
      M = rows->m[i0 + c] > M ? rows->m[i0 + c] : M;
      f |= rows->f[i0 + c];
    }
    double *sz = head->sz + (size_t)h * r * dv1;
    for (int c = 0; c < r; c++) {
      const double mc = rows->m[i0 + c], s = mc == -INFINITY ? 0.0 : exp(mc - M);
      const double *src = rows->sz + (size_t)(i0 + c) * dv1;
      for (int j = 0; j < dv1; j++) sz[(size_t)c * dv1 + j] = src[j] * s;
    }
    head->m[h] = M;
    head->f[h] = f;
    head->a[h] = 0.0; /* unused: the rows carry the decay */
  }
}

void la_gla_head_to_rows(const la_engine e, const la_state *head, la_state *rows) {
  const int r = e->r, dv1 = e->dv + 1;
  memcpy(rows->sz, head->sz, sizeof(double) * (size_t)e->H * r * dv1);
  for (int h = 0; h < e->H; h++)
    for (int c = 0; c < r; c++) {
      rows->m[h * r + c] = head->m[h];
      rows->f[h * r + c] = head->f[h];
    }
}
