/* Counter-based generator (docs/design.md §2): every draw is a pure function of
 * (seed, a, b, c), so results do not depend on rank or thread counts. The mixer is the
 * SplitMix64 finalizer applied along the key; normals come from Box-Muller. */
#include <math.h>
#include "linattn/core.h"

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t la_rng_u64(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = mix64(seed + 0x9e3779b97f4a7c15ULL);
  x = mix64(x ^ (a + 0x632be59bd9b4e019ULL));
  x = mix64(x ^ (b + 0x8cb92ba72f3d8dd7ULL));
  x = mix64(x ^ (c + 0xd6e8feb86659fd93ULL));
  return x;
}

/* Two uniforms from one draw: u1 in (0, 1], u2 in [0, 1) (for Box-Muller). */
void la_rng_uniform2(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, double *u1, double *u2) {
  uint64_t x = la_rng_u64(seed, a, b, c);
  uint64_t y = mix64(x ^ 0x5851f42d4c957f2dULL);
  *u1 = ((double)(x >> 11) + 1.0) * 0x1.0p-53;
  *u2 = (double)(y >> 11) * 0x1.0p-53;
}

/* Standard normal; uses the two 32-bit halves of one draw: u1 in (0,1], u2 in [0,1). */
double la_rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = la_rng_u64(seed, a, b, c);
  uint64_t y = mix64(x ^ 0x5851f42d4c957f2dULL);
  double u1 = ((double)(x >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
  double u2 = (double)(y >> 11) * 0x1.0p-53;         /* [0, 1) */
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
