/* Bindings: reductions and softmax.  Calling convention (methods and dt.* alike):
 *   t:sum()                    every dim -> 0-d tensor
 *   t:sum(dim [, keepdim])     one dim (1-based, negative from the end)
 *   t:sum({d1, d2} [, keepdim])
 *   t:sum(dims, {keepdim = true, dtype = "float64"})   options table instead of keepdim
 *   t:sum({keepdim = true})    options table alone: every dim
 * max/min/argmax/argmin take one dim; var/std take correction = (default 1) or unbiased =
 * in the options table (or a boolean "unbiased" first, as torch.var(x, False));
 * norm takes p first: t:norm(p, dims, keepdim).  Index results are 1-based here. */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "distributed/dtensor.h"
#include "bindings/l_tensor.h"

/* A table with string keys and no array part is an options table, not a list of dims. */
static int is_opts_table(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || dt_lua_test_tensor(L, idx) || luaL_len(L, idx) > 0) return 0;
  lua_pushnil(L);
  if (!lua_next(L, idx)) return 0;
  lua_pop(L, 2);
  return 1;
}

/* Reads dims at idx and keepdim/options at idx+1 into a; returns the options table's
 * index (0 when none).  many = 0 for ops that take a single dim. */
static int parse_dims(lua_State *L, int idx, const dt_value *x, dt_op_args *a, const char *op, int many) {
  int opts = 0;
  a->flags |= DT_ARG_ALL_DIMS;
  if (lua_isnoneornil(L, idx)) {
    /* every dim */
  } else if (is_opts_table(L, idx)) {
    return lua_isnoneornil(L, idx + 1) ? (a->keepdim = dt_lua_opt_bool_field(L, idx, "keepdim", 0), idx)
                                       : luaL_error(L, "%s: unexpected argument after the options table", op);
  } else if (lua_isinteger(L, idx)) {
    a->ints[0] = dt_lua_check_dim(L, idx, dt_value_ndim(x), 0, op);
    a->nints = 1;
    a->flags &= ~DT_ARG_ALL_DIMS;
  } else if (lua_istable(L, idx) && !dt_lua_test_tensor(L, idx) && many) {
    int n = (int)luaL_len(L, idx);
    if (n > DT_MAX_DIMS) return luaL_error(L, "%s: %d dims given (at most %d)", op, n, DT_MAX_DIMS);
    for (int i = 0; i < n; i++) {
      lua_geti(L, idx, i + 1);
      if (!lua_isinteger(L, -1)) return luaL_error(L, "%s: dims must be integers, got %s", op, luaL_typename(L, -1));
      a->ints[i] = dt_lua_to_dim(L, lua_tointeger(L, -1), dt_value_ndim(x), 0, op);
      lua_pop(L, 1);
    }
    a->nints = n;
    if (n > 0) a->flags &= ~DT_ARG_ALL_DIMS;
  } else {
    return luaL_error(L, many ? "%s: dim must be an integer or a table of integers, got %s"
                              : "%s: dim must be an integer, got %s",
                      op, luaL_typename(L, idx));
  }
  int k = idx + 1;
  if (lua_isboolean(L, k)) a->keepdim = lua_toboolean(L, k);
  else if (lua_istable(L, k) && !dt_lua_test_tensor(L, k)) {
    a->keepdim = dt_lua_opt_bool_field(L, k, "keepdim", 0);
    opts = k;
  } else if (!lua_isnoneornil(L, k))
    return luaL_error(L, "%s: keepdim must be a boolean or an options table, got %s", op, luaL_typename(L, k));
  return opts;
}

static int reduce_simple(lua_State *L, dt_op_id id, const char *op) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  int opts = parse_dims(L, 2, x, &a, op, 1);
  if (opts && (id == DT_OP_SUM || id == DT_OP_PROD)) { /* {dtype = ...}: accumulate/return in it */
    lua_getfield(L, opts, "dtype");
    a.has_dtype = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (a.has_dtype) a.dtype = dt_lua_opt_dtype_field(L, opts, DT_DEFAULT_FLOAT);
  }
  return dt_lua_call(L, id, &a, &x, 1);
}

static int l_sum(lua_State *L) { return reduce_simple(L, DT_OP_SUM, "sum"); }
static int l_mean(lua_State *L) { return reduce_simple(L, DT_OP_MEAN, "mean"); }
static int l_prod(lua_State *L) { return reduce_simple(L, DT_OP_PROD, "prod"); }
static int l_amax(lua_State *L) { return reduce_simple(L, DT_OP_AMAX, "amax"); }
static int l_amin(lua_State *L) { return reduce_simple(L, DT_OP_AMIN, "amin"); }

/* One dim; the last of the nres results holds 0-based indices, made 1-based here. */
static int with_indices(lua_State *L, dt_op_id id, const char *op, int nres) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  parse_dims(L, 2, x, &a, op, 0);
  dt_lua_call(L, id, &a, &x, 1);
  dt_lua_to_one_based(L, -1);
  return nres;
}

/* max/min: without a dim the global value (0-d); with one, (values, indices). */
static int max_min(lua_State *L, dt_op_id with_index, dt_op_id global, const char *op) {
  if (lua_isnoneornil(L, 2) || is_opts_table(L, 2)) {
    dt_value *u = dt_lua_check_value(L, 1); /* the global size for a DTensor */
    if (dt_value_numel(u) == 0)
      return luaL_error(L, "%s: cannot reduce over a zero-size dim", op);
    return reduce_simple(L, global, op);
  }
  return with_indices(L, with_index, op, 2);
}
static int l_max(lua_State *L) { return max_min(L, DT_OP_MAX, DT_OP_AMAX, "max"); }
static int l_min(lua_State *L) { return max_min(L, DT_OP_MIN, DT_OP_AMIN, "min"); }
static int l_argmax(lua_State *L) { return with_indices(L, DT_OP_ARGMAX, "argmax", 1); }
static int l_argmin(lua_State *L) { return with_indices(L, DT_OP_ARGMIN, "argmin", 1); }

/* var/std: correction from {correction = c} or {unbiased = b} or a leading boolean. */
static int var_std(lua_State *L, dt_op_id id, const char *op) {
  dt_value *x = dt_lua_check_value(L, 1);
  double correction = 1;
  if (lua_isboolean(L, 2)) {
    correction = lua_toboolean(L, 2) ? 1 : 0;
    lua_remove(L, 2);
  }
  dt_op_args a = {0};
  int opts = parse_dims(L, 2, x, &a, op, 1);
  if (opts) {
    lua_getfield(L, opts, "unbiased");
    if (!lua_isnil(L, -1)) correction = lua_toboolean(L, -1) ? 1 : 0;
    lua_pop(L, 1);
    correction = dt_lua_opt_number_field(L, opts, "correction", correction);
  }
  a.scalar[0] = correction;
  a.nscalar = 1;
  return dt_lua_call(L, id, &a, &x, 1);
}
static int l_var(lua_State *L) { return var_std(L, DT_OP_VAR, "var"); }
static int l_std(lua_State *L) { return var_std(L, DT_OP_STD, "std"); }

/* norm(p = 2, dims = all, keepdim): p a number (math.huge for inf) or "fro". */
static int l_norm(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  double p = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) p = lua_tonumber(L, 2);
  else if (lua_type(L, 2) == LUA_TSTRING) {
    const char *s = lua_tostring(L, 2);
    if (strcmp(s, "fro") == 0) p = 2;
    else if (strcmp(s, "inf") == 0) p = INFINITY;
    else if (strcmp(s, "-inf") == 0) p = -INFINITY;
    else return luaL_error(L, "norm: unknown p '%s' (a number, \"fro\", \"inf\" or \"-inf\")", s);
  } else if (!lua_isnoneornil(L, 2))
    return luaL_error(L, "norm: p must be a number, got %s", luaL_typename(L, 2));
  if (isnan(p)) return luaL_error(L, "norm: p must not be nan");
  dt_op_args a = {0};
  parse_dims(L, 3, x, &a, "norm", 1);
  a.scalar[0] = p;
  a.nscalar = 1;
  return dt_lua_call(L, DT_OP_NORM, &a, &x, 1);
}

/* softmax(dim), log_softmax(dim): the dim is required, as in PyTorch. */
static int softmax_like(lua_State *L, dt_op_id id, const char *op) {
  dt_value *x = dt_lua_check_value(L, 1);
  if (lua_isnoneornil(L, 2)) return luaL_error(L, "%s: dim is required, e.g. t:%s(-1)", op, op);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(x), 0, op);
  a.nints = 1;
  return dt_lua_call(L, id, &a, &x, 1);
}
static int l_softmax(lua_State *L) { return softmax_like(L, DT_OP_SOFTMAX, "softmax"); }
static int l_log_softmax(lua_State *L) { return softmax_like(L, DT_OP_LOG_SOFTMAX, "log_softmax"); }

/* ---- the math family ---- */
/* logsumexp(dims, keepdim): the dims are required, as in torch. */
static int l_logsumexp(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  if (lua_isnoneornil(L, 2) || is_opts_table(L, 2))
    return luaL_error(L, "logsumexp: dim is required, e.g. t:logsumexp(-1) or t:logsumexp({1, 2})");
  dt_op_args a = {0};
  parse_dims(L, 2, x, &a, "logsumexp", 1);
  return dt_lua_call(L, DT_OP_LOGSUMEXP, &a, &x, 1);
}

/* all(), any(): every dim; all(dim [, keepdim]) over one dim (or a table of dims). */
static int l_all(lua_State *L) { return reduce_simple(L, DT_OP_ALL, "all"); }
static int l_any(lua_State *L) { return reduce_simple(L, DT_OP_ANY, "any"); }

/* cumsum(dim [, {dtype =}]), cumprod: the dim is required. */
static int scan(lua_State *L, dt_op_id id, const char *op) {
  dt_value *x = dt_lua_check_value(L, 1);
  if (!lua_isinteger(L, 2))
    return luaL_error(L, "%s: dim must be an integer, got %s (e.g. t:%s(1))", op, dt_lua_typename(L, 2), op);
  dt_op_args a = {.nints = 1};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(x), 0, op);
  if (lua_istable(L, 3) && !dt_lua_test_tensor(L, 3)) {
    lua_getfield(L, 3, "dtype");
    a.has_dtype = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (a.has_dtype) a.dtype = dt_lua_opt_dtype_field(L, 3, DT_DEFAULT_FLOAT);
  } else if (!lua_isnoneornil(L, 3)) {
    a.dtype = dt_lua_opt_dtype(L, 3, DT_DEFAULT_FLOAT);
    a.has_dtype = 1;
  }
  return dt_lua_call(L, id, &a, &x, 1);
}
static int l_cumsum(lua_State *L) { return scan(L, DT_OP_CUMSUM, "cumsum"); }
static int l_cumprod(lua_State *L) { return scan(L, DT_OP_CUMPROD, "cumprod"); }

/* var_mean: var's arguments; returns var, mean. */
static int l_var_mean(lua_State *L) { return var_std(L, DT_OP_VAR_MEAN, "var_mean"); }

static const luaL_Reg reduce_funcs[] = {
    {"sum", l_sum},       {"mean", l_mean},       {"prod", l_prod}, {"amax", l_amax},
    {"amin", l_amin},     {"max", l_max},         {"min", l_min},   {"argmax", l_argmax},
    {"argmin", l_argmin}, {"var", l_var},         {"std", l_std},   {"norm", l_norm},
    {"softmax", l_softmax}, {"log_softmax", l_log_softmax},
    /* the math family */
    {"logsumexp", l_logsumexp}, {"all", l_all}, {"any", l_any}, {"cumsum", l_cumsum}, {"cumprod", l_cumprod},
    {"var_mean", l_var_mean},
    {NULL, NULL},
};

void dt_lua_open_reduce(lua_State *L, const dt_lua_targets *tg) {
  for (int i = 0; i < 2; i++) { /* dt.sum(t, ...) and t:sum(...) */
    lua_pushvalue(L, i ? tg->methods : tg->module);
    luaL_setfuncs(L, reduce_funcs, 0);
    lua_pop(L, 1);
  }
}
