/* Lua bindings of autograd (src/autograd): tensor fields (requires_grad, is_leaf, grad,
 * grad_fn, retains_grad), methods (requires_grad_, detach, detach_, backward, retain_grad,
 * register_hook), dt.autograd.backward/grad, the grad-mode switches, and the custom node under
 * dt.autograd.Function (dt._autograd_function).  Conversions only. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "capture/capture.h"

#define HOOK_HANDLE_MT "dtensor.RemovableHandle"
#define GRAD_MODE_MT "dtensor.GradMode"

static dt_context *context(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  ctx->host = L;
  return ctx;
}

/* Pushes a tensor userdata sharing v's data (no autograd metadata). */
static void push_shared(lua_State *L, const dt_value *v) {
  dt_tensor_retain(v->local);
  if (v->spec) dt_lua_push_dtensor(L, v->local, dt_dspec_copy(v->spec));
  else dt_lua_push_tensor(L, v->local);
}

/* Pushes v, taking ownership of its contents (autograd metadata included). */
static void push_owned(lua_State *L, dt_value *v) {
  dt_value *u = dt_lua_new_value(L);
  *u = *v;
  dt_value_init(v, NULL, NULL);
  dt_lua_account_value(L, u);
}

/* ---- fields ---- */
int dt_lua_autograd_field(lua_State *L, dt_value *u, const char *k) {
  if (strcmp(k, "requires_grad") == 0) return lua_pushboolean(L, dt_autograd_requires_grad(u)), 1;
  if (strcmp(k, "is_leaf") == 0) return lua_pushboolean(L, dt_autograd_is_leaf(u)), 1;
  if (strcmp(k, "retains_grad") == 0) return lua_pushboolean(L, dt_autograd_retains_grad(u)), 1;
  if (strcmp(k, "grad_fn") == 0) {
    const char *name = dt_autograd_grad_fn_name(u);
    if (name) lua_pushstring(L, name);
    else lua_pushnil(L);
    return 1;
  }
  if (strcmp(k, "grad") == 0) {
    const dt_value *g = dt_autograd_grad_of(u);
    if (g) push_shared(L, g);
    else lua_pushnil(L);
    return 1;
  }
  return -1; /* not an autograd field */
}

int dt_lua_autograd_set_field(lua_State *L, dt_value *u, const char *k) {
  if (strcmp(k, "grad") == 0) {
    const dt_value *g = lua_isnil(L, 3) ? NULL : dt_lua_check_value_for(L, 3, "t.grad = g", "g");
    if (dt_autograd_set_grad(u, g) != DT_OK || dt_capture_set_grad(dt_lua_context(L), u, (dt_value *)g) != DT_OK)
      dt_lua_raise(L);
    return 1;
  }
  if (strcmp(k, "requires_grad") == 0) {
    dt_lua_capture_refuse(L, "t.requires_grad = ...");
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    if (dt_autograd_set_requires_grad(u, lua_toboolean(L, 3)) != DT_OK) dt_lua_raise(L);
    return 1;
  }
  return 0;
}

/* ---- the factories' option ---- */
int dt_lua_requires_grad_option(lua_State *L, int opts, const char *op) {
  if (opts < 0) opts = lua_gettop(L) + 1 + opts;
  if (!lua_istable(L, opts)) return 1;
  int t = lua_getfield(L, opts, "requires_grad");
  int flag = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    return luaL_error(L, "%s: option requires_grad must be a boolean, got %s", op, lua_typename(L, t));
  if (!flag) return 1;
  dt_value *u = dt_lua_check_value_for(L, -1, op, "its result");
  if (!dt_dtype_is_float(dt_value_dtype(u)))
    return luaL_error(L, "%s: requires_grad = true needs a floating-point dtype, got %s", op,
                      dt_dtype_name(dt_value_dtype(u)));
  if (dt_autograd_set_requires_grad(u, 1) != DT_OK) return dt_lua_raise(L);
  return 1;
}

/* dt._requires_grad_option(t, opts, op): the same for the factories written in Lua (DTensors
 * on a mesh); returns t. */
static int l_requires_grad_option(lua_State *L) {
  dt_lua_check_value(L, 1);
  const char *op = luaL_checkstring(L, 3);
  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  return dt_lua_requires_grad_option(L, 2, op);
}

/* ---- methods ---- */
static int l_requires_grad_(lua_State *L) {
  dt_lua_capture_refuse(L, "t:requires_grad_() (autograd state changed outside the front door)");
  dt_value *u = dt_lua_check_value(L, 1);
  int flag = lua_isnoneornil(L, 2) ? 1 : (luaL_checktype(L, 2, LUA_TBOOLEAN), lua_toboolean(L, 2));
  if (dt_autograd_set_requires_grad(u, flag) != DT_OK) return dt_lua_raise(L);
  lua_settop(L, 1);
  return 1;
}

static int l_detach(lua_State *L) {
  push_shared(L, dt_lua_check_value(L, 1));
  return 1;
}

static int l_detach_(lua_State *L) {
  dt_lua_capture_refuse(L, "t:detach_() (autograd state changed outside the front door)");
  dt_autograd_detach_(dt_lua_check_value(L, 1));
  lua_settop(L, 1);
  return 1;
}

static int l_retain_grad(lua_State *L) {
  dt_lua_capture_refuse(L, "t:retain_grad() (autograd state changed outside the front door)");
  if (dt_autograd_retain_grad(dt_lua_check_value(L, 1)) != DT_OK) return dt_lua_raise(L);
  return 0;
}

/* A list argument: one tensor, or a table of them (nil entries allowed where allow_nil);
 * fills vals (up to max) and returns the count. */
static int value_list(lua_State *L, int idx, dt_value **vals, int max, int allow_nil, const char *op, const char *what) {
  if (dt_lua_test_value(L, idx)) return vals[0] = dt_lua_test_value(L, idx), 1;
  if (!lua_istable(L, idx)) return luaL_error(L, "%s: %s must be a tensor or a list of tensors, got %s", op, what,
                                              dt_lua_typename(L, idx));
  int n = (int)luaL_len(L, idx);
  if (n > max) return luaL_error(L, "%s: at most %d %s", op, max, what);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    if (lua_isnil(L, -1) && allow_nil) vals[i] = NULL;
    else {
      char w[64];
      snprintf(w, sizeof w, "%s[%d]", what, i + 1);
      vals[i] = dt_lua_check_value_for(L, -1, op, w);
    }
    lua_pop(L, 1);
  }
  return n;
}

#define MAX_ROOTS 256

/* The callbacks queued during each backward running now (nested ones: a stack of lists). */
static const char callbacks_key; /* its address keys the stack in the registry */
static void callbacks_open(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &callbacks_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &callbacks_key);
  }
  lua_newtable(L);
  lua_seti(L, -2, luaL_len(L, -2) + 1);
  lua_pop(L, 1);
}
/* Runs the callbacks of the list at idx, in order. */
static void callbacks_run(lua_State *L, int idx) {
  for (lua_Integer i = 1, k = luaL_len(L, idx); i <= k; i++) {
    lua_geti(L, idx, i);
    lua_call(L, 0, 0);
  }
}
/* Pops this backward's list, leaving it on the stack; returns its index. */
static int callbacks_close(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &callbacks_key);
  lua_Integer depth = luaL_len(L, -1);
  lua_geti(L, -1, depth);
  lua_pushnil(L);
  lua_seti(L, -3, depth);
  lua_remove(L, -2);
  return lua_gettop(L);
}

/* t:backward(grad?, {retain_graph =}) and dt.autograd.backward(tensors, grad_tensors?, opts?) */
static int run_backward(lua_State *L, int roots_idx, int grads_idx, int opts_idx, const char *op) {
  dt_value *roots[MAX_ROOTS], *grads[MAX_ROOTS] = {0};
  int n = value_list(L, roots_idx, roots, MAX_ROOTS, 0, op, "tensors");
  if (!lua_isnoneornil(L, grads_idx)) {
    int ng = value_list(L, grads_idx, grads, MAX_ROOTS, 1, op, "gradients");
    if (ng > n) return luaL_error(L, "%s: %d gradients for %d tensors", op, ng, n);
  }
  int retain = dt_lua_opt_bool_field(L, opts_idx, "retain_graph", 0);
  dt_context *ctx = context(L);
  callbacks_open(L);
  int st = dt_autograd_backward(ctx, roots, (const dt_value *const *)grads, n, retain);
  int list = callbacks_close(L);
  if (st != DT_OK) return dt_lua_raise(L); /* the queued callbacks are dropped */
  callbacks_run(L, list);
  return 0;
}

/* dt.autograd.queue_callback(fn): from a hook or a custom backward, runs fn() once the
 * backward (or autograd.grad) running now has run every node, before it returns (as torch's
 * Variable._execution_engine.queue_callback); callbacks run in the order queued. */
static int l_queue_callback(lua_State *L) {
  if (!lua_isfunction(L, 1)) return luaL_error(L, "queue_callback: expected a function, got %s", luaL_typename(L, 1));
  lua_rawgetp(L, LUA_REGISTRYINDEX, &callbacks_key);
  lua_Integer depth = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
  if (depth == 0) return luaL_error(L, "queue_callback: no backward is running (call it from a hook or a custom backward)");
  lua_geti(L, -1, depth);
  lua_pushvalue(L, 1);
  lua_seti(L, -2, luaL_len(L, -2) + 1);
  return 0;
}

static int l_backward(lua_State *L) {
  dt_lua_check_value(L, 1);
  if (lua_istable(L, 2) && !dt_lua_test_value(L, 2)) { /* t:backward({retain_graph = true}) */
    lua_pushnil(L);
    lua_insert(L, 2);
  }
  return run_backward(L, 1, 2, 3, "backward");
}

static int l_autograd_backward(lua_State *L) { return run_backward(L, 1, 2, 3, "autograd.backward"); }

/* dt.autograd.grad(outputs, inputs, grad_outputs?, {retain_graph =, allow_unused =}) */
static int l_autograd_grad(lua_State *L) {
  dt_lua_capture_refuse(L, "dt.autograd.grad (backward capture is not built yet)");
  const char *op = "autograd.grad";
  dt_value *roots[MAX_ROOTS], *grads[MAX_ROOTS] = {0}, *inputs[MAX_ROOTS];
  int n = value_list(L, 1, roots, MAX_ROOTS, 0, op, "outputs");
  int single = dt_lua_test_value(L, 2) != NULL;
  int ni = value_list(L, 2, inputs, MAX_ROOTS, 0, op, "inputs");
  int opts = 4;
  if (lua_istable(L, 3) && !dt_lua_test_value(L, 3) && lua_isnoneornil(L, 4) &&
      (lua_getfield(L, 3, "retain_graph") != LUA_TNIL || lua_getfield(L, 3, "allow_unused") != LUA_TNIL))
    opts = 3; /* grad(outputs, inputs, {opts}) */
  lua_settop(L, 4);
  if (opts == 4 && !lua_isnil(L, 3)) value_list(L, 3, grads, MAX_ROOTS, 1, op, "grad_outputs");
  int retain = dt_lua_opt_bool_field(L, opts, "retain_graph", 0);
  int allow_unused = dt_lua_opt_bool_field(L, opts, "allow_unused", 0);
  dt_value *out = calloc((size_t)(ni ? ni : 1), sizeof *out);
  if (!out) return luaL_error(L, "%s: out of memory", op);
  dt_context *ctx = context(L);
  callbacks_open(L);
  int st = dt_autograd_grad(ctx, roots, (const dt_value *const *)grads, n, inputs, ni, retain, allow_unused, out);
  int list = callbacks_close(L);
  if (st != DT_OK) {
    free(out);
    return dt_lua_raise(L); /* the queued callbacks are dropped */
  }
  if (!single) lua_createtable(L, ni, 0);
  for (int j = 0; j < ni; j++) {
    if (out[j].local) push_owned(L, &out[j]);
    else lua_pushnil(L);
    if (!single) lua_seti(L, -2, j + 1);
  }
  for (int j = 0; j < ni; j++) dt_value_clear(&out[j]);
  free(out);
  callbacks_run(L, list);
  return 1;
}

/* ---- hooks: the Lua function in the registry; it runs under pcall so that an error
 *      unwinds through the engine as a status, not a longjmp ---- */
typedef struct lua_hook {
  lua_State *main;
  int ref;
} lua_hook;

static void hook_free(void *ud) {
  lua_hook *h = ud;
  luaL_unref(h->main, LUA_REGISTRYINDEX, h->ref);
  free(h);
}

static int hook_call(dt_context *ctx, void *ud, const dt_value *g, dt_value *replace) {
  lua_hook *h = ud;
  lua_State *L = ctx->host ? ctx->host : h->main;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->ref);
  push_shared(L, g);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    dt_error("hook: %s", lua_tostring(L, -1));
    lua_settop(L, top);
    return DT_ERR;
  }
  int st = DT_OK;
  if (!lua_isnil(L, -1)) {
    dt_value *r = dt_lua_test_value(L, -1);
    if (!r) st = dt_error("hook: a gradient hook must return nil or a tensor, not %s", dt_lua_typename(L, -1));
    else {
      dt_tensor_retain(r->local);
      dt_value_init(replace, r->local, r->spec ? dt_dspec_copy(r->spec) : NULL);
    }
  }
  lua_settop(L, top);
  return st;
}

/* hook:remove(): the handle keeps its tensor (user value 1) to find the hook. */
typedef struct handle {
  int id;
} handle;

static int l_register_hook(lua_State *L) {
  dt_lua_capture_refuse(L, "t:register_hook() (autograd state changed outside the front door)");
  dt_value *u = dt_lua_check_value(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_hook *h = malloc(sizeof *h);
  if (!h) return luaL_error(L, "register_hook: out of memory");
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  h->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  h->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int id;
  if (dt_autograd_register_hook(u, hook_call, h, hook_free, &id) != DT_OK) return dt_lua_raise(L);
  handle *hd = lua_newuserdatauv(L, sizeof *hd, 1);
  hd->id = id;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, HOOK_HANDLE_MT);
  return 1;
}

static int l_handle_remove(lua_State *L) {
  handle *hd = luaL_checkudata(L, 1, HOOK_HANDLE_MT);
  if (hd->id && lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA) {
    dt_value *u = dt_lua_test_value(L, -1);
    if (u) dt_autograd_remove_hook(u, hd->id);
  }
  hd->id = 0;
  return 0;
}

/* ---- autograd.Function (lua/dtensor/autograd.lua): dt._autograd_function records a custom
 *      node whose backward calls a Lua function under pcall, so that an error inside comes
 *      back through the engine as a status naming the Function, never a longjmp ---- */
typedef struct lua_function {
  lua_State *main;
  int ref;         /* the Lua backward: function(saved, grad_1, ..., grad_nout) -> {grad per input} */
  int materialize; /* zeros for an output no gradient flowed to (PyTorch's default), else nil */
  dt_node *node;   /* the node this is the ud of (its saved values, its outputs' metadata) */
  char name[];     /* the node's name: the Function's */
} lua_function;

static void function_free(void *ud) {
  lua_function *f = ud;
  luaL_unref(f->main, LUA_REGISTRYINDEX, f->ref);
  free(f);
}

/* Reads the Lua backward's result (at the top of L) into grad_in. */
static int function_grads(lua_State *L, const lua_function *f, dt_value *grad_in, int nin,
                          const unsigned char *needs) {
  if (!lua_istable(L, -1))
    return dt_error("%s: backward's wrapper returned %s, not a list", f->name, dt_lua_typename(L, -1));
  for (int i = 0; i < nin; i++) {
    if (!needs[i]) continue;
    lua_geti(L, -1, i + 1);
    dt_value *g = lua_isnil(L, -1) ? NULL : dt_lua_test_value(L, -1);
    if (!g && !lua_isnil(L, -1)) {
      int st = dt_error("%s: backward returned %s as the gradient of input %d; expected a tensor or nil", f->name,
                        dt_lua_typename(L, -1), i + 1);
      lua_pop(L, 1);
      return st;
    }
    if (g) {
      dt_tensor_retain(g->local);
      dt_value_init(&grad_in[i], g->local, g->spec ? dt_dspec_copy(g->spec) : NULL);
      if (g->spec && !grad_in[i].spec) return lua_pop(L, 1), dt_error("%s: out of memory", f->name);
    }
    lua_pop(L, 1);
  }
  return DT_OK;
}

/* kind: left alone, so the inputs' plain gradients keep the kind of the outputs' (a Lua
 * backward is a local computation; doc/autograd-dtensor.md). */
static int function_backward(dt_context *ctx, void *ud, const dt_value *const *grad_out, int nout, dt_value *grad_in,
                             int nin, const unsigned char *needs, dt_grad_kind *kind) {
  (void)kind;
  lua_function *f = ud;
  lua_State *L = ctx->host ? ctx->host : f->main;
  const dt_node *n = f->node;
  if (!n) return dt_error("%s: backward of a node that was not recorded", f->name);
  if (!lua_checkstack(L, nout + 8)) return dt_error("%s: backward: Lua stack overflow (%d outputs)", f->name, nout);
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
  lua_createtable(L, n->nsaved, 0);
  for (int i = 0; i < n->nsaved; i++) {
    push_shared(L, &n->saved[i].v);
    lua_seti(L, -2, i + 1);
  }
  for (int o = 0; o < nout; o++) {
    if (grad_out[o]) {
      push_shared(L, grad_out[o]);
    } else if (f->materialize) {
      dt_value z;
      if (dt_autograd_node_zeros(ctx, n, o, &z) != DT_OK) return lua_settop(L, top), DT_ERR;
      if (z.local) push_owned(L, &z);
      else lua_pushnil(L);
    } else {
      lua_pushnil(L);
    }
  }
  if (lua_pcall(L, 1 + nout, 1, 0) != LUA_OK) {
    dt_error("%s: error in backward: %s", f->name, lua_isstring(L, -1) ? lua_tostring(L, -1) : dt_lua_typename(L, -1));
    lua_settop(L, top);
    return DT_ERR;
  }
  int st = function_grads(L, f, grad_in, nin, needs);
  lua_settop(L, top);
  return st;
}

/* A list argument of n entries (a tensor or false/nil each) into vals. */
static void optional_values(lua_State *L, int idx, int n, dt_value **vals, const char *what) {
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    vals[i] = lua_toboolean(L, -1) ? dt_lua_check_value_for(L, -1, "autograd.Function", what) : NULL;
    lua_pop(L, 1);
  }
}

/* dt._autograd_function(name, inputs, nin, outputs, nout, saved, backward, materialize,
 * keeps_partial): inputs/outputs are lists with false where an argument or result is not a
 * tensor; saved a list of tensors.  The outputs take the node as their grad_fn when an input
 * requires grad; with keeps_partial their gradients reach backward Partial as they come
 * (dt_autograd_keep_partial). */
static int l_autograd_function(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  luaL_checktype(L, 2, LUA_TTABLE);
  int nin = (int)luaL_checkinteger(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  int nout = (int)luaL_checkinteger(L, 5);
  luaL_checktype(L, 6, LUA_TTABLE);
  luaL_checktype(L, 7, LUA_TFUNCTION);
  int materialize = lua_toboolean(L, 8), keeps_partial = lua_toboolean(L, 9);
  int nsave = (int)luaL_len(L, 6);
  if (nin < 0 || nin > MAX_ROOTS || nout < 0 || nout > MAX_ROOTS || nsave > MAX_ROOTS)
    return luaL_error(L, "%s: at most %d inputs, outputs and saved tensors", name, MAX_ROOTS);
  dt_value *in[MAX_ROOTS], *out[MAX_ROOTS], *save[MAX_ROOTS];
  optional_values(L, 2, nin, in, "an input");
  optional_values(L, 4, nout, out, "an output");
  optional_values(L, 6, nsave, save, "a saved tensor");
  for (int i = 0; i < nsave; i++)
    if (!save[i]) return luaL_error(L, "%s: save_for_backward: entry %d is not a tensor", name, i + 1);
  lua_function *f = malloc(sizeof *f + len + 1);
  if (!f) return luaL_error(L, "%s: out of memory", name);
  memcpy(f->name, name, len + 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  f->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 7);
  f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  f->materialize = materialize, f->node = NULL;
  dt_node *node;
  int st = dt_autograd_record_custom_saving(context(L), f->name, in, nin, out, nout, save, nsave, function_backward,
                                            f, function_free, &node);
  if (node) f->node = node; /* else f is freed already */
  if (st != DT_OK) return dt_lua_raise(L);
  for (int o = 0; node && keeps_partial && o < nout; o++)
    if (out[o]) dt_autograd_keep_partial(out[o]); /* a flag of the node: one output suffices */
  return 0;
}

/* ---- grad mode: dt.no_grad(fn?, ...), dt.enable_grad(fn?, ...), dt.set_grad_enabled(flag, fn?)
 *      With fn: runs it in the mode and returns its results (restoring the mode on error too).
 *      Without: switches and returns a to-be-closed guard restoring the previous mode. ---- */
typedef struct grad_mode_guard {
  int prev, active;
} grad_mode_guard;

static int guard_close(lua_State *L) {
  grad_mode_guard *g = luaL_checkudata(L, 1, GRAD_MODE_MT);
  if (g->active) dt_lua_context(L)->modes.grad_enabled = g->prev;
  g->active = 0;
  return 0;
}

static int with_mode(lua_State *L, int flag, int fn_idx) {
  dt_context *ctx = dt_lua_context(L);
  int prev = ctx->modes.grad_enabled;
  if (lua_isnoneornil(L, fn_idx)) {
    ctx->modes.grad_enabled = flag;
    grad_mode_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->prev = prev, g->active = 1;
    luaL_setmetatable(L, GRAD_MODE_MT);
    return 1;
  }
  luaL_checktype(L, fn_idx, LUA_TFUNCTION);
  int base = fn_idx - 1;
  ctx->modes.grad_enabled = flag;
  int st = lua_pcall(L, lua_gettop(L) - fn_idx, LUA_MULTRET, 0);
  dt_lua_context(L)->modes.grad_enabled = prev;
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L) - base;
}

static int l_no_grad(lua_State *L) { return with_mode(L, 0, 1); }
static int l_enable_grad(lua_State *L) { return with_mode(L, 1, 1); }
static int l_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  return with_mode(L, lua_toboolean(L, 1), 2);
}
static int l_is_grad_enabled(lua_State *L) { return lua_pushboolean(L, dt_lua_context(L)->modes.grad_enabled), 1; }

static const luaL_Reg methods[] = {
    {"requires_grad_", l_requires_grad_}, {"detach", l_detach},
    {"detach_", l_detach_},               {"retain_grad", l_retain_grad},
    {"backward", l_backward},             {"register_hook", l_register_hook},
    {NULL, NULL},
};

static const luaL_Reg module_fns[] = {
    {"no_grad", l_no_grad},
    {"enable_grad", l_enable_grad},
    {"set_grad_enabled", l_set_grad_enabled},
    {"is_grad_enabled", l_is_grad_enabled},
    {"_autograd_function", l_autograd_function},
    {"_requires_grad_option", l_requires_grad_option},
    {NULL, NULL},
};

static const luaL_Reg autograd_fns[] = {
    {"backward", l_autograd_backward},
    {"grad", l_autograd_grad},
    {"queue_callback", l_queue_callback},
    {NULL, NULL},
};

void dt_lua_open_autograd(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, module_fns, 0);
  lua_newtable(L);
  luaL_setfuncs(L, autograd_fns, 0);
  lua_setfield(L, -2, "autograd");
  lua_pop(L, 1);

  luaL_newmetatable(L, HOOK_HANDLE_MT);
  lua_newtable(L);
  lua_pushcfunction(L, l_handle_remove);
  lua_setfield(L, -2, "remove");
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, "RemovableHandle");
  lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "RemovableHandle");
  lua_pop(L, 1);

  luaL_newmetatable(L, GRAD_MODE_MT);
  lua_pushcfunction(L, guard_close);
  lua_setfield(L, -2, "__close");
  lua_pushstring(L, "GradMode"); /* no __gc: an unclosed switch stays switched, as set_grad_enabled */
  lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "GradMode");
  lua_pop(L, 1);
}
