#!/usr/bin/python3
"""A training step's forward and backward through linattn.torch.attention, undecayed, with
per-head gates [B, L, H] and with per-feature gates [B, L, H, r] (docs/performance.md "The
gated backward: its rows kept, dL/dg in memory order"). Run: . jobs/env.sh;
LINATTN_LIBRARY=build/python/liblinattn_py.so PYTHONPATH=python /usr/bin/python3
tests/bench/gates_train_step.py [log2 N, default 16]"""
import sys
import time, torch, numpy as np, linattn.torch as lt
torch.manual_seed(0)
N,H,d=1<<(int(sys.argv[1]) if len(sys.argv)>1 else 16),4,64
q=torch.randn(1,N,H,d,requires_grad=True); k=torch.randn(1,N,H,d,requires_grad=True); v=torch.randn(1,N,H,d,requires_grad=True)
gh=torch.nn.functional.logsigmoid(3+torch.randn(1,N,H,dtype=torch.float64)).requires_grad_()
gf=torch.nn.functional.logsigmoid(3+torch.randn(1,N,H,d,dtype=torch.float64)).requires_grad_()
def step(**kw):
    t0=time.perf_counter(); o=lt.attention(q,k,v,threads=2,**kw); t1=time.perf_counter(); o.sum().backward(); t2=time.perf_counter(); return t1-t0,t2-t1
for rnd in range(2):
    for name,kw in (("none",{}),("per-head",{"gates":gh}),("per-feature",{"gates":gf})):
        r=[step(**kw) for _ in range(3)]; f=min(x[0] for x in r); b=min(x[1] for x in r)
        print(rnd,name,"fwd %.3f bwd %.3f"%(f,b),flush=True)
