/* Bindings of the shape and index family: gather, scatter, scatter_add, sort, argsort, topk,
 * flip, roll, repeat, tril, triu, diag (dt.name(t, ...) and t:name(...)).  Dims and index
 * values are 1-based here (negative dims from the end) and 0-based in the core.  The forms
 * composed of these (scatter with a number or a larger source, the in-place scatter_,
 * topk over a sharded dim, tile, einsum, ...) are lua/dtensor/shape_ops.lua's. */
#include <lauxlib.h>

#include "bindings/l_tensor.h"

static dt_value *check_index_tensor(lua_State *L, int idx, const char *op) {
  dt_value *ix = dt_lua_check_value_for(L, idx, op, "index");
  dt_dtype it = dt_value_dtype(ix);
  if (it != DT_INT64 && it != DT_INT32)
    luaL_error(L, "%s: index must be an int64 or int32 tensor, got %s", op, dt_dtype_name(it));
  return ix;
}

static int dim_of(lua_State *L, int idx, const dt_value *x, const char *op) {
  return dt_lua_check_dim(L, idx, dt_value_ndim(x), 0, op);
}

/* gather(dim, index): x's elements at the index's values along dim (index-shaped) */
static int l_gather(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  int d = dim_of(L, 2, x, "gather");
  dt_value *in[2] = {x, dt_lua_push_zero_based(L, check_index_tensor(L, 3, "gather"))};
  dt_op_args a = {.nints = 1};
  a.ints[0] = d;
  return dt_lua_call(L, DT_OP_GATHER, &a, in, 2);
}

static int scatter(lua_State *L, dt_op_id op, const char *name) {
  dt_value *x = dt_lua_check_value(L, 1);
  int d = dim_of(L, 2, x, name);
  dt_value *ix = check_index_tensor(L, 3, name), *src = dt_lua_check_value_for(L, 4, name, "src");
  dt_value *in[3] = {x, dt_lua_push_zero_based(L, ix), src};
  dt_op_args a = {.nints = 1};
  a.ints[0] = d;
  return dt_lua_call(L, op, &a, in, 3);
}
/* scatter(dim, index, src) / scatter_add: a new tensor, x with src written / added at the
 * index's values along dim (src of the index's shape here; the Lua wrapper narrows a larger one) */
static int l_scatter(lua_State *L) { return scatter(L, DT_OP_SCATTER, "scatter"); }
static int l_scatter_add(lua_State *L) { return scatter(L, DT_OP_SCATTER_ADD, "scatter_add"); }

/* a boolean argument at idx, or field `field` of the options table opts (0: none) */
static int flag_arg(lua_State *L, int idx, int opts, const char *field, int def, const char *op) {
  if (opts) return dt_lua_opt_bool_field(L, opts, field, def);
  if (lua_isnoneornil(L, idx)) return def;
  if (!lua_isboolean(L, idx)) return luaL_error(L, "%s: %s must be a boolean, got %s", op, field, luaL_typename(L, idx));
  return lua_toboolean(L, idx);
}

/* the dim at idx (or the options table's dim); default the last */
static int dim_arg(lua_State *L, int idx, int opts, const dt_value *x, const char *op) {
  int nd = dt_value_ndim(x);
  if (opts) {
    lua_getfield(L, opts, "dim");
    int d = lua_isnil(L, -1) ? (nd ? nd - 1 : 0) : dt_lua_check_dim(L, -1, nd, 0, op);
    lua_pop(L, 1);
    return d;
  }
  return lua_isnoneornil(L, idx) ? (nd ? nd - 1 : 0) : dim_of(L, idx, x, op);
}

static int opts_at(lua_State *L, int idx) { return lua_istable(L, idx) && !dt_lua_test_tensor(L, idx) ? idx : 0; }

/* sort(dim = -1, descending = false) or sort{dim =, descending =, stable =}: (values, indices);
 * always stable (equal values keep their order), NaN last ascending / first descending */
static int sort(lua_State *L, const char *op) {
  dt_value *x = dt_lua_check_value(L, 1);
  int opts = opts_at(L, 2);
  dt_op_args a = {.nints = 2};
  a.ints[0] = dim_arg(L, 2, opts, x, op);
  a.ints[1] = flag_arg(L, 3, opts, "descending", 0, op);
  if (opts) dt_lua_opt_bool_field(L, opts, "stable", 1); /* checked; the sort is stable anyway */
  dt_lua_call(L, DT_OP_SORT, &a, &x, 1);
  dt_lua_to_one_based(L, -1);
  return 2;
}
static int l_sort(lua_State *L) { return sort(L, "sort"); }
static int l_argsort(lua_State *L) {
  sort(L, "argsort");
  return 1;
}

/* topk(k, dim = -1, largest = true, sorted = true) or topk(k, {dim =, largest =, sorted =}):
 * (values, indices), always sorted; ties: the lower index first */
static int l_topk(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  lua_Integer k = dt_lua_check_integer(L, 2, "topk", "k");
  int opts = opts_at(L, 3);
  dt_op_args a = {.nints = 3};
  a.ints[0] = dim_arg(L, 3, opts, x, "topk");
  a.ints[1] = k;
  a.ints[2] = flag_arg(L, 4, opts, "largest", 1, "topk");
  flag_arg(L, 5, opts, "sorted", 1, "topk");
  dt_lua_call(L, DT_OP_TOPK, &a, &x, 1);
  dt_lua_to_one_based(L, -1);
  return 2;
}

/* a list of dims (a table or integers from idx) into a->ints, 0-based */
static void dims_arg(lua_State *L, int idx, const dt_value *x, dt_op_args *a, int at, const char *op) {
  int n = 0;
  int64_t v[DT_MAX_DIMS];
  if (lua_isinteger(L, idx) && at > 0) n = 1, v[0] = lua_tointeger(L, idx); /* roll's one dim */
  else if (lua_isinteger(L, idx) || (lua_istable(L, idx) && !dt_lua_test_tensor(L, idx))) dt_lua_check_shape(L, idx, &n, v, op);
  else luaL_error(L, "%s: dims must be an integer or a list of integers, got %s", op, luaL_typename(L, idx));
  for (int i = 0; i < n; i++) a->ints[at + i] = dt_lua_to_dim(L, v[i], dt_value_ndim(x), 0, op);
  a->nints = at + n;
}

/* flip(dims): a table or integers */
static int l_flip(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  dims_arg(L, 2, x, &a, 0, "flip");
  return dt_lua_call(L, DT_OP_FLIP, &a, &x, 1);
}

/* roll(shifts, dims): an integer or a list each, as many shifts as dims; without dims the
 * flattened tensor rolls and takes its shape back */
static int l_roll(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  int64_t shifts[DT_MAX_DIMS];
  int ns = 0;
  if (lua_isinteger(L, 2)) ns = 1, shifts[0] = lua_tointeger(L, 2);
  else if (!lua_istable(L, 2) || dt_lua_test_tensor(L, 2))
    return luaL_error(L, "roll: shifts must be an integer or a list of integers, got %s", luaL_typename(L, 2));
  else dt_lua_check_shape(L, 2, &ns, shifts, "roll");
  dt_op_args a = {0};
  if (lua_isnoneornil(L, 3)) {
    if (ns != 1) return luaL_error(L, "roll: %d shifts without dims (the flattened tensor takes one)", ns);
    int nd = dt_value_ndim(x);
    int64_t shape[DT_MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i] = dt_value_shape(x)[i];
    dt_op_args f = {.nints = 1};
    f.ints[0] = dt_value_numel(x);
    dt_lua_call(L, DT_OP_RESHAPE, &f, &x, 1);
    dt_value *flat = lua_touserdata(L, -1);
    a.ints[0] = shifts[0], a.ints[1] = 0, a.nints = 2;
    dt_lua_call(L, DT_OP_ROLL, &a, &flat, 1);
    dt_value *rolled = lua_touserdata(L, -1);
    dt_op_args back = {.nints = nd};
    for (int i = 0; i < nd; i++) back.ints[i] = shape[i];
    return dt_lua_call(L, DT_OP_RESHAPE, &back, &rolled, 1);
  }
  dims_arg(L, 3, x, &a, ns, "roll");
  if (a.nints != 2 * ns) return luaL_error(L, "roll: %d shifts for %d dims (one per dim)", ns, a.nints - ns);
  for (int i = 0; i < ns; i++) a.ints[i] = shifts[i];
  return dt_lua_call(L, DT_OP_ROLL, &a, &x, 1);
}

/* repeat(sizes): a table or integers, at least one per dim (extra ones make leading dims) */
static int l_repeat(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  if (!dt_lua_check_shape(L, 2, &a.nints, a.ints, "repeat") && !lua_istable(L, 2))
    return luaL_error(L, "repeat: expected the repeats (a list or integers), got %s", luaL_typename(L, 2));
  return dt_lua_call(L, DT_OP_REPEAT, &a, &x, 1);
}

static int diagonal_call(lua_State *L, dt_op_id op, const char *name) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {.nints = 1};
  a.ints[0] = lua_isnoneornil(L, 2) ? 0 : dt_lua_check_integer(L, 2, name, "diagonal");
  return dt_lua_call(L, op, &a, &x, 1);
}
/* tril(diagonal = 0), triu(diagonal = 0): the last two dims' lower / upper triangle */
static int l_tril(lua_State *L) { return diagonal_call(L, DT_OP_TRIL, "tril"); }
static int l_triu(lua_State *L) { return diagonal_call(L, DT_OP_TRIU, "triu"); }
/* diag(diagonal = 0): 1-d -> the square matrix with it on the diagonal; 2-d -> its diagonal */
static int l_diag(lua_State *L) { return diagonal_call(L, DT_OP_DIAG, "diag"); }

static const luaL_Reg shape_funcs[] = {
    {"gather", l_gather}, {"scatter", l_scatter}, {"scatter_add", l_scatter_add}, {"sort", l_sort},
    {"argsort", l_argsort}, {"topk", l_topk},  {"flip", l_flip},  {"roll", l_roll},
    {"repeat", l_repeat},   {"tril", l_tril},  {"triu", l_triu},  {"diag", l_diag},
    {NULL, NULL},
};

void dt_lua_open_shape(lua_State *L, const dt_lua_targets *tg) {
  for (int i = 0; i < 2; i++) { /* dt.sort(t, ...) and t:sort(...) */
    lua_pushvalue(L, i ? tg->methods : tg->module);
    luaL_setfuncs(L, shape_funcs, 0);
    lua_pop(L, 1);
  }
}
