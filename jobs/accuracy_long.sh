#!/usr/bin/env bash
# Accumulated error of the float32 engine over a very long sequence (docs/design.md §4.3):
# float32 inputs at N = 2^LOG2N (default 24), run in float32, against a float64 run of the
# same (float32-rounded) data. The state is float64 in both; what the float32 run loses is
# in its GEMMs and feature rows. Prints, per octave of token positions, the worst relative
# row error max_i ||o32_i - o64_i|| / ||o64_i||, so growth with N would show.
# Usage: bash jobs/accuracy_long.sh [LOG2N] [MAP...]   (needs ~12 GB of disk at 2^24, H = 1)
set -euo pipefail
cd "$(dirname "$0")/.."
. jobs/env.sh
LOG2N=${1:-24}
shift || true
MAPS=${*:-elu1 favor+}
W=${LINATTN_WORK:-out/accuracy_long}
mkdir -p "$W"
/usr/bin/python3 - "$W" "$LOG2N" <<'EOF'
import sys, numpy as np
w, lg = sys.argv[1], int(sys.argv[2])
n, d = 1 << lg, 16
rng = np.random.default_rng(2026)
for t in "qkv":
    x = rng.standard_normal((n, 1, d), dtype=np.float32)
    np.save(f"{w}/{t}32.npy", x)
    np.save(f"{w}/{t}64.npy", x.astype(np.float64))
EOF
for map in $MAPS; do
  extra=""
  [ "$map" = elu1 ] || extra="--features 16"
  build/linattn run --q "$W/q32.npy" --k "$W/k32.npy" --v "$W/v32.npy" --feature-map "$map" \
    $extra --out "$W/o32.npy" --force --no-progress
  build/linattn run --q "$W/q64.npy" --k "$W/k64.npy" --v "$W/v64.npy" --feature-map "$map" \
    $extra --out "$W/o64.npy" --force --no-progress
  /usr/bin/python3 - "$W" "$map" <<'EOF'
import sys, numpy as np
w, mp = sys.argv[1], sys.argv[2]
a = np.load(f"{w}/o32.npy", mmap_mode="r")
b = np.load(f"{w}/o64.npy", mmap_mode="r")
n = a.shape[0]
print(f"map {mp}, N = {n}: worst relative row error of float32 against float64, per octave")
lo = 0
while lo < n:
    hi = max(1, 2 * lo) if lo else 1
    hi = min(hi, n)
    worst = 0.0
    for s in range(lo, hi, 1 << 20):
        e = min(hi, s + (1 << 20))
        x = a[s:e].astype(np.float64); y = b[s:e]
        r = np.linalg.norm((x - y).reshape(e - s, -1), axis=1) / np.linalg.norm(y.reshape(e - s, -1), axis=1)
        worst = max(worst, float(np.max(r))) if not np.isnan(r).any() else float("nan")
    print(f"  tokens [{lo}, {hi}): {worst:.3e}")
    lo = hi
EOF
done
rm -f "$W"/*.npy
