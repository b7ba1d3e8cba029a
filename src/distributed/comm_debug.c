/* Per-rank records of the collectives issued inside dt.comm_debug regions. */
#include "distributed/comm_debug.h"

#include <stdlib.h>

const char *const dt_comm_debug_names[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast",
                                           "scatter",    "gather",     "send",           "recv",       "barrier",
                                           NULL};

static dt_comm_debug *get(dt_context *ctx) {
  if (!ctx->comm_debug) ctx->comm_debug = calloc(1, sizeof(dt_comm_debug));
  return ctx->comm_debug;
}

void dt_comm_debug_observe(void *ud, const char *name, size_t bytes, int group_size) {
  dt_comm_debug *d = ((dt_context *)ud)->comm_debug;
  if (!d || d->depth == 0) return;
  if (d->n == d->cap) {
    int cap = d->cap ? 2 * d->cap : 16;
    dt_comm_record *ops = realloc(d->ops, sizeof *ops * (size_t)cap);
    if (!ops) return;
    d->ops = ops, d->cap = cap;
  }
  d->ops[d->n++] = (dt_comm_record){name, bytes, group_size};
}

int dt_comm_debug_begin(dt_context *ctx) {
  dt_comm_debug *d = get(ctx);
  if (!d) return 0;
  if (d->depth++ == 0) d->n = 0;
  return d->n;
}

void dt_comm_debug_end(dt_context *ctx) {
  dt_comm_debug *d = ctx->comm_debug;
  if (d && d->depth > 0) d->depth--;
}

void dt_comm_debug_free(dt_comm_debug *d) {
  if (!d) return;
  free(d->ops);
  free(d);
}
