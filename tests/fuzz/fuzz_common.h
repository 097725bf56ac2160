/* Shared by the libFuzzer harnesses (tests/fuzz/README.md): the entry point
 * LLVMFuzzerTestOneInput of each fuzz_*.c is linked either with libFuzzer (clang,
 * -DLINATTN_FUZZ=ON, jobs/fuzz.sh) or with replay_main.c (every build: the CTest tests
 * fuzz_replay_*, over corpus/ and regress/). */
#ifndef LINATTN_FUZZ_COMMON_H
#define LINATTN_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "linattn/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* st, with the reason a failed call recorded (la_error) copied into buf ("" on success). */
static inline la_status why(la_status st, char *buf, size_t len) {
  snprintf(buf, len, "%s", st == LA_OK ? "" : la_error_message());
  return st;
}

/* A property of the code under test failed: a crash to libFuzzer, a failure to the replay. */
#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
      abort();                                                                   \
    }                                                                            \
  } while (0)

/* docs/cli.md "Errors": a reason is one non-empty line: no control characters (UTF-8 text,
 * such as the section sign of "docs/design.md §1.2", is allowed). */
static inline int fuzz_one_line(const char *s) {
  if (!s[0]) return 0;
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) return 0;
  return 1;
}

/* The input as a file that the readers open by path: one memfd per process, rewritten for
 * every input, opened again through /proc/self/fd (a temporary file where memfd is missing). */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
#ifdef MFD_CLOEXEC
    fd = memfd_create("linattn-fuzz", MFD_CLOEXEC);
#endif
    if (fd >= 0) {
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    } else {
      const char *dir = getenv("TMPDIR");
      snprintf(path, sizeof path, "%s/linattn-fuzz-XXXXXX", dir && *dir ? dir : "/tmp");
      if ((fd = mkstemp(path)) < 0) perror("fuzz_file: mkstemp"), abort();
      unlink(path); /* gone at exit; reopened through /proc/self/fd */
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
  }
  if (ftruncate(fd, 0) != 0) perror("fuzz_file: ftruncate"), abort();
  for (size_t done = 0; done < size;) {
    ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
    if (w <= 0) perror("fuzz_file: pwrite"), abort();
    done += (size_t)w;
  }
  return path;
}

#endif
