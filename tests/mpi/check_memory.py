#!/usr/bin/python3
"""Streaming memory (issue 3): a rank's peak RSS does not grow with N.

Runs the synthetic causal workload (H=4, dk=dv=64, f32) on the given launcher at
N = 2^17 and N = 2^21 and reads peak_rss_bytes_max_rank from the reports. Passes when the
large run stays under 512 MiB per rank and grows by less than 16 MiB over the small one
(the input and output are never held whole: blocks of --block-tokens rows are streamed).

Usage: check_memory.py --linattn build/linattn --workdir DIR --launcher "mpiexec -n 2"
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import common  # noqa: E402


def main():
    a = common.parse_args(__doc__)
    run = common.runner(a)
    rss = {}
    for mode in ("causal", "bidirectional"):
        for n in (1 << 17, 1 << 21):
            rc, _, err = run("--n", n, "--heads", 4, "--dk", 64, "--dv", 64, "--mode", mode,
                             "--report", "r.json", "--force", "--no-progress")
            if rc != 0:
                print(f"FAIL {mode} n={n}: rc {rc}: {common.first_error(err)}")
                print("0 passed, 1 failed")
                return 1
            with open(run.path("r.json")) as f:
                rss[mode, n] = json.load(f)["peak_rss_bytes_max_rank"]
    npass = nfail = 0
    P = common.launcher_ranks(a.launcher)
    got, note = common.report_ranks(run)
    npass += got == P
    nfail += got != P
    print(f"{'PASS' if got == P else 'FAIL'} the report says ranks = {P} {note or f'(it says {got})'}")
    for mode in ("causal", "bidirectional"):
        small, big = rss[mode, 1 << 17], rss[mode, 1 << 21]
        ok = big < 512 * 2**20 and big - small < 16 * 2**20
        npass += ok
        nfail += not ok
        print(f"{'PASS' if ok else 'FAIL'} {mode}: peak RSS {small / 2**20:.1f} MiB at 2^17, "
              f"{big / 2**20:.1f} MiB at 2^21")
    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
