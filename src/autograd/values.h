/* Gradient values inside autograd (values.c). */
#ifndef DT_AUTOGRAD_VALUES_H
#define DT_AUTOGRAD_VALUES_H

#include "autograd/graph.h"

/* A value of m's dtype, shape and placements filled with v (through the front door). */
int dt_autograd_full(dt_context *ctx, const dt_slot_meta *m, double v, dt_value *out);
/* g brought to what m expects, in place: a DTensor gradient of a plain input gathered, the
 * dtype cast, the placements redistributed to m's; a shape mismatch is an error naming what. */
int dt_autograd_conform(dt_context *ctx, const char *what, dt_value *g, const dt_slot_meta *m);
/* The same, but a mesh dim where g is Partial and m expects Replicate keeps the Partial (for
 * a node that takes its gradient Partial: dt_autograd_keep_partial). */
int dt_autograd_conform_keep_partial(dt_context *ctx, const char *what, dt_value *g, const dt_slot_meta *m);
/* acc += g (acc empty: takes g); g is consumed either way. */
int dt_autograd_accumulate(dt_context *ctx, dt_value *acc, dt_value *g);
/* A value sharing v's data (local retained, spec copied, no autograd metadata). */
int dt_autograd_share(const dt_value *v, dt_value *out);
int dt_autograd_clone(dt_context *ctx, const dt_value *v, dt_value *out);

#endif
