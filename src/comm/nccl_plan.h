/* The lowering of collectives to what NCCL offers: element displacements of the v-forms, and
 * grouped send/recv plans for the collectives NCCL has no call for (all_to_all(_v), scatter,
 * gather, all_gather_v with unequal counts).  Plain C with no NCCL in it, so that the plans
 * are unit-tested in every build (tests/c/test_nccl.c). */
#ifndef DT_COMM_NCCL_PLAN_H
#define DT_COMM_NCCL_PLAN_H

#include <stddef.h>

typedef enum dt_p2p_kind { DT_P2P_SEND, DT_P2P_RECV } dt_p2p_kind;

/* One point-to-point step: count elements to or from group rank peer, at offset elements
 * into the send buffer (SEND) or the receive buffer (RECV). */
typedef struct dt_p2p_step {
  dt_p2p_kind kind;
  int peer;
  size_t offset, count;
} dt_p2p_step;

/* What one rank issues between ncclGroupStart and ncclGroupEnd, plus its local copy (the
 * block it keeps: self_count elements from send + self_send to recv + self_recv).  Steps of
 * zero elements are left out on both sides alike (a rank skips a peer exactly when that
 * peer skips it, given counts that agree). */
typedef struct dt_p2p_plan {
  dt_p2p_step *steps;
  int n;
  size_t self_send, self_recv, self_count;
} dt_p2p_plan;

/* displs[r] = counts[0] + ... + counts[r-1]; *total = the sum.  DT_ERR (who named) when the
 * sum overflows size_t. */
int dt_nccl_displacements(const size_t *counts, int n, size_t *displs, size_t *total, const char *who);

/* all_to_all_v: block p of send (sendcounts[p]) to peer p, recvcounts[p] from peer p into
 * recv's block p; for each peer the send comes before the recv. */
int dt_nccl_plan_all_to_all_v(int rank, int size, const size_t *sendcounts, const size_t *recvcounts, dt_p2p_plan *out);
/* all_gather_v: this rank's counts[rank] to every peer; counts[p] from peer p into its block. */
int dt_nccl_plan_all_gather_v(int rank, int size, const size_t *counts, dt_p2p_plan *out);
/* scatter of count per rank from root: the root sends block p to p and keeps its own;
 * the others receive count from root at offset 0. */
int dt_nccl_plan_scatter(int rank, int size, size_t count, int root, dt_p2p_plan *out);
/* gather of count per rank to root: the mirror of scatter. */
int dt_nccl_plan_gather(int rank, int size, size_t count, int root, dt_p2p_plan *out);
void dt_nccl_plan_free(dt_p2p_plan *p);

/* The ncclCommSplit arguments of new_group: member -> color 0, else no color (-1,
 * NCCL_SPLIT_NOCOLOR); key = the world rank, so the new ranks keep the world order. */
void dt_nccl_split_args(const int *ranks, int n, int world_rank, int *color, int *key);

#endif
