/* Work objects of async collectives (see l_work.h). */
#include "bindings/l_work.h"

#include <lauxlib.h>

#include "base/error.h"
#include "bindings/l_tensor.h"

#define WORK_MT "dtensor.Work"

typedef struct lua_work {
  dt_comm_work *w; /* NULL once released */
  const char *op;
  dt_tensor *in, *out, *copy_to;
  int waited;
} lua_work;

/* Waits (if still running) and drops the buffers; returns the collective's status. */
static int release(lua_work *u, int wait) {
  int st = DT_OK;
  if (!u->w) return st;
  if (wait) st = dt_comm_work_wait(u->w);
  dt_comm_work_free(u->w); /* waits for an unfinished one: its buffers are in use */
  u->w = NULL;
  if (st == DT_OK && wait && u->copy_to) st = dt_tensor_copy_(u->copy_to, u->in, u->op);
  dt_tensor_release(u->in), dt_tensor_release(u->out), dt_tensor_release(u->copy_to);
  u->in = u->out = u->copy_to = NULL;
  return st;
}

void dt_lua_push_work(lua_State *L, dt_comm_work *w, const char *op, dt_tensor *in, dt_tensor *out,
                      dt_tensor *copy_to, int nres) {
  lua_createtable(L, nres, 1); /* the results */
  lua_insert(L, -nres - 1);
  for (int i = nres; i >= 1; i--) lua_rawseti(L, -i - 1, i);
  lua_pushinteger(L, nres), lua_setfield(L, -2, "n");
  lua_work *u = lua_newuserdatauv(L, sizeof *u, 1);
  *u = (lua_work){.w = w, .op = op, .in = in, .out = out, .copy_to = copy_to};
  if (in) dt_tensor_retain(in);
  if (out) dt_tensor_retain(out);
  if (copy_to) dt_tensor_retain(copy_to);
  luaL_setmetatable(L, WORK_MT);
  lua_insert(L, -2);
  lua_setiuservalue(L, -2, 1);
}

/* work:wait(): the blocking call's results; the collective's error on failure. */
static int work_wait(lua_State *L) {
  lua_work *u = luaL_checkudata(L, 1, WORK_MT);
  if (u->waited)
    return luaL_error(L, "wait: this %s work was already waited (a work is waited once)", u->op);
  u->waited = 1;
  if (release(u, 1) != DT_OK) {
    luaL_where(L, 1);
    lua_pushstring(L, dt_error_message());
    lua_concat(L, 2);
    return lua_error(L);
  }
  lua_getiuservalue(L, 1, 1);
  int n = (int)(lua_getfield(L, -1, "n"), lua_tointeger(L, -1));
  lua_pop(L, 1);
  for (int i = 1; i <= n; i++) lua_rawgeti(L, 2, i);
  return n;
}

/* work:is_completed(): true once the collective finished (waited or not). */
static int work_is_completed(lua_State *L) {
  lua_work *u = luaL_checkudata(L, 1, WORK_MT);
  int done = 1;
  if (u->w) dt_comm_work_test(u->w, &done);
  lua_pushboolean(L, done);
  return 1;
}

static int work_gc(lua_State *L) {
  lua_work *u = luaL_testudata(L, 1, WORK_MT);
  if (u) release(u, 0); /* not waited: still counted by the end-of-program check */
  return 0;
}

static int work_tostring(lua_State *L) {
  lua_work *u = luaL_checkudata(L, 1, WORK_MT);
  int done = 1;
  if (u->w) dt_comm_work_test(u->w, &done);
  lua_pushfstring(L, "Work(%s, %s)", u->op, u->waited ? "waited" : done ? "completed" : "running");
  return 1;
}

static const luaL_Reg work_methods[] = {{"wait", work_wait}, {"is_completed", work_is_completed}, {NULL, NULL}};

void dt_lua_open_work(lua_State *L) {
  if (luaL_newmetatable(L, WORK_MT)) {
    lua_newtable(L);
    luaL_setfuncs(L, work_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, work_gc), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, work_tostring), lua_setfield(L, -2, "__tostring");
    lua_pushstring(L, "Work"), lua_setfield(L, -2, "__name");
    dt_lua_protect_meta(L, "Work");
  }
  lua_pop(L, 1);
}
