/* Bindings: the core functions behind dt.nn.functional (dt._embedding, dt._layer_norm,
 * dt._rms_norm, dt._cross_entropy, dt._sdpa).  The friendly API with defaults and options
 * lives in lua/dtensor/nn/functional.lua; here only argument checking and the 1-based ->
 * 0-based conversion of ids and targets.  Users reach these through F.*, so every error
 * names the public function (scaled_dot_product_attention, not _sdpa): no luaL_check*,
 * whose messages name the C function. */
#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "ops/ids_kind.h"

#include <float.h>
#include <string.h>

/* Pushes ids - 1 for 1-based index values checked against 1..hi (values equal to skip, when
 * has_skip, pass through shifted too), made by the front door's ids_to_zero_based: a captured
 * graph replays the check on every call's values, and a trace for analysis links the op to the
 * tensor the ids came from.  Raises "<op>: <what> 11 out of range for <range> (<what>s are
 * 1-based: 1..10)", the names by kind (src/ops/ids_kind.h). */
static dt_value *push_zero_based(lua_State *L, dt_value *v, int64_t hi, int has_skip, int64_t skip, dt_ids_kind kind) {
  dt_op_args a = {.nints = 4, .ints = {hi, has_skip, skip, kind}};
  dt_lua_call(L, DT_OP_IDS_TO_ZERO_BASED, &a, &v, 1);
  return lua_touserdata(L, -1);
}

/* dt._ids_to_zero_based(ids, hi, kind) with kind "embedding" or "cross_entropy": the same
 * check and conversion for Lua (the DTensor forms check their ids' agreed range with it). */
static int l_ids_to_zero_based(lua_State *L) {
  dt_value *v = dt_lua_check_value_for(L, 1, "ids_to_zero_based", "ids");
  lua_Integer hi = dt_lua_check_integer(L, 2, "ids_to_zero_based", "hi");
  const char *k = luaL_optstring(L, 3, "embedding");
  dt_ids_kind kind = strcmp(k, "cross_entropy") == 0 ? DT_IDS_CROSS_ENTROPY : DT_IDS_EMBEDDING;
  if (kind == DT_IDS_EMBEDDING && strcmp(k, "embedding") != 0)
    return luaL_error(L, "ids_to_zero_based: kind must be \"embedding\" or \"cross_entropy\", got \"%s\"", k);
  push_zero_based(L, v, hi, 0, 0, kind);
  return 1;
}

/* dt._embedding(ids, weight).  Plain ids are checked against the vocab and made 0-based
 * here.  A DTensor's ids are not all on this rank, so its caller (F.embedding in
 * lua/dtensor/dtensor_nn.lua) has agreed their range on every rank first; here they are
 * made 0-based by the front door's sub, which keeps their placements. */
static int l_embedding(lua_State *L) {
  dt_value *ids = dt_lua_check_value_for(L, 1, "embedding", "ids"), *w = dt_lua_check_value_for(L, 2, "embedding", "weight");
  if (dt_value_ndim(w) != 2) {
    char b[64];
    return luaL_error(L, "embedding: weight must be 2-d [vocab, dim], got shape %s",
                      dt_format_shape(b, sizeof b, dt_value_ndim(w), dt_value_shape(w)));
  }
  dt_value *in[2] = {NULL, w};
  if (!ids->spec) {
    in[0] = push_zero_based(L, ids, dt_value_shape(w)[0], 0, 0, DT_IDS_EMBEDDING);
  } else {
    in[0] = dt_lua_push_zero_based(L, ids);
  }
  dt_op_args a = {0};
  return dt_lua_call(L, DT_OP_EMBEDDING, &a, in, 2);
}

/* normalized_shape: an integer or a table of integers -> ints[0] = k, ints[1..k]. */
static void check_normalized_shape(lua_State *L, int idx, dt_op_args *a, const char *op) {
  int k;
  if (lua_isinteger(L, idx)) {
    k = 1;
    a->ints[1] = lua_tointeger(L, idx);
  } else if (lua_istable(L, idx)) {
    dt_lua_check_shape(L, idx, &k, a->ints + 1, op);
  } else {
    luaL_error(L, "%s: normalized_shape must be an integer or a table of integers, got %s", op, luaL_typename(L, idx));
    return;
  }
  a->ints[0] = k;
  a->nints = k + 1;
}

static dt_value *opt_value(lua_State *L, int idx, const char *op, const char *what) {
  if (lua_isnoneornil(L, idx)) return NULL;
  if (!luaL_testudata(L, idx, DT_TENSOR_MT))
    luaL_error(L, "%s: %s must be a tensor or nil, got %s", op, what, dt_lua_typename(L, idx));
  return dt_lua_check_value_for(L, idx, op, what);
}

/* An optional number (eps, scale): nil -> def. */
static double opt_number(lua_State *L, int idx, const char *op, const char *what, double def) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TNUMBER) luaL_error(L, "%s: %s must be a number, got %s", op, what, dt_lua_typename(L, idx));
  return lua_tonumber(L, idx);
}

/* dt._layer_norm(x, normalized_shape, weight?, bias?, eps) */
static int l_layer_norm(lua_State *L) {
  dt_value *in[3] = {dt_lua_check_value_for(L, 1, "layer_norm", "input"), NULL, NULL};
  dt_op_args a = {.nscalar = 1};
  check_normalized_shape(L, 2, &a, "layer_norm");
  in[1] = opt_value(L, 3, "layer_norm", "weight");
  in[2] = opt_value(L, 4, "layer_norm", "bias");
  a.scalar[0] = opt_number(L, 5, "layer_norm", "eps", 1e-5);
  return dt_lua_call(L, DT_OP_LAYER_NORM, &a, in, 3);
}

/* dt._rms_norm(x, normalized_shape, weight?, eps?): eps nil -> the machine epsilon of the
 * compute type (float32's for float32/bfloat16/float16), as torch does for eps=None. */
static int l_rms_norm(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value_for(L, 1, "rms_norm", "input"), NULL};
  dt_op_args a = {.nscalar = 1};
  check_normalized_shape(L, 2, &a, "rms_norm");
  in[1] = opt_value(L, 3, "rms_norm", "weight");
  a.scalar[0] = opt_number(L, 4, "rms_norm", "eps", dt_value_dtype(in[0]) == DT_FLOAT64 ? DBL_EPSILON : FLT_EPSILON);
  return dt_lua_call(L, DT_OP_RMS_NORM, &a, in, 2);
}

/* cross_entropy's arguments from (logits, target, ignore_index, reduction) at stack index
 * first: target and ignore_index 1-based, made 0-based; in[0] logits, in[1] the targets. */
static void cross_entropy_args(lua_State *L, int first, const char *op, dt_ids_kind kind, dt_value **in, dt_op_args *a) {
  dt_value *xv = dt_lua_check_value_for(L, first, op, "logits"), *tv = dt_lua_check_value_for(L, first + 1, op, "target");
  if (xv->spec || tv->spec) /* F.cross_entropy sends DTensors to its DTensor form: only a direct call lands here */
    luaL_error(L, "%s: DTensor arguments go through dt.nn.functional.cross_entropy", op);
  dt_tensor *x = xv->local;
  if (!lua_isinteger(L, first + 2))
    luaL_error(L, "%s: ignore_index must be an integer, got %s", op, dt_lua_typename(L, first + 2));
  lua_Integer ignore = lua_tointeger(L, first + 2);
  static const char *const reductions[] = {"none", "mean", "sum", NULL};
  const char *r = lua_type(L, first + 3) == LUA_TSTRING ? lua_tostring(L, first + 3) : NULL;
  int red = -1;
  for (int i = 0; r && reductions[i]; i++)
    if (strcmp(r, reductions[i]) == 0) red = i;
  if (!r) luaL_error(L, "%s: reduction must be \"none\", \"mean\" or \"sum\", got %s", op, dt_lua_typename(L, first + 3));
  if (red < 0) luaL_error(L, "%s: reduction must be \"none\", \"mean\" or \"sum\", got \"%s\"", op, r);
  if (x->ndim == 0) luaL_error(L, "%s: logits must have at least 1 dim, got a 0-d tensor", op);
  int64_t classes = x->shape[x->ndim == 1 ? 0 : 1];
  in[0] = xv, in[1] = push_zero_based(L, tv, classes, 1, ignore, kind);
  a->nints = 2;
  a->ints[0] = ignore - 1; /* shifted with the targets, so it still matches */
  a->ints[1] = red;
}

/* dt._cross_entropy(logits, target, ignore_index, reduction) */
static int l_cross_entropy(lua_State *L) {
  dt_value *in[2];
  dt_op_args a = {0};
  cross_entropy_args(L, 1, "cross_entropy", DT_IDS_CROSS_ENTROPY, in, &a);
  return dt_lua_call(L, DT_OP_CROSS_ENTROPY, &a, in, 2);
}

/* dt._cross_entropy_backward(grad, logits, target, ignore_index, reduction) -> d logits (the
 * fused op cross_entropy's rule calls; for its tests) */
static int l_cross_entropy_backward(lua_State *L) {
  dt_value *in[3] = {dt_lua_check_value_for(L, 1, "cross_entropy_backward", "grad")};
  dt_op_args a = {0};
  cross_entropy_args(L, 2, "cross_entropy_backward", DT_IDS_CROSS_ENTROPY_BACKWARD, in + 1, &a);
  return dt_lua_call(L, DT_OP_CROSS_ENTROPY_BACKWARD, &a, in, 3);
}

/* dt._sdpa(q, k, v, attn_mask?, is_causal, scale?) */
static int l_sdpa(lua_State *L) {
  const char *op = "scaled_dot_product_attention";
  dt_value *in[4] = {dt_lua_check_value_for(L, 1, op, "query"), dt_lua_check_value_for(L, 2, op, "key"),
                     dt_lua_check_value_for(L, 3, op, "value"), NULL};
  in[3] = opt_value(L, 4, op, "attn_mask");
  dt_op_args a = {0};
  a.flags = lua_toboolean(L, 5) ? 1 : 0;
  if (!lua_isnoneornil(L, 6)) {
    a.scalar[0] = opt_number(L, 6, op, "scale", 0);
    a.nscalar = 1;
  }
  return dt_lua_call(L, DT_OP_SDPA, &a, in, 4);
}

static const luaL_Reg nn_funcs[] = {
    {"_embedding", l_embedding},         {"_layer_norm", l_layer_norm}, {"_rms_norm", l_rms_norm},
    {"_cross_entropy", l_cross_entropy}, {"_ids_to_zero_based", l_ids_to_zero_based},
    {"_cross_entropy_backward", l_cross_entropy_backward}, {"_sdpa", l_sdpa},             {NULL, NULL},
};

void dt_lua_open_nn(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, nn_funcs, 0);
  lua_pop(L, 1);
}
