/* The NCCL backend's entry points inside the comm layer (nccl.c, or nccl_none.c without NCCL):
 * comm_device.c creates a host communicator's twin, comm.c splits it with new_group. */
#ifndef DT_COMM_NCCL_BACKEND_H
#define DT_COMM_NCCL_BACKEND_H

#include "comm/comm.h"

/* host's NCCL twin over the same ranks (collective over host): every rank checks for a GPU
 * and the ranks agree before NCCL starts, so that "no GPU" is an error on every rank. */
int dt_nccl_comm_new(dt_comm *host, dt_comm **out);
/* group's twin (group: what new_group gave on parent_twin's host, NULL off the group), split
 * from parent_twin by ncclCommSplit: collective over the parent's ranks. */
int dt_nccl_split(dt_comm *parent_twin, const int *ranks, int n, dt_comm *group);

#endif
