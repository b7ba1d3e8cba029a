/* Gradient values: making them (ones for a root, zeros for an output nothing flowed into)
 * and conforming them to what their input expects (dtype, shape, placements). */
#include "autograd/values.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "distributed/dtensor_api.h"

int dt_autograd_full(dt_context *ctx, const dt_slot_meta *m, double v, dt_value *out) {
  if (!m->spec) {
    dt_op_args a = {0};
    a.nints = m->ndim;
    memcpy(a.ints, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    a.scalar[0] = v, a.nscalar = 1;
    a.dtype = m->dtype, a.has_dtype = 1;
    dt_value *o = out;
    return ctx->call(ctx, DT_OP_FULL, &a, NULL, 0, &o);
  }
  int nd;
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec_my_local(m->spec, &nd, shape, off);
  dt_tensor *t = dt_tensor_full(m->dtype, nd, shape, v, DT_CPU);
  if (!t) return DT_ERR;
  dt_dspec *s = dt_dspec_copy(m->spec);
  if (!s) return dt_tensor_release(t), dt_error("autograd: out of memory");
  dt_value_init(out, t, s);
  if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_FULL, .out = out, .spec = m->spec, .value = v) != DT_OK)
    return dt_value_clear(out), DT_ERR;
  return DT_OK;
}

static int conform(dt_context *ctx, const char *what, dt_value *g, const dt_slot_meta *m, int keep_partial) {
  char a[160], b[160];
  if (g->spec && !m->spec) { /* a plain input that joined DTensors (implicit replication) */
    dt_tensor *full;
    if (dt_full_tensor(ctx, g, &full) != DT_OK) return DT_ERR;
    dt_value f;
    dt_value_init(&f, full, NULL);
    if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_FULL_TENSOR, .in = g, .out = &f) != DT_OK) return dt_value_clear(&f), DT_ERR;
    dt_value_clear(g);
    *g = f;
  } else if (!g->spec && m->spec) {
    return dt_error("autograd: %s: a plain tensor as the gradient of a DTensor", what);
  }
  if (dt_value_ndim(g) != m->ndim || memcmp(dt_value_shape(g), m->shape, sizeof(int64_t) * (size_t)m->ndim) != 0)
    return dt_error("autograd: %s: a gradient of shape %s for a value of shape %s", what,
                    dt_format_shape(a, sizeof a, dt_value_ndim(g), dt_value_shape(g)),
                    dt_format_shape(b, sizeof b, m->ndim, m->shape));
  if (dt_value_dtype(g) != m->dtype) {
    dt_op_args args = {0};
    args.dtype = m->dtype, args.has_dtype = 1;
    dt_value c, *pc = &c, *in = g;
    if (ctx->call(ctx, DT_OP_TO, &args, &in, 1, &pc) != DT_OK) return DT_ERR;
    dt_value_clear(g);
    *g = c;
  }
  if (!m->spec) return DT_OK;
  int nd = m->spec->mesh->ndim;
  dt_placement want[DT_MESH_MAX_DIMS];
  memcpy(want, m->spec->p, sizeof(dt_placement) * (size_t)nd);
  for (int d = 0; keep_partial && d < nd; d++)
    if (g->spec->p[d].kind == DT_PARTIAL && want[d].kind == DT_REPLICATE) want[d] = g->spec->p[d];
  if (!dt_placements_equal(g->spec->p, want, nd)) {
    dt_value r;
    /* to_any: a custom node's grad_placements may say Partial */
    if (dt_redistribute_to_any(ctx, g, m->spec->mesh, want, &r) != DT_OK) return DT_ERR;
    if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_REDISTRIBUTE_ANY, .in = g, .out = &r, .mesh = m->spec->mesh, .p = want) != DT_OK)
      return dt_value_clear(&r), DT_ERR;
    dt_value_clear(g);
    *g = r;
  }
  return DT_OK;
}

int dt_autograd_conform(dt_context *ctx, const char *what, dt_value *g, const dt_slot_meta *m) {
  return conform(ctx, what, g, m, 0);
}

int dt_autograd_conform_keep_partial(dt_context *ctx, const char *what, dt_value *g, const dt_slot_meta *m) {
  return conform(ctx, what, g, m, 1);
}

int dt_autograd_accumulate(dt_context *ctx, dt_value *acc, dt_value *g) {
  if (!acc->local) {
    *acc = *g;
    dt_value_init(g, NULL, NULL);
    return DT_OK;
  }
  dt_op_args args = {0};
  dt_value sum, *ps = &sum, *in[2] = {acc, g};
  if (ctx->call(ctx, DT_OP_ADD, &args, in, 2, &ps) != DT_OK) return DT_ERR;
  /* the sum keeps acc's placements (the dispatcher may choose others that hold the same data,
   * e.g. Replicate for a Shard of a dim of size 1) */
  if (sum.spec && !dt_placements_equal(sum.spec->p, acc->spec->p, acc->spec->mesh->ndim)) {
    dt_value r;
    int st = dt_redistribute_to_any(ctx, &sum, acc->spec->mesh, acc->spec->p, &r);
    if (st == DT_OK && DT_CAPTURE_CONV(ctx, .kind = DT_CONV_REDISTRIBUTE_ANY, .in = &sum, .out = &r,
                                       .mesh = acc->spec->mesh, .p = acc->spec->p) != DT_OK)
      dt_value_clear(&r), st = DT_ERR;
    dt_value_clear(&sum);
    if (st != DT_OK) return DT_ERR;
    sum = r;
  }
  dt_value_clear(acc);
  dt_value_clear(g);
  *acc = sum;
  return DT_OK;
}

int dt_autograd_share(const dt_value *v, dt_value *out) {
  dt_dspec *s = NULL;
  if (v->spec && !(s = dt_dspec_copy(v->spec))) return dt_error("autograd: out of memory");
  dt_tensor_retain(v->local);
  dt_value_init(out, v->local, s);
  return DT_OK;
}

int dt_autograd_clone(dt_context *ctx, const dt_value *v, dt_value *out) {
  if (ctx && ctx->capture && !v->spec) { /* a graph records it (src/capture) */
    dt_op_args a = {0};
    dt_value *in = (dt_value *)v;
    return ctx->call(ctx, DT_OP_CLONE, &a, &in, 1, &out);
  }
  /* a copy of the local data under the same spec: no dispatch, the placements stay */
  dt_tensor *c = dt_tensor_clone(v->local);
  if (!c) return DT_ERR;
  dt_dspec *s = NULL;
  if (v->spec && !(s = dt_dspec_copy(v->spec))) return dt_tensor_release(c), dt_error("autograd: out of memory");
  dt_value_init(out, c, s);
  if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_CLONE, .in = (dt_value *)v, .out = out) != DT_OK) return dt_value_clear(out), DT_ERR;
  return DT_OK;
}
