#!/usr/bin/env bash
# jobs/downstream_submit.sh, jobs/downstream_array.sbatch and jobs/downstream_merge.sh under a
# real Slurm (the test slurm_downstream_array; docs/downstream.md "On a cluster"). Skipped
# (exit 77) when no Slurm controller answers, a failure under CI=true. Checks, on a study cut
# to seconds (capacity and mqar, two attentions, one size each, 20 steps, 2 seeds):
#   1. the submit script runs a 4-task array and the dependent merge; merged/'s data files hold
#      every task's rows in configuration order, unchanged; report.md exists and names the
#      merge; every task ran the configuration --list-configs gives for its index;
#   2. the merge by hand: refuses (exit 1, merged/ unchanged) an existing merged/ without
#      --force, a task without task.json, and a folder of another study; --force replaces;
#   3. --config past the list: exit 2 and one line naming the count.
# Usage: check_downstream_array.sh [PYTHON]
set -uo pipefail
PY=${1:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/need_slurm.sh
. "$here/need_slurm.sh"
need_slurm check_downstream_array.sh
"$PY" -c 'import torch' 2>/dev/null || { echo "check_downstream_array.sh: no torch; skipped"; exit 77; }
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cd "$w" || exit 1
export PYTHON=$PY
study=(--tasks capacity,mqar --attentions softmax,elu1 --sizes 4 --max-steps 20 --seeds 2
       --d-models 16 --epochs 1 --lrs 0.01)
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

t0=$SECONDS
if ids=$(timeout 300 bash "$root/jobs/downstream_submit.sh" --wait --out-dir "$w/study" "${study[@]}"); then
  ok "array job and merge ($ids) done after $((SECONDS - t0)) s"
else
  bad "downstream_submit.sh --wait exited non-zero ($ids)"; cat "$w"/linattn-downstream-*.out
fi
. "$root/jobs/env.sh"
"$PY" - "$w/study" "${study[@]}" <<'PYEOF' || fail=1
import csv, json, os, subprocess, sys
base, study = sys.argv[1], sys.argv[2:]
bad = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond: bad.append(what)
def read(p):
    with open(p) as f:
        return list(csv.reader(f))
lines = subprocess.run([sys.executable, "-m", "linattn.downstream", "--list-configs"] + study,
                       capture_output=True, text=True, check=True).stdout.splitlines()
check(lines[0].startswith("4 configurations"), "--list-configs: 4 configurations")
for i in range(4):
    rec = json.load(open(f"{base}/task-{i}/task.json"))
    want = lines[1 + i].split(" ", 2)
    check(rec["config"] == i and rec["count"] == 4 and rec["task"] == want[1] and rec["status"] == 0,
          f"task-{i}: task.json records configuration {i} of 4 ({want[1]}, status 0)")
    runs = read(f"{base}/task-{i}/{want[1]}_runs.csv")
    col = runs[0].index("attention")
    check({r[col] for r in runs[1:]} == {want[2].split()[1]} and len(runs) == 3,
          f"task-{i}: its 2 runs are of {want[2].split()[1]} only")
for name, tasks in (("capacity_runs.csv", (0, 1)), ("capacity_curves.csv", (0, 1)),
                    ("mqar_runs.csv", (2, 3)), ("mqar_accuracy.csv", (2, 3))):
    m = read(f"{base}/merged/{name}")
    rows = []
    for i in tasks:
        t = read(f"{base}/task-{i}/{name}")
        check(t[0] == m[0], f"{name}: task {i}'s header")
        rows += t[1:]
    check(m[1:] == rows and rows, f"merged {name}: the tasks' {len(rows)} rows in order, unchanged")
rep = open(f"{base}/merged/report.md").read()
check("Merged by" in rep and "## Capacity" in rep and "## Multi-query associative recall" in rep,
      "merged report.md: both tasks' sections and the merge's note")
sc = list(csv.DictReader(open(f"{base}/merged/softmax_check.csv")))
check(sorted(r["mode"] for r in sc) == ["bidirectional", "causal"] and all(r["ok"] == "1" for r in sc),
      "merged softmax_check.csv: one row per mode, both ok")
sys.exit(1 if bad else 0)
PYEOF

merge() { "$PY" -m linattn.downstream.merge "$@" >"$w/m.out" 2>"$w/m.err"; }
before=$(cksum < "$w/study/merged/capacity_runs.csv")
merge "$w/study"; rc=$?
[ $rc = 1 ] && grep -q "exists (use --force" "$w/m.err" && ok "merge: refuses an existing merged/ (exit 1)" ||
  bad "merge over merged/ without --force: exit $rc, $(cat "$w/m.err")"
merge --force "$w/study"; rc=$?
[ $rc = 0 ] && [ "$(cksum < "$w/study/merged/capacity_runs.csv")" = "$before" ] &&
  ok "merge --force: replaces merged/ with the same content" || bad "merge --force: exit $rc"
mv "$w/study/task-1/task.json" "$w/task1.json"
merge --force "$w/study"; rc=$?
[ $rc = 1 ] && grep -q "task-1: no task.json" "$w/m.err" && [ -f "$w/study/merged/report.md" ] &&
  ok "merge: refuses a task without task.json (exit 1), merged/ kept" || bad "unfinished task: exit $rc, $(cat "$w/m.err")"
mv "$w/task1.json" "$w/study/task-1/task.json"
sed -i 's/"study_key": "[0-9a-f]*"/"study_key": "0000000000000000"/' "$w/study/task-2/task.json"
merge --force "$w/study"; rc=$?
[ $rc = 1 ] && grep -q "another study" "$w/m.err" && ok "merge: refuses a folder of another study (exit 1)" ||
  bad "another study: exit $rc, $(cat "$w/m.err")"
"$PY" -m linattn.downstream --out-dir "$w/x" --config 4 "${study[@]}" 2>"$w/c.err"; rc=$?
[ $rc = 2 ] && grep -q "the study has 4 configurations" "$w/c.err" && [ ! -e "$w/x" ] &&
  ok "--config 4 of 4: exit 2, nothing written" || bad "--config past the list: exit $rc, $(cat "$w/c.err")"
exit $fail
