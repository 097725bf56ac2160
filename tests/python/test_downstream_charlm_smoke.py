#!/usr/bin/python3
"""Smoke run of the charlm and swap tasks of the downstream study (issue 35 items 4-6;
docs/downstream.md "Character language model"): the real command,
`python3 -m linattn.downstream --tasks charlm,swap --quick`, cut down to seconds (a 1-layer
model of width 16, context 32, the first 2 MB of GCIDE, 30 steps, 2 seeds), in a temporary
folder; and a unit check of the GCIDE markup stripping on a literal sample.

Checks: the stripping rules (text.py); the command exits 0; report.md and the CSVs exist; every
number in them is finite; training lowered the loss in every run; the in-model measures exist
for every layer of every non-softmax model; --resume runs nothing more. No accuracy or timing
threshold. Exit 0 ok, 1 failure, 77 without torch or without dict-gcide.
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SKIP, Checks, need  # noqa: E402

need(torch_too=True)

here = os.path.dirname(os.path.abspath(__file__))
py = os.path.abspath(os.path.join(here, "..", "..", "python"))
env = dict(os.environ)
env["PYTHONPATH"] = env["PYTHONPATH"] + ":" + py if env.get("PYTHONPATH") else py
env["OMP_NUM_THREADS"] = "1"
sys.path.insert(0, py)
from linattn.downstream import text  # noqa: E402

c = Checks("test_downstream_charlm_smoke")

c.start("GCIDE markup stripping (text.py) on a literal sample")
sample = ('Affect \\Af*fect"\\, v. t. [imp. & p. p. {Affected}; p. pr. & vb.\n'
          '   n. {Affecting}.] [L. affectus. See {Fact}.]\n'
          '   1. To act upon; to produce an effect upon.\n'
          '      [1913 Webster]\n'
          '\n'
          '            As might affect the earth with cold heat. --Milton.\n'
          '      [1913 Webster +PJC]\n')
want = ('Affect, v. t. [imp. & p. p. Affected; p. pr. & vb.\n'
        'n. Affecting.] [L. affectus. See Fact.]\n'
        '1. To act upon; to produce an effect upon.\n'
        'As might affect the earth with cold heat. --Milton.')
got = text.strip(sample)
c.check(got == want, "headword, pronunciation, braces, source tags, indentation: %r" % got)
sample2 = 'Zythem \\Zy"them\\ (z[imac]"th[e^]m), n.\n   See {Zythum}. [Obs.] caf[\'e] [ae]on [alpha] [root]x\n   [WordNet 1.5]'
want2 = 'Zythem, n.\nSee Zythum. [Obs.] cafe aeon alpha x'
got2 = text.strip(sample2)
c.check(got2 == want2, "respelling removed, entities to letters, labels kept: %r" % got2)
ids = text.encode("a\n~ \x01\xe9b")
c.check(list(ids) == [66, 0, 95, 1, 67] and text.decode(ids) == "a\n~ b",
        "vocabulary: newline 0, printable ASCII 1..95, anything else dropped (%s)" % list(ids))
c.check(int(text.encode("".join(chr(i) for i in range(256))).max()) == text.VOCAB - 1,
        "the largest id is VOCAB - 1")
tr, va, te = text.split(text.encode("x" * 4000), block=100)
c.check((len(tr), len(va), len(te)) == (3600, 200, 200), "split 90/5/5 by blocks (%d, %d, %d)" % (
    len(tr), len(va), len(te)))

if not os.path.exists(text.DICT):
    c.finish()
    sys.stderr.write("%s missing (Debian package dict-gcide): the training smoke run is skipped\n" % text.DICT)
    sys.exit(SKIP)

c.start("the quick charlm and swap tasks, cut down")
with tempfile.TemporaryDirectory() as out:
    cmd = [sys.executable, "-m", "linattn.downstream", "--out-dir", out, "--quick",
           "--tasks", "charlm,swap", "--attentions", "softmax,elu1,hedgehog", "--seeds", "2",
           "--max-steps", "30", "--ft-steps", "6", "--lm-model", "1,2,16,32", "--lm-batch", "4",
           "--val-windows", "4", "--text-limit", "2000000", "--threads", "1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    c.check(r.returncode == 0, "exit status %d: %s" % (r.returncode, r.stderr[-2000:]))
    files = ("report.md", "charlm_runs.csv", "charlm_curve.csv", "charlm_summary.csv", "swap_runs.csv",
             "swap_curve.csv", "swap_summary.csv", "inmodel.csv", "inmodel_untrained.csv",
             "inmodel_correlation.csv", "softmax_check.csv", "plots.gp")
    for f in files:
        c.check(os.path.exists(os.path.join(out, f)), "%s exists" % f)

    def rows(name):
        p = os.path.join(out, name)
        if not os.path.exists(p):
            return []
        with open(p, newline="") as f:
            return list(csv.DictReader(f))

    # every number in every CSV is finite (empty = undefined, e.g. no gap to close)
    bad = []
    for f in files:
        if f.endswith(".csv"):
            for row in rows(f):
                for k, v in row.items():
                    try:
                        x = float(v)
                    except (TypeError, ValueError):
                        continue
                    if not math.isfinite(x):
                        bad.append("%s %s=%s" % (f, k, v))
    c.check(not bad, "every number in the CSVs is finite (%s)" % "; ".join(bad[:5]))
    runs = rows("charlm_runs.csv")
    c.check(len(runs) == 6, "6 charlm runs (3 attentions x 2 seeds), got %d" % len(runs))
    for r in runs:
        c.check(r["stop"] == "done" and int(r["steps_done"]) == 30 and r["val_bpc"] != "",
                "%s seed %s trained 30 steps (%s)" % (r["attention"], r["seed"], r["stop"]))
        c.check(float(r["train_bpc_last"]) < float(r["train_bpc_first"]),
                "%s seed %s: the training loss fell (%s -> %s bpc)" % (
                    r["attention"], r["seed"], r["train_bpc_first"], r["train_bpc_last"]))
    sw = rows("swap_runs.csv")
    c.check(len(sw) == 6 and all(r["stop"] == "done" and r["bpc_finetuned"] != "" for r in sw),
            "6 swap runs (softmax control + 2 maps, 2 seeds), each fine-tuned")
    c.check(all(r["base"] == "charlm checkpoint" for r in sw), "swap reused charlm's softmax checkpoints")
    inm = rows("inmodel.csv")
    want_rows = 2 * 2 * 1 + 2 * 2 * 2 * 1   # charlm: 2 maps x 2 seeds x 1 layer; swap: 2 stages more
    c.check(len(inm) == want_rows and all(r["out_rel_err"] != "" and r["grad_rel_err"] != "" for r in inm),
            "inmodel.csv: %d rows with output and gradient errors, got %d" % (want_rows, len(inm)))
    rep = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
    c.check("QUICK" in rep and "Character language model" in rep and "Swapping" in rep
            and "Spearman" in rep, "report.md is labelled quick and has the charlm, swap and item 6 sections")

    r2 = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    c.check(r2.returncode == 0 and len(rows("charlm_runs.csv")) == 6 and len(rows("swap_runs.csv")) == 6,
            "--resume keeps the runs and adds none (exit %d)" % r2.returncode)
c.finish()
