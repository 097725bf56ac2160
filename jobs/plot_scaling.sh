#!/usr/bin/env bash
# Speedup and parallel efficiency against ranks, from the CSVs of jobs/scaling_strong.sbatch and
# jobs/scaling_weak.sbatch (gnuplot-nox), each with its ideal line (docs/cluster.md):
#   OUT/scaling_strong_speedup.png     S(P) = P0 T(P0) / T(P); ideal S = P (log-log)
#   OUT/scaling_strong_efficiency.png  E(P) = S(P) / P; ideal 1
#   OUT/scaling_weak_speedup.png       scaled speedup S(P) = P T(P0) / T(P); ideal S = P
#   OUT/scaling_weak_efficiency.png    E(P) = T(P0) / T(P); ideal 1
#   OUT/scaling_{strong,weak}.csv      the numbers behind them:
#                                      kind,series,ranks,n,seconds,speedup,efficiency
# T(P) is bench's `seconds` at P ranks (compute time, max over ranks, best of --repeat; the
# smallest when a CSV holds the same point twice); P0 is the series' smallest rank count. A
# series is one (impl, mode, map, features, heads, dk, dv, dtype, threads) and, for strong
# scaling, one n; for weak scaling, one n per rank (n / ranks). The GEMM-probe rows are not
# plotted. Usage: jobs/plot_scaling.sh [--out DIR] [--strong CSV]... [--weak CSV]...
# (at least one CSV; DIR defaults to the current folder). Exit 2 on bad usage, 1 on bad input.
set -euo pipefail
me=plot_scaling.sh
die() { echo "$me: error: $2" >&2; exit "$1"; }
OUT=. STRONG=() WEAK=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--strong|--weak) [ $# -ge 2 ] || die 2 "$1 needs a value"
      case "$1" in --out) OUT=$2 ;; --strong) STRONG+=("$2") ;; --weak) WEAK+=("$2") ;; esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) die 2 "unexpected argument '$1' (usage: $me [--out DIR] [--strong CSV]... [--weak CSV]...)" ;;
  esac
done
[ $(( ${#STRONG[@]} + ${#WEAK[@]} )) -gt 0 ] || die 2 "no CSV given (usage: $me [--out DIR] [--strong CSV]... [--weak CSV]...)"
for f in ${STRONG[@]+"${STRONG[@]}"} ${WEAK[@]+"${WEAK[@]}"}; do
  { [ -r "$f" ] && [ -f "$f" ]; } || die 1 "$f: not a readable file"
  case "$(head -n 1 "$f")" in impl,*ranks*seconds*) ;; *) die 1 "$f: not a linattn bench CSV (its header does not start 'impl,')" ;; esac
done
command -v gnuplot >/dev/null || die 1 "gnuplot not found (apt-get install gnuplot-nox)"
mkdir -p "$OUT" || die 1 "--out $OUT: cannot create the folder"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# $1 = strong|weak, then the CSVs. Writes $tmp/scaling_$1.csv and one "ranks speedup efficiency"
# file per series ($tmp/$1-NN.dat, its title in $tmp/$1-NN.name).
tables() {
  local kind=$1; shift
  awk -F, -v kind="$kind" -v dir="$tmp" '
    FNR == 1 { delete c; for (i = 1; i <= NF; i++) c[$i] = i
               split("impl mode map features heads dk dv dtype ranks threads n seconds", need, " ")
               for (i in need) if (!(need[i] in c)) { printf "%s: no column %s\n", FILENAME, need[i] > "/dev/stderr"; bad = 1; exit 1 }
               next }
    $c["impl"] ~ /gemm$/ || $c["seconds"] == "" || $c["seconds"] + 0 <= 0 { next }
    {
      p = $c["ranks"] + 0; n = $c["n"] + 0; t = $c["seconds"] + 0
      k = $c["impl"] " " $c["mode"] (($c["map"] != "") ? " " $c["map"] : "") \
          (($c["features"] != "") ? " m=" $c["features"] : "")
      k = k (kind == "strong" ? sprintf(" n=%d", n) : sprintf(" n/rank=%d", n / p))
      k = k sprintf(" H=%s dk=%s dv=%s %s %sthr", $c["heads"], $c["dk"], $c["dv"], $c["dtype"], $c["threads"])
      # the scan algorithm as requested (the scan_algorithm column; older CSVs have none):
      # a series per algorithm, its one-rank row included
      if ("scan_algorithm" in c && $c["scan_algorithm"] != "" && $c["scan_algorithm"] != "allreduce")
        k = k " scan=" $c["scan_algorithm"]
      if (!((k, p) in T) || t < T[k, p]) { T[k, p] = t; N[k, p] = n }
      if (!(k in base) || p < base[k]) base[k] = p
      ser[k] = 1; pts[k, p] = 1
    }
    END {
      if (bad) exit 1
      s = 0
      for (k in ser) {
        f = sprintf("%s/%s-%02d.dat", dir, kind, ++s)
        print k > (substr(f, 1, length(f) - 4) ".name")
        p0 = base[k]; t0 = T[k, p0]
        for (kp in pts) {
          split(kp, a, SUBSEP); if (a[1] != k) continue
          p = a[2] + 0; t = T[k, p]
          sp = (kind == "strong") ? p0 * t0 / t : p * t0 / t
          printf "%d %.6g %.6g\n", p, sp, sp / p > f
          printf "%s,%s,%d,%d,%.6g,%.6g,%.6g\n", kind, k, p, N[k, p], t, sp, sp / p > (dir "/rows_" kind)
        }
        close(f); system("sort -n -k1,1 -o \"" f "\" \"" f "\"")
      }
    }' "$@" || die 1 "$* : cannot read the columns (see above)"
  ls "$tmp/$kind"-*.dat >/dev/null 2>&1 || die 1 "$*: no timing rows (impl linear, softmax or pblas)"
  { echo "kind,series,ranks,n,seconds,speedup,efficiency"; sort -t, -k2,2 -k3,3n "$tmp/rows_$kind"; } > "$tmp/scaling_$kind.csv"
}

# $1 = strong|weak: the two PNGs.
plots() {
  local kind=$1 sp="" ef="" f name pmin pmax emax
  while IFS=$'\t' read -r name f; do
    sp+="'$f' using 1:2 with linespoints lw 2 pt 7 title '$name', "
    ef+="'$f' using 1:3 with linespoints lw 2 pt 7 title '$name', "
  done < <(for f in "$tmp/$kind"-*.dat; do printf '%s\t%s\n' "$(cat "${f%.dat}.name")" "$f"; done | sort)
  pmin=$(cat "$tmp/$kind"-*.dat | sort -n -k1,1 | head -n 1 | cut -d' ' -f1)
  pmax=$(cat "$tmp/$kind"-*.dat | sort -n -k1,1 | tail -n 1 | cut -d' ' -f1)
  emax=$(cat "$tmp/$kind"-*.dat | awk '$3 > m {m = $3} END {print (m > 1 ? m : 1) * 1.1}')
  local what="strong scaling (fixed total n)" spl="speedup  P0 T(P0) / T(P)" efl="parallel efficiency  speedup / P"
  if [ "$kind" = weak ]; then
    what="weak scaling (fixed n per rank)" spl="scaled speedup  P T(P0) / T(P)" efl="parallel efficiency  T(P0) / T(P)"
  fi
  gnuplot <<EOF || die 1 "gnuplot failed on the $kind plots"
set terminal pngcairo size 1000,750 font ",11"
set key below maxrows 4
set grid
set logscale x 2
set xrange [${pmin} / 1.25 : ${pmax} * 1.25]
set xlabel "ranks P"
set output "$tmp/scaling_${kind}_speedup.png"
set logscale y 2
set format y "%g"
set ylabel "$spl"
set title "linattn bench, $what: speedup (ideal: S = P)"
plot x with lines dt 2 lw 2 lc rgb "black" title "ideal", ${sp%, }
set output "$tmp/scaling_${kind}_efficiency.png"
unset logscale y
set yrange [0:${emax}]
set ylabel "$efl"
set title "linattn bench, $what: parallel efficiency (ideal: 1)"
plot 1 with lines dt 2 lw 2 lc rgb "black" title "ideal", ${ef%, }
EOF
}

done_files=()
if [ ${#STRONG[@]} -gt 0 ]; then tables strong "${STRONG[@]}"; plots strong
  done_files+=(scaling_strong_speedup.png scaling_strong_efficiency.png scaling_strong.csv); fi
if [ ${#WEAK[@]} -gt 0 ]; then tables weak "${WEAK[@]}"; plots weak
  done_files+=(scaling_weak_speedup.png scaling_weak_efficiency.png scaling_weak.csv); fi
for f in "${done_files[@]}"; do
  [ -s "$tmp/$f" ] || die 1 "$f was not written"
done
# only complete files reach OUT: each is renamed there from a temporary in the same folder
for f in "${done_files[@]}"; do
  cp "$tmp/$f" "$OUT/.$f.tmp$$" && mv -f "$OUT/.$f.tmp$$" "$OUT/$f"
done
echo "$me: wrote ${done_files[*]/#/$OUT/}" >&2
