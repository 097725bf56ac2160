/* The counter-based generator's mixing chain (docs/design.md §2.1), shared by core/random/rng.c and
 * the synthetic generator's kernel (synth_kernel.h), which inlines it into vector loops:
 * la_rng_u64(seed, a, b, c) = mix(mix(mix(mix(seed + C0) ^ (a + C1)) ^ (b + C2)) ^ (c + C3)),
 * and the second uniform of a draw x is mix(x ^ C4). */
#ifndef LINATTN_RNG_CHAIN_H
#define LINATTN_RNG_CHAIN_H
#include <stdint.h>

#define LA_RNG_C0 0x9e3779b97f4a7c15ULL
#define LA_RNG_C1 0x632be59bd9b4e019ULL
#define LA_RNG_C2 0x8cb92ba72f3d8dd7ULL
#define LA_RNG_C3 0xd6e8feb86659fd93ULL
#define LA_RNG_C4 0x5851f42d4c957f2dULL

/* The SplitMix64 finalizer. */
static inline __attribute__((always_inline)) uint64_t la_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

#endif
