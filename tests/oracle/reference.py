#!/usr/bin/python3
"""Independent float64 reference for linattn (docs/design.md §1-§3).

Shares no code with the engine. Everything here is the plain quadratic form:
phi is applied elementwise / by a dense projection, the N x N kernel matrix is
formed explicitly, masked, and multiplied by V. No stabilizers, no chunking.

Arrays follow the program's layout: x is [N, H, d]; outputs are [N, H, dv].
"""
import numpy as np

MAPS = ("elu1", "relu", "identity", "favor+", "favor+orf", "favor-hyp", "trig",
        "precomputed", "taylor2", "dpfp")
RANDOM_MAPS = ("favor+", "favor+orf", "favor-hyp", "trig")
SIGNED_MAPS = ("identity", "trig", "precomputed")     # signed kernel (taylor2: signed features,
                                                      # kernel 1 + t + t^2/2 > 0)
FEATURES_MAPS = RANDOM_MAPS + ("dpfp",)               # --features sets r (dpfp: nu)


class DenominatorError(Exception):
    """The 'error' (or 'zero-empty') policy is violated: count and first (token, head)."""

    def __init__(self, count, token, head):
        super().__init__(f"{count} bad denominators, first at token {token}, head {head}")
        self.count, self.token, self.head = count, token, head


def as3d(x):
    """[N, d] means H = 1; return float64 [N, H, d]."""
    x = np.asarray(x, dtype=np.float64)
    return x[:, None, :] if x.ndim == 2 else x


def feature_map(name, x, omega=None, scale=None, features=None):
    """phi(x) for every token and head: x [N, H, d] -> [N, H, r], float64.

    omega: projection [H, m, d] (or [m, d] shared by every head), random maps only.
    scale: similarity scale s (None -> 1/sqrt(d)); random maps and taylor2 use x~ = sqrt(s) x.
    features: nu of dpfp.
    """
    x = as3d(x)
    if name == "taylor2":
        # Based (Arora et al. 2024): [1, x~, vec(x~ x~^T) / sqrt 2], r = 1 + d + d^2, so that
        # phi(q).phi(k) = 1 + t + t^2/2 with t = s q.k (the engine stores the symmetric half)
        s = 1.0 / np.sqrt(x.shape[-1]) if scale is None else float(scale)
        xt = np.sqrt(s) * x
        outer = (xt[..., :, None] * xt[..., None, :]).reshape(x.shape[:-1] + (-1,))
        return np.concatenate([np.ones(x.shape[:-1] + (1,)), xt, outer / np.sqrt(2.0)], axis=-1)
    if name == "dpfp":
        # DPFP-nu (Schlag et al. 2021, section 5.3; the authors' torch.roll form)
        rho = np.concatenate([np.maximum(x, 0.0), np.maximum(-x, 0.0)], axis=-1)
        return np.concatenate([rho * np.roll(rho, j, axis=-1) for j in range(1, int(features) + 1)],
                              axis=-1)
    if name == "elu1":
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("identity", "precomputed"):
        return x.copy()
    if name not in RANDOM_MAPS:
        raise ValueError(f"unknown map {name}")
    n, h, d = x.shape
    om = np.asarray(omega, dtype=np.float64)
    if om.ndim == 2:
        om = np.broadcast_to(om, (h,) + om.shape)
    if om.shape[0] != h or om.shape[2] != d:
        raise ValueError(f"projection shape {om.shape} does not fit x {x.shape}")
    m = om.shape[1]
    s = 1.0 / np.sqrt(d) if scale is None else float(scale)
    xt = np.sqrt(s) * x
    proj = np.einsum("nhd,hmd->nhm", xt, om)          # omega_h @ x~
    half_sq = 0.5 * np.sum(xt * xt, axis=-1, keepdims=True)  # |x~|^2 / 2
    if name in ("favor+", "favor+orf"):
        return np.exp(proj - half_sq) / np.sqrt(m)
    if name == "favor-hyp":
        return np.concatenate([np.exp(proj - half_sq), np.exp(-proj - half_sq)],
                              axis=-1) / np.sqrt(2 * m)
    # trig: random Fourier features times exp(|x~|^2 / 2)
    return np.exp(half_sq) * np.concatenate([np.cos(proj), np.sin(proj)],
                                            axis=-1) / np.sqrt(m)


def kernel_matrix(phiq, phik, mode):
    """A[h] = phi(Q_h) phi(K_h)^T masked by A(i): [H, N, N]."""
    a = np.einsum("ihr,jhr->hij", phiq, phik)
    if mode == "causal":
        a = a * np.tril(np.ones(a.shape[1:]))
    elif mode != "bidirectional":
        raise ValueError(f"unknown mode {mode}")
    return a


def pair_weights(n, H, mode, decay=None, offsets=None, window=None, gates=None):
    """[H, N, N] weights of the pairs (i, j) (docs/design.md §1.2, §3): the mode's mask (and
    the causal window i - j < window), times gamma_h^|i - j| (decay: one gamma per head, or
    None), times exp(g_{j+1} + ... + g_i) (gates: log-gates [N, H], causal; each pair's sum
    taken directly, from i down to j + 1), times 1 where i and j lie in the same segment of
    the packed offsets 0 = o_0 < ... < o_S = N (or None: one segment)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    w = np.ones((H, n, n))
    if mode == "causal":
        w = w * (j <= i)
    if window:
        w = w * (i - j < window)
    if decay is not None:
        w = w * np.asarray(decay, dtype=np.float64)[:, None, None] ** np.abs(i - j)[None]
    if gates is not None:
        if mode != "causal":
            raise ValueError("gates are causal")
        g = np.asarray(gates, dtype=np.float64).reshape(n, H)
        L = np.zeros((H, n, n))
        for i in range(1, n):               # L[:, i, j] = g_{j+1} + ... + g_i, j < i
            L[:, i, :i] = np.cumsum(g[i:0:-1], axis=0)[::-1].T
        w = w * np.exp(np.where(j <= i, L, -np.inf))
    if offsets is not None:
        seg = np.searchsorted(np.asarray(offsets)[1:], np.arange(n), side="right")
        w = w * (seg[:, None] == seg[None, :])[None]
    return w


def feature_gated_kernel(phiq, phik, gates, mode):
    """[H, N, N] pair kernels with per-feature log-gates [N, H, r] (docs/design.md §1.2
    "Per-feature gates"), causal: sum_f phi(q_i)_f phi(k_j)_f exp(g_{j+1,f} + ... + g_{i,f})
    for j <= i, each pair's sums taken directly from i down to j + 1 (no prefix differences),
    0 above the diagonal. Decay, segments and windows multiply it as pair_weights does."""
    if mode != "causal":
        raise ValueError("gates are causal")
    n, H, r = phiq.shape
    g = np.asarray(gates, dtype=np.float64).reshape(n, H, r)
    a = np.zeros((H, n, n))
    for h in range(H):
        for i in range(n):
            L = np.zeros((i + 1, r))        # L[j] = g_{j+1} + ... + g_i, L[i] = 0
            if i:
                L[:i] = np.cumsum(g[i:0:-1, h], axis=0)[::-1]
            a[h, i, :i + 1] = (phik[:i + 1, h] * np.exp(L)) @ phiq[i, h]
    return a


def parse_policy(policy):
    """'error' | 'zero-empty' | 'add:E' | 'clamp:E' -> (kind, E)."""
    if policy in ("error", "zero-empty"):
        return policy, None
    kind, _, eps = policy.partition(":")
    if kind not in ("add", "clamp") or not eps:
        raise ValueError(f"unknown policy {policy}")
    return kind, float(eps)


def _first_bad(bad):
    """bad [N, H] bool -> DenominatorError naming the smallest token, then head."""
    tok, head = np.argwhere(bad)[0]
    return DenominatorError(int(bad.sum()), int(tok), int(head))


def quadratic(phiq, phik, v, mode, normalize=True, policy="error", decay=None, offsets=None,
              window=None, gates=None):
    """Quadratic form of the operator (docs/design.md §1; with decay and segments §1.2, §3:
    the pair weights of pair_weights).

    Returns (out [N, H, dv], den [N, H]); den is the true denominator A @ 1.
    Raises DenominatorError when the policy is violated (normalized mode only).
    """
    phiq, phik, v = as3d(phiq), as3d(phik), as3d(v)
    if gates is not None and np.ndim(gates) == 3:  # per feature: the kernel itself is gated
        a, gates = feature_gated_kernel(phiq, phik, gates, mode), None
    else:
        a = kernel_matrix(phiq, phik, mode)                  # [H, N, N]
    if decay is not None or offsets is not None or window or gates is not None:
        a = a * pair_weights(phiq.shape[0], phiq.shape[1], mode, decay, offsets, window, gates)
    num = np.matmul(a, v.transpose(1, 0, 2)).transpose(1, 0, 2)  # [N, H, dv]
    den = a.sum(axis=2).T                                    # [N, H]
    if not normalize:
        return num, den
    kind, eps = parse_policy(policy)
    nonfinite = ~np.isfinite(den)
    if kind == "error":
        bad = nonfinite | (den <= 0)
        if bad.any():
            raise _first_bad(bad)
        return num / den[..., None], den
    if kind == "zero-empty":
        bad = nonfinite | (den < 0)
        if bad.any():
            raise _first_bad(bad)
        empty = den == 0
        out = num / np.where(empty, 1.0, den)[..., None]
        out[empty] = 0.0
        return out, den
    if kind == "add":
        return num / (den + eps)[..., None], den
    return num / np.maximum(den, eps)[..., None], den


def softmax_attention(q, k, v, scale=None, mode="bidirectional"):
    """Exact softmax attention softmax(s Q K^T) V per head, float64, masked like A(i)."""
    q, k, v = as3d(q), as3d(k), as3d(v)
    s = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    logits = s * np.einsum("ihd,jhd->hij", q, k)
    if mode == "causal":
        n = logits.shape[1]
        logits = np.where(np.tril(np.ones((n, n), dtype=bool)), logits, -np.inf)
    logits -= logits.max(axis=2, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(axis=2, keepdims=True)
    return np.matmul(w, v.transpose(1, 0, 2)).transpose(1, 0, 2)


def rel_err(x, ref):
    """||x - ref||_F / ||ref||_F in float64 (inf if shapes differ or x is not finite)."""
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if x.shape != ref.shape or not np.all(np.isfinite(x)):
        return float("inf")
    nr = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / (nr if nr > 0 else 1.0))
