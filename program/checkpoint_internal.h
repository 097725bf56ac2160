/* What the checkpoint files share (checkpoint_format.c): docs/design.md §6 "Checkpoints". */
#ifndef LINATTN_CHECKPOINT_INTERNAL_H
#define LINATTN_CHECKPOINT_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "checkpoint.h"

#define FORMAT_LINE "linattn-checkpoint 1"

/* Doubles of one lane record: start, end, pos, then per head S|z, m and the segment flag. */
size_t la_ck_rec_doubles(const la_ckpt *c);
void la_ck_pack(const la_ckpt *c, const la_lane *l, const la_state *s, double *rec);
void la_ck_unpack(const la_ckpt *c, const double *rec, la_lane *l, la_state *s);
/* The denominator statistics as one flat buffer of la_ck_stats_bytes(). */
size_t la_ck_stats_bytes(void);
void la_ck_stats_pack(const la_den_stats *s, unsigned char *b);
void la_ck_stats_unpack(const unsigned char *b, la_den_stats *s);
/* pwrite (wr) or pread all n bytes at off, or -1 with errno. */
int la_ck_pio_all(int fd, void *buf, size_t n, off_t off, int wr);
void la_ck_path2(char *buf, size_t len, const char *dir, const char *name);
/* fsync a file, or a folder (dir != 0); -1 on failure. */
int la_ck_fsync_path(const char *path, int dir);
/* Remove a folder and the files in it (one level). */
void la_ck_remove_dir(const char *path);
/* Remove DIR/ckpt.<seq> so that a reader never sees it half removed. */
void la_ck_drop(const char *dir, int64_t seq);

#endif
