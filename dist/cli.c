/* Option parsing for `linattn run` (CONTRACT.md). Every value is checked here, with a message
 * naming the option; engine-level checks follow in la_config_check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

void la_cli_help(const char *sub) {
  printf(
      "usage: linattn %s [options]\n"
      "\n"
      "Feature-map (linear) attention: out_i = phi(q_i)^T S / phi(q_i).z over the keys query i\n"
      "may read (DESIGN.md section 1). Run under mpirun/srun for many ranks, or plainly as one.\n"
      "\n"
      "Inputs (default: the built-in synthetic workload):\n"
      "  --q F --k F --v F        .npy arrays [N,H,dk], [N,H,dk], [N,H,dv] (or [N,d] for H=1),\n"
      "                           little-endian <f4/<f8, C order\n"
      "  --n N                    synthetic: tokens (default 16384)\n"
      "  --heads H                synthetic: heads (default 4)\n"
      "  --dk D --dv D            synthetic: key and value widths (default 64, 64)\n"
      "  --input-scale A          synthetic: entries are N(0,1)*A (default 1)\n"
      "Operator:\n"
      "  --mode M                 causal | bidirectional (default causal)\n"
      "  --feature-map M          elu1 | relu | identity | favor+ | favor+orf | favor-hyp |\n"
      "                           trig | precomputed (default elu1)\n"
      "  --features m             random projections; favor-hyp and trig give r = 2m (default 256)\n"
      "  --scale S                similarity exp(S q.k) for the random maps (default 1/sqrt(dk))\n"
      "  --seed S                 seed of projections and synthetic data (default 0)\n"
      "  --projection F           load the projection [H,m,dk] or [m,dk] (.npy)\n"
      "  --save-projection F      save the projection used [H,m,dk] (.npy)\n"
      "  --normalize on|off       normalized or unnormalized operator (default on)\n"
      "  --denominator P          error | add:EPS | clamp:EPS | zero-empty (default error)\n"
      "  --allow-signed           allow the signed maps identity and trig in normalized mode\n"
      "  --window W               causal sliding window: query i reads keys i-W < j <= i\n"
      "  --segments F             packed sequences: int64 offsets [S+1], 0 = o_0 < ... < o_S = N;\n"
      "                           the state resets exactly at every offset (both modes)\n"
      "  --mask F                 refused: general pairwise masks break the shared-summary\n"
      "                           factorization (use --segments or --window)\n"
      "Execution:\n"
      "  --dtype f32|f64          compute precision (default: dtype of the inputs; f32 synthetic)\n"
      "  --threads T              OpenMP threads per rank (default OMP_NUM_THREADS)\n"
      "  --chunk C                causal chunk length, 1..4096 (default: tuned per r, dv:\n"
      "                           32 if r, dv <= 32, 48 if r <= 128, else 64)\n"
      "  --block-tokens B         streaming block per rank (default 16384)\n"
      "Outputs:\n"
      "  --out F                  output array [N,H,dv] (.npy, written atomically)\n"
      "  --report F               JSON report\n"
      "  --force                  overwrite existing outputs\n"
      "  --progress               progress line with rate and ETA on stderr (default: if a tty)\n"
      "  --no-progress            no progress line\n"
      "  --checkpoint DIR         (not in this version: refused)\n"
      "  --checkpoint-every S     (not in this version: refused)\n"
      "  --reproducible           (not in this version: refused)\n"
      "%s"
      "  -h, --help               this text\n"
      "\n"
      "Exit codes: 0 ok, 2 usage error or bad input, 3 denominator policy violated, 1 other.\n",
      sub,
      strcmp(sub, "grad") ? ""
      : "Gradients (linattn grad; the loss is sum(out * G), the projection is held fixed):\n"
        "  --grad-out F             G = dL/dout [N,H,dv] (synthetic: drawn from the seed)\n"
        "  --grad-q F --grad-k F --grad-v F\n"
        "                           outputs dL/dQ, dL/dK, dL/dV, each the shape of its input\n"
        "                           (precomputed: with respect to phi(Q) and phi(K))\n");
}

int la_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int la_parse_f64(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

static la_status cli_parse(int argc, char **argv, int first, la_cli *o, int grad, char *err,
                           size_t errlen);

static int takes_value(const char *a) {
  static const char *const opts[] = {
      "--q", "--k", "--v", "--out", "--report", "--projection", "--save-projection",
      "--segments", "--checkpoint", "--checkpoint-every", "--n", "--heads", "--dk", "--dv",
      "--input-scale", "--mode", "--feature-map", "--features", "--scale", "--seed",
      "--normalize", "--denominator", "--window", "--dtype", "--threads", "--chunk",
      "--block-tokens", "--mask", "--grad-out", "--grad-q", "--grad-k", "--grad-v", NULL};
  for (int i = 0; opts[i]; i++)
    if (!strcmp(a, opts[i])) return 1;
  return 0;
}

la_status la_cli_parse_grad(int argc, char **argv, int first, la_cli *o, char *err,
                            size_t errlen) {
  return cli_parse(argc, argv, first, o, 1, err, errlen);
}

la_status la_cli_parse(int argc, char **argv, int first, la_cli *o, char *err, size_t errlen) {
  return cli_parse(argc, argv, first, o, 0, err, errlen);
}

static la_status cli_parse(int argc, char **argv, int first, la_cli *o, int grad, char *err,
                           size_t errlen) {
  memset(o, 0, sizeof *o);
  o->is_grad = grad;
  la_config_default(&o->cfg);
  o->n = 65536;
  o->heads = 4;
  o->dk = 64;
  o->dv = 64;
  o->input_scale = 1.0;
  o->dtype = LA_F32;
  o->den_string = "error";
  o->progress = isatty(2);
  o->block = 16384;
#define BAD(...)                        \
  do {                                  \
    snprintf(err, errlen, __VA_ARGS__); \
    return LA_ERR_ARG;                  \
  } while (0)
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    int64_t iv;
    /* flags without a value */
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { o->help = 1; continue; }
    if (!strcmp(a, "--force")) { o->force = 1; continue; }
    if (!strcmp(a, "--allow-signed")) { o->cfg.allow_signed = 1; continue; }
    if (!strcmp(a, "--progress")) { o->progress = 1; continue; }
    if (!strcmp(a, "--no-progress")) { o->progress = 0; continue; }
    if (!strcmp(a, "--reproducible")) { o->reproducible = 1; continue; }
    if (strncmp(a, "--", 2) != 0) BAD("unexpected argument '%s'", a);
    if (!takes_value(a)) BAD("unknown option '%s' (see linattn run --help)", a);
    if (i + 1 >= argc) BAD("option %s needs a value", a);
    const char *val = argv[++i];
    if (!strcmp(a, "--q")) o->q = val;
    else if (!strcmp(a, "--k")) o->k = val;
    else if (!strcmp(a, "--v")) o->v = val;
    else if (!strcmp(a, "--out")) o->out = val;
    else if (!strcmp(a, "--report")) o->report = val;
    else if (!strcmp(a, "--projection")) o->projection = val;
    else if (!strcmp(a, "--save-projection")) o->save_projection = val;
    else if (!strcmp(a, "--segments")) o->segments = val;
    else if (!strcmp(a, "--grad-out")) o->grad_out = val;
    else if (!strcmp(a, "--grad-q")) o->grad_q = val;
    else if (!strcmp(a, "--grad-k")) o->grad_k = val;
    else if (!strcmp(a, "--grad-v")) o->grad_v = val;
    else if (!strcmp(a, "--mask"))
      BAD("--mask: general pairwise masks are refused: an arbitrary mask breaks the single "
          "shared summary phi(q)^T S that makes attention linear (DESIGN.md section 3); use "
          "--segments for packed sequences or --window W for a causal sliding window");
    else if (!strcmp(a, "--checkpoint")) o->checkpoint = val;
    else if (!strcmp(a, "--checkpoint-every")) {
      double s;
      if (la_parse_f64(val, &s) || !(s > 0)) BAD("--checkpoint-every: '%s' is not a positive number of seconds", val);
      BAD("--checkpoint-every: checkpointing is not implemented in this version");
    } else if (!strcmp(a, "--n")) {
      if (la_parse_i64(val, 0, INT64_MAX / 2, &o->n)) BAD("--n: '%s' is not an integer >= 0", val);
    } else if (!strcmp(a, "--heads")) {
      if (la_parse_i64(val, 1, 4096, &iv)) BAD("--heads: '%s' is not in [1, 4096]", val);
      o->heads = (int)iv;
    } else if (!strcmp(a, "--dk")) {
      if (la_parse_i64(val, 1, LA_DIM_MAX, &iv)) BAD("--dk: '%s' is not in [1, %d]", val, LA_DIM_MAX);
      o->dk = (int)iv;
    } else if (!strcmp(a, "--dv")) {
      if (la_parse_i64(val, 1, LA_DIM_MAX, &iv)) BAD("--dv: '%s' is not in [1, %d]", val, LA_DIM_MAX);
      o->dv = (int)iv;
    } else if (!strcmp(a, "--input-scale")) {
      if (la_parse_f64(val, &o->input_scale) || !(o->input_scale >= 0) || o->input_scale > 1e30)
        BAD("--input-scale: '%s' is not a finite number >= 0", val);
    } else if (!strcmp(a, "--mode")) {
      if (!strcmp(val, "causal")) o->cfg.mode = LA_CAUSAL;
      else if (!strcmp(val, "bidirectional")) o->cfg.mode = LA_BIDIRECTIONAL;
      else BAD("--mode: '%s' is not causal or bidirectional", val);
    } else if (!strcmp(a, "--feature-map")) {
      if (la_map_from_name(val, &o->cfg.map))
        BAD("--feature-map: unknown map '%s' (elu1, relu, identity, favor+, favor+orf, "
            "favor-hyp, trig, precomputed)", val);
    } else if (!strcmp(a, "--features")) {
      if (la_parse_i64(val, 1, LA_FEATURES_MAX, &iv)) BAD("--features: '%s' is not in [1, %d]", val, LA_FEATURES_MAX);
      o->cfg.features = (int)iv;
    } else if (!strcmp(a, "--scale")) {
      if (la_parse_f64(val, &o->cfg.scale) || !(o->cfg.scale > 0) || o->cfg.scale > 1e30)
        BAD("--scale: '%s' is not a finite number > 0", val);
    } else if (!strcmp(a, "--seed")) {
      if (la_parse_i64(val, 0, INT64_MAX, &iv)) BAD("--seed: '%s' is not an integer >= 0", val);
      o->cfg.seed = (uint64_t)iv;
    } else if (!strcmp(a, "--normalize")) {
      if (!strcmp(val, "on")) o->cfg.normalize = 1;
      else if (!strcmp(val, "off")) o->cfg.normalize = 0;
      else BAD("--normalize: '%s' is not on or off", val);
    } else if (!strcmp(a, "--denominator")) {
      o->den_string = val;
      if (!strcmp(val, "error")) o->cfg.den_policy = LA_DEN_ERROR;
      else if (!strcmp(val, "zero-empty")) o->cfg.den_policy = LA_DEN_ZERO_EMPTY;
      else if (!strncmp(val, "add:", 4) || !strncmp(val, "clamp:", 6)) {
        int add = val[0] == 'a';
        o->cfg.den_policy = add ? LA_DEN_ADD : LA_DEN_CLAMP;
        if (la_parse_f64(val + (add ? 4 : 6), &o->cfg.den_eps) || !(o->cfg.den_eps > 0) ||
            o->cfg.den_eps > 1e300)
          BAD("--denominator: '%s' needs a finite epsilon > 0, e.g. add:1e-6", val);
      } else BAD("--denominator: '%s' is not error, add:EPS, clamp:EPS or zero-empty", val);
    } else if (!strcmp(a, "--window")) {
      if (la_parse_i64(val, 1, INT64_MAX, &o->window)) BAD("--window: '%s' is not an integer >= 1", val);
    } else if (!strcmp(a, "--dtype")) {
      if (!strcmp(val, "f32")) o->dtype = LA_F32;
      else if (!strcmp(val, "f64")) o->dtype = LA_F64;
      else BAD("--dtype: '%s' is not f32 or f64", val);
      o->dtype_set = 1;
    } else if (!strcmp(a, "--threads")) {
      if (la_parse_i64(val, 1, 4096, &iv)) BAD("--threads: '%s' is not in [1, 4096]", val);
      o->cfg.threads = (int)iv;
    } else if (!strcmp(a, "--chunk")) {
      if (la_parse_i64(val, LA_CHUNK_MIN, LA_CHUNK_MAX, &iv))
        BAD("--chunk: '%s' is not in [%d, %d]", val, LA_CHUNK_MIN, LA_CHUNK_MAX);
      o->cfg.chunk = (int)iv;
    } else if (!strcmp(a, "--block-tokens")) {
      if (la_parse_i64(val, 1, (int64_t)1 << 30, &o->block)) BAD("--block-tokens: '%s' is not in [1, 2^30]", val);
    } else BAD("unknown option '%s' (see linattn run --help)", a);
  }
  /* Refuse what this version does not compute, rather than computing something else. */
  o->cfg.window = o->window;
  if (o->checkpoint) BAD("--checkpoint: checkpointing is not implemented in this version");
  if (o->reproducible) BAD("--reproducible: bitwise reproducibility across rank counts is not implemented in this version");
  if (!o->is_grad && (o->grad_out || o->grad_q || o->grad_k || o->grad_v))
    BAD("--grad-out/--grad-q/--grad-k/--grad-v belong to `linattn grad`");
  int nin = !!o->q + !!o->k + !!o->v;
  if (nin != 0 && nin != 3) BAD("--q, --k and --v must be given together");
  return LA_OK;
#undef BAD
}
