#!/usr/bin/python3
"""Smoke run of the downstream study (issue 35; docs/downstream.md): the real command,
`python3 -m linattn.downstream --quick`, cut down to seconds (N = 12, two attentions, three
seeds, 150 steps), in a temporary folder.

Checks: the command exits 0; report.md and the CSVs exist; every number in the CSVs is finite;
training lowered the loss in every run (the last training losses below the first, the final
test MSE below the untrained model's); the softmax check passed; --resume runs nothing more.
No accuracy or timing threshold. Exit 0 ok, 1 failure, 77 without torch.
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

c = Checks("test_downstream_smoke")
c.start("the quick capacity task, cut down")
with tempfile.TemporaryDirectory() as out:
    cmd = [sys.executable, "-m", "linattn.downstream", "--out-dir", out, "--quick",
           "--tasks", "capacity", "--sizes", "12", "--attentions", "softmax,elu1",
           "--seeds", "3", "--max-steps", "150", "--threads", "1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    c.check(r.returncode == 0, "exit status %d: %s" % (r.returncode, r.stderr[-2000:]))
    files = ("report.md", "capacity_runs.csv", "capacity_curves.csv", "capacity_summary.csv",
             "capacity_anchor.csv", "softmax_check.csv", "plots.gp")
    for f in files:
        c.check(os.path.exists(os.path.join(out, f)), "%s exists" % f)

    def rows(name):
        p = os.path.join(out, name)
        if not os.path.exists(p):
            return []
        with open(p, newline="") as f:
            return list(csv.DictReader(f))

    def numbers(rs, cols):
        for r in rs:
            for col in cols:
                yield col, r.get(col), r

    runs = rows("capacity_runs.csv")
    c.check(len(runs) == 6, "6 runs (2 attentions x 3 seeds), got %d" % len(runs))
    for col, v, r in numbers(runs, ("final_mse", "best_mse", "init_mse", "train_loss_first",
                                    "train_loss_last", "seconds", "train_seconds_per_step")):
        c.check(v is not None and math.isfinite(float(v)),
                "capacity_runs.csv %s of %s seed %s is finite (%s)" % (col, r["attention"], r["seed"], v))
    for r in runs:
        c.check(float(r["train_loss_last"]) < float(r["train_loss_first"]),
                "%s seed %s: the training loss fell (%s -> %s)" % (
                    r["attention"], r["seed"], r["train_loss_first"], r["train_loss_last"]))
        c.check(float(r["final_mse"]) < float(r["init_mse"]),
                "%s seed %s: the test MSE fell (%s -> %s)" % (
                    r["attention"], r["seed"], r["init_mse"], r["final_mse"]))
    for col, v, r in numbers(rows("capacity_curves.csv"), ("test_mse",)):
        c.check(math.isfinite(float(v)), "capacity_curves.csv test_mse finite (%s)" % v)
    summ = rows("capacity_summary.csv")
    c.check(len(summ) == 2, "2 summary rows, got %d" % len(summ))
    for col, v, r in numbers(summ, ("mean_mse", "std_mse", "min_mse", "max_mse", "seconds_per_step")):
        c.check(math.isfinite(float(v)), "capacity_summary.csv %s of %s finite (%s)" % (col, r["attention"], v))
    for r in rows("softmax_check.csv"):
        c.check(r["ok"] == "1", "softmax check %s: %s %s" % (r["mode"], r["out_rel_err"], r["grad_rel_err"]))
    rep = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
    c.check("QUICK" in rep and "Capacity" in rep, "report.md is labelled quick and has the capacity section")

    r2 = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    c.check(r2.returncode == 0 and len(rows("capacity_runs.csv")) == 6,
            "--resume keeps the 6 runs and adds none (exit %d)" % r2.returncode)
c.finish()
