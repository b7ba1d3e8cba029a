/* The DTensor API's conversions, differentiable (see call_dtensor.h). */
#include "call/call_dtensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/values.h"
#include "base/error.h"
#include "call/call.h"
#include "distributed/dtensor_api.h"

/* What a conversion's backward needs. */
typedef struct conv {
  dt_dspec *spec;                      /* from_local: the output's; to_local, full_tensor: x's */
  dt_placement fwd[DT_MESH_MAX_DIMS];  /* from_local: the forward placements, Partial kept */
  dt_placement grad[DT_MESH_MAX_DIMS]; /* the gradient's placements (normalised) */
  int has_grad;                        /* grad given (else to_local's come from the kind) */
  dt_meta off_mesh;                    /* from_local off the mesh: the local tensor's (zero gradient) */
} conv;

static void conv_free(void *ud) {
  conv *c = ud;
  if (c) dt_dspec_free(c->spec);
  free(c);
}

static conv *conv_new(const dt_dspec *spec) {
  conv *c = calloc(1, sizeof *c);
  if (c && !(c->spec = dt_dspec_copy(spec))) free(c), c = NULL;
  if (!c) dt_error("autograd: out of memory");
  return c;
}

/* grad_p normalised into out for a DTensor of spec s ("<op>: grad_placements: ..." errors). */
static int normalise_grad(const dt_dspec *s, const dt_placement *grad_p, dt_placement *out, const char *op) {
  char what[64];
  snprintf(what, sizeof what, "%s: grad_placements", op);
  dt_dspec *g;
  if (dt_dspec_new(s->mesh, grad_p, s->ndim, s->shape, s->dtype, what, &g) != DT_OK) return DT_ERR;
  memcpy(out, g->p, sizeof(dt_placement) * (size_t)s->mesh->ndim);
  dt_dspec_free(g);
  return DT_OK;
}

/* The local gradient has the local tensor's shape: grad placements q must shard what p shards
 * (mesh dims of size 1 excepted); Replicate and Partial may trade places. */
static int check_same_shards(const dt_mesh *m, const dt_placement *p, const dt_placement *q, const char *op) {
  for (int d = 0; d < m->ndim; d++) {
    int ps = p[d].kind == DT_SHARD, qs = q[d].kind == DT_SHARD;
    if (m->shape[d] == 1 || (ps == qs && (!ps || p[d].dim == q[d].dim))) continue;
    char a[256], b[256];
    return dt_error("%s: grad_placements %s must shard the tensor dims that the placements %s shard (mesh dim %d "
                    "differs): the local part of the gradient has the local tensor's shape", op,
                    dt_placements_format(q, m->ndim, a, sizeof a), dt_placements_format(p, m->ndim, b, sizeof b),
                    d + 1);
  }
  return DT_OK;
}

static void front_door(dt_context *ctx) {
  if (ctx && !ctx->call) ctx->call = dt_call; /* backward rules come back in through it */
}

/* Graph capture records a conversion that succeeded (st DT_OK); on its error out is cleared. */
static int captured(dt_context *ctx, int st, dt_conv_call c) {
  if (st != DT_OK || !ctx || !ctx->capture) return st;
  if (ctx->capture_hooks->conv(ctx, &c) == DT_OK) return DT_OK;
  dt_value_clear(c.out);
  return DT_ERR;
}

/* Records the node of a conversion (in -> out) with backward fn, or frees c. */
static int record(dt_context *ctx, const char *name, dt_value *in, dt_value *out, const dt_dspec *grad_spec,
                  dt_custom_backward_fn fn, conv *c) {
  dt_value *ins[1] = {in}, *outs[1] = {out};
  const dt_dspec *gs[1] = {grad_spec};
  if (dt_autograd_record_custom(ctx, name, ins, 1, outs, 1, grad_spec ? gs : NULL, fn, c, conv_free) == DT_OK)
    return DT_OK;
  dt_value_clear(out);
  return DT_ERR;
}

/* ---- from_local: the local part of the gradient ---- */
static int from_local_backward(dt_context *ctx, void *ud, const dt_value *const *go, int nout, dt_value *gi, int nin,
                               const unsigned char *needs, dt_grad_kind *kind) {
  (void)nout, (void)nin;
  conv *c = ud;
  if (!go[0] || !needs[0]) return DT_OK;
  dt_value g;
  if (dt_redistribute_to_any(ctx, go[0], NULL, c->grad, &g) != DT_OK) return DT_ERR; /* a Partial is reduced */
  if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_REDISTRIBUTE_ANY, .in = (dt_value *)go[0], .out = &g, .p = c->grad) != DT_OK)
    return dt_value_clear(&g), DT_ERR;
  if (ctx->capture && c->spec->mesh->me < 0)
    return dt_value_clear(&g), dt_error("compile: backward through from_local on a rank outside its mesh is not captured");
  dt_tensor *t = g.local;
  if (c->spec->mesh->me >= 0) dt_tensor_retain(t);
  else /* off the mesh the local tensor was not used: zeros, so that every rank's graph runs alike */
    t = dt_tensor_zeros(c->off_mesh.dtype, c->off_mesh.ndim, c->off_mesh.shape, dt_tensor_device(g.local));
  if (!t) return dt_value_clear(&g), DT_ERR;
  dt_value_init(&gi[0], t, NULL);
  int st = DT_CAPTURE_CONV(ctx, .kind = DT_CONV_TO_LOCAL, .in = &g, .out = &gi[0]);
  dt_value_clear(&g);
  if (st != DT_OK) return dt_value_clear(&gi[0]), DT_ERR;
  dt_grad_kind_set_from_local(kind, c->spec->mesh, c->fwd, c->grad);
  return DT_OK;
}

int dt_call_from_local(dt_context *ctx, dt_value *local, dt_mesh *m, const dt_placement *p, int run_check, int ndim,
                       const int64_t *shape, const dt_placement *grad_p, dt_value *out) {
  const char *op = "from_local";
  if (local->spec) return dt_error("%s: the local tensor is a DTensor (pass its to_local())", op);
  front_door(ctx);
  if (dt_from_local(ctx, local->local, m, p, run_check, ndim, shape, out) != DT_OK) return DT_ERR;
  dt_placement q[DT_MESH_MAX_DIMS];
  const dt_dspec *s = out->spec;
  for (int d = 0; d < m->ndim; d++) q[d] = s->p[d].kind == DT_PARTIAL ? (dt_placement){.kind = DT_REPLICATE} : s->p[d];
  if (grad_p && (normalise_grad(s, grad_p, q, op) != DT_OK || check_same_shards(m, s->p, q, op) != DT_OK)) {
    dt_value_clear(out);
    return DT_ERR;
  }
  dt_conv_call cc = {.kind = DT_CONV_FROM_LOCAL, .in = local, .out = out, .mesh = m, .p = p, .grad_p = grad_p,
                     .run_check = run_check, .ndim = ndim, .shape = shape};
  if (!dt_autograd_wants(ctx, &local, 1)) return captured(ctx, DT_OK, cc);
  conv *c = conv_new(s);
  if (!c) return dt_value_clear(out), DT_ERR;
  memcpy(c->fwd, s->p, sizeof c->fwd);
  memcpy(c->grad, q, sizeof c->grad);
  c->has_grad = 1;
  c->off_mesh = (dt_meta){.dtype = local->local->dtype, .ndim = local->local->ndim};
  memcpy(c->off_mesh.shape, local->local->shape, sizeof(int64_t) * (size_t)local->local->ndim);
  return captured(ctx, record(ctx, op, local, out, NULL, from_local_backward, c), cc);
}

/* ---- to_local and full_tensor: a DTensor from the local gradient ---- */
/* xp: x's placements as seen by the local tensor (full_tensor: Replicate everywhere). */
static int local_to_dtensor(dt_context *ctx, const conv *c, const dt_placement *xp, const dt_value *g,
                            dt_grad_kind *kind, const char *op, dt_value *out) {
  dt_placement p[DT_MESH_MAX_DIMS];
  if (c->has_grad) memcpy(p, c->grad, sizeof p);
  else if (dt_grad_kind_placements(kind, c->spec->mesh, xp, p, op) != DT_OK) return DT_ERR;
  if (dt_from_local(ctx, g->local, c->spec->mesh, p, 0, c->spec->ndim, c->spec->shape, out) != DT_OK) return DT_ERR;
  if (DT_CAPTURE_CONV(ctx, .kind = DT_CONV_FROM_LOCAL, .in = (dt_value *)g, .out = out, .mesh = c->spec->mesh, .p = p,
                      .ndim = c->spec->ndim, .shape = c->spec->shape) != DT_OK)
    return dt_value_clear(out), DT_ERR;
  return DT_OK;
}

static int to_local_backward(dt_context *ctx, void *ud, const dt_value *const *go, int nout, dt_value *gi, int nin,
                             const unsigned char *needs, dt_grad_kind *kind) {
  (void)nout, (void)nin;
  const conv *c = ud;
  if (!go[0] || !needs[0]) return DT_OK;
  return local_to_dtensor(ctx, c, c->spec->p, go[0], kind, "to_local", &gi[0]);
}

int dt_call_to_local(dt_context *ctx, dt_value *x, const dt_placement *grad_p, dt_value *out) {
  const char *op = "to_local";
  dt_tensor *t;
  if (dt_to_local(x, &t) != DT_OK) return DT_ERR;
  dt_placement q[DT_MESH_MAX_DIMS];
  if (grad_p &&
      (normalise_grad(x->spec, grad_p, q, op) != DT_OK || check_same_shards(x->spec->mesh, x->spec->p, q, op) != DT_OK))
    return dt_tensor_release(t), DT_ERR;
  front_door(ctx);
  dt_value_init(out, t, NULL);
  dt_conv_call cc = {.kind = DT_CONV_TO_LOCAL, .in = x, .out = out, .grad_p = grad_p};
  if (!dt_autograd_wants(ctx, &x, 1)) return captured(ctx, DT_OK, cc);
  conv *c = conv_new(x->spec);
  if (!c) return dt_value_clear(out), DT_ERR;
  if ((c->has_grad = grad_p != NULL)) memcpy(c->grad, q, sizeof c->grad);
  return captured(ctx, record(ctx, op, x, out, NULL, to_local_backward, c), cc);
}

static int full_tensor_backward(dt_context *ctx, void *ud, const dt_value *const *go, int nout, dt_value *gi, int nin,
                                const unsigned char *needs, dt_grad_kind *kind) {
  (void)nout, (void)nin;
  const conv *c = ud;
  if (!go[0] || !needs[0]) return DT_OK;
  dt_placement rep[DT_MESH_MAX_DIMS];
  for (int d = 0; d < c->spec->mesh->ndim; d++) rep[d] = (dt_placement){.kind = DT_REPLICATE};
  return local_to_dtensor(ctx, c, rep, go[0], kind, "full_tensor", &gi[0]);
}

int dt_call_full_tensor(dt_context *ctx, dt_value *x, const dt_placement *grad_p, dt_value *out) {
  const char *op = "full_tensor";
  if (!x->spec) return dt_full_tensor(ctx, x, NULL); /* its error: "expected a DTensor" */
  dt_placement q[DT_MESH_MAX_DIMS];
  const dt_mesh *m = x->spec->mesh;
  if (grad_p && normalise_grad(x->spec, grad_p, q, op) != DT_OK) return DT_ERR;
  for (int d = 0; grad_p && d < m->ndim; d++)
    if (q[d].kind == DT_SHARD && m->shape[d] > 1) {
      char a[256];
      return dt_error("%s: grad_placements %s: the gradient of the full tensor is whole on every rank, so each mesh "
                      "dim takes Replicate() or Partial(), not a Shard", op,
                      dt_placements_format(q, m->ndim, a, sizeof a));
    }
  front_door(ctx);
  dt_tensor *t;
  if (dt_full_tensor(ctx, x, &t) != DT_OK) return DT_ERR;
  dt_value_init(out, t, NULL);
  dt_conv_call cc = {.kind = DT_CONV_FULL_TENSOR, .in = x, .out = out, .grad_p = grad_p};
  if (!dt_autograd_wants(ctx, &x, 1)) return captured(ctx, DT_OK, cc);
  conv *c = conv_new(x->spec);
  if (!c) return dt_value_clear(out), DT_ERR;
  if ((c->has_grad = grad_p != NULL)) memcpy(c->grad, q, sizeof c->grad);
  return captured(ctx, record(ctx, op, x, out, NULL, full_tensor_backward, c), cc);
}

/* ---- redistribute: the engine brings the gradient back to x's placements (or grad_p); it
 * arrives as it is, Partial too (dt_autograd_keep_partial), so Partial -> Shard(i) is one
 * reduce_scatter ---- */
static int redistribute_backward(dt_context *ctx, void *ud, const dt_value *const *go, int nout, dt_value *gi,
                                 int nin, const unsigned char *needs, dt_grad_kind *kind) {
  (void)ctx, (void)ud, (void)nout, (void)nin, (void)kind;
  if (!go[0] || !needs[0]) return DT_OK;
  return dt_autograd_share(go[0], &gi[0]);
}

int dt_call_redistribute(dt_context *ctx, dt_value *x, dt_mesh *mesh, const dt_placement *to,
                         const dt_placement *grad_p, dt_value *out) {
  const char *op = "redistribute";
  dt_dspec *gs = NULL;
  if (grad_p && x->spec) {
    if (!(gs = dt_dspec_copy(x->spec))) return dt_error("%s: out of memory", op);
    if (normalise_grad(x->spec, grad_p, gs->p, op) != DT_OK) return dt_dspec_free(gs), DT_ERR;
  }
  front_door(ctx);
  int st = dt_redistribute(ctx, x, mesh, to, out);
  if (st == DT_OK && dt_autograd_wants(ctx, &x, 1)) {
    st = record(ctx, op, x, out, gs, redistribute_backward, NULL);
    if (st == DT_OK) dt_autograd_keep_partial(out); /* a Partial gradient goes to x's placements in one step */
  }
  dt_dspec_free(gs);
  dt_conv_call cc = {.kind = DT_CONV_REDISTRIBUTE, .in = x, .out = out, .mesh = mesh, .p = to, .grad_p = grad_p};
  return captured(ctx, st, cc);
}
