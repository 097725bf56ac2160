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

/* Query rows i0 .. i0+n-1 read the keys [lo[r], hi[r]) (r = i - i0); lo and hi never
 * decrease with i, and i itself is always read. hi is INT64_MAX where the mask sets no end
 * (bidirectional without segments). O(n + log S). The mask must have passed la_sm_mask_check. */
void la_sm_rows(const la_softmax_mask *m, int64_t i0, int64_t n, int64_t *lo, int64_t *hi);

/* threads <= 0: the OpenMP default; 1 without OpenMP. */
int la_sm_threads(int threads);
int la_sm_thread(void);

#endif
