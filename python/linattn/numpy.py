"""linattn on NumPy arrays, without torch (docs/python.md).

Arrays are C-contiguous float32 or float64, [B, L, H, d] (or [L, H, d] for one sequence),
passed to the engine without a copy. Keyword arguments are those of the CLI options
(docs/cli.md, docs/python.md); `attention_backward` returns the gradients of sum(out * grad_out).
"""
import numpy as np

from . import _core
from ._lib import InputError, check, lib

__all__ = ["attention", "attention_backward", "softmax_attention", "softmax_attention_backward"]

_DT = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def _view(name, x):
    """(Arr, the array as [B, L, H, d], whether it came as [L, H, d])."""
    if not isinstance(x, np.ndarray):
        raise InputError("%s must be a numpy.ndarray (got %s)" % (name, type(x).__name__))
    three = x.ndim == 3
    y = x[None] if three else x
    a = _core.Arr(name, y.shape, _DT.get(x.dtype, str(x.dtype)), bool(x.flags.c_contiguous),
                  x.ctypes.data)
    return a, y, three


def _inputs(names, xs):
    views = [_view(n, x) for n, x in zip(names, xs)]
    if len({v[2] for v in views}) != 1:
        raise InputError("mix of [L, H, d] and [B, L, H, d] inputs")
    dt, B, L, H, dk, dv = _core.check_arrays([v[0] for v in views])
    return views, dt, B, L, H, dk, dv


def _scan_check(scan_algorithm):
    if scan_algorithm not in _core.SCAN_ALGORITHMS:
        raise InputError("scan_algorithm %r is not one of %s" % (scan_algorithm, ", ".join(_core.SCAN_ALGORITHMS)))


def _dist(comm, B, L, H, dk, dv, dt, key):
    if comm is None:
        return None
    commf, row0, Ltot = _core.dist_args(comm, B, L, H, dk, dv, dt, key, _core.shard_range)
    return commf, row0, Ltot


def _op_kwargs(kw):
    allowed = {"feature_map", "features", "mode", "normalize", "denominator", "allow_signed",
               "scale", "seed", "projection", "window", "chunk", "threads", "kernels", "decay",
               "gates"}
    bad = set(kw) - allowed
    if bad:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(bad)))
    return kw


def _make_op(dt, H, dk, dv, kw):
    kw = dict(_op_kwargs(kw))
    kw["projection"] = _core.projection_arg(kw.get("projection"), H, dk)
    return _core.cached_op(f64=dt == "f64", heads=H, dk=dk, dv=dv, **kw)


def _key(kw):
    proj = kw.get("projection")
    ph = None if proj is None else hash(np.asarray(proj, dtype=np.float64).tobytes())
    return repr(sorted((k, v) for k, v in kw.items() if k != "projection")) + repr(ph)


def _inputs_grad(names, xs):
    """_inputs, and a fourth array (grad_out) as wide as v."""
    views, dt, B, L, H, dk, dv = _inputs(names, xs)
    if len(xs) == 4 and views[3][1].shape[3] != dv:
        raise InputError("grad_out has width %d, v has %d" % (views[3][1].shape[3], dv))
    return views, dt, B, L, H, dk, dv


def _checked(names, xs, gates, kw, scan_algorithm, comm):
    """The rank-local checks of attention's and attention_backward's arguments (arrays, gates,
    operator, the gates' width, scan_algorithm), agreed across the ranks with comm
    (_core.local_checked): (views, dt, B, L, H, dk, dv, gates array or None, op)."""
    def local():
        views, dt, B, L, H, dk, dv = _inputs_grad(names, xs)
        garr = _core.gates_array(gates, B, L, H, batched=not views[0][2])
        op = _make_op(dt, H, dk, dv, dict(kw, gates=_core.gates_form(garr)))
        _core.check_gates_width(op, garr)
        _scan_check(scan_algorithm)
        return views, dt, B, L, H, dk, dv, garr, op
    return _core.local_checked(comm, local)


def attention(q, k, v, *, segments=None, comm=None, scan_algorithm="auto", **kw):
    """The feature-map attention of q, k, v ([B, L, H, dk], [B, L, H, dk], [B, L, H, dv]).
    With feature_map="precomputed", q and k are phi(q) and phi(k)."""
    gates = kw.pop("gates", None)  # log-gates [B, L, H] or [B, L, H, r] (design.md §1.2 "Gates")

    views, dt, B, L, H, dk, dv, g, op = _checked(("q", "k", "v"), (q, k, v), gates, kw,
                                                 scan_algorithm, comm)
    form = _core.gates_form(g)
    dist = _dist(comm, B, L, H, dk, dv, dt, _key(dict(kw, gates=form)))
    out = np.empty((B, L, H, dv), dtype=q.dtype)
    seg = _core.segments_array(segments)
    op.forward(B, L, views[0][0].ptr, views[1][0].ptr, views[2][0].ptr, out.ctypes.data, seg,
               None if dist is None else (dist[0], scan_algorithm, dist[1], dist[2]), gates=g)
    return out[0] if views[0][2] else out


def attention_backward(q, k, v, grad_out, *, segments=None, comm=None, scan_algorithm="auto",
                       **kw):
    """(dq, dk, dv): the gradients of sum(attention(q, k, v, ...) * grad_out); with gates=,
    (dq, dk, dv, dgates), dgates float64 of the gates' shape."""
    gates = kw.pop("gates", None)  # log-gates [B, L, H] or [B, L, H, r] (design.md §1.2 "Gates")

    views, dt, B, L, H, dk, dv, garr, op = _checked(("q", "k", "v", "grad_out"),
                                                    (q, k, v, grad_out), gates, kw,
                                                    scan_algorithm, comm)
    kw = dict(kw, gates=_core.gates_form(garr))
    dist = _dist(comm, B, L, H, dk, dv, dt, _key(kw))
    g = [np.empty_like(views[i][1]) for i in range(3)]
    seg = _core.segments_array(segments)
    dg = np.zeros(garr.shape) if garr is not None else None
    op.backward(B, L, *(views[i][0].ptr for i in range(4)), *(x.ctypes.data for x in g), seg,
                None if dist is None else (dist[0], scan_algorithm, dist[1], dist[2]),
                gates=garr, dgates=dg)
    if dg is not None:
        g.append(dg)
    return tuple(x[0] for x in g) if views[0][2] else tuple(g)


def _softmax_checked(names, xs, mode, scale, window, threads, comm):
    """softmax_attention's rank-local checks, agreed across the ranks with comm as
    attention's are: (views, dt, B, L, H, dk, dv, window, scale, threads)."""
    def local():
        views, dt, B, L, H, dk, dv = _inputs_grad(names, xs)
        w, sc = _core.softmax_checks(mode, scale, window, dk)
        t = _core._int("threads", threads, 0, 4096, none_ok=True) or 0
        return views, dt, B, L, H, dk, dv, w, sc, t
    return _core.local_checked(comm, local)


def softmax_attention(q, k, v, *, mode="causal", scale=None, segments=None, window=None,
                      comm=None, threads=None):
    """The engine's exact blocked softmax attention (docs/design.md §4.6): float64 row
    statistics; float32 inputs use float32 products."""
    views, dt, B, L, H, dk, dv, window, scale, threads = _softmax_checked(
        ("q", "k", "v"), (q, k, v), mode, scale, window, threads, comm)
    out = np.empty((B, L, H, dv), dtype=q.dtype)
    sarr, ns = _core.segments_array(segments)
    p = [views[i][0].ptr for i in range(3)]
    if comm is None:
        check(lib.la_py_softmax_forward(int(dt == "f64"), mode.encode(), scale, window, threads, B,
                                        L, H, dk, dv, *p, out.ctypes.data, sarr, ns))
    else:
        commf, row0, Ltot = _dist(comm, B, L, H, dk, dv, dt, repr((mode, scale, window)))
        check(lib.la_py_softmax_forward_dist(commf, int(dt == "f64"), mode.encode(), scale, window,
                                             threads, B, L, row0, Ltot, H, dk, dv, *p,
                                             out.ctypes.data, sarr, ns))
    return out[0] if views[0][2] else out


def softmax_attention_backward(q, k, v, grad_out, *, mode="causal", scale=None, segments=None,
                               window=None, comm=None, threads=None):
    """(dq, dk, dv) of sum(softmax_attention(q, k, v) * grad_out), computed in float64 and
    returned in the inputs' dtype."""
    views, dt, B, L, H, dk, dv, window, scale, threads = _softmax_checked(
        ("q", "k", "v", "grad_out"), (q, k, v, grad_out), mode, scale, window, threads, comm)
    x64 = [np.ascontiguousarray(views[i][1], dtype=np.float64) for i in range(4)]
    g = [np.empty_like(x64[i]) for i in range(3)]
    sarr, ns = _core.segments_array(segments)
    p = [x.ctypes.data for x in x64] + [x.ctypes.data for x in g]
    if comm is None:
        check(lib.la_py_softmax_backward(mode.encode(), scale, window, threads, B, L, H, dk, dv,
                                         *p, sarr, ns))
    else:
        commf, row0, Ltot = _dist(comm, B, L, H, dk, dv, dt, repr((mode, scale, window)))
        check(lib.la_py_softmax_backward_dist(commf, mode.encode(), scale, window, threads, B, L,
                                              row0, Ltot, H, dk, dv, *p, sarr, ns))
    g = [x.astype(q.dtype, copy=False) for x in g]
    return tuple(x[0] for x in g) if views[0][2] else tuple(g)
