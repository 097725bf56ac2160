#!/bin/bash
# Merge step of jobs/eval_array.sbatch: the CSVs of every array task BASE/task-i into
# BASE/merged/ (docs/cluster.md). Submit it to start when the whole array has succeeded:
#   jid=$(sbatch --parsable jobs/eval_array.sbatch --out-dir study ...)
#   sbatch --dependency=afterok:${jid%;*} jobs/eval_merge.sh study
# or run it by hand once the array has finished: bash jobs/eval_merge.sh [--force] study
#
# BASE/merged/ receives:
#   results.csv, bias.csv, rows.csv, refs.csv, recall.csv (those the tasks wrote): every
#       task's rows in task order, each prefixed by array_task_id,sweep,value,data_seed (the
#       row's own columns follow unchanged, docs/cli.md "linattn eval");
#   summary.csv: one row per (feature_map, features, r, n, input_scale, mode) over all tasks
#       and seeds: rows, tasks, out_rel_err_mean, out_rel_err_min, out_rel_err_max,
#       grad_q/k/v_rel_err_mean, kernel_rel_err_mean, reassoc_rel_err_max, den_min.
# It refuses (exit 1, nothing written) when a task folder has no task.csv (that task failed or
# is still running), when the folders come from different studies (another sweep, list or
# eval options: a stale folder), when fewer folders are there than the array had tasks, or
# when the CSV headers differ. Tasks rerun alone (sbatch --array=i ... --force) merge with the
# rest. BASE/merged must not exist unless --force (then it is replaced as a whole, by a rename).
#
# #SBATCH lines (the merge is light: one core, a few minutes):
#   --job-name=linattn-eval-merge
#   --ntasks=1
#   --cpus-per-task=1
#   --time=00:10:00
#   --output=linattn-eval-merge-%j.out
#SBATCH --job-name=linattn-eval-merge
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --output=linattn-eval-merge-%j.out
set -euo pipefail
me=eval_merge.sh
die() { echo "$me: error: $2" >&2; exit "$1"; }
usage="usage: $me [--force] BASE"
FORCE=0 BASE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#SBATCH/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    -*) die 2 "unknown option '$1' ($usage)" ;;
    *) [ -z "$BASE" ] || die 2 "one BASE only ($usage)"; BASE=$1; shift ;;
  esac
done
[ -n "$BASE" ] || die 2 "no BASE given ($usage)"
[ -d "$BASE" ] || die 1 "$BASE: not a folder"
[ "$FORCE" = 1 ] || [ ! -e "$BASE/merged" ] || die 1 "$BASE/merged: exists (use --force to replace it)"

shopt -s nullglob
dirs=("$BASE"/task-*/)
[ ${#dirs[@]} -gt 0 ] || die 1 "$BASE: no task-* folders (the array's --out-dir?)"
# every folder a finished task of the same study, by its task.csv
key="" first="" count=0 jobs="" order=()
for d in "${dirs[@]}"; do
  d=${d%/}
  [ -r "$d/task.csv" ] || die 1 "$d: no task.csv: that task failed or has not finished (see its linattn-eval-*_${d##*-}.out)"
  [ -r "$d/results.csv" ] || die 1 "$d: no results.csv"
  IFS=, read -r j i c _ _ _ k < <(sed -n 2p "$d/task.csv")
  { [[ $c =~ ^[1-9][0-9]*$ ]] && [ "$i" = "${d##*task-}" ]; } || die 1 "$d/task.csv: not this task's record (task '$i', count '$c')"
  if [ -z "$first" ]; then key=$k first=$d
  elif [ "$k" != "$key" ]; then die 1 "$d: another study than $first (other sweep, list or eval options): a stale folder? move it away"
  fi
  [ "$c" -le "$count" ] || count=$c
  case " $jobs " in *" $j "*) ;; *) jobs+="${jobs:+ }$j" ;; esac
  order+=("$i")
done
# the largest array of the study (a task rerun alone is an array of 1) had this many tasks
[ "${#order[@]}" -ge "$count" ] || die 1 "$BASE: ${#order[@]} finished tasks, but the array (job $jobs) had $count"
mapfile -t order < <(printf '%s\n' "${order[@]}" | sort -n)

tmp="$BASE/.merged.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
mkdir "$tmp"
for name in results bias rows refs recall; do
  have=()
  for i in "${order[@]}"; do
    if [ -r "$BASE/task-$i/$name.csv" ]; then have+=("$i"); fi
  done
  [ ${#have[@]} -gt 0 ] || continue
  h=$(head -n 1 "$BASE/task-${have[0]}/$name.csv")
  for i in "${have[@]}"; do
    f="$BASE/task-$i/$name.csv"
    [ "$(head -n 1 "$f")" = "$h" ] || die 1 "$f: its header differs from task ${have[0]}'s"
    prefix=$(sed -n 2p "$BASE/task-$i/task.csv" | cut -d, -f2,4-6)
    tail -n +2 "$f" | sed "s|^|$prefix,|" >> "$tmp/$name.body"
  done
  { echo "array_task_id,sweep,value,data_seed,$h"; cat "$tmp/$name.body" 2>/dev/null || true; } > "$tmp/$name.csv"
  rm -f "$tmp/$name.body"
done

# summary.csv over the merged results (mawk/gawk; columns found by name)
awk -F, '
  NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
            split("feature_map features r n input_scale mode out_rel_err grad_q_rel_err grad_k_rel_err grad_v_rel_err kernel_rel_err reassoc_rel_err den_min array_task_id", need, " ")
            for (i in need) if (!(need[i] in c)) { print "no column " need[i] > "/dev/stderr"; bad = 1; exit 1 }
            next }
  {
    k = $c["feature_map"] "," $c["features"] "," $c["r"] "," $c["n"] "," $c["input_scale"] "," $c["mode"]
    if (!(k in rows)) order[++ng] = k
    rows[k]++
    if (!((k, $c["array_task_id"]) in tk)) { tk[k, $c["array_task_id"]] = 1; tasks[k]++ }
    e = $c["out_rel_err"] + 0; so[k] += e
    if (rows[k] == 1 || e < mn[k]) mn[k] = e
    if (rows[k] == 1 || e > mx[k]) mx[k] = e
    sq[k] += $c["grad_q_rel_err"]; sk[k] += $c["grad_k_rel_err"]; sv[k] += $c["grad_v_rel_err"]
    ke[k] += $c["kernel_rel_err"]
    r = $c["reassoc_rel_err"] + 0; if (rows[k] == 1 || r > ra[k]) ra[k] = r
    d = $c["den_min"] + 0; if (rows[k] == 1 || d < dm[k]) dm[k] = d
  }
  END {
    if (bad) exit 1
    print "feature_map,features,r,n,input_scale,mode,rows,tasks,out_rel_err_mean,out_rel_err_min,out_rel_err_max,grad_q_rel_err_mean,grad_k_rel_err_mean,grad_v_rel_err_mean,kernel_rel_err_mean,reassoc_rel_err_max,den_min"
    for (g = 1; g <= ng; g++) {
      k = order[g]; m = rows[k]
      printf "%s,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", k, m, tasks[k], so[k] / m, mn[k], mx[k], sq[k] / m, sk[k] / m, sv[k] / m, ke[k] / m, ra[k], dm[k]
    }
  }' "$tmp/results.csv" > "$tmp/summary.csv" || die 1 "$tmp/results.csv: cannot summarize (see above)"

# replace BASE/merged as a whole: the new folder is renamed in, the old one removed after
old=""
if [ -e "$BASE/merged" ]; then old="$BASE/.merged.old.$$"; mv "$BASE/merged" "$old"; fi
mv "$tmp" "$BASE/merged"
[ -z "$old" ] || rm -rf "$old"
nres=$(( $(wc -l < "$BASE/merged/results.csv") - 1 ))
echo "$me: ${#order[@]} tasks (array job $jobs), $nres results rows -> $BASE/merged/ ($(cd "$BASE/merged" && echo *.csv))" >&2
if command -v column >/dev/null; then column -s, -t < "$BASE/merged/summary.csv"; else cat "$BASE/merged/summary.csv"; fi
