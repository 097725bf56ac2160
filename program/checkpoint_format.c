/* The pieces of a checkpoint (docs/design.md §6 "Checkpoints"; checkpoint.h): a lane record,
 * the statistics buffer, whole-buffer pread/pwrite, fsync of a path, and the removal of a
 * checkpoint folder. Shared by checkpoint_write.c and checkpoint_load.c
 * (checkpoint_internal.h). */
#include "checkpoint_internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NSTAT = 11 };

size_t la_ck_rec_doubles(const la_ckpt *c) {
  return 3 + (size_t)c->H * c->r * (c->dv + 1) + (size_t)c->E * (2 + (c->gated ? 1 : 0));
}

void la_ck_path2(char *buf, size_t len, const char *dir, const char *name) {
  snprintf(buf, len, "%s/%s", dir, name);
}

int la_ck_fsync_path(const char *path, int dir) {
  int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* Remove a checkpoint folder and the files in it (not recursive beyond one level). */
void la_ck_remove_dir(const char *path) {
  DIR *dd = opendir(path);
  if (dd) {
    struct dirent *e;
    char p[4200];
    while ((e = readdir(dd)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
      }
    closedir(dd);
  }
  rmdir(path);
}

/* Remove DIR/ckpt.<seq> atomically for a reader: first renamed to DIR/.ckpt.<seq>.del (the
 * name a later run sweeps, list_ckpts), then emptied; a kill midway never leaves a ckpt.<seq>
 * with missing pieces. */
void la_ck_drop(const char *dir, int64_t seq) {
  char from[4200], to[4200];
  snprintf(from, sizeof from, "%s/ckpt.%" PRId64, dir, seq);
  snprintf(to, sizeof to, "%s/.ckpt.%" PRId64 ".del", dir, seq);
  la_ck_remove_dir(rename(from, to) == 0 ? to : from);
}

void la_ck_pack(const la_ckpt *c, const la_lane *l, const la_state *s, double *rec) {
  const size_t hsz = (size_t)c->r * (c->dv + 1) * c->H;
  int64_t hd[3] = {l->start, l->end, l->pos};
  memcpy(rec, hd, sizeof hd);
  memcpy(rec + 3, s->sz, hsz * sizeof(double));
  memcpy(rec + 3 + hsz, s->m, (size_t)c->E * sizeof(double));
  for (int h = 0; h < c->E; h++) {
    int64_t f = s->f[h];
    memcpy(rec + 3 + hsz + c->E + h, &f, sizeof f);
  }
  /* --gates: the lane's a, the sum of its rows' gates so far (with decay alone it is set
   * from gamma when the lanes combine, so it need not be kept); per feature, one per row */
  if (c->gated) memcpy(rec + 3 + hsz + 2 * c->E, s->a, (size_t)c->E * sizeof(double));
}

void la_ck_unpack(const la_ckpt *c, const double *rec, la_lane *l, la_state *s) {
  const size_t hsz = (size_t)c->r * (c->dv + 1) * c->H;
  int64_t hd[3];
  memcpy(hd, rec, sizeof hd);
  l->start = hd[0];
  l->end = hd[1];
  l->pos = hd[2];
  memcpy(s->sz, rec + 3, hsz * sizeof(double));
  memcpy(s->m, rec + 3 + hsz, (size_t)c->E * sizeof(double));
  for (int h = 0; h < c->E; h++) {
    int64_t f;
    memcpy(&f, rec + 3 + hsz + c->E + h, sizeof f);
    s->f[h] = (int)f;
  }
  if (c->gated) memcpy(s->a, rec + 3 + hsz + 2 * c->E, (size_t)c->E * sizeof(double));
}

/* The statistics as one flat buffer: 11 scalars then the histogram. */
size_t la_ck_stats_bytes(void) { return (NSTAT + (size_t)LA_DEN_HIST_BINS) * 8; }
void la_ck_stats_pack(const la_den_stats *s, unsigned char *b) {
  int64_t v[NSTAT];
  memcpy(&v[0], &s->min, 8);
  memcpy(&v[1], &s->max, 8);
  v[2] = s->rows;
  v[3] = s->count_nonpositive;
  v[4] = s->count_nonfinite;
  v[5] = s->violations;
  v[6] = s->first_bad_token;
  v[7] = s->first_bad_head;
  v[8] = s->overflows;
  v[9] = s->first_overflow_token;
  v[10] = s->first_overflow_head;
  memcpy(b, v, sizeof v);
  memcpy(b + sizeof v, s->hist, (size_t)LA_DEN_HIST_BINS * 8);
}
void la_ck_stats_unpack(const unsigned char *b, la_den_stats *s) {
  int64_t v[NSTAT];
  memcpy(v, b, sizeof v);
  memcpy(&s->min, &v[0], 8);
  memcpy(&s->max, &v[1], 8);
  s->rows = v[2];
  s->count_nonpositive = v[3];
  s->count_nonfinite = v[4];
  s->violations = v[5];
  s->first_bad_token = v[6];
  s->first_bad_head = (int)v[7];
  s->overflows = v[8];
  s->first_overflow_token = v[9];
  s->first_overflow_head = (int)v[10];
  memcpy(s->hist, b + sizeof v, (size_t)LA_DEN_HIST_BINS * 8);
}

/* pwrite/pread all of it, or fail with errno. */
int la_ck_pio_all(int fd, void *buf, size_t n, off_t off, int wr) {
  for (size_t done = 0; done < n;) {
    ssize_t k = wr ? pwrite(fd, (char *)buf + done, n - done, off + (off_t)done)
                   : pread(fd, (char *)buf + done, n - done, off + (off_t)done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      if (k == 0) errno = wr ? EIO : 0;
      return -1;
    }
    done += (size_t)k;
  }
  return 0;
}
