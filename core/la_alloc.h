/* The allocation layer (docs/design.md §5.3 "Allocation", §6 "Out of memory"). Every
 * allocation of core/ and dist/ goes through these functions, so that a test can make any one
 * of them fail: with LINATTN_FAIL_ALLOC=N in the environment the Nth call of the process
 * (1-based, all functions and threads together) returns NULL with errno ENOMEM;
 * LINATTN_FAIL_ALLOC_RANK=r limits that to the process of MPI rank r (read from
 * OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID; 0 when none is set), and
 * LINATTN_COUNT_ALLOC=1 prints "linattn: allocations: K (rank r)" to stderr at exit. The
 * variables are read once, before main. Built without LINATTN_FAULT_INJECTION (CMake option,
 * ON by default) they are ignored; otherwise the cost is one predictable branch per call.
 * Private to the project: core/ and dist/ include it (dist/ has core/ on its private include
 * path for this header only). Everything is released with free(). Not Collective; thread-safe. */
#ifndef LINATTN_LA_ALLOC_H
#define LINATTN_LA_ALLOC_H
#include <stddef.h>
#include <stdio.h>

void *la_malloc(size_t bytes);
void *la_calloc(size_t count, size_t size);
/* On failure p is left as it was. */
void *la_realloc(void *p, size_t bytes);
/* posix_memalign: align is a power of two and a multiple of sizeof(void *); bytes 0 gives a
 * block of align bytes (never NULL for success). */
void *la_aligned_alloc(size_t align, size_t bytes);
/* open_memstream's contract (*text NUL-terminated, *text and *len current after fflush, the
 * text free()d by the caller after fclose), counted as one allocation, and its growth goes
 * through la_realloc: a growth that fails sets the stream's error flag, so a composer checks
 * ferror before fclose (a fclose after a failed write may still return 0). */
FILE *la_open_memstream(char **text, size_t *len);
/* Calls of the functions above so far in this process (0 unless LINATTN_FAIL_ALLOC or
 * LINATTN_COUNT_ALLOC is set: only then are they counted). */
long la_alloc_count(void);

#endif
