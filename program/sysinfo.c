/* The CPU and the OpenBLAS core in use (docs/design.md §4.9). A distribution's OpenBLAS may
 * not recognize a CPU newer than itself and fall back to narrower kernels (SSE3 on an
 * AVX-512 Xeon: 5x slower GEMM); the report records both sides so a figure can be judged. */
#include "sysinfo.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char *openblas_get_corename(void) __attribute__((weak));

/* ISA levels, narrowest first; the index is the order. */
static const char *const isa_names[] = {"other", "sse2", "sse4_2", "avx", "avx2", "avx512f"};

static int isa_level(const char *isa) {
  for (int i = 0; i < (int)(sizeof isa_names / sizeof *isa_names); i++)
    if (isa && strcmp(isa, isa_names[i]) == 0) return i;
  return -1;
}

/* OpenBLAS's x86-64 DYNAMIC_ARCH core names (driver/others/dynamic.c), by kernel ISA. */
static const struct { const char *core, *isa; } cores[] = {
    {"SkylakeX", "avx512f"},  {"Cooperlake", "avx512f"}, {"SapphireRapids", "avx512f"},
    {"Haswell", "avx2"},      {"Zen", "avx2"},           {"Excavator", "avx2"},
    {"Sandybridge", "avx"},   {"Bulldozer", "avx"},      {"Piledriver", "avx"},
    {"Steamroller", "avx"},   {"Nehalem", "sse4_2"},     {"Barcelona", "sse2"},
    {"Opteron_SSE3", "sse2"}, {"Opteron", "sse2"},       {"Prescott", "sse2"},
    {"Core2", "sse2"},        {"Penryn", "sse2"},        {"Dunnington", "sse2"},
    {"Atom", "sse2"},         {"Nano", "sse2"},          {"Katmai", "other"},
};

static const char *core_isa(const char *core) {
  for (size_t i = 0; core && i < sizeof cores / sizeof *cores; i++)
    if (strcasecmp(core, cores[i].core) == 0) return cores[i].isa;
  return NULL;
}

static const char *cpu_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  if (__builtin_cpu_supports("sse4.2")) return "sse4_2";
  if (__builtin_cpu_supports("sse2")) return "sse2";
#endif
  return "other";
}

static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strcspn(v, "\n");
    while (n > 0 && v[n - 1] == ' ') n--;
    snprintf(buf, len, "%.*s", (int)n, v);
    break;
  }
  fclose(f);
}

void la_sysinfo_get(la_sysinfo *s) {
  memset(s, 0, sizeof *s);
  cpu_model(s->model, sizeof s->model);
  s->isa = cpu_isa();
  s->blas_core = openblas_get_corename ? openblas_get_corename() : NULL;
  s->blas_isa = core_isa(s->blas_core);
}

const char *la_sysinfo_blas_warning(const la_sysinfo *s, char *buf, size_t len) {
  const int have = isa_level(s->isa), used = isa_level(s->blas_isa);
  if (!s->blas_core || used < 0 || have <= used) return NULL;
  const char *set = getenv("OPENBLAS_CORETYPE");
  const char *better = have >= isa_level("avx512f") ? "SkylakeX" : have >= isa_level("avx2") ? "Haswell"
                                                                                             : "Sandybridge";
  snprintf(buf, len,
           "OpenBLAS runs its %s kernels (%s) on a CPU with %s%s%s%s; its GEMM may run 2-5x "
           "slower than it could. Set OPENBLAS_CORETYPE=%s on every rank, or unset it and "
           "source jobs/env.sh, which measures the fastest correct core (README \"Running on a "
           "cluster\")",
           s->blas_core, s->blas_isa, s->isa, set && *set ? " (OPENBLAS_CORETYPE=" : "",
           set && *set ? set : "", set && *set ? " is set)" : "", better);
  return buf;
}

void la_sysinfo_warn(const la_sysinfo *s) {
  char buf[512];
  if (la_sysinfo_blas_warning(s, buf, sizeof buf)) fprintf(stderr, "linattn: warning: %s\n", buf);
}
