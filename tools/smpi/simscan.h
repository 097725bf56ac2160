/* tools/smpi: the SimGrid SMPI driver (docs/simulation.md). */
#ifndef LINATTN_SIMSCAN_H
#define LINATTN_SIMSCAN_H
#include <stdint.h>
#include "linattn/linattn.h"

/* model_engine.c: the engine of the simulated forward (docs/simulation.md "What is simulated,
 * what is modelled"), linked in place of linattn_core's: causal float32, H heads of r (dv + 1)
 * doubles of state, input width dk; its phases charge c[0..3] seconds per token (apply,
 * accumulate, apply_local, correct: columns 6 to 9 of docs/sim_calibration.csv) at the
 * simulated host's speed and compute nothing. la_engine_destroy frees it. Not Collective. */
la_status la_model_engine_create(int H, int r, int dk, int dv, const double c[4], la_engine *eng);
/* The seconds of compute this engine has charged so far. */
double la_model_engine_seconds(const la_engine eng);

#endif
