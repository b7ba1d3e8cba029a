/* Describing and comparing collective calls (see call_desc.h). */
#include "comm/call_desc.h"

#include <stdio.h>

#include "base/error.h"

static const char *const kind_names[TC_NKINDS] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "scatter", "gather", "barrier", "finish",
                                                    "argument error"};

const char *tc_kind_name(tc_kind k) { return k < TC_NKINDS ? kind_names[k] : "?"; }

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
  case TC_FINISH: snprintf(buf, len, "the end of its program"); break;
  case TC_ARG_ERROR: snprintf(buf, len, "a collective whose arguments failed"); break;
  default: snprintf(buf, len, "%s(%s, %zu elements)", name, dt, d->count); break;
  }
}

/* Same call as a? (pairwise fields only; the size tables are checked below) */
int tc_same_call(const tc_desc *a, const tc_desc *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == TC_BARRIER || a->kind == TC_FINISH || a->kind == TC_ARG_ERROR) return 1;
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

int tc_mismatch_error(const char *group, int rank_a, const tc_desc *a, int rank_b, const tc_desc *b, const char *why) {
  char da[160], db[160];
  tc_describe(da, sizeof da, a);
  tc_describe(db, sizeof db, b);
  if (rank_a == rank_b) /* a rank at odds with itself (all_to_all_v: what it sends itself) */
    return dt_error("collective mismatch in group %s: rank %d called %s%s", group, rank_a, da, why);
  return dt_error("collective mismatch in group %s: rank %d called %s, rank %d called %s%s", group, rank_a, da, rank_b,
                  db, why);
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; } /* FNV-1a step */

uint64_t tc_fingerprint(const tc_desc *d, const char *group) {
  uint64_t h = mix(1469598103934665603ull, (uint64_t)d->kind);
  for (const char *p = group; p && *p; p++) h = mix(h, (unsigned char)*p);
  if (d->kind == TC_BARRIER || d->kind == TC_FINISH || d->kind == TC_ARG_ERROR) return h;
  h = mix(h, (uint64_t)d->dtype);
  switch (d->kind) {
  case TC_ALL_REDUCE:
  case TC_REDUCE_SCATTER: return mix(mix(h, (uint64_t)d->op), (uint64_t)d->count);
  case TC_BROADCAST:
  case TC_SCATTER:
  case TC_GATHER: return mix(mix(h, (uint64_t)d->root), (uint64_t)d->count);
  default: return h;
  }
}

uint64_t tc_message_hash(const char *why) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = why; p && *p; p++) h = mix(h, (unsigned char)*p);
  return h;
}

int tc_arg_error(const char *group, int rank, const char *why, int all_same) {
  if (all_same) return dt_error("%s", why);
  return dt_error("%s (rank %d's argument; every rank of group %s raises this)", why, rank, group);
}
