/* Collective lowering for NCCL (nccl_plan.h): counts -> displacements -> send/recv steps. */
#include "comm/nccl_plan.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"

int dt_nccl_displacements(const size_t *counts, int n, size_t *displs, size_t *total, const char *who) {
  size_t off = 0;
  for (int r = 0; r < n; r++) {
    if (displs) displs[r] = off;
    if (counts[r] > SIZE_MAX - off) return dt_error("%s: the counts overflow (rank %d's %zu after %zu)", who, r, counts[r], off);
    off += counts[r];
  }
  if (total) *total = off;
  return DT_OK;
}

static int plan_alloc(dt_p2p_plan *p, int size, const char *who) {
  *p = (dt_p2p_plan){0};
  p->steps = malloc(sizeof *p->steps * 2 * (size_t)(size > 0 ? size : 1));
  return p->steps ? DT_OK : dt_error("%s: out of memory", who);
}

static void add(dt_p2p_plan *p, dt_p2p_kind kind, int peer, size_t offset, size_t count) {
  if (count == 0) return;
  p->steps[p->n++] = (dt_p2p_step){.kind = kind, .peer = peer, .offset = offset, .count = count};
}

int dt_nccl_plan_all_to_all_v(int rank, int size, const size_t *sendcounts, const size_t *recvcounts, dt_p2p_plan *out) {
  if (plan_alloc(out, size, "all_to_all")) return DT_ERR;
  size_t *sd = malloc(sizeof(size_t) * 2 * (size_t)size), *rd = sd ? sd + size : NULL;
  if (!sd || dt_nccl_displacements(sendcounts, size, sd, NULL, "all_to_all") ||
      dt_nccl_displacements(recvcounts, size, rd, NULL, "all_to_all")) {
    if (!sd) dt_error("all_to_all: out of memory");
    return free(sd), dt_nccl_plan_free(out), DT_ERR;
  }
  for (int p = 0; p < size; p++) {
    if (p == rank) continue;
    add(out, DT_P2P_SEND, p, sd[p], sendcounts[p]);
    add(out, DT_P2P_RECV, p, rd[p], recvcounts[p]);
  }
  if (sendcounts[rank] != recvcounts[rank]) {
    int st = dt_error("all_to_all: rank %d sends itself %zu elements but expects %zu", rank, sendcounts[rank],
                      recvcounts[rank]);
    return free(sd), dt_nccl_plan_free(out), st;
  }
  out->self_send = sd[rank], out->self_recv = rd[rank], out->self_count = sendcounts[rank];
  free(sd);
  return DT_OK;
}

int dt_nccl_plan_all_gather_v(int rank, int size, const size_t *counts, dt_p2p_plan *out) {
  if (plan_alloc(out, size, "all_gather")) return DT_ERR;
  size_t *d = malloc(sizeof(size_t) * (size_t)size);
  if (!d || dt_nccl_displacements(counts, size, d, NULL, "all_gather")) {
    if (!d) dt_error("all_gather: out of memory");
    return free(d), dt_nccl_plan_free(out), DT_ERR;
  }
  for (int p = 0; p < size; p++) {
    if (p == rank) continue;
    add(out, DT_P2P_SEND, p, 0, counts[rank]);
    add(out, DT_P2P_RECV, p, d[p], counts[p]);
  }
  out->self_send = 0, out->self_recv = d[rank], out->self_count = counts[rank];
  free(d);
  return DT_OK;
}

/* scatter (to_all = 1) and gather: the root's block p is p * count elements in. */
static int rooted(int rank, int size, size_t count, int root, int to_all, dt_p2p_plan *out, const char *who) {
  if (root < 0 || root >= size) return dt_error("%s: root %d out of range for a group of %d ranks", who, root, size);
  if (size > 0 && count > SIZE_MAX / (size_t)size) return dt_error("%s: %zu elements per rank overflow", who, count);
  if (plan_alloc(out, size, who)) return DT_ERR;
  if (rank == root) {
    for (int p = 0; p < size; p++)
      if (p != root) add(out, to_all ? DT_P2P_SEND : DT_P2P_RECV, p, (size_t)p * count, count);
    out->self_send = to_all ? (size_t)root * count : 0;
    out->self_recv = to_all ? 0 : (size_t)root * count;
    out->self_count = count;
  } else {
    add(out, to_all ? DT_P2P_RECV : DT_P2P_SEND, root, 0, count);
  }
  return DT_OK;
}

int dt_nccl_plan_scatter(int rank, int size, size_t count, int root, dt_p2p_plan *out) {
  return rooted(rank, size, count, root, 1, out, "scatter");
}

int dt_nccl_plan_gather(int rank, int size, size_t count, int root, dt_p2p_plan *out) {
  return rooted(rank, size, count, root, 0, out, "gather");
}

void dt_nccl_plan_free(dt_p2p_plan *p) {
  free(p->steps);
  *p = (dt_p2p_plan){0};
}

void dt_nccl_split_args(const int *ranks, int n, int world_rank, int *color, int *key) {
  int member = 0;
  for (int i = 0; i < n; i++) member |= ranks[i] == world_rank;
  *color = member ? 0 : -1;
  *key = world_rank;
}
