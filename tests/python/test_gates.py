#!/usr/bin/python3
"""gates= (docs/design.md §1.2 "Gates") in linattn.numpy.attention and linattn.torch.attention,
against a float64 quadratic reference written here: weights exp(g_{j+1} + ... + g_i)
phi(q_i).phi(k_j) over the keys j <= i of each query's segment (each pair's gates summed
directly, from i down to j + 1), with the maps of _common.phi. elu1, relu (zero-empty), favor+
(explicit projection) and taylor2; mild and strong gates; alone and with decay= on top;
segments; batches (each sequence its own gates); unbatched [L, H, d] calls. float64 within
1e-12 of the row's largest value; float32 row by row within 1e-5 of the row's sum of |terms|
(sum_j w_ij |v_j| / sum_j w_ij: signed values cancel in the numerator, so the error is measured
against the size of its terms), on the same float32 inputs. Then the refusals: shapes, a
positive or NaN log-gate (named by batch, token, head), bidirectional mode, a window,
gradients (of the gates, or of q, k, v through a gated forward), numpy's backward.

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


def reference(name, q, k, v, g, decay, segments, omega, features):
    """(out [B, L, H, dv], mag [B, L, H]) in float64; mag = max_c sum_j w_ij |v_jc| / den."""
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
                    if seg[j] == seg[i]:
                        lw[j] = s
                    s += g[b, j, h] + lam[h]
                dots = pk[b, :i + 1, h] @ pq[b, i, h]
                w = dots * np.exp(lw)
                den = w.sum()
                if den > 0:
                    out[b, i, h] = w @ v[b, :i + 1, h] / den
                    mag[b, i, h] = (np.abs(w[:, None] * v[b, :i + 1, h]).sum(0) / den).max()
    return out, mag


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
                    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
                        x = [a.astype(dt) for a in (q, k, v)]
                        ref, mag = reference(name, *(a.astype(np.float64) for a in x), g, decay,
                                             segments, omega, kw.get("features"))
                        got = ln.attention(*x, feature_map=name, gates=g, decay=decay,
                                           segments=segments, **kw)
                        d = np.max(np.abs(got - ref), -1)
                        if dt == np.float64:
                            err = d / np.maximum(np.max(np.abs(ref), -1), 1e-300)
                        else:
                            err = np.where(mag > 0, d / np.where(mag > 0, mag, 1), d)
                        chk.check(got.dtype == dt and np.all(err <= tol),
                                  "%s: worst row error %.3g > %g" % (dt.__name__, err.max(), tol))
                        if dt == np.float64:  # the torch entry point gives the same bits
                            with torch.no_grad():
                                t = lt.attention(*(torch.tensor(a) for a in x), feature_map=name,
                                                 gates=torch.tensor(g), decay=decay,
                                                 segments=segments, **kw)
                            chk.check(np.array_equal(t.numpy(), got), "torch != numpy")
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
        ("a window", dict(gates=-rng.random((1, L, H)), window=5), linattn.UnsupportedError,
         "window is not built yet"),
    ]
    for what, kw, exc, words in cases:
        chk.start("refused: " + what)
        try:
            ln.attention(*x4, **kw)
            chk.check(False, "no exception")
        except exc as e:
            chk.check(words in str(e), "reason %r lacks %r" % (str(e), words))
    chk.start("refused: the gradient of the gates, and the backward through gates")
    t = [torch.tensor(a) for a in x4]
    gt = torch.tensor(-rng.random((1, L, H)))
    for kind in ("gates", "qkv"):
        try:
            if kind == "gates":
                lt.attention(*t, gates=gt.clone().requires_grad_())
            else:
                lt.attention(t[0].clone().requires_grad_(), t[1], t[2], gates=gt)
            chk.check(False, "%s: no exception" % kind)
        except linattn.UnsupportedError as e:
            chk.check("gates" in str(e) and "not built yet" in str(e), "%s: %s" % (kind, e))
    try:
        ln.attention_backward(*x4, x4[2], gates=-rng.random((1, L, H)))
        chk.check(False, "numpy backward: no exception")
    except linattn.UnsupportedError as e:
        chk.check("not built yet" in str(e), str(e))
    return chk.finish()


if __name__ == "__main__":
    sys.exit(main())
