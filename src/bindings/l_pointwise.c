/* Bindings: pointwise ops as operators (+ - * / % ^ and unary -), Tensor methods and dt.*
 * functions; copies and casts (clone, contiguous, to, float(), ...) and in-place ops.
 * Lua's == stays identity: there is no __eq (use eq()).  Hot path: no Lua tables and no
 * allocation but the output tensor. */
#include <string.h>

#include "base/error.h"
#include "distributed/dtensor.h"
#include "bindings/l_tensor.h"

/* A Lua number as the scalar operand: flags, scalar[k], ints[k] (exact integers). */
static int set_number(lua_State *L, int idx, dt_op_args *a, int k) {
  if (lua_type(L, idx) != LUA_TNUMBER) return 0;
  if (lua_isinteger(L, idx)) {
    a->ints[k] = lua_tointeger(L, idx);
    a->scalar[k] = (double)a->ints[k];
    return 2;
  }
  a->scalar[k] = lua_tonumber(L, idx);
  return 1;
}

/* The tensor (plain or DTensor) at idx, or NULL for a non-tensor. */
static dt_value *live_value(lua_State *L, int idx) {
  dt_value *u = luaL_testudata(L, idx, DT_TENSOR_MT);
  if (u && !u->local) luaL_argerror(L, idx, "tensor has been released (closed)");
  return u;
}

/* The two operands of a binary op at 1 and 2: tensor-tensor, tensor-number or number-tensor.
 * Returns the count of tensor operands put in ins. */
static int binary_operands(lua_State *L, dt_op_args *a, dt_value **ins, const char *op) {
  dt_value *x = live_value(L, 1), *y = live_value(L, 2);
  if (x && y) {
    ins[0] = x, ins[1] = y;
    return 2;
  }
  int num = x ? 2 : 1, kind = set_number(L, num, a, 0);
  if (!kind || (!x && !y)) {
    if (!x && !y) luaL_error(L, "%s: expected a tensor operand, got %s and %s", op, luaL_typename(L, 1),
                             luaL_typename(L, 2));
    luaL_error(L, "%s: expected a tensor or a number, got %s", op, luaL_typename(L, num));
  }
  ins[0] = x ? x : y;
  a->flags |= DT_ARG_SCALAR | (x ? 0 : DT_ARG_SCALAR_LEFT) | (kind == 2 ? DT_ARG_SCALAR_INT : 0);
  return 1;
}

static int binary(lua_State *L, dt_op_id id, const char *op) {
  dt_op_args a = {0};
  dt_value *ins[2];
  int n = binary_operands(L, &a, ins, op);
  return dt_lua_call(L, id, &a, ins, n);
}

/* The optional alpha of add/sub/add_ at 3: a number or {alpha = n}, as torch's keyword. */
static void opt_alpha(lua_State *L, dt_op_args *a, const char *op) {
  if (lua_isnoneornil(L, 3)) return;
  int idx = 3;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "alpha");
    idx = lua_gettop(L);
  }
  if (lua_isnil(L, idx)) return;
  if (lua_type(L, idx) != LUA_TNUMBER) luaL_error(L, "%s: alpha must be a number, got %s", op, luaL_typename(L, idx));
  a->scalar[1] = lua_tonumber(L, idx);
  a->nscalar = 2;
  if (!lua_isinteger(L, idx)) a->flags |= DT_ARG_ALPHA_FLOAT;
  else a->ints[1] = lua_tointeger(L, idx), a->flags |= DT_ARG_ALPHA_INT; /* exact, beyond 2^53 too */
}

static int add_sub(lua_State *L, dt_op_id id, const char *op) {
  dt_op_args a = {0};
  dt_value *ins[2];
  int n = binary_operands(L, &a, ins, op);
  opt_alpha(L, &a, op);
  return dt_lua_call(L, id, &a, ins, n);
}

static int l_add(lua_State *L) { return add_sub(L, DT_OP_ADD, "add"); }
static int l_sub(lua_State *L) { return add_sub(L, DT_OP_SUB, "sub"); }
#define BINARY(name, ID) \
  static int l_##name(lua_State *L) { return binary(L, ID, #name); }
BINARY(mul, DT_OP_MUL)
BINARY(div, DT_OP_DIV)
BINARY(pow, DT_OP_POW)
BINARY(remainder, DT_OP_REMAINDER)
BINARY(eq, DT_OP_EQ)
BINARY(ne, DT_OP_NE)
BINARY(lt, DT_OP_LT)
BINARY(le, DT_OP_LE)
BINARY(gt, DT_OP_GT)
BINARY(ge, DT_OP_GE)

/* __add and friends: Lua passes exactly two operands. */
static int m_add(lua_State *L) { return binary(L, DT_OP_ADD, "add"); }
static int m_sub(lua_State *L) { return binary(L, DT_OP_SUB, "sub"); }

/* ---- unary ---- */
static int unary(lua_State *L, dt_op_id id) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  return dt_lua_call(L, id, &a, &x, 1);
}
#define UNARY(name, ID) \
  static int l_##name(lua_State *L) { return unary(L, ID); }
UNARY(neg, DT_OP_NEG)
UNARY(abs, DT_OP_ABS)
UNARY(exp, DT_OP_EXP)
UNARY(log, DT_OP_LOG)
UNARY(sqrt, DT_OP_SQRT)
UNARY(rsqrt, DT_OP_RSQRT)
UNARY(tanh, DT_OP_TANH)
UNARY(sigmoid, DT_OP_SIGMOID)
UNARY(relu, DT_OP_RELU)
UNARY(silu, DT_OP_SILU)
UNARY(sin, DT_OP_SIN)
UNARY(cos, DT_OP_COS)
UNARY(clone, DT_OP_CLONE)

/* contiguous() / to(dtype) give t itself when nothing changes: the same userdata, so
 * t:contiguous() == t as torch's `t.contiguous() is t`. */
static int self_or_result(lua_State *L, dt_op_id id, dt_op_args *a, dt_value *x) {
  dt_lua_call(L, id, a, &x, 1);
  if (((dt_value *)lua_touserdata(L, -1))->local == x->local) lua_pushvalue(L, 1);
  return 1;
}
static int l_contiguous(lua_State *L) {
  dt_op_args a = {0};
  return self_or_result(L, DT_OP_CONTIGUOUS, &a, dt_lua_check_value(L, 1));
}

/* gelu(x, approximate) with approximate "none" (exact erf, default) or "tanh", also as
 * {approximate = "tanh"}. */
static int l_gelu(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  int idx = 2;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "approximate");
    idx = lua_gettop(L);
  }
  if (!lua_isnoneornil(L, idx)) {
    const char *m = lua_tostring(L, idx);
    if (m && strcmp(m, "tanh") == 0) a.flags = DT_ARG_GELU_TANH;
    else if (!m || strcmp(m, "none") != 0)
      return luaL_error(L, "gelu: approximate must be \"none\" or \"tanh\", got %s",
                        m ? m : luaL_typename(L, idx));
  }
  return dt_lua_call(L, DT_OP_GELU, &a, &x, 1);
}

/* clamp(x, min, max) with either nil, or clamp(x, {min = , max = }). */
static int l_clamp(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  int lo = 2, hi = 3;
  if (lua_istable(L, 2) && !dt_lua_test_tensor(L, 2)) {
    lua_getfield(L, 2, "min");
    lua_getfield(L, 2, "max");
    lo = lua_gettop(L) - 1, hi = lo + 1;
  }
  int all_int = 1;
  if (!lua_isnoneornil(L, lo)) {
    int k = set_number(L, lo, &a, 0);
    if (!k) return luaL_error(L, "clamp: min must be a number or nil, got %s", luaL_typename(L, lo));
    a.flags |= DT_ARG_HAS_MIN;
    all_int &= k == 2;
  }
  if (!lua_isnoneornil(L, hi)) {
    int k = set_number(L, hi, &a, 1);
    if (!k) return luaL_error(L, "clamp: max must be a number or nil, got %s", luaL_typename(L, hi));
    a.flags |= DT_ARG_HAS_MAX;
    all_int &= k == 2;
  }
  if (all_int) a.flags |= DT_ARG_SCALAR_INT;
  a.nscalar = 2;
  return dt_lua_call(L, DT_OP_CLAMP, &a, &x, 1);
}

/* A number argument at idx, or field `name` of an options table at 2; def when absent. */
static double opt_param(lua_State *L, int idx, const char *name, double def, const char *op) {
  if (lua_istable(L, 2) && !dt_lua_test_value(L, 2)) {
    lua_getfield(L, 2, name);
    idx = lua_gettop(L);
  }
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TNUMBER) luaL_error(L, "%s: %s must be a number, got %s", op, name, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

/* hardtanh(x, min_val = -1, max_val = 1), or hardtanh(x, {min_val =, max_val =}). */
static int l_hardtanh(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {.nscalar = 2};
  a.scalar[0] = opt_param(L, 2, "min_val", -1, "hardtanh");
  a.scalar[1] = opt_param(L, 3, "max_val", 1, "hardtanh");
  return dt_lua_call(L, DT_OP_HARDTANH, &a, &x, 1);
}

/* leaky_relu(x, negative_slope = 0.01), or leaky_relu(x, {negative_slope =}). */
static int l_leaky_relu(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {.nscalar = 1};
  a.scalar[0] = opt_param(L, 2, "negative_slope", 0.01, "leaky_relu");
  return dt_lua_call(L, DT_OP_LEAKY_RELU, &a, &x, 1);
}

/* masked_fill(x, mask, value): value (a number or a boolean) where mask is true. */
static int masked_fill_args(lua_State *L, dt_op_args *a, const char *op);
static int l_masked_fill(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  masked_fill_args(L, &a, "masked_fill");
  return dt_lua_call(L, DT_OP_MASKED_FILL, &a, in, 2);
}

/* ---- the math family (lm_ names: luaconf.h defines l_floor) ---- */
#define MATH_UNARY(name, ID) \
  static int lm_##name(lua_State *L) { return unary(L, ID); }
MATH_UNARY(floor, DT_OP_FLOOR)
MATH_UNARY(ceil, DT_OP_CEIL)
MATH_UNARY(trunc, DT_OP_TRUNC)
MATH_UNARY(sign, DT_OP_SIGN)
MATH_UNARY(erf, DT_OP_ERF)
MATH_UNARY(isnan, DT_OP_ISNAN)
MATH_UNARY(isinf, DT_OP_ISINF)
MATH_UNARY(isfinite, DT_OP_ISFINITE)

/* round(x, decimals = 0), or round(x, {decimals =}): half to even, as torch. */
static int l_round(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {.nints = 1};
  int idx = 2;
  if (lua_istable(L, 2) && !dt_lua_test_value(L, 2)) {
    lua_getfield(L, 2, "decimals");
    idx = lua_gettop(L);
  }
  if (!lua_isnoneornil(L, idx)) {
    if (!lua_isinteger(L, idx)) return luaL_error(L, "round: decimals must be an integer, got %s", dt_lua_typename(L, idx));
    lua_Integer d = lua_tointeger(L, idx);
    if (d < -300 || d > 300) return luaL_error(L, "round: decimals %I is out of range (-300 .. 300)", (lua_Integer)d);
    a.ints[0] = d;
  }
  return dt_lua_call(L, DT_OP_ROUND, &a, &x, 1);
}

/* nan_to_num(x, nan = 0, posinf, neginf), or nan_to_num(x, {nan =, posinf =, neginf =});
 * posinf/neginf default to the dtype's largest/lowest finite values. */
static int l_nan_to_num(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {.nscalar = 3};
  static const char *const names[] = {"nan", "posinf", "neginf"};
  static const int given[] = {0, DT_ARG_HAS_MAX, DT_ARG_HAS_MIN};
  int opts = lua_istable(L, 2) && !dt_lua_test_value(L, 2);
  for (int k = 0; k < 3; k++) {
    int idx = 2 + k;
    if (opts) lua_getfield(L, 2, names[k]), idx = lua_gettop(L);
    if (lua_isnoneornil(L, idx)) continue;
    if (lua_type(L, idx) != LUA_TNUMBER)
      return luaL_error(L, "nan_to_num: %s must be a number, got %s", names[k], dt_lua_typename(L, idx));
    a.scalar[k] = lua_tonumber(L, idx);
    a.flags |= given[k];
  }
  return dt_lua_call(L, DT_OP_NAN_TO_NUM, &a, &x, 1);
}

/* lerp(start, end, weight): weight a number or a tensor. */
static int l_lerp(lua_State *L) {
  dt_value *in[3] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2), live_value(L, 3)};
  dt_op_args a = {0};
  if (!in[2]) {
    if (lua_type(L, 3) != LUA_TNUMBER) return luaL_error(L, "lerp: weight must be a number or a tensor, got %s", dt_lua_typename(L, 3));
    a.scalar[0] = lua_tonumber(L, 3);
    a.nscalar = 1;
    a.flags = DT_ARG_SCALAR;
    return dt_lua_call(L, DT_OP_LERP, &a, in, 2);
  }
  return dt_lua_call(L, DT_OP_LERP, &a, in, 3);
}

/* addcmul/addcdiv(self, t1, t2, value = 1), value also as {value =}. */
static int addc(lua_State *L, dt_op_id id, const char *op) {
  dt_value *in[3] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2), dt_lua_check_value(L, 3)};
  dt_op_args a = {.nscalar = 1, .flags = DT_ARG_SCALAR_INT, .scalar = {1}, .ints = {1}};
  int idx = 4;
  if (lua_istable(L, 4) && !dt_lua_test_value(L, 4)) {
    lua_getfield(L, 4, "value");
    idx = lua_gettop(L);
  }
  if (!lua_isnoneornil(L, idx)) {
    int kind = set_number(L, idx, &a, 0);
    if (!kind) return luaL_error(L, "%s: value must be a number, got %s", op, dt_lua_typename(L, idx));
    if (kind == 1) a.flags = 0;
  }
  return dt_lua_call(L, id, &a, in, 3);
}
static int l_addcmul(lua_State *L) { return addc(L, DT_OP_ADDCMUL, "addcmul"); }
static int l_addcdiv(lua_State *L) { return addc(L, DT_OP_ADDCDIV, "addcdiv"); }

/* masked_fill_(mask, value): masked_fill's arguments, written into the tensor itself. */
static int masked_fill_args(lua_State *L, dt_op_args *a, const char *op) {
  a->nscalar = 1;
  if (lua_isboolean(L, 3)) {
    a->ints[0] = lua_toboolean(L, 3);
    a->scalar[0] = (double)a->ints[0];
    a->flags |= DT_ARG_SCALAR_INT;
  } else if (set_number(L, 3, a, 0) == 2) {
    a->flags |= DT_ARG_SCALAR_INT;
  } else if (lua_type(L, 3) != LUA_TNUMBER) {
    return luaL_error(L, "%s: value must be a number or a boolean, got %s", op, luaL_typename(L, 3));
  }
  return 0;
}
static int l_masked_fill_(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  masked_fill_args(L, &a, "masked_fill_");
  return dt_lua_call_inplace(L, 1, DT_OP_MASKED_FILL_, &a, in, 2);
}

/* ---- where(cond, a, b): a and b tensors or numbers; x:where(cond, y) is where(cond, x, y) ---- */
static int where_at(lua_State *L, int cond, int x, int y) {
  dt_value *ins[3] = {dt_lua_check_value(L, cond), NULL, NULL};
  dt_op_args a = {0};
  int idx[2] = {x, y}, intflag[2] = {DT_ARG_WHERE_A_INT, DT_ARG_WHERE_B_INT};
  for (int k = 0; k < 2; k++) {
    ins[k + 1] = live_value(L, idx[k]);
    if (ins[k + 1]) continue;
    int kind = set_number(L, idx[k], &a, k);
    if (!kind) return luaL_error(L, "where: values must be tensors or numbers, got %s", luaL_typename(L, idx[k]));
    if (kind == 2) a.flags |= intflag[k];
  }
  a.nscalar = 2;
  return dt_lua_call(L, DT_OP_WHERE, &a, ins, 3);
}
static int l_where(lua_State *L) { return where_at(L, 1, 2, 3); }
static int m_where(lua_State *L) { return where_at(L, 2, 1, 3); }

/* ---- casts ---- */
static int cast(lua_State *L, dt_dtype d) {
  dt_op_args a = {0};
  a.dtype = d;
  a.has_dtype = 1;
  return self_or_result(L, DT_OP_TO, &a, dt_lua_check_value(L, 1));
}
/* to(dtype), to(device) or to({dtype = ..., device = ...}): the move (l_cuda.c), then the cast. */
static int l_to(lua_State *L) {
  dt_lua_check_value(L, 1);
  const char *dev = NULL;
  lua_settop(L, 2);
  if (lua_istable(L, 2)) { /* -> 2: dtype, 3: device */
    lua_getfield(L, 2, "device");
    lua_getfield(L, 2, "dtype");
    lua_replace(L, 2);
    dev = lua_tostring(L, 3);
  } else if (lua_type(L, 2) == LUA_TSTRING &&
             (strcmp(lua_tostring(L, 2), "cpu") == 0 || strncmp(lua_tostring(L, 2), "cuda", 4) == 0)) {
    lua_pushnil(L);
    lua_insert(L, 2);
    dev = lua_tostring(L, 3);
  }
  if (dev) { /* the moved tensor replaces self at 1 */
    dt_lua_move_to_device(L, 1, "to", dev);
    lua_replace(L, 1);
  }
  if (lua_isnoneornil(L, 2)) {
    if (!dev) return luaL_error(L, "to: expected a dtype such as \"float64\" or a device such as \"cpu\"");
    lua_settop(L, 1);
    return 1;
  }
  return cast(L, dt_lua_opt_dtype(L, 2, DT_DEFAULT_FLOAT));
}
#define CAST(name, D) \
  static int l_##name(lua_State *L) { return cast(L, D); }
CAST(float, DT_FLOAT32)
CAST(double, DT_FLOAT64)
CAST(half, DT_FLOAT16)
CAST(bfloat16, DT_BFLOAT16)
CAST(long, DT_INT64)
CAST(int, DT_INT32)
CAST(bool, DT_BOOL)

/* ---- in place: each returns the tensor itself (the same userdata), so calls chain ---- */
static int l_add_(lua_State *L) {
  dt_op_args a = {0};
  dt_value *ins[2];
  dt_lua_check_value(L, 1);
  int n = binary_operands(L, &a, ins, "add_");
  opt_alpha(L, &a, "add_");
  return dt_lua_call_inplace(L, 1, DT_OP_ADD_, &a, ins, n);
}

static int l_mul_(lua_State *L) {
  dt_op_args a = {0};
  dt_value *ins[2];
  dt_lua_check_value(L, 1);
  int n = binary_operands(L, &a, ins, "mul_");
  return dt_lua_call_inplace(L, 1, DT_OP_MUL_, &a, ins, n);
}

static int l_zero_inplace(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  return dt_lua_call_inplace(L, 1, DT_OP_ZERO_, &a, &x, 1);
}

static int l_fill_(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.nscalar = 1;
  if (lua_isboolean(L, 2)) a.scalar[0] = lua_toboolean(L, 2);
  else if (set_number(L, 2, &a, 0) == 2) a.flags |= DT_ARG_SCALAR_INT;
  else if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "fill_: value must be a number or a boolean, got %s", luaL_typename(L, 2));
  return dt_lua_call_inplace(L, 1, DT_OP_FILL_, &a, &x, 1);
}

static int l_copy_(lua_State *L) {
  dt_value *ins[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  return dt_lua_call_inplace(L, 1, DT_OP_COPY_, &a, ins, 2);
}

static const luaL_Reg both[] = { /* Tensor methods and dt.* functions */
    {"add", l_add},         {"sub", l_sub},       {"mul", l_mul},       {"div", l_div},
    {"pow", l_pow},         {"remainder", l_remainder},
    {"eq", l_eq},           {"ne", l_ne},         {"lt", l_lt},         {"le", l_le},
    {"gt", l_gt},           {"ge", l_ge},
    {"neg", l_neg},         {"abs", l_abs},       {"exp", l_exp},       {"log", l_log},
    {"sqrt", l_sqrt},       {"rsqrt", l_rsqrt},   {"tanh", l_tanh},     {"sigmoid", l_sigmoid},
    {"relu", l_relu},       {"gelu", l_gelu},     {"silu", l_silu},     {"sin", l_sin},
    {"cos", l_cos},         {"clamp", l_clamp},   {"clip", l_clamp},    {"clone", l_clone},
    {"hardtanh", l_hardtanh}, {"leaky_relu", l_leaky_relu}, {"masked_fill", l_masked_fill},
    /* the math family */
    {"floor", lm_floor}, {"ceil", lm_ceil}, {"round", l_round}, {"trunc", lm_trunc}, {"sign", lm_sign},
    {"erf", lm_erf}, {"isnan", lm_isnan}, {"isinf", lm_isinf}, {"isfinite", lm_isfinite},
    {"nan_to_num", l_nan_to_num}, {"lerp", l_lerp}, {"addcmul", l_addcmul}, {"addcdiv", l_addcdiv},
    {NULL, NULL},
};

static const luaL_Reg methods[] = {
    {"contiguous", l_contiguous}, {"to", l_to},        {"float", l_float},   {"double", l_double},
    {"half", l_half},             {"bfloat16", l_bfloat16}, {"long", l_long}, {"int", l_int},
    {"bool", l_bool},             {"where", m_where},  {"add_", l_add_},     {"mul_", l_mul_},
    {"zero_", l_zero_inplace},    {"fill_", l_fill_},  {"copy_", l_copy_},
    {"masked_fill_", l_masked_fill_},
    {NULL, NULL},
};

static const luaL_Reg meta[] = {
    {"__add", m_add}, {"__sub", m_sub},       {"__mul", l_mul}, {"__div", l_div},
    {"__mod", l_remainder}, {"__pow", l_pow}, {"__unm", l_neg},
    {NULL, NULL},
};

void dt_lua_open_pointwise(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, both, 0);
  lua_pushcfunction(L, l_where);
  lua_setfield(L, -2, "where");
  lua_pop(L, 1);
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, both, 0);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, tg->meta);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}
