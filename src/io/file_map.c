/* Read-only file mappings and SIGBUS-guarded reads of them (file_map.h).
 *
 * Why a guard rather than checks alone: the file's size is checked (fstat) before mapping,
 * but another program may shorten the file while it is read, and a read of a mapped page
 * past the new end is a SIGBUS, which would kill the process.  Reading through pread instead
 * would see a short read, but costs a copy of every byte spanned; so the copy runs under a
 * per-thread sigsetjmp and a process-wide SIGBUS handler that jumps back when the faulting
 * address lies in the mapping the thread is reading (a failing disk under a mapping also
 * raises SIGBUS: the same error).  Any other SIGBUS is handed to the handler installed
 * before ours.  The handler is (re)installed on each guarded call if another library
 * replaced it meanwhile (MPI installs its own at start-up). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_* and MADV_* */
#endif
#include "io/file_map.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Mappings are shared by the threads of the process: ranks that run as threads read the same
 * files, and one mapping whose pages one rank has faulted in costs the others no page fault
 * (setting up the page tables is most of a strided read's cost from the page cache).  A
 * mapping is of the whole file, keyed by the file's identity and version (device, inode,
 * size, mtime: a rewritten file gets a mapping of its own), and unmapped with its last user. */
typedef struct shared_map {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  char *base;
  size_t length;
  int users;
  struct shared_map *next;
} shared_map;

static shared_map *maps;
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

int dt_file_map_range(int fd, int64_t offset, int64_t length, dt_file_map *m) {
  *m = (dt_file_map){0};
  struct stat sb;
  if (offset < 0 || length < 0) return EINVAL;
  if (fstat(fd, &sb) != 0) return errno;
  m->file_size = (int64_t)sb.st_size;
  if ((int64_t)sb.st_size < offset + length) return DT_FILE_MAP_SHORT;
  if (length == 0) return 0;
  pthread_mutex_lock(&maps_lock);
  shared_map *e = maps;
  while (e && !(e->dev == sb.st_dev && e->ino == sb.st_ino && e->size == sb.st_size &&
                e->mtime.tv_sec == sb.st_mtim.tv_sec && e->mtime.tv_nsec == sb.st_mtim.tv_nsec))
    e = e->next;
  int rc = 0;
  if (!e) {
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) rc = errno;
    else if (!(e = calloc(1, sizeof *e))) munmap(p, (size_t)sb.st_size), rc = ENOMEM;
    if (rc == 0) {
      /* sequential: a larger read-ahead from the disk (pages in the page cache are mapped
       * around each fault either way) */
      (void)madvise(p, (size_t)sb.st_size, MADV_SEQUENTIAL);
      e->dev = sb.st_dev, e->ino = sb.st_ino, e->size = sb.st_size, e->mtime = sb.st_mtim;
      e->base = p, e->length = (size_t)sb.st_size, e->next = maps, maps = e;
    }
  }
  if (rc == 0) {
    e->users++;
    m->base = e->base, m->length = e->length, m->data = e->base + offset, m->shared = e;
  }
  pthread_mutex_unlock(&maps_lock);
  return rc;
}

int dt_file_map_resident(const dt_file_map *m, int64_t offset, int64_t length) {
  if (!m->base || length <= 0) return 1;
  long page = sysconf(_SC_PAGESIZE);
  enum { SAMPLES = 32 };
  for (int i = 0; i < SAMPLES; i++) {
    const char *at = m->data + offset + (length - 1) * i / (SAMPLES - 1);
    unsigned char in = 0;
    if (mincore((void *)(m->base + ((at - m->base) / page) * page), 1, &in) != 0 || !(in & 1)) return 0;
  }
  return 1;
}

void dt_file_unmap(dt_file_map *m) {
  shared_map *e = m->shared;
  *m = (dt_file_map){0};
  if (!e) return;
  pthread_mutex_lock(&maps_lock);
  if (--e->users == 0) {
    shared_map **at = &maps;
    while (*at != e) at = &(*at)->next;
    *at = e->next;
    munmap(e->base, e->length);
    free(e);
  }
  pthread_mutex_unlock(&maps_lock);
}

typedef struct {
  sigjmp_buf env;
  const char *lo, *hi;
} guard;

static _Thread_local guard *volatile current; /* the guarded read this thread is in, or NULL */
static struct sigaction previous;              /* the handler ours replaced */
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *info, void *uc) {
  guard *g = current;
  const char *at = info ? (const char *)info->si_addr : NULL;
  if (g && at >= g->lo && at < g->hi) {
    current = NULL;
    siglongjmp(g->env, 1);
  }
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(sig, info, uc);
  } else if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
    /* the default action: returning re-runs the faulting access, which now kills as it would have */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, NULL);
  } else {
    previous.sa_handler(sig);
  }
}

static int install(void) {
  pthread_mutex_lock(&install_lock);
  struct sigaction cur;
  int rc = sigaction(SIGBUS, NULL, &cur);
  if (rc == 0 && !((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)) {
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    previous = cur;
    rc = sigaction(SIGBUS, &ours, NULL);
  }
  pthread_mutex_unlock(&install_lock);
  return rc;
}

int dt_file_map_guarded(const dt_file_map *m, void (*fn)(void *), void *arg) {
  if (install() != 0) return -1;
  guard g;
  g.lo = m->base, g.hi = m->base ? m->base + m->length : NULL;
  if (sigsetjmp(g.env, 1)) return DT_FILE_MAP_SIGBUS; /* the mask is restored: SIGBUS unblocked again */
  current = &g;
  fn(arg);
  current = NULL;
  return 0;
}
