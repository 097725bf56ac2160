/* Feature-map evaluation and chain rule for one precision, a template: maps.c includes it
 * twice (LA_REAL, LA_SFX, LA_GEMM, LA_EXP, LA_OMEGA defined) and lists the functions it
 * defines, e.g. elu1_eval_f32, in the map table (docs/design.md §2, §2.3).
 * eval: phi = phi_s e^a for n rows of head h (row stride ld), phi_s [n, r], a [n]; a = 0 for
 * the unstabilized maps. Domain: finite x. The exp arguments are shifted by the row maximum,
 * so phi_s <= 1 elementwise for the exponential maps (no overflow); e^a is returned apart.
 * chain: dx = J_phi(x)^T dphi (§4.4); for the exponential maps only dphi * phi enters, so dphi
 * and phi may be on reciprocal scales; dphi is overwritten; sums is scratch of n doubles. */
#define LA_CAT2(a, b) a##_##b
#define LA_CAT(a, b) LA_CAT2(a, b)
#define LA_MFN(name) LA_CAT(name, LA_SFX)

/* elu(x) + 1 = x + 1 (x > 0), e^x (x <= 0); r = dk, positive. */
static void LA_MFN(elu1_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                              int64_t ld, LA_REAL *phi, double *a) {
  (void)h;
  const int dk = fm->dk, r = fm->r;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *xi = x + i * ld;
    LA_REAL *pi = phi + i * r;
    for (int j = 0; j < dk; j++) {
      LA_REAL e = LA_EXP(xi[j] < 0 ? xi[j] : (LA_REAL)0);
      pi[j] = xi[j] > 0 ? xi[j] + (LA_REAL)1 : e;
    }
    a[i] = 0.0;
  }
}

/* max(x, 0); r = dk, nonnegative (a zero row gives den = 0). */
static void LA_MFN(relu_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                              int64_t ld, LA_REAL *phi, double *a) {
  (void)h;
  const int dk = fm->dk, r = fm->r;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *xi = x + i * ld;
    LA_REAL *pi = phi + i * r;
    for (int j = 0; j < dk; j++) pi[j] = xi[j] > 0 ? xi[j] : (LA_REAL)0;
    a[i] = 0.0;
  }
}

/* x itself (identity; precomputed features); r = dk, signed. */
static void LA_MFN(identity_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                  int64_t ld, LA_REAL *phi, double *a) {
  (void)h;
  const int dk = fm->dk, r = fm->r;
  for (int64_t i = 0; i < n; i++) {
    memcpy(phi + i * r, x + i * ld, sizeof(LA_REAL) * dk);
    a[i] = 0.0;
  }
}

/* Random maps: u = X~ Omega^T into the first m columns of phi (row stride r). */
static void LA_MFN(project)(const la_featmap fm, int h, int64_t n, const LA_REAL *x, int64_t ld,
                            LA_REAL *phi) {
  const int dk = fm->dk, m = fm->m;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, m, dk, (LA_REAL)1, x, (int)ld,
          fm->LA_OMEGA + (size_t)h * m * dk, dk, (LA_REAL)0, phi, fm->r);
}

/* |x~|^2 / 2 of row i, in float64. */
static double LA_MFN(half_norm2)(const la_featmap fm, const LA_REAL *xi) {
  double nrm2 = 0.0;
  for (int j = 0; j < fm->dk; j++) nrm2 += (double)xi[j] * (double)xi[j];
  return 0.5 * fm->s * nrm2;
}

/* favor+, favor+orf: m^-1/2 e^{u - |x~|^2/2}; a = max u - |x~|^2/2; positive. */
static void LA_MFN(favor_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                               int64_t ld, LA_REAL *phi, double *a) {
  const int m = fm->m, r = fm->r;
  LA_MFN(project)(fm, h, n, x, ld, phi);
  const LA_REAL c = (LA_REAL)(1.0 / sqrt((double)m));
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *pi = phi + i * r;
    LA_REAL umax = pi[0];
    for (int j = 1; j < m; j++) umax = pi[j] > umax ? pi[j] : umax;
    for (int j = 0; j < m; j++) pi[j] = c * LA_EXP(pi[j] - umax);
    a[i] = (double)umax - LA_MFN(half_norm2)(fm, x + i * ld);
  }
}

/* favor-hyp: (2m)^-1/2 e^{-|x~|^2/2} [e^u, e^-u]; a = max|u| - |x~|^2/2; positive. */
static void LA_MFN(favor_hyp_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                   int64_t ld, LA_REAL *phi, double *a) {
  const int m = fm->m, r = fm->r;
  LA_MFN(project)(fm, h, n, x, ld, phi);
  const LA_REAL c = (LA_REAL)(1.0 / sqrt(2.0 * m));
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *pi = phi + i * r;
    LA_REAL umax = 0;
    for (int j = 0; j < m; j++) umax = fabs((double)pi[j]) > umax ? (LA_REAL)fabs((double)pi[j]) : umax;
    for (int j = 0; j < m; j++) {
      LA_REAL u = pi[j];
      pi[j] = c * LA_EXP(u - umax);
      pi[m + j] = c * LA_EXP(-u - umax);
    }
    a[i] = (double)umax - LA_MFN(half_norm2)(fm, x + i * ld);
  }
}

/* trig: m^-1/2 e^{|x~|^2/2} [cos u, sin u]; a = |x~|^2/2; signed. */
static void LA_MFN(trig_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                              int64_t ld, LA_REAL *phi, double *a) {
  const int m = fm->m, r = fm->r;
  LA_MFN(project)(fm, h, n, x, ld, phi);
  const LA_REAL c = (LA_REAL)(1.0 / sqrt((double)m));
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *pi = phi + i * r;
    for (int j = 0; j < m; j++) {
      double u = (double)pi[j];
      pi[j] = c * (LA_REAL)cos(u);
      pi[m + j] = c * (LA_REAL)sin(u);
    }
    a[i] = LA_MFN(half_norm2)(fm, x + i * ld);
  }
}

/* taylor2 (Arora et al. 2024, Based; §2): x~ = sqrt(s) x, phi = [1, x~, then for j < dk:
 * x~_j^2 / sqrt 2, x~_j x~_l (l > j)], r = 1 + dk + dk(dk+1)/2, so phi(q).phi(k) =
 * 1 + t + t^2/2 (t = s q.k). Signed features, kernel >= 1/2 (§1). Domain: finite x. */
static void LA_MFN(taylor2_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                 int64_t ld, LA_REAL *phi, double *a) {
  (void)h;
  const int dk = fm->dk, r = fm->r;
  const LA_REAL rs = (LA_REAL)sqrt(fm->s), c = (LA_REAL)sqrt(0.5);
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict xi = x + i * ld;
    LA_REAL *restrict pi = phi + i * r, *restrict xt = pi + 1, *restrict q = pi + 1 + dk;
    pi[0] = 1;
    for (int j = 0; j < dk; j++) xt[j] = rs * xi[j];
    for (int j = 0; j < dk; j++) {
      const LA_REAL xj = xt[j];
      q[0] = xj * (c * xj);
      for (int l = j + 1; l < dk; l++) q[l - j] = xj * xt[l];
      q += dk - j;
    }
    a[i] = 0.0;
  }
}

/* dpfp (Schlag et al. 2021, section 5.3; §2): rho = [relu(x), relu(-x)] (w = 2 dk values),
 * phi_{w(j-1) + i} = rho_i rho_{(i - j) mod w} for j = 1..nu (nu = m; torch.roll(rho, j) in
 * the authors' code), r = w nu, nonnegative. rho goes into the first block, blocks 2..nu are
 * formed from it, then block 1 in place (descending, rho_{w-1} kept aside). */
static void LA_MFN(dpfp_eval)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                              int64_t ld, LA_REAL *phi, double *a) {
  (void)h;
  const int dk = fm->dk, r = fm->r, w = 2 * dk, nu = fm->m;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict xi = x + i * ld;
    LA_REAL *pi = phi + i * r;
    for (int l = 0; l < dk; l++) {
      const LA_REAL v = xi[l];
      pi[l] = v > 0 ? v : (LA_REAL)0;
      pi[dk + l] = v < 0 ? -v : (LA_REAL)0;
    }
    const LA_REAL *restrict rho = pi;
    for (int j = 2; j <= nu; j++) {
      LA_REAL *restrict b = pi + (int64_t)(j - 1) * w;
      for (int l = 0; l < j; l++) b[l] = rho[l] * rho[w - j + l];
      for (int l = j; l < w; l++) b[l] = rho[l] * rho[l - j];
    }
    const LA_REAL last = pi[w - 1];
    for (int l = w - 1; l >= 1; l--) pi[l] *= pi[l - 1];
    pi[0] *= last;
    a[i] = 0.0;
  }
}

/* d/dx (elu(x)+1) = 1 for x > 0, e^x = phi otherwise; true scale. From phi alone, without
 * reading x again (the backward is memory-bound, docs/performance.md): x > 0 gives
 * phi = fl(x + 1) >= 1 and x <= 0 gives phi = fl(e^x) <= 1, so the factor is min(phi, 1),
 * the same bits as the select on x (where phi rounds to 1 both factors are 1). */
static void LA_MFN(elu1_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                               int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                               int64_t ldx, double *sums) {
  (void)h, (void)sums, (void)x, (void)ld;
  const int dk = fm->dk, r = fm->r;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict di = dphi + i * r, *restrict pi = phi + i * r;
    LA_REAL *restrict yi = dx + i * ldx;
    for (int j = 0; j < dk; j++) {
      const LA_REAL p = pi[j], d = di[j];
      yi[j] = p < (LA_REAL)1 ? d * p : d;
    }
  }
}

static void LA_MFN(relu_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                               int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                               int64_t ldx, double *sums) {
  (void)h, (void)phi, (void)sums;
  const int dk = fm->dk, r = fm->r;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict xi = x + i * ld, *restrict di = dphi + i * r;
    LA_REAL *restrict yi = dx + i * ldx;
    for (int j = 0; j < dk; j++) {
      const LA_REAL d = di[j];
      yi[j] = xi[j] > 0 ? d : (LA_REAL)0;
    }
  }
}

static void LA_MFN(identity_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                   int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                                   int64_t ldx, double *sums) {
  (void)h, (void)x, (void)ld, (void)phi, (void)sums;
  for (int64_t i = 0; i < n; i++) memcpy(dx + i * ldx, dphi + i * fm->r, sizeof(LA_REAL) * fm->dk);
}

/* taylor2: dx = sqrt(s) (dphi_lin + G x~), G symmetric with G_jl = dphi_jl (j != l) and
 * G_jj = sqrt 2 dphi_jj; x~ is read from phi (unstabilized: the true scale). */
static void LA_MFN(taylor2_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                  int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                                  int64_t ldx, double *sums) {
  (void)h, (void)x, (void)ld, (void)sums;
  const int dk = fm->dk, r = fm->r;
  const LA_REAL rs = (LA_REAL)sqrt(fm->s), c2 = (LA_REAL)sqrt(2.0);
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict xt = phi + i * r + 1, *restrict d = dphi + i * r + 1 + dk;
    LA_REAL *restrict y = dx + i * ldx;
    for (int j = 0; j < dk; j++) y[j] = dphi[i * r + 1 + j];
    for (int j = 0; j < dk; j++) {
      const LA_REAL xj = xt[j];
      LA_REAL acc = y[j] + c2 * d[0] * xj;
      for (int l = j + 1; l < dk; l++) {
        acc += d[l - j] * xt[l];
        y[l] += d[l - j] * xj;
      }
      y[j] = acc;
      d += dk - j;
    }
    for (int j = 0; j < dk; j++) y[j] *= rs;
  }
}

/* dpfp: dx_l = g_a (x_l > 0: a = l, g = 1; x_l < 0: a = l + dk, g = -1; x_l = 0: 0, relu'(0) =
 * 0), with d phi / d rho_a = sum_j dphi_{j,a} rho_{a-j} + dphi_{j,a+j} rho_{a+j} (mod w). */
static void LA_MFN(dpfp_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                               int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                               int64_t ldx, double *sums) {
  (void)h, (void)phi, (void)sums;
  const int dk = fm->dk, r = fm->r, w = 2 * dk, nu = fm->m;
  for (int64_t i = 0; i < n; i++) {
    const LA_REAL *restrict xi = x + i * ld, *restrict d = dphi + i * r;
    LA_REAL *restrict y = dx + i * ldx;
    for (int l = 0; l < dk; l++) {
      const LA_REAL v = xi[l];
      if (!(v > 0 || v < 0)) {
        y[l] = 0;
        continue;
      }
      const int ai = v > 0 ? l : l + dk;
      double acc = 0;
      for (int j = 1; j <= nu; j++) {
        const LA_REAL *dj = d + (int64_t)(j - 1) * w;
        const int km = ai - j < 0 ? ai - j + w : ai - j, kp = ai + j >= w ? ai + j - w : ai + j;
        const LA_REAL um = km < dk ? xi[km] : -xi[km - dk], up = kp < dk ? xi[kp] : -xi[kp - dk];
        acc += (double)dj[ai] * (um > 0 ? um : 0) + (double)dj[kp] * (up > 0 ? up : 0);
      }
      y[l] = (LA_REAL)(v > 0 ? acc : -acc);
    }
  }
}

/* dx = coeff (n x m, stride r) * omega_s (m x dk) + sums * x: the random maps' common tail. */
static void LA_MFN(project_back)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                 int64_t ld, const LA_REAL *coef, LA_REAL *dx, int64_t ldx,
                                 const double *sums) {
  const int dk = fm->dk, m = fm->m;
  LA_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, dk, m, (LA_REAL)1, coef, fm->r,
          fm->LA_OMEGA + (size_t)h * m * dk, dk, (LA_REAL)0, dx, (int)ldx);
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < dk; j++) dx[i * ldx + j] += (LA_REAL)(sums[i] * x[i * ld + j]);
}

/* favor+: dx = sqrt(s) W^T P - s x sum(P), P = dphi * phi. */
static void LA_MFN(favor_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                                int64_t ldx, double *sums) {
  const int r = fm->r, m = fm->m;
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *d = dphi + i * r;
    const LA_REAL *p = phi + i * r;
    double tot = 0;
    for (int j = 0; j < m; j++) {
      d[j] *= p[j];
      tot += d[j];
    }
    sums[i] = -fm->s * tot;
  }
  LA_MFN(project_back)(fm, h, n, x, ld, dphi, dx, ldx, sums);
}

/* favor-hyp: dx = sqrt(s) W^T (P+ - P-) - s x sum(P+ + P-). */
static void LA_MFN(favor_hyp_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                                    int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                                    int64_t ldx, double *sums) {
  const int r = fm->r, m = fm->m;
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *d = dphi + i * r;
    const LA_REAL *p = phi + i * r;
    double tot = 0;
    for (int j = 0; j < m; j++) {
      LA_REAL pp = d[j] * p[j], pm = d[m + j] * p[m + j];
      tot += (double)pp + pm;
      d[j] = pp - pm;
    }
    sums[i] = -fm->s * tot;
  }
  LA_MFN(project_back)(fm, h, n, x, ld, dphi, dx, ldx, sums);
}

/* trig: dx = s x sum(P) + sqrt(s) W^T (dphi_s * phi_c - dphi_c * phi_s). */
static void LA_MFN(trig_chain)(const la_featmap fm, int h, int64_t n, const LA_REAL *x,
                               int64_t ld, LA_REAL *dphi, const LA_REAL *phi, LA_REAL *dx,
                               int64_t ldx, double *sums) {
  const int r = fm->r, m = fm->m;
  for (int64_t i = 0; i < n; i++) {
    LA_REAL *d = dphi + i * r;
    const LA_REAL *p = phi + i * r;
    double tot = 0;
    for (int j = 0; j < r; j++) tot += (double)d[j] * p[j];
    for (int j = 0; j < m; j++) {
      LA_REAL t = d[m + j] * p[j] - d[j] * p[m + j];
      d[j] = t; /* first m columns now hold the W^T coefficients */
    }
    sums[i] = fm->s * tot;
  }
  LA_MFN(project_back)(fm, h, n, x, ld, dphi, dx, ldx, sums);
}

#undef LA_MFN
#undef LA_CAT
#undef LA_CAT2
#undef LA_REAL
#undef LA_SFX
#undef LA_GEMM
#undef LA_EXP
#undef LA_OMEGA
