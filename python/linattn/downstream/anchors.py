"""The published numbers each task is compared with, and where they come from.

CAPACITY: Schlag, Irie and Schmidhuber (2021), "Linear Transformers Are Secretly Fast Weight
Programmers", section 6.1, setting 1 ("capacity"), read from the logs of their repository
ischlag/fast-weight-transformers, folder synthetic/logs/ (commit 927b5ee3; one run each,
seed 1). A log file d64_<attn>_<rule>_AssocSeq<L>N<N>R0.csv holds `step,eval-loss`: the test
loss every 100 steps until the run stopped. Their figure notebook
(synthetic/setting1_generate_figure.ipynb) plots the LAST row; the numbers quoted in the text
of issue 35 (softmax 0.03 at N = 600, FAVOR+ (512) 0.024 at N = 20, ...) are the SMALLEST
row. Both are kept: `final` (last row), `best` (smallest row), `steps` (last step).
A row with final None is a log that the stored copy of the repository does not hold.

`ours` names the engine attention closest to theirs (docs/downstream.md "Capacity"):
  softmax_cat -> softmax; linear (elu(x) + 1) -> elu1; dpfpNU -> dpfp:NU;
  favorM -> favor-hyp:M: their `prime` is the hyperbolic positive map
  [exp(u - |x|^2/2), exp(-u - |x|^2/2)] / sqrt(2M) with r = 2M features, target exp(q.k)
  (no 1/sqrt(d) scale), over ORTHOGONAL rows REDRAWN at every forward pass; favor-hyp:M has
  the same formula and width over iid rows fixed for the run.
"""

# (their name, ours, N, final, best, steps)
_CAPACITY = [
    ("softmax_cat", "softmax", 20, 6.343253e-04, 6.343253e-04, 200),
    ("softmax_cat", "softmax", 60, 7.218058e-05, 7.218058e-05, 200),
    ("softmax_cat", "softmax", 100, 2.0059513e-05, 2.0059513e-05, 200),
    ("softmax_cat", "softmax", 200, 8.600196e-06, 8.600196e-06, 200),
    ("softmax_cat", "softmax", 400, 2.8018367e-06, 2.8018367e-06, 400),
    ("softmax_cat", "softmax", 600, 0.053571522, 0.030331822, 2600),
    ("linear_sum", "elu1", 20, 8.887422e-04, 8.887422e-04, 800),
    ("linear_sum", "elu1", 60, 0.024646008, 0.024510164, 4200),
    ("linear_sum", "elu1", 100, 0.1715406, 0.16420512, 1900),
    ("linear_sum", "elu1", 200, 0.34256673, 0.34195828, 2400),
    ("linear_sum", "elu1", 400, 0.4221633, 0.4215591, 3900),
    ("linear_sum", "elu1", 600, 0.45173, 0.4513458, 2500),
    ("favor64_sum", "favor-hyp:64", 20, 0.13004512, 0.11735378, 2900),
    ("favor64_sum", "favor-hyp:64", 60, 0.49263066, 0.4832732, 2900),
    ("favor64_sum", "favor-hyp:64", 100, 0.5, 0.49610382, 2100),
    ("favor64_sum", "favor-hyp:64", 200, None, None, None),
    ("favor64_sum", "favor-hyp:64", 400, None, None, None),
    ("favor64_sum", "favor-hyp:64", 600, None, None, None),
    ("favor128_sum", "favor-hyp:128", 20, 0.079693, 0.07363152, 3700),
    ("favor128_sum", "favor-hyp:128", 60, 0.4849124, 0.48439914, 2600),
    ("favor128_sum", "favor-hyp:128", 100, 0.5, 0.49999994, 1800),
    ("favor128_sum", "favor-hyp:128", 200, None, None, None),
    ("favor128_sum", "favor-hyp:128", 400, None, None, None),
    ("favor128_sum", "favor-hyp:128", 600, None, None, None),
    ("favor512_sum", "favor-hyp:512", 20, 0.04527239, 0.024099493, 3900),
    ("favor512_sum", "favor-hyp:512", 60, 0.40904903, 0.4064726, 2500),
    ("favor512_sum", "favor-hyp:512", 100, 0.50003123, 0.5, 1800),
    ("favor512_sum", "favor-hyp:512", 200, None, None, None),
    ("favor512_sum", "favor-hyp:512", 400, None, None, None),
    ("favor512_sum", "favor-hyp:512", 600, 0.5, 0.5, 1200),
    ("dpfp1_sum", "dpfp:1", 20, 7.829439e-04, 7.829439e-04, 100),
    ("dpfp1_sum", "dpfp:1", 60, 4.292571e-04, 4.292571e-04, 200),
    ("dpfp1_sum", "dpfp:1", 100, 2.0874513e-04, 2.0874513e-04, 600),
    ("dpfp1_sum", "dpfp:1", 200, 0.17512594, 0.17320982, 2500),
    ("dpfp1_sum", "dpfp:1", 400, 0.34644046, 0.3414886, 2000),
    ("dpfp1_sum", "dpfp:1", 600, 0.4176931, 0.4109183, 1600),
    ("dpfp2_sum", "dpfp:2", 20, 3.0548454e-04, 3.0548454e-04, 200),
    ("dpfp2_sum", "dpfp:2", 60, 9.6907595e-04, 9.6907595e-04, 200),
    ("dpfp2_sum", "dpfp:2", 100, 5.0291454e-04, 5.0291454e-04, 400),
    ("dpfp2_sum", "dpfp:2", 200, 3.661853e-04, 3.661853e-04, 2100),
    ("dpfp2_sum", "dpfp:2", 400, 0.16616862, 0.16428256, 3700),
    ("dpfp2_sum", "dpfp:2", 600, 0.32634008, 0.3234674, 3300),
    ("dpfp3_sum", "dpfp:3", 20, 4.808468e-04, 4.808468e-04, 200),
    ("dpfp3_sum", "dpfp:3", 60, 4.903538e-04, 4.903538e-04, 300),
    ("dpfp3_sum", "dpfp:3", 100, 4.7511008e-04, 4.7511008e-04, 400),
    ("dpfp3_sum", "dpfp:3", 200, 8.823255e-04, 8.823255e-04, 800),
    ("dpfp3_sum", "dpfp:3", 400, 0.036083616, 0.03585355, 6700),
    ("dpfp3_sum", "dpfp:3", 600, 0.2012372, 0.19842272, 6500),
]

CAPACITY_SOURCE = ("Schlag et al. 2021, sec. 6.1; ischlag/fast-weight-transformers "
                   "synthetic/logs/ (commit 927b5ee3)")


def capacity_rows():
    """The anchor as CSV rows (dicts)."""
    out = []
    for theirs, ours, n, final, best, steps in _CAPACITY:
        prefix = "softmax_cat" if theirs == "softmax_cat" else "d64_" + theirs
        log = "synthetic/logs/%s_AssocSeq%dN%dR0.csv" % (
            "d64_softmax_cat" if theirs == "softmax_cat" else prefix, n, n)
        out.append({"theirs": theirs, "ours": ours, "N": n,
                    "final_mse": float("nan") if final is None else final,
                    "best_mse": float("nan") if best is None else best,
                    "steps": "" if steps is None else steps,
                    "log_file": log if final is not None else log + " (not in the stored copy)"})
    return out


def capacity_anchor(ours, n):
    """(final, best, their name) for our attention at N, or None."""
    for theirs, o, nn, final, best, steps in _CAPACITY:
        if o == ours and nn == n and final is not None:
            return final, best, theirs
    return None
