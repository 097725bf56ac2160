/* Status strings and exit codes (CONTRACT.md "Exit codes"). */
#include "linattn/status.h"
#include "linattn/types.h"

const char *la_status_string(la_status s) {
  switch (s) {
#define LA_X_CASE(name, value, msg) \
  case name:                        \
    return msg;
    LA_STATUS_LIST(LA_X_CASE)
#undef LA_X_CASE
  }
  return "unknown status";
}

int la_status_exit_code(la_status s) {
  switch (s) {
  case LA_OK:
    return 0;
  case LA_ERR_ARG:
  case LA_ERR_FORMAT:
  case LA_ERR_SHAPE:
  case LA_ERR_NONFINITE:
  case LA_ERR_UNSUPPORTED:
  case LA_ERR_EXISTS:
  case LA_ERR_IO:
    return 2;
  case LA_ERR_DENOMINATOR:
    return 3;
  default:
    return 1;
  }
}

size_t la_dtype_size(la_dtype t) { return t == LA_F32 ? 4 : 8; }

const char *la_dtype_name(la_dtype t) {
  return t == LA_F32 ? "f32" : t == LA_F64 ? "f64" : "i64";
}
