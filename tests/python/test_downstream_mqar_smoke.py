#!/usr/bin/python3
"""Smoke run of the MQAR task of the downstream study (issue 35; docs/downstream.md "MQAR"):
the real command, `python3 -m linattn.downstream --tasks mqar --quick`, cut down to seconds
(two attentions, d_model 16, two seeds, 40 steps), in a temporary folder.

Checks: the command exits 0; report.md and the CSVs exist; every number in them is finite and
every accuracy is in [0, 1]; training lowered the loss in every run; --resume runs nothing
more. No accuracy or timing threshold. Exit 0 ok, 1 failure, 77 without torch.
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Checks, need  # noqa: E402

need(torch_too=True)

here = os.path.dirname(os.path.abspath(__file__))
py = os.path.abspath(os.path.join(here, "..", "..", "python"))
env = dict(os.environ)
env["PYTHONPATH"] = env["PYTHONPATH"] + ":" + py if env.get("PYTHONPATH") else py
env["OMP_NUM_THREADS"] = "1"

c = Checks("test_downstream_mqar_smoke")

c.start("the MQAR generator: Zoology's layout and query-gap distribution")
sys.path.insert(0, py)
import numpy as np  # noqa: E402
from linattn.downstream import mqar  # noqa: E402

V, L, P = 256, 128, 16
x, y = mqar.make_examples(np.random.default_rng(0), 500, L, P, V)
ok = True
for seq, tgt in zip(x, y):
    keys, vals = seq[0:2 * P:2], seq[1:2 * P:2]
    q = np.nonzero(tgt != -100)[0]
    ok &= bool(len(set(keys)) == P and keys.min() >= 1 and keys.max() < V // 2
               and vals.min() >= V // 2 and len(set(vals)) == P and len(q) == P
               and (q >= 2 * P).all() and ((q - 2 * P) % 2 == 0).all()
               and sorted(seq[q]) == sorted(keys)
               and all(dict(zip(keys, vals))[seq[i]] == tgt[i] for i in q))
c.check(ok, "pairs first, distinct keys in 1..V/2-1 and values in V/2..V-1, each key asked once "
            "at an even offset after the pairs, its target its value")
# The gaps: numpy's sequential choice(replace=False, p) as Zoology draws them, against ours.
space, n = (L - 2 * P) // 2, 4000
pw = 0.01 * np.arange(1, space + 1) ** (0.01 - 1)
pw /= pw.sum()
r = np.random.default_rng(1)
theirs = np.zeros(space)
for _ in range(n):
    theirs[r.choice(space, size=P, replace=False, p=pw)] += 1
ours = np.zeros(space)
for tgt in mqar.make_examples(np.random.default_rng(2), n, L, P, V)[1]:
    ours[(np.nonzero(tgt != -100)[0] - 2 * P) // 2] += 1
dev = np.abs(theirs - ours).max() / n
c.check(dev < 0.05, "the share of sequences asking at each gap matches numpy's sequential "
                    "choice within 0.05 (max deviation %.3f)" % dev)

c.start("the quick MQAR task, cut down")
with tempfile.TemporaryDirectory() as out:
    cmd = [sys.executable, "-m", "linattn.downstream", "--out-dir", out, "--quick",
           "--tasks", "mqar", "--attentions", "softmax,elu1", "--d-models", "16",
           "--lrs", "1e-2", "--seeds", "2", "--max-steps", "40", "--threads", "1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    c.check(r.returncode == 0, "exit status %d: %s" % (r.returncode, r.stderr[-2000:]))
    for f in ("report.md", "mqar_runs.csv", "mqar_accuracy.csv", "mqar_summary.csv",
              "softmax_check.csv", "plots.gp"):
        c.check(os.path.exists(os.path.join(out, f)), "%s exists" % f)

    def rows(name):
        p = os.path.join(out, name)
        if not os.path.exists(p):
            return []
        with open(p, newline="") as f:
            return list(csv.DictReader(f))

    runs = rows("mqar_runs.csv")
    c.check(len(runs) == 4, "4 runs (2 attentions x 2 seeds), got %d" % len(runs))
    for r in runs:
        for col in ("train_loss_first", "train_loss_last", "accuracy", "seconds", "train_seconds_per_step"):
            c.check(math.isfinite(float(r[col])), "mqar_runs.csv %s of %s seed %s is finite (%s)" % (
                col, r["attention"], r["seed"], r[col]))
        c.check(r["stop"] in ("done", "solved") and 1 <= int(r["steps"]) <= 40,
                "%s seed %s ran at most 40 steps (%s, %s)" % (
            r["attention"], r["seed"], r["steps"], r["stop"]))
        c.check(float(r["train_loss_last"]) < float(r["train_loss_first"]),
                "%s seed %s: the training loss fell (%s -> %s)" % (
                    r["attention"], r["seed"], r["train_loss_first"], r["train_loss_last"]))
    acc = rows("mqar_accuracy.csv")
    c.check(len(acc) >= 4 * 5, "at least 5 test configurations per run in mqar_accuracy.csv (%d rows)" % len(acc))
    for r in acc:
        c.check(0.0 <= float(r["accuracy"]) <= 1.0 and math.isfinite(float(r["loss"])),
                "accuracy in [0, 1] and a finite loss (%s, %s)" % (r["accuracy"], r["loss"]))
    summ = rows("mqar_summary.csv")
    c.check(len(summ) == 2 * 5, "10 summary rows (2 attentions x 5 test configurations), got %d" % len(summ))
    for r in summ:
        for col in ("mean_acc", "std_acc", "min_acc", "max_acc"):
            c.check(math.isfinite(float(r[col])), "mqar_summary.csv %s finite (%s)" % (col, r[col]))
    rep = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
    c.check("QUICK" in rep and "associative recall" in rep,
            "report.md is labelled quick and has the MQAR section")

    r2 = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    c.check(r2.returncode == 0 and len(rows("mqar_runs.csv")) == 4,
            "--resume keeps the 4 runs and adds none (exit %d)" % r2.returncode)
c.finish()
