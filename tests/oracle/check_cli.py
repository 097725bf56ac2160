#!/usr/bin/python3
"""The `linattn run` command-line contract (docs/cli.md): exit codes, error lines, files.

Every failing invocation must exit with the documented code, print a first stderr line
starting `linattn: error:` (exactly one such line, nothing crash-like), name the file /
option / (token, head, column) at fault where the contract says so, and leave no new file
(output or temporary) in the working directory. Also: --force, --help, and .npy versions
2.0 / 3.0 being accepted.

Usage: check_cli.py --linattn build/linattn --workdir /tmp/la_cli
"""
import os
import re

import numpy as np

import common

RUN_OPTIONS = ("--q", "--k", "--v", "--n", "--heads", "--dk", "--dv", "--input-scale", "--out",
               "--mode", "--feature-map", "--features", "--scale", "--seed", "--projection",
               "--save-projection", "--normalize", "--denominator", "--allow-signed",
               "--window", "--segments", "--dtype", "--threads", "--chunk", "--report",
               "--force", "--progress", "--checkpoint", "--checkpoint-every", "--reproducible")
N, H, DK, DV = 40, 2, 8, 5


class Cli:
    def __init__(self, run, tally):
        self.run, self.tally = run, tally

    def base(self, q="q.npy", k="k.npy", v="v.npy", out="out.npy"):
        return ["--q", q, "--k", k, "--v", v, "--out", out, "--feature-map", "elu1"]

    def fail(self, name, args, want_rc=2, names=(), numbers=None, sub="run"):
        """Run, expect failure with want_rc, the error-line contract and no new files."""
        common.rm(self.run.path("out.npy"))
        before = set(os.listdir(self.run.workdir))
        rc, _, err = self.run(*args, sub=sub)
        new = sorted(set(os.listdir(self.run.workdir)) - before)
        probs = [] if rc == want_rc else [f"exit {rc}, want {want_rc}"]
        probs += common.error_line_problems(rc, err)
        if new:
            probs.append(f"new files: {new}")
        msg = common.first_error(err)
        for s in names:
            if s not in msg:
                probs.append(f"message does not name {s!r}")
        if numbers and not common.names_in_order(msg, numbers):
            probs.append(f"message does not name {tuple(numbers)}")
        return self.tally.case(not probs, name, note="; ".join(probs) + f" | {msg}",
                               cmd=self.run.last)


def write_good(run):
    rng = np.random.default_rng(3)
    for name, d in (("q", DK), ("k", DK), ("v", DV)):
        common.save(run.path(f"{name}.npy"), rng.standard_normal((N, H, d)), "f64")


def malformed_files(run):
    """name -> bytes of a malformed .npy, each something docs/cli.md forbids."""
    good = np.random.default_rng(4).standard_normal((N, H, DK))
    def npy(arr, fortran=False):
        p = run.path("_tmp_build.npy")
        with open(p, "wb") as f:
            np.lib.format.write_array(f, np.asfortranarray(arr) if fortran else arr,
                                      version=(1, 0))
        data = open(p, "rb").read()
        os.remove(p)
        return data
    ok = npy(good)
    hdr_len = 10 + int.from_bytes(ok[8:10], "little")
    return {
        "bad_magic.npy": b"\x93NUMPX" + ok[6:],
        "big_endian.npy": npy(good.astype(">f4")),
        "fortran.npy": npy(good, fortran=True),
        "truncated.npy": ok[:-12],
        "int32.npy": npy((100 * good).astype("<i4")),
        "empty_file.npy": b"",
        "header_past_eof.npy": ok[:hdr_len - 20],
        "garbage_header.npy": ok[:10] + b"{'descr': '<f8', 'fortran_order': Fal".ljust(
            hdr_len - 11, b" ") + b"\n" + ok[hdr_len:],
    }


def main():
    args = common.parse_args(__doc__)
    run, tally = common.runner(args), common.Tally()
    cli = Cli(run, tally)
    write_good(run)

    cli.fail("unknown option -> 2", ["--no-such-option", "3"] + cli.base(),
             names=["--no-such-option"])
    cli.fail("unknown option as the last argument -> 2, message says 'unknown'",
             cli.base() + ["--no-such-option"], names=["--no-such-option", "unknown"])
    cli.fail("unknown subcommand -> 2", ["frobnicate"], sub=None)
    cli.fail("bad --mode value -> 2", cli.base() + ["--mode", "sideways"])
    cli.fail("--features 0 -> 2", cli.base() + ["--feature-map", "favor+", "--features", "0"])
    cli.fail("--features -3 -> 2", cli.base() + ["--feature-map", "favor+", "--features", "-3"])
    cli.fail("unknown --feature-map -> 2", cli.base() + ["--feature-map", "softmax"])
    cli.fail("bad --normalize value -> 2", cli.base() + ["--normalize", "maybe"])
    cli.fail("bad --denominator add:-1 -> 2", cli.base() + ["--denominator", "add:-1"])
    cli.fail("bad --denominator 'median' -> 2", cli.base() + ["--denominator", "median"])
    cli.fail("bad --dtype f16 -> 2", cli.base() + ["--dtype", "f16"])
    cli.fail("--chunk 0 -> 2", cli.base() + ["--mode", "causal", "--chunk", "0"])
    cli.fail("option missing its value -> 2", cli.base() + ["--mode"])
    cli.fail("non-numeric --seed -> 2", cli.base() + ["--seed", "abc"])
    cli.fail("missing input file -> 2, names it", cli.base(q="no_such_q.npy"),
             names=["no_such_q.npy"])

    # Shapes.
    rng = np.random.default_rng(5)
    common.save(run.path("k_dk9.npy"), rng.standard_normal((N, H, DK + 1)), "f64")
    common.save(run.path("k_n39.npy"), rng.standard_normal((N - 1, H, DK)), "f64")
    common.save(run.path("k_h3.npy"), rng.standard_normal((N, H + 1, DK)), "f64")
    common.save(run.path("v_n41.npy"), rng.standard_normal((N + 1, H, DV)), "f64")
    common.save(run.path("q_4d.npy"), rng.standard_normal((N, H, DK, 1)), "f64")
    cli.fail("Q/K dk mismatch -> 2", cli.base(k="k_dk9.npy"))
    cli.fail("Q/K N mismatch -> 2", cli.base(k="k_n39.npy"))
    cli.fail("Q/K heads mismatch -> 2", cli.base(k="k_h3.npy"))
    cli.fail("V N mismatch -> 2", cli.base(v="v_n41.npy"))
    cli.fail("4-D Q -> 2", cli.base(q="q_4d.npy"))

    # Non-finite values name (token, head, column).
    qn = np.load(run.path("q.npy"))
    qn[37, 1, 5] = np.nan
    qn[38, 0, 0] = np.nan
    common.save(run.path("q_nan.npy"), qn, "f64")
    cli.fail("NaN in Q -> 2, names (37, 1, 5)", cli.base(q="q_nan.npy"), numbers=[37, 1, 5])
    kn = np.load(run.path("k.npy")).astype(np.float32)
    kn[12, 0, 3] = np.inf
    common.save(run.path("k_inf.npy"), kn, "f32")
    common.save(run.path("q32.npy"), np.load(run.path("q.npy")), "f32")
    common.save(run.path("v32.npy"), np.load(run.path("v.npy")), "f32")
    cli.fail("Inf in K (f32) -> 2, names (12, 0, 3)",
             cli.base(q="q32.npy", k="k_inf.npy", v="v32.npy"), numbers=[12, 0, 3])

    # Malformed .npy as --q.
    for fname, data in malformed_files(run).items():
        with open(run.path(fname), "wb") as f:
            f.write(data)
        cli.fail(f"malformed --q {fname} -> 2, names the file", cli.base(q=fname), names=[fname])

    # Existing output: refused without --force, unchanged; --force overwrites.
    sentinel = run.path("exists.npy")
    common.save(sentinel, np.zeros((3,)), "f64")
    before = open(sentinel, "rb").read()
    listing = set(os.listdir(run.workdir))
    rc, _, err = run(*cli.base(out="exists.npy"))
    probs = ([] if rc == 2 else [f"exit {rc}"]) + common.error_line_problems(rc, err)
    if open(sentinel, "rb").read() != before:
        probs.append("file changed")
    if set(os.listdir(run.workdir)) != listing:
        probs.append(f"new files {sorted(set(os.listdir(run.workdir)) - listing)}")
    tally.case(not probs, "existing output without --force -> 2, file unchanged",
               note="; ".join(probs) + f" | {common.first_error(err)}", cmd=run.last)
    rc, _, err = run(*cli.base(out="exists.npy"), "--force")
    ok = rc == 0 and np.load(sentinel).shape == (N, H, DV)
    tally.case(ok, "existing output with --force -> 0, overwritten",
               note=f"exit {rc} {common.first_error(err)}", cmd=run.last)

    # .npy versions 2.0 and 3.0 are accepted and give the same output as 1.0.
    common.rm(run.path("o1.npy"))
    rc1, _, _ = run(*cli.base(out="o1.npy"))
    q = np.load(run.path("q.npy"))
    for ver in ((2, 0), (3, 0)):
        fn = f"q_v{ver[0]}.npy"
        with open(run.path(fn), "wb") as f:
            np.lib.format.write_array(f, q, version=ver)
        common.rm(run.path("ov.npy"))
        rc, _, err = run(*cli.base(q=fn, out="ov.npy"))
        ok = rc == 0 and rc1 == 0 and np.array_equal(np.load(run.path("ov.npy")),
                                                     np.load(run.path("o1.npy")))
        tally.case(ok, f".npy version {ver[0]}.0 accepted, same output as 1.0",
                   note=f"exit {rc} {common.first_error(err)}", cmd=run.last)

    # --help.
    for sub, args_ in (("run", ["--help"]), (None, ["--help"])):
        rc, out, err = run(*args_, sub=sub)
        text = out + err
        missing = [o for o in RUN_OPTIONS if not re.search(re.escape(o) + r"(?![\w-])", text)]
        if sub is None:
            missing = [] if "run" in text else ["'run' subcommand"]
        tally.case(rc == 0 and not missing, f"{'linattn run' if sub else 'linattn'} --help -> 0"
                   + (", lists every run option" if sub else ""),
                   note=f"exit {rc}" + (f"; missing {missing}" if missing else ""),
                   cmd=run.last)
    tally.finish()


if __name__ == "__main__":
    main()
