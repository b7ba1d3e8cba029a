/* Lua bindings: the Tensor userdata and the helpers every binding file uses.
 * Lua dims/indices are 1-based (negative from the end); the conversion to the C core's
 * 0-based dims happens here, in src/bindings, and nowhere else. */
#ifndef DT_BINDINGS_L_TENSOR_H
#define DT_BINDINGS_L_TENSOR_H

#include <lauxlib.h>
#include <lua.h>

#include "kernels/local_op.h"

#define DT_TENSOR_MT "dtensor.Tensor"

#include "ops/index_key.h"
#include "distributed/value.h"

/* The Tensor userdata is a dt_value (src/distributed/value.h): a plain tensor, or a DTensor
 * (local shard + spec).  local is NULL after release. */

/* ---- userdata ---- */
/* Plain tensors only: a DTensor raises "bad argument #i to 'f' (a DTensor: this op has no
 * sharding rule for DTensor arguments yet; ...)".  Functions that take DTensors too read values instead. */
dt_tensor *dt_lua_check_tensor(lua_State *L, int idx);   /* raises "expected a tensor" */
dt_tensor *dt_lua_test_tensor(lua_State *L, int idx);    /* NULL if not a (live) tensor */
/* Any tensor, plain or distributed (live), or NULL / a type error. */
dt_value *dt_lua_test_value(lua_State *L, int idx);
dt_value *dt_lua_check_value(lua_State *L, int idx);
/* The same, with errors naming the user-facing op (for functions reached through Lua
 * wrappers, whose C name would mislead): "<op>: expected a tensor for <what>, got nil"
 * (what NULL: "<op>: expected a tensor, got nil"), "<op>: <what> has been released (closed)". */
dt_value *dt_lua_check_value_for(lua_State *L, int idx, const char *op, const char *what);
/* The type name of the value at idx as errors show it (its __name, as luaL_typeerror). */
const char *dt_lua_typename(lua_State *L, int idx);
/* Pushes a DTensor owning local's reference and spec (either NULL raises the dt_error). */
void dt_lua_push_dtensor(lua_State *L, dt_tensor *local, struct dt_dspec *spec);
/* __index for the DTensor-only keys (device_mesh, placements); from l_dtensor.c. */
int dt_lua_dtensor_field(lua_State *L, dt_value *u, const char *k);
/* Pushes a Tensor userdata holding an empty value for a C function to initialise (the value
 * keeps what autograd attaches to it); then dt_lua_account_value counts its storage for the
 * garbage collector.  Left empty, it releases as nothing. */
dt_value *dt_lua_new_value(lua_State *L);
void dt_lua_account_value(lua_State *L, const dt_value *v);
/* Pushes a tensor userdata owning t's reference; t == NULL raises the current dt_error. */
void dt_lua_push_tensor(lua_State *L, dt_tensor *t);
/* Raises dt_error_message() as a Lua error (never returns). */
int dt_lua_raise(lua_State *L);
/* Protects the metatable on the stack top: getmetatable(x) returns name, and
 * setmetatable refuses, so Lua code cannot reach __gc/__close (debug.getmetatable still
 * can: every release is idempotent and every use of a released object raises). */
void dt_lua_protect_meta(lua_State *L, const char *name);

/* ---- arguments ---- */
/* Converts a Lua dim (1-based, negative from the end) at idx into 0-based for a tensor of
 * ndim dims; error "<op>: dim 4 out of range for a 2-d tensor (dims are 1-based: 1..2 or -2..-1)".
 * extra = 1 allows one past the end (unsqueeze, stack). */
int dt_lua_check_dim(lua_State *L, int idx, int ndim, int extra, const char *op);
int dt_lua_to_dim(lua_State *L, lua_Integer d, int ndim, int extra, const char *op);
/* A shape given as varargs of integers starting at idx, or as one table at idx.
 * Returns the count of stack slots consumed (the opts table may follow). */
int dt_lua_check_shape(lua_State *L, int idx, int *ndim, int64_t *shape, const char *op);
/* An integer argument: raises "<op>: <what> must be an integer, got <type>". */
lua_Integer dt_lua_check_integer(lua_State *L, int idx, const char *op, const char *what);
/* The dtype named by a string or constant at idx (nil -> def). */
dt_dtype dt_lua_opt_dtype(lua_State *L, int idx, dt_dtype def);
/* Validates an options argument: nil, or a table whose `device` (if any) is "cpu".  op names the
 * caller in errors ("<op>: ..."); NULL gives Lua's "bad argument #idx to '<function>'" form. */
void dt_lua_check_opts(lua_State *L, int idx, const char *op);
/* opts.dtype from the table at idx (nil table / nil field -> def); validates the table. */
dt_dtype dt_lua_opt_dtype_field(lua_State *L, int idx, dt_dtype def);
/* Boolean field of an opts table (absent -> def). */
int dt_lua_opt_bool_field(lua_State *L, int idx, const char *field, int def);
/* Number field of an opts table (absent -> def). */
double dt_lua_opt_number_field(lua_State *L, int idx, const char *field, double def);

/* Runs op through the front door (src/call) on the values in[0..nin-1] and pushes its nout
 * results (raises on error).  args holds the static arguments. */
int dt_lua_call(lua_State *L, dt_op_id id, dt_op_args *a, dt_value *const *in, int nin);
/* The same for an in-place op: pushes the value at stack index self (in[0]'s userdata). */
int dt_lua_call_inplace(lua_State *L, int self, dt_op_id id, dt_op_args *a, dt_value *const *in, int nin);
/* Index values (ids, indices, targets) between Lua's 1-based and the core's 0-based: pushes
 * ix - 1 and returns it; or makes the (int64) result at idx 1-based (a new tensor, so that
 * the 0-based one autograd may have saved stays as it was). */
dt_value *dt_lua_push_zero_based(lua_State *L, dt_value *ix);
void dt_lua_to_one_based(lua_State *L, int idx);

/* ---- registration ---- */
/* Each binding file adds its functions: module (dt table), methods (Tensor methods),
 * meta (the Tensor metatable, for operators).  Indices are absolute. */
typedef struct dt_lua_targets {
  int module, methods, meta;
} dt_lua_targets;
void dt_lua_open_create(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_convert(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_pointwise(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_reduce(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_linalg(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_view(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_shape(lua_State *L, const dt_lua_targets *tg); /* l_shape.c: gather, scatter, sort, topk, flip, ... */
void dt_lua_open_nn(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_io(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_print(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_random(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_dist(lua_State *L, const dt_lua_targets *tg); /* l_dist.c: ranks and collectives */
void dt_lua_open_nccl(lua_State *L, const dt_lua_targets *tg); /* l_nccl.c: dt.distributed.is_nccl_available */
void dt_lua_open_cuda(lua_State *L, const dt_lua_targets *tg); /* l_cuda.c: dt.cuda, t:cuda(), t:cpu() */
/* Pushes the value at idx moved to device dev ("cpu", "cuda", "cuda:N"; itself when already
 * there); errors name op (l_cuda.c). */
int dt_lua_move_to_device(lua_State *L, int idx, const char *op, const char *dev);
void dt_lua_open_mesh(lua_State *L, const dt_lua_targets *tg);    /* l_mesh.c: DeviceMesh, placements */
void dt_lua_open_dtensor(lua_State *L, const dt_lua_targets *tg); /* l_dtensor.c */
void dt_lua_open_op_table(lua_State *L, const dt_lua_targets *tg); /* l_op_table.c: dt._op_rows() */
void dt_lua_open_autograd(lua_State *L, const dt_lua_targets *tg); /* l_autograd.c */
void dt_lua_open_host(lua_State *L, const dt_lua_targets *tg);     /* l_host.c: clock, isatty */
void dt_lua_open_amp(lua_State *L, const dt_lua_targets *tg);      /* l_amp.c: autocast mode, op classes */
void dt_lua_open_config(lua_State *L, const dt_lua_targets *tg);   /* l_config.c: dt.config(), threads */
void dt_lua_open_fused_backward(lua_State *L, const dt_lua_targets *tg); /* l_fused_backward.c */
void dt_lua_open_graph(lua_State *L, const dt_lua_targets *tg);    /* l_graph.c: dt.compile */
void dt_lua_open_trace(lua_State *L, const dt_lua_targets *tg);    /* l_trace.c: dt._trace (batch-dim analysis) */
/* Raises "compile: <what> at <file:line> cannot be captured in a graph; ..." while a graph
 * records on L's rank (reading a tensor's values into Lua, collectives outside the front
 * door, backward); nothing otherwise. */
void dt_lua_capture_refuse(lua_State *L, const char *what);
/* The first Lua line outside the library (lua/dtensor), else the first Lua line: "file.lua:12". */
void dt_lua_where(lua_State *L, char *buf, size_t len);
/* When v's userdata is on L's stack (or one table level down), stores it in the table
 * registry[pins_ref] under the lightuserdata v and returns 1; else 0. */
int dt_lua_pin_found(lua_State *L, int pins_ref, dt_value *v);
/* __index / __newindex for the autograd fields (requires_grad, is_leaf, grad, grad_fn,
 * retains_grad): pushes the field and returns 1, or returns -1 (get) / 0 (set) for another key. */
int dt_lua_autograd_field(lua_State *L, dt_value *u, const char *k);
int dt_lua_autograd_set_field(lua_State *L, dt_value *u, const char *k);
/* Every factory's requires_grad option: with {requires_grad = true} in the options table at
 * opts, the tensor at the stack top (the factory's result) becomes a leaf that requires grad;
 * a dtype other than floating point, or a non-boolean option, raises naming op.  Returns 1. */
int dt_lua_requires_grad_option(lua_State *L, int opts, const char *op);

/* t[k] for a non-string key (integer: select along dim 1; table: slicing), from l_view.c. */
int dt_lua_tensor_index(lua_State *L);
/* t[k] = v, from l_view.c. */
int dt_lua_tensor_newindex(lua_State *L);
/* Parses the key at stack index key for a tensor of this shape into ix (0-based); raises
 * "indexing: ..." as plain tensors do (doc/ops-views.md). */
void dt_lua_parse_index(lua_State *L, int key, int ndim, const int64_t *shape, dt_index_key *ix);
/* A 0-d tensor holding the Lua number/boolean at idx (integers exact); raises otherwise. */
dt_tensor *dt_lua_scalar_tensor(lua_State *L, int idx);
/* l_dispatch.c: inside dt.implicit_replication (plain tensors taken as replicated)? */
int dt_lua_implicit_replication(lua_State *L);

/* The whole C module: returns the core table on the stack. */
int dt_lua_open(lua_State *L);

#endif
