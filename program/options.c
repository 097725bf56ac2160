/* Parsing, --help and --print-options from one option table (options.h; docs/cli.md
 * "Errors" for the message format: one line naming the option and the value). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "options.h"

typedef struct {
  int64_t i;
  double x;
} la_optval;

#define FIELD(o, r, T) ((T *)((char *)(o) + (r)->off))
#define CFIELD(o, r, T) ((const T *)((const char *)(o) + (r)->off))

static int for_sub(const la_opt *r, unsigned sub) { return (r->subs & sub) != 0; }

static const char *choice(const la_opt *r, int v) {
  if (r->names) {
    for (int i = 0; i < v; i++)
      if (!r->names[i]) return NULL;
    return r->names[v];
  }
  return r->name_of(v);
}

/* The accepted names, joined: "a | b" (sep " | "), or "a, b or c" (sep ", ", last " or "). */
static void choices(const la_opt *r, const char *sep, const char *last, char *buf, size_t len) {
  int c = 0, total = 0;
  for (int v = 0; choice(r, v); v++) total += !r->refuse_value || !r->refuse_value(v);
  buf[0] = 0;
  for (int v = 0; choice(r, v); v++) {
    if (r->refuse_value && r->refuse_value(v)) continue;
    size_t l = strlen(buf);
    snprintf(buf + l, len - l, "%s%s", c == 0 ? "" : c == total - 1 && last ? last : sep,
             choice(r, v));
    c++;
  }
}

/* 2^k for the large powers of two, as the bounds are usually written. */
static void bound(int64_t v, char *buf, size_t len) {
  if (v >= (1 << 20) && (v & (v - 1)) == 0) {
    int k = 0;
    while (((int64_t)1 << k) != v) k++;
    snprintf(buf, len, "2^%d", k);
  } else {
    snprintf(buf, len, "%lld", (long long)v);
  }
}

/* A real bound as --help prints it: %g without the exponent's sign and zeros (1e6, 1e-3). */
static void fbound(double v, char *buf, size_t len) {
  char t[32], *e;
  snprintf(t, sizeof t, "%g", v);
  if ((e = strchr(t, 'e')) != NULL) {
    const char *d = e + 1;
    const int neg = *d == '-';
    if (*d == '+' || *d == '-') d++;
    while (*d == '0' && d[1]) d++;
    snprintf(buf, len, "%.*se%s%s", (int)(e - t), t, neg ? "-" : "", d);
  } else {
    snprintf(buf, len, "%s", t);
  }
}

/* What the values may be, as errors and --help say it: "in [1, 4096]", "an integer >= 0". */
static void range(const la_opt *r, char *buf, size_t len) {
  char lo[32], hi[32];
  if (r->range) {
    snprintf(buf, len, "%s", r->range);
  } else if (r->kind == LA_OPT_INT && r->hi >= INT64_MAX / 2) {
    snprintf(buf, len, "an integer >= %lld", (long long)r->lo);
  } else if (r->kind == LA_OPT_INT) {
    bound(r->lo, lo, sizeof lo);
    bound(r->hi, hi, sizeof hi);
    snprintf(buf, len, "in [%s, %s]", lo, hi);
  } else if (r->kind == LA_OPT_F64 && r->fhi < 1e30) {
    fbound(r->flo, lo, sizeof lo);
    fbound(r->fhi, hi, sizeof hi);
    snprintf(buf, len, "a number in %c%s, %s]", r->open_lo ? '(' : '[', lo, hi);
  } else if (r->kind == LA_OPT_F64) {
    snprintf(buf, len, "a finite number %s %g", r->open_lo ? ">" : ">=", r->flo);
  } else if (r->kind == LA_OPT_BYTES) {
    bound(r->lo, lo, sizeof lo);
    snprintf(buf, len, "a byte count >= %s, optionally with a suffix K, M, G or T (or KiB, MiB, "
             "GiB, TiB: powers of 1024)", lo);
  } else if (r->kind == LA_OPT_ENUM) {
    choices(r, " | ", NULL, buf, len);
  } else {
    buf[0] = 0;
  }
}

/* A byte count: digits, then nothing or one suffix K, M, G, T, KiB, MiB, GiB, TiB (powers
 * of 1024, any case). 0 and *v set, or -1 (no sign, no space, no fraction, no overflow). */
static int parse_bytes(const char *s, int64_t *v) {
  static const char units[] = "kmgt";
  if (*s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  int shift = 0;
  if (*end) {
    const char *u = strchr(units, end[0] | 0x20);
    const int ib = (end[1] | 0x20) == 'i' && (end[2] | 0x20) == 'b' && !end[3];
    if (!u || (end[1] && !ib)) return -1;
    shift = 10 * (int)(u - units + 1);
  }
  if (errno || x > (INT64_MAX >> shift)) return -1;
  *v = (int64_t)x << shift;
  return 0;
}

static la_status parse_value(const la_opt *r, const char *s, la_optval *v) {
  char what[512], *end;
  if (r->kind == LA_OPT_BYTES) {
    if (!parse_bytes(s, &v->i) && v->i >= r->lo && v->i <= r->hi) return LA_OK;
    range(r, what, sizeof what);
    return la_error(LA_ERR_ARG, "%s: '%s' is not %s", r->name, s, what);
  }
  if (r->kind == LA_OPT_INT || r->kind == LA_OPT_F64) {
    errno = 0;
    int bad;
    if (r->kind == LA_OPT_INT) {
      long long x = strtoll(s, &end, 10);
      bad = errno || end == s || *end || x < r->lo || x > r->hi;
      v->i = x;
    } else {
      double x = strtod(s, &end);
      bad = errno || end == s || *end || !(r->open_lo ? x > r->flo : x >= r->flo) || !(x <= r->fhi);
      v->x = x;
    }
    if (!bad) return LA_OK;
    range(r, what, sizeof what);
    return la_error(LA_ERR_ARG, "%s: '%s' is not %s", r->name, s, what);
  }
  /* LA_OPT_ENUM */
  int found = -1;
  if (r->lookup) {
    if (r->lookup(s, &found)) found = -1;
  } else {
    for (int i = 0; choice(r, i) && found < 0; i++)
      if (!strcmp(s, choice(r, i))) found = i;
  }
  const char *why = found >= 0 && r->refuse_value ? r->refuse_value(found) : NULL;
  if (found >= 0 && !why) {
    v->i = r->values ? r->values[found] : found;
    return LA_OK;
  }
  choices(r, ", ", " or ", what, sizeof what);
  if (why) return la_error(LA_ERR_ARG, "%s: %s %s; use %s", r->name, s, why, what);
  if (r->noun) {
    choices(r, ", ", NULL, what, sizeof what);
    return la_error(LA_ERR_ARG, "%s: unknown %s '%s' (%s)", r->name, r->noun, s, what);
  }
  return la_error(LA_ERR_ARG, "%s: '%s' is not %s", r->name, s, what);
}

static void store(const la_opt *r, void *o, const la_optval *v, const char *s) {
  switch (r->kind) {
  case LA_OPT_FLAG:
  case LA_OPT_ENUM:
    *FIELD(o, r, int) = (int)v->i;
    break;
  case LA_OPT_BYTES:
    *FIELD(o, r, int64_t) = v->i;
    break;
  case LA_OPT_INT:
    if (r->size == sizeof(int64_t)) *FIELD(o, r, int64_t) = v->i;
    else *FIELD(o, r, int) = (int)v->i;
    break;
  case LA_OPT_F64:
    *FIELD(o, r, double) = v->x;
    break;
  case LA_OPT_STR:
  case LA_OPT_CUSTOM:
    *FIELD(o, r, const char *) = s;
    break;
  }
}

/* One value (argv or a default) of row r into o. */
static la_status apply(const la_opt *r, const char *s, void *o) {
  la_optval v = {r->lo, 0};
  if (r->list) {
    char buf[4096], *tok[LA_LIST_MAX];
    int c = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *p = buf;; p++) { /* comma-separated, no empty item */
      char *q = strchr(p, ',');
      if (q) *q = 0;
      if (!*p || c >= r->list || strlen(s) >= sizeof buf)
        return la_error(LA_ERR_ARG, "%s: '%s' is not a comma-separated list of at most %d values",
                        r->name, s, r->list);
      tok[c++] = p;
      if (!q) break;
      p = q;
    }
    la_list *l = FIELD(o, r, la_list);
    for (int j = 0; j < c; j++) {
      LA_TRY(parse_value(r, tok[j], &v));
      l->i[j] = v.i;
      l->x[j] = v.x;
    }
    l->n = c;
    return LA_OK;
  }
  if (r->kind == LA_OPT_INT || r->kind == LA_OPT_F64 || r->kind == LA_OPT_ENUM ||
      r->kind == LA_OPT_BYTES)
    LA_TRY(parse_value(r, s, &v));
  if (r->kind == LA_OPT_CUSTOM) LA_TRY(r->set(r, s, o));
  if (r->refuse) return la_error(LA_ERR_ARG, "%s: %s", r->name, r->refuse);
  if (r->size) store(r, o, &v, s);
  return LA_OK;
}

la_status la_opts_defaults(const la_opt *rows, int nrows, unsigned sub, void *o) {
  for (int i = 0; i < nrows; i++) {
    const la_opt *r = &rows[i];
    if (!for_sub(r, sub)) continue;
    if (r->init) r->init(r, o);
    if (!r->def) continue;
    if (r->kind == LA_OPT_FLAG) { /* "on" or "off" */
      if (r->size) *FIELD(o, r, int) = !strcmp(r->def, "on") ? (int)r->lo : 0;
    } else {
      LA_TRY(apply(r, r->def, o));
    }
  }
  return LA_OK;
}

la_status la_opts_parse(const la_opt *rows, int nrows, const la_opt_sub *subs, int nsubs,
                        int isub, int argc, char **argv, int first, void *o,
                        unsigned char *given) {
  const unsigned sub = subs[isub].bit;
  unsigned char seen_row[LA_OPT_ROWS_MAX] = {0};
  LA_CHECK(nrows <= LA_OPT_ROWS_MAX, LA_ERR_INTERNAL, "option table of %d rows > %d", nrows,
           LA_OPT_ROWS_MAX);
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    const la_opt *r = NULL;
    unsigned elsewhere = 0;
    for (int j = 0; j < nrows; j++)
      if (!strcmp(a, rows[j].name) || (rows[j].alias && !strcmp(a, rows[j].alias))) {
        if (for_sub(&rows[j], sub) && !r) r = &rows[j];
        elsewhere |= rows[j].subs;
      }
    if (!r && elsewhere) { /* an option of another subcommand */
      char where[256] = "";
      int c = 0, total = 0;
      for (int s = 0; s < nsubs; s++) total += (elsewhere & subs[s].bit) != 0;
      for (int s = 0; s < nsubs; s++)
        if (elsewhere & subs[s].bit) {
          size_t l = strlen(where);
          snprintf(where + l, sizeof where - l, "%s`linattn %s`",
                   c == 0 ? "" : c == total - 1 ? " and " : ", ", subs[s].name);
          c++;
        }
      return la_error(LA_ERR_ARG, "%s belongs to %s, not `linattn %s`", a, where,
                      subs[isub].name);
    }
    if (!r && strncmp(a, "--", 2) == 0)
      return la_error(LA_ERR_ARG, "unknown option '%s' (see linattn %s --help)", a,
                      subs[isub].name);
    if (!r) return la_error(LA_ERR_ARG, "unexpected argument '%s'", a);
    const char *val = NULL;
    if (r->kind != LA_OPT_FLAG) {
      if (i + 1 >= argc) return la_error(LA_ERR_ARG, "option %s needs a value", a);
      val = argv[++i];
    }
    /* given twice, or two rows that set the same field (--progress and --no-progress) */
    const int ri = (int)(r - rows);
    LA_CHECK(!seen_row[ri], LA_ERR_ARG, "option %s is given twice", r->name);
    for (int j = 0; j < nrows; j++)
      LA_CHECK(!(seen_row[j] && j != ri && r->size && rows[j].size && rows[j].off == r->off),
               LA_ERR_ARG, "options %s and %s conflict: both set the same thing", rows[j].name,
               r->name);
    seen_row[ri] = 1;
    LA_TRY(apply(r, val, o));
    if (r->seen) *(int *)((char *)o + r->seen) = 1;
  }
  if (given) memcpy(given, seen_row, (size_t)nrows);
  return LA_OK;
}

/* ---- --help ---- */

static const char *word_end(const char *p) {
  while (*p && *p != ' ') p++;
  return p;
}

/* Words of text, wrapped to `width` columns, continuing at column `indent`; col is the
 * current column. */
static void wrap(FILE *f, const char *text, int col, int indent, int width) {
  const char *p = text;
  int first = 1;
  while (*p) {
    while (*p == ' ') p++;
    const char *e = word_end(p);
    for (;;) { /* keep "r = 2m" and "x >= 0" on one line */
      const char *t = e;
      while (*t == ' ') t++;
      const char *te = word_end(t);
      if (te - t > 2 || !strchr("<>=", *t) || !*te) break;
      while (*te == ' ') te++;
      e = word_end(te);
    }
    int w = (int)(e - p);
    if (w == 0) break;
    if (!first && col + 1 + w > width) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (!first) {
      fputc(' ', f);
      col++;
    }
    fwrite(p, 1, (size_t)w, f);
    col += w;
    first = 0;
    p = e;
  }
  fputc('\n', f);
}

enum { HELP_COL = 27, HELP_WIDTH = 95 };

static void help_entry(FILE *f, const la_opt *r) {
  char left[128], vals[512] = "", text[2048];
  snprintf(left, sizeof left, "  %s%s%s%s%s", r->alias ? r->alias : "", r->alias ? ", " : "",
           r->name, r->meta ? " " : "", r->meta ? r->meta : "");
  if (!r->refuse && r->kind != LA_OPT_FLAG && r->kind != LA_OPT_STR && r->kind != LA_OPT_CUSTOM) {
    char rg[448];
    range(r, rg, sizeof rg);
    snprintf(vals, sizeof vals, "; %s%s", !r->list ? "" : r->kind == LA_OPT_ENUM
                                                     ? "comma-separated, of "
                                                     : "comma-separated, each ", rg);
  }
  const char *def = r->def ? r->def : r->def_text;
  snprintf(text, sizeof text, "%s%s%s%s%s", r->help, vals, def ? " (default " : "",
           def ? def : "", def ? ")" : "");
  int col = (int)strlen(left);
  fputs(left, f);
  if (col > HELP_COL - 2) {
    fprintf(f, "\n%*s", HELP_COL, "");
  } else {
    fprintf(f, "%*s", HELP_COL - col, "");
  }
  wrap(f, text, HELP_COL, HELP_COL, HELP_WIDTH);
}

void la_opts_help(FILE *f, const la_opt *rows, int nrows, unsigned sub,
                  const char *const *titles) {
  for (int g = 0; titles[g]; g++) {
    int shown = 0;
    for (int i = 0; i < nrows; i++) {
      const la_opt *r = &rows[i];
      if (r->group != g || !for_sub(r, sub) || (r->flags & LA_OPT_HIDDEN)) continue;
      if (!shown++) fprintf(f, "%s:\n", titles[g]);
      help_entry(f, r);
    }
  }
}

/* ---- --print-options ---- */

/* Shortest %g that reads back as x. */
static void number(char *buf, size_t len, double x) {
  snprintf(buf, len, "%.15g", x);
  if (strtod(buf, NULL) != x) snprintf(buf, len, "%.17g", x);
}

/* The name of enum value v. */
static const char *enum_name(const la_opt *r, int v) {
  if (!r->values) return choice(r, v);
  for (int i = 0; choice(r, i); i++)
    if (r->values[i] == v) return choice(r, i);
  return "?";
}

static void value(const la_opt *r, const void *o, char *buf, size_t len) {
  buf[0] = 0;
  if (r->list) {
    const la_list *l = CFIELD(o, r, la_list);
    for (int j = 0; j < l->n; j++) {
      size_t k = strlen(buf);
      char x[64];
      if (r->kind == LA_OPT_ENUM) snprintf(x, sizeof x, "%s", enum_name(r, (int)l->i[j]));
      else if (r->kind == LA_OPT_F64) number(x, sizeof x, l->x[j]);
      else snprintf(x, sizeof x, "%lld", (long long)l->i[j]);
      snprintf(buf + k, len - k, "%s%s", j ? "," : "", x);
    }
    return;
  }
  switch (r->kind) {
  case LA_OPT_FLAG:
    snprintf(buf, len, "%s", *CFIELD(o, r, int) ? "on" : "off");
    break;
  case LA_OPT_ENUM:
    snprintf(buf, len, "%s", enum_name(r, *CFIELD(o, r, int)));
    break;
  case LA_OPT_INT:
    snprintf(buf, len, "%lld", r->size == sizeof(int64_t) ? (long long)*CFIELD(o, r, int64_t)
                                                           : (long long)*CFIELD(o, r, int));
    break;
  case LA_OPT_F64:
    number(buf, len, *CFIELD(o, r, double));
    break;
  case LA_OPT_BYTES:
    snprintf(buf, len, "%lld", (long long)*CFIELD(o, r, int64_t));
    break;
  case LA_OPT_STR:
  case LA_OPT_CUSTOM: {
    const char *s = *CFIELD(o, r, const char *);
    snprintf(buf, len, "%s", s ? s : "");
    break;
  }
  }
}

void la_opts_print(FILE *f, const la_opt *rows, int nrows, unsigned sub, const void *o,
                   unsigned skip) {
  for (int i = 0; i < nrows; i++) {
    const la_opt *r = &rows[i];
    if (!for_sub(r, sub) || !r->size || r->refuse || (r->flags & (LA_OPT_NOPRINT | skip)))
      continue;
    int dup = 0;
    for (int j = 0; j < i; j++)
      dup |= for_sub(&rows[j], sub) && rows[j].size && rows[j].off == r->off;
    if (dup) continue;
    char buf[4096];
    value(r, o, buf, sizeof buf);
    fprintf(f, "%s=%s\n", r->name + 2, buf);
  }
}
