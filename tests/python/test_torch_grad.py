#!/usr/bin/python3
"""linattn.torch: torch.autograd.gradcheck (float64 finite differences against the engine's
backward) of attention for every map of linattn.feature_maps, both modes, every denominator
policy, normalize=False, segments and causal windows, on a batch of two different entries;
relu rows whose denominator is exactly 0 (zero-empty: zeros and a smooth gradient; error:
DenominatorError); and of softmax_attention in both modes, with segments and a window.

Shapes are tiny (B = 2, L = 9..13, H = 2, dk = 3, dv = 2, a few features) so that every
gradcheck takes a fraction of a second. The data keep finite differences away from kinks:
relu and dpfp entries are >= 0.1 from 0, clamp's E is far from every denominator (1e-3 below
all of them, or above all of them so the clamp is active on every row), and the signed maps
(identity, trig, with allow_signed) get data whose denominators are far from 0.

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_torch_grad.py      (exit 77: torch missing)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.need(torch_too=True)
import torch  # noqa: E402

import linattn  # noqa: E402
import linattn.torch as lt  # noqa: E402

torch.set_num_threads(1)   # tiny shapes: one thread (OpenMP wake-ups dominate a call otherwise)
chk = C.Checks("test_torch_grad")
MAPS = list(linattn.feature_maps)
B, H, DK, DV = 2, 2, 3, 2
GC = dict(eps=1e-6, atol=1e-6, rtol=1e-4)


def gradcheck(fn, xs, what, fast=False):
    """gradcheck that reports instead of raising. fast: torch's fast_mode (the Jacobian
    projected on random vectors: one backward and one finite difference per input instead of
    one per entry), used for the many variants so that the file runs in seconds; the full
    Jacobian is checked for every map's plain causal and bidirectional calls, relu's zero
    rows and softmax."""
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    try:
        ok = torch.autograd.gradcheck(fn, xs, fast_mode=fast, **GC)
        err = ""
    except Exception as e:  # noqa: BLE001 - GradcheckError or the binding's own error
        ok, err = False, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
        msg = str(e)
        if "numerical" in msg:
            # keep the numbers' first lines: they show which input and how far
            err += " | " + " ".join(msg.split())[:400]
    chk.check(ok, "%s: gradcheck failed %s" % (what, err))
    return ok


def draw(name, L, seed, mode, segments=None, window=None):
    """Inputs whose quadratic-form denominators are far from 0 (redrawn otherwise)."""
    for t in range(40):
        q, k, v, _ = C.inputs(name, B, L, H, DK, DV, seed + 7919 * t, r_pre=4)
        a, rk = C.kwargs_for(name, DK, H, seed)
        ok, ref = C.well_conditioned(name, q, k, mode, rk["omega"], rk["features"], segments, window)
        if ok:
            return (q, k, v), a, ref
    raise RuntimeError("no well-conditioned draw for %s" % name)


def attn(kw):
    return lambda q, k, v: lt.attention(q, k, v, **kw)


def group_map(name):
    chk.start("gradcheck %s: policies, normalize=False, segments, windows, both modes" % name)
    L = 11
    seg = [0, 4, 9, L]
    for mode in ("causal", "bidirectional"):
        xs, a, ref = draw(name, L, 1, mode)
        dmax = float(ref["den"].max())
        pols = ["error", "add:1e-3", "clamp:1e-3", "zero-empty", "clamp:%r" % (4 * dmax)]
        if mode == "bidirectional":
            pols = ["error", "add:1e-3", "clamp:%r" % (4 * dmax)]
        if float(ref["den"].min()) <= 1e-2:
            pols.remove("clamp:1e-3")   # would sit near its kink
        for pol in pols:
            gradcheck(attn(dict(a, mode=mode, denominator=pol)), xs, "%s %s %s" % (name, mode, pol),
                      fast=pol != "error")
        un = dict(a, mode=mode, normalize=False)
        un.pop("allow_signed", None)
        gradcheck(attn(un), xs, "%s %s normalize=False" % (name, mode), fast=True)
        xs, a, _ = draw(name, L, 2, mode, seg)
        gradcheck(attn(dict(a, mode=mode, segments=seg)), xs, "%s %s segments=%s" % (name, mode, seg),
                  fast=True)
    for W, sg in ((1, None), (3, seg), (L + 2, None)):
        xs, a, _ = draw(name, L, 3, "causal", sg, W)
        gradcheck(attn(dict(a, window=W, segments=sg)), xs,
                  "%s causal window=%d segments=%s" % (name, W, sg), fast=W != 3)


def group_relu_zero():
    chk.start("relu with denominators exactly 0: zero-empty zeros + gradcheck; error raises")
    L = 9
    q, k, v, _ = C.inputs("relu", B, L, H, DK, DV, 31)
    q[0, 5, 1] = -q[0, 5, 1].abs()          # phi(q) = 0: den = 0 whatever it reads
    k[1, 0:2, 0] = -k[1, 0:2, 0].abs()      # causal rows 0, 1 of (batch 1, head 0) read only these
    for mode in ("causal", "bidirectional"):
        kw = dict(feature_map="relu", mode=mode)
        out = lt.attention(q, k, v, denominator="zero-empty", **kw)
        zrows = [(0, 5, 1)] + ([(1, 0, 0), (1, 1, 0)] if mode == "causal" else [])
        for b, t, h in zrows:
            chk.check(bool((out[b, t, h] == 0).all()), "%s zero-empty: row (%d, %d, %d) = %s, not 0"
                      % (mode, b, t, h, out[b, t, h].tolist()))
        others = out.abs().sum(-1) > 0
        chk.check(int((~others).sum()) == len(zrows), "%s zero-empty: %d zero rows, want %d"
                  % (mode, int((~others).sum()), len(zrows)))
        chk.check(bool(torch.isfinite(out).all()), "%s zero-empty: non-finite output" % mode)
        gradcheck(attn(dict(kw, denominator="zero-empty")), (q, k, v), "relu %s zero-empty" % mode)
        gradcheck(attn(dict(kw, denominator="add:1e-3")), (q, k, v), "relu %s add:1e-3" % mode)
        gradcheck(attn(dict(kw, normalize=False)), (q, k, v), "relu %s normalize=False" % mode)
        try:
            lt.attention(q, k, v, denominator="error", **kw)
            chk.check(False, "relu %s error policy: no exception on zero denominators" % mode)
        except linattn.DenominatorError as e:
            n = len(zrows)
            want = "first at (batch 0, token 5, head 1)"   # smallest (batch, token), then head
            chk.check(want in str(e) and ("%d of %d rows" % (n, B * L * H)) in str(e)
                      and isinstance(e, ArithmeticError),
                      "relu %s error policy: message %r (want %r and '%d of %d rows')"
                      % (mode, str(e), want, n, B * L * H))


def group_softmax():
    chk.start("gradcheck softmax_attention: both modes, segments, windows")
    L = 11
    seg = [0, 4, 9, L]
    gen = torch.Generator().manual_seed(9)
    xs = [torch.randn(B, L, H, d, generator=gen, dtype=torch.float64) for d in (DK, DK, DV)]
    for mode, sg, W in (("causal", None, None), ("bidirectional", None, None),
                        ("causal", seg, None), ("bidirectional", seg, None), ("causal", None, 3),
                        ("causal", seg, 2), ("causal", None, 1)):
        gradcheck(lambda q, k, v: lt.softmax_attention(q, k, v, mode=mode, segments=sg, window=W),
                  xs, "softmax %s segments=%s window=%s" % (mode, sg, W))
    gradcheck(lambda q, k, v: lt.softmax_attention(q, k, v, mode="causal", scale=0.3), xs,
              "softmax causal scale=0.3")


def main():
    for m in ("taylor2", "dpfp"):
        if m not in MAPS:
            print("note: feature map %s is not in linattn.feature_maps yet: not gradchecked" % m)
    for name in MAPS:
        group_map(name)
    group_relu_zero()
    group_softmax()
    chk.finish()


if __name__ == "__main__":
    main()
