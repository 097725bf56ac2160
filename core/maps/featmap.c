/* The feature-map object, docs/design.md §2: the map's row of the table (maps.c), its width,
 * and for the random maps the projection (§2.1), drawn from the seed or loaded. Every map
 * returns phi = phi_s e^a with a per-row log-scale a (a = 0 for the unstabilized maps), so
 * callers can stabilize (§2.2). */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "featmap_internal.h"
#include "la_alloc.h"

/* Stream tags keep projection draws disjoint from data draws. */
#define LA_STREAM_PROJ (1ULL << 62)
#define LA_STREAM_NORM (1ULL << 61)

static void refresh_scaled(la_featmap fm) {
  size_t n = (size_t)fm->heads * fm->m * fm->dk;
  double rs = sqrt(fm->s);
  for (size_t i = 0; i < n; i++) {
    fm->omega_s[i] = rs * fm->omega[i];
    fm->omega_f[i] = (float)fm->omega_s[i];
  }
  const int m = fm->m, dk = fm->dk; /* omega_ft[h] = omega_f[h]^T */
  for (int h = 0; h < fm->heads; h++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < dk; j++)
        fm->omega_ft[((size_t)h * dk + j) * m + i] = fm->omega_f[((size_t)h * m + i) * dk + j];
}

/* favor+orf: blocks of dk orthonormal rows (QR of a Gaussian matrix, signs fixed by diag R so
 * the block is Haar), each row rescaled to the norm of an independent N(0, I_dk) vector
 * (chi(dk) distributed). Keyed by (seed, head, row) like the iid draw. */
static la_status draw_orf(la_featmap fm, uint64_t seed, int h) {
  int dk = fm->dk, m = fm->m;
  /* LAPACKE's _work forms, with the work array from here: the plain forms allocate it
   * themselves and report a failure as an error code of their own */
  double lw[2] = {0, 0};
  if (LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, dk, dk, NULL, dk, NULL, &lw[0], -1) != 0 ||
      LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, dk, dk, dk, NULL, dk, NULL, &lw[1], -1) != 0)
    return la_error(LA_ERR_INTERNAL, "favor+orf: LAPACK workspace query failed (dk %d)", dk);
  const size_t lwork = (size_t)fmax(fmax(lw[0], lw[1]), (double)dk);
  double *g = la_malloc(sizeof(double) * dk * dk), *tau = la_malloc(sizeof(double) * dk);
  double *sgn = la_malloc(sizeof(double) * dk), *work = la_malloc(sizeof(double) * lwork);
  if (!g || !tau || !sgn || !work) {
    free(g);
    free(tau);
    free(sgn);
    free(work);
    return la_error(LA_ERR_NOMEM, "la_featmap_create: out of memory for the orthogonal blocks "
                    "of favor+orf (dk %d)", dk);
  }
  la_status st = LA_OK;
  for (int b0 = 0; b0 < m; b0 += dk) {
    /* g row-major: row i = draw for projection row b0+i */
    for (int i = 0; i < dk; i++)
      for (int j = 0; j < dk; j++)
        g[i * dk + j] = la_rng_normal(seed, LA_STREAM_PROJ | (uint64_t)h, (uint64_t)(b0 + i), (uint64_t)j);
    /* QR of g^T (column-major view of row-major g is g^T): g^T = Q R, Q's columns orthonormal.
     * Rows of the result = columns of Q. */
    if (LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, dk, dk, g, dk, tau, work, (lapack_int)lwork) != 0) {
      st = la_error(LA_ERR_INTERNAL, "favor+orf: QR factorization failed");
      break;
    }
    for (int i = 0; i < dk; i++) sgn[i] = g[i * dk + i] < 0 ? -1.0 : 1.0;
    if (LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, dk, dk, dk, g, dk, tau, work, (lapack_int)lwork) != 0) {
      st = la_error(LA_ERR_INTERNAL, "favor+orf: forming Q failed");
      break;
    }
    for (int i = 0; i < dk && b0 + i < m; i++) {
      double nrm = 0.0;
      for (int j = 0; j < dk; j++) {
        double x = la_rng_normal(seed, LA_STREAM_NORM | (uint64_t)h, (uint64_t)(b0 + i), (uint64_t)j);
        nrm += x * x;
      }
      nrm = sqrt(nrm);
      double *row = fm->omega + ((size_t)h * m + b0 + i) * dk;
      for (int j = 0; j < dk; j++) row[j] = nrm * sgn[i] * g[i * dk + j]; /* column i of Q */
    }
  }
  free(g);
  free(tau);
  free(sgn);
  free(work);
  return st;
}

la_status la_featmap_create(const la_config *cfg, int heads, int dk, la_featmap *out) {
  *out = NULL;
  LA_CHECK(heads >= 1, LA_ERR_ARG, "la_featmap_create: heads = %d < 1", heads);
  LA_CHECK(dk >= 1 && dk <= LA_DIM_MAX, LA_ERR_ARG, "la_featmap_create: dk = %d is outside [1, %d]",
           dk, LA_DIM_MAX);
  const la_map_info *mi = la_map_get(cfg->map);
  LA_CHECK(mi, LA_ERR_ARG, "la_featmap_create: unknown map %d", (int)cfg->map);
  const la_simd *simd = NULL;
  LA_TRY(la_simd_choose(cfg->kernels, &simd));
  la_featmap fm = la_calloc(1, sizeof *fm);
  if (!fm) return la_error(LA_ERR_NOMEM, "la_featmap_create: out of memory");
  fm->kind = cfg->map;
  fm->map = mi;
  fm->simd = simd;
  fm->heads = heads;
  fm->dk = dk;
  fm->s = cfg->scale > 0 ? cfg->scale : 1.0 / sqrt((double)dk);
  la_status st = la_map_check_width(cfg->map, dk, cfg->features);
  if (st != LA_OK) {
    free(fm);
    return la_error_prefix(st, "la_featmap_create: ");
  }
  if (mi->draw != LA_DRAW_NONE) {
    fm->m = cfg->features;
    fm->r = la_map_width(cfg->map, dk, fm->m);
    size_t n = (size_t)heads * fm->m * dk;
    fm->omega = la_malloc(sizeof(double) * n);
    fm->omega_s = la_malloc(sizeof(double) * n);
    fm->omega_f = la_malloc(sizeof(float) * n);
    fm->omega_ft = la_malloc(sizeof(float) * n);
    if (!fm->omega || !fm->omega_s || !fm->omega_f || !fm->omega_ft) {
      la_featmap_destroy(&fm);
      return la_error(LA_ERR_NOMEM, "la_featmap_create: out of memory for the projection "
                      "(%d heads x %d x %d)", heads, cfg->features, dk);
    }
    for (int h = 0; h < heads; h++) {
      if (mi->draw == LA_DRAW_ORF) {
        st = draw_orf(fm, cfg->seed, h);
        if (st != LA_OK) {
          la_featmap_destroy(&fm);
          return st;
        }
      } else {
        for (int i = 0; i < fm->m; i++)
          for (int j = 0; j < dk; j++)
            fm->omega[((size_t)h * fm->m + i) * dk + j] =
                la_rng_normal(cfg->seed, LA_STREAM_PROJ | (uint64_t)h, (uint64_t)i, (uint64_t)j);
      }
    }
    refresh_scaled(fm);
  } else { /* dpfp: m = nu; the other maps ignore --features */
    fm->m = la_map_uses_features(cfg->map) ? cfg->features : 0;
    fm->r = la_map_width(cfg->map, dk, fm->m);
  }
  *out = fm;
  return LA_OK;
}

void la_featmap_destroy(la_featmap *fm) {
  if (!fm || !*fm) return;
  free((*fm)->omega);
  free((*fm)->omega_s);
  free((*fm)->omega_f);
  free((*fm)->omega_ft);
  free(*fm);
  *fm = NULL;
}

int la_featmap_width(const la_featmap fm) { return fm->r; }
int la_featmap_heads(const la_featmap fm) { return fm->heads; }
int la_featmap_input_dim(const la_featmap fm) { return fm->dk; }

const double *la_featmap_projection(const la_featmap fm, int *m) {
  if (m) *m = fm->m;
  return fm->omega;
}

la_status la_featmap_set_projection(la_featmap fm, const double *omega, int m, int shared) {
  LA_CHECK(la_map_is_random(fm->kind), LA_ERR_SHAPE, "projection: the %s map has no projection",
           fm->map->name);
  LA_CHECK(m == fm->m, LA_ERR_SHAPE, "projection: m = %d, the map has --features %d", m, fm->m);
  size_t per = (size_t)m * fm->dk, total = per * (shared ? 1 : (size_t)fm->heads);
  for (size_t i = 0; i < total; i++) /* checked before the copy: a refused one changes nothing */
    LA_CHECK(isfinite(omega[i]), LA_ERR_NONFINITE, "projection: entry %zu is not finite", i);
  for (int h = 0; h < fm->heads; h++)
    memcpy(fm->omega + h * per, omega + (shared ? 0 : h * per), sizeof(double) * per);
  refresh_scaled(fm);
  return LA_OK;
}

la_status la_featmap_eval(const la_featmap fm, la_dtype dt, int h, int64_t n, const void *x,
                          int64_t ld, void *phi_s, double *a) {
  LA_CHECK(h >= 0 && h < fm->heads, LA_ERR_ARG, "la_featmap_eval: head %d is outside [0, %d)", h,
           fm->heads);
  LA_CHECK(n >= 0, LA_ERR_ARG, "la_featmap_eval: n = %lld < 0", (long long)n);
  if (dt == LA_F32) la_featmap_eval_f32(fm, h, n, x, ld, phi_s, a);
  else if (dt == LA_F64) la_featmap_eval_f64(fm, h, n, x, ld, phi_s, a);
  else return la_error(LA_ERR_ARG, "la_featmap_eval: dtype %s is not f32 or f64", la_dtype_name(dt));
  return LA_OK;
}
