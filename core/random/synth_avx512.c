/* The generator's kernel (synth_kernel.h) built for AVX-512F/DQ/VL: 16 pairs per float vector, with
 * vpmullq for the 64-bit multiplies of the hash. Only synth.c's la_synth_rows calls it, and
 * only when la_synth_avx512_available(); -ffp-contract=off (core/CMakeLists.txt) keeps every
 * operation the rounded IEEE one, so it gives the generic build's bits. */
#include "synth_kernel.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define LA_SYNTH_SUFFIX avx512
#include "synth_kernel.h"
#else /* no AVX-512 at compile time: never selected; the generic code stands in */
void la_synth_rows_avx512(uint64_t seed, int tensor, int64_t token0, int64_t n, int heads,
                          int d, double scale, la_dtype dt, void *dst) {
  la_synth_rows_generic(seed, tensor, token0, n, heads, d, scale, dt, dst);
}
void la_synth_m2log_avx512(size_t n, const float *u, float *out) {
  la_synth_m2log_generic(n, u, out);
}
void la_synth_sincos_avx512(size_t n, const uint32_t *m, float *s, float *c) {
  la_synth_sincos_generic(n, m, s, c);
}
#endif
