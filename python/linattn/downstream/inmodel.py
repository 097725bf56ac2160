"""The operator measured inside the trained models (issue 35 item 6; docs/downstream.md).

For a trained model, `measure_model` runs N_WINDOWS validation windows through it, catches the
inputs q, k, v of every layer's attention module (a forward hook), and measures, per layer, in
float64, the layer's own attention (the map the model was trained or fine-tuned with) against
the engine's exact softmax (linattn.torch.softmax_attention, causal, scale 1/sqrt(dk)) on the
same q, k, v:

- den_min, den_median, den_frac_small, den_count_nonpositive: the denominator statistics of
  the map's forward call (linattn.last_stats(); small = below 1e-6 x the median, eval's rule);
- out_rel_err = ||out - out_softmax||_F / ||out_softmax||_F;
- grad_{q,k,v}_rel_err and grad_rel_err (q, k, v together): the same for the gradients of
  sum(out * G), G a fixed N(0, 1) cotangent (seed 7), eval's gradient measure.

`untrained` gives the same measures of the untrained operator on N(0, 1) data: `linattn eval`
(the C program, when built) at the model's n = context, heads, dk = dv, causal, seeds 0..2,
and our own N(0, 1) run of the same measures (the only one for hedgehog, at W = I).
A decayed or gated attention (MAP@G, MAP@retnet, MAP@gates) is measured, like every other,
against plain causal softmax on the same q, k, v: the distance of what the layer computes from
softmax attention, decay included. `linattn eval` measures a map against softmax with the same
decay, another question, so it gives no row for them here.
`spearman` is the rank correlation with its exact permutation p-value (n <= 8).
"""
import itertools
import math
import os
import subprocess
import tempfile

import numpy as np
import torch

import linattn
import linattn.torch as lt

from . import attentions, report

N_WINDOWS = 2
COLS = ["task", "stage", "attention", "seed", "step", "layer", "tokens", "den_min", "den_median",
        "den_frac_small", "den_count_nonpositive", "out_rel_err", "grad_q_rel_err",
        "grad_k_rel_err", "grad_v_rel_err", "grad_rel_err"]
UNTRAINED_COLS = ["attention", "source", "n", "heads", "dk", "seeds", "out_rel_err", "grad_rel_err",
                  "den_min", "den_frac_small"]


def _rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def measure(module, q, k, v, G):
    """The measures of one attention module on q, k, v [B, L, H, dk] (float64); None for softmax."""
    if isinstance(module, attentions.SoftmaxAttention):
        return None
    xs = [t.detach().double().clone().requires_grad_() for t in (q, k, v)]
    out = module(*xs)
    st = linattn.last_stats()
    gm = torch.autograd.grad((out * G).sum(), xs)
    ys = [t.detach().clone().requires_grad_() for t in xs]
    ref = lt.softmax_attention(*ys, mode="causal")
    gs = torch.autograd.grad((ref * G).sum(), ys)
    rows = st.get("rows") or 0
    return {"tokens": q.shape[0] * q.shape[1], "den_min": st.get("min", float("nan")),
            "den_median": st.get("median", float("nan")),
            "den_frac_small": (st.get("count_small", 0) / rows) if rows else float("nan"),
            "den_count_nonpositive": st.get("count_nonpositive", ""),
            "out_rel_err": _rel(out.detach(), ref.detach()),
            "grad_q_rel_err": _rel(gm[0], gs[0]), "grad_k_rel_err": _rel(gm[1], gs[1]),
            "grad_v_rel_err": _rel(gm[2], gs[2]),
            "grad_rel_err": _rel(torch.cat([g.flatten() for g in gm]), torch.cat([g.flatten() for g in gs]))}


def capture(model, x):
    """The (q, k, v) each layer's attention module receives on the input ids x."""
    acts = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: acts.append(tuple(t.detach().clone() for t in inp)))
             for m in model.attention_modules()]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return acts


def measure_model(model, vs, *, key):
    """Rows of COLS, one per layer (none for a softmax model)."""
    mods = model.attention_modules()
    if isinstance(mods[0], attentions.SoftmaxAttention):
        return []
    acts = capture(model, vs[0][:N_WINDOWS])
    g = torch.Generator().manual_seed(7)
    rows = []
    for i, (mod, (q, k, v)) in enumerate(zip(mods, acts)):
        G = torch.randn(v.shape, generator=g, dtype=torch.float64)
        try:
            m = measure(mod, q, k, v, G)
        except linattn.Error as e:
            m = {"out_rel_err": "", "den_count_nonpositive": "error: %s" % e}
        rows.append(dict(key, layer=i, **m))
    return report.blank_nan(rows)


# ---- the untrained operator -------------------------------------------------------------------

def _cli():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    p = os.environ.get("LINATTN_CLI") or os.path.join(root, "build", "linattn")
    return p if os.path.exists(p) else None


def untrained(names, *, n, heads, dk, threads, seeds=3):
    """Rows of UNTRAINED_COLS for every non-softmax name: source 'linattn eval' (the engine maps,
    when the program is built) and 'python N(0,1)' (every map, hedgehog at W = I)."""
    rows = []
    for name in names:
        base, arg = attentions.parse(name)
        if base == "softmax":
            continue
        outs, grads, dmin, dsmall = [], [], [], []
        for s in range(seeds):
            g = torch.Generator().manual_seed(1000 + s)
            q, k, v, G = (torch.randn(1, n, heads, dk, generator=g, dtype=torch.float64) for _ in range(4))
            mod = attentions.build(name, heads=heads, dk=dk, mode="causal", seed=s, threads=threads,
                                   denominator="add:1e-6")
            m = measure(mod, q, k, v, G)
            outs.append(m["out_rel_err"])
            grads.append(m["grad_rel_err"])
            dmin.append(m["den_min"])
            dsmall.append(m["den_frac_small"])
        rows.append({"attention": name, "source": "python N(0,1)", "n": n, "heads": heads, "dk": dk,
                     "seeds": seeds, "out_rel_err": sum(outs) / seeds, "grad_rel_err": sum(grads) / seeds,
                     "den_min": min(dmin), "den_frac_small": max(dsmall)})
        cli = _cli()
        if cli is None or base == "hedgehog" or attentions.split_decay(name)[1] is not None:
            continue  # eval's reference for a decayed map is decayed softmax (see the top)
        with tempfile.TemporaryDirectory() as d:
            cmd = [cli, "eval", "--out-dir", os.path.join(d, "e"), "--n", str(n), "--heads", str(heads),
                   "--dk", str(dk), "--dv", str(dk), "--modes", "causal", "--feature-maps", base,
                   "--seeds", str(seeds), "--threads", str(threads)]
            if arg is not None:
                cmd += ["--features", str(arg)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            path = os.path.join(d, "e", "results.csv")
            if r.returncode != 0 or not os.path.exists(path):
                report.warn("linattn eval for %s failed (%d): %s" % (name, r.returncode, r.stderr.strip()[-300:]))
                continue
            res = [x for x in report.read_csv(path) if x["feature_map"] == base
                   and (arg is None or int(x["features"]) == arg)]
            if not res:
                continue
            f = lambda c: [float(x[c]) for x in res]
            gq, gk, gv = f("grad_q_rel_err"), f("grad_k_rel_err"), f("grad_v_rel_err")
            rows.append({"attention": name, "source": "linattn eval", "n": n, "heads": heads, "dk": dk,
                         "seeds": len(res), "out_rel_err": sum(f("out_rel_err")) / len(res),
                         "grad_rel_err": sum((a + b + c) / 3 for a, b, c in zip(gq, gk, gv)) / len(res),
                         "den_min": min(f("den_min")), "den_frac_small": max(f("den_frac_small"))})
    return rows


# ---- rank correlation -------------------------------------------------------------------------

def ranks(x):
    """Ranks 1..n, ties given their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        m = x == v
        r[m] = r[m].mean()
    return r


def spearman(x, y):
    """(rho, p) over the pairs: rho = Pearson correlation of the ranks; p = the two-sided exact
    permutation p-value P(|rho_perm| >= |rho|) for n <= 8, else from 20000 random permutations
    (fixed seed). (nan, nan) for n < 3 or constant ranks."""
    rx, ry = ranks(x), ranks(y)
    n = len(rx)
    if n < 3 or rx.std() == 0 or ry.std() == 0:
        return float("nan"), float("nan")
    rho = float(np.corrcoef(rx, ry)[0, 1])
    if n <= 8:
        perms = np.array(list(itertools.permutations(ry)))
    else:
        rng = np.random.default_rng(0)
        perms = np.array([rng.permutation(ry) for _ in range(20000)])
    pr = ((perms - perms.mean(1, keepdims=True)) @ (rx - rx.mean())) / (
        n * perms.std(1) * rx.std())
    return rho, float(np.mean(np.abs(pr) >= abs(rho) - 1e-12))


# ---- report -----------------------------------------------------------------------------------

def _f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def write_report(out_dir, meta, p, charlm_summary, swap_summary):
    """The item 6 section: the operator inside the models, and whether eval's untrained error
    predicts the trained quality (rank correlations)."""
    from .charlm import order
    path = os.path.join(out_dir, "inmodel.csv")
    rows = report.read_csv(path) if os.path.exists(path) else []
    L = ["## The operator inside the trained models (issue 35 item 6)\n"]
    if not rows:
        L.append("No measurements (inmodel.csv is missing or empty).\n")
        return "\n".join(L)
    L.append("Per layer, on %d validation windows, in float64: the map the layer runs against the "
             "engine's exact softmax on the same q, k, v (inmodel.csv; one row per task, stage, "
             "attention, seed and layer). The table gives, over seeds and layers, the mean output "
             "and gradient error, the smallest denominator and the largest share of small ones "
             "(below 1e-6 x median).\n" % N_WINDOWS)
    groups = {}
    for r in rows:
        groups.setdefault((r["task"], r["stage"], r["attention"]), []).append(r)
    tab = []
    stage_order = {"trained": 0, "zero-shot": 1, "finetuned": 2}
    allnames = order(list({k[2] for k in groups}))
    for (task, stage, a) in sorted(groups, key=lambda k: (k[0], stage_order.get(k[1], 9), allnames.index(k[2]))):
        g = groups[(task, stage, a)]
        oe = report.stats([_f(r["out_rel_err"]) for r in g])
        ge = report.stats([_f(r["grad_rel_err"]) for r in g])
        dm = report.stats([_f(r["den_min"]) for r in g])
        fs = report.stats([_f(r["den_frac_small"]) for r in g])
        per_layer = {}
        for r in g:
            per_layer.setdefault(int(r["layer"]), []).append(_f(r["out_rel_err"]))
        tab.append([task, stage, a, "%d x %d" % (len({r["seed"] for r in g}), len(per_layer)),
                    report.sci(oe["mean"]), " / ".join(report.sci(report.stats(v)["mean"]) for _, v in sorted(per_layer.items())),
                    report.sci(ge["mean"]), report.sci(dm["min"]), report.sci(fs["max"])])
    L.append(report.md_table(["task", "stage", "attention", "seeds x layers", "out rel. err",
                              "out rel. err by layer", "grad rel. err", "smallest den", "max share small"],
                             tab) + "\n")
    # untrained
    names = [s["attention"] for s in charlm_summary] + [s["attention"] for s in swap_summary]
    names = order(list(dict.fromkeys(n for n in names if n != "softmax")))
    upath = os.path.join(out_dir, "inmodel_untrained.csv")
    if meta.get("remake_untrained", True) or not os.path.exists(upath):
        m = meta["model"]
        un = untrained(names, n=m["context"], heads=m["heads"], dk=m["d"] // m["heads"], threads=meta["threads"])
        report.write_csv(upath, UNTRAINED_COLS, report.blank_nan(un))
    un = report.read_csv(upath)
    ev = {r["attention"]: _f(r["out_rel_err"]) for r in un if r["source"] == "linattn eval"}
    py = {r["attention"]: _f(r["out_rel_err"]) for r in un if r["source"] == "python N(0,1)"}
    gap = {s["attention"]: s["gap_vs_softmax"] for s in charlm_summary if s["attention"] != "softmax"}
    zs = {s["attention"]: s["zero_shot_gap"] for s in swap_summary}
    ins = {}
    for r in rows:
        if r["task"] == "charlm":
            ins.setdefault(r["attention"], []).append(_f(r["out_rel_err"]))
    L.append("The untrained operator on N(0, 1) q, k, v at the model's shape (n = %d, %d heads, dk = dv "
             "= %d, causal; inmodel_untrained.csv): `linattn eval`'s output error (mean over its "
             "seeds 0..2) and our own measurement of the same quantity (which also covers hedgehog, "
             "at W = I). Beside them, the trained quality: the charlm validation bpc gap to softmax "
             "(mean over seeds) and the swap task's zero-shot gap (the softmax model with the map "
             "put in, no training).%s\n" % (meta["model"]["context"], meta["model"]["heads"],
                                             meta["model"]["d"] // meta["model"]["heads"],
                                             " Decayed and gated attentions (MAP@...) are measured "
             "against plain causal softmax, decay included, as the layers compute them; `linattn "
             "eval` measures a map against softmax with the same decay, another question, so its "
             "column is empty for them." if any("@" in n for n in ins) else ""))
    tab = []
    for a in names:
        tab.append([a, report.sci(ev.get(a)), report.sci(py.get(a)),
                    report.sci(report.stats(ins[a])["mean"]) if a in ins else "-",
                    ("%+.3f" % gap[a]) if a in gap and math.isfinite(gap[a]) else "-",
                    ("%+.3f" % zs[a]) if a in zs and math.isfinite(zs[a]) else "-"])
    L.append(report.md_table(["attention", "eval out err (untrained)", "python N(0,1) out err",
                              "out err in the trained charlm", "charlm bpc gap", "swap zero-shot gap"], tab) + "\n")
    corr = []

    def add(what, xs, ys):
        keys = [a for a in names if a in xs and a in ys and math.isfinite(xs[a]) and math.isfinite(ys[a])]
        rho, pv = spearman([xs[a] for a in keys], [ys[a] for a in keys])
        corr.append({"x": what[0], "y": what[1], "maps": len(keys), "spearman": rho, "p_permutation": pv,
                     "attentions": " ".join(keys)})
    add(("eval untrained out_rel_err", "charlm bpc gap"), ev, gap)
    add(("eval untrained out_rel_err", "swap zero-shot bpc gap"), ev, zs)
    add(("python N(0,1) out_rel_err (incl. hedgehog)", "charlm bpc gap"), py, gap)
    add(("in-model out_rel_err (trained charlm)", "charlm bpc gap"),
        {a: report.stats(v)["mean"] for a, v in ins.items()}, gap)
    report.write_csv(os.path.join(out_dir, "inmodel_correlation.csv"),
                     ["x", "y", "maps", "spearman", "p_permutation", "attentions"], report.blank_nan(corr))
    L.append("Rank correlations (Spearman, over the maps; inmodel_correlation.csv). p is the "
             "two-sided permutation p-value of the ranks (exact up to 8 maps):\n")
    L.append(report.md_table(["x", "y", "maps", "Spearman rho", "p"],
                             [[c["x"], c["y"], c["maps"], report.sci(c["spearman"]),
                               report.sci(c["p_permutation"])] for c in corr]) + "\n")
    main = corr[0]
    L.append("**Does eval's untrained error predict the trained quality?** On this run: rho = %s over "
             "%d maps (p = %s). %s\n" % (
                 report.sci(main["spearman"]), main["maps"], report.sci(main["p_permutation"]),
                 "With %d maps, no rank correlation can be told from chance (even rho = 1 has p = %s); "
                 "this run does not answer the question." % (main["maps"], report.sci(2 / math.factorial(main["maps"])) if main["maps"] >= 1 else "n/a")
                 if main["maps"] < 5 else
                 "With %d maps a rank correlation is weak evidence: one map moving two places changes "
                 "rho by about %.2f; read it as a tendency, not a law." % (
                     main["maps"], 6 * 2 * 2 / (main["maps"] * (main["maps"] ** 2 - 1)) if main["maps"] > 1 else 0)))
    return "\n".join(L)
