#!/usr/bin/python3
"""Masks across ranks (issue 4), at the rank count of --launcher.

Claim: with packed sequences (--segments) and causal sliding windows (--window) the program
equals an independent quadratic float64 reference whose mask is built pair by pair here:
A(i) = { j : same segment, and (bidirectional, or j <= i and i - j < W) }. Cases: segments
straddling ranks, length-1 segments, boundaries on rank boundaries; windows 1, 5, 64,
W > N/P and W > N; windows with segments; favor maps with one segment of huge keys (the
key stabilizer must stay exact per segment); and the cancellation case (values 1e12 followed
by values 1), judged row by row, where prefix(i) - prefix(i-W) would lose every digit.
Also: --window in bidirectional mode and --mask are refused with exit 2.

Usage: check_masks.py --linattn build/linattn --workdir DIR --launcher "mpiexec -n 4"
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402
import reference as ref  # noqa: E402

TOL = {"f64": 1e-12, "f32": 1e-5}


def mask(n, mode, seg, window):
    sid = np.searchsorted(seg, np.arange(n), side="right") - 1
    m = sid[:, None] == sid[None, :]
    if mode == "causal":
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        m &= j <= i
        if window:
            m &= i - j < window
    return m


def reference(mp, q, k, v, om, mode, seg, window, nu=None):
    pq, pk = ref.feature_map(mp, q, om, features=nu), ref.feature_map(mp, k, om, features=nu)
    msk = mask(q.shape[0], mode, seg, window)
    out = np.empty(v.shape)
    for h in range(q.shape[1]):
        a = (pq[:, h] @ pk[:, h].T) * msk
        out[:, h] = (a @ v[:, h]) / a.sum(1)[:, None]
    return out


def main():
    a = common.parse_args(__doc__)
    run = common.runner(a)
    P = common.launcher_ranks(a.launcher)
    rng = np.random.default_rng(4 + P)
    npass = nfail = 0

    def report(ok, name, detail=""):
        nonlocal npass, nfail
        npass += ok
        nfail += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
        if not ok:
            print("   ", run.last, flush=True)
    got, note = common.report_ranks(run)
    report(got == P, f"the report says ranks = {P}", note or f"(it says {got})")

    def case(name, mp, mode, q, k, v, seg=None, window=0, dtype="f64", chunk=None, rowwise=False):
        H = q.shape[1]
        for nm, x in (("q", q), ("k", k), ("v", v)):
            common.save(run.path(f"{nm}.npy"), x, dtype)
        args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "o.npy", "--force",
                "--mode", mode, "--feature-map", mp, "--no-progress"]
        if mp in ref.RANDOM_MAPS:
            args += ["--features", "16", "--save-projection", "p.npy"]
        if mp == "dpfp":
            args += ["--features", "3"]
        if seg is not None:
            np.save(run.path("seg.npy"), np.asarray(seg, dtype="<i8"))
            args += ["--segments", "seg.npy"]
        if window:
            args += ["--window", window]
        if chunk:
            args += ["--chunk", chunk]
        common.rm(run.path("o.npy"))
        rc, _, err = run(*args)
        if rc != 0:
            report(False, name, f"rc {rc}: {common.first_error(err)}")
            return
        out = np.load(run.path("o.npy")).astype(np.float64)
        om = np.load(run.path("p.npy")) if mp in ref.RANDOM_MAPS else None
        n = q.shape[0]
        sg = np.asarray(seg if seg is not None else [0, n])
        want = reference(mp, np.asarray(q, np.float64), np.asarray(k, np.float64),
                         np.asarray(v, np.float64), om, mode, sg, window, 3)
        if rowwise:   # every row on its own scale
            e = float(np.max(np.abs(out - want) / np.abs(want)))
        else:
            e = ref.rel_err(out, want)
        report(e <= TOL[dtype], name, f"err {e:.2e}")

    H, dk, dv = 2, 6, 5
    n = 240
    q, k, v = rng.normal(size=(n, H, dk)), rng.normal(size=(n, H, dk)), rng.normal(size=(n, H, dv))
    # rank boundaries as offsets, so that some segment boundaries fall exactly on them
    own = [n // P * p + min(p, n % P) for p in range(P + 1)]
    segs = sorted(set([0, n, 1, 2, 3, 57, 58, 100, 101, 199, 239] + own[1:-1]))
    for mp in ("elu1", "favor+"):
        for mode in ("causal", "bidirectional"):
            for chunk in (None, 4):
                case(f"segments {mp} {mode} chunk={chunk or 'default'}", mp, mode, q, k, v,
                     seg=segs, chunk=chunk)
    # one long segment straddling every rank plus tiny ones
    case("segments: one segment spanning all ranks", "elu1", "bidirectional", q, k, v,
         seg=[0, 1, n - 1, n])
    case("segments f32", "elu1", "causal", q, k, v, seg=segs, dtype="f32")
    for w in (1, 5, 64, n // P + 7, n + 10):
        for chunk in (None, 4, 16):
            case(f"window W={w} chunk={chunk or 'default'}", "elu1", "causal", q, k, v,
                 window=w, chunk=chunk)
    case("window W=37 favor-hyp", "favor-hyp", "causal", q, k, v, window=37, chunk=8)
    # taylor2 (signed features, positive kernel) and dpfp (nu = 3; positive-offset inputs,
    # so no den is 0): segments across ranks, windows, both
    qp, kp = np.abs(q) + 0.3, np.abs(k) + 0.3
    for mp, qq, kk in (("taylor2", q, k), ("dpfp", qp, kp)):
        for mode in ("causal", "bidirectional"):
            case(f"segments {mp} {mode} chunk=4", mp, mode, qq, kk, v, seg=segs, chunk=4)
        for w in (5, n // P + 7):
            case(f"window W={w} {mp} with segments", mp, "causal", qq, kk, v, seg=segs, window=w,
                 chunk=8)
        case(f"window W=5 {mp} f32", mp, "causal", qq, kk, v, window=5, dtype="f32")
    case("window W=5 f32", "elu1", "causal", q, k, v, window=5, dtype="f32")
    for w in (3, 50, n // P + 3):
        case(f"window W={w} with segments", "favor+", "causal", q, k, v, seg=segs, window=w,
             chunk=8)
    # favor with huge keys in one segment: other segments keep their own exact scale
    kb = k.copy()
    kb[101:199] *= 8.0
    for mode in ("causal", "bidirectional"):
        case(f"favor+ huge keys in one segment ({mode})", "favor+", mode, q * 0.5, kb * 0.5, v,
             seg=segs, chunk=16)
    case("favor+ huge keys in one segment, window 20", "favor+", "causal", q * 0.5, kb * 0.5, v,
         seg=segs, window=20, chunk=16)
    # cancellation: values 1e12 then 1; rows after the big ones must keep every digit
    vc = np.ones((n, H, dv))
    vc[: n // 2] = 1e12
    vc *= 1.0 + 0.01 * rng.random(size=(n, H, dv))
    for w in (5, 64):
        case(f"cancellation 1e12 then 1, W={w} (row-wise)", "elu1", "causal", q, k, vc,
             window=w, chunk=4, rowwise=True)
    # refusals
    for args, what in ((["--mode", "bidirectional", "--window", "5"], "window in bidirectional mode"),
                       (["--mask", "m.npy"], "a general mask")):
        rc, _, err = run("--n", 10, "--no-progress", *args)
        probs = common.error_line_problems(rc, err)
        ok = rc == 2 and not probs and ("factorization" in err or "summary" in err)
        report(ok, f"{what} is refused with a reason", common.first_error(err))
    # malformed offsets: exit 2, the message names the file, no output
    common.save(run.path("q.npy"), q, "f64")
    common.save(run.path("k.npy"), k, "f64")
    common.save(run.path("v.npy"), v, "f64")
    for bad, what in (([1, n], "not starting at 0"), ([0, 5, 5, n], "not increasing"),
                      ([0, 7, n - 1], "not ending at N"), ([0, n], "float offsets")):
        arr = np.asarray(bad, dtype="<f8" if what == "float offsets" else "<i8")
        np.save(run.path("badseg.npy"), arr)
        common.rm(run.path("ob.npy"))
        rc, _, err = run("--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "ob.npy",
                         "--segments", "badseg.npy", "--no-progress")
        probs = common.error_line_problems(rc, err)
        ok = rc == 2 and not probs and "badseg.npy" in err and not os.path.exists(run.path("ob.npy"))
        report(ok, f"segment offsets {what} are refused", common.first_error(err))
    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
