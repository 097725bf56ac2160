/* The names of the causal scan algorithms, in la_scan_algorithm's order (linattn/dist.h;
 * docs/design.md §4.5), written once: scan.c defines la_scan_algorithm_names from it, and the
 * option parser (cli.c), which its fuzz harness links without MPI, spells --scan-algorithm
 * with it. MPI-free. */
#ifndef LINATTN_SCAN_NAMES_H
#define LINATTN_SCAN_NAMES_H
#define LA_SCAN_ALGORITHM_NAMES {"auto", "exscan", "doubling", "chain", "allgather", "pipelined", NULL}
#endif
