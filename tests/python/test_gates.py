#!/usr/bin/python3
"""gates= (docs/design.md §1.2 "Gates") in linattn.numpy.attention and linattn.torch.attention,
against a float64 quadratic reference written here: weights exp(g_{j+1} + ... + g_i)
phi(q_i).phi(k_j) over the keys j <= i of each query's segment (each pair's gates summed
directly, from i down to j + 1), with the maps of _common.phi. elu1, relu (zero-empty), favor+
(explicit projection) and taylor2; mild and strong gates; alone and with decay= on top;
segments; causal windows (chunk 8, so that the window's queue pushes and pops); batches
(each sequence its own gates); unbatched [L, H, d] calls. float64 within
1e-12 of the row's largest value; float32 row by row within 5e-6 of the row's sum of |terms|
(sum_j w_ij |v_j| / sum_j w_ij: signed values cancel in the numerator, so the error is measured
against the size of its terms; the chunk products have at most C + r <= 85 terms here, and
85 u32 = 5.1e-6; the worst seen is 2.4e-7), on the same float32 inputs. The backward, dL/dg included:
torch autograd through the engine against autograd of a float64 quadratic form in torch
(elu1, relu, identity unnormalized, dpfp, taylor2; segments; with decay; windows of 7 and 21;
1e-12 in float64,
1e-4 of the largest entry in float32), gradcheck with the gates, numpy's attention_backward
equal to torch's. Then the refusals: shapes, a positive or NaN log-gate (named by batch,
token, head), bidirectional mode, the backward of a stabilized map.

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_gates.py      (exit 77: numpy or torch missing)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.need()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import linattn  # noqa: E402
import linattn.numpy as ln  # noqa: E402
import linattn.torch as lt  # noqa: E402


def reference(name, q, k, v, g, decay, segments, omega, features, window=None):
    """(out [B, L, H, dv], mag [B, L, H]) in float64; mag = max_c sum_j w_ij |v_jc| / den.
    window W: only the keys i - W < j <= i."""
    B, L, H, _ = q.shape
    pq = C.phi(name, torch.tensor(q), omega=omega, features=features).numpy()
    pk = C.phi(name, torch.tensor(k), omega=omega, features=features).numpy()
    seg = np.zeros(L, dtype=np.int64)
    for o in (segments or [0, L])[1:-1]:
        seg[o:] += 1
    lam = np.log(np.asarray(decay, dtype=np.float64)) if decay is not None else np.zeros(H)
    out = np.zeros((B, L, H, v.shape[-1]))
    mag = np.zeros((B, L, H))
    for b in range(B):
        for h in range(H):
            for i in range(L):
                lw = np.full(i + 1, -np.inf)  # log-weights of keys 0..i
                s = 0.0
                for j in range(i, -1, -1):
                    if seg[j] == seg[i] and (window is None or i - j < window):
                        lw[j] = s
                    s += g[b, j, h] + lam[h]
                dots = pk[b, :i + 1, h] @ pq[b, i, h]
                w = dots * np.exp(lw)
                den = w.sum()
                if den > 0:
                    out[b, i, h] = w @ v[b, :i + 1, h] / den
                    mag[b, i, h] = (np.abs(w[:, None] * v[b, :i + 1, h]).sum(0) / den).max()
    return out, mag


def row_errors(got, ref, mag, dt):
    """Per-row error: float64 against the row's largest value, float32 against its sum of
    |terms| mag (see the top)."""
    d = np.max(np.abs(got - ref), -1)
    if dt == np.float64:
        return d / np.maximum(np.max(np.abs(ref), -1), 1e-300)
    return np.where(mag > 0, d / np.where(mag > 0, mag, 1), d)


def main():
    chk = C.Checks("test_gates")
    rng = np.random.default_rng(3808)
    B, L, H, dk, dv = 2, 61, 3, 5, 4
    omega = rng.standard_normal((H, 16, dk))
    cases = [("elu1", {}), ("relu", {"denominator": "zero-empty"}),
             ("favor+", {"features": 16, "projection": omega}), ("taylor2", {})]
    for name, kw in cases:
        off = 1.0 if name == "relu" else 0.0
        q, k = (off + rng.standard_normal((B, L, H, dk)) * (0.5 if off else 0.7) for _ in range(2))
        v = rng.standard_normal((B, L, H, dv))
        for strength in ("mild", "strong"):
            g = -np.log1p(np.exp(-(3.0 + rng.standard_normal((B, L, H)))))
            if strength == "strong":
                g = g * 8.0
                g[:, ::9, :] -= 25.0
            for decay in (None, [0.9, 0.99, 1.0]):
                for segments in (None, [0, 20, 21, L]):
                    chk.start("%s %s gates%s%s" % (name, strength, " decay=%s" % decay if decay else "",
                                                   " segments" if segments else ""))
                    for dt, tol in ((np.float64, 1e-12), (np.float32, 5e-6)):
                        x = [a.astype(dt) for a in (q, k, v)]
                        ref, mag = reference(name, *(a.astype(np.float64) for a in x), g, decay,
                                             segments, omega, kw.get("features"))
                        got = ln.attention(*x, feature_map=name, gates=g, decay=decay,
                                           segments=segments, **kw)
                        err = row_errors(got, ref, mag, dt)
                        chk.check(got.dtype == dt and np.all(err <= tol),
                                  "%s: worst row error %.3g > %g" % (dt.__name__, err.max(), tol))
                        if dt == np.float64:  # the torch entry point gives the same bits
                            with torch.no_grad():
                                t = lt.attention(*(torch.tensor(a) for a in x), feature_map=name,
                                                 gates=torch.tensor(g), decay=decay,
                                                 segments=segments, **kw)
                            chk.check(np.array_equal(t.numpy(), got), "torch != numpy")
    # a causal window (§1.2 "Gates", §3.2): the queue's summaries and the far edge decay by
    # the gates between them and the query; chunk 8 so that the queue pushes and pops
    for name, kw in cases[:3]:
        off = 1.0 if name == "relu" else 0.0
        q, k = (off + rng.standard_normal((B, L, H, dk)) * (0.5 if off else 0.7) for _ in range(2))
        v = rng.standard_normal((B, L, H, dv))
        for strength, window, decay, segments in (("mild", 5, None, None),
                                                  ("strong", 21, [0.9, 0.99, 1.0], None),
                                                  ("mild", 30, None, [0, 20, 21, L]),
                                                  ("strong", 9, [0.9, 0.99, 1.0], [0, 20, 21, L])):
            g = -np.log1p(np.exp(-(3.0 + rng.standard_normal((B, L, H)))))
            if strength == "strong":
                g = g * 8.0
                g[:, ::9, :] -= 25.0
            chk.start("%s %s gates window %d%s%s" % (name, strength, window,
                                                    " decay" if decay else "",
                                                    " segments" if segments else ""))
            for dt, tol in ((np.float64, 1e-12), (np.float32, 5e-6)):
                x = [a.astype(dt) for a in (q, k, v)]
                ref, mag = reference(name, *(a.astype(np.float64) for a in x), g, decay,
                                     segments, omega, kw.get("features"), window)
                got = ln.attention(*x, feature_map=name, gates=g, decay=decay, window=window,
                                   segments=segments, chunk=8, **kw)
                err = row_errors(got, ref, mag, dt)
                chk.check(got.dtype == dt and np.all(err <= tol),
                          "%s: worst row error %.3g > %g" % (dt.__name__, err.max(), tol))
    chk.start("an unbatched call [L, H, d] with gates [L, H]")
    x = [rng.standard_normal((L, H, d)) for d in (dk, dk, dv)]
    g = -rng.random((L, H))
    one = ln.attention(*x, gates=g)
    two = ln.attention(*(a[None] for a in x), gates=g[None])[0]
    chk.check(np.array_equal(one, two), "unbatched != batch of one")
    chk.start("gates of zero: the ungated operator within rounding")
    z = ln.attention(*x, gates=np.zeros((L, H)))
    e = np.abs(z - ln.attention(*x)).max() / np.abs(z).max()
    chk.check(e <= 1e-13, "%.3g" % e)

    # refusals: an exception with the reason, never a NaN
    x4 = [a[None] for a in x]
    bad = -rng.random((1, L, H))
    bad[0, 17, 2] = 0.5
    nan = -rng.random((1, L, H))
    nan[0, 40, 1] = np.nan
    cases = [
        ("shape", dict(gates=-rng.random((1, L, H + 1))), linattn.InputError, "[1, %d, %d]" % (L, H)),
        ("a positive log-gate", dict(gates=bad), linattn.InputError, "(batch 0, token 17, head 2)"),
        ("a NaN log-gate", dict(gates=nan), linattn.InputError, "(batch 0, token 40, head 1)"),
        ("bidirectional", dict(gates=-rng.random((1, L, H)), mode="bidirectional"),
         linattn.InputError, "causal"),
    ]
    for what, kw, exc, words in cases:
        chk.start("refused: " + what)
        try:
            ln.attention(*x4, **kw)
            chk.check(False, "no exception")
        except exc as e:
            chk.check(words in str(e), "reason %r lacks %r" % (str(e), words))
    # the backward (docs/design.md §1.2 "Gates"): torch autograd through the engine, dL/dg
    # included, against autograd of a float64 quadratic form in torch on the same inputs
    gam = [0.9, 0.99, 1.0]

    def tref(name, q, k, v, g, segments, normalize, features, decay, window=None, omega=None):
        pq = C.phi(name, q, features=features, omega=omega)
        pk = C.phi(name, k, features=features, omega=omega)
        i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
        m = (j <= i) & (i - j < (window or L))
        if segments:
            seg = torch.zeros(L, dtype=torch.long)
            for o in segments[1:-1]:
                seg[o:] += 1
            m = m & (seg[:, None] == seg[None, :])
        outs = []
        for h in range(H):
            lam = float(np.log(decay[h])) if decay else 0.0
            cs = torch.cumsum(g[:, :, h] + lam, 1)
            lw = torch.where(m, cs[:, :, None] - cs[:, None, :], torch.full((L, L), -1e300,
                                                                           dtype=torch.float64))
            W = torch.einsum("bir,bjr->bij", pq[:, :, h], pk[:, :, h]) * torch.exp(lw) * m
            num = W @ v[:, :, h]
            outs.append(num / W.sum(-1, keepdim=True) if normalize else num)
        return torch.stack(outs, 2)

    omb = np.random.default_rng(19).standard_normal((H, 16, dk))
    for name in ("elu1", "relu", "identity", "dpfp", "taylor2", "favor+", "favor-hyp"):
        norm, feats = name != "identity", (1 if name == "dpfp" else None)
        kw = {"features": feats} if feats else {}
        om = omb if name.startswith("favor") else None
        if om is not None:  # the stabilized maps (common scales per head, decay_bwd.c)
            feats, kw = 16, {"features": 16, "projection": om}
        for segments, decay, window in ((None, None, None), ([0, 20, 21, L], None, None),
                                        (None, gam, None), (None, None, 7),
                                        ([0, 20, 21, L], gam, 21)):
            chk.start("backward %s gates%s%s%s" % (name, " segments" if segments else "",
                                                   " decay=%s" % decay if decay else "",
                                                   " window %d" % window if window else ""))
            wkw = {"window": window, "chunk": 8} if window else {}
            off = 1.0 if name in ("relu", "dpfp") else 0.0
            g64 = torch.Generator().manual_seed(11)
            q, k = (off + 0.5 * torch.randn(B, L, H, dk, generator=g64, dtype=torch.float64)
                    for _ in range(2))
            v, G = (torch.randn(B, L, H, dv, generator=g64, dtype=torch.float64) for _ in range(2))
            gg = -0.4 * torch.rand(B, L, H, generator=g64, dtype=torch.float64)
            for dt, tol in ((torch.float64, 1e-12), (torch.float32, 1e-4)):
                x = [t.to(dt).detach().clone().requires_grad_() for t in (q, k, v, gg)]
                o = lt.attention(*x[:3], gates=x[3], feature_map=name, segments=segments,
                                 decay=decay, normalize=norm, **kw, **wkw)
                (o * G.to(dt)).sum().backward()
                xr = [t.to(dt).double().detach().clone().requires_grad_() for t in (q, k, v, gg)]
                ref = tref(name, *xr, segments, norm, feats, decay, window, om)
                (ref * G).sum().backward()
                for what, a_, b_ in zip(("out", "dq", "dk", "dv", "dg"), [o] + [t.grad for t in x],
                                        [ref] + [t.grad for t in xr]):
                    e = float((a_.double() - b_).abs().max() / b_.abs().max())
                    chk.check(a_.dtype == dt and e <= tol, "%s %s: %.3g > %g" % (dt, what, e, tol))
    chk.start("backward with gates: gradcheck (float64, elu1, segments, gates included)")
    g64 = torch.Generator().manual_seed(9)
    xs = [torch.randn(1, 12, 2, 3, generator=g64, dtype=torch.float64).requires_grad_()
          for _ in range(3)]
    gs = (-0.5 * torch.rand(1, 12, 2, generator=g64, dtype=torch.float64)).requires_grad_()
    chk.check(torch.autograd.gradcheck(
        lambda a_, b_, c_, d_: lt.attention(a_, b_, c_, gates=d_, segments=[0, 5, 12]),
        xs + [gs], eps=1e-6, atol=1e-8), "gradcheck")
    chk.start("the backward with gates and decay, numpy's attention_backward = torch's")
    x = [rng.standard_normal((L, H, d)) for d in (dk, dk, dv)]
    gn, Gn = -0.3 * rng.random((L, H)), rng.standard_normal((L, H, dv))
    dn = ln.attention_backward(*x, Gn, gates=gn, decay=gam)
    xt = [torch.tensor(a).requires_grad_() for a in x]
    (lt.attention(*(t[None] for t in xt), gates=torch.tensor(gn)[None], decay=gam)
     * torch.tensor(Gn)[None]).sum().backward()
    chk.check(all(np.array_equal(a, t.grad.numpy()) for a, t in zip(dn, xt)), "numpy != torch")
    chk.start("refused: a stabilized map's backward whose keys span more than float32 holds")
    try:
        xq = torch.tensor(x4[0], dtype=torch.float32).requires_grad_()
        kk = torch.tensor(x4[1], dtype=torch.float32)
        kk[0, 5] *= 40.0  # one key row far off: its log-scale some hundreds of nats below
        lt.attention(xq, kk, torch.tensor(x4[2], dtype=torch.float32),
                     gates=-torch.rand(1, L, H), feature_map="favor+",
                     features=8).sum().backward()
        chk.check(False, "no exception")
    except linattn.UnsupportedError as e:
        chk.check("span" in str(e) and "nats" in str(e), str(e))
    return chk.finish()


if __name__ == "__main__":
    sys.exit(main())
