#!/usr/bin/python3
"""Bad input, all of it, as one table, at the rank count of --launcher.

Every row of CASES is a kind of bad input. Each must end with its exit code (2: usage error
or bad input), print exactly one `linattn: error:` line that names what is at fault (the
option, the file, or the (token, head, column)), create no file in the working directory
(neither an output nor a temporary), and end within the timeout (no hang on any rank).
docs/cli.md's table "Bad input" lists the same cases; with --docs this script checks that it does.

Usage: bad_input.py --linattn build/linattn --workdir /tmp/la_bad [--launcher 'mpirun -np 3']
                    [--docs docs/cli.md]
"""
import os
import re

import numpy as np

import common

N, H, DK, DV = 40, 2, 8, 5
FILES = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy"]
OUT = ["--out", "out.npy"]


def npy_header(descr="<f8", fortran=False, shape=(N, H, DK)):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    hdr = d.encode() + b" " * (118 - len(d)) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr


def write_inputs(run):
    rng = np.random.default_rng(17)
    q, k, v = (rng.standard_normal((N, H, d)) for d in (DK, DK, DV))
    for n, x in zip("qkv", (q, k, v)):
        common.save(run.path(f"{n}.npy"), x, "f64")
    bad = q.copy()
    bad[N - 3, 1, 6] = np.nan            # on the last rank for every rank count <= 7
    common.save(run.path("q_nan.npy"), bad, "f64")
    kf = k.astype(np.float32)
    kf[N - 2, 0, 2] = np.inf
    common.save(run.path("k_inf32.npy"), kf, "f32")
    common.save(run.path("q32.npy"), q, "f32")
    common.save(run.path("v32.npy"), v, "f32")
    kfar = k.copy()
    kfar[N - 2] *= 60.0                  # a key some thousands of nats below the others
    common.save(run.path("k_far.npy"), kfar, "f64")
    common.save(run.path("k_dk9.npy"), rng.standard_normal((N, H, DK + 1)), "f64")
    common.save(run.path("k_n39.npy"), rng.standard_normal((N - 1, H, DK)), "f64")
    common.save(run.path("k_h3.npy"), rng.standard_normal((N, H + 1, DK)), "f64")
    common.save(run.path("q_4d.npy"), rng.standard_normal((N, H, DK, 1)), "f64")
    payload = q.astype("<f8").tobytes()
    raw = {
        "q_magic.npy": b"\x93NUMPZ" + npy_header()[6:] + payload,
        "q_trunc.npy": npy_header() + payload[: len(payload) // 2],
        "q_bigendian.npy": npy_header(">f8") + payload,
        "q_fortran.npy": npy_header(fortran=True) + payload,
        "q_int.npy": npy_header("<i4") + payload,
    }
    for name, data in raw.items():
        with open(run.path(name), "wb") as f:
            f.write(data)
    segs = {"seg_start1.npy": [1, 20, N], "seg_decr.npy": [0, 20, 10, N],
            "seg_end.npy": [0, 20, N - 1]}
    for name, s in segs.items():
        np.save(run.path(name), np.array(s, dtype="<i8"))
    np.save(run.path("seg_f64.npy"), np.array([0, 20, N], dtype="<f8"))
    np.save(run.path("proj_shape.npy"), rng.standard_normal((H, 16, DK + 1)))
    pn = rng.standard_normal((16, DK))
    pn[3, 4] = np.inf
    np.save(run.path("proj_inf.npy"), pn)
    common.save(run.path("exists.npy"), np.zeros(3), "f64")
    g = -rng.random((N, H))                    # --gates: log-gates [N, H]
    common.save(run.path("g.npy"), g, "f64")
    gp = g.copy()
    gp[N - 3, 1] = 0.5                         # a gate above 1, on the last rank
    common.save(run.path("g_pos.npy"), gp, "f64")
    gn = g.astype(np.float32)
    gn[N - 2, 0] = np.nan
    common.save(run.path("g_nan.npy"), gn, "f32")
    common.save(run.path("g_shape.npy"), -rng.random((N, H + 1)), "f64")
    common.save(run.path("g_feat.npy"), -rng.random((N, H, 4)), "f64")  # GLA's [N, H, r]
    common.save(run.path("g_feat8.npy"), -rng.random((N, H, DK)), "f64")  # r = dk: elu1's
    with open(run.path("meminfo_1m"), "w") as f:  # a node with 1 MiB available
        f.write("MemTotal:        2048 kB\nMemFree:         1024 kB\nMemAvailable:    1024 kB\n")


# (name, arguments of `linattn run`, exit code, what the one error line must contain[,
#  environment variables, each naming a file of the work directory])
CASES = [
    ("unknown option", FILES + ["--frobnicate", "1"], 2, ["--frobnicate"]),
    ("option without its value", FILES + ["--mode"], 2, ["--mode"]),
    ("bad --mode", FILES + ["--mode", "sideways"], 2, ["--mode", "sideways"]),
    ("--features 0", FILES + ["--feature-map", "favor+", "--features", "0"], 2, ["--features"]),
    ("unknown --feature-map", FILES + ["--feature-map", "softmax"], 2, ["softmax"]),
    ("bad --denominator", FILES + ["--denominator", "add:-1"], 2, ["--denominator"]),
    ("--chunk 0", FILES + ["--chunk", "0"], 2, ["--chunk"]),
    ("non-numeric --seed", FILES + ["--seed", "abc"], 2, ["--seed"]),
    ("option given twice", FILES + ["--chunk", "8", "--chunk", "16"], 2, ["--chunk", "twice"]),
    ("conflicting options", FILES + ["--progress", "--no-progress"], 2,
     ["--progress", "--no-progress"]),
    ("synthetic shape with input files", FILES + ["--n", "100"], 2, ["--n", "--q"]),
    ("--q without --k and --v", ["--q", "q.npy"], 2, ["--q"]),
    ("missing input file", ["--q", "none.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "none.npy"]),
    ("Q/K width mismatch", ["--q", "q.npy", "--k", "k_dk9.npy", "--v", "v.npy"], 2,
     ["--k", "k_dk9.npy"]),
    ("Q/K length mismatch", ["--q", "q.npy", "--k", "k_n39.npy", "--v", "v.npy"], 2,
     ["--k", "k_n39.npy"]),
    ("Q/K heads mismatch", ["--q", "q.npy", "--k", "k_h3.npy", "--v", "v.npy"], 2,
     ["--k", "k_h3.npy"]),
    ("4-D input", ["--q", "q_4d.npy", "--k", "k.npy", "--v", "v.npy"], 2, ["--q", "q_4d.npy"]),
    ("NaN in Q", ["--q", "q_nan.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_nan.npy", (N - 3, 1, 6)]),
    ("Inf in K (f32)", ["--q", "q32.npy", "--k", "k_inf32.npy", "--v", "v32.npy"], 2,
     ["--k", "k_inf32.npy", (N - 2, 0, 2)]),
    (".npy bad magic", ["--q", "q_magic.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_magic.npy"]),
    (".npy truncated payload", ["--q", "q_trunc.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_trunc.npy"]),
    (".npy big-endian", ["--q", "q_bigendian.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_bigendian.npy"]),
    (".npy Fortran order", ["--q", "q_fortran.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_fortran.npy"]),
    (".npy integer dtype", ["--q", "q_int.npy", "--k", "k.npy", "--v", "v.npy"], 2,
     ["--q", "q_int.npy"]),
    ("segments not starting at 0", FILES + ["--segments", "seg_start1.npy"], 2,
     ["--segments", "seg_start1.npy"]),
    ("segments not increasing", FILES + ["--segments", "seg_decr.npy"], 2, ["--segments", "seg_decr.npy"]),
    ("segments not ending at N", FILES + ["--segments", "seg_end.npy"], 2, ["--segments", "seg_end.npy"]),
    ("segments not int64", FILES + ["--segments", "seg_f64.npy"], 2, ["--segments", "seg_f64.npy"]),
    ("projection of the wrong shape", FILES + ["--feature-map", "favor+", "--features", "16",
                                               "--projection", "proj_shape.npy"], 2,
     ["--projection", "proj_shape.npy"]),
    ("non-finite projection", FILES + ["--feature-map", "favor+", "--features", "16",
                                       "--projection", "proj_inf.npy"], 2, ["--projection", "proj_inf.npy"]),
    ("missing segments file", FILES + ["--segments", "none.npy"], 2, ["--segments", "none.npy"]),
    ("missing projection file", FILES + ["--feature-map", "favor+", "--projection", "none.npy"], 2,
     ["--projection", "none.npy"]),
    ("existing output without --force", FILES + ["--out", "exists.npy"], 2, ["--out", "exists.npy"]),
    ("missing output folder", FILES + ["--out", "no_such_dir/out.npy"], 2, ["--out", "no_such_dir"]),
    ("window in bidirectional mode", FILES + ["--mode", "bidirectional", "--window", "4"], 2,
     ["--window"]),
    ("general mask", FILES + ["--mask", "m.npy"], 2, ["--mask"]),
    ("--checkpoint-every without --checkpoint", FILES + ["--checkpoint-every", "5"], 2,
     ["--checkpoint-every", "--checkpoint DIR"]),
    ("--denominator with --normalize off", FILES + ["--normalize", "off", "--denominator",
                                                    "add:1e-6"], 2,
     ["--denominator", "--normalize off"]),
    ("signed map without --allow-signed", FILES + ["--feature-map", "identity"], 2,
     ["identity", "--allow-signed"]),
    ("memory estimate above --mem-limit", ["--n", "100000", "--mem-limit", "1M"], 2,
     ["--mem-limit", "estimated", "block buffers", "above the limit 1.0 MiB"]),
    ("memory estimate above the node's available memory",
     ["--n", "100000"], 2, ["--mem-limit", "estimated", "available memory 1.0 MiB"],
     {"LINATTN_MEMINFO": "meminfo_1m"}),
    ("--mem-limit 0", FILES + ["--mem-limit", "0"], 2, ["--mem-limit", "'0'"]),
    ("negative --mem-limit", FILES + ["--mem-limit", "-1G"], 2, ["--mem-limit", "'-1G'"]),
    ("malformed --mem-limit", FILES + ["--mem-limit", "1.5G"], 2, ["--mem-limit", "'1.5G'"]),
    ("unknown --mem-limit suffix", FILES + ["--mem-limit", "4GB"], 2, ["--mem-limit", "'4GB'"]),
    ("--decay 0", FILES + ["--decay", "0"], 2, ["--decay", "(0, 1]"]),
    ("--decay above 1", FILES + ["--decay", "1.5"], 2, ["--decay", "1.5", "(0, 1]"]),
    ("--decay nan", FILES + ["--decay", "nan"], 2, ["--decay", "(0, 1]"]),
    ("--decay not a number", FILES + ["--decay", "0.9,abc"], 2, ["--decay", "0.9,abc"]),
    ("--decay list not of H", FILES + ["--decay", "0.9,0.8,0.7"], 2,
     ["--decay", "3 values for 2 heads"]),
    ("--decay with --reproducible", FILES + ["--decay", "0.9", "--reproducible"], 2,
     ["--decay", "--reproducible"]),
    ("--decay with grad, favor+, keys far apart", ["grad", "--q", "q.npy", "--k", "k_far.npy", "--v",
                                                   "v.npy", "--grad-out", "v.npy", "--decay", "0.9",
                                                   "--feature-map", "favor+"], 2,
     ["--decay", "favor+", "span", "nats"]),
    ("--gates above 0", FILES + ["--gates", "g_pos.npy"], 2,
     ["--gates", "g_pos.npy", "(token 37, head 1)", "<= 0"]),
    ("--gates nan", FILES + ["--gates", "g_nan.npy"], 2, ["--gates", "g_nan.npy", "(token 38, head 0)"]),
    ("--gates shape", FILES + ["--gates", "g_shape.npy"], 2, ["--gates", "g_shape.npy", "[N=40, H=2]"]),
    ("--gates per feature of the wrong width", FILES + ["--gates", "g_feat.npy"], 2,
     ["--gates", "g_feat.npy", "per-feature", "r = 4", "r = 8"]),
    ("--gates per feature with --window", FILES + ["--gates", "g_feat8.npy", "--window", "5"], 2,
     ["--gates", "g_feat8.npy", "per-feature", "--window", "not built yet"]),
    ("--gates missing file", FILES + ["--gates", "nothere.npy"], 2, ["--gates", "nothere.npy"]),
    ("--gates file with the synthetic workload", ["--n", "40", "--gates", "g.npy"], 2,
     ["--gates g.npy", "--gates synthetic"]),
    ("--gates synthetic with files", FILES + ["--gates", "synthetic"], 2,
     ["--gates synthetic", "--q/--k/--v"]),
    ("--gates synthetic-feature with --window", ["--n", "40", "--gates", "synthetic-feature",
                                                 "--window", "5"], 2,
     ["--gates synthetic-feature", "--window", "not built yet"]),
    ("--gates bidirectional", FILES + ["--gates", "g.npy", "--mode", "bidirectional"], 2,
     ["--gates", "causal"]),
    ("--gates with --reproducible", FILES + ["--gates", "g.npy", "--reproducible"], 2,
     ["--gates", "--reproducible"]),
    ("--gates with grad, favor+, keys far apart", ["grad", "--q", "q.npy", "--k", "k_far.npy",
                                                   "--v", "v.npy", "--grad-out", "v.npy", "--gates",
                                                   "g.npy", "--feature-map", "favor+"], 2,
     ["--gates", "favor+", "span", "nats"]),
    ("--grad-gates without --gates", ["grad"] + FILES + ["--grad-out", "v.npy", "--grad-gates",
                                                          "gg.npy"], 2, ["--grad-gates", "--gates"]),
    ("--decay bidirectional with --checkpoint",
     FILES + ["--decay", "0.9", "--mode", "bidirectional", "--checkpoint", "ckd"], 2,
     ["--checkpoint", "--decay"]),
    # linattn eval with --decay (docs/design.md §8.1 "With decay")
    ("eval --decay with --recall", ["eval", "--out-dir", "evd", "--n", "16", "--decay", "0.9",
                                    "--recall"], 2, ["--decay", "--recall"]),
    ("eval --decay above --softmax-max-n", ["eval", "--out-dir", "evd", "--n", "64", "--decay",
                                            "0.9", "--softmax-max-n", "32"], 2,
     ["--decay", "n = 64", "--softmax-max-n 32"]),
    # linattn bench --decay times the decayed operator; its baselines are undecayed softmax
    ("bench --decay with --baselines", ["bench", "--n", "64", "--decay", "0.9", "--baselines",
                                        "softmax"], 2, ["--decay", "baselines", "undecayed"]),
    ("bench --decay with --check", ["bench", "--n", "64", "--decay", "0.9", "--check"], 2,
     ["--decay", "--check", "undecayed"]),
    ("bench --decay above 1", ["bench", "--n", "64", "--decay", "1.5"], 2,
     ["--decay", "1.5", "(0, 1]"]),
]



def check_case(run, tally, name, args, want_rc, must, env=None):
    common.rm(run.path("out.npy"))
    before = set(os.listdir(run.workdir))
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update({k: run.path(v) for k, v in (env or {}).items()})
    sub = "run"
    if args and args[0] in ("grad", "eval", "bench"):  # a case of `linattn grad`, `eval` or `bench`
        sub, args = args[0], args[1:]
    try:
        rc, _, err = run(*args, sub=sub)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    new = sorted(set(os.listdir(run.workdir)) - before)
    probs = [] if rc == want_rc else [f"exit {rc}, want {want_rc}"]
    probs += common.error_line_problems(rc, err)
    if new:
        probs.append(f"new files: {new}")
    msg = common.first_error(err)
    for m in must:
        if isinstance(m, tuple):
            if not common.names_in_order(msg, list(m)):
                probs.append(f"does not name {m}")
        elif m not in msg:
            probs.append(f"does not name {m!r}")
    tally.case(not probs, f"{name} -> exit {want_rc}", note="; ".join(probs) + f" | {msg}",
               cmd=run.last)


def docs_list_cases(tally, path):
    """The rows of the table under the heading "Bad input" of PATH (up to the next heading of
    the same or a higher level) must name every case of CASES."""
    name = os.path.basename(path)
    try:
        text = open(path).read()
    except OSError as e:
        return tally.case(False, f"{name} lists every bad-input case", note=str(e))
    m = re.search(r"^(#+) Bad input[ \t]*$", text, re.M)
    sect = ""
    if m:
        rest = text[m.end():]
        end = re.search(r"^#{1,%d} " % len(m.group(1)), rest, re.M)
        sect = rest[:end.start()] if end else rest
    rows = set(re.findall(r"^\| ([^|]+?) \|", sect, re.M))
    missing = [c[0] for c in CASES if c[0] not in rows]
    tally.case(bool(sect) and not missing, f"{name}'s 'Bad input' table lists every case",
               note=(f"missing {missing}" if missing else "") + ("" if m else "no heading 'Bad input'"))


def main():
    a = common.parse_args(__doc__, extra=lambda p: p.add_argument("--docs", default=""))
    run = common.runner(a)
    run.timeout = 120
    tally = common.Tally()
    write_inputs(run)
    P = common.launcher_ranks(a.launcher)
    print(f"# bad_input: {len(CASES)} cases on {P} rank(s)", flush=True)
    for case in CASES:
        check_case(run, tally, *case)
    if a.docs:
        docs_list_cases(tally, a.docs)
    tally.finish()


if __name__ == "__main__":
    main()
