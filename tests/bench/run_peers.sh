#!/usr/bin/env bash
# linattn against its PyTorch peers (tests/bench/peers.py) in one run, same sizes and threads:
#   1. linattn bench: causal and bidirectional elu1, causal favor+ (m = 256), and the GEMM probe;
#   2. peers.py: fla's chunked causal reference, Katharopoulos et al.'s bidirectional einsum;
#   3. agreement: both peers against `linattn run --out` on the same small .npy inputs (1e-4);
#   4. a table: tokens/s, ratio to the peer, GFLOP/s as a fraction of SGEMM at T threads, and
#      the targets of issue 6 beside them. Timings are reported, never asserted.
# Usage: run_peers.sh [--smoke] [--linattn PATH] [--workdir DIR] [--n N] [--heads H] [--dk D]
#                     [--dv D] [--threads T] [--repeat K] [--launcher "mpirun -np 1"]
# --smoke: n 4096, 2 heads, d 16, repeat 1 (the ctest). Exit 0 ok, 1 failure, 77 no PyTorch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
LINATTN=$here/../../build/linattn
WORK=${TMPDIR:-/tmp}/linattn-peers.$$
N=1048576 H=4 DK=64 DV=64 T=$(nproc) K=3 SMOKE=0 LAUNCHER=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1; shift ;;
    --linattn) LINATTN=$2; shift 2 ;;
    --workdir) WORK=$2; shift 2 ;;
    --n) N=$2; shift 2 ;;
    --heads) H=$2; shift 2 ;;
    --dk) DK=$2; shift 2 ;;
    --dv) DV=$2; shift 2 ;;
    --threads) T=$2; shift 2 ;;
    --repeat) K=$2; shift 2 ;;
    --launcher) LAUNCHER=$2; shift 2 ;;
    *) echo "run_peers.sh: error: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then N=4096 H=2 DK=16 DV=16 K=1; fi
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "run_peers.sh: PyTorch is not installed (apt-get install python3-torch); skipping" >&2
  exit 77
fi
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_execute_quiet=1
# linattn keeps OpenBLAS single-threaded inside its OpenMP threads; the peers get T BLAS threads.
run_linattn() { OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$T $LAUNCHER "$LINATTN" "$@"; }
common=(--n "$N" --heads "$H" --dk "$DK" --dv "$DV" --threads "$T" --repeat "$K" --force)

echo "== linattn bench (N=$N H=$H dk=$DK dv=$DV threads=$T, best of $K)" >&2
run_linattn bench "${common[@]}" --modes causal,bidirectional --feature-maps elu1 --gemm-probe \
  --csv "$WORK/linattn.csv" >/dev/null
run_linattn bench "${common[@]}" --modes causal --feature-maps favor+ --features 256 \
  --csv "$WORK/linattn_favor.csv" >/dev/null
echo "== peers.py" >&2
OPENBLAS_NUM_THREADS=$T OMP_NUM_THREADS=$T "$PY" "$here/peers.py" --n "$N" --heads "$H" \
  --dk "$DK" --dv "$DV" --threads "$T" --repeat "$K" >"$WORK/peers.csv"

echo "== agreement on a small case (n 1000, 2 heads, d 16, float32)" >&2
"$PY" "$here/peers.py" --make-inputs "$WORK/agree" --n 1000 --heads 2 --dk 16 --dv 16
for m in causal bidirectional; do
  run_linattn run --q "$WORK/agree/q.npy" --k "$WORK/agree/k.npy" --v "$WORK/agree/v.npy" \
    --mode "$m" --out "$WORK/agree/out_$m.npy" --force --no-progress 2>/dev/null
done
OMP_NUM_THREADS=1 "$PY" "$here/peers.py" --check "$WORK/agree" --threads 1

"$PY" - "$WORK" <<'EOF'
import csv, math, sys
w = sys.argv[1]
rows = lambda f: list(csv.DictReader(open(f"{w}/{f}")))
lin, peers = rows("linattn.csv") + rows("linattn_favor.csv"), rows("peers.csv")
def pick(rs, **kv):
    m = [r for r in rs if all(r[k] == v for k, v in kv.items())]
    if len(m) != 1: sys.exit(f"run_peers.sh: error: expected one row with {kv}, found {len(m)}")
    return m[0]
def num(r, c):
    x = float(r[c])
    if not (math.isfinite(x) and x > 0): sys.exit(f"run_peers.sh: error: {c} = {r[c]} in {r}")
    return x
T = pick(lin, impl="linear", mode="causal", map="elu1")["threads"]
sgemm = num(pick(lin, impl="sgemm", threads=T), "gflops")
sgemm1 = num(pick(lin, impl="sgemm", threads="1"), "gflops")
cases = [("causal elu1", dict(mode="causal", map="elu1"), "chunked", 0.50, 3.0),
         ("bidirectional elu1", dict(mode="bidirectional", map="elu1"), "einsum", 0.60, 5.0),
         ("causal favor+ m=256", dict(mode="causal", map="favor+"), None, 0.50, None)]
print(f"SGEMM (OpenBLAS, {T} threads): {sgemm:.1f} GFLOP/s; 1 thread: {sgemm1:.1f} GFLOP/s")
# The engine's own AVX-512 kernel on its 64^3 chunk products: a second, higher ceiling where
# OpenBLAS runs narrower kernels than the CPU has (absent without AVX-512).
k512 = [r for r in lin if r["impl"] == "k512gemm" and r["threads"] == T]
kgf = num(k512[0], "gflops") if k512 else None
if kgf:
    print(f"linattn AVX-512 kernel, 64^3 products in cache ({T} threads): {kgf:.1f} GFLOP/s")
hdr = ("case", "linattn tok/s", "peer", "peer tok/s", "ratio", "target", "GFLOP/s",
       "of SGEMM", "target", "of kernel")
fmt = "{:<20} {:>13} {:>8} {:>11} {:>7} {:>7} {:>8} {:>9} {:>7} {:>10}"
print(fmt.format(*hdr))
for name, sel, peer, tfrac, tratio in cases:
    r = pick(lin, impl="linear", **sel)
    tps, gf = num(r, "tokens_per_s"), num(r, "gflops")
    ptps = num(pick(peers, impl=peer), "tokens_per_s") if peer else None
    print(fmt.format(name, f"{tps:.4g}", peer or "-", f"{ptps:.4g}" if peer else "-",
                     f"{tps / ptps:.2f}x" if peer else "-", f">={tratio:g}x" if tratio else "-",
                     f"{gf:.1f}", f"{gf / sgemm:.2f}", f">={tfrac:.2f}",
                     f"{gf / kgf:.2f}" if kgf else "-"))
EOF
echo "run_peers.sh: linattn and the peers ran and agree; CSVs in $WORK" >&2
