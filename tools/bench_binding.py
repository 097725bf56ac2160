#!/usr/bin/python3
"""Training through the Python binding: forward plus backward of one attention call (B = 1,
causal elu1, normalized, float32), timed against the engine called from C (build/fwdbwd,
tools/fwdbwd.c) and against the strongest PyTorch formulations of the same operator with
autograd. The Python side of jobs/bench_binding.sh (docs/performance.md "Training through the
Python binding"). A benchmark, not a test: nothing is asserted but the agreement of the
operators (exit 1 when a peer computes something else).

Implementations (the `impl` column):
  binding           out = linattn.torch.attention(q, k, v, threads=T); out.backward(G), with
                    q, k, v [1, L, H, d] leaves that require grad; the clock is
                    time.perf_counter around the two calls (fwd_s: the first, bwd_s: the
                    second). The gradients are dropped (q.grad = None) before the clock.
  binding_replay    the same with tape=False: the backward replays the forward instead of
                    reading the forward's tape (docs/design.md §4.4 "Tape")
  binding_nocache   the same with the binding's cache of large outputs (and their huge-page
                    advice) turned off (linattn.torch._POOL_MIN raised during the two calls):
                    plain torch.empty outputs; what the cache gains, in the same run
                    (docs/performance.md).
  c_fresh           fwdbwd --modes fresh (with the tape, as the binding): the binding's pattern from C (feature map, engine
                    and the four output buffers made inside the timed region on every call)
  c_reused          fwdbwd --modes reused: engine and buffers made once, outside the clock
  c_checked         the same with the engine checking every row of q, k, v and G for NaN and
                    Inf as it reads them (la_engine_set_check_finite), as the binding's does:
                    the binding's work called from C
  torch_vec_C<C>    the vectorized chunk form (tests/bench/peers.py chunk_vec): chunks of
                    C rows, every chunk's phi(K)^T [V | 1] at once, an exclusive cumsum over
                    the chunks for the states, then phi(Q) S + tril(phi(Q) phi(K)^T) [V | 1];
                    out = num / den. C in --chunks (32, 64, 128); the table keeps the best.
  torch_loop_C64    the chunk loop (tests/bench/peers.py chunk_loop): per chunk of 64 rows
                    O = phi(Q) S + tril(phi(Q) phi(K)^T) [V | 1], then S += phi(K)^T [V | 1];
                    the chunks come from torch.split (one backward node for all of them;
                    slicing with [a:b] instead makes the backward write a zero-filled [L, d]
                    gradient per chunk, O(L^2)).
The peers get their native layout [B, H, L, d] (made before the clock), the ones column of V
carries the denominator through the same products, and every product batches the heads.
Every implementation sees the same inputs: fwdbwd's synthetic rows (la_synth_rows; Q, K, V,
G = tensors 0-3 of --seed), dumped to .npy once per length.

Timing alternates: each round runs fwdbwd (one warm-up call and one timed call of each mode,
a new process), then one call of the binding and of every peer in this process, in an order
rotated every round (the first call after fwdbwd's process finds data and threads cold; a
fixed order gave that cost to one implementation); best of the rounds: --rounds of them, at
least --short-rounds at lengths up to --loop-full-max. The chunk loop at lengths above
--loop-full-max runs in one round only (its time is one call, not a best of several) and is skipped where its previous length's call, scaled
linearly, would exceed --loop-cap-s.

Output: --csv (columns impl,L,H,d,threads,fwd_s,bwd_s,total_s,tokens_per_s,best_of,cpu,
blas_core) and a markdown table on stdout; progress on stderr.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import linattn
import linattn.torch as lt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bench"))
import peers  # noqa: E402  (the peers' formulations and the machine's names, in one place)
from peers import blas_core, cpu_isa, cpu_model  # noqa: E402


def log(*a):
    print("bench_binding:", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the binding without its cache
class NoCache:
    """linattn.torch takes outputs of 1 MiB or more from its cache of blocks
    (python/capi/pool.c); not while inside: plain torch.empty."""

    def __enter__(self):
        self.saved = linattn.torch._POOL_MIN
        linattn.torch._POOL_MIN = 1 << 62

    def __exit__(self, *exc):
        linattn.torch._POOL_MIN = self.saved


# ---------------------------------------------------------------- the peers' layout
def to_peer(x):   # [B, L, H, d] -> [B, H, L, d]
    return x.detach().permute(0, 2, 1, 3).contiguous()


def from_peer(x):
    return x.detach().permute(0, 2, 1, 3).contiguous()


# ---------------------------------------------------------------- helpers
def run_fwdbwd(exe, args):
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench_binding: fwdbwd failed (%d): %s" % (r.returncode, r.stderr.strip()))
    rows = {}
    for line in r.stdout.splitlines():
        if line.startswith("fwdbwd "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            rows[kv["mode"]] = kv
    return rows


def load(dirname, name):
    return torch.from_numpy(np.load(os.path.join(dirname, name + ".npy"))).unsqueeze(0)


def row_rel_err(x, ref):
    """max over rows (token, head) of max_j |x - ref| / max_j |ref| (float64)."""
    x, ref = x.double(), ref.double()
    num = (x - ref).abs().amax(-1)
    den = ref.abs().amax(-1).clamp_min(1e-300)
    return float((num / den).max())


def rel_err(x, ref):
    """max |x - ref| / max |ref| over the whole tensor (for gradients: some of their rows are
    zero in exact arithmetic, dq of token 0 for one, so a per-row ratio measures rounding
    noise against nothing)."""
    x, ref = x.double(), ref.double()
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


class Timer:
    """best fwd, best bwd, best total (of the per-call sums), calls."""

    def __init__(self):
        self.f = self.b = self.t = float("inf")
        self.n = 0

    def add(self, f, b):
        self.f, self.b, self.t = min(self.f, f), min(self.b, b), min(self.t, f + b)
        self.n += 1


def call_once(fn, leaves, G):
    for x in leaves:
        x.grad = None
    t0 = time.perf_counter()
    out = fn(*leaves)
    t1 = time.perf_counter()
    out.backward(G)
    t2 = time.perf_counter()
    del out
    return t1 - t0, t2 - t1


def call_nocache(fn, leaves, G):
    with NoCache():
        return call_once(fn, leaves, G)


# ---------------------------------------------------------------- the agreement check
def check(a, work):
    L, H, d, T = a.check_L, a.heads, a.d, a.threads
    dd = os.path.join(work, "check")
    os.makedirs(dd, exist_ok=True)
    run_fwdbwd(a.fwdbwd, ["--L", L, "--heads", H, "--d", d, "--threads", T, "--seed", a.seed,
                          "--repeat", 0, "--dump", dd, "--dump-results"])
    q, k, v, g = (load(dd, n) for n in ("q", "k", "v", "g"))
    c = {n: load(dd, n) for n in ("out", "dq", "dk", "dv")}

    def grads(fn, leaves, G):
        leaves = [x.detach().clone().requires_grad_() for x in leaves]
        out = fn(*leaves)
        out.backward(G)
        return out.detach(), [x.grad for x in leaves]

    bind = lambda x, y, z: lt.attention(x, y, z, threads=T)
    o32, g32 = grads(bind, (q, k, v), g)
    o64, g64 = grads(bind, (q.double(), k.double(), v.double()), g.double())
    res = []
    res.append(("binding f32 vs fwdbwd (C)", max(
        row_rel_err(o32, c["out"]), *(rel_err(x, c[n]) for x, n in zip(g32, ("dq", "dk", "dv")))),
        None))
    res.append(("binding f32 vs binding f64 (out)", row_rel_err(o32, o64), None))
    res.append(("binding f32 vs binding f64 (grads)", max(rel_err(x, y) for x, y in zip(g32, g64)),
                None))
    cands = [("torch_vec_C%d" % C, (lambda C: lambda x, y, z: peers.chunk_vec(x, y, z, C))(C))
             for C in a.chunks] + [("torch_loop_C64", lambda x, y, z: peers.chunk_loop(x, y, z, 64))]
    worst = 0.0
    for name, fn in cands:
        po, pg = grads(fn, [to_peer(t) for t in (q, k, v)], to_peer(g))
        eo = row_rel_err(from_peer(po), o32)
        eg = max(rel_err(from_peer(x), y) for x, y in zip(pg, g32))
        e64 = row_rel_err(from_peer(po), o64)
        res.append(("%s vs binding f32 (out)" % name, eo, a.tol_out))
        res.append(("%s vs binding f32 (grads)" % name, eg, a.tol_grad))
        res.append(("%s vs binding f64 (out)" % name, e64, None))
        worst = max(worst, eo / a.tol_out, eg / a.tol_grad)
    lines = ["Agreement at L = %d, H = %d, d = %d (outputs: max over rows of max|x - y| / max|y|; "
             "gradients: max|x - y| / max|y| of each of dq, dk, dv, the worst):" % (L, H, d)]
    for name, e, tol in res:
        lines.append("  %-40s %.3g%s" % (name, e, "" if tol is None else "  (tolerance %g)" % tol))
    return lines, worst <= 1.0


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fwdbwd", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "build", "fwdbwd"))
    ap.add_argument("--lengths", default="4096,16384,65536")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (best of)")
    ap.add_argument("--short-rounds", type=int, default=21,
                    help="rounds at lengths up to --loop-full-max, where a round costs under a "
                         "second (at least --rounds): the best of 9 moved the peer ratio at "
                         "L = 4096 between 3.7x and 4.5x over four runs")
    ap.add_argument("--c-warmup", type=int, default=3,
                    help="untimed calls of each mode before fwdbwd's timed one (malloc's "
                         "mmap threshold settles after the first frees, as in a training loop)")
    ap.add_argument("--chunks", default="32,64,128", help="chunk sizes of the vectorized peer")
    ap.add_argument("--loop-full-max", type=int, default=16384,
                    help="longer sequences: the chunk loop runs once, not in every round")
    ap.add_argument("--loop-cap-s", type=float, default=600.0,
                    help="skip the chunk loop where its predicted call exceeds this")
    ap.add_argument("--check-L", type=int, default=1024)
    ap.add_argument("--tol-out", type=float, default=1e-5)
    ap.add_argument("--tol-grad", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", default="bench_binding.csv")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    a.chunks = [int(x) for x in a.chunks.split(",")]
    lengths = [int(x) for x in a.lengths.split(",")]
    if not os.access(a.fwdbwd, os.X_OK):
        sys.exit("bench_binding: %s is not built (cmake --build --preset release --target fwdbwd)"
                 % a.fwdbwd)
    torch.set_num_threads(a.threads)
    cpu, isa, core = cpu_model(), cpu_isa(), blas_core()
    log("CPU %s (%s), %d logical CPUs; OpenBLAS core %s (OPENBLAS_CORETYPE=%s, "
        "OPENBLAS_NUM_THREADS=%s); torch %s on %d threads; linattn %s"
        % (cpu, isa, os.cpu_count(), core, os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
           os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"), torch.__version__,
           torch.get_num_threads(), getattr(linattn, "__version__", "?")))
    work = a.workdir or tempfile.mkdtemp(prefix="bench_binding.")

    log("checking that the peers compute the binding's operator (L = %d)" % a.check_L)
    lines, ok = check(a, work)
    for l in lines:
        log(l)

    rows = []   # (impl, L, Timer)
    loop_pred = None
    for L in lengths:
        dd = os.path.join(work, "L%d" % L)
        os.makedirs(dd, exist_ok=True)
        run_fwdbwd(a.fwdbwd, ["--L", L, "--heads", a.heads, "--d", a.d, "--threads", a.threads,
                              "--seed", a.seed, "--repeat", 0, "--dump", dd])
        q, k, v, G = (load(dd, n) for n in ("q", "k", "v", "g"))
        for n in ("q", "k", "v", "g"):
            os.remove(os.path.join(dd, n + ".npy"))
        leaves = [x.requires_grad_() for x in (q, k, v)]
        pleaves = [to_peer(x).requires_grad_() for x in (q, k, v)]
        PG = to_peer(G)
        bind = lambda x, y, z: lt.attention(x, y, z, threads=a.threads)
        replay = lambda x, y, z: lt.attention(x, y, z, threads=a.threads, tape=False)
        impls = [("binding", bind, leaves, G), ("binding_nocache", bind, leaves, G),
                 ("binding_replay", replay, leaves, G)]
        impls += [("torch_vec_C%d" % C, (lambda C: lambda x, y, z: peers.chunk_vec(x, y, z, C))(C),
                   pleaves, PG) for C in a.chunks if L % C == 0]
        loop = ("torch_loop_C64", lambda x, y, z: peers.chunk_loop(x, y, z, 64), pleaves, PG)
        rounds = max(a.rounds, a.short_rounds) if L <= a.loop_full_max else a.rounds
        loop_rounds = rounds if L <= a.loop_full_max else 1
        if loop_pred is not None and loop_pred * L > a.loop_cap_s:
            log("L = %d: the chunk loop would take about %.0f s per call (> --loop-cap-s %g): "
                "skipped" % (L, loop_pred * L, a.loop_cap_s))
            loop_rounds = 0
        t = {name: Timer() for name in ["c_fresh", "c_reused", "c_checked"] + [i[0] for i in impls]
             + [loop[0]]}
        log("L = %d: warm-up" % L)
        for name, fn, lv, g in impls:
            (call_nocache if name == "binding_nocache" else call_once)(fn, lv, g)
        if L <= a.loop_full_max and loop_rounds:
            call_once(loop[1], loop[2], loop[3])
        for r in range(rounds):
            c = run_fwdbwd(a.fwdbwd, ["--L", L, "--heads", a.heads, "--d", a.d, "--threads",
                                      a.threads, "--seed", a.seed, "--repeat", 1, "--warmup",
                                      a.c_warmup])
            for m in ("fresh", "reused", "checked"):
                t["c_" + m].add(float(c[m]["fwd_s"]), float(c[m]["bwd_s"]))
            # the in-process calls in an order rotated every round: the first call after
            # fwdbwd's subprocess finds its data and threads cold (1.1-1.4 ms more at L = 4096),
            # and a fixed order put that cost on the binding alone
            order = impls + ([loop] if r < loop_rounds else [])
            for name, fn, lv, g in order[r % len(order):] + order[:r % len(order)]:
                if name == loop[0] and L > a.loop_full_max:
                    log("L = %d: the chunk loop, one call (%s)" % (
                        L, "about %.0f s" % (loop_pred * L) if loop_pred else "?"))
                t[name].add(*(call_nocache if name == "binding_nocache" else call_once)(fn, lv, g))
                if name == loop[0]:
                    loop_pred = t[loop[0]].t / L
            log("L = %d: round %d/%d, best so far: binding %.4f s, binding_nocache %.4f, "
                "c_fresh %.4f, c_reused %.4f, %s" % (
                L, r + 1, rounds, t["binding"].t, t["binding_nocache"].t, t["c_fresh"].t,
                t["c_reused"].t,
                ", ".join("%s %.3f" % (n, t[n].t) for n in t if n.startswith("torch") and t[n].n)))
        for name in t:
            if t[name].n:
                rows.append((name, L, t[name]))
        del q, k, v, G, leaves, pleaves, PG

    # ---- CSV
    with open(a.csv, "w") as f:
        f.write("impl,L,H,d,threads,fwd_s,bwd_s,total_s,tokens_per_s,best_of,cpu,blas_core\n")
        for name, L, tm in rows:
            f.write("%s,%d,%d,%d,%d,%.6f,%.6f,%.6f,%.1f,%d,%s,%s\n" % (
                name, L, a.heads, a.d, a.threads, tm.f, tm.b, tm.t, L / tm.t, tm.n,
                '"%s (%s)"' % (cpu, isa), core))
    log("wrote %s" % a.csv)

    # ---- markdown
    by = {(n, L): tm for n, L, tm in rows}
    out = []
    out.append("CPU: %s, %s, %d logical CPUs; OpenBLAS core %s; torch %s, %d threads; "
               "B = 1, H = %d, d = %d, causal elu1, float32, %d threads"
               % (cpu, isa, os.cpu_count(), core, torch.__version__, torch.get_num_threads(),
                  a.heads, a.d, a.threads))
    out.append("")
    out.append("Seconds, best of the calls (fwd + bwd = total; each column its own best):")
    out.append("")
    out.append("| L | impl | fwd s | bwd s | total s | tokens/s | calls |")
    out.append("|---|---|---|---|---|---|---|")
    for L in lengths:
        for n, L2, tm in rows:
            if L2 == L:
                out.append("| %d | %s | %.4f | %.4f | %.4f | %.3g | %d |" % (
                    L, n, tm.f, tm.b, tm.t, L / tm.t, tm.n))
    out.append("")
    out.append("Ratios (total = fwd + bwd; forward alone in brackets):")
    out.append("")
    out.append("| L | binding / c_fresh | binding / c_reused | binding / c_checked | "
               "binding_nocache / c_reused | binding_replay / binding | best vec peer | "
               "loop peer | stronger peer / binding |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for L in lengths:
        b, cf, cr = by[("binding", L)], by[("c_fresh", L)], by[("c_reused", L)]
        cc = by[("c_checked", L)]
        bh = by[("binding_nocache", L)]
        vec = [k for k in by if k[1] == L and k[0].startswith("torch_vec")]
        vname = min(vec, key=lambda k: by[k].t)[0]
        bv = by[(vname, L)]
        lp = by.get(("torch_loop_C64", L))
        cands = [bv] + ([lp] if lp else [])
        best_peer = min(cands, key=lambda x: x.t)
        fpeer = min([by[k].f for k in vec] + ([lp.f] if lp else []))
        br = by[("binding_replay", L)]
        out.append("| %d | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (bwd %.3f) | %s %.3f s | %s | %.2fx (%.2fx) |" % (
            L, b.t / cf.t, b.f / cf.f, b.t / cr.t, b.f / cr.f, b.t / cc.t, b.f / cc.f,
            bh.t / cr.t, bh.f / cr.f,
            br.t / b.t, br.b / b.b,
            vname.replace("torch_vec_", ""), bv.t,
            "%.3f s%s" % (lp.t, " (1 call)" if lp.n == 1 else "") if lp else "skipped",
            best_peer.t / b.t, fpeer / b.f))
    out.append("")
    out.extend(lines)
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
