"""Output of the downstream study: CSV files (written atomically), PNG plots through gnuplot,
and the helpers report.md is written with.

- CSVs: `write_csv(path, columns, rows)` writes PATH.tmp.<pid> then renames it over PATH, so a
  reader (or a run that is stopped) never sees half a file; `read_csv` reads one back.
- Plots, in the style of `linattn eval` (program/report/eval_report.c): a self-contained `plots.gp` whose
  numbers are inline datablocks, so `gnuplot plots.gp` in the folder remakes the PNGs later;
  gnuplot runs with suffix='.tmp.<pid>' and each valid PNG is renamed into place. A missing or
  failing gnuplot is one warning line on stderr and a note in report.md, never an error.
- Statistics over seeds: mean, sample standard deviation, min, max (non-finite values are
  counted, not averaged).
"""
import csv
import math
import os
import shutil
import subprocess
import sys

GNUPLOT_TIMEOUT_S = 300


def write_csv(path, columns, rows):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([fmt(r.get(c, "")) for c in columns])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def blank_nan(rows):
    """The rows with every non-finite float made '' (an undefined value, e.g. a gap closed when
    there was no gap), for summary CSVs that must hold no NaN."""
    return [{k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
            for r in rows]


def fmt(x):
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ("nan" if x != x else ("inf" if x > 0 else "-inf"))
    return x


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_text(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def stats(values):
    """dict n, n_bad, mean, std, min, max, median over the finite values."""
    good = sorted(v for v in values if v is not None and math.isfinite(v))
    n = len(good)
    out = {"n": n, "n_bad": len(values) - n}
    if n == 0:
        out.update(mean=float("nan"), std=float("nan"), min=float("nan"), max=float("nan"),
                   median=float("nan"))
        return out
    mean = sum(good) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in good) / (n - 1)) if n > 1 else 0.0
    med = good[n // 2] if n % 2 else 0.5 * (good[n // 2 - 1] + good[n // 2])
    out.update(mean=mean, std=std, min=good[0], max=good[-1], median=med)
    return out


def sci(x, digits=2):
    """A number for a markdown table: 3.1e-04, 0.12, 'nan'."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None else str(x)
    if x == 0:
        return "0"
    if 1e-2 <= abs(x) < 1e3:
        return "%.*f" % (max(digits + 1 - int(math.floor(math.log10(abs(x)))) - 1, 0), x)
    return "%.*e" % (digits - 1, x)


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---- gnuplot -------------------------------------------------------------------------------

def gp_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class Plots:
    """Compose plots.gp: figures of panels of series (x, y[, lo, hi]) with inline datablocks."""

    def __init__(self, what):
        self.lines = [
            "# linattn.downstream: the plots of report.md, made from the CSV files of this folder;",
            "# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`",
            "# in this folder (gnuplot 5 or later: datablocks). %s" % what,
            'if (!exists("suffix")) suffix = ""',
            'cairo = strstrt(GPVAL_TERMINALS, "pngcairo") > 0',
            "set grid", "set key outside right top font ',8'", "set bars small",
            "set datafile missing 'nan'"]
        self.nblk = 0
        self.files = []

    def block(self, pts):
        b = self.nblk
        self.nblk += 1
        self.lines.append("$d%d << EOD" % b)
        for p in pts:
            self.lines.append(" ".join("%.17g" % v for v in p))
        self.lines.append("EOD")
        return b

    def figure(self, file, title, panels):
        """panels: list of dicts title, xlabel, ylabel, logx, logy, series: list of dicts
        title, pts [(x, y) or (x, y, lo, hi)], color (int), dashed (bool)."""
        panels = [p for p in panels if any(s["pts"] for s in p["series"])]
        if not panels:
            return False
        blocks = [[self.block(s["pts"]) if s["pts"] else None for s in p["series"]] for p in panels]
        n = len(panels)
        cols = n if n <= 2 else (2 if n <= 4 else 3)
        rows = (n + cols - 1) // cols
        w, h = (900, 600) if n == 1 else (760 * cols, 560 * rows)
        L = self.lines
        L.append("\n# ---- %s ----" % file)
        L.append("if (cairo) { set terminal pngcairo size %d,%d noenhanced font ',10' } "
                 "else { set terminal png size %d,%d noenhanced }" % (w, h, w, h))
        L.append("set output '%s'.suffix" % file)
        L.append("set multiplot layout %d,%d%s" % (rows, cols, (" title " + gp_str(title)) if n > 1 else ""))
        for p, bl in zip(panels, blocks):
            L.append("set title " + gp_str(p["title"] if n > 1 else title + "\n" + p["title"]))
            L.append("set xlabel " + gp_str(p["xlabel"]))
            L.append("set ylabel " + gp_str(p["ylabel"]))
            L.append("unset logscale")
            if p.get("logx"):
                L.append("set logscale x 10")
            if p.get("logy"):
                L.append("set logscale y 10")
            L.append("set xrange [*:*]")
            L.append("set yrange [%s]" % p.get("yrange", "*:*"))
            parts = []
            for s, b in zip(p["series"], bl):
                if b is None:
                    continue
                err = len(s["pts"][0]) == 4
                parts.append("$d%d using %s with %s lc %d dt %d pt %d title %s" % (
                    b, "1:2:3:4" if err else "1:2", "yerrorlines" if err else "linespoints",
                    s.get("color", 1), 2 if s.get("dashed") else 1, 6 if s.get("dashed") else 7,
                    gp_str(s["title"])))
            L.append("plot " + ", \\\n     ".join(parts))
        L.append("unset multiplot\nset output")
        self.files.append(file)
        return True

    def make(self, out_dir):
        """Write plots.gp and run gnuplot. Returns (made files, warning or '')."""
        write_text(os.path.join(out_dir, "plots.gp"), "\n".join(self.lines) + "\n")
        if not self.files:
            return [], ""
        if shutil.which("gnuplot") is None:
            return [], ("gnuplot is not on PATH: no plots were made; to make them later, run "
                        "`gnuplot plots.gp` in %s" % out_dir)
        suffix = ".tmp.%d" % os.getpid()
        try:
            r = subprocess.run(["gnuplot", "-d", "-e", "suffix='%s'" % suffix, "plots.gp"],
                               cwd=out_dir, capture_output=True, text=True,
                               timeout=GNUPLOT_TIMEOUT_S)
            why = "" if r.returncode == 0 else "gnuplot exited with status %d: %s" % (
                r.returncode, (r.stderr.strip().splitlines() or [""])[-1])
        except (OSError, subprocess.TimeoutExpired) as e:
            why = "gnuplot failed: %s" % e
        made = []
        for f in self.files:
            tmp = os.path.join(out_dir, f + suffix)
            if not why and valid_png(tmp):
                os.replace(tmp, os.path.join(out_dir, f))
                made.append(f)
            elif os.path.exists(tmp):
                os.unlink(tmp)
        if why:
            return made, "the plots were not made (%s); to make them later, run `gnuplot plots.gp` in %s" % (why, out_dir)
        if len(made) < len(self.files):
            return made, "%d plot(s) not made; to retry, run `gnuplot plots.gp` in %s" % (
                len(self.files) - len(made), out_dir)
        return made, ""


def valid_png(path):
    try:
        with open(path, "rb") as f:
            h = f.read(24)
    except OSError:
        return False
    return (len(h) == 24 and h[:8] == b"\x89PNG\r\n\x1a\n" and h[12:16] == b"IHDR"
            and int.from_bytes(h[16:20], "big") > 0 and int.from_bytes(h[20:24], "big") > 0)


def warn(msg):
    sys.stderr.write("linattn.downstream: warning: %s\n" % msg)
    sys.stderr.flush()
