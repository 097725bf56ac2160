#!/usr/bin/python3
"""linattn.torch: values and gradients against the independent float64 quadratic form.

For every map of linattn.feature_maps (taylor2 and dpfp when the library has them), both
modes, with and without segments, with causal windows, normalized and not, every denominator
policy, in float64 and float32: the output and the gradients of sum(out * G) equal the
autograd of the quadratic torch form (_common.reference) ROW BY ROW, within a tolerance derived
from each row's rounding-error scale (_common.error_bounds explains it). Ill-conditioned data:
favor maps on 3 N(0,1) inputs (large exponents), signed maps with add:0 on rows whose
denominators cancel. Also: batch entries are independent (a batch equals the per-entry calls),
softmax_attention against torch's own masked softmax, LinearAttention's projection buffer and
its redraws, and linattn.last_stats() against the reference's denominators.

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_torch_forward.py      (exit 77: torch missing)
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.need(torch_too=True)
import torch  # noqa: E402

import linattn  # noqa: E402
import linattn.torch as lt  # noqa: E402

torch.set_num_threads(2)
chk = C.Checks("test_torch_forward")
DT = {"f32": torch.float32, "f64": torch.float64}
MAPS = list(linattn.feature_maps)
H, DK, DV = 2, 4, 3


def draw(name, B, L, seed, mode, segments, window, normalize, policy, big=False):
    """Inputs whose rows all have den > 0 without severe cancellation (C.well_conditioned),
    redrawn with another seed otherwise; the large-input cases of the positive kernels are
    taken as drawn (their den > 0 in exact arithmetic; their conditioning is the point)."""
    for t in range(40):
        q, k, v, g = C.inputs(name, B, L, H, DK, DV, seed + 7919 * t, big=big)
        a, rk = C.kwargs_for(name, DK, H, seed)
        if not normalize or policy not in ("error", "zero-empty"):
            return q, k, v, g, a, rk
        ok, _ = C.well_conditioned(name, q, k, mode, rk["omega"], rk["features"], segments, window)
        if ok or (big and name in ("favor+", "favor+orf", "favor-hyp", "taylor2")):
            return q, k, v, g, a, rk    # positive kernels: no violated row; big data may cancel
    raise RuntimeError("no well-conditioned draw for %s" % name)


def run(name, dtype, q, k, v, g, a, rk, label, *, mode="causal", segments=None, window=None,
        normalize=True, policy="error", grads=True, tape=True):
    """One engine call (forward and backward) against the reference, row by row. tape=False:
    the backward replays the forward (causal calls use the tape by default)."""
    dt = DT[dtype]
    tq, tk, tv = (x.to(dt).detach().requires_grad_(grads) for x in (q, k, v))
    tg = g.to(dt)
    kw = dict(a, mode=mode, segments=segments, window=window, normalize=normalize,
              denominator=policy, tape=tape)
    out = lt.attention(tq, tk, tv, **kw)
    chk.check(out.dtype == dt and tuple(out.shape) == tuple(v.shape),
              "%s: output dtype/shape %s %s" % (label, out.dtype, tuple(out.shape)))
    stats = linattn.last_stats()
    if grads:
        out.backward(tg)
    # the reference gets the SAME (rounded) inputs, in float64
    ref = C.reference(name, tq, tk, tv, tg if grads else None, omega=rk["omega"],
                      features=rk["features"], scale=kw.get("scale"), mode=mode,
                      normalize=normalize, policy=policy, segments=segments, window=window)
    bnd, F = C.error_bounds(name, tq, tk, tv, tg, ref, omega=rk["omega"], features=rk["features"],
                            scale=kw.get("scale"), normalize=normalize, policy=policy)
    C.row_check(out, ref["out"], bnd["out"], F, dtype, label + " out", chk)
    if grads:
        for n, x in (("dq", tq), ("dk", tk), ("dv", tv)):
            C.row_check(x.grad, ref[n], bnd[n], F, dtype, label + " " + n, chk)
    return out, ref, stats


def note_missing():
    for m in ("taylor2", "dpfp"):
        if m not in MAPS:
            print("note: feature map %s is not in linattn.feature_maps yet: not tested" % m)


# ---------------------------------------------------------------------------------------------
def group_maps():
    L, B = 13, 2
    seg = [0, 4, 9, L]
    for name in MAPS:
        chk.start("maps: %s, both modes, segments, windows, f64 and f32" % name)
        for mode in ("causal", "bidirectional"):
            masks = [(None, None), (seg, None)]
            if mode == "causal":
                masks += [(None, 1), (seg, 3), (None, L)]
            for segments, window in masks:
                q, k, v, g, a, rk = draw(name, B, L, 11, mode, segments, window, True, "error")
                for dtype in ("f64", "f32"):
                    lab = "%s %s seg=%s W=%s" % (name, mode, segments, window)
                    run(name, dtype, q, k, v, g, a, rk, lab, mode=mode, segments=segments,
                        window=window)


def group_unnormalized():
    L, B = 11, 2
    for name in MAPS:
        chk.start("normalize=False: %s (signed maps without allow_signed)" % name)
        for mode in ("causal", "bidirectional"):
            q, k, v, g, a, rk = draw(name, B, L, 5, mode, None, None, False, "error")
            a = dict(a)
            a.pop("allow_signed", None)
            seg = [0, 3, L]
            for dtype in ("f64", "f32"):
                run(name, dtype, q, k, v, g, a, rk, "%s %s" % (name, mode), mode=mode,
                    segments=seg, normalize=False)


def group_policies():
    L, B = 10, 2
    chk.start("policies add:1e-3, clamp (active and not), zero-empty (elu1, favor+, identity)")
    for name in ("elu1", "favor+", "identity"):
        for mode in ("causal", "bidirectional"):
            q, k, v, g, a, rk = draw(name, B, L, 3, mode, None, None, True, "error")
            ref = C.reference(name, q, k, v, omega=rk["omega"], features=rk["features"], mode=mode)
            # an E strictly between the two middle denominators: clamp is active on half the
            # rows, and no row sits on its kink (den == E, where either side's gradient is valid)
            ds = ref["den"].flatten().sort().values
            dmed = float(ds[ds.numel() // 2 - 1] + ds[ds.numel() // 2]) / 2
            for pol in ("add:1e-3", "clamp:1e-3", "clamp:%r" % dmed, "zero-empty", "add:%r" % dmed):
                for dtype in ("f64", "f32"):
                    run(name, dtype, q, k, v, g, a, rk, "%s %s %s" % (name, mode, pol), mode=mode,
                        policy=pol)

    chk.start("relu rows with den exactly 0: zero-empty zeroes them; add:1e-3")
    for mode in ("causal", "bidirectional"):
        q, k, v, g = relu_zero_rows(B, L)
        a, rk = C.kwargs_for("relu", DK, H)
        for pol in ("zero-empty", "add:1e-3", "clamp:0.5"):
            for dtype in ("f64", "f32"):
                out, ref, st = run("relu", dtype, q, k, v, g, a, rk, "relu %s %s" % (mode, pol),
                                   mode=mode, policy=pol)
                if pol == "zero-empty":
                    chk.check(bool((out[0, 5, 1] == 0).all()),
                              "relu %s zero-empty: row (0, 5, 1) is %s, not zeros" % (mode, out[0, 5, 1]))
                    nz = int((ref["den"] == 0).sum())
                    chk.check(st.get("count_nonpositive") == nz and st.get("violations") == 0,
                              "relu %s zero-empty stats: count_nonpositive %s (want %d), violations %s"
                              % (mode, st.get("count_nonpositive"), nz, st.get("violations")))


def relu_zero_rows(B, L):
    """relu data (column 0 positive, all entries >= 0.1 from 0) with den exactly 0 in:
    q row (batch 0, token 5, head 1) all negative; keys (batch 1, tokens 0-1, head 0) all
    negative (causal: rows 0 and 1 of that head read only them)."""
    q, k, v, g = C.inputs("relu", B, L, H, DK, DV, 21)
    q[0, 5, 1] = -q[0, 5, 1].abs()
    k[1, 0:2, 0] = -k[1, 0:2, 0].abs()
    return q, k, v, g


def group_ill_conditioned():
    L, B = 17, 2
    seg = [0, 4, 9, L]
    chk.start("ill-conditioned: favor maps on q, k ~ 3 N(0,1) (f32 and f64, both modes)")
    for name in ("favor+", "favor+orf", "favor-hyp"):
        if name not in MAPS:
            continue
        for mode in ("causal", "bidirectional"):
            q, k, v, g, a, rk = draw(name, B, L, 9, mode, seg, None, True, "error", big=True)
            for dtype in ("f32", "f64"):
                run(name, dtype, q, k, v, g, a, rk, "%s big %s" % (name, mode), mode=mode,
                    segments=seg)
                if mode == "causal":  # the replay, as the tape above
                    run(name, dtype, q, k, v, g, a, rk, "%s big %s tape=False" % (name, mode),
                        mode=mode, segments=seg, tape=False)
                if mode == "causal":
                    run(name, dtype, q, k, v, g, a, rk, "%s big %s W=5" % (name, mode), mode=mode,
                        segments=seg, window=5)
                run(name, dtype, q, k, v, g, a, rk, "%s big %s unnormalized" % (name, mode),
                    mode=mode, segments=seg, normalize=False)

    if "taylor2" in MAPS:
        chk.start("ill-conditioned: taylor2 on 3 N(0,1) (t^2/2 dominates, signed features cancel)")
        for mode in ("causal", "bidirectional"):
            q, k, v, g, a, rk = draw("taylor2", B, L, 6, mode, seg, None, True, "error", big=True)
            for dtype in ("f32", "f64"):
                run("taylor2", dtype, q, k, v, g, a, rk, "taylor2 big %s" % mode, mode=mode, segments=seg)
                run("taylor2", dtype, q, k, v, g, a, rk, "taylor2 big %s unnormalized" % mode, mode=mode,
                    segments=seg, normalize=False)
    else:
        print("note: taylor2 not in linattn.feature_maps: its large-input case is not run")

    chk.start("cancellation: identity and trig with allow_signed, add:0, N(0,1) inputs")
    for name in ("identity", "trig"):
        for mode in ("causal", "bidirectional"):
            gen = torch.Generator().manual_seed(4)
            s = 1.0 if name == "identity" else 0.8
            q, k, v, g = (s * torch.randn(B, L, H, d, generator=gen, dtype=torch.float64)
                          for d in (DK, DK, DV, DV))
            a, rk = C.kwargs_for(name, DK, H)
            for dtype in ("f32", "f64"):
                out, ref, _ = run(name, dtype, q, k, v, g, a, rk, "%s %s add:0" % (name, mode),
                                  mode=mode, policy="add:0")
                if mode == "causal":  # the replay, as the tape above
                    run(name, dtype, q, k, v, g, a, rk, "%s %s add:0 tape=False" % (name, mode),
                        mode=mode, policy="add:0", tape=False)
            den = ref["den"].abs()
            print("    (%s %s: |den| from %.2g to %.2g: rows with cancellation are checked "
                  "against their own error scale)" % (name, mode, float(den.min()), float(den.max())))


def group_batch():
    chk.start("batch entries independent: a batch of 3 equals the 3 single calls")
    L, B = 12, 3
    seg = [0, 5, L]
    for name in ("elu1", "favor+", "trig", "relu"):
        for mode in ("causal", "bidirectional"):
            for window in ((None, 4) if mode == "causal" else (None,)):
                q, k, v, g, a, rk = draw(name, B, L, 8, mode, seg, window, True, "error")
                kw = dict(a, mode=mode, segments=seg, window=window)
                for dtype in ("f64", "f32"):
                    dt = DT[dtype]
                    xs = [x.to(dt) for x in (q, k, v)]
                    full = lt.attention(*xs, **kw)
                    parts = torch.cat([lt.attention(*(x[b:b + 1].contiguous() for x in xs), **kw)
                                       for b in range(B)])
                    # per-entry outputs against the reference's bound (both are within it)
                    ref = C.reference(name, *xs, g, omega=rk["omega"], features=rk["features"],
                                      mode=mode, segments=seg, window=window)
                    bnd, F = C.error_bounds(name, *xs, g, ref, omega=rk["omega"],
                                            features=rk["features"])
                    C.row_check(full, parts.double(), 2 * bnd["out"], F, dtype,
                                "%s %s W=%s batch vs entries" % (name, mode, window), chk)
                    diff = (full[0] - full[1]).abs().max()
                    chk.check(float(diff) > 1e-3, "%s: batch entries 0 and 1 should differ" % name)
                # changing entry 2 leaves entries 0, 1 unchanged
                x2 = [x.clone() for x in (q, k, v)]
                for x in x2:
                    x[2] = x[2].flip(0)
                o1 = lt.attention(q, k, v, **kw)
                o2 = lt.attention(*x2, **kw)
                d = float((o1[:2] - o2[:2]).abs().max())
                chk.check(d <= 1e-13 * float(o1.abs().max()),
                          "%s %s: entries 0-1 changed by %.3g when entry 2 changed" % (name, mode, d))


# ---------------------------------------------------------------------------------------------
def softmax_ref(q, k, v, mode, segments=None, window=None, scale=None):
    """torch's own quadratic softmax: softmax(s q k^T masked with -inf) v, in q's dtype."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    sc = torch.einsum("bihd,bjhd->bhij", q, k) * s
    m = C.mask(q.shape[1], mode, segments, window)
    sc = sc.masked_fill(~m[None, None], float("-inf"))
    p = torch.softmax(sc, -1)
    return torch.einsum("bhij,bjhc->bihc", p, v), p, sc


def group_softmax():
    chk.start("softmax_attention vs torch's masked softmax (f64, f32, modes, segments, windows)")
    B, L = 2, 15
    seg = [0, 4, 9, L]
    gen = torch.Generator().manual_seed(2)
    q, k, v, g = (torch.randn(B, L, H, d, generator=gen, dtype=torch.float64) for d in (DK, DK, DV, DV))
    cases = [("causal", None, None), ("causal", seg, None), ("causal", None, 3), ("causal", seg, 1),
             ("causal", None, L), ("bidirectional", None, None), ("bidirectional", seg, None)]
    for mode, segments, window in cases:
        for dtype in ("f64", "f32"):
            dt = DT[dtype]
            xs = [x.to(dt).detach().requires_grad_(True) for x in (q, k, v)]
            out = lt.softmax_attention(*xs, mode=mode, segments=segments, window=window)
            out.backward(g.to(dt))
            r = [x.detach().double().requires_grad_(True) for x in xs]
            ro, p, sc = softmax_ref(*r, mode, segments, window)
            ro.backward(g.to(dt).double())
            lab = "softmax %s seg=%s W=%s" % (mode, segments, window)
            # forward bound: out_i = sum_j p_ij v_j with p from exp of scores computed in the
            # dtype: each p_ij has relative error ~ (dk + 4 + |score range|) u, and the sum
            # sum_j p_ij (|v_j| + |out_i|) bounds the error of the normalized sum.
            srange = float(sc[torch.isfinite(sc)].abs().max())
            F = L + DK + DV + 2 * srange + 10
            bound = torch.einsum("bhij,bjhc->bihc", p.detach(), r[2].detach().abs()) + ro.detach().abs()
            C.row_check(out, ro.detach(), bound, F, dtype, lab + " out", chk)
            # the backward runs in float64 on the inputs and is rounded once to the dtype:
            # |err| <= u_dtype |ref| (the final rounding) + the float64 rounding-error scale
            # of the gradient (w_ij = p_ij g_i.(v_j - out_i); dq_i = s sum_j w_ij k_j,
            # dk_j = s sum_i w_ij q_i, dv_j = sum_i p_ij g_i), sums of absolute values
            s = 1.0 / math.sqrt(DK)
            P = p.detach()
            ga, va, oa = g.to(dt).double().abs(), r[2].detach().abs(), ro.detach().abs()
            w = P * (torch.einsum("bihc,bjhc->bhij", ga, va) + (ga * oa).sum(-1).permute(0, 2, 1)[..., None])
            b64 = {"dq": s * torch.einsum("bhij,bjhd->bihd", w, r[1].detach().abs()),
                   "dk": s * torch.einsum("bhij,bihd->bjhd", w, r[0].detach().abs()),
                   "dv": torch.einsum("bhij,bihc->bjhc", P, ga)}
            for x, y, n in zip(xs, r, ("dq", "dk", "dv")):
                ref = y.grad
                tol = C.U[dtype] * ref.abs() + 4 * C.U["f64"] * F * b64[n] + 1e-300
                ratio = float(((x.grad.double() - ref).abs() / tol).max())
                chk.check(ratio <= 1.0 and x.grad.dtype == dt,
                          "%s %s %s: error / (rounding + f64 tolerance) = %.3g" % (lab, dtype, n, ratio))


# ---------------------------------------------------------------------------------------------
def group_module():
    chk.start("LinearAttention: projection buffer, redraws, output = attention(projection=...)")
    B, L = 2, 10
    mod = lt.LinearAttention(H, DK, feature_map="favor+", features=8, seed=3)
    chk.check(isinstance(mod.projection, torch.Tensor) and tuple(mod.projection.shape) == (H, 8, DK)
              and mod.projection.dtype == torch.float64,
              "projection buffer: %r" % (getattr(mod.projection, "shape", None),))
    chk.check("projection" in dict(mod.named_buffers()) and "projection" in mod.state_dict(),
              "projection is a registered buffer (named_buffers / state_dict)")
    p0 = mod.projection.clone()
    # the buffer is the projection the engine draws from seed=3
    q, k, v, g = C.inputs("favor+", B, L, H, DK, DV, 5)
    o_seed = lt.attention(q, k, v, feature_map="favor+", features=8, seed=3)
    o_proj = lt.attention(q, k, v, feature_map="favor+", features=8, projection=p0)
    chk.check(torch.allclose(o_seed, o_proj, rtol=1e-14, atol=0),
              "attention(seed=3) differs from attention(projection=LinearAttention(seed=3).projection)"
              " by %.3g" % float((o_seed - o_proj).abs().max()))
    # and the reference with that projection
    ref = C.reference("favor+", q, k, v, omega=p0.numpy())
    chk.check(torch.allclose(o_proj, ref["out"], rtol=1e-10, atol=1e-12),
              "module projection: output vs reference %.3g" % float((o_proj - ref["out"]).abs().max()))
    # module output equals attention(..., projection=module.projection), with gradients
    xs = [x.clone().requires_grad_(True) for x in (q, k, v)]
    om = mod(*xs)
    om.backward(g)
    ys = [x.clone().requires_grad_(True) for x in (q, k, v)]
    oa = lt.attention(*ys, feature_map="favor+", features=8, projection=mod.projection)
    oa.backward(g)
    chk.check(torch.equal(om, oa) and all(torch.equal(a.grad, b.grad) for a, b in zip(xs, ys)),
              "module(q, k, v) != attention(q, k, v, projection=module.projection)")
    # redraws
    mod.redraw_projection()
    p1 = mod.projection.clone()
    chk.check(not torch.equal(p0, p1) and tuple(p1.shape) == (H, 8, DK), "redraw_projection() did not change it")
    o1 = mod(q, k, v)
    chk.check(not torch.allclose(o1, om), "output unchanged after a redraw")
    torch.manual_seed(123)
    mod.redraw_projection()
    a1 = mod.projection.clone()
    mod.redraw_projection()
    a2 = mod.projection.clone()
    torch.manual_seed(123)
    mod.redraw_projection()
    b1 = mod.projection.clone()
    mod.redraw_projection()
    b2 = mod.projection.clone()
    chk.check(torch.equal(a1, b1) and torch.equal(a2, b2) and not torch.equal(a1, a2),
              "redraws after torch.manual_seed(123) are not reproducible")
    mod.redraw_projection(seed=3)
    chk.check(torch.equal(mod.projection, p0), "redraw_projection(seed=3) != the initial seed-3 draw")
    # redraw_interval: every n training-mode calls; never in eval mode
    m2 = lt.LinearAttention(H, DK, feature_map="favor+", features=8, seed=1, redraw_interval=2)
    m2.train()
    seen = []
    for _ in range(5):
        m2(q, k, v)
        seen.append(m2.projection.clone())
    same = [torch.equal(seen[i], seen[i + 1]) for i in range(4)]
    chk.check(same == [True, False, True, False],
              "redraw_interval=2: projection unchanged between calls %s (want [T, F, T, F])" % same)
    m2.eval()
    pe = m2.projection.clone()
    for _ in range(3):
        m2(q, k, v)
    chk.check(torch.equal(pe, m2.projection), "eval mode redrew the projection")
    # a map without a projection
    m3 = lt.LinearAttention(H, DK, feature_map="elu1")
    chk.check(m3.projection is None, "elu1 module: projection should be None")
    o3 = m3(q, k, v)
    chk.check(torch.allclose(o3, lt.attention(q, k, v, feature_map="elu1"), rtol=0, atol=0),
              "elu1 module != attention(feature_map='elu1')")
    # favor+orf: the engine's orthogonal draw -- rows of one block orthogonal
    if "favor+orf" in MAPS:
        m4 = lt.LinearAttention(H, DK, feature_map="favor+orf", features=8, seed=2)
        P = m4.projection[0, :DK]
        G = P @ P.T
        off = float((G - torch.diag(torch.diag(G))).abs().max())
        chk.check(off < 1e-10 * float(torch.diag(G).max()),
                  "favor+orf projection: rows of a block not orthogonal (%.3g)" % off)


def group_stats():
    chk.start("last_stats(): rows, min, max, median against the reference's denominators")
    B, L = 2, 16
    for name in ("elu1", "favor+", "relu", "identity"):
        for mode in ("causal", "bidirectional"):
            q, k, v, g, a, rk = draw(name, B, L, 13, mode, None, None, True, "error")
            xs = [x.clone().requires_grad_(True) for x in (q, k, v)]
            out = lt.attention(*xs, mode=mode, **a)
            st = linattn.last_stats()
            ref = C.reference(name, q, k, v, omega=rk["omega"], features=rk["features"], mode=mode)
            den = ref["den"].flatten().sort().values
            n = den.numel()
            lab = "%s %s" % (name, mode)
            chk.check(st.get("pass") == "forward" and st.get("rows") == B * L * H,
                      "%s: pass %r rows %r (want forward, %d)" % (lab, st.get("pass"), st.get("rows"), B * L * H))
            chk.check(abs(st["min"] - float(den[0])) <= 1e-10 * float(den[0])
                      and abs(st["max"] - float(den[-1])) <= 1e-10 * float(den[-1]),
                      "%s: min/max %r %r, reference %r %r" % (lab, st["min"], st["max"], float(den[0]), float(den[-1])))
            lo, hi = float(den[(n - 1) // 2]), float(den[n // 2])
            step = 2.0 ** (1.0 / 16)   # the histogram's bin: 1/16 octave
            chk.check(lo / step <= st["median"] <= hi * step,
                      "%s: median %r, reference middle rows %r %r (1/16 octave)" % (lab, st["median"], lo, hi))
            chk.check(st["count_nonpositive"] == 0 and st["violations"] == 0 and st["count_nonfinite"] == 0
                      and st["first_bad_token"] == -1,
                      "%s: nonpositive/violations/nonfinite/first_bad %r" % (lab, st))
            small = int((den < 1e-6 * float(den[n // 2])).sum())
            chk.check(st["count_small"] == small, "%s: count_small %r, reference %d" % (lab, st["count_small"], small))
            out.backward(g)
            st2 = linattn.last_stats()
            chk.check(st2.get("pass") == "backward" and st2.get("rows") == B * L * H,
                      "%s: after backward pass %r rows %r" % (lab, st2.get("pass"), st2.get("rows")))
    # f32 min/max: the same rows in float32, relative error of a sum of positive terms
    q, k, v, g, a, rk = draw("elu1", B, L, 13, "causal", None, None, True, "error")
    lt.attention(q.float(), k.float(), v.float(), **a)
    st = linattn.last_stats()
    ref = C.reference("elu1", q.float(), k.float(), v.float())
    tol = 4 * (L + DK) * C.U["f32"]
    chk.check(abs(st["min"] / float(ref["den"].min()) - 1) < tol and abs(st["max"] / float(ref["den"].max()) - 1) < tol,
              "elu1 f32 stats min/max %r %r vs %r %r" % (st["min"], st["max"], float(ref["den"].min()), float(ref["den"].max())))


def main():
    note_missing()
    group_maps()
    group_unnormalized()
    group_policies()
    group_ill_conditioned()
    group_batch()
    group_softmax()
    group_module()
    group_stats()
    chk.finish()


if __name__ == "__main__":
    main()
