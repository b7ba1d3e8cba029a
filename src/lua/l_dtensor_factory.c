/* Lua bindings behind the DTensor factories and visualize_sharding (lua/dtensor/dtensor.lua):
 * local shard shapes, random shards, every rank's block. */
#include "base/error.h"
#include "dist/dtensor_random.h"
#include "lua/l_dist.h"
#include "lua/l_dtensor.h"
#include "lua/l_mesh.h"
#include "lua/l_random.h"

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
  dt_lua_tensor *u = dt_lua_check_dtensor(L, 1, "visualize_sharding");
  const dt_dspec *s = u->spec;
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

/* dt._dtensor_rand(normal, shape, mesh, placements, dtype) */
static int l_dtensor_rand(lua_State *L) {
  int normal = lua_toboolean(L, 1);
  int64_t lshape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dtype dtype = dt_lua_opt_dtype(L, 5, DT_FLOAT32);
  dt_dspec *s = factory_spec(L, 2, dtype, normal ? "randn" : "rand");
  int lnd;
  dt_dspec_my_local(s, &lnd, lshape, off);
  dt_tensor *local = dt_tensor_empty(dtype, lnd, lshape, DT_CPU);
  dt_rng_state *rng = dt_lua_rng_state(L);
  uint64_t words;
  if (!local || dt_dtensor_rand_fill(s, local, normal, rng->seed, rng->offset, &words) != DT_OK) {
    dt_tensor_release(local), dt_dspec_free(s);
    return dt_lua_raise(L);
  }
  dt_lua_rng_advance(L, words);
  dt_lua_push_dtensor(L, local, s);
  return 1;
}

void dt_lua_open_dtensor_factory(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg funcs[] = {
      {"_dtensor_local_shape", l_local_shape},
      {"_dtensor_rand", l_dtensor_rand},
      {"_dtensor_shards", l_shards},
      {NULL, NULL},
  };
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
