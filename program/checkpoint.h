/* Checkpoint and resume of streaming `linattn run` (docs/design.md §6 "Checkpoints";
 * docs/cli.md "--checkpoint").
 *
 * The work of a run is a list of lanes: global token ranges [start, end), one per rank of the
 * run that started it, each done up to pos in the current pass (1: key summaries, 2: outputs)
 * and each with its scan state at pos (pass 1: the partial sum of the lane's keys; pass 2: the
 * prefix state). Positions are global, so a resume on P ranks gives rank q the lanes
 * [q L / P, (q+1) L / P) of the L saved ones, whatever L is.
 *
 * A checkpoint is the folder DIR/ckpt.<seq> holding state.bin (the L lane records, written by
 * their ranks), stats.bin (the denominator statistics so far) and manifest (text: the format,
 * the fingerprint of the options and input files, every lane's position and CRC-64, and last
 * the CRC-64 of the manifest itself). It is built as DIR/.ckpt.<seq>.tmp, every file fsynced,
 * then renamed into place: a SIGKILL at any moment leaves the previous checkpoints whole. The
 * two newest are kept. */
#ifndef LINATTN_CHECKPOINT_H
#define LINATTN_CHECKPOINT_H
#include "cli.h"
#include "job.h"
#include "linattn/dist.h"
#include "pio.h"

/* la_lane (linattn/dist.h): a lane's tokens and position. */

enum { LA_CKPT_NOW = 1, LA_CKPT_STOP = 2 }; /* la_ckpt_poll */

typedef struct {
  const char *dir;
  double every, last; /* seconds between timed checkpoints; MPI_Wtime of the last (rank 0) */
  int64_t seq;        /* the largest sequence number seen in dir (0: none) */
  int written;        /* checkpoints written by this run */
  char *fp;           /* rank 0: the fingerprint, "opt NAME=VALUE" and "file ..." lines */
  size_t fplen;
  int H, r, dv;
  int E;     /* scan elements per lane: H, or H r in the row form of per-feature gates
              * (la_engine_state_init): each has its m, f (and a) in the record */
  int gated; /* --gates: each lane record also holds the lane's cumulative log-gates a */
  int64_t N;
  /* what la_ckpt_load found */
  int found, pass, lanes; /* lanes: L, the rank count of the run that started the work */
  int64_t tokens_done;    /* outputs complete when resumed (0 in pass 1) */
} la_ckpt;

/* Create dir if missing, make the fingerprint (every option that changes the result, and each
 * input file's size and modification time) and install the SIGUSR1 and SIGTERM handlers,
 * which only set a flag. Collective. */
la_status la_ckpt_init(la_dist d, la_ckpt *c, const la_cli *o, const la_job *j, int r);
void la_ckpt_free(la_ckpt *c);

/* Find the newest valid checkpoint and give this rank its lanes: *nmy lanes from global lane
 * index *lane0, their records (lanes, states: arrays allocated here, to free with
 * la_ckpt_free_lanes) and, on rank 0, the saved statistics merged into stats. A damaged
 * checkpoint (checksum, truncation) is reported as a warning and the one before it is tried;
 * one written for other options or inputs is an error (LA_ERR_ARG) that names the difference;
 * none valid of several is LA_ERR_FORMAT. No checkpoint: c->found = 0 and LA_OK. Collective. */
la_status la_ckpt_load(la_dist d, la_ckpt *c, int *nmy, int64_t *lane0, la_lane **lanes,
                       la_state **states, la_den_stats *stats);
void la_ckpt_free_lanes(int n, la_lane *lanes, la_state *states);

/* Collective, once per block: LA_CKPT_STOP when any rank has seen SIGUSR1 or SIGTERM,
 * LA_CKPT_NOW when rank 0's clock says --checkpoint-every has passed; 0 otherwise. */
int la_ckpt_poll(la_dist d, la_ckpt *c);

/* Write checkpoint seq + 1 of this rank's nmy lanes (global indices lane0..) out of L, in
 * pass `pass`, the statistics so far (merged over ranks here, on a copy), after syncing the
 * partial output (out may be NULL); then drop all but the two newest. Collective. */
la_status la_ckpt_write(la_dist d, la_ckpt *c, int pass, int L, int64_t lane0, int nmy,
                        const la_lane *lanes, const la_state *states, const la_den_stats *stats,
                        la_pout *out);

/* After the output is in place: remove every checkpoint of dir, and dir if it is then empty.
 * Rank 0; Not Collective. */
void la_ckpt_remove_all(la_ckpt *c);

#endif
