#!/bin/sh
# One error idiom (docs/design.md §6 "Errors"): in the libraries, the program, the Python
# binding's C layer and the tools, no function takes a message buffer (char *err, size_t
# errlen), and no failure is a bare `return LA_ERR_*;` without its reason (la_error,
# LA_CHECK). The one exception is la_write_status (core/io/outfile.c), an errno-to-status mapping
# whose callers record the reason. Usage: error_idiom.sh SRC
src=$1
cd "$src" || exit 1
dirs="core dist program include python/capi tools"
files=$(find $dirs -name '*.c' -o -name '*.h' | sort)
[ -n "$files" ] || { echo "FAIL: no sources under $src"; exit 1; }
rc=0
buf=$(grep -nE 'size_t +errlen|char \*err, *size_t' $files)
if [ -n "$buf" ]; then
  echo "FAIL: a message buffer parameter (record the reason with la_error instead):"
  echo "$buf"
  rc=1
fi
bare=$(for f in $files; do
  awk -v f="$f" '
    /^la_status la_write_status\(/ { skip = 1 }
    skip && /^}/ { skip = 0; next }
    !skip && /return LA_ERR_[A-Z_]+;/ { print f ":" FNR ": " $0 }' "$f"
done)
if [ -n "$bare" ]; then
  echo "FAIL: a bare return of a failure status (give its reason: la_error or LA_CHECK):"
  echo "$bare"
  rc=1
fi
n=$(echo "$files" | wc -l)
[ $rc -eq 0 ] && echo "ok: $n files under $dirs: no message buffer, no bare return LA_ERR_*"
exit $rc
