/* Private layout of la_featmap (core only). */
#ifndef LINATTN_FEATMAP_INTERNAL_H
#define LINATTN_FEATMAP_INTERNAL_H
#include "linattn/core.h"
#include "la_core_private.h"
#include "maps.h"

struct la_featmap_s {
  la_map_kind kind;
  const la_map_info *map; /* its row of the map table (maps.c) */
  const la_simd *simd;    /* the maps' vector forms (la_config.kernels; simd.h), or NULL */
  int heads, dk, m, r; /* m: projections (random maps), nu (dpfp), else 0 */
  double s;        /* similarity scale */
  double *omega;   /* [H, m, dk] float64 (random maps) */
  double *omega_s; /* sqrt(s) * omega, float64 copy for GEMM */
  float *omega_f;  /* sqrt(s) * omega, float32 copy for GEMM */
  float *omega_ft; /* its transpose [H, dk, m], for the AVX-512 kernels (kern512.c) */
};

/* Evaluation and chain rule through the map table (maps.c), for the kernels. */
void la_featmap_eval_f32(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                         float *phi, double *a);
void la_featmap_eval_f64(const la_featmap fm, int h, int64_t n, const double *x, int64_t ld,
                         double *phi, double *a);
void la_featmap_chain_f32(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                          float *dphi, const float *phi, float *dx, int64_t ldx, double *sums);
void la_featmap_chain_f64(const la_featmap fm, int h, int64_t n, const double *x, int64_t ld,
                          double *dphi, const double *phi, double *dx, int64_t ldx, double *sums);

#endif
