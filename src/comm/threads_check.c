/* Collective mismatch detection for the threads backend: every member compares every
 * member's descriptor (they are all visible after the entry barrier), so all ranks reach
 * the same verdict and raise the same message instead of hanging or corrupting data. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "comm/threads_impl.h"

static int mismatch(tc_comm *c, int a, int b, const char *why) {
  const int *w = c->g->world_ranks;
  return tc_mismatch_error(c->g->label, w[a], tc_peer(c, a), w[b], tc_peer(c, b), why);
}

int tc_check_match(tc_comm *c) {
  int n = c->g->size;
  for (int r = 0; r < n; r++) /* a rank whose arguments failed: every rank raises its message */
    if (tc_peer(c, r)->kind == TC_ARG_ERROR) {
      int all_same = 1;
      for (int q = 0; q < n && all_same; q++)
        all_same = tc_peer(c, q)->kind == TC_ARG_ERROR && strcmp(tc_peer(c, q)->why, tc_peer(c, r)->why) == 0;
      return tc_arg_error(c->g->label, c->g->world_ranks[r], tc_peer(c, r)->why, all_same);
    }
  const tc_desc *d0 = tc_peer(c, 0);
  for (int r = 1; r < n; r++)
    if (!tc_same_call(d0, tc_peer(c, r))) return mismatch(c, 0, r, "");
  if (d0->kind == TC_ALL_GATHER) {
    for (int r = 0; r < n; r++) {
      const tc_desc *dr = tc_peer(c, r);
      for (int q = 0; q < n; q++)
        if (dr->counts[q] != d0->counts[q]) return mismatch(c, 0, r, " (different size tables)");
      if (dr->count != d0->counts[r]) return mismatch(c, 0, r, " (rank's size differs from the size table)");
    }
  }
  if (d0->kind == TC_REDUCE_SCATTER) /* the block form: every rank's block q of one shape */
    for (int r = 0; r < n; r++) {
      const dt_comm_block *a = d0->blocks, *b = tc_peer(c, r)->blocks;
      if (!a != !b) return mismatch(c, 0, r, " (strided and contiguous forms)");
      for (int q = 0; a && q < n; q++)
        if (a[q].rows != b[q].rows || a[q].cols != b[q].cols) {
          char why[160];
          snprintf(why, sizeof why, " (block %d: %zu rows of %zu on rank %d, %zu of %zu on rank %d)", q, a[q].rows,
                   a[q].cols, c->g->world_ranks[0], b[q].rows, b[q].cols, c->g->world_ranks[r]);
          return mismatch(c, 0, r, why);
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
