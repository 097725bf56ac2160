/* Configuration defaults and bounds (docs/design.md §1, §2; docs/cli.md "linattn run").
 * The maps' names and properties are in the map table (maps.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "linattn/core.h"
#include "maps.h"

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
  cfg->kernels = LA_KERNELS_AUTO;
}

/* --decay (§1.2): gamma in (0, 1], a list of at least one value; not with
 * --reproducible in this version (refused with the reason, never computed without decay). */
static la_status la_config_check_decay(const la_config *cfg) {
  if (!cfg->decay && !cfg->decay_n && !cfg->decay_retnet) return LA_OK;
  LA_CHECK(!(cfg->decay && cfg->decay_retnet), LA_ERR_ARG,
           "--decay: give either retnet or values, not both");
  LA_CHECK(cfg->decay_retnet || (cfg->decay && cfg->decay_n >= 1), LA_ERR_ARG,
           "--decay: %d values given (at least one is needed)", cfg->decay_n);
  for (int h = 0; cfg->decay && h < cfg->decay_n; h++)
    LA_CHECK(cfg->decay[h] > 0.0 && cfg->decay[h] <= 1.0, LA_ERR_ARG,
             "--decay: gamma = %g (value %d) is outside (0, 1]", cfg->decay[h], h + 1);
  LA_CHECK(!cfg->reproducible, LA_ERR_UNSUPPORTED,
           "--decay is not yet supported with --reproducible (the exact grid has no decay yet, "
           "docs/design.md §1.2)");
  return LA_OK;
}

/* --gates (§1.2 "Gates"): causal, and in this version not with --reproducible; per-feature
 * gates not yet with a window (§1.2 "Per-feature gates"). */
static la_status la_config_check_gates(const la_config *cfg) {
  if (!cfg->gates) return LA_OK;
  LA_CHECK(cfg->gates == LA_GATES_HEAD || cfg->gates == LA_GATES_FEATURE, LA_ERR_ARG,
           "--gates: unknown form %d", cfg->gates);
  LA_CHECK(cfg->mode == LA_CAUSAL, LA_ERR_ARG,
           "--gates: gates are causal (S_t = e^{g_t} S_{t-1} + ...); bidirectional mode would "
           "need gates for the reverse direction, which the log-gates do not define (refused)");
  LA_CHECK(!cfg->reproducible, LA_ERR_UNSUPPORTED,
           "--gates is not yet supported with --reproducible (docs/design.md §1.2 \"Gates\")");
  LA_CHECK(cfg->gates != LA_GATES_FEATURE || cfg->window <= 0, LA_ERR_UNSUPPORTED,
           "per-feature gates [N, H, r] with a window are not built yet (docs/design.md §1.2 "
           "\"Per-feature gates\")");
  return LA_OK;
}

la_status la_config_check(const la_config *cfg, int dk) {
#define LA_BAD(...) return la_error(LA_ERR_ARG, __VA_ARGS__)
  if (cfg->mode != LA_CAUSAL && cfg->mode != LA_BIDIRECTIONAL) LA_BAD("--mode: unknown mode");
  if (cfg->map < 0 || cfg->map >= LA_MAP_COUNT) LA_BAD("--feature-map: unknown map");
  if (dk < 1 || dk > LA_DIM_MAX) LA_BAD("dk = %d is outside [1, %d]", dk, LA_DIM_MAX);
  LA_TRY(la_map_check_width(cfg->map, dk, cfg->features)); /* maps.c: m, nu, r */
  if (!(cfg->scale >= 0.0) || !isfinite(cfg->scale)) LA_BAD("--scale must be finite and > 0");
  if (cfg->chunk != 0 && (cfg->chunk < LA_CHUNK_MIN || cfg->chunk > LA_CHUNK_MAX))
    LA_BAD("--chunk %d is outside [%d, %d]", cfg->chunk, LA_CHUNK_MIN, LA_CHUNK_MAX);
  if (cfg->threads < 0 || cfg->threads > 4096) LA_BAD("--threads %d is outside [1, 4096]", cfg->threads);
  if (cfg->window < 0) LA_BAD("--window must be >= 1");
  if (cfg->kernels < LA_KERNELS_AUTO || cfg->kernels > LA_KERNELS_GENERIC)
    LA_BAD("--kernels: unknown choice %d", (int)cfg->kernels);
  if (cfg->window > 0 && cfg->mode != LA_CAUSAL)
    LA_BAD("--window: a sliding window is a causal mask; in bidirectional mode it would be "
           "a general pairwise mask, which breaks the shared-summary factorization (refused)");
  if (cfg->scan_algorithm < LA_SCAN_AUTO || cfg->scan_algorithm >= LA_SCAN_COUNT)
    LA_BAD("--scan-algorithm: unknown algorithm %d", (int)cfg->scan_algorithm);
  if (cfg->scan_pieces < 0 || cfg->scan_pieces > LA_SCAN_PIECES_MAX)
    LA_BAD("--scan-pieces %d is outside [1, %d]", cfg->scan_pieces, LA_SCAN_PIECES_MAX);
  if (cfg->den_policy == LA_DEN_ADD && !(cfg->den_eps >= 0.0 && isfinite(cfg->den_eps)))
    LA_BAD("--denominator: the epsilon of add:E must be finite and >= 0");
  if (cfg->den_policy == LA_DEN_CLAMP && !(cfg->den_eps > 0.0 && isfinite(cfg->den_eps)))
    LA_BAD("--denominator: the epsilon of clamp:E must be finite and > 0");
  LA_TRY(la_config_check_decay(cfg));
  LA_TRY(la_config_check_gates(cfg));
  if (cfg->normalize && la_map_is_signed(cfg->map) && !cfg->allow_signed)
    LA_BAD("--feature-map %s is signed: its denominator phi(q).sum phi(k) can be zero or "
           "negative, so normalized mode needs --allow-signed (or use --normalize off)",
           la_map_name(cfg->map));
  return LA_OK;
#undef LA_BAD
}

la_status la_config_set_denominator(la_config *cfg, const char *spec) {
  LA_CHECK(spec, LA_ERR_ARG, "no denominator policy given");
  if (!strcmp(spec, "error")) {
    cfg->den_policy = LA_DEN_ERROR;
    cfg->den_eps = 0.0;
  } else if (!strcmp(spec, "zero-empty")) {
    cfg->den_policy = LA_DEN_ZERO_EMPTY;
    cfg->den_eps = 0.0;
  } else if (!strncmp(spec, "add:", 4) || !strncmp(spec, "clamp:", 6)) {
    const int add = spec[0] == 'a';
    const char *e = spec + (add ? 4 : 6);
    char *end;
    errno = 0;
    double eps = strtod(e, &end);
    /* add:0 is the raw ratio num / den (signed maps with --allow-signed); clamp needs E > 0 */
    LA_CHECK(!errno && end != e && !*end && (add ? eps >= 0 : eps > 0) && eps <= 1e300,
             LA_ERR_ARG, "'%s' needs a finite epsilon %s, e.g. %s", spec, add ? ">= 0" : "> 0",
             add ? "add:1e-6 (add:0: the raw ratio)" : "clamp:1e-6");
    cfg->den_policy = add ? LA_DEN_ADD : LA_DEN_CLAMP;
    cfg->den_eps = eps;
  } else {
    return la_error(LA_ERR_ARG, "'%s' is not error, add:EPS, clamp:EPS or zero-empty", spec);
  }
  return LA_OK;
}
