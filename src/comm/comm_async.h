/* The front's view of the async queue (comm_async.c): one collective as a job, run now
 * (blocking: after the rank's outstanding async calls) or queued on the rank's
 * communication thread. */
#ifndef DT_COMM_COMM_ASYNC_H
#define DT_COMM_COMM_ASYNC_H

#include "comm/comm.h"

typedef enum { CJ_ALL_REDUCE, CJ_ALL_GATHER_V, CJ_REDUCE_SCATTER, CJ_ALL_TO_ALL_V, CJ_BROADCAST } cj_kind;

typedef struct comm_job {
  cj_kind kind;
  dt_comm *c;
  const void *send;
  void *recv;           /* broadcast: the buffer */
  size_t count;
  const size_t *counts; /* all_gather_v: per rank; all_to_all_v: sendcounts */
  const size_t *counts2; /* all_to_all_v: recvcounts */
  dt_dtype dt;
  dt_reduce_op op;
  int root;
} comm_job;

/* work NULL: drains the rank's queue and runs j now.  Else queues a copy of j (its size
 * tables copied) and sets *work. */
int dt_comm_job_submit(const comm_job *j, dt_comm_work **work);
/* Stops the rank's communication thread (root: a world communicator being destroyed). */
void dt_comm_async_shutdown(dt_comm *root);

#endif
