/* Internals of the threads backend, shared by its files: the world, groups, and the
 * per-rank call descriptors that peers read directly. */
#ifndef DT_COMM_THREADS_IMPL_H
#define DT_COMM_THREADS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "comm/call_desc.h"
#include "comm/comm.h"
#include "comm/spin_wait.h"

typedef struct tc_member {
  tc_desc d[2];          /* double-buffered by call parity: a fast rank's next call does
                            not overwrite what slow peers still compare */
  atomic_uint entered;   /* calls this rank has entered: who is missing on a timeout */
} __attribute__((aligned(64))) tc_member;

typedef struct tc_mailbox { /* one per (src, dst) pair: rendezvous send/recv */
  dt_spin_word posted, done;
  const void *buf;
  size_t count;
  dt_dtype dtype;
  int mismatch;           /* set by the receiver, with what it expected */
  size_t expect_count;
  dt_dtype expect_dtype;
} __attribute__((aligned(64))) tc_mailbox;

typedef struct tc_group {
  struct dt_threads_world *world;
  int size;
  int *world_ranks;
  char label[64]; /* "{0,2}" for messages */
  atomic_uint arrived __attribute__((aligned(64)));
  dt_spin_word gen __attribute__((aligned(64)));
  tc_member *members;
  tc_mailbox *boxes;
  atomic_int broken; /* after a timeout or a peer's exit the barrier state is gone */
  int repl;          /* the REPL's own group (threads_repl.c): not the program's, never reset */
  atomic_uint epoch; /* bumped when the REPL resets the group after a line: members resync */
  char why[384];     /* the failure that broke it (world->mu) */
  struct tc_group *next;
} tc_group;

struct dt_threads_world {
  int size;
  double timeout;
  pthread_mutex_t mu;
  atomic_int aborted;
  atomic_int interrupted; /* Ctrl-C in the REPL (threads_repl.c) */
  char reason[512];
  atomic_int *exited; /* per world rank */
  atomic_int *line_done; /* per world rank: finished the REPL's current line (threads_repl.c) */
  atomic_int *failed_out; /* per world rank: failed in a wait because of a peer; its end is then
                             a consequence, not an early end (reset with line_done) */
  struct tc_group *_Atomic *waiting_in; /* per world rank: the group whose entry it waits in, or NULL */
  atomic_uint *waiting_seq;             /* per world rank: that call's number in the group */
  tc_group *groups;   /* registry: one tc_group per rank list, shared by its members */
};

typedef struct tc_comm {
  dt_comm base;
  tc_group *g;
  unsigned seq;
  unsigned *send_seq, *recv_seq; /* per peer, p2p message counters */
  unsigned epoch;                /* the group's epoch these counters belong to */
} tc_comm;

/* The group's shared state was reset (the REPL, after a line): restart this rank's counters. */
void tc_resync(tc_comm *c);
static inline void tc_sync(tc_comm *c) {
  if (atomic_load_explicit(&c->g->epoch, memory_order_acquire) != c->epoch) tc_resync(c);
}
/* The registry's group over `ranks` (repl: the REPL's own), created by the first member that asks. */
tc_group *tc_group_lookup(dt_threads_world *w, const int *ranks, int n, int repl);
/* A rank's communicator on g (NULL: out of memory). */
tc_comm *tc_comm_new(tc_group *g, int rank);
/* Wakes every waiter of every group, so they run their stop checks now. */
void tc_wake_everyone(dt_threads_world *w);

/* Marks g broken by the failure now in dt_error_message() (the first one is kept, so
 * peers failing later name the cause). */
void tc_break_group(tc_group *g);

/* Enters a collective: publishes d, waits for every member, checks that they all entered
 * the same call.  On DT_OK, *all points at the members' slots for this call. */
int tc_enter(tc_comm *c, const tc_desc *d, const char *name);
/* Slot of member r for the current call. */
static inline const tc_desc *tc_peer(const tc_comm *c, int r) { return &c->g->members[r].d[c->seq & 1]; }
/* Waits until every member finished reading/writing the buffers of this call. */
int tc_leave(tc_comm *c, const char *name);
/* Waits for w == target with abort/timeout/exit checks (peer >= 0: a p2p partner). */
int tc_wait(tc_comm *c, dt_spin_word *w, unsigned target, const char *name, int peer);

/* threads_check.c: DT_OK when every member's descriptor is compatible, else DT_ERR with a message naming
 * both calls and ranks (the same message on every rank). */
int tc_check_match(tc_comm *c);

/* threads.c: group creation and teardown for the vtable */
int tc_new_group_impl(dt_comm *base, const int *ranks, int n, dt_comm **out);
void tc_destroy_impl(dt_comm *base);

extern const dt_comm_ops dt_threads_ops;
#endif
