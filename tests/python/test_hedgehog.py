#!/usr/bin/python3
"""A learnable feature map written in torch trains through the engine (issue 34;
docs/python.md "precomputed"): Hedgehog's phi(x) = [softmax(x W), softmax(-x W)] per head
(Zhang et al. 2024, "The Hedgehog & the Porcupine"), with feature_map="precomputed".

1. The gradient with respect to W through the engine equals the gradient through an
   independent float64 quadratic torch form of the same attention (autograd of
   A = phi(Q) phi(K)^T masked, out = A V / A 1), causal and bidirectional, with segments.
2. Training: W is fitted by Adam so that the Hedgehog attention's outputs approach softmax
   attention's on the same q, k, v (Hedgehog's distillation objective, here on outputs); the
   loss must fall to under half its starting value, and the trained map must beat the
   identity start (W = I) on fresh data drawn the same way.
Exit 0 ok, 1 failure, 77 without torch.
"""
import sys

try:
    import torch
except ImportError:
    print("test_hedgehog.py: skipped: no torch (apt-get install python3-torch)")
    sys.exit(77)

import linattn  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hedgehog(x, W):
    """[B, L, H, d] -> [B, L, H, 2d]: positive features, so every denominator is > 0."""
    u = torch.einsum("blhd,hde->blhe", x, W)
    return torch.cat([torch.softmax(u, -1), torch.softmax(-u, -1)], -1)


def quadratic(pq, pk, v, mode, segments=None):
    """The reference: the N x N kernel matrix, masked, normalized (float64)."""
    L = pq.shape[1]
    A = torch.einsum("blhr,bmhr->bhlm", pq, pk)
    mask = torch.ones(L, L, dtype=torch.bool)
    if mode == "causal":
        mask = torch.tril(mask)
    if segments is not None:
        seg = torch.zeros(L, dtype=torch.long)
        for s, (a, b) in enumerate(zip(segments[:-1], segments[1:])):
            seg[a:b] = s
        mask = mask & (seg[:, None] == seg[None, :])
    A = A * mask
    return torch.einsum("bhlm,bmhe->blhe", A, v) / A.sum(-1).permute(0, 2, 1)[..., None]


# 1. gradients of W: engine against the quadratic form
g = torch.Generator().manual_seed(3)
B, L, H, d, dv = 2, 23, 2, 6, 5
q, k, v, G = (torch.randn(B, L, H, w, generator=g, dtype=torch.float64) for w in (d, d, dv, dv))
W0 = torch.eye(d, dtype=torch.float64).repeat(H, 1, 1) + 0.3 * torch.randn(H, d, d, generator=g,
                                                                          dtype=torch.float64)
for mode, segs in (("causal", None), ("bidirectional", None), ("causal", [0, 7, 8, 23])):
    grads = []
    for impl in ("engine", "quadratic"):
        W = W0.clone().requires_grad_()
        pq, pk = hedgehog(q, W), hedgehog(k, W)
        if impl == "engine":
            out = linattn.torch.attention(pq, pk, v, feature_map="precomputed", mode=mode,
                                          segments=segs)
        else:
            out = quadratic(pq, pk, v, mode, segs)
        (out * G).sum().backward()
        grads.append(W.grad)
    err = ((grads[0] - grads[1]).norm() / grads[1].norm()).item()
    check(err < 1e-12, "dL/dW through the engine = quadratic form (%s, segments %s): rel err %.1e"
          % (mode, segs, err))

# 2. training, float32 through the engine. (a) A realizable target: the outputs of a teacher
# Hedgehog map W* = I + 0.7 N(0, 1); the student starts at W = I and must recover them (relative
# MSE below a tenth of its start on a held batch). (b) Hedgehog's own use: distil softmax
# attention; random isotropic q, k leave little to learn, so the claim is only that the trained
# map beats its start W = I on fresh data.
B, L, H, d = 4, 64, 2, 16


def batch():
    return torch.randn(B, L, H, d), torch.randn(B, L, H, d), torch.randn(B, L, H, d)


def rel_mse(W, q, k, v, target):
    out = linattn.torch.attention(hedgehog(q, W), hedgehog(k, W), v, feature_map="precomputed")
    return ((out - target) ** 2).mean() / (target ** 2).mean()


def teacher(Wt):
    def target(q, k, v):
        with torch.no_grad():
            return linattn.torch.attention(hedgehog(q, Wt), hedgehog(k, Wt), v,
                                           feature_map="precomputed")
    return target


def softmax_target(q, k, v):
    return linattn.torch.softmax_attention(q, k, v)


def train(target, steps=150, lr=3e-2):
    W = torch.nn.Parameter(torch.eye(d).repeat(H, 1, 1))
    opt = torch.optim.Adam([W], lr=lr)
    for step in range(steps):
        q, k, v = batch()
        opt.zero_grad()
        loss = rel_mse(W, q, k, v, target(q, k, v))
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print("  step %3d  training loss %.5f" % (step, loss.item()), flush=True)
    return W.detach()


torch.manual_seed(0)
target = teacher(torch.eye(d).repeat(H, 1, 1) + 0.7 * torch.randn(H, d, d))
held = batch()
eye = torch.eye(d).repeat(H, 1, 1)
with torch.no_grad():
    start = rel_mse(eye, *held, target(*held)).item()
W = train(target)
with torch.no_grad():
    end = rel_mse(W, *held, target(*held)).item()
check(end < 0.1 * start, "teacher recovery: relative MSE on a held batch %.4f -> %.4f (< 1/10)"
      % (start, end))
check(torch.isfinite(W).all().item(), "W stays finite")

W = train(softmax_target)
with torch.no_grad():
    fresh = batch()
    ident = rel_mse(eye, *fresh, softmax_target(*fresh)).item()
    trained = rel_mse(W, *fresh, softmax_target(*fresh)).item()
check(trained < ident, "softmax distillation: on fresh data the trained map (%.4f) beats W = I "
      "(%.4f)" % (trained, ident))

sys.exit(1 if failures else 0)
