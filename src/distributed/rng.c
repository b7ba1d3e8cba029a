/* The RNG tracker region (see rng.h): random ops on DTensors draw each element at its
 * global index, and every rank's generator advances alike. */
#include "distributed/rng.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "distributed/redistribute.h"

uint64_t dt_rng_op_words(dt_op_id id, const dt_op_args *a, const dt_meta *out) {
  int wide;
  switch (id) {
  case DT_OP_RANDPERM:
    return dt_rng_randperm_words(a->ints[0] > 0 ? a->ints[0] : 0);
  case DT_OP_MULTINOMIAL: {
    const dt_tensor *w = a->in[0];
    return dt_rng_multinomial_words(w->ndim == 2 ? w->shape[0] : 1, w->shape[w->ndim - 1], a->ints[0], (int)a->ints[1]);
  }
  case DT_OP_RANDINT: /* as dt_rng_fill_init: 64-bit draws for ranges above 2^32 */
    wide = (uint64_t)a->ints[DT_RNG_SLOT_HIGH] - (uint64_t)a->ints[DT_RNG_SLOT_LOW] > 0xffffffffull;
    break;
  default: /* uniform, normal, bernoulli (out: the probabilities' dtype), dropout (out[0]: x's) */
    wide = out[0].dtype == DT_FLOAT64;
    break;
  }
  return dt_rng_words(wide, dt_shape_numel(out[0].ndim, out[0].shape));
}

/* randperm and multinomial draw whole rows, not element by element: replicated only. */
static int elementwise(dt_op_id id) { return id != DT_OP_RANDPERM && id != DT_OP_MULTINOMIAL; }

/* Ops whose local kernel reads the input's values (not only its shape and dtype). */
static int reads_values(dt_op_id id, const dt_op_args *a) {
  return id == DT_OP_DROPOUT || id == DT_OP_MULTINOMIAL || (id == DT_OP_BERNOULLI && !(a->flags & DT_ARG_SCALAR));
}

/* Ops whose kernel checks values (probabilities, weights): a shard may fail alone. */
static int checks_values(dt_op_id id, const dt_op_args *a) {
  return id == DT_OP_MULTINOMIAL || (id == DT_OP_BERNOULLI && !(a->flags & DT_ARG_SCALAR));
}

/* The placements the local kernel needs its input in (target) and those of the outputs. */
static void placements_for(dt_op_id id, const dt_dspec *in, dt_placement *target, dt_placement *outp) {
  for (int m = 0; m < in->mesh->ndim; m++) {
    dt_placement p = in->p[m], r = {.kind = DT_REPLICATE};
    if (id == DT_OP_MULTINOMIAL) p = r;
    /* a fresh draw is not a sum of pending parts; uniform_/normal_ write the parts instead */
    else if (p.kind == DT_PARTIAL && id != DT_OP_UNIFORM_ && id != DT_OP_NORMAL_) p = r;
    /* a _StridedShard's shard is no box of the global index space (nor a Shard beside it,
     * which chunks its blocks): drawn replicated */
    else if (p.kind == DT_STRIDED_SHARD || (p.kind == DT_SHARD && dt_dspec_split_of(in->p, in->mesh->ndim, p.dim))) p = r;
    target[m] = outp[m] = p;
  }
}

/* Runs op id's local kernel on this rank's block of os (the first output's spec) at the
 * context's position.  Factories get the block's shape as theirs. */
static int call_block(dt_context *ctx, dt_op_id id, dt_op_args *la, const dt_dspec *os, dt_tensor **out) {
  dt_rng_region r = {.ndim = os->ndim};
  memcpy(r.gshape, os->shape, sizeof(int64_t) * (size_t)os->ndim);
  dt_dspec_local(os, os->p, os->mesh->coord, r.shape, r.start);
  if ((dt_op_get(id)->flags & DT_OPF_FACTORY) && elementwise(id))
    memcpy(la->ints, r.shape, sizeof(int64_t) * (size_t)os->ndim);
  la->ints[DT_RNG_SLOT_SEED] = (int64_t)ctx->rng.seed;
  la->ints[DT_RNG_SLOT_OFFSET] = (int64_t)ctx->rng.offset;
  la->region = &r;
  int st = dt_op_call(id, la, out);
  la->region = NULL;
  return st;
}

/* A mesh rank's part of dt_rng_dispatch: the input brought to target when the kernel
 * reads it, then the block (or the identity for a Partial(sum/product) rank that holds none of the draw). */
static int run_local(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *in, const dt_placement *target,
                     const dt_dspec *os, dt_tensor **out) {
  dt_tensor *x = a->in[0];
  dt_tensor_retain(x);
  int st = DT_OK;
  if (reads_values(id, a) && !dt_placements_equal(in->p, target, in->mesh->ndim)) {
    const dt_redist_plan *plan;
    dt_tensor *moved = NULL;
    st = dt_redistribute_plan(ctx, in, target, 0, &plan);
    if (st == DT_OK) st = dt_redistribute_exec(ctx, in, plan, x, &moved);
    dt_tensor_release(x);
    x = moved;
  }
  if (st != DT_OK) return DT_ERR;
  dt_op_args la = *a;
  la.in = &x;
  if (!dt_dspec_holds_value(os)) { /* Partial(sum) (product): the draw once, zeros (ones) elsewhere */
    dt_op_args z = {.in = &x, .nin = 1, .nscalar = 1, .scalar = {dt_dspec_write_identity(os)}};
    st = dt_op_call(DT_OP_FILL_, &z, out);
  } else {
    st = call_block(ctx, id, &la, os, out);
  }
  dt_tensor_release(x);
  return st;
}

int dt_rng_manual_seed(dt_context *ctx, int64_t seed, int sync) {
  if (sync) {
    dt_comm_pause_observer(ctx->world); /* the runtime's own agreement, not a user collective */
    int st = dt_comm_broadcast(ctx->world, &seed, 1, DT_INT64, 0);
    dt_comm_resume_observer(ctx->world);
    if (st != DT_OK) return dt_error_prefix("manual_seed"), DT_ERR;
  }
  ctx->rng.seed = (uint64_t)seed;
  ctx->rng.offset = 0;
  return DT_OK;
}

/* Every rank of the world learns whether a value check failed anywhere, so that all raise
 * together (a rank may hold no bad value, or no shard at all). */
static int agree(dt_context *ctx, int st, const char *name) {
  int64_t mine = st != DT_OK, any = 0;
  char msg[512] = "";
  if (mine) snprintf(msg, sizeof msg, "%s", dt_error_message());
  dt_comm_pause_observer(ctx->world); /* the runtime's own agreement, not a user collective */
  int agreed = dt_comm_all_reduce(ctx->world, &mine, &any, 1, DT_INT64, DT_REDUCE_MAX);
  dt_comm_resume_observer(ctx->world);
  if (agreed != DT_OK) return DT_ERR;
  if (mine) return dt_error("%s", msg);
  if (any) return dt_error("%s: a value check failed on another rank (its error names the value)", name);
  return DT_OK;
}

static dt_tensor *empty_local(dt_dtype dtype) {
  int64_t zero = 0;
  return dt_tensor_empty(dtype, 1, &zero, DT_HOST);
}

int dt_rng_dispatch(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, dt_tensor **out,
                    dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  const dt_dspec *in = sp[0];
  int nout = op->nout;
  for (int o = 0; o < nout; o++) out[o] = NULL, out_spec[o] = NULL;
  if (a->nin != 1 || !in) return dt_error("%s: expected one DTensor operand", op->name);
  dt_mesh *mesh = in->mesh;
  if ((op->flags & DT_OPF_INPLACE) && dt_dspec_has_strided(in->p, mesh->ndim)) {
    char pi[128];
    return dt_error("%s: an in-place random op on a _StridedShard DTensor %s: redistribute it first", op->name,
                    dt_placements_format(in->p, mesh->ndim, pi, sizeof pi));
  }
  dt_placement target[DT_MESH_MAX_DIMS], outp[DT_MESH_MAX_DIMS];
  placements_for(id, in, target, outp);

  /* global metadata first: argument errors (dtype, p, shapes) are raised on every rank */
  dt_tensor g;
  dt_tensor *gin[1] = {&g};
  dt_dspec_global_header(in, &g);
  dt_op_args ga = *a;
  ga.in = gin, ga.op = id, ga.name = op->name, ga.region = NULL;
  dt_meta meta[DT_OP_MAX_OUT];
  if (dt_op_shape(op, &ga, meta) != DT_OK) return DT_ERR;
  uint64_t words = dt_rng_op_words(id, &ga, meta);

  int st = DT_OK;
  for (int o = 0; o < nout && st == DT_OK; o++) {
    dt_dspec t = {.mesh = mesh, .ndim = meta[o].ndim, .dtype = meta[o].dtype};
    memcpy(t.p, outp, sizeof t.p);
    memcpy(t.shape, meta[o].shape, sizeof t.shape);
    if (!(out_spec[o] = dt_dspec_copy(&t))) st = dt_error("%s: out of memory", op->name);
  }
  if (st == DT_OK && mesh->me < 0) { /* off-mesh: global metadata, empty locals, same advance */
    for (int o = 0; o < nout && st == DT_OK; o++) {
      out[o] = (op->flags & DT_OPF_INPLACE) ? (dt_tensor_retain(a->in[0]), a->in[0]) : empty_local(meta[o].dtype);
      if (!out[o]) st = DT_ERR;
    }
  } else if (st == DT_OK) {
    st = run_local(ctx, id, a, in, target, out_spec[0], out);
  }
  if (checks_values(id, a)) st = agree(ctx, st, op->name);
  if (st != DT_OK) {
    for (int o = 0; o < nout; o++) {
      if (out[o]) dt_tensor_release(out[o]);
      dt_dspec_free(out_spec[o]);
      out[o] = NULL, out_spec[o] = NULL;
    }
    return DT_ERR;
  }
  ctx->rng.offset += words;
  return DT_OK;
}

int dt_rng_explain(dt_op_id id, const dt_op_args *a, const dt_dspec *in, char *buf, size_t len) {
  dt_placement target[DT_MESH_MAX_DIMS], outp[DT_MESH_MAX_DIMS];
  placements_for(id, in, target, outp);
  int n = in->mesh->ndim, moved = reads_values(id, a) && !dt_placements_equal(in->p, target, n);
  char pi[128], pt[128], po[128];
  snprintf(buf, len,
           "%s(%s): a random op, no strategy choice (the RNG tracker region): input %s%s -> output %s, each element "
           "drawn at its global index",
           dt_op_get(id)->name, dt_placements_format(in->p, n, pi, sizeof pi), dt_placements_format(target, n, pt, sizeof pt),
           moved ? " (redistributed)" : "", dt_placements_format(outp, n, po, sizeof po));
  return DT_OK;
}

int dt_rng_factory(dt_context *ctx, dt_op_id id, const dt_op_args *a, dt_mesh *mesh, const dt_placement *p,
                   dt_tensor **out, dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  *out = NULL, *out_spec = NULL;
  dt_op_args ga = *a;
  ga.op = id, ga.name = a->name ? a->name : op->name, ga.region = NULL; /* rand_like names itself */
  dt_meta meta[DT_OP_MAX_OUT];
  if (dt_op_shape(op, &ga, meta) != DT_OK) return DT_ERR;
  char buf[128];
  if (dt_dspec_has_partial(p, mesh->ndim) || dt_dspec_has_strided(p, mesh->ndim))
    return dt_error("%s: factories take Shard and Replicate placements only, got %s", ga.name,
                    dt_placements_format(p, mesh->ndim, buf, sizeof buf));
  if (dt_dspec_new(mesh, p, meta[0].ndim, meta[0].shape, meta[0].dtype, ga.name, out_spec) != DT_OK) return DT_ERR;
  for (int m = 0; m < mesh->ndim && !elementwise(id); m++)
    if ((*out_spec)->p[m].kind != DT_REPLICATE) {
      dt_error("%s: gives a replicated DTensor (the draw is not made element by element); placements must be "
               "Replicate, got %s", ga.name, dt_placements_format((*out_spec)->p, mesh->ndim, buf, sizeof buf));
      dt_dspec_free(*out_spec), *out_spec = NULL;
      return DT_ERR;
    }
  dt_op_args la = ga; /* call_block puts the block's shape in */
  int st = mesh->me < 0 ? ((*out = empty_local(meta[0].dtype)) ? DT_OK : DT_ERR) : call_block(ctx, id, &la, *out_spec, out);
  if (st != DT_OK) {
    dt_dspec_free(*out_spec), *out_spec = NULL;
    return DT_ERR;
  }
  ctx->rng.offset += dt_rng_op_words(id, a, meta);
  return DT_OK;
}
