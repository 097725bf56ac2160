#!/bin/sh
# The code explains itself through the project's own docs (docs/design.md §5.3): every citation
# must lead somewhere. Checks, over the sources, scripts and README of SRC:
#   1. each "§N" or "§N.M" names a numbered heading of docs/design.md;
#   2. each '§N "Title"' also finds Title in docs/design.md;
#   3. each docs/... file named (.md, .csv, .png) exists;
#   4. nothing cites the design brief the project was started from (DESIGN.md, CONTRACT.md,
#      STYLE.md in capitals): those are not part of the product;
#   5. each titled citation of the README or of a page of docs/ ('README "Title"',
#      'docs/cli.md "Bad input"'), here and in docs/*.md, finds Title in that file: in a
#      heading, a bold lead-in (**Title) or a code name (`Title`);
#   6. README.md: every relative link ([text](path#anchor), anchors included) and every path
#      it names under the checkout's folders (docs/, jobs/, tests/, tools/, python/, ...)
#      exists;
#   7. README.md: every --option it names exists. A line (backslash continuations joined)
#      that says `linattn SUB` (run, grad, bench, eval) holds SUB's options after it: each
#      must be in `LINATTN SUB --help` (or, without LINATTN, docs/cli.md's table of SUB).
#      Any other option must be an option of linattn (any subcommand's --help, or an
#      option table of docs/cli.md), or appear in a project script or module named on the
#      same line (jobs/x.sh, python3 -m linattn.downstream, ...), or be one of the few
#      options of mpirun, srun and sbatch listed below.
# Usage: doc_refs.sh SRC [LINATTN]   (LINATTN: the built program, for check 7)
src=$1
bin=${2:-}
design=$src/docs/design.md
[ -f "$design" ] || { echo "FAIL: $design missing"; exit 1; }
files=$(find "$src/core" "$src/dist" "$src/program" "$src/include" "$src/tools" "$src/tests" "$src/jobs" "$src/python" \
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
tmp=${TMPDIR:-/tmp}/doc_refs.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
readme=$src/README.md
# 5. titled citations of the README and of docs/*.md
ncite=0
grep -hoE '(README(\.md)?|docs/[A-Za-z0-9_/]+\.md),? "[^"]+"' $files "$src"/docs/*.md | sort -u \
  > "$tmp/cites"
while IFS= read -r c; do
  ncite=$((ncite + 1))
  f=${c%%[, ]\"*}; f=${f%,}
  t=${c#*\"}; t=${t%\"}
  case $f in README*) f=README.md ;; esac
  if [ ! -f "$src/$f" ]; then
    echo "FAIL: $c: $f does not exist"; fail=1; continue
  fi
  if ! grep -E '^#+ ' "$src/$f" | grep -qiF -- "$t" &&
     ! grep -E '^[[:space:]]*(- )?[*][*]' "$src/$f" | grep -qF -- "$t" &&
     ! grep -qF -- "\`$t" "$src/$f"; then
    echo "FAIL: $c is cited, but $f has no heading, bold lead-in or code name \"$t\":"
    grep -rnF -- "$c" $files "$src"/docs/*.md | head -3
    fail=1
  fi
done < "$tmp/cites"
# 6. the README's links and paths
slug() { # GitHub's heading anchors: lower case, punctuation dropped, spaces to -
  sed -E 's/^#+ +//; s/[`*]//g' | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}
nlink=0
grep -oE '\]\([^) ]+\)' "$readme" | sed 's/^](//; s/)$//' | sort -u > "$tmp/links"
while IFS= read -r l; do
  case $l in http://*|https://*|mailto:*) continue ;; esac
  nlink=$((nlink + 1))
  p=${l%%#*}; a=; case $l in *#*) a=${l#*#} ;; esac
  [ -n "$p" ] || p=README.md
  if [ ! -e "$src/$p" ]; then
    echo "FAIL: README.md links to $l, and $p does not exist"; fail=1; continue
  fi
  if [ -n "$a" ] && ! grep -E '^#+ ' "$src/$p" | slug | grep -qxF -- "$a"; then
    echo "FAIL: README.md links to $l, and $p has no heading with the anchor #$a"; fail=1
  fi
done < "$tmp/links"
npath=0
grep -oE '(^|[^A-Za-z0-9_./~$-])(docs|jobs|tests|tools|python|core|dist|program|include|cmake|\.ci)/[A-Za-z0-9_./-]*' \
  "$readme" | sed -E 's/^[^A-Za-z.]//; s/[.,:]+$//' | grep -v '[*{]' | sort -u > "$tmp/paths"
while IFS= read -r p; do
  npath=$((npath + 1))
  if [ ! -e "$src/$p" ]; then
    echo "FAIL: README.md names $p, which does not exist:"
    grep -nF -- "$p" "$readme" | head -3
    fail=1
  fi
done < "$tmp/paths"
# 7. the README's options
opts() { grep -oE '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' | sed 's/^[^-]*//'; }
# docs/cli.md's option tables, per section ("## linattn run", ...), and all of them
awk -v d="$tmp" '/^## /{ s = $0; sub(/^## (linattn )?/, "", s); gsub(/[^a-z]/, "_", s) }
     /^\| `--/{ split($0, c, "|"); print c[2] > (d "/cli_" s) ; print c[2] > (d "/cli_all") }' \
  "$src/docs/cli.md"
for s in run grad bench eval; do
  { [ -f "$tmp/cli_$s" ] && opts < "$tmp/cli_$s"; printf -- '--help\n--print-options\n'; } \
    > "$tmp/opts_$s"
done
cat "$tmp/opts_run" >> "$tmp/opts_grad"  # grad takes every option of run
opts < "$tmp/cli_all" > "$tmp/all"
grep -qF -- '`--print-options`' "$src/docs/cli.md" && echo --print-options >> "$tmp/all"
echo --help >> "$tmp/all"
for s in run grad bench eval; do
  if [ -n "$bin" ]; then
    "$bin" "$s" --help > "$tmp/help" 2>&1 || { echo "FAIL: $bin $s --help"; fail=1; }
    opts < "$tmp/help" | sort -u > "$tmp/sub_$s"
  else
    cp "$tmp/opts_$s" "$tmp/sub_$s"
  fi
  cat "$tmp/sub_$s" >> "$tmp/all"
done
sort -u -o "$tmp/all" "$tmp/all"
# options of other programs that the README's commands use: mpirun, srun, sbatch
ext="--bind-to --mpi --nodes --ntasks-per-node --cpus-per-task"
nopt=0
awk '{ if (sub(/\\$/, "")) { buf = buf $0 " "; next } print NR "\t" buf $0; buf = "" }' "$readme" \
  > "$tmp/lines"
while IFS="$(printf '\t')" read -r n line; do
  case $line in *--[a-z]*) ;; *) continue ;; esac
  sub=; rest=$line; head=$line
  m=$(printf '%s\n' "$line" | grep -oE '(^|[ /`])linattn (run|grad|bench|eval)([ `]|$)' | head -1)
  if [ -n "$m" ]; then
    sub=$(printf '%s\n' "$m" | sed -E 's/.*linattn (run|grad|bench|eval).*/\1/')
    head=${line%%"$m"*}; rest=${line#*"$m"}
  fi
  # project files named on the line, whose own options count
  own=$(printf '%s\n' "$line" | grep -oE '(jobs|tests|tools)/[A-Za-z0-9_./-]+\.(sh|sbatch|py)' |
        sed "s|^|$src/|")
  mod=$(printf '%s\n' "$line" | grep -oE 'python3 -m linattn\.[a-z_.]+' | sed 's/.* linattn\.//')
  [ -n "$mod" ] && own="$own $src/python/linattn/$(echo "$mod" | tr . /)"
  for part in head rest; do
    if [ $part = rest ]; then text=$rest; set=$tmp/sub_$sub; else text=$head; set=$tmp/all; fi
    [ -n "$sub" ] || [ $part = head ] || continue
    for o in $(printf '%s\n' "$text" | opts); do
      nopt=$((nopt + 1))
      grep -qxF -- "$o" "$set" && continue
      if [ $part = head ]; then
        case " $ext " in *" $o "*) continue ;; esac
        ok=
        for f in $own; do
          [ -e "$f" ] && grep -rqF -- "$o" "$f" && { ok=1; break; }
        done
        [ -n "$ok" ] && continue
        echo "FAIL: README.md line $n names $o, which is not an option of linattn (--help, docs/cli.md) nor of a script on that line"
      else
        echo "FAIL: README.md line $n names $o after 'linattn $sub', and linattn $sub has no such option"
      fi
      fail=1
    done
  done
done < "$tmp/lines"
[ "$nsec" -gt 10 ] && [ "$nfile" -gt 5 ] && [ "$nlink" -gt 5 ] && [ "$nopt" -gt 20 ] ||
  { echo "FAIL: found only $nsec sections, $nfile files, $nlink links and $nopt options: wrong SRC?"; exit 1; }
[ "$fail" = 0 ] && echo "ok: $nsec cited sections, $ntit titled citations and $nfile named docs/ files all exist;" \
  "$ncite titled citations of README and docs/ pages find their titles; the README's $nlink links," \
  "$npath paths and $nopt option mentions all exist"
exit $fail
