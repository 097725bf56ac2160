#!/usr/bin/env bash
# PNG plots from `linattn bench` CSVs (gnuplot-nox):
#   OUT/bench_tokens.png      tokens/s against n, linear (every map) and the exact baselines,
#                             both modes, log-log: where linear overtakes softmax and pblas;
#   OUT/bench_efficiency.png  the linear rows' `efficiency` column: GFLOP/s over ranks x the
#                             best GEMM rate of the same run (docs/cli.md); for CSVs from before
#                             that column, the same from their --gemm-probe rows (f32: the larger
#                             of sgemm and k512gemm (k256gemm), f64: dgemm, at the row's threads).
# Series are keyed by impl, mode, map, features, ranks x threads. --threads/--ranks keep only
# those rows. Usage: jobs/plot.sh [--out DIR] [--threads T] [--ranks P] CSV...
set -euo pipefail
OUT=docs THREADS="" RANKS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "plot.sh: error: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "plot.sh: error: no CSV given (usage: jobs/plot.sh [--out DIR] CSV...)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: error: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One data file per series: "n tokens_per_s efficiency". Column positions come from each header.
awk -F, -v dir="$tmp" -v T="$THREADS" -v P="$RANKS" '
  FNR == 1 { delete c; for (i = 1; i <= NF; i++) c[$i] = i; next }
  $c["impl"] ~ /gemm$/ { d = ($c["impl"] == "dgemm") ? "f64" : "f32"
                        if ($c["gflops"] > sg[d, $c["threads"]]) sg[d, $c["threads"]] = $c["gflops"]; next }
  (T != "" && $c["threads"] != T) || (P != "" && $c["ranks"] != P) { next }
  {
    k = $c["impl"] " " $c["mode"]
    if ($c["impl"] == "linear") k = k " " $c["map"] ($c["features"] != "" ? " m=" $c["features"] : "")
    k = k " (" $c["ranks"] "x" $c["threads"] ")"
    key[k] = 1; n[k, ++cnt[k]] = $c["n"]; tps[k, cnt[k]] = $c["tokens_per_s"]
    b = sg[$c["dtype"], $c["threads"]] * $c["ranks"]
    eff[k, cnt[k]] = ("efficiency" in c && $c["efficiency"] != "") ? $c["efficiency"] : (b > 0 ? $c["gflops"] / b : "NaN")
  }
  END {
    s = 0
    for (k in key) {
      f = sprintf("%s/s%02d.dat", dir, ++s); print k > (dir "/s" sprintf("%02d", s) ".name")
      for (i = 1; i <= cnt[k]; i++)
        printf "%s %s %s\n", n[k, i], tps[k, i], eff[k, i] > f
      close(f)
      system("sort -n -k1,1 -o " f " " f)
    }
  }' "$@"

ls "$tmp"/*.dat >/dev/null 2>&1 || { echo "plot.sh: error: no timing rows in $*" >&2; exit 1; }
plots_tok="" plots_eff=""
while IFS=$'\t' read -r name f; do
  case "$name" in
    linear\ causal*) dt=1 ;; linear*) dt=2 ;; softmax\ causal*) dt=3 ;; softmax*) dt=4 ;; *causal*) dt=5 ;; *) dt=6 ;;
  esac
  plots_tok+="'$f' using 1:2 with linespoints dt $dt lw 2 title '$name', "
  case "$name" in linear*) plots_eff+="'$f' using 1:3 with linespoints lw 2 title '$name', " ;; esac
done < <(for f in "$tmp"/*.dat; do printf '%s\t%s\n' "$(cat "${f%.dat}.name")" "$f"; done | sort)
gnuplot <<EOF
set terminal pngcairo size 1000,800 font ",11"
set datafile missing "NaN"
set key below maxrows 4
set grid
set logscale x 2
set format x "2^{%L}"
set xlabel "sequence length n (tokens)"
set output "$OUT/bench_tokens.png"
set logscale y
set ylabel "tokens / s"
set title "linattn bench: linear vs exact attention (heads, dk, dv as in the CSV)"
plot ${plots_tok%, }
set output "$OUT/bench_efficiency.png"
unset logscale y
set yrange [0:*]
set ylabel "GFLOP/s / (ranks x best GEMM GFLOP/s, same threads)"
set title "linattn bench: linear operator efficiency against this machine's best GEMM"
$( [ -n "$plots_eff" ] && echo "plot ${plots_eff%, }" || echo "set label 'no linear rows' at graph 0.5,0.5; plot NaN notitle" )
EOF
echo "plot.sh: wrote $OUT/bench_tokens.png and $OUT/bench_efficiency.png" >&2
