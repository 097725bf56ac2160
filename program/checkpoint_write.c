/* Writing a checkpoint (docs/design.md §6 "Checkpoints"; checkpoint.h): every rank pwrites
 * its lane records into state.bin at their global offset, rank 0 adds stats.bin and the
 * manifest, each file fsynced, then the folder is renamed into place and the oldest beyond
 * two removed. */
#include "checkpoint_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "la_alloc.h"
#include "la_crc64.h"

la_status la_ckpt_write(la_dist d, la_ckpt *c, int pass, int L, int64_t lane0, int nmy,
                        const la_lane *lanes, const la_state *states, const la_den_stats *stats,
                        la_pout *out) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  const int64_t seq = c->seq + 1;
  const size_t rd = la_ck_rec_doubles(c), rb = rd * sizeof(double);
  char tmp[4200], fin[4200], p[4300];
  snprintf(tmp, sizeof tmp, "%s/.ckpt.%" PRId64 ".tmp", c->dir, seq);
  snprintf(fin, sizeof fin, "%s/ckpt.%" PRId64, c->dir, seq);
  la_ck_path2(p, sizeof p, tmp, "state.bin");
  la_status st = LA_OK;
  /* 1. rank 0 makes the folder and the state file of L records */
  if (rank == 0) {
    la_ck_remove_dir(tmp);
    int fd = -1;
    if (mkdir(tmp, 0777) != 0 || (fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0666)) < 0 ||
        ftruncate(fd, (off_t)rb * L) != 0) {
      st = la_error(la_write_status(errno), "--checkpoint: %s: cannot write: %s", tmp,
                    strerror(errno));
    }
    if (fd >= 0) close(fd);
  }
  st = la_dist_agree(d, st);
  /* 2. every rank writes its lanes, with their CRCs */
  double *buf = NULL;
  int64_t *tab = NULL; /* per lane: start, end, pos, crc */
  if (st == LA_OK) {
    buf = la_malloc(rb * (size_t)(nmy > 0 ? nmy : 1));
    tab = la_malloc(sizeof(int64_t) * 4 * (size_t)(nmy > 0 ? nmy : 1));
    if (!buf || !tab) {
      st = la_error(LA_ERR_NOMEM, "out of memory for a checkpoint");
    }
    for (int i = 0; st == LA_OK && i < nmy; i++) {
      la_ck_pack(c, &lanes[i], &states[i], buf + rd * i);
      uint64_t k = la_crc64(buf + rd * i, rb);
      tab[4 * i] = lanes[i].start;
      tab[4 * i + 1] = lanes[i].end;
      tab[4 * i + 2] = lanes[i].pos;
      memcpy(&tab[4 * i + 3], &k, 8);
    }
    if (st == LA_OK && nmy > 0) {
      int fd = open(p, O_WRONLY);
      if (fd < 0 || la_ck_pio_all(fd, buf, rb * nmy, (off_t)(rb * lane0), 1) != 0 || fsync(fd) != 0) {
        st = la_error(la_write_status(errno), "--checkpoint: %s: cannot write: %s", p,
                      strerror(errno));
      }
      if (fd >= 0 && close(fd) != 0 && st == LA_OK) {
        st = la_error(la_write_status(errno), "--checkpoint: %s: cannot write: %s", p,
                      strerror(errno));
      }
    }
  }
  st = la_dist_agree(d, st);
  /* 3. the outputs written so far reach storage before the manifest names them */
  if (st == LA_OK && out) st = la_pout_sync(d, out);
  /* 4. the statistics so far, merged over ranks (on a copy) */
  la_den_stats sc = {0};
  if (st == LA_OK) {
    st = la_den_stats_init(&sc);
    if (st == LA_OK) la_den_stats_merge(&sc, stats);
    else la_error(st, "out of memory for a checkpoint");
    st = la_dist_agree(d, st);
    if (st == LA_OK) st = la_dist_reduce_stats(d, &sc);
  }
  /* 5. the lane table to rank 0 (lanes are contiguous in rank order) */
  int *cnt = NULL, *dsp = NULL;
  int64_t *all = NULL;
  if (st == LA_OK) {
    int mine = 4 * nmy;
    if (rank == 0) {
      cnt = la_malloc(sizeof(int) * P);
      dsp = la_malloc(sizeof(int) * P);
      all = la_malloc(sizeof(int64_t) * 4 * (size_t)L);
    }
    int ok = rank != 0 || (cnt && dsp && all), allok = 0;
    MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, la_dist_comm(d));
    if (!allok) {
      st = la_error(LA_ERR_NOMEM, "out of memory for a checkpoint");
    } else {
      MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, la_dist_comm(d));
      if (rank == 0)
        for (int q = 0, o = 0; q < P; q++) dsp[q] = o, o += cnt[q];
      MPI_Gatherv(tab, mine, MPI_INT64_T, all, cnt, dsp, MPI_INT64_T, 0, la_dist_comm(d));
    }
  }
  /* 6. rank 0: stats.bin, the manifest last, then the rename */
  if (st == LA_OK && rank == 0) {
    unsigned char *sb = la_malloc(la_ck_stats_bytes());
    char *man = NULL;
    size_t mlen = 0;
    FILE *f = sb ? la_open_memstream(&man, &mlen) : NULL;
    if (!f) {
      st = la_error(LA_ERR_NOMEM, "out of memory for a checkpoint");
    } else {
      la_ck_stats_pack(&sc, sb);
      fprintf(f, FORMAT_LINE "\nseq %" PRId64 "\npass %d\nlanes %d\ntokens %" PRId64
                 "\nheads %d\nr %d\ndv %d\nrecord_bytes %zu\nstats_crc %016" PRIx64 "\n",
              seq, pass, L, c->N, c->H, c->r, c->dv, rb, la_crc64(sb, la_ck_stats_bytes()));
      fwrite(c->fp, 1, c->fplen, f);
      for (int i = 0; i < L; i++) {
        uint64_t k;
        memcpy(&k, &all[4 * i + 3], 8);
        fprintf(f, "lane %d %" PRId64 " %" PRId64 " %" PRId64 " %016" PRIx64 "\n", i,
                all[4 * i], all[4 * i + 1], all[4 * i + 2], k);
      }
      const int bad = ferror(f); /* a manifest that could not grow: no checkpoint, not a short one */
      if (fclose(f) != 0 || bad || !man) {
        st = la_error(LA_ERR_NOMEM, "out of memory for a checkpoint");
      }
    }
    if (st == LA_OK) {
      char endl[64];
      int el = snprintf(endl, sizeof endl, "end %016" PRIx64 "\n", la_crc64(man, mlen));
      la_ck_path2(p, sizeof p, tmp, "stats.bin");
      st = la_write_file(p, sb, la_ck_stats_bytes(), NULL, 0, 1);
      la_ck_path2(p, sizeof p, tmp, "manifest");
      if (st == LA_OK) st = la_write_file(p, man, mlen, endl, (size_t)el, 1);
      if (st == LA_OK && (la_ck_fsync_path(tmp, 1) != 0 || rename(tmp, fin) != 0 ||
                          la_ck_fsync_path(c->dir, 1) != 0)) {
        st = la_error(la_write_status(errno), "--checkpoint: %s: cannot write: %s", fin,
                      strerror(errno));
      }
    }
    free(man);
    free(sb);
    if (st == LA_OK) /* keep the two newest */
      for (int64_t old = seq - 2; old >= 1; old--) {
        char op[4200];
        snprintf(op, sizeof op, "%s/ckpt.%" PRId64, c->dir, old);
        struct stat s;
        if (stat(op, &s) != 0) break;
        la_ck_drop(c->dir, old);
      }
    if (st != LA_OK) la_ck_remove_dir(tmp);
  }
  st = la_dist_agree(d, st);
  if (st == LA_OK) {
    c->seq = seq;
    c->written++;
    c->last = MPI_Wtime();
  }
  la_den_stats_free(&sc);
  free(buf);
  free(tab);
  free(cnt);
  free(dsp);
  free(all);
  return st;
}
