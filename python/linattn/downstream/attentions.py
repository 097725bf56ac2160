"""The attentions the downstream study compares, by name (docs/downstream.md "Attentions").

Every attention is a torch.nn.Module whose forward takes q, k [B, L, H, dk] and v [B, L, H, dv]
and returns [B, L, H, dv]; all of them run through the engine (linattn.torch):

    softmax            linattn.torch.softmax_attention, the engine's exact softmax
    elu1, relu         the finite maps
    favor+:M           FAVOR+ with M iid random features (r = M)
    favor+orf:M        the same with orthogonal blocks (r = M)
    favor-hyp:M        the hyperbolic positive variant (r = 2 M)
    taylor2            the second-order Taylor map (r = 1 + dk + dk^2)
    dpfp:NU            Schlag et al.'s deterministic map (r = 2 dk NU)
    hedgehog           phi(x) = [softmax(x W), softmax(-x W)] per head (Zhang et al. 2024),
                       W [H, dk, dk] a parameter of the model, through feature_map="precomputed"

A feature map may carry a decay after '@' (docs/design.md §1.2):

    MAP@G              a fixed per-head decay gamma = G in (0, 1] (decay=G)
    MAP@retnet         RetNet's schedule gamma_h = 1 - 2^(-5-h)
    MAP@gates          data-dependent log-gates (Mamba-2's scalar form, §1.2 "Gates"):
                       g = logsigmoid(k . w_h + b_h) per token and head, w [H, dk] and b [H]
                       parameters of the model (b starts at 3: gates near 0.95), trained
                       through the engine's dL/dg; causal only
    MAP@gla            per-feature learned log-gates (GLA's diagonal form, §1.2 "Per-feature
                       gates"): g = logsigmoid(k W_h + b_h) / 16 per token, head and feature,
                       W [H, dk, r] and b [H, r] parameters starting at 0 (gates near 0.96, as
                       GLA's temperature 16 gives), trained through the engine's dL/dg [.., r];
                       causal only, one process, maps with nonnegative features (elu1,
                       relu, dpfp, the favor maps)

A random map draws its projection once from the run's seed (the engine draws the same
projection for the same seed, docs/design.md §2.1) and never redraws it: the projection is a
fixed part of the model for the whole run, as the gradient treats it (§4.4).

`softmax_check()` compares the engine's softmax with torch's own quadratic softmax once, at
start-up, in float64, forward and backward, causal and bidirectional.
"""
import math

import torch

import linattn
import linattn.torch as lt

# The engine's random maps and their width rule (docs/design.md §2).
RANDOM_MAPS = ("favor+", "favor+orf", "favor-hyp")
FIXED_MAPS = ("elu1", "relu", "taylor2")


def split_decay(name):
    """'elu1@0.95' -> ('elu1', 0.95); 'elu1@retnet' -> ('elu1', 'retnet'); 'elu1@gates' ->
    ('elu1', 'gates'); 'elu1' -> ('elu1', None). Raises ValueError."""
    core, at, mod = name.partition("@")
    if not at:
        return core, None
    if mod in ("retnet", "gates", "gla"):
        if mod == "gla" and core.partition(":")[0] not in ("elu1", "relu", "dpfp") + RANDOM_MAPS:
            raise ValueError("attention %r: per-feature gates (@gla) take maps with nonnegative "
                             "features (elu1, relu, dpfp, the favor maps): signed ones (taylor2) "
                             "make a gated denominator of either sign (docs/design.md §1.2 "
                             "\"Per-feature gates\")" % name)
        return core, mod
    try:
        g = float(mod)
    except ValueError:
        g = float("nan")
    if not 0.0 < g <= 1.0:
        raise ValueError("attention %r: after '@' give a decay in (0, 1], retnet, gates or gla" % name)
    return core, g


def parse(name):
    """'favor+:64' -> ('favor+', 64); 'elu1' -> ('elu1', None); any '@' decay is checked and
    left out (split_decay). Raises ValueError."""
    name, mod = split_decay(name)
    if mod is not None and name.partition(":")[0] == "softmax":
        raise ValueError("attention %r: softmax takes no decay" % name)
    base, _, arg = name.partition(":")
    if base in ("softmax", "hedgehog") + FIXED_MAPS:
        if arg:
            raise ValueError("attention %r takes no ':' argument" % name)
        return base, None
    if base in RANDOM_MAPS or base == "dpfp":
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError("attention %r needs a positive integer after ':' (%s:M)" % (name, base))
        return base, int(arg)
    raise ValueError("unknown attention %r (softmax, elu1, relu, favor+:M, favor+orf:M, "
                     "favor-hyp:M, taylor2, dpfp:NU, hedgehog)" % name)


def width(name, dk):
    """r, the number of features of phi (None for softmax)."""
    base, arg = parse(name)
    return {"softmax": None, "elu1": dk, "relu": dk, "taylor2": 1 + dk + dk * dk,
            "hedgehog": 2 * dk, "favor+": arg, "favor+orf": arg,
            "favor-hyp": None if arg is None else 2 * arg,
            "dpfp": None if arg is None else 2 * dk * arg}[base]


class SoftmaxAttention(torch.nn.Module):
    def __init__(self, *, mode, scale=None, threads=1):
        super().__init__()
        self.mode, self.scale, self.threads = mode, scale, threads

    def forward(self, q, k, v):
        return lt.softmax_attention(q.contiguous(), k.contiguous(), v.contiguous(), mode=self.mode,
                                    scale=self.scale, threads=self.threads)


class EngineAttention(torch.nn.Module):
    """One of the engine's feature maps; the projection (random maps) is fixed by `seed`.
    decay: None, a gamma, "retnet", "gates" (learned log-gates from k, see the top) or "gla"
    (learned per-feature log-gates)."""

    def __init__(self, feature_map, features, *, mode, denominator, scale=None, seed=0, threads=1,
                 decay=None, heads=1, dk=1):
        super().__init__()
        self.feature_map, self.features = feature_map, features
        self.mode, self.denominator, self.scale = mode, denominator, scale
        self.seed, self.threads = seed, threads
        self.decay = decay if decay not in ("gates", "gla") else None
        self.gla = decay == "gla"
        if decay == "gates":
            self.gate_w = torch.nn.Parameter(torch.zeros(heads, dk))
            self.gate_b = torch.nn.Parameter(torch.full((heads,), 3.0))
        elif decay == "gla":
            r = width(feature_map + ("" if features is None else ":%d" % features), dk)
            self.gate_w = torch.nn.Parameter(torch.zeros(heads, dk, r))
            self.gate_b = torch.nn.Parameter(torch.zeros(heads, r))
        else:
            self.gate_w = self.gate_b = None

    def forward(self, q, k, v):
        gates = None
        if self.gla:  # log sigmoid(k W_h + b_h) / 16, [B, L, H, r], <= 0
            gates = torch.nn.functional.logsigmoid(
                torch.einsum("blhd,hdf->blhf", k, self.gate_w.to(k.dtype))
                + self.gate_b.to(k.dtype)) / 16.0
        elif self.gate_w is not None:  # log sigmoid(k . w_h + b_h), [B, L, H], <= 0
            gates = torch.nn.functional.logsigmoid(
                torch.einsum("blhd,hd->blh", k, self.gate_w.to(k.dtype)) + self.gate_b.to(k.dtype))
        return lt.attention(q.contiguous(), k.contiguous(), v.contiguous(),
                            feature_map=self.feature_map, features=self.features or 256,
                            mode=self.mode, normalize=True, denominator=self.denominator,
                            scale=self.scale, seed=self.seed, threads=self.threads,
                            decay=self.decay, gates=gates)


class HedgehogAttention(torch.nn.Module):
    """Hedgehog's learnable map (Zhang et al. 2024) written in torch; the engine receives
    phi(q), phi(k) with feature_map="precomputed" and returns their gradients (docs/python.md).
    W starts at the identity in every head."""

    def __init__(self, heads, dk, *, mode, denominator, threads=1):
        super().__init__()
        self.W = torch.nn.Parameter(torch.eye(dk).repeat(heads, 1, 1))
        self.mode, self.denominator, self.threads = mode, denominator, threads

    def phi(self, x):
        u = torch.einsum("blhd,hde->blhe", x, self.W.to(x.dtype))
        return torch.cat([torch.softmax(u, -1), torch.softmax(-u, -1)], -1)

    def forward(self, q, k, v):
        return lt.attention(self.phi(q).contiguous(), self.phi(k).contiguous(), v.contiguous(),
                            feature_map="precomputed", mode=self.mode, normalize=True,
                            denominator=self.denominator, threads=self.threads)


def build(name, *, heads, dk, mode, seed, threads=1, denominator="error", random_scale=None):
    """The attention module called `name`. `random_scale` is the similarity scale s of the
    random maps' target exp(s q.k) (None: the engine's 1/sqrt(dk)); `denominator` is the
    engine's policy for every feature map (docs/design.md §1.1)."""
    base, arg = parse(name)
    decay = split_decay(name)[1]
    if base == "softmax":
        return SoftmaxAttention(mode=mode, threads=threads)
    if base == "hedgehog":
        if decay is not None:
            raise ValueError("attention %r: hedgehog takes no decay in this version" % name)
        return HedgehogAttention(heads, dk, mode=mode, denominator=denominator, threads=threads)
    return EngineAttention(base, arg, mode=mode, denominator=denominator,
                           scale=random_scale if base in RANDOM_MAPS else None, seed=seed,
                           threads=threads, decay=decay, heads=heads, dk=dk)


def torch_softmax(q, k, v, mode, scale=None):
    """torch's own quadratic softmax attention on [B, L, H, d] (the check's reference)."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    a = torch.einsum("blhd,bmhd->bhlm", q, k) * s
    if mode == "causal":
        L = q.shape[1]
        a = a.masked_fill(~torch.tril(torch.ones(L, L, dtype=torch.bool)), float("-inf"))
    return torch.einsum("bhlm,bmhe->blhe", torch.softmax(a, -1), v)


def softmax_check(threads=1, seed=0):
    """The engine's softmax against torch's, float64, forward and backward, both modes.
    Returns a list of dicts: mode, out_rel_err, grad_rel_err, tolerance, ok."""
    g = torch.Generator().manual_seed(seed)
    B, L, H, dk, dv = 2, 37, 2, 16, 8
    rows = []
    for mode in ("causal", "bidirectional"):
        q, k, v, G = (torch.randn(B, L, H, w, generator=g, dtype=torch.float64)
                      for w in (dk, dk, dv, dv))
        outs, grads = [], []
        for impl in ("engine", "torch"):
            xs = [t.clone().requires_grad_() for t in (q, k, v)]
            o = (lt.softmax_attention(*xs, mode=mode, threads=threads) if impl == "engine"
                 else torch_softmax(*xs, mode))
            (o * G).sum().backward()
            outs.append(o.detach())
            grads.append(torch.cat([x.grad.flatten() for x in xs]))
        oe = ((outs[0] - outs[1]).norm() / outs[1].norm()).item()
        ge = ((grads[0] - grads[1]).norm() / grads[1].norm()).item()
        tol = 1e-10
        rows.append({"mode": mode, "out_rel_err": oe, "grad_rel_err": ge, "tolerance": tol,
                     "ok": int(oe <= tol and ge <= tol), "engine_version": linattn.__version__})
    return rows
