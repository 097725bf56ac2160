"""Swapping the attention of a trained model (issue 35 item 5; Performer's "backwards
compatibility", Choromanski et al. 2021; docs/downstream.md "Swap").

For each seed: the softmax character LM of charlm.py (its checkpoint in DIR/checkpoints/ when
the charlm task of the same configuration saved one, else trained here with charlm's settings
and saved). For each map: the same weights with the map in every layer's attention (hedgehog's
W starts at the identity), the validation bpc without any training (zero-shot), then a short
fine-tune of the whole model (AdamW, lr/2 of charlm's, a linear warm-up over a tenth of the
steps, then constant) with the validation bpc at regular steps. softmax itself is fine-tuned
the same way as the control: how much a few more steps help without any swap.

    gap_closed = (bpc_swapped - bpc_finetuned) / (bpc_swapped - bpc_softmax)

(bpc_softmax: the trained softmax model before the fine-tune; empty when the zero-shot gap is
below MIN_GAP = 0.01 bpc). The control's own gain matters: gap_left_vs_control =
(bpc_finetuned - bpc_finetuned of softmax, same seed) / (bpc_swapped - bpc_softmax) is the
share of the gap still there against a softmax model fine-tuned as long.
steps_to_half / steps_to_90: the first curve step where gap_closed reaches 0.5 / 0.9.
"""
import os
import sys
import time

import torch

from . import charlm, gpt, inmodel, report

ATTN_FULL = tuple(a for a in charlm.ATTN_FULL)          # softmax = the control
ATTN_QUICK = ("softmax", "elu1", "favor+:64", "hedgehog")
FT_FULL = {"ft_steps": 300, "ft_eval_every": 25}
FT_QUICK = {"ft_steps": 30, "ft_eval_every": 10}

RUN_COLS = ["attention", "seed", "base_steps", "ft_steps", "ft_lr", "bpc_softmax", "bpc_swapped",
            "bpc_finetuned", "gap_closed", "steps_to_half", "steps_to_90", "stop", "base", "seconds"]
CURVE_COLS = ["attention", "seed", "step", "train_bpc", "val_bpc"]


def config(opts):
    c = charlm.config(opts)
    c.update(FT_QUICK if opts.quick else FT_FULL)
    if getattr(opts, "ft_steps", None):
        c["ft_steps"] = opts.ft_steps
        c["ft_eval_every"] = max(1, min(c["ft_eval_every"], opts.ft_steps // 3 or 1))
    c["ft_lr"] = c["lr"] / 2
    c["swap_attentions"] = list(opts.attentions or (ATTN_QUICK if opts.quick else ATTN_FULL))
    if "softmax" not in c["swap_attentions"]:
        c["swap_attentions"].insert(0, "softmax")
    return c


def softmax_model(cfg, seed, tr, vs, out_dir, threads):
    """(model, where it came from): charlm's checkpoint of this seed and configuration, or a
    fresh training with charlm's settings (then saved)."""
    path = charlm.checkpoint_path(out_dir, seed)
    want = {k: cfg[k] for k in ("steps", "batch", "lr", "model", "text_limit")}
    model = charlm.build_model("softmax", cfg, seed, threads)
    if os.path.exists(path):
        ck = torch.load(path)
        if ck.get("cfg") == want:
            model.load_state_dict(ck["model"])
            return model, "charlm checkpoint"
    _, _, stop, _ = charlm.train(model, tr, vs, cfg, seed=seed, steps=cfg["steps"],
                                 lr_fn=lambda s: charlm.lr_at(s, cfg), eval_every=cfg["steps"],
                                 key={"attention": "softmax", "seed": seed})
    if stop != "done":
        raise RuntimeError("the softmax model of seed %d did not train: %s" % (seed, stop))
    charlm.save_checkpoint(model, out_dir, seed, cfg)
    return model, "trained here"


MIN_GAP = 0.01     # bpc: below this zero-shot gap, gap_closed is left empty (no gap to close)


def _gap_closed(sw, x, sm):
    return (sw - x) / (sw - sm) if sw - sm > MIN_GAP else ""


def run_one(name, seed, base_state, bpc_sm, source, cfg, tr, vs, threads):
    t0 = time.monotonic()
    model = charlm.build_model("softmax", cfg, seed, threads)
    model.load_state_dict(base_state)
    m = cfg["model"]
    if name != "softmax":
        model.set_attention(gpt.make_attention_factory(name, heads=m["heads"], dk=m["d"] // m["heads"],
                                                       seed=seed, threads=threads))
    key = {"attention": name, "seed": seed}
    inm = inmodel.measure_model(model, vs, key=dict(key, task="swap", stage="zero-shot", step=0))
    n, warm = cfg["ft_steps"], max(cfg["ft_steps"] // 10, 1)
    curve, losses, stop, _ = charlm.train(
        model, tr, vs, cfg, seed=seed + 1000, steps=n, eval_every=cfg["ft_eval_every"], key=key,
        lr_fn=lambda s: cfg["ft_lr"] * min(1.0, (s + 1) / (warm + 1)))
    sw = curve[0]["val_bpc"]
    ft = curve[-1]["val_bpc"] if stop == "done" else ""
    if stop == "done":
        inm += inmodel.measure_model(model, vs, key=dict(key, task="swap", stage="finetuned", step=n))

    def first(frac):
        if sw - bpc_sm <= MIN_GAP:
            return "no gap"
        for c in curve[1:]:
            g = _gap_closed(sw, c["val_bpc"], bpc_sm)
            if g != "" and g >= frac:
                return c["step"]
        return ""
    row = dict(key, base_steps=cfg["steps"], ft_steps=n, ft_lr=cfg["ft_lr"], bpc_softmax=bpc_sm,
               bpc_swapped=sw, bpc_finetuned=ft,
               gap_closed=_gap_closed(sw, ft, bpc_sm) if ft != "" and name != "softmax" else "",
               steps_to_half=first(0.5) if name != "softmax" else "",
               steps_to_90=first(0.9) if name != "softmax" else "", stop=stop, base=source,
               seconds=time.monotonic() - t0)
    return row, curve, inm


# The files a task's runs go to, which the merge of a job array concatenates (array.py). swap
# has no configs(): its maps all start from the same softmax models, so it is one array task.
DATA_FILES = ("swap_runs.csv", "swap_curve.csv", "inmodel.csv")


def run(opts, out_dir, progress_factory):
    cfg = config(opts)
    paths = {n: os.path.join(out_dir, "swap_%s.csv" % n) for n in ("runs", "curve")}
    ipath = os.path.join(out_dir, "inmodel.csv")
    runs, curves = [], []
    if opts.resume and os.path.exists(paths["runs"]):
        runs = report.read_csv(paths["runs"])
        curves = report.read_csv(paths["curve"]) if os.path.exists(paths["curve"]) else []
        if any(int(r["ft_steps"]) != cfg["ft_steps"] or int(r["base_steps"]) != cfg["steps"] for r in runs):
            sys.stderr.write("linattn.downstream: swap: %s holds runs of another budget; --resume "
                             "needs the same, or another --out-dir\n" % paths["runs"])
            raise SystemExit(2)
    inm = report.read_csv(ipath) if os.path.exists(ipath) else []
    if not opts.resume:
        inm = [r for r in inm if r["task"] != "swap"]
    done = {(r["attention"], int(r["seed"])) for r in runs}
    tr, va = charlm.data(cfg)
    vs = charlm.val_set(va, cfg)
    todo = [(a, s) for s in cfg["seeds"] for a in cfg["swap_attentions"] if (a, s) not in done]
    prog = progress_factory("swap", cfg["ft_steps"] * len(todo) or 1)
    bases = {}
    for a, s in todo:
        if s not in bases:
            model, source = softmax_model(cfg, s, tr, vs, out_dir, opts.threads)
            bases[s] = (model.state_dict(), charlm.bpc(model, vs), source)
        state, bpc_sm, source = bases[s]
        row, curve, rows = run_one(a, s, state, bpc_sm, source, cfg, tr, vs, opts.threads)
        runs.append(row)
        curves.extend(curve)
        inm = [r for r in inm if not (r["task"] == "swap" and (r["attention"], int(r["seed"])) == (a, s))] + rows
        prog.advance(cfg["ft_steps"])
        prog.update(note="%s seed %d: bpc softmax %.3f, swapped %.3f, fine-tuned %s (%s)" % (
            a, s, bpc_sm, row["bpc_swapped"], report.sci(row["bpc_finetuned"]) if row["bpc_finetuned"] != "" else "-",
            row["stop"]), force=True)
        report.write_csv(paths["runs"], RUN_COLS, runs)
        report.write_csv(paths["curve"], CURVE_COLS, curves)
        report.write_csv(ipath, inmodel.COLS, inm)
    return cfg


# ---- report ---------------------------------------------------------------------------------

_f = charlm._f
SUMMARY_COLS = ["attention", "seeds", "diverged", "bpc_softmax", "bpc_swapped", "std_swapped",
                "zero_shot_gap", "bpc_finetuned", "std_finetuned", "gap_closed", "std_gap_closed",
                "min_gap_closed", "max_gap_closed", "gap_left_vs_control", "steps_to_half",
                "steps_to_90", "ft_steps"]


def summarize(runs):
    by = {}
    for r in runs:
        by.setdefault(r["attention"], []).append(r)
    out = []
    control = {r["seed"]: _f(r["bpc_finetuned"]) for r in by.get("softmax", []) if r["stop"] == "done"}
    for a in charlm.order(by):
        rs = by[a]
        ok = [r for r in rs if r["stop"] == "done"]
        left = report.stats([(_f(r["bpc_finetuned"]) - control[r["seed"]]) / (_f(r["bpc_swapped"]) - _f(r["bpc_softmax"]))
                             for r in ok if r["seed"] in control and a != "softmax"
                             and _f(r["bpc_swapped"]) - _f(r["bpc_softmax"]) > MIN_GAP])
        sm, sw, ft, gc = (report.stats([_f(r[c]) for r in ok]) for c in
                          ("bpc_softmax", "bpc_swapped", "bpc_finetuned", "gap_closed"))

        def steps(col):
            v = [r[col] for r in ok]
            return ("/".join(x or "never" for x in v)) if a != "softmax" else ""
        out.append({"attention": a, "seeds": len(rs), "diverged": len(rs) - len(ok),
                    "bpc_softmax": sm["mean"], "bpc_swapped": sw["mean"], "std_swapped": sw["std"],
                    "zero_shot_gap": sw["mean"] - sm["mean"], "bpc_finetuned": ft["mean"],
                    "std_finetuned": ft["std"], "gap_closed": gc["mean"], "std_gap_closed": gc["std"],
                    "min_gap_closed": gc["min"], "max_gap_closed": gc["max"], "gap_left_vs_control": left["mean"],
                    "steps_to_half": steps("steps_to_half"), "steps_to_90": steps("steps_to_90"),
                    "ft_steps": rs[0]["ft_steps"]})
    return out


def write_report(out_dir, meta, p):
    runs = report.read_csv(os.path.join(out_dir, "swap_runs.csv"))
    curve = report.read_csv(os.path.join(out_dir, "swap_curve.csv"))
    summ = summarize(runs)
    report.write_csv(os.path.join(out_dir, "swap_summary.csv"), SUMMARY_COLS, report.blank_nan(summ))
    L = ["## Swapping the attention of the trained softmax model (issue 35 item 5)\n"]
    if meta.get("quick"):
        L.append("**QUICK RUN** (`--quick`): the softmax model has %d steps of training and the "
                 "fine-tune %d steps; its verdicts are about this subset only.\n" % (meta["steps"], meta["ft_steps"]))
    L.append("The softmax character LM of each seed (%s), evaluated with each map in place of "
             "softmax in every layer, same weights (hedgehog's W = I), then fine-tuned %d steps "
             "(AdamW, lr %g after a linear warm-up of %d steps, batch %d). gap_closed = (bpc_swapped - "
             "bpc_finetuned) / (bpc_swapped - bpc_softmax), mean +- sd over seeds; steps to 50 %% / "
             "90 %% of the gap per seed (checked every %d steps; `never` within the fine-tune). The "
             "softmax row is the control: the same fine-tune without a swap; \"gap left vs fine-tuned softmax\" = (bpc after "
             "fine-tune - the control's, same seed) / zero-shot gap, mean over seeds. Zero-shot gaps below %g bpc "
             "count as no gap.\n" % (
                 ", ".join(sorted({r["base"] for r in runs})) or "?", meta["ft_steps"], meta["ft_lr"],
                 max(meta["ft_steps"] // 10, 1), meta["batch"], meta["ft_eval_every"], MIN_GAP))
    rows = []
    for s in summ:
        rows.append([s["attention"], "%.3f" % s["bpc_softmax"],
                     "%.3f +- %.3f" % (s["bpc_swapped"], s["std_swapped"]),
                     "%.3f +- %.3f" % (s["bpc_finetuned"], s["std_finetuned"]),
                     "-" if s["attention"] == "softmax" else ("no gap" if s["gap_closed"] != s["gap_closed"] else "%.2f +- %.2f (%.2f .. %.2f)" % (
                         s["gap_closed"], s["std_gap_closed"], s["min_gap_closed"], s["max_gap_closed"])),
                     "-" if s["gap_left_vs_control"] != s["gap_left_vs_control"] else "%.2f" % s["gap_left_vs_control"],
                     s["steps_to_half"] or "-", s["steps_to_90"] or "-",
                     "%d%s" % (s["seeds"], (", %d diverged" % s["diverged"]) if s["diverged"] else "")])
    L.append(report.md_table(["attention", "bpc softmax", "bpc swapped (zero-shot)", "bpc after fine-tune",
                              "gap closed", "gap left vs fine-tuned softmax", "steps to 50 %", "steps to 90 %", "seeds"], rows) + "\n")
    bad = [r for r in runs if r["stop"] != "done"]
    if bad:
        L.append("**Diverged fine-tunes**: %s.\n" % "; ".join(
            "%s seed %s: %s" % (r["attention"], r["seed"], r["stop"]) for r in bad))
    by = {}
    for c in curve:
        by.setdefault(c["attention"], {}).setdefault(int(c["step"]), []).append(_f(c["val_bpc"]))
    series = []
    for i, a in enumerate(charlm.order(by)):
        pts = []
        for step, v in sorted(by[a].items()):
            st = report.stats(v)
            if st["n"]:
                pts.append((step, st["mean"], st["min"], st["max"]))
        series.append({"title": a, "pts": pts, "color": i + 1, "dashed": a == "softmax"})
    p.figure("swap_bpc.png", "Swap: the softmax model with each map, fine-tuned",
             [{"title": "mean over seeds, bars min..max (step 0 = zero-shot)", "xlabel": "fine-tune step",
               "ylabel": "validation bpc", "series": series}])
    if "swap_bpc.png" in p.files:
        L.append("![swap](swap_bpc.png)\n")
    return "\n".join(L), summ


def estimate(opts, out_dir, charlm_rows):
    """The swap task's cost from charlm's timing: fine-tune steps x maps x seeds, plus the
    evaluations, plus the softmax models when charlm does not train them."""
    cfg = config(opts)
    if not opts.quick:
        cfg.update(FT_FULL)
    per = {r["attention"]: r for r in charlm_rows}
    total = 0.0
    for a in cfg["swap_attentions"]:
        r = per.get(a)
        if r is None:
            continue
        evals = cfg["ft_steps"] // cfg["ft_eval_every"] + 2
        total += (r["seconds_per_step"] * cfg["ft_steps"] + evals * r["seconds_per_eval"]) * len(cfg["seeds"])
    if "charlm" not in opts.tasks and "softmax" in per:     # swap trains its softmax models itself
        total += per["softmax"]["seconds_estimated"]
    return total
