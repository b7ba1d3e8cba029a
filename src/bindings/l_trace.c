/* Binding: dt._trace(fn, ...) runs fn(...) while recording a trace for analysis (src/capture
 * in trace mode: nothing is refused, the graph never replays) and returns a table describing
 * it, then fn's results.  dt.parallel.data_parallel's batch-dim analysis reads it
 * (lua/dtensor/parallel/batch_dims.lua).  The table, slots and dims 0-based:
 *   {nargs =, nexternals =, externals = {{shape =, requires_grad =, tensor = (when found)}},
 *    refusal = (what a capture would refuse, with its line; absent when none),
 *    nodes = {{name =, kind =, family =, where =, inplace =, view =, dead =, ins = {slots},
 *              outs = {slots}, shapes = {{...}}, ints = {...}, scalars = {...}, nscalar =,
 *              keepdim =, flags =}}, returns = {slots, -1: a Lua value}} */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "capture/capture.h"

#define MAX_ARGS 64

typedef struct trace_host {
  lua_State *L;
  int pins; /* registry ref: lightuserdata -> the external's userdata */
} trace_host;

/* Every external is accepted (a trace never replays); those found on the stack are named. */
static int trace_pin(void *ud, dt_value *v) {
  trace_host *h = ud;
  if (lua_checkstack(h->L, 6)) dt_lua_pin_found(h->L, h->pins, v);
  return DT_OK;
}

static void trace_where(void *ud, char *buf, size_t len) { dt_lua_where(((trace_host *)ud)->L, buf, len); }

static void int_list(lua_State *L, const int64_t *v, int n, const char *field) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) lua_pushinteger(L, (lua_Integer)v[i]), lua_rawseti(L, -2, i + 1);
  lua_setfield(L, -2, field);
}

static void slot_list(lua_State *L, const int *v, int n, const char *field) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) lua_pushinteger(L, v[i]), lua_rawseti(L, -2, i + 1);
  lua_setfield(L, -2, field);
}

static void push_node(lua_State *L, const dt_graph_node_info *n) {
  lua_createtable(L, 0, 16);
  lua_pushstring(L, n->name), lua_setfield(L, -2, "name");
  lua_pushstring(L, n->kind), lua_setfield(L, -2, "kind");
  if (n->family) lua_pushstring(L, n->family), lua_setfield(L, -2, "family");
  lua_pushstring(L, n->where), lua_setfield(L, -2, "where");
  lua_pushboolean(L, n->inplace), lua_setfield(L, -2, "inplace");
  lua_pushboolean(L, n->view), lua_setfield(L, -2, "view");
  lua_pushboolean(L, n->dead), lua_setfield(L, -2, "dead");
  slot_list(L, n->in, n->nin, "ins");
  slot_list(L, n->out, n->nout, "outs");
  if (!n->args) return;
  lua_createtable(L, n->nout, 0);
  for (int o = 0; o < n->nout; o++) {
    lua_createtable(L, n->meta[o].ndim, 0);
    for (int d = 0; d < n->meta[o].ndim; d++) lua_pushinteger(L, (lua_Integer)n->meta[o].shape[d]), lua_rawseti(L, -2, d + 1);
    lua_rawseti(L, -2, o + 1);
  }
  lua_setfield(L, -2, "shapes");
  int_list(L, n->args->ints, n->args->nints, "ints");
  lua_createtable(L, 4, 0);
  for (int i = 0; i < 4; i++) lua_pushnumber(L, n->args->scalar[i]), lua_rawseti(L, -2, i + 1);
  lua_setfield(L, -2, "scalars");
  lua_pushinteger(L, n->args->nscalar), lua_setfield(L, -2, "nscalar");
  lua_pushboolean(L, n->args->keepdim), lua_setfield(L, -2, "keepdim");
  lua_pushinteger(L, n->args->flags), lua_setfield(L, -2, "flags");
}

/* Pushes the description of g; pins: the stack index of the pins table. */
static void push_trace(lua_State *L, const dt_graph *g, int pins) {
  int nargs, next;
  dt_graph_counts(g, &nargs, &next);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, nargs), lua_setfield(L, -2, "nargs");
  lua_pushinteger(L, next), lua_setfield(L, -2, "nexternals");
  lua_createtable(L, next, 0);
  for (int e = 0; e < next; e++) {
    const dt_guard *gd = dt_graph_external_guard(g, e);
    lua_createtable(L, 0, 3);
    int_list(L, gd->spec ? gd->spec->shape : gd->shape, gd->ndim, "shape");
    lua_pushboolean(L, gd->requires_grad), lua_setfield(L, -2, "requires_grad");
    lua_pushlightuserdata(L, dt_graph_external(g, e));
    lua_rawget(L, pins);
    lua_setfield(L, -2, "tensor");
    lua_rawseti(L, -2, e + 1);
  }
  lua_setfield(L, -2, "externals");
  int nn = dt_graph_nnodes(g);
  lua_createtable(L, nn, 0);
  for (int k = 0; k < nn; k++) {
    dt_graph_node_info n;
    dt_graph_node(g, k, &n);
    luaL_checkstack(L, 8, "trace");
    push_node(L, &n);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "nodes");
  int nret = dt_graph_nreturns(g);
  lua_createtable(L, nret, 0);
  for (int i = 0; i < nret; i++) lua_pushinteger(L, dt_graph_return_slot(g, i)), lua_rawseti(L, -2, i + 1);
  lua_setfield(L, -2, "returns");
  const char *refusal = dt_graph_trace_refusal(g);
  if (refusal) lua_pushstring(L, refusal), lua_setfield(L, -2, "refusal");
}

static int l_trace(lua_State *L) {
  if (lua_type(L, 1) != LUA_TFUNCTION) return luaL_error(L, "trace: expected a function, got %s", dt_lua_typename(L, 1));
  int nargs = lua_gettop(L) - 1;
  if (nargs > MAX_ARGS) return luaL_error(L, "trace: at most %d arguments, got %d", MAX_ARGS, nargs);
  dt_context *ctx = dt_lua_context(L);
  if (dt_capture_active(ctx)) return luaL_error(L, "trace: a graph is already being recorded on this rank (inside dt.compile?)");
  dt_value *tv[MAX_ARGS];
  int ntensors = 0;
  for (int i = 2; i <= nargs + 1; i++) {
    dt_value *v = dt_lua_test_value(L, i);
    if (v) tv[ntensors++] = v;
  }
  lua_newtable(L);
  int pins = lua_gettop(L);
  lua_pushvalue(L, pins);
  trace_host h = {L, luaL_ref(L, LUA_REGISTRYINDEX)};
  dt_capture_host host = {trace_pin, trace_where, &h};
  dt_graph *g = dt_capture_begin(ctx, &host, tv, ntensors, NULL, 0);
  if (!g) return luaL_unref(L, LUA_REGISTRYINDEX, h.pins), dt_lua_raise(L);
  dt_capture_set_trace(g);
  int base = lua_gettop(L);
  lua_pushvalue(L, 1);
  for (int i = 2; i <= nargs + 1; i++) lua_pushvalue(L, i);
  if (lua_pcall(L, nargs, LUA_MULTRET, 0) != LUA_OK) {
    dt_capture_abort(ctx, g);
    luaL_unref(L, LUA_REGISTRYINDEX, h.pins);
    return lua_error(L);
  }
  int nret = lua_gettop(L) - base;
  dt_value **ret = lua_newuserdatauv(L, sizeof *ret * (size_t)(nret + 1), 0);
  for (int i = 0; i < nret; i++) ret[i] = dt_lua_test_value(L, base + 1 + i);
  int st = dt_capture_end(ctx, g, ret, nret); /* frees g on error */
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, h.pins);
  if (st != DT_OK) return dt_lua_raise(L);
  push_trace(L, g, pins);
  dt_graph_free(g);
  lua_insert(L, base + 1);
  return nret + 1;
}

void dt_lua_open_trace(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, l_trace);
  lua_setfield(L, tg->module, "_trace");
}
