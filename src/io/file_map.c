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
#include <sys/mman.h>
#include <unistd.h>

int dt_file_map_range(int fd, int64_t offset, int64_t length, dt_file_map *m) {
  *m = (dt_file_map){NULL, 0, NULL};
  if (length <= 0 || offset < 0) return length == 0 && offset >= 0 ? 0 : EINVAL;
  long page = sysconf(_SC_PAGESIZE);
  int64_t start = offset - offset % page;
  size_t len = (size_t)(offset - start + length);
  void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
  if (p == MAP_FAILED) return errno;
  /* sequential: larger read-ahead from the disk; pages from the page cache are unaffected */
  (void)madvise(p, len, MADV_SEQUENTIAL);
  m->base = p, m->length = len, m->data = (const char *)p + (offset - start);
  return 0;
}

void dt_file_unmap(dt_file_map *m) {
  if (m->base) munmap(m->base, m->length);
  *m = (dt_file_map){NULL, 0, NULL};
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
