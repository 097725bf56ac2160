/* libFuzzer harness: the option parser (program/options.c driven by the table of program/cli.c,
 * both compiled into the harness). Byte 0 picks the subcommand (run, grad, bench); the rest
 * is split on NUL bytes into the arguments after `linattn SUB`. A parse that succeeds must
 * leave every bounded field in its bounds; then --help and --print-options are written (to
 * /dev/null) and, for run and grad, la_config_check judges the configuration as main.c's
 * commands do. Every refusal has a reason, and is LA_ERR_ARG (a bad request) or
 * LA_ERR_UNSUPPORTED (a valid request this version does not compute, e.g. grad with --decay);
 * both exit 2 (docs/cli.md). */
#include "fuzz_common.h"
#include "cli.h"

/* cli.c's --help for bench prints the CSV header, which lives with the bench command in
 * bench.c (MPI and ScaLAPACK); the parser does not need the real text. */
const char la_bench_csv_header[] = "impl,mode,feature_map,...\n";

enum { ARGS_MAX = 64 };

static void check_list(const la_list *l, int64_t lo, int64_t hi, const char *what) {
  FUZZ_CHECK(l->n >= 0 && l->n <= LA_LIST_MAX, "%s: %d values", what, l->n);
  for (int j = 0; j < l->n; j++)
    FUZZ_CHECK(l->i[j] >= lo && l->i[j] <= hi, "%s[%d] = %lld", what, j, (long long)l->i[j]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
  if (size < 1) return 0;
  static const la_sub subs[] = {LA_SUB_RUN, LA_SUB_GRAD, LA_SUB_BENCH};
  const la_sub sub = subs[data[0] % 3];
  /* "linattn SUB a0\0a1\0...": the text copied with a terminating NUL, split in place */
  char *text = malloc(size);
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  char *argv[ARGS_MAX + 3] = {"linattn", (char *)la_cli_sub_name(sub)};
  int argc = 2;
  for (char *p = text; p < text + size - 1 && argc < ARGS_MAX + 2; p += strlen(p) + 1)
    argv[argc++] = p;
  argv[argc] = NULL;

  la_cli o;
  la_error_clear();
  const la_status s = la_cli_parse(sub, argc, argv, 2, &o);
  if (s != LA_OK) {
    FUZZ_CHECK((s == LA_ERR_ARG || s == LA_ERR_UNSUPPORTED) && la_error_message()[0],
               "status %d without a reason", (int)s);
    free(text);
    return 0;
  }
  FUZZ_CHECK(o.sub == sub, "sub %d", (int)o.sub);
  FUZZ_CHECK(o.heads >= 1 && o.heads <= 4096 && o.dk >= 1 && o.dk <= LA_DIM_MAX && o.dv >= 1 &&
                 o.dv <= LA_DIM_MAX, "heads %d dk %d dv %d", o.heads, o.dk, o.dv);
  FUZZ_CHECK(o.cfg.chunk == 0 || (o.cfg.chunk >= LA_CHUNK_MIN && o.cfg.chunk <= LA_CHUNK_MAX),
             "chunk %d", o.cfg.chunk);
  FUZZ_CHECK(o.dtype == LA_F32 || o.dtype == LA_F64, "dtype %d", (int)o.dtype);
  FUZZ_CHECK(o.cfg.kernels >= LA_KERNELS_AUTO && o.cfg.kernels <= LA_KERNELS_GENERIC, "kernels %d",
             (int)o.cfg.kernels);
  if (sub == LA_SUB_BENCH) {
    check_list(&o.n_list, 1, (int64_t)1 << 40, "--n");
    check_list(&o.features_list, 1, LA_FEATURES_MAX, "--features");
    check_list(&o.threads_list, 1, 4096, "--threads");
    check_list(&o.modes, 0, 1, "--modes");
    check_list(&o.maps, 0, LA_MAP_COUNT - 1, "--feature-maps");
    for (int j = 0; j < o.maps.n; j++)
      FUZZ_CHECK(!la_map_is_signed((la_map_kind)o.maps.i[j]) && o.maps.i[j] != LA_MAP_PRECOMPUTED,
                 "bench map %lld", (long long)o.maps.i[j]);
    FUZZ_CHECK(o.repeat >= 1 && o.repeat <= 1000, "repeat %d", o.repeat);
  } else {
    /* block 0: auto, worked out by the job from the shapes (program/job.c) */
    FUZZ_CHECK(o.n >= 0 && o.block >= 0 && o.block <= (int64_t)1 << 30, "n %lld block %lld",
               (long long)o.n, (long long)o.block);
    FUZZ_CHECK(o.cfg.mode == LA_CAUSAL || o.cfg.mode == LA_BIDIRECTIONAL, "mode %d", (int)o.cfg.mode);
    FUZZ_CHECK(o.cfg.map >= 0 && o.cfg.map < LA_MAP_COUNT, "map %d", (int)o.cfg.map);
    FUZZ_CHECK(o.cfg.features >= 1 && o.cfg.features <= LA_FEATURES_MAX, "features %d",
               o.cfg.features);
    FUZZ_CHECK(o.cfg.window >= 0 && o.cfg.threads >= 0 && o.cfg.threads <= 4096,
               "window %lld threads %d", (long long)o.cfg.window, o.cfg.threads);
    FUZZ_CHECK(o.den_string != NULL, "no --denominator string");
    FUZZ_CHECK((o.q && o.k && o.v) || (!o.q && !o.k && !o.v) || o.help, "--q, --k, --v");
  }
  if (o.help) la_cli_help(devnull, sub);
  la_cli_print(devnull, &o);
  if (sub != LA_SUB_BENCH) {
    char err[1024] = "";
    const la_status c = why(la_config_check(&o.cfg, o.dk), err, sizeof err);
    FUZZ_CHECK(c == LA_OK || ((c == LA_ERR_ARG || c == LA_ERR_UNSUPPORTED) && fuzz_one_line(err)),
               "config %d '%s'", (int)c, err);
  }
  free(text);
  return 0;
}
