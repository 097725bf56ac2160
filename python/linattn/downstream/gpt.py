"""A small GPT for the character language model (docs/downstream.md "Character language
model"): nanoGPT's model.py (Karpathy) at its CPU "baby" configuration (4 layers, 4 heads,
d = 128, context 256, no dropout, no biases), with the attention replaced by a module of
attentions.py, causal, run in the engine.

    tokens -> token embedding + learned position embedding
           -> n_layer x [ x += proj(attention(LN(x))); x += MLP(LN(x)) ]   (pre-LN; MLP 4d, GELU)
           -> LN -> logits = x @ token_embedding^T                           (weight tying)

Initialization as nanoGPT's: N(0, 0.02), the residual projections N(0, 0.02/sqrt(2 n_layer)).
"""
import math

import torch

from . import attentions

DENOMINATOR = "add:1e-6"   # normalized linear attention, num / (den + 1e-6), as mqar.py


class Attention(torch.nn.Module):
    def __init__(self, d, heads, attention):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.attention = attention        # an attentions.py module on [B, L, H, dk]
        self.proj = torch.nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, L, d = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, d // self.heads).unbind(2)
        return self.proj(self.attention(q, k, v).reshape(B, L, d))


class Block(torch.nn.Module):
    def __init__(self, d, heads, attention):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn = Attention(d, heads, attention)
        self.fc = torch.nn.Linear(d, 4 * d, bias=False)
        self.fc_proj = torch.nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, *, layers, heads, d, context, make_attention):
        """make_attention(): a fresh attentions.py module for one layer."""
        super().__init__()
        self.context = context
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(context, d)
        self.blocks = torch.nn.ModuleList([Block(d, heads, make_attention()) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(d)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
        for b in self.blocks:
            for w in (b.attn.proj.weight, b.fc_proj.weight):
                torch.nn.init.normal_(w, std=0.02 / math.sqrt(2 * layers))

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()

    def attention_modules(self):
        return [b.attn.attention for b in self.blocks]

    def set_attention(self, make_attention):
        """Put a fresh module from make_attention() in every layer (the swap task)."""
        for b in self.blocks:
            b.attn.attention = make_attention()


def make_attention_factory(name, *, heads, dk, seed, threads):
    """The attention of one layer, causal; feature maps normalized with DENOMINATOR."""
    def make():
        return attentions.build(name, heads=heads, dk=dk, mode="causal", seed=seed,
                                threads=threads, denominator=DENOMINATOR)
    return make


def build(name, *, vocab, layers, heads, d, context, seed, threads):
    torch.manual_seed(seed)
    return GPT(vocab, layers=layers, heads=heads, d=d, context=context,
               make_attention=make_attention_factory(name, heads=heads, dk=d // heads, seed=seed,
                                                     threads=threads))
