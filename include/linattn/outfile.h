/* Output files (docs/design.md §6 "No partial output files"): temporary names, the removal of
 * temporaries left by dead runs, the up-front check of an output path, whole-file atomic
 * writes, and the status of a failed write. A failure records its one-line reason
 * (la_error_reason, §6 "Errors"). All functions are Not Collective. */
#ifndef LINATTN_OUTFILE_H
#define LINATTN_OUTFILE_H
#include <stddef.h>
#include "linattn/status.h"
#ifdef __cplusplus
extern "C" {
#endif

/* "<path>.tmp.<pid>" into buf. Returns 0 if it does not fit in len bytes. */
int la_tmp_name(const char *path, long pid, char *buf, size_t len);

/* Remove the stale temporaries of path: files "<path>.tmp.<pid>" whose pid is this
 * process's own (it has not created its temporary yet) or names no live process on this
 * host (kill(pid, 0) fails with ESRCH, or /proc says the process is a zombie). Temporaries of
 * live processes are left alone. Returns the number removed. */
int la_tmp_sweep(const char *path);

/* Status of a failed create, write, sync, close or rename of an output, from its errno:
 * LA_ERR_IO (exit 2) when the path is at fault (ENOENT, ENOTDIR, EACCES, EPERM, EROFS,
 * EISDIR, ENAMETOOLONG, ELOOP, EEXIST), LA_ERR_WRITE (exit 1) otherwise (ENOSPC, EDQUOT,
 * EIO, EFBIG, ...). */
la_status la_write_status(int e);

/* Can an output be created at path? Sweeps its stale temporaries, then refuses a path that
 * is a directory (LA_ERR_IO), an existing path without force (LA_ERR_EXISTS), and a folder
 * that is missing or where a file cannot be created (la_write_status; checked by creating
 * and removing the temporary). Messages start with the path. */
la_status la_output_check(const char *path, int force);

/* Write a whole file atomically: the bytes a[0..na) then b[0..nb) (b may be NULL) into
 * "<path>.tmp.<pid>", fsync, close and rename it to path; on any failure the temporary is
 * removed. An existing path without force is LA_ERR_EXISTS. A failed write, sync or close
 * is "path: cannot write: <reason>" (la_write_status). */
la_status la_write_file(const char *path, const void *a, size_t na, const void *b, size_t nb,
                        int force);

#ifdef __cplusplus
}
#endif
#endif
