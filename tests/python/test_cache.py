#!/usr/bin/python3
"""The binding's cache of large outputs (python/capi/pool.c; docs/python.md "Speed").

Outputs of 1 MiB or more come from cached blocks whose pages outlive the tensors. Checked:
1. values: a call whose out, dq, dk, dv all come from the cache (f32 and f64) equals the
   independent float64 quadratic reference (_common.reference) row by row, twice in a row
   (the second call reuses the first call's blocks, which hold stale values);
2. lifetime: a tensor (and a view of it, after the tensor itself is dropped) keeps its block:
   later calls of the same size do not overwrite it; the block returns to the cache only when
   the last view is gone;
3. accounting: cache_info() counts live and idle bytes; empty_cache() frees the idle ones;
4. LINATTN_POOL_MB=0 (no cache) and a bad LINATTN_POOL_MB (InputError), in subprocesses;
5. an allocation that cannot succeed raises linattn.OutOfMemoryError (a MemoryError).
Exit 0 ok, 1 failure, 77 without torch.
"""
import gc
import os
import subprocess
import sys

import _common as C

C.need()
import torch  # noqa: E402

import linattn  # noqa: E402
import linattn.torch as lt  # noqa: E402

checks = C.Checks("test_cache.py")
B, L, H, dk, dv = 1, 1024, 4, 64, 64          # [1, 1024, 4, 64] float32: exactly 1 MiB
MIB = 1 << 20


def call(q, k, v, g):
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    out = lt.attention(*leaves, feature_map="elu1")
    out.backward(g)
    return out.detach(), leaves[0].grad, leaves[1].grad, leaves[2].grad


# 1. values against the reference, twice (the second call on reused blocks)
for dtype, name in ((torch.float32, "f32"), (torch.float64, "f64")):
    checks.start("cached outputs equal the float64 reference, %s, two calls" % name)
    gen = torch.Generator().manual_seed(5)
    q, k, v, g = (torch.randn(B, L, H, d, generator=gen, dtype=dtype) for d in (dk, dk, dv, dv))
    res = C.reference("elu1", q, k, v, g)
    bnd, F = C.error_bounds("elu1", q, k, v, g, res)
    for rep in range(2):
        got = call(q, k, v, g)
        for t, key in zip(got, ("out", "dq", "dk", "dv")):
            C.row_check(t, res[key], bnd[key], F, name, "call %d %s" % (rep + 1, key), checks)
        del got, t
        gc.collect()
    info = lt.cache_info()
    checks.check(info["idle_bytes"] >= 4 * (MIB if dtype == torch.float32 else 2 * MIB),
                 "after the calls, the four outputs' blocks are idle in the cache: %s" % info)

# 2. lifetime: a live tensor or view keeps its block
checks.start("a live tensor, or a view of it, keeps its block")
gen = torch.Generator().manual_seed(6)
q, k, v = (torch.randn(B, L, H, dk, generator=gen) for _ in range(3))
o1 = lt.attention(q, k, v)
keep = o1.clone()
view = o1[0, 100:200]
keep_view = view.clone()
checks.check(o1.data_ptr() != keep.data_ptr(), "the clone is a copy")
for i in range(3):
    o = lt.attention(q * (i + 2.0), k, v)
    checks.check(o.data_ptr() != o1.data_ptr(), "call %d got a block other than the live one" % i)
    del o
checks.check(torch.equal(o1, keep), "the live output is untouched by later calls")
ptr = o1.data_ptr()
del o1
gc.collect()
o = lt.attention(q * 7.0, k, v)
checks.check(o.data_ptr() != ptr, "a view alone still holds the block")
checks.check(torch.equal(view, keep_view), "the view is untouched by later calls")
del o, view
gc.collect()
o = lt.attention(q * 9.0, k, v)
o_again = lt.attention(q * 9.0, k, v)
checks.check(ptr in (o.data_ptr(), o_again.data_ptr()),
             "once the last view is gone the block is reused")
checks.check(torch.equal(o, o_again), "a reused block gives the same values")
del o, o_again

# 3. accounting
checks.start("cache_info and empty_cache")
gc.collect()
info = lt.cache_info()
checks.check(info["live_bytes"] == 0, "no output alive, no live bytes: %s" % info)
checks.check(0 < info["idle_bytes"] <= info["cap_bytes"] == 1024 * MIB,
             "idle bytes within the default cap of 1024 MiB: %s" % info)
a = lt.attention(q, k, v)
checks.check(lt.cache_info()["live_bytes"] == MIB, "one live 1 MiB output: %s" % lt.cache_info())
lt.empty_cache()
info = lt.cache_info()
checks.check(info["idle_bytes"] == 0 and info["live_bytes"] == MIB,
             "empty_cache frees the idle blocks only: %s" % info)
del a
gc.collect()
checks.check(lt.cache_info()["idle_bytes"] == MIB, "the last block returns: %s" % lt.cache_info())
small = lt.attention(q[:, :100], k[:, :100], v[:, :100])
checks.check(lt.cache_info()["live_bytes"] == 0, "outputs under 1 MiB are plain torch.empty")
del small

# 4. the environment variable, in fresh processes
checks.start("LINATTN_POOL_MB")
prog = ("import torch, linattn.torch as lt\n"
        "q = torch.randn(1, 1024, 4, 64)\n"
        "o = lt.attention(q, q, q)\n"
        "print(lt.cache_info()['live_bytes'], lt.cache_info()['cap_bytes'])\n")
env = dict(os.environ, LINATTN_POOL_MB="0")
p = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True)
checks.check(p.returncode == 0 and p.stdout.split() == ["0", "0"],
             "LINATTN_POOL_MB=0: no cache (got %r %r)" % (p.stdout, p.stderr[-300:]))
env["LINATTN_POOL_MB"] = "lots"
bad = ("import torch, linattn, linattn.torch as lt\n"
       "q = torch.randn(1, 1024, 4, 64)\n"
       "try:\n"
       "    lt.attention(q, q, q)\n"
       "except linattn.InputError as e:\n"
       "    print('InputError', e)\n")
p = subprocess.run([sys.executable, "-c", bad], env=env, capture_output=True, text=True)
checks.check(p.returncode == 0 and p.stdout.startswith("InputError") and "LINATTN_POOL_MB" in p.stdout,
             "a bad LINATTN_POOL_MB raises InputError naming it (got %r %r)"
             % (p.stdout, p.stderr[-300:]))

# 5. an allocation that cannot succeed
checks.start("an impossible allocation raises OutOfMemoryError")
try:
    lt._empty((1 << 26, 1 << 14), torch.float64)  # 8 TiB
    checks.check(False, "no exception")
except linattn.OutOfMemoryError as e:
    checks.check(isinstance(e, MemoryError) and "out of memory" in str(e), "raised: %s" % e)
checks.check(lt.cache_info()["live_bytes"] == 0, "nothing left live after the failure")

checks.finish()
