/* The unit tests' one assertion: count, and on failure print the place, the condition and a
 * message, then go on (main returns nfail != 0). check_tag prefixes the failure lines (the MPI
 * tests put the rank there). */
#ifndef LINATTN_TESTS_CHECK_H
#define LINATTN_TESTS_CHECK_H
#include <math.h>
#include <stdio.h>
#include "linattn/status.h"

/* The larger of a running worst error and a new one, where a NaN anywhere stays NaN, so that
 * every `worst <= tol` check fails on it (fmax would drop the NaN and keep the old value). */
static inline double worse(double acc, double e) {
  return (isnan(acc) || isnan(e)) ? NAN : (e > acc ? e : acc);
}

/* st, with the reason a failed call recorded (la_error, docs/design.md §6 "Errors") copied
 * into buf ("" on success), for the checks and messages that read it after later calls. */
static inline la_status why(la_status st, char *buf, size_t len) {
  snprintf(buf, len, "%s", st == LA_OK ? "" : la_error_message());
  return st;
}

static int npass, nfail;
static const char *check_tag = "";
#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (cond) {                                                           \
      npass++;                                                            \
    } else {                                                              \
      nfail++;                                                            \
      printf("%sFAIL %s:%d: %s: ", check_tag, __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                                \
      printf("\n");                                                       \
    }                                                                     \
  } while (0)
#endif
