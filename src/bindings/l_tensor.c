/* The Tensor userdata: lifetime, properties, and __index dispatch. */
#include "bindings/l_tensor.h"
#include "base/error.h"
#include "bindings/l_dist.h"
#include "call/call.h"
#include "capture/capture.h"
#include "distributed/dtensor.h"

#include <limits.h>
#include <string.h>

#define NO_RULE "a DTensor: this op has no sharding rule for DTensor arguments yet; use x:to_local() or x:full_tensor()"

static void refuse_released(lua_State *L, int idx, const dt_value *u);

dt_tensor *dt_lua_test_tensor(lua_State *L, int idx) {
  dt_value *u = luaL_testudata(L, idx, DT_TENSOR_MT);
  if (u && u->spec) luaL_argerror(L, idx, NO_RULE);
  if (u) refuse_released(L, idx, u); /* its callers read the tensor's memory themselves */
  return u ? u->local : NULL;
}

dt_value *dt_lua_test_value(lua_State *L, int idx) {
  dt_value *u = luaL_testudata(L, idx, DT_TENSOR_MT);
  return u && u->local ? u : NULL;
}

#define RELEASED_STORAGE "the tensor's storage is released (its values were freed; fully_shard refills them before use)"

/* A tensor whose storage bytes were freed (t:_release_storage) is refused by every binding that
 * checks its arguments here, so none reads freed memory; only the storage methods and the
 * metadata ones (size, dim, numel, fields...) take it. */
static dt_value *check_value_any(lua_State *L, int idx) {
  dt_value *u = luaL_testudata(L, idx, DT_TENSOR_MT);
  if (!u) luaL_typeerror(L, idx, "tensor");
  if (!u->local) luaL_argerror(L, idx, "tensor has been released (closed)");
  return u;
}

static void refuse_released(lua_State *L, int idx, const dt_value *u) {
  if (u->local && dt_storage_is_released(u->local->storage)) luaL_argerror(L, idx, RELEASED_STORAGE);
}

dt_value *dt_lua_check_value(lua_State *L, int idx) {
  dt_value *u = check_value_any(L, idx);
  refuse_released(L, idx, u);
  return u;
}

const char *dt_lua_typename(lua_State *L, int idx) {
  int t = luaL_getmetafield(L, idx, "__name"); /* pushes nothing when absent */
  const char *name = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL; /* the metatable keeps it alive */
  if (t != LUA_TNIL) lua_pop(L, 1);
  return name ? name : luaL_typename(L, idx);
}

dt_value *dt_lua_check_value_for(lua_State *L, int idx, const char *op, const char *what) {
  dt_value *u = luaL_testudata(L, idx, DT_TENSOR_MT);
  if (!u) {
    if (what) luaL_error(L, "%s: expected a tensor for %s, got %s", op, what, dt_lua_typename(L, idx));
    luaL_error(L, "%s: expected a tensor, got %s", op, dt_lua_typename(L, idx));
  }
  if (!u->local) luaL_error(L, "%s: %s has been released (closed)", op, what ? what : "tensor");
  if (dt_storage_is_released(u->local->storage)) luaL_error(L, "%s: " RELEASED_STORAGE, op);
  return u;
}

dt_tensor *dt_lua_check_tensor(lua_State *L, int idx) {
  dt_value *u = dt_lua_check_value(L, idx);
  if (u->spec) luaL_argerror(L, idx, NO_RULE);
  return u->local;
}

int dt_lua_raise(lua_State *L) { return luaL_error(L, "%s", dt_error_message()); }

void dt_lua_protect_meta(lua_State *L, const char *name) {
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__metatable");
}

/* Lua's collector sees only the small userdata, not the tensor, storage and bytes behind it,
 * so a loop making temporaries would let them pile up (and every call would get slower as
 * the heap outgrows the caches).  Two measures, per thread (a rank is a thread):
 * - the hidden bytes are added to the collector's debt (LUA_GCSTEP, in KiB), so it steps in
 *   proportion to what really was allocated: a young collection frees last calls' temporaries
 *   (paid when the next tensor is made: owe_collector);
 * - the generational mode is re-armed now and then: after a collection that found the live set
 *   grown (loading a library, building a model), Lua 5.4 falls back to full collections at a
 *   doubled heap and stays there while the program keeps allocating, garbage and all.
 * Large storages also force a full collection when the storage bytes held (live, or garbage
 * not yet collected) have grown since the last one by what was live after it (at least
 * GC_MIN_STEP): Lua's own "collect when the heap doubles" pause, for tensors that outlived the
 * young generation.  Counting what is held, not what was made: in a loop whose young
 * collections free its temporaries, nothing grows, and a full collection (which walks every Lua
 * object, some 10% of a loop of 4 MiB all_to_alls when it came every 32 MiB made) never comes. */
#define GC_MIN_STEP ((size_t)32 << 20)
#define GC_REARM_EVERY 65536u /* tensors made between two re-arms of the generational mode */
static _Thread_local size_t gc_live, gc_live_after, gc_hidden;
static _Thread_local unsigned gc_made;

static _Thread_local int gc_rearm_due;

/* The hidden bytes of a new tensor, owed to the collector until the next tensor's userdata is
 * made (pay_collector).  Stepping at once, while the new result was being pushed, aged every
 * result by one collection at its birth: the one before it, still in its variable's register,
 * then survived a second, became old, and only a full collection freed it (`local y = a + b`
 * in a loop of 256 KiB tensors held 128 outputs, 32 MiB, between full collections). */
static void owe_collector(const dt_tensor *t, int owns_storage) {
  gc_hidden += sizeof *t + (owns_storage ? sizeof *t->storage + t->storage->capacity : 0);
  if (++gc_made % GC_REARM_EVERY == 0) gc_rearm_due = 1;
}

static void pay_collector(lua_State *L) {
  if (gc_hidden < 1024 && !gc_rearm_due) return;
  if (!lua_gc(L, LUA_GCISRUNNING)) return; /* the program stopped the collector */
  if (gc_rearm_due) lua_gc(L, LUA_GCGEN, 0, 0); /* a no-op while it is still generational */
  gc_rearm_due = 0;
  size_t kb = gc_hidden >> 10;
  gc_hidden &= 1023;
  if (kb) lua_gc(L, LUA_GCSTEP, kb > INT_MAX ? INT_MAX : (int)kb);
}

static void account_storage(lua_State *L, const dt_tensor *t) {
  int owns = atomic_load_explicit(&t->storage->refcount, memory_order_relaxed) == 1; /* not a view */
  owe_collector(t, owns);
  if (!owns) return;
  gc_live += t->storage->nbytes;
  size_t grown = gc_live > gc_live_after ? gc_live - gc_live_after : 0;
  if (grown < GC_MIN_STEP || grown < gc_live_after) return;
  lua_gc(L, LUA_GCCOLLECT);
  gc_live_after = gc_live;
}

static void unaccount_storage(const dt_tensor *t) {
  if (atomic_load_explicit(&t->storage->refcount, memory_order_relaxed) != 1) return;
  size_t n = t->storage->nbytes;
  gc_live = gc_live > n ? gc_live - n : 0;
}

/* A new Tensor userdata holding an empty value (filled by the caller, or released as empty). */
static dt_value *new_value(lua_State *L) {
  pay_collector(L); /* before the new userdata exists: see owe_collector */
  dt_value *u = lua_newuserdatauv(L, sizeof *u, 0);
  dt_value_init(u, NULL, NULL);
  luaL_setmetatable(L, DT_TENSOR_MT);
  return u;
}
dt_value *dt_lua_new_value(lua_State *L) { return new_value(L); }
void dt_lua_account_value(lua_State *L, const dt_value *v) {
  if (v->local) account_storage(L, v->local);
}

void dt_lua_push_tensor(lua_State *L, dt_tensor *t) {
  if (!t) dt_lua_raise(L);
  dt_value_init(new_value(L), t, NULL);
  account_storage(L, t);
}

void dt_lua_push_dtensor(lua_State *L, dt_tensor *local, struct dt_dspec *spec) {
  if (!local || !spec) {
    if (local) dt_tensor_release(local);
    dt_dspec_free(spec);
    dt_lua_raise(L);
  }
  dt_value_init(new_value(L), local, spec);
  account_storage(L, local);
}

/* __gc and __close: idempotent. */
static int tensor_release(lua_State *L) {
  dt_value *u = luaL_checkudata(L, 1, DT_TENSOR_MT);
  if (u->local) unaccount_storage(u->local);
  dt_value_clear(u);
  return 0;
}

/* dt_call on this rank's context, which learns the calling state (for Lua sharding rules);
 * raises on error. */
static void call(lua_State *L, dt_op_id id, dt_op_args *a, dt_value *const *in, int nin, dt_value *const *out) {
  dt_context *ctx = dt_lua_context(L);
  ctx->host = L;
  if (dt_call(ctx, id, a, in, nin, out) != DT_OK) dt_lua_raise(L);
}

int dt_lua_call(lua_State *L, dt_op_id id, dt_op_args *a, dt_value *const *in, int nin) {
  dt_value *out[DT_OP_MAX_OUT];
  int n = dt_op_get(id)->nout;
  for (int o = 0; o < n; o++) out[o] = new_value(L); /* empty until the call fills them */
  call(L, id, a, in, nin, out);
  for (int o = 0; o < n; o++) account_storage(L, out[o]->local);
  return n;
}

int dt_lua_call_inplace(lua_State *L, int self, dt_op_id id, dt_op_args *a, dt_value *const *in, int nin) {
  call(L, id, a, in, nin, NULL);
  lua_pushvalue(L, self);
  return 1;
}

/* ---- properties ---- */
/* The shape a user sees: the global one for a DTensor. */
static const int64_t *user_shape(const dt_value *u, int *ndim) {
  if (u->spec) return *ndim = u->spec->ndim, u->spec->shape;
  return *ndim = u->local->ndim, u->local->shape;
}

/* A size is a plain list of integers with a metatable that prints it as {8, 6} and compares
 * it by value (with any list: x:size() == {8, 6}). */
#define SIZE_MT "dtensor.Size"

static int size_tostring(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    lua_geti(L, 1, i);
    luaL_addvalue(&b); /* converts the number */
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

static int size_eq(lua_State *L) {
  if (!lua_istable(L, 1) || !lua_istable(L, 2)) return lua_pushboolean(L, 0), 1;
  lua_Integer n = luaL_len(L, 1);
  if (luaL_len(L, 2) != n) return lua_pushboolean(L, 0), 1;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    lua_geti(L, 2, i);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) return lua_pushboolean(L, 0), 1;
  }
  return lua_pushboolean(L, 1), 1;
}

/* A size read into Lua while a graph records: a dynamic graph keeps it static (a guard). */
static void note_size(lua_State *L, const dt_value *v, int dim, const int64_t *vals, int n) {
  dt_context *ctx = dt_lua_context(L);
  if (dt_capture_active(ctx) && dt_capture_note_size(ctx, v, dim, vals, n) != DT_OK) dt_lua_raise(L);
}

static void push_size(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  luaL_setmetatable(L, SIZE_MT);
}

static int tensor_size(lua_State *L) {
  int ndim;
  const dt_value *v = check_value_any(L, 1);
  const int64_t *shape = user_shape(v, &ndim);
  if (!lua_isnoneornil(L, 2)) {
    int d = dt_lua_check_dim(L, 2, ndim, 0, "size");
    note_size(L, v, d, &shape[d], 1);
    lua_pushinteger(L, shape[d]);
    return 1;
  }
  note_size(L, v, -1, shape, ndim);
  push_size(L, ndim, shape);
  return 1;
}

static int tensor_stride(lua_State *L) {
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  note_size(L, check_value_any(L, 1), -1, t->stride, t->ndim);
  if (!lua_isnoneornil(L, 2)) {
    int d = dt_lua_check_dim(L, 2, t->ndim, 0, "stride");
    lua_pushinteger(L, t->stride[d]);
    return 1;
  }
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->stride[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int tensor_dim(lua_State *L) {
  int ndim;
  user_shape(check_value_any(L, 1), &ndim);
  return lua_pushinteger(L, ndim), 1;
}
static int tensor_numel(lua_State *L) {
  int ndim;
  const dt_value *v = check_value_any(L, 1);
  const int64_t *shape = user_shape(v, &ndim);
  note_size(L, v, -1, shape, ndim);
  return lua_pushinteger(L, dt_shape_numel(ndim, shape)), 1;
}
/* A DTensor answers for its local shard (the same on every rank: views act alike on all). */
static int tensor_is_contiguous(lua_State *L) {
  const dt_value *v = check_value_any(L, 1);
  note_size(L, v, -1, v->local->stride, v->local->ndim);
  return lua_pushboolean(L, dt_tensor_is_contiguous(check_value_any(L, 1)->local)), 1;
}
static int tensor_element_size(lua_State *L) {
  return lua_pushinteger(L, (lua_Integer)dt_tensor_elsize(check_value_any(L, 1)->local)), 1;
}
/* Two tensors share memory (views of one storage). */
static int tensor_shares_storage(lua_State *L) {
  return lua_pushboolean(L, dt_lua_check_tensor(L, 1)->storage == dt_lua_check_tensor(L, 2)->storage), 1;
}

/* t:_release_storage(), t:_refill_(src), t:_storage_released(): free the bytes of t's storage
 * (every view of it) and bring them back with src's values, without a version bump
 * (fully_shard's gathered parameters; src/tensor/storage.h).  A DTensor: its local tensor. */
static int tensor_release_storage(lua_State *L) {
  if (dt_storage_release_data(check_value_any(L, 1)->local->storage) != DT_OK) return dt_lua_raise(L);
  return lua_settop(L, 1), 1;
}
static int tensor_refill(lua_State *L) {
  if (dt_tensor_refill_(check_value_any(L, 1)->local, dt_lua_check_value(L, 2)->local, "_refill_") != DT_OK)
    return dt_lua_raise(L);
  return lua_settop(L, 1), 1;
}
static int tensor_storage_released(lua_State *L) {
  return lua_pushboolean(L, dt_storage_is_released(check_value_any(L, 1)->local->storage)), 1;
}

static int tensor_len(lua_State *L) {
  int ndim;
  const int64_t *shape = user_shape(check_value_any(L, 1), &ndim);
  if (ndim == 0) return luaL_error(L, "#: a 0-d tensor has no length (use t:item())");
  note_size(L, check_value_any(L, 1), 0, shape, 1);
  lua_pushinteger(L, shape[0]);
  return 1;
}

/* __index(t, k): methods first, then the properties dtype/device/ndim/shape, then
 * integer and table keys (selection and slicing). */
static int tensor_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    const char *k = lua_tostring(L, 2);
    dt_value *u = check_value_any(L, 1);
    dt_tensor *t = u->local;
    if (strcmp(k, "dtype") == 0) return lua_pushstring(L, dt_dtype_name(t->dtype)), 1;
    if (strcmp(k, "device") == 0) return lua_pushstring(L, dt_device_name(dt_tensor_device(t))), 1;
    if (strcmp(k, "ndim") == 0) {
      lua_settop(L, 1);
      return tensor_dim(L);
    }
    if (strcmp(k, "shape") == 0) {
      lua_settop(L, 1);
      return tensor_size(L);
    }
    int n = dt_lua_autograd_field(L, u, k);
    if (n >= 0) return n;
    if (u->spec) return dt_lua_dtensor_field(L, u, k);
    return 0; /* unknown key: nil, as for any Lua table */
  }
  return dt_lua_tensor_index(L);
}

static const luaL_Reg tensor_methods[] = {
    {"size", tensor_size},
    {"stride", tensor_stride},
    {"dim", tensor_dim},
    {"numel", tensor_numel},
    {"nelement", tensor_numel},
    {"is_contiguous", tensor_is_contiguous},
    {"element_size", tensor_element_size},
    {"shares_storage", tensor_shares_storage},
    {"_release_storage", tensor_release_storage},
    {"_refill_", tensor_refill},
    {"_storage_released", tensor_storage_released},
    {"release", tensor_release},
    {NULL, NULL},
};

static int core_is_tensor(lua_State *L) { return lua_pushboolean(L, dt_lua_test_value(L, 1) != NULL), 1; }

int dt_lua_open(lua_State *L) {
  lua_newtable(L); /* module */
  int module = lua_gettop(L);
  lua_newtable(L); /* methods */
  int methods = lua_gettop(L);
  luaL_setfuncs(L, tensor_methods, 0);
  luaL_newmetatable(L, DT_TENSOR_MT);
  int meta = lua_gettop(L);
  lua_pushcfunction(L, tensor_release);
  lua_setfield(L, meta, "__gc");
  lua_pushcfunction(L, tensor_release);
  lua_setfield(L, meta, "__close");
  lua_pushcfunction(L, tensor_len);
  lua_setfield(L, meta, "__len");
  lua_pushstring(L, "Tensor");
  lua_setfield(L, meta, "__name");
  lua_pushvalue(L, meta);
  dt_lua_protect_meta(L, "Tensor");
  lua_pop(L, 1);
  lua_pushvalue(L, methods);
  lua_pushcclosure(L, tensor_index, 1);
  lua_setfield(L, meta, "__index");
  lua_pushcfunction(L, dt_lua_tensor_newindex);
  lua_setfield(L, meta, "__newindex");

  luaL_newmetatable(L, SIZE_MT);
  lua_pushcfunction(L, size_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, size_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushstring(L, "Size");
  lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "Size");
  lua_pop(L, 1);

  dt_lua_targets tg = {module, methods, meta};
  dt_lua_open_create(L, &tg);
  dt_lua_open_convert(L, &tg);
  dt_lua_open_pointwise(L, &tg);
  dt_lua_open_reduce(L, &tg);
  dt_lua_open_linalg(L, &tg);
  dt_lua_open_view(L, &tg);
  dt_lua_open_shape(L, &tg);
  dt_lua_open_nn(L, &tg);
  dt_lua_open_io(L, &tg);
  dt_lua_open_print(L, &tg);
  dt_lua_open_random(L, &tg);
  dt_lua_open_dist(L, &tg);
  dt_lua_open_nccl(L, &tg); /* into dt.distributed */
  dt_lua_open_mesh(L, &tg);
  dt_lua_open_dtensor(L, &tg); /* after print: wraps __tostring */
  dt_lua_open_op_table(L, &tg);
  dt_lua_open_autograd(L, &tg);
  dt_lua_open_host(L, &tg);
  dt_lua_open_amp(L, &tg);
  dt_lua_open_config(L, &tg);
  dt_lua_open_fused_backward(L, &tg);
  dt_lua_open_graph(L, &tg);
  dt_lua_open_trace(L, &tg);
  dt_lua_open_cuda(L, &tg);

  lua_pushcfunction(L, core_is_tensor);
  lua_setfield(L, module, "is_tensor");
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "Tensor"); /* method table: Lua code may add methods */
  lua_pushvalue(L, meta);
  lua_setfield(L, module, "_tensor_meta");
  lua_settop(L, module);
  return 1;
}
