/* la_eval_report (program/report/eval_report.c) on synthetic CSVs with known properties:
 *  - favor+ errors are exactly 0.8 m^-1/2 (median over seeds), so the fitted slope must be
 *    -0.50 and consistent; trig's are 0.5 m^-0.2, so its slope is -0.20 and not consistent;
 *  - one results row has kernel_rel_err below the rank-r floor: the report must flag it;
 *  - bias is detected for favor+ at 16 features only, never for trig, and favor+orf has one
 *    seed (too few for the test);
 *  - the largest reassoc_rel_err is 2.1e-15; the smallest den_min 3e-09;
 *  - with gnuplot on PATH the seven PNGs are valid PNGs and no temporary is left; without it
 *    (PATH of an empty folder) report.md says the plots are missing and one warning line is
 *    printed; a gnuplot that fails is a warning, not an error;
 *  - no recall.csv is handled; CRLF, quoted cells, reordered and extra columns are read;
 *  - a malformed CSV is an error naming the file and the line, and nothing is written;
 *  - out of memory (docs/design.md §6 "Out of memory"): the report of the full synthetic
 *    folder is remade once for every allocation it makes (LINATTN_FAIL_ALLOC=N, N = 1..K+1, in
 *    a child process, since the variable is read before main): each run either fails with
 *    LA_ERR_NOMEM and a one-line reason saying "out of memory", leaving only the CSVs, or
 *    succeeds with the reference's report.md and plots.gp byte for byte; the failures must
 *    reach plots.gp's and report.md's writers.
 * Usage: test_eval_report [--keep DIR] (DIR receives the synthetic run with gnuplot);
 *        test_eval_report --child DIR (one report of DIR, for the sweep: "status count reason"). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include "check.h"
#include "../core/la_alloc.h"
#include "../program/report/eval_report.h"

extern char **environ;

static char root[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static void mkdir_p(const char *d) {
  if (mkdir(d, 0755) != 0 && errno != EEXIST) {
    perror(d);
    exit(1);
  }
}

static FILE *open_w(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (!f) {
    perror(p);
    exit(1);
  }
  return f;
}

static char *slurp(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = 0;
  fclose(f);
  return s;
}

static int exists(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

static int valid_png(const char *dir, const char *name) {
  char p[1024];
  unsigned char h[24];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  if (!f) return 0;
  size_t n = fread(h, 1, sizeof h, f);
  fclose(f);
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return n == sizeof h && !memcmp(h, sig, 8) && !memcmp(h + 12, "IHDR", 4) && (h[16] | h[17] | h[18] | h[19]) &&
         (h[20] | h[21] | h[22] | h[23]);
}

/* Files in dir whose name contains ".tmp." */
static int tmp_files(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '\\.tmp\\.' >/dev/null", dir);
  return system(cmd) == 0;
}

static int gnuplot_on_path(void) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  char *dup = strdup(path), *save = NULL;
  int found = 0;
  for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char p[1024];
    snprintf(p, sizeof p, "%s/gnuplot", *d ? d : ".");
    found = access(p, X_OK) == 0;
  }
  free(dup);
  return found;
}

static const char *maps[] = {"elu1", "favor+", "favor+orf", "trig"};
static const double ns[] = {256, 1024}, scales[] = {0.5, 1};
static const char *modes[] = {"causal", "bidirectional"};

/* The synthetic sweep. Columns in a different order from the driver's, with an extra one. */
static void write_results(const char *dir) {
  FILE *f = open_w(dir, "results.csv");
  fprintf(f, "mode,feature_map,features,r,seed,extra_col,n,heads,dk,dv,input_scale,out_rel_err,grad_q_rel_err,"
             "grad_k_rel_err,grad_v_rel_err,reassoc_rel_err,kernel_rel_err,kernel_rows,rank_r_floor_rel_err,"
             "den_min,den_frac_small,seconds,weights_tv,weights_tv_floor,out_rows\n");
  int row = 0;
  for (int mi = 0; mi < 4; mi++) {
    const char *m = maps[mi];
    int nf = 1, nseed = 1;
    double feats[5] = {16};
    if (!strcmp(m, "favor+")) nf = 5, nseed = 3;
    if (!strcmp(m, "favor+orf")) nf = 2, nseed = 1;
    if (!strcmp(m, "trig")) nf = 3, nseed = 3;
    for (int i = 0; i < nf; i++) feats[i] = 16 << (strcmp(m, "favor+orf") ? i : 2 * i);
    for (int ni = 0; ni < 2; ni++)
      for (int si = 0; si < 2; si++)
        for (int mo = 0; mo < 2; mo++)
          for (int fi = 0; fi < nf; fi++)
            for (int s = 0; s < nseed; s++) {
              double mf = feats[fi], r = !strcmp(m, "trig") ? 2 * mf : mf;
              static const double jit[3] = {1.0, 1.1, 0.9}; /* median = seed 0 */
              double base = !strcmp(m, "elu1") ? 0.3
                            : !strcmp(m, "trig") ? 0.5 * pow(mf, -0.2)
                                                 : 0.8 * pow(mf, -0.5);
              base *= (1 + scales[si]) * (1 + 0.1 * mo) * (1 + ns[ni] / 4096);
              double out = base * jit[s];
              double floor_ = 0.3 * pow(r, -0.3) * (1 + scales[si]);
              double kern = 1.5 * floor_ * jit[s];
              if (!strcmp(m, "trig") && s == 1 && mf == 32 && ns[ni] == 256 && scales[si] == 1 && mo == 0)
                kern = 0.5 * floor_; /* below the floor: an Eckart-Young violation */
              double reassoc = 1e-16 * (1 + row % 7);
              if (row == 17) reassoc = 2.1e-15;
              double den_min = row == 23 ? 3e-9 : 1e-3 * (1 + row % 5);
              fprintf(f, "%s,%s,%.0f,%.0f,%d,zzz,%.0f,2,16,16,%g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.0f,", modes[mo], m,
                      mf, r, s, ns[ni], scales[si], out, 1.2 * out, 1.3 * out, 0.9 * out, reassoc, kern, ns[ni]);
              if (ns[ni] <= 256) fprintf(f, "%.17g", floor_); /* empty above --floor-max-n */
              fprintf(f, ",%.6g,%.6g,%.6g,%.6g,", den_min, row % 3 ? 0.0 : 0.001, 0.01,
                      !strcmp(m, "elu1") ? 0.125 * (1 + scales[si]) : 0.5 * kern);
              if (ns[ni] <= 256 && r < ns[ni]) fprintf(f, "%.6g", 0.05 * (1 + scales[si])); /* the TV reference */
              fprintf(f, ",%.0f\n", ns[ni] > 256 ? 64 : ns[ni]); /* out_rows: sampled at n 1024 */
              row++;
            }
  }
  fclose(f);
}

static void write_bias(const char *dir) {
  FILE *f = open_w(dir, "bias.csv");
  fprintf(f, "feature_map,features,r,n,input_scale,mode,seeds,out_mean_rel_err,out_noise_rel,out_p_value,"
             "kernel_mean_rel_err,kernel_noise_rel,kernel_p_value,kernel_entries,test,level,out_bias_detected,"
             "kernel_bias_detected\n");
  for (int mi = 1; mi < 4; mi++) {
    const char *m = maps[mi];
    int nf = !strcmp(m, "favor+") ? 5 : (!strcmp(m, "trig") ? 3 : 2);
    for (int ni = 0; ni < 2; ni++)
      for (int si = 0; si < 2; si++)
        for (int mo = 0; mo < 2; mo++)
          for (int fi = 0; fi < nf; fi++) {
            double mf = 16 << (strcmp(m, "favor+orf") ? fi : 2 * fi), r = !strcmp(m, "trig") ? 2 * mf : mf;
            int detected = !strcmp(m, "favor+") && mf == 16;
            int seeds = !strcmp(m, "favor+orf") ? 1 : 3;
            fprintf(f, "%s,%.0f,%.0f,%.0f,%g,%s,%d,%.6g,%.6g,", m, mf, r, ns[ni], scales[si], modes[mo], seeds,
                    0.2 / sqrt(mf), 0.05 / sqrt(mf));
            if (seeds > 1) fprintf(f, "%.6g", detected ? 0.001 : 0.4);
            fprintf(f, ",%.6g,%.6g,", 0.1 / sqrt(r), 0.08 / sqrt(r));
            if (seeds > 1) fprintf(f, "0.5");
            fprintf(f, ",%.0f,welch-t,0.05,%s,no\n", ns[ni] * ns[ni], detected ? "yes" : "no");
          }
  }
  fclose(f);
}

static void write_rows(const char *dir) {
  FILE *f = open_w(dir, "rows.csv");
  fprintf(f, "feature_map,features,seed,n,input_scale,mode,token,head,den,den_over_median,row_rel_err\n");
  for (int mi = 0; mi < 2; mi++)
    for (int i = 0; i < 40; i++) {
      double dm = pow(10, -4 + 5.0 * i / 39);
      fprintf(f, "%s,16,0,1024,1,causal,%d,0,%.6g,%.6g,%.6g\n", maps[mi], 25 * i, 3 * dm, dm,
              (mi ? 0.02 : 0.01) / sqrt(dm));
    }
  fprintf(f, "trig,16,0,1024,1,causal,7,1,-0.5,-0.1,0.9\n"); /* a signed map's negative denominator */
  fclose(f);
}

static void write_refs(const char *dir) {
  FILE *f = open_w(dir, "refs.csv");
  fprintf(f, "n,heads,dk,dv,input_scale,mode,ranks,threads,softmax_seconds,softmax_gflops,floor_seconds\n");
  for (int ni = 0; ni < 2; ni++)
    for (int si = 0; si < 2; si++)
      for (int mo = 0; mo < 2; mo++)
        fprintf(f, "%.0f,2,16,16,%g,%s,1,2,%.6g,%.6g,%s\n", ns[ni], scales[si], modes[mo], ns[ni] * 1e-5,
                10 + ns[ni] / 256.0 + mo, ns[ni] <= 256 ? "0.02" : "");
  fclose(f);
}

static void write_recall(const char *dir) {
  FILE *f = open_w(dir, "recall.csv");
  fprintf(f, "feature_map,features,r,pairs,seeds,queries,accuracy,softmax_accuracy\n");
  for (int fi = 0; fi < 2; fi++)
    for (int p = 4; p <= 64; p *= 4)
      fprintf(f, "favor+,%d,%d,%d,3,256,%.4f,%.4f\n", fi ? 256 : 64, fi ? 256 : 64, p,
              (fi ? 0.9 : 0.7) * pow(0.8, p / 4.0), 1.0 - 0.001 * p);
  fclose(f);
}

static void write_all(const char *dir, int recall) {
  mkdir_p(dir);
  write_results(dir);
  write_bias(dir);
  write_rows(dir);
  write_refs(dir);
  if (recall) write_recall(dir);
}

static const char *pngs[] = {"err_vs_features.png", "err_vs_scale.png", "err_vs_n.png", "grad_err.png",
                             "bias.png", "denominators.png", "recall.png"};

#define HAS_TEXT(md, s) CHECK((md) && strstr((md), (s)), "report.md lacks \"%s\"", (s))
#define LACKS_TEXT(md, s) CHECK((md) && !strstr((md), (s)), "report.md has \"%s\"", (s))

/* The claims every synthetic report must make, whatever happened to the plots. */
static void check_claims(const char *md) {
  HAS_TEXT(md, "- command: `linattn eval --out-dir X`");
  HAS_TEXT(md, "- ranks x threads: 3 x 2");
  HAS_TEXT(md, "Reassociation is exact to 2.1e-15 (largest reassoc_rel_err over all");
  HAS_TEXT(md, "the linear form computes the quadratic form of the same map.");
  HAS_TEXT(md, "A low reassociation error says nothing about how close a map is to softmax");
  /* the slopes */
  HAS_TEXT(md, "\"Consistent with m^-1/2\" means the slope is within 0.15 of -0.5.");
  HAS_TEXT(md, "  - favor+: slope -0.50 in all 8 settings (n x input scale x mode); consistent with m^-1/2 in 8 of 8.");
  HAS_TEXT(md, "  - trig: slope -0.20 in all 8 settings (n x input scale x mode); consistent with m^-1/2 in 0 of 8: not consistent.");
  HAS_TEXT(md, "  - favor+orf: slope -0.50 in all 8 settings");
  LACKS_TEXT(md, "  - elu1: slope");
  HAS_TEXT(md, "| favor+ | causal | 256 | 0.5 | 5 | 16 | 256 | -0.500 | yes |");
  /* Eckart-Young */
  HAS_TEXT(md, "**WARNING: Eckart-Young VIOLATED in 1 of");
  HAS_TEXT(md, "trig, features 32, n 256, input scale 1, causal, seed 1");
  /* the floor at the largest width: kernel = 1.5 x floor; no floor at n 1024 */
  /* favor+ at its largest width: r 256 >= n 256, so no floor there (not "infx the floor") */
  HAS_TEXT(md, "  - favor+ (features 256, r 256): the floor was not computed (n above --floor-max-n); r >= n: no floor in 2 more settings.");
  HAS_TEXT(md, "  - elu1 (features 16, r 16): 1.5x the floor in all 2 settings (n, input scale); e.g. kernel_rel_err");
  HAS_TEXT(md, "the floor was not computed in 2 more settings (n above --floor-max-n)");
  HAS_TEXT(md, "| r >= n: no floor |");
  LACKS_TEXT(md, "infx");
  LACKS_TEXT(md, "| inf |");
  /* the weights: which measure each claim rests on, the TV section and its table columns */
  HAS_TEXT(md, "Each claim names the column it rests on: out_rel_err");
  HAS_TEXT(md, "- **Attention weights against softmax's** (rests on weights_tv:");
  HAS_TEXT(md, "  - elu1 (features 16), causal: weights_tv 0.188 (n 256, input scale 0.5; rank-16 reference 0.075) to 0.25 (n 256, input scale 1) over 4 settings.");
  HAS_TEXT(md, "  - favor+ (features 256), causal: weights_tv");
  HAS_TEXT(md, "; r >= n: no floor)");
  HAS_TEXT(md, "| kernel/floor | weights_tv | weights_tv_floor | out_rows |");
  HAS_TEXT(md, "| 0.188 | 0.075 | 256 |");
  HAS_TEXT(md, "  - out_rel_err is over every row in 108 rows of results.csv and over sampled query rows (out_rows < n, "
               "above --softmax-max-n: exact softmax on those rows only, no gradient columns) in 108 rows.");
  HAS_TEXT(md, "  - trig (features 64, r 128):");
  /* bias */
  HAS_TEXT(md, "  - favor+, output bias: **detected** in 8 of 40 settings at level 0.05 (test: welch-t, 3 seeds): "
               "features 16, n 256, input scale 0.5, causal (p = 0.001,");
  HAS_TEXT(md, "  - favor+, kernel bias: not detected in any of 40 settings at level 0.05 (test: welch-t, 3 seeds); smallest p = 0.5.");
  HAS_TEXT(md, "  - trig, output bias: not detected in any of 24 settings at level 0.05 (test: welch-t, 3 seeds); smallest p = 0.4.");
  HAS_TEXT(md, "  - favor+orf, output bias: not detected in any of 16 settings at level 0.05 (test: welch-t, 1 seed)");
  HAS_TEXT(md, "**Too few seeds** in 16 settings (fewer than 2)");
  LACKS_TEXT(md, "elu1, output bias");
  /* denominators, refs */
  HAS_TEXT(md, "The smallest den_min is 3e-09 (");
  HAS_TEXT(md, "Nonnegative features make every denominator positive, not large");
  HAS_TEXT(md, "In rows.csv, the 49 sampled rows whose denominator is below 0.1 x the median have median row_rel_err");
  HAS_TEXT(md, "the softmax reference ran at 11 to 15 GFLOP/s (n 256 causal to n 1024 bidirectional)");
  HAS_TEXT(md, "| favor+ | causal | 16 | 16 | 256 | 0.5 | 3 | 0.319 [0.287, 0.351] |");
}

/* Run la_eval_report with stderr captured into *errtext. */
static int run_captured(const char *dir, const la_eval_meta *meta, char *err, size_t errlen, char **errtext) {
  char cap[512];
  snprintf(cap, sizeof cap, "%s/stderr.txt", root);
  fflush(stderr);
  int saved = dup(2), fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  close(fd);
  la_status st = la_eval_report(dir, meta);
  snprintf(err, errlen, "%s", st == LA_OK ? "" : la_error_reason(st));
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  *errtext = slurp(root, "stderr.txt");
  return st;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; s && *s; s++) n += *s == '\n';
  return n;
}

static void write_text(const char *dir, const char *name, const char *text) {
  FILE *f = open_w(dir, name);
  fputs(text, f);
  fclose(f);
}

/* A malformed results.csv (or other file) must fail naming the file and the line. */
static void check_malformed(const char *name, const char *results, const char *other_name, const char *other,
                            const char *want1, const char *want2) {
  char dir[512], err[512] = "";
  static int k;
  snprintf(dir, sizeof dir, "%s/bad%d", root, k++);
  mkdir_p(dir);
  if (results) write_text(dir, "results.csv", results);
  if (other_name) write_text(dir, other_name, other);
  la_status st = la_eval_report(dir, NULL);
  CHECK(st != LA_OK, "%s: accepted", name);
  snprintf(err, sizeof err, "%s", la_error_reason(st));
  CHECK(strstr(err, want1) != NULL, "%s: error '%s' lacks '%s'", name, err, want1);
  if (want2) CHECK(strstr(err, want2) != NULL, "%s: error '%s' lacks '%s'", name, err, want2);
  CHECK(!strchr(err, '\n'), "%s: error '%s' is not one line", name, err);
  CHECK(!exists(dir, "report.md") && !exists(dir, "plots.gp"), "%s: an output was written", name);
}

/* ---- the allocation-failure sweep ---- */

static const la_eval_meta sweep_meta = {"linattn eval --out-dir X", "0.1.0", 3, 2, 12.5, NULL, NULL};

/* Run `test_eval_report --child dir` with LINATTN_FAIL_ALLOC=fail_at (0: LINATTN_COUNT_ALLOC=1
 * instead); its stdout into out. Returns its wait status, or -1. */
static int spawn_child(const char *dir, long fail_at, const char *out) {
  char var[64];
  if (fail_at > 0) snprintf(var, sizeof var, "LINATTN_FAIL_ALLOC=%ld", fail_at);
  else snprintf(var, sizeof var, "LINATTN_COUNT_ALLOC=1");
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 2, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LINATTN_FAIL_ALLOC", 18) && strncmp(environ[i], "LINATTN_COUNT_ALLOC", 19))
      env[k++] = environ[i];
  env[k++] = var;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  char *argv[] = {"test_eval_report", "--child", (char *)dir, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env), ws = -1;
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (rc != 0) return -1;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return -1;
  return ws;
}

/* The child's line: status, allocation count, reason. 1 when it parsed (one line only). */
static int read_child(const char *out, int *st, long *count, char *reason, size_t rlen) {
  FILE *f = fopen(out, "r");
  if (!f) return 0;
  char line[2048], extra[8];
  int ok = fgets(line, sizeof line, f) != NULL && !fgets(extra, sizeof extra, f);
  fclose(f);
  int used = 0;
  if (!ok || sscanf(line, "%d %ld %n", st, count, &used) < 2) return 0;
  line[strcspn(line, "\n")] = 0;
  snprintf(reason, rlen, "%s", line + used);
  return 1;
}

/* The files in dir, sorted, joined by spaces. */
static void list_dir(const char *dir, char *buf, size_t len) {
  struct dirent **ent = NULL;
  int n = scandir(dir, &ent, NULL, alphasort);
  buf[0] = 0;
  for (int i = 0; i < n; i++) {
    if (ent[i]->d_name[0] != '.') {
      size_t l = strlen(buf);
      snprintf(buf + l, len - l, "%s%s", l ? " " : "", ent[i]->d_name);
    }
    free(ent[i]);
  }
  free(ent);
}

static void sweep_alloc(void) {
  char ref[512], out[600], reason[1024], files[2048], reffiles[2048];
  snprintf(ref, sizeof ref, "%s/oom_ref", root);
  write_all(ref, 1);
  snprintf(out, sizeof out, "%s/oom_child.txt", root);
  int st = -1;
  long K = 0, n = 0;
  int ws = spawn_child(ref, 0, out);
  CHECK(ws == 0 && read_child(out, &st, &K, reason, sizeof reason) && st == LA_OK,
        "the unfaulted report failed: wait status %d, status %d: %s", ws, st, reason);
#if LA_TEST_FAULT_INJECTION
  CHECK(K > 0, "no allocation counted (K = %ld) in a build with LINATTN_FAULT_INJECTION", K);
#endif
  if (K <= 0) {
    printf("skip: allocation sweep (built without LINATTN_FAULT_INJECTION)\n");
    return;
  }
  char *ref_md = slurp(ref, "report.md"), *ref_gp = slurp(ref, "plots.gp");
  list_dir(ref, reffiles, sizeof reffiles);
  int failed = 0, in_plots = 0, in_md = 0, bad = 0;
  for (long N = 1; N <= K + 1; N++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/oom%ld", root, N);
    write_all(dir, 1);
    ws = spawn_child(dir, N, out);
    st = -1, reason[0] = 0;
    const int parsed = ws == 0 && read_child(out, &st, &n, reason, sizeof reason);
    const int nfail0 = nfail;
    CHECK(parsed, "N = %ld: the child crashed or wrote no status line (wait status %d)", N, ws);
    list_dir(dir, files, sizeof files);
    if (parsed && st != LA_OK) {
      failed++;
      in_plots += strstr(reason, "plots.gp") != NULL;
      in_md += strstr(reason, "report.md") != NULL;
      CHECK(N <= K, "N = K + 1 = %ld failed: %s", N, reason);
      CHECK(st == LA_ERR_NOMEM && strstr(reason, "out of memory"), "N = %ld: status %d: '%s'", N, st, reason);
      CHECK(!strcmp(files, "bias.csv recall.csv refs.csv results.csv rows.csv"),
            "N = %ld: a failed report left: %s", N, files);
    } else if (parsed) { /* the failed allocation had a fallback: the same report */
      char *md = slurp(dir, "report.md"), *gp = slurp(dir, "plots.gp");
      CHECK(md && gp && !strcmp(md, ref_md) && !strcmp(gp, ref_gp), "N = %ld: exit 0 but another report", N);
      CHECK(!strcmp(files, reffiles), "N = %ld: exit 0 with the files '%s', the reference's '%s'", N, files, reffiles);
      free(md), free(gp);
    }
    bad += nfail != nfail0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) perror(cmd);
  }
  printf("allocation sweep: K = %ld allocations, %d runs failed with out of memory (%d in plots.gp, %d in "
         "report.md), %d bad\n", K, failed, in_plots, in_md, bad);
  CHECK(in_plots > 0 && in_md > 0, "the sweep did not reach the writers of plots.gp (%d) and report.md (%d)",
        in_plots, in_md);
  free(ref_md), free(ref_gp);
}

/* --child DIR: one report, and its status line on stdout (for the sweep). */
static int child(const char *dir) {
  la_status st = la_eval_report(dir, &sweep_meta);
  printf("%d %ld %s\n", (int)st, la_alloc_count(), st == LA_OK ? "" : la_error_reason(st));
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--child")) return child(argv[2]);
  const char *keep = argc > 2 && !strcmp(argv[1], "--keep") ? argv[2] : NULL;
  snprintf(root, sizeof root, "/tmp/test_eval_report.XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  la_eval_meta meta = {"linattn eval --out-dir X", "0.1.0", 3, 2, 12.5, NULL, NULL};
  const int have_gnuplot = gnuplot_on_path();
  const char *path0 = getenv("PATH");
  char *path_saved = strdup(path0 ? path0 : "");

  /* A: everything, with gnuplot when it is installed. */
  {
    char dir[512], err[512] = "";
    if (keep) snprintf(dir, sizeof dir, "%s", keep);
    else snprintf(dir, sizeof dir, "%s/a", root);
    write_all(dir, 1);
    char *e = NULL;
    la_status st = run_captured(dir, &meta, err, sizeof err, &e);
    CHECK(st == LA_OK, "la_eval_report: %d %s", (int)st, err);
    char *md = slurp(dir, "report.md");
    CHECK(md != NULL, "no report.md");
    check_claims(md);
    HAS_TEXT(md, "- **Associative recall** (training-free");
    HAS_TEXT(md, "favor+ (features 256) 0.0253 at 64 pairs vs softmax 0.936.");
    CHECK(exists(dir, "plots.gp"), "no plots.gp");
    if (have_gnuplot) {
      for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) {
        CHECK(valid_png(dir, pngs[i]), "%s is not a valid PNG", pngs[i]);
        char ref[128];
        snprintf(ref, sizeof ref, "](%s)", pngs[i]);
        HAS_TEXT(md, ref);
      }
      LACKS_TEXT(md, "**missing**");
      CHECK(!e || !*e, "stderr not empty with gnuplot: %s", e ? e : "");
    } else {
      printf("skip: gnuplot is not on PATH: the PNG checks of run A\n");
    }
    CHECK(!tmp_files(dir), "a temporary file was left in %s", dir);
    free(md), free(e);
  }

  /* B: no gnuplot on PATH (an empty folder), no recall.csv. */
  {
    char dir[512], bin[512], err[512] = "";
    snprintf(dir, sizeof dir, "%s/b", root);
    snprintf(bin, sizeof bin, "%s/emptybin", root);
    mkdir_p(bin);
    write_all(dir, 0);
    setenv("PATH", bin, 1);
    char *e = NULL;
    la_status st = run_captured(dir, &meta, err, sizeof err, &e);
    setenv("PATH", path_saved, 1);
    CHECK(st == LA_OK, "without gnuplot: %d %s", (int)st, err);
    char *md = slurp(dir, "report.md");
    check_claims(md);
    HAS_TEXT(md, "- **Associative recall**: not run (no recall.csv; run with --recall).");
    HAS_TEXT(md, "recall.png: **missing** (no recall.csv (run with --recall)).");
    HAS_TEXT(md, "err_vs_features.png: **missing** (gnuplot is not on PATH).");
    HAS_TEXT(md, "run `gnuplot plots.gp` in this folder");
    for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) CHECK(!exists(dir, pngs[i]), "%s exists", pngs[i]);
    CHECK(e && count_lines(e) == 1 && strstr(e, "linattn: warning: gnuplot is not on PATH") &&
              strstr(e, "`gnuplot plots.gp` in "),
          "warning without gnuplot: '%s'", e ? e : "");
    CHECK(exists(dir, "plots.gp"), "no plots.gp without gnuplot");
    CHECK(!tmp_files(dir), "a temporary file was left in %s", dir);
    /* ... and the plots.gp it left makes the PNGs later, in that folder */
    if (have_gnuplot) {
      char cmd[700];
      snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp 2>/dev/null", dir);
      CHECK(system(cmd) == 0, "gnuplot plots.gp failed in %s", dir);
      for (size_t i = 0; i < 6; i++) CHECK(valid_png(dir, pngs[i]), "later: %s is not a valid PNG", pngs[i]);
    }
    free(md), free(e);
  }

  /* C: a gnuplot that fails: a warning; report.md says why; no PNG and no temporary. */
  {
    char dir[512], bin[512], err[512] = "";
    snprintf(dir, sizeof dir, "%s/c", root);
    snprintf(bin, sizeof bin, "%s/badbin", root);
    mkdir_p(bin);
    write_all(dir, 1);
    char fake[600];
    snprintf(fake, sizeof fake, "%s/gnuplot", bin);
    FILE *f = fopen(fake, "w");
    fprintf(f, "#!/bin/sh\nfor a; do case \"$a\" in suffix=*|\"cd '\"*) eval \"$a\";; esac; done\n"
               "echo junk > \"err_vs_n.png$suffix\"\n"
               "echo '         plot $d1 ...' >&2\n"
               "echo '\"plots.gp\" line 42: simulated failure' >&2\nexit 3\n");
    fclose(f);
    chmod(fake, 0755);
    setenv("PATH", bin, 1);
    char *e = NULL;
    la_status st = run_captured(dir, &meta, err, sizeof err, &e);
    setenv("PATH", path_saved, 1);
    CHECK(st == LA_OK, "with a failing gnuplot: %d %s", (int)st, err);
    char *md = slurp(dir, "report.md");
    check_claims(md);
    HAS_TEXT(md, "err_vs_features.png: **missing** (gnuplot exited with status 3: \"plots.gp\" line 42: simulated failure).");
    for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) CHECK(!exists(dir, pngs[i]), "%s exists", pngs[i]);
    CHECK(e && count_lines(e) == 1 && strstr(e, "linattn: warning: the plots were not made (gnuplot exited with status 3"),
          "warning with a failing gnuplot: '%s'", e ? e : "");
    CHECK(!tmp_files(dir), "a temporary file was left in %s", dir);
    free(md), free(e);
  }

  /* D: malformed files: an error naming the file and the line; nothing written. */
  const char *hdr = "feature_map,features,r,seed,n,heads,dk,dv,input_scale,mode,out_rel_err\n";
  char buf[2048];
  snprintf(buf, sizeof buf, "%sfavor+,16,16,0,256,2,16,16,1,causal,0.2\nfavor+,32,32,0,256,2,16,16,1,causal,0.1\n"
                            "favor+,64,64,0,256,2,16,1,causal,0.05\n", hdr);
  check_malformed("short row", buf, NULL, NULL, "results.csv: line 4: 10 fields where the header has 11", NULL);
  snprintf(buf, sizeof buf, "%sfavor+,16,16,0,256,2,16,16,1,causal,0.2\nfavor+,32,32,0,256,2,16,16,1,causal,abc\n", hdr);
  check_malformed("not a number", buf, NULL, NULL, "results.csv: line 3: out_rel_err is 'abc', not a number", NULL);
  snprintf(buf, sizeof buf, "%s\n\nfavor+,16,16,0,,2,16,16,1,causal,0.2\n", hdr);
  check_malformed("empty key", buf, NULL, NULL, "results.csv: line 4: n must be a finite number", NULL);
  check_malformed("missing column", "feature_map,features,seed,n,input_scale,mode\nfavor+,16,0,256,1,causal\n", NULL,
                  NULL, "results.csv: line 1: the header has no column 'out_rel_err'", NULL);
  snprintf(buf, sizeof buf, "%sfavor+,16,16,0,256,2,16,16,1,\"causal,0.2\n", hdr);
  check_malformed("open quote", buf, NULL, NULL, "results.csv: line 2: a quoted field is not closed", NULL);
  check_malformed("no file", NULL, NULL, NULL, "results.csv: cannot open: No such file or directory", NULL);
  check_malformed("empty file", "", NULL, NULL, "results.csv: line 1: empty file", NULL);
  snprintf(buf, sizeof buf, "%sfavor+,16,16,0,256,2,16,16,1,causal,0.2\n", hdr);
  check_malformed("bad verdict", buf, "bias.csv",
                  "feature_map,features,n,input_scale,mode,out_bias_detected\nfavor+,16,256,1,causal,no\n"
                  "favor+,32,256,1,causal,maybe\n",
                  "bias.csv: line 3: out_bias_detected is 'maybe', not yes or no", NULL);
  check_malformed("bad recall", buf, "recall.csv", "feature_map,features,pairs,accuracy\nfavor+,16,4\n",
                  "recall.csv: line 2: 3 fields where the header has 4", NULL);
  check_malformed("duplicate column", "feature_map,features,seed,n,input_scale,mode,out_rel_err,n\n", NULL, NULL,
                  "results.csv: line 1: column 'n' appears twice", NULL);

  /* E: CRLF line ends, quoted cells (with a comma and a doubled quote in an unused column), a
   * blank line, only the required columns: read, and the report is written. */
  {
    char dir[512], err[512] = "", *e = NULL;
    snprintf(dir, sizeof dir, "%s/e", root);
    mkdir_p(dir);
    write_text(dir, "results.csv",
               "feature_map,features,seed,n,input_scale,mode,out_rel_err,note\r\n"
               "\"favor+\",16,0,256,1,causal,0.2,\"a, \"\"quoted\"\" note\"\r\n\r\n"
               "favor+,64,0,256,1,causal,0.1,\r\n");
    setenv("PATH", "/nonexistent", 1);
    la_status st = run_captured(dir, NULL, err, sizeof err, &e);
    setenv("PATH", path_saved, 1);
    CHECK(st == LA_OK, "CRLF and quotes: %d %s", (int)st, err);
    char *md = slurp(dir, "report.md");
    HAS_TEXT(md, "  - favor+: slope -0.50 over 2 widths (16 to 64) at n 256, input scale 1, causal: consistent with m^-1/2.");
    HAS_TEXT(md, "reassoc_rel_err was not computed in any row");
    HAS_TEXT(md, "A low reassociation error says nothing about how close a map is to softmax");
    HAS_TEXT(md, "**Eckart-Young check**: not possible");
    HAS_TEXT(md, "- **Bias**: no bias.csv: no bias verdicts.");
    free(md), free(e);
  }

  /* F: out of memory at every allocation of the report. */
  sweep_alloc();

  free(path_saved);
  if (nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0) perror("cleanup");
  printf("test_eval_report: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
