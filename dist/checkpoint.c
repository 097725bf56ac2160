/* Checkpoints of streaming `linattn run`: the format, the atomic write, the search for the
 * newest valid one, and the stop flag (docs/design.md §6 "Checkpoints"; checkpoint.h).
 * The pieces are small (a lane record is r (dv + 1) + 2 doubles per head), so they go through
 * POSIX I/O: each rank pwrites its own lanes into state.bin at their global offset. */
#include "checkpoint.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "la_alloc.h"
#include "la_crc64.h"

#define FORMAT_LINE "linattn-checkpoint 1"

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

/* Options that change only the speed, the rounding or where things go, not the operator or
 * its inputs: a resume may change them (bitwise equality then needs them unchanged). */
static const char *const free_opts[] = {"threads", "kernels", "chunk", "block-tokens",
                                        "scan-algorithm", "scan-pieces", "mem-limit", "report",
                                        "force", "progress", "checkpoint", "checkpoint-every",
                                        "save-projection", NULL};

static int is_free(const char *line) {
  for (int i = 0; free_opts[i]; i++) {
    size_t n = strlen(free_opts[i]);
    if (strncmp(line, free_opts[i], n) == 0 && line[n] == '=') return 1;
  }
  return 0;
}

static size_t rec_doubles(const la_ckpt *c) {
  return 3 + (size_t)c->H * ((size_t)c->r * (c->dv + 1) + 2);
}

static void path2(char *buf, size_t len, const char *dir, const char *name) {
  snprintf(buf, len, "%s/%s", dir, name);
}

static int fsync_path(const char *path, int dir) {
  int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* Remove a checkpoint folder and the files in it (not recursive beyond one level). */
static void remove_dir(const char *path) {
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
static void drop_ckpt(const char *dir, int64_t seq) {
  char from[4200], to[4200];
  snprintf(from, sizeof from, "%s/ckpt.%" PRId64, dir, seq);
  snprintf(to, sizeof to, "%s/.ckpt.%" PRId64 ".del", dir, seq);
  remove_dir(rename(from, to) == 0 ? to : from);
}

la_status la_ckpt_init(la_dist d, la_ckpt *c, const la_cli *o, const la_job *j, int r,
                       char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  c->dir = o->checkpoint;
  c->every = o->checkpoint_every > 0 ? o->checkpoint_every : 600;
  c->last = MPI_Wtime();
  c->H = j->H;
  c->r = r;
  c->dv = j->dv;
  c->N = j->N;
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) {
    struct stat sb;
    if (mkdir(c->dir, 0777) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "--checkpoint: %s: cannot create: %s", c->dir, strerror(errno));
      st = la_write_status(errno);
    } else if (stat(c->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      snprintf(err, errlen, "--checkpoint: %s: not a folder", c->dir);
      st = LA_ERR_IO;
    } else if (access(c->dir, W_OK | X_OK) != 0) {
      snprintf(err, errlen, "--checkpoint: %s: not writable: %s", c->dir, strerror(errno));
      st = LA_ERR_IO;
    }
    char *opts = NULL, *fp = NULL;
    size_t olen = 0;
    FILE *f = la_open_memstream(&opts, &olen), *g = NULL;
    if (f) {
      la_cli_print(f, o);
      fclose(f);
      g = la_open_memstream(&fp, &c->fplen);
    }
    if (!g) {
      if (st == LA_OK) snprintf(err, errlen, "out of memory for the checkpoint fingerprint");
      st = st == LA_OK ? LA_ERR_NOMEM : st;
    } else {
      for (char *line = opts, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!is_free(line)) fprintf(g, "opt %s\n", line);
      }
      const char *files[] = {o->q, o->k, o->v, o->segments, o->projection};
      const char *names[] = {"q", "k", "v", "segments", "projection"};
      for (int i = 0; i < 5; i++) {
        if (!files[i]) continue;
        if (stat(files[i], &sb) == 0)
          fprintf(g, "file %s=%s size=%lld mtime=%lld.%09ld\n", names[i], files[i],
                  (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
        else
          fprintf(g, "file %s=%s missing\n", names[i], files[i]);
      }
      fclose(g);
      c->fp = fp;
    }
    free(opts);
  }
  st = la_dist_agree(d, st, err, errlen);
  if (st == LA_OK) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
  }
  return st;
}

void la_ckpt_free(la_ckpt *c) {
  free(c->fp);
  c->fp = NULL;
}

void la_ckpt_free_lanes(int n, la_lane *lanes, la_state *states) {
  for (int i = 0; states && i < n; i++) la_state_free(&states[i]);
  free(states);
  free(lanes);
}

int la_ckpt_poll(la_dist d, la_ckpt *c) {
  /* Test hook (tests/cli/check_checkpoint.py): LINATTN_TEST_SIGNAL_AFTER=K makes rank
   * LINATTN_TEST_SIGNAL_RANK (default 0) raise SIGUSR1 at its K-th poll, so that a test can
   * stop a run at a chosen block of either pass through the real handler. */
  static long polls;
  const char *ka = getenv("LINATTN_TEST_SIGNAL_AFTER"), *kr = getenv("LINATTN_TEST_SIGNAL_RANK");
  if (ka && ++polls == atol(ka) && la_dist_rank(d) == (kr ? atoi(kr) : 0)) raise(SIGUSR1);
  int f[2] = {stop_signal != 0, la_dist_rank(d) == 0 && MPI_Wtime() - c->last >= c->every}, g[2];
  if (MPI_Allreduce(f, g, 2, MPI_INT, MPI_MAX, la_dist_comm(d)) != MPI_SUCCESS) return 0;
  return (g[0] ? LA_CKPT_STOP : 0) | (g[1] ? LA_CKPT_NOW : 0);
}

/* ---- writing ---- */

static void pack(const la_ckpt *c, const la_lane *l, const la_state *s, double *rec) {
  const size_t hsz = (size_t)c->r * (c->dv + 1) * c->H;
  int64_t hd[3] = {l->start, l->end, l->pos};
  memcpy(rec, hd, sizeof hd);
  memcpy(rec + 3, s->sz, hsz * sizeof(double));
  memcpy(rec + 3 + hsz, s->m, (size_t)c->H * sizeof(double));
  for (int h = 0; h < c->H; h++) {
    int64_t f = s->f[h];
    memcpy(rec + 3 + hsz + c->H + h, &f, sizeof f);
  }
}

static void unpack(const la_ckpt *c, const double *rec, la_lane *l, la_state *s) {
  const size_t hsz = (size_t)c->r * (c->dv + 1) * c->H;
  int64_t hd[3];
  memcpy(hd, rec, sizeof hd);
  l->start = hd[0];
  l->end = hd[1];
  l->pos = hd[2];
  memcpy(s->sz, rec + 3, hsz * sizeof(double));
  memcpy(s->m, rec + 3 + hsz, (size_t)c->H * sizeof(double));
  for (int h = 0; h < c->H; h++) {
    int64_t f;
    memcpy(&f, rec + 3 + hsz + c->H + h, sizeof f);
    s->f[h] = (int)f;
  }
}

/* The statistics as one flat buffer: 11 scalars then the histogram. */
enum { NSTAT = 11 };
static size_t stats_bytes(void) { return (NSTAT + (size_t)LA_DEN_HIST_BINS) * 8; }
static void stats_pack(const la_den_stats *s, unsigned char *b) {
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
static void stats_unpack(const unsigned char *b, la_den_stats *s) {
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
static int pio_all(int fd, void *buf, size_t n, off_t off, int wr) {
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

la_status la_ckpt_write(la_dist d, la_ckpt *c, int pass, int L, int64_t lane0, int nmy,
                        const la_lane *lanes, const la_state *states, const la_den_stats *stats,
                        la_pout *out, char *err, size_t errlen) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  const int64_t seq = c->seq + 1;
  const size_t rd = rec_doubles(c), rb = rd * sizeof(double);
  char tmp[4200], fin[4200], p[4300];
  snprintf(tmp, sizeof tmp, "%s/.ckpt.%" PRId64 ".tmp", c->dir, seq);
  snprintf(fin, sizeof fin, "%s/ckpt.%" PRId64, c->dir, seq);
  path2(p, sizeof p, tmp, "state.bin");
  la_status st = LA_OK;
  /* 1. rank 0 makes the folder and the state file of L records */
  if (rank == 0) {
    remove_dir(tmp);
    int fd = -1;
    if (mkdir(tmp, 0777) != 0 || (fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0666)) < 0 ||
        ftruncate(fd, (off_t)rb * L) != 0) {
      snprintf(err, errlen, "--checkpoint: %s: cannot write: %s", tmp, strerror(errno));
      st = la_write_status(errno);
    }
    if (fd >= 0) close(fd);
  }
  st = la_dist_agree(d, st, err, errlen);
  /* 2. every rank writes its lanes, with their CRCs */
  double *buf = NULL;
  int64_t *tab = NULL; /* per lane: start, end, pos, crc */
  if (st == LA_OK) {
    buf = la_malloc(rb * (size_t)(nmy > 0 ? nmy : 1));
    tab = la_malloc(sizeof(int64_t) * 4 * (size_t)(nmy > 0 ? nmy : 1));
    if (!buf || !tab) {
      snprintf(err, errlen, "out of memory for a checkpoint");
      st = LA_ERR_NOMEM;
    }
    for (int i = 0; st == LA_OK && i < nmy; i++) {
      pack(c, &lanes[i], &states[i], buf + rd * i);
      uint64_t k = la_crc64(buf + rd * i, rb);
      tab[4 * i] = lanes[i].start;
      tab[4 * i + 1] = lanes[i].end;
      tab[4 * i + 2] = lanes[i].pos;
      memcpy(&tab[4 * i + 3], &k, 8);
    }
    if (st == LA_OK && nmy > 0) {
      int fd = open(p, O_WRONLY);
      if (fd < 0 || pio_all(fd, buf, rb * nmy, (off_t)(rb * lane0), 1) != 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "--checkpoint: %s: cannot write: %s", p, strerror(errno));
        st = la_write_status(errno);
      }
      if (fd >= 0 && close(fd) != 0 && st == LA_OK) {
        snprintf(err, errlen, "--checkpoint: %s: cannot write: %s", p, strerror(errno));
        st = la_write_status(errno);
      }
    }
  }
  st = la_dist_agree(d, st, err, errlen);
  /* 3. the outputs written so far reach storage before the manifest names them */
  if (st == LA_OK && out) st = la_pout_sync(d, out, err, errlen);
  /* 4. the statistics so far, merged over ranks (on a copy) */
  la_den_stats sc = {0};
  if (st == LA_OK) {
    st = la_den_stats_init(&sc);
    if (st == LA_OK) {
      la_den_stats_merge(&sc, stats);
    } else {
      snprintf(err, errlen, "out of memory for a checkpoint");
    }
    st = la_dist_agree(d, st, err, errlen);
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
      snprintf(err, errlen, "out of memory for a checkpoint");
      st = LA_ERR_NOMEM;
    } else {
      MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, la_dist_comm(d));
      if (rank == 0)
        for (int q = 0, o = 0; q < P; q++) dsp[q] = o, o += cnt[q];
      MPI_Gatherv(tab, mine, MPI_INT64_T, all, cnt, dsp, MPI_INT64_T, 0, la_dist_comm(d));
    }
  }
  /* 6. rank 0: stats.bin, the manifest last, then the rename */
  if (st == LA_OK && rank == 0) {
    unsigned char *sb = la_malloc(stats_bytes());
    char *man = NULL;
    size_t mlen = 0;
    FILE *f = sb ? la_open_memstream(&man, &mlen) : NULL;
    if (!f) {
      snprintf(err, errlen, "out of memory for a checkpoint");
      st = LA_ERR_NOMEM;
    } else {
      stats_pack(&sc, sb);
      fprintf(f, FORMAT_LINE "\nseq %" PRId64 "\npass %d\nlanes %d\ntokens %" PRId64
                 "\nheads %d\nr %d\ndv %d\nrecord_bytes %zu\nstats_crc %016" PRIx64 "\n",
              seq, pass, L, c->N, c->H, c->r, c->dv, rb, la_crc64(sb, stats_bytes()));
      fwrite(c->fp, 1, c->fplen, f);
      for (int i = 0; i < L; i++) {
        uint64_t k;
        memcpy(&k, &all[4 * i + 3], 8);
        fprintf(f, "lane %d %" PRId64 " %" PRId64 " %" PRId64 " %016" PRIx64 "\n", i,
                all[4 * i], all[4 * i + 1], all[4 * i + 2], k);
      }
      fclose(f);
      if (!man) {
        snprintf(err, errlen, "out of memory for a checkpoint");
        st = LA_ERR_NOMEM;
      }
    }
    if (st == LA_OK) {
      char endl[64];
      int el = snprintf(endl, sizeof endl, "end %016" PRIx64 "\n", la_crc64(man, mlen));
      path2(p, sizeof p, tmp, "stats.bin");
      st = la_write_file(p, sb, stats_bytes(), NULL, 0, 1, err, errlen);
      path2(p, sizeof p, tmp, "manifest");
      if (st == LA_OK) st = la_write_file(p, man, mlen, endl, (size_t)el, 1, err, errlen);
      if (st == LA_OK && (fsync_path(tmp, 1) != 0 || rename(tmp, fin) != 0 ||
                          fsync_path(c->dir, 1) != 0)) {
        snprintf(err, errlen, "--checkpoint: %s: cannot write: %s", fin, strerror(errno));
        st = la_write_status(errno);
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
        drop_ckpt(c->dir, old);
      }
    if (st != LA_OK) remove_dir(tmp);
  }
  st = la_dist_agree(d, st, err, errlen);
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

/* ---- finding and reading ---- */

/* Sequence numbers of DIR/ckpt.<n>, newest first; removes stale DIR/.ckpt.<n>.tmp. Rank 0. */
static int list_ckpts(const char *dir, int64_t **seqs) {
  DIR *dd = opendir(dir);
  int n = 0, cap = 0;
  *seqs = NULL;
  if (!dd) return 0;
  struct dirent *e;
  while ((e = readdir(dd))) {
    char *endp;
    if (strncmp(e->d_name, "ckpt.", 5) == 0) {
      long long v = strtoll(e->d_name + 5, &endp, 10);
      if (*endp || v < 1) continue;
      if (n == cap) {
        int64_t *g = la_realloc(*seqs, sizeof(int64_t) * (size_t)(cap = cap ? 2 * cap : 8));
        if (!g) break;
        *seqs = g;
      }
      (*seqs)[n++] = v;
    } else if (strncmp(e->d_name, ".ckpt.", 6) == 0) {
      char p[4200];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      remove_dir(p); /* a checkpoint that a killed run did not finish */
    }
  }
  closedir(dd);
  for (int i = 1; i < n; i++) /* newest first */
    for (int k = i; k > 0 && (*seqs)[k] > (*seqs)[k - 1]; k--) {
      int64_t t = (*seqs)[k];
      (*seqs)[k] = (*seqs)[k - 1];
      (*seqs)[k - 1] = t;
    }
  return n;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *b = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 > cap) {
      char *g = la_realloc(b, cap = cap ? 2 * cap : 65536);
      if (!g) {
        free(b);
        fclose(f);
        return NULL;
      }
      b = g;
    }
    size_t k = fread(b + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  b[n] = 0;
  *len = n;
  return b;
}

/* First differing fingerprint line, as "--NAME is A in the checkpoint and B here". */
static void fp_diff(const char *have, size_t hl, const char *want, size_t wl, char *why,
                    size_t len) {
  const char *a = have, *b = want, *ae = have + hl, *be = want + wl;
  while (a < ae || b < be) {
    const char *an = a < ae ? memchr(a, '\n', (size_t)(ae - a)) : NULL;
    const char *bn = b < be ? memchr(b, '\n', (size_t)(be - b)) : NULL;
    int la = an ? (int)(an - a) : (int)(ae - a), lb = bn ? (int)(bn - b) : (int)(be - b);
    if (la != lb || memcmp(a, b, (size_t)la) != 0) {
      if (la > 4 && lb > 4 && strncmp(a, "opt ", 4) == 0 && strncmp(b, "opt ", 4) == 0) {
        const char *ea = memchr(a, '=', (size_t)la), *eb = memchr(b, '=', (size_t)lb);
        if (ea && eb && ea - a == eb - b && memcmp(a, b, (size_t)(ea - a)) == 0) {
          snprintf(why, len, "--%.*s is '%.*s' in the checkpoint and '%.*s' here",
                   (int)(ea - a - 4), a + 4, (int)(la - (ea - a) - 1), ea + 1,
                   (int)(lb - (eb - b) - 1), eb + 1);
          return;
        }
      }
      snprintf(why, len, "the checkpoint has '%.*s', this run '%.*s'", la, a, lb, b);
      return;
    }
    a = an ? an + 1 : ae;
    b = bn ? bn + 1 : be;
  }
  snprintf(why, len, "the fingerprints differ");
}

enum { CK_OK, CK_DAMAGED, CK_OTHER };

/* Rank 0: parse and check DIR/ckpt.seq/manifest. On CK_OK: pass, L, the table (allocated). */
static int read_manifest(const la_ckpt *c, int64_t seq, int *pass, int *L, int64_t **tab,
                         uint64_t *stats_crc, char *why, size_t wlen) {
  char p[4300];
  snprintf(p, sizeof p, "%s/ckpt.%" PRId64 "/manifest", c->dir, seq);
  size_t n = 0;
  char *m = read_all(p, &n);
  *tab = NULL;
  if (!m) {
    snprintf(why, wlen, "manifest: %s", strerror(errno ? errno : ENOMEM));
    return CK_DAMAGED;
  }
  int rc = CK_DAMAGED;
  char *endl = n > 0 && m[n - 1] == '\n' ? m + n - 1 : NULL;
  while (endl && endl > m && endl[-1] != '\n') endl--;
  unsigned long long want = 0;
  if (!endl || sscanf(endl, "end %16llx", &want) != 1 ||
      la_crc64(m, (size_t)(endl - m)) != (uint64_t)want) {
    snprintf(why, wlen, "manifest: checksum mismatch or truncated");
    goto done;
  }
  *endl = 0;
  long long s_, t_;
  int H, r, dv;
  size_t rb;
  unsigned long long sc;
  int used = 0;
  if (sscanf(m, FORMAT_LINE "\nseq %lld\npass %d\nlanes %d\ntokens %lld\nheads %d\nr %d\ndv %d"
                            "\nrecord_bytes %zu\nstats_crc %16llx\n%n",
             &s_, pass, L, &t_, &H, &r, &dv, &rb, &sc, &used) != 9 || used == 0) {
    snprintf(why, wlen, "manifest: not a linattn checkpoint of this version");
    goto done;
  }
  *stats_crc = sc;
  if (t_ != c->N || H != c->H || r != c->r || dv != c->dv) {
    snprintf(why, wlen, "it is of N=%lld, H=%d, r=%d, dv=%d and this run of N=%lld, H=%d, r=%d, "
                        "dv=%d", t_, H, r, dv, (long long)c->N, c->H, c->r, c->dv);
    rc = CK_OTHER;
    goto done;
  }
  char *fpb = m + used, *lanes = strstr(fpb, "lane 0 ");
  if (!lanes || *L < 1 || (*pass != 1 && *pass != 2) || rb != rec_doubles(c) * 8) {
    snprintf(why, wlen, "manifest: malformed");
    goto done;
  }
  if ((size_t)(lanes - fpb) != c->fplen || memcmp(fpb, c->fp, c->fplen) != 0) {
    fp_diff(fpb, (size_t)(lanes - fpb), c->fp, c->fplen, why, wlen);
    rc = CK_OTHER;
    goto done;
  }
  *tab = la_malloc(sizeof(int64_t) * 4 * (size_t)*L);
  if (!*tab) {
    snprintf(why, wlen, "out of memory");
    goto done;
  }
  char *q = lanes;
  for (int i = 0; i < *L; i++) {
    int idx, k = 0;
    long long a, b, ps;
    unsigned long long cr;
    if (sscanf(q, "lane %d %lld %lld %lld %16llx\n%n", &idx, &a, &b, &ps, &cr, &k) != 5 ||
        idx != i || k == 0 || a < 0 || b < a || b > c->N || ps < a || ps > b) {
      snprintf(why, wlen, "manifest: lane %d malformed", i);
      goto done;
    }
    (*tab)[4 * i] = a;
    (*tab)[4 * i + 1] = b;
    (*tab)[4 * i + 2] = ps;
    memcpy(&(*tab)[4 * i + 3], &cr, 8);
    q += k;
  }
  rc = CK_OK;
done:
  if (rc != CK_OK) {
    free(*tab);
    *tab = NULL;
  }
  free(m);
  return rc;
}

la_status la_ckpt_load(la_dist d, la_ckpt *c, int *nmy, int64_t *lane0, la_lane **lanes,
                       la_state **states, la_den_stats *stats, char *err, size_t errlen) {
  const int rank = la_dist_rank(d), P = la_dist_size(d);
  MPI_Comm comm = la_dist_comm(d);
  int64_t *seqs = NULL;
  int64_t hdr[2] = {0, 0}; /* candidates, largest seq */
  *nmy = 0;
  *lane0 = 0;
  *lanes = NULL;
  *states = NULL;
  c->found = 0;
  if (rank == 0) {
    hdr[0] = list_ckpts(c->dir, &seqs);
    hdr[1] = hdr[0] > 0 ? seqs[0] : 0;
  }
  MPI_Bcast(hdr, 2, MPI_INT64_T, 0, comm);
  c->seq = hdr[1];
  la_status st = LA_OK;
  char reasons[1024] = "";
  const size_t rd = rec_doubles(c), rb = rd * 8;
  for (int64_t ci = 0; ci < hdr[0] && st == LA_OK && !c->found; ci++) {
    int64_t info[4] = {CK_DAMAGED, 0, 0, 0}; /* verdict, pass, L, seq */
    int64_t *tab = NULL;
    uint64_t scrc = 0;
    char why[512] = "";
    if (rank == 0) {
      int pass = 0, L = 0;
      info[0] = read_manifest(c, seqs[ci], &pass, &L, &tab, &scrc, why, sizeof why);
      info[1] = pass;
      info[2] = L;
      info[3] = seqs[ci];
      if (info[0] == CK_OTHER) {
        snprintf(err, errlen, "--checkpoint: %s/ckpt.%" PRId64 " was written for other inputs or "
                 "options: %s (remove the folder to start over)", c->dir, seqs[ci], why);
      }
    }
    MPI_Bcast(info, 4, MPI_INT64_T, 0, comm);
    if (info[0] == CK_OTHER) {
      st = la_dist_agree(d, LA_ERR_ARG, err, errlen);
      break;
    }
    int bad = info[0] != CK_OK;
    int L = (int)info[2];
    if (!bad) {
      if (rank != 0) tab = la_malloc(sizeof(int64_t) * 4 * (size_t)L);
      int ok = tab != NULL, allok;
      MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, comm);
      if (!allok) {
        free(tab);
        snprintf(err, errlen, "out of memory reading a checkpoint");
        st = LA_ERR_NOMEM;
        break;
      }
      MPI_Bcast(tab, 4 * L, MPI_INT64_T, 0, comm);
      MPI_Bcast(&scrc, 1, MPI_UINT64_T, 0, comm);
      /* this rank's lanes, read and checked against their CRCs */
      int64_t a = (int64_t)rank * L / P, b = (int64_t)(rank + 1) * L / P;
      int n = (int)(b - a);
      la_lane *ln = la_calloc((size_t)(n > 0 ? n : 1), sizeof *ln);
      la_state *ss = la_calloc((size_t)(n > 0 ? n : 1), sizeof *ss);
      double *buf = la_malloc(rb * (size_t)(n > 0 ? n : 1));
      int lbad = !ln || !ss || !buf;
      if (lbad) snprintf(why, sizeof why, "out of memory");
      for (int i = 0; !lbad && i < n; i++)
        if (la_state_init(&ss[i], c->H, c->r, c->dv) != LA_OK) {
          lbad = 1;
          snprintf(why, sizeof why, "out of memory");
        }
      char p[4300];
      snprintf(p, sizeof p, "%s/ckpt.%" PRId64 "/state.bin", c->dir, info[3]);
      if (!lbad && n > 0) {
        int fd = open(p, O_RDONLY);
        if (fd < 0 || pio_all(fd, buf, rb * n, (off_t)(rb * a), 0) != 0) {
          snprintf(why, sizeof why, "state.bin: %s", errno ? strerror(errno) : "truncated");
          lbad = 1;
        }
        if (fd >= 0) close(fd);
      }
      for (int i = 0; !lbad && i < n; i++) {
        uint64_t k;
        memcpy(&k, &tab[4 * (a + i) + 3], 8);
        if (la_crc64(buf + rd * i, rb) != k) {
          snprintf(why, sizeof why, "state.bin: lane %" PRId64 " checksum mismatch", a + i);
          lbad = 1;
          break;
        }
        unpack(c, buf + rd * i, &ln[i], &ss[i]);
        if (ln[i].start != tab[4 * (a + i)] || ln[i].end != tab[4 * (a + i) + 1] ||
            ln[i].pos != tab[4 * (a + i) + 2]) {
          snprintf(why, sizeof why, "state.bin: lane %" PRId64 " does not match the manifest",
                   a + i);
          lbad = 1;
        }
      }
      free(buf);
      /* rank 0: the statistics */
      la_den_stats ls = {0};
      if (rank == 0 && !lbad) {
        size_t sl = 0;
        snprintf(p, sizeof p, "%s/ckpt.%" PRId64 "/stats.bin", c->dir, info[3]);
        unsigned char *sb = (unsigned char *)read_all(p, &sl);
        if (!sb || sl != stats_bytes() || la_crc64(sb, sl) != scrc) {
          snprintf(why, sizeof why, "stats.bin: %s", sb ? "checksum mismatch" : strerror(errno));
          lbad = 1;
        } else if (la_den_stats_init(&ls) != LA_OK) {
          snprintf(why, sizeof why, "out of memory");
          lbad = 1;
        } else {
          stats_unpack(sb, &ls);
        }
        free(sb);
      }
      /* the first rank's reason travels to rank 0 with the verdict */
      int who = lbad ? rank : P, first = P;
      MPI_Allreduce(&who, &first, 1, MPI_INT, MPI_MIN, comm);
      if (first < P) {
        if (first != 0) {
          if (rank == first) MPI_Send(why, sizeof why, MPI_CHAR, 0, 0x6b70, comm);
          if (rank == 0) MPI_Recv(why, sizeof why, MPI_CHAR, first, 0x6b70, comm, MPI_STATUS_IGNORE);
        }
        bad = 1;
        la_ckpt_free_lanes(n, ln, ss);
      } else {
        c->found = 1;
        c->pass = (int)info[1];
        c->lanes = L;
        *nmy = n;
        *lane0 = a;
        *lanes = ln;
        *states = ss;
        if (rank == 0) la_den_stats_merge(stats, &ls);
        int64_t done = 0;
        for (int i = 0; i < L && c->pass == 2; i++) done += tab[4 * i + 2] - tab[4 * i];
        c->tokens_done = done;
      }
      if (ls.hist) la_den_stats_free(&ls);
      free(tab);
    }
    if (bad && rank == 0) {
      fprintf(stderr, "linattn: warning: checkpoint %s/ckpt.%" PRId64 " is damaged (%s); trying "
              "the one before it\n", c->dir, info[3], why);
      size_t u = strlen(reasons);
      snprintf(reasons + u, sizeof reasons - u, "%sckpt.%" PRId64 ": %s", u ? "; " : "", info[3],
               why);
    }
  }
  if (st == LA_OK && !c->found && hdr[0] > 0) {
    snprintf(err, errlen, "--checkpoint: %s: no valid checkpoint (%s); remove the folder to start "
             "over", c->dir, reasons);
    st = la_dist_agree(d, LA_ERR_FORMAT, err, errlen);
  }
  free(seqs);
  return st;
}

void la_ckpt_remove_all(la_ckpt *c) {
  /* no allocation here: the run has succeeded, and its checkpoints must go whatever memory
   * is left (readdir's own buffer was allocated by opendir; a failed opendir keeps them) */
  DIR *dd = opendir(c->dir);
  if (!dd) return;
  struct dirent *e;
  char p[4200];
  while ((e = readdir(dd)))
    if (strncmp(e->d_name, "ckpt.", 5) == 0) {
      char *endp;
      long long v = strtoll(e->d_name + 5, &endp, 10);
      if (!*endp) drop_ckpt(c->dir, v);
    } else if (strncmp(e->d_name, ".ckpt.", 6) == 0) {
      snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
      remove_dir(p);
    }
  closedir(dd);
  rmdir(c->dir); /* only if empty */
}
