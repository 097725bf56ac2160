/* Subcommands of the `linattn` program. Each is Collective and returns the exit code. */
#ifndef LINATTN_RUN_H
#define LINATTN_RUN_H
#include "cli.h"
#include "linattn/dist.h"
int la_cmd_run(la_dist d, la_cli *o);
int la_cmd_grad(la_dist d, la_cli *o);
int la_cmd_eval(la_dist d, la_cli *o);
#endif
