/* Status strings, exit codes (docs/cli.md "Exit codes") and recorded error reasons
 * (docs/design.md §6 "Errors"). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "linattn/status.h"
#include "linattn/types.h"

static _Thread_local char la_err_msg[1024];

la_status la_error(la_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(la_err_msg, sizeof la_err_msg, fmt, ap);
  va_end(ap);
  return st;
}

la_status la_error_prefix(la_status st, const char *fmt, ...) {
  char was[sizeof la_err_msg]; /* the new text is formatted over the old */
  snprintf(was, sizeof was, "%s", la_error_reason(st));
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(la_err_msg, sizeof la_err_msg, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof la_err_msg)
    snprintf(la_err_msg + n, sizeof la_err_msg - (size_t)n, "%s", was);
  return st;
}

const char *la_error_message(void) { return la_err_msg; }
void la_error_clear(void) { la_err_msg[0] = 0; }
const char *la_error_reason(la_status st) {
  return st != LA_OK && la_err_msg[0] ? la_err_msg : la_status_string(st);
}

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
  case LA_ERR_WRITE: /* an output could not be written (disk full, quota, device error) */
  case LA_ERR_READ:  /* a read error in the middle of a readable, well-formed input */
    return 1;
  default:
    return 1;
  }
}

size_t la_dtype_size(la_dtype t) { return t == LA_F32 ? 4 : 8; }

const char *la_dtype_name(la_dtype t) {
  return t == LA_F32 ? "f32" : t == LA_F64 ? "f64" : "i64";
}
