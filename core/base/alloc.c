/* The allocation layer (la_alloc.h): every allocation of core/ and dist/, with the
 * fault injection of docs/design.md §6 "Out of memory" (LINATTN_FAIL_ALLOC=N makes the Nth
 * call fail), and the aligned row buffers.
 *
 * Aligned buffers for token rows (issue 6): rows of H*d elements start on a cache line when
 * the base does, so a head's d-element slice spans d*size/64 lines instead of one more.
 * Measured: 64-row chunks of q, k, v read from a 16-byte-offset malloc block took 290 ns per
 * token, from an aligned one 235 ns (causal elu1 kernel loop, N = 2^20, H = 4, d = 64). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>

#include "la_alloc.h"
#include "linattn/core.h"

#ifdef LA_FAULT_INJECTION
/* Set once, before main (la_alloc_env), and only read afterwards. */
static int la_fault_on;     /* counting at all: LINATTN_FAIL_ALLOC or LINATTN_COUNT_ALLOC set */
static long la_fail_at;     /* the call to fail, 1-based; 0: none in this process */
static int la_fault_rank;   /* this process's MPI rank, from the launcher's environment */
static atomic_long la_calls;

/* A positive decimal integer, or -1. */
static long env_long(const char *s) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return errno || *end || v < 0 ? -1 : v;
}

static void la_alloc_report(void) {
  fprintf(stderr, "linattn: allocations: %ld (rank %d)\n", la_alloc_count(), la_fault_rank);
}

__attribute__((constructor)) static void la_alloc_env(void) {
  const char *rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  la_fault_rank = 0;
  for (int i = 0; i < 4; i++) {
    long r = env_long(getenv(rank_vars[i]));
    if (r >= 0) {
      la_fault_rank = (int)r;
      break;
    }
  }
  const char *fail = getenv("LINATTN_FAIL_ALLOC"), *only = getenv("LINATTN_FAIL_ALLOC_RANK");
  const char *count = getenv("LINATTN_COUNT_ALLOC");
  if (fail && *fail) {
    long n = env_long(fail), r = only && *only ? env_long(only) : la_fault_rank;
    if (n < 1 || r < 0) /* a test that thinks it injects must not pass silently */
      fprintf(stderr, "linattn: warning: LINATTN_FAIL_ALLOC='%s' / LINATTN_FAIL_ALLOC_RANK='%s' "
              "ignored (want N >= 1, r >= 0)\n", fail, only ? only : "");
    else if (r == la_fault_rank)
      la_fail_at = n;
  }
  const int counting = count && *count && strcmp(count, "0") != 0;
  la_fault_on = la_fail_at > 0 || counting;
  if (counting) atexit(la_alloc_report);
}

/* 1 when this call is the one to fail. */
static inline int la_fault(void) {
  if (__builtin_expect(la_fault_on, 0)) {
    long k = atomic_fetch_add_explicit(&la_calls, 1, memory_order_relaxed) + 1;
    if (k == la_fail_at) {
      errno = ENOMEM;
      return 1;
    }
  }
  return 0;
}

long la_alloc_count(void) { return atomic_load_explicit(&la_calls, memory_order_relaxed); }
#else
static inline int la_fault(void) { return 0; }
long la_alloc_count(void) { return 0; }
#endif

/* Large buffers ask for transparent huge pages (Linux THP in "madvise" mode, the common
 * default): one fault per 2 MiB instead of per 4 KiB. First-touch page faults and page
 * clearing were 40 % of the samples of `linattn grad --n 524288 --heads 4 --threads 2` on this
 * project's virtual machine; with the advice its wall time fell from 14 s to 7 s. Only the
 * 2 MiB-aligned interior is advised; the advice is a hint, and its failure (no THP, another
 * OS) changes nothing. */
enum { LA_HUGE_MIN = 8 << 20, LA_HUGE = 2 << 20 };

static void *advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (p && bytes >= LA_HUGE_MIN) {
    uintptr_t a = ((uintptr_t)p + LA_HUGE - 1) & ~(uintptr_t)(LA_HUGE - 1);
    uintptr_t b = ((uintptr_t)p + bytes) & ~(uintptr_t)(LA_HUGE - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
  }
#else
  (void)bytes;
#endif
  return p;
}

void *la_malloc(size_t bytes) { return la_fault() ? NULL : advise_huge(malloc(bytes), bytes); }

void *la_calloc(size_t count, size_t size) {
  if (la_fault()) return NULL;
  void *p = calloc(count, size);
  return p ? advise_huge(p, count * size) : NULL; /* calloc checked count * size */
}

void *la_realloc(void *p, size_t bytes) { return la_fault() ? NULL : realloc(p, bytes); }

void *la_aligned_alloc(size_t align, size_t bytes) {
  void *p = NULL;
  if (la_fault()) return NULL;
  int rc = posix_memalign(&p, align, bytes ? bytes : align);
  if (rc != 0) {
    errno = rc;
    return NULL;
  }
  return advise_huge(p, bytes);
}

/* The memory stream: open_memstream's contract, with its growth through la_realloc, so that
 * the fault injection reaches the texts composed in memory (report, CSVs, report.md). A growth
 * that fails makes the write short, which sets the stream's error flag (glibc's fopencookie). */
typedef struct {
  char **text;
  size_t *len, cap;
} la_mstream;

static ssize_t mstream_write(void *cookie, const char *data, size_t size) {
  la_mstream *m = cookie;
  if (size >= m->cap - *m->len) {
    size_t cap = m->cap;
    while (size >= cap - *m->len) {
      if (cap > SIZE_MAX / 2) return 0;
      cap *= 2;
    }
    char *nb = la_realloc(*m->text, cap);
    if (!nb) return 0;
    *m->text = nb, m->cap = cap;
  }
  memcpy(*m->text + *m->len, data, size);
  *m->len += size;
  (*m->text)[*m->len] = 0;
  return (ssize_t)size;
}

static int mstream_close(void *cookie) {
  free(cookie);
  return 0;
}

FILE *la_open_memstream(char **text, size_t *len) {
  if (la_fault()) return NULL;
  la_mstream *m = malloc(sizeof *m);
  char *buf = malloc(256);
  FILE *f = m && buf ? fopencookie(m, "w", (cookie_io_functions_t){NULL, mstream_write, NULL, mstream_close})
                     : NULL;
  if (!f) {
    free(m), free(buf);
    return NULL;
  }
  buf[0] = 0;
  *text = buf, *len = 0;
  m->text = text, m->len = len, m->cap = 256;
  return f;
}

void *la_alloc_rows(size_t bytes) { return la_aligned_alloc(4096, bytes ? bytes : 1); }
