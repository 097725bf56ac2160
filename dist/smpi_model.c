/* The simulated cost of the scan's combines (SimGrid SMPI builds only, LA_SMPI;
 * docs/simulation.md "What is modelled"). The simulator runs with computation timing off, so
 * a combine costs simulated time only through this charge: doubles x la_smpi_combine_seconds,
 * the seconds per double measured on the real machine (tools/smpi/calibrate.c). With
 * la_smpi_combine_skip the arithmetic is skipped: the driver sets it when the buffers are
 * shared between the simulated ranks and their contents mean nothing. */
#include <simgrid/host.h>
#include <smpi/smpi.h>
#include "dist_internal.h"

double la_smpi_combine_seconds = 0;
int la_smpi_combine_skip = 0;

int la_smpi_combine(size_t doubles) {
  /* flops at this host's speed: no threshold, no dependence on smpi/host-speed */
  if (la_smpi_combine_seconds > 0)
    smpi_execute_flops((double)doubles * la_smpi_combine_seconds * sg_host_get_speed(sg_host_self()));
  return la_smpi_combine_skip;
}
