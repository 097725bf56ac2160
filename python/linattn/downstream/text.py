"""The text of the character language model: GCIDE (Debian dict-gcide) as plain text, its
vocabulary and its split (docs/downstream.md "Character language model").

The dictd database is /usr/share/dictd/gcide.dict.dz (gzip/dictzip) with its index
gcide.index: one line per headword, `headword TAB offset TAB length`, offset and length in
dictd's base64 (A-Z a-z 0-9 + /). `load()`:

1. **Entries.** Every body the index points at, once each (several headwords can share a
   body), in file order (alphabetical), without the dictd metadata entries (headwords
   `00-*` / `00database*`: the URL, the licence notice). Entries are joined by one
   blank line.
2. **Markup**, in this order (`strip()`):
   - source tags, `[1913 Webster]`, `[WordNet 1.5]`, `[PJC]`, `[Webster 1913 Suppl. +PJC]` ...
     (a bracket holding Webster, WordNet, PJC, Suppl. or Century): removed;
   - the syllabified headword `\\Af*fect"\\` and a pronunciation respelling in parentheses
     right after it, `(z[imac]"th[e^]m)`: removed;
   - character entities: an accented letter, `[=a]` `[i^]` `['e]` `["o]` `[~n]` `[,c]` `[.a]`
     `[-o]` `[*a]` `[oo^]` (a diacritic sign before, or ^ after, one or two letters): the bare
     letters; the named ones of ENTITIES (ligatures [ae] [oe], [imac], [aum], [eth], [thorn],
     Greek letters by name, quotes, [root] [add] [asl] ... dropped): their ENTITIES text; any
     other bracket ([Obs.], [R.], [Slang], rare entities) is kept verbatim as text;
   - braces `{Afeard}` (cross-references, italics): the braces removed, the content kept;
   - whitespace: each line stripped of its indentation, runs of spaces made one space, empty
     lines inside an entry removed.
3. **Vocabulary** (VOCAB, 96 symbols): id 0 is newline, ids 1..95 are the printable ASCII
   characters 32 (space) .. 126 (~). Anything else (3 stray non-ASCII bytes in the 2022
   package) is dropped. The text is read as latin-1, so no byte is lost before this rule.

The split (`split()`): the id sequence is cut into contiguous blocks of BLOCK characters; in
every run of 20 blocks, block 18 goes to validation, block 19 to test and the other 18 to
training (90/5/5 by blocks, deterministic, and spread over the whole alphabet rather than
validation = the letters T-V).
"""
import functools
import gzip
import os
import re

import numpy as np

DICT = "/usr/share/dictd/gcide.dict.dz"
BLOCK = 100_000
CYCLE = 20            # blocks per cycle: 18 train, 1 validation, 1 test
VOCAB = 96            # '\n' + chr(32..126)

_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}

_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
          "sigma sigmat tau upsilon phi chi psi omega").split()
ENTITIES = dict(
    {"ae": "ae", "AE": "AE", "oe": "oe", "OE": "OE", "imac": "i", "aum": "a", "eth": "th",
     "thorn": "th", "th": "th", "ng": "ng", "udd": "u", "yogh": "y", "dsdot": "d", "zdot": "z",
     "lsdot": "l", "mdot": "m", "tsdo": "t", "ncir": "n", "nbsp": " ", "ldqo": '"', "rdqo": '"',
     "rsquo": "'", "deg": " degrees", "sect": "section ", "pounds": "pounds ", "middot": ".",
     "root": "", "add": "", "asl": "", "bprime": "", "dag": "", "dagger": "", "hand": "",
     "break": "", "sb": "", "colret": "", "umlaut": "", "breve": "", "asper": "", "flat": "",
     "sharp": "", "times": "x", "divby": "/", "div": "/", "para": "", "rarr": "->", "pause": ""},
    **{g: g for g in _GREEK}, **{g.capitalize(): g.capitalize() for g in _GREEK})

_SOURCE = re.compile(r"\[[^\]\n]*(?:Webster|WordNet|PJC|Suppl\.|Century)[^\]\n]*\]")
_PRON = re.compile(r"[ ]?\\[^\\\n]*\\(?:,?[ ]*\([^()\n]*\))?")
_ACCENT = re.compile(r"\[(?:[=^'`\"~\-.,*]([A-Za-z]{1,2})\^?|([A-Za-z]{1,2})\^)\]")
_NAMED = re.compile(r"\[(%s)\]" % "|".join(sorted(map(re.escape, ENTITIES), key=len, reverse=True)))
_BRACES = re.compile(r"[{}]")
_SPACES = re.compile(r"[ \t]+")


def strip(entry):
    """One dictd entry body (str) -> plain text (str), the rules of the module's docstring."""
    s = _SOURCE.sub("", entry)
    s = _PRON.sub("", s)
    s = _ACCENT.sub(lambda m: m.group(1) or m.group(2), s)
    s = _NAMED.sub(lambda m: ENTITIES[m.group(1)], s)
    s = _BRACES.sub("", s)
    lines = (_SPACES.sub(" ", ln).strip() for ln in s.split("\n"))
    return "\n".join(ln for ln in lines if ln)


def encode(s):
    """str -> uint8 ids (VOCAB); characters outside it are dropped."""
    b = np.frombuffer(s.encode("latin-1", "replace"), dtype=np.uint8)
    keep = (b == 10) | ((b >= 32) & (b <= 126))
    b = b[keep]
    return np.where(b == 10, 0, b - 31).astype(np.uint8)


def decode(ids):
    b = np.asarray(ids, dtype=np.uint8)
    return bytes(np.where(b == 0, 10, b + 31).astype(np.uint8)).decode("latin-1")


def _b64(s):
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def entries(dict_path=DICT, limit=None):
    """The entry bodies (str), in file order, without the metadata entries; `limit` keeps the
    entries that start in the first `limit` bytes of the decompressed file."""
    index = dict_path[:-len(".dict.dz")] + ".index" if dict_path.endswith(".dict.dz") else None
    with gzip.open(dict_path, "rb") as f:
        raw = f.read(limit) if limit else f.read()
    spans = set()
    if index and os.path.exists(index):
        with open(index, encoding="latin-1") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 3 or parts[0].startswith(("00-", "00database")):
                    continue
                off, ln = _b64(parts[1]), _b64(parts[2])
                if off < len(raw):
                    spans.add((off, min(off + ln, len(raw))))
    else:   # no index: paragraphs separated by blank lines
        text = raw.decode("latin-1")
        return [p for p in text.split("\n\n") if p.strip()]
    return [raw[a:b].decode("latin-1") for a, b in sorted(spans)]


@functools.lru_cache(maxsize=4)
def load(dict_path=DICT, limit=None):
    """The whole stripped text as uint8 ids (VOCAB)."""
    return encode("\n\n".join(strip(e) for e in entries(dict_path, limit)))


def split(ids, block=BLOCK):
    """(train, validation, test) uint8 arrays: blocks of `block` ids, 18/1/1 of every 20 (a
    text shorter than 20 blocks, as the smoke test's, uses blocks of len/20)."""
    block = max(1, min(block, len(ids) // CYCLE))
    n = len(ids) // block
    parts = ([], [], [])
    for i in range(max(n, 1)):
        c = i % CYCLE
        part = 1 if c == CYCLE - 2 else (2 if c == CYCLE - 1 else 0)
        parts[part].append(ids[i * block:(i + 1) * block] if n else ids)
    if n and len(ids) > n * block:
        parts[0].append(ids[n * block:])
    return tuple(np.concatenate(p) if p else np.zeros(0, np.uint8) for p in parts)
