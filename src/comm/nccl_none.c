/* The NCCL entry points when dtlua is built without NCCL: a collective on cuda says so. */
#include "base/error.h"
#include "comm/nccl_backend.h"

int dt_nccl_available(void) { return 0; }

int dt_nccl_comm_new(dt_comm *host, dt_comm **out) {
  (void)host;
  *out = NULL;
  return dt_error("this build has no NCCL backend (configure --with-nccl)");
}

int dt_nccl_split(dt_comm *parent_twin, const int *ranks, int n, dt_comm *group) {
  (void)parent_twin, (void)ranks, (void)n, (void)group;
  return DT_OK; /* never reached: without NCCL no communicator has a twin */
}
