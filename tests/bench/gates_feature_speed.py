#!/usr/bin/python3
"""Per-feature gates against the undecayed and per-head gated forward, in memory (docs/performance.md
"Per-feature gates, first version"). Run: . jobs/env.sh; LINATTN_LIBRARY=build/python/liblinattn_py.so
/usr/bin/python3 tests/bench/gates_feature_speed.py [log2 N, default 17]"""
import sys, time, numpy as np, linattn.numpy as ln, linattn._core as C
N,H,d=1<<(int(sys.argv[1]) if len(sys.argv)>1 else 17),4,64
rng=np.random.default_rng(0)
q=rng.standard_normal((1,N,H,d),dtype=np.float32); k=rng.standard_normal((1,N,H,d),dtype=np.float32); v=rng.standard_normal((1,N,H,d),dtype=np.float32)
gh=-np.log1p(np.exp(-(3+rng.standard_normal((1,N,H)))))
gf=-np.log1p(np.exp(-(3+rng.standard_normal((1,N,H,d)))))/1.0
def best(f,K=3):
    t=[]
    for _ in range(K):
        t0=time.perf_counter(); f(); t.append(time.perf_counter()-t0)
    return min(t)
# the engine call alone: the gates checked once by gates_array, outside the timing
for rnd in range(2):
    a=best(lambda: ln.attention(q,k,v,threads=2))
    b=best(lambda: ln.attention(q,k,v,gates=gh,threads=2))
    g=C.gates_array(gf,1,N,H)
    c=best(lambda: ln.attention(q,k,v,gates=gf,threads=2))
    t0=time.perf_counter(); C.gates_array(gf,1,N,H); chk=time.perf_counter()-t0
    print("round %d: undecayed %.3f s, per-head gates %.3f s (%.2fx), per-feature gates %.3f s (%.2fx; of which the Python check of the gates %.3f s)"%(rnd,a,b,b/a,c,c/a,chk))
