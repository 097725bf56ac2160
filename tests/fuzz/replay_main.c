/* Replays inputs through a harness's LLVMFuzzerTestOneInput without libFuzzer, so that the
 * seed corpus and every crash found (tests/fuzz/regress/) run in every build and with every
 * compiler. Usage: fuzz_replay_NAME DIR|FILE...; every regular file of each DIR (not those
 * starting with '.') is one input. Exits 1 if a DIR or FILE is missing or nothing was
 * replayed; a failing input aborts (FUZZ_CHECK) or is caught by the sanitizers. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz_common.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return perror(path), 0;
  size_t cap = 1 << 12, n = 0;
  unsigned char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return fprintf(stderr, "%s: out of memory\n", path), 0;
  /* an exact-size copy, so that ASan sees reads past the input's end */
  unsigned char *in = malloc(n ? n : 1);
  memcpy(in, buf, n);
  free(buf);
  fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(in, n);
  free(in);
  return 1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  long total = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) return perror(argv[a]), 1;
    if (!S_ISDIR(st.st_mode)) {
      if (!replay_file(argv[a])) return 1;
      total++;
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d) return perror(argv[a]), 1;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, sizeof *names * (n + 1));
      names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, by_name); /* a stable order; NULL when empty */
    for (size_t i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], names[i]);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!replay_file(path)) return 1;
        total++;
      }
      free(names[i]);
    }
    free(names);
  }
  printf("replayed %ld inputs\n", total);
  return total > 0 ? 0 : 1;
}
