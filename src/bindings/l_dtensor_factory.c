/* Lua bindings behind the DTensor factories and visualize_sharding (lua/dtensor/dtensor.lua):
 * local shard shapes, random factories, every rank's block. */
#include "base/error.h"
#include "distributed/rng.h"
#include "bindings/l_dist.h"
#include "bindings/l_dtensor.h"
#include "bindings/l_mesh.h"

/* dt._dtensor_local_shape(shape, mesh, placements, op): this rank's local shape ({0}
 * off-mesh): Lua factories allocate only the shard. */
/* The spec of a factory: shape, mesh (nil: current) and placements at idx, idx+1, idx+2. */
static dt_dspec *factory_spec(lua_State *L, int idx, dt_dtype dtype, const char *op) {
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  dt_lua_check_shape(L, idx, &ndim, shape, op);
  if (dt_check_shape(op, ndim, shape) != DT_OK) dt_lua_raise(L);
  dt_mesh *m = dt_lua_opt_mesh(L, idx + 1, op);
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, idx + 2, m->ndim, p, op);
  if (dt_dspec_has_partial(p, m->ndim)) luaL_error(L, "%s: factories take Shard and Replicate placements only", op);
  return dt_lua_new_spec(L, m, p, ndim, shape, dtype, op);
}

static int l_local_shape(lua_State *L) {
  int64_t lshape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec *s = factory_spec(L, 1, DT_FLOAT32, luaL_optstring(L, 4, "factory"));
  int lnd;
  dt_dspec_my_local(s, &lnd, lshape, off);
  dt_dspec_free(s);
  lua_createtable(L, lnd, 0);
  for (int i = 0; i < lnd; i++) lua_pushinteger(L, lshape[i]), lua_rawseti(L, -2, i + 1);
  return 1;
}

/* dt._dtensor_shards(x): every mesh rank's block, {rank =, coord = {...}, offset = {...}
 * (0-based), shape = {...}}, in layout order (for visualize_sharding). */
static int l_shards(lua_State *L) {
  dt_value *u = dt_lua_check_dtensor(L, 1, "visualize_sharding");
  const dt_dspec *s = u->spec;
  if (dt_dspec_has_strided(s->p, s->mesh->ndim)) /* blocks of a dim, not one box per rank */
    return luaL_error(L, "visualize_sharding: _StridedShard placements are not drawn; redistribute first");
  dt_mesh *m = s->mesh;
  lua_createtable(L, m->size, 0);
  for (int idx = 0; idx < m->size; idx++) {
    int coord[DT_MESH_MAX_DIMS];
    dt_mesh_coord_of(m, idx, coord);
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_local(s, s->p, coord, shape, off);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, m->ranks[idx]), lua_setfield(L, -2, "rank");
    lua_createtable(L, m->ndim, 0);
    for (int i = 0; i < m->ndim; i++) lua_pushinteger(L, coord[i]), lua_rawseti(L, -2, i + 1);
    lua_setfield(L, -2, "coord");
    lua_createtable(L, s->ndim, 0);
    for (int i = 0; i < s->ndim; i++) lua_pushinteger(L, off[i]), lua_rawseti(L, -2, i + 1);
    lua_setfield(L, -2, "offset");
    lua_createtable(L, s->ndim, 0);
    for (int i = 0; i < s->ndim; i++) lua_pushinteger(L, shape[i]), lua_rawseti(L, -2, i + 1);
    lua_setfield(L, -2, "shape");
    lua_rawseti(L, -2, idx + 1);
  }
  return 1;
}

/* dt._dtensor_random(op, shape, mesh, placements, dtype, low, high, name): a random factory on
 * a mesh (rand, randn, randint with low/high, randperm with shape = n) through the RNG
 * tracker region (dist/rng.c): each rank fills its block of the single-device draw.  name
 * (default op) is the call errors name: rand_like draws as rand. */
static int l_dtensor_random(lua_State *L) {
  dt_lua_capture_refuse(L, "a random factory on a mesh");
  const char *op_name = luaL_checkstring(L, 1);
  dt_op_id id;
  if (dt_op_find(op_name, &id) != DT_OK || !(dt_op_get(id)->flags & DT_OPF_RANDOM) ||
      !(dt_op_get(id)->flags & DT_OPF_FACTORY))
    return luaL_error(L, "_dtensor_random: '%s' is not a random factory", op_name);
  const char *op = luaL_optstring(L, 8, op_name);
  dt_op_args a = {0};
  a.name = op;
  if (id == DT_OP_RANDPERM) {
    a.ints[0] = dt_lua_check_integer(L, 2, op, "n");
    a.ints[1] = 1; /* values 1..n: 1-based in Lua */
    a.nints = 2;
  } else {
    dt_lua_check_shape(L, 2, &a.nints, a.ints, op);
  }
  dt_mesh *m = dt_lua_opt_mesh(L, 3, op);
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 4, m->ndim, p, op);
  int is_float = id == DT_OP_RAND || id == DT_OP_RANDN;
  a.dtype = is_float ? DT_DEFAULT_FLOAT : DT_INT64;
  if (!lua_isnil(L, 5) && (lua_type(L, 5) != LUA_TSTRING || dt_dtype_from_name(lua_tostring(L, 5), &a.dtype) != DT_OK))
    return luaL_error(L, "%s: option dtype: %s", op,
                      lua_type(L, 5) == LUA_TSTRING ? dt_error_message() : "must be a string such as \"float32\"");
  a.has_dtype = 1;
  if (is_float) a.scalar[0] = 0, a.scalar[1] = 1, a.nscalar = 2;
  if (id == DT_OP_RANDINT) {
    a.ints[DT_RNG_SLOT_LOW] = dt_lua_check_integer(L, 6, op, "low");
    a.ints[DT_RNG_SLOT_HIGH] = dt_lua_check_integer(L, 7, op, "high");
  }
  dt_tensor *local;
  dt_dspec *spec;
  if (dt_rng_factory(dt_lua_context(L), id, &a, m, p, &local, &spec) != DT_OK) return dt_lua_raise(L);
  dt_lua_push_dtensor(L, local, spec);
  return 1;
}

void dt_lua_open_dtensor_factory(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg funcs[] = {
      {"_dtensor_local_shape", l_local_shape},
      {"_dtensor_random", l_dtensor_random},
      {"_dtensor_shards", l_shards},
      {NULL, NULL},
  };
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
