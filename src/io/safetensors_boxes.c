/* Box reads of an open safetensors file (dt.checkpoint's load): the bytes of a box go from
 * the file straight into the destination's storage.  A box is cut into runs, the longest
 * pieces contiguous in both the file and the destination.  Two ways to read them:
 * - preadv: runs in file order are gathered into one preadv each (a gap under GAP_MAX between
 *   two runs is read into a scratch buffer rather than costing a syscall per run); a dtype
 *   change goes through a bounded staging buffer, converted as copy_ converts.
 * - mmap: the file is mapped (one mapping per file shared by the process's threads, after a
 *   size check: file_map.c) and each run copied (or converted) out of the mapping, so only
 *   the bytes kept are copied; the copies are guarded against a SIGBUS from a file shortened
 *   meanwhile.
 * The rule (use_map): mmap for a box that keeps under MAP_KEEP_MAX of the bytes it spans
 * in short runs (a strided reshard: Shard(i) saved, Shard(j) loaded), where preadv would read
 * the gaps through or make a syscall per run, when its span is in the page cache (sampled
 * with mincore: from the disk the I/O is the cost, and preadv's large requests read ahead
 * best); preadv for the rest: long runs are copied by the kernel at the same speed without
 * page faults.  Work is cut into items of about ITEM_BYTES, run on the rank's
 * intra-op threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* preadv */
#endif
#include "base/error.h"
#include "base/thread_pool.h"
#include "io/file_map.h"
#include "io/safetensors.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define GAP_MAX (64 * 1024)        /* gaps between runs up to this are read through, not skipped */
#define SEG_BYTES (4 << 20)        /* a long run is read in segments of at most this */
#define ITEM_BYTES (8 << 20)       /* the useful bytes of one work item (the threads' unit) */
#define BATCH_BYTES (16 << 20)     /* the most one preadv covers, gaps included */
#define BATCH_IOV 1024             /* iovecs per preadv (IOV_MAX on Linux) */
#define MAP_KEEP_MAX 0.55          /* mmap a box keeping under this fraction of its span ... */
#define MAP_RUN_MAX (64 * 1024)    /* ... in runs shorter than this (bytes) */

/* A box's geometry: dims [0, k) iterate over runs of `run` elements, each cut in segments. */
typedef struct {
  const dt_safetensors_box *box;
  const dt_safetensors_entry *e;
  int k;
  int64_t run, seg, segs_per_run, nsegs;
  int64_t sstride[DT_MAX_DIMS];
  size_t fel, del; /* element sizes: file, destination */
  int64_t first, last; /* the box's file span: offsets of its first byte and one past its last */
  dt_file_map map;     /* the span mapped (mmap reads), else empty */
} box_plan;

typedef struct {
  int plan;
  int64_t seg_begin, seg_end;
} work_item;

/* the reads gathered for one preadv, and the conversions to do after it */
typedef struct {
  const box_plan *p;
  int fd;
  struct iovec iov[BATCH_IOV];
  int niov;
  int64_t start, end; /* file range */
  char *scratch;      /* GAP_MAX bytes, written by gaps and never read */
  char *stage;        /* cast: the file's bytes before conversion */
  size_t staged, stage_cap;
  char *fix_dst[BATCH_IOV];
  size_t fix_at[BATCH_IOV];
  int64_t fix_n[BATCH_IOV];
  int nfix;
} batch;

static int check_box(const dt_safetensors_box *b, const char *op) {
  const dt_safetensors_file *st = b->file;
  const dt_safetensors_entry *e = &st->entries[b->index];
  const dt_tensor *dst = b->dst;
  if (dst->ndim != e->ndim)
    return dt_error("%s: %s: tensor '%s': the file holds %d dims, the destination has %d", op, st->path, e->name,
                    e->ndim, dst->ndim);
  if (dt_tensor_device(dst) != DT_HOST)
    return dt_error("%s: %s: tensor '%s': the destination must be a host tensor", op, st->path, e->name);
  for (int d = 0; d < e->ndim; d++) {
    const int64_t *s = b->src_start, *n = b->size, *a = b->dst_start;
    if (n[d] < 0 || s[d] < 0 || a[d] < 0 || s[d] + n[d] > e->shape[d] || a[d] + n[d] > dst->shape[d])
      return dt_error("%s: %s: tensor '%s': dim %d: box [%lld, +%lld) does not fit the file's %lld or the destination's "
                      "[%lld, +%lld) of %lld", op, st->path, e->name, d + 1, (long long)s[d], (long long)n[d],
                      (long long)e->shape[d], (long long)a[d], (long long)n[d], (long long)dst->shape[d]);
  }
  return DT_OK;
}

static void plan_box(const dt_safetensors_box *b, box_plan *p) {
  const dt_safetensors_entry *e = &b->file->entries[b->index];
  int nd = e->ndim;
  p->box = b, p->e = e;
  p->fel = dt_dtype_size(e->dtype), p->del = dt_dtype_size(b->dst->dtype);
  dt_contiguous_strides(nd, e->shape, p->sstride);
  /* merge inner dims while the run so far is contiguous in both file and destination */
  int64_t run = 1, runs = 1;
  int k = nd;
  while (k > 0) {
    int d = k - 1;
    if (b->size[d] != 1 && (p->sstride[d] != run || b->dst->stride[d] != run)) break;
    run *= b->size[d], k--;
  }
  for (int d = 0; d < k; d++) runs *= b->size[d];
  if (run == 0) runs = 0;
  int64_t per = SEG_BYTES / (int64_t)(p->fel > p->del ? p->fel : p->del);
  p->k = k, p->run = run;
  p->seg = run < per ? run : per;
  p->segs_per_run = p->seg ? (run + p->seg - 1) / p->seg : 0;
  p->nsegs = runs * p->segs_per_run;
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < nd; d++)
    lo += b->src_start[d] * p->sstride[d], hi += (b->src_start[d] + b->size[d] - 1) * p->sstride[d];
  p->first = b->file->data_start + e->begin + lo * (int64_t)p->fel;
  p->last = p->nsegs ? b->file->data_start + e->begin + (hi + 1) * (int64_t)p->fel : p->first;
  p->map = (dt_file_map){0};
}

/* mmap or preadv for this box (the rule in the header comment) */
static int use_map(const box_plan *p, dt_box_read_mode mode) {
  if (p->nsegs == 0 || mode == DT_BOX_READ_PREAD) return 0;
  if (mode == DT_BOX_READ_MMAP) return 1;
  double kept = (double)(p->nsegs / p->segs_per_run) * (double)p->run * (double)p->fel;
  return kept < MAP_KEEP_MAX * (double)(p->last - p->first) && p->run * (int64_t)p->fel < MAP_RUN_MAX;
}

/* maps the box's span after checking the file still holds it (fstat) */
static int map_box(box_plan *p, const char *op) {
  const dt_safetensors_file *st = p->box->file;
  int rc = dt_file_map_range(fileno(st->f), p->first, p->last - p->first, &p->map);
  if (rc == DT_FILE_MAP_SHORT)
    return dt_error("%s: %s: tensor '%s': file is truncated (%lld bytes, the tensor's data ends at %lld)", op, st->path,
                    p->e->name, (long long)p->map.file_size, (long long)(st->data_start + p->e->end));
  if (rc) return dt_error("%s: %s: tensor '%s': mmap failed (%s)", op, st->path, p->e->name, strerror(rc));
  return DT_OK;
}

/* segment s of a box: its file offset, destination and element count */
static void segment(const box_plan *p, int64_t s, int64_t *at, char **dst, int64_t *n) {
  const dt_safetensors_box *b = p->box;
  int64_t r = s / p->segs_per_run, part = s % p->segs_per_run, so = 0, doff = 0;
  for (int d = p->e->ndim - 1; d >= 0; d--) { /* run r's index over dims [0, k), row-major */
    int64_t i = 0;
    if (d < p->k) i = r % b->size[d], r /= b->size[d];
    so += (b->src_start[d] + i) * p->sstride[d], doff += (b->dst_start[d] + i) * b->dst->stride[d];
  }
  int64_t first = part * p->seg;
  *n = p->run - first < p->seg ? p->run - first : p->seg;
  *at = b->file->data_start + p->e->begin + (so + first) * (int64_t)p->fel;
  *dst = (char *)dt_tensor_data(b->dst) + (doff + first) * (int64_t)p->del;
}

/* pread of every iovec (short reads continue; the iovecs are consumed) */
static int preadv_full(batch *bt, const char *op) {
  struct iovec *iov = bt->iov;
  int n = bt->niov;
  off_t off = (off_t)bt->start;
  const dt_safetensors_file *st = bt->p->box->file;
  while (n > 0) {
    ssize_t got = preadv(bt->fd, iov, n > BATCH_IOV ? BATCH_IOV : n, off);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return dt_error("%s: %s: tensor '%s': read failed (%s)", op, st->path, bt->p->e->name, strerror(errno));
    if (got == 0) return dt_error("%s: %s: tensor '%s': file is truncated", op, st->path, bt->p->e->name);
    off += got;
    while (n > 0 && (size_t)got >= iov->iov_len) got -= (ssize_t)iov->iov_len, iov++, n--;
    if (n > 0) iov->iov_base = (char *)iov->iov_base + got, iov->iov_len -= (size_t)got;
  }
  return DT_OK;
}

static void canonical_bool(char *p, int64_t n) { /* any non-zero byte is true: store 0/1 */
  for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

static int flush(batch *bt, const char *op) {
  if (bt->niov == 0) return DT_OK;
  int rc = preadv_full(bt, op);
  dt_dtype from = bt->p->e->dtype, to = bt->p->box->dst->dtype;
  for (int i = 0; rc == DT_OK && i < bt->nfix; i++) {
    if (from == to) { /* bool read in place */
      canonical_bool(bt->fix_dst[i], bt->fix_n[i]);
      continue;
    }
    if (from == DT_BOOL) canonical_bool(bt->stage + bt->fix_at[i], bt->fix_n[i]);
    dt_convert_elements(bt->fix_dst[i], to, bt->stage + bt->fix_at[i], from, bt->fix_n[i]);
  }
  bt->niov = bt->nfix = 0, bt->staged = 0;
  return rc;
}

/* adds n elements at file offset `at` for destination dst */
static int add(batch *bt, int64_t at, char *dst, int64_t n, const char *op) {
  const box_plan *p = bt->p;
  int cast = p->e->dtype != p->box->dst->dtype, fix = cast || p->e->dtype == DT_BOOL;
  size_t bytes = (size_t)n * p->fel;
  if (bt->niov > 0 && (at < bt->end || at - bt->end > GAP_MAX || bt->niov + 2 > BATCH_IOV ||
                       at + (int64_t)bytes - bt->start > BATCH_BYTES || (cast && bt->staged + bytes > bt->stage_cap)))
    if (flush(bt, op) != DT_OK) return DT_ERR;
  if (bt->niov == 0) bt->start = bt->end = at;
  if (at > bt->end) {
    if (!bt->scratch && !(bt->scratch = malloc(GAP_MAX))) return dt_error("%s: out of memory", op);
    bt->iov[bt->niov++] = (struct iovec){bt->scratch, (size_t)(at - bt->end)};
  }
  char *into = cast ? bt->stage + bt->staged : dst;
  if (fix) bt->fix_dst[bt->nfix] = dst, bt->fix_at[bt->nfix] = bt->staged, bt->fix_n[bt->nfix++] = n;
  if (cast) bt->staged += bytes;
  bt->iov[bt->niov++] = (struct iovec){into, bytes};
  bt->end = at + (int64_t)bytes;
  return DT_OK;
}

/* a work item of a mapped box: every segment copied (or converted) out of the mapping */
typedef struct {
  const box_plan *p;
  const work_item *w;
} mapped_item;

static void copy_mapped(void *arg) { /* guarded: no locks, no allocation */
  const mapped_item *m = arg;
  const box_plan *p = m->p;
  dt_dtype from = p->e->dtype, to = p->box->dst->dtype;
  for (int64_t s = m->w->seg_begin; s < m->w->seg_end; s++) {
    int64_t at, n;
    char *dst;
    segment(p, s, &at, &dst, &n);
    const char *src = p->map.data + (at - p->first);
    if (from == to) {
      memcpy(dst, src, (size_t)n * p->fel);
      if (from == DT_BOOL) canonical_bool(dst, n);
    } else if (from != DT_BOOL && (uintptr_t)src % p->fel == 0) {
      dt_convert_elements(dst, to, src, from, n);
    } else {
      /* in pieces through an aligned stack buffer: bool bytes made 0/1 before conversion, and
       * elements the file holds at an offset that is not a multiple of their size (the
       * mapping is the file's bytes: a typed load there is misaligned) */
      _Alignas(16) char piece[4096];
      int64_t per = (int64_t)sizeof piece / (int64_t)p->fel;
      for (int64_t i = 0; i < n; i += per) {
        int64_t c = n - i < per ? n - i : per;
        memcpy(piece, src + i * (int64_t)p->fel, (size_t)(c * (int64_t)p->fel));
        if (from == DT_BOOL) canonical_bool(piece, c);
        dt_convert_elements(dst + i * (int64_t)p->del, to, piece, from, c);
      }
    }
  }
}

static int run_mapped(const box_plan *p, const work_item *w, const char *op) {
  mapped_item m = {p, w};
  int rc = dt_file_map_guarded(&p->map, copy_mapped, &m);
  if (rc == 0) return DT_OK;
  if (rc == DT_FILE_MAP_SIGBUS)
    return dt_error("%s: %s: tensor '%s': file is truncated or unreadable (SIGBUS reading its mapping: shortened "
                    "during the load?)", op, p->box->file->path, p->e->name);
  return dt_error("%s: %s: tensor '%s': cannot install the SIGBUS handler (%s)", op, p->box->file->path, p->e->name,
                  strerror(errno));
}

static int run_item(const box_plan *p, const work_item *w, const char *op) {
  if (p->map.base) return run_mapped(p, w, op);
  const dt_safetensors_box *b = p->box;
  const dt_safetensors_entry *e = p->e;
  batch *bt = malloc(sizeof *bt);
  if (!bt) return dt_error("%s: out of memory", op);
  bt->p = p, bt->fd = fileno(b->file->f), bt->niov = bt->nfix = 0, bt->scratch = NULL, bt->staged = 0;
  bt->stage = NULL, bt->stage_cap = 0;
  if (e->dtype != b->dst->dtype) {
    int64_t want = (w->seg_end - w->seg_begin) * p->seg * (int64_t)p->fel;
    bt->stage_cap = (size_t)(want < ITEM_BYTES ? want : ITEM_BYTES);
    if (bt->stage_cap < (size_t)p->seg * p->fel) bt->stage_cap = (size_t)p->seg * p->fel;
    if (!(bt->stage = malloc(bt->stage_cap))) return free(bt), dt_error("%s: out of memory", op);
  }
  int rc = DT_OK;
  for (int64_t s = w->seg_begin; rc == DT_OK && s < w->seg_end; s++) {
    int64_t at, n;
    char *dst;
    segment(p, s, &at, &dst, &n);
    rc = add(bt, at, dst, n, op);
  }
  if (rc == DT_OK) rc = flush(bt, op);
  free(bt->scratch), free(bt->stage), free(bt);
  return rc;
}

typedef struct {
  const box_plan *plans;
  const work_item *items;
  const char *op;
  pthread_mutex_t lock;
  int64_t failed; /* the lowest failing item, or -1 */
  char msg[1024];
} read_job;

static void read_piece(int64_t begin, int64_t end, void *ctx) {
  read_job *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    if (run_item(&j->plans[j->items[i].plan], &j->items[i], j->op) == DT_OK) continue;
    pthread_mutex_lock(&j->lock); /* the message is thread-local: keep the lowest item's */
    if (j->failed < 0 || i < j->failed) j->failed = i, snprintf(j->msg, sizeof j->msg, "%s", dt_error_message());
    pthread_mutex_unlock(&j->lock);
    return;
  }
}

int dt_safetensors_read_boxes_with(const dt_safetensors_box *boxes, int n, const char *op,
                                   const dt_safetensors_read_opts *opts) {
  dt_box_read_mode mode = opts ? opts->mode : DT_BOX_READ_AUTO;
  for (int i = 0; i < n; i++)
    if (check_box(&boxes[i], op) != DT_OK) return DT_ERR;
  box_plan *plans = calloc((size_t)n + 1, sizeof *plans);
  if (!plans) return dt_error("%s: out of memory", op);
  int64_t nitems = 0;
  for (int i = 0; i < n; i++) {
    plan_box(&boxes[i], &plans[i]);
    int64_t seg_bytes = plans[i].seg * (int64_t)plans[i].fel, per = seg_bytes ? ITEM_BYTES / seg_bytes : 1;
    if (per < 1) per = 1;
    nitems += (plans[i].nsegs + per - 1) / per;
  }
  int rc = DT_OK;
  for (int i = 0; rc == DT_OK && i < n; i++) {
    if (!use_map(&plans[i], mode)) continue;
    rc = map_box(&plans[i], op);
    /* from the disk the I/O is the cost: preadv's large requests read ahead best */
    if (rc == DT_OK && mode == DT_BOX_READ_AUTO && !dt_file_map_resident(&plans[i].map, 0, plans[i].last - plans[i].first))
      dt_file_unmap(&plans[i].map);
  }
  work_item *items = rc == DT_OK ? malloc(sizeof *items * (size_t)(nitems + 1)) : NULL;
  if (!items) {
    for (int i = 0; i < n; i++) dt_file_unmap(&plans[i].map);
    free(plans);
    return rc == DT_OK ? dt_error("%s: out of memory", op) : DT_ERR;
  }
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    int64_t seg_bytes = plans[i].seg * (int64_t)plans[i].fel, per = seg_bytes ? ITEM_BYTES / seg_bytes : 1;
    if (per < 1) per = 1;
    for (int64_t s = 0; s < plans[i].nsegs; s += per)
      items[at++] = (work_item){i, s, s + per < plans[i].nsegs ? s + per : plans[i].nsegs};
  }
  for (int i = 0; i < n; i++) { /* a write in place: autograd's saved values see it (as copy_) */
    dt_storage *s = boxes[i].dst->storage;
    s->version++, s->last_write = "checkpoint read";
  }
  if (opts && opts->after_map) opts->after_map(opts->ctx);
  read_job j = {plans, items, op, PTHREAD_MUTEX_INITIALIZER, -1, {0}};
  dt_parallel_for(nitems, 1, read_piece, &j);
  pthread_mutex_destroy(&j.lock);
  for (int i = 0; i < n; i++) dt_file_unmap(&plans[i].map);
  free(items), free(plans);
  return j.failed < 0 ? DT_OK : dt_error("%s", j.msg);
}

int dt_safetensors_read_boxes(const dt_safetensors_box *boxes, int n, const char *op) {
  return dt_safetensors_read_boxes_with(boxes, n, op, NULL);
}

int dt_safetensors_read_box(const dt_safetensors_file *st, int index, const int64_t *src_start, const int64_t *size,
                            dt_tensor *dst, const int64_t *dst_start, const char *op) {
  dt_safetensors_box b = {.file = st, .index = index, .dst = dst};
  int nd = st->entries[index].ndim;
  if (dst->ndim != nd) return check_box(&b, op);
  for (int d = 0; d < nd; d++)
    b.src_start[d] = src_start[d], b.size[d] = size[d], b.dst_start[d] = dst_start[d];
  return dt_safetensors_read_boxes(&b, 1, op);
}
