#!/usr/bin/env bash
# jobs/linattn.sbatch under a real Slurm (the test slurm_batch). Skipped (exit 77) when no
# Slurm controller answers; jobs/slurm_local.sh starts a single-node one. Checks:
#   1. a 2-rank job (srun, PMIx) writes the output and the report; the output equals a
#      1-rank `linattn run` of the same synthetic workload (NumPy, 1e-6 relative in f32);
#   2. a job with a bad option exits 2 with one `linattn: error:` line, no MPI abort trace,
#      and no output file;
#   3. affinity as the script documents it, seen by each rank (a stand-in binary prints its
#      CPU list and environment): 2 tasks x 1 CPU get two different single CPUs, 1 task x 2
#      CPUs gets two, with OMP_NUM_THREADS, OMP_PLACES=cores, OMP_PROC_BIND=close and
#      OPENBLAS_NUM_THREADS=1. The CPU lists are checked only when Slurm's TaskPlugin binds
#      (task/affinity or task/cgroup; jobs/slurm_local.sh sets task/affinity).
# Usage: check_sbatch.sh LINATTN_BINARY
set -uo pipefail
BIN=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PY=/usr/bin/python3
# shellcheck source=tests/slurm/need_slurm.sh
. "$here/need_slurm.sh"
need_slurm check_sbatch.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_execute_quiet=1
fail=0
args=(--n 5000 --heads 3 --dk 16 --dv 8 --seed 7)
# 1. the job as documented in the README
cd "$w" || exit 1
LINATTN_BIN=$BIN timeout 300 sbatch --wait --quiet --nodes=1 --ntasks-per-node=2 \
  --cpus-per-task=1 -o "$w/job1.out" "$root/jobs/linattn.sbatch" "${args[@]}" \
  --out "$w/out.npy" --report "$w/r.json"
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: sbatch job exited $rc"; cat "$w/job1.out"; fail=1; fi
OMP_NUM_THREADS=1 "$BIN" run "${args[@]}" --out "$w/ref.npy" --no-progress >/dev/null 2>&1 ||
  { echo "FAIL: 1-rank reference run"; fail=1; }
if [ $fail -eq 0 ]; then
  "$PY" - "$w" <<'PYEOF' || fail=1
import json, sys
import numpy as np
w = sys.argv[1]
r = json.load(open(f"{w}/r.json"))
a, b = np.load(f"{w}/out.npy"), np.load(f"{w}/ref.npy")
err = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
ok = r["ranks"] == 2 and r["threads"] == 1 and a.shape == (5000, 3, 8) and err < 1e-6
print(f"{'ok' if ok else 'FAIL'}: 2-rank Slurm job: ranks {r['ranks']}, threads {r['threads']}, "
      f"shape {a.shape}, max rel diff to 1 rank {err:.2e}")
sys.exit(0 if ok else 1)
PYEOF
fi
# 2. bad input inside the batch job
LINATTN_BIN=$BIN timeout 300 sbatch --wait --quiet --nodes=1 --ntasks-per-node=2 \
  --cpus-per-task=1 -o "$w/job2.out" "$root/jobs/linattn.sbatch" --n 5000 --chunk 0 \
  --out "$w/bad.npy"
rc=$?
nerr=$(grep -c '^linattn: error:' "$w/job2.out")
if [ $rc -ne 2 ] || [ "$nerr" -ne 1 ] || grep -qi 'abort\|MPI_ERRORS' "$w/job2.out" || [ -e "$w/bad.npy" ]; then
  echo "FAIL: bad option in a Slurm job: exit $rc, $nerr error lines, output:"; cat "$w/job2.out"; fail=1
else
  echo "ok: bad option in a Slurm job: exit 2, '$(grep -m1 '^linattn: error:' "$w/job2.out")'"
fi
# 3. affinity: a stand-in for the binary prints what each rank was given
cat > "$w/show_affinity" <<'SH'
#!/bin/sh
echo "affinity rank=$SLURM_PROCID cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status) omp=$OMP_NUM_THREADS places=$OMP_PLACES bind=$OMP_PROC_BIND blas=$OPENBLAS_NUM_THREADS"
SH
chmod +x "$w/show_affinity"
binds=0
scontrol show config 2>/dev/null | grep -Eq '^TaskPlugin *=.*(affinity|cgroup)' && binds=1
for shape in "2 1" "1 2"; do
  read -r nt nc <<< "$shape" # tasks, CPUs per task
  LINATTN_BIN=$w/show_affinity LINATTN_BLAS_PROBE=0 timeout 120 sbatch --wait --quiet --nodes=1 \
    --ntasks-per-node="$nt" --cpus-per-task="$nc" -o "$w/aff-${nt}x$nc.out" "$root/jobs/linattn.sbatch"
  rc=$?
  lines=$(grep '^affinity ' "$w/aff-${nt}x$nc.out" | sort)
  want_env="omp=$nc places=cores bind=close blas=1"
  nenv=$(printf '%s\n' "$lines" | grep -c " $want_env\$")
  read -r -a cpus <<< "$(printf '%s\n' "$lines" | sed -n 's/.* cpus=\([^ ]*\) .*/\1/p' | tr '\n' ' ')"
  ok=1
  [ $rc -eq 0 ] && [ "$nenv" -eq "$nt" ] || ok=0
  if [ $binds = 1 ]; then
    if [ "$nt" = 2 ]; then # two single CPUs, different
      [ "${#cpus[@]}" -eq 2 ] && [ "${cpus[0]}" != "${cpus[1]}" ] || ok=0
      case "${cpus[*]}" in *-*|*,*) ok=0 ;; esac
    else                   # one rank on 2 CPUs: a range or a list of two
      case "${cpus[*]}" in [0-9]*-[0-9]*|[0-9]*,[0-9]*) ;; *) ok=0 ;; esac
    fi
  fi
  if [ $ok = 1 ]; then
    echo "ok: affinity of $nt task(s) x $nc CPU(s): CPUs ${cpus[*]} ($([ $binds = 1 ] && echo bound || echo "not checked: TaskPlugin does not bind")), $want_env"
  else
    echo "FAIL: affinity of $nt task(s) x $nc CPU(s): exit $rc, ranks saw:"; printf '%s\n' "$lines"; cat "$w/aff-${nt}x$nc.out"; fail=1
  fi
done
exit $fail
