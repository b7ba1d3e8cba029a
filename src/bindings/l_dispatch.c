/* Lua side of the sharding dispatcher (src/distributed/dispatch.c): dt.dispatch_stats(),
 * dt.dispatch_cache_clear(), dt.implicit_replication(fn | <close>), dt.register_sharding's
 * rules written in Lua (a rule override in the rank's context that calls back into Lua), and
 * the helpers of the ops composed in Lua.  The modes live in the per-rank context. */
#include <string.h>

#include "base/error.h"
#include "distributed/dispatch.h"
#include "distributed/dtensor_api.h"
#include "distributed/sharding_rules/sharding_rules.h"
#include "bindings/l_dist.h"
#include "bindings/l_dtensor.h"
#include "bindings/l_mesh.h"

/* ---- sharding rules written in Lua ---- */
typedef struct plugin_call {
  const dt_rule_args *r;
  dt_strategy *s;
  int *n;
} plugin_call;

static void push_placements(lua_State *L, const dt_placement *p, int n) {
  lua_createtable(L, n, 0);
  for (int m = 0; m < n; m++) {
    dt_lua_push_placement(L, p[m]);
    lua_rawseti(L, -2, m + 1);
  }
}

static void push_shape(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int d = 0; d < ndim; d++) {
    lua_pushinteger(L, shape[d]);
    lua_rawseti(L, -2, d + 1);
  }
}

/* The built-in rule's strategies, as a Lua rule returns them: {inputs = {placements per
 * tensor operand}, outputs = {placements per output}} (a rule extends them by returning
 * them with its own). */
static void push_builtin(lua_State *L, const dt_rule_args *r) {
  dt_rule_fn rule = dt_rule_for(r->op);
  int n = 0, nin = r->a->nin;
  /* the strategies, then their rows; freed by the GC on errors */
  dt_strategy *s = lua_newuserdatauv(L, (sizeof *s + sizeof(dt_placement_row) * (size_t)nin) * DT_RULE_MAX_STRATEGIES, 0);
  dt_placement_row *rows = (dt_placement_row *)(s + DT_RULE_MAX_STRATEGIES);
  for (int k = 0; k < DT_RULE_MAX_STRATEGIES; k++) s[k].nin = nin, s[k].in = rows + (size_t)k * (size_t)nin;
  if (rule && rule(r, s, &n) != DT_OK) dt_lua_raise(L);
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    lua_createtable(L, 0, 2);
    lua_newtable(L);
    for (int i = 0, j = 0; i < r->a->nin; i++) {
      if (!r->spec[i]) continue;
      push_placements(L, s[k].in[i], r->mesh_ndim);
      lua_rawseti(L, -2, ++j);
    }
    lua_setfield(L, -2, "inputs");
    lua_createtable(L, r->nout, 0);
    for (int o = 0; o < r->nout; o++) {
      push_placements(L, s[k].out[o], r->mesh_ndim);
      lua_rawseti(L, -2, o + 1);
    }
    lua_setfield(L, -2, "outputs");
    lua_rawseti(L, -2, k + 1);
  }
  lua_remove(L, -2); /* the strategies' buffer */
}

/* The schema a Lua rule sees: op, mesh_ndim, inputs {shape, dtype, placements} (tensor
 * operands only, in order), outputs {shape, dtype}, dims (1-based), keepdim, scalars,
 * builtin (the built-in rule's strategies). */
static void push_schema(lua_State *L, const dt_rule_args *r) {
  const dt_op_args *a = r->a;
  lua_createtable(L, 0, 8);
  lua_pushstring(L, dt_op_get(r->op)->name);
  lua_setfield(L, -2, "op");
  lua_pushinteger(L, r->mesh_ndim);
  lua_setfield(L, -2, "mesh_ndim");
  lua_newtable(L);
  for (int i = 0, k = 0; i < a->nin; i++) {
    if (!r->spec[i]) continue;
    lua_createtable(L, 0, 3);
    push_shape(L, r->spec[i]->ndim, r->spec[i]->shape);
    lua_setfield(L, -2, "shape");
    lua_pushstring(L, dt_dtype_name(r->spec[i]->dtype));
    lua_setfield(L, -2, "dtype");
    push_placements(L, r->spec[i]->p, r->mesh_ndim);
    lua_setfield(L, -2, "placements");
    lua_rawseti(L, -2, ++k);
  }
  lua_setfield(L, -2, "inputs");
  lua_newtable(L);
  for (int o = 0; o < r->nout; o++) {
    lua_createtable(L, 0, 2);
    push_shape(L, r->out[o].ndim, r->out[o].shape);
    lua_setfield(L, -2, "shape");
    lua_pushstring(L, dt_dtype_name(r->out[o].dtype));
    lua_setfield(L, -2, "dtype");
    lua_rawseti(L, -2, o + 1);
  }
  lua_setfield(L, -2, "outputs");
  lua_newtable(L);
  for (int i = 0; i < a->nints; i++) {
    lua_pushinteger(L, a->ints[i] + 1);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "dims");
  lua_pushboolean(L, a->keepdim);
  lua_setfield(L, -2, "keepdim");
  lua_newtable(L);
  for (int i = 0; i < a->nscalar; i++) {
    lua_pushnumber(L, a->scalar[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "scalars");
  push_builtin(L, r);
  lua_setfield(L, -2, "builtin");
}

/* Placements at idx for a tensor of spec-like metadata, normalised; errors name where. */
static void strategy_placements(lua_State *L, int idx, const dt_rule_args *r, int ndim, const int64_t *shape,
                                dt_dtype dtype, dt_placement *out, const char *where) {
  const char *op = dt_op_get(r->op)->name;
  if (!lua_istable(L, idx) || (int)luaL_len(L, idx) != r->mesh_ndim)
    luaL_error(L, "%s: the sharding rule from Lua returned %s: expected a list of %d placements (one per mesh dim)",
               op, where, r->mesh_ndim);
  char what[160];
  snprintf(what, sizeof what, "%s: the sharding rule from Lua returned %s", op, where);
  dt_lua_check_placements(L, idx, r->mesh_ndim, out, what);
  dt_dspec *sp;
  dt_mesh *mesh = NULL;
  for (int i = 0; i < r->a->nin && !mesh; i++)
    if (r->spec[i]) mesh = r->spec[i]->mesh;
  if (dt_dspec_new(mesh, out, ndim, shape, dtype, what, &sp) != DT_OK) dt_lua_raise(L);
  memcpy(out, sp->p, sizeof(dt_placement) * (size_t)r->mesh_ndim);
  dt_dspec_free(sp);
}

/* Runs under lua_pcall: calls the rule, checks and converts what it returns. */
static int plugin_body(lua_State *L) {
  plugin_call *pc = lua_touserdata(L, 1);
  const dt_rule_args *r = pc->r;
  const char *op = dt_op_get(r->op)->name;
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  int msgh = lua_gettop(L);
  lua_pushvalue(L, 2); /* the rule */
  push_schema(L, r);
  if (lua_pcall(L, 1, 1, msgh) != LUA_OK)
    return luaL_error(L, "%s: the sharding rule registered from Lua raised an error: %s", op, lua_tostring(L, -1));
  int res = lua_gettop(L);
  if (!lua_istable(L, res))
    return luaL_error(L, "%s: the sharding rule from Lua must return a list of strategies, got %s", op, luaL_typename(L, res));
  int ntensor = 0;
  for (int i = 0; i < r->a->nin; i++) ntensor += r->spec[i] != NULL;
  int ns = (int)luaL_len(L, res);
  for (int k = 1; k <= ns; k++) {
    dt_strategy st = dt_rule_strategy(r);
    char where[96];
    lua_geti(L, res, k);
    int sidx = lua_gettop(L);
    if (!lua_istable(L, sidx)) return luaL_error(L, "%s: the sharding rule from Lua returned strategy %d: expected a table {inputs = ..., output = ...}", op, k);
    lua_getfield(L, sidx, "inputs");
    int in = lua_gettop(L);
    if (!lua_istable(L, in) || (int)luaL_len(L, in) != ntensor)
      return luaL_error(L, "%s: the sharding rule from Lua returned strategy %d with %d input placement lists for %d tensor operands",
                        op, k, lua_istable(L, in) ? (int)luaL_len(L, in) : 0, ntensor);
    for (int i = 0, j = 0; i < r->a->nin; i++) {
      if (!r->spec[i]) continue;
      lua_geti(L, in, ++j);
      snprintf(where, sizeof where, "strategy %d, input %d", k, j);
      strategy_placements(L, lua_gettop(L), r, r->spec[i]->ndim, r->spec[i]->shape, r->spec[i]->dtype, st.in[i], where);
      lua_pop(L, 1);
    }
    lua_getfield(L, sidx, "output");
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_getfield(L, sidx, "outputs");
    } else if (r->nout > 1) {
      return luaL_error(L, "%s: the sharding rule from Lua returned strategy %d with one output list for %d outputs (use outputs = {...})", op, k, r->nout);
    } else { /* wrap: outputs = {output} */
      lua_createtable(L, 1, 0);
      lua_insert(L, -2);
      lua_rawseti(L, -2, 1);
    }
    int outs = lua_gettop(L);
    if (!lua_istable(L, outs) || (int)luaL_len(L, outs) != r->nout)
      return luaL_error(L, "%s: the sharding rule from Lua returned strategy %d without output placements for its %d output(s)", op, k, r->nout);
    for (int o = 0; o < r->nout; o++) {
      lua_geti(L, outs, o + 1);
      snprintf(where, sizeof where, "strategy %d, output %d", k, o + 1);
      strategy_placements(L, lua_gettop(L), r, r->out[o].ndim, r->out[o].shape, r->out[o].dtype, st.out[o], where);
      lua_pop(L, 1);
    }
    dt_rule_push(pc->s, pc->n, &st);
    lua_settop(L, res);
  }
  return 0;
}

/* The rule override of an op registered from Lua: ud is the rule's reference in the
 * registry; it runs on the interpreter state of the call (ctx->host, set by dt_lua_call). */
static int plugin_rule(dt_context *ctx, void *ud, const dt_rule_args *r, dt_strategy *s, int *n) {
  plugin_call pc = {.r = r, .s = s, .n = n};
  lua_State *L = ctx->host;
  if (!L) return dt_error("%s: a sharding rule written in Lua can only run inside a call from Lua", dt_op_get(r->op)->name);
  int top = lua_gettop(L);
  lua_pushcfunction(L, plugin_body);
  lua_pushlightuserdata(L, &pc);
  lua_rawgeti(L, LUA_REGISTRYINDEX, (lua_Integer)(intptr_t)ud);
  int st = lua_pcall(L, 2, 0, 0);
  if (st != LUA_OK) dt_error("%s", lua_tostring(L, -1));
  lua_settop(L, top);
  return st == LUA_OK ? DT_OK : DT_ERR;
}

static int l_dispatch_stats(lua_State *L) {
  dt_dispatch_stats s = dt_dispatch_get_stats(dt_lua_context(L));
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, s.hits);
  lua_setfield(L, -2, "hits");
  lua_pushinteger(L, s.misses);
  lua_setfield(L, -2, "misses");
  return 1;
}

static int l_dispatch_cache_clear(lua_State *L) {
  dt_dispatch_cache_clear(dt_lua_context(L));
  return 0;
}

/* dt.register_sharding(op_name, fn(schema) -> strategies): replaces the built-in rule of a
 * dispatched op (nil removes the Lua rule).  Decisions taken before are forgotten. */
static int l_register_sharding(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  dt_op_id id;
  if (dt_op_find(name, &id) != DT_OK) return luaL_error(L, "register_sharding: unknown op '%s'", name);
  if (!dt_rule_for(id))
    return luaL_error(L, "register_sharding: '%s' is not dispatched for DTensors yet (its binding reads local shapes)", name);
  dt_context *ctx = dt_lua_context(L);
  dt_rule_override *ov = &ctx->rule_overrides[id];
  if (ov->fn) luaL_unref(L, LUA_REGISTRYINDEX, (int)(intptr_t)ov->ud);
  ov->fn = NULL, ov->ud = NULL;
  if (!lua_isnil(L, 2)) {
    lua_pushvalue(L, 2);
    ov->ud = (void *)(intptr_t)luaL_ref(L, LUA_REGISTRYINDEX);
    ov->fn = plugin_rule;
  }
  dt_dispatch_cache_clear(ctx);
  return 0;
}

/* dt._explain(fn, ...): runs the binding fn(...) in explain mode; returns the text. */
static int l_explain_call(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  dt_context *ctx = dt_lua_context(L);
  ctx->modes.explain = 1;
  int st = lua_pcall(L, lua_gettop(L) - 1, 0, 0);
  ctx->modes.explain = 0;
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (!msg || !strstr(msg, "explained")) return lua_error(L);
    lua_pushstring(L, dt_dispatch_explain_text(dt_lua_context(L)));
    return 1;
  }
  return luaL_error(L, "explain: the call took no DTensor through the dispatcher (no DTensor argument?)");
}

/* dt._redistribute_cost(x, placements): the planner's cost (seconds) of moving DTensor x
 * there, or nil when no plan reaches them (used by Lua ops). */
static int l_redistribute_cost(lua_State *L) {
  dt_value *x = dt_lua_check_dtensor(L, 1, "redistribute_cost");
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 2, x->spec->mesh->ndim, p, "redistribute_cost");
  double cost;
  if (dt_redistribute_cost(dt_lua_context(L), x, p, &cost) != DT_OK) return dt_lua_raise(L);
  if (cost < 0) return lua_pushnil(L), 1;
  lua_pushnumber(L, cost);
  return 1;
}

static void implicit_add(lua_State *L, int d) {
  dt_modes *m = &dt_lua_context(L)->modes;
  m->implicit_replication += d;
  if (m->implicit_replication < 0) m->implicit_replication = 0;
}

static int implicit_close(lua_State *L) {
  lua_settop(L, 1);
  if (lua_toboolean(L, lua_upvalueindex(1))) return 0; /* closed already */
  lua_pushboolean(L, 1);
  lua_replace(L, lua_upvalueindex(1));
  implicit_add(L, -1);
  return 0;
}

/* dt.implicit_replication(fn, ...) runs fn with plain tensors taken as replicated;
 * dt.implicit_replication() returns a to-be-closed value: local _ <close> = ... */
static int l_implicit_replication(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_newtable(L);
    lua_newtable(L);
    lua_pushboolean(L, 0);
    lua_pushcclosure(L, implicit_close, 1);
    lua_setfield(L, -2, "__close");
    dt_lua_protect_meta(L, "ImplicitReplication");
    lua_setmetatable(L, -2);
    implicit_add(L, 1);
    return 1;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  implicit_add(L, 1);
  int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  implicit_add(L, -1);
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* dt._check_plain(name, what, t): raises unless the plain tensor t may join DTensors as a
 * replicated operand (the C dispatcher's rule, for the ops composed in Lua). */
static int l_check_plain(lua_State *L) {
  const char *name = luaL_checkstring(L, 1), *what = luaL_checkstring(L, 2);
  dt_tensor *t = dt_lua_check_value_for(L, 3, name, what)->local; /* errors name the op */
  if (dt_dispatch_check_plain(dt_lua_context(L), name, what, t, dt_lua_implicit_replication(L)) != DT_OK) dt_lua_raise(L);
  return 0;
}

/* The DTensors of the list at idx, in a block on the Lua stack (freed by the GC). */
static const dt_value **decision_values(lua_State *L, int idx, int *n) {
  luaL_checktype(L, idx, LUA_TTABLE);
  *n = (int)luaL_len(L, idx);
  const dt_value **v = lua_newuserdatauv(L, sizeof *v * (size_t)(*n ? *n : 1), 0);
  for (int i = 0; i < *n; i++) {
    lua_geti(L, idx, i + 1);
    v[i] = dt_lua_test_value(L, -1);
    if (!v[i] || !v[i]->spec) luaL_error(L, "decision: tensor %d of the list is not a DTensor", i + 1);
    lua_pop(L, 1); /* the list keeps it */
  }
  return v;
}

/* dt._decision_lookup(name, static, quiet, tensors): the blob of the cached decision of a
 * composed op for these DTensors and static args, or nil (doc/dispatch.md). */
static int l_decision_lookup(lua_State *L) {
  size_t nstat;
  const char *name = luaL_checkstring(L, 1), *stat = luaL_checklstring(L, 2, &nstat);
  int n, hit, quiet = lua_toboolean(L, 3);
  lua_settop(L, 4); /* the values' block goes above the arguments */
  const dt_value **v = decision_values(L, 4, &n);
  const char *blob;
  size_t nblob;
  if (dt_dispatch_named_lookup(dt_lua_context(L), name, stat, nstat, v, n, quiet, &blob, &nblob, &hit) != DT_OK)
    return dt_lua_raise(L);
  if (!hit) return lua_pushnil(L), 1;
  lua_pushlstring(L, blob, nblob);
  return 1;
}

/* Placement lists at idx (a list of count lists, or nil: NULL) into rows. */
static dt_placement_row *decision_rows(lua_State *L, int idx, int count, int nm, const char *what) {
  if (lua_isnil(L, idx)) return NULL;
  luaL_checktype(L, idx, LUA_TTABLE);
  dt_placement_row *rows = lua_newuserdatauv(L, sizeof *rows * (size_t)(count ? count : 1), 0);
  for (int i = 0; i < count; i++) {
    lua_geti(L, idx, i + 1);
    dt_lua_check_placements(L, lua_gettop(L), nm, rows[i], what);
    lua_pop(L, 1);
  }
  return rows; /* stays on the stack until the call returns */
}

/* dt._decision_store(name, static, quiet, tensors, blob, inputs, outputs[, cost]): stores a
 * composed op's decision: inputs (target placements per DTensor, or nil), outputs (a list of
 * placement lists), the cost (nil: not priced) and the blob it keeps. */
static int l_decision_store(lua_State *L) {
  size_t nstat, nblob;
  const char *name = luaL_checkstring(L, 1), *stat = luaL_checklstring(L, 2, &nstat);
  int n, quiet = lua_toboolean(L, 3);
  lua_settop(L, 8); /* the blocks below go above the arguments */
  const dt_value **v = decision_values(L, 4, &n);
  const char *blob = luaL_checklstring(L, 5, &nblob);
  int nm = n ? v[0]->spec->mesh->ndim : 0, nout = lua_istable(L, 7) ? (int)luaL_len(L, 7) : 0;
  if (nout > DT_OP_MAX_OUT) return luaL_error(L, "%s: a decision has at most %d outputs, got %d", name, DT_OP_MAX_OUT, nout);
  dt_named_decision d = {.in = decision_rows(L, 6, n, nm, name), .nout = nout, .cost = luaL_optnumber(L, 8, -1),
                         .blob = blob, .nblob = nblob};
  d.out = decision_rows(L, 7, nout, nm, name);
  if (dt_dispatch_named_store(dt_lua_context(L), name, stat, nstat, v, n, quiet, &d) != DT_OK) return dt_lua_raise(L);
  return 0;
}

int dt_lua_implicit_replication(lua_State *L) { return dt_lua_context(L)->modes.implicit_replication > 0; }

void dt_lua_open_dispatch(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg funcs[] = {
      {"dispatch_stats", l_dispatch_stats},
      {"dispatch_cache_clear", l_dispatch_cache_clear},
      {"implicit_replication", l_implicit_replication},
      {"_register_sharding", l_register_sharding}, /* dt.register_sharding (lua/dtensor/dispatch.lua) */
      {"_explain", l_explain_call},                /* dt.explain */
      {"_redistribute_cost", l_redistribute_cost}, /* Lua ops' strategy prices */
      {"_check_plain", l_check_plain},             /* Lua ops' plain operands */
      {"_decision_lookup", l_decision_lookup},     /* composed ops' decisions, in the dispatcher's cache */
      {"_decision_store", l_decision_store},
      {NULL, NULL},
  };
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
