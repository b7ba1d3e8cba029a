/* The NCCL unique id's bootstrap: group rank 0 makes the id (ncclGetUniqueId) and every rank
 * of the communicator gets it through the host communicator over the same ranks -- process
 * memory under `dtlua -n N` (threads backend), MPI_Bcast under mpirun.  The id is 128 opaque
 * bytes, so the exchange is tested with a fake id and no GPU (tests/spec_dist/nccl_bootstrap_spec.lua). */
#ifndef DT_COMM_NCCL_ID_H
#define DT_COMM_NCCL_ID_H

#include "comm/comm.h"

#define DT_NCCL_ID_BYTES 128

/* Fills id (DT_OK), or DT_ERR with dt_error set. */
typedef int (*dt_nccl_id_make_fn)(void *ud, unsigned char id[DT_NCCL_ID_BYTES]);

/* Collective over host (a host communicator): rank 0 calls make, every rank gets its id.  A
 * failed make on rank 0 is an error on every rank, with rank 0's message. */
DT_API int dt_nccl_id_exchange(dt_comm *host, dt_nccl_id_make_fn make, void *ud, unsigned char id[DT_NCCL_ID_BYTES]);

#endif
