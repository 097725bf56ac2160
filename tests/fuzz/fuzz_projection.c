/* libFuzzer harness: the projection reader (--projection, docs/design.md §2.1 "Load"): an .npy
 * file read as program/job.c does (la_npy_read_info and la_projection_features for m, la_npy_load,
 * la_projection_check), against a plain statement of the rule ([H, m, dk] or [m, dk], f32 or
 * f64, m = --features, every entry finite). A projection that passes is converted and
 * installed in a favor+ feature map as job.c load_projection does, and must read back.
 *
 * Input: byte 0 H (0: the file's, 1 for [m, dk]); byte 1 dk (0: the file's last dimension);
 * byte 2 the --features given before the file sets it (0: 256); the rest is the file. */
#include <math.h>
#include "fuzz_common.h"
#include "linattn/core.h"
#include "linattn/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  const char *path = fuzz_file(data + 3, size - 3);
  char err[512] = "";
  la_npy_info I;
  if (why(la_npy_read_info(path, &I), err, sizeof err) != LA_OK) return 0;
  const int given = data[2] ? data[2] : 256;
  const int features = la_projection_features(I.ndim, I.shape, given);
  const int64_t fm_ = I.ndim == 2 || I.ndim == 3 ? I.shape[I.ndim - 2] : -1;
  FUZZ_CHECK(features == (fm_ >= 1 && fm_ <= LA_FEATURES_MAX ? fm_ : given), "features %d", features);

  void *arr = NULL;
  la_npy_info L;
  la_status s = why(la_npy_load(path, &L, &arr), err, sizeof err);
  FUZZ_CHECK(s == LA_OK, "load after read_info: %s", err);
  const int64_t fh = I.ndim == 3 ? I.shape[0] : 1, fd = I.ndim >= 1 ? I.shape[I.ndim - 1] : 1;
  const int H = data[0] ? data[0] : (int)(fh < 1 ? 1 : fh > 4096 ? 4096 : fh);
  const int dk = data[1] ? data[1] : (int)(fd < 1 ? 1 : fd > LA_DIM_MAX ? LA_DIM_MAX : fd);

  s = why(la_projection_check(I.dtype, I.ndim, I.shape, arr, H, dk, features), err, sizeof err);
  int valid = I.dtype != LA_I64 && (I.ndim == 2 || I.ndim == 3) &&
              (I.ndim == 2 || I.shape[0] == H) && I.shape[I.ndim - 1] == dk &&
              I.shape[I.ndim - 2] == features;
  for (int64_t i = 0; valid && i < I.count; i++)
    valid = isfinite(I.dtype == LA_F32 ? ((float *)arr)[i] : ((double *)arr)[i]);
  FUZZ_CHECK((s == LA_OK) == valid, "la_projection_check %d (%s), rule says %d", (int)s, err,
             valid);
  if (s != LA_OK) {
    FUZZ_CHECK((s == LA_ERR_SHAPE || s == LA_ERR_NONFINITE) && fuzz_one_line(err),
               "status %d, message '%s'", (int)s, err);
  } else if ((int64_t)H * features * dk <= (1 << 14)) { /* as load_projection in program/job.c */
    la_config cfg;
    la_config_default(&cfg);
    cfg.map = LA_MAP_FAVOR;
    cfg.features = features;
    FUZZ_CHECK(why(la_config_check(&cfg, dk), err, sizeof err) == LA_OK, "%s", err);
    la_featmap fm = NULL;
    FUZZ_CHECK(la_featmap_create(&cfg, H, dk, &fm) == LA_OK, "featmap %d x %d x %d", H,
               features, dk);
    double *om = malloc(sizeof(double) * (size_t)I.count + 1);
    for (int64_t i = 0; i < I.count; i++)
      om[i] = I.dtype == LA_F32 ? (double)((float *)arr)[i] : ((double *)arr)[i];
    s = la_featmap_set_projection(fm, om, features, I.ndim == 2);
    FUZZ_CHECK(s == LA_OK, "set_projection: %s", la_error_reason(s));
    int m = 0;
    const double *back = la_featmap_projection(fm, &m);
    FUZZ_CHECK(back && m == features, "projection m %d", m);
    const size_t per = (size_t)features * (size_t)dk;
    for (int h = 0; h < H; h++)
      FUZZ_CHECK(!memcmp(back + h * per, om + (I.ndim == 2 ? 0 : h * per), per * sizeof *om),
                 "head %d reads back different rows", h);
    free(om);
    la_featmap_destroy(&fm);
  }
  free(arr);
  return 0;
}
