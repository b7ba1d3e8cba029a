/* Which communicator a collective runs on: the host one for tensors on the host, its NCCL twin
 * for tensors on "cuda" (a world holds both; the twin is made on first use). */
#include "base/error.h"
#include "comm/comm.h"
#include "comm/nccl_backend.h"

dt_comm *dt_comm_for_device(dt_comm *c, dt_device_type dev, const char *who) {
  if (dev == DT_CPU) return c;
  if (dev != DT_CUDA) return dt_error("%s: no collectives for tensors on device %d", who, (int)dev), NULL;
  if (c->host_twin) return c; /* already the device communicator */
  if (!dt_nccl_available())
    return dt_error("%s: the tensor is on cuda, and collectives on cuda need the NCCL backend, which this build "
                    "lacks (configure --with-nccl)", who), NULL;
  if (!c->device_twin && dt_nccl_comm_new(c, &c->device_twin) != DT_OK) return dt_error_prefix("%s", who), NULL;
  return c->device_twin;
}
