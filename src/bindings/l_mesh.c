/* Lua bindings of DeviceMesh (dt.init_device_mesh, dt.DeviceMesh, the per-rank mesh
 * context stack); placements are in l_placement.c.  Mesh dims and
 * tensor dims are 1-based (or names); ranks and coordinates are 0-based. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_mesh.h"
#include "bindings/l_tensor.h"

#define MESH_MT "dtensor.DeviceMesh"
#define GUARD_MT "dtensor.MeshGuard"

typedef struct lua_mesh {
  dt_mesh *m;
} lua_mesh;

/* A DeviceMesh userdata whose mesh is NULL has been released (__gc/__close, idempotent):
 * every use of it raises "<op>: DeviceMesh has been released". */
static dt_mesh *live_mesh(lua_State *L, lua_mesh *u, const char *op) {
  if (!u->m) luaL_error(L, "%s: DeviceMesh has been released", op);
  return u->m;
}

dt_mesh *dt_lua_test_mesh(lua_State *L, int idx, const char *op) {
  lua_mesh *u = luaL_testudata(L, idx, MESH_MT);
  return u ? live_mesh(L, u, op) : NULL;
}

static dt_mesh *check_mesh(lua_State *L, int idx, const char *op) {
  lua_mesh *u = luaL_testudata(L, idx, MESH_MT);
  if (!u) luaL_error(L, "%s: expected a DeviceMesh, got %s", op, dt_lua_typename(L, idx));
  return live_mesh(L, u, op);
}

void dt_lua_push_mesh(lua_State *L, dt_mesh *m) {
  if (!m) dt_lua_raise(L);
  lua_mesh *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->m = m;
  luaL_setmetatable(L, MESH_MT);
}

/* __gc and __close: one idempotent release. */
static int mesh_release(lua_State *L) {
  lua_mesh *u = luaL_checkudata(L, 1, MESH_MT);
  dt_mesh_release(u->m);
  u->m = NULL;
  return 0;
}

/* ---- the context stack (in the rank's context) ---- */
static int l_current_mesh(lua_State *L) {
  dt_mesh *m = dt_context_current_mesh(dt_lua_context(L));
  if (!m) return lua_pushnil(L), 1;
  dt_mesh_retain(m);
  dt_lua_push_mesh(L, m);
  return 1;
}

dt_mesh *dt_lua_opt_mesh(lua_State *L, int idx, const char *op) {
  if (!lua_isnoneornil(L, idx)) {
    dt_mesh *m = dt_lua_test_mesh(L, idx, op);
    if (!m) luaL_error(L, "%s: expected a DeviceMesh, got %s", op, dt_lua_typename(L, idx));
    return m;
  }
  dt_mesh *m = dt_context_current_mesh(dt_lua_context(L));
  if (!m) luaL_error(L, "%s: no device mesh given and no current mesh (pass one, or use `local _ <close> = mesh:use()`)", op);
  return m;
}

/* mesh:use(): pushes the mesh; the returned guard's __close pops back to the depth before,
 * so nesting restores properly also when a block raises. */
static int mesh_use(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "use");
  dt_context *ctx = dt_lua_context(L);
  lua_Integer *g = lua_newuserdatauv(L, sizeof *g, 0);
  *g = ctx->mesh_depth;
  if (dt_context_push_mesh(ctx, m) != DT_OK) return dt_lua_raise(L);
  luaL_setmetatable(L, GUARD_MT);
  return 1;
}

static int guard_close(lua_State *L) {
  lua_Integer *g = luaL_checkudata(L, 1, GUARD_MT);
  if (*g < 0) return 0;
  dt_context_pop_mesh_to(dt_lua_context(L), (int)*g);
  *g = -1;
  return 0;
}

/* ---- construction ---- */
/* Reads a nested rank table into ranks/shape; returns the count. */
static void read_layout(lua_State *L, int idx, int depth, int *ndim, int *shape, int *ranks, int *n, int cap) {
  int len = (int)luaL_len(L, idx);
  if (depth >= DT_MESH_MAX_DIMS) luaL_error(L, "DeviceMesh: a mesh has at most %d dims", DT_MESH_MAX_DIMS);
  if (*ndim <= depth) {
    *ndim = depth + 1;
    shape[depth] = len;
  } else if (shape[depth] != len)
    luaL_error(L, "DeviceMesh: the layout is not rectangular (rows of %d and %d ranks at depth %d)", shape[depth], len,
               depth + 1);
  if (len == 0) luaL_error(L, "DeviceMesh: an empty layout");
  for (int i = 1; i <= len; i++) {
    int t = lua_geti(L, idx, i);
    if (t == LUA_TTABLE) {
      if (*ndim > depth + 1 || i == 1) read_layout(L, lua_gettop(L), depth + 1, ndim, shape, ranks, n, cap);
      else luaL_error(L, "DeviceMesh: the layout is not rectangular");
    } else {
      int isint;
      lua_Integer r = lua_tointegerx(L, -1, &isint);
      if (!isint) luaL_error(L, "DeviceMesh: ranks must be integers, got %s", luaL_typename(L, -1));
      if (*ndim != depth + 1) luaL_error(L, "DeviceMesh: the layout is not rectangular");
      if (*n >= cap) luaL_error(L, "DeviceMesh: too many ranks in the layout");
      ranks[(*n)++] = (int)r;
    }
    lua_pop(L, 1);
  }
}

/* names at idx: nil or a table of strings, one per dim. */
static void read_names(lua_State *L, int idx, int ndim, const char **names) {
  for (int i = 0; i < ndim; i++) names[i] = NULL;
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  if (luaL_len(L, idx) != ndim)
    luaL_error(L, "DeviceMesh: %d dim names for a %d-d mesh", (int)luaL_len(L, idx), ndim);
  for (int i = 0; i < ndim; i++) {
    lua_geti(L, idx, i + 1);
    if (!lua_isstring(L, -1)) luaL_error(L, "DeviceMesh: dim names must be strings");
    names[i] = lua_tostring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
}

static int new_mesh(lua_State *L, const char *device, int ndim, const int *shape, const int *ranks, int names_idx) {
  if (strcmp(device, "cpu") != 0) return luaL_error(L, "DeviceMesh: device type '%s' is not available (only \"cpu\")", device);
  const char *names[DT_MESH_MAX_DIMS];
  read_names(L, names_idx, ndim, names);
  dt_mesh *m;
  if (dt_mesh_new(dt_lua_context(L), device, ndim, shape, ranks, names, &m) != DT_OK) return dt_lua_raise(L);
  dt_lua_push_mesh(L, m);
  return 1;
}

/* dt.DeviceMesh("cpu", {{0, 1}, {2, 3}}, names?) */
static int l_device_mesh(lua_State *L) {
  lua_settop(L, 3); /* the names stay at 3; scratch space goes above */
  const char *device = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int cap = dt_lua_context(L)->world_size * 4 + 16, ndim = 0, n = 0, shape[DT_MESH_MAX_DIMS];
  int *ranks = lua_newuserdatauv(L, sizeof(int) * (size_t)cap, 0); /* freed by the GC even on errors */
  read_layout(L, 2, 0, &ndim, shape, ranks, &n, cap);
  return new_mesh(L, device, ndim, shape, ranks, 3);
}

/* dt.init_device_mesh("cpu", {2, 2}, names?): ranks 0..n-1 row-major. */
static int l_init_device_mesh(lua_State *L) {
  lua_settop(L, 3);
  const char *device = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int ndim = (int)luaL_len(L, 2), shape[DT_MESH_MAX_DIMS], world = dt_lua_context(L)->world_size;
  if (ndim < 1 || ndim > DT_MESH_MAX_DIMS)
    return luaL_error(L, "init_device_mesh: a mesh has 1..%d dims, got %d", DT_MESH_MAX_DIMS, ndim);
  lua_Integer size[DT_MESH_MAX_DIMS];
  int64_t total = 1; /* saturates at INT_MAX + 1: huge sizes cannot overflow it */
  for (int i = 0; i < ndim; i++) {
    lua_geti(L, 2, i + 1);
    int isint;
    size[i] = lua_tointegerx(L, -1, &isint);
    lua_pop(L, 1);
    if (!isint || size[i] < 1) return luaL_error(L, "init_device_mesh: mesh sizes must be integers >= 1");
    total = size[i] > INT_MAX || total * size[i] > INT_MAX ? (int64_t)INT_MAX + 1 : total * size[i];
  }
  if (total != world) {
    char buf[256] = "{";
    for (int i = 0; i < ndim; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", i ? "," : "", (long long)size[i]);
    if (total > INT_MAX)
      return luaL_error(L, "init_device_mesh: mesh shape %s} has more than %d ranks, but the world has %d", buf, INT_MAX, world);
    return luaL_error(L, "init_device_mesh: mesh shape %s} has %d ranks, but the world has %d", buf, (int)total, world);
  }
  for (int i = 0; i < ndim; i++) shape[i] = (int)size[i];
  int *ranks = lua_newuserdatauv(L, sizeof(int) * (size_t)total, 0);
  for (int i = 0; i < total; i++) ranks[i] = i;
  return new_mesh(L, device, ndim, shape, ranks, 3);
}

/* ---- properties ---- */
/* A mesh dim at idx: 1-based (negative from the end) or a name. */
static int check_mesh_dim(lua_State *L, const dt_mesh *m, int idx, const char *op) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    int d = dt_mesh_dim_by_name(m, lua_tostring(L, idx));
    if (d < 0) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; i < m->ndim; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, m->names[i][0] ? m->names[i] : "(unnamed)");
      }
      luaL_pushresult(&b);
      return luaL_error(L, "%s: the mesh has no dim named '%s' (dims: %s)", op, lua_tostring(L, idx), lua_tostring(L, -1));
    }
    return d;
  }
  if (!lua_isinteger(L, idx)) return luaL_error(L, "%s: a mesh dim is an integer or a name, got %s", op, luaL_typename(L, idx));
  lua_Integer d = lua_tointeger(L, idx);
  lua_Integer z = d > 0 ? d - 1 : d + m->ndim;
  if (d == 0 || z < 0 || z >= m->ndim)
    return luaL_error(L, "%s: mesh dim %d out of range for a %d-d mesh (mesh dims are 1-based: 1..%d)", op, (int)d,
                      m->ndim, m->ndim);
  return (int)z;
}

static int int_list(lua_State *L, const int *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) lua_pushinteger(L, v[i]), lua_rawseti(L, -2, i + 1);
  return 1;
}

static int mesh_shape(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "shape");
  return int_list(L, m->shape, m->ndim);
}
static int mesh_size(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "size");
  if (lua_isnoneornil(L, 2)) return lua_pushinteger(L, m->size), 1;
  return lua_pushinteger(L, m->shape[check_mesh_dim(L, m, 2, "size")]), 1;
}
static int mesh_dim_names(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "dim_names");
  if (!m->names[0][0]) return lua_pushnil(L), 1;
  lua_createtable(L, m->ndim, 0);
  for (int i = 0; i < m->ndim; i++) lua_pushstring(L, m->names[i]), lua_rawseti(L, -2, i + 1);
  return 1;
}
static int mesh_get_coordinate(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "get_coordinate");
  if (m->me < 0) return lua_pushnil(L), 1;
  return int_list(L, m->coord, m->ndim);
}
static int mesh_get_local_rank(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "get_local_rank");
  int d = m->ndim == 1 && lua_isnoneornil(L, 2) ? 0 : check_mesh_dim(L, m, 2, "get_local_rank");
  if (m->me < 0) return lua_pushnil(L), 1;
  return lua_pushinteger(L, m->coord[d]), 1;
}
static int mesh_get_group(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "get_group");
  if (m->ndim > 1 && lua_isnoneornil(L, 2))
    return luaL_error(L, "get_group: a %d-d mesh has one group per dim: pass the dim (1..%d or a name)", m->ndim, m->ndim);
  int d = lua_isnoneornil(L, 2) ? 0 : check_mesh_dim(L, m, 2, "get_group");
  dt_lua_push_group(L, m->groups[1 << d]);
  return 1;
}
/* The layout as nested tables of world ranks. */
static void push_layout(lua_State *L, const dt_mesh *m, int d, int *idx) {
  lua_createtable(L, m->shape[d], 0);
  for (int i = 0; i < m->shape[d]; i++) {
    if (d + 1 == m->ndim) lua_pushinteger(L, m->ranks[(*idx)++]);
    else push_layout(L, m, d + 1, idx);
    lua_rawseti(L, -2, i + 1);
  }
}
static int mesh_layout(lua_State *L) {
  int idx = 0;
  push_layout(L, check_mesh(L, 1, "layout"), 0, &idx);
  return 1;
}

static int mesh_slice(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "slice");
  int dims[DT_MESH_MAX_DIMS], n;
  if (lua_istable(L, 2)) {
    n = (int)luaL_len(L, 2);
    if (n < 1 || n > m->ndim) return luaL_error(L, "slice: %d dims for a %d-d mesh", n, m->ndim);
    for (int i = 0; i < n; i++) {
      lua_geti(L, 2, i + 1);
      dims[i] = check_mesh_dim(L, m, lua_gettop(L), "slice");
      lua_pop(L, 1);
    }
  } else {
    n = 1;
    dims[0] = check_mesh_dim(L, m, 2, "slice");
  }
  dt_mesh *s;
  if (dt_mesh_slice(m, dims, n, &s) != DT_OK) return dt_lua_raise(L);
  dt_lua_push_mesh(L, s);
  return 1;
}

static int mesh_flatten(lua_State *L) {
  dt_mesh *m = check_mesh(L, 1, "flatten"), *f;
  const char *name = luaL_optstring(L, 2, NULL);
  char buf[DT_MESH_NAME_LEN * DT_MESH_MAX_DIMS + 8] = "";
  if (!name && m->names[0][0]) { /* PyTorch's default: the names joined by "_" */
    for (int i = 0; i < m->ndim; i++) strcat(strcat(buf, i ? "_" : ""), m->names[i]);
    name = buf;
  }
  if (dt_mesh_flatten(m, name, &f) != DT_OK) return dt_lua_raise(L);
  dt_lua_push_mesh(L, f);
  return 1;
}

static int mesh_tostring(lua_State *L) {
  char buf[1024];
  lua_pushstring(L, dt_mesh_format(check_mesh(L, 1, "tostring"), buf, sizeof buf));
  return 1;
}
static int mesh_eq(lua_State *L) {
  lua_mesh *a = luaL_testudata(L, 1, MESH_MT), *b = luaL_testudata(L, 2, MESH_MT);
  return lua_pushboolean(L, a && b && a->m && b->m && dt_mesh_equal(a->m, b->m)), 1; /* released: unequal */
}

static const luaL_Reg mesh_methods[] = {
    {"shape", mesh_shape},
    {"size", mesh_size},
    {"dim_names", mesh_dim_names},
    {"get_coordinate", mesh_get_coordinate},
    {"get_local_rank", mesh_get_local_rank},
    {"get_group", mesh_get_group},
    {"layout", mesh_layout},
    {"slice", mesh_slice},
    {"flatten", mesh_flatten},
    {"use", mesh_use},
    {NULL, NULL},
};

/* mesh.ndim, mesh.device_type, mesh:method, mesh["name"] (a 1-d slice). */
static int mesh_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method: it checks the mesh */
    dt_mesh *m = check_mesh(L, 1, k);
    if (strcmp(k, "ndim") == 0) return lua_pushinteger(L, m->ndim), 1;
    if (strcmp(k, "device_type") == 0) return lua_pushstring(L, m->device_type), 1;
    if (dt_mesh_dim_by_name(m, k) < 0) return luaL_error(L, "DeviceMesh: no field or dim named '%s'", k);
  } else if (!lua_istable(L, 2))
    return luaL_error(L, "DeviceMesh: index with a dim name or a table of names");
  lua_settop(L, 2);
  return mesh_slice(L);
}

void dt_lua_new_meta(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction index) {
  luaL_newmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, -2, "__index");
}

void dt_lua_open_mesh(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg funcs[] = {
      {"init_device_mesh", l_init_device_mesh},
      {"DeviceMesh", l_device_mesh},
      {"current_mesh", l_current_mesh},
      {NULL, NULL},
  };
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
  dt_lua_new_meta(L, MESH_MT, mesh_methods, mesh_index);
  lua_pushcfunction(L, mesh_release), lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, mesh_release), lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, mesh_tostring), lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, mesh_eq), lua_setfield(L, -2, "__eq");
  lua_pushstring(L, "DeviceMesh"), lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "DeviceMesh");
  lua_pop(L, 1);
  dt_lua_open_placement(L, tg);
  luaL_newmetatable(L, GUARD_MT);
  lua_pushcfunction(L, guard_close), lua_setfield(L, -2, "__close");
  lua_pushstring(L, "MeshGuard"), lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "MeshGuard");
  lua_pop(L, 1);
}
