/* tools/smpi: the SimGrid SMPI driver (docs/simulation.md). */
#ifndef LINATTN_SIMSCAN_H
#define LINATTN_SIMSCAN_H
#include <stdint.h>
#include <stdio.h>

/* Times the real engine phases and the combine on this machine (calibrate.c); writes a
 * two-line CSV to out. Not Collective (run it on one simulated rank). Returns an exit code. */
int la_smpi_calibrate(int64_t n, int H, int dk, int dv, int reps, FILE *out);

#endif
