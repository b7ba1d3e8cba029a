/* Reverse-mode autograd (doc/autograd.md).  The front door records a node for each op call
 * that needs one (grad mode on, some input requires grad); backward walks the graph from
 * the roots, runs each node's backward rule through the front door and accumulates into the
 * leaves' .grad.  Gradients of DTensors take their input's placements with Partial turned
 * into Replicate (the engine redistributes at every edge), so a .grad is right by
 * construction whatever the ops in between chose. */
#ifndef DT_AUTOGRAD_AUTOGRAD_H
#define DT_AUTOGRAD_AUTOGRAD_H

#include "base/export.h"

#include "autograd/graph.h"

/* ---- recording (the front door) ---- */
typedef struct dt_autograd_pending {
  int active;
  dt_node *node;
} dt_autograd_pending;

/* Does this call need a node?  Grad mode on and some input requires grad. */
static inline int dt_autograd_wants(const dt_context *ctx, dt_value *const *in, int nin) {
  if (!ctx || !ctx->modes.grad_enabled) return 0;
  for (int i = 0; i < nin; i++)
    if (in[i] && in[i]->autograd && dt_value_requires_grad(in[i])) return 1;
  return 0;
}
/* Before the op runs: checks (in-place on a leaf or a view), saves inputs; after it ran:
 * saves outputs, attaches the outputs' history (in-place: in[0] takes the new node).  A
 * failed op calls cancel.  out: the op's outputs (NULL for an in-place op). */
int dt_autograd_before(dt_context *ctx, dt_op_id op, const dt_op_args *args, dt_value *const *in, int nin,
                       dt_autograd_pending *p);
int dt_autograd_after(dt_context *ctx, dt_autograd_pending *p, dt_value *const *in, int nin, dt_value *const *out);
void dt_autograd_cancel(dt_autograd_pending *p);
/* After a successful in-place op on v: bumps its storage's version, naming the op. */
static inline void dt_autograd_bump_version(dt_value *v, const char *op) {
  if (v && v->local && v->local->storage) v->local->storage->version++, v->local->storage->last_write = op;
}

/* A node not from the op table (the DTensor API's conversions, Lua autograd.Functions,
 * checkpoints): outputs out[0..nout-1] (already computed) get it as their grad_fn when some
 * input requires grad.  grad_spec[i] (NULL, or NULL entries: the input's own placements with
 * Partial -> Replicate) overrides the placements of input i's gradient.  Takes ud (free_ud
 * frees it, also on error). */
DT_API int dt_autograd_record_custom(dt_context *ctx, const char *name, dt_value *const *in, int nin,
                                     dt_value *const *out, int nout, const dt_dspec *const *grad_spec,
                                     dt_custom_backward_fn fn, void *ud, void (*free_ud)(void *));

/* Marks the custom node that computed out (its grad_fn; none: nothing) as one whose backward
 * takes its outputs' gradients with Partial placements as they come, rather than reduced to
 * Replicate first: a node that hands the gradient to its input's edge, which brings it to the
 * input's placements anyway (redistribute: a Partial gradient of a Shard -> Replicate
 * redistribute then reaches the Shard in one reduce_scatter, not an all_reduce and a chunk).
 * An output with hooks, a retained grad, or whose gradient dt_autograd_grad returns still gets
 * it reduced. */
void dt_autograd_keep_partial(dt_value *out);

/* dt_autograd_record_custom without grad_spec, for a node that keeps values its backward
 * reads (a Lua autograd.Function's save_for_backward): copies of save[0..nsave-1] (no NULL)
 * are held as an op node holds what its rule reads: their versions are checked before its
 * backward, and a backward without retain_graph frees them (a later backward through the
 * node is then an error).  *node: the node recorded (NULL when none was: no input requires
 * grad, or no output is floating point; set on error too), for fn to find its saved values
 * (node->saved[i].v, i < node->nsaved) and to materialize gradients (dt_autograd_node_zeros). */
DT_API int dt_autograd_record_custom_saving(dt_context *ctx, const char *name, dt_value *const *in, int nin,
                                            dt_value *const *out, int nout, dt_value *const *save, int nsave,
                                            dt_custom_backward_fn fn, void *ud, void (*free_ud)(void *),
                                            dt_node **node);
/* The gradient a custom node's backward assumes for its output o when none flowed: zeros of
 * the output's dtype, shape and gradient placements (empty when output o took no history). */
DT_API int dt_autograd_node_zeros(dt_context *ctx, const dt_node *n, int o, dt_value *out);

/* ---- the engine ---- */
/* Backward from roots[0..n-1] with gradients grads (NULL or NULL entries: ones, for a root of
 * one element), accumulating into the .grad of every leaf reached.  retain_graph keeps the
 * saved values for another backward. */
DT_API int dt_autograd_backward(dt_context *ctx, dt_value *const *roots, const dt_value *const *grads, int n,
                                int retain_graph);
/* The gradients of roots with respect to inputs[0..ni-1] into out[0..ni-1] (initialised; an
 * empty value where an input was not reached and allow_unused), touching no .grad. */
DT_API int dt_autograd_grad(dt_context *ctx, dt_value *const *roots, const dt_value *const *grads, int n,
                            dt_value *const *inputs, int ni, int retain_graph, int allow_unused, dt_value *out);

/* ---- a value's autograd state ---- */
DT_API int dt_autograd_requires_grad(const dt_value *v);
/* Sets requires_grad of a leaf (floating dtypes only; a non-leaf may only be set to true). */
DT_API int dt_autograd_set_requires_grad(dt_value *v, int flag);
DT_API int dt_autograd_is_leaf(const dt_value *v);
/* .grad: NULL when none. */
DT_API const dt_value *dt_autograd_grad_of(const dt_value *v);
/* Sets .grad to a copy sharing g's data (g NULL: clears it); g's shape and dtype must match. */
DT_API int dt_autograd_set_grad(dt_value *v, const dt_value *g);
/* The name of v's grad_fn ("MulBackward"-like: the op's name), or NULL for a leaf. */
DT_API const char *dt_autograd_grad_fn_name(const dt_value *v);
DT_API int dt_autograd_retain_grad(dt_value *v);
DT_API int dt_autograd_retains_grad(const dt_value *v);
/* Registers a gradient hook on v (it must require grad); *id identifies it for removal. */
DT_API int dt_autograd_register_hook(dt_value *v, dt_grad_hook_fn fn, void *ud, void (*free_ud)(void *), int *id);
DT_API void dt_autograd_remove_hook(dt_value *v, int id);
/* detach_: v leaves the graph (its history and requires_grad dropped, .grad kept). */
DT_API void dt_autograd_detach_(dt_value *v);

#endif
