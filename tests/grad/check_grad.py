#!/usr/bin/python3
"""`linattn grad` (the backward pass) at the rank count of --launcher.

Claims tested:
(a) The program's dQ, dK, dV equal PyTorch autograd (float64) of L = sum(out * G) through the
    quadratic, explicitly masked operator (torch_oracle.py), per gradient
    ||prog - torch||_F / ||torch||_F <= 1e-12 in f64 and 2e-6 in f32 (the denominator is
    floored at 1e-3 x the largest of the three gradient norms, because normalized N = 1 or
    W = 1 gives out_i = v_i and dQ = dK = 0 exactly), for: every map x mode x
    normalize on/off (taylor2 and dpfp included; dpfp with nu = 3); policies add:E, clamp:E (E near the median den, so rows on both sides)
    and zero-empty (rows with den == 0 exactly, one with phi(q) != 0) including favor maps,
    where E acts on the TRUE den; segments straddling and touching rank boundaries (length-1
    segments too); windows 1, 2, 5, W > N/P and W > N, with and without segments; favor inputs
    whose norms ramp 0.5 -> 3 (the key stabilizer rescales); 2-D inputs; N = 1 and 3 (ranks
    without rows); --chunk 8 and the default chunk, 1 and 2 threads. N is mostly 50..200, so
    several chunks and ranks occur.
    Skipped (exit 77, after (b) and (c)) when torch is not importable.
(b) fd_check.py: the program against central finite differences on tiny f64 cases (one
    rank only, i.e. when --launcher is empty).
(c) CLI: file inputs without --grad-out exit 2 naming --grad-out; a --grad-out of the wrong
    shape exits 2; an existing --grad-q without --force exits 2 and leaves it byte-identical
    (and writes no other gradient); a denominator violation exits 3 with no gradient files;
    a success leaves all three files and no *.tmp.* file; --force overwrites; the synthetic
    workload without --grad-out draws G itself (exit 0, three finite arrays of the right shape;
    under a launcher, equal to the one-rank run to 1e-12).
(d) grad --out: the replay's outputs against the float64 quadratic operator (reference.py),
    within the tolerances of (a), causal and bidirectional, f32 (the AVX-512 replay where the
    CPU has it) and f64, 2-D and 3-D inputs written as [N,H,dv] like run's; --out with
    --window or --segments exits 2 naming --out and writes nothing; on one rank with the
    AVX-512 kernels, f32 causal and bidirectional, grad's outputs are run's, byte for byte.

Usage: check_grad.py --linattn build/linattn --workdir DIR [--launcher "mpiexec -n 3"] [--quick]
"""
import itertools
import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
sys.path.insert(0, HERE)
import common  # noqa: E402
import fd_check  # noqa: E402
import reference as ref  # noqa: E402

try:
    import torch_oracle
except ImportError as _e:          # torch missing: (a) is skipped
    torch_oracle, TORCH_ERROR = None, str(_e)

# Unit roundoff u = 1.1e-16 (f64), 6.0e-8 (f32), times the ~30-fold growth of sums over
# chunks of up to ~1000 terms (sqrt(1000) ~ 32): 4e-15 and 2e-6. Measured worst: 4e-15 (f64)
# and 2e-7 (f32). f64 keeps a factor 250 of margin for the stabilized maps' exp arguments.
TOL = {"f64": 1e-12, "f32": 2e-6}
FEATURES = {"favor+": 8, "favor+orf": 8, "favor-hyp": 8, "trig": 16, "dpfp": 3}   # dpfp: nu


def ranks(launcher):
    t = launcher.split()
    for i, x in enumerate(t[:-1]):
        if x in ("-n", "-np", "--np", "-c"):
            return int(t[i + 1])
    return 1


def rank_bounds(n, p):
    """Block split with the remainder on the first ranks (the usual ownership split)."""
    return [n // p * r + min(r, n % p) for r in range(p + 1)]


def make_data(c):
    """q, k, v, g for a case; data keep a normalized den well above 0 (zero rows only where
    the zero-empty policy wants them)."""
    rng = np.random.default_rng(zlib.crc32(c["name"].encode()))
    n, h, dk, dv, mp, norm = c["n"], c["h"], c["dk"], c["dv"], c["map"], c["normalize"]
    g = lambda d: rng.standard_normal((n, h, d))
    if mp == "precomputed":
        q, k = (rng.uniform(0.1, 1.0, (n, h, dk)) for _ in "qk") if norm else (g(dk), g(dk))
    elif mp in ("relu", "dpfp") and norm:  # no accidental zero rows (dpfp: rho is a relu)
        q, k = np.maximum(g(dk) + 1.0, 0.05), np.maximum(g(dk) + 1.0, 0.05)
    elif mp == "identity" and norm:
        q, k = 0.5 * g(dk) + 1.0, 0.5 * g(dk) + 1.0
    elif mp == "trig":
        q, k = (0.3 if norm else 0.7) * g(dk), (0.3 if norm else 0.7) * g(dk)
    elif mp in ref.RANDOM_MAPS:
        q, k = c.get("input_scale", 0.7) * g(dk), c.get("input_scale", 0.7) * g(dk)
    else:
        q, k = g(dk), g(dk)
    if c.get("ramp"):                     # norms grow 0.5 -> ramp along the sequence: the
        r = np.linspace(0.5, c["ramp"], n)[:, None, None]   # key stabilizer must rescale
        q, k = r * g(dk), r * g(dk)
    for t, hh in c.get("zero_q", ()):     # relu: phi(q) = 0 -> den = 0
        q[t, hh] = -np.abs(q[t, hh]) - 0.1
    for t, hh in c.get("zero_k", ()):
        k[t, hh] = -np.abs(k[t, hh]) - 0.1
    v, gg = g(dv), g(dv)
    if c.get("two_d"):                    # [N, d] inputs mean H = 1
        q, k, v, gg = q[:, 0], k[:, 0], v[:, 0], gg[:, 0]
    c.update(q=q, k=k, v=v, g=gg)


def base(name, mp, mode, **kw):
    c = dict(name=name, map=mp, mode=mode, normalize=True, policy="error", dtype="f64",
             n=120, h=2, dk=6 if mp != "precomputed" else 8, dv=4, threads=1, chunk=None,
             seg=None, window=None, features=FEATURES.get(mp), seed=zlib.crc32(name.encode()) % 97)
    c.update(kw)
    return c


def oracle_cases(P, quick):
    """The table for (a)."""
    cs = []
    # every map x mode x normalize, f64; N and chunk vary so chunk/rank boundaries fall anywhere
    for i, (mp, mode, norm) in enumerate(itertools.product(ref.MAPS, ("causal", "bidirectional"),
                                                           (True, False))):
        n = (50, 97, 160, 200)[i % 4]
        chunk = 8 if (mode == "causal" and i % 3 != 2) else None
        cs.append(base(f"{mp} {mode} {'norm' if norm else 'unnorm'} f64 N={n} chunk={chunk or 'dflt'}",
                       mp, mode, normalize=norm, n=n, chunk=chunk, threads=1 + i % 2))
    # f32 at 1e-4: every map x mode normalized (quick: causal only)
    for i, (mp, mode) in enumerate(itertools.product(ref.MAPS, ("causal",) if quick else
                                                     ("causal", "bidirectional"))):
        cs.append(base(f"{mp} {mode} norm f32 N=150", mp, mode, dtype="f32", n=150,
                       chunk=8 if i % 2 == 0 and mode == "causal" else None, threads=2))
    cs.append(base("favor+ causal unnorm f32 N=150", "favor+", "causal", normalize=False,
                   dtype="f32", n=150, chunk=8))
    # policies; E is set from the oracle's den (near the median: rows on both sides)
    for mp, mode in itertools.product(("relu", "favor+", "favor-hyp"), ("causal", "bidirectional")):
        if quick and mp == "favor-hyp":
            continue
        zeros = dict(zero_q=((3, 0), (70, 1)), zero_k=((0, 1),)) if mp == "relu" else {}
        isc = {} if mp == "relu" else dict(input_scale=1.3)   # stabilizer active
        for pol in ("add:E", "clamp:E"):
            cs.append(base(f"{mp} {mode} {pol} f64", mp, mode, policy=pol, n=140,
                           chunk=8 if mode == "causal" else None, **zeros, **isc))
    n = 150
    own = rank_bounds(n, P)
    for mode in ("causal", "bidirectional"):
        cs.append(base(f"relu {mode} zero-empty f64 (empty rows, empty segment)", "relu", mode,
                       policy="zero-empty", n=n, seg=sorted({0, 40, 41, n} | set(own)),
                       zero_q=((3, 0), (70, 1)), zero_k=((0, 1), (40, 0), (40, 1)),
                       chunk=8 if mode == "causal" else None))
        cs.append(base(f"favor-hyp {mode} zero-empty f64 (no zero den)", "favor-hyp", mode,
                       policy="zero-empty", n=n, chunk=8 if mode == "causal" else None))
    cs.append(base("relu causal zero-empty f32", "relu", "causal", policy="zero-empty",
                   dtype="f32", n=n, zero_q=((3, 0),), zero_k=((0, 1),), chunk=8))
    # segments straddling rank boundaries, touching them, length 1
    n = 180
    own = rank_bounds(n, P)
    straddle = sorted({0, 1, 2, 57, 58, 101, n - 1, n}
                      | {min(max(b + d, 1), n - 1) for b in own[1:-1] for d in (-3, 0, 4)})
    for mp, mode, chunk in (("elu1", "causal", 8), ("elu1", "bidirectional", None),
                            ("favor+", "causal", None), ("favor+", "bidirectional", None),
                            ("relu", "causal", 8), ("trig", "causal", 8),
                            ("precomputed", "bidirectional", None), ("favor-hyp", "causal", 8),
                            ("taylor2", "bidirectional", None), ("dpfp", "causal", 8)):
        norm = mp != "trig"
        cs.append(base(f"{mp} {mode} {'norm' if norm else 'unnorm'} segments straddling ranks "
                       f"chunk={chunk or 'dflt'}", mp, mode, normalize=norm, n=n, seg=straddle,
                       chunk=chunk))
    cs.append(base("elu1 bidirectional segments: one spanning all ranks", "elu1", "bidirectional",
                   n=n, seg=[0, 1, n - 1, n]))
    cs.append(base("favor+ causal segments f32", "favor+", "causal", dtype="f32", n=n,
                   seg=straddle, chunk=8))
    # windows (causal): 1, 5, > N/P, > N; with and without segments
    for w in (1, 5, n // P + 7, n + 5):
        for mp in ("elu1", "favor-hyp"):
            if quick and mp == "favor-hyp" and w != 5:
                continue
            cs.append(base(f"{mp} causal window W={w} chunk=8", mp, "causal", n=n, window=w,
                           chunk=8))
        cs.append(base(f"favor+ causal window W={w} + segments", "favor+", "causal", n=n,
                       window=w, seg=straddle, chunk=8 if w != 5 else None))
    cs.append(base("elu1 causal unnorm window W=1", "elu1", "causal", normalize=False, n=n,
                   window=1, chunk=8))
    for mp in ("taylor2", "dpfp"):
        cs.append(base(f"{mp} causal window W=9 + segments", mp, "causal", n=n, window=9,
                       seg=straddle, chunk=8))
    cs.append(base("taylor2 causal window W=5 f32", "taylor2", "causal", dtype="f32", n=n,
                   window=5, chunk=8))
    cs.append(base("favor+ causal norm window W=2", "favor+", "causal", n=n, window=2, chunk=8))
    cs.append(base("identity causal unnorm window W=5 + segments", "identity", "causal",
                   normalize=False, n=n, window=5, seg=straddle, chunk=8))
    # stabilizer: favor inputs whose norms ramp 0.5 -> 3 (outputs span many decades)
    for mp, mode, norm in itertools.product(("favor+", "favor-hyp"), ("causal", "bidirectional"),
                                            (True, False)):
        if quick and mp == "favor-hyp":
            continue
        cs.append(base(f"{mp} {mode} {'norm' if norm else 'unnorm'} input ramp 0.5..3", mp, mode,
                       normalize=norm, n=200, ramp=3.0, chunk=8 if mode == "causal" else None))
    # shapes: 2-D inputs (H = 1), N < P (ranks without rows), N = 1
    cs.append(base("elu1 causal norm 2-D inputs [N,d]", "elu1", "causal", n=77, h=1, two_d=True,
                   chunk=8))
    cs.append(base("favor+ bidirectional norm 2-D inputs [N,d]", "favor+", "bidirectional", n=77,
                   h=1, two_d=True))
    for n1 in (1, 3):
        for mp, mode in (("elu1", "causal"), ("favor+", "causal"), ("favor-hyp", "bidirectional")):
            cs.append(base(f"{mp} {mode} norm N={n1}", mp, mode, n=n1, chunk=8))
        cs.append(base(f"favor-hyp bidirectional unnorm N={n1}", "favor-hyp", "bidirectional",
                       normalize=False, n=n1))
    cs.append(base("elu1 causal window W=5 f32", "elu1", "causal", dtype="f32", n=n, window=5,
                   chunk=8))
    # the streamed backward (dist/stream_backward.c): blocks smaller than a rank's rows, so that
    # every pass runs several steps (idle ones on ranks with fewer blocks), blocks that end
    # inside chunks and segments
    for mp, mode, kw in (("elu1", "causal", dict(n=180, chunk=8, block=7, seg=straddle)),
                         ("favor+", "causal", dict(n=150, block=16, threads=2)),
                         ("elu1", "bidirectional", dict(n=181, block=13)),
                         ("favor-hyp", "bidirectional", dict(n=120, block=11, normalize=False)),
                         ("relu", "causal", dict(n=150, block=9, chunk=8, policy="zero-empty",
                                                 zero_q=((3, 0), (70, 1)), zero_k=((0, 1),))),
                         ("elu1", "causal", dict(n=160, block=20, dtype="f32", chunk=8))):
        name = f"{mp} {mode} streamed in blocks of {kw['block']} " + " ".join(
            f"{a}={b}" for a, b in kw.items() if a not in ("seg", "block", "zero_q", "zero_k")) + \
            (" segments" if "seg" in kw else "")
        cs.append(base(name, mp, mode, **kw))
    # --decay (docs/design.md §1.2 "The backward"): both modes, unstabilized maps, any ranks
    if True:
        for mp, kw in (("elu1", {}), ("taylor2", {}), ("dpfp", {}), ("relu", {}),
                       ("identity", {"normalize": False}), ("elu1", {"dtype": "f32"}),
                       ("elu1", {"seg": straddle}), ("elu1", {"policy": "add:E"}),
                       # with a window, N = 181 (not a multiple of 3 or 4: the reversed
                       # sequence's shards are then not la_split_ownership's)
                       ("elu1", {"window": 5, "n": 181}),
                       ("relu", {"window": 37, "seg": straddle[:-1] + [181], "n": 181}),
                       ("elu1", {"window": 20, "dtype": "f32", "n": 181})):
            name = f"{mp} causal --decay 0.9,0.6 " + " ".join(
                f"{a}={b}" for a, b in kw.items() if a != "seg") + (" segments" if "seg" in kw else "")
            cs.append(base(name, mp, "causal", **{"n": n, "chunk": 8, "decay": [0.9, 0.6], **kw}))
        # the stabilized maps: each head's keys on one common scale over the ranks
        for mp, kw in (("favor+", {}), ("favor-hyp", {"seg": straddle}), ("favor+", {"dtype": "f32"}),
                       ("favor+", {"window": 7, "n": 181})):
            name = f"{mp} causal --decay 0.9,0.6 " + " ".join(
                f"{a}={b}" for a, b in kw.items() if a != "seg") + (" segments" if "seg" in kw else "")
            cs.append(base(name, mp, "causal", **{"n": n, "chunk": 8, "decay": [0.9, 0.6], **kw}))
        # bidirectional (weights gamma^|i-j|): four products in order, no reversal
        for mp, kw in (("elu1", {}), ("taylor2", {"seg": straddle}), ("relu", {"dtype": "f32"}),
                       ("identity", {"normalize": False, "n": 181}), ("favor+", {"seg": straddle})):
            name = f"{mp} bidirectional --decay 0.9,0.6 " + " ".join(
                f"{a}={b}" for a, b in kw.items() if a != "seg") + (" segments" if "seg" in kw else "")
            cs.append(base(name, mp, "bidirectional",
                           **{"n": n, "chunk": 8, "decay": [0.9, 0.6], **kw}))
        # --gates (docs/design.md §1.2 "Gates"), dL/dg from --grad-gates: alone, with --decay
        # and with a window (the halo's gates from the earlier ranks; N = 181 as above)
        for mp, kw in (("elu1", {}), ("taylor2", {"decay": [0.9, 0.6]}), ("relu", {}),
                       ("elu1", {"dtype": "f32"}), ("elu1", {"seg": straddle}),
                       ("elu1", {"window": 5, "n": 181}),
                       ("taylor2", {"window": 37, "seg": straddle[:-1] + [181], "n": 181,
                                    "decay": [0.9, 0.6]}),
                       ("elu1", {"window": 20, "dtype": "f32", "n": 181}),
                       ("favor+", {"decay": [0.9, 0.6]}), ("favor-hyp", {"window": 9, "n": 181})):
            name = f"{mp} causal --gates " + " ".join(
                f"{a}={b}" for a, b in kw.items() if a != "seg") + (" segments" if "seg" in kw else "")
            c = base(name, mp, "causal", **{"n": n, "chunk": 8, **kw})
            c["gates"] = -0.3 * np.random.default_rng(c["seed"] + 38).random((c["n"], c["h"]))
            cs.append(c)
        # per-feature gates [N, H, r] (GLA's form, §1.2 "Per-feature gates"): dL/dg [N, H, r]
        # on any number of ranks (the value-decayed products' states scanned in row form);
        # r = dk for elu1 and relu, 8 for favor+
        for mp, kw in (("elu1", {}), ("elu1", {"seg": straddle, "decay": [0.9, 0.6]}),
                       ("relu", {}), ("elu1", {"dtype": "f32"}), ("favor+", {"seg": straddle})):
            name = f"{mp} causal --gates [N,H,r] " + " ".join(
                f"{a}={b}" for a, b in kw.items() if a != "seg") + (" segments" if "seg" in kw else "")
            c = base(name, mp, "causal", **{"n": n, "chunk": 8, **kw})
            r = c["dk"] if mp != "favor+" else c["features"]
            c["gates"] = -0.3 * np.random.default_rng(c["seed"] + 38).random((c["n"], c["h"], r))
            cs.append(c)
    return cs


def omega_for(c):
    """Policy cases with random maps get a fixed projection (--projection), so E can be
    chosen from the true den before the run."""
    if c["map"] in ref.RANDOM_MAPS and c["policy"] in ("add:E", "clamp:E"):
        rng = np.random.default_rng(c["seed"])
        c["omega"] = rng.standard_normal((c["h"], c["features"], c["dk"]))


def choose_eps(c):
    """E between two adjacent dens near the median (so add/clamp change many rows and no den
    sits on the clamp kink)."""
    r = torch_oracle.gradients(c["q"], c["k"], c["v"], c["g"], c["map"], c.get("omega"), None,
                               c["mode"], False, "error", c["seg"], c["window"], c["features"])
    d = np.sort(r["den"].ravel())
    mid = len(d) // 2
    c["policy"] = c["policy"].replace("E", repr(float(0.5 * (d[mid - 1] + d[mid]))))


def oracle_case(run, tally, c):
    make_data(c)
    omega_for(c)
    if c["policy"] in ("add:E", "clamp:E"):
        choose_eps(c)
    got, omega, prob, _ = fd_check.run_grad(run, c, "a", c["dtype"], c["threads"])
    if got is None:
        return tally.case(False, c["name"], note=prob, cmd=run.last)
    try:
        r = torch_oracle.gradients(c["q"], c["k"], c["v"], c["g"], c["map"], omega, None,
                                   c["mode"], c["normalize"], c["policy"], c["seg"], c["window"],
                                   c["features"], c.get("decay"), c.get("gates"))
    except torch_oracle.DenominatorViolation as e:
        return tally.case(False, c["name"], note=f"TEST DATA: oracle den violates: {e}")
    den = r["den"]
    note = f"den[min={den.min():.2g},zeros={int((den == 0).sum())}]"
    if c["normalize"] and c["policy"] == "error" and c["map"] in ("relu", "identity", "trig",
                                                                  "precomputed", "dpfp") \
            and den.min() < 1e-3 * np.median(den):
        return tally.case(False, c["name"], note="TEST DATA: den near 0; " + note)
    if c["policy"].startswith("clamp:"):          # no den on the kink, even after f32 rounding
        e = float(c["policy"][6:])
        if np.min(np.abs(den - e)) < 1e-4 * e:
            return tally.case(False, c["name"], note="TEST DATA: a den is within 1e-4 of E")
    # ||got - ref|| / max(||ref||, 1e-3 * largest gradient norm): a gradient that is exactly 0
    # (normalized N = 1 or W = 1: out_i = v_i) is judged on the scale of the others
    floor = 1e-3 * max(np.linalg.norm(r[d]) for d in ("dq", "dk", "dv"))
    errs = {}
    for d in ("dq", "dk", "dv") + (("dg",) if "dg" in r else ()):
        x = got[d].astype(np.float64)
        errs[d] = float(np.linalg.norm(x - r[d]) / max(np.linalg.norm(r[d]), floor, 1e-300)) \
            if np.all(np.isfinite(x)) else float("inf")
    err = max(errs.values())
    note = " ".join(f"{d}={e:.1e}" + "(floor)" * bool(np.linalg.norm(r[d]) < floor)
                    for d, e in errs.items()) + " " + note
    tol = TOL[c["dtype"]]
    return tally.case(err <= tol, c["name"] + f" [{c['policy']}]" * (c["policy"] != "error"),
                      err, tol, note, run.last)


# --- (c) CLI behaviour ---------------------------------------------------------------------

def cli_checks(run, tally, P):
    c = base("cli", "elu1", "causal", n=40)
    make_data(c)
    for nm in "qkvg":
        common.save(run.path(f"c_{nm}.npy"), c[nm], "f64")
    outs = [run.path(f"c_g{x}.npy") for x in "qkv"]
    io = ["--q", "c_q.npy", "--k", "c_k.npy", "--v", "c_v.npy"]
    gout = ["--grad-q", "c_gq.npy", "--grad-k", "c_gk.npy", "--grad-v", "c_gv.npy"]

    def expect(name, rc_want, rc, err, must=(), absent=outs):
        probs = [] if rc == rc_want else [f"exit {rc}, want {rc_want}"]
        probs += common.error_line_problems(rc, err)
        probs += [f"stderr does not name {m!r}" for m in must if m not in err]
        probs += [f"{os.path.basename(p)} was written" for p in absent if os.path.exists(p)]
        probs += [f"temporary files remain: {t}" for t in fd_check.leftover_tmp(run.workdir)]
        tally.case(not probs, name, note="; ".join(probs) or common.first_error(err), cmd=run.last)

    common.rm(*outs)
    rc, _, err = run(*io, *gout, sub="grad")
    expect("file inputs without --grad-out: exit 2 naming --grad-out", 2, rc, err, ["--grad-out"])

    # per-feature gates [N, H, r] (§1.2 "Per-feature gates") whose width is not the map's:
    # exit 2 naming both, nothing written
    common.save(run.path("c_gf5.npy"), -0.2 * np.ones((40, 2, 5)), "f64")
    rc, _, err = run(*io, "--grad-out", "c_g.npy", "--gates", "c_gf5.npy", *gout, sub="grad")
    expect("--gates [N,H,5] for r = 6: exit 2 naming both", 2, rc, err, ["c_gf5.npy", "r = 5",
                                                                         "r = 6"])

    for shape, what in (((40, 2, 5), "dv+1"), ((39, 2, 4), "N-1"), ((40, 4), "2-D with H=2")):
        common.save(run.path("c_gbad.npy"), np.ones(shape), "f64")
        rc, _, err = run(*io, "--grad-out", "c_gbad.npy", *gout, sub="grad")
        expect(f"--grad-out of shape {shape} ({what}): exit 2", 2, rc, err, ["c_gbad.npy"])

    rc, _, err = run(*io, "--grad-out", "c_g.npy", *gout, sub="grad")
    probs = [] if rc == 0 else [f"exit {rc}: {common.first_error(err)}"]
    probs += [f"{os.path.basename(p)} missing" for p in outs if not os.path.exists(p)]
    probs += [f"temporary files remain: {t}" for t in fd_check.leftover_tmp(run.workdir)]
    tally.case(not probs, "success: all three gradient files, no *.tmp.*", note="; ".join(probs),
               cmd=run.last)

    if not probs:
        common.rm(outs[1], outs[2])
        before = (open(outs[0], "rb").read(), os.stat(outs[0]).st_mtime_ns)
        rc, _, err = run(*io, "--grad-out", "c_g.npy", *gout, sub="grad")
        after = (open(outs[0], "rb").read(), os.stat(outs[0]).st_mtime_ns)
        expect("existing --grad-q without --force: exit 2, file untouched, nothing written",
               2, rc, err, ["c_gq.npy"], absent=outs[1:])
        if before != after:
            tally.case(False, "existing --grad-q without --force: file untouched",
                       note="c_gq.npy was modified", cmd=run.last)
        open(outs[0], "wb").write(b"old")
        rc, _, err = run(*io, "--grad-out", "c_g.npy", *gout, "--force", sub="grad")
        ok = rc == 0 and all(os.path.exists(p) for p in outs) and \
            np.load(outs[0]).shape == c["q"].shape
        tally.case(ok, "--force overwrites an existing --grad-q",
                   note="" if ok else f"exit {rc}: {common.first_error(err)}", cmd=run.last)

    # denominator violation: relu row with phi(q) = 0 under the default policy
    d = base("cli-den", "relu", "causal", n=40, zero_q=((17, 1),))
    make_data(d)
    for nm in "qkv":
        common.save(run.path(f"c_{nm}.npy"), d[nm], "f64")
    common.rm(*outs)
    rc, _, err = run(*io, "--grad-out", "c_g.npy", *gout, "--feature-map", "relu", sub="grad")
    expect("denominator violation (relu, error policy): exit 3, no gradient files", 3, rc, err)

    # synthetic workload without --grad-out: G is drawn from the seed
    common.rm(*outs)
    syn = ["--n", 64, "--heads", 2, "--dk", 8, "--dv", 4, "--dtype", "f64", "--feature-map",
           "favor+", "--features", 8, "--chunk", 8, "--seed", 3]
    rc, _, err = run(*syn, *gout, sub="grad")
    probs = [] if rc == 0 else [f"exit {rc}: {common.first_error(err)}"]
    for p, shp in zip(outs, ((64, 2, 8), (64, 2, 8), (64, 2, 4))):
        if rc == 0 and not os.path.exists(p):
            probs.append(f"{os.path.basename(p)} missing")
        elif rc == 0:
            x = np.load(p)
            if x.shape != shp or not np.all(np.isfinite(x)) or not np.any(x):
                probs.append(f"{os.path.basename(p)}: shape {x.shape}, want {shp}, or not finite/all 0")
    tally.case(not probs, "synthetic without --grad-out: G drawn from the seed, exit 0",
               note="; ".join(probs), cmd=run.last)
    if not probs and run.launcher:       # keyed generator: the same G and inputs on one rank
        par = [np.load(p) for p in outs]
        one = common.Runner(run.binary, run.workdir)
        common.rm(*outs)
        rc, _, err = one(*syn, *gout, sub="grad")
        if rc != 0:
            tally.case(False, "synthetic gradients equal the one-rank run",
                       note=f"exit {rc}: {common.first_error(err)}", cmd=one.last)
        else:
            e = max(ref.rel_err(x, np.load(p)) for x, p in zip(par, outs))
            tally.case(e <= 1e-12, "synthetic gradients equal the one-rank run (G drawn "
                       "identically for every rank count)", e, 1e-12, cmd=one.last)


def out_checks(run, tally, P):
    # blocks of 13 rows: the streamed backward hands out each block's replayed outputs
    for mode, dt, two_d, blk in (("causal", "f32", False, None), ("causal", "f64", False, 13),
                                 ("bidirectional", "f32", False, 13), ("causal", "f32", True, None)):
        c = base(f"out-{mode}-{dt}-{two_d}", "elu1", mode, n=150, h=2, dk=8, dv=5, two_d=two_d)
        make_data(c)
        for nm in "qkvg":
            common.save(run.path(f"o_{nm}.npy"), c[nm], dt)
        o = run.path("o_out.npy")
        common.rm(o)
        rc, _, err = run("--q", "o_q.npy", "--k", "o_k.npy", "--v", "o_v.npy", "--grad-out",
                         "o_g.npy", "--grad-q", "o_gq.npy", "--out", "o_out.npy", "--mode", mode,
                         "--dtype", dt, "--chunk", 16, "--threads", 2, "--force",
                         *(["--block-tokens", blk] if blk else []), sub="grad")
        name = f"grad --out {mode} {dt}" + " (2-D inputs)" * two_d + \
            f" (blocks of {blk})" * bool(blk) + ": the float64 operator"
        if rc != 0 or not os.path.exists(o):
            tally.case(False, name, note=f"exit {rc}: {common.first_error(err)}", cmd=run.last)
            continue
        qf, kf, vf = (np.asarray(c[x], dtype=np.float32 if dt == "f32" else np.float64)
                      for x in "qkv")
        want, _ = ref.quadratic(ref.feature_map("elu1", qf), ref.feature_map("elu1", kf), vf,
                                mode)
        e = ref.rel_err(np.load(o), want)
        tally.case(e <= TOL[dt], name, e, TOL[dt], cmd=run.last)
    # float32 with the AVX-512 kernels on one rank: the replay is the forward's own chunk
    # kernel (causal) or query rows (bidirectional), so grad's outputs are run's bits
    # (docs/cli.md "linattn grad")
    for mode in ("causal", "bidirectional") if P == 1 else ():
        syn = ["--n", 1000, "--heads", 3, "--dk", 20, "--dv", 24, "--threads", 2, "--mode",
               mode, "--force"]
        name = f"grad --out: run's bits ({mode} f32, one rank, AVX-512)"
        rc1, _, e1 = run(*syn, "--out", "o_run.npy", "--report", "o_run.json", sub="run")
        rc2, _, e2 = run(*syn, "--out", "o_out.npy", sub="grad")
        if rc1 != 0 or rc2 != 0:
            tally.case(False, name, note=f"exit {rc1}, {rc2}: {common.first_error(e1 + e2)}",
                       cmd=run.last)
            continue
        with open(run.path("o_run.json")) as f:
            kern = json.load(f).get("kernels")
        if kern != "avx512":
            print(f"SKIP {name}: kernels {kern}, not avx512", flush=True)
            continue
        same = open(run.path("o_run.npy"), "rb").read() == \
            open(run.path("o_out.npy"), "rb").read()
        tally.case(same, name, note="" if same else "the files differ", cmd=run.last)
    common.rm(run.path("o_out.npy"))
    for extra in (("--window", 3), ("--segments", "o_seg.npy")):
        np.save(run.path("o_seg.npy"), np.array([0, 70, 150], dtype=np.int64))
        rc, _, err = run("--q", "o_q.npy", "--k", "o_k.npy", "--v", "o_v.npy", "--grad-out",
                         "o_g.npy", "--out", "o_out.npy", *extra, sub="grad")
        probs = [] if rc == 2 else [f"exit {rc}, want 2"]
        probs += common.error_line_problems(rc, err)
        probs += [] if "--out" in err else ["stderr does not name --out"]
        probs += ["o_out.npy was written"] if os.path.exists(run.path("o_out.npy")) else []
        tally.case(not probs, f"grad --out with {extra[0]}: exit 2 naming --out, nothing written",
                   note="; ".join(probs), cmd=run.last)


def main():
    a = common.parse_args(__doc__)
    run = common.runner(a)
    tally = common.Tally()
    P = ranks(a.launcher)
    print(f"# check_grad: {P} rank(s), launcher {a.launcher or '(none)'}", flush=True)
    got, note = common.report_ranks(run)
    tally.case(got == P, f"the report says ranks = {P}", note=note or f"(it says {got})")
    if torch_oracle is None:
        print(f"SKIP (a) torch oracle comparison: torch is not importable ({TORCH_ERROR}); "
              "install python3-torch", flush=True)
    else:
        for c in oracle_cases(P, a.quick):
            oracle_case(run, tally, c)
    if a.launcher:
        print("SKIP (b) finite differences: single rank only", flush=True)
    else:
        fd_check.run_cases(run, tally)
    cli_checks(run, tally, P)
    out_checks(run, tally, P)
    if torch_oracle is None and not tally.failed:
        # the rest passed, but the main claim (a) was not checked: report a skip (77), never
        # a pass
        print(f"{tally.passed} passed, 0 failed; (a) skipped: exit 77", flush=True)
        sys.exit(77)
    tally.finish()


if __name__ == "__main__":
    main()
