"""linattn: feature-map ("linear") attention over very long sequences, from Python.

    import linattn
    out = linattn.torch.attention(q, k, v, feature_map="favor+", features=256)  # [B, L, H, dv]
    linattn.last_stats()   # the denominator statistics of the last call on this thread

linattn.numpy works on NumPy arrays without torch; linattn.torch (imported on first use)
adds autograd and the LinearAttention module. docs/python.md has the whole API.
"""
import importlib as _importlib

from ._lib import (DenominatorError, Error, InputError, OutOfMemoryError,  # noqa: F401
                   OutputOverflowError, UnsupportedError, last_stats, MAP_NAMES, VERSION)
from ._lib import lib as _clib
from . import numpy  # noqa: F401  (linattn.numpy)

__version__ = VERSION
feature_maps = MAP_NAMES


def isa():
    """The widest instruction set the CPU offers the engine: avx512f, avx2 or generic."""
    return _clib.la_py_isa().decode()


def shard(L, comm):
    """(row0, n): the rows [row0, row0 + n) of a sequence of L tokens that this rank of the
    mpi4py communicator holds when it calls with comm= (sizes differ by at most one, the
    larger first)."""
    from ._core import shard_range
    n, row0 = shard_range(int(L), comm.Get_size(), comm.Get_rank())
    return row0, n


def __getattr__(name):  # PEP 562: linattn.torch loads torch only when first used
    if name == "torch":
        return _importlib.import_module(".torch", __name__)
    raise AttributeError("module 'linattn' has no attribute %r" % name)
