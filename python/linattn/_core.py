"""What linattn.numpy and linattn.torch share: the keyword arguments checked and turned into
an operator handle, the shape checks, and the calls into the library on raw pointers. The
front ends hand over each array as an `Arr` (shape, dtype, contiguity, address), so no array
is copied here (docs/python.md)."""
import ctypes
import math
import threading
from collections import namedtuple

from . import _lib
from ._lib import InputError, UnsupportedError, check

# shape: tuple; dtype: "f32" | "f64" | other name; contiguous: bool; ptr: int address
Arr = namedtuple("Arr", "name shape dtype contiguous ptr")

SCAN_ALGORITHMS = ("auto", "exscan", "doubling", "chain", "allgather", "pipelined")
KERNELS = ("auto", "avx512", "avx2", "generic", "blas")


def _int(name, x, lo, hi=None, none_ok=False):
    if x is None and none_ok:
        return None
    if isinstance(x, bool) or not isinstance(x, int) and not hasattr(x, "__index__"):
        raise InputError("%s must be an integer (got %r)" % (name, x))
    x = int(x.__index__())
    if x < lo or (hi is not None and x > hi):
        raise InputError("%s = %d is outside [%d, %s]" % (name, x, lo, hi if hi else "inf"))
    return x


def check_arrays(arrs, widths_from=None):
    """Common checks of q, k, v (and g): dtype, contiguity, rank, batch, length, heads.
    Returns (dtype, B, L, H, dk, dv)."""
    for a in arrs:
        if a.dtype not in ("f32", "f64"):
            raise InputError("%s has dtype %s: linattn takes float32 or float64" % (a.name, a.dtype))
        if not a.contiguous:
            raise InputError("%s is not contiguous (C order): linattn passes arrays without a copy; "
                             "call .contiguous() (torch) or numpy.ascontiguousarray" % a.name)
        if len(a.shape) != 4:
            raise InputError("%s has shape %s: linattn takes [B, L, H, d]" % (a.name, tuple(a.shape)))
    q = arrs[0]
    for a in arrs[1:]:
        if a.dtype != q.dtype:
            raise InputError("%s is %s but %s is %s: all inputs must have one dtype"
                             % (a.name, a.dtype, q.name, q.dtype))
        if tuple(a.shape[:3]) != tuple(q.shape[:3]):
            raise InputError("%s has shape %s, %s has %s: [B, L, H] must agree"
                             % (a.name, tuple(a.shape), q.name, tuple(q.shape)))
    k, v = arrs[1], arrs[2]
    if k.shape[3] != q.shape[3]:
        raise InputError("k has width %d, q has %d: they must agree" % (k.shape[3], q.shape[3]))
    B, L, H, dk = (int(x) for x in q.shape)
    dv = int(v.shape[3])
    if min(B, L, H, dk, dv) < 1:
        raise InputError("empty input: shape [B, L, H, d] = %s, %s" % (tuple(q.shape), tuple(v.shape)))
    return q.dtype, B, L, H, dk, dv


def segments_array(segments):
    """The offsets of one sequence as an int64 ctypes array and its length ((None, 0) for
    none); the engine checks 0 = o_0 < ... < o_S = L."""
    if segments is None:
        return None, 0
    import numpy as np
    if hasattr(segments, "detach"):
        segments = segments.detach().cpu().numpy()
    a = np.asarray(segments)
    if a.ndim != 1 or a.dtype.kind not in "iu" or a.size < 2:
        raise InputError("segments must be a 1-D integer array of offsets 0 = o_0 < ... < o_S = L "
                         "(got %s of %s)" % (a.shape, a.dtype))
    vals = a.astype(np.int64).tolist()
    return (ctypes.c_int64 * len(vals))(*vals), len(vals)


def gates_array(gates, B, L, H, batched=True):
    """gates= (docs/design.md §1.2 "Gates", "Per-feature gates"): log-gates <= 0, one per token
    and head, [B, L, H], or one per token, head and feature, [B, L, H, r] ([L, H] and
    [L, H, r] for an unbatched call; torch, numpy or nested floats), to a C-contiguous float64
    numpy array [B, L, H] or [B, L, H, r] (gates_form says which; the operator checks r). A
    non-finite or positive value raises InputError naming (batch, token, head[, feature]);
    the engine checks them again."""
    if gates is None:
        return None
    import numpy as np
    if hasattr(gates, "detach"):
        gates = gates.detach().cpu().numpy()
    try:
        a = np.asarray(gates, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError("gates: not an array of numbers (%s)" % e) from None
    want = (B, L, H) if batched else (L, H)
    per_feature = a.ndim == len(want) + 1 and a.shape[:-1] == want and a.shape[-1] >= 1
    if a.shape != want and not per_feature:
        raise InputError("gates has shape %s: it must be %s, one log-gate per token and head, "
                         "or %s, one per feature too" % (tuple(a.shape), list(want),
                                                         list(want) + ["r"]))
    a = np.ascontiguousarray(a.reshape((B, L, H) + a.shape[len(want):]))
    flat, step = a.reshape(-1), 1 << 16  # slices that stay in cache: max and min, no temporaries
    for i in range(0, flat.size, step):
        s = flat[i:i + step]
        if s.max() <= 0 and s.min() > -np.inf:  # a NaN fails the first
            continue
        j = i + int(np.flatnonzero(~(np.isfinite(s) & (s <= 0)))[0])
        at = [int(x) for x in np.unravel_index(j, a.shape)]
        raise InputError("gates: log-gate %r at (batch %d, token %d, head %d%s): log-gates must "
                         "be finite and <= 0 (a gate e^g > 1 would grow the state)"
                         % (float(a[tuple(at)]), at[0], at[1], at[2],
                            ", feature %d" % at[3] if per_feature else ""))
    return a


def gates_form(garr):
    """Op's gates= for a gates_array result: False (none), True ([B, L, H]) or "feature"
    ([B, L, H, r])."""
    return False if garr is None else "feature" if garr.ndim == 4 else True


def agree_errors(comm, err):
    """With an mpi4py communicator: raise on every rank the first failing rank's error of its
    own checks (err: this rank's linattn.Error or None), before any collective of the engine;
    the failing rank raises its own, the others the same class with "rank p: " and its reason."""
    try:
        every = comm.allgather(None if err is None else (type(err).__name__, str(err)))
    except AttributeError:
        raise InputError("comm must be an mpi4py communicator (got %r)" % (comm,))
    for p, e in enumerate(every):
        if e is not None:
            if err is not None:
                raise err
            cls = getattr(_lib, e[0], InputError)
            raise cls("rank %d: %s" % (p, e[1]))


def local_checked(comm, fn):
    """fn(): this rank's own checks of its arguments (shapes, dtypes, gates, options), made
    before any collective; returns what fn returns. With comm they are agreed (agree_errors):
    a failure on any rank is raised on every rank, so none is left waiting in a collective."""
    try:
        out, err = fn(), None
    except _lib.Error as e:
        if comm is None:
            raise
        out, err = None, e
    if comm is not None:
        agree_errors(comm, err)
    return out


def check_gates_width(op, garr):
    """Per-feature gates: r must be the map's width."""
    if garr is None or garr.ndim != 4:
        return
    if garr.shape[3] != op.r:
        raise InputError("gates has %d features per token and head; the %s map has r = %d "
                         "(per-feature log-gates are [B, L, H, r])" % (garr.shape[3], op.map, op.r))


def _decay_arg(decay):
    """decay= (docs/design.md §1.2): None, one gamma for every head, a sequence of one per
    head, or "retnet". Returns (ctypes array or None, count, retnet)."""
    if decay is None:
        return None, 0, 0
    if isinstance(decay, str):
        if decay != "retnet":
            raise InputError("decay %r: give a gamma in (0, 1], a sequence of one per head, or "
                             "'retnet'" % (decay,))
        return None, 0, 1
    try:
        vals = [float(decay)] if not hasattr(decay, "__len__") else [float(x) for x in decay]
    except (TypeError, ValueError):
        raise InputError("decay %r: give a gamma in (0, 1], a sequence of one per head, or "
                         "'retnet'" % (decay,)) from None
    if not vals:
        raise InputError("decay: an empty sequence (give one gamma, or one per head)")
    return (ctypes.c_double * len(vals))(*vals), len(vals), 0


class Op:
    """An operator handle (la_py_op): the configuration, the feature map with its projection,
    and the planned engine. Freed with the object."""

    def __init__(self, *, f64, heads, dk, dv, feature_map="elu1", features=None, mode="causal",
                 normalize=True, denominator="error", allow_signed=False, scale=None, seed=0,
                 projection=None, window=None, chunk=None, threads=None, kernels="auto",
                 decay=None, gates=False):
        """gates: whether the calls take log-gates (their values come with each call): False,
        True ([B, L, H]) or "feature" ([B, L, H, r])."""
        self.h = None
        dbuf, dn, dretnet = _decay_arg(decay)
        if not isinstance(gates, bool) and gates != "feature":
            raise InputError("gates: Op takes True, False or 'feature' (the log-gates come with "
                             "each call)")
        if feature_map not in _lib.MAP_NAMES:
            raise InputError("feature_map %r is not one of %s" % (feature_map, ", ".join(_lib.MAP_NAMES)))
        if mode not in ("causal", "bidirectional"):
            raise InputError("mode %r is not 'causal' or 'bidirectional'" % (mode,))
        if not isinstance(denominator, str):
            raise InputError("denominator must be a string: error, add:EPS, clamp:EPS or zero-empty")
        if not normalize and denominator != "error":
            raise InputError("denominator %r: a policy acts on the normalized operator's "
                             "denominator; with normalize=False there is none (refused, as "
                             "the CLI refuses --denominator with --normalize off)" % (denominator,))
        if kernels not in KERNELS:
            raise InputError("kernels %r is not one of %s" % (kernels, ", ".join(KERNELS)))
        if features is None:  # dpfp's nu defaults to 1 (DPFP-1); the random maps' m to 256
            features = 1 if feature_map == "dpfp" else 256
        features = _int("features", features, 1)
        seed = _int("seed", seed, 0, 2**64 - 1)
        window = _int("window", window, 1, none_ok=True)
        chunk = _int("chunk", chunk, 1, 4096, none_ok=True)
        threads = _int("threads", threads, 0, 4096, none_ok=True)
        if scale is not None:
            scale = float(scale)
            if not (math.isfinite(scale) and scale > 0):
                raise InputError("scale must be finite and > 0 (got %r)" % (scale,))
        self.mode = mode
        self.map = feature_map
        self.window = window
        self.f64 = f64
        self.heads, self.dk, self.dv = heads, dk, dv
        pbuf, pm, pshared = None, 0, 0
        if projection is not None:
            pbuf, pm, pshared = projection
            if pshared == 0 and pm and len(pbuf) != heads * pm * dk:
                raise InputError("projection: %d heads, this call has %d" % (len(pbuf) // (pm * dk), heads))
        self.lock = threading.Lock()  # one call at a time on the engine's workspaces
        h = ctypes.c_void_p()
        check(_lib.lib.la_py_op_create(
            feature_map.encode(), features, mode.encode(), int(bool(normalize)),
            denominator.encode(), int(bool(allow_signed)), 0.0 if scale is None else scale, seed,
            window or 0, chunk or 0, threads or 0, kernels.encode(), 0, int(bool(f64)), heads,
            dk, dv, pbuf, pm, pshared, dbuf, dn, dretnet, 2 if gates == "feature" else int(gates),
            ctypes.byref(h)))
        self.gated = gates
        self.h = h
        self.r = _lib.lib.la_py_op_width(h)
        self.kernels = _lib.lib.la_py_op_kernels(h).decode()
        self.threads = _lib.lib.la_py_op_threads(h)

    def __del__(self):
        h, self.h = getattr(self, "h", None), None
        if h:
            try:
                _lib.lib.la_py_op_destroy(h)
            except Exception:  # noqa: BLE001 - at interpreter exit the module may be gone
                pass

    def projection(self):
        """The projection [H, m, dk] as a flat ctypes double array, and m (None for maps
        without one)."""
        m = _lib.lib.la_py_op_features(self.h)
        if m == 0:
            return None, 0
        buf = (ctypes.c_double * (self.heads * m * self.dk))()
        check(_lib.lib.la_py_op_projection(self.h, buf, len(buf)))
        return buf, m

    # ---- calls on raw pointers ----
    def tape_size(self, B, L):
        """Bytes of the tape of a B x L call on one process (docs/design.md §4.4 "Tape"); 0
        when this operator cannot keep one (bidirectional, a window shorter than B L)."""
        return int(_lib.lib.la_py_tape_size(self.h, B, L))

    def forward(self, B, L, q, k, v, out, seg, dist=None, tape=None, gates=None):
        """gates: the log-gates [B, L, H] (gates_array) of a gated operator."""
        with self.lock:
            check(_lib.lib.la_py_op_set_gates(self.h, None if gates is None else gates.ctypes.data))
            try:
                return self._forward(B, L, q, k, v, out, seg, dist, tape)
            finally:
                _lib.lib.la_py_op_set_gates(self.h, None)

    def backward(self, B, L, q, k, v, g, dq, dk, dv, seg, dist=None, out=None, tape=None,
                 fwd_stats=None, gates=None, dgates=None):
        """With tape (and the forward's out), the backward reads the forward's tape; no
        denominators are formed, so the statistics recorded are the forward's (fwd_stats), the
        same rows the replay would have noted. gates: the forward's log-gates [B, L, H]
        (gates_array); dgates: a float64 [B, L, H] array that receives dL/dg, or None."""
        with self.lock:
            check(_lib.lib.la_py_op_set_gates(self.h, None if gates is None else gates.ctypes.data))
            if dgates is not None:
                check(_lib.lib.la_py_op_set_gates_grad(self.h, dgates.ctypes.data))
            try:
                return self._backward(B, L, q, k, v, g, dq, dk, dv, seg, dist, out, tape,
                                      fwd_stats)
            finally:
                _lib.lib.la_py_op_set_gates(self.h, None)
                if self.gated:
                    _lib.lib.la_py_op_set_gates_grad(self.h, None)

    def _forward(self, B, L, q, k, v, out, seg, dist, tape):
        st = _lib.stats_buffer()
        sarr, ns = seg
        if dist is None:
            check(_lib.lib.la_py_forward(self.h, B, L, q, k, v, out, sarr, ns, st, tape))
        else:
            commf, scan, row0, Ltot = dist
            check(_lib.lib.la_py_forward_dist(self.h, commf, scan.encode(), B, L, row0, Ltot, q, k,
                                              v, out, sarr, ns, st))
        return _lib.record_stats(st, "forward")

    def _backward(self, B, L, q, k, v, g, dq, dk, dv, seg, dist, out, tape, fwd_stats):
        st = _lib.stats_buffer()
        sarr, ns = seg
        if dist is None:
            check(_lib.lib.la_py_backward(self.h, B, L, q, k, v, g, dq, dk, dv, sarr, ns, st,
                                          out, tape))
            if tape is not None:
                return _lib.record_dict(dict(fwd_stats or {}), "backward")
        else:
            commf, scan, row0, Ltot = dist
            check(_lib.lib.la_py_backward_dist(self.h, commf, scan.encode(), B, L, row0, Ltot, q,
                                               k, v, g, dq, dk, dv, sarr, ns, st))
        return _lib.record_stats(st, "backward")


_ops = threading.local()


def cached_op(**kw):
    """Op(**kw), reusing this thread's previous operator when every argument (the projection's
    values included) is the same: creating the feature map and the engine, with its
    workspaces, cost about 1 ms per call (docs/python.md "Speed"). An operator runs one call
    at a time (its lock), so a backward on another thread waits instead of sharing the
    workspaces."""
    proj = kw.get("projection")
    if any(b is not None and not isinstance(b, (bool, int, float, str))
           for a, b in kw.items() if a != "projection"):
        return Op(**kw)  # not a plain value (a tensor for gates, say): Op says what is wrong
    key = (tuple(sorted((a, type(b).__name__, b) for a, b in kw.items() if a != "projection")),
           None if proj is None else (bytes(proj[0]), proj[1], proj[2]))
    last = getattr(_ops, "last", None)
    if last is not None and last[0] == key:
        return last[1]
    op = Op(**kw)
    _ops.last = (key, op)
    return op


def projection_arg(proj, heads, dk, name="projection"):
    """A projection given as nested floats / numpy / torch, [H, m, dk] or [m, dk], to the
    (flat float64 ctypes array, m, shared) that Op takes."""
    if proj is None:
        return None
    try:
        import numpy as np
        if hasattr(proj, "detach"):
            proj = proj.detach().cpu().double().numpy()
        a = np.ascontiguousarray(np.asarray(proj, dtype=np.float64))
    except Exception as e:  # noqa: BLE001 - anything that is not an array of numbers
        raise InputError("%s: not an array of numbers (%s)" % (name, e))
    if a.ndim not in (2, 3) or a.shape[-1] != dk or (a.ndim == 3 and a.shape[0] != heads):
        raise InputError("%s has shape %s: it must be [H=%d, m, dk=%d] or [m, dk=%d]"
                         % (name, a.shape, heads, dk, dk))
    m = int(a.shape[-2])
    if m < 1:
        raise InputError("%s has no rows" % name)
    if not np.isfinite(a).all():
        raise InputError("%s has a non-finite entry" % name)
    flat = a.reshape(-1)
    buf = (ctypes.c_double * flat.size).from_buffer_copy(flat.tobytes())
    return buf, m, int(a.ndim == 2)


def dist_args(comm, B, L, H, dk, dv, dtype, key, shard_of):
    """Agree on the shapes across the ranks of an mpi4py communicator, before any collective
    of the engine: returns (fortran handle, row0, Ltot), or raises the same InputError on
    every rank. shard_of(Ltot, P, rank) gives the required (n, row0)."""
    try:
        commf = int(comm.py2f())
        rank, P = comm.Get_rank(), comm.Get_size()
    except AttributeError:
        raise InputError("comm must be an mpi4py communicator (got %r)" % (comm,))
    mine = (B, H, dk, dv, dtype, key, L)
    every = comm.allgather(mine)
    names = ("batch", "heads", "dk", "dv", "dtype", "options")
    for p, other in enumerate(every):
        for i, what in enumerate(names):
            if other[i] != mine[i]:
                shown = (other[i], mine[i]) if i < 5 else ("one set", "another")
                raise InputError("comm: rank %d calls with %s %s, rank %d with %s: every rank must "
                                 "pass the same" % (p, what, shown[0], rank, shown[1]))
    lens = [o[6] for o in every]
    Ltot = sum(lens)
    row0 = sum(lens[:rank])
    for p in range(P):
        n, r0 = shard_of(Ltot, P, p)
        if lens[p] != n:
            raise InputError("comm: rank %d holds %d rows of a sequence of %d; linattn.shard(%d, comm) "
                             "gives rank %d rows [%d, %d)" % (p, lens[p], Ltot, Ltot, p, r0, r0 + n))
    return commf, row0, Ltot


def shard_range(Ltot, P, rank):
    n, r0 = ctypes.c_int64(), ctypes.c_int64()
    _lib.lib.la_py_shard(None, Ltot, P, rank, ctypes.byref(n), ctypes.byref(r0))
    return n.value, r0.value


def softmax_checks(mode, scale, window, dk):
    if mode not in ("causal", "bidirectional"):
        raise InputError("mode %r is not 'causal' or 'bidirectional'" % (mode,))
    window = _int("window", window, 1, none_ok=True)
    if window and mode != "causal":
        raise InputError("window: a sliding window is a causal mask (refused in bidirectional mode)")
    if scale is None:
        scale = 1.0 / math.sqrt(dk)
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise InputError("scale must be finite and > 0 (got %r)" % (scale,))
    return window or 0, scale
