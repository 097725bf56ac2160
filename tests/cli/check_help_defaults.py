#!/usr/bin/python3
"""Every default `linattn SUB --help` shows is the value the program uses, and docs/cli.md
says the same (docs/cli.md "linattn run", "linattn grad", "linattn bench", "Report").

For run, grad and bench:
  1. parse --help: one entry per option, its default from "(default X)";
  2. parse --print-options (the parsed option values, name=value): a literal default must
     equal the printed value; a default the program works out (OMP_NUM_THREADS, 1/sqrt(dk),
     the tuned chunk, the inputs' dtype, a terminal) has a rule below, checked end to end;
  3. run a small job with defaults and compare the JSON report (run, grad) or the CSV rows
     (bench) with the defaults of --help;
  4. docs/cli.md lists exactly the options of --help in the subcommand's section (grad: run's
     and its own), with the same default and the same bounds, the bench CSV header, and every
     field of the report.
For eval, 1, 2 (its results are checked against an oracle by tests/eval/check_eval.py) and 4.

Usage: check_help_defaults.py --linattn build/linattn --docs docs/cli.md --workdir DIR [--verbose]
"""
import argparse
import csv
import io
import json
import math
import os
import pty
import re
import subprocess
import sys

import numpy as np

SUBS = ("run", "grad", "bench")
ENTRY = re.compile(r"^  (?:-\w, )?(--[\w-]+)(?: (\S+))?(?: {2,}(.*))?$")
RANGE = re.compile(r"an integer in \[[^\]]*\]|in [\[(][^\]]*\]|an integer >= \S+|"
                   r"a finite number >=? \S+")
CHOICES = re.compile(r"; (?:comma-separated, of )?((?:[\w+-]+ \| )+[\w+-]+)(?: \(default|$)")

failures, passed = [], [0]
VERBOSE = "--verbose" in sys.argv


def check(ok, what, note=""):
    if not ok or VERBOSE:
        print(("ok:   " if ok else "FAIL: ") + what + ("" if ok or not note else f" ({note})"))
    if not ok:
        failures.append(what)
    passed[0] += bool(ok)
    return ok


class Linattn:
    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir

    def __call__(self, *args, threads="2", stderr=subprocess.PIPE):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        p = subprocess.run([self.binary, *map(str, args)], cwd=self.workdir, env=env,
                           stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=600)
        return p.returncode, p.stdout, p.stderr or ""

    def path(self, name):
        return os.path.join(self.workdir, name)


def parse_help(text):
    """option -> {"default": str or None, "text": the entry's text}; duplicates fail."""
    opts, cur = {}, None
    for line in text.splitlines():
        m = ENTRY.match(line)
        if m:
            name = m.group(1)
            check(name not in opts, f"--help lists {name} once")
            cur = opts[name] = {"text": m.group(3) or ""}
        elif cur is not None and line.startswith(" " * 10):
            cur["text"] = (cur["text"] + " " + line.strip()).strip()
        else:
            cur = None
    for o in opts.values():
        m = re.search(r"\(default (.*)\)$", o["text"])
        o["default"] = m.group(1) if m else None
    return opts


def parse_print(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def same(a, b):
    """Equal as numbers when both are numbers, else as strings."""
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0)
    except (TypeError, ValueError):
        return str(a) == str(b)


def tuned_chunk(r, dv):
    return 32 if r <= 32 and dv <= 32 else 48 if r <= 128 else 64


def report_of(la, name, *args):
    rc, _, err = la(*args, "--no-progress", "--report", name, "--force")
    if not check(rc == 0, f"linattn {' '.join(map(str, args))} --report runs", err.strip()):
        return None
    with open(la.path(name)) as f:
        return json.load(f)


def bench_rows(la, *args):
    rc, out, err = la("bench", *args)
    if not check(rc == 0, f"linattn bench {' '.join(map(str, args))} runs", err.strip()):
        return None, []
    header = out.splitlines()[0] if out else ""
    return header, list(csv.DictReader(io.StringIO(out)))


# What the program does with the defaults it works out: (sub, printed value, context) ->
# list of problems. ctx holds the reports / CSV rows of step 3.
def rule_threads(sub, printed, ctx):
    want = "" if sub == "bench" else "0"
    probs = [] if printed == want else [f"--print-options says {printed!r}, want {want!r}"]
    used = ctx["csv"][0]["threads"] if sub == "bench" else ctx["report"]["threads"]
    if str(used) != ctx["omp"]:
        probs.append(f"ran {used} threads with OMP_NUM_THREADS={ctx['omp']}")
    return probs


def rule_scale(sub, printed, ctx):
    rep = ctx["report"]
    probs = [] if printed == "0" else [f"--print-options says {printed!r}, want 0"]
    if not same(rep["scale"], 1 / math.sqrt(rep["dk"])):
        probs.append(f"report scale {rep['scale']} for dk = {rep['dk']}")
    return probs


def rule_chunk(sub, printed, ctx):
    probs = [] if printed == "0" else [f"--print-options says {printed!r}, want 0"]
    if sub == "bench":
        rows = [(int(r["r"]), int(r["dv"]), int(r["chunk"])) for r in ctx["csv"]]
    else:
        rep = ctx["report"]
        rows = [(rep["features"], rep["dv"], rep["chunk"])]
    for r, dv, c in rows:
        if c != tuned_chunk(r, dv):
            probs.append(f"chunk {c} at r = {r}, dv = {dv}, want {tuned_chunk(r, dv)}")
    return probs


def auto_block(heads, dk, dv, dtype):
    row = heads * max(dk, dv) * (4 if dtype == "f32" else 8)
    b = 256
    while b < 16384 and 2 * b * row <= 1 << 21:
        b *= 2
    return b


def rule_block(sub, printed, ctx):
    probs = [] if printed == "0" else [f"--print-options says {printed!r}, want 0"]
    rep = ctx["report"]
    want = auto_block(rep["heads"], rep["dk"], rep["dv"], rep["dtype"]) if sub == "run" else 0
    if rep.get("block_tokens") != want:
        probs.append(f"report block_tokens {rep.get('block_tokens')} at H = {rep['heads']}, "
                     f"dk = {rep['dk']}, dv = {rep['dv']}, {rep['dtype']}, want {want}")
    return probs


def rule_dtype(sub, printed, ctx):
    probs = [] if printed == "f32" else [f"--print-options says {printed!r}, want f32"]
    if ctx["report"]["dtype"] != "f32":
        probs.append(f"synthetic run computed in {ctx['report']['dtype']}")
    if sub == "run" and ctx.get("report_f64", {}).get("dtype") != "f64":
        probs.append("float64 inputs did not compute in f64")
    return probs


def rule_progress(sub, printed, ctx):
    probs = [] if printed == "off" else [f"stderr a pipe: progress={printed}"]
    if ctx["tty_progress"].get(sub) != "on":
        probs.append(f"stderr a terminal: progress={ctx['tty_progress'].get(sub)}")
    return probs


def rule_mem_limit(sub, printed, ctx):
    """0 (worked out): the report holds the estimate to this node's MemAvailable (one rank)."""
    rep = ctx["report"]
    probs = [] if printed == "0" else [f"--print-options says {printed!r}, want 0"]
    total = None
    try:
        with open("/proc/meminfo") as f:
            total = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        pass
    lim, est = rep.get("mem_limit_bytes_per_rank"), rep.get("mem_estimate_bytes_per_rank")
    if total is not None and not (lim and 0 < lim <= total):
        probs.append(f"report mem_limit_bytes_per_rank {lim}, MemTotal {total}")
    if not (est and est > 0):
        probs.append(f"report mem_estimate_bytes_per_rank {est}")
    return probs


RULES = {
    "OMP_NUM_THREADS": rule_threads,
    "1/sqrt(dk)": rule_scale,
    "tuned: 32 if r, dv <= 32, 48 if r <= 128, else 64": rule_chunk,
    "the dtype of --q, f32 if synthetic": rule_dtype,
    "auto: the largest power of 2 from 256 to 16384 whose block of the widest tensor fits in 2 MiB":
        rule_block,
    "on if stderr is a terminal": rule_progress,
    "the node's available memory": rule_mem_limit,
}

# Step 3: option -> report field (run, grad) or CSV column (bench) that shows its value.
REPORT = {"n": "n", "heads": "heads", "dk": "dk", "dv": "dv", "mode": "mode",
          "feature-map": "feature_map", "normalize": "normalize", "seed": "seed",
          "denominator": "denominator_policy", "allow-signed": "allow_signed"}
CSV = {"n": "n", "heads": "heads", "dk": "dk", "dv": "dv", "modes": "mode",
       "feature-maps": "map", "dtype": "dtype", "repeat": "repeat", "seed": None}


def as_text(v):
    return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v


def tty_progress(la, sub):
    """--print-options with stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    try:
        rc, out, _ = la(sub, "--print-options", stderr=slave)
    finally:
        os.close(slave)
        os.close(master)
    return parse_print(out).get("progress") if rc == 0 else None


def end_to_end(la, sub):
    """Small jobs with default options; what they report."""
    ctx = {"omp": "2", "tty_progress": {sub: tty_progress(la, sub)}}
    if sub == "bench":
        ctx["header"], ctx["csv"] = bench_rows(la)
        _, fav = bench_rows(la, "--n", 256, "--feature-maps", "favor+", "--repeat", 1)
        ctx["csv_favor"] = fav
        return ctx if ctx["csv"] else None
    # grad at the default N holds 7 arrays of 64 MiB; N is checked by run and --print-options
    ctx["report"] = report_of(la, f"{sub}.json", sub, *(["--n", 1024] if sub == "grad" else []))
    ctx["report_favor"] = report_of(la, f"{sub}_favor.json", sub, "--n", 64, "--feature-map",
                                    "favor+")
    if sub == "run":
        rng = np.random.default_rng(0)
        for name, d in (("q", 8), ("k", 8), ("v", 4)):
            np.save(la.path(f"{name}64.npy"), rng.standard_normal((16, 2, d)))
        ctx["report_f64"] = report_of(la, "run_f64.json", "run", "--q", "q64.npy", "--k",
                                      "k64.npy", "--v", "v64.npy")
    return ctx if ctx["report"] and ctx["report_favor"] else None


def check_sub(la, sub):
    rc, text, _ = la(sub, "--help")
    check(rc == 0, f"linattn {sub} --help exits 0")
    helps = parse_help(text)
    rc, text, err = la(sub, "--print-options")
    check(rc == 0, f"linattn {sub} --print-options exits 0", err.strip())
    printed = parse_print(text)
    ctx = end_to_end(la, sub)
    if ctx is None:
        return helps
    shown = {n: h["default"] for n, h in helps.items() if h["default"] is not None}
    check(len(shown) >= (10 if sub == "bench" else 15), f"{sub}: --help shows defaults",
          f"only {sorted(shown)}")
    for opt, default in sorted(shown.items()):
        key = opt[2:]
        if default in RULES:
            probs = RULES[default](sub, printed.get(key), ctx)
            check(not probs, f"{sub} {opt}: default '{default}' is what runs", "; ".join(probs))
            continue
        check(key in printed and same(printed[key], default),
              f"{sub} {opt}: --help default {default} = --print-options",
              f"prints {printed.get(key)!r}")
        # ... and what a job with defaults reports
        if sub == "bench":
            col = CSV.get(key, "")
            if col:
                got = {r[col] for r in ctx["csv"]}
                check(got == {default}, f"bench {opt}: the CSV shows {default}", f"{got}")
            elif key == "features":
                got = {r["features"] for r in ctx["csv_favor"]}
                check(got == {default}, f"bench {opt}: the CSV shows {default}", f"{got}")
        else:
            field = REPORT.get(key)
            rep = ctx["report"]
            if key == "features":
                field, rep = "projection_rows", ctx["report_favor"]
            if field and not (key == "n" and sub == "grad"):
                got = as_text(rep[field])
                check(same(got, default), f"{sub} {opt}: the report shows {default}",
                      f"{field} = {got!r}")
    check(not set(printed) - {o[2:] for o in helps},
          f"{sub}: every option --print-options shows is in --help",
          f"{sorted(set(printed) - {o[2:] for o in helps})}")
    if sub == "bench":
        ctx_header = ctx.get("header", "")
        check(bool(ctx_header), "bench prints a CSV header")
        helps["_header"] = ctx_header
    else:
        helps["_report"] = ctx["report"]
    return helps


# eval's defaults that the program works out: --print-options shows 0 ("work it out")
EVAL_AUTO = {"OMP_NUM_THREADS", "1/sqrt(dk)", "on if stderr is a terminal",
             "tuned: 32 if r, dv <= 32, 48 if r <= 128, else 64"}


def check_eval(la):
    """eval: --help defaults against --print-options (no end-to-end job: check_eval.py)."""
    rc, text, _ = la("eval", "--help")
    check(rc == 0, "linattn eval --help exits 0")
    helps = parse_help(text)
    rc, text, err = la("eval", "--out-dir", "eval_opts", "--print-options")
    check(rc == 0, "linattn eval --print-options exits 0", err.strip())
    printed = parse_print(text)
    shown = {n: h["default"] for n, h in helps.items() if h["default"] is not None}
    check(len(shown) >= 15, "eval: --help shows defaults", f"only {sorted(shown)}")
    for opt, default in sorted(shown.items()):
        got = printed.get(opt[2:])
        if default in EVAL_AUTO:
            ok = got in ("0", "off") if opt != "--threads" else got == "0"
            check(ok, f"eval {opt}: default '{default}' is left to the program", f"prints {got!r}")
        else:
            check(got is not None and same(got, default),
                  f"eval {opt}: --help default {default} = --print-options", f"prints {got!r}")
    check(not set(printed) - {o[2:] for o in helps},
          "eval: every option --print-options shows is in --help",
          f"{sorted(set(printed) - {o[2:] for o in helps})}")
    return helps


def doc_sections(path):
    sections, cur = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                cur = line[3:].strip()
                sections[cur] = []
            elif cur:
                sections[cur].append(line.rstrip("\n"))
    return sections


def norm(s):
    return " ".join(s.replace("`", "").replace("\\|", "|").replace(" | ", ", ").split())


def doc_options(lines):
    """option -> {"values", "default"} from the table rows "| `--opt ...` | meaning | values |
    default |"."""
    opts = {}
    for line in lines:
        if not line.startswith("| `-"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        name = cells[0].strip("`").split()[0]
        check(len(cells) == 4, f"docs: the row of {name} has 4 cells")
        if len(cells) == 4:
            check(name not in opts, f"docs: {name} is listed once in its section")
            opts[name] = {"values": norm(cells[2]), "default": norm(cells[3])}
    return opts


def check_docs(path, helps):
    sections = doc_sections(path)
    for h in ("Files", "linattn run", "linattn grad", "linattn bench", "Report", "Exit codes",
              "Errors"):
        check(h in sections, f"docs: section '{h}'")
    docs = {s: doc_options(sections.get(f"linattn {s}", [])) for s in SUBS + ("eval",)}
    docs["grad"] = {**docs["run"], **docs["grad"]}
    for sub in SUBS + ("eval",):
        if sub not in helps:
            continue
        want = {o for o in helps[sub] if o.startswith("--") and o != "--help"}
        got = set(docs[sub])
        check(not want - got, f"docs: every option of linattn {sub} is documented",
              f"missing {sorted(want - got)}")
        check(not got - want, f"docs: every option documented for linattn {sub} exists",
              f"unknown {sorted(got - want)}")
        for opt in sorted(want & got):
            h, d = helps[sub][opt], docs[sub][opt]
            check(d["default"] == (norm(h["default"]) if h["default"] else "-"),
                  f"docs: {sub} {opt} default is {h['default'] or '-'}",
                  f"docs say {d['default']!r}")
            text = norm(h["text"])
            for rg in RANGE.findall(h["text"]):
                check(rg in d["values"], f"docs: {sub} {opt} values say '{rg}'",
                      f"docs say {d['values']!r}")
            m = CHOICES.search(h["text"])
            if m:
                names = m.group(1).split(" | ")
                miss = [n for n in names if not re.search(r"(?<![\w+-])" + re.escape(n) +
                                                          r"(?![\w+-])", d["values"])]
                check(not miss, f"docs: {sub} {opt} values list {', '.join(names)}",
                      f"missing {miss}")
            check(d["values"] == "-" or d["values"] in text or RANGE.search(h["text"]) or m,
                  f"docs: {sub} {opt} values match --help", f"docs say {d['values']!r}")
    bench = "\n".join(sections.get("linattn bench", []))
    header = helps.get("bench", {}).get("_header", "")
    check(bool(header) and header in bench, "docs: the bench CSV header, verbatim")
    report = "\n".join(sections.get("Report", []))
    rep = helps.get("run", {}).get("_report") or {}
    keys = set(rep) | {k for v in rep.values() if isinstance(v, dict) for k in v}
    miss = sorted(k for k in keys if f"`{k}`" not in report)
    check(bool(rep) and not miss, "docs: every report field is in section Report",
          f"missing {miss}")
    codes = "\n".join(sections.get("Exit codes", []))
    miss = [c for c in ("0", "1", "2", "3", "75") if f"| {c} |" not in codes]
    check(not miss, "docs: exit codes 0, 1, 2, 3, 75", f"missing {miss}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--linattn", required=True)
    p.add_argument("--docs", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--verbose", action="store_true", help="print every check, not only failures")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    la = Linattn(os.path.abspath(a.linattn), os.path.abspath(a.workdir))
    helps = {sub: check_sub(la, sub) for sub in SUBS}
    helps["eval"] = check_eval(la)
    check_docs(a.docs, helps)
    print(f"{passed[0]} checks passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
