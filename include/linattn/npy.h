/* NumPy .npy reading and writing (format versions 1.0, 2.0, 3.0).
 * Accepted: little-endian '<f4', '<f8', '<i8', C order. Everything else is LA_ERR_FORMAT
 * with a message naming the file and the fault. Every failure records its one-line reason
 * (la_error_reason, docs/design.md §6 "Errors"). All functions are Not Collective. */
#ifndef LINATTN_NPY_H
#define LINATTN_NPY_H
#include <stdint.h>
#include <stddef.h>
#include "linattn/status.h"
#include "linattn/types.h"
#ifdef __cplusplus
extern "C" {
#endif

#define LA_NPY_MAX_DIM 8

typedef struct {
  int version_major;              /* 1, 2 or 3 */
  la_dtype dtype;                 /* LA_F32, LA_F64 or LA_I64 */
  int ndim;                       /* 0..LA_NPY_MAX_DIM */
  int64_t shape[LA_NPY_MAX_DIM];  /* each >= 0; product checked for overflow */
  int64_t count;                  /* product of shape (1 for ndim 0) */
  int64_t data_offset;            /* byte offset of the payload in the file */
} la_npy_info;

/* Parse a header from the first len bytes of a file (len may exceed the header).
 * Returns LA_ERR_FORMAT with its reason when malformed, including when the header extends
 * past len ("header past end of file"). */
la_status la_npy_parse_header(const unsigned char *buf, size_t len, la_npy_info *info);

/* Open path, parse the header, and check that the file holds the whole payload
 * (truncated payload is LA_ERR_FORMAT). Messages start with the path. A file that cannot be
 * opened is LA_ERR_IO; a read() that fails once it is open is LA_ERR_READ. */
la_status la_npy_read_info(const char *path, la_npy_info *info);

/* Read rows [row0, row0+nrows) of the leading dimension into dst (C order, the file's dtype).
 * row_elems = product of shape[1..]. */
la_status la_npy_read_rows(const char *path, const la_npy_info *info, int64_t row0,
                           int64_t nrows, void *dst);

/* Read the whole array: allocates *data (free() it). */
la_status la_npy_load(const char *path, la_npy_info *info, void **data);

/* Format a version 1.0 header (2.0 if it does not fit in 65535 bytes), padded with spaces
 * and a newline so that the total is a multiple of 64. Returns the header length in *hlen.
 * buf must hold at least LA_NPY_HEADER_MAX bytes. */
#define LA_NPY_HEADER_MAX 4096
la_status la_npy_format_header(la_dtype dtype, int ndim, const int64_t *shape,
                               unsigned char *buf, size_t *hlen);

/* Write a whole array atomically: to "<path>.tmp.<pid>", fsync, then rename to path
 * (la_write_file). If path exists and force == 0: LA_ERR_EXISTS, nothing written. A failed
 * write is "path: cannot write: <reason>", LA_ERR_WRITE (disk full) or LA_ERR_IO (the path
 * is at fault); the temporary is removed. */
la_status la_npy_save(const char *path, la_dtype dtype, int ndim, const int64_t *shape,
                      const void *data, int force);

#ifdef __cplusplus
}
#endif
#endif
