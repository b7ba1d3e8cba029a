/* Collective mismatch detection for the threads backend: every member compares every
 * member's descriptor (they are all visible after the entry barrier), so all ranks reach
 * the same verdict and raise the same message instead of hanging or corrupting data. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "comm/threads_impl.h"

static const char *const kind_names[TC_NKINDS] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "scatter", "gather", "barrier"};

void tc_describe(char *buf, size_t len, const tc_desc *d) {
  const char *name = kind_names[d->kind];
  const char *dt = dt_dtype_name(d->dtype);
  switch (d->kind) {
  case TC_ALL_REDUCE:
  case TC_REDUCE_SCATTER:
    snprintf(buf, len, "%s(%s, %s, %zu elements)", name, dt_reduce_op_name(d->op), dt, d->count);
    break;
  case TC_BROADCAST:
  case TC_SCATTER:
  case TC_GATHER:
    snprintf(buf, len, "%s(%s, %zu elements, %s %d)", name, dt, d->count, d->kind == TC_GATHER ? "dst" : "src",
             d->root);
    break;
  case TC_BARRIER: snprintf(buf, len, "barrier()"); break;
  default: snprintf(buf, len, "%s(%s, %zu elements)", name, dt, d->count); break;
  }
}

/* Same call as a? (pairwise fields only; the size tables are checked below) */
static int same_call(const tc_desc *a, const tc_desc *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == TC_BARRIER) return 1;
  if (a->dtype != b->dtype) return 0;
  switch (a->kind) {
  case TC_ALL_REDUCE:
  case TC_REDUCE_SCATTER: return a->op == b->op && a->count == b->count;
  case TC_BROADCAST:
  case TC_SCATTER:
  case TC_GATHER: return a->root == b->root && a->count == b->count;
  default: return 1;
  }
}

static int mismatch(tc_comm *c, int a, int b, const char *why) {
  char da[160], db[160];
  tc_describe(da, sizeof da, tc_peer(c, a));
  tc_describe(db, sizeof db, tc_peer(c, b));
  const int *w = c->g->world_ranks;
  return dt_error("collective mismatch in group %s: rank %d called %s, rank %d called %s%s", c->g->label, w[a], da,
                  w[b], db, why);
}

int tc_check_match(tc_comm *c) {
  int n = c->g->size;
  const tc_desc *d0 = tc_peer(c, 0);
  for (int r = 1; r < n; r++)
    if (!same_call(d0, tc_peer(c, r))) return mismatch(c, 0, r, "");
  if (d0->kind == TC_ALL_GATHER) {
    for (int r = 0; r < n; r++) {
      const tc_desc *dr = tc_peer(c, r);
      for (int q = 0; q < n; q++)
        if (dr->counts[q] != d0->counts[q]) return mismatch(c, 0, r, " (different size tables)");
      if (dr->count != d0->counts[r]) return mismatch(c, 0, r, " (rank's size differs from the size table)");
    }
  }
  if (d0->kind == TC_ALL_TO_ALL) {
    for (int p = 0; p < n; p++)
      for (int q = 0; q < n; q++)
        if (tc_peer(c, p)->counts[q] != tc_peer(c, q)->counts2[p]) {
          char why[128];
          snprintf(why, sizeof why, " (rank %d sends %zu elements to rank %d, which expects %zu)",
                   c->g->world_ranks[p], tc_peer(c, p)->counts[q], c->g->world_ranks[q], tc_peer(c, q)->counts2[p]);
          return mismatch(c, p, q, why);
        }
  }
  return DT_OK;
}
