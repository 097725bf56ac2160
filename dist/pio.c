/* Parallel .npy I/O: each rank reads and writes only its own contiguous rows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pio.h"

#define LA_IO_PIECE ((int64_t)1 << 28) /* bytes per MPI call, well under INT_MAX */

int la_path_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

la_status la_pin_open(la_dist d, const char *path, la_pin *in, char *err, size_t errlen) {
  memset(in, 0, sizeof *in);
  in->fh = MPI_FILE_NULL;
  in->path = path;
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) st = la_npy_read_info(path, &in->info, err, errlen);
  st = la_dist_agree(d, st, err, errlen);
  if (st != LA_OK) return st;
  MPI_Bcast(&in->info, (int)sizeof in->info, MPI_BYTE, 0, la_dist_comm(d));
  if (in->info.dtype == LA_I64 && in->info.ndim != 1) {
    snprintf(err, errlen, "%s: int64 arrays are only accepted as 1-D offsets", path);
    return LA_ERR_FORMAT;
  }
  in->row_elems = 1;
  for (int i = 1; i < in->info.ndim; i++) in->row_elems *= in->info.shape[i];
  int rc = MPI_File_open(la_dist_comm(d), path, MPI_MODE_RDONLY, MPI_INFO_NULL, &in->fh);
  st = rc == MPI_SUCCESS ? LA_OK : LA_ERR_IO;
  if (st != LA_OK) snprintf(err, errlen, "%s: MPI_File_open failed", path);
  return la_dist_agree(d, st, err, errlen);
}

static void convert(la_dtype from, la_dtype to, const void *src, void *dst, int64_t n) {
  if (from == to) {
    memmove(dst, src, (size_t)n * la_dtype_size(to));
  } else if (from == LA_F64 && to == LA_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const double *)src)[i];
  } else { /* f32 -> f64, backwards so src and dst may share a buffer */
    for (int64_t i = n - 1; i >= 0; i--) ((double *)dst)[i] = (double)((const float *)src)[i];
  }
}

la_status la_pin_read(la_pin *in, int64_t row0, int64_t n, la_dtype want, void *dst, char *err,
                      size_t errlen) {
  if (n == 0) return LA_OK;
  size_t fes = la_dtype_size(in->info.dtype);
  int64_t elems = n * in->row_elems, bytes = elems * (int64_t)fes;
  /* Read into dst when it is large enough, else a temporary. */
  int direct = la_dtype_size(want) >= fes;
  char *buf = direct ? dst : malloc((size_t)bytes);
  if (!buf) return LA_ERR_NOMEM;
  MPI_Offset off = in->info.data_offset + row0 * in->row_elems * (int64_t)fes;
  for (int64_t done = 0; done < bytes;) {
    int64_t piece = bytes - done < LA_IO_PIECE ? bytes - done : LA_IO_PIECE;
    MPI_Status ms;
    int got = 0;
    if (MPI_File_read_at(in->fh, off + done, buf + done, (int)piece, MPI_BYTE, &ms) != MPI_SUCCESS ||
        MPI_Get_count(&ms, MPI_BYTE, &got) != MPI_SUCCESS || got != piece) {
      snprintf(err, errlen, "%s: read failed at rows %lld..%lld", in->path, (long long)row0,
               (long long)(row0 + n - 1));
      if (!direct) free(buf);
      return LA_ERR_IO;
    }
    done += piece;
  }
  convert(in->info.dtype, want, buf, dst, elems);
  if (!direct) free(buf);
  return LA_OK;
}

void la_pin_close(la_pin *in) {
  if (in->fh != MPI_FILE_NULL) MPI_File_close(&in->fh);
  in->fh = MPI_FILE_NULL;
}

la_status la_pout_open(la_dist d, const char *path, la_dtype dt, int ndim, const int64_t *shape,
                       int force, la_pout *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->fh = MPI_FILE_NULL;
  out->dtype = dt;
  snprintf(out->path, sizeof out->path, "%s", path);
  unsigned char hdr[LA_NPY_HEADER_MAX];
  size_t hlen = 0;
  la_status st = LA_OK;
  long pid = (long)getpid();
  if (la_dist_rank(d) == 0) {
    if (!force && la_path_exists(path)) {
      snprintf(err, errlen, "%s: exists (use --force to overwrite)", path);
      st = LA_ERR_EXISTS;
    } else {
      st = la_npy_format_header(dt, ndim, shape, hdr, &hlen);
      if (st != LA_OK) snprintf(err, errlen, "%s: cannot format the .npy header", path);
    }
  }
  st = la_dist_agree(d, st, err, errlen);
  if (st != LA_OK) return st;
  MPI_Bcast(&pid, 1, MPI_LONG, 0, la_dist_comm(d));
  int64_t hl = (int64_t)hlen;
  MPI_Bcast(&hl, 1, MPI_INT64_T, 0, la_dist_comm(d));
  snprintf(out->tmp, sizeof out->tmp, "%s.tmp.%ld", path, pid);
  out->data_offset = hl;
  out->row_bytes = (int64_t)la_dtype_size(dt);
  for (int i = 1; i < ndim; i++) out->row_bytes *= shape[i];
  if (la_dist_rank(d) == 0) unlink(out->tmp); /* stale temporary of a dead run with our pid */
  MPI_Barrier(la_dist_comm(d));
  int rc = MPI_File_open(la_dist_comm(d), out->tmp, MPI_MODE_CREATE | MPI_MODE_WRONLY,
                         MPI_INFO_NULL, &out->fh);
  if (rc != MPI_SUCCESS) {
    snprintf(err, errlen, "%s: cannot create the temporary output %s", path, out->tmp);
    st = LA_ERR_IO;
  }
  st = la_dist_agree(d, st, err, errlen);
  if (st != LA_OK) return st;
  out->open = 1;
  if (la_dist_rank(d) == 0) {
    MPI_Status ms;
    if (MPI_File_write_at(out->fh, 0, hdr, (int)hlen, MPI_BYTE, &ms) != MPI_SUCCESS) {
      snprintf(err, errlen, "%s: cannot write the header", out->tmp);
      st = LA_ERR_IO;
    }
  }
  st = la_dist_agree(d, st, err, errlen);
  if (st != LA_OK) la_pout_close(d, out, 0, NULL, 0);
  return st;
}

la_status la_pout_write(la_pout *out, int64_t row0, int64_t n, const void *src, char *err,
                        size_t errlen) {
  int64_t bytes = n * out->row_bytes;
  MPI_Offset off = out->data_offset + row0 * out->row_bytes;
  for (int64_t done = 0; done < bytes;) {
    int64_t piece = bytes - done < LA_IO_PIECE ? bytes - done : LA_IO_PIECE;
    MPI_Status ms;
    if (MPI_File_write_at(out->fh, off + done, (const char *)src + done, (int)piece, MPI_BYTE,
                          &ms) != MPI_SUCCESS) {
      snprintf(err, errlen, "%s: write failed (disk full?)", out->tmp);
      return LA_ERR_IO;
    }
    done += piece;
  }
  return LA_OK;
}

la_status la_pout_close(la_dist d, la_pout *out, int ok, char *err, size_t errlen) {
  if (!out->open) return LA_OK;
  la_status st = LA_OK;
  if (ok && MPI_File_sync(out->fh) != MPI_SUCCESS) {
    snprintf(err, errlen, "%s: sync failed", out->tmp);
    st = LA_ERR_IO;
  }
  MPI_File_close(&out->fh);
  out->open = 0;
  if (!ok) { /* the caller already holds the error: just remove the temporary */
    if (la_dist_rank(d) == 0) unlink(out->tmp);
    MPI_Barrier(la_dist_comm(d));
    return LA_OK;
  }
  st = la_dist_agree(d, st, err, errlen);
  if (la_dist_rank(d) == 0) {
    if (st == LA_OK && rename(out->tmp, out->path) != 0) {
      snprintf(err, errlen, "%s: rename failed: %s", out->path, strerror(errno));
      st = LA_ERR_IO;
    }
    if (st != LA_OK) unlink(out->tmp);
  }
  return la_dist_agree(d, st, err, errlen);
}
