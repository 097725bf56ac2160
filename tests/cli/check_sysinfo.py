#!/usr/bin/python3
"""What the machine is and which BLAS kernels ran (docs/design.md §4.9, docs/cli.md "Report",
"linattn bench", "Errors"), checked from outside the program:

  1. the report's cpu.model and cpu.isa equal what /proc/cpuinfo says (model name; the widest
     of avx512f, avx2, avx, sse4_2, sse2 in its flags), and blas_core equals the core
     build/blas_probe reports (openblas_get_corename) under the same OPENBLAS_CORETYPE, for
     several core types;
  2. the one warning line appears exactly when the CPU's ISA is wider than that core's
     kernels (this test's own table of the cores it sets), after the summary line, naming
     OPENBLAS_CORETYPE; an error's first line stays the error, with no warning;
  3. bench --gemm-probe: efficiency = gflops / (ranks x best GEMM rate at the row's threads
     and precision: max(sgemm, k512gemm or k256gemm) for f32, dgemm for f64), recomputed from the CSV's
     own rows; isa and blas_core columns as in 1.

Usage: check_sysinfo.py --linattn build/linattn --probe build/blas_probe --workdir DIR
"""
import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys

failures, passed = [], [0]


def check(ok, what, note=""):
    print(("ok:   " if ok else "FAIL: ") + what + ("" if ok or not note else f" ({note})"))
    if ok:
        passed[0] += 1
    else:
        failures.append(what)
    return ok


LEVEL = {"other": 0, "sse2": 1, "sse4_2": 2, "avx": 3, "avx2": 4, "avx512f": 5}
# the cores this test sets, and their kernels' ISA (OpenBLAS kernel/x86_64/KERNEL.<core>)
CORE_ISA = {"prescott": "sse2", "sandybridge": "avx", "haswell": "avx2", "skylakex": "avx512f",
            "cooperlake": "avx512f", "zen": "avx2"}


def cpuinfo():
    model, flags = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k.strip() == "model name" and model == "unknown":
                model = v.strip()
            if k.strip() == "flags" and not flags:
                flags = set(v.split())
    isa = next((i for i, fl in (("avx512f", "avx512f"), ("avx2", "avx2"), ("avx", "avx"),
                                ("sse4_2", "sse4_2"), ("sse2", "sse2")) if fl in flags), "other")
    return model, isa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--linattn", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    model, isa = cpuinfo()
    print(f"CPU: {model} ({isa})")

    def run(args, core):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env.pop("OPENBLAS_CORETYPE", None)
        if core is not None:
            env["OPENBLAS_CORETYPE"] = core
        return subprocess.run([a.linattn, *map(str, args)], cwd=a.workdir, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)

    def probe_core(core):
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        if core is not None:
            env["OPENBLAS_CORETYPE"] = core
        p = subprocess.run([a.probe, "--check-only"], env=env, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        m = re.search(r"core=(\S+)", p.stdout)
        return m.group(1) if m else None

    cores = ["Haswell", "Prescott"] + (["SkylakeX"] if isa == "avx512f" else []) + [None]
    for core in cores:
        name = core or "(the library's choice)"
        want_core = probe_core(core)
        rep = os.path.join(a.workdir, "r.json")
        p = run(["run", "--n", 256, "--heads", 1, "--dk", 8, "--dv", 8, "--report", rep, "--force"], core)
        if not check(p.returncode == 0, f"{name}: run exits 0", p.stderr.strip()):
            continue
        r = json.load(open(rep))
        check(r.get("cpu") == {"model": model, "isa": isa}, f"{name}: report cpu", f"{r.get('cpu')}")
        check(want_core is not None and r.get("blas_core") == want_core,
              f"{name}: report blas_core = blas_probe's core {want_core}", f"{r.get('blas_core')}")
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        warn = [i for i, l in enumerate(lines) if l.startswith("linattn: warning:")]
        core_isa = CORE_ISA.get((want_core or "").lower())
        if core_isa is None:
            print(f"note: core {want_core} is not in this test's table: its warning is not checked")
            continue
        want = LEVEL[isa] > LEVEL[core_isa]
        check(len(warn) == int(want), f"{name}: {'one warning' if want else 'no warning'} "
              f"({isa} CPU, {want_core} kernels {core_isa})", f"{lines}")
        if want and len(warn) == 1:
            summ = [i for i, l in enumerate(lines) if l.startswith("linattn: run ")]
            check(summ and summ[0] < warn[0] and "OPENBLAS_CORETYPE" in lines[warn[0]]
                  and want_core in lines[warn[0]], f"{name}: the warning follows the summary "
                  "and names the core and OPENBLAS_CORETYPE", lines[warn[0]])
            # an error: the error line is first, and no warning follows
            p = run(["run", "--n", 256, "--heads", 1, "--dk", 8, "--dv", 8, "--report", rep], core)
            el = [l for l in p.stderr.splitlines() if l.strip()]
            check(p.returncode == 2 and el and el[0].startswith("linattn: error:")
                  and not any("warning" in l for l in el),
                  f"{name}: an error (existing report) prints its line first and no warning", f"{el}")

    # 3. bench efficiency against the probe rows of the same run
    for dt in ("f32", "f64"):
        p = run(["bench", "--n", 4096, "--heads", 2, "--threads", "1,2", "--gemm-probe",
                 "--gemm-size", 256, "--dtype", dt, "--repeat", 1], None)
        if not check(p.returncode == 0, f"bench --gemm-probe --dtype {dt} exits 0", p.stderr.strip()):
            continue
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        best = {}
        for row in rows:
            # the float64 probes: OpenBLAS's DGEMM and, on the avx2 table, its own k256dgemm
            if row["impl"] in ("sgemm", "k512gemm", "k256gemm", "dgemm", "k256dgemm"):
                k = ("f64" if row["impl"] in ("dgemm", "k256dgemm") else "f32",
                     int(row["threads"]))
                best[k] = max(best.get(k, 0.0), float(row["gflops"]))
        lin = [row for row in rows if row["impl"] == "linear"]
        check(len(lin) == 2, f"{dt}: two linear rows (threads 1, 2)")
        for row in lin:
            b = best.get((row["dtype"], int(row["threads"])), 0)
            want = float(row["gflops"]) / (int(row["ranks"]) * b) if b else None
            got = float(row["efficiency"]) if row["efficiency"] else None
            check(want is not None and got is not None and abs(got - want) <= 2e-3 * want,
                  f"{dt} threads {row['threads']}: efficiency = gflops / (ranks x best GEMM)",
                  f"{got} vs {want}")
        check(all(row["isa"] == isa for row in rows), f"{dt}: isa column is {isa}")
        core = probe_core(None)
        check(all(row["blas_core"] == (core or "") for row in rows), f"{dt}: blas_core column is {core}")

    print(f"{passed[0]} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
