/* Counter-based generator (docs/design.md §2): every draw is a pure function of
 * (seed, a, b, c), so results do not depend on rank or thread counts. The mixer is the
 * SplitMix64 finalizer applied along the key; normals come from Box-Muller. */
#include <math.h>
#include "linattn/core.h"
#include "la_core_private.h"
#include "rng_chain.h"

uint64_t la_rng_u64(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = la_mix64(seed + LA_RNG_C0);
  x = la_mix64(x ^ (a + LA_RNG_C1));
  x = la_mix64(x ^ (b + LA_RNG_C2));
  x = la_mix64(x ^ (c + LA_RNG_C3));
  return x;
}

/* Standard normal by Box-Muller from two 53-bit uniforms: u1 in (0, 1] from the draw x, u2 in
 * [0, 1) from a second mix of x. */
double la_rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = la_rng_u64(seed, a, b, c);
  uint64_t y = la_mix64(x ^ LA_RNG_C4);
  double u1 = ((double)(x >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
  double u2 = (double)(y >> 11) * 0x1.0p-53;         /* [0, 1) */
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
