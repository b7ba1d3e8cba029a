/* The DTensor API's conversions as differentiable calls (doc/autograd-dtensor.md).  Each runs
 * the distributed layer's function (src/distributed/dtensor_api.h) and, when grad mode is on and
 * its input requires grad, records a node whose backward brings the gradient back:
 *   from_local    the local part of the output's gradient redistributed to grad_p (default:
 *                 the forward placements with Partial -> Replicate);
 *   to_local      a DTensor made from the local gradient with grad_p (default: chosen by the
 *                 gradient's kind, src/autograd/grad_kind.h), brought to x's placements;
 *   redistribute  the gradient brought back to x's placements (Partial -> Replicate), or to
 *                 grad_p;
 *   full_tensor   as to_local of x redistributed to Replicate.
 * grad_p: NULL for the default, else one placement per mesh dim (Shard dims as the user wrote
 * them), checked against the shapes on every rank alike.  The output is initialised only on
 * success and then belongs to the caller. */
#ifndef DT_CALL_CALL_DTENSOR_H
#define DT_CALL_CALL_DTENSOR_H

#include "base/export.h"

#include "distributed/context.h"
#include "distributed/value.h"

/* dt_from_local on local's tensor (a plain value); see dtensor_api.h for the other arguments. */
DT_API int dt_call_from_local(dt_context *ctx, dt_value *local, dt_mesh *m, const dt_placement *p, int run_check,
                              int ndim, const int64_t *shape, const dt_placement *grad_p, dt_value *out);
DT_API int dt_call_to_local(dt_context *ctx, dt_value *x, const dt_placement *grad_p, dt_value *out);
DT_API int dt_call_redistribute(dt_context *ctx, dt_value *x, dt_mesh *mesh, const dt_placement *to,
                                const dt_placement *grad_p, dt_value *out);
DT_API int dt_call_full_tensor(dt_context *ctx, dt_value *x, const dt_placement *grad_p, dt_value *out);

#endif
