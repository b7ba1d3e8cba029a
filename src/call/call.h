/* The front door: every op call, on plain tensors and on DTensors, in place or not, from the
 * bindings, from autograd's backward and from a replayed graph, goes through dt_call.
 *   1. capture records the call when on (the graph-capture issue),
 *   2. autograd records a node when grad mode is on and an input requires grad (the autograd
 *      issue; ctx->modes.grad_enabled is its switch),
 *   3. any distributed input sends the call to the sharding dispatcher (src/distributed),
 *      else the local op runs: the op's shape rule and its device's kernel (dt_op_call). */
#ifndef DT_CALL_CALL_H
#define DT_CALL_CALL_H

#include "base/export.h"

#include "distributed/context.h"
#include "distributed/value.h"
#include "ops/ops.h"

/* Runs op on the values in[0..nin-1] (NULL entries: absent optional operands).  args carries
 * the static arguments; its in/nin are set here from the values.  On success out[0..nout-1]
 * (nout = the op's) are initialised with new values owned by the caller; in-place ops write
 * in[0] and leave out untouched (out may be NULL).  On error nothing is initialised and
 * dt_error holds the message.  ctx may be NULL for calls on plain tensors only. */
DT_API int dt_call(dt_context *ctx, dt_op_id op, dt_op_args *args, dt_value *const *in, int nin, dt_value *const *out);

#endif
