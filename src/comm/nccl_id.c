/* The NCCL unique id over a host communicator (nccl_id.h). */
#include "comm/nccl_id.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"

/* What travels: a status byte (1: made), then the id or rank 0's error message. */
#define MSG_BYTES (1 + DT_NCCL_ID_BYTES + 256)

int dt_nccl_id_exchange(dt_comm *host, dt_nccl_id_make_fn make, void *ud, unsigned char id[DT_NCCL_ID_BYTES]) {
  unsigned char msg[MSG_BYTES] = {0};
  if (host->rank == 0) {
    if (make(ud, msg + 1) == DT_OK) msg[0] = 1;
    else snprintf((char *)msg + 1 + DT_NCCL_ID_BYTES, 256, "%s", dt_error_message());
  }
  dt_comm_pause_observer(host); /* the runtime's own exchange, not a collective of the user */
  int st = dt_comm_broadcast(host, msg, MSG_BYTES, DT_UINT8, 0);
  dt_comm_resume_observer(host);
  if (st != DT_OK) return dt_error_prefix("NCCL unique id exchange");
  if (!msg[0]) {
    msg[MSG_BYTES - 1] = 0;
    return dt_error("NCCL unique id exchange: rank %d could not make the id: %s", host->world_ranks[0],
                    (char *)msg + 1 + DT_NCCL_ID_BYTES);
  }
  memcpy(id, msg + 1, DT_NCCL_ID_BYTES);
  return DT_OK;
}
