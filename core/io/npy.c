/* NumPy .npy reading and writing (format versions 1.0, 2.0, 3.0); see linattn/npy.h. */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64
#include "linattn/npy.h"
#include "linattn/outfile.h"
#include "la_alloc.h"

#include <errno.h>
#include <fcntl.h>
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

/* The payload is copied verbatim, so the host must be little-endian like the files. */
static int host_is_le(void) {
  const union {
    uint16_t u;
    unsigned char c[2];
  } x = {1};
  return x.c[0] == 1;
}

/* a*b for a, b >= 0; 0 on int64 overflow. */
static int mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a != 0 && b > INT64_MAX / a) return 0;
  *r = a * b;
  return 1;
}

/* Element count and byte size of a shape; a zero dimension makes the product 0 whatever
 * the others are. LA_ERR_FORMAT with the reason on a negative dim or overflow. */
static la_status shape_size(la_dtype t, int ndim, const int64_t *shape, int64_t *count,
                            int64_t *bytes) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    LA_CHECK(shape[i] >= 0, LA_ERR_FORMAT, "negative dimension %d", i);
    if (shape[i] == 0) n = 0;
  }
  for (int i = 0; i < ndim && n != 0; i++)
    LA_CHECK(mul_ok(n, shape[i], &n), LA_ERR_FORMAT, "shape product overflows int64");
  LA_CHECK(mul_ok(n, (int64_t)la_dtype_size(t), bytes), LA_ERR_FORMAT,
           "array byte size overflows int64");
  *count = n;
  return LA_OK;
}

/* ---- header parsing: each step is LA_OK or LA_ERR_FORMAT with its reason ---- */

typedef struct {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static la_status more(const cursor *c) { /* input left before the header's end */
  LA_CHECK(c->p < c->end, LA_ERR_FORMAT, "unterminated header dict");
  return LA_OK;
}

static la_status expect(cursor *c, char ch, const char *what) {
  skip_ws(c);
  LA_TRY(more(c));
  LA_CHECK(*c->p == ch, LA_ERR_FORMAT, "expected %s in header dict", what);
  c->p++;
  return LA_OK;
}

/* Python string literal of printable ASCII without escapes; *s and *n point into the buffer. */
static la_status parse_str(cursor *c, const char **s, size_t *n, const char *what) {
  skip_ws(c);
  LA_TRY(more(c));
  char q = *c->p;
  LA_CHECK(q == '\'' || q == '"', LA_ERR_FORMAT, "expected a quoted %s", what);
  const char *b = ++c->p;
  while (c->p < c->end && *c->p != q) {
    unsigned char ch = (unsigned char)*c->p;
    LA_CHECK(ch != '\n', LA_ERR_FORMAT, "unterminated string in header");
    LA_CHECK(ch >= 0x20 && ch <= 0x7e && ch != '\\', LA_ERR_FORMAT,
             "unsupported character in header string");
    c->p++;
  }
  LA_TRY(more(c));
  *s = b;
  *n = (size_t)(c->p - b);
  c->p++;
  return LA_OK;
}

static int is_ident(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.';
}

static la_status parse_bool(cursor *c, int *v) {
  skip_ws(c);
  LA_TRY(more(c));
  const char *b = c->p;
  while (c->p < c->end && is_ident(*c->p)) c->p++;
  size_t n = (size_t)(c->p - b);
  if (n == 4 && !memcmp(b, "True", 4)) return *v = 1, LA_OK;
  if (n == 5 && !memcmp(b, "False", 5)) return *v = 0, LA_OK;
  return la_error(LA_ERR_FORMAT, "fortran_order is not True or False");
}

/* Python tuple of non-negative decimal ints: (), (N,), (N, M), (N, M,) ... */
static la_status parse_shape(cursor *c, int *ndim, int64_t *shape) {
  LA_TRY(expect(c, '(', "a tuple for 'shape'"));
  *ndim = 0;
  skip_ws(c);
  if (c->p < c->end && *c->p == ')') return c->p++, LA_OK;
  for (;;) {
    skip_ws(c);
    LA_TRY(more(c));
    int i = *ndim, neg = 0;
    LA_CHECK(i < LA_NPY_MAX_DIM, LA_ERR_FORMAT, "shape has more than %d dimensions", LA_NPY_MAX_DIM);
    if (*c->p == '-') neg = 1, c->p++;
    const char *b = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      int d = *c->p++ - '0';
      LA_CHECK(v <= (INT64_MAX - d) / 10, LA_ERR_FORMAT, "dimension %d is too large for int64", i);
      v = v * 10 + d;
    }
    size_t nd = (size_t)(c->p - b);
    LA_CHECK(!(nd == 0 || (c->p < c->end && is_ident(*c->p)) || (nd > 1 && *b == '0')), LA_ERR_FORMAT,
             "dimension %d is not an integer", i);
    LA_CHECK(!neg, LA_ERR_FORMAT, "negative dimension %d", i);
    shape[(*ndim)++] = v;
    skip_ws(c);
    LA_TRY(more(c));
    if (*c->p == ',') {
      c->p++;
      skip_ws(c);
      if (c->p < c->end && *c->p == ')') return c->p++, LA_OK;
    } else if (*c->p == ')') {
      LA_CHECK(*ndim != 1, LA_ERR_FORMAT, "shape (N) is not a tuple; need (N,)");
      return c->p++, LA_OK;
    } else {
      return la_error(LA_ERR_FORMAT, "expected ',' or ')' in shape");
    }
  }
}

/* Magic, version and header length. On success *prefix is the size of magic+version+length
 * and *hl the header length field. */
static la_status parse_prefix(const unsigned char *buf, size_t len, int *major, size_t *prefix,
                              size_t *hl) {
  LA_CHECK(len > 0, LA_ERR_FORMAT, "empty file (not a .npy file)");
  LA_CHECK(memcmp(buf, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) == 0, LA_ERR_FORMAT,
           "bad magic (not a .npy file)");
  LA_CHECK(len >= MAGIC_LEN + 2, LA_ERR_FORMAT, "file too short for a .npy header (%zu bytes)", len);
  *major = buf[6];
  LA_CHECK((*major == 1 || *major == 2 || *major == 3) && buf[7] == 0, LA_ERR_FORMAT,
           "unsupported .npy format version %d.%d", buf[6], buf[7]);
  *prefix = *major == 1 ? 10 : 12;
  LA_CHECK(len >= *prefix, LA_ERR_FORMAT, "file too short for a .npy header (%zu bytes)", len);
  *hl = *major == 1
            ? (size_t)buf[8] | (size_t)buf[9] << 8
            : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
  return LA_OK;
}

la_status la_npy_parse_header(const unsigned char *buf, size_t len, la_npy_info *info) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  LA_CHECK(info && (buf || !len), LA_ERR_ARG, "invalid argument");
  int major;
  size_t prefix, hl;
  LA_TRY(parse_prefix(buf, len, &major, &prefix, &hl));
  LA_CHECK(hl <= len - prefix, LA_ERR_FORMAT,
           "header past end of file (header ends at byte %zu, have %zu)", prefix + hl, len);

  cursor c = {(const char *)buf + prefix, (const char *)buf + prefix + hl};
  const char *descr = NULL;
  size_t descr_n = 0;
  int seen_d = 0, seen_f = 0, seen_s = 0, fortran = 0, ndim = 0;
  int64_t shape[LA_NPY_MAX_DIM];
  LA_TRY(expect(&c, '{', "'{'"));
  for (;;) {
    skip_ws(&c);
    LA_TRY(more(&c));
    if (*c.p == '}') break;
    const char *key;
    size_t kn;
    LA_TRY(parse_str(&c, &key, &kn, "key"));
    LA_TRY(expect(&c, ':', "':' after key"));
    int *seen;
    if (kn == 5 && !memcmp(key, "descr", 5))
      seen = &seen_d;
    else if (kn == 13 && !memcmp(key, "fortran_order", 13))
      seen = &seen_f;
    else if (kn == 5 && !memcmp(key, "shape", 5))
      seen = &seen_s;
    else
      return la_error(LA_ERR_FORMAT, "unexpected key '%.*s' in header", (int)(kn > 32 ? 32 : kn), key);
    LA_CHECK(!*seen, LA_ERR_FORMAT, "duplicate key '%.*s' in header", (int)kn, key);
    *seen = 1;
    skip_ws(&c);
    LA_CHECK(!(seen == &seen_d && c.p < c.end && *c.p == '['), LA_ERR_FORMAT,
             "structured dtypes are not supported");
    LA_TRY(seen == &seen_d   ? parse_str(&c, &descr, &descr_n, "descr")
           : seen == &seen_f ? parse_bool(&c, &fortran)
                             : parse_shape(&c, &ndim, shape));
    skip_ws(&c);
    LA_TRY(more(&c));
    if (*c.p == ',')
      c.p++;
    else
      LA_CHECK(*c.p == '}', LA_ERR_FORMAT, "expected ',' or '}' in header dict");
  }
  c.p++; /* '}' */
  skip_ws(&c);
  LA_CHECK(c.p == c.end, LA_ERR_FORMAT, "garbage after header dict");
  LA_CHECK(seen_d && seen_f && seen_s, LA_ERR_FORMAT, "missing key '%s' in header",
           !seen_d   ? "descr"
           : !seen_f ? "fortran_order"
           : "shape");

  la_dtype t;
  int dn = descr_n > 32 ? 32 : (int)descr_n;
  if (descr_n == 3 && !memcmp(descr, "<f4", 3))
    t = LA_F32;
  else if (descr_n == 3 && !memcmp(descr, "<f8", 3))
    t = LA_F64;
  else if (descr_n == 3 && !memcmp(descr, "<i8", 3))
    t = LA_I64;
  else if (descr_n > 0 && descr[0] == '>')
    return la_error(LA_ERR_FORMAT, "dtype '%.*s' is big-endian (need <f4, <f8 or <i8)", dn, descr);
  else
    return la_error(LA_ERR_FORMAT, "dtype '%.*s' is not supported (need <f4, <f8 or <i8)", dn, descr);
  LA_CHECK(!fortran, LA_ERR_FORMAT, "Fortran order is not supported");
  int64_t count, bytes;
  LA_TRY(shape_size(t, ndim, shape, &count, &bytes));
  LA_CHECK(bytes <= INT64_MAX - (int64_t)(prefix + hl), LA_ERR_FORMAT, "array byte size overflows int64");

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

static la_status open_ro(const char *path, int *fd) {
  LA_CHECK(path, LA_ERR_ARG, "invalid argument: no path");
  if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return la_error(LA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  return LA_OK;
}

/* Header and payload-size check on an open file. */
static la_status info_fd(int fd, const char *path, la_npy_info *info) {
  struct stat st;
  if (fstat(fd, &st) != 0) return la_error(LA_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  LA_CHECK(S_ISREG(st.st_mode), LA_ERR_IO, "%s: not a regular file", path);
  int64_t size = (int64_t)st.st_size;
  unsigned char pre[12];
  int64_t got = read_full(fd, 0, pre, size < 12 ? size : 12);
  if (got < 0) return la_error(LA_ERR_READ, "%s: cannot read: %s", path, strerror(errno));
  int major;
  size_t prefix, hl;
  la_status s = parse_prefix(pre, (size_t)got, &major, &prefix, &hl);
  if (s != LA_OK) return la_error_prefix(s, "%s: ", path);
  int64_t hend = (int64_t)(prefix + hl);
  LA_CHECK(hend <= size, LA_ERR_FORMAT,
           "%s: header past end of file (header ends at byte %lld, file has %lld)", path,
           (long long)hend, (long long)size);
  LA_CHECK(hl <= READ_HEADER_MAX, LA_ERR_FORMAT, "%s: header too large (%zu bytes)", path, hl);
  unsigned char *buf = la_malloc((size_t)hend);
  LA_CHECK(buf, LA_ERR_NOMEM, "%s: out of memory for its %lld-byte header", path, (long long)hend);
  got = read_full(fd, 0, buf, hend);
  int e = errno;
  if (got < 0)
    s = la_error(LA_ERR_READ, "%s: cannot read: %s", path, strerror(e));
  else if (got < hend)
    s = la_error(LA_ERR_FORMAT, "%s: header past end of file", path);
  else if ((s = la_npy_parse_header(buf, (size_t)hend, info)) != LA_OK)
    la_error_prefix(s, "%s: ", path);
  free(buf);
  if (s != LA_OK) return s;
  int64_t have = size - info->data_offset;
  int64_t need = info->count * (int64_t)la_dtype_size(info->dtype); /* checked by the parser */
  LA_CHECK(need <= have, LA_ERR_FORMAT,
           "%s: truncated payload (expected %lld bytes of data, file has %lld)", path,
           (long long)need, (long long)have);
  return LA_OK;
}

la_status la_npy_read_info(const char *path, la_npy_info *info) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  LA_CHECK(info, LA_ERR_ARG, "invalid argument: no info");
  int fd = -1;
  LA_TRY(open_ro(path, &fd));
  la_status s = info_fd(fd, path, info);
  close(fd); /* read-only: a close error loses nothing */
  return s;
}

/* Read n bytes at off; a short read is a truncated payload. */
static la_status read_payload(int fd, const char *path, int64_t off, void *dst, int64_t n) {
  int64_t got = read_full(fd, off, dst, n);
  if (got < 0) return la_error(LA_ERR_READ, "%s: cannot read: %s", path, strerror(errno));
  LA_CHECK(got >= n, LA_ERR_FORMAT, "%s: truncated payload (expected %lld bytes at offset %lld, got %lld)",
           path, (long long)n, (long long)off, (long long)got);
  return LA_OK;
}

la_status la_npy_read_rows(const char *path, const la_npy_info *info, int64_t row0, int64_t nrows,
                           void *dst) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  const char *p = path ? path : "(null)";
  LA_CHECK(info && info->ndim >= 1 && info->ndim <= LA_NPY_MAX_DIM && info->data_offset >= 0 &&
           (info->dtype == LA_F32 || info->dtype == LA_F64 || info->dtype == LA_I64),
           LA_ERR_ARG, "%s: read_rows needs the info of an array with ndim >= 1", p);
  LA_CHECK(row0 >= 0 && nrows >= 0 && row0 <= info->shape[0] && nrows <= info->shape[0] - row0,
           LA_ERR_ARG, "%s: rows [%lld, %lld+%lld) out of range (leading dimension %lld)", p,
           (long long)row0, (long long)row0, (long long)nrows, (long long)info->shape[0]);
  /* No rows: nothing to read, and the row size need not be representable. Shape (0, 2^63-1)
   * is a valid empty array whose row would be 2^66 bytes (found by fuzz_npy). */
  if (nrows == 0) return LA_OK;
  int64_t row_elems, row_bytes, off, n;
  LA_CHECK(shape_size(info->dtype, info->ndim - 1, info->shape + 1, &row_elems, &row_bytes) == LA_OK &&
           mul_ok(row0, row_bytes, &off) && mul_ok(nrows, row_bytes, &n) &&
           off <= INT64_MAX - info->data_offset && n <= INT64_MAX - info->data_offset - off &&
           (uint64_t)n <= SIZE_MAX,
           LA_ERR_ARG, "%s: invalid shape in info", p);
  if (n == 0) return LA_OK;
  LA_CHECK(dst, LA_ERR_ARG, "%s: no destination buffer", p);
  int fd = -1;
  LA_TRY(open_ro(path, &fd));
  la_status s = read_payload(fd, path, info->data_offset + off, dst, n);
  close(fd);
  return s;
}

la_status la_npy_load(const char *path, la_npy_info *info, void **data) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  LA_CHECK(info && data, LA_ERR_ARG, "invalid argument");
  *data = NULL;
  int fd = -1;
  LA_TRY(open_ro(path, &fd));
  la_status s = info_fd(fd, path, info);
  if (s != LA_OK) return close(fd), s;
  int64_t n = info->count * (int64_t)la_dtype_size(info->dtype);
  void *buf = (uint64_t)n < SIZE_MAX ? la_malloc(n ? (size_t)n : 1) : NULL;
  if (!buf) {
    close(fd);
    return la_error(LA_ERR_NOMEM, "%s: out of memory for %lld bytes", path, (long long)n);
  }
  s = read_payload(fd, path, info->data_offset, buf, n);
  close(fd);
  if (s != LA_OK) return free(buf), s;
  *data = buf;
  return LA_OK;
}

/* ---- writing ---- */

la_status la_npy_format_header(la_dtype dtype, int ndim, const int64_t *shape, unsigned char *buf,
                               size_t *hlen) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  int64_t count, bytes;
  LA_CHECK(buf && hlen && (dtype == LA_F32 || dtype == LA_F64 || dtype == LA_I64) && ndim >= 0 &&
           ndim <= LA_NPY_MAX_DIM && (ndim == 0 || shape),
           LA_ERR_ARG, "la_npy_format_header: invalid dtype, ndim or shape");
  if (shape_size(dtype, ndim, shape, &count, &bytes) != LA_OK)
    return la_error_prefix(LA_ERR_ARG, "la_npy_format_header: ");
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
  LA_CHECK(total <= LA_NPY_HEADER_MAX, LA_ERR_INTERNAL, "la_npy_format_header: %zu bytes exceed %d",
           total, LA_NPY_HEADER_MAX);
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
                      const void *data, int force) {
  LA_CHECK(host_is_le(), LA_ERR_UNSUPPORTED, "big-endian hosts are not supported");
  LA_CHECK(path && *path, LA_ERR_ARG, "invalid argument: no path");
  unsigned char hdr[LA_NPY_HEADER_MAX];
  size_t hlen;
  int64_t count, bytes;
  LA_CHECK((dtype == LA_F32 || dtype == LA_F64 || dtype == LA_I64) && ndim >= 0 &&
           ndim <= LA_NPY_MAX_DIM && (ndim == 0 || shape),
           LA_ERR_ARG, "%s: cannot save: invalid dtype or ndim", path);
  if (shape_size(dtype, ndim, shape, &count, &bytes) != LA_OK)
    return la_error_prefix(LA_ERR_ARG, "%s: cannot save: ", path);
  LA_TRY(la_npy_format_header(dtype, ndim, shape, hdr, &hlen)); /* valid here: cannot fail */
  LA_CHECK(bytes == 0 || data, LA_ERR_ARG, "%s: cannot save: no data", path);
  return la_write_file(path, hdr, hlen, data, (size_t)bytes, force);
}
