#!/bin/sh
# Valgrind memcheck on small runs of the program, one rank without a launcher, one thread:
# a causal run (window, segments, streamed in blocks, --out), a bidirectional run (favor+,
# segments, --save-projection), and a grad from files (favor+ with that projection, every
# gradient written). Each must exit 0 with no memcheck error and no definite leak; the
# suppressions (tests/valgrind.supp) cover Open MPI's own start-up and shutdown only.
# Valgrind's CPU has no AVX-512, so the runs take the OpenBLAS kernels (the report says so),
# and OpenBLAS must pick its kernels from that CPU too: an OPENBLAS_CORETYPE that jobs/env.sh
# chose on the real CPU (SkylakeX on AVX-512 machines, docs/design.md §4.9) would run AVX-512
# code under valgrind and die of SIGILL (exit 132). So it is unset here.
# Usage: memcheck.sh LINATTN PYTHON SUPPRESSIONS WORKDIR   (exit 77: no valgrind)
set -u
linattn=$1 python=$2 supp=$3 work=$4
command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed (apt-get install valgrind)"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset OPENBLAS_CORETYPE
"$python" -c "
import numpy as np
np.save('seg.npy', np.array([0, 100, 250, 300], dtype='<i8'))
r = np.random.default_rng(0)
for name in 'qkvg':
    np.save(name + '.npy', r.standard_normal((300, 2, 8)))
" || exit 1
common="--threads 1 --chunk 16 --block-tokens 128 --no-progress"
small="--heads 2 --dk 8 --dv 8 $common" # the synthetic shape; input files give their own
failed=0
check() { # NAME ARGS...: one program run under memcheck
  name=$1
  shift
  start=$(date +%s)
  valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --suppressions="$supp" --keep-debuginfo=yes --num-callers=50 \
    "$linattn" "$@" >"$name.out" 2>"$name.log"
  rc=$?
  took=$(($(date +%s) - start))
  if [ $rc -eq 0 ]; then
    echo "memcheck $name: ok in $took s ($(grep -o 'ERROR SUMMARY.*' "$name.log"))"
  else
    echo "memcheck $name: FAILED, exit $rc in $took s (99: memcheck errors or definite leaks)"
    cat "$name.log"
    failed=1
  fi
}
check run_causal run $small --n 300 --mode causal --window 40 --segments seg.npy \
  --out out_causal.npy --report causal.json
check run_bidirectional run $small --n 300 --mode bidirectional --feature-map favor+ \
  --features 16 --segments seg.npy --save-projection proj.npy --out out_bidir.npy
check grad_causal grad $common --mode causal --feature-map favor+ --features 16 \
  --projection proj.npy --q q.npy --k k.npy --v v.npy --grad-out g.npy \
  --grad-q gq.npy --grad-k gk.npy --grad-v gv.npy --report grad.json
exit $failed
