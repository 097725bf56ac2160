/* gnuplot for the eval report (eval_report_internal.h): run on DIR/plots.gp by posix_spawnp
 * with suffix='.tmp.<pid>', so that the PNGs appear under temporary names, each valid one
 * renamed into place after gnuplot exits 0 (docs/design.md §6 "No partial output files"). No
 * gnuplot, or a gnuplot that fails or times out, is a warning and a reason per plot, not an
 * error. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "eval_report_internal.h"
#include "la_alloc.h"
#include "linattn/outfile.h"

extern char **environ;

#define GNUPLOT_TIMEOUT_S 300 /* gnuplot is killed after this long */

/* The line of gnuplot's stderr that says what went wrong: the first one naming plots.gp, else
 * the last non-blank one. */
static void first_error_line(const char *buf, char *out, size_t outlen) {
  const char *best = NULL, *last = NULL;
  size_t bestlen = 0, lastlen = 0;
  for (const char *p = buf; *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    const char *q = p;
    size_t ql = l;
    while (ql && (*q == ' ' || *q == '\t')) q++, ql--;
    if (ql) {
      last = q, lastlen = ql;
      if (!best && ql > 12 && memmem(q, ql, "plots.gp\"", 9)) best = q, bestlen = ql;
    }
    p += l + (e != NULL);
  }
  if (!best) best = last, bestlen = lastlen;
  if (!best) {
    snprintf(out, outlen, "no message");
    return;
  }
  if (bestlen > 200) bestlen = 200;
  snprintf(out, outlen, "%.*s", (int)bestlen, best);
  for (char *s = out; *s; s++)
    if ((unsigned char)*s < 32) *s = ' ';
}

/* Is there an executable regular file `name` in a folder of PATH (as posix_spawnp searches:
 * an empty entry is the current folder; no PATH is /bin:/usr/bin)? Checked before spawning,
 * because where posix_spawnp is fork and exec (valgrind, some libcs) a missing program only
 * shows as exit status 127. */
static int on_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  const size_t nl = strlen(name);
  for (const char *p = path;;) {
    const char *e = strchr(p, ':');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    char buf[4096];
    if (l + nl + 2 <= sizeof buf) {
      if (l) memcpy(buf, p, l);
      else buf[l++] = '.';
      buf[l] = '/';
      memcpy(buf + l + 1, name, nl + 1);
      struct stat sb;
      if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0) return 1;
    }
    if (!e) return 0;
    p = e + 1;
  }
}

/* gnuplot -e "suffix='SUFFIX'" plots.gp in dir. 1 success; 0 not on PATH; -1 failed (why, for
 * the warning: a gnuplot that fails is not an error); -2 out of memory (an error). */
static int run_gnuplot(const char *dir, const char *suffix, char *why, size_t whylen) {
  if (!on_path("gnuplot")) return 0;
  char setexpr[128];
  snprintf(setexpr, sizeof setexpr, "suffix='%s'", suffix);
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    snprintf(why, whylen, "cannot make a pipe for gnuplot: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
  char *cdexpr = NULL;
  char *argv[9];
  int argc = 0;
  argv[argc++] = "gnuplot";
  argv[argc++] = "-d"; /* --default-settings: no ~/.gnuplot (the script sets everything) */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
  posix_spawn_file_actions_addchdir_np(&fa, dir);
#else
  if (strchr(dir, '\'')) {
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]), close(pfd[1]);
    snprintf(why, whylen, "the folder's name has a quote, which gnuplot's cd cannot take");
    return -1;
  }
  size_t cl = strlen(dir) + 8;
  cdexpr = la_malloc(cl);
  if (!cdexpr) {
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]), close(pfd[1]);
    return -2;
  }
  snprintf(cdexpr, cl, "cd '%s'", dir);
  argv[argc++] = "-e";
  argv[argc++] = cdexpr;
#endif
  argv[argc++] = "-e";
  argv[argc++] = setexpr;
  argv[argc++] = "plots.gp";
  argv[argc] = NULL;
  pid_t pid;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(cdexpr);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    if (rc == ENOENT) return 0;
    snprintf(why, whylen, "cannot start gnuplot: %s", strerror(rc));
    return -1;
  }
  /* Its stderr, until it closes (bounded: the first 64 KiB are kept), with a deadline. */
  char msg[65536];
  size_t nmsg = 0;
  int timed_out = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double left = GNUPLOT_TIMEOUT_S - ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {pfd[0], POLLIN, 0};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char tmp[4096];
    ssize_t r = read(pfd[0], tmp, sizeof tmp);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    size_t keep = (size_t)r < sizeof msg - 1 - nmsg ? (size_t)r : sizeof msg - 1 - nmsg;
    memcpy(msg + nmsg, tmp, keep);
    nmsg += keep;
  }
  close(pfd[0]);
  msg[nmsg] = 0;
  if (timed_out) kill(pid, SIGKILL);
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) {
      snprintf(why, whylen, "cannot wait for gnuplot: %s", strerror(errno));
      return -1;
    }
  if (timed_out) {
    snprintf(why, whylen, "gnuplot did not finish within %d s and was stopped", GNUPLOT_TIMEOUT_S);
    return -1;
  }
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return 1;
  char line[256];
  first_error_line(msg, line, sizeof line);
  if (WIFEXITED(ws))
    snprintf(why, whylen, "gnuplot exited with status %d: %s", WEXITSTATUS(ws), line);
  else
    snprintf(why, whylen, "gnuplot was killed by signal %d: %s", WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, line);
  return -1;
}

/* A PNG with its signature and a non-empty IHDR. */
static int valid_png(const char *path) {
  unsigned char h[24];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, h, sizeof h);
  close(fd);
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (r != (ssize_t)sizeof h || memcmp(h, sig, 8) || memcmp(h + 12, "IHDR", 4)) return 0;
  uint32_t wd = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19];
  uint32_t ht = (uint32_t)h[20] << 24 | (uint32_t)h[21] << 16 | (uint32_t)h[22] << 8 | h[23];
  return wd > 0 && ht > 0;
}

static int fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

la_status la_er_make_pngs(ctx *c, char *warn, size_t warnlen) {
  warn[0] = 0;
  int planned = 0;
  for (int i = 0; i < NPLOT; i++) planned += c->plot[i].planned;
  if (!planned) return LA_OK;
  char *path[NPLOT] = {0}, *tmp[NPLOT] = {0};
  const long self = (long)getpid();
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp.%ld", self);
  for (int i = 0; i < NPLOT; i++) {
    if (!c->plot[i].planned) continue;
    path[i] = la_er_path_join(c->dir, c->plot[i].file);
    size_t tl = path[i] ? strlen(path[i]) + 32 : 0;
    tmp[i] = path[i] ? la_malloc(tl) : NULL;
    if (!tmp[i]) {
      for (int j = 0; j <= i; j++) free(path[j]), free(tmp[j]);
      return la_error(LA_ERR_NOMEM, "out of memory for the names of the plots");
    }
    la_tmp_name(path[i], self, tmp[i], tl);
    la_tmp_sweep(path[i]);
  }
  char why[320] = "";
  int rc = run_gnuplot(c->dir, suffix, why, sizeof why);
  if (rc == -2) { /* no gnuplot ran, no temporary exists */
    for (int i = 0; i < NPLOT; i++) free(path[i]), free(tmp[i]);
    return la_error(LA_ERR_NOMEM, "out of memory for gnuplot's cd command");
  }
  for (int i = 0; i < NPLOT; i++) {
    plotinfo *p = &c->plot[i];
    if (!p->planned) continue;
    if (rc == 1) {
      if (!valid_png(tmp[i])) {
        snprintf(p->why, sizeof p->why, "gnuplot made no valid PNG");
      } else if (fsync_path(tmp[i]) != 0 || rename(tmp[i], path[i]) != 0) {
        snprintf(p->why, sizeof p->why, "%s: cannot write: %s", p->file, strerror(errno));
      } else {
        p->made = 1;
        continue;
      }
    } else {
      snprintf(p->why, sizeof p->why, "%s", rc == 0 ? "gnuplot is not on PATH" : why);
    }
    if (tmp[i]) unlink(tmp[i]);
  }
  for (int i = 0; i < NPLOT; i++) free(path[i]), free(tmp[i]);
  if (rc == 0)
    snprintf(warn, warnlen, "gnuplot is not on PATH: no plots were made; to make them later, run `gnuplot plots.gp` in %s",
             c->dir);
  else if (rc < 0)
    snprintf(warn, warnlen, "the plots were not made (%s); to make them later, run `gnuplot plots.gp` in %s", why, c->dir);
  else {
    int missing = 0;
    for (int i = 0; i < NPLOT; i++) missing += c->plot[i].planned && !c->plot[i].made;
    if (missing)
      snprintf(warn, warnlen, "%d plot%s not made (see report.md); to retry, run `gnuplot plots.gp` in %s", missing,
               missing > 1 ? "s were" : " was", c->dir);
  }
  return LA_OK;
}

