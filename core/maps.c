/* The feature-map table (docs/design.md §2, §2.3): every map's name, width rule, sign,
 * projection, stabilizer, flop count and functions, in one place. The functions come from the
 * template maps_impl.h, instantiated here for float32 and float64; the AVX-512 forms wrap
 * kern512.c. */
#include <math.h>
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

/* ---- AVX-512 forms (float32; kern512.c) ---- */
static void elu1_eval_k512(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                           float *phi, double *a, const la_k512_pf *pf) {
  (void)h;
  la_k512_elu1(n, fm->dk, x, ld, phi, fm->r, pf);
  for (int64_t i = 0; i < n; i++) a[i] = 0.0;
}

static void project_k512(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                         float *phi) {
  const size_t off = (size_t)h * fm->m * fm->dk;
  la_k512_gemm((int)n, fm->m, fm->dk, x, ld, 1, fm->omega_ft + off, fm->m, phi, fm->r, 0, 0);
}

static void favor_eval_k512(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                            float *phi, double *a, const la_k512_pf *pf) {
  project_k512(fm, h, n, x, ld, phi);
  la_k512_favor_post(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 0, pf);
}

static void favor_hyp_eval_k512(const la_featmap fm, int h, int64_t n, const float *x,
                                int64_t ld, float *phi, double *a, const la_k512_pf *pf) {
  project_k512(fm, h, n, x, ld, phi);
  la_k512_favor_post(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 1, pf);
}

/* float64: elu1 on 8 lanes; the projection by dgemm (OpenBLAS), the exp on 8 lanes
 * (kern512.c) */
static void elu1_eval_k512_f64(const la_featmap fm, int h, int64_t n, const double *x,
                               int64_t ld, double *phi, double *a, const la_k512_pf *pf) {
  (void)h;
  la_k512_elu1_f64(n, fm->dk, x, ld, phi, fm->r, pf);
  for (int64_t i = 0; i < n; i++) a[i] = 0.0;
}

static void favor_eval_k512_f64(const la_featmap fm, int h, int64_t n, const double *x,
                                int64_t ld, double *phi, double *a, const la_k512_pf *pf) {
  project_f64(fm, h, n, x, ld, phi);
  la_k512_favor_post_f64(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 0, pf);
}

static void favor_hyp_eval_k512_f64(const la_featmap fm, int h, int64_t n, const double *x,
                                    int64_t ld, double *phi, double *a, const la_k512_pf *pf) {
  project_f64(fm, h, n, x, ld, phi);
  la_k512_favor_post_f64(n, fm->m, fm->dk, x, ld, phi, fm->r, fm->s, a, 1, pf);
}

/* trig: the projection on the kernel, cos and sin as in trig_eval_f32. */
static void trig_eval_k512(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                           float *phi, double *a, const la_k512_pf *pf) {
  (void)pf;
  const int m = fm->m, r = fm->r;
  project_k512(fm, h, n, x, ld, phi);
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

/* One row per map, in la_map_kind order. The flop count is the contract's: 2 dk r per row for
 * the random maps (the projection and the exp), 0 for the elementwise maps. */
static const la_map_info la_maps[LA_MAP_COUNT] = {
    [LA_MAP_ELU1] = {"elu1", 0, LA_SIGN_POSITIVE, LA_DRAW_NONE, 0, 0.0, elu1_eval_f32,
                     elu1_eval_f64, elu1_eval_k512, 1, elu1_chain_f32, elu1_chain_f64,
                     elu1_eval_k512_f64},
    [LA_MAP_RELU] = {"relu", 0, LA_SIGN_NONNEG, LA_DRAW_NONE, 0, 0.0, relu_eval_f32,
                     relu_eval_f64, NULL, 0, relu_chain_f32, relu_chain_f64},
    [LA_MAP_IDENTITY] = {"identity", 0, LA_SIGN_SIGNED, LA_DRAW_NONE, 0, 0.0, identity_eval_f32,
                         identity_eval_f64, NULL, 0, identity_chain_f32, identity_chain_f64},
    [LA_MAP_FAVOR] = {"favor+", 1, LA_SIGN_POSITIVE, LA_DRAW_IID, 1, 2.0, favor_eval_f32,
                      favor_eval_f64, favor_eval_k512, 1, favor_chain_f32, favor_chain_f64,
                      favor_eval_k512_f64},
    [LA_MAP_FAVOR_ORF] = {"favor+orf", 1, LA_SIGN_POSITIVE, LA_DRAW_ORF, 1, 2.0, favor_eval_f32,
                          favor_eval_f64, favor_eval_k512, 1, favor_chain_f32, favor_chain_f64,
                      favor_eval_k512_f64},
    [LA_MAP_FAVOR_HYP] = {"favor-hyp", 2, LA_SIGN_POSITIVE, LA_DRAW_IID, 1, 2.0,
                          favor_hyp_eval_f32, favor_hyp_eval_f64, favor_hyp_eval_k512, 1,
                          favor_hyp_chain_f32, favor_hyp_chain_f64, favor_hyp_eval_k512_f64},
    [LA_MAP_TRIG] = {"trig", 2, LA_SIGN_SIGNED, LA_DRAW_IID, 1, 2.0, trig_eval_f32,
                     trig_eval_f64, trig_eval_k512, 0, trig_chain_f32, trig_chain_f64},
    /* the user's phi(Q), phi(K): passed through; the denominator policy judges every row */
    [LA_MAP_PRECOMPUTED] = {"precomputed", 0, LA_SIGN_ANY, LA_DRAW_NONE, 0, 0.0,
                            identity_eval_f32, identity_eval_f64, NULL, 0, identity_chain_f32,
                            identity_chain_f64},
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
int la_map_width(la_map_kind k, int dk, int m) {
  const la_map_info *mi = la_map_get(k);
  return !mi ? 0 : mi->r_per_m == 0 ? dk : mi->r_per_m * m;
}
double la_map_flops_per_row(la_map_kind k, int dk, int r) {
  return la_map_get(k) ? la_maps[k].flops_dk_r * dk * r : 0.0;
}

/* ---- Dispatch (featmap_internal.h): the AVX-512 form when the featmap chose it ---- */
void la_featmap_eval_f32(const la_featmap fm, int h, int64_t n, const float *x, int64_t ld,
                         float *phi, double *a) {
  if (n == 0) return;
  if (fm->k512 && fm->map->eval_k512) fm->map->eval_k512(fm, h, n, x, ld, phi, a, NULL);
  else fm->map->eval_f32(fm, h, n, x, ld, phi, a);
}
void la_featmap_eval_f64(const la_featmap fm, int h, int64_t n, const double *x, int64_t ld,
                         double *phi, double *a) {
  if (n == 0) return;
  if (fm->k512 && fm->map->eval_k512_f64) fm->map->eval_k512_f64(fm, h, n, x, ld, phi, a, NULL);
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
