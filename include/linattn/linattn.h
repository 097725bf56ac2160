/* linattn: feature-map ("linear") attention over very long sequences. Umbrella header. */
#ifndef LINATTN_H
#define LINATTN_H
#include "linattn/version.h"
#include "linattn/status.h"
#include "linattn/types.h"
#include "linattn/core.h"
#include "linattn/npy.h"
#include "linattn/outfile.h"
#include "linattn/grad.h"
#include "linattn/report.h"
#endif
