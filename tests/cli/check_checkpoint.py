#!/usr/bin/env python3
"""Checkpoint and resume of `linattn run` (docs/design.md §6 "Checkpoints", docs/cli.md).

Every case compares files written by the engine with each other (bitwise) or, across rank
counts, within the float32 rounding of a different bracketing of the scan; no engine code is
shared. Cases:
  1. stop on SIGUSR1 (raised through the real handler by the LINATTN_TEST_SIGNAL_AFTER hook) in
     pass 1 and in pass 2, causal and bidirectional, with segments: exit 75, no file under the
     final name, then a resume with the same command: exit 0 and the output bitwise equal to an
     uninterrupted run; the report's "checkpoint" says where it resumed; the folder is emptied.
  2. an external SIGTERM to one rank of a running job: the ranks agree, exit 75, resume bitwise.
  3. resume on other rank counts (4 -> 1, 2, 3; 2 -> 4): equal within 2e-6 relative.
  4. SIGKILL of every rank (the whole session) at random moments, resumed until done: never a file under the final
     name before the end, every ckpt.N a whole checkpoint, the output bitwise equal.
  5. damage: a flipped byte in the newest checkpoint -> a warning and the one before it, bitwise;
     both damaged -> exit 2 naming both; other options -> exit 2 naming the option; checkpoints
     of another synthetic generator version (manifests forged, checksums valid) -> exit 2 naming
     it; the partial output missing -> exit 2.
  6. refusals: grad --checkpoint, --window, --reproducible with --checkpoint: exit 2.
  Case 1 also runs with --decay (per-head gammas, favor+, segments), with --gates synthetic
  (on top of --decay) and with per-feature gates from a file [N, H, r] (row-form lane
  records), stopped in each pass; case 3 resumes per-feature gates on another rank count.
Usage: check_checkpoint.py LINATTN_BINARY
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

BIN = os.path.abspath(sys.argv[1])
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_orte_execute_quiet="1", OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
W = tempfile.mkdtemp()
fails = 0


def ok(cond, what):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails += 1
    return cond


def run(np_, args, env=None, timeout=300):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", BIN, "run",
           "--no-progress"] + args
    p = subprocess.run(cmd, env=dict(ENV, **(env or {})), capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stderr


def same(a, b):
    x, y = np.load(a), np.load(b)
    return x.shape == y.shape and x.tobytes() == y.tobytes()


def rel(a, b):
    x, y = np.load(a).astype(np.float64), np.load(b).astype(np.float64)
    return float(np.max(np.abs(x - y)) / np.max(np.abs(y)))


BASE = ["--n", "6000", "--heads", "3", "--dk", "16", "--dv", "8", "--seed", "5",
        "--block-tokens", "256"]


def crc64_xz(data):
    """CRC-64/XZ (ECMA-182, reflected, init and xorout all ones), bit by bit."""
    c = 0xFFFFFFFFFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xC96C5795D7870F42 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFFFFFFFFFF


assert crc64_xz(b"123456789") == 0x995DC9BBDF1939FA


def ckpts(d):
    return sorted(e for e in os.listdir(d) if e.startswith("ckpt.")) if os.path.isdir(d) else []


def stop_resume(tag, np_, extra, after, want_pass, base=BASE):
    """Stop at poll `after` by SIGUSR1, resume, compare with an uninterrupted run."""
    ref, out, ck, rep = (f"{W}/{tag}_ref.npy", f"{W}/{tag}.npy", f"{W}/{tag}_ck",
                         f"{W}/{tag}.json")
    rc, err = run(np_, base + extra + ["--out", ref])
    if not ok(rc == 0, f"{tag}: uninterrupted run exit {rc} {err.strip()[-200:]}"):
        return
    args = base + extra + ["--out", out, "--checkpoint", ck, "--report", rep]
    rc, err = run(np_, args, env={"LINATTN_TEST_SIGNAL_AFTER": str(after)})
    ok(rc == 75 and not os.path.exists(out) and os.path.exists(out + ".partial")
       and "linattn: error" not in err and len(ckpts(ck)) >= 1,
       f"{tag}: SIGUSR1 at poll {after}: exit {rc}, final name absent, partial kept, "
       f"{ckpts(ck)} ({err.strip().splitlines()[-1] if err.strip() else ''})")
    rc, err = run(np_, args)
    if not ok(rc == 0 and os.path.exists(out), f"{tag}: resume exit {rc} {err.strip()[-300:]}"):
        return
    r = json.load(open(rep))["checkpoint"]
    ok(same(out, ref), f"{tag}: resumed output bitwise equal to the uninterrupted run")
    ok(r["resumed_pass"] == want_pass and (r["resumed_from_token"] > 0) == (want_pass == 2)
       and r["resumed_ranks"] == np_,
       f"{tag}: report checkpoint {r} (want pass {want_pass})")
    ok(not os.path.exists(ck) and not os.path.exists(out + ".partial"),
       f"{tag}: the checkpoint folder and the partial output are gone after success")


# 1. SIGUSR1 in each pass. 6000 tokens on 2 ranks, blocks of 256: 12 polls a pass per rank.
stop_resume("causal_p1", 2, [], 3, 1)
stop_resume("causal_p2", 2, [], 15, 2)
stop_resume("bidir_p1", 2, ["--mode", "bidirectional"], 4, 1)
stop_resume("bidir_p2", 2, ["--mode", "bidirectional"], 16, 2)
stop_resume("causal_1rank", 1, ["--feature-map", "favor+", "--features", "32"], 7, 2)
segs = f"{W}/segs.npy"
np.save(segs, np.array([0, 700, 2999, 3000, 4100, 6000], dtype=np.int64))
stop_resume("causal_segments", 3, ["--segments", segs], 12, 2)
# decay (docs/design.md §1.2): the lanes' cumulative log-decay is set from their lengths, so a
# stop in either pass resumes bitwise
dec = ["--decay", "0.99,0.9,0.5", "--feature-map", "favor+", "--features", "16"]
stop_resume("decay_p1", 2, dec, 3, 1)
stop_resume("decay_segments_p2", 3, dec + ["--segments", segs], 12, 2)
# gates (§1.2 "Gates"): each lane's a, the sum of its gates so far, is in the checkpoint
gat = ["--gates", "synthetic", "--decay", "0.99,0.9,0.5", "--feature-map", "favor+", "--features", "16"]
stop_resume("gates_p1", 2, gat, 3, 1)
stop_resume("gates_segments_p2", 3, gat + ["--segments", segs], 12, 2)
# per-feature gates [N, H, r] (§1.2 "Per-feature gates"): a lane's record holds its summary in
# row form, m, f and a per head and feature; files, since they come from a file only
frng = np.random.default_rng(7)
for nm, d in (("q", 16), ("k", 16), ("v", 8)):
    np.save(f"{W}/pf_{nm}.npy", (0.7 * frng.standard_normal((6000, 3, d))).astype(np.float32))
gfe = -np.log1p(np.exp(-(2.0 + frng.standard_normal((6000, 3, 16)))))
gfe[::500, :, ::3] -= 20.0
np.save(f"{W}/pf_g.npy", gfe)
pfb = ["--q", f"{W}/pf_q.npy", "--k", f"{W}/pf_k.npy", "--v", f"{W}/pf_v.npy",
       "--gates", f"{W}/pf_g.npy", "--block-tokens", "256"]
stop_resume("gates_feature_p1", 2, ["--decay", "0.99,0.9,0.5"], 3, 1, base=pfb)
stop_resume("gates_feature_segments_p2", 3, ["--segments", segs], 12, 2, base=pfb)

# 2. an external SIGTERM to one rank of a running job
out, ck, ref = f"{W}/term.npy", f"{W}/term_ck", f"{W}/term_ref.npy"
big = ["--n", "400000", "--heads", "2", "--dk", "16", "--dv", "16", "--block-tokens", "2048",
       "--seed", "9"]
# long enough (seconds) that the signal, sent once the first checkpoint exists, comes mid-run
longer = ["--n", "3000000"] + big[2:]
rc, _ = run(2, longer + ["--out", ref])
ok(rc == 0, f"SIGTERM: uninterrupted run exit {rc}")
args = longer + ["--out", out, "--checkpoint", ck, "--checkpoint-every", "0.05"]
p = subprocess.Popen(["mpirun", "-np", "2", "--bind-to", "none", BIN, "run", "--no-progress"] + args,
                     env=ENV, stderr=subprocess.PIPE, text=True)
t0 = time.time()
while not ckpts(ck) and p.poll() is None and time.time() - t0 < 120:
    time.sleep(0.02)
pids = subprocess.run(["pgrep", "-f", f"checkpoint {ck}"], capture_output=True, text=True).stdout.split()
pids = [int(x) for x in pids if int(x) != p.pid]
def exe(q):
    try:
        return os.path.realpath(f"/proc/{q}/exe")
    except OSError:
        return ""


ranks = [q for q in pids if exe(q) == os.path.realpath(BIN)]
if ranks:
    os.kill(ranks[-1], signal.SIGTERM)
err = p.communicate(timeout=300)[1]
if ok(p.returncode == 75 and len(ranks) == 2 and not os.path.exists(out),
      f"SIGTERM to one of {len(ranks)} ranks: exit {p.returncode}, no final output"):
    rc, err = run(2, args)
    ok(rc == 0 and same(out, ref), f"SIGTERM: resume exit {rc}, bitwise equal")

# 3. other rank counts
# (ranks, resume ranks, poll of the stop): 6000 tokens on src ranks make ceil(6000/src/256)
# blocks a pass, so poll 8 of 4 ranks and 14 of 2 are in pass 2, poll 3 of 2 in pass 1 (whose
# resume on 4 ranks leaves ranks 0 and 2 without lanes at the scan)
for src, dst, after in [(4, 1, 8), (4, 2, 8), (4, 3, 8), (2, 4, 14), (2, 4, 3)]:
    tag = f"ranks_{src}to{dst}_at{after}"
    ref, out, ck = f"{W}/{tag}_ref.npy", f"{W}/{tag}.npy", f"{W}/{tag}_ck"
    rc, _ = run(src, BASE + ["--out", ref])
    args = BASE + ["--out", out, "--checkpoint", ck]
    rc1, _ = run(src, args, env={"LINATTN_TEST_SIGNAL_AFTER": str(after)})
    rc2, err = run(dst, args)
    good = rc == 0 and rc1 == 75 and rc2 == 0
    e = rel(out, ref) if good else float("nan")
    ok(good and e < 2e-6, f"{tag}: exits {rc}/{rc1}/{rc2}, max rel diff {e:.2e} (< 2e-6) "
       f"{err.strip()[-200:] if not good else ''}")

# per-feature gates from 4 ranks to 2, stopped in pass 2
tag = "gates_feature_4to2"
ref, out, ck = f"{W}/{tag}_ref.npy", f"{W}/{tag}.npy", f"{W}/{tag}_ck"
rc, _ = run(4, pfb + ["--out", ref])
args = pfb + ["--out", out, "--checkpoint", ck]
rc1, _ = run(4, args, env={"LINATTN_TEST_SIGNAL_AFTER": "8"})
rc2, err = run(2, args)
good = rc == 0 and rc1 == 75 and rc2 == 0
e = rel(out, ref) if good else float("nan")
ok(good and e < 2e-6, f"{tag}: exits {rc}/{rc1}/{rc2}, max rel diff {e:.2e} (< 2e-6) "
   f"{err.strip()[-200:] if not good else ''}")

# 4. SIGKILL at random moments: up to six kills (the first moments of a start included), then a
# start left to finish. A kill can land after the run has renamed its output into place (and
# removed its checkpoints) but before the processes exit: the run is then done, its output
# must be complete, and a rerun refuses to overwrite it (exit 2, "exists"), which is not
# what this test asks of the rerun. Seen once in CI (2026-12-03: kill 2 of seed 1, 0.87 s
# into a resumed start) and reproduced with other seeds; so the sequence ends there.
random.seed(1)
out, ck, ref = f"{W}/kill.npy", f"{W}/kill_ck", f"{W}/kill_ref.npy"
run(2, longer + ["--out", ref])
args = longer + ["--out", out, "--checkpoint", ck, "--checkpoint-every", "0.05"]
kills = 0
done_at_kill = False
broken = []
for attempt in range(7):
    p = subprocess.Popen(["mpirun", "-np", "2", "--bind-to", "none", BIN, "run", "--no-progress"] + args,
                         env=ENV, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=random.uniform(0.2, 2.0) if attempt < 6 else 300)
    except subprocess.TimeoutExpired:
        # Open MPI puts each rank in its own process group, so kill the whole session (mpirun
        # leads it) and wait until no process of it is left, as when a node dies
        subprocess.run(["pkill", "-KILL", "-s", str(p.pid)])
        p.wait()
        for _ in range(200):
            if subprocess.run(["pkill", "-KILL", "-s", str(p.pid)]).returncode != 0:
                break
            time.sleep(0.05)
        kills += 1
        for c in ckpts(ck):
            if not os.path.exists(f"{ck}/{c}/manifest"):
                broken.append(c)
        if os.path.exists(out):  # visible only once complete: compared with ref below
            done_at_kill = True
            break
        continue
    break
ended = "a kill after the output was complete" if done_at_kill else f"exit {p.returncode}"
ok((done_at_kill or p.returncode == 0) and kills >= 1 and not broken and same(out, ref),
   f"SIGKILL {kills} times at random moments, then done ({ended}): the output visible only "
   f"when complete, incomplete checkpoints {broken}, bitwise equal")

# 5. damage and mismatches
out, ck, ref = f"{W}/dmg.npy", f"{W}/dmg_ck", f"{W}/dmg_ref.npy"
run(2, BASE + ["--out", ref])
args = BASE + ["--out", out, "--checkpoint", ck, "--checkpoint-every", "1e-9"]
rc, _ = run(2, args, env={"LINATTN_TEST_SIGNAL_AFTER": "18"})
names = ckpts(ck)
if ok(rc == 75 and len(names) == 2, f"damage: stopped with two checkpoints kept: {names}"):
    newest = max(names, key=lambda s: int(s.split(".")[1]))
    oldest = min(names, key=lambda s: int(s.split(".")[1]))
    keep = f"{W}/dmg_keep"
    shutil.copytree(ck, keep)
    shutil.copy(out + ".partial", f"{W}/dmg_partial")
    # other options: refused, naming the option
    other = [("6" if a == "5" else a) for a in BASE]  # --seed 6
    rc, err = run(2, other + ["--out", out, "--checkpoint", ck])
    ok(rc == 2 and "linattn: error: --checkpoint:" in err and "--seed is '5'" in err,
       f"other options: exit {rc}: {err.strip()[-220:]}")
    # a checkpoint of another synthetic generator (LA_SYNTH_VERSION): the same checkpoints with
    # the version line of their manifests changed and the manifest checksum (CRC-64/XZ, computed
    # here) made valid again, so only the fingerprint can refuse them
    for n in names:
        mp = f"{ck}/{n}/manifest"
        body = open(mp, "rb").read()
        head = body[:body.rindex(b"end ")]
        vers = re.search(rb"input synthetic generator version (\d+)\n", head)
        if not ok(vers is not None, f"{n}/manifest names the generator version"):
            continue
        forged = head.replace(vers.group(0), b"input synthetic generator version %d\n"
                              % (int(vers.group(1)) + 1))
        open(mp, "wb").write(forged + b"end %016x\n" % crc64_xz(forged))
    rc, err = run(2, args)
    lines = [l for l in err.splitlines() if l.startswith("linattn: error:")]
    ok(rc == 2 and len(lines) == 1 and "generator version" in lines[0] and not os.path.exists(out),
       f"another generator version: exit {rc}: {lines[0] if lines else err.strip()[-200:]}")
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(keep, ck)
    shutil.copy(f"{W}/dmg_partial", out + ".partial")
    with open(f"{ck}/{newest}/state.bin", "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 1]))
    rc, err = run(2, args)
    ok(rc == 0 and "warning" in err and newest in err and same(out, ref),
       f"newest damaged: exit {rc}, warning names {newest}, resumed from {oldest}, bitwise")
    # both damaged
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(keep, ck)
    shutil.copy(f"{W}/dmg_partial", out + ".partial")
    if os.path.exists(out):
        os.remove(out)
    for n in names:
        with open(f"{ck}/{n}/manifest", "r+b") as f:
            f.seek(30)
            f.write(b"X")
    rc, err = run(2, args)
    ok(rc == 2 and "no valid checkpoint" in err and all(n in err for n in names)
       and not os.path.exists(out), f"both damaged: exit {rc}: {err.strip().splitlines()[-1]}")
    # partial output missing
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(keep, ck)
    os.remove(out + ".partial")
    rc, err = run(2, args)
    ok(rc == 2 and "missing" in err, f"partial output missing: exit {rc}: {err.strip()[-160:]}")

# 6. refusals
for tag, cmd in [("grad", ["grad", "--n", "100", "--checkpoint", f"{W}/g"]),
                 ("window", ["run", "--n", "1000", "--window", "64", "--checkpoint", f"{W}/w"]),
                 ("reproducible", ["run", "--n", "1000", "--reproducible", "--checkpoint", f"{W}/r"])]:
    p = subprocess.run([BIN] + cmd, env=ENV, capture_output=True, text=True)
    lines = [l for l in p.stderr.splitlines() if l.startswith("linattn: error:")]
    ok(p.returncode == 2 and len(lines) == 1 and "checkpoint" in lines[0],
       f"{tag} with --checkpoint: exit {p.returncode}: {lines[0] if lines else p.stderr.strip()}")

shutil.rmtree(W, ignore_errors=True)
print(f"{'FAIL' if fails else 'ok'}: check_checkpoint: {fails} failures")
sys.exit(1 if fails else 0)
