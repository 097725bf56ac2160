#!/usr/bin/python3
"""linattn's PyTorch peers: the strongest PyTorch formulations of its operators that we know,
timed the same way as `linattn bench` (float32, T threads, best of the rounds), for
tests/bench/run_peers.sh; tools/bench_binding.py imports the same functions for its
forward + backward peers. They compute the normalized operator of `linattn run --feature-map
elu1` (or favor+): the denominator is carried alongside as a ones column of V, so it comes out
of the same products, and out = num / den. Every product batches the heads. Layout
[B, H, L, d], made before the clock.

Peers (the `impl` column; C = the chunk length, 32, 64 or 128):
  loop_C<C>       causal: the chunk loop. Per chunk of C rows
                      O = phi(Q) S + tril(phi(Q) phi(K)^T) [V | 1],  then  S += phi(K)^T [V | 1].
                  The chunks come from torch.split (slicing x[:, a:b] instead makes autograd
                  write a zero-filled full-length gradient per chunk, O(L^2)). The upper
                  triangle is zeroed by masked_fill_ (tril_ opens a parallel region on every
                  call: 5 ms a call on two busy cores). Without autograd the state is updated
                  in place (baddbmm_) and O written into one buffer. The map runs on blocks
                  of 16384 rows; favor+'s key features carry a log-scale per block and head,
                  and S is rescaled when it grows (docs/design.md §2).
  vec_C<C>        causal: the vectorized chunk form (flash-linear-attention's chunk algorithm
                  without its materialized [L/C, d, d] copies): every chunk's
                  phi(K)^T [V | 1] in one batched product, the states by one exclusive cumsum
                  over the chunks, then phi(Q) S + tril(phi(Q) phi(K)^T) [V | 1]. Its chunk
                  states take L/C x r x (dv+1) floats per head: configurations above --max-gib
                  are skipped, and said so.
  einsum          bidirectional: KV = einsum(phi(K), [V | 1]) once, then einsum(phi(Q), KV).
  einsum_ft       bidirectional, elu1: Katharopoulos et al. 2020, the fast-transformers
                  LinearAttention forward (layout [B, L, H, d]): KV = einsum('nshd,nshm->nhmd'),
                  Z = 1 / (einsum('nlhd,nhd->nlh', Q, K.sum(1)) + 1e-6),
                  out = einsum('nlhd,nhmd,nlh->nlhm', Q, KV, Z).
  fla_naive_C64   causal, elu1, the labelled reference, not a strong peer: flash-linear-
                  attention's naive_chunk_linear_attn (fla/ops/linear_attn/naive.py), which
                  materializes every chunk's state (1 GiB at L = 2^20) and normalizes as
                  fla.ops.linear_attn.utils.normalize_output (o / ((q * k.cumsum(-2)).sum(-1)
                  + 1e-10)).
The strongest causal peer is the fastest loop_C* or vec_C* of the same run; the strongest
bidirectional one the faster of einsum and einsum_ft (run_peers.sh's table says which won).

Maps: elu1 (elu(x) + 1) and favor+ (exp(u - abs(x~)^2/2), u = omega . x~, x~ = s^1/2 x,
s = 1/sqrt(dk); the query stabilizer is the row's maximum, the key one a constant per head,
per block in the loop; the factor m^-1/2 cancels and is left out). The timing draws omega iid
N(0, 1); the check uses the projection linattn saved (--save-projection).

Modes:
  timing (default)   CSV rows impl,mode,map,features,chunk,n,heads,dk,dv,threads,round,
                     seconds,tokens_per_s,blas_core: --repeat rounds, each one call of every
                     peer in turn (interleaved); a warm-up call of each at a small size first
  --make-inputs DIR  writes q.npy, k.npy, v.npy ([n, H, d] <f4) for an agreement check
  --check DIR        runs every peer on DIR's inputs and prints its max |x - y| / max |y|
                     against linattn's out_causal.npy, out_bidirectional.npy and (with
                     proj_favor.npy) out_causal_favor.npy; fails above 1e-4
Exit codes: 0 ok, 1 check failed, 2 usage, 77 PyTorch missing (a skip for ctest).
"""
import argparse
import ctypes
import ctypes.util
import os
import platform
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # the ctest smoke test treats 77 as a skip
    print("peers.py: PyTorch is not installed (apt-get install python3-torch); skipping",
          file=sys.stderr)
    sys.exit(77)

F = torch.nn.functional
CHUNKS = (32, 64, 128)
BLOCK = 16384  # rows the chunk loop maps at a time


# ---------------------------------------------------------------- the machine
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_isa():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        flags = []
    if "avx512f" in flags:
        return "AVX-512"
    if "avx2" in flags:
        return "AVX2"
    return "SSE"


def blas_core():
    """openblas_get_corename() of the OpenBLAS this process runs (torch's, and the engine's)."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"


# ---------------------------------------------------------------- feature maps, [B, H, L, d]
class Elu1:
    name = "elu1"

    def q(self, x):
        return F.elu(x) + 1

    def k(self, x):
        """features and their per-head log-scale (None: unstabilized)."""
        return F.elu(x) + 1, None


class FavorPlus:
    name = "favor+"

    def __init__(self, proj, scale):
        self.wt = proj.transpose(-1, -2)  # [H, dk, m]
        self.root = scale ** 0.5

    def _u(self, x):
        x = x * self.root
        return (x @ self.wt).sub_(0.5 * (x * x).sum(-1, keepdim=True))

    # in place on fresh tensors (autograd allows it: the stabilizers are constants, detached)
    def q(self, x):
        u = self._u(x)
        return u.sub_(u.detach().amax(-1, keepdim=True)).exp_()

    def k(self, x):
        u = self._u(x)
        c = u.detach().amax((-2, -1), keepdim=True)  # one constant per head
        return u.sub_(c).exp_(), c


ELU1 = Elu1()


def _ones_column(v):
    return torch.cat([v, v.new_ones(v.shape[:-1] + (1,))], -1)


# ---------------------------------------------------------------- the peers
def chunk_loop(q, k, v, C=64, fmap=ELU1, block=BLOCK):
    """The chunk loop; q, k, v [B, H, L, d] raw inputs; returns [B, H, L, dv]."""
    B, H, L, _ = q.shape
    Dv = v.shape[-1]
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    block = max(C, block // C * C)
    v1 = _ones_column(v)
    # masked_fill_ rather than tril_: tril_ opens a parallel region for every small product
    # (5 ms a call on 2 busy cores), an elementwise op of this size stays on one thread
    upper = torch.ones(C, C, dtype=torch.bool).triu_(1)
    S = logS = None
    outs = []
    o = None if grad else v.new_empty(B * H, L, Dv + 1)
    ob = iter(()) if grad else iter(o.split(block, 1))
    for qb, kb, vb in zip(q.split(block, 2), k.split(block, 2), v1.split(block, 2)):
        Lb = qb.shape[2]
        fq = fmap.q(qb)
        fk, c = fmap.k(kb)
        r = fq.shape[-1]
        fq, fk, vb = fq.reshape(B * H, Lb, r), fk.reshape(B * H, Lb, r), vb.reshape(B * H, Lb, Dv + 1)
        if S is None:
            S = v.new_zeros(B * H, r, Dv + 1)
        if c is not None:  # key features at scale e^c; the state at e^logS
            c = c.reshape(B * H, 1, 1)
            if logS is None:
                logS = c
            else:
                new = torch.maximum(logS, c)
                fk = fk * (c - new).exp()
                S = S * (logS - new).exp() if grad else S.mul_((logS - new).exp())
                logS = new
        oblk = None if grad else next(ob)
        oi_it = iter(()) if grad else iter(oblk.split(C, 1))
        for qi, ki, vi in zip(fq.split(C, 1), fk.split(C, 1), vb.split(C, 1)):
            kt = ki.transpose(1, 2)
            n = qi.shape[1]
            a = torch.bmm(qi, kt).masked_fill_(upper if n == C else upper[:n, :n], 0)
            oi = torch.baddbmm(torch.bmm(qi, S), a, vi)
            if grad:
                outs.append(oi)
                S = torch.baddbmm(S, kt, vi)
            else:
                next(oi_it).copy_(oi)
                S.baddbmm_(kt, vi)
    o = (torch.cat(outs, 1) if grad else o).view(B, H, L, Dv + 1)
    return o[..., :Dv] / o[..., Dv:]


def chunk_vec_bytes(B, H, L, r, Dv, C):
    """About the largest working set of chunk_vec, in bytes (float32)."""
    n = -(-L // C)
    return 4 * B * H * (2 * n * r * (Dv + 1) + L * C + 2 * L * (Dv + 1) + 2 * L * r)


def chunk_vec(q, k, v, C=64, fmap=ELU1):
    """The vectorized chunk form; q, k, v [B, H, L, d] raw inputs; returns [B, H, L, dv]."""
    B, H, L, _ = q.shape
    Dv = v.shape[-1]
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    fq = fmap.q(q)
    fk, _ = fmap.k(k)
    r = fq.shape[-1]
    v1 = _ones_column(v)
    pad = (-L) % C  # zero features after the map: padded keys add nothing
    if pad:
        fq, fk, v1 = (F.pad(x, (0, 0, 0, pad)) for x in (fq, fk, v1))
    n = (L + pad) // C
    qc, kc = fq.reshape(B * H * n, C, r), fk.reshape(B * H * n, C, r)
    vc = v1.reshape(B * H * n, C, Dv + 1)
    kv = torch.bmm(kc.transpose(1, 2), vc).view(B * H, n, r, Dv + 1)
    if grad:
        S = F.pad(kv.cumsum(1)[:, :-1], (0, 0, 0, 0, 1, 0))  # exclusive: chunk i sees < i
    else:
        S = torch.empty_like(kv)
        S[:, 0].zero_()
        torch.cumsum(kv[:, :-1], 1, out=S[:, 1:])
    del kv
    a = torch.bmm(qc, kc.transpose(1, 2)).tril_()
    o = torch.baddbmm(torch.bmm(qc, S.view(B * H * n, r, Dv + 1)), a, vc)
    o = o.view(B, H, L + pad, Dv + 1)[:, :, :L]
    return o[..., :Dv] / o[..., Dv:]


def einsum_bidir(q, k, v, fmap=ELU1):
    """Bidirectional; q, k, v [B, H, L, d] raw inputs; returns [B, H, L, dv]."""
    Dv = v.shape[-1]
    fq = fmap.q(q)
    fk, _ = fmap.k(k)
    kv = torch.einsum("bhlr,bhle->bhre", fk, _ones_column(v))
    o = torch.einsum("bhlr,bhre->bhle", fq, kv)
    return o[..., :Dv] / o[..., Dv:]


def einsum_ft(Q, K, V, eps=1e-6):
    """Katharopoulos et al.'s form; Q, K, V [N, L, H, d] raw inputs; returns [N, L, H, dv]."""
    Q, K = ELU1.q(Q), ELU1.q(K)
    KV = torch.einsum("nshd,nshm->nhmd", K, V)
    Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + eps)
    return torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z).contiguous()


def fla_naive(q, k, v, chunk=64):
    """fla's naive_chunk_linear_attn with elu1; q, k, v [B, H, L, d]; returns [B, H, L, dv]."""
    q, k = ELU1.q(q), ELU1.q(k)
    B, H, L, D = q.shape
    Dv = v.shape[-1]
    pad = (-L) % chunk  # zero features after the map: padded keys add nothing
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    n = (L + pad) // chunk
    qc, kc, vc = q.view(B, H, n, chunk, D), k.view(B, H, n, chunk, D), v.view(B, H, n, chunk, Dv)
    kv = (kc.transpose(-1, -2) @ vc).cumsum(2)
    kv = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], dim=2)
    inter = qc @ kv
    mask = torch.triu(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=1)
    intra = (qc @ kc.transpose(-1, -2)).masked_fill_(mask, 0) @ vc
    o = (inter + intra).view(B, H, L + pad, Dv)
    z = (q * k.cumsum(-2)).sum(-1, keepdim=True)
    return (o / (z + 1e-10))[:, :, :L]


# ---------------------------------------------------------------- the table of peers
def peer_list(fmap_name, block=BLOCK):
    """(impl, mode, chunk or None, layout, fn(q, k, v, fmap)); layout 'bhld' or 'blhd'."""
    ps = [("loop_C%d" % C, "causal", C, "bhld",
           (lambda C: lambda q, k, v, m: chunk_loop(q, k, v, C, m, block))(C)) for C in CHUNKS]
    ps += [("vec_C%d" % C, "causal", C, "bhld",
            (lambda C: lambda q, k, v, m: chunk_vec(q, k, v, C, m))(C)) for C in CHUNKS]
    if fmap_name == "elu1":
        ps += [("fla_naive_C64", "causal", 64, "bhld", lambda q, k, v, m: fla_naive(q, k, v, 64)),
               ("einsum", "bidirectional", None, "bhld", einsum_bidir),
               ("einsum_ft", "bidirectional", None, "blhd", lambda q, k, v, m: einsum_ft(q, k, v))]
    return ps


def make_map(name, heads, dk, m, proj=None, gen=None):
    if name == "elu1":
        return ELU1
    if proj is None:
        proj = torch.randn(heads, m, dk, generator=gen)
    return FavorPlus(proj.float(), dk ** -0.5)


def run_linattn_layout(layout, fn, fmap, q, k, v):
    """q, k, v: [L, H, d] (linattn's layout); returns [L, H, dv]."""
    if layout == "bhld":
        t = lambda x: x.permute(1, 0, 2).unsqueeze(0).contiguous()
        return fn(t(q), t(k), t(v), fmap)[0].permute(1, 0, 2)
    return fn(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), fmap)[0]


def check(a):
    ld = lambda n: torch.from_numpy(np.load(os.path.join(a.check, n + ".npy")))
    q, k, v = ld("q"), ld("k"), ld("v")
    H, dk = q.shape[1], q.shape[2]
    cases = [("elu1", "causal", "out_causal"), ("elu1", "bidirectional", "out_bidirectional")]
    if os.path.exists(os.path.join(a.check, "proj_favor.npy")):
        cases.append(("favor+", "causal", "out_causal_favor"))
    worst = 0.0
    print("peers.py: each peer against linattn run on the same inputs (n %d, H %d, dk %d, "
          "float32; the loop maps blocks of 256 rows): max|x - y| / max|y|" % (q.shape[0], H, dk))
    with torch.inference_mode():
        for map_name, mode, ref_name in cases:
            ref = ld(ref_name).double()
            proj = ld("proj_favor") if map_name == "favor+" else None
            fmap = make_map(map_name, H, dk, None, proj)
            for impl, pmode, _, layout, fn in peer_list(map_name, block=256):
                if pmode != mode:
                    continue
                out = run_linattn_layout(layout, fn, fmap, q, k, v).double()
                err = float((out - ref).abs().max() / ref.abs().max())
                worst = float("inf") if np.isnan(err) else max(worst, err)
                print("  %-14s %-14s %-7s %.3g" % (impl, mode, map_name, err))
    if not worst <= 1e-4:
        print("peers.py: error: a peer disagrees with linattn by %.3g > 1e-4" % worst,
              file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dk", type=int, default=64)
    ap.add_argument("--dv", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each times every peer once")
    ap.add_argument("--feature-maps", default="elu1", help="elu1, favor+ (comma-separated)")
    ap.add_argument("--features", type=int, default=256, help="m of favor+")
    ap.add_argument("--impls", default="all", help="comma-separated peers (default: all)")
    ap.add_argument("--max-gib", type=float, default=10.0,
                    help="skip vec_C* configurations whose working set exceeds this (GiB)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (n 4096, 2 heads, d 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--make-inputs", metavar="DIR")
    ap.add_argument("--check", metavar="DIR")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.heads, a.dk, a.dv, a.repeat = 4096, 2, 16, 16, 1
    maps = a.feature_maps.split(",")
    known = {p[0] for m in ("elu1", "favor+") for p in peer_list(m)}
    impls = None if a.impls == "all" else a.impls.split(",")
    if a.n < 1 or a.heads < 1 or a.dk < 1 or a.dv < 1 or a.threads < 1 or a.repeat < 1 or \
            a.features < 1 or any(m not in ("elu1", "favor+") for m in maps) or \
            (impls and any(i not in known for i in impls)):
        print("peers.py: error: sizes must be >= 1, --feature-maps a list of elu1, favor+ and "
              "--impls a list of %s" % ", ".join(sorted(known)), file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(a.seed)

    if a.make_inputs:
        os.makedirs(a.make_inputs, exist_ok=True)
        for name, d in (("q", a.dk), ("k", a.dk), ("v", a.dv)):
            x = torch.randn(a.n, a.heads, d, generator=gen, dtype=torch.float32).numpy()
            np.save(os.path.join(a.make_inputs, name + ".npy"), x)
        return 0
    if a.check:
        return check(a)

    core = blas_core()
    print("peers.py: %s (%s), OpenBLAS core %s, torch %s on %d threads" % (
        cpu_model(), cpu_isa(), core, torch.__version__, torch.get_num_threads()), file=sys.stderr)
    runs = []  # (impl, mode, map, chunk, layout, fn, fmap)
    for m in maps:
        fmap = make_map(m, a.heads, a.dk, a.features, gen=gen)
        for impl, mode, C, layout, fn in peer_list(m):
            if impls and impl not in impls:
                continue
            if impl.startswith("vec_"):
                r = a.dk if m == "elu1" else a.features
                gib = chunk_vec_bytes(1, a.heads, a.n, r, a.dv, C) / 2 ** 30
                if gib > a.max_gib:
                    print("peers.py: %s %s skipped: its chunk states and products take about "
                          "%.1f GiB (> --max-gib %g)" % (impl, m, gib, a.max_gib), file=sys.stderr)
                    continue
            runs.append((impl, mode, m, C, layout, fn, fmap))
    shape = {"bhld": lambda n, d: (1, a.heads, n, d), "blhd": lambda n, d: (1, n, a.heads, d)}
    # the inputs in [B, H, L, d], made before the clock; einsum_ft's [B, L, H, d] copies are
    # made (and freed) around each of its calls, outside the clock, to keep the memory down
    x = [torch.randn(*shape["bhld"](a.n, d), generator=gen) for d in (a.dk, a.dk, a.dv)]
    native = {"bhld": lambda: x, "blhd": lambda: [t.transpose(1, 2).contiguous() for t in x]}
    print("impl,mode,map,features,chunk,n,heads,dk,dv,threads,round,seconds,tokens_per_s,blas_core")
    with torch.inference_mode():
        nw = min(a.n, 4096)
        for impl, mode, m, C, lay, fn, fmap in runs:  # warm-up: one call of each, small
            fn(*(torch.randn(*shape[lay](nw, d), generator=gen) for d in (a.dk, a.dk, a.dv)), fmap)
        for rnd in range(a.repeat):
            for impl, mode, m, C, lay, fn, fmap in runs:
                xs = native[lay]()
                t0 = time.perf_counter()
                out = fn(*xs, fmap)
                sec = time.perf_counter() - t0
                del out, xs
                print("%s,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%s" % (
                    impl, mode, m, a.features if m == "favor+" else "", C or "", a.n, a.heads,
                    a.dk, a.dv, a.threads, rnd, sec, a.n / sec, core), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
