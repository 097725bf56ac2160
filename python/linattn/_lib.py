"""The C library (python/capi/binding.h) loaded with ctypes, its signatures, and the
translation of its status codes into exceptions (docs/python.md "Errors").

The library is looked for, in order: $LINATTN_LIBRARY; beside this file (an installed
package, `cmake --install`); the build tree of the checkout this file is in (build/python/).
"""
import ctypes
import os
import threading

ABI = 3  # binding.c's LA_PY_ABI

# la_status values (include/linattn/status.h)
OK, ERR_ARG, ERR_IO, ERR_FORMAT, ERR_SHAPE, ERR_NONFINITE, ERR_DENOMINATOR, ERR_OVERFLOW, \
    ERR_NOMEM, ERR_UNSUPPORTED, ERR_EXISTS, ERR_MPI, ERR_INTERNAL, ERR_WRITE, ERR_READ = range(15)


class Error(Exception):
    """Every error of linattn. `status` is the engine's la_status, `reason` its one-line
    reason (also the message)."""

    def __init__(self, reason, status=ERR_INTERNAL):
        super().__init__(reason)
        self.reason = reason
        self.status = status


class InputError(Error, ValueError):
    """Bad input: dtype, layout, shape, a non-finite value, an option out of its domain."""


class UnsupportedError(InputError, NotImplementedError):
    """A request the engine refuses by design or does not implement yet."""


class DenominatorError(Error, ArithmeticError):
    """The denominator policy was violated (docs/design.md §1): with `denominator="error"`,
    a row whose denominator is <= 0 or not finite."""


class OutputOverflowError(Error, ArithmeticError):
    """An unnormalized output overflowed the floating-point range."""


class OutOfMemoryError(Error, MemoryError):
    """An allocation of the engine failed."""


def error_for(status, reason):
    cls = {ERR_ARG: InputError, ERR_SHAPE: InputError, ERR_NONFINITE: InputError,
           ERR_FORMAT: InputError, ERR_UNSUPPORTED: UnsupportedError,
           ERR_DENOMINATOR: DenominatorError, ERR_OVERFLOW: OutputOverflowError,
           ERR_NOMEM: OutOfMemoryError}.get(status, Error)
    return cls(reason, status)


def _candidates():
    env = os.environ.get("LINATTN_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "liblinattn_py.so"),
            os.path.join(here, "..", "..", "build", "python", "liblinattn_py.so")]


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            # RTLD_GLOBAL: Open MPI's plugins resolve symbols of libmpi, which the library
            # brings in when mpi4py has not already.
            lib = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
            break
        tried.append(path)
    else:
        raise ImportError("linattn: the library liblinattn_py.so was not found (looked in %s); "
                          "build it with `bash jobs/setup.sh` and `. jobs/env.sh`, or set "
                          "LINATTN_LIBRARY" % ", ".join(tried))
    lib.la_py_abi.restype = ctypes.c_int
    if lib.la_py_abi() != ABI:
        raise ImportError("linattn: %s has ABI %d, this package needs %d: rebuild"
                          % (path, lib.la_py_abi(), ABI))
    return lib, path


lib, path = _load()

P = ctypes.c_void_p
I64 = ctypes.c_int64
INT = ctypes.c_int
DBL = ctypes.c_double
STR = ctypes.c_char_p
I64P = ctypes.POINTER(ctypes.c_int64)
DBLP = ctypes.POINTER(ctypes.c_double)


def _sig(name, args, res=INT):
    f = getattr(lib, name)
    f.argtypes = args
    f.restype = res


_sig("la_py_stats_len", [])
_sig("la_py_version", [], STR)
_sig("la_py_error", [], STR)
_sig("la_py_map_names", [], STR)
_sig("la_py_isa", [], STR)
_sig("la_py_pool_get", [I64], P)
_sig("la_py_pool_put", [P])
_sig("la_py_pool_release", [], None)
_sig("la_py_pool_usage", [I64P, I64P, I64P], None)
_sig("la_py_op_create", [STR, INT, STR, INT, STR, INT, DBL, ctypes.c_uint64, I64, INT, INT, STR,
                         INT, INT, INT, INT, INT, DBLP, INT, INT, DBLP, INT, INT, INT,
                         ctypes.POINTER(P)])
_sig("la_py_op_set_gates", [P, P])
_sig("la_py_op_set_gates_grad", [P, P])
_sig("la_py_op_destroy", [P], None)
_sig("la_py_op_width", [P])
_sig("la_py_op_features", [P])
_sig("la_py_op_kernels", [P], STR)
_sig("la_py_op_threads", [P])
_sig("la_py_op_projection", [P, DBLP, I64])
_sig("la_py_shard", [P, I64, INT, INT, I64P, I64P], None)
_sig("la_py_forward", [P, I64, I64, P, P, P, P, I64P, I64, DBLP, P])
_sig("la_py_backward", [P, I64, I64, P, P, P, P, P, P, P, I64P, I64, DBLP, P, P])
_sig("la_py_tape_size", [P, I64, I64], I64)
_sig("la_py_forward_dist", [P, INT, STR, I64, I64, I64, I64, P, P, P, P, I64P, I64, DBLP])
_sig("la_py_backward_dist", [P, INT, STR, I64, I64, I64, I64, P, P, P, P, P, P, P, I64P, I64,
                             DBLP])
_sig("la_py_softmax_forward", [INT, STR, DBL, I64, INT, I64, I64, INT, INT, INT, P, P, P, P,
                               I64P, I64])
_sig("la_py_softmax_backward", [STR, DBL, I64, INT, I64, I64, INT, INT, INT, P, P, P, P, P, P,
                                P, I64P, I64])
_sig("la_py_softmax_forward_dist", [INT, INT, STR, DBL, I64, INT, I64, I64, I64, I64, INT, INT,
                                    INT, P, P, P, P, I64P, I64])
_sig("la_py_softmax_backward_dist", [INT, STR, DBL, I64, INT, I64, I64, I64, I64, INT, INT, INT,
                                     P, P, P, P, P, P, P, I64P, I64])

STATS_KEYS = ("min", "max", "median", "rows", "count_nonpositive", "count_small",
              "count_nonfinite", "violations", "first_bad_batch", "first_bad_token",
              "first_bad_head", "overflows")
if lib.la_py_stats_len() != len(STATS_KEYS):
    raise ImportError("linattn: the library's statistics layout differs from this package's")
INT_KEYS = set(STATS_KEYS[3:])

MAP_NAMES = tuple(lib.la_py_map_names().decode().split(","))
VERSION = lib.la_py_version().decode()


# The engine's reasons name CLI options; here they name the keyword arguments instead.
_SPELLING = [("--allow-signed", "allow_signed=True"), ("--normalize off", "normalize=False"),
             ("--feature-map", "feature_map"), ("--features", "features"),
             ("--denominator", "denominator"), ("--window", "window"), ("--scale", "scale"),
             ("--chunk", "chunk"), ("--threads", "threads"), ("--mode", "mode"),
             ("--kernels", "kernels"), ("--seed", "seed"), ("--projection", "projection")]


def python_spelling(reason):
    for cli, py in _SPELLING:
        reason = reason.replace(cli, py)
    return reason


def check(status):
    """Raise the exception of a failed call, with the engine's reason."""
    if status != OK:
        reason = lib.la_py_error().decode(errors="replace") or "status %d" % status
        raise error_for(status, python_spelling(reason))


# The denominator statistics of the last call on each thread (linattn.last_stats()).
_tls = threading.local()


def stats_buffer():
    return (ctypes.c_double * len(STATS_KEYS))()


def record_stats(buf, what):
    d = {"pass": what}
    for i, key in enumerate(STATS_KEYS):
        d[key] = int(buf[i]) if key in INT_KEYS else float(buf[i])
    _tls.last = d
    return d


def record_dict(d, what):
    d["pass"] = what
    _tls.last = d
    return d


def last_stats():
    return dict(getattr(_tls, "last", {}) or {})
