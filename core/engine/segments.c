/* Segment offsets (docs/design.md §3, docs/cli.md "Files"): the checks of a loaded --segments
 * array, without MPI, so that the reader can be tested and fuzzed on its own
 * (tests/fuzz/fuzz_segments.c). */
#include <stdio.h>
#include "linattn/core.h"

la_status la_segments_check(const int64_t *off, int64_t count, int64_t N) {
  LA_CHECK(count >= 2 && off, LA_ERR_FORMAT,
           "segment offsets must be a 1-D int64 (<i8) array [S+1] with S >= 1");
  LA_CHECK(off[0] == 0 && off[count - 1] == N, LA_ERR_FORMAT,
           "offsets must start at 0 and end at N = %lld (got %lld ... %lld)", (long long)N,
           (long long)off[0], (long long)off[count - 1]);
  for (int64_t i = 1; i < count; i++)
    LA_CHECK(off[i] > off[i - 1], LA_ERR_FORMAT,
             "offsets must increase strictly: o[%lld] = %lld after o[%lld] = %lld", (long long)i,
             (long long)off[i], (long long)(i - 1), (long long)off[i - 1]);
  return LA_OK;
}
