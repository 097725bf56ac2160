#!/usr/bin/env bash
# The main job: set up, build, and run linattn on the built-in synthetic workload
# (causal elu1, 2^20 tokens, 4 heads, dk = dv = 64, float32) on 2 ranks.
# Usage: bash jobs/main.sh [extra linattn run options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/setup.sh
. jobs/env.sh
mkdir -p out
# the main job's settings, each unless the caller gives it (linattn refuses an option twice)
defaults=()
for kv in "--n 1048576" "--heads 4" "--dk 64" "--dv 64" "--report out/main-report.json"; do
  case " $* " in *" ${kv%% *} "*) ;; *) defaults+=($kv) ;; esac
done
case " $* " in *" --force "*) ;; *) defaults+=(--force) ;; esac
# PMIx's munge plugin retries for 2.2 s at every start where munge is installed (test.sh's
# Slurm brings it) but munged is not running; mpirun's own PMIx server needs only the native
# plugin. A setting of yours is kept (docs/testing.md "Test time").
export PMIX_MCA_psec="${PMIX_MCA_psec:-native}"
# every rank gets the BLAS core env.sh chose or kept (Open MPI forwards only what -x names)
blas=()
[ -n "${OPENBLAS_CORETYPE+x}" ] && blas=(-x OPENBLAS_CORETYPE)
mpirun -np "${LINATTN_RANKS:-2}" --bind-to none -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
  -x OPENBLAS_NUM_THREADS "${blas[@]}" build/linattn run "${defaults[@]}" "$@"
echo "linattn: report written to out/main-report.json" >&2
