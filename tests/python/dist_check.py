#!/usr/bin/python3
"""The mpi4py path of the Python binding (docs/python.md "Across ranks"), run under mpirun at
P ranks: every rank builds the same whole inputs from one seed, passes its shard
(linattn.shard) with comm=, and its outputs and gradients (torch autograd through
la_dist_forward / la_dist_backward) must equal the one-process call on the whole sequence,
for every scan algorithm, both modes, segments, a window, float32 and float64; the softmax
ring likewise; the decayed and gated causal forward and backward (decay=, gates=; with
windows too). Errors on one rank (a NaN, a violated denominator, a wrong shard) must be
raised on every rank, with no hang.

Tolerances: the P-rank result differs from the one-process one only by the bracketing of the
float64 state combines and the order of the sums, so in float64 every row agrees to 1e-12
relative. In float32 both are compared with the float64 one-process result: sharding changes
which float32 roundings happen, and the gradients amplify them by the operator's condition
(favor+'s dq rows: 3e-5 in one process, 1.2e-4 at P = 4), so the P-rank error of each tensor
must stay within 10 times the one-process float32 error (plus 1e-6). The one-process call
runs with tape=False: the ranks' backward replays the forward, and the tape forms b from the
rounded outputs, which moves dq rows that cancel (a few tokens into a sequence) by up to
~1e-11 relative in float64 (test_torch_grad.py checks the tape against autograd). Rows are compared
relative to max(||row||, 1e-3 x the median row norm): a row whose exact value is 0 (dq of a
causal sequence's first token) has no relative error.
Exit 0 ok, 1 failure, 77 skip (no torch or mpi4py).
"""
import os
import sys

try:
    import torch
    from mpi4py import MPI
except ImportError as e:
    print("dist_check.py: skipped: %s (apt-get install python3-torch python3-mpi4py)" % e)
    sys.exit(77)

import linattn  # noqa: E402

comm = MPI.COMM_WORLD
rank, P = comm.Get_rank(), comm.Get_size()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL %s" % (rank, what), flush=True)


def rows_rel(x, ref):
    """The largest relative error of a row ([.., dv] rows against the reference's)."""
    num = (x.double() - ref.double()).flatten(0, -2).norm(dim=-1)
    den = ref.double().flatten(0, -2).norm(dim=-1)
    den = den.clamp_min(1e-3 * den.median().item() + 1e-300)
    return (num / den).max().item()


def inputs(dtype, B=2, L=203, H=2, dk=8, dv=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, L, H, dk, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(B, L, H, dk, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(B, L, H, dv, generator=g, dtype=torch.float64).to(dtype)
    G = torch.randn(B, L, H, dv, generator=g, dtype=torch.float64).to(dtype)
    return q, k, v, G


def run(fn, q, k, v, G, shard, **kw):
    """out and (dq, dk, dv) of sum(out * G), on the whole inputs or on this rank's shard."""
    if shard:
        row0, n = linattn.shard(q.shape[1], comm)
        sl = slice(row0, row0 + n)
        q, k, v, G = (t[:, sl].contiguous() for t in (q, k, v, G))
        kw["comm"] = comm
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, **kw)
    (out * G).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def compare(name, fn, dtype, tol, positive=False, **kw):
    q, k, v, G = inputs(torch.float64)
    if positive:  # features for "precomputed": positive, so every denominator is
        q, k = q.abs() + 0.1, k.abs() + 0.1
    one = {a: b for a, b in kw.items() if a != "scan_algorithm"}
    if fn is att:  # the replay's formulas, as the ranks' backward (la_dist_backward) has no tape
        one["tape"] = False
    row0, n = linattn.shard(q.shape[1], comm)
    ref = [t[:, row0:row0 + n] for t in run(fn, q, k, v, G, False, **one)]
    x = [t.to(dtype) for t in (q, k, v, G)]
    mine = run(fn, *x, True, **kw)
    errs = [comm.allreduce(rows_rel(m, w), op=MPI.MAX) for m, w in zip(mine, ref)]
    if dtype == torch.float64:
        bound = [tol] * 4
    else:  # against the one-process float32 call's own error
        single = [t[:, row0:row0 + n] for t in run(fn, *x, False, **one)]
        bound = [10 * comm.allreduce(rows_rel(s1, w), op=MPI.MAX) + 1e-6
                 for s1, w in zip(single, ref)]
    for what, e, b in zip(("out", "dq", "dk", "dv"), errs, bound):
        check(e <= b, "%s: %s worst row error %.3g > %.3g" % (name, what, e, b))
    if rank == 0:
        print("P=%d %-42s row errors out %.1e dq %.1e dk %.1e dv %.1e" % (P, name, *errs),
              flush=True)


att = linattn.torch.attention
for scan in ("auto", "exscan", "doubling", "chain", "allgather", "pipelined"):
    compare("causal elu1 f64 scan=%s" % scan, att, torch.float64, 1e-12, scan_algorithm=scan)
compare("causal favor+ m=16 f64 chain", att, torch.float64, 1e-12, feature_map="favor+",
        features=16, scan_algorithm="chain")
compare("causal elu1 f32", att, torch.float32, None)
compare("bidirectional elu1 f64", att, torch.float64, 1e-12, mode="bidirectional")
compare("bidirectional favor+ f32", att, torch.float32, None, mode="bidirectional",
        feature_map="favor+", features=16)
for mode in ("causal", "bidirectional"):
    compare("%s segments f64" % mode, att, torch.float64, 1e-12, mode=mode,
            segments=[0, 3, 50, 51, 120, 203])
compare("causal window 37 f64 pipelined", att, torch.float64, 1e-12, window=37,
        scan_algorithm="pipelined")
compare("causal window 5 + segments f64", att, torch.float64, 1e-12, window=5,
        segments=[0, 60, 203])
compare("precomputed f64 doubling", att, torch.float64, 1e-12, positive=True,
        feature_map="precomputed", scan_algorithm="doubling")
sm = linattn.torch.softmax_attention
compare("softmax causal f64", sm, torch.float64, 1e-12)
compare("softmax bidirectional segments f64", sm, torch.float64, 1e-12, mode="bidirectional",
        segments=[0, 100, 203])
compare("softmax causal window 9 f32", sm, torch.float32, None, window=9)


def compare_fwd(name, tol, **kw):
    """decay= and gates= (docs/design.md §1.2): the P-rank
    forward against the one-process forward, float64, rows to tol. gates="draw": log-gates
    drawn here, the whole sequence's for the one process and each rank's rows for it."""
    q, k, v, _ = inputs(torch.float64)
    row0, n = linattn.shard(q.shape[1], comm)
    sl = slice(row0, row0 + n)
    one = {a: b for a, b in kw.items() if a != "scan_algorithm"}
    part = dict(kw)
    if kw.get("gates") in ("draw", "feature", "strong"):  # log-gates, the same on every rank;
        # each its rows: [B, L, H], or per feature [B, L, H, r] (r of the map: dk for elu1,
        # features= for favor+), "strong" with features gated by -40 or -900 here and there
        r = kw.get("features", q.shape[3])
        shape = q.shape[:3] if kw["gates"] == "draw" else q.shape[:3] + (r,)
        g = -torch.rand(shape, generator=torch.Generator().manual_seed(38),
                        dtype=torch.float64) * 0.5
        if kw["gates"] == "strong":
            g.view(-1)[3::29] -= 40.0
            g.view(-1)[11::301] -= 900.0
        one["gates"], part["gates"] = g, g[:, sl].contiguous()
    with torch.no_grad():
        ref = att(q, k, v, **one)[:, sl]
        mine = att(*(t[:, sl].contiguous() for t in (q, k, v)), comm=comm, **part)
    e = comm.allreduce(rows_rel(mine, ref), op=MPI.MAX)
    check(e <= tol, "%s: out worst row error %.3g > %.3g" % (name, e, tol))
    if rank == 0:
        print("P=%d %-42s row errors out %.1e" % (P, name, e), flush=True)


for scan in ("exscan", "pipelined"):
    compare_fwd("decay causal elu1 f64 scan=%s" % scan, 1e-12, decay=[0.9, 0.5],
                scan_algorithm=scan)
compare_fwd("decay retnet causal favor+ segments f64", 1e-12, decay="retnet",
            feature_map="favor+", features=16, segments=[0, 3, 50, 51, 120, 203])
compare_fwd("decay bidirectional favor+ f64 chain", 1e-12, decay=[0.9, 0.5],
            mode="bidirectional", feature_map="favor+", features=16, scan_algorithm="chain")
compare_fwd("decay bidirectional segments f64", 1e-12, decay="retnet", mode="bidirectional",
            segments=[0, 3, 50, 51, 120, 203])
# gates= (docs/design.md §1.2 "Gates"): each rank binds its shard's rows of the gates
for scan in ("exscan", "doubling"):
    compare_fwd("gates causal elu1 f64 scan=%s" % scan, 1e-12, gates="draw", scan_algorithm=scan)
compare_fwd("gates + decay causal favor+ segments f64", 1e-12, gates="draw", decay=[0.9, 0.5],
            feature_map="favor+", features=16, segments=[0, 3, 50, 51, 120, 203])
compare_fwd("gates window 7 elu1 segments f64", 1e-12, gates="draw", window=7,
            segments=[0, 3, 50, 51, 120, 203])
# per-feature gates [B, L, H, r] (GLA's form, docs/design.md §1.2 "Per-feature gates"): the
# summaries travel in row form, one scan element per head and feature, on every algorithm
for scan in ("auto", "exscan", "doubling", "chain", "allgather", "pipelined"):
    compare_fwd("per-feature gates elu1 f64 scan=%s" % scan, 1e-12, gates="feature",
                scan_algorithm=scan)
compare_fwd("per-feature gates + decay favor+ segments f64", 1e-12, gates="feature",
            decay=[0.9, 0.5], feature_map="favor+", features=16,
            segments=[0, 3, 50, 51, 120, 203], scan_algorithm="pipelined")
compare_fwd("per-feature gates strong elu1 segments f64", 1e-12, gates="strong",
            segments=[0, 3, 50, 51, 120, 203], scan_algorithm="chain")
# an unstabilized map's window whose halo spans a whole rank (P = 4): the mid summary comes
# from the decayed keys pass, whose state keeps its own scale (m < 0); the window read it as
# m = 0 once (out off by 0.37)
compare_fwd("decay window 60 elu1 f64", 1e-12, decay=0.95, window=60)
compare_fwd("gates + decay window 60 favor+ f64", 1e-12, gates="draw", decay=[0.9, 0.5],
            window=60, feature_map="favor+", features=16)



def compare_bwd(name, tol, **kw):
    """The decayed and gated backward across ranks (docs/design.md §1.2 "The backward"): the
    P-rank gradients of sum(out * G), dL/dgates included, against the one-process ones,
    float64, rows to tol."""
    q, k, v, G = inputs(torch.float64)
    row0, n = linattn.shard(q.shape[1], comm)
    sl = slice(row0, row0 + n)
    g = None
    form = kw.pop("gates", None)
    if form in ("draw", "feature"):  # [B, L, H], or per feature [B, L, H, r] (r = dk here)
        shape = q.shape[:3] if form == "draw" else q.shape[:3] + (kw.get("features", q.shape[3]),)
        g = -torch.rand(shape, generator=torch.Generator().manual_seed(39),
                        dtype=torch.float64) * 0.5

    def grads(x, gx, **extra):
        x = [t.clone().requires_grad_() for t in x]
        a = dict(kw, **extra)
        if gx is not None:
            gx = gx.clone().requires_grad_()
            a["gates"] = gx
        out = att(*x[:3], tape=False, **a) if "comm" not in a else att(*x[:3], **a)
        (out * x[3].detach()).sum().backward()
        return [t.grad for t in x[:3]] + ([gx.grad] if gx is not None else [])

    ref = [t[:, sl] for t in grads([q, k, v, G], g)]
    mine = grads([t[:, sl].contiguous() for t in (q, k, v, G)],
                 g[:, sl].contiguous() if g is not None else None, comm=comm)
    # causal: dq of a segment's first token (the sequence's first too) is 0 exactly (out = v
    # there, whatever q is): both sides hold rounding only, so those rows are held to 1e-13 of
    # the median dq row in absolute terms (a relative error of a zero measures nothing), the
    # others as every row below
    starts = [t - row0 for t in sorted(set([0] + kw.get("segments", [])[:-1]))
              if row0 <= t < row0 + n and kw.get("mode", "causal") == "causal"]
    keep = [t for t in range(n) if t not in starts]
    med = comm.allreduce(ref[0].flatten(0, -2).norm(dim=-1).median().item(), op=MPI.MAX)
    for x in (mine[0], ref[0]):
        z = x[:, starts].abs().max().item() if starts else 0.0
        check(z <= 1e-13 * med, "%s: dq of a segment's first token %.3g > 1e-13 x %.3g"
              % (name, z, med))
    mine[0], ref[0] = mine[0][:, keep], ref[0][:, keep]
    errs = [comm.allreduce(rows_rel(m, w), op=MPI.MAX) for m, w in zip(mine, ref)]
    for what, e in zip(("dq", "dk", "dv", "dgates"), errs):
        check(e <= tol, "%s: %s worst row error %.3g > %.3g" % (name, what, e, tol))
    if rank == 0:
        print("P=%d %-42s row errors %s" % (P, name, " ".join(
            "%s %.1e" % (w, e) for w, e in zip(("dq", "dk", "dv", "dg"), errs))), flush=True)


# The causal decayed chunks fold their decay into their rows where the chunk's decay is small
# (core/engine/chunk_impl.h decay_fold) and keep the state's scale while the keys fit
# (rescale_keys): where that happens depends on the chunks' alignment, which differs per rank,
# so the P-rank and one-process backward differ by more than bracketing in the rows that
# cancel. Both are as far from an independent float64 quadratic reference as before the fold
# (gates + decay elu1 segments at P = 3: dk 1.0e-12, dgates 5.5e-12 for either; dist against
# one 1.1e-12 in dgates), so these rows are held to 1e-11.
DECAYED_BWD = 1e-11
compare_bwd("backward decay causal elu1 f64 chain", DECAYED_BWD, decay=[0.9, 0.5],
            scan_algorithm="chain")
compare_bwd("backward gates causal elu1 f64", DECAYED_BWD, gates="draw")
compare_bwd("backward gates + decay elu1 segments f64", DECAYED_BWD, gates="draw",
            decay=[0.9, 0.5], segments=[0, 3, 50, 51, 120, 203])
# a window: the anti-causal products' halos on the reversed sequence (L = 203 splits unevenly
# on 2 to 4 ranks, so the reversed shards are not la_split_ownership's)
compare_bwd("backward decay window 7 elu1 segments f64", 1e-12, decay=[0.9, 0.5], window=7,
            segments=[0, 3, 50, 51, 120, 203])
compare_bwd("backward decay window 60 taylor2 f64", 1e-12, decay=0.95, window=60)
# bidirectional (weights gamma^|i-j|): the four products in order, across the ranks
compare_bwd("backward decay bidirectional taylor2 segments f64", 1e-12, decay=[0.9, 0.5],
            mode="bidirectional", feature_map="taylor2", segments=[0, 3, 50, 51, 120, 203])
# the stabilized maps: each head's keys and coefficients on common scales over the ranks
compare_bwd("backward decay favor+ causal segments f64", DECAYED_BWD, decay=[0.9, 0.5],
            feature_map="favor+", features=16, segments=[0, 3, 50, 51, 120, 203])
compare_bwd("backward gates favor-hyp window 9 f64", 1e-12, gates="draw", window=9,
            feature_map="favor-hyp", features=16)
# per-feature gates (§1.2 "Per-feature gates", "Across ranks"): the value-decayed products'
# states in row form, scanned over the ranks forward and reversed
compare_bwd("backward per-feature gates elu1 f64", DECAYED_BWD, gates="feature")
compare_bwd("backward per-feature gates + decay elu1 segments f64", DECAYED_BWD,
            gates="feature", decay=[0.9, 0.5], segments=[0, 3, 50, 51, 120, 203],
            scan_algorithm="pipelined")
compare_bwd("backward per-feature gates favor+ segments f64", DECAYED_BWD, gates="feature",
            feature_map="favor+", features=16, segments=[0, 3, 50, 51, 120, 203])
# gates with a window: the reversed gates' halo too
compare_bwd("backward gates window 7 elu1 segments f64", 1e-12, gates="draw", window=7,
            segments=[0, 3, 50, 51, 120, 203])
compare_bwd("backward gates + decay window 60 taylor2 f64", 1e-12, gates="draw", decay=0.95,
            window=60)

def expect_raise(name, exc, fn):
    """fn must raise exc (with a reason) on every rank."""
    try:
        fn()
        got = None
    except exc as e:
        got = str(e)
    except Exception as e:  # noqa: BLE001
        got = "WRONG %s: %s" % (type(e).__name__, e)
    ok = got is not None and not got.startswith("WRONG")
    oks = comm.allgather(ok)
    check(all(oks), "%s: raised %s on the ranks (this rank: %s)" % (name, oks, got))
    if rank == 0:
        print("P=%d %-58s raised on every rank: %s" % (P, name, got), flush=True)


q, k, v, G = inputs(torch.float64)
row0, n = linattn.shard(q.shape[1], comm)
sl = slice(row0, row0 + n)
qs, ks, vs = (t[:, sl].contiguous() for t in (q, k, v))
# a NaN on the last rank only
qbad = qs.clone()
if rank == P - 1:
    qbad[1, n - 1, 1, 3] = float("nan")
expect_raise("NaN on the last rank", linattn.InputError,
             lambda: att(qbad, ks, vs, comm=comm))
# identity with the error policy: a zero denominator on rank 0 only (token 0: q = 0)
qz = qs.clone()
if rank == 0:
    qz[0, 0, 0, :] = 0.0
expect_raise("zero denominator on rank 0", linattn.DenominatorError,
             lambda: att(qz, ks, vs, comm=comm, feature_map="identity", allow_signed=True))
# a shard that is not linattn.shard's (when P > 1 one rank passes one row too few: the last,
# unless P divides L (203 = 7 x 29), where that would be the split of L - 1 rows; then rank 0)
if P > 1:
    short = P - 1 if q.shape[1] % P else 0
    cut = qs[:, :-1].contiguous() if rank == short else qs
    cutk = ks[:, :-1].contiguous() if rank == short else ks
    cutv = vs[:, :-1].contiguous() if rank == short else vs
    expect_raise("a shard off the split", linattn.InputError,
                 lambda: att(cut, cutk, cutv, comm=comm))
    hh = qs if rank else qs[..., :1, :].contiguous()
    kk = ks if rank else ks[..., :1, :].contiguous()
    vv = vs if rank else vs[..., :1, :].contiguous()
    expect_raise("heads that differ between ranks", linattn.InputError,
                 lambda: att(hh, kk, vv, comm=comm))
# per-feature gates of the wrong width on one rank only: raised on every rank
gf = -torch.rand(qs.shape[:3] + (qs.shape[3] + (rank == P - 1),), dtype=torch.float64) * 0.5
expect_raise("per-feature gates of another width on the last rank", linattn.InputError,
             lambda: att(qs.clone().requires_grad_(), ks, vs, comm=comm, gates=gf))
# a dtype that differs on rank 0 only (checked by the binding before any collective): raised
# on every rank (before, the other ranks waited in the shapes' allgather)
kd = ks.float() if rank == 0 else ks
expect_raise("k of another dtype on rank 0 (torch)", linattn.InputError,
             lambda: att(qs, kd, vs, comm=comm))
expect_raise("k of another dtype on rank 0 (numpy backward)", linattn.InputError,
             lambda: linattn.numpy.attention_backward(qs.numpy(), kd.numpy(), vs.numpy(),
                                                      vs.numpy(), comm=comm))
# softmax: a window on the last rank only, and k of another dtype on rank 0 (the binding's own
# checks, agreed before any collective): raised on every rank
wbad = 0 if rank == P - 1 else None
expect_raise("softmax: a window of 0 on the last rank (torch)", linattn.InputError,
             lambda: sm(qs, ks, vs, comm=comm, window=wbad))
expect_raise("softmax: k of another dtype on rank 0 (numpy)", linattn.InputError,
             lambda: linattn.numpy.softmax_attention(qs.numpy(), kd.numpy(), vs.numpy(),
                                                     comm=comm))
expect_raise("softmax backward: k of another dtype on rank 0 (numpy)", linattn.InputError,
             lambda: linattn.numpy.softmax_attention_backward(qs.numpy(), kd.numpy(), vs.numpy(),
                                                              vs.numpy(), comm=comm))
# after the errors the communicator still works
compare("causal elu1 f64 after the errors", att, torch.float64, 1e-12)

sys.exit(1 if comm.allreduce(len(failures)) else 0)
