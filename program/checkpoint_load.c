/* Finding and reading the newest valid checkpoint (docs/design.md §6 "Checkpoints";
 * checkpoint.h): the manifest checked against this run's fingerprint, every piece against its
 * CRC-64, and the one before it taken when the newest is damaged. */
#include "checkpoint_internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "la_alloc.h"
#include "la_crc64.h"

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
      la_ck_remove_dir(p); /* a checkpoint that a killed run did not finish */
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
  if (!lanes || *L < 1 || (*pass != 1 && *pass != 2) || rb != la_ck_rec_doubles(c) * 8) {
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
                       la_state **states, la_den_stats *stats) {
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
  const size_t rd = la_ck_rec_doubles(c), rb = rd * 8;
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
      if (info[0] == CK_OTHER)
        la_error(LA_ERR_ARG, "--checkpoint: %s/ckpt.%" PRId64 " was written for other inputs or "
                 "options: %s (remove the folder to start over)", c->dir, seqs[ci], why);
    }
    MPI_Bcast(info, 4, MPI_INT64_T, 0, comm);
    if (info[0] == CK_OTHER) { /* every rank fails; rank 0, the first, recorded why */
      st = la_dist_agree(d, LA_ERR_ARG);
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
        st = la_error(LA_ERR_NOMEM, "out of memory reading a checkpoint");
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
        if (la_state_init(&ss[i], c->E, c->E == c->H ? c->r : 1, c->dv) != LA_OK) {
          lbad = 1;
          snprintf(why, sizeof why, "out of memory");
        }
      char p[4300];
      snprintf(p, sizeof p, "%s/ckpt.%" PRId64 "/state.bin", c->dir, info[3]);
      if (!lbad && n > 0) {
        int fd = open(p, O_RDONLY);
        if (fd < 0 || la_ck_pio_all(fd, buf, rb * n, (off_t)(rb * a), 0) != 0) {
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
        la_ck_unpack(c, buf + rd * i, &ln[i], &ss[i]);
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
        if (!sb || sl != la_ck_stats_bytes() || la_crc64(sb, sl) != scrc) {
          snprintf(why, sizeof why, "stats.bin: %s", sb ? "checksum mismatch" : strerror(errno));
          lbad = 1;
        } else if (la_den_stats_init(&ls) != LA_OK) {
          snprintf(why, sizeof why, "out of memory");
          lbad = 1;
        } else {
          la_ck_stats_unpack(sb, &ls);
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
    /* every rank fails; rank 0, the first, holds the reasons */
    la_error(LA_ERR_FORMAT, "--checkpoint: %s: no valid checkpoint (%s); remove the folder to start "
             "over", c->dir, reasons);
    st = la_dist_agree(d, LA_ERR_FORMAT);
  }
  free(seqs);
  return st;
}
