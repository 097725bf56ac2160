#!/usr/bin/python3
"""The memory estimate (docs/design.md §4.8) against the measured peak RSS, at the rank count
of --launcher.

For each configuration (run and grad; causal, bidirectional, a window, segments; f32 and
f64; streamed synthetic data and input files converted from f64) the report's
mem_estimate_bytes_per_rank must be an upper bound of peak_rss_bytes_max_rank minus
ALLOWANCE, the MPI, OpenBLAS and program baseline that the estimate leaves out (it counts only
what linattn allocates for the job); and, where the estimate is large enough to dominate the
baseline, it must not exceed LOOSE times the measured RSS (an estimate that says nothing is
a failure too). Then --mem-limit one byte below the estimate is refused (exit 2, one error
line naming --mem-limit and the estimate) and --mem-limit equal to it runs; and the default
limit is the node's MemAvailable, or none when the meminfo file cannot be read.

Usage: check_memest.py --linattn build/linattn --workdir DIR [--launcher 'mpirun -np 3']
       [--table]   (print the table of docs/cli.md "--mem-limit")
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402

MiB = 2**20
ALLOWANCE = 48 * MiB   # the runtime baseline: ~16-20 MiB per rank measured at n = 64
DOMINANT = 96 * MiB    # estimates above this are checked for looseness too
LOOSE = 2.0

N = 1 << 18
SYN = ["--heads", 4, "--dk", 64, "--dv", 64]
# (name, subcommand, arguments)
CONFIGS = [
    ("run causal f32", "run", ["--n", N] + SYN),
    ("run causal f64", "run", ["--n", N, "--dtype", "f64"] + SYN),
    ("run causal f32 block 64k", "run", ["--n", N, "--block-tokens", 65536] + SYN),
    ("run bidirectional f32", "run", ["--n", N, "--mode", "bidirectional"] + SYN),
    ("run causal window 1000 f32", "run", ["--n", N // 2, "--window", 1000] + SYN),
    ("run bidirectional segments f64", "run", ["--n", N // 2, "--mode", "bidirectional",
                                               "--dtype", "f64", "--segments", "seg.npy"] + SYN),
    ("run favor+ m=256 f32 2 threads", "run", ["--n", N // 2, "--feature-map", "favor+",
                                                "--threads", 2] + SYN),
    ("run favor+ m=4096 f32", "run", ["--n", 8192, "--feature-map", "favor+", "--features",
                                      4096] + SYN),
    ("run files f64 -> f32", "run", ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
                                     "--dtype", "f32"]),
    ("run reproducible causal favor+ f32", "run", ["--n", N // 2, "--reproducible",
                                                   "--feature-map", "favor+"] + SYN),
    ("run reproducible bidirectional segments f64", "run", ["--n", N // 2, "--reproducible",
                                                            "--mode", "bidirectional", "--dtype",
                                                            "f64", "--segments", "seg.npy"] + SYN),
    ("run reproducible window 1000 f32", "run", ["--n", N // 2, "--window", 1000,
                                                 "--reproducible"] + SYN),
    ("grad causal f32", "grad", ["--n", N // 4] + SYN),
    ("grad causal f64", "grad", ["--n", N // 4, "--dtype", "f64"] + SYN),
    ("grad causal f32 --out", "grad", ["--n", N // 4, "--out", "gout.npy"] + SYN),
    ("grad bidirectional segments f32", "grad", ["--n", N // 4, "--mode", "bidirectional",
                                                 "--segments", "seg4.npy"] + SYN),
    ("grad causal window 1000 f64", "grad", ["--n", N // 4, "--window", 1000,
                                             "--dtype", "f64"] + SYN),
    ("grad favor+ m=4096 f32", "grad", ["--n", 8192, "--feature-map", "favor+", "--features",
                                        4096] + SYN),
    # taylor2 at dk = 64: r = 2145, a wide map without a projection
    ("run taylor2 dk=64 f32 2 threads", "run", ["--n", N // 4, "--feature-map", "taylor2",
                                                "--threads", 2] + SYN),
    ("grad taylor2 dk=64 f64", "grad", ["--n", 8192, "--feature-map", "taylor2",
                                        "--dtype", "f64"] + SYN),
    # --decay: causal streams as undecayed; bidirectional holds the shard (docs/design.md §1.2)
    ("run causal decay f32", "run", ["--n", N, "--decay", "0.99"] + SYN),
    ("run bidirectional decay f32", "run", ["--n", N, "--mode", "bidirectional", "--decay",
                                            "retnet"] + SYN),
    # the backward with decay: la_backward's composition on each rank's rows (docs/design.md §1.2)
    ("grad causal decay f32", "grad", ["--n", N // 4, "--decay", "0.99"] + SYN),
]
# Wide feature maps are dominated by workspaces that are allocated but only partly touched
# (the AVX-512 transpose buffer: max(r, dv+1) x max(2C, dv+1) floats per thread): RSS stays
# well below the allocation there.
LOOSE_WIDE = 3.0


def write_inputs(run):
    rng = np.random.default_rng(3)
    for name, n in (("seg.npy", N // 2), ("seg4.npy", N // 4)):
        np.save(run.path(name), np.array([0, 1000, n // 3, n // 2 + 7, n], dtype="<i8"))
    for name, d in (("q", 64), ("k", 64), ("v", 64)):
        np.save(run.path(f"{name}.npy"), rng.standard_normal((N // 2, 4, d)))


def measure(run, sub, args):
    rc, _, err = run(*args, "--no-progress", "--report", "m.json", "--force", sub=sub)
    if rc != 0:
        return None, f"exit {rc}: {common.first_error(err)}"
    with open(run.path("m.json")) as f:
        rep = json.load(f)
    return rep, ""


def main():
    a = common.parse_args(__doc__, extra=lambda p: p.add_argument("--table", action="store_true"))
    run = common.runner(a)
    tally = common.Tally()
    write_inputs(run)
    P = common.launcher_ranks(a.launcher)
    print(f"# check_memest: {len(CONFIGS)} configurations on {P} rank(s); allowance "
          f"{ALLOWANCE // MiB} MiB", flush=True)
    rows = []
    for name, sub, args in CONFIGS:
        rep, why = measure(run, sub, args)
        if rep is None:
            tally.case(False, f"{name}: runs", note=why, cmd=run.last)
            continue
        est, rss = rep["mem_estimate_bytes_per_rank"], rep["peak_rss_bytes_max_rank"]
        rows.append((name, P, est, rss))
        tally.case(est is not None and rss - ALLOWANCE <= est,
                   f"{name}: estimate {est / MiB:.1f} MiB >= peak RSS {rss / MiB:.1f} MiB - "
                   f"{ALLOWANCE // MiB} MiB", cmd=run.last)
        loose = LOOSE_WIDE if "4096" in name else LOOSE
        if est is not None and est >= DOMINANT:
            tally.case(est <= loose * rss, f"{name}: estimate <= {loose} x peak RSS",
                       note=f"{est / MiB:.1f} MiB against {rss / MiB:.1f} MiB", cmd=run.last)
    # the limit is held to the very number the report gives
    name, sub, args = CONFIGS[0]
    rep, _ = measure(run, sub, args + ["--mem-limit", 1 << 40])
    est = rep and rep["mem_estimate_bytes_per_rank"]
    if est:
        rc, _, err = run(*args, "--no-progress", "--mem-limit", est - 1, sub=sub)
        msg = common.first_error(err)
        probs = [] if rc == 2 else [f"exit {rc}"]
        probs += common.error_line_problems(rc, err)
        probs += [f"does not name {w!r}" for w in ("--mem-limit", "estimated") if w not in msg]
        tally.case(not probs, f"{name}: --mem-limit estimate-1 is refused",
                   note="; ".join(probs) + f" | {msg}", cmd=run.last)
        rc, _, err = run(*args, "--no-progress", "--mem-limit", est, sub=sub)
        tally.case(rc == 0, f"{name}: --mem-limit = the estimate runs",
                   note=common.first_error(err), cmd=run.last)
    # the default limit: this node's MemAvailable shared by its ranks; none when unreadable
    small = ["--n", 4096, "--heads", 2, "--dk", 16, "--dv", 16]
    rep, why = measure(run, "run", small)
    lim = rep and rep["mem_limit_bytes_per_rank"]
    tally.case(bool(lim) and lim >= rep["mem_estimate_bytes_per_rank"],
               "default: the report gives the node's available memory per rank as the limit",
               note=why or f"mem_limit_bytes_per_rank {lim}", cmd=run.last)
    os.environ["LINATTN_MEMINFO"] = run.path("no_such_meminfo")
    try:
        rep, why = measure(run, "run", small)
    finally:
        del os.environ["LINATTN_MEMINFO"]
    tally.case(rep is not None and rep["mem_limit_bytes_per_rank"] is None,
               "default: no limit when the meminfo file cannot be read",
               note=why or f"mem_limit_bytes_per_rank {rep['mem_limit_bytes_per_rank']}",
               cmd=run.last)
    if a.table:
        print("| configuration | ranks | estimate per rank | peak RSS (max rank) | RSS - estimate |")
        print("|---|---|---|---|---|")
        for name, p, est, rss in rows:
            print(f"| {name} | {p} | {est / MiB:.1f} MiB | {rss / MiB:.1f} MiB | "
                  f"{(rss - est) / MiB:+.1f} MiB |")
    tally.finish()


if __name__ == "__main__":
    main()
