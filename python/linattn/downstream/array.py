"""The downstream study as a Slurm job array (docs/downstream.md "On a cluster").

- `--list-configs` prints the study's configurations: the count, then one line each. A task
  module's `configs(opts)` gives them (capacity: attention x N; mqar: attention x d_model x
  learning rate; charlm: attention; each with all its seeds); a module without one (swap,
  whose maps all start from the same softmax models) is a single configuration.
- `--config I` runs configuration I alone into its folder, then writes `task.json` there, last
  and atomically: the folder holds a finished task. The record carries a key of the study's
  options, so that the merge refuses folders of another study.
- `python3 -m linattn.downstream.merge BASE` concatenates the data files (each module's
  DATA_FILES) of BASE/task-0 .. task-(K-1) into BASE/merged and writes its report.md with
  `--report-only`, as jobs/eval_merge.sh does for `linattn eval`.
"""
import hashlib
import json
import os
import shutil
import sys
import time

from . import report

MARKER = "task.json"
MERGED_FROM = "merged_from.json"


def _module(task):
    from . import capacity, charlm, mqar, swap
    return {"capacity": capacity, "mqar": mqar, "charlm": charlm, "swap": swap}[task]


def study_args(opts):
    """The options that define the study, canonical (not --out-dir, --config, --threads,
    --resume, --progress): what the merge hands to --report-only, and the study's key."""
    a = ["--tasks", ",".join(opts.tasks), "--seeds", str(opts.seeds)]
    if opts.quick:
        a.append("--quick")
    for flag, v in (("--attentions", opts.attentions), ("--sizes", opts.sizes),
                    ("--d-models", opts.d_models), ("--lrs", opts.lrs)):
        if v:
            a += [flag, ",".join("%.6g" % x if isinstance(x, float) else str(x) for x in v)]
    for flag, v in (("--max-steps", opts.max_steps), ("--epochs", opts.epochs),
                    ("--vocab", opts.vocab), ("--lm-batch", opts.lm_batch),
                    ("--val-windows", opts.val_windows), ("--text-limit", opts.text_limit),
                    ("--ft-steps", opts.ft_steps)):
        if v is not None:
            a += [flag, str(v)]
    if opts.lm_model:
        a += ["--lm-model", ",".join(str(opts.lm_model[k]) for k in ("layers", "heads", "d", "context"))]
    return a


def study_key(args):
    return hashlib.sha256("\0".join(args).encode()).hexdigest()[:16]


def configs(opts):
    """[(task, overrides)] in a fixed order: the tasks in --tasks order, then the module's."""
    out = []
    for t in opts.tasks:
        m = _module(t)
        out += [(t, o) for o in (m.configs(opts) if hasattr(m, "configs") else [{}])]
    return out


def describe(opts):
    cs = configs(opts)
    lines = ["%d configurations (Slurm: sbatch --array=0-%d jobs/downstream_array.sbatch ...)"
             % (len(cs), len(cs) - 1)]
    for i, (t, o) in enumerate(cs):
        lines.append("%d %s %s" % (i, t, " ".join(
            "--%s %s" % (k.replace("_", "-"), ",".join("%.6g" % x if isinstance(x, float)
                                                       else str(x) for x in v))
            for k, v in sorted(o.items()))))
    return lines


def select(opts, index):
    """Narrow opts to configuration `index`; returns the record task.json will hold."""
    args = study_args(opts)
    cs = configs(opts)
    if not 0 <= index < len(cs):
        raise ValueError("--config %d: the study has %d configurations (0..%d; --list-configs "
                         "lists them)" % (index, len(cs), len(cs) - 1))
    task, over = cs[index]
    opts.tasks = [task]
    for k, v in over.items():
        setattr(opts, k, v)
    return {"config": index, "count": len(cs), "task": task, "study_args": args,
            "study_key": study_key(args), "overrides": over,
            "slurm_array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID", ""),
            "slurm_array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID", "")}


def write_marker(out_dir, record, seconds, status):
    record = dict(record, seconds=round(seconds, 3), status=status)
    report.write_text(os.path.join(out_dir, MARKER), json.dumps(record, indent=1) + "\n")


def _fail(msg):
    sys.stderr.write("linattn.downstream.merge: error: %s\n" % msg)
    return 1


def _read_tasks(base):
    """[(dir, record)] of BASE's task folders, in config order, or an error string."""
    if not os.path.isdir(base):
        return "%s: not a folder" % base
    dirs = sorted(d for d in os.listdir(base) if d.startswith("task-")
                  and os.path.isdir(os.path.join(base, d)))
    if not dirs:
        return "%s: no task-* folders (the array's --out-dir?)" % base
    recs = []
    for d in dirs:
        p = os.path.join(base, d, MARKER)
        if not os.path.exists(p):
            return "%s: no %s: that task failed or has not finished" % (os.path.join(base, d), MARKER)
        try:
            with open(p) as f:
                r = json.load(f)
            ok = d == "task-%d" % r["config"] and r["count"] >= 1
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            return "%s: not this folder's task record" % p
        recs.append((os.path.join(base, d), r))
    first = recs[0][1]
    for d, r in recs:
        if r["study_key"] != first["study_key"] or r["count"] != first["count"]:
            return ("%s: a task of another study (options %s, not %s): a stale folder?" % (
                d, " ".join(r["study_args"]), " ".join(first["study_args"])))
    have = sorted(r["config"] for _, r in recs)
    if have != list(range(first["count"])):
        missing = sorted(set(range(first["count"])) - set(have))
        return "%s: %d of %d tasks are there; missing: %s" % (
            base, len(have), first["count"], ", ".join("task-%d" % i for i in missing[:10]))
    recs.sort(key=lambda dr: dr[1]["config"])
    return recs


def _concat(recs, name):
    """The rows of data file `name` over the tasks that have it, or None; an error string when
    the headers differ."""
    cols, rows = None, []
    for d, _ in recs:
        p = os.path.join(d, name)
        if not os.path.exists(p):
            continue
        with open(p) as f:
            head = f.readline().rstrip("\n").split(",")
        if cols is not None and head != cols:
            return "%s: its columns differ from the other tasks'" % p
        cols = head
        rows += report.read_csv(p)
    return None if cols is None else (cols, rows)


def merge(base, force=False):
    """Merge BASE/task-* into BASE/merged; returns the exit status."""
    recs = _read_tasks(base)
    if isinstance(recs, str):
        return _fail(recs)
    out = os.path.join(base, "merged")
    if os.path.exists(out) and not force:
        return _fail("%s: exists (use --force to replace it)" % out)
    first = recs[0][1]
    tasks = []
    for _, r in recs:
        if r["task"] not in tasks:
            tasks.append(r["task"])
    files = {}   # a file two tasks write (inmodel.csv) holds both tasks' rows
    for t in tasks:
        for name in _module(t).DATA_FILES:
            got = _concat([dr for dr in recs if dr[1]["task"] == t], name)
            if isinstance(got, str):
                return _fail(got)
            if got is not None and name in files:
                if got[0] != files[name][0]:
                    return _fail("%s: the %s tasks' columns differ from the others'" % (name, t))
                files[name][1].extend(got[1])
            elif got is not None:
                files[name] = got
    # the softmax check: each task made one; keep the worst per mode, ok only if all were
    checks = _concat(recs, "softmax_check.csv")
    if isinstance(checks, str):
        return _fail(checks)
    tmp = "%s.tmp.%d" % (out, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for name, (cols, rows) in files.items():
        report.write_csv(os.path.join(tmp, name), cols, rows)
    if checks:
        cols, rows = checks
        worst = {}
        for r in rows:
            w = worst.get(r["mode"])
            if w is None or float(r["grad_rel_err"]) > float(w["grad_rel_err"]):
                worst[r["mode"]] = dict(r)
        for m in worst:
            worst[m]["ok"] = "1" if all(r["ok"] == "1" for r in rows if r["mode"] == m) else "0"
        report.write_csv(os.path.join(tmp, "softmax_check.csv"), cols, list(worst.values()))
    report.write_text(os.path.join(tmp, MERGED_FROM), json.dumps({
        "base": os.path.abspath(base), "tasks": len(recs), "study_args": first["study_args"],
        "study_key": first["study_key"], "seconds": sum(r.get("seconds", 0.0) for _, r in recs),
        "failed_tasks": [r["config"] for _, r in recs if r.get("status", 0) != 0],
        "merged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1) + "\n")
    if os.path.exists(out):
        old = "%s.old.%d" % (out, os.getpid())
        os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out)
    sys.stderr.write("linattn.downstream.merge: %d tasks of %s merged into %s\n" % (
        len(recs), base, out))
    from .__main__ import main
    return main(["--out-dir", out, "--report-only"] + first["study_args"])


def merged_note(out_dir):
    """report.md's line on a merged folder, or None."""
    p = os.path.join(out_dir, MERGED_FROM)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        m = json.load(f)
    bad = m.get("failed_tasks") or []
    return ("Merged by `python3 -m linattn.downstream.merge` from the %d tasks of a job array "
            "(%s), which took %.0f s of compute in all%s." % (
                m["tasks"], m["base"], m["seconds"],
                "; tasks %s reported a non-finite result" % ", ".join(map(str, bad)) if bad else ""))
