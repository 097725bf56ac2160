/* The generator's kernel (synth_kernel.h) built for AVX2 with FMA: 8 pairs per float vector,
 * for CPUs without AVX-512 (the 64-bit multiplies of the hash are emulated by the compiler,
 * and u1 is converted through the exact double). Only synth.c's la_synth_rows calls it, and
 * only when la_synth_avx2_available(); -ffp-contract=off (core/CMakeLists.txt) keeps every
 * operation the one the source names, so it gives the generic build's bits. */
#include "synth_kernel.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define LA_SYNTH_SUFFIX avx2
#include "synth_kernel.h"
#else /* no AVX2/FMA at compile time: never selected; the generic code stands in */
void la_synth_rows_avx2(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                        int d, double scale, la_dtype dt, void *dst) {
  la_synth_rows_generic(seed, tensor, token0, n, heads, d, scale, dt, dst);
}
void la_synth_m2log_avx2(size_t n, const float *u, float *out) { la_synth_m2log_generic(n, u, out); }
void la_synth_sincos_avx2(size_t n, const uint32_t *m, float *s, float *c) {
  la_synth_sincos_generic(n, m, s, c);
}
#endif
