#!/usr/bin/python3
"""Bad input to the Python binding, as one table (as tests/oracle/bad_input.py does for the CLI).

Every row of the table is a call with one thing wrong, the exception classes it must raise
(each checked with isinstance: linattn.InputError is also a ValueError, UnsupportedError also
an InputError and a NotImplementedError, DenominatorError and OutputOverflowError also
ArithmeticErrors, TypeError for unknown keywords) and substrings its message must contain
(the option, and for a NaN the (batch, token, head, column)). Each row also checks that
nothing came back (no output in place of an error), that the inputs were not changed, that
`.reason` is the message, and that a good call afterwards still works and is finite.

The table runs in a child process (this script with --child) so that a crash in a row is
reported with the row's name instead of taking the test down silently.

Then: the error policy's DenominatorError for identity with allow_signed on data built to give
a negative (or exactly zero) denominator at a known (batch, token, head); and failed
allocations: with LINATTN_FAIL_ALLOC=N (core/base/alloc.c: the Nth allocation of the process fails,
read once when the library loads) a small forward + backward (linear and softmax, numpy; and
torch for a few N) either succeeds with the correct output or raises linattn.OutOfMemoryError
(a MemoryError), after which the same call succeeds -- never a crash, never a NaN.

Run: PYTHONPATH=python LINATTN_LIBRARY=build/python/liblinattn_py.so \
     /usr/bin/python3 tests/python/test_bad_input.py      (exit 77: numpy or torch missing)
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _common as C  # noqa: E402

C.need(torch_too=True)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import linattn  # noqa: E402
import linattn.torch as lt  # noqa: E402

torch.set_num_threads(1)
B, L, H, DK, DV = 2, 10, 2, 4, 3
IE, VE, UE, DE = linattn.InputError, ValueError, linattn.UnsupportedError, linattn.DenominatorError


def base():
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(B, L, H, DK, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(B, L, H, DV, generator=g, dtype=torch.float64)
    return q, k, v


Q, K, V = base()
QN, KN, VN = (x.numpy().copy() for x in (Q, K, V))


def with_value(x, idx, val):
    y = x.clone()
    y[idx] = val
    return y


def noncontig(x):
    """The same shape, not contiguous: a transpose of a [B, H, L, d] tensor."""
    y = x.transpose(1, 2).contiguous().transpose(1, 2)
    assert not y.is_contiguous() and y.shape == x.shape
    return y


A = lt.attention
S = lt.softmax_attention
NA, NB = linattn.numpy.attention, linattn.numpy.attention_backward
NS, NSB = linattn.numpy.softmax_attention, linattn.numpy.softmax_attention_backward
FAV = dict(feature_map="favor+", features=8)

# (name, call, exception classes, substrings of the message)
CASES = [
    # dtype and layout
    ("float16", lambda: A(Q.half(), K.half(), V.half()), (IE, VE), ["q", "float16"]),
    ("int64", lambda: A(Q.long(), K.long(), V.long()), (IE, VE), ["q", "int64"]),
    ("mixed dtypes (q f32, k v f64)", lambda: A(Q.float(), K, V), (IE, VE), ["dtype"]),
    ("mixed dtypes (v f32)", lambda: A(Q, K, V.float()), (IE, VE), ["v", "dtype"]),
    ("non-contiguous q (a transpose)", lambda: A(noncontig(Q), K, V), (IE, VE), ["q", "contiguous"]),
    ("non-contiguous v", lambda: A(Q, K, noncontig(V)), (IE, VE), ["v", "contiguous"]),
    ("3-D tensors (torch)", lambda: A(Q[0], K[0], V[0]), (IE, VE), ["[B, L, H, d]"]),
    ("5-D tensor", lambda: A(Q[None], K[None], V[None]), (IE, VE), ["[B, L, H, d]"]),
    ("not a tensor", lambda: A(QN, K, V), (IE, VE), ["q", "torch.Tensor"]),
    # shapes
    ("B of k differs", lambda: A(Q, K[:1].contiguous(), V), (IE, VE), ["k", "[B, L, H]"]),
    ("L of v differs", lambda: A(Q, K, V[:, :9].contiguous()), (IE, VE), ["v", "[B, L, H]"]),
    ("H of k differs", lambda: A(Q, K[:, :, :1].contiguous(), V), (IE, VE), ["k", "[B, L, H]"]),
    ("dk of k differs", lambda: A(Q, K[..., :3].contiguous(), V), (IE, VE), ["k", "width"]),
    ("dv of grad_out differs (numpy)", lambda: NB(QN, KN, VN, np.zeros((B, L, H, DV + 1))), (IE, VE),
     ["grad_out", "width"]),
    ("B of grad_out differs (numpy)", lambda: NB(QN, KN, VN, np.zeros((1, L, H, DV))), (IE, VE),
     ["grad_out", "[B, L, H]"]),
    ("empty L", lambda: A(Q[:, :0].contiguous(), K[:, :0].contiguous(), V[:, :0].contiguous()), (IE, VE),
     ["empty"]),
    # non-finite values: named by batch, token, head, column
    ("NaN in q", lambda: A(with_value(Q, (1, 7, 0, 2), float("nan")), K, V), (IE, VE),
     ["q", "not finite", "(batch 1, token 7, head 0, column 2)"]),
    ("Inf in k", lambda: A(Q, with_value(K, (0, 3, 1, 0), float("inf")), V), (IE, VE),
     ["k", "(batch 0, token 3, head 1, column 0)"]),
    ("-Inf in v", lambda: A(Q, K, with_value(V, (1, 9, 1, 2), float("-inf"))), (IE, VE),
     ["v", "(batch 1, token 9, head 1, column 2)"]),
    ("NaN in k, float32", lambda: A(Q.float(), with_value(K.float(), (1, 0, 1, 3), float("nan")),
                                    V.float()), (IE, VE), ["k", "(batch 1, token 0, head 1, column 3)"]),
    ("NaN in q (numpy, [L, H, d])", lambda: NA(np.where(np.arange(L)[:, None, None] == 4, np.nan, QN[0])
                                               * np.ones((1, 1, DK)), KN[0], VN[0]),
     (IE, VE), ["q", "(batch 0, token 4, head 0, column 0)"]),
    ("NaN in grad_out (numpy)", lambda: NB(QN, KN, VN, np.where(np.arange(DV) == 1, np.nan, 0.0)
                                           * np.ones((B, L, H, 1))),
     (IE, VE), ["gradient", "(batch 0, token 0, head 0, column 1)"]),
    ("NaN in q, bidirectional", lambda: A(with_value(Q, (0, 2, 1, 1), float("nan")), K, V,
                                          mode="bidirectional"),
     (IE, VE), ["q", "(batch 0, token 2, head 1, column 1)"]),
    ("NaN in the output's gradient (torch backward, with the tape)",
     lambda: A(Q.clone().requires_grad_(), K, V).backward(
         with_value(torch.ones(B, L, H, DV, dtype=Q.dtype), (1, 5, 0, 1), float("nan"))),
     (IE, VE), ["gradient", "(batch 1, token 5, head 0, column 1)"]),
    ("NaN in q (softmax)", lambda: S(with_value(Q, (0, 5, 1, 1), float("nan")), K, V), (IE, VE),
     ["q", "(batch 0, token 5, head 1, column 1)"]),
    ("Inf in v (numpy softmax)", lambda: NS(QN, KN, with_value(V, (1, 2, 0, 0), float("inf")).numpy()),
     (IE, VE), ["v", "(batch 1, token 2, head 0, column 0)"]),
    # masks
    ("window in bidirectional mode", lambda: A(Q, K, V, mode="bidirectional", window=3), (IE, VE),
     ["window", "causal"]),
    ("window = 0", lambda: A(Q, K, V, window=0), (IE, VE), ["window"]),
    ("window = -2", lambda: A(Q, K, V, window=-2), (IE, VE), ["window"]),
    ("window in bidirectional mode (softmax)", lambda: S(Q, K, V, mode="bidirectional", window=3),
     (IE, VE), ["window", "causal"]),
    ("window = 0 (softmax)", lambda: S(Q, K, V, window=0), (IE, VE), ["window"]),
    ("segments not starting at 0", lambda: A(Q, K, V, segments=[1, 5, L]), (IE, VE), ["segments"]),
    ("segments not ending at L", lambda: A(Q, K, V, segments=[0, 5, L - 1]), (IE, VE), ["segments", str(L)]),
    ("segments not increasing", lambda: A(Q, K, V, segments=[0, 6, 4, L]), (IE, VE), ["segments", "increase"]),
    ("segments repeated offset", lambda: A(Q, K, V, segments=[0, 5, 5, L]), (IE, VE), ["segments"]),
    ("segments 2-D", lambda: A(Q, K, V, segments=[[0, 5, L]]), (IE, VE), ["segments", "1-D"]),
    ("segments float", lambda: A(Q, K, V, segments=[0.0, 5.0, float(L)]), (IE, VE), ["segments", "integer"]),
    ("segments of one offset", lambda: A(Q, K, V, segments=[0]), (IE, VE), ["segments"]),
    ("segments bad (softmax)", lambda: S(Q, K, V, segments=[0, 5, L + 1]), (IE, VE), ["segments"]),
    ("segments bad (numpy)", lambda: NA(QN, KN, VN, segments=[0, 5, 3, L]), (IE, VE), ["segments"]),
    # maps and options
    ("identity in normalized mode without allow_signed", lambda: A(Q, K, V, feature_map="identity"),
     (IE, VE), ["identity", "allow", "signed"]),
    ("trig in normalized mode without allow_signed", lambda: A(Q, K, V, feature_map="trig", features=8),
     (IE, VE), ["trig", "allow", "signed"]),
    ("unknown feature map", lambda: A(Q, K, V, feature_map="softmax"), (IE, VE), ["softmax"]),
    ("unknown mode", lambda: A(Q, K, V, mode="sideways"), (IE, VE), ["sideways"]),
    ("unknown mode (softmax)", lambda: S(Q, K, V, mode="sideways"), (IE, VE), ["sideways"]),
    ("denominator add:-1", lambda: A(Q, K, V, denominator="add:-1"), (IE, VE), ["add:-1"]),
    ("denominator clamp:0", lambda: A(Q, K, V, denominator="clamp:0"), (IE, VE), ["clamp:0"]),
    ("denominator foo", lambda: A(Q, K, V, denominator="foo"), (IE, VE), ["foo"]),
    ("denominator add:nan", lambda: A(Q, K, V, denominator="add:nan"), (IE, VE), ["add:nan"]),
    ("denominator not a string", lambda: A(Q, K, V, denominator=1e-3), (IE, VE), ["denominator"]),
    ("features = 0", lambda: A(Q, K, V, feature_map="favor+", features=0), (IE, VE), ["features"]),
    ("features = 70000", lambda: A(Q, K, V, feature_map="favor+", features=70000), (IE, VE), ["features"]),
    ("scale = -1", lambda: A(Q, K, V, scale=-1), (IE, VE), ["scale"]),
    ("scale = NaN", lambda: A(Q, K, V, scale=float("nan")), (IE, VE), ["scale"]),
    ("scale = -1 (softmax)", lambda: S(Q, K, V, scale=-1.0), (IE, VE), ["scale"]),
    ("scale = inf (numpy softmax)", lambda: NS(QN, KN, VN, scale=float("inf")), (IE, VE), ["scale"]),
    ("chunk = 0", lambda: A(Q, K, V, chunk=0), (IE, VE), ["chunk"]),
    ("chunk = 5000", lambda: A(Q, K, V, chunk=5000), (IE, VE), ["chunk"]),
    ("seed = -1", lambda: A(Q, K, V, seed=-1, **FAV), (IE, VE), ["seed"]),
    ("threads = -1", lambda: A(Q, K, V, threads=-1), (IE, VE), ["threads"]),
    ("projection of the wrong dk", lambda: A(Q, K, V, projection=np.zeros((H, 8, DK + 1)), **FAV), (IE, VE),
     ["projection", "shape"]),
    ("projection of the wrong H", lambda: A(Q, K, V, projection=np.zeros((H + 1, 8, DK)), **FAV), (IE, VE),
     ["projection"]),
    ("projection 1-D", lambda: A(Q, K, V, projection=np.zeros(8), **FAV), (IE, VE), ["projection"]),
    ("projection with a NaN", lambda: A(Q, K, V, projection=np.where(np.arange(DK) == 2, np.nan, 1.0)
                                        * np.ones((H, 8, 1)), **FAV), (IE, VE), ["projection", "finite"]),
    ("projection with an Inf ([m, dk])", lambda: A(Q, K, V, projection=np.full((8, DK), np.inf), **FAV),
     (IE, VE), ["projection", "finite"]),
    ("projection of strings", lambda: A(Q, K, V, projection=[["a"] * DK] * 8, **FAV), (IE, VE), ["projection"]),
    ("projection with a map without one", lambda: A(Q, K, V, projection=np.zeros((H, 8, DK))), (IE, VE),
     ["projection", "elu1"]),
    # decay= (docs/design.md §1.2): gamma in (0, 1], one or one per head, or "retnet"
    ("decay = 0", lambda: A(Q, K, V, decay=0.0), (IE, VE), ["decay", "(0, 1]"]),
    ("decay = 1.5", lambda: A(Q, K, V, decay=1.5), (IE, VE), ["decay", "(0, 1]"]),
    ("decay = nan", lambda: A(Q, K, V, decay=float("nan")), (IE, VE), ["decay", "(0, 1]"]),
    ("decay list not of H", lambda: A(Q, K, V, decay=[0.9] * (H + 1)), (IE, VE),
     ["decay", "for %d heads" % H]),
    ("decay = 'x'", lambda: A(Q, K, V, decay="x"), (IE, VE), ["decay"]),
    # the backward with decay: causal, maps without a stabilizer (design §1.2)
    ("NaN in the output's gradient (torch backward, decay)",
     lambda: A(Q.clone().requires_grad_(), K, V, decay=0.9).backward(
         with_value(torch.ones(B, L, H, DV, dtype=Q.dtype), (1, 5, 0, 1), float("nan"))),
     (IE, VE), ["gradient", "(batch 1, token 5, head 0, column 1)"]),
    ("NaN in grad_out (numpy, decay)", lambda: NB(QN, KN, VN, np.where(np.arange(DV) == 1, np.nan,
                                                                       0.0) * np.ones((B, L, H, 1)),
                                                  decay=0.9),
     (IE, VE), ["gradient", "(batch 0, token 0, head 0, column 1)"]),
    ("decay with a gradient, favor+, keys far apart", lambda: A(
        Q.clone().requires_grad_(), with_value(K, (0, 5), 60.0 * K[0, 5]), V, decay=0.9,
        feature_map="favor+", features=8).sum().backward(),
     (UE, NotImplementedError), ["decay", "favor+", "span", "nats"]),
    ("gates above 0", lambda: A(Q, K, V, gates=torch.full((B, L, H), 0.25)), (IE, VE),
     ["gates", "(batch 0, token 0, head 0)", "<= 0"]),
    ("gates of the wrong shape", lambda: A(Q, K, V, gates=torch.zeros(B, L, H + 1)), (IE, VE),
     ["gates", "[%d, %d, %d]" % (B, L, H)]),
    ("gates per feature (GLA's [B, L, H, r]) with a window", lambda: A(
        Q, K, V, gates=torch.zeros(B, L, H, DK), window=3),
     (UE, NotImplementedError), ["per-feature", "window", "not built yet"]),
    ("gates per feature of the wrong width", lambda: A(Q, K, V, gates=torch.zeros(B, L, H, DK + 1)),
     (IE, VE), ["gates", "%d features" % (DK + 1), "r = %d" % DK]),
    ("gates with a gradient, favor+, keys far apart", lambda: A(
        Q.clone().requires_grad_(), with_value(K, (0, 5), 60.0 * K[0, 5]), V,
        gates=torch.zeros(B, L, H, requires_grad=True), feature_map="favor+",
        features=8).sum().backward(), (UE, NotImplementedError), ["gates", "favor+", "span", "nats"]),
    ("gates bidirectional (numpy)", lambda: NA(QN, KN, VN, gates=np.zeros((B, L, H)),
                                               mode="bidirectional"), (IE, VE), ["gates", "causal"]),
    ("kernels = foo", lambda: A(Q, K, V, kernels="foo"), (IE, VE), ["kernels", "foo"]),
    ("scan_algorithm = foo", lambda: A(Q, K, V, scan_algorithm="foo"), (IE, VE), ["scan_algorithm", "foo"]),
    ("scan_algorithm = foo (numpy)", lambda: NA(QN, KN, VN, scan_algorithm="foo"), (IE, VE), ["foo"]),
    ("LinearAttention redraw_interval = 0",
     lambda: lt.LinearAttention(H, DK, features=8, redraw_interval=0), (IE, VE), ["redraw_interval"]),
    ("LinearAttention unknown map", lambda: lt.LinearAttention(H, DK, feature_map="nope"), (IE, VE), ["nope"]),
    # dpfp's nu = features must be in [1, 2 dk - 1] (docs/design.md §2), when the library has dpfp
] + ([
    ("dpfp features = 2 dk", lambda: A(Q.abs(), K.abs(), V, feature_map="dpfp", features=2 * DK), (IE, VE),
     ["dpfp"]),
    ("dpfp features = 0", lambda: A(Q.abs(), K.abs(), V, feature_map="dpfp", features=0), (IE, VE),
     ["features"]),
    ("dpfp projection", lambda: A(Q.abs(), K.abs(), V, feature_map="dpfp", features=2,
                                  projection=np.zeros((H, 2, DK))), (IE, VE), ["projection"]),
] if "dpfp" in linattn.feature_maps else []) + ([
    ("taylor2 projection", lambda: A(Q, K, V, feature_map="taylor2", projection=np.zeros((H, 2, DK))),
     (IE, VE), ["projection"]),
] if "taylor2" in linattn.feature_maps else []) + [
    # a CUDA tensor (only where CUDA exists; this project's CPU-only torch skips the row)
] + ([
    ("CUDA tensor", lambda: A(Q.cuda(), K.cuda(), V.cuda()), (IE, VE), ["q", "cuda", "CPU"]),
] if torch.cuda.is_available() else []) + [
    # unknown keywords
    ("unknown keyword (torch attention)", lambda: A(Q, K, V, frobnicate=1), (TypeError,), ["frobnicate"]),
    ("unknown keyword (softmax)", lambda: S(Q, K, V, feature_map="elu1"), (TypeError,), ["feature_map"]),
    ("unknown keyword (numpy attention)", lambda: NA(QN, KN, VN, frobnicate=1), (TypeError,), ["frobnicate"]),
    ("unknown keyword (numpy backward)", lambda: NB(QN, KN, VN, VN, window_size=3), (TypeError,),
     ["window_size"]),
    ("unknown keyword (numpy softmax)", lambda: NS(QN, KN, VN, features=3), (TypeError,), ["features"]),
    # numpy specifics
    ("numpy float16", lambda: NA(QN.astype(np.float16), KN.astype(np.float16), VN.astype(np.float16)),
     (IE, VE), ["float16"]),
    ("numpy non-contiguous (Fortran order)", lambda: NA(np.asfortranarray(QN), KN, VN), (IE, VE),
     ["contiguous"]),
    ("numpy mix of [L, H, d] and [B, L, H, d]", lambda: NA(QN[0], KN, VN), (IE, VE), ["[L, H, d]"]),
    ("numpy list input", lambda: NA(QN.tolist(), KN, VN), (IE, VE), ["numpy.ndarray"]),
    ("numpy softmax backward dtype", lambda: NSB(QN.astype(np.int32), KN, VN, VN), (IE, VE), ["int32"]),
    # the output's range (unnormalized, float32)
    ("unnormalized float32 overflow", lambda: A((Q.abs() * 1e19).float(), (K.abs() * 1e19).float(), V.float(),
                                                 feature_map="identity", normalize=False),
     (linattn.OutputOverflowError, ArithmeticError), ["overflow", "f32", "batch 0, token 0"]),
]


def child():
    chk = C.Checks("test_bad_input (table)")
    if not torch.cuda.is_available():
        print("note: no CUDA device: the CUDA-tensor row is skipped")
    chk.start("bad input table: %d rows (class, message, no output, inputs unchanged)" % len(CASES))
    snap = [x.clone() for x in (Q, K, V)] + [x.copy() for x in (QN, KN, VN)]
    for name, call, classes, subs in CASES:
        print("ROW %s" % name, file=sys.stderr, flush=True)   # for the parent, if we crash
        try:
            got = call()
            bad = ""
            if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
                bad = " (and it has NaN/Inf)"
            chk.check(False, "%s: no exception, returned %s%s" % (name, type(got).__name__, bad))
        except Exception as e:  # noqa: BLE001 - the class is the check
            msg = str(e)
            miss = [c.__name__ for c in classes if not isinstance(e, c)]
            chk.check(not miss, "%s: %s is not a %s (message %r)" % (name, type(e).__name__, miss, msg))
            absent = [s for s in subs if s not in msg]
            chk.check(not absent, "%s: message %r lacks %r" % (name, msg, absent))
            if isinstance(e, linattn.Error):
                chk.check(e.reason == msg and isinstance(e.status, int) and e.status != 0,
                          "%s: reason %r / status %r" % (name, e.reason, e.status))
            chk.check("\n" not in msg.strip(), "%s: message is not one line: %r" % (name, msg))
        same = all(torch.equal(a, b) for a, b in zip(snap[:3], (Q, K, V))) and \
            all(np.array_equal(a, b) for a, b in zip(snap[3:], (QN, KN, VN)))
        chk.check(same, "%s: the call changed its inputs" % name)
        out = A(Q, K, V, **FAV)
        chk.check(bool(torch.isfinite(out).all()), "%s: a good call afterwards is not finite" % name)
    denominator_rows(chk)
    chk.finish()


def denominator_rows(chk):
    chk.start("DenominatorError: identity + allow_signed, den < 0 / = 0 at a known position")
    g = torch.Generator().manual_seed(8)
    q = 1 + 0.3 * torch.randn(B, L, H, DK, generator=g, dtype=torch.float64)
    k = 1 + 0.3 * torch.randn(B, L, H, DK, generator=g, dtype=torch.float64)
    v = torch.randn(B, L, H, DV, generator=g, dtype=torch.float64)
    neg = q.clone()
    neg[1, 6, 1] = -neg[1, 6, 1]          # q.k < 0 for every key: den < 0 in both modes
    zero = q.clone()
    zero[0, 3, 0] = 0.0                   # phi(q) = 0: den = 0 exactly
    rows = B * L * H
    for mode in ("causal", "bidirectional"):
        kw = dict(feature_map="identity", allow_signed=True, mode=mode)
        for data, pol, where, cnt in ((neg, "error", "(batch 1, token 6, head 1)", 1),
                                      (neg, "zero-empty", "(batch 1, token 6, head 1)", 1),
                                      (zero, "error", "(batch 0, token 3, head 0)", 1),
                                      (zero, "add:0", "(batch 0, token 3, head 0)", 1)):
            lab = "%s %s %s" % (mode, pol, where)
            try:
                out = A(data, k, v, denominator=pol, **kw)
                chk.check(False, "%s: no DenominatorError (output finite: %s)" % (lab, bool(torch.isfinite(out).all())))
            except linattn.DenominatorError as e:
                m = str(e)
                chk.check(isinstance(e, ArithmeticError) and where in m and "'%s'" % pol.split(":")[0] in m
                          and ("%d of %d rows" % (cnt, rows)) in m,
                          "%s: message %r (want %s, policy name, '%d of %d rows')" % (lab, m, where, cnt, rows))
            except Exception as e:  # noqa: BLE001
                chk.check(False, "%s: %s instead of DenominatorError: %s" % (lab, type(e).__name__, e))
        # the same data under the policies that accept it: finite, and zero-empty zeroes den = 0
        out = A(zero, k, v, denominator="zero-empty", **kw)
        chk.check(bool(torch.isfinite(out).all()) and bool((out[0, 3, 0] == 0).all()),
                  "%s zero-empty on den = 0: row (0, 3, 0) = %s" % (mode, out[0, 3, 0].tolist()))
        out = A(neg, k, v, denominator="add:0", **kw)
        chk.check(bool(torch.isfinite(out).all()), "%s add:0 on den < 0: non-finite output" % mode)
        # the backward reports the same violation (numpy)
        try:
            NB(neg.numpy(), k.numpy(), v.numpy(), np.ones((B, L, H, DV)), denominator="error", **kw)
            chk.check(False, "%s: backward without DenominatorError" % mode)
        except linattn.DenominatorError as e:
            chk.check("(batch 1, token 6, head 1)" in str(e), "%s backward: message %r" % (mode, str(e)))


# ---------------------------------------------------------------------------------------------
# Failed allocations (LINATTN_FAIL_ALLOC=N), one child process per N.

OOM_CHILD = r"""
import sys, numpy as np, linattn
use_torch = sys.argv[2] == "torch"
rng = np.random.default_rng(5)
q, k = rng.standard_normal((2, 9, 2, 3)), rng.standard_normal((2, 9, 2, 3))
v, g = rng.standard_normal((2, 9, 2, 2)), rng.standard_normal((2, 9, 2, 2))
kw = dict(feature_map="favor+", features=8, segments=[0, 4, 9], threads=1)

def work():
    if use_torch:
        import torch, linattn.torch as lt
        xs = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
        o = lt.attention(*xs, **kw)
        o.backward(torch.tensor(g))
        s = lt.softmax_attention(*xs, segments=[0, 4, 9], threads=1)
        s.backward(torch.tensor(g))
        return [o.detach().numpy()] + [x.grad.numpy() for x in xs] + [s.detach().numpy()]
    o = linattn.numpy.attention(q, k, v, **kw)
    d = linattn.numpy.attention_backward(q, k, v, g, **kw)
    s = linattn.numpy.softmax_attention(q, k, v, segments=[0, 4, 9], threads=1)
    ds = linattn.numpy.softmax_attention_backward(q, k, v, g, segments=[0, 4, 9], threads=1)
    w = linattn.numpy.attention(q, k, v, feature_map="elu1", window=3, threads=1)
    return [o, *d, s, *ds, w]

status = "ok"
try:
    res = work()
except MemoryError as e:
    if not isinstance(e, linattn.OutOfMemoryError):
        print("MemoryError that is not linattn.OutOfMemoryError: %r" % e); sys.exit(5)
    status = "oom: " + str(e)
    res = work()        # the fault fires once: the same call must now succeed
except Exception as e:
    print("unexpected %s: %s" % (type(e).__name__, e)); sys.exit(4)
np.savez(sys.argv[1], *res)
print(status)
"""


def run_oom(tmp, n, mode):
    env = dict(os.environ)
    env.pop("LINATTN_COUNT_ALLOC", None)
    if n is not None:
        env["LINATTN_FAIL_ALLOC"] = str(n)
    else:
        env.pop("LINATTN_FAIL_ALLOC", None)
    path = os.path.join(tmp, "res_%s_%s.npz" % (mode, n))
    p = subprocess.run([sys.executable, "-c", OOM_CHILD, path, mode], env=env, capture_output=True,
                       text=True, timeout=120)
    return n, p.returncode, p.stdout.strip(), p.stderr.strip(), path


def count_allocs(tmp, mode):
    env = dict(os.environ, LINATTN_COUNT_ALLOC="1")
    env.pop("LINATTN_FAIL_ALLOC", None)
    p = subprocess.run([sys.executable, "-c", OOM_CHILD, os.path.join(tmp, "count.npz"), mode], env=env,
                       capture_output=True, text=True, timeout=120)
    for line in p.stderr.splitlines():
        if line.startswith("linattn: allocations:"):
            return int(line.split()[2])
    return None


def group_oom(chk):
    with tempfile.TemporaryDirectory(prefix="la_py_oom_") as tmp:
        for mode in ("numpy", "torch"):
            total = count_allocs(tmp, mode)
            chk.start("LINATTN_FAIL_ALLOC=N (%s forward+backward, linear and softmax): OOM or correct"
                      % mode)
            if not chk.check(total is not None and total > 0,
                             "LINATTN_COUNT_ALLOC=1 printed no count: is the library built with "
                             "LINATTN_FAULT_INJECTION?"):
                continue
            _, rc, out, err, ref_path = run_oom(tmp, None, mode)
            if not chk.check(rc == 0, "baseline run failed: rc %d %s %s" % (rc, out, err[-300:])):
                continue
            base = np.load(ref_path)
            base = [base["arr_%d" % i] for i in range(len(base.files))]
            chk.check(all(np.isfinite(x).all() for x in base), "baseline has non-finite values")
            if mode == "numpy":   # every allocation up to 16, then a stride that covers the rest
                ns = list(range(1, 17)) + list(range(17, total + 1, max(1, total // 16))) + [total, total + 1]
            else:                 # torch's import is slow: a sample
                ns = [1, 3, total // 2, total]
            ns = sorted(set(n for n in ns if n >= 1))
            fails = 0
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                for n, rc, out, err, path in ex.map(lambda n: run_oom(tmp, n, mode), ns):
                    lab = "LINATTN_FAIL_ALLOC=%d" % n
                    if rc < 0:
                        chk.check(False, "%s: CRASHED by signal %d; stderr: %s" % (lab, -rc, err[-400:]))
                        continue
                    if not chk.check(rc == 0, "%s: exit %d: %s %s" % (lab, rc, out, err[-300:])):
                        continue
                    if out.startswith("oom"):
                        fails += 1
                        chk.check("memory" in out.lower(), "%s: OutOfMemoryError message %r" % (lab, out))
                    got = np.load(path)
                    got = [got["arr_%d" % i] for i in range(len(got.files))]
                    same = len(got) == len(base) and all(
                        np.isfinite(a).all() and np.allclose(a, b, rtol=1e-13, atol=1e-15)
                        for a, b in zip(got, base))
                    chk.check(same, "%s (%s): results differ from the run without a fault or are "
                              "non-finite" % (lab, out[:80]))
            print("    (%s: %d allocations per run; %d values of N tried, %d of them raised "
                  "OutOfMemoryError)" % (mode, total, len(ns), fails))
            chk.check(fails >= 1, "%s: no N in %s made a call raise OutOfMemoryError" % (mode, ns))


def main():
    if "--child" in sys.argv:
        child()
        return
    chk = C.Checks("test_bad_input")
    chk.start("bad input table in a child process (no crash)")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], capture_output=True,
                       text=True, timeout=300)
    sys.stdout.write(p.stdout)
    rows = [ln for ln in p.stderr.splitlines() if ln.startswith("ROW ")]
    other = "\n".join(ln for ln in p.stderr.splitlines() if not ln.startswith("ROW "))
    if other.strip():
        print(other)
    if p.returncode < 0:
        chk.check(False, "the table's child CRASHED (signal %d) in row %r"
                  % (-p.returncode, rows[-1][4:] if rows else "?"))
    else:
        chk.check(p.returncode == 0, "table checks failed in the child (exit %d), above" % p.returncode)
    group_oom(chk)
    chk.finish()


if __name__ == "__main__":
    main()
