/* Lua bindings of the DTensor API (src/distributed/dtensor_api.h): distribute_tensor,
 * from_local, to_local, full_tensor, redistribute, explain_redistribute; properties and
 * printing.  A DTensor is the Tensor userdata with a spec (a dt_value).  Factories:
 * l_dtensor_factory.c; comm_debug: l_comm_debug.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "call/call_dtensor.h"
#include "distributed/dtensor_api.h"
#include "bindings/l_dist.h"
#include "bindings/l_dtensor.h"
#include "bindings/l_mesh.h"
#include "bindings/l_tensor.h"

dt_value *dt_lua_check_dtensor(lua_State *L, int idx, const char *op) {
  dt_value *u = dt_lua_check_value(L, idx);
  if (!u->spec) luaL_error(L, "%s: expected a DTensor, got a plain tensor (use dt.distribute_tensor or dt.from_local)", op);
  return u;
}

dt_dspec *dt_lua_new_spec(lua_State *L, dt_mesh *m, const dt_placement *p, int ndim, const int64_t *shape,
                          dt_dtype dtype, const char *op) {
  dt_dspec *s;
  if (dt_dspec_new(m, p, ndim, shape, dtype, op, &s) != DT_OK) dt_lua_raise(L);
  return s;
}

/* Pushes the value a DTensor API function initialised, or raises its error. */
static int push_value(lua_State *L, int st, dt_value *v) {
  if (st != DT_OK) return dt_lua_raise(L);
  dt_lua_push_dtensor(L, v->local, v->spec);
  return 1;
}

/* The result of a differentiable conversion (src/call/call_dtensor.h): an empty userdata the
 * call fills, so that the history autograd attaches to it stays. */
static int push_result(lua_State *L, int st, dt_value *out) {
  if (st != DT_OK) return dt_lua_raise(L);
  dt_lua_account_value(L, out);
  return 1;
}

/* opts.grad_placements (a placements list, as placements elsewhere) into out; NULL when absent. */
static const dt_placement *grad_placements(lua_State *L, int opts, int mesh_ndim, dt_placement *out, const char *op) {
  if (!lua_istable(L, opts)) return NULL;
  lua_getfield(L, opts, "grad_placements");
  const dt_placement *p = NULL;
  if (!lua_isnil(L, -1)) {
    char what[64];
    snprintf(what, sizeof what, "%s: grad_placements", op);
    dt_lua_check_placements(L, lua_gettop(L), mesh_ndim, out, what);
    p = out;
  }
  lua_pop(L, 1);
  return p;
}

/* dt.distribute_tensor(t, mesh, placements, {src_rank = the mesh's first rank}): src_rank =
 * false chunks every rank's own t with no communication. */
static int l_distribute_tensor(lua_State *L) {
  const char *op = "distribute_tensor";
  dt_mesh *m = dt_lua_opt_mesh(L, 2, op);
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 3, m->ndim, p, op);
  int src = m->ranks[0]; /* as PyTorch: the mesh's first rank (world rank 0 may not be in it) */
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "src_rank");
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) src = DT_SRC_LOCAL;
    else if (!lua_isnil(L, -1)) {
      if (!lua_isinteger(L, -1)) return luaL_error(L, "%s: src_rank must be a rank (integer) or false", op);
      lua_Integer r = lua_tointeger(L, -1);
      src = r > INT_MIN && r <= INT_MAX ? (int)r : INT_MAX; /* out of range: "not a rank of the mesh" */
    }
    lua_pop(L, 1);
  }
  dt_value *u = dt_lua_test_value(L, 1);
  if (u && u->spec) return luaL_error(L, "%s: the input is already a DTensor (use x:redistribute)", op);
  dt_value out;
  return push_value(L, dt_distribute_tensor(dt_lua_context(L), u ? u->local : NULL, m, p, src, &out), &out);
}

/* opts[field] as a shape; *given = its length (0 when absent, -1 for {}).  ndim < 0: any length. */
static void shape_opt(lua_State *L, int idx, const char *field, int ndim, int64_t *out, int *given, const char *op) {
  *given = 0;
  if (!lua_istable(L, idx)) return;
  lua_getfield(L, idx, field);
  if (!lua_isnil(L, -1)) {
    int n;
    dt_lua_check_shape(L, lua_gettop(L), &n, out, op);
    if (ndim >= 0 && n != ndim) luaL_error(L, "%s: %s has %d entries for a %d-d local tensor", op, field, n, ndim);
    *given = n ? n : -1;
  }
  lua_pop(L, 1);
}

/* dt.from_local(local, mesh, placements, {run_check = false, shape = , stride = ,
 * grad_placements = }): stride is checked for its length only (DTensors here are contiguous). */
static int l_from_local(lua_State *L) {
  const char *op = "from_local";
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  dt_value *local = dt_lua_check_value(L, 1);
  dt_mesh *m = dt_lua_opt_mesh(L, 2, op);
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 3, m->ndim, p, op);
  int check = dt_lua_opt_bool_field(L, 4, "run_check", 0), given, sgiven;
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  /* off-mesh ranks hold an empty tensor: the given shape decides the dims there */
  shape_opt(L, 4, "shape", m->me < 0 ? -1 : t->ndim, shape, &given, op);
  int ndim = given > 0 ? given : given < 0 ? 0 : t->ndim;
  shape_opt(L, 4, "stride", ndim, stride, &sgiven, op);
  dt_placement gp[DT_MESH_MAX_DIMS];
  const dt_placement *g = grad_placements(L, 4, m->ndim, gp, op);
  dt_value *out = dt_lua_new_value(L);
  return push_result(L, dt_call_from_local(dt_lua_context(L), local, m, p, check, ndim, given ? shape : NULL, g, out),
                     out);
}

/* ---- methods ---- */
/* x:to_local({grad_placements = }) */
static int l_to_local(lua_State *L) {
  const char *op = "to_local";
  dt_value *x = dt_lua_check_dtensor(L, 1, op);
  dt_placement gp[DT_MESH_MAX_DIMS];
  const dt_placement *g = grad_placements(L, 2, x->spec->mesh->ndim, gp, op);
  dt_value *out = dt_lua_new_value(L);
  return push_result(L, dt_call_to_local(dt_lua_context(L), x, g, out), out);
}

/* x:redistribute(mesh?, placements, {async_op = false, grad_placements = }) or
 * x:redistribute(placements, opts) */
static int l_redistribute(lua_State *L) {
  const char *op = "redistribute";
  dt_value *u = dt_lua_check_dtensor(L, 1, op);
  dt_mesh *m = dt_lua_test_mesh(L, 2, op);
  int pidx = m || lua_isnil(L, 2) ? 3 : 2; /* x:redistribute(placements, opts) skips the mesh */
  dt_placement to[DT_MESH_MAX_DIMS], gp[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, pidx, u->spec->mesh->ndim, to, op);
  const dt_placement *g = grad_placements(L, pidx + 1, u->spec->mesh->ndim, gp, op);
  dt_value *out = dt_lua_new_value(L);
  return push_result(L, dt_call_redistribute(dt_lua_context(L), u, m, to, g, out), out);
}

/* x:full_tensor({grad_placements = }), dt.full_tensor(x, opts) */
static int l_full_tensor(lua_State *L) {
  const char *op = "full_tensor";
  dt_value *x = dt_lua_check_dtensor(L, 1, op);
  dt_placement gp[DT_MESH_MAX_DIMS];
  const dt_placement *g = grad_placements(L, 2, x->spec->mesh->ndim, gp, op);
  dt_value *out = dt_lua_new_value(L);
  return push_result(L, dt_call_full_tensor(dt_lua_context(L), x, g, out), out);
}

static int l_is_dtensor(lua_State *L) {
  dt_value *u = dt_lua_test_value(L, 1);
  return lua_pushboolean(L, u && u->spec), 1;
}

int dt_lua_dtensor_field(lua_State *L, dt_value *u, const char *k) {
  if (strcmp(k, "device_mesh") == 0) {
    dt_mesh_retain(u->spec->mesh);
    dt_lua_push_mesh(L, u->spec->mesh);
    return 1;
  }
  if (strcmp(k, "placements") == 0) {
    lua_createtable(L, u->spec->mesh->ndim, 0);
    for (int i = 0; i < u->spec->mesh->ndim; i++) dt_lua_push_placement(L, u->spec->p[i]), lua_rawseti(L, -2, i + 1);
    return 1;
  }
  return 0;
}

/* __tostring: DTensors show their spec and local shard; plain tensors go to l_print's. */
static int dtensor_tostring(lua_State *L) {
  dt_lua_capture_refuse(L, "tostring(t) (tensor values read into Lua)");
  dt_value *u = dt_lua_test_value(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  if (!u || !u->spec) {
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    return 1;
  }
  dt_tensor_retain(u->local);
  dt_lua_push_tensor(L, u->local);
  lua_call(L, 1, 1);
  char pl[256], mesh[1024], gs[160];
  dt_format_shape(gs, sizeof gs, u->spec->ndim, u->spec->shape);
  lua_pushfstring(L, "DTensor(shape=%s, dtype=%s, placements=%s, mesh=%s, local (rank %d)=\n%s)", gs,
                  dt_dtype_name(u->spec->dtype), dt_placements_format(u->spec->p, u->spec->mesh->ndim, pl, sizeof pl),
                  dt_mesh_format(u->spec->mesh, mesh, sizeof mesh), dt_lua_context(L)->rank, lua_tostring(L, -1));
  return 1;
}

/* dt.explain_redistribute(x, placements, {print = true}): returns the plan as text and
 * prints it unless print = false. */
static int l_explain(lua_State *L) {
  const char *op = "explain_redistribute";
  dt_value *u = dt_lua_check_dtensor(L, 1, op);
  dt_placement to[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 2, u->spec->mesh->ndim, to, op);
  char *text;
  if (dt_explain_redistribute(dt_lua_context(L), u, to, &text) != DT_OK) return dt_lua_raise(L);
  lua_pushstring(L, text);
  free(text);
  if (dt_lua_opt_bool_field(L, 3, "print", 1)) {
    lua_getglobal(L, "print");
    lua_pushvalue(L, -2);
    lua_call(L, 1, 0);
  }
  return 1;
}

static const luaL_Reg module_funcs[] = {
    {"distribute_tensor", l_distribute_tensor},
    {"from_local", l_from_local},
    {"is_dtensor", l_is_dtensor},
    {"explain_redistribute", l_explain},
    {"full_tensor", l_full_tensor}, /* dt.full_tensor(x), as issue 6 writes it: x:full_tensor() */
    {NULL, NULL},
};

static const luaL_Reg methods[] = {
    {"to_local", l_to_local},
    {"full_tensor", l_full_tensor},
    {"redistribute", l_redistribute},
    {NULL, NULL},
};

void dt_lua_open_dtensor(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, module_funcs, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_getfield(L, tg->meta, "__tostring");
  lua_pushcclosure(L, dtensor_tostring, 1);
  lua_setfield(L, tg->meta, "__tostring");
  dt_lua_open_dtensor_factory(L, tg);
  dt_lua_open_comm_debug(L, tg);
  dt_lua_open_dispatch(L, tg);
}
