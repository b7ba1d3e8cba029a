/* Shard files, marker files and the directory swap of a sharded checkpoint (see the header). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2 */
#endif
#include "io/checkpoint_files.h"
#include "base/error.h"
#include "io/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MARKER ".done."
#define COMMIT_LOCK ".commit"

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (p) memcpy(p, dir, a), p[a] = '/', memcpy(p + a + 1, name, b + 1);
  return p;
}

int dt_dir_remove(const char *path, const char *op) {
  DIR *d = opendir(path);
  if (!d) return errno == ENOENT ? DT_OK : dt_error("%s: %s: cannot open directory (%s)", op, path, strerror(errno));
  struct dirent *e;
  int rc = DT_OK;
  while (rc == DT_OK && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *p = join(path, e->d_name);
    if (!p) rc = dt_error("%s: out of memory", op);
    else if (unlink(p) != 0 && errno != ENOENT) rc = dt_error("%s: %s: cannot remove (%s)", op, p, strerror(errno));
    free(p);
  }
  closedir(d);
  if (rc == DT_OK && rmdir(path) != 0 && errno != ENOENT)
    rc = dt_error("%s: %s: cannot remove directory (%s)", op, path, strerror(errno));
  return rc;
}

int dt_dir_make_fresh(const char *path, const char *op) {
  if (dt_dir_remove(path, op) != DT_OK) return DT_ERR;
  if (mkdir(path, 0755) != 0) return dt_error("%s: %s: cannot create directory (%s)", op, path, strerror(errno));
  return DT_OK;
}

static void sync_dir(const char *path) { /* the renames and new names reach the disk */
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) fsync(fd), close(fd);
}

int dt_dir_commit(const char *tmp, const char *path, const char *op) {
  sync_dir(tmp);
  if (rename(tmp, path) == 0) goto done; /* no previous checkpoint (or an empty directory) */
  if (errno != EEXIST && errno != ENOTEMPTY)
    return dt_error("%s: %s: cannot rename %s into place (%s)", op, path, tmp, strerror(errno));
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) != 0) {
    /* no atomic swap here: the old one steps aside first, so one of the two always exists */
    char *old = malloc(strlen(tmp) + 5);
    if (!old) return dt_error("%s: out of memory", op);
    sprintf(old, "%s.old", tmp);
    int rc = rename(path, old) == 0 && rename(tmp, path) == 0 ? DT_OK : DT_ERR;
    if (rc != DT_OK) rc = dt_error("%s: %s: cannot swap in %s (%s)", op, path, tmp, strerror(errno));
    else rc = dt_dir_remove(old, op);
    free(old);
    return rc;
  }
  { /* tmp now holds the previous checkpoint: move it off the tmp path before removing it, so a
     * rank still finishing its marker step finds no directory there (not the old checkpoint) */
    char *gone = malloc(strlen(tmp) + 48);
    if (!gone) return dt_error("%s: out of memory", op);
    sprintf(gone, "%s.old.%ld.%ld", tmp, (long)getpid(), (long)syscall(SYS_gettid));
    int rc = rename(tmp, gone) == 0 ? dt_dir_remove(gone, op)
                                    : dt_error("%s: %s: cannot move the previous checkpoint aside (%s)", op, tmp, strerror(errno));
    free(gone);
    if (rc != DT_OK) return DT_ERR;
  }
done : {
  char *parent = strdup(path), *slash = parent ? strrchr(parent, '/') : NULL;
  if (parent) sync_dir(slash ? (slash == parent ? "/" : (*slash = '\0', parent)) : ".");
  free(parent);
}
  return DT_OK;
}

struct dt_shard_writer {
  dt_shard_job job; /* strings and arrays owned */
  const char *op;
  pthread_t thread;
  int async, joined, rc;
  char msg[1024];
};

/* How many ranks have left their marker; -1 when the directory is gone (committed). */
static int count_markers(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, MARKER, strlen(MARKER)) == 0) n++;
  closedir(d);
  return n;
}

static int remove_markers(const char *dir, int world, const char *op) {
  char name[64];
  for (int r = 0; r < world; r++) {
    snprintf(name, sizeof name, MARKER "%d", r);
    char *p = join(dir, name);
    if (!p) return dt_error("%s: out of memory", op);
    unlink(p);
    free(p);
  }
  return DT_OK;
}

static void remove_lock(const char *dir) {
  char *p = join(dir, COMMIT_LOCK);
  if (p) unlink(p);
  free(p);
}

/* Creates dir/name with O_EXCL: 1 when this call made it, 0 when it existed. */
static int create_excl(const char *dir, const char *name, const char *op) {
  char *p = join(dir, name);
  if (!p) return dt_error("%s: out of memory", op);
  int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
  int e = errno;
  free(p);
  if (fd >= 0) return close(fd), 1;
  if (e == EEXIST) return 0;
  return dt_error("%s: %s: cannot create %s (%s)", op, dir, name, strerror(e));
}

static int write_text(const char *dir, const char *name, const char *text, const char *op) {
  char *p = join(dir, name);
  if (!p) return dt_error("%s: out of memory", op);
  dt_file_writer w;
  int rc = dt_file_writer_open(&w, p, op);
  if (rc == DT_OK) rc = dt_file_write(&w, text, strlen(text));
  if (rc == DT_OK) rc = dt_file_writer_commit(&w);
  else dt_file_writer_abort(&w);
  free(p);
  return rc;
}

static int run_job(const dt_shard_job *j, const char *op) {
  if (j->file) {
    char *p = join(j->tmp_dir, j->file);
    if (!p) return dt_error("%s: out of memory", op);
    int rc = dt_safetensors_save(p, &j->shard);
    free(p);
    if (rc != DT_OK) return dt_error_prefix("%s", op);
  }
  if (j->index_name && write_text(j->tmp_dir, j->index_name, j->index_text, op) != DT_OK) return DT_ERR;
  char marker[64];
  snprintf(marker, sizeof marker, MARKER "%d", j->rank);
  if (create_excl(j->tmp_dir, marker, op) < 0) return DT_ERR;
  if (count_markers(j->tmp_dir) != j->world) return DT_OK; /* a later rank commits */
  int won = create_excl(j->tmp_dir, COMMIT_LOCK, op);
  if (won <= 0) return won < 0 && count_markers(j->tmp_dir) >= 0 ? DT_ERR : DT_OK;
  /* The lock is ours, but of which directory?  Another rank that saw every marker too may have
   * committed already, swapping the previous checkpoint onto the tmp path (it has no markers):
   * then there is nothing left to do. */
  if (count_markers(j->tmp_dir) != j->world) return remove_lock(j->tmp_dir), DT_OK;
  if (remove_markers(j->tmp_dir, j->world, op) != DT_OK) return DT_ERR;
  int rc = dt_dir_commit(j->tmp_dir, j->final_dir, op); /* the lock goes along: no rank takes it again */
  if (rc == DT_OK) remove_lock(j->final_dir);
  return rc;
}

/* An async writer runs only on a core that would otherwise idle (SCHED_IDLE, no privilege
 * needed; nice 19 where refused) and its disk requests wait for everyone else's (the idle I/O
 * class): training threads first. */
static void lower_priority(void) {
#ifdef __linux__
  struct sched_param none = {0};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) != 0)
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#ifdef SYS_ioprio_set
  enum { IOPRIO_WHO_PROCESS = 1, IOPRIO_CLASS_IDLE = 3, IOPRIO_CLASS_SHIFT = 13 };
  syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT);
#endif
#endif
}

static void *thread_main(void *arg) {
  dt_shard_writer *w = arg;
  if (w->async) lower_priority();
  w->rc = run_job(&w->job, w->op);
  if (w->rc != DT_OK) snprintf(w->msg, sizeof w->msg, "%s", dt_error_message());
  return NULL;
}

static void free_job(dt_shard_job *j) {
  free((char *)j->tmp_dir), free((char *)j->final_dir), free((char *)j->file);
  free((char *)j->index_name), free((char *)j->index_text);
  for (int i = 0; i < j->shard.n; i++) {
    free(j->shard.names[i]);
    if (j->shard.tensors[i]) dt_tensor_release(j->shard.tensors[i]);
  }
  for (int i = 0; i < j->shard.nmeta; i++) free(j->shard.meta_keys[i]), free(j->shard.meta_values[i]);
  free(j->shard.names), free(j->shard.tensors), free(j->shard.meta_keys), free(j->shard.meta_values);
  memset(j, 0, sizeof *j);
}

static char *dup_or_null(const char *s, int *ok) {
  if (!s) return NULL;
  char *c = strdup(s);
  if (!c) *ok = 0;
  return c;
}

/* a deep copy of the job, so the caller's strings may go away while the thread runs */
static int copy_job(dt_shard_job *d, const dt_shard_job *s) {
  int ok = 1;
  *d = *s;
  d->tmp_dir = dup_or_null(s->tmp_dir, &ok), d->final_dir = dup_or_null(s->final_dir, &ok);
  d->file = dup_or_null(s->file, &ok), d->index_name = dup_or_null(s->index_name, &ok);
  d->index_text = dup_or_null(s->index_text, &ok);
  int n = s->shard.n, m = s->shard.nmeta;
  d->shard.n = d->shard.nmeta = 0;
  d->shard.names = calloc((size_t)n + 1, sizeof(char *));
  d->shard.tensors = calloc((size_t)n + 1, sizeof(dt_tensor *));
  d->shard.meta_keys = calloc((size_t)m + 1, sizeof(char *));
  d->shard.meta_values = calloc((size_t)m + 1, sizeof(char *));
  if (!d->shard.names || !d->shard.tensors || !d->shard.meta_keys || !d->shard.meta_values) return DT_ERR;
  for (int i = 0; i < n; i++) {
    d->shard.names[i] = dup_or_null(s->shard.names[i], &ok);
    dt_tensor_retain(d->shard.tensors[i] = s->shard.tensors[i]);
    d->shard.n = i + 1;
  }
  for (int i = 0; i < m; i++) {
    d->shard.meta_keys[i] = dup_or_null(s->shard.meta_keys[i], &ok);
    d->shard.meta_values[i] = dup_or_null(s->shard.meta_values[i], &ok);
    d->shard.nmeta = i + 1;
  }
  return ok ? DT_OK : DT_ERR;
}

dt_shard_writer *dt_shard_writer_start(const dt_shard_job *job, int async, const char *op) {
  dt_shard_writer *w = calloc(1, sizeof *w);
  if (!w) return dt_error("%s: out of memory", op), NULL;
  w->op = op, w->async = async, w->joined = !async;
  if (copy_job(&w->job, job) != DT_OK) {
    free_job(&w->job), free(w);
    return dt_error("%s: out of memory", op), NULL;
  }
  if (!async) {
    thread_main(w);
    return w;
  }
  int e = pthread_create(&w->thread, NULL, thread_main, w);
  if (e != 0) {
    free_job(&w->job), free(w);
    return dt_error("%s: cannot start the writer thread (%s)", op, strerror(e)), NULL;
  }
  return w;
}

int dt_shard_writer_wait(dt_shard_writer *w) {
  if (!w->joined) pthread_join(w->thread, NULL), w->joined = 1;
  return w->rc == DT_OK ? DT_OK : dt_error("%s", w->msg);
}

void dt_shard_writer_free(dt_shard_writer *w) {
  if (!w) return;
  if (!w->joined) pthread_join(w->thread, NULL);
  free_job(&w->job); /* tensors released here, on the owner's thread */
  free(w);
}
