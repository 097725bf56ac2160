#!/usr/bin/python3
"""Shared plumbing for the oracle scripts: run the program, write inputs, tally results."""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np

PREFIX = "linattn: error:"
# Lines that mean the program crashed rather than reported an error.
CRASH_RE = re.compile(r"segmentation|core dumped|abort|sanitizer|backtrace|traceback|"
                      r"assertion|bus error|stack smashing|double free|^\s*#\d+ 0x|"
                      r"mpi_abort|signal \d+|killed", re.IGNORECASE)
# Open MPI's own event library warns now and then when a rank exits while mpirun still
# watches its pipes: "[warn] Epoll MOD(1) on fd 23 failed. Old events were 6; ...: Bad file
# descriptor" (a race in Open MPI's libevent use, open-mpi/ompi#2004), like the notice blocks
# strip_launcher_banner drops: not the program's output. Seen once in 170 runs of the fault
# tests' allocation sweep (CI, 2026-12-03).
OMPI_EVENT_WARN = re.compile(r"^\[warn\] Epoll (ADD|MOD|DEL)\(\d+\) on fd \d+ failed\.")


def parse_args(doc, extra=None):
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--linattn", required=True, help="path to the linattn binary")
    p.add_argument("--workdir", required=True, help="scratch directory (created)")
    p.add_argument("--quick", action="store_true", help="fewer cases")
    p.add_argument("--verbose", action="store_true", help="print every command line")
    p.add_argument("--launcher", default="",
                   help="prefix for every run, e.g. 'mpirun -np 3' (default: one plain rank)")
    if extra:
        extra(p)
    a = p.parse_args()
    a.linattn = os.path.abspath(a.linattn)
    os.makedirs(a.workdir, exist_ok=True)
    a.workdir = os.path.abspath(a.workdir)
    return a


class Runner:
    """Runs `linattn run ...` (or any subcommand) and keeps the last command line."""

    def __init__(self, binary, workdir, verbose=False, timeout=600, launcher=""):
        self.binary, self.workdir, self.verbose, self.timeout = binary, workdir, verbose, timeout
        self.launcher = shlex.split(launcher)
        self.last = ""

    def __call__(self, *args, sub="run"):
        cmd = self.launcher + [self.binary] + ([sub] if sub else []) + [str(a) for a in args]
        self.last = " ".join(cmd)
        if self.verbose:
            print("  $", self.last, flush=True)
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        for attempt in range(30):   # the binary may be mid-relink (EACCES, ETXTBSY, ENOENT)
            try:
                p = subprocess.run(cmd, cwd=self.workdir, capture_output=True, text=True,
                                   timeout=self.timeout, env=env)
                err = strip_launcher_banner(p.stderr) if self.launcher else p.stderr
                return p.returncode, p.stdout, err
            except subprocess.TimeoutExpired:
                return -999, "", "timeout"
            except OSError as e:
                err = e
                time.sleep(2)
        return -998, "", f"cannot execute {self.binary}: {err}"

    def path(self, name):
        return os.path.join(self.workdir, name)


def strip_launcher_banner(text):
    """Drop mpirun's own '-----'-delimited notice blocks (e.g. 'Primary job terminated
    normally, but 1 process returned a non-zero exit code'): they are not the program's."""
    out, inside = [], False
    for line in text.splitlines():
        if re.fullmatch(r"-{20,}", line.strip()):
            inside = not inside
        elif not inside:
            out.append(line)
    return "\n".join(out) + ("\n" if out else "")


def runner(args):
    return Runner(args.linattn, args.workdir, args.verbose, launcher=args.launcher)


def save(path, x, dtype):
    """Write x as a C-order little-endian .npy of dtype 'f32' or 'f64'; return the array
    exactly as written (so the reference uses the same rounded values)."""
    x = np.ascontiguousarray(x, dtype={"f32": "<f4", "f64": "<f8"}[dtype])
    if os.path.exists(path):
        os.remove(path)
    np.save(path, x)
    return x


def rm(*paths):
    for p in paths:
        if os.path.exists(p):
            os.remove(p)


def load_out(path, n, h, dv):
    """Load an output and bring it to [N, H, dv]; for H = 1 accept [N, dv] or [N, 1, dv].
    Returns (array or None, note)."""
    if not os.path.exists(path):
        return None, "no output file"
    o = np.load(path)
    if o.shape == (n, h, dv):
        return o, ""
    if h == 1 and o.shape == (n, dv):
        return o[:, None, :], "output is 2-D [N, dv]"
    return None, f"output shape {o.shape}, expected {(n, h, dv)}"


def error_line_problems(rc, stderr):
    """Check the error-path contract on stderr: first line starts with the prefix, exactly
    one such line, nothing that looks like a crash. Returns a list of problems."""
    probs = []
    lines = [l for l in stderr.splitlines() if l.strip()]
    if rc < 0:
        probs.append(f"killed by signal {-rc}")
    if not lines:
        return probs + ["stderr is empty"]
    if not lines[0].startswith(PREFIX):
        probs.append(f"first stderr line does not start with '{PREFIX}': {lines[0]!r}")
    n_err = sum(l.startswith(PREFIX) for l in lines)
    if n_err != 1:
        probs.append(f"{n_err} '{PREFIX}' lines")
    crash = [l for l in lines if not l.startswith(PREFIX) and CRASH_RE.search(l)]
    if crash:
        probs.append(f"crash-like stderr line: {crash[0]!r}")
    return probs


def first_error(stderr):
    """The `linattn: error:` line, else the first three lines with some text."""
    lines = [l.strip() for l in stderr.splitlines() if re.search(r"\w", l)]
    for l in lines:
        if l.startswith(PREFIX):
            return l
    return " / ".join(lines[:3])


def numbers_in(text):
    return [int(t) for t in re.findall(r"(?<![\w.])-?\d+(?![\w.])", text)]


def names_in_order(text, values):
    """True if the integers `values` occur in text as whole numbers, in this order."""
    nums, i = numbers_in(text), 0
    for x in nums:
        if i < len(values) and x == values[i]:
            i += 1
    return i == len(values)


class Tally:
    """One line per case: 'PASS|FAIL name err=... tol=... note'. Ends with 'N passed, M failed'."""

    def __init__(self):
        self.passed = self.failed = 0
        self.failures = []

    def case(self, ok, name, err=None, tol=None, note="", cmd=""):
        tag = "PASS" if ok else "FAIL"
        parts = [f"{tag:4s} {name}"]
        if err is not None:
            parts.append(f"err={err:.3e}")
        if tol is not None:
            parts.append(f"tol={tol:.3g}")
        if note:
            parts.append(note)
        print("  ".join(parts), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)
            if cmd:
                print(f"     cmd: {cmd}", flush=True)
        return ok

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def report_ranks(run):
    """Ranks that really ran under run's launcher, from the JSON report of a tiny job
    (None and a note when the job or its report failed)."""
    path = run.path("ranks_report.json")
    rc, _, err = run("--n", 64, "--heads", 1, "--dk", 4, "--dv", 4, "--no-progress",
                     "--report", path, "--force")
    if rc != 0:
        return None, f"exit {rc}: {first_error(err)}"
    with open(path) as f:
        return json.load(f).get("ranks"), ""


def launcher_ranks(launcher):
    """The rank count in a launcher prefix such as 'mpiexec -n 3' (1 if none)."""
    toks = launcher.split()
    for i, t in enumerate(toks[:-1]):
        if t in ("-n", "-np", "--np", "-N"):
            return int(toks[i + 1])
    return 1
