/* Checkpoints of streaming `linattn run` (docs/design.md §6 "Checkpoints"; checkpoint.h): the
 * setup (folder, fingerprint of the options and inputs), the stop flag and the agreement to
 * checkpoint, and the removal after success. The pieces are small (a lane record is
 * r (dv + 1) + 2 doubles per head), so they go through POSIX I/O: checkpoint_write.c writes,
 * checkpoint_load.c finds and reads, checkpoint_format.c has what both share. */
#include "checkpoint_internal.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "la_alloc.h"

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

la_status la_ckpt_init(la_dist d, la_ckpt *c, const la_cli *o, const la_job *j, int r) {
  memset(c, 0, sizeof *c);
  c->dir = o->checkpoint;
  c->every = o->checkpoint_every > 0 ? o->checkpoint_every : 600;
  c->last = MPI_Wtime();
  c->H = j->H;
  c->r = r;
  c->dv = j->dv;
  c->E = j->gw > 1 ? j->H * j->gw : j->H; /* per-feature gates: rows (gw = r) */
  c->gated = o->cfg.gates != 0;
  c->N = j->N;
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) {
    struct stat sb;
    if (mkdir(c->dir, 0777) != 0 && errno != EEXIST) {
      st = la_error(la_write_status(errno), "--checkpoint: %s: cannot create: %s", c->dir,
                    strerror(errno));
    } else if (stat(c->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      st = la_error(LA_ERR_IO, "--checkpoint: %s: not a folder", c->dir);
    } else if (access(c->dir, W_OK | X_OK) != 0) {
      st = la_error(LA_ERR_IO, "--checkpoint: %s: not writable: %s", c->dir, strerror(errno));
    }
    char *opts = NULL, *fp = NULL;
    size_t olen = 0;
    FILE *f = la_open_memstream(&opts, &olen), *g = NULL;
    if (f) {
      la_cli_print_fingerprint(f, o); /* less the LA_OPT_RESUMABLE options */
      const int bad = ferror(f); /* a text that could not grow: no fingerprint, not a shorter one */
      if (fclose(f) == 0 && !bad) g = la_open_memstream(&fp, &c->fplen);
    }
    if (!g) {
      if (st == LA_OK) st = la_error(LA_ERR_NOMEM, "out of memory for the checkpoint fingerprint");
    } else {
      for (char *line = opts, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        fprintf(g, "opt %s\n", line);
      }
      /* the synthetic workload's data are those of one version of the generator */
      if (!o->q) fprintf(g, "input synthetic generator version %d\n", LA_SYNTH_VERSION);
      const char *files[] = {o->q, o->k, o->v, o->segments, o->projection, o->gates};
      const char *names[] = {"q", "k", "v", "segments", "projection", "gates"};
      for (int i = 0; i < 6; i++) {
        if (!files[i]) continue;
        if (stat(files[i], &sb) == 0)
          fprintf(g, "file %s=%s size=%lld mtime=%lld.%09ld\n", names[i], files[i],
                  (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
        else
          fprintf(g, "file %s=%s missing\n", names[i], files[i]);
      }
      const int bad = ferror(g);
      if (fclose(g) != 0 || bad) {
        free(fp);
        if (st == LA_OK) st = la_error(LA_ERR_NOMEM, "out of memory for the checkpoint fingerprint");
      } else {
        c->fp = fp;
      }
    }
    free(opts);
  }
  st = la_dist_agree(d, st);
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
      if (!*endp) la_ck_drop(c->dir, v);
    } else if (strncmp(e->d_name, ".ckpt.", 6) == 0) {
      snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
      la_ck_remove_dir(p);
    }
  closedir(dd);
  rmdir(c->dir); /* only if empty */
}
