/* Autocast (dt.amp.autocast, doc/amp.md): the front door's step before autograd records.  While
 * ctx->modes.autocast_dtype is a low dtype, an op's floating inputs are cast through dt_call
 * (the `to` row, so autograd records the casts) according to the op's autocast class. */
#ifndef DT_CALL_AUTOCAST_H
#define DT_CALL_AUTOCAST_H

#include "base/export.h"
#include "distributed/context.h"
#include "distributed/value.h"

typedef enum dt_autocast_class {
  DT_AUTOCAST_AS_IS = 0, /* runs in its inputs' dtypes (torch: not listed, or "promote") */
  DT_AUTOCAST_LOWER,     /* f32/f16/bf16 inputs cast to the autocast dtype (torch's lower_precision_fp) */
  DT_AUTOCAST_FP32,      /* f16/bf16 inputs cast up to float32 (torch's fp32 lists) */
} dt_autocast_class;

DT_API dt_autocast_class dt_autocast_class_of(dt_op_id op);
DT_API const char *dt_autocast_class_name(dt_autocast_class c);

#define DT_AUTOCAST_MAX_IN 8 /* the classified ops take at most 4 inputs; more (cat) run as they are */

/* The casts of op's inputs under the context's autocast mode (0 = off: none).  Fills use[i]
 * with the value op runs on: in[i] itself, or &cast[i], a new value (cast[i].local != NULL),
 * which the caller releases with dt_autocast_release once the op has run.  Returns DT_OK, or
 * DT_ERR with no cast left. */
int dt_autocast_inputs(dt_context *ctx, dt_op_id op, const dt_op_args *args, dt_value *const *in, int nin,
                       dt_value *cast, dt_value **use);
void dt_autocast_release(dt_value *cast, int nin);

#endif
