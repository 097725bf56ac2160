/* Body of the feature-map evaluation for one precision; included by featmap.c with
 * LA_REAL, LA_SFX, LA_GEMM, LA_EXP, LA_OMEGA defined. Formulas: DESIGN.md §2 table.
 * Domain: finite x. The exp arguments are shifted by the row maximum a, so phi_s <= 1
 * elementwise for the exponential maps (no overflow); e^a is returned separately. */
#define LA_CAT2(a, b) a##_##b
#define LA_CAT(a, b) LA_CAT2(a, b)

void LA_CAT(la_featmap_eval, LA_SFX)(const la_featmap fm, int h, int64_t n,
                                             const LA_REAL *x, int64_t ld, LA_REAL *phi,
                                             double *a) {
  const int dk = fm->dk, r = fm->r, m = fm->m;
  if (n == 0) return;
  switch (fm->kind) {
  case LA_MAP_ELU1:
#ifdef LA_K512
    if (la_k512_enabled()) {
      la_k512_elu1(n, dk, x, ld, phi, r, NULL);
      for (int64_t i = 0; i < n; i++) a[i] = 0.0;
      return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
      const LA_REAL *xi = x + i * ld;
      LA_REAL *pi = phi + i * r;
      for (int j = 0; j < dk; j++) {
        LA_REAL e = LA_EXP(xi[j] < 0 ? xi[j] : (LA_REAL)0);
        pi[j] = xi[j] > 0 ? xi[j] + (LA_REAL)1 : e;
      }
      a[i] = 0.0;
    }
    return;
  case LA_MAP_RELU:
    for (int64_t i = 0; i < n; i++) {
      const LA_REAL *xi = x + i * ld;
      LA_REAL *pi = phi + i * r;
      for (int j = 0; j < dk; j++) pi[j] = xi[j] > 0 ? xi[j] : (LA_REAL)0;
      a[i] = 0.0;
    }
    return;
  case LA_MAP_IDENTITY:
  case LA_MAP_PRECOMPUTED:
    for (int64_t i = 0; i < n; i++) {
      memcpy(phi + i * r, x + i * ld, sizeof(LA_REAL) * dk);
      a[i] = 0.0;
    }
    return;
  default:
    break;
  }
  /* Random maps: u = X~ Omega^T into the first m columns of phi (row stride r). */
  const LA_REAL *om = fm->LA_OMEGA + (size_t)h * m * dk;
#ifdef LA_K512
  if (la_k512_enabled())
    la_k512_gemm((int)n, m, dk, x, ld, 1, fm->omega_ft + (size_t)h * m * dk, m, phi, r, 0, 0);
  else
#endif
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, m, dk, (LA_REAL)1, x, (int)ld, om,
          dk, (LA_REAL)0, phi, r);
#ifdef LA_K512
  if (la_k512_enabled() && fm->kind != LA_MAP_TRIG) { /* favor+, favor+orf, favor-hyp */
    la_k512_favor_post(n, m, dk, x, ld, phi, r, fm->s, a, fm->kind == LA_MAP_FAVOR_HYP);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *xi = x + i * ld;
    LA_REAL *pi = phi + i * r;
    double nrm2 = 0.0;
    for (int j = 0; j < dk; j++) nrm2 += (double)xi[j] * (double)xi[j];
    const double half = 0.5 * fm->s * nrm2; /* |x~|^2 / 2 */
    if (fm->kind == LA_MAP_TRIG) {
      /* m^-1/2 e^{|x~|^2/2} [cos u, sin u]: a = |x~|^2/2, signed. */
      const LA_REAL c = (LA_REAL)(1.0 / sqrt((double)m));
      for (int j = 0; j < m; j++) {
        double u = (double)pi[j];
        pi[j] = c * (LA_REAL)cos(u);
        pi[m + j] = c * (LA_REAL)sin(u);
      }
      a[i] = half;
    } else if (fm->kind == LA_MAP_FAVOR_HYP) {
      /* (2m)^-1/2 e^{-|x~|^2/2} [e^u, e^-u]: a = max|u| - |x~|^2/2. */
      LA_REAL umax = 0;
      for (int j = 0; j < m; j++) umax = fabs((double)pi[j]) > umax ? (LA_REAL)fabs((double)pi[j]) : umax;
      const LA_REAL c = (LA_REAL)(1.0 / sqrt(2.0 * m));
      for (int j = 0; j < m; j++) {
        LA_REAL u = pi[j];
        pi[j] = c * LA_EXP(u - umax);
        pi[m + j] = c * LA_EXP(-u - umax);
      }
      a[i] = (double)umax - half;
    } else {
      /* favor+, favor+orf: m^-1/2 e^{u - |x~|^2/2}: a = max u - |x~|^2/2. */
      LA_REAL umax = pi[0];
      for (int j = 1; j < m; j++) umax = pi[j] > umax ? pi[j] : umax;
      const LA_REAL c = (LA_REAL)(1.0 / sqrt((double)m));
      for (int j = 0; j < m; j++) pi[j] = c * LA_EXP(pi[j] - umax);
      a[i] = (double)umax - half;
    }
  }
}

/* Chain rule through phi (DESIGN.md §4 "Gradients"): dx = J_phi(x)^T dphi for n rows of head h.
 * For the exponential maps only the products dphi_i * phi_i enter, so dphi and phi may be on
 * reciprocal scales (stabilized rows); for elu1, relu, identity and precomputed both are on
 * the true scale. dphi is overwritten; sums is scratch of n doubles. dx rows have stride ldx.
 * Domain: finite x.
 *   favor+:    dx = sqrt(s) W^T P - s x sum(P),                   P = dphi * phi
 *   favor-hyp: dx = sqrt(s) W^T (P+ - P-) - s x sum(P+ + P-)
 *   trig:      dx = s x sum(P) + sqrt(s) W^T (dphi_s * phi_c - dphi_c * phi_s) */
void LA_CAT(la_featmap_chain, LA_SFX)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                      int64_t ld, LA_REAL *dphi, const LA_REAL *phi,
                                      LA_REAL *dx, int64_t ldx, double *sums) {
  const int dk = fm->dk, r = fm->r, m = fm->m;
  if (n == 0) return;
  switch (fm->kind) {
  case LA_MAP_ELU1: /* d/dx (elu(x)+1) = 1 for x > 0, e^x = phi otherwise */
    for (int64_t i = 0; i < n; i++) {
      const LA_REAL *restrict xi = x + i * ld, *restrict di = dphi + i * r, *restrict pi = phi + i * r;
      LA_REAL *restrict yi = dx + i * ldx;
      for (int j = 0; j < dk; j++) { /* unconditional loads, so the select vectorizes */
        const LA_REAL p = pi[j], d = di[j];
        yi[j] = xi[j] > 0 ? d : d * p;
      }
    }
    return;
  case LA_MAP_RELU:
    for (int64_t i = 0; i < n; i++) {
      const LA_REAL *restrict xi = x + i * ld, *restrict di = dphi + i * r;
      LA_REAL *restrict yi = dx + i * ldx;
      for (int j = 0; j < dk; j++) {
        const LA_REAL d = di[j];
        yi[j] = xi[j] > 0 ? d : (LA_REAL)0;
      }
    }
    return;
  case LA_MAP_IDENTITY:
  case LA_MAP_PRECOMPUTED:
    for (int64_t i = 0; i < n; i++) memcpy(dx + i * ldx, dphi + i * r, sizeof(LA_REAL) * dk);
    return;
  default:
    break;
  }
  const double s = fm->s;
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *d = dphi + i * r;
    const LA_REAL *p = phi + i * r;
    double tot = 0;
    if (fm->kind == LA_MAP_TRIG) {
      for (int j = 0; j < r; j++) tot += (double)d[j] * p[j];
      for (int j = 0; j < m; j++) {
        LA_REAL t = d[m + j] * p[j] - d[j] * p[m + j];
        d[j] = t; /* first m columns now hold the W^T coefficients */
      }
      sums[i] = s * tot;
    } else if (fm->kind == LA_MAP_FAVOR_HYP) {
      for (int j = 0; j < m; j++) {
        LA_REAL pp = d[j] * p[j], pm = d[m + j] * p[m + j];
        tot += (double)pp + pm;
        d[j] = pp - pm;
      }
      sums[i] = -s * tot;
    } else {
      for (int j = 0; j < m; j++) {
        d[j] *= p[j];
        tot += d[j];
      }
      sums[i] = -s * tot;
    }
  }
  /* dx = coeff (n x m, stride r) * omega_s (m x dk) + sums * x */
  const LA_REAL *om = fm->LA_OMEGA + (size_t)h * m * dk;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, dk, m, (LA_REAL)1, dphi, r, om, dk,
          (LA_REAL)0, dx, (int)ldx);
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < dk; j++) dx[i * ldx + j] += (LA_REAL)(sums[i] * x[i * ld + j]);
}

#undef LA_CAT
#undef LA_CAT2
#undef LA_REAL
#undef LA_SFX
#undef LA_GEMM
#undef LA_EXP
#undef LA_OMEGA
#undef LA_K512
