#!/bin/sh
# The code explains itself through the project's own docs (docs/design.md §5.3): every citation
# must lead somewhere. Checks, over the sources, scripts and README of SRC:
#   1. each "§N" or "§N.M" names a numbered heading of docs/design.md;
#   2. each '§N "Title"' also finds Title in docs/design.md;
#   3. each docs/... file named (.md, .csv, .png) exists;
#   4. nothing cites the design brief the project was started from (DESIGN.md, CONTRACT.md,
#      STYLE.md in capitals): those are not part of the product.
# Usage: doc_refs.sh SRC
src=$1
design=$src/docs/design.md
[ -f "$design" ] || { echo "FAIL: $design missing"; exit 1; }
files=$(find "$src/core" "$src/dist" "$src/include" "$src/tools" "$src/tests" "$src/jobs" "$src/python" \
          -type f \( -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.sh' -o \
          -name '*.sbatch' -o -name 'CMakeLists.txt' \) ! -name doc_refs.sh | sort)
files="$files $src/README.md"
fail=0
# 1. numbered sections; headings look like "## 4. Algorithms" or "### 4.2 The chunkwise kernel"
secs=$(grep -hoE '§[0-9]+(\.[0-9]+)?' $files | sort -u)
nsec=0
for s in $secs; do
  n=${s#§}
  nsec=$((nsec + 1))
  case $n in # "## 4. Algorithms" for §4, "### 4.2 The chunkwise kernel" for §4.2
    *.*) pat="^#+ $(echo "$n" | sed 's/\./\\./')( |\$)" ;;
    *) pat="^#+ $n\.( |\$)" ;;
  esac
  if ! grep -qE "$pat" "$design"; then
    echo "FAIL: $s is cited but docs/design.md has no heading $n:"
    grep -nE "$s([^.0-9]|$)" $files | head -3
    fail=1
  fi
done
# 2. titled citations
ntit=0
tmp=${TMPDIR:-/tmp}/doc_refs.$$
grep -hoE '§[0-9]+(\.[0-9]+)? "[^"]+"' $files | sed 's/^§[0-9.]* "//; s/"$//' | sort -u > "$tmp"
while IFS= read -r t; do
  ntit=$((ntit + 1))
  if ! grep -qF -- "$t" "$design"; then
    echo "FAIL: a citation names \"$t\", which docs/design.md does not contain"
    fail=1
  fi
done < "$tmp"
rm -f "$tmp"
# 3. named files under docs/
nfile=0
for p in $(grep -hoE 'docs/[A-Za-z0-9_./-]+\.(md|csv|png)' $files | sort -u); do
  nfile=$((nfile + 1))
  if [ ! -f "$src/$p" ]; then
    echo "FAIL: $p is named but does not exist:"
    grep -nF "$p" $files | head -3
    fail=1
  fi
done
# 4. the brief
if grep -nE '(^|[^a-z/])(DESIGN|CONTRACT|STYLE)\.md' $files; then
  echo "FAIL: the lines above cite the design brief; cite docs/ instead"
  fail=1
fi
[ "$nsec" -gt 10 ] && [ "$nfile" -gt 5 ] || { echo "FAIL: found only $nsec sections and $nfile files: wrong SRC?"; exit 1; }
[ "$fail" = 0 ] && echo "ok: $nsec cited sections, $ntit titled citations and $nfile named docs/ files all exist"
exit $fail
