"""python3 -m linattn.downstream --out-dir DIR [options]: the downstream study (docs/downstream.md).

Exit status: 0 done; 1 a run failed to produce a finite result or the softmax check failed;
2 bad usage.
"""
import argparse
import datetime
import os
import platform
import sys
import time

TASKS = ("capacity", "mqar", "charlm", "swap")
TASK_HELP = ("capacity (Schlag et al.'s storage task), mqar (Zoology's multi-query recall), "
             "charlm (a character GPT on GCIDE, with the operator measured inside it), swap "
             "(the softmax charlm with each map put in, then fine-tuned)")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m linattn.downstream",
                                description="Train small models with each attention and compare "
                                            "them with softmax (docs/downstream.md).")
    p.add_argument("--out-dir", help="folder for the CSVs, plots and report.md (required)")
    p.add_argument("--quick", action="store_true",
                   help="a subset that finishes in minutes on one thread (labelled quick)")
    p.add_argument("--tasks", default="capacity", help="comma-separated: " + TASK_HELP)
    p.add_argument("--seeds", type=int, default=3, help="seeds per configuration (default 3)")
    p.add_argument("--attentions", default=None,
                   help="comma-separated attention names (default: the task's list)")
    p.add_argument("--sizes", default=None, help="capacity: comma-separated N (default: the task's)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="step limit per run (capacity: default 100000, quick 1000; mqar: "
                        "default none, the epochs decide; charlm/swap: the training steps, default 2000, quick 80)")
    p.add_argument("--d-models", default=None, help="mqar: comma-separated d_model (default 64,128; quick 64)")
    p.add_argument("--lrs", default=None,
                   help="mqar: comma-separated learning rates (default: Zoology's sweep "
                        "np.logspace(-3, -1.5, 4); quick 1e-2)")
    p.add_argument("--epochs", type=int, default=None, help="mqar: epochs over the training set (default 32, quick 2)")
    p.add_argument("--vocab", type=int, default=None, help="mqar: vocabulary size (default 256; Zoology's is 8192)")
    p.add_argument("--lm-model", default=None,
                   help="charlm/swap: layers,heads,d,context (default 4,4,128,256, nanoGPT's baby)")
    p.add_argument("--lm-batch", type=int, default=None, help="charlm/swap: batch (default 12, quick 8)")
    p.add_argument("--val-windows", type=int, default=None,
                   help="charlm/swap: validation windows of one context (default 128, quick 16)")
    p.add_argument("--text-limit", type=int, default=None,
                   help="charlm/swap: use only the first BYTES of the dictionary (tests)")
    p.add_argument("--ft-steps", type=int, default=None, help="swap: fine-tune steps (default 300, quick 30)")
    p.add_argument("--threads", type=int, default=1, help="threads for torch and the engine (default 1)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in DIR's CSVs and run only the missing ones")
    p.add_argument("--estimate", action="store_true",
                   help="time a few steps of every configuration and extrapolate the study's "
                        "duration (capacity_time.csv, mqar_time.csv); trains nothing to the end")
    p.add_argument("--report-only", action="store_true", help="rewrite report.md from DIR's CSVs")
    p.add_argument("--progress", action="store_true", default=None,
                   help="a progress line with rate and ETA on stderr (default: when stderr is a terminal)")
    p.add_argument("--list-configs", action="store_true",
                   help="print the study's configurations (one per Slurm array task) and exit")
    p.add_argument("--config", type=int, default=None, metavar="I",
                   help="run configuration I alone (a Slurm array task; docs/downstream.md "
                        "\"On a cluster\"); writes task.json when done")
    a = p.parse_args(argv)
    if a.out_dir is None and not a.list_configs:
        p.error("--out-dir DIR is required")
    if a.config is not None and (a.resume or a.report_only or a.estimate):
        p.error("--config runs one configuration; not with --resume, --report-only or --estimate")
    a.tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    for t in a.tasks:
        if t not in TASKS:
            p.error("unknown task %r (tasks: %s)" % (t, ", ".join(TASKS)))
    if a.seeds < 1:
        p.error("--seeds must be at least 1")
    if a.threads < 1:
        p.error("--threads must be at least 1")
    if a.max_steps is not None and a.max_steps < 1:
        p.error("--max-steps must be at least 1")
    a.attentions = [s.strip() for s in a.attentions.split(",") if s.strip()] if a.attentions else None
    try:
        a.sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else None
    except ValueError:
        p.error("--sizes takes comma-separated integers")
    if a.sizes and min(a.sizes) < 2:
        p.error("--sizes: N must be at least 2")
    try:
        a.d_models = [int(s) for s in a.d_models.split(",")] if a.d_models else None
        a.lrs = [float(s) for s in a.lrs.split(",")] if a.lrs else None
    except ValueError:
        p.error("--d-models takes integers and --lrs numbers, comma-separated")
    if a.d_models and min(a.d_models) < 1 or a.lrs and min(a.lrs) <= 0:
        p.error("--d-models and --lrs must be positive")
    if a.epochs is not None and a.epochs < 1:
        p.error("--epochs must be at least 1")
    try:
        lm = [int(x) for x in a.lm_model.split(",")] if a.lm_model else None
    except ValueError:
        lm = [0]
    if lm is not None and (len(lm) != 4 or min(lm) < 1 or lm[2] % lm[1]):
        p.error("--lm-model takes layers,heads,d,context: 4 positive integers, d a multiple of heads")
    a.lm_model = dict(zip(("layers", "heads", "d", "context"), lm)) if lm else None
    for name in ("lm_batch", "val_windows", "text_limit", "ft_steps"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.vocab is not None and (a.vocab < 132 or a.vocab % 2):
        p.error("--vocab must be even and at least 132 (64 distinct keys below vocab/2)")
    return a, p


def main(argv=None):
    opts, parser = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(opts.threads))
    try:
        import torch
    except ImportError as e:
        sys.stderr.write("linattn.downstream: needs torch (apt-get install python3-torch): %s\n" % e)
        return 2
    torch.set_num_threads(opts.threads)
    import linattn
    from . import array, attentions, capacity, charlm, inmodel, mqar, progress, report, swap

    if opts.attentions:
        for a in opts.attentions:
            try:
                attentions.parse(a)
            except ValueError as e:
                parser.error(str(e))
    if opts.list_configs:
        try:
            print("\n".join(array.describe(opts)))
            sys.stdout.flush()
        except BrokenPipeError:   # `| head -1`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    record = None
    if opts.config is not None:
        try:
            record = array.select(opts, opts.config)
        except ValueError as e:
            parser.error(str(e))
    os.makedirs(opts.out_dir, exist_ok=True)
    if record:   # a rerun of the task: its folder no longer vouches for a finished one
        try:
            os.remove(os.path.join(opts.out_dir, array.MARKER))
        except FileNotFoundError:
            pass
    rank = progress.rank()

    def factory(what, total):
        return progress.Progress(what, total, enabled=opts.progress, rank=rank)

    if opts.estimate and "mqar" in opts.tasks:
        rows, total = mqar.estimate(opts, opts.out_dir)
        sys.stderr.write("linattn.downstream: the mqar task (%d configurations x lrs x seeds, %d "
                         "thread%s) would take about %.1f h\n" % (
                             len(rows), opts.threads, "" if opts.threads == 1 else "s", total / 3600))
    if opts.estimate and ("charlm" in opts.tasks or "swap" in opts.tasks):
        rows, total = charlm.estimate(opts, opts.out_dir)
        sw = swap.estimate(opts, opts.out_dir, rows) if "swap" in opts.tasks else 0.0
        sys.stderr.write("linattn.downstream: the charlm task (%d attentions x %d seeds x %d steps, "
                         "%d thread%s) would take about %.1f h%s\n" % (
                             len(rows), opts.seeds, rows[0]["steps"] if rows else 0, opts.threads,
                             "" if opts.threads == 1 else "s", (total if "charlm" in opts.tasks else 0) / 3600,
                             "; the swap task about %.1f h more" % (sw / 3600) if "swap" in opts.tasks else ""))
    if opts.estimate and "capacity" not in opts.tasks:
        return 0
    if opts.estimate:
        rows, total = capacity.estimate(opts, opts.out_dir)
        by_n = {}
        for r in rows:
            by_n[r["N"]] = by_n.get(r["N"], 0.0) + r["seconds_estimated"]
        sys.stderr.write("linattn.downstream: the capacity study (%d configurations x %d seeds, "
                         "%d thread%s) would take about %.1f h; by N: %s\n" % (
                             len(rows), opts.seeds, opts.threads, "" if opts.threads == 1 else "s",
                             total / 3600, ", ".join("%d: %.2f h" % (n, s / 3600) for n, s in sorted(by_n.items()))))
        return 0
    status = 0
    meta_path = os.path.join(opts.out_dir, "softmax_check.csv")
    if not opts.report_only:
        rows = attentions.softmax_check(threads=opts.threads)
        report.write_csv(meta_path, ["mode", "out_rel_err", "grad_rel_err", "tolerance", "ok",
                                     "engine_version"], rows)
        if not all(r["ok"] for r in rows):
            report.warn("the engine's softmax differs from torch's (softmax_check.csv)")
            status = 1
    metas = {}
    t0 = time.monotonic()
    if "capacity" in opts.tasks:
        if opts.report_only:
            metas["capacity"] = {"sizes": opts.sizes or "(from the CSVs)", "attentions": opts.attentions or [],
                                 "max_steps": opts.max_steps or 0, "seeds": list(range(1, opts.seeds + 1))}
        else:
            metas["capacity"] = capacity.run(opts, opts.out_dir, factory)
        metas["capacity"]["quick"] = opts.quick
    if "mqar" in opts.tasks:
        metas["mqar"] = mqar.config(opts) if opts.report_only else mqar.run(opts, opts.out_dir, factory)
        metas["mqar"]["quick"] = opts.quick
    for t, mod in (("charlm", charlm), ("swap", swap)):
        if t in opts.tasks:
            metas[t] = mod.config(opts) if opts.report_only else mod.run(opts, opts.out_dir, factory)
            metas[t]["quick"] = opts.quick
            metas[t]["threads"] = opts.threads
    elapsed = time.monotonic() - t0

    # report.md
    plots = report.Plots("Tasks: %s." % ", ".join(opts.tasks))
    sections = []
    if "capacity" in metas:
        sections.append(capacity.write_report(opts.out_dir, metas["capacity"], plots))
        runs = report.read_csv(os.path.join(opts.out_dir, "capacity_runs.csv"))
        bad = [r for r in runs if r["final_mse"] in ("nan", "inf", "")]
        if bad:
            report.warn("%d capacity run(s) ended without a finite test MSE (capacity_runs.csv)" % len(bad))
            status = 1
    if "mqar" in metas:
        sections.append(mqar.write_report(opts.out_dir, metas["mqar"], plots))
        runs = report.read_csv(os.path.join(opts.out_dir, "mqar_runs.csv"))
        bad = [r for r in runs if r["accuracy"] in ("nan", "inf", "") or r["stop"] not in ("done", "solved")]
        if bad:
            report.warn("%d mqar run(s) ended without a finite accuracy (mqar_runs.csv)" % len(bad))
            status = 1
    lm_summ, swap_summ = [], []
    if "charlm" in metas:
        sections.append(charlm.write_report(opts.out_dir, metas["charlm"], plots))
        runs = report.read_csv(os.path.join(opts.out_dir, "charlm_runs.csv"))
        lm_summ = charlm.summarize(runs)
        bad = [r for r in runs if r["stop"] != "done"]
        if bad:
            report.warn("%d charlm run(s) diverged (charlm_runs.csv, report.md)" % len(bad))
    if "swap" in metas:
        text, swap_summ = swap.write_report(opts.out_dir, metas["swap"], plots)
        sections.append(text)
    if lm_summ or swap_summ:
        meta = metas.get("charlm") or metas["swap"]
        sections.append(inmodel.write_report(opts.out_dir, dict(meta, remake_untrained=not opts.report_only),
                                             plots, lm_summ, swap_summ))
    made, warning = plots.make(opts.out_dir)
    if warning:
        report.warn(warning)
    head = ["# linattn downstream study%s\n" % (" (QUICK RUN)" if opts.quick else ""),
            "Made by `python3 -m linattn.downstream %s` on %s (%s, linattn %s, torch %s, %d thread%s), "
            "%s. Every number below comes from the CSV files of this folder; "
            "docs/downstream.md describes the tasks and the choices behind them.\n" % (
                " ".join(sys.argv[1:]) if argv is None else " ".join(argv),
                datetime.date.today().isoformat(), platform.node(), linattn.__version__,
                torch.__version__, opts.threads, "" if opts.threads == 1 else "s",
                ("remade from the CSVs by --report-only (the runs' own seconds are in the CSVs)"
                 if opts.report_only else "in %.0f s" % elapsed))]
    note = array.merged_note(opts.out_dir)
    if note:
        head.append(note + "\n")
    if record:
        head.append("Configuration %d of %d of a job array (%s); the merge step "
                    "(`python3 -m linattn.downstream.merge`) reports the whole study.\n" % (
                        record["config"], record["count"], " ".join(record["study_args"])))
    if opts.quick:
        head.append("**This is the --quick variant**: fewer sizes, attentions and steps than the "
                    "study; its verdicts are about this subset only.\n")
    if os.path.exists(meta_path):
        sc = report.read_csv(meta_path)
        head.append("The engine's softmax (`linattn.torch.softmax_attention`) against torch's own "
                    "quadratic softmax, float64, once at start-up: " + "; ".join(
                        "%s: output rel. error %s, gradient %s (%s)" % (
                            r["mode"], report.sci(float(r["out_rel_err"])),
                            report.sci(float(r["grad_rel_err"])), "ok" if r["ok"] == "1" else "FAILED")
                        for r in sc) + " (softmax_check.csv).\n")
    if warning:
        head.append("Plots: %s.\n" % warning)
    report.write_text(os.path.join(opts.out_dir, "report.md"), "\n".join(head + sections))
    sys.stderr.write("linattn.downstream: wrote %s\n" % os.path.join(opts.out_dir, "report.md"))
    if record:
        array.write_marker(opts.out_dir, record, elapsed, status)
    return status


if __name__ == "__main__":
    sys.exit(main())
