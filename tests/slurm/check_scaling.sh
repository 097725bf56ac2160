#!/usr/bin/env bash
# jobs/scaling_strong.sbatch, jobs/scaling_weak.sbatch and jobs/plot_scaling.sh under a real
# Slurm (the test slurm_scaling). Skipped (exit 77) when no Slurm controller answers, a failure
# under CI=true; jobs/slurm_local.sh starts a single-node one. 4 ranks on this 2-core node:
# sbatch --overcommit --ntasks=4 (Slurm refuses --ntasks-per-node above the cores).
#   1. strong scaling at 1, 2, 4 ranks (with the GEMM probe) in one job, plotting at its end
#      (--plot-dir): one linear row per rank count, n fixed, the columns consistent
#      (gflops = useful_flops / seconds, tokens_per_s = n / seconds, efficiency filled),
#      the probe rows of every step; the speedup/efficiency table matches the CSV's seconds;
#   2. weak scaling in two concurrent jobs appending to ONE CSV (1,2 and 4 ranks): one header,
#      n = ranks x n-per-rank, then jobs/plot_scaling.sh by hand for both CSVs;
#   3. the 4 PNGs exist, are non-empty PNGs; the table files too;
#   4. --ntasks=2 --cpus-per-task=2: bench ran 2 ranks x 2 OpenMP threads;
#   5. bad usage: --ranks beyond the allocation fails the job with exit 2, one
#      `scaling_strong: error:` line and no CSV; plot_scaling.sh without a CSV exits 2, on a
#      CSV that is not bench's exits 1 and writes nothing;
#   6. the scan columns (auto as given, "none" on one rank), and plot_scaling.sh draws one
#      series per scan_algorithm.
# Usage: check_scaling.sh LINATTN_BINARY [PYTHON]
set -uo pipefail
BIN=$(readlink -f "$1")
PY=${2:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/need_slurm.sh
. "$here/need_slurm.sh"
need_slurm check_scaling.sh
if ! command -v gnuplot >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "FAIL: check_scaling.sh: CI=true but gnuplot is missing"; exit 1; fi
  echo "check_scaling.sh: gnuplot not found (apt-get install gnuplot-nox); skipped"
  exit 77
fi
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cd "$w" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_execute_quiet=1
# the checkout's scripts with the binary under test; the BLAS core probe (up to 7 timed GEMM
# runs, cached per host) is not what is tested here: keep the library's choice
export LINATTN_BIN=$BIN LINATTN_ROOT=$root LINATTN_BLAS_PROBE=0
# All five jobs are submitted at once and run side by side (each waited for by its own
# `sbatch --wait`): no --exclusive, so an overcommitted job gets one core and two run at a time.
# The timings mean nothing here; the two weak jobs append to one CSV concurrently (the lock).
SB=(timeout 240 sbatch --wait --quiet --overcommit --ntasks=4 --cpus-per-task=1)
small=(--heads 2 --dk 8 --dv 8 --repeat 1)
fail=0
t0=$SECONDS
# 1. strong, plotting at its end
"${SB[@]}" -o "$w/strong.out" "$root/jobs/scaling_strong.sbatch" --csv "$w/strong.csv" \
  --n 4096 --ranks 1,2,4 "${small[@]}" --gemm-probe --gemm-size 64 --plot-dir "$w/plots" &
p_strong=$!
# 2. weak: two jobs, one CSV
p_weak=()
for r in 1,2 4; do
  "${SB[@]}" -o "$w/weak-$r.out" "$root/jobs/scaling_weak.sbatch" --csv "$w/weak.csv" \
    --n-per-rank 2048 --ranks "$r" "${small[@]}" &
  p_weak+=($!)
done
# 4. threads from --cpus-per-task: OMP_NUM_THREADS = SLURM_CPUS_PER_TASK, passed on by srun
timeout 240 sbatch --wait --quiet --overcommit --ntasks=2 --cpus-per-task=2 -o "$w/thr.out" \
  "$root/jobs/scaling_strong.sbatch" --csv "$w/thr.csv" --n 2048 --ranks 2 "${small[@]}" &
p_thr=$!
# 5. --ranks beyond the allocation
"${SB[@]}" -o "$w/bad.out" "$root/jobs/scaling_strong.sbatch" --csv "$w/bad.csv" --ranks 1,8 --n 1024 &
p_bad=$!

wait $p_strong; rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: strong-scaling job exited $rc"; cat "$w/strong.out"; fail=1
else echo "ok: strong-scaling job (1, 2, 4 ranks, plot at the end) done after $((SECONDS - t0)) s"; fi
for i in 0 1; do
  wait "${p_weak[$i]}"; rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: weak-scaling job $i exited $rc"; cat "$w"/weak-*.out; fail=1; fi
done
echo "ok: the two weak-scaling jobs done after $((SECONDS - t0)) s"
bash "$root/jobs/plot_scaling.sh" --out "$w/plots2" --strong "$w/strong.csv" --weak "$w/weak.csv" ||
  { echo "FAIL: plot_scaling.sh on both CSVs"; fail=1; }

# 1-3. the CSVs, the tables and the PNGs
"$PY" - "$w" <<'PYEOF' || fail=1
import csv, math, os, sys
w = sys.argv[1]
bad = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond: bad.append(what)
cols = ("impl,mode,map,features,r,n,heads,dk,dv,dtype,ranks,threads,chunk,repeat,seconds,gflops,"
        "tokens_per_s,useful_flops,check_err,efficiency,isa,blas_core,scan_algorithm,scan_used").split(",")
def rows(path):
    with open(path) as f:
        lines = f.read().splitlines()
    check(lines and lines[0].split(",")[:len(cols)] == cols, f"{os.path.basename(path)}: bench's header")
    check(sum(1 for l in lines if l.startswith("impl,")) == 1, f"{os.path.basename(path)}: one header")
    return list(csv.DictReader(lines))
def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)
for kind, npr in (("strong", None), ("weak", 2048)):
    rs = rows(f"{w}/{kind}.csv")
    lin = [r for r in rs if r["impl"] == "linear"]
    check(sorted(int(r["ranks"]) for r in lin) == [1, 2, 4], f"{kind}: one linear row per rank count 1, 2, 4 ({len(lin)} rows)")
    for r in lin:
        p, n, s = int(r["ranks"]), int(r["n"]), float(r["seconds"])
        ok = (n == (4096 if kind == "strong" else npr * p) and r["threads"] == "1"
              and r["mode"] == "causal" and r["map"] == "elu1" and (r["heads"], r["dk"], r["dv"]) == ("2", "8", "8")
              and math.isfinite(s) and s > 0
              and rel(float(r["gflops"]), float(r["useful_flops"]) / s / 1e9) < 2e-3
              and rel(float(r["tokens_per_s"]), n / s) < 2e-3
              and rel(float(r["useful_flops"]), n * 2 * (4 * 8 * 8 + 4 * 8)) < 1e-5)
        # the scan columns: as given (auto), and what ran ("none" on one rank)
        ok = ok and r["scan_algorithm"] == "auto" and (r["scan_used"] == "none") == (p == 1) \
            and r["scan_used"] in ("none", "exscan", "doubling", "chain", "allgather", "pipelined")
        if kind == "strong":   # with --gemm-probe: efficiency filled, probe rows in every step
            ok = ok and r["efficiency"] != "" and float(r["efficiency"]) > 0
        check(ok, f"{kind}: row at {p} ranks: n {n}, {s:.3g} s, {r['gflops']} GFLOP/s, efficiency '{r['efficiency']}'")
    if kind == "strong":
        probe = [r for r in rs if r["impl"] in ("sgemm", "dgemm")]
        check(len(probe) == 6 and all(float(r["gflops"]) > 0 for r in probe), f"strong: sgemm and dgemm rows in each of the 3 steps ({len(probe)})")
    else:
        check(len(rs) == 3, f"weak: the two jobs' rows, appended ({len(rs)} rows)")
    t = {int(r["ranks"]): float(r["seconds"]) for r in lin}
    for d in ("plots", "plots2"):
        if d == "plots" and kind == "weak":
            continue
        for png in ("speedup", "efficiency"):
            f = f"{w}/{d}/scaling_{kind}_{png}.png"
            head = open(f, "rb").read(8) if os.path.exists(f) else b""
            check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(f) > 1000, f"{d}/scaling_{kind}_{png}.png: a PNG ({os.path.getsize(f) if head else 0} bytes)")
        tab = list(csv.DictReader(open(f"{w}/{d}/scaling_{kind}.csv")))
        ok = len(tab) == 3
        for r in tab:
            p = int(r["ranks"])
            want = t[1] / t[p] if kind == "strong" else p * t[1] / t[p]
            ok = ok and rel(float(r["speedup"]), want) < 1e-4 and rel(float(r["efficiency"]), want / p) < 1e-4
        check(ok, f"{d}/scaling_{kind}.csv: speedup and efficiency from the CSV's seconds "
                  + ", ".join(f"P={r['ranks']}: S={r['speedup']} E={r['efficiency']}" for r in tab))
sys.exit(1 if bad else 0)
PYEOF

# 6. one series per scan algorithm: strong.csv's linear rows once more, as `chain`
{ cat "$w/strong.csv"; grep '^linear,' "$w/strong.csv" | awk -F, -v OFS=, '{ $23 = "chain"; print }'; } > "$w/two.csv"
bash "$root/jobs/plot_scaling.sh" --out "$w/p4" --strong "$w/two.csv" > /dev/null 2>&1
na=$(grep -c ' scan=auto,' "$w/p4/scaling_strong.csv" 2>/dev/null)
nc=$(grep -c ' scan=chain,' "$w/p4/scaling_strong.csv" 2>/dev/null)
if [ "$na" = 3 ] && [ "$nc" = 3 ]; then
  echo "ok: plot_scaling.sh keeps the scan algorithms apart (3 points each of auto and chain)"
else
  echo "FAIL: plot_scaling.sh with two scan algorithms: $na auto and $nc chain points (want 3 and 3)"; fail=1
fi

# 4. threads
wait $p_thr; rc=$?
row=$(grep '^linear,' "$w/thr.csv" 2>/dev/null | cut -d, -f11,12 | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$row" = "2,2 " ]; then
  echo "ok: --ntasks=2 --cpus-per-task=2: the row says 2 ranks x 2 threads"
else
  echo "FAIL: --cpus-per-task=2: exit $rc, ranks,threads '$row' (want '2,2')"; cat "$w/thr.out"; fail=1
fi

# 5. bad usage
wait $p_bad; rc=$?
nerr=$(grep -c '^scaling_strong: error:' "$w/bad.out")
if [ $rc -ne 2 ] || [ "$nerr" -ne 1 ] || [ -e "$w/bad.csv" ]; then
  echo "FAIL: --ranks beyond the allocation: exit $rc, $nerr error lines, CSV $( [ -e "$w/bad.csv" ] && echo written || echo absent)"
  cat "$w/bad.out"; fail=1
else
  echo "ok: --ranks beyond the allocation: exit 2, '$(grep -m1 '^scaling_strong: error:' "$w/bad.out")'"
fi
bash "$root/jobs/plot_scaling.sh" --out "$w/p3" 2> "$w/e1"; rc1=$?
printf 'a,b\n1,2\n' > "$w/notbench.csv"
bash "$root/jobs/plot_scaling.sh" --out "$w/p3" --strong "$w/notbench.csv" 2> "$w/e2"; rc2=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 1 ] && [ "$(wc -l < "$w/e1")" -eq 1 ] && [ "$(wc -l < "$w/e2")" -eq 1 ] &&
   [ -z "$(ls -A "$w/p3" 2>/dev/null)" ]; then
  echo "ok: plot_scaling.sh: no CSV -> exit 2, not a bench CSV -> exit 1, nothing written"
else
  echo "FAIL: plot_scaling.sh bad usage: exits $rc1 and $rc2 (want 2 and 1), messages:"; cat "$w/e1" "$w/e2"; ls -A "$w/p3"; fail=1
fi
exit $fail
