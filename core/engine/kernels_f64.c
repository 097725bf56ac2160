/* The float64 instantiation of the kernel templates (chunk_impl.h, window_impl.h,
 * backward_impl.h, decay_impl.h), ending in the named table la_kernels_f64 (kernels.h, docs/design.md §5.1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "denominator.h"
#include "engine_internal.h"

#include "simd.h"
#include "la_blas.h"

#define LA_REAL double
#define LA_REAL_IS_F64 1 /* the state's own precision: chunk_impl.h uses it in place */
#define LA_GEMM(...) la_gemm_f64(e, w, __VA_ARGS__)
#define LA_MAP_EVAL(fm, ...) la_featmap_eval_f64(fm, __VA_ARGS__)
#define LA_MAP_CHAIN(fm, ...) la_featmap_chain_f64(fm, __VA_ARGS__)
/* the maps' table (fm->simd) also runs finalize_rows' common case and the prefetches; the
 * GEMMs stay on OpenBLAS */
#define LA_FINALIZE_PLAIN(t) (t)->finalize_plain_f64 /* finalize_rows' common case */
#define LA_SIMD_ANY(e) ((e)->fm->simd) /* the maps, finalize, prefetches */
#define LA_MAP_EVAL_PF eval_simd_f64

#include "chunk_impl.h"
#include "window_impl.h"
#include "backward_impl.h"
#include "decay_impl.h"
#include "gla_impl.h"

const la_kernels la_kernels_f64 = {
    .dtype = "f64",
    .accum_range = accum_range,
    .accum_heads = accum_heads,
    .apply_causal = apply_causal,
    .apply_causal_heads = apply_causal_heads,
    .apply_bidir = apply_bidir,
    .apply_bidir_heads = apply_bidir_heads,
    .correct_rows = correct_rows,
    .apply_segmented = apply_segmented,
    .apply_window = apply_window,
    .bwd_replay = bwd_replay,
    .bwd_replay_heads = bwd_replay_heads,
    .bwd_reverse_heads = bwd_reverse_heads,
    .bwd_segmented = bwd_segmented,
    .bwd_segmented_ends = bwd_segmented_ends,
    .bwd_window_reverse = bwd_window_reverse,
    .bwd_tape_heads = bwd_tape_heads,
    .query_summary = query_summary_rows,
    .decay_causal = decay_causal,
    .gla_causal = gla_causal,
    .gla_accum = gla_accum,
    .gla_correct = gla_correct,
    .decay_accum = decay_accum,
    .decay_bidir = decay_bidir,
};
