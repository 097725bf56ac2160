/* Status codes: one X-macro list gives the enum and the message strings. */
#ifndef LINATTN_STATUS_H
#define LINATTN_STATUS_H
#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message). The exit code of the program is derived in la_status_exit_code(). */
#define LA_STATUS_LIST(X)                                                        \
  X(LA_OK, 0, "success")                                                         \
  X(LA_ERR_ARG, 1, "invalid argument")                                           \
  X(LA_ERR_IO, 2, "input/output error")                                          \
  X(LA_ERR_FORMAT, 3, "malformed file")                                          \
  X(LA_ERR_SHAPE, 4, "shape mismatch")                                           \
  X(LA_ERR_NONFINITE, 5, "non-finite input value")                               \
  X(LA_ERR_DENOMINATOR, 6, "denominator policy violated")                        \
  X(LA_ERR_OVERFLOW, 7, "result overflows the floating-point range")             \
  X(LA_ERR_NOMEM, 8, "out of memory")                                            \
  X(LA_ERR_UNSUPPORTED, 9, "unsupported request")                                \
  X(LA_ERR_EXISTS, 10, "output exists (use --force)")                            \
  X(LA_ERR_MPI, 11, "MPI error")                                                 \
  X(LA_ERR_INTERNAL, 12, "internal error")                                       \
  X(LA_ERR_WRITE, 13, "cannot write output")                                     \
  X(LA_ERR_READ, 14, "cannot read input")

typedef enum {
#define LA_X_ENUM(name, value, msg) name = value,
  LA_STATUS_LIST(LA_X_ENUM)
#undef LA_X_ENUM
} la_status;

/* Not collective. Never returns NULL. */
const char *la_status_string(la_status s);

/* Exit code of docs/cli.md "Exit codes": 0 ok, 2 usage/bad input, 3 denominator, 1 anything
 * else (including LA_ERR_WRITE, a failed write of an output, and LA_ERR_READ, a read error in
 * the middle of an input that was readable and well-formed). The program's fifth code, 75
 * (EX_TEMPFAIL: `run --checkpoint` stopped at a checkpoint on a signal), is not an error and
 * has no status: program/run.c returns it. */
int la_status_exit_code(la_status s);

/* Errors with reasons (docs/design.md §6 "Errors"). la_error records a one-line message on
 * the calling thread and returns st, so a check reads
 *     LA_CHECK(n >= 0, LA_ERR_ARG, "la_engine_apply: n = %lld < 0", (long long)n);
 * la_error_message() is the last message recorded on this thread ("" after la_error_clear).
 * la_error_reason(st) is that message when st failed and one was recorded, otherwise
 * la_status_string(st). Not Collective; the message buffer is thread-local. */
la_status la_error(la_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prefix the reason so far: records fmt's text followed by la_error_reason(st), and returns
 * st, so that a caller names its part: la_error_prefix(st, "--q %s: ", path). */
la_status la_error_prefix(la_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *la_error_message(void);
void la_error_clear(void);
const char *la_error_reason(la_status st);

/* Return st with its message when cond is false. Always compiled in (user errors). */
#define LA_CHECK(cond, st, ...)                                   \
  do {                                                            \
    if (!(cond)) return la_error((st), __VA_ARGS__);              \
  } while (0)
/* Return the status of expr when it failed; its message stays recorded. */
#define LA_TRY(expr)                                              \
  do {                                                            \
    const la_status la_try_st_ = (expr);                          \
    if (la_try_st_ != LA_OK) return la_try_st_;                   \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
