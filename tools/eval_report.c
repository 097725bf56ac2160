/* eval_report: remake DIR/report.md and the plots of `linattn eval` from the CSVs in DIR, with
 * the current report (program/report/eval_report.c), e.g. for a study made by an older version or merged
 * by jobs/eval_merge.sh. No MPI. The header's facts are given, not measured:
 *   eval_report DIR COMMAND VERSION RANKS THREADS SECONDS [CPU [BLAS_CORE]]
 * Exit 0, or 1 with the report's one-line reason. */
#include <stdio.h>
#include <stdlib.h>
#include "eval_report.h"

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: eval_report DIR COMMAND VERSION RANKS THREADS SECONDS [CPU [BLAS_CORE]]\n");
    return 2;
  }
  la_eval_meta meta = {argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atof(argv[6]),
                       argc > 7 ? argv[7] : NULL, argc > 8 ? argv[8] : NULL};
  const la_status st = la_eval_report(argv[1], &meta);
  if (st != LA_OK) {
    fprintf(stderr, "eval_report: error: %s\n", la_error_reason(st));
    return 1;
  }
  return 0;
}
