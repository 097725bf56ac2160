/* Parallel .npy I/O with MPI-IO (docs/cli.md "Files", docs/design.md §4.5 and §6).
 * All functions are Collective on the la_dist communicator unless noted. A failure records
 * its one-line reason (la_error; the Collective ones agree on it, la_dist_agree). */
#ifndef LINATTN_PIO_H
#define LINATTN_PIO_H
#include "linattn/dist.h"
#include "linattn/npy.h"
#include "linattn/outfile.h"

typedef struct {
  MPI_File fh;
  la_npy_info info;
  const char *path;
  int64_t row_elems; /* product of shape[1..] */
} la_pin;

typedef struct {
  MPI_File fh;
  char path[4096], tmp[4200];
  la_dtype dtype;
  int64_t row_bytes, data_offset;
  int open;    /* the MPI file is open */
  int pending; /* the temporary is complete and closed, waiting for la_pout_commit */
  int keep;    /* the temporary is a checkpoint's partial output: kept on failure */
} la_pout;

/* Rank 0 parses and checks the header (la_npy_read_info); all ranks open the file. */
la_status la_pin_open(la_dist d, const char *path, la_pin *in);
/* Not Collective: read rows [row0, row0+n) converted to dtype want into dst. A file that
 * ends before the rows (it shrank after the header check) is LA_ERR_FORMAT; a failed read
 * is LA_ERR_READ with the OS reason. */
la_status la_pin_read(la_pin *in, int64_t row0, int64_t n, la_dtype want, void *dst);
void la_pin_close(la_pin *in);

/* Refuses an existing path without force; removes stale temporaries of path (la_tmp_sweep)
 * and creates "<path>.tmp.<pid of rank 0>". */
la_status la_pout_open(la_dist d, const char *path, la_dtype dt, int ndim, const int64_t *shape,
                       int force, la_pout *out);
/* la_pout_open with the temporary named `partial` (a checkpoint's partial output, docs/design.md
 * §6 "Checkpoints"), which no failure removes (la_pout.keep). resume != 0: open the existing
 * partial without truncating it, after rank 0 has checked that its .npy header is the one this
 * output would have; otherwise create (or truncate) it. */
la_status la_pout_open_partial(la_dist d, const char *path, const char *partial, int resume,
                               la_dtype dt, int ndim, const int64_t *shape, int force,
                               la_pout *out);
/* MPI_File_sync of an open output (the rows written so far reach storage), then agree. */
la_status la_pout_sync(la_dist d, la_pout *out);
/* Not Collective: write rows [row0, row0+n). Every MPI call's return code and the count
 * written are checked; a failure is "path: cannot write: <reason>" (LA_ERR_WRITE). */
la_status la_pout_write(la_pout *out, int64_t row0, int64_t n, const void *src);
/* Sync (when ok) and close the file on every rank, then agree. If ok was 0 on every rank, or
 * the sync or close failed on any, rank 0 removes the temporary once every rank has closed
 * it. Otherwise the temporary is left pending for la_pout_commit. With ok == 0 (cleaning up
 * after a failure) there is no agreement, so the failure's recorded reason stays; the same
 * holds for la_pout_commit and la_pout_close. */
la_status la_pout_finish(la_dist d, la_pout *out, int ok);
/* ok != 0 on every rank: rank 0 renames every pending temporary of outs[0..n) into place;
 * if one rename fails, the outputs already renamed and the remaining temporaries are
 * removed (all or none). ok == 0: the pending temporaries are removed. */
la_status la_pout_commit(la_dist d, la_pout *outs, int n, int ok);
/* la_pout_finish then la_pout_commit of one output. */
la_status la_pout_close(la_dist d, la_pout *out, int ok);

/* Not Collective: a failed file operation's recorded reason "path: reason" becomes "opt path:
 * reason", so that the error line names the option as well as the file (one file may be given
 * to several options); a reason that already starts with an option, and st == LA_OK, are
 * kept. Returns st. */
la_status la_name_option(la_status st, const char *opt);

/* Rank 0 runs la_output_check on each non-NULL path (existence refused without force, missing
 * or unwritable folder), then the ranks agree: before anything is computed. opts (or NULL)
 * names each path's option, which the error then starts with. */
la_status la_outputs_check(la_dist d, const char *const *paths, const char *const *opts, int n,
                           int force);

/* Not Collective: 1 if path exists. */
int la_path_exists(const char *path);

#endif
