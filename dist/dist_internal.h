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

#endif
