/* Parallel .npy I/O with MPI-IO (docs/cli.md "Files").
 * All functions are Collective on the la_dist communicator unless noted. */
#ifndef LINATTN_PIO_H
#define LINATTN_PIO_H
#include "linattn/dist.h"
#include "linattn/npy.h"

typedef struct {
  MPI_File fh;
  la_npy_info info;
  const char *path;
  int64_t row_elems; /* product of shape[1..] */
} la_pin;

typedef struct {
  MPI_File fh;
  char path[4096], tmp[4096];
  la_dtype dtype;
  int64_t row_bytes, data_offset;
  int open;
} la_pout;

/* Rank 0 parses and checks the header (la_npy_read_info); all ranks open the file. */
la_status la_pin_open(la_dist d, const char *path, la_pin *in, char *err, size_t errlen);
/* Not Collective: read rows [row0, row0+n) converted to dtype want into dst. */
la_status la_pin_read(la_pin *in, int64_t row0, int64_t n, la_dtype want, void *dst,
                      char *err, size_t errlen);
void la_pin_close(la_pin *in);

/* Refuses an existing path without force; creates "<path>.tmp.<pid of rank 0>". */
la_status la_pout_open(la_dist d, const char *path, la_dtype dt, int ndim, const int64_t *shape,
                       int force, la_pout *out, char *err, size_t errlen);
/* Not Collective: write rows [row0, row0+n). */
la_status la_pout_write(la_pout *out, int64_t row0, int64_t n, const void *src, char *err,
                        size_t errlen);
/* ok != 0 on every rank: close and rename into place; otherwise remove the temporary. */
la_status la_pout_close(la_dist d, la_pout *out, int ok, char *err, size_t errlen);

/* Not Collective: 1 if path exists. */
int la_path_exists(const char *path);

#endif
