/* Tests for core/io/npy.c. Usage: test_npy [DIR [--keep]]
 * Without DIR a directory is made with mkdtemp and removed at the end. With DIR the test
 * files go there; --keep leaves the round-trip files rt_<dtype>_<shape>.npy behind (for
 * tests/npy_numpy_check.py). Prints "N passed, M failed"; exit status 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "linattn/npy.h"

#include "check.h"
static char g_dir[4096];


static const char *P(const char *name) { /* path in the test dir; 4 rotating buffers */
  static char bufs[4][4400];
  static int k;
  char *b = bufs[k++ & 3];
  snprintf(b, sizeof bufs[0], "%s/%s", g_dir, name);
  return b;
}

static void write_file(const char *name, const void *bytes, size_t len) {
  FILE *f = fopen(P(name), "wb");
  if (!f || (len && fwrite(bytes, 1, len, f) != len) || fclose(f) != 0) {
    printf("cannot write %s\n", P(name));
    exit(2);
  }
}

/* Write a hand-made .npy: magic, version major.minor, header length (2 bytes for 1.x, else
 * 4; hl_field < 0 means the real length), dict text, payload. */
static void build(const char *name, int major, int minor, const char *dict, long hl_field,
                  const void *payload, size_t plen) {
  unsigned char buf[8192];
  size_t dl = strlen(dict), pre = major == 1 ? 10 : 12, n = 0;
  unsigned long hl = hl_field < 0 ? (unsigned long)dl : (unsigned long)hl_field;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = (unsigned char)minor;
  for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
  n = pre;
  memcpy(buf + n, dict, dl);
  n += dl;
  if (plen) memcpy(buf + n, payload, plen);
  write_file(name, buf, n + plen);
}

/* A dict padded like numpy: spaces then '\n' so that prefix + header is a multiple of 64. */
static const char *padded(const char *dict, int major) {
  static char b[4096];
  size_t pre = major == 1 ? 10 : 12, n = strlen(dict);
  size_t total = (pre + n + 1 + 63) / 64 * 64;
  memcpy(b, dict, n);
  memset(b + n, ' ', total - pre - n - 1);
  b[total - pre - 1] = '\n';
  b[total - pre] = 0;
  return b;
}

static void check_msg(const char *err, const char *path, const char *needle, int line) {
  int ok = err[0] != 0 && strncmp(err, path, strlen(path)) == 0 && !strchr(err, '\n') &&
           (!needle || strstr(err, needle));
  CHECK(ok, "line %d: message '%s' (want path %s, substring '%s')", line, err, path,
        needle ? needle : "");
}

/* read_info and load both fail with want; the message starts with the path and has needle. */
static void expect_bad_at(const char *name, la_status want, const char *needle, int line) {
  char err[512] = "";
  la_npy_info info;
  const char *path = P(name);
  la_status s = why(la_npy_read_info(path, &info), err, sizeof err);
  CHECK(s == want, "line %d: %s: read_info gave %d (%s), want %d", line, name, s, err, want);
  check_msg(err, path, needle, line);
  void *data = (void *)1;
  err[0] = 0;
  s = why(la_npy_load(path, &info, &data), err, sizeof err);
  CHECK(s == want && data == NULL, "line %d: %s: load gave %d, want %d", line, name, s, want);
  check_msg(err, path, needle, line);
}
#define expect_bad(name, want, needle) expect_bad_at(name, want, needle, __LINE__)

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Values also checked by npy_numpy_check.py: f32 i+0.25, f64 i*0.5-1, i64 i*1000003-5. */
static void *make_data(la_dtype t, int64_t n) {
  void *d = malloc(n ? (size_t)n * 8 : 1);
  for (int64_t i = 0; i < n; i++) {
    if (t == LA_F32)
      ((float *)d)[i] = (float)i + 0.25f;
    else if (t == LA_F64)
      ((double *)d)[i] = (double)i * 0.5 - 1.0;
    else
      ((int64_t *)d)[i] = i * 1000003 - 5;
  }
  return d;
}

static void test_round_trip(void) {
  static const struct {
    int ndim;
    int64_t shape[3];
    const char *tag;
  } shapes[] = {{1, {5}, "5"},
                {2, {3, 4}, "3x4"},
                {3, {2, 3, 4}, "2x3x4"},
                {0, {0}, "scalar"},
                {2, {0, 3}, "0x3"}};
  for (int t = 0; t < 3; t++) {
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
      char name[64], err[512] = "";
      snprintf(name, sizeof name, "rt_%s_%s.npy", la_dtype_name((la_dtype)t), shapes[k].tag);
      int64_t n = 1;
      for (int i = 0; i < shapes[k].ndim; i++) n *= shapes[k].shape[i];
      size_t bytes = (size_t)n * la_dtype_size((la_dtype)t);
      void *d = make_data((la_dtype)t, n);
      la_status s =
          why(la_npy_save(P(name), (la_dtype)t, shapes[k].ndim, shapes[k].shape, d, 0), err, sizeof err);
      CHECK(s == LA_OK, "save %s: %s", name, err);
      la_npy_info info;
      void *back = NULL;
      s = why(la_npy_load(P(name), &info, &back), err, sizeof err);
      CHECK(s == LA_OK, "load %s: %s", name, err);
      if (s == LA_OK) {
        CHECK(info.version_major == 1 && info.dtype == (la_dtype)t && info.ndim == shapes[k].ndim &&
                  info.count == n,
              "%s: info v%d dtype %d ndim %d count %lld", name, info.version_major, info.dtype,
              info.ndim, (long long)info.count);
        CHECK(memcmp(info.shape, shapes[k].shape, sizeof(int64_t) * (size_t)info.ndim) == 0,
              "%s: shape", name);
        CHECK(info.data_offset % 64 == 0, "%s: data offset %lld", name,
              (long long)info.data_offset);
        CHECK(file_size(P(name)) == info.data_offset + (int64_t)bytes, "%s: file size", name);
        CHECK(bytes == 0 || memcmp(back, d, bytes) == 0, "%s: payload differs", name);
      }
      free(back);
      free(d);
    }
  }
}

static void test_format_header(void) {
  unsigned char buf[LA_NPY_HEADER_MAX];
  size_t hl = 0;
  la_npy_info info;
  char err[256] = "";
  struct {
    la_dtype t;
    int ndim;
    int64_t shape[3];
    const char *dict;
  } cases[] = {
      {LA_F32, 3, {2, 3, 4}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"},
      {LA_F64, 1, {5}, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"},
      {LA_I64, 0, {0}, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"},
  };
  for (int k = 0; k < 3; k++) {
    la_status s = la_npy_format_header(cases[k].t, cases[k].ndim, cases[k].shape, buf, &hl);
    CHECK(s == LA_OK && hl % 64 == 0 && hl >= 64, "format %d: status %d hl %zu", k, s, hl);
    if (s != LA_OK) continue;
    size_t dl = strlen(cases[k].dict);
    CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0 && (size_t)(buf[8] + 256 * buf[9]) == hl - 10,
          "format %d: prefix", k);
    CHECK(memcmp(buf + 10, cases[k].dict, dl) == 0, "format %d: dict '%.*s'", k, (int)dl,
          (const char *)buf + 10);
    int pad_ok = buf[hl - 1] == '\n';
    for (size_t i = 10 + dl; i < hl - 1; i++) pad_ok &= buf[i] == ' ';
    CHECK(pad_ok, "format %d: padding", k);
    s = why(la_npy_parse_header(buf, hl, &info), err, sizeof err);
    CHECK(s == LA_OK && info.dtype == cases[k].t && info.ndim == cases[k].ndim &&
              info.data_offset == (int64_t)hl,
          "format %d: parse back: %s", k, err);
  }
  int64_t neg[2] = {3, -1}, big[2] = {INT64_MAX, 2};
  CHECK(la_npy_format_header(LA_F32, 2, neg, buf, &hl) == LA_ERR_ARG, "negative dim accepted");
  CHECK(la_npy_format_header(LA_F32, 2, big, buf, &hl) == LA_ERR_ARG, "overflow accepted");
  CHECK(la_npy_format_header(LA_F32, 9, big, buf, &hl) == LA_ERR_ARG, "9 dims accepted");
  CHECK(la_npy_format_header((la_dtype)7, 1, big, buf, &hl) == LA_ERR_ARG, "bad dtype accepted");
}

static void test_read_rows(void) {
  char err[512] = "";
  int64_t shape[2] = {5, 3};
  double *d = make_data(LA_F64, 15), out[15];
  CHECK(why(la_npy_save(P("rows.npy"), LA_F64, 2, shape, d, 0), err, sizeof err) == LA_OK, "%s", err);
  la_npy_info info;
  CHECK(why(la_npy_read_info(P("rows.npy"), &info), err, sizeof err) == LA_OK, "%s", err);
  memset(out, 0, sizeof out);
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 1, 3, out), err, sizeof err) == LA_OK, "%s", err);
  CHECK(memcmp(out, d + 3, 9 * sizeof(double)) == 0, "rows 1..4 differ");
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 4, 1, out), err, sizeof err) == LA_OK &&
            memcmp(out, d + 12, 3 * sizeof(double)) == 0,
        "last row: %s", err);
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 5, 0, NULL), err, sizeof err) == LA_OK, "empty");
  err[0] = 0;
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 3, 3, out), err, sizeof err) == LA_ERR_ARG,
        "past end accepted");
  check_msg(err, P("rows.npy"), "out of range", __LINE__);
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, -1, 1, out), err, sizeof err) == LA_ERR_ARG,
        "negative row0 accepted");
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 0, -1, out), err, sizeof err) == LA_ERR_ARG,
        "negative nrows accepted");
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 2, INT64_MAX, out), err, sizeof err) == LA_ERR_ARG,
        "huge nrows accepted");
  la_npy_info scalar = info;
  scalar.ndim = 0;
  CHECK(why(la_npy_read_rows(P("rows.npy"), &scalar, 0, 1, out), err, sizeof err) == LA_ERR_ARG,
        "0-D read_rows accepted");
  /* The file shrinks after read_info: a short read is a truncated payload. */
  CHECK(truncate(P("rows.npy"), info.data_offset + 2 * 3 * 8) == 0, "truncate");
  err[0] = 0;
  CHECK(why(la_npy_read_rows(P("rows.npy"), &info, 1, 3, out), err, sizeof err) == LA_ERR_FORMAT,
        "short read accepted");
  check_msg(err, P("rows.npy"), "truncated", __LINE__);
  err[0] = 0;
  CHECK(why(la_npy_read_rows(P("nope.npy"), &info, 0, 1, out), err, sizeof err) == LA_ERR_IO,
        "missing file");
  check_msg(err, P("nope.npy"), "cannot open", __LINE__);
  free(d);
}

static int count_tmp_files(void) {
  DIR *dir = opendir(g_dir);
  int n = 0;
  struct dirent *e;
  if (!dir) return -1;
  while ((e = readdir(dir)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(dir);
  return n;
}

static void test_overwrite(void) {
  char err[512] = "";
  int64_t shape[1] = {4};
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  la_npy_info info;
  void *back = NULL;
  CHECK(why(la_npy_save(P("ow.npy"), LA_F32, 1, shape, a, 0), err, sizeof err) == LA_OK, "%s", err);
  err[0] = 0;
  CHECK(why(la_npy_save(P("ow.npy"), LA_F32, 1, shape, b, 0), err, sizeof err) == LA_ERR_EXISTS,
        "overwrote without force");
  check_msg(err, P("ow.npy"), "exists (use --force to overwrite)", __LINE__);
  CHECK(why(la_npy_load(P("ow.npy"), &info, &back), err, sizeof err) == LA_OK &&
            memcmp(back, a, sizeof a) == 0,
        "file changed by refused save");
  free(back);
  back = NULL;
  CHECK(why(la_npy_save(P("ow.npy"), LA_F32, 1, shape, b, 1), err, sizeof err) == LA_OK, "force: %s",
        err);
  CHECK(why(la_npy_load(P("ow.npy"), &info, &back), err, sizeof err) == LA_OK &&
            memcmp(back, b, sizeof b) == 0,
        "force did not overwrite");
  free(back);
  /* Unwritable destination: IO error, nothing left behind. */
  err[0] = 0;
  CHECK(why(la_npy_save(P("no/such/dir/x.npy"), LA_F32, 1, shape, a, 1), err, sizeof err) == LA_ERR_IO,
        "save into missing dir");
  check_msg(err, P("no/such/dir/x.npy"), NULL, __LINE__);
  /* Saving over a directory fails at rename; the temp file must be removed. */
  CHECK(mkdir(P("adir.npy"), 0755) == 0, "mkdir");
  err[0] = 0;
  CHECK(why(la_npy_save(P("adir.npy"), LA_F32, 1, shape, a, 1), err, sizeof err) == LA_ERR_IO,
        "save over a directory");
  check_msg(err, P("adir.npy"), "rename", __LINE__);
  CHECK(rmdir(P("adir.npy")) == 0, "rmdir");
  int64_t neg[1] = {-2};
  err[0] = 0;
  CHECK(why(la_npy_save(P("neg.npy"), LA_F32, 1, neg, a, 1), err, sizeof err) == LA_ERR_ARG,
        "negative dim saved");
  check_msg(err, P("neg.npy"), "negative", __LINE__);
  CHECK(file_size(P("neg.npy")) < 0, "file written for bad shape");
  CHECK(count_tmp_files() == 0, "%d *.tmp.* files left behind", count_tmp_files());
}

static void test_malformed(void) {
  static const char f34[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  unsigned char zeros[256];
  memset(zeros, 0, sizeof zeros);

  write_file("empty.npy", "", 0);
  expect_bad("empty.npy", LA_ERR_FORMAT, "empty");
  write_file("short.npy", "\x93NUM", 4);
  expect_bad("short.npy", LA_ERR_FORMAT, "too short");
  write_file("short8.npy", "\x93NUMPY\x01", 7);
  expect_bad("short8.npy", LA_ERR_FORMAT, "too short");
  write_file("magic.npy", "\x93NUMPZ\x01\x00\x10\x00{}              ", 26);
  expect_bad("magic.npy", LA_ERR_FORMAT, "magic");
  write_file("text.npy", "hello", 5);
  expect_bad("text.npy", LA_ERR_FORMAT, "magic");
  build("v4.npy", 4, 0, padded(f34, 2), -1, zeros, 48);
  expect_bad("v4.npy", LA_ERR_FORMAT, "version 4.0");
  build("v11.npy", 1, 1, padded(f34, 1), -1, zeros, 48);
  expect_bad("v11.npy", LA_ERR_FORMAT, "version 1.1");
  build("hdrpast.npy", 1, 0, padded(f34, 1), 1000, NULL, 0);
  expect_bad("hdrpast.npy", LA_ERR_FORMAT, "header past end of file");
  build("hdrpast2.npy", 2, 0, padded(f34, 2), 0xFFFFFFFFL, NULL, 0);
  expect_bad("hdrpast2.npy", LA_ERR_FORMAT, "header past end of file");

  struct {
    const char *name, *dict, *needle;
  } bad[] = {
      {"i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }",
       "'<i4' is not supported"},
      {"be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }",
       "'>f4' is big-endian"},
      {"u1.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 4), }",
       "'|u1' is not supported"},
      {"pipef4.npy", "{'descr': '|f4', 'fortran_order': False, 'shape': (3, 4), }", "'|f4'"},
      {"struct.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
       "structured"},
      {"fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }",
       "Fortran order is not supported"},
      {"fobool.npy", "{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 4), }", "True or False"},
      {"negdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4), }", "negative"},
      {"floatdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0, 4), }",
       "not an integer"},
      {"strdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': ('3', 4), }",
       "not an integer"},
      {"hexdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0x3, 4), }",
       "not an integer"},
      {"overflow.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 4), }", "overflow"},
      {"bytesovf.npy",
       "{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976, 2), }", "overflow"},
      {"hugedim.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "too large"},
      {"ninedims.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
       "more than 8 dimensions"},
      {"notuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", "tuple"},
      {"list.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4], }", "tuple"},
      {"noshape.npy", "{'descr': '<f4', 'fortran_order': False, }", "missing key 'shape'"},
      {"nodescr.npy", "{'fortran_order': False, 'shape': (3, 4), }", "missing key 'descr'"},
      {"dup.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'descr': '<f4', }",
       "duplicate key 'descr'"},
      {"extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'x': 1, }",
       "unexpected key"},
      {"unterm.npy", "{'descr': '<f4', 'fortran_order': False, ", "unterminated"},
      {"untermstr.npy", "{'descr': '<f4", "unterminated"},
      {"garbage.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } x", "garbage"},
      {"nobrace.npy", "'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)", "'{'"},
      {"nocomma.npy", "{'descr': '<f4' 'fortran_order': False, 'shape': (3, 4), }", "expected"},
      {"nul.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n\x01", "garbage"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    build(bad[k].name, 1, 0, padded(bad[k].dict, 1), -1, zeros, 48);
    expect_bad_at(bad[k].name, LA_ERR_FORMAT, bad[k].needle, (int)k);
  }
  build("trunc.npy", 1, 0, padded(f34, 1), -1, zeros, 40);
  expect_bad("trunc.npy", LA_ERR_FORMAT,
             "truncated payload (expected 48 bytes of data, file has 40)");
  build("hdronly.npy", 1, 0, padded(f34, 1), -1, NULL, 0);
  expect_bad("hdronly.npy", LA_ERR_FORMAT, "truncated payload");
  expect_bad("missing.npy", LA_ERR_IO, "cannot open");
  CHECK(mkdir(P("dir.npy"), 0755) == 0, "mkdir");
  expect_bad("dir.npy", LA_ERR_IO, NULL);
  CHECK(rmdir(P("dir.npy")) == 0, "rmdir");

  /* parse_header directly: no path, header longer than the buffer. */
  unsigned char buf[256];
  char err[256] = "";
  la_npy_info info;
  const char *pd = padded(f34, 1);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)strlen(pd);
  buf[9] = 0;
  memcpy(buf + 10, pd, strlen(pd));
  CHECK(why(la_npy_parse_header(buf, 10 + strlen(pd), &info), err, sizeof err) == LA_OK, "%s", err);
  CHECK(why(la_npy_parse_header(buf, 40, &info), err, sizeof err) == LA_ERR_FORMAT &&
            strstr(err, "header past end of file") && !strchr(err, '\n'),
        "parse short buffer: %s", err);
  CHECK(why(la_npy_parse_header(buf, 0, &info), err, sizeof err) == LA_ERR_FORMAT && err[0],
        "parse empty buffer");
}

static void test_valid_variants(void) {
  double d[6] = {1, 2, 3, 4, 5, 6};
  struct {
    const char *name;
    int major;
    const char *dict;
    int nd;
    int64_t s0;
  } ok[] = {
      {"v2.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 2, 2},
      {"v3.npy", 3, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 2, 2},
      {"order.npy", 1, "{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<f8\"}", 2, 2},
      {"spaces.npy", 1, "  {  'shape' : ( 6 , ) , 'descr' : '<f8' ,'fortran_order':False }", 1, 6},
      {"nopad.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)}", 1, 6},
  };
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    const char *dict = k < 3 ? padded(ok[k].dict, ok[k].major) : ok[k].dict;
    build(ok[k].name, ok[k].major, 0, dict, -1, d, sizeof d);
    char err[512] = "";
    la_npy_info info;
    void *back = NULL;
    la_status s = why(la_npy_load(P(ok[k].name), &info, &back), err, sizeof err);
    CHECK(s == LA_OK, "%s: %s", ok[k].name, err);
    if (s == LA_OK)
      CHECK(info.version_major == ok[k].major && info.dtype == LA_F64 && info.ndim == ok[k].nd &&
                info.shape[0] == ok[k].s0 && info.count == 6 && memcmp(back, d, sizeof d) == 0,
            "%s: wrong info or data", ok[k].name);
    free(back);
  }
  /* Header exactly as numpy 1.24 np.save writes it (with its growth padding). */
  static const char np_hdr[] =
      "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
      "                                                          \n";
  unsigned char file[sizeof np_hdr - 1 + 48];
  memcpy(file, np_hdr, sizeof np_hdr - 1);
  for (int i = 0; i < 12; i++) {
    float v = (float)i;
    memcpy(file + sizeof np_hdr - 1 + 4 * i, &v, 4);
  }
  write_file("numpy124.npy", file, sizeof file);
  char err[512] = "";
  la_npy_info info;
  float row[4];
  CHECK(why(la_npy_read_info(P("numpy124.npy"), &info), err, sizeof err) == LA_OK &&
            info.data_offset == 128 && info.ndim == 2 && info.shape[1] == 4,
        "numpy header: %s", err);
  CHECK(why(la_npy_read_rows(P("numpy124.npy"), &info, 2, 1, row), err, sizeof err) == LA_OK &&
            row[0] == 8.0f && row[3] == 11.0f,
        "numpy rows: %s", err);
}

static void cleanup(int made, int keep) {
  DIR *dir = opendir(g_dir);
  struct dirent *e;
  if (!dir) return;
  while ((e = readdir(dir)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (keep && !strncmp(e->d_name, "rt_", 3)) continue;
    if (unlink(P(e->d_name)) != 0) printf("warning: cannot remove %s\n", P(e->d_name));
  }
  closedir(dir);
  if (made && rmdir(g_dir) != 0) printf("warning: cannot remove %s\n", g_dir);
}

int main(int argc, char **argv) {
  int made = 0, keep = argc > 2 && !strcmp(argv[2], "--keep");
  if (argc > 1) {
    snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  } else {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/test_npy.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
      perror("mkdtemp");
      return 2;
    }
    made = 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_round_trip();
  test_format_header();
  test_read_rows();
  test_overwrite();
  test_malformed();
  test_valid_variants();
  CHECK(count_tmp_files() == 0, "*.tmp.* files left behind");
  cleanup(made, keep);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
