/* The NCCL watchdog's logic, as PyTorch's: a collective enqueued on the GPU is polled until it
 * completes, fails asynchronously, or stays pending past the timeout (DTLUA_TIMEOUT), in which
 * case the caller aborts the communicator and ends the world with the rank and the op named.
 * The query and the clock are functions, so that the decisions are unit-tested without a GPU
 * (tests/c/test_nccl.c); nccl.c passes cudaEventQuery + ncclCommGetAsyncError and dt_now. */
#ifndef DT_COMM_NCCL_WATCH_H
#define DT_COMM_NCCL_WATCH_H

#include <stddef.h>

typedef enum dt_watch_state { DT_WATCH_DONE, DT_WATCH_PENDING, DT_WATCH_FAILED } dt_watch_state;

/* What the watchdog does after one query. */
typedef enum dt_watch_verdict { DT_WATCH_RETURN_OK, DT_WATCH_KEEP_WAITING, DT_WATCH_RETURN_ERROR, DT_WATCH_TIMED_OUT } dt_watch_verdict;

typedef struct dt_watchdog {
  double timeout; /* seconds; <= 0: never times out */
  /* The collective's state now; FAILED fills why (the failing call and its message). */
  dt_watch_state (*query)(void *ud, char *why, size_t len);
  double (*clock)(void *ud); /* seconds, monotonic */
  void (*pause)(void *ud);   /* between queries (a yield); may be NULL */
  void *ud;
} dt_watchdog;

/* The decision alone: a state seen `elapsed` seconds after the start. */
dt_watch_verdict dt_watchdog_decide(dt_watch_state s, double elapsed, double timeout);

/* Polls w until a verdict other than KEEP_WAITING.  DT_OK when done; DT_ERR with dt_error set:
 * "<op>: NCCL error on rank R in group G: <why>" or, with *timed_out = 1, "<op>: NCCL watchdog:
 * rank R found the collective still running after T s in group G (DTLUA_TIMEOUT)". */
int dt_watchdog_wait(const dt_watchdog *w, int world_rank, const char *op, const char *group, int *timed_out);

#endif
