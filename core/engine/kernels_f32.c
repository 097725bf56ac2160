/* The float32 instantiation of the kernel templates (chunk_impl.h, window_impl.h,
 * backward_impl.h, decay_impl.h), ending in the named table la_kernels_f32 (kernels.h, docs/design.md §5.1).
 * float32 GEMMs go to the engine's kernel table when it has one (gemm.c, simd.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "denominator.h"
#include "engine_internal.h"
#include "simd.h"
#include "simd_compose.h"
#include "la_blas.h"

#define LA_REAL float
#define LA_GEMM(...) la_gemm_f32(e, w, __VA_ARGS__)
#define LA_MAP_EVAL(fm, ...) la_featmap_eval_f32(fm, __VA_ARGS__)
#define LA_MAP_CHAIN(fm, ...) la_featmap_chain_f32(fm, __VA_ARGS__)
#define LA_SIMD_F32 1 /* the products on e->simd (gemm.c, chunk_impl.h) */
#define LA_FINALIZE_PLAIN(t) (t)->finalize_plain /* finalize_rows' common case */
#define LA_SIMD_ANY(e) ((e)->simd) /* the maps, finalize, prefetches */
#define LA_MAP_EVAL_PF eval_simd
#include "chunk_impl.h"
#include "window_impl.h"
#include "backward_impl.h"
#include "decay_impl.h"
#include "gla_impl.h"

const la_kernels la_kernels_f32 = {
    .dtype = "f32",
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
