/* The feature-map table, docs/design.md §2 and §2.3: one row per map (la_map_kind order).
 * config.c, featmap.c, report.c and the engine read it; so do the CLI's names and help
 * (la_map_name, la_map_from_name). Adding a map = one row in maps.c and its functions. */
#ifndef LINATTN_MAPS_H
#define LINATTN_MAPS_H
#include <stddef.h>
#include <stdint.h>
#include "simd.h"
#include "linattn/core.h"

typedef enum { LA_SIGN_POSITIVE, LA_SIGN_NONNEG, LA_SIGN_SIGNED, LA_SIGN_ANY } la_map_sign;
typedef enum { LA_DRAW_NONE, LA_DRAW_IID, LA_DRAW_ORF } la_map_draw;
/* r from dk and m (--features): dk, m, 2m, 1 + dk + dk(dk+1)/2 (taylor2), 2 dk m (dpfp) */
typedef enum { LA_WIDTH_DK, LA_WIDTH_M, LA_WIDTH_2M, LA_WIDTH_TAYLOR2, LA_WIDTH_2DK_M } la_map_width_rule;

/* phi = phi_s e^a for n rows of head h (maps_impl.h has the contract). */
typedef void (*la_map_eval_f32)(const la_featmap fm, int h, int64_t n, const float *x,
                                int64_t ld, float *phi, double *a);
typedef void (*la_map_eval_f64)(const la_featmap fm, int h, int64_t n, const double *x,
                                int64_t ld, double *phi, double *a);
/* The vector form on the featmap's kernel table (fm->simd, simd.h); pf: rows to prefetch
 * meanwhile, or NULL (used when simd_prefetch). */
typedef void (*la_map_eval_simd)(const la_featmap fm, int h, int64_t n, const float *x,
                                 int64_t ld, float *phi, double *a, const la_simd_pf *pf);
typedef void (*la_map_eval_simd_f64)(const la_featmap fm, int h, int64_t n, const double *x,
                                     int64_t ld, double *phi, double *a, const la_simd_pf *pf);
/* dx = J_phi(x)^T dphi (dphi overwritten, sums: n doubles of scratch). */
typedef void (*la_map_chain_f32)(const la_featmap fm, int h, int64_t n, const float *x,
                                 int64_t ld, float *dphi, const float *phi, float *dx,
                                 int64_t ldx, double *sums);
typedef void (*la_map_chain_f64)(const la_featmap fm, int h, int64_t n, const double *x,
                                 int64_t ld, double *dphi, const double *phi, double *dx,
                                 int64_t ldx, double *sums);

typedef struct {
  const char *name;      /* --feature-map */
  la_map_width_rule width; /* r from dk and m */
  la_map_sign sign;      /* signed maps need --allow-signed in normalized mode (§1) */
  la_map_draw draw;      /* projection omega [m, dk] per head: none, iid N(0, I), ORF (§2.1) */
  int stabilized;        /* carries a per-row log-scale a (§2.2) */
  /* useful flops of one row's map = flops_dk_r dk r + flops_r r + flops_dk dk (docs/cli.md) */
  double flops_dk_r, flops_r, flops_dk;
  la_map_eval_f32 eval_f32;
  la_map_eval_f64 eval_f64;
  la_map_eval_simd eval_simd; /* NULL: eval_f32 on every CPU */
  int simd_prefetch;          /* eval_simd(_f64) spreads the next chunk's prefetches over its rows */
  la_map_chain_f32 chain_f32;
  la_map_chain_f64 chain_f64;
  la_map_eval_simd_f64 eval_simd_f64; /* the float64 vector form; NULL: eval_f64 on every CPU */
} la_map_info;

/* The row of map k (k < LA_MAP_COUNT), or NULL. */
const la_map_info *la_map_get(la_map_kind k);
/* LA_OK if map k takes features m at input width dk (m in [1, LA_FEATURES_MAX] for the random
 * maps, nu in [1, 2 dk - 1] for dpfp, r <= LA_WIDTH_MAX); else LA_ERR_ARG with its one-line
 * reason recorded (la_config_check and la_featmap_create). */
la_status la_map_check_width(la_map_kind k, int dk, int m);
#endif
