#!/bin/sh
# One harness under libFuzzer for a bounded time (the CTest tests fuzz_NAME; jobs/fuzz.sh).
# Usage: run_fuzz.sh EXE NAME SRC_DIR WORK_DIR SECONDS DICT
# The inputs libFuzzer finds go to WORK_DIR/NAME/corpus (kept between runs), the seeds and
# the regression inputs of SRC_DIR/corpus/NAME and SRC_DIR/regress/NAME are read, not
# written. Prints one summary line (also WORK_DIR/NAME/summary.txt); on a crash, leak or
# timeout, the end of the log and where the input is. Exit status: libFuzzer's.
set -u
exe=$1 name=$2 src=$3 work=$4 secs=$5 dict=$6
dir=$work/$name
mkdir -p "$dir/corpus"
rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/summary.txt
log=$dir/log.txt
"$exe" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -dict="$dict" -artifact_prefix="$dir/" \
  "$dir/corpus" "$src/corpus/$name" "$src/regress/$name" >"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1)
found=$(ls "$dir/corpus" | wc -l)
line="fuzz $name: ${runs:-?} executions in ${took:-?} s (${cov:-no coverage line}; $found inputs in $dir/corpus)"
[ $rc -eq 0 ] || line="$line: FAILED, exit $rc"
echo "$line" | tee "$dir/summary.txt"
if [ $rc -ne 0 ]; then
  tail -n 60 "$log"
  for a in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
    [ -e "$a" ] && echo "input: $a (commit it to tests/fuzz/regress/$name/ with the fix)"
  done
fi
exit $rc
