#!/usr/bin/python3
"""PyTorch autograd oracle for `linattn grad` (float64, quadratic form).

Claim it serves: the program's dQ, dK, dV equal the autograd gradients of L = sum(out * G),
where out is the QUADRATIC form of the operator (docs/design.md §1-§3): phi built here in
torch from the section-2 definitions, the N x N kernel matrix formed explicitly, masked by an
explicit boolean matrix (causal j <= i, same segment, window i-W < j <= i), then num = A V,
den = A 1 and the named denominator policy applied to the TRUE (unstabilized) den. With
`precomputed` the inputs are phi(Q), phi(K) themselves. The projection is a constant.

Independent of the engine and of reference.py's NumPy code (only its name tuples are used).

CLI (writes PREFIX_out.npy, PREFIX_grad_q.npy, PREFIX_grad_k.npy, PREFIX_grad_v.npy, PREFIX_den.npy):
    torch_oracle.py --q Q --k K --v V --grad-out G --feature-map M [--projection P]
        [--scale S] [--features NU (dpfp)] [--mode causal|bidirectional] [--normalize on|off]
        [--denominator error|add:E|clamp:E|zero-empty] [--segments F] [--window W] --prefix PREFIX
Exit 3 if the denominator policy is violated (as the program would).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import reference as ref  # noqa: E402  (constants only: MAPS, RANDOM_MAPS)

torch.set_default_dtype(torch.float64)


class DenominatorViolation(Exception):
    """The policy rejects some den (count, first token, head)."""


def phi(name, x, omega=None, scale=None, features=None):
    """Feature map of docs/design.md §2 on a torch tensor x [N, H, d] -> [N, H, r]."""
    if name == "taylor2":     # Based: [1, x~, vec(x~ x~^T) / sqrt 2], kernel 1 + t + t^2/2
        s = 1.0 / math.sqrt(x.shape[-1]) if scale is None else float(scale)
        xt = math.sqrt(s) * x
        outer = torch.einsum("nhi,nhj->nhij", xt, xt).reshape(*x.shape[:-1], -1)
        return torch.cat([torch.ones(*x.shape[:-1], 1), xt, outer / math.sqrt(2.0)], -1)
    if name == "dpfp":        # Schlag et al. 2021: rho * roll(rho, j), j = 1..nu
        rho = torch.cat([torch.relu(x), torch.relu(-x)], -1)
        return torch.cat([rho * torch.roll(rho, j, -1) for j in range(1, int(features) + 1)], -1)
    if name == "elu1":
        return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))
    if name == "relu":
        return torch.clamp(x, min=0.0)
    if name in ("identity", "precomputed"):
        return x
    if name not in ref.RANDOM_MAPS:
        raise ValueError(f"unknown map {name}")
    n, h, d = x.shape
    om = torch.as_tensor(np.asarray(omega, dtype=np.float64))
    if om.dim() == 2:
        om = om.expand(h, *om.shape)
    m = om.shape[1]
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    xt = math.sqrt(s) * x                                     # x~ = sqrt(s) x
    proj = torch.einsum("nhd,hmd->nhm", xt, om)               # omega_i . x~
    half_sq = 0.5 * (xt * xt).sum(-1, keepdim=True)           # |x~|^2 / 2
    if name in ("favor+", "favor+orf"):
        return torch.exp(proj - half_sq) / math.sqrt(m)
    if name == "favor-hyp":
        return torch.cat([torch.exp(proj - half_sq), torch.exp(-proj - half_sq)], -1) \
            / math.sqrt(2 * m)
    return torch.exp(half_sq) * torch.cat([torch.cos(proj), torch.sin(proj)], -1) / math.sqrt(m)


def mask(n, mode, segments=None, window=None):
    """Explicit boolean A(i) matrix [N, N]: M[i, j] = query i may read key j."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    if segments is None:
        m = torch.ones(n, n, dtype=torch.bool)
    else:
        seg = np.asarray(segments, dtype=np.int64)
        sid = torch.as_tensor(np.searchsorted(seg, np.arange(n), side="right") - 1)
        m = sid[:, None] == sid[None, :]
    if mode == "causal":
        m = m & (j <= i)
        if window:
            m = m & (j > i - int(window))
    elif mode != "bidirectional" or window:
        raise ValueError(f"mode {mode} with window {window}")
    return m


def parse_policy(policy):
    if policy in ("error", "zero-empty"):
        return policy, None
    kind, _, eps = policy.partition(":")
    if kind not in ("add", "clamp") or not eps:
        raise ValueError(f"unknown policy {policy}")
    return kind, float(eps)


def _violation(bad):
    t, h = (int(x) for x in torch.nonzero(bad)[0])
    return DenominatorViolation(f"{int(bad.sum())} bad denominators, first at token {t}, head {h}")


def operator(pq, pk, v, msk, normalize=True, policy="error", weights=None, fweights=None):
    """Masked quadratic operator on features: returns (out [N,H,dv], den [N,H]); weights
    [H,N,N] multiply the pairs (decay, docs/design.md §1.2), fweights [H,r,N,N] each feature's
    share of them (per-feature gates, §1.2 "Per-feature gates")."""
    if fweights is None:
        a = torch.einsum("ihr,jhr->hij", pq, pk)
    else:
        a = torch.einsum("ihr,jhr,hrij->hij", pq, pk, fweights)
    if weights is not None:
        a = a * weights
    a = torch.where(msk[None], a, torch.zeros((), dtype=a.dtype))   # masked entries exactly 0
    num = torch.einsum("hij,jhd->ihd", a, v)
    den = a.sum(2).T
    if not normalize:
        return num, den
    kind, eps = parse_policy(policy)
    dd = den.detach()
    if kind == "error":
        bad = ~torch.isfinite(dd) | (dd <= 0)
        if bad.any():
            raise _violation(bad)
        return num / den[..., None], den
    if kind == "zero-empty":
        bad = ~torch.isfinite(dd) | (dd < 0)
        if bad.any():
            raise _violation(bad)
        empty = (dd == 0)[..., None]
        safe = torch.where(empty, torch.ones((), dtype=den.dtype), den[..., None])
        return torch.where(empty, torch.zeros((), dtype=num.dtype), num / safe), den
    if kind == "add":
        return num / (den + eps)[..., None], den
    return num / torch.clamp(den, min=eps)[..., None], den


def gradients(q, k, v, g, feature_map, omega=None, scale=None, mode="causal", normalize=True,
              policy="error", segments=None, window=None, features=None, decay=None,
              gates=None):
    """Autograd of L = sum(out * g). Inputs are NumPy arrays [N,H,d] (or [N,d]); returns a
    dict of float64 NumPy arrays out, den, dq, dk, dv (dq/dk/dv in the input's shape), and dg
    with gates (log-gates [N, H]: pair weights exp(g_{j+1} + ... + g_i), causal; or per
    feature [N, H, r]: each feature's product weighed by its own sum)."""
    shapes = [np.shape(x) for x in (q, k, v)]
    t = [torch.tensor(np.asarray(x, dtype=np.float64)) for x in (q, k, v, g)]
    t = [x[:, None, :] if x.dim() == 2 else x for x in t]
    tq, tk, tv, tg = t
    for x in (tq, tk, tv):
        x.requires_grad_(True)
    msk = mask(tq.shape[0], mode, segments, window)
    w = None
    if decay is not None:  # gamma_h^|i - j| (one gamma per head)
        n = tq.shape[0]
        d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs().double()
        w = torch.tensor(np.asarray(decay, dtype=np.float64))[:, None, None] ** d[None]
    tgate, fw = None, None
    if gates is not None and np.ndim(gates) == 3:  # per feature [N, H, r]: exp(C_i,f - C_j,f)
        tgate = torch.tensor(np.asarray(gates, dtype=np.float64)).requires_grad_(True)
        cs = torch.cumsum(tgate, 0).permute(1, 2, 0)                       # [H, r, N]
        lw = cs[..., :, None] - cs[..., None, :]
        n = tq.shape[0]
        low = (torch.arange(n)[None, :] <= torch.arange(n)[:, None])[None, None]
        fw = torch.exp(torch.where(low, lw, torch.full_like(lw, -1e300)))
    elif gates is not None:  # exp(C_i - C_j), C the cumulative log-gates, j <= i
        tgate = torch.tensor(np.asarray(gates, dtype=np.float64)).requires_grad_(True)
        cs = torch.cumsum(tgate, 0).T                                      # [H, N]
        lw = cs[:, :, None] - cs[:, None, :]
        n = tq.shape[0]
        low = (torch.arange(n)[None, :] <= torch.arange(n)[:, None])[None]
        gw = torch.exp(torch.where(low, lw, torch.full_like(lw, -1e300)))
        w = gw if w is None else w * gw
    out, den = operator(phi(feature_map, tq, omega, scale, features),
                        phi(feature_map, tk, omega, scale, features), tv, msk, normalize, policy, w,
                        fw)
    (out * tg).sum().backward()
    res = dict(out=out.detach().numpy(), den=den.detach().numpy())
    for name, x, shp in zip(("dq", "dk", "dv"), (tq, tk, tv), shapes):
        res[name] = x.grad.numpy().reshape(shp)
    if tgate is not None:
        res["dg"] = tgate.grad.numpy()
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for o in ("--q", "--k", "--v", "--grad-out", "--prefix"):
        p.add_argument(o, required=True)
    p.add_argument("--feature-map", required=True, choices=ref.MAPS)
    p.add_argument("--projection")
    p.add_argument("--scale", type=float)
    p.add_argument("--features", type=int, help="nu of dpfp")
    p.add_argument("--mode", default="causal", choices=("causal", "bidirectional"))
    p.add_argument("--normalize", default="on", choices=("on", "off"))
    p.add_argument("--denominator", default="error")
    p.add_argument("--segments")
    p.add_argument("--window", type=int)
    a = p.parse_args()
    om = np.load(a.projection) if a.projection else None
    seg = np.load(a.segments) if a.segments else None
    try:
        r = gradients(np.load(a.q), np.load(a.k), np.load(a.v), np.load(a.grad_out),
                      a.feature_map, om, a.scale, a.mode, a.normalize == "on", a.denominator,
                      seg, a.window, a.features)
    except DenominatorViolation as e:
        print(f"torch_oracle: {e}", file=sys.stderr)
        return 3
    for name, key in (("out", "out"), ("grad_q", "dq"), ("grad_k", "dk"), ("grad_v", "dv"),
                      ("den", "den")):
        np.save(f"{a.prefix}_{name}.npy", r[key])
    return 0


if __name__ == "__main__":
    sys.exit(main())
