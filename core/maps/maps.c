/* The feature-map table (docs/design.md §2, §2.3): every map's name, width rule, sign,
 * projection, stabilizer, flop count and functions, in one place. The functions come from the
 * template maps_impl.h, instantiated here for float32 and float64; the vector forms call the
 * featmap's kernel table (fm->simd, simd.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "featmap_internal.h"
#include "la_blas.h"
#include "maps.h"
#include "vexp.h"

#define LA_REAL float
#define LA_SFX f32
#define LA_GEMM cblas_sgemm
#define LA_EXP la_vexpf
#define LA_OMEGA omega_f
#include "maps_impl.h"
#define LA_REAL double
#define LA_SFX f64
#define LA_GEMM cblas_dgemm
#define LA_EXP la_vexp
#define LA_OMEGA omega_s
#include "maps_impl.h"

/* ---- The vector forms, on the featmap's kernel table fm->simd (simd.h) ---- */
static void elu1_eval_simd(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                           float *phi, double *a, const la_simd_pf *pf) {
  (void)h;
  fm->simd->elu1(n, fm->dk, x, ld, phi, fm->r, pf);
  for (int64_t i = 0; i < n; i++) a[i] = 0.0;
}

static void project_simd(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                         float *phi) {
  const size_t off = (size_t)h * fm->m * fm->dk;
  fm->simd->gemm((int)n, fm->m, fm->dk, x, ld, 1, fm->omega_ft + off, fm->m, phi, fm->r, 0, 0);
}

static void favor_eval_simd(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                            float *phi, double *a, const la_simd_pf *pf) {
  project_simd(fm, h, n, x, ld, phi);
  fm->simd->favor_post(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 0, pf);
}

static void favor_hyp_eval_simd(const la_featmap fm, int h, int64_t n, const float *x,
                                int64_t ld, float *phi, double *a, const la_simd_pf *pf) {
  project_simd(fm, h, n, x, ld, phi);
  fm->simd->favor_post(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 1, pf);
}

/* float64: elu1 and the exp on the table's lanes; the projection by dgemm (OpenBLAS) */
static void elu1_eval_simd_f64(const la_featmap fm, int h, int64_t n, const double *x,
                               int64_t ld, double *phi, double *a, const la_simd_pf *pf) {
  (void)h;
  fm->simd->elu1_f64(n, fm->dk, x, ld, phi, fm->r, pf);
  for (int64_t i = 0; i < n; i++) a[i] = 0.0;
}

static void favor_eval_simd_f64(const la_featmap fm, int h, int64_t n, const double *x,
                                int64_t ld, double *phi, double *a, const la_simd_pf *pf) {
  project_f64(fm, h, n, x, ld, phi);
  fm->simd->favor_post_f64(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 0, pf);
}

static void favor_hyp_eval_simd_f64(const la_featmap fm, int h, int64_t n, const double *x,
                                    int64_t ld, double *phi, double *a, const la_simd_pf *pf) {
  project_f64(fm, h, n, x, ld, phi);
  fm->simd->favor_post_f64(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 1, pf);
}

/* trig: the projection on the kernel, cos and sin as in trig_eval_f32. */
static void trig_eval_simd(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                           float *phi, double *a, const la_simd_pf *pf) {
  (void)pf;
  const int m = fm->m, r = fm->r;
  project_simd(fm, h, n, x, ld, phi);
  const float c = (float)(1.0 / sqrt((double)m));
  for (int64_t i = 0; i < n; i++) {
    float *pi = phi + i * r;
    for (int j = 0; j < m; j++) {
      double u = (double)pi[j];
      pi[j] = c * (float)cos(u);
      pi[m + j] = c * (float)sin(u);
    }
    a[i] = half_norm2_f32(fm, x + i * ld);
  }
}

/* taylor2: the products on vector lanes (the table's), the same bits as taylor2_eval_f32. */
static void taylor2_eval_simd(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                              float *phi, double *a, const la_simd_pf *pf) {
  (void)h, (void)pf;
  fm->simd->taylor2(n, fm->dk, x, ld, phi, fm->r, (float)sqrt(fm->s));
  for (int64_t i = 0; i < n; i++) a[i] = 0.0;
}

/* One row per map, in la_map_kind order. The flop counts are the contract's: 2 dk r per row for
 * the random maps (the projection and the exp), 0 for the elementwise maps; one multiply per
 * product feature for taylor2 (r - 1 - dk products, dk scalings by sqrt(s), dk by 1/sqrt 2:
 * counted as r + dk) and dpfp (r; rho is a relu, counted 0 like relu). Designated
 * initializers: a field left out is 0 or NULL (no vector form, not stabilized, ...). */
static const la_map_info la_maps[LA_MAP_COUNT] = {
    [LA_MAP_ELU1] = {.name = "elu1", .width = LA_WIDTH_DK, .sign = LA_SIGN_POSITIVE,
                     .draw = LA_DRAW_NONE, .eval_f32 = elu1_eval_f32, .eval_f64 = elu1_eval_f64,
                     .eval_simd = elu1_eval_simd, .simd_prefetch = 1, .chain_f32 = elu1_chain_f32,
                     .chain_f64 = elu1_chain_f64, .eval_simd_f64 = elu1_eval_simd_f64},
    [LA_MAP_RELU] = {.name = "relu", .width = LA_WIDTH_DK, .sign = LA_SIGN_NONNEG,
                     .draw = LA_DRAW_NONE, .eval_f32 = relu_eval_f32, .eval_f64 = relu_eval_f64,
                     .chain_f32 = relu_chain_f32, .chain_f64 = relu_chain_f64},
    [LA_MAP_IDENTITY] = {.name = "identity", .width = LA_WIDTH_DK, .sign = LA_SIGN_SIGNED,
                         .draw = LA_DRAW_NONE, .eval_f32 = identity_eval_f32,
                         .eval_f64 = identity_eval_f64, .chain_f32 = identity_chain_f32,
                         .chain_f64 = identity_chain_f64},
    [LA_MAP_FAVOR] = {.name = "favor+", .width = LA_WIDTH_M, .sign = LA_SIGN_POSITIVE,
                      .draw = LA_DRAW_IID, .stabilized = 1, .flops_dk_r = 2.0,
                      .eval_f32 = favor_eval_f32, .eval_f64 = favor_eval_f64,
                      .eval_simd = favor_eval_simd, .simd_prefetch = 1,
                      .chain_f32 = favor_chain_f32, .chain_f64 = favor_chain_f64,
                      .eval_simd_f64 = favor_eval_simd_f64},
    [LA_MAP_FAVOR_ORF] = {.name = "favor+orf", .width = LA_WIDTH_M, .sign = LA_SIGN_POSITIVE,
                          .draw = LA_DRAW_ORF, .stabilized = 1, .flops_dk_r = 2.0,
                          .eval_f32 = favor_eval_f32, .eval_f64 = favor_eval_f64,
                          .eval_simd = favor_eval_simd, .simd_prefetch = 1,
                          .chain_f32 = favor_chain_f32, .chain_f64 = favor_chain_f64,
                          .eval_simd_f64 = favor_eval_simd_f64},
    [LA_MAP_FAVOR_HYP] = {.name = "favor-hyp", .width = LA_WIDTH_2M, .sign = LA_SIGN_POSITIVE,
                          .draw = LA_DRAW_IID, .stabilized = 1, .flops_dk_r = 2.0,
                          .eval_f32 = favor_hyp_eval_f32, .eval_f64 = favor_hyp_eval_f64,
                          .eval_simd = favor_hyp_eval_simd, .simd_prefetch = 1,
                          .chain_f32 = favor_hyp_chain_f32, .chain_f64 = favor_hyp_chain_f64,
                          .eval_simd_f64 = favor_hyp_eval_simd_f64},
    [LA_MAP_TRIG] = {.name = "trig", .width = LA_WIDTH_2M, .sign = LA_SIGN_SIGNED,
                     .draw = LA_DRAW_IID, .stabilized = 1, .flops_dk_r = 2.0,
                     .eval_f32 = trig_eval_f32, .eval_f64 = trig_eval_f64,
                     .eval_simd = trig_eval_simd, .chain_f32 = trig_chain_f32,
                     .chain_f64 = trig_chain_f64},
    /* the user's phi(Q), phi(K): passed through; the denominator policy judges every row */
    [LA_MAP_PRECOMPUTED] = {.name = "precomputed", .width = LA_WIDTH_DK, .sign = LA_SIGN_ANY,
                            .draw = LA_DRAW_NONE, .eval_f32 = identity_eval_f32,
                            .eval_f64 = identity_eval_f64, .chain_f32 = identity_chain_f32,
                            .chain_f64 = identity_chain_f64},
    /* signed features, positive kernel 1 + t + t^2/2 >= 1/2 (§2): not LA_SIGN_SIGNED, so
     * normalized mode needs no --allow-signed; the policy still judges every row */
    [LA_MAP_TAYLOR2] = {.name = "taylor2", .width = LA_WIDTH_TAYLOR2, .sign = LA_SIGN_POSITIVE,
                        .draw = LA_DRAW_NONE, .flops_r = 1.0, .flops_dk = 1.0,
                        .eval_f32 = taylor2_eval_f32, .eval_f64 = taylor2_eval_f64,
                        .eval_simd = taylor2_eval_simd, .chain_f32 = taylor2_chain_f32,
                        .chain_f64 = taylor2_chain_f64},
    [LA_MAP_DPFP] = {.name = "dpfp", .width = LA_WIDTH_2DK_M, .sign = LA_SIGN_NONNEG,
                     .draw = LA_DRAW_NONE, .flops_r = 1.0, .eval_f32 = dpfp_eval_f32,
                     .eval_f64 = dpfp_eval_f64, .chain_f32 = dpfp_chain_f32,
                     .chain_f64 = dpfp_chain_f64},
};

const la_map_info *la_map_get(la_map_kind k) {
  return (k >= 0 && k < LA_MAP_COUNT) ? &la_maps[k] : NULL;
}

/* ---- The public questions about a map (core.h), answered from the table ---- */
const char *la_map_name(la_map_kind k) { return la_map_get(k) ? la_maps[k].name : "unknown"; }

int la_map_from_name(const char *s, la_map_kind *k) {
  for (int i = 0; i < LA_MAP_COUNT; i++)
    if (strcmp(s, la_maps[i].name) == 0) {
      *k = (la_map_kind)i;
      return 0;
    }
  return -1;
}

int la_map_is_signed(la_map_kind k) { return la_map_get(k) && la_maps[k].sign == LA_SIGN_SIGNED; }
int la_map_is_stabilized(la_map_kind k) { return la_map_get(k) && la_maps[k].stabilized; }
int la_map_is_random(la_map_kind k) { return la_map_get(k) && la_maps[k].draw != LA_DRAW_NONE; }
int la_map_uses_features(la_map_kind k) {
  return la_map_is_random(k) || (la_map_get(k) && la_maps[k].width == LA_WIDTH_2DK_M);
}
int la_map_width(la_map_kind k, int dk, int m) {
  const la_map_info *mi = la_map_get(k);
  if (!mi) return 0;
  const int64_t d = dk;
  int64_t r = d;
  switch (mi->width) {
  case LA_WIDTH_DK: r = d; break;
  case LA_WIDTH_M: r = m; break;
  case LA_WIDTH_2M: r = 2 * (int64_t)m; break;
  case LA_WIDTH_TAYLOR2: r = 1 + d + d * (d + 1) / 2; break;
  case LA_WIDTH_2DK_M: r = 2 * d * m; break;
  }
  /* precomputed takes its width from the input, up to LA_DIM_MAX */
  return r > (mi->width == LA_WIDTH_DK ? LA_DIM_MAX : LA_WIDTH_MAX) ? 0 : (int)r;
}
double la_map_flops_per_row(la_map_kind k, int dk, int r) {
  const la_map_info *mi = la_map_get(k);
  return mi ? mi->flops_dk_r * dk * r + mi->flops_r * r + mi->flops_dk * dk : 0.0;
}

la_status la_map_check_width(la_map_kind k, int dk, int m) {
  const la_map_info *mi = la_map_get(k);
  LA_CHECK(mi, LA_ERR_ARG, "--feature-map: unknown map");
  LA_CHECK(mi->draw == LA_DRAW_NONE || (m >= 1 && m <= LA_FEATURES_MAX), LA_ERR_ARG,
           "--features %d is outside [1, %d]", m, LA_FEATURES_MAX);
  /* DPFP-nu: nu in {1, ..., 2 dk - 1} (Schlag et al. 2021, section 5.3) */
  LA_CHECK(mi->width != LA_WIDTH_2DK_M || (m >= 1 && (int64_t)m <= 2 * (int64_t)dk - 1), LA_ERR_ARG,
           "--feature-map %s: --features %d (nu) is outside [1, %lld] (2 dk - 1 for dk = %d)",
           mi->name, m, 2 * (long long)dk - 1, dk);
  LA_CHECK(dk < 1 || la_map_width(k, dk, m) != 0, LA_ERR_ARG,
           "--feature-map %s: the width r for dk = %d%s exceeds %d", mi->name, dk,
           mi->width == LA_WIDTH_TAYLOR2 ? " (1 + dk + dk(dk+1)/2; dk <= 510)" : "", LA_WIDTH_MAX);
  return LA_OK;
}

/* ---- Dispatch (featmap_internal.h): the vector form when the featmap has a table ---- */
void la_featmap_eval_f32(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                         float *phi, double *a) {
  if (n == 0) return;
  if (fm->simd && fm->map->eval_simd) fm->map->eval_simd(fm, h, n, x, ld, phi, a, NULL);
  else fm->map->eval_f32(fm, h, n, x, ld, phi, a);
}
void la_featmap_eval_f64(const la_featmap fm, int h, int64_t n, const double *x, int64_t ld,
                         double *phi, double *a) {
  if (n == 0) return;
  if (fm->simd && fm->map->eval_simd_f64) fm->map->eval_simd_f64(fm, h, n, x, ld, phi, a, NULL);
  else fm->map->eval_f64(fm, h, n, x, ld, phi, a);
}
void la_featmap_chain_f32(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                          float *dphi, const float *phi, float *dx, int64_t ldx, double *sums) {
  if (n > 0) fm->map->chain_f32(fm, h, n, x, ld, dphi, phi, dx, ldx, sums);
}
void la_featmap_chain_f64(const la_featmap fm, int h, int64_t n, const double *x, int64_t ld,
                          double *dphi, const double *phi, double *dx, int64_t ldx,
                          double *sums) {
  if (n > 0) fm->map->chain_f64(fm, h, n, x, ld, dphi, phi, dx, ldx, sums);
}
