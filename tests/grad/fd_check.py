#!/usr/bin/python3
"""Central finite differences against `linattn grad` on tiny float64 cases.

Claim: for every feature map x mode (normalized; unnormalized identity, trig and taylor2; every
denominator policy once with relu/elu1; segments and a window once each), the program's
dQ, dK, dV are the derivatives of L = sum(out * G), where out is a NumPy quadratic forward
written here (reference.feature_map for phi; explicit mask; policy on the true den).

Step and tolerance. The step for entry x is h = 1e-6 * max(1, |x|) (the exact h used is
(x+h) - (x-h), a representable difference). Central differences err by
h^2/6 |d3L/dx3| (truncation, ~1e-13 here) plus ~u |L| / h from rounding L (u = 1.1e-16,
times a small summation factor), i.e. ~1e-10 |L| per entry: for these O(1)-sized losses
and <= 100 entries per gradient, ~1e-9 relative on the gradient norm. The tolerance
1e-6 (||prog - fd||_F / ||fd||_F per gradient) leaves a 1000x margin, while a missing or
wrong term of the backward pass is O(1e-2 .. 1). The bound is checked, not assumed: every
case also computes FD with step 2h and requires ||fd_h - fd_2h|| / ||fd_h|| < 1e-7; if not,
the case fails as TEST DATA. Inputs keep den well above 0 and, for relu/elu1, every entry
has |x| >= 0.15, so no step crosses a kink.

Usage: fd_check.py --linattn build/linattn --workdir DIR     (program vs FD)
       fd_check.py --self-test                             (torch_oracle vs FD, no program)
"""
import argparse
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402
import reference as ref  # noqa: E402

STEP = 1e-6
TOL = 1e-6
NOISE_TOL = 1e-7
FEATURES = 4


# --- NumPy quadratic forward with masks and policies -------------------------------------

def np_mask(n, mode, seg=None, window=None):
    """A(i) as a boolean [N, N] matrix, built from the definitions (docs/design.md §3)."""
    sid = np.zeros(n, int) if seg is None else np.searchsorted(seg, np.arange(n), "right") - 1
    m = sid[:, None] == sid[None, :]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if mode == "causal":
        m &= j <= i
        if window:
            m &= j > i - window
    return m


def np_forward(q, k, v, mp, omega=None, scale=None, mode="causal", normalize=True,
               policy="error", seg=None, window=None, features=None):
    """(out [N,H,dv], den [N,H]) of the masked quadratic operator; raises
    ref.DenominatorError when the policy is violated."""
    pq, pk = ref.feature_map(mp, q, omega, scale, features), ref.feature_map(mp, k, omega, scale, features)
    v = ref.as3d(v)
    a = np.einsum("ihr,jhr->hij", pq, pk) * np_mask(pq.shape[0], mode, seg, window)
    num = np.einsum("hij,jhd->ihd", a, v)
    den = a.sum(2).T
    if not normalize:
        return num, den
    kind, eps = ref.parse_policy(policy)
    if kind in ("error", "zero-empty"):
        bad = ~np.isfinite(den) | ((den <= 0) if kind == "error" else (den < 0))
        if bad.any():
            raise ref._first_bad(bad)
        empty = den == 0
        out = num / np.where(empty, 1.0, den)[..., None]
        out[empty] = 0.0
        return out, den
    if kind == "add":
        return num / (den + eps)[..., None], den
    return num / np.maximum(den, eps)[..., None], den


def fd_grads(c, omega, step=STEP):
    """Central-difference dL/dq, dL/dk, dL/dv of L = sum(out * G) for case c."""
    args = dict(mp=c["map"], omega=omega, scale=c.get("scale"), mode=c["mode"],
                normalize=c["normalize"], policy=c["policy"], seg=c.get("seg"),
                window=c.get("window"), features=c.get("features"))
    x = {"q": c["q"], "k": c["k"], "v": c["v"]}

    def loss(xx):
        return float(np.sum(np_forward(xx["q"], xx["k"], xx["v"], **args)[0] * c["g"]))

    res = {}
    for name in "qkv":
        g = np.zeros_like(x[name])
        for idx in np.ndindex(g.shape):
            h = step * max(1.0, abs(x[name][idx]))
            xp, xm = dict(x), dict(x)
            xp[name], xm[name] = x[name].copy(), x[name].copy()
            xp[name][idx] += h
            xm[name][idx] -= h
            g[idx] = (loss(xp) - loss(xm)) / (xp[name][idx] - xm[name][idx])
        res["d" + name] = g
    return res


# --- cases ---------------------------------------------------------------------------------

def away_from_kink(x, gap=0.15):
    return np.where(np.abs(x) < gap, np.copysign(gap + np.abs(x), x), x)


def make_case(name, mp, mode, normalize=True, policy="error", n=12, h=2, dk=4, dv=3,
              seg=None, window=None, scale=None, chunk=None):
    """Tiny case with data chosen so den stays away from 0 (and from E for clamp)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    g = lambda d: rng.standard_normal((n, h, d))
    if mp == "precomputed":
        q, k = rng.uniform(0.2, 1.0, (n, h, dk)), rng.uniform(0.2, 1.0, (n, h, dk))
    elif mp == "relu":
        q, k = away_from_kink(g(dk) + 0.8), away_from_kink(g(dk) + 0.8)
    elif mp == "dpfp":                # rho is a relu of x and -x; mostly positive rows overlap
        q, k = away_from_kink(g(dk) + 1.2), away_from_kink(g(dk) + 1.2)
    elif mp == "elu1":
        q, k = away_from_kink(g(dk)), away_from_kink(g(dk))
    elif mp == "identity" and normalize:
        q, k = 0.4 * g(dk) + 1.0, 0.4 * g(dk) + 1.0
    elif mp == "trig":                  # small |x~|: cos terms near 1, den > 0 even for m = 4
        q, k = (0.3 if normalize else 0.6) * g(dk), (0.3 if normalize else 0.6) * g(dk)
    else:
        q, k = 0.8 * g(dk), 0.8 * g(dk)
    c = dict(name=name, map=mp, mode=mode, normalize=normalize, policy=policy, q=q, k=k,
             v=g(dv), g=g(dv), seg=None if seg is None else np.asarray(seg, np.int64),
             window=window, scale=scale, chunk=chunk, seed=zlib.crc32(name.encode()) % 1000,
             features=3 if mp == "dpfp" else None)                # dpfp's nu
    if policy == "zero-empty":     # relu rows with phi = 0: den == 0 exactly, locally constant
        c["q"][0, 0] = -np.abs(c["q"][0, 0]) - 0.2     # empty query (both modes)
        c["k"][0, 1] = -np.abs(c["k"][0, 1]) - 0.2     # causal: query 0 head 1 reads nothing
    return c


def fd_cases():
    cs = []
    for mp in ref.MAPS:
        for mode in ("causal", "bidirectional"):
            dk = 4 if mp != "precomputed" else 5
            cs.append(make_case(f"fd {mp} {mode} norm", mp, mode, dk=dk,
                                chunk=3 if mode == "causal" else None))
    for mp in ("identity", "trig"):
        for mode in ("causal", "bidirectional"):
            cs.append(make_case(f"fd {mp} {mode} unnorm", mp, mode, normalize=False,
                                chunk=5 if mode == "causal" else None))
    cs.append(make_case("fd elu1 causal add:E", "elu1", "causal", policy="add:E", chunk=4))
    cs.append(make_case("fd elu1 bidirectional clamp:E", "elu1", "bidirectional", policy="clamp:E"))
    cs.append(make_case("fd relu causal zero-empty", "relu", "causal", policy="zero-empty", chunk=4))
    cs.append(make_case("fd relu bidirectional zero-empty", "relu", "bidirectional",
                        policy="zero-empty"))
    cs.append(make_case("fd favor+ causal scale=0.5", "favor+", "causal", scale=0.5, chunk=4))
    cs.append(make_case("fd taylor2 causal scale=0.5", "taylor2", "causal", scale=0.5, chunk=4))
    cs.append(make_case("fd taylor2 bidirectional unnorm", "taylor2", "bidirectional",
                        normalize=False))
    cs.append(make_case("fd dpfp causal segments+window3", "dpfp", "causal", seg=[0, 3, 4, 9, 12],
                        window=3, chunk=2))
    cs.append(make_case("fd elu1 causal segments+window3", "elu1", "causal", seg=[0, 3, 4, 9, 12],
                        window=3, chunk=2))
    cs.append(make_case("fd favor-hyp bidirectional segments", "favor-hyp", "bidirectional",
                        seg=[0, 5, 6, 12]))
    return cs


def resolve_policy(c, omega):
    """Turn add:E / clamp:E into numbers: E near the median den, away from every den."""
    if c["policy"] not in ("add:E", "clamp:E"):
        return
    _, den = np_forward(c["q"], c["k"], c["v"], c["map"], omega, c.get("scale"), c["mode"],
                        False, "error", c.get("seg"), c.get("window"), c.get("features"))
    d = np.sort(den.ravel())
    mid = len(d) // 2
    e = 0.5 * (d[mid - 1] + d[mid])                 # between two dens: about half are clamped
    c["policy"] = c["policy"].replace("E", repr(float(e)))


def check_data(c, omega):
    """Problems with the test data itself (den near 0, violation), or []."""
    try:
        _, den = np_forward(c["q"], c["k"], c["v"], c["map"], omega, c.get("scale"), c["mode"],
                            c["normalize"], c["policy"], c.get("seg"), c.get("window"),
                            c.get("features"))
    except ref.DenominatorError as e:
        return [f"reference den violates the policy: {e}"]
    if c["normalize"] and c["policy"] != "zero-empty" and np.min(den) < 1e-2 * np.median(den):
        return [f"den min {np.min(den):.2e} too close to 0"]
    if c["policy"].startswith("clamp:"):
        e = float(c["policy"][6:])
        if np.min(np.abs(den - e)) < 1e-3 * e:
            return ["a den is within 1e-3 of the clamp E"]
    return []


def draw_omega(c, m=FEATURES):
    """A local projection for the self-test (any fixed omega is valid for a gradient check)."""
    if c["map"] not in ref.RANDOM_MAPS:
        return None
    return np.random.default_rng(c["seed"]).standard_normal((c["q"].shape[1], m, c["q"].shape[2]))


def compare(tally, name, got, fd, fd2, tol=TOL, cmd="", extra=""):
    """One tally line: max over dq, dk, dv of ||got - fd|| / ||fd||, FD noise shown."""
    errs = {d: ref.rel_err(got[d], fd[d]) for d in ("dq", "dk", "dv")}
    noise = max(ref.rel_err(fd2[d], fd[d]) for d in ("dq", "dk", "dv"))
    note = " ".join(f"{d}={e:.1e}" for d, e in errs.items()) + f" fd_noise={noise:.1e}" + extra
    if noise > NOISE_TOL:
        return tally.case(False, name, note="TEST DATA: FD noise too large; " + note, cmd=cmd)
    err = max(errs.values())
    return tally.case(err <= tol, name, err, tol, note, cmd)


# --- the program ---------------------------------------------------------------------------

def grad_args(c, prefix, dtype="f64", threads=1, extra=()):
    """`linattn grad` command line for case c, inputs PREFIX_{q,k,v,g}.npy, outputs
    PREFIX_g{q,k,v}.npy (random maps also save PREFIX_p.npy)."""
    a = ["--q", f"{prefix}_q.npy", "--k", f"{prefix}_k.npy", "--v", f"{prefix}_v.npy",
         "--grad-out", f"{prefix}_g.npy", "--grad-q", f"{prefix}_gq.npy",
         "--grad-k", f"{prefix}_gk.npy", "--grad-v", f"{prefix}_gv.npy",
         "--mode", c["mode"], "--feature-map", c["map"], "--dtype", dtype,
         "--normalize", "on" if c["normalize"] else "off", "--threads", threads]
    if c["normalize"]:
        a += ["--denominator", c["policy"]]
    if c["map"] in ref.RANDOM_MAPS and c.get("omega") is not None:    # fixed, given
        a += ["--projection", f"{prefix}_pin.npy"]
    elif c["map"] in ref.RANDOM_MAPS:                                 # drawn, saved
        a += ["--features", c.get("features") or FEATURES, "--seed", c["seed"],
              "--save-projection", f"{prefix}_p.npy"]
    if c["map"] == "dpfp":                                            # nu
        a += ["--features", c["features"]]
    if c["normalize"] and c["map"] in ("identity", "trig"):
        a += ["--allow-signed"]
    if c.get("scale") is not None:
        a += ["--scale", repr(c["scale"])]
    if c.get("chunk"):
        a += ["--chunk", c["chunk"]]
    if c.get("seg") is not None:
        a += ["--segments", f"{prefix}_seg.npy"]
    if c.get("window"):
        a += ["--window", c["window"]]
    if c.get("block"):                # the streamed backward's block (la_bstream)
        a += ["--block-tokens", c["block"]]
    if c.get("decay") is not None:
        a += ["--decay", ",".join(repr(x) for x in c["decay"])]
    if c.get("gates") is not None:  # log-gates [N, H] and their gradient (design.md §1.2 "Gates")
        a += ["--gates", f"{prefix}_gates.npy", "--grad-gates", f"{prefix}_gg.npy"]
    return a + list(extra)


def run_grad(run, c, prefix, dtype="f64", threads=1, extra=()):
    """Write the case's inputs, run `linattn grad`. Returns (grads dict or None, omega,
    problem text, stderr). Input arrays in c are replaced by the values as written."""
    for nm in "qkvg":
        c[nm] = common.save(run.path(f"{prefix}_{nm}.npy"), c[nm], dtype).astype(np.float64)
    outs = [run.path(f"{prefix}_{x}.npy") for x in ("gq", "gk", "gv", "p", "seg", "gg")]
    common.rm(*outs)
    if c.get("gates") is not None:
        np.save(run.path(f"{prefix}_gates.npy"), np.asarray(c["gates"], "<f8"))
    args = grad_args(c, prefix, dtype, threads, extra)
    if c.get("seg") is not None:
        np.save(run.path(f"{prefix}_seg.npy"), np.asarray(c["seg"], "<i8"))
    if c.get("omega") is not None:
        np.save(run.path(f"{prefix}_pin.npy"), np.asarray(c["omega"], "<f8"))
    rc, _, err = run(*args, sub="grad")
    omega = c.get("omega")
    if omega is None and os.path.exists(outs[3]):
        omega = np.load(outs[3]).astype(np.float64)
    if rc != 0:
        return None, omega, f"exit {rc}: {common.first_error(err)}", err
    got = {}
    for d, path, x in (("dq", outs[0], c["q"]), ("dk", outs[1], c["k"]), ("dv", outs[2], c["v"])):
        if not os.path.exists(path):
            return None, omega, f"no {os.path.basename(path)}", err
        arr = np.load(path)
        if arr.shape != x.shape:
            return None, omega, f"{os.path.basename(path)} shape {arr.shape}, want {x.shape}", err
        got[d] = arr.astype(np.float64)
    if c.get("gates") is not None:
        if not os.path.exists(outs[5]):
            return None, omega, f"no {os.path.basename(outs[5])}", err
        got["dg"] = np.load(outs[5]).astype(np.float64)
    tmps = leftover_tmp(run.workdir)
    if tmps:
        return None, omega, f"temporary files remain: {tmps}", err
    return got, omega, "", err


def leftover_tmp(workdir):
    return sorted(f for f in os.listdir(workdir) if ".tmp." in f)


def run_cases(run, tally, cases=None):
    """Program vs FD for every case (single rank)."""
    for c in cases or fd_cases():
        resolve_policy(c, c.get("omega"))      # policy cases use elu1/relu: no projection
        got, omega, prob, _ = run_grad(run, c, "fd")
        if got is None:
            tally.case(False, c["name"], note=prob, cmd=run.last)
            continue
        probs = check_data(c, omega)
        if probs:
            tally.case(False, c["name"], note="TEST DATA: " + "; ".join(probs), cmd=run.last)
            continue
        fd, fd2 = fd_grads(c, omega), fd_grads(c, omega, 2 * STEP)
        compare(tally, c["name"], got, fd, fd2, cmd=run.last)


def self_test(tally):
    """torch_oracle vs FD on the NumPy forward: the two independent oracles agree."""
    import torch_oracle
    for c in fd_cases():
        om = draw_omega(c)
        resolve_policy(c, om)
        probs = check_data(c, om)
        if probs:
            tally.case(False, "self-test " + c["name"], note="TEST DATA: " + "; ".join(probs))
            continue
        r = torch_oracle.gradients(c["q"], c["k"], c["v"], c["g"], c["map"], om, c.get("scale"),
                                   c["mode"], c["normalize"], c["policy"], c.get("seg"),
                                   c.get("window"), c.get("features"))
        out, _ = np_forward(c["q"], c["k"], c["v"], c["map"], om, c.get("scale"), c["mode"],
                            c["normalize"], c["policy"], c.get("seg"), c.get("window"),
                            c.get("features"))
        e_out = ref.rel_err(r["out"], out)
        compare(tally, "self-test " + c["name"], r, fd_grads(c, om), fd_grads(c, om, 2 * STEP),
                extra=f" out={e_out:.1e}")
        if e_out > 1e-13:
            tally.case(False, "self-test forward " + c["name"], e_out, 1e-13)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--linattn")
    p.add_argument("--workdir")
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    tally = common.Tally()
    if a.self_test:
        self_test(tally)
    else:
        if not (a.linattn and a.workdir):
            p.error("--linattn and --workdir are required (or --self-test)")
        os.makedirs(a.workdir, exist_ok=True)
        run_cases(common.Runner(os.path.abspath(a.linattn), os.path.abspath(a.workdir),
                                a.verbose), tally)
    tally.finish()


if __name__ == "__main__":
    main()
