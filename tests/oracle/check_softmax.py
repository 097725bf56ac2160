#!/usr/bin/python3
"""Claim 2, approximation of softmax: favor+, favor+orf and favor-hyp approach exact softmax
attention (same scale s) as the number of features m grows.

Separate from claim 1 (check_forward.py): here the program's output is compared with
reference.softmax_attention(), never with the quadratic form of the same map.

Setup: N=256, H=2, dk=16, dv=16, Q and K iid N(0, 0.5^2), V iid N(0, 1), f64, default scale
1/sqrt(dk), --seed 0..4, m in 16, 64, 256, 1024, causal and bidirectional.

Pass criteria, per (map, mode), on the mean relative error over the 5 seeds:
1. it strictly decreases at every step 16 -> 64 -> 256 -> 1024;
2. at m = 1024 it is below BOUND = 0.15, and below 0.6 x the error of the trivial estimate
   (the uniform average of V over A(i)).
Calibration (a mock drawing NumPy projections of the docs/design.md §2 distributions, this data,
5 seeds): m=1024 gives 0.097 (favor+), 0.088 (favor+orf), 0.066 (favor-hyp) bidirectional
and 0.081/0.079/0.058 causal, seed sd <= 0.012; each 4x step in m lowers the error by a
factor 0.5-0.65 (the Monte Carlo rate m^-1/2), so no step is near a tie. The trivial
estimate scores 0.250 (bidirectional) / 0.235 (causal), elu1 0.234/0.226, and a map that
used x~ = s x instead of sqrt(s) x scores 0.191/0.179 at m=1024: both bounds reject it, while
the correct maps pass with a margin >= 1.45x. Larger inputs (scale 1) push every error above
0.6 at m=1024 (the estimator variance grows like exp(|q~+k~|^2)); hence scale 0.5.

Usage: check_softmax.py --linattn build/linattn --workdir /tmp/la_sm [--quick]
"""
import numpy as np

import common
import reference as ref

MAPS = ("favor+", "favor+orf", "favor-hyp")
FEATURES = (16, 64, 256, 1024)
BOUND, BASELINE_FRAC = 0.15, 0.6


def main():
    args = common.parse_args(__doc__)
    run, tally = common.runner(args), common.Tally()
    n, h, dk, dv = 256, 2, 16, 16
    rng = np.random.default_rng(20240601)
    q = common.save(run.path("q.npy"), 0.5 * rng.standard_normal((n, h, dk)), "f64")
    k = common.save(run.path("k.npy"), 0.5 * rng.standard_normal((n, h, dk)), "f64")
    v = common.save(run.path("v.npy"), rng.standard_normal((n, h, dv)), "f64")
    seeds = range(3) if args.quick else range(5)
    print(f"{'map':10s} {'mode':14s} " + " ".join(f"m={m:<14d}" for m in FEATURES)
          + " trivial   (mean +- sd over seeds)")
    for mode in ("bidirectional", "causal"):
        sm = ref.softmax_attention(q, k, v, None, mode)
        trivial, _ = ref.quadratic(np.ones((n, h, 1)), np.ones((n, h, 1)), v, mode)
        e_triv = ref.rel_err(trivial, sm)
        for mp in MAPS:
            means, cells, failed_runs = [], [], []
            for m in FEATURES:
                errs = []
                for s in seeds:
                    common.rm(run.path("out.npy"))
                    rc, _, err = run("--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out",
                                     "out.npy", "--mode", mode, "--feature-map", mp,
                                     "--features", m, "--seed", s, "--dtype", "f64",
                                     "--threads", 2)
                    out, _ = common.load_out(run.path("out.npy"), n, h, dv) if rc == 0 \
                        else (None, "")
                    if out is None:
                        failed_runs.append(f"{run.last}: exit {rc} {common.first_error(err)}")
                        errs.append(float("inf"))
                    else:
                        errs.append(ref.rel_err(out, sm))
                means.append(float(np.mean(errs)))
                cells.append(f"{means[-1]:.4f}+-{np.std(errs):.4f}")
            print(f"{mp:10s} {mode:14s} " + " ".join(f"{c:16s}" for c in cells)
                  + f" {e_triv:.4f}", flush=True)
            name = f"{mp}/{mode}"
            if failed_runs:
                tally.case(False, f"{name}: runs", note=failed_runs[0])
                continue
            dec = all(b < a for a, b in zip(means, means[1:]))
            tally.case(dec, f"{name}: seed-mean error strictly decreases over m = "
                       + ",".join(map(str, FEATURES)),
                       note=" > ".join(f"{x:.4f}" for x in means))
            lim = min(BOUND, BASELINE_FRAC * e_triv)
            tally.case(means[-1] < lim, f"{name}: m=1024 seed-mean error < "
                       f"min({BOUND}, {BASELINE_FRAC} x trivial {e_triv:.3f})",
                       means[-1], lim)
    tally.finish()


if __name__ == "__main__":
    main()
