/* Basic public types. */
#ifndef LINATTN_TYPES_H
#define LINATTN_TYPES_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LA_F32 = 0, LA_F64 = 1, LA_I64 = 2 } la_dtype;

/* Size in bytes of one element of dtype t. */
size_t la_dtype_size(la_dtype t);
const char *la_dtype_name(la_dtype t); /* "f32", "f64", "i64" */
/* A buffer for [n, H, d] token rows, aligned to 4096 bytes (cache lines and pages), so that
 * each head's slice of a row starts on a cache line; release it with free(). NULL if out of
 * memory. */
void *la_alloc_rows(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
