/* The smoke test's driver is built from the scan's sources only (tests/smpi/smoke.sh), without
 * the engine: `calibrate` and the two engine queries core/engine/ownership.c's helper names are
 * stubs here, never called by `linattn_smpi scan`. */
#include "simscan.h"
#include "linattn/linattn.h"
#include "la_core_private.h"

int la_smpi_calibrate(int64_t n, int H, int dk, int dv, int reps, FILE *out) {
  (void)n, (void)H, (void)dk, (void)dv, (void)reps, (void)out;
  fprintf(stderr, "linattn: error: calibrate is not in this build (tests/smpi/smoke.sh)\n");
  return 2;
}
int la_engine_reproducible(const la_engine eng) { (void)eng; return 0; }
int64_t la_engine_repro_block(const la_engine eng) { (void)eng; return 1; }
