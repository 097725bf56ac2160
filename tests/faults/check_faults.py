#!/usr/bin/env python3
"""Faults of the file system and of the job (docs/design.md §6, docs/cli.md "Files").

Cases (--case):
  diskfull  a 1 MiB tmpfs fills up under `run --out`, `grad --grad-q/-k/-v` and `--report`
  sigkill   one rank of a running job is killed with SIGKILL; then the same job again
  input     an input whose header claims more rows than it holds, and one that shrinks after
            its header was checked
  outdir    a missing and a read-only output folder, for run --out, run --report, grad

A failing case must: exit with the documented code (1 for a failed write, 2 for bad input or an
unusable output path), print exactly one `linattn: error:` line, naming the file and the OS
reason, and no Open MPI message; leave nothing under the final names and no `*.tmp.*`
temporary; end within its timeout on every rank count. The killed job must end (mpirun tears
it down) with a non-zero code and no output, and the next run of the same command must succeed
and leave no temporary of the killed one behind.

Usage: check_faults.py --linattn build/linattn --workdir DIR --launcher "mpiexec -n 3" --case C
Exit 0: pass; 1: fail; 77: skipped (not root, or a tmpfs cannot be mounted).
"""
import argparse
import glob
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from common import OMPI_EVENT_WARN  # noqa: E402  (Open MPI's libevent warning, not ours)

PREFIX = "linattn: error:"
ENOSPC = "No space left on device"
TIMEOUT = 60  # seconds per launch: a hang fails the case


class Skip(Exception):
    pass


class Ctx:
    def __init__(self, a):
        self.linattn = os.path.abspath(a.linattn)
        self.launcher = shlex.split(a.launcher) if a.launcher else []
        self.workdir = os.path.abspath(a.workdir)
        self.mounts = []
        self.failures = 0
        self.env = dict(os.environ)
        for k, v in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                     ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                     ("OMPI_MCA_orte_execute_quiet", "1"), ("OPENBLAS_NUM_THREADS", "1"),
                     ("OMP_NUM_THREADS", "1")):
            self.env.setdefault(k, v)

    def ranks(self):
        t = self.launcher
        for i, x in enumerate(t[:-1]):
            if x in ("-n", "-np", "--np", "-N"):
                return int(t[i + 1])
        return 1

    def cmd(self, *args):
        return self.launcher + [self.linattn] + [str(x) for x in args]

    def start(self, *args):
        return subprocess.Popen(self.cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env, start_new_session=True)

    def finish(self, p, timeout=TIMEOUT):
        """(rc, stderr, hung): a launch that outlives timeout is killed and reported as hung."""
        try:
            _, err = p.communicate(timeout=timeout)
            return p.returncode, err, False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            return p.returncode, err, True

    def run(self, *args, timeout=TIMEOUT):
        t0 = time.time()
        rc, err, hung = self.finish(self.start(*args), timeout)
        return rc, err, hung, time.time() - t0

    def folder(self, name, tmpfs=None):
        """A fresh folder under the workdir; tmpfs: mount options of a tmpfs on it."""
        d = os.path.join(self.workdir, name)
        if os.path.ismount(d):
            subprocess.run(["umount", d], check=False)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if tmpfs:
            if os.geteuid() != 0:
                raise Skip("not root: cannot mount a tmpfs")
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", tmpfs, "tmpfs", d],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise Skip(f"mount -t tmpfs -o {tmpfs} failed: {r.stderr.strip()}")
            self.mounts.append(d)
        return d

    def cleanup(self):
        for d in reversed(self.mounts):
            subprocess.run(["umount", d], check=False)
        self.mounts = []
        reap()

    def case(self, ok, name, probs=(), secs=None, cmd=None):
        t = f" ({secs:.1f} s)" if secs is not None else ""
        print(f"{'PASS' if ok else 'FAIL'}  {name}{t}" + ("" if ok else "  | " + "; ".join(probs)))
        if not ok:
            self.failures += 1
            if cmd:
                print("      " + " ".join(shlex.quote(c) for c in cmd))
        sys.stdout.flush()


def temporaries(*folders):
    return sorted(f for d in folders for f in glob.glob(os.path.join(d, "*.tmp.*")))


def problems(rc, err, hung, want_rc, names, reason, finals, folders, computed_ok=True):
    """The contract of a failing run (module docstring)."""
    probs = []
    if hung:
        probs.append(f"hung: killed after {TIMEOUT} s")
    if rc != want_rc:
        probs.append(f"exit {rc}, want {want_rc}")
    lines = [l for l in err.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith(PREFIX)]
    if len(errs) != 1:
        probs.append(f"{len(errs)} '{PREFIX}' lines")
    if errs:
        e = errs[0]
        if not any(n in e for n in names):
            probs.append(f"error line names none of {names}")
        if reason and reason not in e:
            probs.append(f"error line lacks the reason '{reason}'")
    other = [l for l in lines if not l.startswith("linattn:") and not OMPI_EVENT_WARN.match(l)]
    if other:
        probs.append(f"other stderr line: {other[0]!r}")
    if not computed_ok:
        summary = [l for l in lines if l.startswith(("linattn: run ", "linattn: grad "))]
        if summary:
            probs.append("computed before refusing the output (summary line printed)")
    there = [f for f in finals if os.path.lexists(f)]
    if there:
        probs.append(f"under the final name: {there}")
    tmps = temporaries(*folders)
    if tmps:
        probs.append(f"temporaries left: {[os.path.basename(t) for t in tmps]}")
    if errs:
        probs.append(f"[{errs[0]}]")
    return probs


def contract(c, name, args, want_rc, names, reason, finals, folders, computed_ok=True):
    rc, err, hung, secs = c.run(*args)
    probs = problems(rc, err, hung, want_rc, names, reason, finals, folders, computed_ok)
    ok = not [p for p in probs if not p.startswith("[")]
    c.case(ok, name, probs, secs, c.cmd(*args))


def fill(folder):
    """Fill a file system: write to a file until ENOSPC."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
        block = b"\0" * 4096
        try:
            while True:
                f.write(block)
        except OSError:
            pass


def subreaper():
    """Become the child subreaper (Linux), so that ranks orphaned by a torn-down mpirun are
    reaped here rather than left as zombies of an init that may not reap them."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


# ---- cases ----

def case_diskfull(c):
    P = c.ranks()
    full = c.folder("full", tmpfs="size=1m")
    ok = c.folder("ok")
    # run --out: 20000 x 2 x 64 float32 = 10 MB into 1 MiB
    out = os.path.join(full, "out.npy")
    contract(c, f"np{P} run --out on a full disk -> 1", ["run", "--n", 20000, "--heads", 2,
             "--out", out, "--no-progress"], 1, [out], ENOSPC, [out], [full])
    # grad: three outputs of 2 MiB each; none may appear
    g = [os.path.join(full, f"g{t}.npy") for t in "qkv"]
    contract(c, f"np{P} grad --grad-q/-k/-v on a full disk -> 1, none written",
             ["grad", "--n", 4096, "--heads", 2, "--grad-q", g[0], "--grad-k", g[1],
              "--grad-v", g[2], "--no-progress"], 1, g, ENOSPC, g, [full])
    # --report on a full disk; the output on a good disk must not appear either
    fill(full)
    rep, out2 = os.path.join(full, "r.json"), os.path.join(ok, "out.npy")
    contract(c, f"np{P} run --report on a full disk -> 1, --out not renamed into place",
             ["run", "--n", 1000, "--heads", 2, "--out", out2, "--report", rep, "--no-progress"],
             1, [rep], ENOSPC, [rep, out2], [full, ok])
    g2 = [os.path.join(ok, f"g{t}.npy") for t in "qkv"]
    contract(c, f"np{P} grad --report on a full disk -> 1, no gradient renamed into place",
             ["grad", "--n", 1000, "--heads", 2, "--grad-q", g2[0], "--grad-k", g2[1],
              "--grad-v", g2[2], "--report", rep, "--no-progress"],
             1, [rep], ENOSPC, [rep] + g2, [full, ok])


def rank_pids(marker, rank=None):
    """Pids of the linattn processes whose command line contains marker (and, if given,
    whose environment says OMPI_COMM_WORLD_RANK=rank)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or b"linattn" not in os.path.basename(cmd[0]) or marker.encode() not in cmd:
                continue
            if rank is not None:
                with open(f"/proc/{d}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                if f"OMPI_COMM_WORLD_RANK={rank}".encode() not in env:
                    continue
            pids.append(int(d))
        except OSError:
            continue
    return pids


def case_sigkill(c):
    P = c.ranks()
    if P < 2 or not os.path.basename(c.launcher[0] if c.launcher else "").startswith(("mpiexec", "mpirun")):
        raise Skip("needs mpiexec/mpirun with at least 2 ranks (the killed rank is found locally)")
    d = c.folder("kill", tmpfs="size=256m")
    out = os.path.join(d, "out.npy")
    args = ["run", "--n", 262144, "--heads", 1, "--dk", 16, "--dv", 16, "--feature-map",
            "favor+", "--features", 256, "--block-tokens", 4096, "--out", out, "--no-progress"]
    t0 = time.time()
    p = c.start(*args)
    killed, probs = None, []
    while p.poll() is None and time.time() - t0 < TIMEOUT:
        if temporaries(d):
            pids = rank_pids(out, rank=P - 1)
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed = pids[0]
                break
        time.sleep(0.005)
    rc, err, hung = c.finish(p)
    secs = time.time() - t0
    if killed is None:
        probs.append("the job ended before a rank could be killed" if not hung else "no temporary appeared")
    if hung:
        probs.append(f"hung: killed after {TIMEOUT} s")
    if rc == 0:
        probs.append("exit 0 after a rank was killed")
    if os.path.lexists(out):
        probs.append("output under the final name")
    left = temporaries(d)
    c.case(not probs, f"np{P} SIGKILL of rank {P - 1} mid-run -> the job ends, exit {rc}, no output"
           f" ({len(left)} temporary left)", probs, secs, c.cmd(*args))
    # The same command again: succeeds, and no temporary of the killed job remains.
    rc, err, hung, secs = c.run(*args)
    probs = []
    if rc != 0 or hung:
        probs.append(f"exit {rc}{' (hung)' if hung else ''}: {err.strip()[-300:]}")
    else:
        a = np.load(out, mmap_mode="r")
        if a.shape != (262144, 1, 16):
            probs.append(f"output shape {a.shape}")
    if temporaries(d):
        probs.append(f"temporaries left: {[os.path.basename(t) for t in temporaries(d)]}")
    c.case(not probs, f"np{P} the next run of the same output -> 0, the killed job's temporary removed",
           probs, secs, c.cmd(*args))


def write_inputs(d, N, H, D, rows_q=None):
    """q, k, v [N, H, D] float32; q's payload cut to rows_q rows (its header still says N)."""
    rng = np.random.default_rng(1)
    paths = []
    for t in "qkv":
        a = rng.standard_normal((N, H, D)).astype(np.float32)
        pth = os.path.join(d, f"{t}.npy")
        np.save(pth, a)
        if t == "q" and rows_q is not None:
            hdr = os.path.getsize(pth) - a.nbytes
            os.truncate(pth, hdr + rows_q * H * D * 4)
        paths.append(pth)
    return paths


def case_input(c):
    P = c.ranks()
    d = c.folder("input", tmpfs="size=128m")
    o = c.folder("input_out")
    out = os.path.join(o, "out.npy")
    # The header claims 4096 rows, the payload holds 3000.
    q, k, v = write_inputs(d, 4096, 2, 16, rows_q=3000)
    contract(c, f"np{P} --q with a truncated payload -> 2", ["run", "--q", q, "--k", k, "--v", v,
             "--out", out, "--no-progress"], 2, [q], "truncated", [out], [o, d])
    # A file that shrinks after rank 0 checked its header: stop every rank once all have the
    # keys open (the queries' header was checked before), cut q to half, continue.
    N = 131072
    q, k, v = write_inputs(d, N, 1, 16)
    hdr = os.path.getsize(q) - N * 16 * 4
    args = ["run", "--q", q, "--k", k, "--v", v, "--feature-map", "favor+", "--features", 256,
            "--block-tokens", 1024, "--out", out, "--no-progress"]
    t0 = time.time()
    p = c.start(*args)
    cut, probs = False, []
    while p.poll() is None and time.time() - t0 < TIMEOUT:
        pids = rank_pids(q)
        if len(pids) == P and all(has_open(pid, k) for pid in pids):
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            os.truncate(q, hdr + (N // 2) * 16 * 4)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            cut = True
            break
        time.sleep(0.001)
    rc, err, hung = c.finish(p)
    probs = problems(rc, err, hung, 2, [q], "truncated", [out], [o])
    if not cut:
        probs.insert(0, "the job ended before the input could be cut")
    ok = cut and not [x for x in probs if not x.startswith("[")]
    c.case(ok, f"np{P} --q shrinks to half after its header was checked -> 2", probs,
           time.time() - t0, c.cmd(*args))


def has_open(pid, path):
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def case_outdir(c):
    P = c.ranks()
    base = c.folder("outdir")
    ro = c.folder("outdir_ro", tmpfs="ro,size=64k")
    missing = os.path.join(base, "no", "such")
    for where, reason in ((missing, "No such file or directory"), (ro, "Read-only file system")):
        kind = "missing" if where == missing else "read-only"
        out, rep = os.path.join(where, "out.npy"), os.path.join(where, "r.json")
        g = os.path.join(where, "gv.npy")
        # a run long enough that computing before the check would be visible
        common = ["--n", 65536, "--heads", 2, "--no-progress"]
        contract(c, f"np{P} run --out in a {kind} folder -> 2, before any compute",
                 ["run", *common, "--out", out], 2, [out], reason, [out], [base, where],
                 computed_ok=False)
        contract(c, f"np{P} run --report in a {kind} folder -> 2, before any compute",
                 ["run", *common, "--report", rep], 2, [rep], reason, [rep], [base, where],
                 computed_ok=False)
        contract(c, f"np{P} grad --grad-v in a {kind} folder -> 2, before any compute",
                 ["grad", "--n", 4096, "--heads", 2, "--no-progress", "--grad-v", g], 2, [g],
                 reason, [g], [base, where], computed_ok=False)


CASES = {"diskfull": case_diskfull, "sigkill": case_sigkill, "input": case_input,
         "outdir": case_outdir}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--linattn", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--launcher", default="")
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    a = ap.parse_args()
    c = Ctx(a)
    os.makedirs(c.workdir, exist_ok=True)
    subreaper()
    try:
        CASES[a.case](c)
    except Skip as e:
        print(f"SKIP  {a.case}: {e}")
        return 77
    finally:
        c.cleanup()
    print(f"{a.case}: {c.failures} failed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
