/* Shared by the softmax reference's forward (core/softmax/softmax.c) and backward
 * (core/softmax/softmax_bwd.c): the mask of docs/design.md §4.6 row by row, and the thread count. */
#ifndef LINATTN_SOFTMAX_INTERNAL_H
#define LINATTN_SOFTMAX_INTERNAL_H
#include <stdint.h>
#include "linattn/baseline.h"

/* LA_OK, or LA_ERR_ARG with the reason recorded (who names the caller): a mode other than
 * causal/bidirectional, a negative window or one in bidirectional mode, offsets that are not
 * 0 = o_0 < ... < o_S with S >= 1, or positions [0, end) reaching past o_S. */
la_status la_sm_mask_check(const la_softmax_mask *m, int64_t end, const char *who);

/* LA_OK, or LA_ERR_ARG naming who: a log_decay (when not NULL) whose value of some head is
 * NaN, infinite or > 0 (gamma outside (0, 1]). */
la_status la_sm_decay_check(const la_softmax_mask *m, int heads, const char *who);

/* S[i * lds + c] += |(i0 + i) - (j0 + c)| ld for i < nr, c < nc (docs/design.md §8.1 "With
 * decay"): the decay bias of one tile by global positions; nothing when ld == 0. */
void la_sm_decay_bias_f64(double *S, int nr, int nc, int lds, int64_t i0, int64_t j0, double ld);
void la_sm_decay_bias_f32(float *S, int nr, int nc, int lds, int64_t i0, int64_t j0, double ld);

/* Query rows i0 .. i0+n-1 read the keys [lo[r], hi[r]) (r = i - i0); lo and hi never
 * decrease with i, and i itself is always read. hi is INT64_MAX where the mask sets no end
 * (bidirectional without segments). O(n + log S). The mask must have passed la_sm_mask_check. */
void la_sm_rows(const la_softmax_mask *m, int64_t i0, int64_t n, int64_t *lo, int64_t *hi);

/* threads <= 0: the OpenMP default; 1 without OpenMP. */
int la_sm_threads(int threads);
int la_sm_thread(void);

#endif
