/* Configuration defaults, bounds and map names (DESIGN.md §1, §2; CONTRACT.md `run`). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "linattn/core.h"

static const char *const la_map_names[LA_MAP_COUNT] = {
    "elu1", "relu", "identity", "favor+", "favor+orf", "favor-hyp", "trig", "precomputed"};

void la_config_default(la_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->mode = LA_CAUSAL;
  cfg->map = LA_MAP_ELU1;
  cfg->features = 256;
  cfg->scale = 0.0; /* 1/sqrt(dk) */
  cfg->seed = 0;
  cfg->normalize = 1;
  cfg->den_policy = LA_DEN_ERROR;
  cfg->den_eps = 0.0;
  cfg->allow_signed = 0;
  cfg->chunk = 0;
  cfg->threads = 0;
}

const char *la_map_name(la_map_kind k) {
  return (k >= 0 && k < LA_MAP_COUNT) ? la_map_names[k] : "unknown";
}

int la_map_from_name(const char *s, la_map_kind *k) {
  for (int i = 0; i < LA_MAP_COUNT; i++)
    if (strcmp(s, la_map_names[i]) == 0) {
      *k = (la_map_kind)i;
      return 0;
    }
  return -1;
}

/* identity and trig are signed by construction (§2). precomputed features can be anything;
 * they are not refused up front, and the denominator policy judges every row. */
int la_map_is_signed(la_map_kind k) { return k == LA_MAP_IDENTITY || k == LA_MAP_TRIG; }
int la_map_is_stabilized(la_map_kind k) {
  return k == LA_MAP_FAVOR || k == LA_MAP_FAVOR_ORF || k == LA_MAP_FAVOR_HYP || k == LA_MAP_TRIG;
}
int la_map_is_random(la_map_kind k) { return la_map_is_stabilized(k); }

la_status la_config_check(const la_config *cfg, int dk, char *err, size_t errlen) {
#define LA_BAD(...)                      \
  do {                                   \
    snprintf(err, errlen, __VA_ARGS__);  \
    return LA_ERR_ARG;                   \
  } while (0)
  if (cfg->mode != LA_CAUSAL && cfg->mode != LA_BIDIRECTIONAL) LA_BAD("--mode: unknown mode");
  if (cfg->map < 0 || cfg->map >= LA_MAP_COUNT) LA_BAD("--feature-map: unknown map");
  if (dk < 1 || dk > LA_DIM_MAX) LA_BAD("dk = %d is outside [1, %d]", dk, LA_DIM_MAX);
  if (la_map_is_random(cfg->map) && (cfg->features < 1 || cfg->features > LA_FEATURES_MAX))
    LA_BAD("--features %d is outside [1, %d]", cfg->features, LA_FEATURES_MAX);
  if (!(cfg->scale >= 0.0) || !isfinite(cfg->scale)) LA_BAD("--scale must be finite and > 0");
  if (cfg->chunk != 0 && (cfg->chunk < LA_CHUNK_MIN || cfg->chunk > LA_CHUNK_MAX))
    LA_BAD("--chunk %d is outside [%d, %d]", cfg->chunk, LA_CHUNK_MIN, LA_CHUNK_MAX);
  if (cfg->threads < 0 || cfg->threads > 4096) LA_BAD("--threads %d is outside [1, 4096]", cfg->threads);
  if (cfg->window < 0) LA_BAD("--window must be >= 1");
  if (cfg->window > 0 && cfg->mode != LA_CAUSAL)
    LA_BAD("--window: a sliding window is a causal mask; in bidirectional mode it would be "
           "a general pairwise mask, which breaks the shared-summary factorization (refused)");
  if ((cfg->den_policy == LA_DEN_ADD || cfg->den_policy == LA_DEN_CLAMP) &&
      !(cfg->den_eps > 0.0 && isfinite(cfg->den_eps)))
    LA_BAD("--denominator: epsilon must be finite and > 0");
  if (cfg->normalize && la_map_is_signed(cfg->map) && !cfg->allow_signed)
    LA_BAD("--feature-map %s is signed: its denominator phi(q).sum phi(k) can be zero or "
           "negative, so normalized mode needs --allow-signed (or use --normalize off)",
           la_map_name(cfg->map));
  return LA_OK;
#undef LA_BAD
}
