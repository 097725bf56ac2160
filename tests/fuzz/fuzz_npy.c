/* libFuzzer harness: the .npy reader (core/io/npy.c, linattn/npy.h). The input is a whole file.
 * la_npy_parse_header reads it from memory; la_npy_read_info, la_npy_load and
 * la_npy_read_rows read it as a file (fuzz_file). Besides the sanitizers it checks that the
 * three agree: a file is accepted iff its header parses and it holds the whole payload, the
 * payload read is the bytes after the header, rows are slices of it, and every error is one
 * line that names the file. */
#include "fuzz_common.h"
#include "linattn/npy.h"

#define READ_HEADER_MAX (1 << 20) /* as core/io/npy.c */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512] = "", ferr[512] = "";
  la_npy_info hi, fi;
  const la_status hs = why(la_npy_parse_header(data, size, &hi), err, sizeof err);
  int64_t bytes = -1;
  if (hs == LA_OK) {
    const size_t es = la_dtype_size(hi.dtype);
    FUZZ_CHECK(hi.version_major >= 1 && hi.version_major <= 3, "version %d", hi.version_major);
    FUZZ_CHECK(hi.dtype == LA_F32 || hi.dtype == LA_F64 || hi.dtype == LA_I64, "dtype %d",
               (int)hi.dtype);
    FUZZ_CHECK(hi.ndim >= 0 && hi.ndim <= LA_NPY_MAX_DIM, "ndim %d", hi.ndim);
    FUZZ_CHECK(hi.data_offset >= 10 && (uint64_t)hi.data_offset <= size, "data_offset %lld",
               (long long)hi.data_offset);
    int64_t c = 1;
    int zero = 0;
    for (int i = 0; i < hi.ndim; i++) {
      FUZZ_CHECK(hi.shape[i] >= 0, "shape[%d] = %lld", i, (long long)hi.shape[i]);
      zero |= hi.shape[i] == 0;
    }
    for (int i = 0; i < hi.ndim && !zero; i++)
      FUZZ_CHECK(!__builtin_mul_overflow(c, hi.shape[i], &c), "shape product overflows");
    if (zero) c = 0;
    FUZZ_CHECK(hi.count == c, "count %lld, shape product %lld", (long long)hi.count, (long long)c);
    FUZZ_CHECK(!__builtin_mul_overflow(hi.count, (int64_t)es, &bytes), "byte size overflows");
    /* the writer's header for the same array reads back as the same array */
    unsigned char w[LA_NPY_HEADER_MAX];
    size_t wl = 0;
    la_npy_info wi;
    FUZZ_CHECK(la_npy_format_header(hi.dtype, hi.ndim, hi.shape, w, &wl) == LA_OK, "format_header");
    FUZZ_CHECK(wl % 64 == 0 && why(la_npy_parse_header(w, wl, &wi), err, sizeof err) == LA_OK,
               "written header (%zu bytes) does not parse: %s", wl, err);
    FUZZ_CHECK(wi.dtype == hi.dtype && wi.ndim == hi.ndim && wi.count == hi.count &&
                   !memcmp(wi.shape, hi.shape, sizeof wi.shape) && wi.data_offset == (int64_t)wl,
               "written header reads back differently");
  } else {
    FUZZ_CHECK(hs == LA_ERR_FORMAT, "status %d", (int)hs);
    FUZZ_CHECK(fuzz_one_line(err), "message '%s'", err);
  }

  const char *path = fuzz_file(data, size);
  const la_status fs = why(la_npy_read_info(path, &fi), ferr, sizeof ferr);
  const int prefix = hs == LA_OK && hi.version_major == 1 ? 10 : 12;
  const int fits = hs == LA_OK && hi.data_offset - prefix <= READ_HEADER_MAX &&
                   bytes <= (int64_t)size - hi.data_offset;
  FUZZ_CHECK((fs == LA_OK) == fits, "read_info %d (%s) but parse_header %d (%s), fits %d",
             (int)fs, ferr, (int)hs, err, fits);
  if (fs != LA_OK) {
    FUZZ_CHECK(fs == LA_ERR_FORMAT, "status %d (%s)", (int)fs, ferr);
    FUZZ_CHECK(fuzz_one_line(ferr) && !strncmp(ferr, path, strlen(path)),
               "message '%s' does not start with the path", ferr);
    return 0;
  }
  FUZZ_CHECK(!memcmp(&fi, &hi, sizeof fi), "read_info and parse_header disagree");

  la_npy_info li;
  void *arr = NULL;
  la_status ls = why(la_npy_load(path, &li, &arr), ferr, sizeof ferr);
  FUZZ_CHECK(ls == LA_OK && arr, "load %d (%s) after read_info succeeded", (int)ls, ferr);
  FUZZ_CHECK(!memcmp(&li, &hi, sizeof li), "load and parse_header disagree");
  FUZZ_CHECK(!memcmp(arr, data + hi.data_offset, (size_t)bytes), "payload differs");

  if (hi.ndim >= 1) {
    const int64_t rows = hi.shape[0], row_bytes = rows ? bytes / rows : 0;
    const int64_t row0 = rows ? data[size - 1] % rows : 0;
    const int64_t nrows = rows ? data[size - 2] % (rows - row0 + 1) : 0;
    void *buf = malloc((size_t)(nrows * row_bytes) + 1);
    ls = why(la_npy_read_rows(path, &hi, row0, nrows, buf), ferr, sizeof ferr);
    FUZZ_CHECK(ls == LA_OK, "read_rows [%lld, +%lld): %s", (long long)row0, (long long)nrows, ferr);
    FUZZ_CHECK(!memcmp(buf, (char *)arr + row0 * row_bytes, (size_t)(nrows * row_bytes)),
               "rows [%lld, +%lld) differ from the payload", (long long)row0, (long long)nrows);
    ls = why(la_npy_read_rows(path, &hi, row0, rows - row0 + 1, buf), ferr, sizeof ferr);
    FUZZ_CHECK(ls == LA_ERR_ARG && fuzz_one_line(ferr), "rows past the end: %d", (int)ls);
    free(buf);
  } else {
    ls = why(la_npy_read_rows(path, &hi, 0, 1, arr), ferr, sizeof ferr);
    FUZZ_CHECK(ls == LA_ERR_ARG && fuzz_one_line(ferr), "rows of a 0-d array: %d", (int)ls);
  }
  free(arr);
  return 0;
}
