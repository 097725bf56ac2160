/* A cache of large output buffers for the Python binding (docs/design.md §5.4, docs/python.md
 * "Speed"). A training step allocates the same large outputs (out; dq, dk, dv) on every call.
 * glibc hands freed large allocations back to the kernel (it unmaps those above its mmap
 * threshold, at most 32 MiB, and trims the heap's top), so every call pays the kernel's zeroing
 * of every page before the engine writes it: a tenth to a fifth of forward plus backward at
 * L = 16384 to 65536 (docs/performance.md). Blocks returned here keep their pages: the next call
 * of the same size reuses them, as PyTorch's CUDA caching allocator does on the GPU.
 *
 * Blocks of 8 MiB or more are 2 MiB-aligned, a multiple of 2 MiB, advised huge pages; smaller
 * ones a multiple of 64 KiB, page-aligned. A freed block is kept while the cache holds at most
 * `cap` bytes (LINATTN_POOL_MB, default 1024; 0 disables the cache), oldest freed first out.
 * Thread-safe. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "binding.h"

#define HUGE_BYTES ((int64_t)2 << 20)
#define HUGE_FROM ((int64_t)8 << 20) /* blocks this large get huge pages */
#define SMALL_ROUND ((int64_t)64 << 10)

typedef struct block {
  void *p;
  int64_t bytes;
  struct block *next;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *live;      /* handed out */
static block *idle;      /* cached, most recently freed first */
static int64_t idle_bytes;
static int64_t cap = -1; /* -1: not read from the environment yet */

static int64_t cap_bytes(void) {
  if (cap < 0) {
    const char *s = getenv("LINATTN_POOL_MB");
    char *end = NULL;
    long long mb = s && *s ? strtoll(s, &end, 10) : 1024;
    if (s && *s && (*end || mb < 0)) mb = 1024; /* the package checks the spelling */
    cap = (int64_t)mb << 20;
  }
  return cap;
}

/* Free idle blocks, oldest first, until the cache holds at most keep bytes. mu held. */
static void trim(int64_t keep) {
  while (idle_bytes > keep && idle) {
    block **pp = &idle;
    while ((*pp)->next) pp = &(*pp)->next; /* the oldest is last */
    block *b = *pp;
    *pp = NULL;
    idle_bytes -= b->bytes;
    free(b->p);
    free(b);
  }
}

void *la_py_pool_get(int64_t bytes) {
  if (bytes <= 0) return NULL;
  const int64_t round = bytes >= HUGE_FROM ? HUGE_BYTES : SMALL_ROUND,
                size = (bytes + round - 1) / round * round,
                align = bytes >= HUGE_FROM ? HUGE_BYTES : 4096;
  pthread_mutex_lock(&mu);
  block *b = NULL;
  for (block **pp = &idle; *pp; pp = &(*pp)->next)
    if ((*pp)->bytes == size) {
      b = *pp;
      *pp = b->next;
      idle_bytes -= size;
      break;
    }
  if (!b) {
    void *p = NULL;
    b = malloc(sizeof *b);
    if (b && posix_memalign(&p, (size_t)align, (size_t)size) != 0) {
      trim(0); /* memory is short: give the cache back and try once more */
      if (posix_memalign(&p, (size_t)align, (size_t)size) != 0) p = NULL;
    }
    if (!p) {
      free(b);
      pthread_mutex_unlock(&mu);
      return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align == HUGE_BYTES) (void)madvise(p, (size_t)size, MADV_HUGEPAGE); /* a hint only */
#endif
    b->p = p;
    b->bytes = size;
  }
  b->next = live;
  live = b;
  pthread_mutex_unlock(&mu);
  return b->p;
}

int la_py_pool_put(void *p) {
  pthread_mutex_lock(&mu);
  block *b = NULL;
  for (block **pp = &live; *pp; pp = &(*pp)->next)
    if ((*pp)->p == p) {
      b = *pp;
      *pp = b->next;
      break;
    }
  if (b) {
    b->next = idle;
    idle = b;
    idle_bytes += b->bytes;
    trim(cap_bytes());
  }
  pthread_mutex_unlock(&mu);
  return b ? 0 : -1; /* -1: not a block of this pool (a caller's bug) */
}

void la_py_pool_release(void) {
  pthread_mutex_lock(&mu);
  trim(0);
  pthread_mutex_unlock(&mu);
}

void la_py_pool_usage(int64_t *live_bytes, int64_t *idle_bytes_out, int64_t *cap_out) {
  pthread_mutex_lock(&mu);
  int64_t n = 0;
  for (const block *b = live; b; b = b->next) n += b->bytes;
  *live_bytes = n;
  *idle_bytes_out = idle_bytes;
  *cap_out = cap_bytes();
  pthread_mutex_unlock(&mu);
}
