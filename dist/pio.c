/* Parallel .npy I/O: each rank reads and writes only its own contiguous rows. Every MPI-IO
 * call's return code and byte count are checked (docs/design.md §6). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "la_alloc.h"
#include "pio.h"

#define LA_IO_PIECE ((int64_t)1 << 28) /* bytes per MPI call, well under INT_MAX */

int la_path_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Open MPI 4.1's MPI-IO (OMPIO) reports a failed pwrite or pread itself: its posix fbtl prints
 * "mca_fbtl_posix_pwritev: error in (p)write(v):No space left on device" with opal_output on
 * its stderr stream, whatever the file's error handler, and common_ompio_file_write then
 * drops that error: MPI_File_write_at returns MPI_SUCCESS with a short count in the status.
 * So the count is checked after every call, and for the duration of each MPI-IO call that
 * can fail this way stderr (fd 2) points at /dev/null, so that the one line of docs/cli.md
 * "Errors" is the only one. The main thread makes every MPI call outside parallel regions,
 * so nothing else of ours prints meanwhile. */
static int quiet_begin(void) {
  static int devnull = -1;
  if (devnull < 0) devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) return -1;
  fflush(stderr);
  int saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (saved < 0) return -1;
  if (dup2(devnull, 2) < 0) {
    close(saved);
    return -1;
  }
  return saved;
}

static void quiet_end(int saved) {
  if (saved < 0) return;
  dup2(saved, 2);
  close(saved);
}

/* errno of an MPI error class, 0 if none fits. */
static int class_errno(int rc) {
  int cls = MPI_ERR_OTHER;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_NO_SPACE) return ENOSPC;
  if (cls == MPI_ERR_QUOTA) return EDQUOT;
  if (cls == MPI_ERR_ACCESS) return EACCES;
  if (cls == MPI_ERR_READ_ONLY) return EROFS;
  if (cls == MPI_ERR_NO_SUCH_FILE) return ENOENT;
  if (cls == MPI_ERR_FILE_EXISTS) return EEXIST;
  if (cls == MPI_ERR_IO) return EIO;
  return 0;
}

/* The reason of a failed MPI-IO call, as the OS would say it: from the error class when it
 * names one, else the errno the call left (OMPIO keeps the errno of the failed pwrite/pread),
 * else the MPI error string. *e is the errno used (0: none). */
static const char *io_reason(int rc, int saved_errno, char *buf, size_t len, int *e) {
  *e = rc != MPI_SUCCESS ? class_errno(rc) : 0;
  if (!*e) *e = saved_errno;
  if (*e) return strerror(*e);
  if (rc != MPI_SUCCESS) {
    int n = 0;
    char s[MPI_MAX_ERROR_STRING];
    if (MPI_Error_string(rc, s, &n) == MPI_SUCCESS) {
      snprintf(buf, len, "%s", s);
      return buf;
    }
  }
  snprintf(buf, len, "the MPI library reported no reason");
  return buf;
}

/* When an MPI-IO call came up short without an error code or errno (OMPIO 4.1 loses both),
 * ask the OS: repeat the first bytes that were not transferred with pread/pwrite on a file
 * descriptor of our own and return its errno (0 if that succeeded). On a write path this
 * writes bytes MPI-IO failed to write into a temporary that is about to be removed. */
static int os_errno(const char *path, int writing, MPI_Offset off, const void *buf, int64_t n) {
  size_t len = n > (1 << 16) ? (size_t)1 << 16 : (size_t)(n > 0 ? n : 1);
  int fd = open(path, (writing ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t r;
  do {
    r = writing ? pwrite(fd, buf, len, (off_t)off) : pread(fd, (void *)buf, len, (off_t)off);
  } while (r < 0 && errno == EINTR);
  int e = r < 0 ? errno : 0;
  close(fd);
  return e;
}

la_status la_pin_open(la_dist d, const char *path, la_pin *in) {
  memset(in, 0, sizeof *in);
  in->fh = MPI_FILE_NULL;
  in->path = path;
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) st = la_npy_read_info(path, &in->info);
  LA_TRY(la_dist_agree(d, st));
  MPI_Bcast(&in->info, (int)sizeof in->info, MPI_BYTE, 0, la_dist_comm(d));
  /* the same decision on every rank: the header was broadcast */
  LA_CHECK(in->info.dtype != LA_I64 || in->info.ndim == 1, LA_ERR_FORMAT,
           "%s: int64 arrays are only accepted as 1-D offsets", path);
  in->row_elems = 1;
  for (int i = 1; i < in->info.ndim; i++) in->row_elems *= in->info.shape[i];
  int q = quiet_begin();
  errno = 0;
  int rc = MPI_File_open(la_dist_comm(d), path, MPI_MODE_RDONLY, MPI_INFO_NULL, &in->fh);
  int se = errno;
  quiet_end(q);
  if (rc != MPI_SUCCESS) {
    char why[MPI_MAX_ERROR_STRING + 64];
    int e;
    st = la_error(LA_ERR_IO, "%s: cannot open: %s", path, io_reason(rc, se, why, sizeof why, &e));
    in->fh = MPI_FILE_NULL;
  } else {
    MPI_File_set_errhandler(in->fh, MPI_ERRORS_RETURN);
  }
  return la_dist_agree(d, st);
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

la_status la_pin_read(la_pin *in, int64_t row0, int64_t n, la_dtype want, void *dst) {
  if (n == 0) return LA_OK;
  size_t fes = la_dtype_size(in->info.dtype);
  int64_t elems = n * in->row_elems, bytes = elems * (int64_t)fes;
  /* Read into dst when it is large enough, else a temporary. */
  int direct = la_dtype_size(want) >= fes;
  char *buf = direct ? dst : la_malloc((size_t)bytes);
  LA_CHECK(buf, LA_ERR_NOMEM, "%s: out of memory for a conversion buffer of %lld bytes (lower "
           "--block-tokens)", in->path, (long long)bytes);
  MPI_Offset off = in->info.data_offset + row0 * in->row_elems * (int64_t)fes;
  la_status st = LA_OK;
  for (int64_t done = 0; done < bytes;) {
    int64_t piece = bytes - done < LA_IO_PIECE ? bytes - done : LA_IO_PIECE;
    MPI_Status ms;
    int got = 0;
    int q = quiet_begin();
    errno = 0;
    int rc = MPI_File_read_at(in->fh, off + done, buf + done, (int)piece, MPI_BYTE, &ms);
    int se = errno;
    quiet_end(q);
    if (rc == MPI_SUCCESS && (MPI_Get_count(&ms, MPI_BYTE, &got) != MPI_SUCCESS ||
                              got == MPI_UNDEFINED))
      got = 0;
    if (rc == MPI_SUCCESS && got == piece) {
      done += piece;
      continue;
    }
    /* A short read: the file ends before these rows (it shrank after rank 0 checked its
     * header: bad input, exit 2), or the read itself failed (exit 1). */
    MPI_Offset size = -1;
    int q2 = quiet_begin();
    int src = MPI_File_get_size(in->fh, &size);
    quiet_end(q2);
    if (src == MPI_SUCCESS && size < off + bytes) {
      st = la_error(LA_ERR_FORMAT,
                    "%s: truncated payload: rows %lld..%lld end at byte %lld, the file now has %lld "
                    "(it changed after its header was checked)",
                    in->path, (long long)row0, (long long)(row0 + n - 1), (long long)(off + bytes),
                    (long long)size);
    } else {
      char why[MPI_MAX_ERROR_STRING + 64];
      int e, at = got > 0 && got < piece ? got : 0;
      if (rc == MPI_SUCCESS && !se) se = os_errno(in->path, 0, off + done + at, buf + done + at, piece - at);
      const char *r = io_reason(rc, se, why, sizeof why, &e);
      if (!e && rc == MPI_SUCCESS)
        snprintf(why, sizeof why, "read %d of %lld bytes", got, (long long)piece), r = why;
      st = la_error(LA_ERR_READ, "%s: cannot read rows %lld..%lld: %s", in->path, (long long)row0,
                    (long long)(row0 + n - 1), r);
    }
    break;
  }
  if (st == LA_OK) convert(in->info.dtype, want, buf, dst, elems);
  if (!direct) free(buf);
  return st;
}

void la_pin_close(la_pin *in) {
  if (in->fh != MPI_FILE_NULL) MPI_File_close(&in->fh); /* read-only: nothing to lose */
  in->fh = MPI_FILE_NULL;
}

/* "path: cannot write: reason" for a failed or short MPI-IO write. */
static la_status write_error(const la_pout *out, int rc, int se, int got, int64_t want) {
  char why[MPI_MAX_ERROR_STRING + 64];
  int e;
  const char *r = io_reason(rc, se, why, sizeof why, &e);
  if (!e && rc == MPI_SUCCESS)
    snprintf(why, sizeof why, "wrote %d of %lld bytes", got, (long long)want), r = why;
  return la_error(e ? la_write_status(e) : LA_ERR_WRITE, "%s: cannot write: %s", out->path, r);
}

/* One checked MPI_File_write_at: the return code and the count written. */
static la_status write_at(la_pout *out, MPI_Offset off, const void *src, int64_t bytes) {
  MPI_Status ms;
  int got = 0;
  int q = quiet_begin();
  errno = 0;
  int rc = MPI_File_write_at(out->fh, off, src, (int)bytes, MPI_BYTE, &ms);
  int se = errno;
  quiet_end(q);
  if (rc == MPI_SUCCESS &&
      (MPI_Get_count(&ms, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED))
    got = -1;
  if (rc == MPI_SUCCESS && got == bytes) return LA_OK;
  if (rc == MPI_SUCCESS && !se) {
    int at = got > 0 ? got : 0;
    se = os_errno(out->tmp, 1, off + at, (const char *)src + at, bytes - at);
  }
  return write_error(out, rc, se, got, bytes);
}

/* la_pout_open, or with partial != NULL the checkpoint's partial output under that name
 * (la_pout_open_partial). */
static la_status pout_open(la_dist d, const char *path, const char *partial, int resume,
                           la_dtype dt, int ndim, const int64_t *shape, int force, la_pout *out) {
  memset(out, 0, sizeof *out);
  out->fh = MPI_FILE_NULL;
  out->dtype = dt;
  snprintf(out->path, sizeof out->path, "%s", path);
  unsigned char hdr[LA_NPY_HEADER_MAX];
  size_t hlen = 0;
  la_status st = LA_OK;
  long pid = (long)getpid();
  const int rank = la_dist_rank(d);
  if (rank == 0) {
    if (!force && la_path_exists(path)) {
      st = la_error(LA_ERR_EXISTS, "%s: exists (use --force to overwrite)", path);
    } else {
      st = la_npy_format_header(dt, ndim, shape, hdr, &hlen);
      if (st != LA_OK) la_error(st, "%s: cannot format the .npy header", path);
    }
  }
  LA_TRY(la_dist_agree(d, st));
  MPI_Bcast(&pid, 1, MPI_LONG, 0, la_dist_comm(d));
  int64_t hl = (int64_t)hlen;
  MPI_Bcast(&hl, 1, MPI_INT64_T, 0, la_dist_comm(d));
  if (partial) {
    snprintf(out->tmp, sizeof out->tmp, "%s", partial);
    out->keep = 1;
  } else {
    la_tmp_name(path, pid, out->tmp, sizeof out->tmp);
  }
  out->data_offset = hl;
  out->row_bytes = (int64_t)la_dtype_size(dt);
  for (int i = 1; i < ndim; i++) out->row_bytes *= shape[i];
  /* temporaries of dead runs of this output, including one with our pid (docs/cli.md "Files") */
  if (rank == 0) la_tmp_sweep(path);
  if (resume && rank == 0) { /* the partial output must be this run's: same .npy header */
    unsigned char have[LA_NPY_HEADER_MAX];
    FILE *f = fopen(out->tmp, "rb");
    size_t got = f ? fread(have, 1, hlen, f) : 0;
    if (!f)
      st = la_error(LA_ERR_IO, "%s: the checkpoint's partial output %s cannot be opened: %s", path,
                    out->tmp, strerror(errno));
    else if (got != hlen || memcmp(have, hdr, hlen) != 0)
      st = la_error(LA_ERR_FORMAT, "%s: the checkpoint's partial output %s has another .npy header",
                    path, out->tmp);
    if (f) fclose(f);
  }
  LA_TRY(la_dist_agree(d, st));
  MPI_Barrier(la_dist_comm(d));
  int q = quiet_begin();
  errno = 0;
  int rc = MPI_File_open(la_dist_comm(d), out->tmp,
                         resume ? MPI_MODE_WRONLY : MPI_MODE_CREATE | MPI_MODE_WRONLY,
                         MPI_INFO_NULL, &out->fh);
  int se = errno;
  quiet_end(q);
  if (rc != MPI_SUCCESS) {
    char why[MPI_MAX_ERROR_STRING + 64];
    int e;
    const char *r = io_reason(rc, se, why, sizeof why, &e);
    st = la_error(e ? la_write_status(e) : LA_ERR_WRITE, "%s: cannot create the temporary output %s: %s",
                  path, out->tmp, r);
    out->fh = MPI_FILE_NULL;
  }
  /* Open on every rank, or on none: a rank whose open succeeded while another's failed
   * keeps its handle (closing it is collective and could wait for the failed ranks); the
   * process ends soon after, and rank 0 removes the file. */
  int opened = rc == MPI_SUCCESS, all = 0;
  MPI_Allreduce(&opened, &all, 1, MPI_INT, MPI_MIN, la_dist_comm(d));
  st = la_dist_agree(d, st);
  if (st != LA_OK || !all) {
    if (st == LA_OK)
      st = la_error(LA_ERR_MPI, "%s: MPI_File_open of the temporary output failed on some rank", path);
    if (rank == 0 && !resume) unlink(out->tmp);
    return st;
  }
  MPI_File_set_errhandler(out->fh, MPI_ERRORS_RETURN);
  out->open = 1;
  if (rank == 0 && !resume) st = write_at(out, 0, hdr, (int64_t)hlen);
  st = la_dist_agree(d, st);
  if (st != LA_OK) la_pout_close(d, out, 0); /* ok = 0: no agreement, the reason stays */
  return st;
}

la_status la_pout_open(la_dist d, const char *path, la_dtype dt, int ndim, const int64_t *shape,
                       int force, la_pout *out) {
  return pout_open(d, path, NULL, 0, dt, ndim, shape, force, out);
}

la_status la_pout_open_partial(la_dist d, const char *path, const char *partial, int resume,
                               la_dtype dt, int ndim, const int64_t *shape, int force,
                               la_pout *out) {
  return pout_open(d, path, partial, resume, dt, ndim, shape, force, out);
}

/* MPI_File_sync of the open output; a failure is "path: cannot write: <reason>". */
static la_status sync_out(la_pout *out) {
  char why[MPI_MAX_ERROR_STRING + 64];
  int e, q = quiet_begin();
  errno = 0;
  int rc = MPI_File_sync(out->fh);
  int se = errno;
  quiet_end(q);
  if (rc == MPI_SUCCESS) return LA_OK;
  const char *r = io_reason(rc, se, why, sizeof why, &e);
  return la_error(e ? la_write_status(e) : LA_ERR_WRITE, "%s: cannot write: %s", out->path, r);
}

la_status la_pout_sync(la_dist d, la_pout *out) {
  return la_dist_agree(d, out->open ? sync_out(out) : LA_OK);
}

la_status la_pout_write(la_pout *out, int64_t row0, int64_t n, const void *src) {
  int64_t bytes = n * out->row_bytes;
  MPI_Offset off = out->data_offset + row0 * out->row_bytes;
  for (int64_t done = 0; done < bytes;) {
    int64_t piece = bytes - done < LA_IO_PIECE ? bytes - done : LA_IO_PIECE;
    LA_TRY(write_at(out, off + done, (const char *)src + done, piece));
    done += piece;
  }
  return LA_OK;
}

la_status la_pout_finish(la_dist d, la_pout *out, int ok) {
  if (!out->open) return LA_OK;
  la_status st = LA_OK;
  char why[MPI_MAX_ERROR_STRING + 64];
  int e;
  if (ok) st = sync_out(out);
  int q = quiet_begin();
  errno = 0;
  int rc = MPI_File_close(&out->fh);
  int se = errno;
  quiet_end(q);
  out->open = 0;
  out->fh = MPI_FILE_NULL;
  if (ok && st == LA_OK && rc != MPI_SUCCESS) {
    const char *r = io_reason(rc, se, why, sizeof why, &e);
    st = la_error(e ? la_write_status(e) : LA_ERR_WRITE, "%s: cannot write: %s", out->path, r);
  }
  if (ok) {
    st = la_dist_agree(d, st); /* also: every rank has closed the file */
  } else {
    /* the caller holds the error, and its reason stays recorded: no agreement here, which
     * would clear it (la_dist_agree); every rank has closed */
    MPI_Barrier(la_dist_comm(d));
  }
  if (!ok || st != LA_OK) { /* a failed run, or a failed sync or close: no output */
    if (la_dist_rank(d) == 0 && !out->keep) unlink(out->tmp);
    out->pending = 0;
  } else {
    out->pending = 1;
  }
  return st;
}

la_status la_pout_commit(la_dist d, la_pout *outs, int n, int ok) {
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) {
    int i = 0;
    if (ok) {
      for (; i < n; i++) {
        if (!outs[i].pending || rename(outs[i].tmp, outs[i].path) == 0) continue;
        int e = errno;
        st = la_error(la_write_status(e), "%s: cannot rename the temporary output %s into place: %s",
                      outs[i].path, outs[i].tmp, strerror(e));
        break;
      }
    }
    if (!ok || st != LA_OK) { /* all or none */
      for (int j = 0; j < n; j++)
        if (outs[j].pending && (j < i || !outs[j].keep)) unlink(j < i ? outs[j].path : outs[j].tmp);
    }
  }
  for (int j = 0; j < n; j++) outs[j].pending = 0;
  if (!ok) {
    MPI_Barrier(la_dist_comm(d)); /* no agreement: the caller's reason stays recorded */
    return LA_OK;
  }
  return la_dist_agree(d, st);
}

la_status la_pout_close(la_dist d, la_pout *out, int ok) {
  la_status st = la_pout_finish(d, out, ok);
  la_status cs = la_pout_commit(d, out, 1, ok && st == LA_OK);
  return st != LA_OK ? st : cs;
}

la_status la_name_option(la_status st, const char *opt) {
  const char *why = la_error_message();
  if (st == LA_OK || !why[0] || strncmp(why, "--", 2) == 0) return st;
  return la_error_prefix(st, "%s ", opt);
}

la_status la_outputs_check(la_dist d, const char *const *paths, const char *const *opts, int n,
                           int force) {
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0)
    for (int i = 0; i < n && st == LA_OK; i++)
      if (paths[i]) {
        st = la_output_check(paths[i], force);
        if (opts) st = la_name_option(st, opts[i]);
      }
  return la_dist_agree(d, st);
}
