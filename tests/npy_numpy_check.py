#!/usr/bin/env python3
"""Check that .npy files written by linattn load in numpy.

Usage: npy_numpy_check.py DIR
Loads every DIR/rt_<dtype>_<shape>.npy (as left by `test_npy DIR --keep`), where dtype is
f32|f64|i64 and shape is 'scalar' or dims joined by 'x' (e.g. 2x3x4), and checks dtype,
shape and values (f32: i+0.25, f64: i*0.5-1, i64: i*1000003-5, i the C-order index).
Exits nonzero on any failure or when no such file is found.
"""
import os
import re
import sys

import numpy as np

DTYPES = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "i64": np.dtype("<i8")}
NAME = re.compile(r"^rt_(f32|f64|i64)_(scalar|\d+(?:x\d+)*)\.npy$")


def expected(kind, shape):
    i = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    if kind == "f32":
        v = i.astype(np.float32) + np.float32(0.25)
    elif kind == "f64":
        v = i.astype(np.float64) * 0.5 - 1.0
    else:
        v = i * 1000003 - 5
    return v.astype(DTYPES[kind]).reshape(shape)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d = sys.argv[1]
    checked = failed = 0
    for name in sorted(os.listdir(d)):
        m = NAME.match(name)
        if not m:
            continue
        kind, tag = m.groups()
        shape = () if tag == "scalar" else tuple(int(x) for x in tag.split("x"))
        checked += 1
        try:
            a = np.load(os.path.join(d, name), allow_pickle=False)
            problems = []
            if a.dtype != DTYPES[kind]:
                problems.append("dtype %s, want %s" % (a.dtype.str, DTYPES[kind].str))
            if a.shape != shape:
                problems.append("shape %s, want %s" % (a.shape, shape))
            if not problems and not np.array_equal(a, expected(kind, shape)):
                problems.append("values differ")
        except Exception as e:  # any load error is a failure
            problems = ["numpy.load failed: %s" % e]
        if problems:
            failed += 1
            print("FAIL %s: %s" % (name, "; ".join(problems)))
    print("numpy check: %d files, %d failed" % (checked, failed))
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
