/* The ops backward rules are written with (backward.h): thin calls through the front door. */
#include "autograd/backward.h"

#include <string.h>

#include "autograd/values.h"
#include "base/error.h"

int dt_bw_calln(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin, dt_value *out) {
  dt_value *o = out;
  return b->ctx->call(b->ctx, op, a, (dt_value *const *)in, nin, &o);
}

int dt_bw_call(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *x, const dt_value *y, dt_value *out) {
  const dt_value *in[2] = {x, y};
  return dt_bw_calln(b, op, a, in, y ? 2 : 1, out);
}

int dt_bw_mul(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) {
  dt_op_args a = dt_bw_args();
  return dt_bw_call(b, DT_OP_MUL, &a, x, y, out);
}

int dt_bw_mul_scalar(dt_bw *b, const dt_value *x, double s, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR, a.scalar[0] = s, a.nscalar = 1;
  return dt_bw_call(b, DT_OP_MUL, &a, x, NULL, out);
}

int dt_bw_unary(dt_bw *b, dt_op_id op, const dt_value *x, dt_value *out) {
  dt_op_args a = dt_bw_args();
  return dt_bw_call(b, op, &a, x, NULL, out);
}
int dt_bw_neg(dt_bw *b, const dt_value *x, dt_value *out) { return dt_bw_unary(b, DT_OP_NEG, x, out); }

int dt_bw_sum(dt_bw *b, const dt_value *x, const int64_t *dims, int ndims, int all, int keepdim, dt_value *out) {
  dt_op_args a = dt_bw_args();
  if (all || ndims == 0) a.flags = DT_ARG_ALL_DIMS;
  else memcpy(a.ints, dims, sizeof(int64_t) * (size_t)ndims), a.nints = ndims;
  a.keepdim = keepdim;
  a.dtype = dt_value_dtype(x), a.has_dtype = 1; /* keep the gradient's dtype (no int64 promotion) */
  return dt_bw_call(b, DT_OP_SUM, &a, x, NULL, out);
}

static int shaped(dt_bw *b, dt_op_id op, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  dt_op_args a = dt_bw_args();
  memcpy(a.ints, shape, sizeof(int64_t) * (size_t)ndim), a.nints = ndim;
  return dt_bw_call(b, op, &a, x, NULL, out);
}
int dt_bw_reshape(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  return shaped(b, DT_OP_RESHAPE, x, ndim, shape, out);
}
int dt_bw_expand(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  return shaped(b, DT_OP_EXPAND, x, ndim, shape, out);
}

int dt_bw_transpose(dt_bw *b, const dt_value *x, int d0, int d1, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.ints[0] = d0, a.ints[1] = d1, a.nints = 2;
  return dt_bw_call(b, DT_OP_TRANSPOSE, &a, x, NULL, out);
}

int dt_bw_sum_to_shape(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  int nd = dt_value_ndim(x), lead = nd - ndim;
  const int64_t *xs = dt_value_shape(x);
  if (lead < 0) return dt_error("autograd: %s: a gradient with fewer dims than the value it is for", b->node->name);
  int64_t dims[DT_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (d < lead || (shape[d - lead] == 1 && xs[d] != 1)) dims[n++] = d;
  if (n == 0) return dt_bw_share(x, out);
  dt_value s;
  if (dt_bw_sum(b, x, dims, n, 0, 1, &s) != DT_OK) return DT_ERR;
  int st = dt_bw_reshape(b, &s, ndim, shape, out);
  dt_value_clear(&s);
  return st;
}

int dt_bw_sum_to_input(dt_bw *b, const dt_value *x, int i, dt_value *out) {
  return dt_bw_sum_to_shape(b, x, b->in_meta[i].ndim, b->in_meta[i].shape, out);
}

int dt_bw_call_ints(dt_bw *b, dt_op_id op, const dt_value *x, int n, const int64_t *ints, dt_value *out) {
  dt_op_args a = dt_bw_args();
  if (n) memcpy(a.ints, ints, sizeof(int64_t) * (size_t)n);
  a.nints = n;
  return dt_bw_call(b, op, &a, x, NULL, out);
}

void dt_bw_key_all(const dt_bw *b, int i, dt_index_key *k) {
  const dt_slot_meta *m = &b->in_meta[i];
  k->ndim = m->ndim;
  for (int d = 0; d < m->ndim; d++) k->kind[d] = DT_INDEX_ALL, k->start[d] = 0, k->stop[d] = m->shape[d], k->step[d] = 1;
}

/* Dims from the last: a select drops its dim, and the dims before it keep their numbers. */
int dt_bw_index_view(dt_bw *b, const dt_value *x, const dt_index_key *k, dt_value *out) {
  dt_value cur;
  if (dt_bw_share(x, &cur) != DT_OK) return DT_ERR;
  for (int d = k->ndim - 1; d >= 0; d--) {
    if (k->kind[d] == DT_INDEX_ALL) continue;
    int64_t sel[2] = {d, k->start[d]}, rng[4] = {d, k->start[d], k->stop[d], k->step[d]};
    dt_value next;
    int st = k->kind[d] == DT_INDEX_SELECT ? dt_bw_call_ints(b, DT_OP_SELECT, &cur, 2, sel, &next)
                                           : dt_bw_call_ints(b, DT_OP_SLICE, &cur, 4, rng, &next);
    dt_value_clear(&cur);
    if (st != DT_OK) return DT_ERR;
    cur = next;
  }
  *out = cur;
  return DT_OK;
}

int dt_bw_zeros_with(dt_bw *b, int i, const dt_index_key *k, const dt_value *g, dt_value *out) {
  dt_value z, unused;
  if (dt_bw_full_input(b, i, 0.0, &z) != DT_OK) return DT_ERR;
  dt_value_init(&unused, NULL, NULL); /* an in-place op writes z and returns nothing */
  dt_op_args a = dt_bw_args();
  dt_index_key_to_args(k, &a);
  const dt_value *in[2] = {&z, g};
  if (dt_bw_calln(b, DT_OP_INDEX_PUT_, &a, in, 2, &unused) != DT_OK) return dt_value_clear(&z), DT_ERR;
  *out = z;
  return DT_OK;
}

int dt_bw_full_input(dt_bw *b, int i, double v, dt_value *out) { return dt_autograd_full(b->ctx, &b->in_meta[i], v, out); }
int dt_bw_full_output(dt_bw *b, int o, double v, dt_value *out) { return dt_autograd_full(b->ctx, &b->out_meta[o], v, out); }

void dt_bw_set(dt_bw *b, int i, dt_value *v) {
  dt_value_clear(&b->grad_in[i]);
  b->grad_in[i] = *v;
  dt_value_init(v, NULL, NULL);
}

int dt_bw_share(const dt_value *v, dt_value *out) { return dt_autograd_share(v, out); }

int dt_bw_positions(dt_bw *b, int i, int dim, dt_value *out) {
  const dt_slot_meta *m = &b->in_meta[i];
  int64_t n = m->shape[dim], shape[DT_MAX_DIMS];
  for (int d = 0; d < m->ndim; d++) shape[d] = d == dim ? n : 1;
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR_INT;
  a.ints[0] = 0, a.ints[1] = n, a.ints[2] = 1, a.nints = 3;
  a.scalar[0] = 0, a.scalar[1] = (double)n, a.scalar[2] = 1, a.nscalar = 3;
  a.dtype = DT_INT64, a.has_dtype = 1;
  dt_value line, pos;
  if (dt_bw_calln(b, DT_OP_ARANGE, &a, NULL, 0, &line) != DT_OK) return DT_ERR;
  int st = dt_bw_reshape(b, &line, m->ndim, shape, &pos);
  dt_value_clear(&line);
  if (st != DT_OK || !m->spec) return st == DT_OK ? (*out = pos, DT_OK) : DT_ERR;
  /* every rank makes the same values: a replicated DTensor without communication */
  dt_placement p[DT_MESH_MAX_DIMS];
  for (int k = 0; k < m->spec->mesh->ndim; k++) p[k] = (dt_placement){.kind = DT_REPLICATE};
  dt_dspec *spec;
  if (dt_dspec_new(m->spec->mesh, p, m->ndim, shape, DT_INT64, b->node->name, &spec) != DT_OK) {
    dt_value_clear(&pos);
    return DT_ERR;
  }
  dt_tensor *local = pos.local;
  if (m->spec->mesh->me < 0) { /* off the mesh: an empty local, as every DTensor there */
    int64_t zero = 0;
    local = dt_tensor_empty(DT_INT64, 1, &zero, dt_tensor_device(pos.local));
  } else {
    dt_tensor_retain(local);
  }
  if (!local) return dt_value_clear(&pos), dt_dspec_free(spec), DT_ERR;
  dt_value_init(out, local, spec);
  /* made as from_local makes it: a recording graph replays it as one */
  int st2 = DT_CAPTURE_CONV(b->ctx, .kind = DT_CONV_FROM_LOCAL, .in = &pos, .out = out, .mesh = m->spec->mesh, .p = p,
                            .ndim = m->ndim, .shape = shape);
  dt_value_clear(&pos);
  if (st2 != DT_OK) return dt_value_clear(out), DT_ERR;
  return DT_OK;
}

/* ---- expressions ---- */
void dt_bx_begin(dt_bx *x, dt_bw *b) { x->b = b, x->n = 0, x->failed = 0; }

int dt_bx_end(dt_bx *x) {
  for (int k = 0; k < x->n; k++) dt_value_clear(&x->v[k]);
  x->n = 0;
  return x->failed ? DT_ERR : DT_OK;
}

/* The next temporary, or NULL when the scope has failed or is full. */
static dt_value *next_slot(dt_bx *x) {
  if (x->failed) return NULL;
  if (x->n == DT_BX_MAX) {
    x->failed = 1;
    dt_error("autograd: %s: a backward rule needs more than %d temporaries", x->b->node->name, DT_BX_MAX);
    return NULL;
  }
  dt_value *v = &x->v[x->n];
  dt_value_init(v, NULL, NULL);
  return v;
}

/* Keeps the temporary a call just filled (status st). */
static const dt_value *keep(dt_bx *x, int st) {
  if (st != DT_OK) {
    x->failed = 1;
    dt_value_clear(&x->v[x->n]);
    return NULL;
  }
  return &x->v[x->n++];
}

static const dt_value *fail(dt_bx *x) {
  x->failed = 1;
  return NULL;
}

const dt_value *dt_bx_in(dt_bx *x, int i) {
  if (x->failed) return NULL;
  if (!x->b->in[i]) {
    dt_error("autograd: %s: input %d was not saved for backward", x->b->node->name, i + 1);
    return fail(x);
  }
  return x->b->in[i];
}

const dt_value *dt_bx_out(dt_bx *x, int o) {
  if (x->failed) return NULL;
  if (!x->b->out[o]) {
    dt_error("autograd: %s: output %d was not saved for backward", x->b->node->name, o + 1);
    return fail(x);
  }
  return x->b->out[o];
}

const dt_value *dt_bx_grad(dt_bx *x, int o) {
  if (x->failed) return NULL;
  if (x->b->grad[o]) return x->b->grad[o];
  dt_value *v = next_slot(x);
  return v ? keep(x, dt_bw_full_output(x->b, o, 0.0, v)) : NULL;
}

void dt_bx_set(dt_bx *x, int i, const dt_value *v) {
  if (!v || x->failed) return;
  dt_value s;
  if (dt_bw_share(v, &s) != DT_OK) {
    x->failed = 1;
    return;
  }
  dt_bw_set(x->b, i, &s);
}

void dt_bx_set_summed(dt_bx *x, int i, const dt_value *v) {
  if (!v || x->failed) return;
  dt_value s;
  if (dt_bw_sum_to_input(x->b, v, i, &s) != DT_OK) {
    x->failed = 1;
    return;
  }
  dt_bw_set(x->b, i, &s);
}

const dt_value *dt_bx_full_input(dt_bx *x, int i, double c) {
  dt_value *v = next_slot(x);
  return v ? keep(x, dt_bw_full_input(x->b, i, c, v)) : NULL;
}

const dt_value *dt_bx_op(dt_bx *x, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin) {
  dt_value *v = next_slot(x);
  return v ? keep(x, dt_bw_calln(x->b, op, a, in, nin, v)) : NULL;
}

int dt_bx_opn(dt_bx *x, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin, int nout,
              const dt_value **outs) {
  for (int o = 0; o < nout; o++) outs[o] = NULL;
  for (int i = 0; i < nin; i++)
    if (!in[i] && i < 2) return fail(x), DT_ERR; /* the leading operands are required */
  if (x->failed) return DT_ERR;
  if (nout > DT_OP_MAX_OUT || x->n + nout > DT_BX_MAX) {
    x->failed = 1;
    return dt_error("autograd: %s: a backward rule needs more than %d temporaries", x->b->node->name, DT_BX_MAX);
  }
  dt_value *v = &x->v[x->n], *vs[DT_OP_MAX_OUT] = {0};
  for (int o = 0; o < nout; o++) dt_value_init(&v[o], NULL, NULL), vs[o] = &v[o];
  if (x->b->ctx->call(x->b->ctx, op, a, (dt_value *const *)in, nin, vs) != DT_OK) {
    x->failed = 1;
    for (int o = 0; o < nout; o++) dt_value_clear(&v[o]);
    return DT_ERR;
  }
  x->n += nout;
  for (int o = 0; o < nout; o++) outs[o] = &v[o];
  return DT_OK;
}

const dt_value *dt_bx_unary(dt_bx *x, dt_op_id op, const dt_value *p) {
  if (!p) return fail(x);
  dt_op_args a = dt_bw_args();
  return dt_bx_op(x, op, &a, &p, 1);
}

const dt_value *dt_bx_binary(dt_bx *x, dt_op_id op, const dt_value *p, const dt_value *q) {
  if (!p || !q) return fail(x);
  dt_op_args a = dt_bw_args();
  const dt_value *in[2] = {p, q};
  return dt_bx_op(x, op, &a, in, 2);
}
const dt_value *dt_bx_add(dt_bx *x, const dt_value *p, const dt_value *q) { return dt_bx_binary(x, DT_OP_ADD, p, q); }
const dt_value *dt_bx_sub(dt_bx *x, const dt_value *p, const dt_value *q) { return dt_bx_binary(x, DT_OP_SUB, p, q); }
const dt_value *dt_bx_mul(dt_bx *x, const dt_value *p, const dt_value *q) { return dt_bx_binary(x, DT_OP_MUL, p, q); }
const dt_value *dt_bx_div(dt_bx *x, const dt_value *p, const dt_value *q) { return dt_bx_binary(x, DT_OP_DIV, p, q); }

static const dt_value *scalar_op(dt_bx *x, dt_op_id op, const dt_value *p, double c, int flags) {
  if (!p) return fail(x);
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR | flags, a.scalar[0] = c, a.nscalar = 1;
  return dt_bx_op(x, op, &a, &p, 1);
}
const dt_value *dt_bx_scalar(dt_bx *x, dt_op_id op, const dt_value *p, double c) { return scalar_op(x, op, p, c, 0); }
const dt_value *dt_bx_add_scalar(dt_bx *x, const dt_value *p, double c) { return scalar_op(x, DT_OP_ADD, p, c, 0); }
const dt_value *dt_bx_mul_scalar(dt_bx *x, const dt_value *p, double c) { return scalar_op(x, DT_OP_MUL, p, c, 0); }
const dt_value *dt_bx_rsub_scalar(dt_bx *x, double c, const dt_value *p) {
  return scalar_op(x, DT_OP_SUB, p, c, DT_ARG_SCALAR_LEFT);
}

/* where's scalar operands sit in scalar[0] (a) and scalar[1] (b) with a NULL input. */
static const dt_value *where3(dt_bx *x, const dt_value *cond, const dt_value *p, double pc, const dt_value *q,
                              double qc) {
  dt_op_args a = dt_bw_args();
  a.scalar[0] = pc, a.scalar[1] = qc, a.nscalar = 2;
  const dt_value *in[3] = {cond, p, q};
  return dt_bx_op(x, DT_OP_WHERE, &a, in, 3);
}
const dt_value *dt_bx_where(dt_bx *x, const dt_value *cond, const dt_value *p, const dt_value *q) {
  return cond && p && q ? where3(x, cond, p, 0, q, 0) : fail(x);
}
const dt_value *dt_bx_keep_where(dt_bx *x, const dt_value *cond, const dt_value *p) {
  return cond && p ? where3(x, cond, p, 0, NULL, 0) : fail(x);
}
const dt_value *dt_bx_zero_where(dt_bx *x, const dt_value *cond, const dt_value *p) {
  return cond && p ? where3(x, cond, NULL, 0, p, 0) : fail(x);
}
const dt_value *dt_bx_where_scalar(dt_bx *x, const dt_value *cond, double c, const dt_value *p) {
  return cond && p ? where3(x, cond, NULL, c, p, 0) : fail(x);
}

const dt_value *dt_bx_cast(dt_bx *x, const dt_value *p, dt_dtype t) {
  if (!p) return fail(x);
  dt_op_args a = dt_bw_args();
  a.dtype = t, a.has_dtype = 1;
  return dt_bx_op(x, DT_OP_TO, &a, &p, 1);
}

const dt_value *dt_bx_sgn(dt_bx *x, const dt_value *p) {
  if (!p) return fail(x);
  dt_dtype t = dt_value_dtype(p);
  return dt_bx_sub(x, dt_bx_cast(x, dt_bx_scalar(x, DT_OP_GT, p, 0), t), dt_bx_cast(x, dt_bx_scalar(x, DT_OP_LT, p, 0), t));
}

const dt_value *dt_bx_positions(dt_bx *x, int i, int dim) {
  dt_value *v = next_slot(x);
  return v ? keep(x, dt_bw_positions(x->b, i, dim, v)) : NULL;
}

const dt_value *dt_bx_ints(dt_bx *x, dt_op_id op, const dt_value *p, int n, const int64_t *ints) {
  if (!p) return fail(x);
  dt_op_args a = dt_bw_args();
  if (n) memcpy(a.ints, ints, sizeof(int64_t) * (size_t)n);
  a.nints = n;
  return dt_bx_op(x, op, &a, &p, 1);
}

const dt_value *dt_bx_reduce_dims(dt_bx *x, dt_op_id op, const dt_value *p, int n, const int64_t *dims, int keepdim) {
  if (!p) return fail(x);
  dt_op_args a = dt_bw_args();
  if (n) memcpy(a.ints, dims, sizeof(int64_t) * (size_t)n), a.nints = n;
  else a.flags = DT_ARG_ALL_DIMS;
  a.keepdim = keepdim;
  return dt_bx_op(x, op, &a, &p, 1);
}

const dt_value *dt_bx_matmul(dt_bx *x, const dt_value *p, const dt_value *q) { return dt_bx_binary(x, DT_OP_MATMUL, p, q); }

const dt_value *dt_bx_mT(dt_bx *x, const dt_value *p) {
  if (!p) return fail(x);
  int64_t d[2] = {dt_value_ndim(p) - 2, dt_value_ndim(p) - 1};
  return dt_bx_ints(x, DT_OP_TRANSPOSE, p, 2, d);
}

const dt_value *dt_bx_index_add(dt_bx *x, const dt_value *p, int64_t dim, const dt_value *index, const dt_value *src) {
  if (!p || !index || !src) return fail(x);
  dt_op_args a = dt_bw_args();
  a.ints[0] = dim, a.nints = 1;
  const dt_value *in[3] = {p, index, src};
  return dt_bx_op(x, DT_OP_INDEX_ADD, &a, in, 3);
}
