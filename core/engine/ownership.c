/* The ownership rules: which contiguous rows of a sequence each of P ranks owns
 * (docs/design.md §4.5, §4.7 for the reproducible grid). MPI-free, and kept apart from the
 * engine's geometry so that the SMPI smoke test (tests/smpi/smoke.sh) builds it alone. */
#include "linattn/core.h"
#include "la_core_private.h"

void la_split_ownership(int64_t N, int P, int rank, int64_t *n_local, int64_t *row0) {
  int64_t q = N / P, rem = N % P;
  *n_local = q + (rank < rem ? 1 : 0);
  *row0 = q * rank + (rank < rem ? rank : rem);
}

void la_split_ownership_grid(int64_t N, int P, int rank, int64_t G, int64_t *n_local,
                             int64_t *row0) {
  int64_t nb, b0;
  la_split_ownership((N + G - 1) / G, P, rank, &nb, &b0);
  *row0 = b0 * G < N ? b0 * G : N;
  *n_local = (b0 + nb) * G < N ? nb * G : N - *row0;
}

void la_engine_ownership(const la_engine eng, int64_t N, int P, int rank, int64_t *n_local,
                         int64_t *row0) {
  la_split_ownership_grid(N, P, rank, la_engine_reproducible(eng) ? la_engine_repro_block(eng) : 1,
                          n_local, row0);
}
