/* The collectives of a group whose ranks share a host, without an MPI data call: each rank
 * publishes its buffers' addresses with the fingerprint (dt_mpi_shm_agree_publish, the call's
 * only synchronisation before the data moves), reads its peers' blocks straight into its output
 * with process_vm_readv (Linux cross-memory attach, the single copy Open MPI's vader uses for
 * large messages), and returns once every peer has said it is done reading (step 1), since after
 * return the caller may overwrite its send buffer.  all_reduce adds a step in its middle: each
 * rank reduces its own slice of the count from every rank's send buffer (in rank order, through
 * dt_reduce_ops_apply), then reads the other slices from their owners, so every rank holds the
 * same bits.  The soundness argument is in doc/collectives.md ("The shared-memory data path"). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "comm/mpi_impl.h"
#include "kernels/cpu/reduce_ops.h"

/* bytes of each peer read per reduction step: 64 KiB chunks cost 2 ranks 1.38x Open MPI's
 * time at 1 MiB (a system call per chunk and peer), 1 MiB ones 0.95x */
#define REDUCE_CHUNK (1024 * 1024)
/* From this size (bytes of the call's larger buffer) the path beats the MPI call: below it
 * two synchronisations (published, done) cost more than Open MPI's one copy through its
 * shared-memory queues (doc/performance.md, "Collectives through process_vm_readv"). */
#define SHM_MIN_BYTES ((size_t)16 * 1024)

/* Where, on more than 2 ranks, Open MPI's call won (4 ranks on 2 cores, 2026-11-24): all_reduce
 * from 256 KiB to 4 MiB (three synchronisations of oversubscribed ranks: 0.80-0.89 of raw MPI
 * against 0.98-1.01), all_to_all from 4 MiB (0.62-0.73 against 0.87-0.91). */
static const struct {
  tc_kind kind;
  size_t from, to;
} mpi_ranges_many_ranks[] = {
    {TC_ALL_REDUCE, (size_t)256 << 10, (size_t)16 << 20},
    {TC_ALL_TO_ALL, (size_t)4 << 20, SIZE_MAX},
};
enum { STEP_REDUCED, STEP_DONE };

struct dt_mpi_shm_coll {
  dt_mpi_shm_agree *s;
  int n, me;
  int always; /* DTLUA_MPI_SHM=always: this path at every size (the specs' form) */
  char *tmp; /* n reduction chunks, allocated by the first reduction */
};

/* Reads bytes at the peer's src into dst, resuming after partial reads.  0 or an errno. */
static int read_span(int pid, void *dst, uintptr_t src, size_t bytes) {
  while (bytes > 0) {
    struct iovec l = {dst, bytes}, r = {(void *)src, bytes};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got <= 0) return got < 0 ? errno : EFAULT;
    dst = (char *)dst + got, src += (size_t)got, bytes -= (size_t)got;
  }
  return 0;
}

dt_mpi_shm_coll *dt_mpi_shm_coll_new(dt_mpi_shm_agree *s, MPI_Comm comm) {
  /* DTLUA_MPI_SHM, agreed at start-up (the same on every rank): 0 keeps every call on MPI */
  const char *setting = getenv("DTLUA_MPI_SHM");
  if (setting && strcmp(setting, "0") == 0) return NULL;
  int n = dt_mpi_shm_size(s), me = dt_mpi_shm_rank(s), peer = (me + 1) % n, pid, ok = 1;
  uintptr_t unused[2];
  dt_mpi_shm_peer(s, peer, unused, &pid);
  /* CMA may be forbidden (ptrace scope, seccomp, another pid namespace): read the peer's pid
   * from its own memory and compare it with what the window says */
  int64_t seen = 0;
  uintptr_t remote;
  const int64_t *here = dt_mpi_shm_pid(s, peer, &remote);
  if (read_span(pid, &seen, remote, sizeof seen) != 0 || seen != *here) ok = 0;
  dt_mpi_shm_coll *x = calloc(1, sizeof *x);
  ok = ok && x;
  int all_ok = 0;
  if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !all_ok) return free(x), NULL;
  x->s = s, x->n = n, x->me = me, x->always = setting && strcmp(setting, "always") == 0;
  return x;
}

int dt_mpi_shm_worth(const dt_mpi_shm_coll *x, tc_kind kind, size_t bytes) {
  if (!x) return 0;
  if (x->always) return 1;
  if (bytes < SHM_MIN_BYTES) return 0;
  for (size_t i = 0; x->n > 2 && i < sizeof mpi_ranges_many_ranks / sizeof mpi_ranges_many_ranks[0]; i++)
    if (kind == mpi_ranges_many_ranks[i].kind && bytes >= mpi_ranges_many_ranks[i].from && bytes < mpi_ranges_many_ranks[i].to)
      return 0;
  return 1;
}

void dt_mpi_shm_coll_free(dt_mpi_shm_coll *x) {
  if (x) free(x->tmp), free(x);
}

/* Rank r's published address k, plus off bytes, and its pid. */
static uintptr_t peer_addr(dt_mpi_shm_coll *x, int r, int k, size_t off, int *pid) {
  uintptr_t a[2];
  dt_mpi_shm_peer(x->s, r, a, pid);
  return a[k] + off;
}

/* Copies rank r's bytes at (address k + off) into dst: memmove for this rank's own. */
static void fetch(dt_mpi_shm_coll *x, dt_mpi_shm_run *run, int r, int k, size_t off, void *dst, size_t bytes) {
  if (bytes == 0 || run->err) return;
  int pid;
  uintptr_t src = peer_addr(x, r, k, off, &pid);
  if (r == x->me) {
    if ((void *)src != dst) memmove(dst, (const void *)src, bytes);
    return;
  }
  run->err = read_span(pid, dst, src, bytes);
  if (run->err) run->failed_rank = r;
}

/* Marks step k and waits for every rank's; non-zero when the call failed (run says why). */
static int step(dt_mpi_shm_coll *x, dt_mpi_shm_run *run, int k) {
  int peer_failed = -1;
  run->mpi_rc = dt_mpi_shm_step(x->s, k, run->err != 0, &peer_failed, run->w, run->deadline, &run->timed_out);
  if (run->mpi_rc != MPI_SUCCESS || run->timed_out) return 1;
  if (peer_failed >= 0 && !run->err) run->err = -1, run->failed_rank = peer_failed;
  return k == STEP_DONE && run->err != 0;
}

int dt_mpi_shm_all_gather(dt_mpi_shm_coll *x, void *recv, const size_t *counts, size_t esize, dt_mpi_shm_run *run) {
  size_t off = 0;
  for (int r = 0; r < x->n; r++) {
    fetch(x, run, r, 0, 0, (char *)recv + off * esize, counts[r] * esize);
    off += counts[r];
  }
  return step(x, run, STEP_DONE);
}

#define ROWS_PER_READ 512 /* local iovecs per process_vm_readv (IOV_MAX is 1024) */

/* Reads rank r's contiguous bytes (its address 0, from the start) into the rows of block b of
 * recv: one process_vm_readv scatters into up to ROWS_PER_READ rows.  Partial transfers stop
 * at an iovec's end (process_vm_readv(2)); the loop resumes there, or inside a row. */
static void fetch_rows(dt_mpi_shm_coll *x, dt_mpi_shm_run *run, int r, char *recv, const dt_comm_block *b,
                       size_t esize) {
  size_t row = b->cols * esize;
  if (run->err || !row || !b->rows) return;
  int pid;
  uintptr_t src = peer_addr(x, r, 0, 0, &pid);
  if (r == x->me) {
    for (size_t i = 0; i < b->rows; i++)
      memmove(recv + (b->offset + i * b->stride) * esize, (const char *)src + i * row, row);
    return;
  }
  struct iovec local[ROWS_PER_READ];
  size_t i = 0, done_in_row = 0; /* the next row, and the bytes of it already read */
  while (i < b->rows) {
    int k = 0;
    size_t want = 0;
    for (size_t j = i; j < b->rows && k < ROWS_PER_READ; j++, k++) {
      size_t skip = j == i ? done_in_row : 0;
      local[k] = (struct iovec){recv + (b->offset + j * b->stride) * esize + skip, row - skip};
      want += row - skip;
    }
    struct iovec remote = {(void *)(src + i * row + done_in_row), want};
    ssize_t got = process_vm_readv(pid, local, (unsigned long)k, &remote, 1, 0);
    if (got <= 0) {
      run->err = got < 0 ? errno : EFAULT, run->failed_rank = r;
      return;
    }
    size_t left = (size_t)got + done_in_row; /* bytes from the start of row i */
    i += left / row, done_in_row = left % row;
  }
}

int dt_mpi_shm_all_gather_blocks(dt_mpi_shm_coll *x, void *recv, const dt_comm_block *blocks, size_t esize,
                                 dt_mpi_shm_run *run) {
  for (int k = 0; k < x->n; k++) {
    int r = (x->me + 1 + k) % x->n; /* from the next rank on, so the ranks do not all read one peer */
    fetch_rows(x, run, r, recv, &blocks[r], esize);
  }
  return step(x, run, STEP_DONE);
}

int dt_mpi_shm_all_to_all(dt_mpi_shm_coll *x, void *recv, size_t count, size_t esize, dt_mpi_shm_run *run) {
  size_t block = count * esize;
  for (int r = 0; r < x->n; r++) fetch(x, run, r, 0, (size_t)x->me * block, (char *)recv + (size_t)r * block, block);
  return step(x, run, STEP_DONE);
}

int dt_mpi_shm_broadcast(dt_mpi_shm_coll *x, void *buf, size_t bytes, int root, dt_mpi_shm_run *run) {
  if (x->me != root) fetch(x, run, root, 0, 0, buf, bytes);
  return step(x, run, STEP_DONE);
}

/* out[0..count) = every rank's elements at (address k + off bytes), reduced in rank order,
 * chunk by chunk (out may be this rank's own input: each element is read before written). */
static void reduce_slice(dt_mpi_shm_coll *x, dt_mpi_shm_run *run, int k, size_t off, void *out, size_t count,
                         dt_dtype dt, dt_reduce_op op) {
  size_t es = dt_dtype_size(dt), per = REDUCE_CHUNK / es;
  const void *in[x->n];
  if (count > 0 && !x->tmp && !(x->tmp = malloc((size_t)x->n * REDUCE_CHUNK)) && !run->err)
    run->err = ENOMEM, run->failed_rank = x->me;
  for (size_t i = 0; i < count && !run->err; i += per) {
    size_t m = count - i < per ? count - i : per;
    for (int r = 0; r < x->n; r++) {
      int pid;
      char *chunk = x->tmp + (size_t)r * REDUCE_CHUNK;
      if (r == x->me) in[r] = (const void *)peer_addr(x, r, k, off + i * es, &pid);
      else fetch(x, run, r, k, off + i * es, chunk, m * es), in[r] = chunk;
    }
    if (!run->err) dt_reduce_ops_apply(op, dt, (char *)out + i * es, in, x->n, m);
  }
}

int dt_mpi_shm_reduce_scatter(dt_mpi_shm_coll *x, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                              dt_mpi_shm_run *run) {
  reduce_slice(x, run, 0, (size_t)x->me * count * dt_dtype_size(dt), recv, count, dt, op);
  return step(x, run, STEP_DONE);
}

/* Rank r owns the r-th of n near-equal slices of the count (the first count % n one longer). */
static size_t slice_start(size_t count, int r, int n) {
  size_t q = count / (size_t)n, extra = count % (size_t)n;
  return (size_t)r * q + ((size_t)r < extra ? (size_t)r : extra);
}

int dt_mpi_shm_all_reduce(dt_mpi_shm_coll *x, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                          dt_mpi_shm_run *run) {
  size_t es = dt_dtype_size(dt), lo = slice_start(count, x->me, x->n), hi = slice_start(count, x->me + 1, x->n);
  /* the own slice of recv: no peer reads it from the send buffers (each reads its own slice) */
  reduce_slice(x, run, 0, lo * es, (char *)recv + lo * es, hi - lo, dt, op);
  /* in place, recv is the send buffer its slices' owners read until they have all reduced */
  if (step(x, run, STEP_REDUCED)) return 1;
  for (int r = 0; r < x->n; r++) {
    size_t a = slice_start(count, r, x->n), b = slice_start(count, r + 1, x->n);
    if (r != x->me) fetch(x, run, r, 1, a * es, (char *)recv + a * es, (b - a) * es);
  }
  return step(x, run, STEP_DONE);
}
