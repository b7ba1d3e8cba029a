/* Bindings: dt.compile(fn, opts) -> a CompiledFunction (doc/compile.md).  Calling it converts
 * the arguments into guards, replays the first recorded graph they match (src/capture), or
 * records a new one by running fn with capture on; f:graph(opts) and f:stats().  Also the
 * refusal of what a graph cannot capture (dt_lua_capture_refuse). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "capture/capture.h"

#define COMPILED_MT "dtensor.CompiledFunction"
#define MAX_ARGS 64
#define UV_FN 1     /* uservalues: the function, */
#define UV_PINS 2   /* the pinned externals (lightuserdata -> userdata), */
#define UV_CONSTS 3 /* per graph, its non-tensor returns */

typedef struct compiled {
  dt_graph **graphs;
  int n, max_graphs, warned, closed;
  int64_t bucket_cap; /* bytes (opts.bucket_cap_mb) */
  int overlap;        /* opts.overlap */
  int dynamic;        /* opts.dynamic: a size-only guard miss makes the new graph general over sizes */
  char why[256];      /* why the last try left a graph static ("" none) */
  long long captures, misses, eager_calls;
  dt_context *ctx;
} compiled;

void dt_lua_capture_refuse(lua_State *L, const char *what) {
  dt_context *ctx = dt_lua_context(L);
  if (dt_capture_active(ctx) && dt_capture_refuse(ctx, what) != DT_OK) luaL_error(L, "%s", dt_error_message()); /* a trace notes it */
}

/* ---- the host of a recording: pins and source lines ---- */
typedef struct host_ud {
  lua_State *L;
  int pins_ref;
} host_ud;

static int find_on_stack(lua_State *L, const dt_value *v) {
  int top = lua_gettop(L);
  for (int i = 1; i <= top; i++) {
    if (lua_touserdata(L, i) == v) return lua_pushvalue(L, i), 1;
    if (lua_type(L, i) != LUA_TTABLE) continue;
    lua_pushnil(L);
    while (lua_next(L, i)) { /* one level: cat({a, b}) */
      if (lua_touserdata(L, -1) == v) return lua_remove(L, -2), 1;
      lua_pop(L, 1);
    }
  }
  return 0;
}

int dt_lua_pin_found(lua_State *L, int pins_ref, dt_value *v) {
  if (!find_on_stack(L, v)) return 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, pins_ref);
  lua_pushlightuserdata(L, v);
  lua_pushvalue(L, -3);
  lua_rawset(L, -3);
  lua_pop(L, 2);
  return 1;
}

static int host_pin(void *ud, dt_value *v) {
  host_ud *h = ud;
  if (!lua_checkstack(h->L, 6)) return dt_error("compile: Lua stack overflow");
  return dt_lua_pin_found(h->L, h->pins_ref, v) ? DT_OK : dt_error("not found");
}

/* The first Lua line outside the library (lua/dtensor), else the first Lua line. */
static void host_where(void *ud, char *buf, size_t len) { dt_lua_where(((host_ud *)ud)->L, buf, len); }

void dt_lua_where(lua_State *L, char *buf, size_t len) {
  lua_Debug ar;
  int found = 0;
  for (int level = 0; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    if (!found) snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline), found = 1;
    if (!strstr(ar.source, "dtensor/")) {
      snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline);
      return;
    }
  }
  if (!found) snprintf(buf, len, "?");
}

/* ---- guards ---- */
static int make_guards(lua_State *L, int first, int nargs, dt_guard *g, dt_value **tv, int *tidx, int *ntensors) {
  *ntensors = 0;
  for (int k = 0; k < nargs; k++) {
    int i = first + k;
    dt_guard *d = &g[k];
    d->spec = NULL, d->s = NULL;
    dt_value *v = dt_lua_test_value(L, i);
    if (v) {
      dt_guard_of_value(v, d);
      for (int j = 0; j < *ntensors && !d->alias; j++) /* arguments sharing data: the graph saw them so */
        if (tv[j]->local->storage == v->local->storage) d->alias = 2 * (1 + j) + (tv[j]->local == v->local);
      tidx[*ntensors] = i;
      tv[(*ntensors)++] = v;
      continue;
    }
    switch (lua_type(L, i)) {
    case LUA_TNIL: d->kind = DT_GUARD_NIL; break;
    case LUA_TBOOLEAN: d->kind = DT_GUARD_BOOL, d->i = lua_toboolean(L, i); break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, i)) d->kind = DT_GUARD_INT, d->i = lua_tointeger(L, i);
      else d->kind = DT_GUARD_FLOAT, d->f = lua_tonumber(L, i);
      break;
    case LUA_TSTRING: {
      size_t n;
      d->s = lua_tolstring(L, i, &n);
      d->kind = DT_GUARD_STRING, d->i = (int64_t)n;
      break;
    }
    default: /* tables (a model), functions: by identity; the tensors in them are read by reference */
      d->kind = DT_GUARD_OBJECT, d->i = (int64_t)(intptr_t)lua_topointer(L, i);
      break;
    }
  }
  return DT_OK;
}

/* ---- calling ---- */
static compiled *check_compiled(lua_State *L, int idx) { return luaL_checkudata(L, idx, COMPILED_MT); }

/* Pushes the returns of graph gi after it ran (values moved out of the graph). */
static int push_returns(lua_State *L, int self, dt_graph *g, int gi, const int *tidx) {
  int nret = dt_graph_nreturns(g), base = lua_gettop(L);
  luaL_checkstack(L, nret + 4, "compile");
  for (int i = 0; i < nret; i++) {
    int index, kind = dt_graph_return_kind(g, i, &index), done = 0;
    if (kind == 0) {
      lua_getiuservalue(L, self, UV_CONSTS);
      lua_rawgeti(L, -1, gi + 1);
      lua_rawgeti(L, -1, i + 1);
      lua_replace(L, -3);
      lua_pop(L, 1);
    } else if (kind == 1) {
      lua_pushvalue(L, tidx[index]);
    } else if (kind == 2) {
      lua_getiuservalue(L, self, UV_PINS);
      lua_pushlightuserdata(L, dt_graph_external(g, index));
      lua_rawget(L, -2);
      lua_remove(L, -2);
    } else {
      for (int j = 0; j < i && !done; j++) { /* the same value returned twice */
        int jx, jk = dt_graph_return_kind(g, j, &jx);
        if (jk == 3 && jx == index) lua_pushvalue(L, base + 1 + j), done = 1;
      }
      if (!done) {
        dt_value *u = dt_lua_new_value(L);
        dt_graph_take_return(g, i, u);
        dt_lua_account_value(L, u);
      }
    }
  }
  dt_graph_clear_slots(g);
  return nret;
}

/* Runs fn with capture on and stores the graph; returns fn's results. */
static int record(lua_State *L, int self, compiled *c, int first, int nargs, dt_guard *guards, dt_value **tv,
                  int ntensors) {
  dt_context *ctx = c->ctx;
  lua_getiuservalue(L, self, UV_PINS);
  host_ud h = {L, luaL_ref(L, LUA_REGISTRYINDEX)};
  dt_capture_host host = {host_pin, host_where, &h};
  dt_graph *g = dt_capture_begin(ctx, &host, tv, ntensors, guards, nargs);
  if (!g) {
    luaL_unref(L, LUA_REGISTRYINDEX, h.pins_ref);
    return dt_lua_raise(L);
  }
  dt_graph_set_comm_options(g, c->bucket_cap, c->overlap);
  int base = lua_gettop(L);
  lua_getiuservalue(L, self, UV_FN);
  for (int k = 0; k < nargs; k++) lua_pushvalue(L, first + k);
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  if (st != LUA_OK) {
    dt_capture_abort(ctx, g);
    luaL_unref(L, LUA_REGISTRYINDEX, h.pins_ref);
    return lua_error(L);
  }
  int nret = lua_gettop(L) - base;
  dt_value *small[16], **ret = nret <= 16 ? small : lua_newuserdatauv(L, sizeof *ret * (size_t)nret, 0);
  if (ret != small) lua_insert(L, base + 1), base++; /* keep the scratch below the returns */
  lua_createtable(L, nret, 0); /* the non-tensor returns */
  int consts = lua_gettop(L);
  int bad = 0;
  for (int i = 0; i < nret; i++) {
    int idx = base + 1 + i;
    ret[i] = dt_lua_test_value(L, idx);
    if (!ret[i] && lua_type(L, idx) == LUA_TTABLE) bad = i + 1;
    if (!ret[i]) lua_pushvalue(L, idx), lua_rawseti(L, consts, i + 1);
  }
  if (bad) {
    dt_capture_abort(ctx, g);
    luaL_unref(L, LUA_REGISTRYINDEX, h.pins_ref);
    return luaL_error(L, "compile: return value %d is a table; a compiled function returns tensors and Lua "
                         "numbers, strings, booleans (return the tensors themselves)", bad);
  }
  lua_gc(L, LUA_GCCOLLECT); /* what fn dropped goes: what Lua still holds escaped (dt_capture_end) */
  st = dt_capture_end(ctx, g, ret, nret); /* frees g on error */
  luaL_unref(L, LUA_REGISTRYINDEX, h.pins_ref);
  if (st != DT_OK) return dt_lua_raise(L);
  dt_graph **gs = realloc(c->graphs, sizeof *gs * (size_t)(c->n + 1));
  if (!gs) {
    dt_graph_free(g);
    return luaL_error(L, "compile: out of memory");
  }
  c->graphs = gs;
  c->graphs[c->n++] = g;
  c->captures++;
  lua_getiuservalue(L, self, UV_CONSTS);
  lua_pushvalue(L, consts);
  lua_rawseti(L, -2, c->n);
  lua_pop(L, 2);
  return nret;
}

/* dynamic = true: the graph just recorded is made general over the sizes in which it differs
 * from an earlier static recording (dynamic.c); else it stays static and f:graph() says why. */
static void generalize_last(lua_State *L, compiled *c) {
  dt_graph *g = c->graphs[c->n - 1];
  char why[256] = "";
  for (int i = c->n - 2; i >= 0; i--) {
    if (dt_graph_is_dynamic(c->graphs[i])) continue;
    int r = dt_graph_generalize(c->graphs[i], g, why, sizeof why);
    if (r < 0) dt_lua_raise(L);
    if (r == 1) return (void)(c->why[0] = 0);
  }
  if (why[0]) snprintf(c->why, sizeof c->why, "%s", why);
}

static int compiled_call(lua_State *L) {
  compiled *c = check_compiled(L, 1);
  if (c->closed) return luaL_error(L, "compile: the compiled function has been released");
  int nargs = lua_gettop(L) - 1;
  if (dt_capture_active(c->ctx) || nargs > MAX_ARGS) { /* inside another capture: its ops are recorded there */
    lua_getiuservalue(L, 1, UV_FN);
    lua_insert(L, 2);
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
  }
  dt_guard guards[MAX_ARGS];
  dt_value *tv[MAX_ARGS];
  int tidx[MAX_ARGS], ntensors;
  make_guards(L, 2, nargs, guards, tv, tidx, &ntensors);
  for (int gi = c->n - 1; gi >= 0; gi--) {
    dt_graph *g = c->graphs[gi];
    if (!dt_graph_matches(g, c->ctx, guards, nargs)) continue;
    int miss;
    if (dt_graph_replay(c->ctx, g, tv, ntensors, &miss) != DT_OK) return dt_lua_raise(L);
    if (miss) continue;
    return push_returns(L, 1, g, gi, tidx);
  }
  if (c->n) c->misses++;
  if (c->n >= c->max_graphs) {
    if (!c->warned) {
      c->warned = 1;
      lua_Debug ar;
      char where[256] = "?";
      if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar)) snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.currentline);
      fprintf(stderr, "warning: compile: a compiled function called at %s missed its guards after %d graphs "
                      "(max_graphs); it runs eagerly from now on (new shapes, dtypes, placements or constants each call?)\n",
              where, c->max_graphs);
    }
    c->eager_calls++;
    lua_getiuservalue(L, 1, UV_FN);
    lua_insert(L, 2);
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
  }
  int nret = record(L, 1, c, 2, nargs, guards, tv, ntensors);
  if (c->dynamic) generalize_last(L, c);
  return nret;
}

static int compiled_release(lua_State *L) {
  compiled *c = check_compiled(L, 1);
  for (int i = 0; i < c->n; i++) dt_graph_free(c->graphs[i]);
  free(c->graphs);
  c->graphs = NULL, c->n = 0, c->closed = 1;
  return 0;
}

static dt_graph *graph_at(lua_State *L, compiled *c, int opts) {
  lua_Integer i = c->n;
  if (lua_istable(L, opts) && lua_getfield(L, opts, "index") != LUA_TNIL) i = dt_lua_check_integer(L, -1, "graph", "index");
  if (c->n == 0) luaL_error(L, "graph: nothing recorded yet (call the compiled function first)");
  if (i < 1 || i > c->n) luaL_error(L, "graph: index %d out of range (%d graphs recorded: 1..%d)", (int)i, c->n, c->n);
  return c->graphs[i - 1];
}

/* f:graph(opts): prints the graph (or writes opts.file) and returns its text; opts.dot: Graphviz. */
static int compiled_graph(lua_State *L) {
  compiled *c = check_compiled(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  dt_graph *g = graph_at(L, c, 2);
  int dot = lua_istable(L, 2) && dt_lua_opt_bool_field(L, 2, "dot", 0);
  const char *file = NULL;
  if (lua_istable(L, 2) && lua_getfield(L, 2, "file") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "graph: file must be a path string, got %s", luaL_typename(L, -1));
    file = lua_tostring(L, -1);
  }
  char *text = dt_graph_format(g, dot);
  if (!text) return dt_lua_raise(L);
  lua_pushstring(L, text);
  free(text);
  if (!dot && c->dynamic && !dt_graph_is_dynamic(g) && c->why[0]) { /* why the sizes stayed static */
    lua_pushfstring(L, "static sizes: %s\n", c->why);
    lua_concat(L, 2);
  }
  if (file) {
    FILE *f = fopen(file, "w");
    if (!f) return luaL_error(L, "graph: cannot write %s", file);
    fputs(lua_tostring(L, -1), f);
    fclose(f);
  } else {
    lua_getglobal(L, "print");
    lua_pushvalue(L, -2);
    lua_call(L, 1, 0);
  }
  return 1;
}

static void set_int(lua_State *L, const char *k, long long v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

/* per_graph[i].shapes of a dynamic graph: {{sizes = {s0, s1, ...}, replays = n}, ...} */
static void push_shapes(lua_State *L, const dt_graph *g) {
  if (!dt_graph_is_dynamic(g)) return;
  int64_t v[16];
  int ns;
  long long r;
  lua_newtable(L);
  for (int i = 0; dt_dyn_shapes(g, i, v, &ns, &r); i++) {
    lua_createtable(L, 0, 2);
    lua_createtable(L, ns, 0);
    for (int k = 0; k < ns; k++) lua_pushinteger(L, (lua_Integer)v[k]), lua_rawseti(L, -2, k + 1);
    lua_setfield(L, -2, "sizes");
    set_int(L, "replays", r);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "shapes");
}

/* f:stats(): recorded graphs, captures, guard misses, replays, eager calls, and per graph its
 * node counts and peak bytes. */
static int compiled_stats(lua_State *L) {
  compiled *c = check_compiled(L, 1);
  long long replays = 0;
  lua_createtable(L, 0, 8);
  lua_createtable(L, c->n, 0);
  for (int i = 0; i < c->n; i++) {
    dt_graph_stats s = dt_graph_get_stats(c->graphs[i]);
    replays += s.replays;
    lua_createtable(L, 0, 8);
    set_int(L, "nodes", s.nodes);
    set_int(L, "dead", s.dead);
    set_int(L, "args", s.args);
    set_int(L, "externals", s.externals);
    set_int(L, "collective_nodes", s.collective_nodes);
    set_int(L, "peak_bytes", s.peak_bytes);
    set_int(L, "peak_bytes_unreleased", s.peak_bytes_unreleased);
    set_int(L, "async_all_reduces", s.async_all_reduces);
    set_int(L, "buckets", s.buckets);
    set_int(L, "async_all_gathers", s.async_all_gathers);
    set_int(L, "async_reduce_scatters", s.async_reduce_scatters);
    set_int(L, "replays", s.replays);
    lua_pushboolean(L, dt_graph_is_dynamic(c->graphs[i]));
    lua_setfield(L, -2, "dynamic");
    push_shapes(L, c->graphs[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "per_graph");
  set_int(L, "graphs", c->n);
  set_int(L, "captures", c->captures);
  set_int(L, "guard_misses", c->misses);
  set_int(L, "replays", replays);
  set_int(L, "eager_calls", c->eager_calls);
  if (c->why[0]) lua_pushstring(L, c->why), lua_setfield(L, -2, "static_sizes");
  return 1;
}

static int compiled_tostring(lua_State *L) {
  compiled *c = check_compiled(L, 1);
  lua_pushfstring(L, "CompiledFunction(%d graphs)", c->n);
  return 1;
}

/* dt.compile(fn, opts): opts.dynamic (default false): a call that misses its guards only by
 * sizes records a graph general over them (doc/compile.md "Dynamic shapes"),
 * opts.max_graphs (default 8) bounds the graphs recorded per function, opts.bucket_cap_mb
 * (default 25, 0: no packing) the all_reduces packed into one, opts.overlap (default true)
 * whether replay waits for an all_reduce where its output is first read (else it blocks). */
static int l_compile(lua_State *L) {
  if (lua_type(L, 1) != LUA_TFUNCTION) return luaL_error(L, "compile: expected a function, got %s", dt_lua_typename(L, 1));
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    return luaL_error(L, "compile: options must be a table, got %s", luaL_typename(L, 2));
  int max_graphs = 8, overlap = 1, dynamic = 0;
  int64_t bucket_cap = DT_GRAPH_BUCKET_CAP_BYTES;
  if (lua_istable(L, 2)) {
    int t = lua_getfield(L, 2, "dynamic");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) return luaL_error(L, "compile: dynamic must be a boolean, got %s", luaL_typename(L, -1));
    dynamic = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "max_graphs") != LUA_TNIL) {
      lua_Integer m = dt_lua_check_integer(L, -1, "compile", "max_graphs");
      if (m < 1 || m > 1000) return luaL_error(L, "compile: max_graphs must be 1..1000, got %d", (int)m);
      max_graphs = (int)m;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "bucket_cap_mb") != LUA_TNIL) {
      if (lua_type(L, -1) != LUA_TNUMBER) return luaL_error(L, "compile: bucket_cap_mb must be a number, got %s", luaL_typename(L, -1));
      double mb = lua_tonumber(L, -1);
      if (!(mb >= 0 && mb <= 1e6)) return luaL_error(L, "compile: bucket_cap_mb must be 0..1e6, got %f", mb);
      bucket_cap = (int64_t)(mb * 1024 * 1024);
    }
    lua_pop(L, 1);
    overlap = dt_lua_opt_bool_field(L, 2, "overlap", 1);
  }
  compiled *c = lua_newuserdatauv(L, sizeof *c, 3);
  memset(c, 0, sizeof *c);
  c->max_graphs = max_graphs, c->bucket_cap = bucket_cap, c->overlap = overlap, c->dynamic = dynamic;
  c->ctx = dt_lua_context(L);
  luaL_setmetatable(L, COMPILED_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, UV_FN);
  lua_newtable(L);
  lua_setiuservalue(L, -2, UV_PINS);
  lua_newtable(L);
  lua_setiuservalue(L, -2, UV_CONSTS);
  return 1;
}

/* dt.is_compiling(): whether a graph records on this rank (code that reads a tensor into Lua
 * when eager, like Adam's step count, keeps it in tensors instead). */
static int l_is_compiling(lua_State *L) {
  lua_pushboolean(L, dt_capture_active(dt_lua_context(L)));
  return 1;
}

void dt_lua_open_graph(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg methods[] = {{"graph", compiled_graph}, {"stats", compiled_stats}, {NULL, NULL}};
  luaL_newmetatable(L, COMPILED_MT);
  lua_pushcfunction(L, compiled_call);
  lua_setfield(L, -2, "__call");
  lua_pushcfunction(L, compiled_release);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, compiled_release);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, compiled_tostring);
  lua_setfield(L, -2, "__tostring");
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  dt_lua_protect_meta(L, "CompiledFunction");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_compile);
  lua_setfield(L, tg->module, "compile");
  lua_pushcfunction(L, l_is_compiling);
  lua_setfield(L, tg->module, "is_compiling");
}
