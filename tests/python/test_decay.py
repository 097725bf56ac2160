#!/usr/bin/python3
"""decay= (docs/design.md §1.2) in linattn.numpy.attention and linattn.torch.attention, against
a float64 quadratic reference written here: weights gamma_h^|i-j| phi(q_i).phi(k_j) over the
keys each query reads (causal j <= i, or the whole segment), with the maps of _common.phi.
Both modes, elu1, relu, favor+ (explicit projection) and identity (normalize=False), one gamma,
one per head and "retnet", segments, causal windows 7 and 40, float64 (1e-12) and float32 (row by row, 1e-5, on the
same float32 inputs). The backward with decay (both modes, maps without a stabilizer): torch
autograd through the engine against autograd of a float64 quadratic form in torch (elu1, relu,
identity, dpfp, taylor2, segments, a window of 7; 1e-12 in float64, 1e-4 of the largest entry in float32),
and gradcheck in both modes; the stabilized maps' backward is refused (test_bad_input).

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_decay.py      (exit 77: numpy or torch missing)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.need()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import linattn.numpy as ln  # noqa: E402
import linattn.torch as lt  # noqa: E402


def gammas(decay, H):
    if decay == "retnet":
        return [1.0 - 2.0 ** (-5 - h) for h in range(H)]
    return list(decay) if isinstance(decay, (list, tuple)) else [decay] * H


def reference(name, q, k, v, decay, mode, segments, normalize, omega, window=None):
    """[B, L, H, dv] in float64 from float64 [B, L, H, d] arrays."""
    B, L, H, _ = q.shape
    pq = C.phi(name, torch.tensor(q), omega=omega).numpy()
    pk = C.phi(name, torch.tensor(k), omega=omega).numpy()
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    seg = np.zeros(L, dtype=np.int64)
    for o in (segments or [0, L])[1:-1]:
        seg[o:] += 1
    m = (seg[:, None] == seg[None, :]) & ((j <= i) if mode == "causal" else True)
    if window:
        m = m & (i - j < window)
    out = np.zeros((B, L, H, v.shape[-1]))
    for h, g in enumerate(gammas(decay, H)):
        W = np.einsum("bir,bjr->bij", pq[:, :, h], pk[:, :, h]) * (g ** np.abs(i - j)) * m
        num = W @ v[:, :, h]
        out[:, :, h] = num / W.sum(-1)[..., None] if normalize else num
    return out


def main():
    chk = C.Checks("test_decay")
    rng = np.random.default_rng(38)
    B, L, H, dk, dv = 2, 97, 3, 6, 4
    omega = rng.standard_normal((H, 16, dk))
    cases = [("elu1", {}), ("relu", {}), ("favor+", {"features": 16, "projection": omega}),
             ("identity", {"normalize": False})]
    for name, kw in cases:
        off = 1.0 if name == "relu" else 0.0  # relu: no query without features
        q, k = (off + rng.standard_normal((B, L, H, dk)) * (0.5 if off else 0.8) for _ in range(2))
        v = rng.standard_normal((B, L, H, dv))
        for mode in ("causal", "bidirectional"):
            for decay in (0.8, [0.5, 0.9, 1.0], "retnet"):
                for segments, window in [(s, w) for s in (None, [0, 30, 31, L])
                                         for w in ((None, 7, 40) if mode == "causal" else (None,))]:
                    chk.start("%s %s decay=%s%s%s" % (name, mode, decay, " segments" if segments else "",
                                                      " window %d" % window if window else ""))
                    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
                        x = [a.astype(dt) for a in (q, k, v)]
                        ref = reference(name, *(a.astype(np.float64) for a in x), decay, mode,
                                        segments, kw.get("normalize", True), omega, window)
                        got = ln.attention(*x, feature_map=name, mode=mode, decay=decay,
                                           segments=segments, window=window, **kw)
                        err = np.max(np.abs(got - ref), -1) / np.maximum(np.max(np.abs(ref), -1), 1e-300)
                        chk.check(got.dtype == dt and np.all(err <= tol),
                                  "%s: worst row error %.3g > %g" % (dt.__name__, err.max(), tol))
                        if dt == np.float64:  # the torch entry point gives the same bits
                            t = lt.attention(*(torch.tensor(a) for a in x), feature_map=name,
                                             mode=mode, decay=decay, segments=segments,
                                             window=window, **kw)
                            chk.check(np.array_equal(t.numpy(), got), "torch != numpy")
    # the backward with decay (docs/design.md §1.2 "The backward"): causal, maps without a
    # stabilizer; torch autograd through the engine against autograd of the quadratic form
    # written here in torch (float64), on the same inputs; gradcheck on a small case
    gam = [0.9, 0.5, 0.99]

    def tref(name, q, k, v, segments, normalize, features, window=None, mode="causal",
             omega=None, policy="error"):
        pq = C.phi(name, q, features=features, omega=omega)
        pk = C.phi(name, k, features=features, omega=omega)
        i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
        m = (j <= i) if mode == "causal" else torch.ones(L, L, dtype=torch.bool)
        if window:
            m = m & (i - j < window)
        if segments:
            seg = torch.zeros(L, dtype=torch.long)
            for o in segments[1:-1]:
                seg[o:] += 1
            m = m & (seg[:, None] == seg[None, :])
        outs = []
        for h in range(H):
            W = torch.einsum("bir,bjr->bij", pq[:, :, h], pk[:, :, h]) * \
                (gam[h] ** (i - j).abs().double()) * m
            num, den = W @ v[:, :, h], W.sum(-1, keepdim=True)
            if policy.startswith("add:"):
                den = den + float(policy[4:])
            elif policy.startswith("clamp:"):
                den = den.clamp(min=float(policy[6:]))
            outs.append(num / den if normalize else num)
        return torch.stack(outs, 2)

    omb = np.random.default_rng(17).standard_normal((H, 16, dk))
    for name in ("elu1", "relu", "identity", "dpfp", "taylor2", "favor+", "favor-hyp"):
        norm, feats = name != "identity", (1 if name == "dpfp" else None)
        kw = {"features": feats} if feats else {}
        om = omb if name.startswith("favor") else None
        if om is not None:  # the stabilized maps: an explicit projection for the reference
            feats, kw = 16, {"features": 16, "projection": om}
        for segments, window, mode in ((None, None, "causal"), ([0, 30, 31, L], None, "causal"),
                                       ([0, 30, 31, L], 7, "causal"),
                                       (None, None, "bidirectional"),
                                       ([0, 30, 31, L], None, "bidirectional")):
            chk.start("backward %s %s decay=%s%s%s" % (
                name, mode, gam, " segments" if segments else "",
                " window %d" % window if window else ""))
            off = 1.0 if name in ("relu", "dpfp") else 0.0
            g64 = torch.Generator().manual_seed(7)
            q, k = (off + 0.5 * torch.randn(B, L, H, dk, generator=g64, dtype=torch.float64)
                    for _ in range(2))
            v, G = (torch.randn(B, L, H, dv, generator=g64, dtype=torch.float64) for _ in range(2))
            for dt, tol in ((torch.float64, 1e-12), (torch.float32, 1e-4)):
                x = [t.to(dt).detach().clone().requires_grad_() for t in (q, k, v)]
                o = lt.attention(*x, feature_map=name, decay=gam, segments=segments,
                                 normalize=norm, window=window, mode=mode, **kw)
                (o * G.to(dt)).sum().backward()
                xr = [t.to(dt).double().detach().clone().requires_grad_() for t in (q, k, v)]
                ref = tref(name, *xr, segments, norm, feats, window, mode, om)
                (ref * G).sum().backward()
                for what, a_, b_ in zip(("out", "dq", "dk", "dv"), [o] + [t.grad for t in x],
                                        [ref] + [t.grad for t in xr]):
                    e = float((a_.double() - b_).abs().max() / b_.abs().max())
                    chk.check(e <= tol, "%s %s: %.3g > %g" % (dt, what, e, tol))
    # the stabilized maps with rows on log-scales tens of nats apart (row norms 0.3 to 8 times
    # N(0, 1)): the backward's common scales per head (design.md §1.2 "The backward") must
    # hold every row; checked row by row, against the row's own largest entry
    for name in ("favor+", "favor-hyp"):
        for mode, policy, norm in (("causal", "error", True), ("bidirectional", "error", True),
                                   ("causal", "add:0.001", True), ("causal", "clamp:0.05", True),
                                   ("bidirectional", "error", False)):
            chk.start("backward %s %s decay, rows on spread scales, %s%s" % (
                name, mode, policy, "" if norm else " unnormalized"))
            g64 = torch.Generator().manual_seed(23)
            u = [torch.rand(B, L, H, 1, generator=g64, dtype=torch.float64) for _ in range(2)]
            z = [torch.randn(B, L, H, dk, generator=g64, dtype=torch.float64) for _ in range(2)]
            v, G = (torch.randn(B, L, H, dv, generator=g64, dtype=torch.float64) for _ in range(2))
            kw = {"features": 16, "projection": omb}
            # float64 up to 8 (keys ~110 nats apart), float32 up to 3.5 (~40 of its 60)
            for dt, tol, hi in ((torch.float64, 1e-10, 8.0), (torch.float32, 1e-3, 3.5)):
                q, k = (zz * 10 ** (uu * (np.log10(hi) - np.log10(0.3)) + np.log10(0.3))
                        for zz, uu in zip(z, u))
                x = [t.to(dt).detach().clone().requires_grad_() for t in (q, k, v)]
                o = lt.attention(*x, feature_map=name, decay=gam, normalize=norm, mode=mode,
                                 denominator=policy if norm else "error", **kw)
                (o * G.to(dt)).sum().backward()
                xr = [t.to(dt).double().detach().clone().requires_grad_() for t in (q, k, v)]
                ref = tref(name, *xr, None, norm, 16, None, mode, omb, policy)
                (ref * G).sum().backward()
                # out and dv row by row against the row's largest entry (rows down to 1e-48
                # of the largest); dq and dk against max(the row's, 1e-3 of the tensor's): a
                # row of q or k whose keys all give out_i ~ v_j has dq ~ G.(v_j - out_i), a
                # cancellation that neither side resolves below rounding of its terms (seen:
                # reference 3e-33, engine 2.7e-16 of a largest entry 2.5). A wrong scale
                # factor on a row is an error of the row's own size, caught either way above
                # 1e-3 tol of the tensor's largest entry.
                for what, a_, b_ in zip(("out", "dq", "dk", "dv"), [o] + [t.grad for t in x],
                                        [ref] + [t.grad for t in xr]):
                    d, bm = (a_.double() - b_).abs().amax(-1), b_.abs().amax(-1)
                    if what in ("dq", "dk"):
                        bm = bm.clamp(min=1e-3 * float(b_.abs().max()))
                    e = float((d / bm.clamp(min=1e-300)).max())
                    chk.check(a_.dtype == dt and e <= tol, "%s %s: worst row %.3g > %g"
                              % (dt, what, e, tol))
    for mode in ("causal", "bidirectional"):
        chk.start("backward with decay: gradcheck (float64, elu1, segments, %s)" % mode)
        g64 = torch.Generator().manual_seed(9)
        xs = [torch.randn(1, 12, 2, 3, generator=g64, dtype=torch.float64).requires_grad_()
              for _ in range(3)]
        chk.check(torch.autograd.gradcheck(
            lambda a_, b_, c_: lt.attention(a_, b_, c_, decay=[0.8, 0.6], segments=[0, 5, 12],
                                            mode=mode), xs, eps=1e-6, atol=1e-8), "gradcheck")
    chk.start("decay=1.0 is the undecayed operator bitwise")
    x = [rng.standard_normal((B, L, H, d)) for d in (dk, dk, dv)]
    for mode in ("causal", "bidirectional"):
        chk.check(np.array_equal(ln.attention(*x, mode=mode, decay=1.0), ln.attention(*x, mode=mode)),
                  mode)
    chk.finish()


if __name__ == "__main__":
    main()
