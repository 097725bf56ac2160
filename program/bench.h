/* `linattn bench`, a subcommand of the program (docs/cli.md "linattn bench"); the PBLAS
 * baseline it times is the library's (pblas.h). */
#ifndef LINATTN_BENCH_H
#define LINATTN_BENCH_H
#include "cli.h"
#include "linattn/dist.h"
#include "pblas.h"

/* The CSV header of `linattn bench` (docs/cli.md "linattn bench"), with its newline. */
extern const char la_bench_csv_header[];

/* `linattn bench` with parsed options (la_cli_parse): Collective, returns the exit code.
 * Resolves an empty --threads list to the OpenMP default. */
int la_cmd_bench(la_dist d, la_cli *o);

#endif
