#!/usr/bin/python3
"""linattn.numpy against a float64 NumPy quadratic reference written here (no torch needed).

attention and attention_backward (elu1, relu, identity with allow_signed, favor+ with an
explicit projection, precomputed; both modes, segments, windows, normalize=False, add:E), and
softmax_attention and softmax_attention_backward (both modes, segments, windows), on
[B, L, H, d] and [L, H, d] inputs, float64 and float32. The reference's gradients are the
closed forms of the quadratic operator: with w_ij = g_i.(v_j - out_i) / den_i (normalized) or
g_i.v_j (not), dphi(q_i) = sum_j w_ij phi(k_j), dphi(k_j) = sum_i w_ij phi(q_i),
dv_j = sum_i a_ij g_i / den_i, and dx = J_phi(x)^T dphi(x); softmax: dS = P (dP - rowsum(dP P)).

And the arrays are not copied: the calls leave their inputs unchanged (also read-only ones and
offset views), outputs come in the inputs' dtype, and non-contiguous or byte-swapped arrays are
refused rather than copied or misread.

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_numpy.py      (exit 77: numpy missing)
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.need(torch_too=False)
import numpy as np  # noqa: E402

import linattn  # noqa: E402

chk = C.Checks("test_numpy")
NA, NB = linattn.numpy.attention, linattn.numpy.attention_backward
NS, NSB = linattn.numpy.softmax_attention, linattn.numpy.softmax_attention_backward
B, L, H, DK, DV, M = 2, 14, 2, 4, 3, 8
SEG = [0, 5, 9, L]


# ---------------------------------------------------------------------------------------------
# The NumPy reference (float64, quadratic).

def np_mask(n, mode, segments=None, window=None):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    m = np.ones((n, n), bool)
    if segments is not None:
        sid = np.searchsorted(np.asarray(segments), np.arange(n), side="right") - 1
        m &= sid[:, None] == sid[None, :]
    if mode == "causal":
        m &= j <= i
        if window:
            m &= j > i - window
    return m


def np_phi(name, x, omega=None):
    """(phi(x), J^T dphi as a function of dphi, |J|^T y as a function of y >= 0) for
    x [B, L, H, d]."""
    if name == "elu1":
        p = np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
        d = np.where(x > 0, 1.0, p)
        return p, lambda dp: dp * d, lambda y: y * d
    if name == "relu":
        return np.maximum(x, 0.0), lambda dp: dp * (x > 0), lambda y: y * (x > 0)
    if name in ("identity", "precomputed"):
        return x.copy(), lambda dp: dp, lambda y: y
    if name == "favor+":
        s = 1.0 / math.sqrt(x.shape[-1])
        xt = math.sqrt(s) * x
        u = np.einsum("blhd,hmd->blhm", xt, omega)
        p = np.exp(u - 0.5 * (xt * xt).sum(-1, keepdims=True)) / math.sqrt(omega.shape[1])
        # d phi_r / d x_d = phi_r (sqrt(s) omega_rd - s x_d)
        J = p[..., None] * (math.sqrt(s) * omega[None, None] - s * x[..., None, :])   # [B,L,H,m,d]
        return p, lambda dp: np.einsum("blhmd,blhm->blhd", J, dp), \
            lambda y: np.einsum("blhmd,blhm->blhd", np.abs(J), y)
    raise ValueError(name)


def np_linear(name, q, k, v, g, omega=None, mode="causal", normalize=True, add=None,
              segments=None, window=None):
    """(out, dq, dk, dv, den) of the quadratic form, float64, and the entry-wise rounding-
    error scales (out, dq, dk, dv): the same sums with every term replaced by its absolute
    value (a sum of n terms computed with unit roundoff u is within about n u of them)."""
    q, k, v, g = (np.asarray(x, np.float64) for x in (q, k, v, g))
    pq, chq, absq = np_phi(name, q, omega)
    pk, chk_, absk = np_phi(name, k, omega)
    aq, ak = np.abs(pq), np.abs(pk)
    msk = np_mask(q.shape[1], mode, segments, window)
    a = np.einsum("bihr,bjhr->bhij", pq, pk) * msk
    absA = np.einsum("bihr,bjhr->bhij", aq, ak) * msk
    num = np.einsum("bhij,bjhc->bihc", a, v)
    den = a.sum(-1).transpose(0, 2, 1)                   # [B, L, H]
    gv_abs = np.einsum("bihc,bjhc->bhij", np.abs(g), np.abs(v))
    if normalize:
        dd = den + (add or 0.0)
        inv = 1.0 / dd.transpose(0, 2, 1)[..., None]      # [B, H, L, 1]
        out = num / dd[..., None]
        w = (np.einsum("bihc,bjhc->bhij", g, v) - (g * out).sum(-1).transpose(0, 2, 1)[..., None]) * inv * msk
        dv = np.einsum("bhij,bihc->bjhc", a * inv, g)
        ob = (np.einsum("bhij,bjhc->bihc", absA, np.abs(v))
              + absA.sum(-1).transpose(0, 2, 1)[..., None] * np.abs(out)) / np.abs(dd)[..., None]
        wb = (gv_abs + (np.abs(g) * np.abs(out)).sum(-1).transpose(0, 2, 1)[..., None]) * np.abs(inv) * msk
        dvb = np.einsum("bhij,bihc->bjhc", absA * np.abs(inv), np.abs(g))
    else:
        out = num
        w = np.einsum("bihc,bjhc->bhij", g, v) * msk
        dv = np.einsum("bhij,bihc->bjhc", a, g)
        ob = np.einsum("bhij,bjhc->bihc", absA, np.abs(v))
        wb = gv_abs * msk
        dvb = np.einsum("bhij,bihc->bjhc", absA, np.abs(g))
    dq = chq(np.einsum("bhij,bjhr->bihr", w, pk))
    dk = chk_(np.einsum("bhij,bihr->bjhr", w, pq))
    dqb = absq(np.einsum("bhij,bjhr->bihr", wb, ak))
    dkb = absk(np.einsum("bhij,bihr->bjhr", wb, aq))
    return out, dq, dk, dv, den, (ob, dqb, dkb, dvb)


def np_softmax(q, k, v, g, mode="causal", segments=None, window=None, scale=None):
    """(out, dq, dk, dv) and their rounding-error scales, as np_linear."""
    q, k, v, g = (np.asarray(x, np.float64) for x in (q, k, v, g))
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    msk = np_mask(q.shape[1], mode, segments, window)
    sc = np.where(msk, np.einsum("bihd,bjhd->bhij", q, k) * s, -np.inf)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out = np.einsum("bhij,bjhc->bihc", p, v)
    dp = np.einsum("bihc,bjhc->bhij", g, v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = s * np.einsum("bhij,bjhd->bihd", ds, k)
    dk = s * np.einsum("bhij,bihd->bjhd", ds, q)
    dv = np.einsum("bhij,bihc->bjhc", p, g)
    ob = np.einsum("bhij,bjhc->bihc", p, np.abs(v)) + np.abs(out)
    wb = p * (np.einsum("bihc,bjhc->bhij", np.abs(g), np.abs(v))
              + (np.abs(g) * np.abs(out)).sum(-1).transpose(0, 2, 1)[..., None])
    bq = s * np.einsum("bhij,bjhd->bihd", wb, np.abs(k))
    bk = s * np.einsum("bhij,bihd->bjhd", wb, np.abs(q))
    bv = np.einsum("bhij,bihc->bjhc", p, np.abs(g))
    # the exponentials' arguments (|scores| up to smax) add smax u of relative error to p
    smax = float(np.abs(np.where(np.isfinite(sc), sc, 0)).max())
    return out, dq, dk, dv, (ob, bq, bk, bv), smax


U = {np.dtype(np.float64): 2.0 ** -53, np.dtype(np.float32): 2.0 ** -24}


def close_rows(got, want, bound, F, dtype, what):
    """Row by row: every entry within tol = (2 u_dtype + 2 u_64) F bound, where bound is the
    entry's sum of absolute values of the terms (np_linear) and F counts the operations a
    value goes through (L keys, r features, dk, dv, and the exponentials' arguments): twice
    the first-order worst case of the engine in its dtype plus that of the float64 reference.
    (The same model as tests/python/_common.py's, which test_torch_forward.py explains.)"""
    got = np.asarray(got, np.float64)
    tol = (2 * U[np.dtype(dtype)] + 2 * U[np.dtype(np.float64)]) * F * bound + 1e-300
    r = (np.abs(got - want) / tol).max(-1)
    idx = np.unravel_index(np.argmax(r), r.shape)
    rel = np.linalg.norm(got[idx] - want[idx]) / max(np.linalg.norm(want[idx]), 1e-300)
    chk.check(np.isfinite(got).all() and r.max() <= 1.0 and got.shape == want.shape,
              "%s: row %s error / tolerance %.3g (row relative error %.3g; shape %s vs %s)"
              % (what, tuple(int(i) for i in idx), r.max(), rel, got.shape, want.shape))


def lin_F(name, q, k, om):
    """The operation count of the error model: L + r + dk + dv + 10, and for favor+ twice
    (dk + 2) times the largest exponent argument sum_d |omega_d x~_d| + |x~|^2 / 2."""
    r = {"favor+": M}.get(name, q.shape[-1])
    E = 0.0
    if name == "favor+":
        for x in (q, k):
            xt = np.asarray(x, np.float64) / q.shape[-1] ** 0.25
            E = max(E, (DK + 2) * float((np.einsum("blhd,hmd->blhmd", np.abs(xt), np.abs(om)).sum(-1).max(-1)
                                         + 0.5 * (xt * xt).sum(-1)).max()))
    return L + r + q.shape[-1] + DV + 2 * E + 10


def data(name, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    if name == "relu":
        def rl():
            x = (0.1 + 0.8 * np.abs(rng.standard_normal((B, L, H, DK)))) * np.sign(rng.standard_normal((B, L, H, DK)))
            x[..., 0] = np.abs(x[..., 0])
            return x
        q, k = rl(), rl()
    elif name == "identity":
        q, k = 1 + 0.3 * rng.standard_normal((2, B, L, H, DK))
    elif name == "precomputed":
        q, k = 0.2 + rng.random((2, B, L, H, 5))
    else:
        q, k = 0.7 * rng.standard_normal((2, B, L, H, DK))
    v, g = rng.standard_normal((2, B, L, H, DV))
    return tuple(np.ascontiguousarray(x, dtype=dtype) for x in (q, k, v, g))


def group_linear():
    om = np.random.default_rng(1).standard_normal((H, M, DK))
    for name in ("elu1", "relu", "identity", "favor+", "precomputed"):
        chk.start("numpy attention/attention_backward: %s (modes, segments, windows, add, unnormalized)" % name)
        kw = dict(feature_map=name)
        if name == "favor+":
            kw.update(features=M, projection=om)
        if name == "identity":
            kw["allow_signed"] = True
        for dtype in (np.float64, np.float32):
            q, k, v, g = data(name, 4, dtype)
            cases = [dict(mode="causal"), dict(mode="bidirectional"), dict(mode="causal", segments=SEG),
                     dict(mode="bidirectional", segments=SEG), dict(mode="causal", window=3),
                     dict(mode="causal", window=1, segments=SEG), dict(mode="causal", normalize=False),
                     dict(mode="bidirectional", normalize=False, segments=SEG),
                     dict(mode="causal", denominator="add:0.5")]
            for c in cases:
                c = dict(c)
                pol = c.pop("denominator", None)
                add = float(pol.split(":")[1]) if pol else None
                ref = np_linear(name, q, k, v, g, om, add=add, **c)
                call = dict(kw, **c)
                if pol:
                    call["denominator"] = pol
                lab = "%s %s %s" % (name, np.dtype(dtype).name, c)
                out = NA(q, k, v, **call)
                chk.check(out.dtype == dtype, "%s: output dtype %s" % (lab, out.dtype))
                F = lin_F(name, q, k, om)
                close_rows(out, ref[0], ref[5][0], F, dtype, lab + " out")
                grads = NB(q, k, v, g, **call)
                chk.check(isinstance(grads, tuple) and len(grads) == 3 and all(x.dtype == dtype for x in grads),
                          "%s: attention_backward returns %r" % (lab, [getattr(x, "dtype", x) for x in grads]))
                for x, want, bnd, n in zip(grads, ref[1:4], ref[5][1:], ("dq", "dk", "dv")):
                    close_rows(x, want, bnd, F, dtype, "%s %s" % (lab, n))
            # one sequence as [L, H, d]: the same as the batch's entry
            for b in range(B):
                one = [np.ascontiguousarray(x[b]) for x in (q, k, v, g)]
                o1 = NA(*one[:3], segments=SEG, **kw)
                ob = NA(q, k, v, segments=SEG, **kw)[b]
                ref = np_linear(name, *(x[None] for x in one), om, segments=SEG)
                F = lin_F(name, q, k, om)
                chk.check(o1.shape == (L, H, DV), "%s [L, H, d] entry %d: shape %s" % (name, b, o1.shape))
                close_rows(o1[None], ob[None], 2 * ref[5][0], F, dtype, "%s [L, H, d] = entry %d" % (name, b))
                d1 = NB(*one, segments=SEG, **kw)
                chk.check(all(x.shape == y.shape[1:] for x, y in zip(d1, ref[1:4])),
                          "%s [L, H, d] backward shapes %s" % (name, [x.shape for x in d1]))
                for x, want, bnd, n in zip(d1, ref[1:4], ref[5][1:], ("dq", "dk", "dv")):
                    close_rows(x[None], want, bnd, F, dtype, "%s [L, H, d] %s" % (name, n))


def group_softmax():
    chk.start("numpy softmax_attention / softmax_attention_backward (modes, segments, windows, [L, H, d])")
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, B, L, H, DK))
    v, g = rng.standard_normal((2, B, L, H, DV))
    for dtype in (np.float64, np.float32):
        xs = [np.ascontiguousarray(x, dtype) for x in (q, k, v, g)]
        for c in (dict(mode="causal"), dict(mode="bidirectional"), dict(mode="causal", segments=SEG),
                  dict(mode="bidirectional", segments=SEG), dict(mode="causal", window=4),
                  dict(mode="causal", window=2, segments=SEG), dict(mode="causal", scale=0.2)):
            ref = np_softmax(*xs, **c)
            lab = "softmax %s %s" % (np.dtype(dtype).name, c)
            out = NS(*xs[:3], **c)
            chk.check(out.dtype == dtype, "%s: dtype %s" % (lab, out.dtype))
            F = L + DK + DV + 2 * (DK + 2) * ref[5] + 10
            close_rows(out, ref[0], ref[4][0], F, dtype, lab + " out")
            grads = NSB(*xs, **c)
            chk.check(all(x.dtype == dtype for x in grads), "%s: gradient dtypes" % lab)
            for x, want, bnd, n in zip(grads, ref[1:4], ref[4][1:], ("dq", "dk", "dv")):
                close_rows(x, want, bnd, F, dtype, "%s %s" % (lab, n))
        one = [np.ascontiguousarray(x[1]) for x in xs]
        o1 = NS(*one[:3], segments=SEG)
        d1 = NSB(*one, segments=SEG)
        ref = np_softmax(*(x[None] for x in one), segments=SEG)
        chk.check(o1.shape == (L, H, DV) and all(x.shape == y.shape[1:] for x, y in zip(d1, ref[1:4])),
                  "softmax [L, H, d] shapes %s %s" % (o1.shape, [x.shape for x in d1]))
        F = L + DK + DV + 2 * (DK + 2) * ref[5] + 10
        close_rows(o1[None], ref[0], ref[4][0], F, dtype, "softmax [L, H, d] out")
        for x, want, bnd, n in zip(d1, ref[1:4], ref[4][1:], ("dq", "dk", "dv")):
            close_rows(x[None], want, bnd, F, dtype, "softmax [L, H, d] %s" % n)


def group_no_copy():
    chk.start("inputs are not copied: unchanged, read-only and offset views work, bad layouts refused")
    q, k, v, g = data("elu1", 9)
    keep = [x.copy() for x in (q, k, v, g)]
    NA(q, k, v, segments=SEG)
    NB(q, k, v, g, segments=SEG)
    NS(q, k, v)
    NSB(q, k, v, g)
    chk.check(all(np.array_equal(a, b) for a, b in zip(keep, (q, k, v, g))), "a call changed its inputs")
    # read-only inputs: the engine only reads them
    ro = [x.copy() for x in (q, k, v, g)]
    for x in ro:
        x.flags.writeable = False
    try:
        o = NA(*ro[:3])
        d = NB(*ro)
        chk.check(np.allclose(o, NA(q, k, v), rtol=0, atol=0) and np.isfinite(d[0]).all(),
                  "read-only inputs: different result")
    except Exception as e:  # noqa: BLE001
        chk.check(False, "read-only inputs refused: %s: %s" % (type(e).__name__, e))
    # a contiguous view with an offset (the data pointer is not the base's): entry 1 alone
    o_view = NA(q[1:], k[1:], v[1:])
    o_copy = NA(q[1:].copy(), k[1:].copy(), v[1:].copy())
    chk.check(np.array_equal(o_view, o_copy), "offset view q[1:] gives another result than its copy")
    # the output is a new array each call (not a view of an input)
    o1 = NA(q, k, v)
    chk.check(not np.shares_memory(o1, q) and not np.shares_memory(o1, v), "output shares memory with an input")
    # refused, not copied: non-contiguous (a transpose, a strided slice, Fortran order), byte-swapped
    qt = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    bad = [("transposed q", lambda: NA(qt, k, v)),
           ("strided v", lambda: NA(q[:, ::1, :, :], k, np.ascontiguousarray(np.repeat(v, 2, axis=-1))[..., ::2])),
           ("Fortran-order k", lambda: NA(q, np.asfortranarray(k), v)),
           ("transposed grad_out", lambda: NB(q, k, v, np.ascontiguousarray(g.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3))),
           ("transposed q (softmax)", lambda: NS(qt, k, v)),
           ("big-endian float64", lambda: NA(q.astype(">f8"), k.astype(">f8"), v.astype(">f8")))]
    for name, call in bad:
        try:
            r = call()
            chk.check(False, "%s: accepted (returned %s, finite %s)" % (name, type(r).__name__,
                                                                      bool(np.isfinite(np.asarray(r)).all())))
        except linattn.InputError as e:
            chk.check(isinstance(e, ValueError) and ("contiguous" in str(e) or "dtype" in str(e)),
                      "%s: message %r" % (name, str(e)))
        except Exception as e:  # noqa: BLE001
            chk.check(False, "%s: %s instead of InputError: %s" % (name, type(e).__name__, e))
    # threads: the same result with 1 and 2 threads
    a1 = NA(q, k, v, threads=1, segments=SEG)
    a2 = NA(q, k, v, threads=2, segments=SEG)
    chk.check(np.allclose(a1, a2, rtol=1e-12, atol=0), "threads=1 vs threads=2 differ by %.3g" % np.abs(a1 - a2).max())


def group_stats():
    chk.start("numpy: last_stats() after attention and attention_backward")
    q, k, v, g = data("elu1", 12)
    NA(q, k, v, mode="bidirectional")
    st = linattn.last_stats()
    ref = np_linear("elu1", q, k, v, g, mode="bidirectional")[4]
    chk.check(st.get("pass") == "forward" and st.get("rows") == B * L * H
              and abs(st["min"] / ref.min() - 1) < 1e-12 and abs(st["max"] / ref.max() - 1) < 1e-12,
              "stats %r vs reference min %r max %r" % (st, ref.min(), ref.max()))
    NB(q, k, v, g)
    st = linattn.last_stats()
    chk.check(st.get("pass") == "backward" and st.get("rows") == B * L * H, "backward stats %r" % st)


def main():
    group_linear()
    group_softmax()
    group_no_copy()
    group_stats()
    chk.finish()


if __name__ == "__main__":
    main()
