/* Output files: temporary names, stale temporaries, path checks, atomic writes (outfile.h,
 * docs/design.md §6). */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64
#include "linattn/outfile.h"
#include "la_alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int la_tmp_name(const char *path, long pid, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s.tmp.%ld", path, pid);
  return n >= 0 && (size_t)n < len;
}

/* The folder of path ("." for a bare name) into buf. */
static void folder_of(const char *path, char *buf, size_t len) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(buf, len, ".");
  else if (slash == path) snprintf(buf, len, "/");
  else snprintf(buf, len, "%.*s", (int)(slash - path), path);
}

/* Is pid a live process on this host? kill(pid, 0) says whether it exists; a zombie (state
 * Z or X in /proc/<pid>/stat) exists but has ended: a rank killed by mpirun's teardown stays a
 * zombie until its new parent reaps it, which a container's init may never do. */
static int pid_alive(long pid) {
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
  char fn[64], buf[512];
  snprintf(fn, sizeof fn, "/proc/%ld/stat", pid);
  FILE *f = fopen(fn, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *rp = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces and ')' */
  return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int la_tmp_sweep(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  if (!*base) return 0;
  folder_of(path, dir, sizeof dir);
  char prefix[4096];
  int pl = snprintf(prefix, sizeof prefix, "%s.tmp.", base);
  if (pl < 0 || (size_t)pl >= sizeof prefix) return 0;
  DIR *dp = opendir(dir);
  if (!dp) return 0;
  const long self = (long)getpid();
  int removed = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    if (strncmp(de->d_name, prefix, (size_t)pl) != 0) continue;
    const char *s = de->d_name + pl;
    char *end;
    errno = 0;
    long pid = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno || pid <= 0 || pid > INT32_MAX) continue;
    int dead = pid == self || !pid_alive(pid);
    if (dead && unlinkat(dirfd(dp), de->d_name, 0) == 0) removed++;
  }
  closedir(dp);
  return removed;
}

/* A mapping, not a failure: the callers record the reason with the status (§6 "Errors"). */
la_status la_write_status(int e) {
  switch (e) {
  case ENOENT:
  case ENOTDIR:
  case EACCES:
  case EPERM:
  case EROFS:
  case EISDIR:
  case ENAMETOOLONG:
  case ELOOP:
  case EEXIST:
    return LA_ERR_IO;
  default:
    return LA_ERR_WRITE;
  }
}

la_status la_output_check(const char *path, int force) {
  LA_CHECK(path && *path, LA_ERR_ARG, "invalid argument: no output path");
  struct stat sb;
  LA_CHECK(!(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)), LA_ERR_IO, "%s: is a directory", path);
  LA_CHECK(force || lstat(path, &sb) != 0, LA_ERR_EXISTS, "%s: exists (use --force to overwrite)", path);
  la_tmp_sweep(path);
  char tmp[4200], dir[4096];
  folder_of(path, dir, sizeof dir);
  LA_CHECK(la_tmp_name(path, (long)getpid(), tmp, sizeof tmp), LA_ERR_ARG, "%s: path too long", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    return la_error(la_write_status(e), "%s: cannot create a file in %s: %s", path, dir, strerror(e));
  }
  close(fd);
  unlink(tmp);
  return LA_OK;
}

/* write() until n bytes or an error (errno set; a zero-byte write is EIO). */
static int write_all(int fd, const void *src, size_t n) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : n - done;
    ssize_t r = write(fd, (const char *)src + done, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return 0;
    if (r == 0) return errno = EIO, 0;
    done += (size_t)r;
  }
  return 1;
}

la_status la_write_file(const char *path, const void *a, size_t na, const void *b, size_t nb,
                        int force) {
  LA_CHECK(path && *path, LA_ERR_ARG, "invalid argument: no path");
  struct stat sb;
  LA_CHECK(force || lstat(path, &sb) != 0, LA_ERR_EXISTS, "%s: exists (use --force to overwrite)", path);
  size_t tl = strlen(path) + 32;
  char *tmp = la_malloc(tl);
  LA_CHECK(tmp, LA_ERR_NOMEM, "%s: out of memory for its temporary name", path);
  la_tmp_name(path, (long)getpid(), tmp, tl);
  la_tmp_sweep(path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    la_error(la_write_status(e), "%s: cannot create the temporary file %s: %s", path, tmp, strerror(e));
    free(tmp);
    return la_write_status(e);
  }
  int e = 0;
  const char *what = NULL;
  if (!write_all(fd, a, na) || (b && !write_all(fd, b, nb)) || fsync(fd) != 0)
    what = "cannot write", e = errno;
  if (close(fd) != 0 && !what) what = "cannot write", e = errno;
  if (!what && rename(tmp, path) != 0)
    what = "cannot rename the temporary file into place", e = errno;
  la_status st = LA_OK;
  if (what) {
    unlink(tmp); /* the first error is the one reported */
    st = la_error(la_write_status(e), "%s: %s: %s", path, what, strerror(e));
  }
  free(tmp);
  return st;
}
