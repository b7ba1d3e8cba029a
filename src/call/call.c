/* The front door (see call.h). */
#include "call/call.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "call/autocast.h"
#include "distributed/dispatch.h"
#include "distributed/rng.h"

#define SMALL_IN 8 /* inputs gathered on the stack; cat/stack of more allocate */

/* A random op on plain tensors draws at the rank's generator position and, once it succeeded,
 * advances it by the words it consumed (DTensors: the RNG tracker region does both). */
static void rng_position(dt_context *ctx, dt_op_args *args) {
  args->ints[DT_RNG_SLOT_SEED] = (int64_t)ctx->rng.seed;
  args->ints[DT_RNG_SLOT_OFFSET] = (int64_t)ctx->rng.offset;
}

static void rng_advance(dt_context *ctx, dt_op_id op, const dt_op_args *args, const dt_tensor *out) {
  dt_meta m = {.dtype = out->dtype, .ndim = out->ndim};
  memcpy(m.shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
  ctx->rng.offset += dt_rng_op_words(op, args, &m);
}

static int run(dt_context *ctx, dt_op_id op, const dt_op_def *def, dt_op_args *args, dt_value *const *in, int nin,
               dt_tensor **loc, const dt_dspec **specs, dt_tensor **res, dt_dspec **res_spec) {
  int distributed = 0;
  for (int i = 0; i < nin; i++) {
    loc[i] = in[i] ? in[i]->local : NULL;
    specs[i] = in[i] ? in[i]->spec : NULL;
    if (specs[i]) distributed = 1;
    if (loc[i] && dt_storage_is_released(loc[i]->storage)) /* freed bytes: never read them */
      return dt_error("%s: input %d's storage is released (its values were freed, as fully_shard frees a block's "
                      "gathered parameters after forward)", def->name, i + 1);
  }
  args->in = loc;
  args->nin = nin;
  if (!distributed) {
    int random = def->flags & DT_OPF_RANDOM;
    if (random && !ctx) return dt_error("%s: random ops need a runtime context (its generator)", def->name);
    if (random) rng_position(ctx, args);
    if (dt_op_call(op, args, res) != DT_OK) return DT_ERR;
    if (random) rng_advance(ctx, op, args, res[0]);
    return DT_OK;
  }
  if (!ctx) return dt_error("%s: DTensor operands need a runtime context", def->name);
  return dt_dispatch(ctx, op, args, specs, res, res_spec);
}

/* autograd records around the local op or the dispatcher */
static int call_recorded(dt_context *ctx, dt_op_id op, const dt_op_def *def, dt_op_args *args, dt_value *const *in,
                         int nin, dt_value *const *out) {
  dt_autograd_pending grad = {0};
  if (dt_autograd_wants(ctx, in, nin) && dt_autograd_before(ctx, op, args, in, nin, &grad) != DT_OK) return DT_ERR;
  dt_tensor *small[SMALL_IN], **loc = small;
  const dt_dspec *small_specs[SMALL_IN], **specs = small_specs;
  if (nin > SMALL_IN) { /* one block: the locals, then the specs */
    if (!(loc = malloc((sizeof *loc + sizeof *specs) * (size_t)nin))) {
      dt_autograd_cancel(&grad);
      return dt_error("%s: out of memory", def->name);
    }
    specs = (const dt_dspec **)(loc + nin);
  }
  dt_tensor *res[DT_OP_MAX_OUT] = {0};
  dt_dspec *res_spec[DT_OP_MAX_OUT] = {0};
  int st = run(ctx, op, def, args, in, nin, loc, specs, res, res_spec);
  args->in = NULL; /* loc is gone after this call */
  if (loc != small) free(loc);
  if (st != DT_OK) {
    dt_autograd_cancel(&grad);
    return st;
  }
  if (def->flags & DT_OPF_INPLACE) { /* the result is in[0] itself, which keeps its spec */
    dt_tensor_release(res[0]);
    dt_dspec_free(res_spec[0]);
    dt_autograd_bump_version(in[0], def->name);
  } else {
    for (int o = 0; o < def->nout; o++) dt_value_init(out[o], res[o], res_spec[o]);
  }
  if (grad.active && dt_autograd_after(ctx, &grad, in, nin, (def->flags & DT_OPF_INPLACE) ? NULL : out) != DT_OK)
    return DT_ERR;
  if (ctx && ctx->capture) return ctx->capture_hooks->op(ctx, op, args, in, nin, out); /* graph capture */
  return DT_OK;
}

int dt_call(dt_context *ctx, dt_op_id op, dt_op_args *args, dt_value *const *in, int nin, dt_value *const *out) {
  const dt_op_def *def = dt_op_get(op);
  if (ctx && !ctx->call) ctx->call = dt_call; /* autograd's rules come back in through it */
  if (!ctx || !ctx->modes.autocast_dtype) return call_recorded(ctx, op, def, args, in, nin, out);
  /* autocast before autograd: the casts are recorded nodes, so gradients flow back through them
   * in the inputs' own dtypes */
  dt_value cast[DT_AUTOCAST_MAX_IN], *use[DT_AUTOCAST_MAX_IN];
  if (nin > DT_AUTOCAST_MAX_IN) return call_recorded(ctx, op, def, args, in, nin, out);
  if (dt_autocast_inputs(ctx, op, args, in, nin, cast, use) != DT_OK) return DT_ERR;
  int st = call_recorded(ctx, op, def, args, use, nin, out);
  dt_autocast_release(cast, nin);
  return st;
}
