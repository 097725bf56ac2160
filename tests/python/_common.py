"""What the tests of the Python binding share (tests/python/test_*.py).

- `need(...)`: import numpy (and torch) or exit 77 (skip): a test that cannot run never passes.
- `Checks`: a tiny check collector; `finish()` exits 0 or 1 with one line per failing check.
- The INDEPENDENT float64 quadratic reference of the operator (docs/design.md §1-§3), in torch:
  phi written here from the definitions of §2 (taylor2 and dpfp included),
  the L x L kernel matrix formed explicitly, masked by an explicit boolean matrix (causal
  j <= i, same segment, window i-W < j <= i), num = A V, den = A 1, and the named denominator
  policy applied to the true den. Gradients by torch autograd of sum(out * G). It shares no
  code with the engine or the binding (it does not import linattn).
- `error_bounds`: the first-order rounding-error scale of every output and gradient entry
  (sums of absolute values of the terms), so that float32 and float64 runs can be checked
  ROW BY ROW against the reference with a tolerance derived from the data (see there).

Set-up: PYTHONPATH=/work/wt/python LINATTN_LIBRARY=/work/wt/build/python/liblinattn_py.so,
run with /usr/bin/python3.
"""
import math
import os
import sys

SKIP = 77


def need(torch_too=True):
    """Import numpy (and torch) and linattn; exit 77 when numpy or torch is missing."""
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        print("SKIP: numpy cannot be imported (%s); use Debian's /usr/bin/python3" % e)
        sys.exit(SKIP)
    if torch_too:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            print("SKIP: torch cannot be imported (%s); use Debian's /usr/bin/python3" % e)
            sys.exit(SKIP)
    here = os.path.dirname(os.path.abspath(__file__))
    py = os.path.join(here, "..", "..", "python")
    if "linattn" not in sys.modules and os.path.isdir(py) and py not in sys.path:
        sys.path.append(py)  # after PYTHONPATH: an explicit PYTHONPATH wins


class Checks:
    """Collects failures; every group prints one line."""

    def __init__(self, name):
        self.name = name
        self.failures = []
        self.group = None
        self.group_fail = 0
        self.group_n = 0

    def start(self, group):
        self.end()
        self.group, self.group_fail, self.group_n = group, 0, 0

    def end(self):
        if self.group is not None:
            status = "ok" if self.group_fail == 0 else "FAIL (%d of %d)" % (self.group_fail, self.group_n)
            print("%-72s %d checks %s" % (self.group, self.group_n, status), flush=True)
        self.group = None

    def check(self, cond, what):
        self.group_n += 1
        if not cond:
            self.group_fail += 1
            msg = "%s: %s" % (self.group, what) if self.group else what
            self.failures.append(msg)
            print("  FAIL: " + msg, flush=True)
        return bool(cond)

    def finish(self):
        self.end()
        if self.failures:
            print("%s: %d check(s) failed:" % (self.name, len(self.failures)))
            for f in self.failures:
                print("  - " + f)
            sys.exit(1)
        print("%s: all checks passed" % self.name)
        sys.exit(0)


# ---------------------------------------------------------------------------------------------
# The independent quadratic reference (torch, float64).

RANDOM_MAPS = ("favor+", "favor+orf", "favor-hyp", "trig")
EXP_MAPS = RANDOM_MAPS            # maps whose features are exponentials of projections
SIGNED_MAPS = ("identity", "trig")  # refused in normalized mode without allow_signed


def width(name, dk, features):
    """r, the feature width, of each map (docs/design.md §2, which defines taylor2 and dpfp too)."""
    if name in ("elu1", "relu", "identity"):
        return dk
    if name in ("favor+", "favor+orf"):
        return features
    if name in ("favor-hyp", "trig"):
        return 2 * features
    if name == "taylor2":
        return 1 + dk + dk * dk
    if name == "dpfp":
        return 2 * dk * features
    raise ValueError(name)


def phi(name, x, omega=None, scale=None, features=None):
    """phi(x) of docs/design.md §2 for x [..., H, d] (torch float64) -> [..., H, r].
    omega: [H, m, d] (random maps). taylor2: Based's full form [1, x~, vec(x~ x~^T)/sqrt 2]
    (phi(q).phi(k) = 1 + t + t^2/2, t = s q.k). dpfp: DPFP-nu (Schlag et al. 2021) on the raw x,
    with rho = [relu(x), relu(-x)] and the products rho * roll(rho, j), j = 1..nu."""
    import torch
    d = x.shape[-1]
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if name == "elu1":
        return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))
    if name == "relu":
        return torch.clamp(x, min=0.0)
    if name in ("identity", "precomputed"):
        return x
    if name == "taylor2":
        xt = math.sqrt(s) * x
        outer = (xt[..., :, None] * xt[..., None, :]).reshape(*x.shape[:-1], d * d)
        return torch.cat([torch.ones_like(x[..., :1]), xt, outer / math.sqrt(2.0)], -1)
    if name == "dpfp":
        rho = torch.cat([torch.clamp(x, min=0.0), torch.clamp(-x, min=0.0)], -1)
        return torch.cat([rho * torch.roll(rho, j, dims=-1) for j in range(1, int(features) + 1)], -1)
    if name not in RANDOM_MAPS:
        raise ValueError("unknown map %s" % name)
    om = torch.as_tensor(omega, dtype=torch.float64)
    m = om.shape[-2]
    xt = math.sqrt(s) * x
    u = torch.einsum("...hd,hmd->...hm", xt, om)
    half = 0.5 * (xt * xt).sum(-1, keepdim=True)
    if name in ("favor+", "favor+orf"):
        return torch.exp(u - half) / math.sqrt(m)
    if name == "favor-hyp":
        return torch.cat([torch.exp(u - half), torch.exp(-u - half)], -1) / math.sqrt(2 * m)
    return torch.exp(half) * torch.cat([torch.cos(u), torch.sin(u)], -1) / math.sqrt(m)


def mask(L, mode, segments=None, window=None):
    """M[i, j]: query i reads key j (explicit L x L booleans)."""
    import torch
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    if segments is None:
        m = torch.ones(L, L, dtype=torch.bool)
    else:
        seg = [int(o) for o in segments]
        sid = torch.zeros(L, dtype=torch.long)
        for a in seg[1:-1]:
            sid[a:] += 1
        m = sid[:, None] == sid[None, :]
    if mode == "causal":
        m = m & (j <= i)
        if window:
            m = m & (j > i - int(window))
    elif window:
        raise ValueError("window in bidirectional mode")
    return m


def parse_policy(policy):
    if policy in ("error", "zero-empty"):
        return policy, None
    kind, _, eps = policy.partition(":")
    return kind, float(eps)


def operator(pq, pk, v, msk, normalize=True, policy="error"):
    """The masked quadratic operator on features [B, L, H, r]: (out [B,L,H,dv], den [B,L,H],
    bad [B,L,H]: rows that violate the policy)."""
    import torch
    a = torch.einsum("bihr,bjhr->bhij", pq, pk)
    a = torch.where(msk[None, None], a, torch.zeros((), dtype=a.dtype))
    num = torch.einsum("bhij,bjhc->bihc", a, v)
    den = a.sum(-1).permute(0, 2, 1)
    dd = den.detach()
    bad = torch.zeros_like(dd, dtype=torch.bool)
    if not normalize:
        return num, den, bad
    kind, eps = parse_policy(policy)
    if kind == "error":
        bad = ~torch.isfinite(dd) | (dd <= 0)
        return num / den[..., None], den, bad
    if kind == "zero-empty":
        bad = ~torch.isfinite(dd) | (dd < 0)
        empty = (dd == 0)[..., None]
        safe = torch.where(empty, torch.ones((), dtype=den.dtype), den[..., None])
        return torch.where(empty, torch.zeros((), dtype=num.dtype), num / safe), den, bad
    if kind == "add":
        div = den + eps
        bad = ~torch.isfinite(div.detach()) | (div.detach() == 0)
        return num / div[..., None], den, bad
    if kind == "clamp":
        return num / torch.clamp(den, min=eps)[..., None], den, bad
    raise ValueError(policy)


def reference(name, q, k, v, g=None, *, omega=None, scale=None, features=None, mode="causal",
              normalize=True, policy="error", segments=None, window=None):
    """Float64 values (and with g, autograd gradients of sum(out * g)) of the quadratic form.
    q, k, v, g: torch tensors [B, L, H, d] of any float dtype (converted to float64)."""
    import torch
    t = [x.detach().to(torch.float64).clone() for x in (q, k, v)]
    for x in t:
        x.requires_grad_(g is not None)
    tq, tk, tv = t
    msk = mask(tq.shape[1], mode, segments, window)
    pq = phi(name, tq, omega, scale, features)
    pk = phi(name, tk, omega, scale, features)
    out, den, bad = operator(pq, pk, tv, msk, normalize, policy)
    res = dict(out=out.detach(), den=den.detach(), bad=bad, mask=msk)
    if g is not None:
        (out * g.detach().to(torch.float64)).sum().backward()
        res.update(dq=tq.grad, dk=tk.grad, dv=tv.grad)
    return res


# ---------------------------------------------------------------------------------------------
# Error bounds (row-by-row tolerances).
#
# For a sum of n products computed in floating point with unit roundoff u, the error is at most
# about n u times the sum of the ABSOLUTE values of the terms (Higham, Accuracy and Stability,
# §3.1). Every quantity here is such a sum: a_ij = phi(q_i).phi(k_j) (r terms), num_i and den_i
# (n_i keys), out_i = num_i / den_i, whose error is
#     |d out_i| <= (|d num_i| + |out_i| |d den_i|) / |den_i|
#              <= c u  sum_j |a|_ij (|v_j| + |out_i|) / |den_i|,
# with |a|_ij = sum_r |phi_r(q_i)| |phi_r(k_j)|; likewise for the gradients (w_ij = dL/da_ij =
# g_i.(v_j - out_i) / den_i, dphi(q_i) = sum_j w_ij phi(k_j), dphi(k_j) = sum_i w_ij phi(q_i),
# dv_j = sum_i a_ij g_i / den_i, dq = J_phi(q)^T dphi(q)). `error_bounds` returns these
# absolute-value sums, entry by entry. The exponential maps evaluate exp(omega.x~ - |x~|^2/2)
# (trig: exp(|x~|^2/2) cos/sin(omega.x~)); the argument's rounding error (a dk-term product in
# the working precision, with omega itself rounded) becomes a RELATIVE error of the feature of
# about (dk + 2) u |argument|: that is E below, the data's conditioning of the maps (large for
# the large-input cases, which is the point of those cases). trig's cos and sin are bounded by
# the norm of each (cos, sin) pair (a rotation-invariant magnitude), not by |cos| and |sin|.
#
# The tolerance of an entry is then
#     tol = (2 u_dtype + 2 u_64) * (L + r + dk + dv + 2 E + 10) * bound
# i.e. twice the first-order worst case (every rounding in the same direction) for the engine
# in its dtype plus the same for the float64 reference itself. Typical errors are far below
# it; exceeding it means digits were lost beyond what the data's conditioning explains (for
# example a window built as a difference of prefix sums, or a float32 accumulation of a
# large sum without the stabilizer).

U = {"f32": 2.0 ** -24, "f64": 2.0 ** -53}


def _pair_norm(t, name, axis):
    """trig: replace the cos and sin halves by the norm of each (cos, sin) pair."""
    import torch
    if name != "trig":
        return t.abs()
    r = t.shape[axis]
    a, b = torch.split(t, r // 2, dim=axis)
    n = torch.sqrt(a * a + b * b)
    return torch.cat([n, n], axis)


def _abs_jacobian(name, x, omega, scale, features):
    """|J_phi(x)| per row: [B, L, H, r, d] (trig: pair norms over r)."""
    import torch
    if name == "precomputed":
        return None
    xx = x.detach().clone().requires_grad_(True)
    p = phi(name, xx, omega, scale, features)
    r = p.shape[-1]
    cols = []
    for f in range(r):
        (gx,) = torch.autograd.grad(p[..., f].sum(), xx, retain_graph=True)
        cols.append(gx)
    J = torch.stack(cols, -2)               # [B, L, H, r, d]
    return _pair_norm(J, name, -2)


def exp_condition(name, x, omega, scale):
    """E = (dk + 2) max over rows of |the exponent| (0 for maps without exponentials of
    projections; elu1's e^x of an exact input is accurate to its own rounding)."""
    import torch
    if name not in EXP_MAPS:
        return 0.0
    d = x.shape[-1]
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    xt = math.sqrt(s) * x.detach().to(torch.float64)
    om = torch.as_tensor(omega, dtype=torch.float64)
    u = torch.einsum("...hd,hmd->...hmd", xt, om).abs().sum(-1).amax(-1)
    half = 0.5 * (xt * xt).sum(-1)
    return float((d + 2) * (u + half).max())


def error_bounds(name, q, k, v, g, res, *, omega=None, scale=None, features=None,
                 normalize=True, policy="error"):
    """Entry-wise absolute-value sums (see above) for out, dq, dk, dv, and the factor
    F = L + r + dk + dv + 2E + 10. res: reference(...) of the same call (with gradients)."""
    import torch
    f64 = torch.float64
    q, k, v, g = (x.detach().to(f64) for x in (q, k, v, g))
    msk = res["mask"].to(f64)[None, None]
    pq = phi(name, q, omega, scale, features)
    pk = phi(name, k, omega, scale, features)
    aq, ak = _pair_norm(pq, name, -1), _pair_norm(pk, name, -1)
    absA = torch.einsum("bihr,bjhr->bhij", aq, ak) * msk
    out = res["out"]
    den = res["den"]
    if normalize:
        kind, eps = parse_policy(policy)
        if kind == "add":
            div = den + eps
        elif kind == "clamp":
            div = torch.clamp(den, min=eps)
        else:
            div = den
        zero = (div == 0)
        inv = torch.where(zero, torch.zeros((), dtype=f64), 1.0 / torch.where(zero, torch.ones((), dtype=f64), div.abs()))
        inv = inv.permute(0, 2, 1)          # [B, H, L]
        # out bound: sum_j |a|_ij (|v_j| + |out_i|) / |den_i|
        ob = (torch.einsum("bhij,bjhc->bihc", absA, v.abs())
              + absA.sum(-1).permute(0, 2, 1)[..., None] * out.abs()) * inv.permute(0, 2, 1)[..., None]
        # |w|_ij = mask sum_c |g_ic| (|v_jc| + |out_ic|) / |den_i|
        w = (torch.einsum("bihc,bjhc->bhij", g.abs(), v.abs())
             + (g.abs() * out.abs()).sum(-1).permute(0, 2, 1)[..., None]) * msk * inv[..., None]
        dvb = torch.einsum("bhij,bihc->bjhc", absA * inv[..., None], g.abs())
    else:
        ob = torch.einsum("bhij,bjhc->bihc", absA, v.abs())
        w = torch.einsum("bihc,bjhc->bhij", g.abs(), v.abs()) * msk
        dvb = torch.einsum("bhij,bihc->bjhc", absA, g.abs())
    dpq = torch.einsum("bhij,bjhr->bihr", w, ak)
    dpk = torch.einsum("bhij,bihr->bjhr", w, aq)
    Jq = _abs_jacobian(name, q, omega, scale, features)
    Jk = _abs_jacobian(name, k, omega, scale, features)
    dqb = dpq if Jq is None else torch.einsum("blhrd,blhr->blhd", Jq, dpq)
    dkb = dpk if Jk is None else torch.einsum("blhrd,blhr->blhd", Jk, dpk)
    E = max(exp_condition(name, q, omega, scale), exp_condition(name, k, omega, scale))
    L, dk, dv, r = q.shape[1], q.shape[3], v.shape[3], pq.shape[-1]
    F = L + r + dk + dv + 2 * E + 10
    return dict(out=ob, dq=dqb, dk=dkb, dv=dvb), F


def abs_den(name, q, k, mode, omega=None, features=None, segments=None, window=None):
    """sum_j |a|_ij over the keys row i reads (|a| as in error_bounds): den_i / abs_den_i
    near 1 means no cancellation; near 0, a denominator that cancels."""
    import torch
    f64 = torch.float64
    pq = _pair_norm(phi(name, q.detach().to(f64), omega, None, features), name, -1)
    pk = _pair_norm(phi(name, k.detach().to(f64), omega, None, features), name, -1)
    msk = mask(q.shape[1], mode, segments, window).to(f64)
    return (torch.einsum("bihr,bjhr->bhij", pq, pk) * msk[None, None]).sum(-1).permute(0, 2, 1)


def well_conditioned(name, q, k, mode, omega=None, features=None, segments=None, window=None):
    """Every row's den > 0 and at least 0.1 of its absolute-value sum (no severe
    cancellation: at most about 3 bits lost to it)."""
    ref = reference(name, q, k, q[..., :1], omega=omega, features=features, mode=mode,
                    segments=segments, window=window)
    den = ref["den"]
    ad = abs_den(name, q, k, mode, omega, features, segments, window)
    return bool((den > 0).all()) and bool((den >= 0.1 * ad).all()), ref


def row_check(got, want, bound, F, dtype, what, checks, floor=0.0):
    """Row by row: every entry of each row [b, i, h, :] within tol = (2 u + 2 u64) F bound.
    Reports the worst row's ratio error / tol and its plain relative error."""
    import torch
    got = got.detach().to(torch.float64)
    u = U[dtype]
    tol = (2 * u + 2 * U["f64"]) * F * bound + floor
    err = (got - want).abs()
    finite = bool(torch.isfinite(got).all())
    ratio = (err / torch.where(tol > 0, tol, torch.full_like(tol, 1e-300))).amax(-1)  # per row
    worst = float(ratio.max())
    idx = tuple(int(x) for x in torch.nonzero(ratio == ratio.max())[0])
    rel = float(((got - want).norm(dim=-1) / want.norm(dim=-1).clamp(min=1e-300))[idx])
    ok = finite and worst <= 1.0
    checks.check(ok, "%s: %s row (batch %d, token %d, head %d): error / tolerance = %.3g "
                 "(row relative error %.3g, F = %.1f)%s"
                 % (what, dtype, idx[0], idx[1], idx[2], worst, rel, F,
                    "" if finite else "; NON-FINITE values"))
    return worst


# ---------------------------------------------------------------------------------------------
# Test data.

FEATURES = {"favor+": 8, "favor+orf": 8, "favor-hyp": 4, "trig": 8, "dpfp": 2, "taylor2": 4}


def projection(name, H, dk, features, seed):
    """An explicit [H, m, dk] float64 projection for the random maps (None otherwise): the
    reference uses exactly the rows the engine uses."""
    import numpy as np
    if name not in RANDOM_MAPS:
        return None
    rng = np.random.default_rng(1000 + seed)
    return rng.standard_normal((H, features, dk))


def inputs(name, B, L, H, dk, dv, seed, dtype=None, big=False, r_pre=5):
    """q, k, v, g for a map, float64 torch tensors, drawn so that normalized mode is
    well-conditioned (den far from 0; relu and dpfp away from their kinks):
    relu: entries >= 0.1 away from 0, column 0 positive (so phi(q).phi(k) >= 0.01);
    identity: 1 + 0.3 N (q.k ~ dk > 0); trig: 0.3 N (every cos near 1);
    dpfp: entries >= 0.2 away from 0, columns 0 and 1 positive; taylor2: 0.6 N;
    precomputed: uniform(0.2, 1.2), r = r_pre.
    big: 3 N(0, 1) (ill-conditioned exponentials)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    f = torch.float64

    def n(*s):
        return torch.randn(*s, generator=gen, dtype=f)

    dq = r_pre if name == "precomputed" else dk
    if big:
        q, k = 3 * n(B, L, H, dk), 3 * n(B, L, H, dk)
    elif name == "relu":
        def rl():
            x = (0.1 + 0.8 * n(B, L, H, dk).abs()) * torch.sign(n(B, L, H, dk))
            x[..., 0] = x[..., 0].abs()
            return x
        q, k = rl(), rl()
    elif name == "identity":
        q, k = 1 + 0.3 * n(B, L, H, dk), 1 + 0.3 * n(B, L, H, dk)
    elif name == "trig":
        q, k = 0.3 * n(B, L, H, dk), 0.3 * n(B, L, H, dk)
    elif name == "dpfp":
        def dp():   # columns 0 and 1 positive: the feature rho_1 rho_0 > 0, so den > 0
            s = torch.where(torch.rand(B, L, H, dk, generator=gen, dtype=f) < 0.7, 1.0, -1.0)
            s[..., :2] = 1.0
            return s * (0.2 + 0.8 * n(B, L, H, dk).abs())
        q, k = dp(), dp()
    elif name == "precomputed":
        q = 0.2 + torch.rand(B, L, H, dq, generator=gen, dtype=f)
        k = 0.2 + torch.rand(B, L, H, dq, generator=gen, dtype=f)
    elif name in ("favor+", "favor+orf", "favor-hyp"):
        q, k = 0.7 * n(B, L, H, dk), 0.7 * n(B, L, H, dk)
    elif name == "taylor2":     # t = s q.k small: the kernel 1 + t + t^2/2 without cancellation
        q, k = 0.6 * n(B, L, H, dk), 0.6 * n(B, L, H, dk)
    else:
        q, k = n(B, L, H, dk), n(B, L, H, dk)
    v, g = n(B, L, H, dv), n(B, L, H, dv)
    return q, k, v, g


def kwargs_for(name, dk, H, seed=0, **kw):
    """The binding's keyword arguments of a map with an explicit projection (random maps),
    small features, and allow_signed for the signed maps; plus the reference's arguments."""
    m = FEATURES.get(name)
    om = projection(name, H, dk, m, seed)
    a = dict(feature_map=name)
    if m is not None and name != "taylor2":
        a["features"] = m
    if om is not None:
        a["projection"] = om
    if name in SIGNED_MAPS:
        a["allow_signed"] = True
    a.update(kw)
    ref = dict(omega=om, features=m, scale=kw.get("scale"))
    return a, ref
