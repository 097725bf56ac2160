/* `linattn eval`: DIR/report.md and the plots (eval_report.h). No MPI. The steps, each in its
 * own file (eval_report_internal.h):
 * 1. read the CSVs by their header (eval_csv.c);
 * 2. aggregate results.csv over seeds, fit the slopes (eval_stats.c);
 * 3. write plots.gp (eval_plots.c) and run gnuplot on it (eval_gnuplot.c);
 * 4. write report.md (eval_markdown.c).
 * A failed step leaves none of the report's files (the CSVs stay): docs/design.md §6. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "eval_report_internal.h"
#include "linattn/outfile.h"

la_status la_eval_report(const char *dir, const la_eval_meta *meta) {
  LA_CHECK(dir && *dir, LA_ERR_ARG, "la_eval_report: no folder");
  ctx c;
  memset(&c, 0, sizeof c);
  c.dir = dir;
  static const struct {
    int id;
    const char *file, *what;
  } plots[NPLOT] = {{P_FEAT, "err_vs_features.png", "Error against width (output; kernel with the rank-r floor)"},
                    {P_SCALE, "err_vs_scale.png", "Output error against input scale"},
                    {P_N, "err_vs_n.png", "Output error against sequence length"},
                    {P_GRAD, "grad_err.png", "Gradient errors against width"},
                    {P_BIAS, "bias.png", "Bias: error of the mean over seeds against its noise"},
                    {P_DEN, "denominators.png", "Row error against the denominator"},
                    {P_RECALL, "recall.png", "Associative recall"}};
  for (int i = 0; i < NPLOT; i++) c.plot[plots[i].id].file = plots[i].file, c.plot[plots[i].id].what = plots[i].what;
  char *gp = NULL, *md = NULL, *gppath = NULL, *mdpath = NULL;
  size_t gplen = 0, mdlen = 0;
  la_status st = la_er_read_tables(&c);
  if (st == LA_OK) st = la_er_aggregate(&c);
  if (st == LA_OK) st = la_er_compose_plots(&c, &gp, &gplen);
  if (st == LA_OK && (!(gppath = la_er_path_join(dir, "plots.gp")) || !(mdpath = la_er_path_join(dir, "report.md"))))
    st = la_error(LA_ERR_NOMEM, "out of memory for the output paths");
  if (st == LA_OK) st = la_write_file(gppath, gp, gplen, NULL, 0, 1);
  const int gp_written = st == LA_OK;
  char warn[768] = "";
  if (st == LA_OK) st = la_er_make_pngs(&c, warn, sizeof warn);
  if (st == LA_OK) st = la_er_compose_report(&c, meta, &md, &mdlen);
  if (st == LA_OK) st = la_write_file(mdpath, md, mdlen, NULL, 0, 1);
  if (st == LA_OK && warn[0]) fprintf(stderr, "linattn: warning: %s\n", warn);
  if (st != LA_OK && gp_written) { /* a failed report leaves none of its files (the CSVs stay) */
    unlink(gppath);
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* no allocation here */
    for (int i = 0; dfd >= 0 && i < NPLOT; i++)
      if (c.plot[i].made) unlinkat(dfd, c.plot[i].file, 0);
    if (dfd >= 0) close(dfd);
  }
  free(gp), free(md), free(gppath), free(mdpath);
  la_er_free_tables(&c);
  free(c.maps.s), free(c.modes.s), free(c.ag), free(c.sl), free(c.random), free(c.wmax);
  return st;
}
