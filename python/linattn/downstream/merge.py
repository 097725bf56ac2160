"""python3 -m linattn.downstream.merge [--force] BASE: the merge step of a downstream job array
(jobs/downstream_array.sbatch; docs/downstream.md "On a cluster"; array.py).

Exit status: 0 merged and reported; 1 refused (a task missing or unfinished, a folder of
another study, BASE/merged exists without --force) or a merged run without a finite result;
2 bad usage.
"""
import argparse
import sys

from .array import merge


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m linattn.downstream.merge",
                                description="Merge BASE/task-* of a downstream job array into "
                                            "BASE/merged and write its report.md.")
    p.add_argument("base", metavar="BASE", help="the array's --out-dir")
    p.add_argument("--force", action="store_true", help="replace an existing BASE/merged")
    a = p.parse_args(argv)
    return merge(a.base, force=a.force)


if __name__ == "__main__":
    sys.exit(main())
