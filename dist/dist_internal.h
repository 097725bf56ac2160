/* Private layout of la_dist (dist/ only). */
#ifndef LINATTN_DIST_INTERNAL_H
#define LINATTN_DIST_INTERNAL_H
#include "linattn/dist.h"

struct la_dist_s {
  MPI_Comm comm; /* duplicate of the caller's communicator */
  MPI_Comm rev;  /* the same ranks in reverse order (suffix scans) */
  int rank, size;
  int64_t bytes;
  double comm_seconds;
};

/* forward.c: the window's halo from the earlier ranks (keys). Collective. */
la_status la_window_fetch_past(la_dist d, la_engine eng, int64_t N, int64_t n, int64_t row0,
                               const void *k, const void *v, int64_t *lo, int64_t *hi,
                               char **hk, char **hv, la_state *mid);

#endif
