/* The kernel tables, one per instruction set (docs/design.md §5.5 "Kernels per instruction
 * set"; the type is simd.h). Compiled without ISA flags: a table only names functions, each
 * built in its own file with its ISA's flags (kern512.c: AVX-512F; kern256*.c: AVX2 + FMA). On a build or CPU without
 * the ISA the table is never chosen (simd_cpu.c); its entries are then stubs that do nothing.
 * Adding an instruction set = its kernel files, one table here, one availability check and
 * one --kernels name in simd_cpu.c. */
#include "kern256.h"
#include "kern256_maps.h"
#include "kern512.h"
#include "simd.h"

const la_simd la_simd_avx512 = {
    .name = "avx512",
    .gemm = la_k512_gemm,
    .transpose = la_k512_transpose,
    .gemm_f64 = NULL, /* OpenBLAS's SkylakeX DGEMM is 2x la_k256_gemm_f64 here (§5.5) */
    .transpose_f64 = la_k256_transpose_f64, /* AVX2 moves; OpenBLAS's NN product follows */
    .den_column = la_k512_den_column,
    .colsum = la_k512_colsum,
    .elu1 = la_k512_elu1,
    .elu1_f64 = la_k512_elu1_f64,
    .favor_post = la_k512_favor_post,
    .favor_post_f64 = la_k512_favor_post_f64,
    .taylor2 = la_k512_taylor2,
    .add_to_f64 = la_k512_add_to_f64,
    .add_round = la_k512_add_round,
    .to_f32 = la_k512_to_f32,
    .sum_to_f32 = la_k512_sum_to_f32,
    .scale_row = la_k512_scale_row,
    .mul_f32 = la_k512_mul_f32,
    .dot_f64 = la_k512_dot_f64,
    .exp_f64 = la_k512_exp_f64,
    .finalize_plain = la_k512_finalize_plain,
    .finalize_plain_f64 = la_k512_finalize_plain_f64,
    .prefetch = la_k512_prefetch,
    .gate_fold = la_k512_gate_fold,
};

const la_simd la_simd_avx2 = {
    .name = "avx2",
    .gemm = la_k256_gemm,
    .transpose = la_k256_transpose,
    .gemm_f64 = la_k256_gemm_f64, /* 1.1-1.6x OpenBLAS's Haswell DGEMM at the chunk's shapes */
    .transpose_f64 = la_k256_transpose_f64,
    .den_column = la_k256_den_column,
    .colsum = la_k256_colsum,
    .elu1 = la_k256_elu1,
    .elu1_f64 = la_k256_elu1_f64,
    .favor_post = la_k256_favor_post,
    .favor_post_f64 = la_k256_favor_post_f64,
    .taylor2 = la_k256_taylor2,
    .add_to_f64 = la_k256_add_to_f64,
    .add_round = la_k256_add_round,
    .to_f32 = la_k256_to_f32,
    .sum_to_f32 = la_k256_sum_to_f32,
    .scale_row = la_k256_scale_row,
    .mul_f32 = la_k256_mul_f32,
    .dot_f64 = la_k256_dot_f64,
    .exp_f64 = la_k256_exp_f64,
    .finalize_plain = la_k256_finalize_plain,
    .finalize_plain_f64 = la_k256_finalize_plain_f64,
    .prefetch = la_k256_prefetch,
    .gate_fold = la_k256_gate_fold,
};
