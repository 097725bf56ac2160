#!/usr/bin/python3
"""Merge the simulation parts (tools/smpi/simulate.sh) into docs/sim_*.csv, fit auto's
latency-bandwidth model (dist/scan_model.c, with SMPI's per-message-size factors) and check
auto against the best variant.

usage: collect.py PARTS_DIR OUTDIR
writes OUTDIR/sim_scan.csv      alg,ranks,heads,r,dv,state_bytes,seconds (the scan's comm time)
       OUTDIR/sim_weak.csv      weak scaling of the causal forward (2^20 tokens per rank)
       OUTDIR/sim_strong.csv    strong scaling (2^30 tokens)
       OUTDIR/sim_model.csv     fitted model: predicted vs measured, auto's choice vs the best
       OUTDIR/sim_model_coef.txt  the coefficients, as C for dist/scan_model.c
"""
import csv, glob, math, os, sys
import numpy as np

parts, out = sys.argv[1], sys.argv[2]
calib = list(csv.DictReader(open(os.path.join(out, "sim_calibration.csv"))))[0]
GAMMA = float(calib["combine_s_per_double"])
K = 8

def rows(prefix):
    r = []
    for f in sorted(glob.glob(os.path.join(parts, prefix + "*.csv"))):
        r += [x for x in csv.DictReader(l for l in open(f) if not l.startswith("#"))]
    return r

scan = [x for x in rows("scan_") if x["alg"] != "auto"]
with open(os.path.join(out, "sim_scan.csv"), "w") as f:
    f.write("alg,ranks,heads,r,dv,state_bytes,seconds\n")
    for x in sorted(scan, key=lambda x: (int(x["heads"]) * int(x["r"]) * int(x["dv"]), x["alg"], int(x["ranks"]))):
        f.write(f'{x["alg"]},{x["ranks"]},{x["heads"]},{x["r"]},{x["dv"]},{x["state_bytes"]},{x["seconds"]}\n')

# SMPI's network model (SimGrid 3.32 network/model:SMPI, not overridden by simulate.sh): a
# message of m bytes pays the route's latency times lat_factor(m) and moves at the bandwidth
# times bw_factor(m), the factor of the largest threshold below m (FactorSet: m <= t takes the
# previous one). Defaults of smpi/lat-factor and smpi/bw-factor, docs/simulation.md.
SMPI_FACTORS = [  # threshold bytes, latency factor, bandwidth factor
    (0, 2.01467, 0.812084), (257, 1.95341, 0.338112), (732, 1.9503, 0.341987),
    (1426, 1.61075, 0.608902), (3484, 1.88101, 0.77493), (5776, 2.18796, 1.08739),
    (9376, 2.59299, 0.58729), (15424, 3.48845, 0.697866), (65472, 11.6436, 0.940694)]

def smpi_factors(m):
    lat, bw = 1.0, 1.0
    for t, fl, fb in SMPI_FACTORS:
        if m > t: lat, bw = fl, fb
    return lat, bw

def terms(alg, P, H, per):
    """messages on the critical path, bytes per message, combined doubles (dist/scan_model.c)."""
    n = H * per; s = 8.0 * n; L = math.ceil(math.log2(P)) if P > 1 else 0
    k = min(K, per - 3)
    if alg == "doubling": return L, s, 2 * L * n
    if alg == "allgather": return P - 1, s, (P - 2) * n
    if alg == "pipelined":
        rd = P - 1 + k - 1
        return rd, s / k + 24.0 * H, rd * n / k
    return P - 1, s, max(P - 2, 0) * n  # chain, exscan

def net_terms(rd, m):
    """the factors of alpha (latency) and beta (seconds per byte): rd messages of m bytes."""
    lat, bw = smpi_factors(m)
    return rd * lat, rd * m / bw

ALGS = ["exscan", "doubling", "chain", "allgather", "pipelined"]
coef = {}
for a in ALGS:
    d = [x for x in scan if x["alg"] == a]
    if not d:
        coef[a] = (5e-6, 1e-10); continue
    A, y, w = [], [], []
    for x in d:
        P, H, r, dv = int(x["ranks"]), int(x["heads"]), int(x["r"]), int(x["dv"])
        per = r * (dv + 1) + 3
        rd, m, cb = terms(a, P, H, per)
        T = float(x["seconds"])
        A.append(list(net_terms(rd, m))); y.append(T - cb * GAMMA); w.append(1.0 / T)
    A, y, w = np.array(A), np.array(y), np.array(w)
    c = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)[0]
    if c[0] < 0 or c[1] < 0:  # non-negative: refit the other alone
        j = 1 if c[0] < 0 else 0
        cj = np.linalg.lstsq((A[:, j] * w)[:, None], y * w, rcond=None)[0][0]
        c = [0.0, max(cj, 0.0)] if j == 1 else [max(cj, 0.0), 0.0]
    coef[a] = (float(c[0]), float(c[1]))

def model(a, P, H, per):
    if P <= 1: return 0.0
    rd, m, cb = terms(a, P, H, per)
    lt, bt = net_terms(rd, m)
    return lt * coef[a][0] + bt * coef[a][1] + cb * GAMMA

CAND = ["doubling", "pipelined", "chain", "allgather"]
AG_MAX = 1024.0 ** 3
def auto(P, H, per):
    best, tb = "doubling", math.inf
    for a in CAND:
        if a == "allgather" and 8.0 * H * per * P > AG_MAX: continue
        t = model(a, P, H, per)
        if t < tb: best, tb = a, t
    return best

# predicted vs measured, and auto vs the best measured variant per (P, state)
meas = {}
for x in scan:
    key = (int(x["ranks"]), int(x["heads"]), int(x["r"]), int(x["dv"]))
    meas.setdefault(key, {})[x["alg"]] = float(x["seconds"])
worst = 0.0
with open(os.path.join(out, "sim_model.csv"), "w") as f:
    f.write("ranks,heads,r,dv,state_bytes,alg,measured,predicted,rel_err,auto,best,auto_over_best\n")
    for key in sorted(meas):
        P, H, r, dv = key; per = r * (dv + 1) + 3
        m = meas[key]
        cand = {a: t for a, t in m.items() if a in CAND}
        ch = auto(P, H, per)
        # a point with exscan alone (SimGrid's MPI_Exscan at P = 128): no candidate measured
        best = min(cand, key=cand.get) if cand else "-"
        ratio = m[ch] / m[best] if ch in m and cand else float("nan")
        if not math.isnan(ratio): worst = max(worst, ratio)
        for a in sorted(m):
            p = model(a, P, H, per)
            f.write(f"{P},{H},{r},{dv},{8*H*per},{a},{m[a]:.6g},{p:.6g},{(p-m[a])/m[a]:.3g},{ch},{best},{ratio:.4g}\n")
        print(f"P={P:5d} H={H:2d} r=dv={r:3d}: auto {ch:9s} best {best:9s} auto/best {ratio:.3f}  "
              + " ".join(f"{a}={m[a]:.3g}" for a in sorted(m)))
print(f"worst auto/best: {worst:.4f}")
for a in ALGS:  # each fit's spread
    q = [m[a] / model(a, P, H, r * (dv + 1) + 3) for (P, H, r, dv), m in meas.items() if a in m]
    if q: print(f"measured/predicted {a:9s} {min(q):.3f} .. {max(q):.3f} ({len(q)} points)")
with open(os.path.join(out, "sim_model_coef.txt"), "w") as f:
    f.write(f"gamma_combine = {GAMMA:.4g} s/double\n")
    for a in ALGS:
        f.write(f"    [LA_SCAN_{a.upper()}] = {{{coef[a][0]:.4g}, {coef[a][1]:.4g}}},\n")
print(open(os.path.join(out, "sim_model_coef.txt")).read())

# weak and strong scaling
def scaling(prefix, name):
    d = rows(prefix)
    if not d: return
    t1 = {x["alg"]: float(x["seconds"]) for x in d if x["ranks"] == "1"}
    base = next(iter(t1.values())) if t1 else float("nan")
    with open(os.path.join(out, name), "w") as f:
        f.write("alg,used,ranks,tokens,tokens_per_rank,seconds,comm_seconds,compute_seconds,"
                "speedup,efficiency,efficiency_vs_compute\n")
        for x in sorted(d, key=lambda x: (x["alg"], int(x["ranks"]))):
            P, T = int(x["ranks"]), float(x["seconds"])
            if prefix.startswith("strong"):
                sp = base / T; eff = sp / P
            else:
                sp = P * base / T; eff = base / T
            f.write(f'{x["alg"]},{x["used"]},{P},{x["tokens"]},{x["tokens_per_rank"]},{T:.6g},'
                    f'{float(x["comm_seconds"]):.6g},{float(x["compute_seconds"]):.6g},{sp:.6g},'
                    f'{eff:.4g},{float(x["compute_seconds"]) / T:.4g}\n')
scaling("weak_", "sim_weak.csv")
scaling("weakrun_", "sim_weak_stream.csv")
scaling("strong_", "sim_strong.csv")

# markdown tables for docs/simulation.md (sim_tables.md; pasted into the page)
def md_tables():
    t = []
    sc = list(csv.DictReader(open(os.path.join(out, "sim_scan.csv"))))
    Ps = sorted({int(x["ranks"]) for x in sc})
    states = sorted({(int(x["heads"]), int(x["r"])) for x in sc}, key=lambda s: s[0] * s[1] * s[1])
    for H, r in states:
        t.append(f"\nH = {H}, r = dv = {r} ({8 * H * (r * (r + 1) + 2) / 1e6:.3g} MB), seconds:\n")
        t.append("| algorithm | " + " | ".join(f"P = {P}" for P in Ps) + " |")
        t.append("|---|" + "---|" * len(Ps))
        for a in ALGS:
            cell = {int(x["ranks"]): float(x["seconds"]) for x in sc
                    if x["alg"] == a and int(x["heads"]) == H and int(x["r"]) == r}
            t.append(f"| {a} | " + " | ".join(f"{cell[P]:.3g}" if P in cell else "" for P in Ps) + " |")
    t.append("\nTABLE_WEAK\n")
    for name in ("sim_weak.csv", "sim_weak_stream.csv", "sim_strong.csv"):
        p = os.path.join(out, name)
        if not os.path.exists(p): continue
        d = list(csv.DictReader(open(p)))
        t.append(f"\n{name}:\n")
        t.append("| alg (used) | P | seconds | comm_seconds | speedup | efficiency | efficiency_vs_compute |")
        t.append("|---|---|---|---|---|---|---|")
        for x in d:
            t.append(f'| {x["alg"]} ({x["used"]}) | {x["ranks"]} | {float(x["seconds"]):.4g} | '
                     f'{float(x["comm_seconds"]):.3g} | {float(x["speedup"]):.4g} | '
                     f'{float(x["efficiency"]):.4f} | {float(x["efficiency_vs_compute"]):.4f} |')
    t.append("\nTABLE_COEF\n")
    lat64, bw64 = smpi_factors(65473)
    t.append("| algorithm | alpha (s per message) | beta (s per byte) | 1/beta (GB/s) "
             f"| above 65472 B: alpha x {lat64:.4g} (us) | 1/beta x {bw64:.4g} (GB/s) |")
    t.append("|---|---|---|---|---|---|")
    for a in ALGS:
        bw = f"{1e-9 / coef[a][1]:.3g}" if coef[a][1] > 0 else "inf"
        bwe = f"{1e-9 * bw64 / coef[a][1]:.3g}" if coef[a][1] > 0 else "inf"
        t.append(f"| {a} | {coef[a][0]:.3g} | {coef[a][1]:.3g} | {bw} | "
                 f"{1e6 * lat64 * coef[a][0]:.3g} | {bwe} |")
    t.append("\nTABLE_AUTO\n")
    m = list(csv.DictReader(open(os.path.join(out, "sim_model.csv"))))
    t.append("| P | H | r = dv | auto | best | auto / best | worst model error (candidates) |")
    t.append("|---|---|---|---|---|---|---|")
    seen = {}
    for x in m:
        k = (int(x["ranks"]), int(x["heads"]), int(x["r"]))
        e = abs(float(x["rel_err"])) if x["alg"] in CAND else 0
        seen.setdefault(k, [x, 0.0])
        seen[k][1] = max(seen[k][1], e)
    for k in sorted(seen):
        x, e = seen[k]
        t.append(f'| {k[0]} | {k[1]} | {k[2]} | {x["auto"]} | {x["best"]} | {float(x["auto_over_best"]):.3f} | {100 * e:.0f} % |')
    open(os.path.join(out, "sim_tables.md"), "w").write("\n".join(t) + "\n")
md_tables()
