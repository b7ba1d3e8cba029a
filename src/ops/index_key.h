/* The key of t[k] in C: resolved against a shape (a DTensor's global one), per dim of t,
 * untouched, one index selected (the dim disappears) or a range start:stop:step (0-based,
 * stop exclusive).  The bindings parse Lua keys into it (1-based there); reads run as
 * select/slice view ops, writes as the op index_put_, whose args carry the key (four ints per
 * dim: kind, start, stop, step). */
#ifndef DT_OPS_INDEX_KEY_H
#define DT_OPS_INDEX_KEY_H

#include "ops/op_args.h"
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

/* A value of shape vshape written into a region of shape `region` must broadcast to it (one
 * way: the region's shape is kept); the error is op's (shape_index.c). */
int dt_index_check_value(const char *op, int vnd, const int64_t *vshape, int rnd, const int64_t *region);

/* The key in an op's static args, and back (index_put_). */
static inline void dt_index_key_to_args(const dt_index_key *k, dt_op_args *a) {
  for (int d = 0; d < k->ndim; d++) {
    int64_t *w = a->ints + 4 * d;
    w[0] = k->kind[d], w[1] = k->start[d], w[2] = k->stop[d], w[3] = k->step[d];
  }
  a->nints = 4 * k->ndim;
}

static inline void dt_index_key_from_args(const dt_op_args *a, dt_index_key *k) {
  k->ndim = a->nints / 4;
  for (int d = 0; d < k->ndim; d++) {
    const int64_t *w = a->ints + 4 * d;
    k->kind[d] = (dt_index_kind)w[0], k->start[d] = w[1], k->stop[d] = w[2], k->step[d] = w[3];
  }
}

#endif
