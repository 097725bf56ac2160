"""A character-level language model on GCIDE (issue 35 item 4; docs/downstream.md "Character
language model").

The text is text.py's (GCIDE stripped of its markup, 96 symbols, 90/5/5 by blocks), the model
gpt.py's (nanoGPT's CPU "baby": 4 layers, 4 heads, d = 128, context 256) with each attention of
attentions.py in every layer. Training as nanoGPT's train.py: random windows of the training
split, AdamW (betas 0.9, 0.99, weight decay 0.1), linear warm-up then a cosine to lr/10,
gradient clipping at 1. The validation bits per character are measured on a fixed set of
validation windows (the same for every attention and seed) at regular steps (the learning
curve) and at the end. After training, inmodel.py measures the operator inside the model
(item 6). The softmax model of each seed is saved under DIR/checkpoints/ for the swap task.
"""
import math
import os
import sys
import time

import numpy as np
import torch

import linattn

from . import attentions, gpt, inmodel, report, text

LN2 = math.log(2.0)
ATTN_FULL = ("softmax", "elu1", "relu", "favor+:16", "favor+:64", "favor+:256",
             "favor+orf:16", "favor+orf:64", "favor+orf:256", "favor-hyp:64", "taylor2",
             "dpfp:1", "hedgehog")
ATTN_QUICK = ("softmax", "elu1", "favor+:64", "hedgehog")
MODEL = {"layers": 4, "heads": 4, "d": 128, "context": 256}
# nanoGPT's shakespeare_char / CPU settings: lr 1e-3, warm-up 100, min lr = lr / 10, batch 12.
FULL = {"steps": 2000, "batch": 12, "lr": 1e-3, "warmup": 100, "eval_every": 100, "val_windows": 128}
QUICK = {"steps": 80, "batch": 8, "lr": 2e-3, "warmup": 8, "eval_every": 20, "val_windows": 16}
BETAS = (0.9, 0.99)
WEIGHT_DECAY = 0.1
CLIP = 1.0

RUN_COLS = ["attention", "seed", "steps", "steps_done", "batch", "context", "lr", "layers", "heads",
            "d", "features", "params", "train_bpc_first", "train_bpc_last", "val_bpc", "stop",
            "seconds", "seconds_per_step", "tokens_per_second", "threads"]
CURVE_COLS = ["attention", "seed", "step", "train_bpc", "val_bpc"]


def config(opts):
    c = dict(QUICK if opts.quick else FULL)
    if opts.max_steps:
        c["steps"] = opts.max_steps
        c["eval_every"] = max(1, min(c["eval_every"], opts.max_steps // 4 or 1))
        c["warmup"] = min(c["warmup"], max(opts.max_steps // 10, 1))
    if getattr(opts, "lm_batch", None):
        c["batch"] = opts.lm_batch
    if getattr(opts, "val_windows", None):
        c["val_windows"] = opts.val_windows
    c["model"] = dict(MODEL, **(getattr(opts, "lm_model", None) or {}))
    c["attentions"] = list(opts.attentions or (ATTN_QUICK if opts.quick else ATTN_FULL))
    c["seeds"] = list(range(1, opts.seeds + 1))
    c["text_limit"] = getattr(opts, "text_limit", None)
    return c


# ---- data -----------------------------------------------------------------------------------

def data(cfg):
    """(train, validation) uint8 id arrays."""
    tr, va, _ = text.split(text.load(text.DICT, cfg["text_limit"]))
    return tr, va


def windows(ids, rng, n, context):
    """n windows (x, y) of `context` ids, y = x shifted by one, at random offsets."""
    off = rng.integers(0, len(ids) - context - 1, size=n)
    idx = off[:, None] + np.arange(context + 1)[None, :]
    w = torch.from_numpy(ids[idx].astype(np.int64))
    return w[:, :-1], w[:, 1:]


def val_set(va, cfg):
    """The fixed validation windows: the same for every attention, seed and task."""
    return windows(va, np.random.default_rng(20260), cfg["val_windows"], cfg["model"]["context"])


def bpc(model, vs, batch=16):
    """Bits per character of `model` on the validation windows vs (no gradient)."""
    x, y = vs
    tot = 0.0
    with torch.no_grad():
        for a in range(0, len(x), batch):
            logits = model(x[a:a + batch])
            tot += torch.nn.functional.cross_entropy(logits.flatten(0, 1), y[a:a + batch].flatten(),
                                                     reduction="sum").item()
    return tot / (y.numel() * LN2)


def lr_at(step, cfg):
    """nanoGPT's get_lr: linear warm-up, then a cosine from lr to lr/10 at the last step."""
    lr, warm, total = cfg["lr"], cfg["warmup"], cfg["steps"]
    if step < warm:
        return lr * (step + 1) / (warm + 1)
    r = min(1.0, (step - warm) / max(total - warm, 1))
    return lr / 10 + 0.5 * (1 + math.cos(math.pi * r)) * (lr - lr / 10)


def build_model(name, cfg, seed, threads):
    m = cfg["model"]
    return gpt.build(name, vocab=text.VOCAB, layers=m["layers"], heads=m["heads"], d=m["d"],
                     context=m["context"], seed=seed, threads=threads)


def train(model, tr, vs, cfg, *, seed, steps, lr_fn, eval_every, key, prog=None, weight=0.0,
          note=""):
    """Train `steps` steps on random windows of tr; the validation bpc every eval_every steps and
    at the end (step 0 included). Returns (curve rows, train losses in bpc, stop, train seconds).
    stop is "done" or "diverged: ..." (a non-finite loss, or the engine's error)."""
    rng = np.random.default_rng([seed, 5])
    opt = torch.optim.AdamW(model.parameters(), lr=lr_fn(0), betas=BETAS, weight_decay=WEIGHT_DECAY)
    curve, losses, since = [], [], []
    stop, t_train = "done", 0.0
    try:
        curve.append(dict(key, step=0, train_bpc="", val_bpc=bpc(model, vs)))
        for step in range(steps):
            x, y = windows(tr, rng, cfg["batch"], cfg["model"]["context"])
            for g in opt.param_groups:
                g["lr"] = lr_fn(step)
            t = time.monotonic()
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            if not math.isfinite(loss.item()):
                stop = "diverged: non-finite training loss at step %d" % (step + 1)
                break
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            t_train += time.monotonic() - t
            losses.append(loss.item() / LN2)
            since.append(losses[-1])
            if (step + 1) % eval_every == 0 or step + 1 == steps:
                v = bpc(model, vs)
                if not math.isfinite(v):
                    stop = "diverged: non-finite validation loss at step %d" % (step + 1)
                    break
                curve.append(dict(key, step=step + 1, train_bpc=sum(since) / len(since), val_bpc=v))
                since = []
                if prog is not None:
                    prog.update(partial=weight * (step + 1) / steps,
                                note="%s step %d/%d val bpc %.3f" % (note, step + 1, steps, v))
    except linattn.Error as e:
        stop = "diverged: engine error: %s" % e
    return curve, losses, stop, t_train


def run_one(name, seed, cfg, tr, vs, *, threads, out_dir, prog=None):
    """Train one (attention, seed). Returns (run row, curve rows, inmodel rows)."""
    t0 = time.monotonic()
    model = build_model(name, cfg, seed, threads)
    key = {"attention": name, "seed": seed}
    curve, losses, stop, t_train = train(
        model, tr, vs, cfg, seed=seed, steps=cfg["steps"], lr_fn=lambda s: lr_at(s, cfg),
        eval_every=cfg["eval_every"], key=key, prog=prog, weight=cfg["steps"],
        note="%s seed %d" % (name, seed))
    m = cfg["model"]
    k = min(10, len(losses))
    done = stop == "done"
    row = dict(key, steps=cfg["steps"], steps_done=len(losses), batch=cfg["batch"],
               context=m["context"], lr=cfg["lr"], layers=m["layers"], heads=m["heads"], d=m["d"],
               features=attentions.width(name, m["d"] // m["heads"]) or "",
               params=sum(p.numel() for p in model.parameters()),
               train_bpc_first=sum(losses[:k]) / k if k else "",
               train_bpc_last=sum(losses[-k:]) / k if k else "",
               val_bpc=curve[-1]["val_bpc"] if done else "", stop=stop,
               seconds=time.monotonic() - t0,
               seconds_per_step=t_train / max(len(losses), 1),
               tokens_per_second=(len(losses) * cfg["batch"] * m["context"] / t_train) if t_train else "",
               threads=threads)
    rows = []
    if done:
        if name == "softmax":
            save_checkpoint(model, out_dir, seed, cfg)
        rows = inmodel.measure_model(model, vs, key=dict(key, task="charlm", stage="trained", step=len(losses)))
    return row, curve, rows


def checkpoint_path(out_dir, seed):
    return os.path.join(out_dir, "checkpoints", "charlm_softmax_seed%d.pt" % seed)


def save_checkpoint(model, out_dir, seed, cfg):
    p = checkpoint_path(out_dir, seed)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    tmp = "%s.tmp.%d" % (p, os.getpid())
    torch.save({"model": model.state_dict(), "cfg": {k: cfg[k] for k in ("steps", "batch", "lr", "model", "text_limit")}}, tmp)
    os.replace(tmp, p)


def _key(r):
    return (r["attention"], int(r["seed"]))


# The files a task's runs go to, which the merge of a job array concatenates (array.py);
# inmodel.csv holds the charlm rows here and the swap rows in swap's tasks.
DATA_FILES = ("charlm_runs.csv", "charlm_curve.csv", "inmodel.csv")


def configs(opts):
    """One configuration per attention, each with all its seeds (a Slurm array task; array.py)."""
    return [{"attentions": [a]} for a in config(opts)["attentions"]]


def run(opts, out_dir, progress_factory):
    cfg = config(opts)
    paths = {n: os.path.join(out_dir, "charlm_%s.csv" % n) for n in ("runs", "curve")}
    ipath = os.path.join(out_dir, "inmodel.csv")
    runs, curves, inm = [], [], []
    if opts.resume and os.path.exists(paths["runs"]):
        runs = report.read_csv(paths["runs"])
        curves = report.read_csv(paths["curve"]) if os.path.exists(paths["curve"]) else []
        bad = [r for r in runs if int(r["steps"]) != cfg["steps"] or int(r["batch"]) != cfg["batch"]]
        if bad:
            sys.stderr.write("linattn.downstream: charlm: %s holds runs of another step budget or "
                             "batch (--quick or not?); --resume needs the same, or another --out-dir\n"
                             % paths["runs"])
            raise SystemExit(2)
    if os.path.exists(ipath) and opts.resume:
        inm = report.read_csv(ipath)
    else:
        inm = [r for r in (report.read_csv(ipath) if os.path.exists(ipath) else []) if r["task"] != "charlm"]
    done = {_key(r) for r in runs}
    todo = [(a, s) for a in cfg["attentions"] for s in cfg["seeds"] if (a, s) not in done]
    tr, va = data(cfg)
    vs = val_set(va, cfg)
    prog = progress_factory("charlm", cfg["steps"] * len(todo) or 1)
    for a, s in todo:
        row, curve, rows = run_one(a, s, cfg, tr, vs, threads=opts.threads, out_dir=out_dir, prog=prog)
        runs.append(row)
        curves.extend(curve)
        inm = [r for r in inm if not (r["task"] == "charlm" and (r["attention"], int(r["seed"])) == (a, s))] + rows
        prog.advance(cfg["steps"])
        prog.update(note="%s seed %d: %s, val bpc %s, %.0f s" % (
            a, s, row["stop"], report.sci(row["val_bpc"]) if row["val_bpc"] != "" else "-",
            row["seconds"]), force=True)
        report.write_csv(paths["runs"], RUN_COLS, runs)
        report.write_csv(paths["curve"], CURVE_COLS, curves)
        report.write_csv(ipath, inmodel.COLS, inm)
    return cfg


# ---- report ---------------------------------------------------------------------------------

def _f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def order(names):
    o = {a: i for i, a in enumerate(ATTN_FULL)}
    return sorted(names, key=lambda a: (o.get(a, 99), a))


SUMMARY_COLS = ["attention", "seeds", "diverged", "mean_bpc", "std_bpc", "min_bpc", "max_bpc",
                "gap_vs_softmax", "steps"]


def summarize(runs):
    by = {}
    for r in runs:
        by.setdefault(r["attention"], []).append(r)
    out = []
    sm = None
    for a in order(by):
        rs = by[a]
        st = report.stats([_f(r["val_bpc"]) for r in rs if r["stop"] == "done"])
        s = {"attention": a, "seeds": len(rs), "diverged": sum(r["stop"] != "done" for r in rs),
             "mean_bpc": st["mean"], "std_bpc": st["std"], "min_bpc": st["min"], "max_bpc": st["max"],
             "steps": rs[0]["steps"]}
        if a == "softmax":
            sm = st["mean"]
        out.append(s)
    for s in out:
        s["gap_vs_softmax"] = s["mean_bpc"] - sm if sm is not None else float("nan")
    return out


def write_report(out_dir, meta, p):
    runs = report.read_csv(os.path.join(out_dir, "charlm_runs.csv"))
    curve = report.read_csv(os.path.join(out_dir, "charlm_curve.csv"))
    summ = summarize(runs)
    report.write_csv(os.path.join(out_dir, "charlm_summary.csv"), SUMMARY_COLS, report.blank_nan(summ))
    m = meta["model"]
    L = ["## Character language model on GCIDE (issue 35 item 4)\n"]
    if meta.get("quick"):
        L.append("**QUICK RUN** (`--quick`): %d steps of batch %d, a few attentions; the models are "
                 "far from trained, so the bpc below compare attentions early in training only.\n"
                 % (meta["steps"], meta["batch"]))
    L.append("Text: GCIDE (dict-gcide) stripped of its markup, 96 symbols (newline and printable "
             "ASCII), split 90/5/5 by blocks (text.py)%s. Model: GPT, %d layers, %d heads, d = %d, "
             "context %d, pre-LN, GELU MLP, learned positions, tied embeddings (gpt.py). AdamW "
             "(0.9, 0.99, weight decay %g), lr %g with %d warm-up steps and a cosine to lr/10, "
             "clip %g, %d steps of batch %d. Feature maps normalized, denominator `%s`. Validation "
             "bits per character on %d fixed windows of %d characters (the same for every run).\n" % (
                 " (the first %d bytes of the dictionary only)" % meta["text_limit"] if meta.get("text_limit") else "",
                 m["layers"], m["heads"], m["d"], m["context"], WEIGHT_DECAY, meta["lr"], meta["warmup"],
                 CLIP, meta["steps"], meta["batch"], gpt.DENOMINATOR, meta["val_windows"], m["context"]))
    rows = []
    for s in summ:
        rows.append([s["attention"], "%.3f +- %.3f" % (s["mean_bpc"], s["std_bpc"]),
                     "%.3f .. %.3f" % (s["min_bpc"], s["max_bpc"]),
                     "%+.3f" % s["gap_vs_softmax"], "%d%s" % (s["seeds"], (", %d diverged" % s["diverged"]) if s["diverged"] else "")])
    L.append(report.md_table(["attention", "val bpc mean +- sd", "min .. max", "gap vs softmax (mean)",
                              "seeds"], rows) + "\n")
    tps = {}
    for r in runs:
        if _f(r["tokens_per_second"]) == _f(r["tokens_per_second"]):
            tps.setdefault(r["attention"], []).append(_f(r["tokens_per_second"]))
    L.append("Training speed, tokens per second (median over seeds, %s thread%s): %s.\n" % (
        runs[0]["threads"] if runs else "?", "" if runs and runs[0]["threads"] == "1" else "s",
        ", ".join("%s %.0f" % (a, report.stats(v)["median"]) for a, v in ((a, tps[a]) for a in order(tps)))))
    bad = [r for r in runs if r["stop"] != "done"]
    if bad:
        L.append("**Diverged runs** (no bpc; kept in charlm_runs.csv): %s.\n" % "; ".join(
            "%s seed %s: %s" % (r["attention"], r["seed"], r["stop"]) for r in bad))
    # learning curves: mean over seeds per (attention, step), bars min..max
    by = {}
    for c in curve:
        by.setdefault(c["attention"], {}).setdefault(int(c["step"]), []).append(_f(c["val_bpc"]))
    series = []
    for i, a in enumerate(order(by)):
        pts = []
        for step, v in sorted(by[a].items()):
            st = report.stats(v)
            if st["n"] and step > 0:     # step 0 (about log2(96) = 6.6 bpc) would hide the rest
                pts.append((step, st["mean"], st["min"], st["max"]))
        series.append({"title": a, "pts": pts, "color": i + 1, "dashed": a == "softmax"})
    p.figure("charlm_bpc.png", "Character LM on GCIDE: validation bits per character",
             [{"title": "mean over seeds, bars min..max (step 0, untrained, left out)", "xlabel": "training step",
               "ylabel": "validation bpc", "series": series}])
    if "charlm_bpc.png" in p.files:
        L.append("![charlm](charlm_bpc.png)\n")
    return "\n".join(L)


# ---- the cost of the full task (--estimate) ---------------------------------------------------

def estimate(opts, out_dir):
    """Time 3 training steps (the faster 2) and one validation pass of every attention at the
    full configuration; extrapolate to the step budget x seeds. Returns (rows, total seconds)."""
    cfg = dict(config(opts))
    if not opts.quick:
        cfg.update({k: v for k, v in FULL.items() if not (k == "steps" and opts.max_steps)})
    tr, va = data(cfg)
    vs = val_set(va, cfg)
    rows, total = [], 0.0
    for a in cfg["attentions"]:
        model = build_model(a, cfg, 1, opts.threads)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        rng = np.random.default_rng(0)
        ts = []
        for i in range(3):
            x, y = windows(tr, rng, cfg["batch"], cfg["model"]["context"])
            t = time.monotonic()
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
            ts.append(time.monotonic() - t)
        t = time.monotonic()
        bpc(model, vs)
        t_val = time.monotonic() - t
        step_s = min(ts[1:])
        evals = cfg["steps"] // cfg["eval_every"] + 2
        run_s = step_s * cfg["steps"] + evals * t_val
        sec = run_s * len(cfg["seeds"])
        total += sec
        rows.append({"attention": a, "steps": cfg["steps"], "batch": cfg["batch"],
                     "seconds_per_step": step_s,
                     "tokens_per_second": cfg["batch"] * cfg["model"]["context"] / step_s,
                     "seconds_per_eval": t_val, "evals": evals, "seconds_per_run": run_s,
                     "seeds": len(cfg["seeds"]), "seconds_estimated": sec, "threads": opts.threads})
        report.write_csv(os.path.join(out_dir, "charlm_time.csv"), list(rows[0]), rows)
        sys.stderr.write("linattn.downstream: timing charlm %-14s %.3f s/step (%.0f tokens/s), "
                         "%.2f s/eval -> %.2f h a run, %.2f h for %d seeds\n" % (
                             a, step_s, rows[-1]["tokens_per_second"], t_val, run_s / 3600,
                             sec / 3600, len(cfg["seeds"])))
    return rows, total
