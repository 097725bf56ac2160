#!/usr/bin/python3
"""Merge the two sweeps of tools/study_eval_length.sh into OUT/length.csv, plot
OUT/err_vs_length.png with gnuplot, copy the raw CSVs and timings, and print a markdown table
(mean over seeds) for OUT/report.md.  Usage: study_eval_length.py WORKDIR OUTDIR"""
import csv
import os
import shutil
import statistics
import subprocess
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    work, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    samp = rows(os.path.join(work, "sampled", "results.csv"))
    allr = {(r["feature_map"], r["features"], r["seed"], r["n"]): r
            for r in rows(os.path.join(work, "allrows", "results.csv"))}
    cols = ["feature_map", "features", "r", "seed", "n", "out_rows", "out_rel_err_sampled",
            "out_rel_err_all_rows", "kernel_rel_err", "weights_tv", "weights_tv_floor",
            "rank_r_floor_rel_err", "den_min", "engine_seconds"]
    merged = []
    for r in samp:
        a = allr.get((r["feature_map"], r["features"], r["seed"], r["n"]))
        merged.append({"feature_map": r["feature_map"], "features": r["features"], "r": r["r"],
                       "seed": r["seed"], "n": r["n"], "out_rows": r["out_rows"],
                       "out_rel_err_sampled": r["out_rel_err"],
                       "out_rel_err_all_rows": a["out_rel_err"] if a else "",
                       "kernel_rel_err": r["kernel_rel_err"], "weights_tv": r["weights_tv"],
                       "weights_tv_floor": r["weights_tv_floor"],
                       "rank_r_floor_rel_err": r["rank_r_floor_rel_err"], "den_min": r["den_min"],
                       "engine_seconds": r["seconds"]})
    with open(os.path.join(out, "length.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(merged)
    for name, src in (("sampled_results.csv", "sampled/results.csv"),
                      ("allrows_results.csv", "allrows/results.csv"), ("times.txt", "times.txt")):
        if os.path.exists(os.path.join(work, src)):
            shutil.copyfile(os.path.join(work, src), os.path.join(out, name))

    # mean over seeds per (map, features, n)
    groups = {}
    for m in merged:
        groups.setdefault((m["feature_map"], int(m["features"])), {}).setdefault(int(m["n"]), []).append(m)

    def mean(ms, c):
        v = [float(x[c]) for x in ms if x[c] != ""]
        return statistics.mean(v) if v else float("nan")

    series = sorted(groups)
    blocks = []
    for key in series:
        lines = []
        for n in sorted(groups[key]):
            ms = groups[key][n]
            lines.append(f"{n} {mean(ms, 'out_rel_err_sampled'):.6g} {mean(ms, 'out_rel_err_all_rows'):.6g} "
                         f"{mean(ms, 'weights_tv'):.6g} {mean(ms, 'weights_tv_floor'):.6g}")
        blocks.append((key, lines))
    gp = ["set terminal pngcairo size 1400,560 font ',10'", "set output 'err_vs_length.png'",
          "set multiplot layout 1,2", "set logscale x 2", "set grid", "set key top left font ',9'",
          "set datafile missing 'nan'", "set format x \"2^{%L}\"", "set xlabel 'n (causal; 1 head, dk = dv = 64)'"]
    for i, (key, lines) in enumerate(blocks):
        gp += [f"$d{i} << EOD"] + lines + ["EOD"]
    gp += ["set logscale y", "set ylabel 'out\\_rel\\_err against exact softmax (mean over seeds)'",
           "set title 'Output error against length: sampled rows (lines), all rows (points)'"]
    gp.append("plot " + ", ".join(
        f"$d{i} u 1:2 w lp lc {i + 1} pt 7 t '{k[0]} m={k[1]} sampled', $d{i} u 1:3 w p lc {i + 1} pt 4 ps 2 t 'all rows'"
        for i, (k, _) in enumerate(blocks)))
    gp += ["unset logscale y", "set yrange [0:1]", "set ylabel 'weights\\_tv (mean total variation per row)'",
           "set title 'Row-normalized weights against softmax: TV (lines), rank-r reference (dashed)'"]
    gp.append("plot " + ", ".join(
        f"$d{i} u 1:4 w lp lc {i + 1} pt 7 t '{k[0]} m={k[1]}', $d{i} u 1:5 w lp lc {i + 1} dt 2 pt 6 t 'rank-r reference'"
        for i, (k, _) in enumerate(blocks)))
    gp.append("unset multiplot")
    with open(os.path.join(out, "err_vs_length.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", "err_vs_length.gp"], cwd=out, check=True)

    print("| map | m | n | out_rel_err (sampled rows) | out_rel_err (all rows) | weights_tv | weights_tv_floor | kernel_rel_err |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for key in series:
        for n in sorted(groups[key]):
            ms = groups[key][n]
            f = lambda c: ("%.3g" % mean(ms, c)) if mean(ms, c) == mean(ms, c) else "\u2014"  # noqa: E731
            print(f"| {key[0]} | {key[1]} | {n} | {f('out_rel_err_sampled')} | {f('out_rel_err_all_rows')} | "
                  f"{f('weights_tv')} | {f('weights_tv_floor')} | {f('kernel_rel_err')} |")


if __name__ == "__main__":
    main()
