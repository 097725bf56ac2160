#!/usr/bin/env bash
# Behaviour preserved bitwise (issue 37): run the same `linattn` command lines with two
# binaries, an old one (e.g. built from a `git worktree` of main at the commit a change
# starts from) and a new one, and compare every file they write byte for byte, and their
# exit codes.
#
#   tools/compare_outputs.sh OLD_BIN NEW_BIN WORKDIR [old|new|compare|all]
#
# The cases: `run` over every map, mode (causal, bidirectional), dtype (f32, f64), segments,
# windows, --reproducible, every scan algorithm and several block sizes; `grad` over the maps,
# modes and dtypes, with segments and windows, and every scan algorithm; a small `eval`; each
# on 1 and 3 ranks. Then --decay: runs on 1 and 3 ranks, grads on one.
# (mpirun --oversubscribe). Each case writes WORKDIR/{old,new}/CASE/; the phases old and
# new can run separately (old first, while the new binary is still being built). CSV files
# of eval are compared without their timing columns (seconds, gflops); JSON reports, which
# hold timings and host facts, are not compared. Prints one line per difference, then
# "compare: N cases, M files byte-identical, K differ" and exits 1 if any differ.
# Parallel jobs: COMPARE_JOBS (default 2); seconds before a case is stopped: COMPARE_TIMEOUT
# (default 120; the exit code of `timeout`, 124, is compared like any other); only some
# cases: COMPARE_ONLY="c0001 c0002 ..." (to rerun them).
set -u
old=${1:?usage: compare_outputs.sh OLD_BIN NEW_BIN WORKDIR [old|new|compare|all]}
new=${2:?}
work=${3:?}
phase=${4:-all}
jobs=${COMPARE_JOBS:-2}
export COMPARE_TIMEOUT=${COMPARE_TIMEOUT:-120}
only=${COMPARE_ONLY:-}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/jobs/env.sh"
# the tests' quick Open MPI start (tests/CMakeLists.txt LINATTN_TEST_MPI_ENV)
export OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_odls_base_sigkill_timeout=0 PMIX_MCA_psec=native
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$work"
work=$(cd "$work" && pwd)
N=1500
# segment offsets (int64 .npy): pieces that span blocks and ranks, and a 1-token piece
# (written aside and renamed: a phase running meanwhile keeps reading whole files)
/usr/bin/python3 - "$work/seg.npy" "$N" <<'EOF'
import os, sys, numpy as np
N = int(sys.argv[2])
with open(sys.argv[1] + ".tmp", "wb") as f:
    np.save(f, np.array([0, 300, 301, 777, 1100, N], dtype=np.int64))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF

cases="$work/cases.txt"
{
  maps="elu1 relu favor+ favor+orf favor-hyp trig:s identity:s taylor2 dpfp precomputed"
  for P in 1 3; do
    # run: every map x mode x dtype, blocks of 77 tokens (several steps per rank)
    for m in $maps; do
      map=${m%:s}; sg=""; [ "$m" != "$map" ] && sg="--allow-signed"
      for mode in causal bidirectional; do
        for dt in f32 f64; do
          echo "$P run --feature-map $map $sg --mode $mode --dtype $dt --block-tokens 77"
        done
      done
    done
    for map in elu1 favor+ taylor2; do
      for dt in f32 f64; do
        for mode in causal bidirectional; do
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 64 --segments $work/seg.npy"
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 100000"
          echo "$P run --feature-map $map --mode $mode --dtype $dt"
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 77 --reproducible"
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 77 --reproducible --segments $work/seg.npy"
        done
        for W in 1 50 700 5000; do
          echo "$P run --feature-map $map --dtype $dt --block-tokens 77 --window $W"
          echo "$P run --feature-map $map --dtype $dt --block-tokens 77 --window $W --segments $work/seg.npy"
          echo "$P run --feature-map $map --dtype $dt --block-tokens 77 --window $W --reproducible"
        done
        for a in auto exscan doubling chain allgather pipelined; do
          echo "$P run --feature-map $map --dtype $dt --block-tokens 77 --scan-algorithm $a --scan-pieces 3"
          echo "$P run --feature-map $map --dtype $dt --block-tokens 200 --scan-algorithm $a --segments $work/seg.npy"
        done
      done
    done
    # grad: maps x modes x dtypes; segments and windows
    for m in elu1 relu favor+ favor-hyp trig:s taylor2 dpfp; do
      map=${m%:s}; sg=""; [ "$m" != "$map" ] && sg="--allow-signed"
      for mode in causal bidirectional; do
        for dt in f32 f64; do
          echo "$P grad --feature-map $map $sg --mode $mode --dtype $dt"
          echo "$P grad --feature-map $map $sg --mode $mode --dtype $dt --segments $work/seg.npy"
        done
      done
      for dt in f32 f64; do
        echo "$P grad --feature-map $map $sg --dtype $dt --window 50"
        echo "$P grad --feature-map $map $sg --dtype $dt --window 50 --segments $work/seg.npy"
      done
    done
    # grad: every scan algorithm on the replay's prefix and the reverse scan (causal), and on
    # the segmented bidirectional scans
    for a in auto exscan doubling chain allgather pipelined; do
      for dt in f32 f64; do
        echo "$P grad --feature-map favor+ --dtype $dt --scan-algorithm $a --scan-pieces 3"
        echo "$P grad --feature-map elu1 --mode bidirectional --dtype $dt --scan-algorithm $a --segments $work/seg.npy"
      done
    done
    # eval, small
    echo "$P eval --n 256,600 --feature-maps elu1,favor+,taylor2 --features 8 --seeds 2 --recall"
  done
  # decay (docs/design.md §1.2), after the cases above so that their numbers stay: every map
  # family, both modes, segments, windows, scan algorithms; grad with decay on one rank
  for P in 1 3; do
    for map in elu1 favor+ taylor2 dpfp; do
      for dt in f32 f64; do
        for mode in causal bidirectional; do
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 77 --decay 0.97"
          echo "$P run --feature-map $map --mode $mode --dtype $dt --block-tokens 200 --decay retnet --segments $work/seg.npy"
        done
        echo "$P run --feature-map $map --dtype $dt --block-tokens 77 --decay 0.9,0.999 --window 50"
      done
    done
    for a in doubling chain allgather pipelined; do
      echo "$P run --feature-map elu1 --block-tokens 77 --decay 0.97 --scan-algorithm $a --scan-pieces 3"
    done
  done
  for map in elu1 relu taylor2; do
    for dt in f32 f64; do
      echo "1 grad --feature-map $map --dtype $dt --decay 0.95"
      echo "1 grad --feature-map $map --dtype $dt --decay retnet --segments $work/seg.npy"
    done
  done
} | awk '{ printf "c%04d %s\n", NR, $0 }' > "$cases.tmp" && mv "$cases.tmp" "$cases"

# one case with one binary: WORKDIR/WHICH/ID/{files, rc, stderr}
run_case() {
  which=$1 bin=$2 id=$3 P=$4 sub=$5
  shift 5
  d="$work/$which/$id"
  rm -rf "$d"
  mkdir -p "$d"
  cd "$d" || exit 1
  common=(--n $N --heads 2 --dk 8 --dv 8 --features 8 --no-progress)
  case $sub in
    run) extra=(--out out.npy --report report.json) ;;
    grad) extra=(--grad-q gq.npy --grad-k gk.npy --grad-v gv.npy --report report.json)
          case " $* " in *" --segments "*|*" --window "*) ;; *) extra+=(--out out.npy) ;; esac ;;
    eval) common=(--heads 2 --dk 8 --dv 8 --no-progress); extra=(--out-dir ev) ;;
  esac
  timeout "$COMPARE_TIMEOUT" mpirun --oversubscribe -np "$P" "$bin" "$sub" "${common[@]}" "$@" "${extra[@]}" \
    > stdout 2> stderr
  echo $? > rc
}
export -f run_case
export work N

phase_run() { # which bin
  awk -v w="$1" -v b="$2" -v only=" $only " 'only == "  " || index(only, " " $1 " ") { printf "%s %s %s", w, b, $1; for (i = 2; i <= NF; i++) printf " %s", $i; printf "\n" }' "$cases" |
    xargs -P "$jobs" -L 1 bash -c 'run_case "$@"' _
}

[ "$phase" = old ] || [ "$phase" = all ] && phase_run old "$old"
[ "$phase" = new ] || [ "$phase" = all ] && phase_run new "$new"
[ "$phase" = compare ] || [ "$phase" = all ] || exit 0

# compare: exit codes, every file but the reports and logs; eval's CSVs without timings
/usr/bin/python3 - "$work" "$cases" <<'EOF'
import csv, io, os, re, sys
work, cases = sys.argv[1], sys.argv[2]
skip = {"stdout", "stderr", "report.json", "report.md"}
def strip_timing(path):
    rows = list(csv.reader(open(path, newline="")))
    if not rows: return rows
    keep = [i for i, h in enumerate(rows[0]) if not any(t in h for t in ("seconds", "gflops"))]
    return [[r[i] for i in keep if i < len(r)] for r in rows]
ncase = same = differ = 0
ok_cases = 0
for line in open(cases):
    cid = line.split()[0]
    ncase += 1
    a, b = os.path.join(work, "old", cid), os.path.join(work, "new", cid)
    # a stopped case leaves its output's temporary, named by a pid: matched by the name before
    def files(top):
        return {re.sub(r"\.tmp\.[0-9]+$", ".tmp.PID", os.path.relpath(os.path.join(r, f), top)):
                os.path.join(r, f) for r, _, fs in os.walk(top) for f in fs}
    ma, mb = files(a), files(b)
    fa, fb = sorted(ma), sorted(mb)
    bad = []
    if fa != fb:
        bad.append("file lists differ: %s" % sorted(set(fa) ^ set(fb)))
    for f in fa:
        if f not in fb or os.path.basename(f) in skip: continue
        pa, pb = ma[f], mb[f]
        if f.endswith(".png") or f.endswith(".gp"):
            continue  # plots: rendered from the CSVs compared here
        if f.endswith(".csv") and "/ev/" in "/" + f:
            eq = strip_timing(pa) == strip_timing(pb)
        else:
            eq = open(pa, "rb").read() == open(pb, "rb").read()
        if eq: same += 1
        else: differ += 1; bad.append("%s differs" % f)
    if bad:
        print("%s [%s]: %s" % (cid, " ".join(line.split()[1:]), "; ".join(bad)))
    else:
        ok_cases += 1
rcs = {}
for line in open(cases):
    cid = line.split()[0]
    rcs.setdefault(open(os.path.join(work, "old", cid, "rc")).read().strip(), 0)
    rcs[open(os.path.join(work, "old", cid, "rc")).read().strip()] += 1
print("compare: %d cases (%d identical), %d files byte-identical, %d differ; exit codes %s"
      % (ncase, ok_cases, same, differ, ", ".join("%s: %d" % kv for kv in sorted(rcs.items()))))
sys.exit(1 if differ or ok_cases != ncase else 0)
EOF
