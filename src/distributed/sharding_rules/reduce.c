/* Reductions (and softmax and the scans cumsum/cumprod, which work along one dim): a kept dim
 * stays sharded (its index shifts when keepdim is off); a reduced sharded dim gives Partial
 * where one fits (sum, mean over equal shards, amax/max values, amin, prod -> Partial(product),
 * any -> Partial(max), all -> Partial(min): an empty shard gives each op's identity) and is
 * replicated first otherwise (var, std, norm, logsumexp, var_mean, argmax, indices); the dim
 * of softmax or a scan is replicated first (softmax_backward's grad and y alike; a mesh dim
 * that replicates x may chunk another dim first, so the gather moves less); Partial(sum) and Partial(avg) pass through sum,
 * mean and cumsum (linear), Partial(max) through amax, Partial(min) through amin. */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

static int reduced(const dt_op_args *a, int d) {
  if (a->flags & DT_ARG_ALL_DIMS) return 1;
  for (int i = 0; i < a->nints; i++)
    if (a->ints[i] == d) return 1;
  return 0;
}

/* Every shard of tensor dim d has the same length (so that local means average exactly). */
static int even(const dt_dspec *s, const dt_mesh *mesh, int d) {
  int64_t parts = 1;
  for (int m = 0; m < mesh->ndim; m++)
    if (s->p[m].kind == DT_SHARD && s->p[m].dim == d) parts *= mesh->shape[m];
  return s->shape[d] % parts == 0;
}

/* Every shard of tensor dim d holds an element (max/min of an empty shard has no value): the
 * last coordinate's chunk is the shortest, and so is the last chunk of it. */
static int nonempty(const dt_dspec *s, const dt_mesh *mesh, int d) {
  int64_t L = s->shape[d], st;
  for (int m = 0; m < mesh->ndim; m++)
    if (s->p[m].kind == DT_SHARD && s->p[m].dim == d) dt_chunk(L, mesh->shape[m], mesh->shape[m] - 1, &st, &L);
  return L > 0;
}

/* The Partial a reduction of a sharded dim gives, or -1 when it must be replicated. */
static int partial_of(const dt_rule_args *r, int d) {
  const dt_dspec *s = r->spec[0];
  switch (r->op) {
  case DT_OP_SUM: return DT_REDUCE_SUM;
  case DT_OP_MEAN: return even(s, s->mesh, d) ? DT_REDUCE_AVG : -1;
  /* an empty shard cannot be reduced by max/min: only when every shard has elements */
  case DT_OP_AMAX: return nonempty(s, s->mesh, d) ? DT_REDUCE_MAX : -1;
  case DT_OP_AMIN: return nonempty(s, s->mesh, d) ? DT_REDUCE_MIN : -1;
  case DT_OP_PROD: return DT_REDUCE_PRODUCT;
  case DT_OP_ANY: return DT_REDUCE_MAX;
  case DT_OP_ALL: return DT_REDUCE_MIN;
  default: return -1;
  }
}

/* softmax, log_softmax, cumsum, cumprod and softmax's backward ops: the output has the input's
 * dims; ints[0] is the one they work along. */
static int along_dim(dt_op_id op) {
  return op == DT_OP_SOFTMAX || op == DT_OP_LOG_SOFTMAX || op == DT_OP_CUMSUM || op == DT_OP_CUMPROD ||
         op == DT_OP_SOFTMAX_BACKWARD || op == DT_OP_LOG_SOFTMAX_BACKWARD;
}

/* Does Partial p pass through?  sum and avg through the linear ones (sum, mean, and cumsum
 * unless it casts floats to integers); max through amax and min through amin (a max of
 * maxima), over any dims. */
static int keeps_partial(const dt_rule_args *r, dt_placement p) {
  if (p.op == DT_REDUCE_MAX) return r->op == DT_OP_AMAX;
  if (p.op == DT_REDUCE_MIN) return r->op == DT_OP_AMIN;
  if (p.op != DT_REDUCE_SUM && p.op != DT_REDUCE_AVG) return 0;
  if (r->op == DT_OP_SUM || r->op == DT_OP_MEAN) return 1;
  return r->op == DT_OP_CUMSUM && !(dt_dtype_is_float(r->spec[0]->dtype) && !dt_dtype_is_float(r->out[0].dtype));
}

static int out_dim(const dt_rule_args *r, int d) {
  if (along_dim(r->op) || r->a->keepdim) return d;
  int od = d;
  for (int i = 0; i < d; i++) od -= reduced(r->a, i);
  return od;
}

static void fill_along(const dt_rule_args *r, dt_strategy *st, int m, dt_placement o) {
  for (int i = 0; i < r->a->nin; i++) st->in[i][m] = o;
  for (int k = 0; k < r->nout; k++) st->out[k][m] = o;
}

/* softmax or a scan along a dim sharded somewhere (gathered): where x is replicated, another
 * dim chunked first (dt_rule_push_chunked) */
static void chunk_along(const dt_rule_args *r, dt_strategy *st, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int d = (int)r->a->ints[0], gathered = 0, free[DT_MESH_MAX_DIMS];
  for (int m = 0; m < r->mesh_ndim; m++) {
    gathered |= x->p[m].kind == DT_SHARD && x->p[m].dim == d;
    free[m] = x->p[m].kind == DT_REPLICATE;
    for (int i = 1; i < r->a->nin; i++) free[m] &= !r->spec[i] || r->spec[i]->p[m].kind == DT_REPLICATE;
  }
  if (gathered) dt_rule_push_chunked(r, st, free, d, fill_along, s, n);
}

int dt_rule_reduce(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int along = along_dim(r->op);
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m], in = dt_rule_R(), out = dt_rule_R();
    if (p.kind == DT_SHARD && !(along ? p.dim == r->a->ints[0] : reduced(r->a, p.dim))) {
      in = p, out = dt_rule_S(out_dim(r, p.dim)); /* a kept dim */
    } else if (p.kind == DT_SHARD && !along && partial_of(r, p.dim) >= 0) {
      in = p, out = dt_rule_P((dt_reduce_op)partial_of(r, p.dim));
    } else if (p.kind == DT_PARTIAL && keeps_partial(r, p)) {
      in = p, out = p;
    }
    /* the backward ops' second operand (y, grad's shape) follows the first */
    for (int i = 0; i < (along ? r->a->nin : 1); i++) st.in[i][m] = in;
    for (int o = 0; o < r->nout; o++) st.out[o][m] = out;
  }
  dt_rule_push(s, n, &st);
  if (along) chunk_along(r, &st, s, n);
  for (int m = 0; m < r->mesh_ndim; m++) {
    for (int i = 0; i < (along ? r->a->nin : 1); i++) st.in[i][m] = dt_rule_R();
    for (int o = 0; o < r->nout; o++) st.out[o][m] = dt_rule_R();
  }
  return dt_rule_push(s, n, &st);
}
