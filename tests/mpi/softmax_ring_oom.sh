#!/bin/sh
# Out of memory in the softmax ring (core/la_alloc.h): LINATTN_FAIL_ALLOC=N fails the Nth
# allocation of one rank (LINATTN_FAIL_ALLOC_RANK) for N = 1, 2, ... until a run needs fewer
# than N; every run must end on every rank with the same status, LA_OK and the right
# gradients or LA_ERR_NOMEM saying "out of memory", and no hang (a timeout per launch).
# Usage: softmax_ring_oom.sh "LAUNCHER (e.g. mpiexec -n 2)" test_softmax_ring RANK
# Exit 77 (skipped) when the first allocation does not fail: built without fault injection.
launcher=$1 exe=$2 rank=$3
n=1
while [ $n -le 400 ]; do
  out=$(LINATTN_FAIL_ALLOC=$n LINATTN_FAIL_ALLOC_RANK=$rank timeout 120 $launcher "$exe" --oom 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: LINATTN_FAIL_ALLOC=$n on rank $rank: exit $rc"
    echo "$out"
    exit 1
  fi
  case "$out" in
    *"status: ok"*)
      if [ $n -eq 1 ]; then echo "skipped: allocation failures are not injected"; exit 77; fi
      echo "PASS: allocations 1 .. $((n - 1)) of rank $rank each failed cleanly; $n is past the last"
      exit 0 ;;
    *"status: nomem"*) ;;
    *) echo "FAIL: LINATTN_FAIL_ALLOC=$n: no status line"; echo "$out"; exit 1 ;;
  esac
  n=$((n + 1))
done
echo "FAIL: still failing at N = $n"
exit 1
