/* The key of t[k] in C: resolved against a shape (a DTensor's global one), per dim of t,
 * untouched, one index selected (the dim disappears) or a range start:stop:step (0-based,
 * stop exclusive).  The bindings parse Lua keys into it (1-based there); reads run as
 * select/slice view ops, writes into DTensors through dt_dtensor_write. */
#ifndef DT_DISTRIBUTED_INDEX_KEY_H
#define DT_DISTRIBUTED_INDEX_KEY_H

#include "tensor/tensor.h"

typedef enum dt_index_kind { DT_INDEX_ALL, DT_INDEX_SELECT, DT_INDEX_RANGE } dt_index_kind;

typedef struct dt_index_key {
  int ndim;
  dt_index_kind kind[DT_MAX_DIMS];
  int64_t start[DT_MAX_DIMS], stop[DT_MAX_DIMS], step[DT_MAX_DIMS]; /* step > 0 */
} dt_index_key;

/* Elements of dim d the key selects (1 for a selected index). */
static inline int64_t dt_index_key_count(const dt_index_key *k, int d) {
  if (k->kind[d] == DT_INDEX_SELECT) return 1;
  return k->stop[d] > k->start[d] ? (k->stop[d] - k->start[d] + k->step[d] - 1) / k->step[d] : 0;
}

#endif
