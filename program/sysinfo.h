/* What the machine is and which BLAS kernels run on it (docs/design.md §4.9 "The BLAS core"):
 * recorded in the report and the bench CSV, and the one warning line of a mis-targeted BLAS.
 * Not Collective; no MPI. */
#ifndef LINATTN_SYSINFO_H
#define LINATTN_SYSINFO_H
#include <stddef.h>

typedef struct {
  char model[128];       /* /proc/cpuinfo "model name", or "unknown" */
  const char *isa;       /* the CPU's widest vector ISA: avx512f | avx2 | avx | sse4_2 | sse2 | other */
  const char *blas_core; /* openblas_get_corename(); NULL when the BLAS is not OpenBLAS */
  const char *blas_isa;  /* the ISA of that core's kernels; NULL when the name is not known */
} la_sysinfo;

void la_sysinfo_get(la_sysinfo *s);

/* The warning line's text (without the "linattn: warning: " prefix) when the CPU can run
 * wider kernels than the OpenBLAS core in use; NULL when it cannot, or when that is unknown. */
const char *la_sysinfo_blas_warning(const la_sysinfo *s, char *buf, size_t len);

/* Print that warning as one line on stderr, if there is one (rank 0, after a success: an
 * error's first line stays the error). */
void la_sysinfo_warn(const la_sysinfo *s);

#endif
