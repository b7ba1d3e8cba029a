/* The fingerprint agreement through shared memory, for a group whose ranks all run on one host
 * (the usual mpirun on one machine): each rank publishes (call number, fingerprint) in a slot
 * of an MPI shared-memory window and reads its peers' slots.  A store and a few loads of cache
 * lines instead of a message per round: the agreement costs about a quarter of the
 * point-to-point one (doc/performance.md, "The MPI fingerprint").
 *
 * Why two slots per rank (by the call number's parity) suffice: a rank publishes call N + 2
 * only after passing the agreement of call N + 1, which needs every rank to have published
 * N + 1, which each does only after it has read every slot of call N.  So a slot is never
 * overwritten while a peer may still read it, and every rank reads the same values: all reach
 * the same verdict, as with the messages. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/mpi_impl.h"

typedef struct {
  _Atomic int64_t call; /* the call number published (0: none yet) */
  int64_t hash;         /* written before call, read after it (release/acquire) */
  uint64_t addr[2];     /* the call's published buffers (mpi_shm_coll.c), likewise */
  char pad[32];         /* one cache line per slot: a rank's stores do not evict its peers' */
} slot;

/* A rank's third line: its step counters and its process id (for process_vm_readv). */
typedef struct {
  _Atomic int64_t step[DT_MPI_SHM_NSTEPS]; /* the last call that passed step k on this rank */
  _Atomic int64_t failed;                  /* the last call whose reads failed on this rank */
  int64_t pid;
  uint64_t self; /* where this line lies in its own rank's address space */
  char pad[64 - 8 * (DT_MPI_SHM_NSTEPS + 3)];
} steps;

#define RANK_BYTES (3 * sizeof(slot)) /* two slots, then the steps line */

struct dt_mpi_shm_agree {
  MPI_Comm comm; /* the group's: probed while waiting, to keep MPI's progress engine turning */
  MPI_Win win; /* freed only when every rank frees it together (MPI_Win_free is collective);
                * a group's stays to MPI_Finalize, since groups are destroyed on each rank's
                * own schedule (an error may end one rank early) */
  int n, me;
  int64_t call;  /* this rank's number of agreements on the group */
  slot **slots;  /* slots[r]: rank r's two slots, then its steps line */
};

static steps *steps_of(dt_mpi_shm_agree *s, int r) { return (steps *)&s->slots[r][2]; }

dt_mpi_shm_agree *dt_mpi_shm_agree_new(MPI_Comm comm) {
  int n, me, local_n = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  MPI_Comm local;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &local) != MPI_SUCCESS) return NULL;
  MPI_Comm_size(local, &local_n);
  MPI_Comm_free(&local);
  if (local_n != n) return NULL; /* the same verdict on every rank: the group spans hosts */
  dt_mpi_shm_agree *s = calloc(1, sizeof *s);
  slot **slots = calloc((size_t)n, sizeof *slots), *mine = NULL;
  int ok = s && slots &&
           MPI_Win_allocate_shared(RANK_BYTES, sizeof(slot), MPI_INFO_NULL, comm, &mine, &s->win) == MPI_SUCCESS;
  if (ok) {
    steps *own = (steps *)&mine[2];
    memset(mine, 0, RANK_BYTES), own->pid = getpid(), own->self = (uint64_t)(uintptr_t)own;
  }
  for (int r = 0; ok && r < n; r++) {
    MPI_Aint size;
    int unit;
    ok = MPI_Win_shared_query(s->win, r, &size, &unit, &slots[r]) == MPI_SUCCESS;
  }
  /* every rank takes the same form: shared memory only where it worked on all */
  int all_ok = 0;
  if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !all_ok) return free(slots), free(s), NULL;
  s->comm = comm, s->n = n, s->me = me, s->slots = slots;
  return s;
}

void dt_mpi_shm_agree_free(dt_mpi_shm_agree *s, int collective) {
  if (!s) return;
  if (collective) MPI_Win_free(&s->win);
  free(s->slots), free(s);
}

typedef struct {
  dt_mpi_shm_agree *s;
  int next;  /* the first peer not yet heard from */
  int64_t hash;
  int same;
} wait_state;

/* done once every peer has published this call; checks each peer's hash as it comes */
static int test_peers(void *arg, int *done) {
  wait_state *ws = arg;
  dt_mpi_shm_agree *s = ws->s;
  for (; ws->next < s->n; ws->next++) {
    if (ws->next == s->me) continue;
    slot *p = &s->slots[ws->next][s->call & 1];
    if (atomic_load_explicit(&p->call, memory_order_acquire) != s->call) return MPI_SUCCESS;
    if (p->hash != ws->hash) ws->same = 0;
  }
  *done = 1;
  return MPI_SUCCESS;
}

/* A rank that waits here must still drive MPI: the previous call's last fragments to a peer
 * that is still inside it move only when this rank's progress engine runs (a spin on shared
 * memory alone left 1 MiB all_gathers 20-30 us slower).  One probe per test runs it. */
static int test_peers_progress(void *arg, int *done) {
  int rc = test_peers(arg, done);
  if (rc != MPI_SUCCESS || *done) return rc;
  int flag;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ((wait_state *)arg)->s->comm, &flag, MPI_STATUS_IGNORE);
  return MPI_SUCCESS;
}

int dt_mpi_shm_agree_same(dt_mpi_shm_agree *s, int64_t hash, int *same, dt_mpi_watch *w, double deadline, int *timed_out) {
  return dt_mpi_shm_agree_publish(s, hash, NULL, NULL, same, w, deadline, timed_out);
}

int dt_mpi_shm_agree_publish(dt_mpi_shm_agree *s, int64_t hash, const void *a, const void *b, int *same,
                             dt_mpi_watch *w, double deadline, int *timed_out) {
  s->call++;
  slot *mine = &s->slots[s->me][s->call & 1];
  mine->hash = hash;
  mine->addr[0] = (uint64_t)(uintptr_t)a, mine->addr[1] = (uint64_t)(uintptr_t)b;
  atomic_store_explicit(&mine->call, s->call, memory_order_release);
  wait_state ws = {s, 0, hash, 1};
  int done = 0;
  test_peers(&ws, &done); /* the common case: every peer is there already */
  int rc = done ? (*timed_out = 0, MPI_SUCCESS) : dt_mpi_poll_until(test_peers_progress, &ws, w, deadline, timed_out);
  *same = ws.same;
  return rc;
}

void dt_mpi_shm_peer(dt_mpi_shm_agree *s, int r, uintptr_t addr[2], int *pid) {
  const slot *p = &s->slots[r][s->call & 1];
  addr[0] = (uintptr_t)p->addr[0], addr[1] = (uintptr_t)p->addr[1];
  *pid = (int)steps_of(s, r)->pid;
}

int dt_mpi_shm_size(const dt_mpi_shm_agree *s) { return s->n; }
int dt_mpi_shm_rank(const dt_mpi_shm_agree *s) { return s->me; }
const int64_t *dt_mpi_shm_pid(dt_mpi_shm_agree *s, int r, uintptr_t *remote) {
  steps *p = steps_of(s, r);
  *remote = (uintptr_t)p->self + offsetof(steps, pid);
  return &p->pid;
}

typedef struct {
  dt_mpi_shm_agree *s;
  int k, next;
} step_state;

static int test_step(void *arg, int *done) {
  step_state *ss = arg;
  dt_mpi_shm_agree *s = ss->s;
  for (; ss->next < s->n; ss->next++)
    if (atomic_load_explicit(&steps_of(s, ss->next)->step[ss->k], memory_order_acquire) < s->call) return MPI_SUCCESS;
  *done = 1;
  return MPI_SUCCESS;
}

static int test_step_progress(void *arg, int *done) {
  test_step(arg, done);
  if (*done) return MPI_SUCCESS;
  int flag;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ((step_state *)arg)->s->comm, &flag, MPI_STATUS_IGNORE);
  return MPI_SUCCESS;
}

int dt_mpi_shm_step(dt_mpi_shm_agree *s, int k, int failed, int *peer_failed, dt_mpi_watch *w, double deadline,
                    int *timed_out) {
  steps *mine = steps_of(s, s->me);
  if (failed) atomic_store_explicit(&mine->failed, s->call, memory_order_relaxed);
  atomic_store_explicit(&mine->step[k], s->call, memory_order_release);
  step_state ss = {s, k, 0};
  int done = 0, rc = MPI_SUCCESS;
  *timed_out = 0;
  test_step(&ss, &done);
  if (!done) rc = dt_mpi_poll_until(test_step_progress, &ss, w, deadline, timed_out);
  *peer_failed = -1;
  for (int r = 0; rc == MPI_SUCCESS && !*timed_out && r < s->n && *peer_failed < 0; r++)
    if (atomic_load_explicit(&steps_of(s, r)->failed, memory_order_relaxed) == s->call) *peer_failed = r;
  return rc;
}
