/* A description of one collective call (kind, dtype, op, root, count), shared by the
 * backends' mismatch checks so that both name the calls the same way. */
#ifndef DT_COMM_CALL_DESC_H
#define DT_COMM_CALL_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/reduce_op.h"

typedef enum {
  TC_ALL_REDUCE, TC_ALL_GATHER, TC_REDUCE_SCATTER, TC_ALL_TO_ALL, TC_BROADCAST,
  TC_SCATTER, TC_GATHER, TC_BARRIER, TC_FINISH /* the end of a rank's program (MPI checks) */,
  TC_ARG_ERROR /* a rank whose arguments failed their checks (dt_comm_fail_agreed) */, TC_NKINDS
} tc_kind;

/* What one rank entered. */
typedef struct tc_desc {
  tc_kind kind;
  dt_dtype dtype;
  dt_reduce_op op;
  int root;
  size_t count;              /* elements sent by this rank (all_gather) or per block */
  const void *send;
  void *recv;
  const size_t *counts;      /* all_gather: per-rank counts; all_to_all: sendcounts */
  const size_t *counts2;     /* all_to_all: recvcounts */
  const void *blocks;        /* threads all_to_all, reduce_scatter: the dt_comm_block per destination, or NULL (contiguous) */
  const void *blocks2;       /* threads all_to_all: the dt_comm_block per source (recv), or NULL (contiguous) */
  const char *why;           /* TC_ARG_ERROR: the rank's error message */
} tc_desc;

/* "all_reduce" */
const char *tc_kind_name(tc_kind k);
/* "all_reduce(sum, float32, 4 elements)" */
void tc_describe(char *buf, size_t len, const tc_desc *d);
/* Same call (kind, dtype, and op/root/count where they must agree)? */
int tc_same_call(const tc_desc *a, const tc_desc *b);
/* A hash of what every rank of a group must agree on (kind, dtype, and op/root/count where
 * tc_same_call compares them) and of the group label: equal on every rank, or a mismatch. */
uint64_t tc_fingerprint(const tc_desc *d, const char *group);
/* Sets dt_error to a failed rank's message, as every rank of the group raises it:
 * "<why> (rank R's argument; every rank of group G raises this)", or why alone when every
 * rank failed with that same message (all_same). */
int tc_arg_error(const char *group, int rank, const char *why, int all_same);
/* A hash of a failed rank's message (MPI: do all ranks' messages agree?). */
uint64_t tc_message_hash(const char *why);
/* Sets dt_error: "collective mismatch in group G: rank A called X, rank B called Y<why>". */
int tc_mismatch_error(const char *group, int rank_a, const tc_desc *a, int rank_b, const tc_desc *b, const char *why);

#endif
