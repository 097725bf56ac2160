#!/usr/bin/python3
"""--reproducible with a causal window on ranks that own no rows or only a partial block.

Ranks own whole blocks of R = 64 C tokens (docs/design.md §4.7), so a short sequence leaves
the ranks past its last block with nothing. `run --window W --reproducible` used to hang there:
such a rank waited for the W - 1 key rows before its (empty) rows, which no rank sends.
Claims, each checked here, with every run under its own time limit (a hang fails the case):
- the reported case (synthetic N = 300, H = 2, dk = dv = 8, W = 37, default chunk: one block,
  so every rank but rank 0 owns nothing) completes on 1, 2, 3 and 7 ranks with byte-identical
  outputs, equal to the default mode's within float32 rounding;
- with --chunk 4 (R = 256) and 600 tokens (3 blocks, the last one partial), windows of 1, 37
  and 300, with and without packed segments: byte-identical on 1, 3, 5 and 7 ranks (5 and 7
  leave ranks empty), equal to the float64 quadratic reference;
- 5 tokens in float64 with W = 2 and segments on 1 and 7 ranks: the same;
- bidirectional with segments (the other in-memory path of the mode) on 7 ranks of 3 blocks.

Usage: check_repro_empty.py --linattn build/linattn --workdir DIR --launcher-template "mpiexec -n {P}"
"""
import hashlib
import os
import signal
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402
import reference as ref  # noqa: E402
from check_masks import reference  # noqa: E402  (the masked quadratic float64 reference)

TOL = {"f64": 1e-12, "f32": 1e-5}
LIMIT = 45  # seconds per launch: these runs take ~3 s; a hang is stopped and fails its case


def kill_session(sid):
    """SIGKILL what is left of a launch: every process of its session (its ranks)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # the session id (field 6 of stat)
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def launch(binary, workdir, launcher, args):
    """Run one launch in a session of its own; on the time limit, SIGTERM the launcher (mpirun
    then stops its ranks), and SIGKILL whatever of the session is left. Returns (rc, stderr);
    rc is "timeout" for a hang."""
    cmd = launcher.split() + [binary, "run"] + [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    p = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        _, err = p.communicate(timeout=LIMIT)
        return p.returncode, common.strip_launcher_banner(err)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        kill_session(p.pid)
        p.kill()
        p.communicate()
        return "timeout", f"no exit within {LIMIT} s (hang): {' '.join(cmd)}"


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def main():
    a = common.parse_args(__doc__, lambda p: p.add_argument(
        "--launcher-template", required=True, help="launcher with {P} for the rank count"))
    wd = a.workdir
    npass = nfail = 0

    def report(ok, name, detail=""):
        nonlocal npass, nfail
        npass += ok
        nfail += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)

    def runs(name, ranks, args, out):
        """args on every rank count in ranks with --reproducible: byte-identical outputs?
        Returns the first output (float64) or None."""
        digests, bad = {}, ""
        for P in ranks:
            path = os.path.join(wd, f"{out}_np{P}.npy")
            common.rm(path)
            rc, err = launch(a.linattn, wd, a.launcher_template.replace("{P}", str(P)),
                             args + ["--reproducible", "--out", path, "--force", "--no-progress"])
            if rc != 0:
                bad = f"P={P}: rc {rc}: {common.first_error(err) or err.strip()[-300:]}"
                break
            digests[P] = digest(path)
        if bad:
            report(False, f"{name}: every run completes", bad)
            return None
        same = len(set(digests.values())) == 1
        report(same, f"{name}: bitwise identical on ranks {list(ranks)}", "" if same else str(digests))
        return np.load(os.path.join(wd, f"{out}_np{ranks[0]}.npy")).astype(np.float64)

    # the reported case: synthetic, default chunk, so one block and ranks 1.. own nothing
    syn = ["--n", 300, "--heads", 2, "--dk", 8, "--dv", 8, "--window", 37]
    got = runs("synthetic N=300 W=37 default chunk", (1, 2, 3, 7), syn, "syn")
    if got is not None:
        path = os.path.join(wd, "syn_default.npy")
        common.rm(path)
        rc, err = launch(a.linattn, wd, a.launcher_template.replace("{P}", "1"),
                         syn + ["--out", path, "--force", "--no-progress"])
        e = ref.rel_err(got, np.load(path)) if rc == 0 else float("inf")
        report(e <= TOL["f32"], "synthetic N=300 W=37: equals the default mode's output",
               f"err {e:.2e}" if rc == 0 else f"rc {rc}: {common.first_error(err)}")

    rng = np.random.default_rng(23)

    def case(name, n, ranks, dtype, window, seg=None, mode="causal", mp="elu1"):
        H, dk, dv = 2, 6, 5
        q, k, v = rng.normal(size=(n, H, dk)), rng.normal(size=(n, H, dk)), rng.normal(size=(n, H, dv))
        xs = {nm: common.save(os.path.join(wd, f"{nm}.npy"), x, dtype) for nm, x in (("q", q), ("k", k), ("v", v))}
        args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--chunk", 4, "--mode", mode,
                "--feature-map", mp]
        if window:
            args += ["--window", window]
        if seg is not None:
            np.save(os.path.join(wd, "seg.npy"), np.asarray(seg, dtype="<i8"))
            args += ["--segments", "seg.npy"]
        got = runs(name, ranks, args, "o")
        if got is None:
            return
        want = reference(mp, *(xs[nm].astype(np.float64) for nm in "qkv"), None, mode,
                         np.asarray(seg if seg is not None else [0, n]), window)
        e = ref.rel_err(got, want)
        report(e <= TOL[dtype], f"{name}: equals the float64 quadratic reference", f"err {e:.2e}")

    # --chunk 4: R = 256; 600 tokens are 3 blocks, the last partial; 5 and 7 ranks leave some empty
    seg600 = [0, 1, 100, 255, 256, 257, 300, 511, 512, 590, 600]
    for w in (1, 37, 300):
        case(f"600 tokens W={w} f32", 600, (1, 3, 5, 7), "f32", w)
    case("600 tokens W=37 segments f64", 600, (1, 3, 7), "f64", 37, seg=seg600)
    case("5 tokens W=2 segments f64", 5, (1, 7), "f64", 2, seg=[0, 2, 5])
    case("600 tokens bidirectional segments f64", 600, (1, 7), "f64", 0, seg=seg600,
         mode="bidirectional")
    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
