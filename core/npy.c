/* NumPy .npy reading and writing (format versions 1.0, 2.0, 3.0); see linattn/npy.h. */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64
#include "linattn/npy.h"
#include "linattn/outfile.h"
#include "la_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define READ_HEADER_MAX (1 << 20) /* refuse absurd headers before allocating */
#define MSG_MAX 256

/* The payload is copied verbatim, so the host must be little-endian like the files. */
static int host_is_le(void) {
  const union {
    uint16_t u;
    unsigned char c[2];
  } x = {1};
  return x.c[0] == 1;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* a*b for a, b >= 0; 0 on int64 overflow. */
static int mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a != 0 && b > INT64_MAX / a) return 0;
  *r = a * b;
  return 1;
}

/* Element count and byte size of a shape; a zero dimension makes the product 0 whatever
 * the others are. Returns 0 (with a reason in msg) on a negative dim or overflow. */
static int shape_size(la_dtype t, int ndim, const int64_t *shape, int64_t *count, int64_t *bytes,
                      char *msg, size_t msglen) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return seterr(msg, msglen, "negative dimension %d", i), 0;
    if (shape[i] == 0) n = 0;
  }
  for (int i = 0; i < ndim && n != 0; i++)
    if (!mul_ok(n, shape[i], &n)) return seterr(msg, msglen, "shape product overflows int64"), 0;
  if (!mul_ok(n, (int64_t)la_dtype_size(t), bytes))
    return seterr(msg, msglen, "array byte size overflows int64"), 0;
  *count = n;
  return 1;
}

/* ---- header parsing ---- */

typedef struct {
  const char *p, *end;
  char *msg;
  size_t msglen;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int at_end(cursor *c) {
  if (c->p < c->end) return 0;
  seterr(c->msg, c->msglen, "unterminated header dict");
  return 1;
}

static int expect(cursor *c, char ch, const char *what) {
  skip_ws(c);
  if (at_end(c)) return 0;
  if (*c->p != ch) return seterr(c->msg, c->msglen, "expected %s in header dict", what), 0;
  c->p++;
  return 1;
}

/* Python string literal of printable ASCII without escapes; *s and *n point into the buffer. */
static int parse_str(cursor *c, const char **s, size_t *n, const char *what) {
  skip_ws(c);
  if (at_end(c)) return 0;
  char q = *c->p;
  if (q != '\'' && q != '"') return seterr(c->msg, c->msglen, "expected a quoted %s", what), 0;
  const char *b = ++c->p;
  while (c->p < c->end && *c->p != q) {
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '\n') return seterr(c->msg, c->msglen, "unterminated string in header"), 0;
    if (ch < 0x20 || ch > 0x7e || ch == '\\')
      return seterr(c->msg, c->msglen, "unsupported character in header string"), 0;
    c->p++;
  }
  if (at_end(c)) return 0;
  *s = b;
  *n = (size_t)(c->p - b);
  c->p++;
  return 1;
}

static int is_ident(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.';
}

static int parse_bool(cursor *c, int *v) {
  skip_ws(c);
  if (at_end(c)) return 0;
  const char *b = c->p;
  while (c->p < c->end && is_ident(*c->p)) c->p++;
  size_t n = (size_t)(c->p - b);
  if (n == 4 && !memcmp(b, "True", 4)) return *v = 1, 1;
  if (n == 5 && !memcmp(b, "False", 5)) return *v = 0, 1;
  return seterr(c->msg, c->msglen, "fortran_order is not True or False"), 0;
}

/* Python tuple of non-negative decimal ints: (), (N,), (N, M), (N, M,) ... */
static int parse_shape(cursor *c, int *ndim, int64_t *shape) {
  if (!expect(c, '(', "a tuple for 'shape'")) return 0;
  *ndim = 0;
  skip_ws(c);
  if (c->p < c->end && *c->p == ')') return c->p++, 1;
  for (;;) {
    skip_ws(c);
    if (at_end(c)) return 0;
    int i = *ndim, neg = 0;
    if (i == LA_NPY_MAX_DIM)
      return seterr(c->msg, c->msglen, "shape has more than %d dimensions", LA_NPY_MAX_DIM), 0;
    if (*c->p == '-') neg = 1, c->p++;
    const char *b = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      int d = *c->p++ - '0';
      if (v > (INT64_MAX - d) / 10)
        return seterr(c->msg, c->msglen, "dimension %d is too large for int64", i), 0;
      v = v * 10 + d;
    }
    size_t nd = (size_t)(c->p - b);
    if (nd == 0 || (c->p < c->end && is_ident(*c->p)) || (nd > 1 && *b == '0'))
      return seterr(c->msg, c->msglen, "dimension %d is not an integer", i), 0;
    if (neg) return seterr(c->msg, c->msglen, "negative dimension %d", i), 0;
    shape[(*ndim)++] = v;
    skip_ws(c);
    if (at_end(c)) return 0;
    if (*c->p == ',') {
      c->p++;
      skip_ws(c);
      if (c->p < c->end && *c->p == ')') return c->p++, 1;
    } else if (*c->p == ')') {
      if (*ndim == 1) return seterr(c->msg, c->msglen, "shape (N) is not a tuple; need (N,)"), 0;
      return c->p++, 1;
    } else {
      return seterr(c->msg, c->msglen, "expected ',' or ')' in shape"), 0;
    }
  }
}

/* Magic, version and header length. On success *prefix is the size of magic+version+length
 * and *hl the header length field. */
static int parse_prefix(const unsigned char *buf, size_t len, int *major, size_t *prefix,
                        size_t *hl, char *msg, size_t msglen) {
  if (len == 0) return seterr(msg, msglen, "empty file (not a .npy file)"), 0;
  if (memcmp(buf, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
    return seterr(msg, msglen, "bad magic (not a .npy file)"), 0;
  if (len < MAGIC_LEN + 2)
    return seterr(msg, msglen, "file too short for a .npy header (%zu bytes)", len), 0;
  *major = buf[6];
  if ((*major != 1 && *major != 2 && *major != 3) || buf[7] != 0)
    return seterr(msg, msglen, "unsupported .npy format version %d.%d", buf[6], buf[7]), 0;
  *prefix = *major == 1 ? 10 : 12;
  if (len < *prefix)
    return seterr(msg, msglen, "file too short for a .npy header (%zu bytes)", len), 0;
  *hl = *major == 1
            ? (size_t)buf[8] | (size_t)buf[9] << 8
            : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
  return 1;
}

la_status la_npy_parse_header(const unsigned char *buf, size_t len, la_npy_info *info, char *err,
                              size_t errlen) {
  if (!host_is_le())
    return seterr(err, errlen, "big-endian hosts are not supported"), LA_ERR_UNSUPPORTED;
  if (!info || (!buf && len)) return seterr(err, errlen, "invalid argument"), LA_ERR_ARG;
  int major;
  size_t prefix, hl;
  if (!parse_prefix(buf, len, &major, &prefix, &hl, err, errlen)) return LA_ERR_FORMAT;
  if (hl > len - prefix) {
    seterr(err, errlen, "header past end of file (header ends at byte %zu, have %zu)", prefix + hl,
           len);
    return LA_ERR_FORMAT;
  }

  cursor c = {(const char *)buf + prefix, (const char *)buf + prefix + hl, err, errlen};
  const char *descr = NULL;
  size_t descr_n = 0;
  int seen_d = 0, seen_f = 0, seen_s = 0, fortran = 0, ndim = 0;
  int64_t shape[LA_NPY_MAX_DIM];
  if (!expect(&c, '{', "'{'")) return LA_ERR_FORMAT;
  for (;;) {
    skip_ws(&c);
    if (at_end(&c)) return LA_ERR_FORMAT;
    if (*c.p == '}') break;
    const char *key;
    size_t kn;
    if (!parse_str(&c, &key, &kn, "key") || !expect(&c, ':', "':' after key")) return LA_ERR_FORMAT;
    int *seen;
    if (kn == 5 && !memcmp(key, "descr", 5))
      seen = &seen_d;
    else if (kn == 13 && !memcmp(key, "fortran_order", 13))
      seen = &seen_f;
    else if (kn == 5 && !memcmp(key, "shape", 5))
      seen = &seen_s;
    else
      return seterr(err, errlen, "unexpected key '%.*s' in header", (int)(kn > 32 ? 32 : kn), key),
             LA_ERR_FORMAT;
    if (*seen)
      return seterr(err, errlen, "duplicate key '%.*s' in header", (int)kn, key), LA_ERR_FORMAT;
    *seen = 1;
    skip_ws(&c);
    if (seen == &seen_d && c.p < c.end && *c.p == '[')
      return seterr(err, errlen, "structured dtypes are not supported"), LA_ERR_FORMAT;
    int ok = seen == &seen_d   ? parse_str(&c, &descr, &descr_n, "descr")
             : seen == &seen_f ? parse_bool(&c, &fortran)
                               : parse_shape(&c, &ndim, shape);
    if (!ok) return LA_ERR_FORMAT;
    skip_ws(&c);
    if (at_end(&c)) return LA_ERR_FORMAT;
    if (*c.p == ',')
      c.p++;
    else if (*c.p != '}')
      return seterr(err, errlen, "expected ',' or '}' in header dict"), LA_ERR_FORMAT;
  }
  c.p++; /* '}' */
  skip_ws(&c);
  if (c.p != c.end) return seterr(err, errlen, "garbage after header dict"), LA_ERR_FORMAT;
  if (!seen_d || !seen_f || !seen_s) {
    seterr(err, errlen, "missing key '%s' in header",
           !seen_d   ? "descr"
           : !seen_f ? "fortran_order"
                     : "shape");
    return LA_ERR_FORMAT;
  }

  la_dtype t;
  int dn = descr_n > 32 ? 32 : (int)descr_n;
  if (descr_n == 3 && !memcmp(descr, "<f4", 3))
    t = LA_F32;
  else if (descr_n == 3 && !memcmp(descr, "<f8", 3))
    t = LA_F64;
  else if (descr_n == 3 && !memcmp(descr, "<i8", 3))
    t = LA_I64;
  else if (descr_n > 0 && descr[0] == '>')
    return seterr(err, errlen, "dtype '%.*s' is big-endian (need <f4, <f8 or <i8)", dn, descr),
           LA_ERR_FORMAT;
  else
    return seterr(err, errlen, "dtype '%.*s' is not supported (need <f4, <f8 or <i8)", dn, descr),
           LA_ERR_FORMAT;
  if (fortran) return seterr(err, errlen, "Fortran order is not supported"), LA_ERR_FORMAT;
  int64_t count, bytes;
  if (!shape_size(t, ndim, shape, &count, &bytes, err, errlen)) return LA_ERR_FORMAT;
  if (bytes > INT64_MAX - (int64_t)(prefix + hl))
    return seterr(err, errlen, "array byte size overflows int64"), LA_ERR_FORMAT;

  memset(info, 0, sizeof *info);
  info->version_major = major;
  info->dtype = t;
  info->ndim = ndim;
  memcpy(info->shape, shape, sizeof(int64_t) * (size_t)ndim);
  info->count = count;
  info->data_offset = (int64_t)(prefix + hl);
  return LA_OK;
}

/* ---- file reading ---- */

/* pread until n bytes, EOF or error; returns bytes read or -1 (errno set). */
static int64_t read_full(int fd, int64_t off, void *dst, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    size_t want = (size_t)(n - got > (1 << 30) ? (1 << 30) : n - got);
    ssize_t r = pread(fd, (char *)dst + got, want, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += r;
  }
  return got;
}

static la_status open_ro(const char *path, int *fd, char *err, size_t errlen) {
  if (!path) return seterr(err, errlen, "invalid argument: no path"), LA_ERR_ARG;
  if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return seterr(err, errlen, "%s: cannot open: %s", path, strerror(errno)), LA_ERR_IO;
  return LA_OK;
}

/* Header and payload-size check on an open file. */
static la_status info_fd(int fd, const char *path, la_npy_info *info, char *err, size_t errlen) {
  char msg[MSG_MAX];
  struct stat st;
  if (fstat(fd, &st) != 0)
    return seterr(err, errlen, "%s: cannot stat: %s", path, strerror(errno)), LA_ERR_IO;
  if (!S_ISREG(st.st_mode)) return seterr(err, errlen, "%s: not a regular file", path), LA_ERR_IO;
  int64_t size = (int64_t)st.st_size;
  unsigned char pre[12];
  int64_t got = read_full(fd, 0, pre, size < 12 ? size : 12);
  if (got < 0) return seterr(err, errlen, "%s: cannot read: %s", path, strerror(errno)), LA_ERR_READ;
  int major;
  size_t prefix, hl;
  if (!parse_prefix(pre, (size_t)got, &major, &prefix, &hl, msg, sizeof msg))
    return seterr(err, errlen, "%s: %s", path, msg), LA_ERR_FORMAT;
  int64_t hend = (int64_t)(prefix + hl);
  if (hend > size) {
    seterr(err, errlen, "%s: header past end of file (header ends at byte %lld, file has %lld)",
           path, (long long)hend, (long long)size);
    return LA_ERR_FORMAT;
  }
  if (hl > READ_HEADER_MAX)
    return seterr(err, errlen, "%s: header too large (%zu bytes)", path, hl), LA_ERR_FORMAT;
  unsigned char *buf = la_malloc((size_t)hend);
  if (!buf)
    return seterr(err, errlen, "%s: out of memory for its %lld-byte header", path, (long long)hend),
           LA_ERR_NOMEM;
  got = read_full(fd, 0, buf, hend);
  int e = errno;
  la_status s = LA_OK;
  if (got < 0)
    s = LA_ERR_READ, seterr(err, errlen, "%s: cannot read: %s", path, strerror(e));
  else if (got < hend)
    s = LA_ERR_FORMAT, seterr(err, errlen, "%s: header past end of file", path);
  else if ((s = la_npy_parse_header(buf, (size_t)hend, info, msg, sizeof msg)) != LA_OK)
    seterr(err, errlen, "%s: %s", path, msg);
  free(buf);
  if (s != LA_OK) return s;
  int64_t have = size - info->data_offset;
  int64_t need = info->count * (int64_t)la_dtype_size(info->dtype); /* checked by the parser */
  if (need > have) {
    seterr(err, errlen, "%s: truncated payload (expected %lld bytes of data, file has %lld)", path,
           (long long)need, (long long)have);
    return LA_ERR_FORMAT;
  }
  return LA_OK;
}

la_status la_npy_read_info(const char *path, la_npy_info *info, char *err, size_t errlen) {
  if (!host_is_le())
    return seterr(err, errlen, "big-endian hosts are not supported"), LA_ERR_UNSUPPORTED;
  if (!info) return seterr(err, errlen, "invalid argument: no info"), LA_ERR_ARG;
  int fd;
  la_status s = open_ro(path, &fd, err, errlen);
  if (s != LA_OK) return s;
  s = info_fd(fd, path, info, err, errlen);
  close(fd); /* read-only: a close error loses nothing */
  return s;
}

/* Read n bytes at off; a short read is a truncated payload. */
static la_status read_payload(int fd, const char *path, int64_t off, void *dst, int64_t n,
                              char *err, size_t errlen) {
  int64_t got = read_full(fd, off, dst, n);
  if (got < 0) return seterr(err, errlen, "%s: cannot read: %s", path, strerror(errno)), LA_ERR_READ;
  if (got < n) {
    seterr(err, errlen, "%s: truncated payload (expected %lld bytes at offset %lld, got %lld)",
           path, (long long)n, (long long)off, (long long)got);
    return LA_ERR_FORMAT;
  }
  return LA_OK;
}

la_status la_npy_read_rows(const char *path, const la_npy_info *info, int64_t row0, int64_t nrows,
                           void *dst, char *err, size_t errlen) {
  if (!host_is_le())
    return seterr(err, errlen, "big-endian hosts are not supported"), LA_ERR_UNSUPPORTED;
  const char *p = path ? path : "(null)";
  if (!info || info->ndim < 1 || info->ndim > LA_NPY_MAX_DIM || info->data_offset < 0 ||
      (info->dtype != LA_F32 && info->dtype != LA_F64 && info->dtype != LA_I64))
    return seterr(err, errlen, "%s: read_rows needs the info of an array with ndim >= 1", p),
           LA_ERR_ARG;
  if (row0 < 0 || nrows < 0 || row0 > info->shape[0] || nrows > info->shape[0] - row0) {
    seterr(err, errlen, "%s: rows [%lld, %lld+%lld) out of range (leading dimension %lld)", p,
           (long long)row0, (long long)row0, (long long)nrows, (long long)info->shape[0]);
    return LA_ERR_ARG;
  }
  /* No rows: nothing to read, and the row size need not be representable. Shape (0, 2^63-1)
   * is a valid empty array whose row would be 2^66 bytes (found by fuzz_npy). */
  if (nrows == 0) return LA_OK;
  char msg[MSG_MAX];
  int64_t row_elems, row_bytes, off, n;
  if (!shape_size(info->dtype, info->ndim - 1, info->shape + 1, &row_elems, &row_bytes, msg,
                  sizeof msg) ||
      !mul_ok(row0, row_bytes, &off) || !mul_ok(nrows, row_bytes, &n) ||
      off > INT64_MAX - info->data_offset || n > INT64_MAX - info->data_offset - off ||
      (uint64_t)n > SIZE_MAX)
    return seterr(err, errlen, "%s: invalid shape in info", p), LA_ERR_ARG;
  if (n == 0) return LA_OK;
  if (!dst) return seterr(err, errlen, "%s: no destination buffer", p), LA_ERR_ARG;
  int fd;
  la_status s = open_ro(path, &fd, err, errlen);
  if (s != LA_OK) return s;
  s = read_payload(fd, path, info->data_offset + off, dst, n, err, errlen);
  close(fd);
  return s;
}

la_status la_npy_load(const char *path, la_npy_info *info, void **data, char *err, size_t errlen) {
  if (!host_is_le())
    return seterr(err, errlen, "big-endian hosts are not supported"), LA_ERR_UNSUPPORTED;
  if (!info || !data) return seterr(err, errlen, "invalid argument"), LA_ERR_ARG;
  *data = NULL;
  int fd;
  la_status s = open_ro(path, &fd, err, errlen);
  if (s != LA_OK) return s;
  if ((s = info_fd(fd, path, info, err, errlen)) != LA_OK) return close(fd), s;
  int64_t n = info->count * (int64_t)la_dtype_size(info->dtype);
  void *buf = (uint64_t)n < SIZE_MAX ? la_malloc(n ? (size_t)n : 1) : NULL;
  if (!buf) {
    close(fd);
    return seterr(err, errlen, "%s: out of memory for %lld bytes", path, (long long)n),
           LA_ERR_NOMEM;
  }
  s = read_payload(fd, path, info->data_offset, buf, n, err, errlen);
  close(fd);
  if (s != LA_OK) return free(buf), s;
  *data = buf;
  return LA_OK;
}

/* ---- writing ---- */

la_status la_npy_format_header(la_dtype dtype, int ndim, const int64_t *shape, unsigned char *buf,
                               size_t *hlen) {
  if (!host_is_le()) return LA_ERR_UNSUPPORTED;
  int64_t count, bytes;
  if (!buf || !hlen || (dtype != LA_F32 && dtype != LA_F64 && dtype != LA_I64) || ndim < 0 ||
      ndim > LA_NPY_MAX_DIM || (ndim > 0 && !shape) ||
      !shape_size(dtype, ndim, shape, &count, &bytes, NULL, 0))
    return LA_ERR_ARG;
  /* Always version 1.0: with <= LA_NPY_MAX_DIM dims the dict is far below 65535 bytes. */
  char *d = (char *)buf + 10;
  size_t cap = LA_NPY_HEADER_MAX - 10, n;
  n = (size_t)snprintf(d, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dtype == LA_F32   ? "<f4"
                       : dtype == LA_F64 ? "<f8"
                                         : "<i8");
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(d + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  n += (size_t)snprintf(d + n, cap - n, "%s), }", ndim == 1 ? "," : "");
  size_t total = (10 + n + 1 + 63) / 64 * 64; /* + '\n', rounded up to a multiple of 64 */
  if (total > LA_NPY_HEADER_MAX) return LA_ERR_INTERNAL;
  memset(d + n, ' ', total - 10 - n - 1);
  buf[total - 1] = '\n';
  memcpy(buf, MAGIC, MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (unsigned char)((total - 10) & 0xff);
  buf[9] = (unsigned char)((total - 10) >> 8);
  *hlen = total;
  return LA_OK;
}

la_status la_npy_save(const char *path, la_dtype dtype, int ndim, const int64_t *shape,
                      const void *data, int force, char *err, size_t errlen) {
  if (!host_is_le())
    return seterr(err, errlen, "big-endian hosts are not supported"), LA_ERR_UNSUPPORTED;
  if (!path || !*path) return seterr(err, errlen, "invalid argument: no path"), LA_ERR_ARG;
  unsigned char hdr[LA_NPY_HEADER_MAX];
  size_t hlen;
  int64_t count, bytes;
  char msg[MSG_MAX] = "invalid dtype or ndim";
  if ((dtype != LA_F32 && dtype != LA_F64 && dtype != LA_I64) || ndim < 0 ||
      ndim > LA_NPY_MAX_DIM || (ndim > 0 && !shape) ||
      !shape_size(dtype, ndim, shape, &count, &bytes, msg, sizeof msg) ||
      la_npy_format_header(dtype, ndim, shape, hdr, &hlen) != LA_OK)
    return seterr(err, errlen, "%s: cannot save: %s", path, msg), LA_ERR_ARG;
  if (bytes > 0 && !data) return seterr(err, errlen, "%s: cannot save: no data", path), LA_ERR_ARG;
  return la_write_file(path, hdr, hlen, data, (size_t)bytes, force, err, errlen);
}
