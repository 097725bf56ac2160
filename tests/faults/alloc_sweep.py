#!/usr/bin/env python3
"""Allocation-failure sweep (docs/design.md §6 "Out of memory", core/la_alloc.h).

Every allocation of core/ and dist/ goes through one layer; LINATTN_FAIL_ALLOC=N makes the
Nth call of a process return NULL (LINATTN_FAIL_ALLOC_RANK=r: only on MPI rank r), and
LINATTN_COUNT_ALLOC=1 prints "linattn: allocations: K (rank r)" at exit. For each job below
the driver runs it once unfaulted (the reference output and the count K of each rank), then
once for every N = 1..K (on 2 ranks: for the failure on rank 0 and, separately, on rank 1),
and once with N = K + 1 (nothing fails: the count is the whole run). A faulted run must:

  - end within its timeout (no hang) and without a crash (no signal, no foreign stderr line);
  - exit 1 with exactly one `linattn: error:` line that says "out of memory";
  - leave nothing under the output names and no `*.tmp.*` temporary (the folder is empty);

or, where the failed allocation has a fallback, exit 0 with every output byte-for-byte equal
to the reference (and a report). Anything else fails the test.

Jobs (small: N = 300 tokens, 2 heads, dk = dv = 8; one thread unless noted):
  1 rank:  run causal --out --report (2 threads), grad --grad-q/-k/-v --report,
           eval (2 maps, 2 seeds, the floor, the report and its plots; every 4th N: ~8 s) and
           eval above --softmax-max-n (8 sampled rows, every 8th N: ~4 s); a faulted
           eval may leave the CSVs of the rows it finished, never report.md, plots.gp or a
           PNG; an eval that exits 0 has a report.md and CSVs of the reference's line count),
           run bidirectional, run causal --window 37, run from .npy files (float64 files
           converted to float32 in blocks of 128, with segments), grad bidirectional with
           segments (the backward's segmented path), run --reproducible bidirectional with
           segments (2 threads) and with --window 37, run bidirectional --decay with segments
  2 ranks: run causal --out --report, eval (every 8th N, ~9 s), run --reproducible favor+, grad --grad-q/-k/-v
           --report, grad --window 37 (halos both ways), run bidirectional --decay (the
           forward and the reverse scans), run --decay --window 37; each with the failure on rank 0
           and on rank 1. Every N is swept (no stride), except in the --reproducible jobs,
           whose allocations are mostly those of the jobs before them: every 2nd or 4th N,
           and the last. The tests take about 7 minutes each on the shared 2-core machine.
           (The segmented backward's collectives are those of grad; its own allocations
           are swept on 1 rank.)

--stride S multiplies every job's stride (the default tier of the suite sweeps with S = 3:
N = 1, 1 + 3s, 1 + 6s, ... and the last, s the job's own stride; its `full` tier with S = 1).

Usage: alloc_sweep.py --linattn build/linattn --workdir DIR --launcher "mpiexec -n 2"
       [--jobs 3] [--only NAME] [--stride S]
Exit 0: pass; 1: fail; 77: skipped (built without LINATTN_FAULT_INJECTION).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from common import OMPI_EVENT_WARN  # noqa: E402  (Open MPI's libevent warning, not ours)

PREFIX = "linattn: error:"
REASON = "out of memory"
TIMEOUT = 20  # seconds per launch (a clean one takes under 1 s): a hang fails the case
SMALL = ["--n", "300", "--heads", "2", "--dk", "8", "--dv", "8", "--no-progress"]
# --reproducible on a grid of 64 x 4 = 256 tokens: two blocks (docs/design.md §4.7)
REPRO = ["--reproducible", "--chunk", "4"]


class Ctx:
    def __init__(self, a):
        self.linattn = os.path.abspath(a.linattn)
        self.launcher = shlex.split(a.launcher) if a.launcher else []
        self.workdir = os.path.abspath(a.workdir)
        self.env = dict(os.environ)
        for k, v in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                     ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                     ("OMPI_MCA_orte_execute_quiet", "1"), ("OPENBLAS_NUM_THREADS", "1"),
                     ("OMP_NUM_THREADS", "1"),
                     # one node: shared memory only, which halves Open MPI's start-up here
                     ("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self,vader"),
                     # mpirun waits this long (default 1 s, twice) before it ends a job whose
                     # rank exited with 1; ours have all ended by then (errors are agreed)
                     ("OMPI_MCA_odls_base_sigkill_timeout", "0")):
            self.env.setdefault(k, v)
        for k in ("LINATTN_FAIL_ALLOC", "LINATTN_FAIL_ALLOC_RANK", "LINATTN_COUNT_ALLOC",
                  "LINATTN_KERNELS"):
            self.env.pop(k, None)
        self.lock = threading.Lock()

    def ranks(self):
        t = self.launcher
        for i, x in enumerate(t[:-1]):
            if x in ("-n", "-np", "--np", "-N"):
                return int(t[i + 1])
        return 1

    def cmd(self, args):
        return self.launcher + [self.linattn] + [str(x) for x in args]

    def run(self, args, cwd, extra_env):
        env = dict(self.env)
        env.update(extra_env)
        t0 = time.time()
        p = subprocess.Popen(self.cmd(args), cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        try:
            _, err = p.communicate(timeout=TIMEOUT)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            hung = True
        return p.returncode, err, hung, time.time() - t0


class Job:
    """One command, run in its own empty folder; outs: the output file names."""

    def __init__(self, name, args, outs, env=None, stride=1, may_leave=()):
        self.name, self.args, self.outs, self.env = name, args, outs, env or {}
        self.stride = stride  # sweep every stride-th N (and the last): a path swept elsewhere
        # what a failed run may leave: a checkpoint folder and its partial output, kept to
        # resume from (docs/design.md §6 "Checkpoints")
        self.may_leave = may_leave


# eval into the run's own (empty) folder; small enough that a launch takes ~0.3 s
EVAL = ["eval", "--out-dir", ".", "--n", "40", "--heads", "1", "--dk", "4", "--dv", "4",
        "--feature-maps", "elu1,favor+", "--features", "4", "--seeds", "2", "--modes", "causal",
        "--floor-max-n", "40", "--no-progress"]
EVAL_CSVS = ("results.csv", "bias.csv", "rows.csv", "refs.csv")
NL = b"\n"
SAMPLED_STRIDE = 8  # eval above --softmax-max-n: most of its allocations are eval's above


def jobs_for(P, inputs):
    o = ["--out", "o.npy", "--report", "r.json"]
    g = ["--grad-q", "gq.npy", "--grad-k", "gk.npy", "--grad-v", "gv.npy", "--report", "r.json"]
    run_outs, grad_outs = ["o.npy", "r.json"], ["gq.npy", "gk.npy", "gv.npy", "r.json"]
    ck = ["--checkpoint", "ck", "--checkpoint-every", "1e-9", "--block-tokens", "64"]
    ck_job = Job("run-checkpoint", ["run"] + SMALL + ck + o, run_outs,
                 may_leave=("ck", "o.npy.partial"))
    if P == 1:
        return [
            ck_job,
            Job("eval", EVAL, None, may_leave=EVAL_CSVS, stride=4),
            Job("eval-sampled", EVAL + ["--softmax-max-n", "0", "--kernel-max-n", "0", "--kernel-rows",
                                        "8"], None, may_leave=EVAL_CSVS, stride=SAMPLED_STRIDE),
            Job("run-causal", ["run"] + SMALL + o, run_outs, {"OMP_NUM_THREADS": "2"}),
            Job("grad", ["grad"] + SMALL + g, grad_outs),
            Job("run-bidirectional", ["run"] + SMALL + ["--mode", "bidirectional"] + o, run_outs),
            Job("run-window", ["run"] + SMALL + ["--window", "37"] + o, run_outs),
            Job("run-files", ["run", "--q", inputs["q"], "--k", inputs["k"], "--v", inputs["v"],
                              "--dtype", "f32", "--segments", inputs["seg"], "--block-tokens",
                              "128", "--no-progress"] + o, run_outs),
            Job("grad-segments", ["grad"] + SMALL + ["--mode", "bidirectional", "--segments",
                                                     inputs["seg"]] + g, grad_outs),
            Job("run-repro-segments", ["run"] + SMALL + REPRO + ["--mode", "bidirectional",
                                                                 "--segments", inputs["seg"]] + o,
                run_outs, {"OMP_NUM_THREADS": "2"}, stride=2),
            Job("run-repro-window", ["run"] + SMALL + REPRO + ["--window", "37"] + o, run_outs,
                stride=4),
            Job("run-decay-segments", ["run"] + SMALL + ["--mode", "bidirectional", "--decay", "0.9",
                                                         "--segments", inputs["seg"]] + o,
                run_outs, stride=2),
        ]
    return [ck_job, Job("run-causal", ["run"] + SMALL + o, run_outs),
            Job("eval", EVAL, None, may_leave=EVAL_CSVS, stride=8),
            Job("run-repro-favor", ["run"] + SMALL + REPRO + ["--feature-map", "favor+",
                                                              "--features", "8"] + o, run_outs,
                stride=4),
            Job("grad", ["grad"] + SMALL + g, grad_outs),
            Job("grad-window", ["grad"] + SMALL + ["--window", "37"] + g, grad_outs),
            Job("run-decay-bidirectional", ["run"] + SMALL + ["--mode", "bidirectional", "--decay",
                                                              "0.9,0.5"] + o, run_outs, stride=2),
            Job("run-decay-window", ["run"] + SMALL + ["--decay", "0.9", "--window", "37"] + o,
                run_outs, stride=4)]


def make_inputs(d):
    """float64 inputs (read into float32: the conversion buffer of MPI-IO reads) and segment
    offsets, for the run-files job."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    paths = {}
    for t, w in (("q", 8), ("k", 8), ("v", 8)):
        paths[t] = os.path.join(d, t + ".npy")
        np.save(paths[t], rng.standard_normal((300, 2, w)).astype(np.float64))
    paths["seg"] = os.path.join(d, "seg.npy")
    np.save(paths["seg"], np.array([0, 77, 150, 151, 300], dtype=np.int64))
    return paths


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def read_outputs(folder, outs):
    got = {}
    for f in outs:
        p = os.path.join(folder, f)
        if os.path.exists(p):
            with open(p, "rb") as fh:
                got[f] = fh.read()
    return got


def counts_of(err):
    return {int(m.group(2)): int(m.group(1))
            for m in re.finditer(r"^linattn: allocations: (\d+) \(rank (\d+)\)$", err, re.M)}


def reference(c, job, folder):
    """The unfaulted run: its outputs and each rank's allocation count."""
    rc, err, hung, _ = c.run(job.args, fresh(folder), dict(job.env, LINATTN_COUNT_ALLOC="1"))
    if rc != 0 or hung:
        raise RuntimeError(f"{job.name}: the unfaulted run failed (exit {rc}): {err.strip()}")
    if job.outs is None:  # every file the unfaulted run made (eval: the CSVs, report, plots)
        job.outs = sorted(os.listdir(folder))
    outs = read_outputs(folder, job.outs)
    if sorted(outs) != sorted(job.outs):
        raise RuntimeError(f"{job.name}: the unfaulted run wrote {sorted(outs)}")
    return outs, counts_of(err)


def drop_seconds(text):
    """eval's results.csv without its timing column."""
    rows = [l.split(b",") for l in text.splitlines()]
    if not rows or b"seconds" not in rows[0]:
        return rows
    c = rows[0].index(b"seconds")
    return [r[:c] + r[c + 1:] for r in rows]


def judge(rc, err, hung, folder, job, ref):
    """'fail' (the contract of a failed run holds), 'ok' (a fallback: exit 0 and the reference
    output) or a list of problems."""
    probs = []
    if hung:
        return [f"hung: killed after {TIMEOUT} s"]
    lines = [l for l in err.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith(PREFIX)]
    other = [l for l in lines if not l.startswith("linattn:") and not OMPI_EVENT_WARN.match(l)]
    left = sorted(os.listdir(folder))
    if rc == 0:
        got = read_outputs(folder, job.outs)
        if errs:
            probs.append(f"exit 0 with an error line: {errs[0]!r}")
        for f in job.outs:
            if f not in got:
                probs.append(f"exit 0 but {f} missing")
            elif f.endswith(".npy") and got[f] != ref[f]:
                probs.append(f"exit 0 but {f} differs from the unfaulted run")
            elif f.endswith(".json"):
                try:
                    json.loads(got[f])
                except ValueError:
                    probs.append(f"exit 0 but {f} is not JSON")
            elif f in ("rows.csv", "bias.csv") and got[f] != ref[f]:
                probs.append(f"exit 0 but {f} differs from the unfaulted run")
            elif f == "results.csv" and drop_seconds(got[f]) != drop_seconds(ref[f]):
                probs.append(f"exit 0 but {f} differs from the unfaulted run (beside 'seconds')")
            elif f.endswith((".md", ".csv")) and got[f].count(NL) != ref[f].count(NL):
                # timings differ run to run, the lines do not: a shorter report dropped content
                probs.append(f"exit 0 but {f} has {got[f].count(NL)} lines, the unfaulted "
                             f"run's {ref[f].count(NL)}")
        extra = [f for f in left if f not in job.outs]
        if extra:
            probs.append(f"stray files: {extra}")
        return probs or "ok"
    if rc != 1:
        probs.append(f"exit {rc}, want 1" + (" (signal)" if rc < 0 or rc > 128 else ""))
    if len(errs) != 1:
        probs.append(f"{len(errs)} '{PREFIX}' lines")
    elif REASON not in errs[0]:
        probs.append(f"error line lacks '{REASON}': {errs[0]!r}")
    if other:
        probs.append(f"other stderr line: {other[0]!r}")
    left = [f for f in left if f not in job.may_leave]
    if left:
        probs.append(f"left in the output folder: {left}")
    return probs or "fail"


def sweep(c, job, P, stride, jobs):
    """Returns (number of failures, summary line)."""
    base = os.path.join(c.workdir, job.name)
    ref, counts = reference(c, job, base + "-ref")
    if sorted(counts) != list(range(P)):
        print(f"FAIL  {job.name}: allocation counts {counts} (want one per rank)")
        return 1, ""
    cases = []
    for r in range(P):
        ns = list(range(1, counts[r] + 1, stride))
        if ns[-1] != counts[r]:
            ns.append(counts[r])
        cases += [(r, n) for n in ns] + [(r, counts[r] + 1)]
    res = {}

    def one(i, r, n):
        folder = fresh(f"{base}-{i}")
        env = dict(job.env, LINATTN_FAIL_ALLOC=str(n))
        if P > 1:
            env["LINATTN_FAIL_ALLOC_RANK"] = str(r)
        rc, err, hung, secs = c.run(job.args, folder, env)
        v = judge(rc, err, hung, folder, job, ref)
        if n > counts[r] and v != "ok":  # past the count nothing may fail
            v = v if isinstance(v, list) else [f"N = K + 1 = {n} failed the run: count unstable"]
        line = [l for l in err.splitlines() if l.startswith(PREFIX)]
        shutil.rmtree(folder, ignore_errors=True)
        return r, n, v, secs, line[0] if line else ""

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = [ex.submit(one, i, r, n) for i, (r, n) in enumerate(cases)]
        for f in futs:
            r, n, v, secs, line = f.result()
            res[(r, n)] = (v, line)
    bad = 0
    for (r, n), (v, line) in sorted(res.items()):
        if isinstance(v, list):
            bad += 1
            print(f"FAIL  {job.name} np{P} rank {r} N={n}: " + "; ".join(v))
            print("      LINATTN_FAIL_ALLOC=%d%s %s" % (
                n, f" LINATTN_FAIL_ALLOC_RANK={r}" if P > 1 else "",
                " ".join(shlex.quote(x) for x in c.cmd(job.args))))
    fallbacks = [(r, n) for (r, n), (v, _) in res.items() if v == "ok" and n <= counts[r]]
    kinds = sorted({re.sub(r"\d+", "#", line[len(PREFIX):].strip())
                    for v, line in res.values() if v == "fail"})
    summary = (f"{'PASS' if not bad else 'FAIL'}  {job.name} np{P}: allocations "
               f"{' '.join(f'rank{r}={counts[r]}' for r in range(P))}, {len(cases)} runs "
               f"in {time.time() - t0:.1f} s, {bad} bad, fallbacks (exit 0, same output) at "
               f"{fallbacks or 'none'}")
    print(summary)
    for k in kinds:
        print("        " + k)
    sys.stdout.flush()
    shutil.rmtree(base + "-ref", ignore_errors=True)
    return bad, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--linattn", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--launcher", default="")
    ap.add_argument("--jobs", type=int, default=3, help="launches at a time")
    ap.add_argument("--stride", type=int, default=1,
                    help="multiplies each job's stride: sweep every (S x stride)-th N, and the last")
    ap.add_argument("--only", default=None, help="run only the job of this name")
    a = ap.parse_args()
    c = Ctx(a)
    shutil.rmtree(c.workdir, ignore_errors=True)
    os.makedirs(c.workdir)
    P = c.ranks()
    # built with the injection? (LINATTN_FAULT_INJECTION=OFF ignores the variables)
    probe = fresh(os.path.join(c.workdir, "probe"))
    _, err, _, _ = c.run(["run", "--n", "10", "--heads", "1", "--dk", "4", "--dv", "4", "--no-progress"],
                      probe, {"LINATTN_COUNT_ALLOC": "1"})
    if not counts_of(err):
        print("SKIP: no allocation count printed (built without LINATTN_FAULT_INJECTION?)")
        return 77
    inputs = make_inputs(os.path.join(c.workdir, "inputs"))
    t0 = time.time()
    bad = 0
    for job in jobs_for(P, inputs):
        if a.only and job.name != a.only:
            continue
        try:
            b, _ = sweep(c, job, P, a.stride * job.stride, a.jobs)
        except RuntimeError as e:
            print(f"FAIL  {e}")
            b = 1
        bad += b
    print(f"{'PASS' if not bad else 'FAIL'}: {bad} bad runs, {time.time() - t0:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
