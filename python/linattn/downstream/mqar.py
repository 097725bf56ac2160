"""Multi-query associative recall (Zoology, Arora et al. 2023; docs/downstream.md "MQAR").

Our own implementation of their setting (HazyResearch/zoology: zoology/data/multiquery_ar.py,
zoology/model.py, zoology/mixers/base_conv.py, attention.py, hybrid.py, and the MQAR configs
experiments/mqar_example_configs/original_mqar_configs.py):

- Data (`make_examples`): a sequence of L tokens starts with P key-value pairs k1 v1 k2 v2 ...;
  keys are distinct ids from 1..V/2-1, values distinct ids from V/2..V-1. After the pairs, the
  P keys are asked again, each at an even offset 2g of the remaining L - 2P tokens; the gaps g
  are drawn without replacement with p(g) proportional to a (g+1)^(a-1), a = power_a = 0.01
  (most queries come soon after the pairs). The target is -100 everywhere except at a query,
  where it is the key's value; the other tokens are random ids (random_non_queries).
- Model (`Model`): token embedding (tied with the output head, no position embedding), two
  pre-norm blocks with no MLP. Layer 0 mixes with BaseConv: y = conv3(u) * W u + u, a
  depthwise causal convolution of kernel 3 times a linear projection; layer 1 with one
  attention head of width d_model (Wqkv, the attention, out_proj), as their "attention"
  baseline (num_heads 1). The attention is one of attentions.py's, causal, run in the engine;
  taylor2's queries and keys are 16 wide, as Based's feature_dim (r = 273).
- Training: cross-entropy over the query positions, AdamW (weight decay 0.1), the learning rate
  on a cosine from lr to 0 over the run, batch 256, a finite training set seen for a number of
  epochs; their lr sweep np.logspace(-3, -1.5, 4). Accuracy = share of the query positions
  whose argmax is the value, per test configuration (sequence length, pairs).
"""
import math
import os
import sys
import time

import numpy as np
import torch

import linattn

from . import attentions, report

VOCAB = 256
POWER_A = 0.01
# (sequence length, pairs, training examples): theirs are (64, 4, 100k), (128, 8, 20k),
# (256, 16, 20k), (256, 32, 20k), (256, 64, 20k); we train at lengths 64 and 128 only.
TRAIN_FULL = ((64, 4, 100000), (128, 8, 20000), (128, 16, 20000))
TRAIN_QUICK = ((64, 4, 6000), (128, 8, 1500), (128, 16, 1500))
# (sequence length, pairs): their test configurations up to length 256, 1000 examples each.
TEST_CONFIGS = ((64, 4), (64, 8), (64, 16), (128, 32), (256, 64))
TEST_EXAMPLES_FULL = 1000
TEST_EXAMPLES_QUICK = 200
ATTN_FULL = ("softmax", "elu1", "relu",
             "favor+:16", "favor+:64", "favor+:256",
             "favor+orf:16", "favor+orf:64", "favor+orf:256",
             "favor-hyp:64", "taylor2", "dpfp:1", "hedgehog")
ATTN_QUICK = ("softmax", "elu1", "favor+:16")
D_MODELS_FULL = (64, 128)
D_MODELS_QUICK = (64,)
LRS_FULL = tuple(float(x) for x in np.logspace(-3, -1.5, 4))   # theirs: 1e-3 .. 3.2e-2
LRS_QUICK = (1e-2,)
EPOCHS_FULL = 32
EPOCHS_QUICK = 2
BATCH_FULL = 256
BATCH_QUICK = 64
WEIGHT_DECAY = 0.1
EMBED_DROPOUT = 0.1            # their ModelConfig.embed_dropout (layer 0)
CONV_KERNEL = 3
DENOMINATOR = "add:1e-6"       # normalized linear attention, num / (den + 1e-6)
TAYLOR_DK = 16                 # Based's feature_dim for its Taylor map (their MQAR configs)
SOLVED = 0.99                  # their early stop (valid/accuracy > 0.99); "solves" when every seed reaches it
FAILED = 0.5                   # "fails" when every seed stays below it

RUN_COLS = ["attention", "d_model", "lr", "seed", "vocab", "epochs", "batch", "steps",
            "train_loss_first", "train_loss_last", "accuracy", "stop", "seconds",
            "train_seconds_per_step", "features", "threads"]
ACC_COLS = ["attention", "d_model", "lr", "seed", "step", "seq_len", "pairs", "accuracy", "loss"]


# ---- data ---------------------------------------------------------------------------------

def make_examples(rng, n, seq_len, pairs, vocab=VOCAB, power_a=POWER_A, random_non_queries=True):
    """n MQAR sequences: (inputs int64 [n, seq_len], targets int64 [n, seq_len], -100 = none)."""
    half = vocab // 2
    ctx = 2 * pairs
    if seq_len % 2 or 2 * ctx > seq_len or pairs > half - 1:
        raise ValueError("MQAR: length %d cannot hold %d pairs (vocabulary %d)" % (seq_len, pairs, vocab))
    keys = 1 + np.argsort(rng.random((n, half - 1)), 1)[:, :pairs]          # distinct, 1..half-1
    vals = half + np.argsort(rng.random((n, vocab - half)), 1)[:, :pairs]   # distinct, half..V-1
    space = (seq_len - ctx) // 2
    p = power_a * np.arange(1, space + 1) ** (power_a - 1)
    # P gaps without replacement, each with probability proportional to p among the rest:
    # the P largest of log p + Gumbel noise (the Gumbel top-k form of sequential sampling).
    gaps = np.argsort(-(np.log(p) - np.log(-np.log(rng.random((n, space))))), 1)[:, :pairs]
    seq = np.zeros((n, seq_len), dtype=np.int64)
    seq[:, 0:ctx:2], seq[:, 1:ctx:2] = keys, vals
    rows = np.arange(n)[:, None]
    seq[rows, ctx + 2 * gaps] = keys
    tgt = np.full((n, seq_len), -100, dtype=np.int64)
    tgt[rows, ctx + 2 * gaps] = vals          # the query's own position predicts the value
    if random_non_queries:
        fill = rng.integers(0, vocab, size=seq.shape)
        seq = np.where(seq == 0, fill, seq)
    return seq, tgt


# ---- model --------------------------------------------------------------------------------

class BaseConv(torch.nn.Module):
    """y = causal depthwise conv (kernel k)(u) * (W u + b) + u (Zoology's BaseConv, short conv)."""

    def __init__(self, d, kernel):
        super().__init__()
        self.conv = torch.nn.Conv1d(d, d, kernel, groups=d, padding=kernel - 1)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, u):
        c = self.conv(u.transpose(1, 2))[..., :u.shape[1]].transpose(1, 2)
        return c * self.proj(u) + u


class AttentionMixer(torch.nn.Module):
    """One head: Wqkv (queries and keys of width dk, values of width d), the attention (an
    attentions.py module), out_proj."""

    def __init__(self, d, dk, attention):
        super().__init__()
        self.dk = dk
        self.Wqkv = torch.nn.Linear(d, 2 * dk + d)
        self.attention = attention
        self.out_proj = torch.nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.Wqkv(x).unsqueeze(2).split([self.dk, self.dk, x.shape[-1]], -1)
        return self.out_proj(self.attention(q, k, v)[:, :, 0])


class Model(torch.nn.Module):
    """Zoology's LanguageModel with two TransformerBlocks (sequence mixer, identity state mixer):
    the residual stream r; each block: r += dropout(h); h = mixer(LN1(r)); r += h; h = LN2(r)."""

    def __init__(self, vocab, d, dk, attention):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.mixers = torch.nn.ModuleList([BaseConv(d, CONV_KERNEL), AttentionMixer(d, dk, attention)])
        self.norm1 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(2)])
        self.norm2 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(2)])
        self.ln_f = torch.nn.LayerNorm(d)
        self.drop = torch.nn.Dropout(EMBED_DROPOUT)
        for m in self.modules():                          # their _init_weights
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    torch.nn.init.zeros_(m.bias)
        torch.nn.init.normal_(self.mixers[1].out_proj.weight, std=0.02 / math.sqrt(2 * 2))

    def forward(self, ids):
        h, r = self.emb(ids), None
        for i, mixer in enumerate(self.mixers):
            d = self.drop(h) if i == 0 else h
            r = d if r is None else d + r
            h = mixer(self.norm1[i](r))
            r = h + r
            h = self.norm2[i](r)
        r = h + r
        return self.ln_f(r) @ self.emb.weight.t()           # tied output head


# ---- one run ------------------------------------------------------------------------------

def _test(model, tests):
    """[(seq_len, pairs, accuracy, loss)] on the fixed test sets."""
    model.eval()
    out = []
    with torch.no_grad():
        for (L, P), (x, y) in tests.items():
            correct, count, loss = 0, 0, 0.0
            for a in range(0, len(x), 128):
                xb, yb = torch.from_numpy(x[a:a + 128]), torch.from_numpy(y[a:a + 128])
                logits = model(xb)
                m = yb != -100
                correct += (logits.argmax(-1)[m] == yb[m]).sum().item()
                count += m.sum().item()
                loss += torch.nn.functional.cross_entropy(logits[m], yb[m], reduction="sum").item()
            out.append((L, P, correct / count, loss / count))
    model.train()
    return out


def test_sets(seed, vocab, n):
    rng = np.random.default_rng([seed, vocab, 2])
    return {(L, P): make_examples(rng, n, L, P, vocab) for L, P in TEST_CONFIGS}


def train_sets(seed, vocab, configs):
    rng = np.random.default_rng([seed, vocab, 1])
    return [make_examples(rng, n, L, P, vocab) for L, P, n in configs]


def batches(rng, sets, batch):
    """One epoch: every training example once, in batches of one length, in random order."""
    out = []
    for s, (x, _) in enumerate(sets):
        idx = rng.permutation(len(x))
        out += [(s, idx[a:a + batch]) for a in range(0, len(x), batch)]
    return [out[i] for i in rng.permutation(len(out))]


def key_width(name, d_model):
    """dk: d_model, except taylor2, whose queries and keys are projected to TAYLOR_DK as Based's
    (feature_dim 16; r = 1 + 16 + 256 = 273 instead of 16 513 at d_model 128)."""
    return TAYLOR_DK if attentions.parse(name)[0] == "taylor2" else d_model


def build_model(name, d_model, seed, vocab, threads):
    torch.manual_seed(seed)
    dk = key_width(name, d_model)
    attn = attentions.build(name, heads=1, dk=dk, mode="causal", seed=seed, threads=threads,
                            denominator=DENOMINATOR)
    return Model(vocab, d_model, dk, attn)


def run_one(name, d_model, lr, seed, *, cfg, threads, prog=None, weight=0.0):
    """Train one configuration. Returns (run row, accuracy rows)."""
    model = build_model(name, d_model, seed, cfg["vocab"], threads)
    sets = train_sets(seed, cfg["vocab"], cfg["train"])
    tests = test_sets(seed, cfg["vocab"], cfg["test_examples"])
    rng = np.random.default_rng([seed, 3])
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)
    per_epoch = sum(math.ceil(n / cfg["batch"]) for _, _, n in cfg["train"])
    total = per_epoch * cfg["epochs"]
    if cfg.get("max_steps"):
        total = min(total, cfg["max_steps"])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=0.0)
    key = {"attention": name, "d_model": d_model, "lr": lr, "seed": seed}
    accs, losses = [], []
    t0, train_time, step, stop = time.monotonic(), 0.0, 0, "done"
    try:
        while step < total:
            for s, idx in batches(rng, sets, cfg["batch"]):
                if step >= total:
                    break
                x, y = (torch.from_numpy(a[idx]) for a in sets[s])
                ts = time.monotonic()
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(),
                                                         ignore_index=-100)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                train_time += time.monotonic() - ts
                step += 1
                losses.append(loss.item())
                if not math.isfinite(losses[-1]):
                    stop = "non-finite training loss"
                    break
                if step % per_epoch == 0 or step == total:     # their test after every epoch
                    res = _test(model, tests)
                    accs += [dict(key, step=step, seq_len=L, pairs=P, accuracy=a, loss=lo)
                             for L, P, a, lo in res]
                    pooled = sum(a * P for _, P, a, _ in res) / sum(P for _, P, _, _ in res)
                    if prog is not None:
                        prog.update(partial=weight * step / total, note="%s d=%d lr=%.2g seed %d step %d/%d "
                                    "acc %s" % (name, d_model, lr, seed, step, total,
                                                " ".join("%.2f" % a for _, _, a, _ in res)))
                    if pooled > SOLVED:   # their early stop: the accuracy over every test query
                        stop = "solved"
                        break
            if stop != "done":
                break
    except linattn.Error as e:
        stop = "engine error: %s" % e
    k = min(20, len(losses))
    last = [a for a in accs if a["step"] == step]
    row = dict(key, vocab=cfg["vocab"], epochs=cfg["epochs"], batch=cfg["batch"], steps=step,
               train_loss_first=sum(losses[:k]) / k if k else float("nan"),
               train_loss_last=sum(losses[-k:]) / k if k else float("nan"),
               accuracy=(sum(a["accuracy"] for a in last) / len(last)) if last else float("nan"),
               stop=stop, seconds=time.monotonic() - t0,
               train_seconds_per_step=train_time / max(len(losses), 1),
               features=attentions.width(name, key_width(name, d_model)) or "", threads=threads)
    return row, accs


# ---- the task -------------------------------------------------------------------------------

def config(opts):
    quick = opts.quick
    return {"vocab": opts.vocab or VOCAB,
            "train": TRAIN_QUICK if quick else TRAIN_FULL,
            "test_examples": TEST_EXAMPLES_QUICK if quick else TEST_EXAMPLES_FULL,
            "epochs": opts.epochs or (EPOCHS_QUICK if quick else EPOCHS_FULL),
            "batch": BATCH_QUICK if quick else BATCH_FULL,
            "max_steps": opts.max_steps,
            "attentions": list(opts.attentions or (ATTN_QUICK if quick else ATTN_FULL)),
            "d_models": list(opts.d_models or (D_MODELS_QUICK if quick else D_MODELS_FULL)),
            "lrs": list(opts.lrs or (LRS_QUICK if quick else LRS_FULL)),
            "seeds": list(range(1, opts.seeds + 1))}


# The files a task's runs go to, which the merge of a job array concatenates (array.py).
DATA_FILES = ("mqar_runs.csv", "mqar_accuracy.csv")


def configs(opts):
    """The study's configurations, one per Slurm array task (array.py): (attention, d_model,
    learning rate), each with all its seeds."""
    cfg = config(opts)
    return [{"attentions": [a], "d_models": [d], "lrs": [lr]}
            for d in cfg["d_models"] for a in cfg["attentions"] for lr in cfg["lrs"]]


def _key(r):
    return (r["attention"], int(r["d_model"]), "%.6g" % float(r["lr"]), int(r["seed"]))


def run(opts, out_dir, progress_factory):
    cfg = config(opts)
    runs_path = os.path.join(out_dir, "mqar_runs.csv")
    acc_path = os.path.join(out_dir, "mqar_accuracy.csv")
    runs, accs = [], []
    if opts.resume and os.path.exists(runs_path):
        runs = report.read_csv(runs_path)
        accs = report.read_csv(acc_path) if os.path.exists(acc_path) else []
    setting = (cfg["vocab"], cfg["epochs"], cfg["batch"])
    done = {_key(r) for r in runs if (int(r["vocab"]), int(r["epochs"]), int(r["batch"])) == setting}
    todo = [(a, d, lr, s) for d in cfg["d_models"] for a in cfg["attentions"] for lr in cfg["lrs"]
            for s in cfg["seeds"] if _key({"attention": a, "d_model": d, "lr": lr, "seed": s}) not in done]
    if len({_key(r) for r in runs}) > len(done):
        sys.stderr.write("linattn.downstream: mqar: %s holds runs with another vocabulary, epochs "
                         "or batch (--quick or not?); --resume needs the same setting, or another "
                         "--out-dir\n" % runs_path)
        raise SystemExit(2)
    prog = progress_factory("mqar", sum(d for _, d, _, _ in todo) or 1)
    for a, d, lr, s in todo:
        row, acc = run_one(a, d, lr, s, cfg=cfg, threads=opts.threads, prog=prog, weight=d)
        runs.append(row)
        accs.extend(acc)
        prog.advance(d)
        prog.update(note="%s d=%d lr=%.2g seed %d: %s, accuracy %.3f after %d steps, %.0f s" % (
            a, d, lr, s, row["stop"], row["accuracy"], row["steps"], row["seconds"]), force=True)
        report.write_csv(runs_path, RUN_COLS, runs)
        report.write_csv(acc_path, ACC_COLS, accs)
    return cfg


# ---- report ---------------------------------------------------------------------------------

def _f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def summarize(runs, accs):
    """Per (attention, d_model): the lr with the best mean final accuracy over seeds (their
    sweep keeps each model's best lr), and per test configuration the seed statistics there."""
    last = {}
    for r in runs:
        last[_key(r)] = int(r["steps"])
    final = {}
    for a in accs:
        k = _key(a)
        if k in last and int(a["step"]) == last[k]:
            final.setdefault(k, {})[(int(a["seq_len"]), int(a["pairs"]))] = _f(a["accuracy"])
    groups = {}
    for r in runs:
        groups.setdefault((r["attention"], int(r["d_model"])), {}).setdefault(
            "%.6g" % float(r["lr"]), []).append(_key(r))
    out = []
    for (a, d), by_lr in groups.items():
        def mean_acc(keys):
            v = [x for k in keys for x in final.get(k, {}).values() if math.isfinite(x)]
            return sum(v) / len(v) if v else -1.0
        lr = max(by_lr, key=lambda l: mean_acc(by_lr[l]))
        keys = by_lr[lr]
        for L, P in TEST_CONFIGS:
            vals = [final.get(k, {}).get((L, P), float("nan")) for k in keys]
            st = report.stats(vals)
            if st["n_bad"] or not st["n"]:
                verdict = "error"
            elif all(v >= SOLVED for v in vals):
                verdict = "solves"
            elif all(v < FAILED for v in vals):
                verdict = "fails"
            else:
                verdict = "partial"
            out.append({"attention": a, "d_model": d, "lr": float(lr), "lrs_tried": len(by_lr),
                        "seq_len": L, "pairs": P, "seeds": len(keys), "mean_acc": st["mean"],
                        "std_acc": st["std"], "min_acc": st["min"], "max_acc": st["max"],
                        "verdict": verdict})
    order = {a: i for i, a in enumerate(ATTN_FULL)}
    out.sort(key=lambda s: (s["d_model"], order.get(s["attention"], 99), s["attention"], s["pairs"]))
    return out


SUMMARY_COLS = ["attention", "d_model", "lr", "lrs_tried", "seq_len", "pairs", "seeds", "mean_acc",
                "std_acc", "min_acc", "max_acc", "verdict"]


def claims(summ):
    """[(claim, verdict, evidence)] about MQAR (Zoology; Based, Arora et al. 2024)."""
    def get(a, d, P):
        for s in summ:
            if s["attention"] == a and s["d_model"] == d and s["pairs"] == P:
                return s
        return None

    def ev(s):
        return "%s d=%d P=%d: %.3f +- %.3f (%d seeds, %s)" % (
            s["attention"], s["d_model"], s["pairs"], s["mean_acc"], s["std_acc"], s["seeds"], s["verdict"])

    out = []

    def judge(text, want):
        have = [(get(a, d, P), ok) for a, d, P, ok in want]
        tested = [(s, ok) for s, ok in have if s is not None]
        if not tested:
            out.append((text, "not tested", "needs " + ", ".join("%s at d_model %d" % (a, d)
                                                                for a, d, _, _ in want[:1])))
            return
        good = [ok(s) for s, ok in tested]
        v = "supported" if all(good) else ("not supported" if not any(good) else "mixed")
        if len(tested) < len(have):
            v += " (partly tested: %d of %d)" % (len(tested), len(have))
        out.append((text, v, "; ".join(ev(s) for s, _ in tested)))

    solves = lambda s: s["verdict"] == "solves"
    unsolved = lambda s: s["verdict"] != "solves"
    ps = [P for _, P in TEST_CONFIGS]
    for d in (64, 128):
        judge("softmax solves MQAR at d_model %d (accuracy >= %.2f at every test configuration, "
              "every seed; Zoology fig. 2)" % (d, SOLVED), [("softmax", d, P, solves) for P in ps])
    judge("favor+ at m = 16 does not solve MQAR at 64 pairs (d_model 64)",
          [("favor+:16", 64, 64, unsolved)])
    judge("elu1 (plain linear attention, a 64 x 64 state) does not solve MQAR at 64 pairs "
          "(d_model 64)", [("elu1", 64, 64, unsolved)])
    sm = {d: get("softmax", d, 64) for d in (64, 128)}

    def below_softmax(s):
        ref = sm.get(s["d_model"])
        return ref is not None and s["mean_acc"] + s["std_acc"] < ref["mean_acc"] - ref["std_acc"]
    names = []
    for s in summ:
        if s["attention"] != "softmax" and s["attention"] not in names:
            names.append(s["attention"])
    for a in names:
        judge("%s falls below softmax at 64 pairs (mean + sd below softmax's mean - sd)" % a,
              [(a, d, 64, below_softmax) for d in (64, 128) if get(a, d, 64) is not None] or
              [(a, 64, 64, below_softmax)])
    return out


def plots(p, summ):
    series = {}
    for s in summ:
        series.setdefault(s["d_model"], {}).setdefault(s["attention"], []).append(
            (s["pairs"], s["mean_acc"], s["min_acc"], s["max_acc"]))
    panels = []
    for d, by_a in sorted(series.items()):
        panels.append({"title": "d_model %d (best lr per attention)" % d, "xlabel": "key-value pairs",
                       "ylabel": "accuracy at the queries (mean, bars min-max over seeds)",
                       "logx": True, "yrange": "0:1.02",
                       "series": [{"title": a, "pts": pts, "color": i + 1}
                                  for i, (a, pts) in enumerate(by_a.items())]})
    p.figure("mqar_accuracy.png", "MQAR (Zoology): accuracy against the number of pairs", panels)


def write_report(out_dir, meta, p):
    runs = report.read_csv(os.path.join(out_dir, "mqar_runs.csv"))
    acc_path = os.path.join(out_dir, "mqar_accuracy.csv")
    accs = report.read_csv(acc_path) if os.path.exists(acc_path) else []
    summ = summarize(runs, accs)
    report.write_csv(os.path.join(out_dir, "mqar_summary.csv"), SUMMARY_COLS, summ)
    plots(p, summ)
    L = ["## Multi-query associative recall (Zoology, Arora et al. 2023)\n"]
    if meta.get("quick"):
        L.append("**QUICK RUN** (`--quick`): a smaller training set (%s), batch %d, %d epochs, "
                 "%d test sequences per configuration, one learning rate; its verdicts are about "
                 "this subset only.\n" % (", ".join("%d x L=%d P=%d" % (n, l, q) for l, q, n in meta["train"]),
                                          meta["batch"], meta["epochs"], meta["test_examples"]))
    L.append("Vocabulary %d (keys from the lower half, values from the upper half), power-law "
             "query positions (a = %g), random ids elsewhere. Trained on %s; tested on (length, "
             "pairs) %s. Model: 2 layers, BaseConv (kernel %d) then one attention head, no MLP; "
             "AdamW (weight decay %g), cosine to 0, learning rates %s. Feature maps: normalized, "
             "denominator `%s`. The table keeps each attention's best learning rate (mean "
             "accuracy over seeds and test configurations), as Zoology's sweep does. Verdicts per "
             "test configuration: **solves** when every seed reaches %.2f, **fails** when every "
             "seed stays below %.2f, **partial** otherwise.\n" % (
                 meta["vocab"], POWER_A, ", ".join("L=%d P=%d" % (l, q) for l, q, _ in meta["train"]),
                 ", ".join("(%d, %d)" % c for c in TEST_CONFIGS), CONV_KERNEL, WEIGHT_DECAY,
                 ", ".join("%.2g" % x for x in meta["lrs"]), DENOMINATOR, SOLVED, FAILED))
    rows = []
    for s in summ:
        rows.append([s["attention"], s["d_model"], "%.2g" % s["lr"], "%d (L=%d)" % (s["pairs"], s["seq_len"]),
                     "%.3f +- %.3f" % (s["mean_acc"], s["std_acc"]),
                     "%.3f .. %.3f" % (s["min_acc"], s["max_acc"]), s["seeds"], s["verdict"]])
    L.append(report.md_table(["attention", "d_model", "lr", "pairs", "accuracy mean +- sd",
                              "min .. max", "seeds", "verdict"], rows) + "\n")
    if "mqar_accuracy.png" in p.files:
        L.append("![mqar](mqar_accuracy.png)\n")
    L.append("### Claims on this run\n")
    L.append(report.md_table(["claim", "verdict", "evidence (accuracy at the queries)"],
                             [[c, v, e] for c, v, e in claims(summ)]) + "\n")
    bad = [r for r in runs if r["stop"] not in ("done", "solved")]
    if bad:
        L.append("Runs that did not finish: %s.\n" % "; ".join(
            "%s d=%s lr=%s seed %s: %s" % (r["attention"], r["d_model"], r["lr"], r["seed"], r["stop"])
            for r in bad))
    return "\n".join(L)


# ---- the cost of the full task (--estimate) ---------------------------------------------------

def estimate(opts, out_dir):
    """Time a few training steps of every (attention, d_model) at the full batch and the longest
    training length, and extrapolate the full sweep. Returns (rows, total seconds)."""
    full = dict(config(opts), train=TRAIN_FULL, batch=BATCH_FULL,
                epochs=opts.epochs or EPOCHS_FULL, test_examples=TEST_EXAMPLES_FULL)
    if not opts.quick:
        full.update(attentions=list(opts.attentions or ATTN_FULL), d_models=list(opts.d_models or D_MODELS_FULL),
                    lrs=list(opts.lrs or LRS_FULL))
    steps = sum(math.ceil(n / full["batch"]) * full["epochs"] for _, _, n in full["train"])
    rows, total = [], 0.0
    for d in full["d_models"]:
        for a in full["attentions"]:
            model = build_model(a, d, 1, full["vocab"], opts.threads)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=WEIGHT_DECAY)
            per = {}
            for L, P, n in full["train"]:
                x, y = (torch.from_numpy(t) for t in make_examples(np.random.default_rng(0), full["batch"], L, P, full["vocab"]))
                times = []
                for i in range(3):
                    t = time.monotonic()
                    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if i:
                        times.append(time.monotonic() - t)
                per[(L, P)] = min(times)
            t = time.monotonic()
            _test(model, test_sets(1, full["vocab"], full["test_examples"]))
            t_test = time.monotonic() - t
            run_s = sum(per[(L, P)] * math.ceil(n / full["batch"]) * full["epochs"] for L, P, n in full["train"]) \
                + full["epochs"] * t_test
            sec = run_s * len(full["lrs"]) * len(full["seeds"])
            total += sec
            rows.append({"attention": a, "d_model": d, "steps": steps,
                         "seconds_per_step_L64": per[TRAIN_FULL[0][:2]],
                         "seconds_per_step_L128": per[TRAIN_FULL[-1][:2]], "seconds_per_test": t_test,
                         "seconds_per_run": run_s, "lrs": len(full["lrs"]), "seeds": len(full["seeds"]),
                         "seconds_estimated": sec, "threads": opts.threads})
            report.write_csv(os.path.join(out_dir, "mqar_time.csv"), list(rows[0]), rows)
            sys.stderr.write("linattn.downstream: timing mqar %-14s d=%-4d %.3g s/step (L=128)  "
                             "%.3g s/test -> %.2f h a run, %.1f h for %d lrs x %d seeds\n" % (
                                 a, d, per[TRAIN_FULL[-1][:2]], t_test, run_s / 3600, sec / 3600,
                                 len(full["lrs"]), len(full["seeds"])))
    return rows, total
