#!/usr/bin/python3
"""Peer implementations of linear attention in PyTorch, timed the same way as `linattn bench`
(best of K, float32, T threads), for tests/bench/run_peers.sh. Both use the elu+1 feature map
and the normalized operator, so they compute what `linattn run --feature-map elu1` computes.

  chunked (causal): the chunk-parallel reference of flash-linear-attention
      (fla/ops/linear_attn/naive.py, naive_chunk_linear_attn, chunk 64, layout [B, H, L, d]):
      per chunk, inter = Q S_prev and intra = tril(Q K^T) V, with S the cumulative sum of the
      per-chunk K^T V; normalized as fla.ops.linear_attn.utils.normalize_output
      (z = (q * k.cumsum(-2)).sum(-1), o / (z + 1e-10)).
  einsum (bidirectional): Katharopoulos et al. 2020, "Transformers are RNNs", the
      fast-transformers LinearAttention forward (layout [N, L, H, d]):
      KV = einsum('nshd,nshm->nhmd', K, V); Z = 1/(einsum('nlhd,nhd->nlh', Q, K.sum(1)) + eps);
      V = einsum('nlhd,nhmd,nlh->nlhm', Q, KV, Z), eps = 1e-6.

Modes:
  timing (default)     prints CSV rows impl,mode,n,heads,dk,dv,threads,repeat,seconds,tokens_per_s
  --make-inputs DIR    writes q.npy, k.npy, v.npy ([n, H, d] <f4) for an agreement check
  --check DIR          runs both peers on DIR's inputs and compares them with linattn's
                       out_causal.npy and out_bidirectional.npy (max |x - y| / max |y| <= 1e-4)
Exit codes: 0 ok, 1 check failed, 2 usage, 77 PyTorch missing (a skip for ctest).
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # the ctest smoke test treats 77 as a skip
    print("peers.py: PyTorch is not installed (apt-get install python3-torch); skipping",
          file=sys.stderr)
    sys.exit(77)


def elu1(x):
    return torch.nn.functional.elu(x) + 1


def fla_chunk_causal(q, k, v, chunk=64):
    """q, k, v: [B, H, L, d] raw inputs; returns [B, H, L, dv]."""
    q, k = elu1(q), elu1(k)
    B, H, L, D = q.shape
    Dv = v.shape[-1]
    pad = (-L) % chunk  # zero features after the map: padded keys add nothing
    if pad:
        q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
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


def katharopoulos_bidir(Q, K, V, eps=1e-6):
    """Q, K, V: [N, L, H, d] raw inputs; returns [N, L, H, dv]."""
    Q, K = elu1(Q), elu1(K)
    KV = torch.einsum("nshd,nshm->nhmd", K, V)
    Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + eps)
    return torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z).contiguous()


def run_peer(impl, q, k, v):
    """q, k, v: [L, H, d] tensors in linattn's layout; returns [L, H, dv]."""
    if impl == "chunked":
        t = lambda x: x.permute(1, 0, 2).unsqueeze(0).contiguous()
        return fla_chunk_causal(t(q), t(k), t(v))[0].permute(1, 0, 2)
    return katharopoulos_bidir(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0))[0]


def best_of(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dk", type=int, default=64)
    ap.add_argument("--dv", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--impls", default="chunked,einsum")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (n 4096, 2 heads, d 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--make-inputs", metavar="DIR")
    ap.add_argument("--check", metavar="DIR")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.heads, a.dk, a.dv, a.repeat = 4096, 2, 16, 16, 1
    impls = a.impls.split(",")
    if a.n < 1 or a.heads < 1 or a.dk < 1 or a.dv < 1 or a.threads < 1 or a.repeat < 1 or \
            any(i not in ("chunked", "einsum") for i in impls):
        print("peers.py: error: sizes must be >= 1 and --impls a list of chunked, einsum",
              file=sys.stderr)
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
        q, k, v = (torch.from_numpy(np.load(os.path.join(a.check, n + ".npy")))
                   for n in ("q", "k", "v"))
        worst = 0.0
        with torch.inference_mode():
            for impl, mode in (("chunked", "causal"), ("einsum", "bidirectional")):
                ref = np.load(os.path.join(a.check, "out_%s.npy" % mode)).astype(np.float64)
                out = run_peer(impl, q, k, v).double().numpy()
                err = np.abs(out - ref).max() / np.abs(ref).max()
                worst = float("inf") if np.isnan(err) else max(worst, err)
                print("peers.py: %s (%s) vs linattn: max|x - y| / max|y| = %.3g" % (impl, mode, err))
        if not worst <= 1e-4:
            print("peers.py: error: the peers disagree with linattn by %.3g > 1e-4" % worst,
                  file=sys.stderr)
            return 1
        return 0

    print("impl,mode,n,heads,dk,dv,threads,repeat,seconds,tokens_per_s")
    with torch.inference_mode():
        for impl in impls:
            shape = lambda d: (a.n, a.heads, d)
            if impl == "chunked":  # native layout [B, H, L, d], made before the clock starts
                shape = lambda d: (1, a.heads, a.n, d)
                fn = fla_chunk_causal
            else:
                shape = lambda d: (1, a.n, a.heads, d)
                fn = katharopoulos_bidir
            q, k, v = (torch.randn(*shape(d), generator=gen) for d in (a.dk, a.dk, a.dv))
            sec = best_of(lambda: fn(q, k, v), a.repeat)
            print("%s,%s,%d,%d,%d,%d,%d,%d,%.6g,%.6g" % (
                impl, "causal" if impl == "chunked" else "bidirectional", a.n, a.heads, a.dk,
                a.dv, a.threads, a.repeat, sec, a.n / sec), flush=True)
            del q, k, v
    return 0


if __name__ == "__main__":
    sys.exit(main())
