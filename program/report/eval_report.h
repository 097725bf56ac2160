/* The reader-facing part of `linattn eval` (docs/cli.md "linattn eval"): DIR/report.md and the
 * PNG plots, made from the CSV files the eval driver wrote into DIR. No MPI: rank 0 calls it
 * after the CSVs are complete. Not Collective. */
#ifndef LINATTN_EVAL_REPORT_H
#define LINATTN_EVAL_REPORT_H
#include <stddef.h>
#include "linattn/status.h"

typedef struct {
  const char *command; /* the command line as run */
  const char *version; /* linattn version string */
  int ranks, threads;
  double seconds;      /* wall time of the sweep */
  const char *cpu;       /* "model (isa)", or NULL */
  const char *blas_core; /* openblas_get_corename(), or NULL */
} la_eval_meta;

/* Read DIR's CSVs (results.csv required; bias.csv, rows.csv, refs.csv and recall.csv when
 * present), write DIR/plots.gp and DIR/report.md (atomically, la_write_file; existing ones are
 * replaced: the driver owns DIR), and run gnuplot on plots.gp to make the PNGs when gnuplot is
 * on PATH. The PNGs are made under temporary names and renamed into place once gnuplot has
 * succeeded. No gnuplot, or a gnuplot that fails, is one warning line on stderr (`linattn:
 * warning: ...`, saying how to make the plots later: `gnuplot plots.gp` in DIR) and report.md
 * says the plots are missing; it is not an error. The CSVs are read by their header (columns
 * found by name; unknown columns are ignored); a malformed CSV is an error naming the file and
 * the line, and then nothing is written; out of memory is an error too, never a shorter
 * report. Returns LA_OK or an error with its one-line reason recorded (la_error_reason,
 * docs/design.md §6 "Errors"); a failed report leaves none of its files. meta may be NULL. */
la_status la_eval_report(const char *dir, const la_eval_meta *meta);

#endif
