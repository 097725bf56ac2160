#!/usr/bin/python3
"""Distributed engine at one rank count (the launcher given by --launcher).

Claim: sharding the sequence over P ranks (exclusive scan of the summaries in causal mode,
allreduce in bidirectional mode) gives the independent quadratic float64 reference
(tests/oracle/reference.py) to 1e-12 in float64 (so the one-rank result, which this test at
P = 1 holds to the same reference, to 2e-12), for every map, both modes,
N in {3, 97, 1000} (so N < P and N not divisible by P occur). Also:
- favor+ with huge keys only in the last rank's rows: earlier rows are unchanged (causal) and
  every row still matches the reference (the log-scaled combine keeps the stabilizer exact);
- the synthetic workload gives the same output for every rank count (keyed generator);
- every --scan-algorithm gives the one-rank output (causal favor+ with segments), and the
  report names it;
- --decay (causal, per-head gammas and RetNet's, segments, sliding windows, every
  --scan-algorithm) against the reference with weights gamma_h^(i-j); bidirectional (weights gamma^|i-j|) likewise,
  with segments on one rank and refused on more;
- --gates (causal log-gates [N, H], alone, with segments, with --decay on top, every
  --scan-algorithm on one case) against the reference with weights exp(g_{j+1} + ... + g_i);
  per-feature --gates [N, H, r] likewise, each feature's product weighed by its own sums
  (refused with --window); --gates synthetic and synthetic-feature give the one-rank output;
- a non-finite value in the last rank's rows: every rank exits 2, one error line, no output,
  no hang and no MPI abort trace.

Usage: check_dist.py --linattn build/linattn --workdir DIR --launcher "mpiexec -n 3"
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402
import reference as ref  # noqa: E402

MAPS = ["elu1", "relu", "identity", "favor+", "favor+orf", "favor-hyp", "trig", "precomputed",
        "taylor2", "dpfp"]
TOL = 1e-12


def main():
    a = common.parse_args(__doc__)
    par = common.runner(a)                                   # P ranks
    one = common.Runner(a.linattn, a.workdir, a.verbose)     # one plain rank
    rng = np.random.default_rng(20261130)
    npass = nfail = 0

    def report(ok, name, detail=""):
        nonlocal npass, nfail
        npass += ok
        nfail += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
        if not ok:
            print("   ", par.last, flush=True)

    H, dk, dv = 2, 6, 5
    for n in (3, 97, 1000):
        for mp in MAPS:
            for mode in ("causal", "bidirectional"):
                q = rng.normal(size=(n, H, dk))
                k = rng.normal(size=(n, H, dk))
                v = rng.normal(size=(n, H, dv))
                if mp in ("relu", "precomputed", "dpfp"):   # positive features: den > 0
                    q, k = np.abs(q) + 0.1, np.abs(k) + 0.1
                if mp in ("identity", "trig"):         # signed: compare unnormalized
                    norm = "off"
                else:
                    norm = "on"
                for name, x in (("q", q), ("k", k), ("v", v)):
                    common.save(par.path(f"{name}.npy"), x, "f64")
                args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--mode", mode,
                        "--feature-map", mp, "--features", "8", "--normalize", norm,  # dpfp: nu 8
                        "--chunk", "4", "--block-tokens", "37", "--force", "--no-progress"]
                save = ["--save-projection", "p.npy"] if mp in ref.RANDOM_MAPS else []
                # The one-rank run of the same arguments is this test at np1 (and
                # tests/oracle/check_forward.py): both within TOL of the same reference, so
                # within 2 TOL of each other. Not started again here (docs/testing.md "Test time").
                rcp, _, ep = par(*args, "--out", "op.npy", *save)
                name = f"{mp} {mode} n={n}"
                if rcp != 0:
                    report(False, name, f"rc {rcp}: {common.first_error(ep)}")
                    continue
                op = np.load(par.path("op.npy"))
                om = np.load(par.path("p.npy")) if mp in ref.RANDOM_MAPS else None
                pq, pk = ref.feature_map(mp, q, om, features=8), ref.feature_map(mp, k, om, features=8)
                want, _ = ref.quadratic(pq, pk, v, mode, normalize=norm == "on")
                e_ref = ref.rel_err(op, want)
                report(e_ref <= TOL, name, f"vs reference {e_ref:.2e}")

    # favor+: huge keys only in the last rank's rows (the last 1/P of the sequence, at least
    # the last row). Causal rows before them must not move; all rows must match the reference.
    n = 1000
    P = max(1, int(os.environ.get("LINATTN_TEST_NP", "0")) or common.launcher_ranks(a.launcher))
    got, note = common.report_ranks(par)
    report(got == P, f"the report says ranks = {P}", note or f"(it says {got})")
    last0 = n - (n // P)                       # first row owned by the last rank
    q = rng.normal(size=(n, H, dk)) * 0.5
    k = rng.normal(size=(n, H, dk)) * 0.5
    v = rng.normal(size=(n, H, dv))
    for name, x in (("q", q), ("k", k), ("v", v)):
        common.save(par.path(f"{name}.npy"), x, "f64")
    base = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--feature-map", "favor+",
            "--features", "16", "--force", "--no-progress", "--block-tokens", "64"]
    for mode in ("causal", "bidirectional"):
        rc0, _, e0 = par(*base, "--mode", mode, "--out", "small.npy", "--save-projection", "p.npy")
        kb = k.copy()
        kb[last0:] *= 12.0                     # exponents of order 12^2 * |k|^2 / sqrt(dk) ~ 100
        common.save(par.path("k.npy"), kb, "f64")
        rc1, _, e1 = par(*base, "--mode", mode, "--out", "big.npy")
        common.save(par.path("k.npy"), k, "f64")
        if rc0 or rc1:
            report(False, f"favor+ large keys on the last rank ({mode})", common.first_error(e0 + e1))
            continue
        small, big = np.load(par.path("small.npy")), np.load(par.path("big.npy"))
        om = np.load(par.path("p.npy"))
        want, _ = ref.quadratic(ref.feature_map("favor+", q, om), ref.feature_map("favor+", kb, om),
                                v, mode)
        e_ref = ref.rel_err(big, want)
        ok = e_ref <= 1e-11
        detail = f"vs reference {e_ref:.2e}"
        if mode == "causal":
            e_early = ref.rel_err(big[:last0], small[:last0])
            ok = ok and e_early <= 1e-13
            detail += f", earlier rows moved by {e_early:.2e}"
        report(ok, f"favor+ large keys on the last rank ({mode})", detail)

    # The synthetic workload: the same data and output for every rank count.
    syn = ["--n", "333", "--heads", "3", "--dk", "8", "--dv", "4", "--dtype", "f64", "--seed", "7",
           "--feature-map", "favor-hyp", "--features", "8", "--force", "--no-progress",
           "--block-tokens", "50"]
    for mode in ("causal", "bidirectional"):
        rc1, _, e1 = one(*syn, "--mode", mode, "--out", "s1.npy")
        rcp, _, ep = par(*syn, "--mode", mode, "--out", "sp.npy")
        if rc1 or rcp:
            report(False, f"synthetic {mode}", common.first_error(e1 + ep))
            continue
        e = ref.rel_err(np.load(par.path("sp.npy")), np.load(par.path("s1.npy")))
        report(e <= TOL, f"synthetic workload is rank-count independent ({mode})", f"{e:.2e}")

    # --scan-algorithm (docs/design.md §4.5): every algorithm gives the one-rank output to
    # float64 rounding, with segment resets and the favor+ stabilizer in the scanned states,
    # and the report names the algorithm used.
    np.save(par.path("seg.npy"), np.array([0, 150, 151, 700, 1000], dtype=np.int64))
    scan = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--feature-map", "favor+",
            "--features", "16", "--mode", "causal", "--segments", "seg.npy", "--force",
            "--no-progress", "--block-tokens", "40"]
    rc1, _, e1 = one(*scan, "--out", "sc1.npy")
    for alg, extra in (("exscan", []), ("doubling", []), ("chain", []), ("allgather", []),
                       ("pipelined", ["--scan-pieces", "3"]), ("auto", [])):
        rcp, _, ep = par(*scan, "--scan-algorithm", alg, *extra, "--out", "scp.npy",
                         "--report", "scan.json")
        if rc1 or rcp:
            report(False, f"--scan-algorithm {alg}", common.first_error(e1 + ep))
            continue
        e = ref.rel_err(np.load(par.path("scp.npy")), np.load(par.path("sc1.npy")))
        used = json.load(open(par.path("scan.json"))).get("scan_algorithm")
        # auto names the point-to-point algorithm its model chose (dist/scan_model.c), or
        # stays "auto" when no causal scan ran (one rank)
        ok_used = used in ("doubling", "chain", "allgather", "pipelined", "auto") if alg == "auto" \
            else used == alg
        report(e <= TOL and ok_used, f"--scan-algorithm {alg}: the one-rank output",
               f"{e:.2e}, report says {used}")

    # --decay (docs/design.md §1.2): causal on P ranks, the scan element carrying each rank's
    # cumulative log-decay, against the quadratic reference with weights gamma_h^(i-j) (and
    # segments), every scan algorithm on the hardest case; bidirectional with decay runs on one
    # rank (weights gamma^|i-j|) and is refused with its reason on more.
    H3 = 3
    q3, k3 = rng.normal(size=(n, H3, dk)) * 0.7, rng.normal(size=(n, H3, dk)) * 0.7
    v3 = rng.normal(size=(n, H3, dv))
    for name, x in (("dq", q3), ("dk", k3), ("dv", v3)):   # every row, and the first 97
        common.save(par.path(f"{name}.npy"), x, "f64")
        common.save(par.path(f"{name}n.npy"), x[:97], "f64")
    offs = [0, 150, 151, 700, 1000]
    gam = [0.9, 0.995, 0.5]

    def inputs(nn):
        sfx = "n" if nn != n else ""
        return ["--q", f"dq{sfx}.npy", "--k", f"dk{sfx}.npy", "--v", f"dv{sfx}.npy"]

    def against_reference(what, mp, nn, args, out, mode="causal", **ref_kw):
        """`linattn run` on the first nn rows of (q3, k3, v3) with args, its output out
        against ref.quadratic on the same features with ref_kw (decay, offsets, window,
        gates, policy)."""
        save = ["--save-projection", "p.npy"] if mp in ref.RANDOM_MAPS else []
        rcp, _, ep = par(*inputs(nn), "--feature-map", mp, "--features", "16", "--mode", mode,
                         "--chunk", "8", "--force", "--no-progress", *args, "--out", out, *save)
        if rcp != 0:
            report(False, what, f"rc {rcp}: {common.first_error(ep)}")
            return
        om = np.load(par.path("p.npy")) if mp in ref.RANDOM_MAPS else None
        want, _ = ref.quadratic(ref.feature_map(mp, q3[:nn], om, features=16),
                                ref.feature_map(mp, k3[:nn], om, features=16), v3[:nn], mode,
                                **ref_kw)
        e_ref = ref.rel_err(np.load(par.path(out)), want)
        report(e_ref <= TOL, what, f"vs reference {e_ref:.2e}")

    dcases = [("elu1", 97, False, "0.9,0.995,0.5", [], "exscan"),
              ("taylor2", 1000, False, "0.9,0.995,0.5", [], "auto"),
              ("elu1", 1000, True, "retnet", [], "exscan")]
    dcases += [("favor+", 1000, True, "0.9,0.995,0.5", extra, alg) for alg, extra in (
        ("exscan", []), ("doubling", []), ("chain", []), ("allgather", []),
        ("pipelined", ["--scan-pieces", "3"]))]
    for mp, nn, seg, dspec, extra, alg in dcases:
        g = [1.0 - 2.0 ** (-5 - h) for h in range(H3)] if dspec == "retnet" else gam
        against_reference(f"--decay {dspec} causal {mp} n={nn}{' segments' if seg else ''} ({alg})",
                          mp, nn, ["--decay", dspec, "--block-tokens", "40", "--scan-algorithm",
                                   alg, *extra] + (["--segments", "seg.npy"] if seg else []),
                          "od.npy", decay=g, offsets=offs if seg else None)
    # causal sliding windows (docs/design.md §1.2, §3.2): the halo, the middle summary from
    # the earlier ranks and the queue of chunk summaries, all decayed
    for mp, W, seg, alg in (("elu1", 37, True, "exscan"), ("favor+", 100, False, "pipelined"),
                            ("favor+", 5, True, "exscan")):
        against_reference(f"--decay causal {mp} --window {W}{' segments' if seg else ''} ({alg})",
                          mp, n, ["--decay", "0.9,0.995,0.5", "--window", str(W),
                                  "--scan-algorithm", alg] + (["--segments", "seg.npy"] if seg else []),
                          "ow.npy", decay=gam, offsets=offs if seg else None, window=W)
    # bidirectional: the prefix by the forward scan, the suffix by the reverse scan of the
    # reverse summaries (weights gamma^|i-j|), two scan algorithms
    for mp, nn, alg in (("elu1", 97, "exscan"), ("favor+", 1000, "pipelined")):
        against_reference(f"--decay bidirectional {mp} n={nn} ({alg})", mp, nn,
                          ["--decay", "0.9,0.995,0.5", "--scan-algorithm", alg], "ob.npy",
                          mode="bidirectional", decay=gam)
    # bidirectional with segments: the reverse summaries' flags carry the segment starts
    for alg in ("exscan", "doubling"):
        against_reference(f"--decay bidirectional favor+ segments ({alg})", "favor+", n,
                          ["--decay", "0.9,0.995,0.5", "--segments", "seg.npy",
                           "--scan-algorithm", alg], "obs.npy", mode="bidirectional",
                          decay=gam, offsets=offs)
    # --gates (docs/design.md §1.2 "Gates"): the summaries' a is the sum of their rows' gates
    gts = -np.log1p(np.exp(-(2.0 + rng.normal(size=(n, H3)))))     # log sigmoid(2 + N(0, 1))
    gts[::97] -= 20.0                                               # some near-resets
    common.save(par.path("gates.npy"), gts, "f64")
    common.save(par.path("gatesn.npy"), gts[:97], "f32")            # float32 file, converted
    gcases = [("elu1", 97, False, [], "exscan"), ("relu", 1000, True, [], "auto"),
              ("taylor2", 1000, False, ["--decay", "0.9,0.995,0.5"], "auto")]
    gcases += [("favor+", 1000, True, [], alg) for alg in ("exscan", "doubling", "chain",
                                                            "allgather", "pipelined")]
    for mp, nn, seg, extra, alg in gcases:
        gg = gts[:nn].astype(np.float32).astype(np.float64) if nn != n else gts
        zero = mp == "relu"
        against_reference(f"--gates {mp} n={nn}{' segments' if seg else ''} {' '.join(extra)} ({alg})",
                          mp, nn, ["--gates", "gatesn.npy" if nn != n else "gates.npy",
                                   "--block-tokens", "40", "--scan-algorithm", alg, *extra]
                          + (["--segments", "seg.npy"] if seg else [])
                          + (["--denominator", "zero-empty"] if zero else []),
                          "og.npy", policy="zero-empty" if zero else "error",
                          decay=gam if extra else None, offsets=offs if seg else None, gates=gg)
    # gates with a causal window: the halo's gates come from the earlier ranks with its keys,
    # and the queue, the far edge and the middle summary decay by the gates between
    for mp, W, seg, extra in (("elu1", 37, True, []), ("favor+", 100, False, ["--decay", "0.9,0.995,0.5"]),
                              ("relu", 5, True, [])):
        zero = mp == "relu"
        against_reference(f"--gates causal {mp} --window {W}{' segments' if seg else ''} {' '.join(extra)}",
                          mp, n, ["--gates", "gates.npy", "--window", str(W), *extra]
                          + (["--segments", "seg.npy"] if seg else [])
                          + (["--denominator", "zero-empty"] if zero else []),
                          "ogw.npy", policy="zero-empty" if zero else "error",
                          decay=gam if extra else None, offsets=offs if seg else None, window=W,
                          gates=gts)
    # per-feature gates [N, H, r] (GLA's form, docs/design.md §1.2 "Per-feature gates"): the
    # summaries in row form (one scan element per head and feature), streamed in blocks of 40
    # (lane starts corrected by their prefix), every scan algorithm on one case; some features
    # nearly reset (-20) at some tokens; r = dk for elu1 and relu, 16 for favor+
    fcases = [("elu1", dk, 97, False, [], "exscan"), ("relu", dk, 1000, False, [], "doubling"),
              ("favor+", 16, 1000, True, ["--decay", "0.9,0.995,0.5"], "chain")]
    fcases += [("elu1", dk, 1000, True, ["--decay", "0.9,0.995,0.5"], alg)
               for alg in ("exscan", "allgather", "pipelined", "auto")]
    for mp, r, nn, seg, extra, alg in fcases:
        gf = -np.log1p(np.exp(-(2.0 + rng.normal(size=(n, H3, r)))))
        gf[::97, :, ::3] -= 20.0
        common.save(par.path(f"gatesf{r}.npy"), gf[:nn], "f64")
        zero = mp == "relu"
        against_reference(f"--gates [N,H,{r}] {mp} n={nn}{' segments' if seg else ''} "
                          f"{' '.join(extra)} ({alg})", mp, nn,
                          ["--gates", f"gatesf{r}.npy", "--block-tokens", "40",
                           "--scan-algorithm", alg, *extra]
                          + (["--segments", "seg.npy"] if seg else [])
                          + (["--denominator", "zero-empty"] if zero else []),
                          "ogf.npy", policy="zero-empty" if zero else "error",
                          decay=gam if extra else None, offsets=offs if seg else None,
                          gates=gf[:nn])
    # ... refused with a window (exit 2, the reason named, no output)
    common.rm(par.path("ogfw.npy"))
    rcp, _, ep = par(*inputs(n), "--gates", f"gatesf{dk}.npy", "--window", "9", "--force",
                     "--no-progress", "--out", "ogfw.npy")
    probs = common.error_line_problems(rcp, ep) + ([] if rcp == 2 else [f"exit {rcp}, want 2"])
    probs += [] if "window" in ep and "per-feature" in ep else ["the reason does not name both"]
    probs += ["ogfw.npy was written"] if os.path.exists(par.path("ogfw.npy")) else []
    report(not probs, "--gates [N,H,r] with --window: refused", "; ".join(probs) or common.first_error(ep))
    syn = ["--n", "999", "--heads", "2", "--dk", "8", "--dv", "8", "--gates", "synthetic",
           "--block-tokens", "64", "--dtype", "f64", "--force", "--no-progress", "--out"]
    rcp, _, ep = par(*syn, "osyn.npy")
    rc1, _, e1 = one(*syn, "osyn1.npy")
    if rcp != 0 or rc1 != 0:
        report(False, "--gates synthetic", f"rc {rcp}/{rc1}: {common.first_error(ep or e1)}")
    else:
        e = ref.rel_err(np.load(par.path("osyn.npy")), np.load(one.path("osyn1.npy")))
        report(e <= TOL, "--gates synthetic: the one-rank output", f"{e:.2e}")
    # --gates synthetic-feature: per-feature gates drawn from the seed, [N, H, r] (r = dk = 8
    # for elu1), streamed in blocks of 64: the one-rank output, and the report's form
    synf = [x if x != "synthetic" else "synthetic-feature" for x in syn]
    rcp, _, ep = par(*synf[:-1], "--report", "osynf.json", "--out", "osynf.npy")
    rc1, _, e1 = one(*synf, "osynf1.npy")
    if rcp != 0 or rc1 != 0:
        report(False, "--gates synthetic-feature", f"rc {rcp}/{rc1}: {common.first_error(ep or e1)}")
    else:
        e = ref.rel_err(np.load(par.path("osynf.npy")), np.load(one.path("osynf1.npy")))
        form = json.load(open(par.path("osynf.json"))).get("gates")
        report(e <= TOL and form == "token-head-feature",
               "--gates synthetic-feature: the one-rank output, the report's form", f"{e:.2e}, {form}")

    # A NaN in the last rank's rows: all ranks agree, exit 2, one line, no output.
    bad = rng.normal(size=(n, H, dk))
    bad[n - 2, 1, 3] = np.nan
    common.save(par.path("qbad.npy"), bad, "f64")
    common.rm(par.path("obad.npy"))
    rc, _, err = par("--q", "qbad.npy", "--k", "k.npy", "--v", "v.npy", "--out", "obad.npy",
                     "--no-progress")
    probs = common.error_line_problems(rc, err)
    if rc != 2:
        probs.append(f"exit {rc}, expected 2")
    if not common.names_in_order(common.first_error(err), [n - 2, 1, 3]):
        probs.append("message does not name (token 998, head 1, column 3)")
    if os.path.exists(par.path("obad.npy")) or any(f.startswith("obad.npy.tmp") for f in os.listdir(par.workdir)):
        probs.append("an output or temporary file was left behind")
    report(not probs, "non-finite input on the last rank", "; ".join(probs) or common.first_error(err))

    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
