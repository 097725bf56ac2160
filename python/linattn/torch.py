"""linattn in PyTorch: autograd Functions whose backward is the engine's, and a module that
owns its random projection (docs/python.md).

Tensors are CPU, float32 or float64, contiguous, [B, L, H, d]; they reach the engine without
a copy (data_ptr). Keyword arguments follow the CLI options (docs/cli.md, docs/python.md).
"""
import ctypes
import os

import numpy
import torch

from . import _core
from ._lib import InputError, OutOfMemoryError, check, lib

__all__ = ["attention", "softmax_attention", "LinearAttention", "empty_cache", "cache_info"]

_DT = {torch.float32: "f32", torch.float64: "f64"}


def _arr(name, t):
    if not isinstance(t, torch.Tensor):
        raise InputError("%s must be a torch.Tensor (got %s)" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise InputError("%s is on %s: linattn runs on the CPU" % (name, t.device))
    return _core.Arr(name, tuple(t.shape), _DT.get(t.dtype, str(t.dtype).replace("torch.", "")),
                     t.is_contiguous(), t.data_ptr())


# Outputs of 1 MiB or more come from the library's cache of blocks (python/capi/pool.c), so
# that a training step's outputs reuse the last step's pages: glibc hands large freed memory
# back to the kernel, and the kernel zeroes every page again before the engine can write it
# (docs/python.md "Speed"; docs/performance.md "Training through the Python binding").
_POOL_MIN = 1 << 20
_NP = {torch.float32: numpy.float32, torch.float64: numpy.float64}


def _pool_cap():
    """LINATTN_POOL_MB, checked once: the cache's bound in MiB (0: no cache)."""
    global _POOL_CAP
    if _POOL_CAP is None:
        s = os.environ.get("LINATTN_POOL_MB", "")
        if s and not (s.isdigit() and len(s) <= 9):
            raise InputError("LINATTN_POOL_MB=%r: expected a number of MiB >= 0 (0: no cache "
                             "of large outputs)" % s)
        _POOL_CAP = int(s) if s else 1024
    return _POOL_CAP


_POOL_CAP = None


class _Block:
    """One block of the cache; returned to it when the last view of its memory is gone
    (tensor -> numpy array -> ctypes buffer -> this)."""
    __slots__ = ("p",)

    def __init__(self, p):
        self.p = p

    def __del__(self):
        try:
            lib.la_py_pool_put(self.p)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone
            pass


def _pooled(shape, dtype, nbytes):
    p = lib.la_py_pool_get(nbytes)
    if not p:
        raise OutOfMemoryError("out of memory for a tensor of shape %s (%d bytes)"
                               % (tuple(shape), nbytes), 8)
    block = _Block(p)
    buf = (ctypes.c_char * nbytes).from_address(p)
    buf._la_block = block
    return torch.from_numpy(numpy.frombuffer(buf, dtype=_NP[dtype]).reshape(shape))


def _empty(shape, dtype, like=None):
    """torch.empty for an output the engine writes next: a large one from the library's cache
    of blocks (huge pages, pages kept between calls); a failed allocation raises
    linattn.OutOfMemoryError (a MemoryError) rather than torch's RuntimeError."""
    if like is not None:
        shape, dtype = tuple(like.shape), like.dtype
    nbytes = int(numpy.prod(shape, dtype=numpy.int64)) * (8 if dtype == torch.float64 else 4)
    try:
        if nbytes >= _POOL_MIN and _pool_cap() > 0:
            return _pooled(shape, dtype, nbytes)
        return torch.empty(shape, dtype=dtype)
    except RuntimeError as e:
        if "alloc" not in str(e).lower():
            raise
        raise OutOfMemoryError("out of memory for a tensor of shape %s: %s"
                               % (tuple(shape), str(e).splitlines()[0]), 8) from None


def empty_cache():
    """Free the idle blocks of the cache of large outputs (as torch.cuda.empty_cache() does for
    PyTorch's GPU cache). Tensors still alive keep theirs."""
    lib.la_py_pool_release()


def cache_info():
    """The cache of large outputs: bytes held by live tensors, idle bytes kept for reuse, and
    the bound on idle bytes (LINATTN_POOL_MB)."""
    live, idle, cap = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    lib.la_py_pool_usage(ctypes.byref(live), ctypes.byref(idle), ctypes.byref(cap))
    return {"live_bytes": live.value, "idle_bytes": idle.value, "cap_bytes": cap.value}


def _threads(threads):
    """None: the OpenMP default (OMP_NUM_THREADS, else every core), as the CLI and
    linattn.numpy. Not torch.get_num_threads(): Debian's torch 1.13 reports 1 on a 2-core
    machine without OMP_NUM_THREADS, which would halve the engine's speed unasked."""
    return 0 if threads is None else threads


def _scan(scan_algorithm):
    if scan_algorithm not in _core.SCAN_ALGORITHMS:
        raise InputError("scan_algorithm %r is not one of %s"
                         % (scan_algorithm, ", ".join(_core.SCAN_ALGORITHMS)))
    return scan_algorithm


class _LinearFn(torch.autograd.Function):
    """out = attention(q, k, v); backward: the engine's (la_backward / la_dist_backward)."""

    @staticmethod
    def forward(ctx, q, k, v, op, seg, dist, tape, gates=None, garr=None):
        """gates: the log-gates tensor (for autograd), garr: their float64 array."""
        B, L, H, _ = q.shape
        ctx.garr = garr
        ctx.gates_dtype = gates.dtype if gates is not None else None
        out = _empty((B, L, H, op.dv), q.dtype)
        # the tape (docs/design.md §4.4 "Tape") when a gradient will be asked for: the
        # backward then reads it instead of replaying the forward
        nbytes = op.tape_size(B, L) if tape and dist is None and any(ctx.needs_input_grad[:3]) else 0
        tp = _empty(((nbytes + 3) // 4,), torch.float32) if nbytes else None
        ctx.stats = op.forward(B, L, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                               seg, dist, tp.data_ptr() if nbytes else None, garr)
        ctx.op, ctx.seg, ctx.dist = op, seg, dist
        # saved tensors, so that autograd frees the tape with the graph after the backward
        ctx.save_for_backward(q, k, v, out if nbytes else None, tp)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        q, k, v, out, tape = ctx.saved_tensors
        g = g.contiguous()
        if g.dtype != q.dtype:
            g = g.to(q.dtype)
        dq, dk, dv = _empty(None, None, q), _empty(None, None, k), _empty(None, None, v)
        B, L = q.shape[0], q.shape[1]
        want_dg = ctx.garr is not None and ctx.needs_input_grad[7]
        dg = numpy.zeros(ctx.garr.shape) if want_dg else None
        ctx.op.backward(B, L, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(),
                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), ctx.seg, ctx.dist,
                        out=out.data_ptr() if tape is not None else None,
                        tape=tape.data_ptr() if tape is not None else None,
                        fwd_stats=ctx.stats, gates=ctx.garr, dgates=dg)
        dgt = torch.from_numpy(dg).to(ctx.gates_dtype) if want_dg else None
        return dq, dk, dv, None, None, None, None, dgt, None


def _prepare(q, k, v, comm, scan_algorithm, kw):
    arrs = [_arr("q", q), _arr("k", k), _arr("v", v)]
    dt, B, L, H, dk, dv = _core.check_arrays(arrs)
    proj = kw.get("projection")
    kw = dict(kw)
    kw["projection"] = _core.projection_arg(proj, H, dk)
    kw["threads"] = _threads(kw.get("threads"))
    op = _core.cached_op(f64=dt == "f64", heads=H, dk=dk, dv=dv, **kw)
    dist = None
    if comm is not None:
        key = repr(sorted((a, b) for a, b in kw.items() if a not in ("projection", "threads")))
        if proj is not None:
            key += repr(hash(bytes(kw["projection"][0])))
        commf, row0, Ltot = _core.dist_args(comm, B, L, H, dk, dv, dt, key, _core.shard_range)
        dist = (commf, _scan(scan_algorithm), row0, Ltot)
    else:
        _scan(scan_algorithm)
    return op, dist


def attention(q, k, v, *, feature_map="elu1", features=None, mode="causal", normalize=True,
              denominator="error", allow_signed=False, scale=None, seed=0, projection=None,
              segments=None, window=None, decay=None, gates=None, chunk=None, comm=None,
              scan_algorithm="auto", threads=None, kernels="auto", tape=True):
    """Feature-map attention, differentiable in q, k, v (phi(q) and phi(k) with
    feature_map="precomputed"). Returns [B, L, H, dv]. linattn.last_stats() then holds the
    denominator statistics; a violated policy raises linattn.DenominatorError.
    tape: when a gradient is needed (causal, one process, no window shorter than the
    sequence), the forward keeps each chunk's state, about 1.5x the size of q for d = 64,
    until the backward, which then runs 1.4-1.6x faster (docs/python.md "Speed");
    tape=False replays the forward instead and keeps nothing.
    gates: log-gates g <= 0 [B, L, H], S_t = e^{g_t} S_{t-1} + phi(k_t) v_t^T (causal;
    docs/design.md §1.2 "Gates"), differentiable; or per feature [B, L, H, r], row f of the
    state decayed by e^{g_t,f} (GLA's diagonal form, "Per-feature gates"), differentiable,
    with or without comm= (not with window)."""
    opts = dict(feature_map=feature_map, features=features, mode=mode, normalize=normalize,
                denominator=denominator, allow_signed=allow_signed, scale=scale, seed=seed,
                projection=projection, window=window, chunk=chunk, threads=threads,
                kernels=kernels, decay=decay)

    def local():  # this rank's checks, agreed across the ranks with comm; then their shapes
        garr = _core.gates_array(gates, *q.shape[:3]) if gates is not None else None
        op = _prepare(q, k, v, None, scan_algorithm, dict(opts, gates=_core.gates_form(garr)))[0]
        _core.check_gates_width(op, garr)
        return garr, op
    garr, op = _core.local_checked(comm, local)
    dist = None if comm is None else _prepare(q, k, v, comm, scan_algorithm,
                                              dict(opts, gates=_core.gates_form(garr)))[1]
    seg = _core.segments_array(segments)
    gt = gates if isinstance(gates, torch.Tensor) else None  # autograd: dL/dg for a tensor
    return _LinearFn.apply(q, k, v, op, seg, dist, bool(tape), gt, garr)


class _SoftmaxFn(torch.autograd.Function):
    """The engine's exact softmax (baseline.h); backward in float64 (core/softmax/softmax_bwd.c)."""

    @staticmethod
    def forward(ctx, q, k, v, p):
        B, L, H, dk = q.shape
        dv = v.shape[3]
        out = _empty((B, L, H, dv), q.dtype)
        f64 = int(q.dtype == torch.float64)
        sarr, ns = p["seg"]
        if p["dist"] is None:
            check(lib.la_py_softmax_forward(f64, p["mode"].encode(), p["scale"], p["window"],
                                            p["threads"], B, L, H, dk, dv, q.data_ptr(),
                                            k.data_ptr(), v.data_ptr(), out.data_ptr(), sarr, ns))
        else:
            commf, row0, Ltot = p["dist"]
            check(lib.la_py_softmax_forward_dist(commf, f64, p["mode"].encode(), p["scale"],
                                                 p["window"], p["threads"], B, L, row0, Ltot, H,
                                                 dk, dv, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                                 out.data_ptr(), sarr, ns))
        ctx.p = p
        ctx.save_for_backward(q, k, v)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        q, k, v = ctx.saved_tensors
        p = ctx.p
        B, L, H, dk = q.shape
        dv = v.shape[3]
        try:
            x = [t.detach().to(torch.float64).contiguous() for t in (q, k, v, g)]
        except RuntimeError as e:
            if "alloc" not in str(e).lower():
                raise
            raise OutOfMemoryError("softmax backward: out of memory for the float64 copies: %s"
                                   % str(e).splitlines()[0], 8) from None
        d = [_empty(None, None, x[0]), _empty(None, None, x[1]), _empty(None, None, x[2])]
        ptrs = [t.data_ptr() for t in x + d]
        sarr, ns = p["seg"]
        if p["dist"] is None:
            check(lib.la_py_softmax_backward(p["mode"].encode(), p["scale"], p["window"],
                                             p["threads"], B, L, H, dk, dv, *ptrs, sarr, ns))
        else:
            commf, row0, Ltot = p["dist"]
            check(lib.la_py_softmax_backward_dist(commf, p["mode"].encode(), p["scale"],
                                                  p["window"], p["threads"], B, L, row0, Ltot, H,
                                                  dk, dv, *ptrs, sarr, ns))
        return d[0].to(q.dtype), d[1].to(k.dtype), d[2].to(v.dtype), None


def softmax_attention(q, k, v, *, mode="causal", scale=None, segments=None, window=None,
                      comm=None, threads=None):
    """The engine's exact blocked softmax attention (docs/design.md §4.6), differentiable in
    q, k, v: the reference inside one engine. Forward in the inputs' dtype with float64 row
    statistics; backward in float64."""
    def local():  # agreed across the ranks with comm (_core.local_checked)
        dt, B, L, H, dk, dv = _core.check_arrays([_arr("q", q), _arr("k", k), _arr("v", v)])
        w, sc = _core.softmax_checks(mode, scale, window, dk)
        return dt, B, L, H, dk, dv, w, sc, _core._int("threads", _threads(threads), 0, 4096)
    dt, B, L, H, dk, dv, window, scale, threads = _core.local_checked(comm, local)
    dist = None
    if comm is not None:
        dist = _core.dist_args(comm, B, L, H, dk, dv, dt, repr((mode, scale, window)),
                               _core.shard_range)
    p = dict(mode=mode, scale=scale, window=window, threads=threads,
             seg=_core.segments_array(segments), dist=dist)
    return _SoftmaxFn.apply(q, k, v, p)


class LinearAttention(torch.nn.Module):
    """Feature-map attention as a module that owns its random projection, as Performer's
    FastAttention does: a buffer `projection` [H, m, dk] (float64; None for maps without
    one), drawn by the engine from a seed, and `redraw_projection()` to draw a new one.
    With `redraw_interval=n`, a training-mode forward redraws every n calls.

        attn = LinearAttention(heads=4, dim_head=64, feature_map="favor+", features=256)
        out = attn(q, k, v)          # [B, L, H, dv]
    """

    def __init__(self, heads, dim_head, *, feature_map="favor+", features=None, mode="causal",
                 normalize=True, denominator="error", allow_signed=False, scale=None, seed=0,
                 window=None, chunk=None, redraw_interval=None, threads=None, kernels="auto",
                 tape=True):
        super().__init__()
        self.heads, self.dim_head = int(heads), int(dim_head)
        self.options = dict(feature_map=feature_map, features=features, mode=mode,
                            normalize=normalize, denominator=denominator,
                            allow_signed=allow_signed, scale=scale, window=window, chunk=chunk,
                            threads=threads, kernels=kernels, tape=tape)
        self.redraw_interval = _core._int("redraw_interval", redraw_interval, 1, none_ok=True)
        self.calls = 0
        self.register_buffer("projection", None)
        self.redraw_projection(seed)

    def redraw_projection(self, seed=None):
        """Draw a new projection from `seed` (default: one drawn from torch's generator, so
        torch.manual_seed makes the draws reproducible). A no-op for maps without one."""
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.seed = int(seed)
        kw = {a: b for a, b in self.options.items() if a not in ("threads", "tape")}
        op = _core.Op(f64=True, heads=self.heads, dk=self.dim_head, dv=1, seed=self.seed, **kw)
        buf, m = op.projection()
        if buf is None:
            self.projection = None
            return
        p = torch.frombuffer(bytearray(buf), dtype=torch.float64).reshape(self.heads, m,
                                                                           self.dim_head)
        if self.projection is not None:
            p = p.to(self.projection.device)
        self.projection = p

    def forward(self, q, k, v, *, segments=None, comm=None, scan_algorithm="auto"):
        if self.training and self.redraw_interval and self.calls and \
                self.calls % self.redraw_interval == 0:
            self.redraw_projection()
        self.calls += 1
        return attention(q, k, v, projection=self.projection, seed=self.seed,
                         segments=segments, comm=comm, scan_algorithm=scan_algorithm,
                         **self.options)

    def extra_repr(self):
        return "heads=%d, dim_head=%d, %s" % (self.heads, self.dim_head, ", ".join(
            "%s=%r" % kv for kv in self.options.items() if kv[1] is not None))
