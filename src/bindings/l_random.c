/* Random numbers from Lua: generator state (manual_seed, get/set_rng_state, fork_rng) and
 * the random ops.  Each op runs at the current (seed, offset) and, on success, advances
 * the offset by the words it consumed over the GLOBAL tensor (doc/random.md). */
#include "bindings/l_random.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/rng.h"
#include "kernels/random.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"

#define RNG_FORK_MT "dtensor.RngFork"

dt_rng_state *dt_lua_rng_state(lua_State *L) { return &dt_lua_context(L)->rng; }

/* Random ops draw at the rank's generator position, which the front door reads and advances
 * (src/call/call.c; DTensors: the RNG tracker region, src/distributed/rng.c). */
static int call_random(lua_State *L, dt_op_id id, dt_op_args *a, dt_value *x) {
  return x ? (dt_op_get(id)->flags & DT_OPF_INPLACE ? dt_lua_call_inplace(L, 1, id, a, &x, 1) : dt_lua_call(L, id, a, &x, 1))
           : dt_lua_call(L, id, a, NULL, 0);
}

/* ---- generator state -------------------------------------------------------------- */
/* dt.manual_seed(s, {sync = true}): with sync, every rank of the world takes rank 0's
 * seed (a broadcast: call it on every rank); without, each rank keeps its own s. */
static int l_manual_seed(lua_State *L) {
  lua_Integer s = dt_lua_check_integer(L, 1, "manual_seed", "seed");
  int sync = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    int t = lua_getfield(L, 2, "sync");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
      return luaL_error(L, "manual_seed: option sync must be a boolean, got %s", luaL_typename(L, -1));
    sync = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  if (dt_rng_manual_seed(dt_lua_context(L), (int64_t)s, sync) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_initial_seed(lua_State *L) { return lua_pushinteger(L, (lua_Integer)dt_lua_rng_state(L)->seed), 1; }

static void push_state(lua_State *L, const dt_rng_state *s) {
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)s->seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)s->offset);
  lua_setfield(L, -2, "offset");
}

static int l_get_rng_state(lua_State *L) { return push_state(L, dt_lua_rng_state(L)), 1; }

static int l_set_rng_state(lua_State *L) {
  if (!lua_istable(L, 1))
    return luaL_error(L, "set_rng_state: expected a table {seed = ..., offset = ...}, got %s", luaL_typename(L, 1));
  lua_getfield(L, 1, "seed");
  lua_getfield(L, 1, "offset");
  lua_Integer seed = dt_lua_check_integer(L, -2, "set_rng_state", "state.seed");
  lua_Integer off = dt_lua_check_integer(L, -1, "set_rng_state", "state.offset");
  if (off < 0) return luaL_error(L, "set_rng_state: state.offset must be >= 0, got %I", off);
  dt_rng_state *st = dt_lua_rng_state(L);
  st->seed = (uint64_t)seed;
  st->offset = (uint64_t)off;
  return 0;
}

typedef struct rng_fork {
  dt_rng_state saved;
  int done;
} rng_fork;

/* __close / :restore(): puts the saved state back, once.  No __gc restore: collection
 * time is arbitrary, so only an explicit close restores. */
static int fork_restore(lua_State *L) {
  rng_fork *f = luaL_checkudata(L, 1, RNG_FORK_MT);
  if (!f->done) *dt_lua_rng_state(L) = f->saved, f->done = 1;
  return 0;
}

/* dt.fork_rng(fn, ...) runs fn(...) and restores the state, even if fn raises, then
 * returns fn's results; dt.fork_rng() returns a to-be-closed guard:
 *   local _ <close> = dt.fork_rng() */
static int l_fork_rng(lua_State *L) {
  dt_rng_state saved = *dt_lua_rng_state(L);
  if (lua_isnoneornil(L, 1)) {
    rng_fork *f = lua_newuserdatauv(L, sizeof *f, 0);
    f->saved = saved, f->done = 0;
    luaL_setmetatable(L, RNG_FORK_MT);
    return 1;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  *dt_lua_rng_state(L) = saved;
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* ---- factories ------------------------------------------------------------------------ */
/* rand/randn with the shape already in a->ints: standard parameters, dtype from opts. */
static int run_standard(lua_State *L, dt_op_id id, dt_op_args *a, int opts, dt_dtype def, const char *op) {
  a->dtype = dt_lua_opt_dtype_field(L, opts, def);
  a->has_dtype = 1;
  a->scalar[0] = 0, a->scalar[1] = 1, a->nscalar = 2;
  call_random(L, id, a, NULL);
  return dt_lua_requires_grad_option(L, opts, op);
}

/* dt.rand(shape..., opts?) where shape is varargs or one table. */
static int random_factory(lua_State *L, dt_op_id id, const char *op) {
  dt_op_args a = {0};
  int used = dt_lua_check_shape(L, 1, &a.nints, a.ints, op);
  return run_standard(L, id, &a, 1 + used, DT_DEFAULT_FLOAT, op);
}
static int l_rand(lua_State *L) { return random_factory(L, DT_OP_RAND, "rand"); }
static int l_randn(lua_State *L) { return random_factory(L, DT_OP_RANDN, "randn"); }

/* dt.rand_like(t, opts?): t's shape, dtype from opts or t. */
static int random_like(lua_State *L, dt_op_id id, const char *op) {
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  dt_op_args a = {0};
  a.nints = t->ndim;
  for (int i = 0; i < t->ndim; i++) a.ints[i] = t->shape[i];
  dt_dtype dtype = dt_lua_opt_dtype_field(L, 2, t->dtype);
  if (!dt_dtype_is_float(dtype))
    return luaL_error(L, "%s: dtype must be a floating dtype (float32, float64, bfloat16, float16), got %s", op,
                      dt_dtype_name(dtype));
  return run_standard(L, id, &a, 2, t->dtype, op);
}
static int l_rand_like(lua_State *L) { return random_like(L, DT_OP_RAND, "rand_like"); }
static int l_randn_like(lua_State *L) { return random_like(L, DT_OP_RANDN, "randn_like"); }

/* dt.randint(low, high, shape, opts?) or dt.randint(high, shape, opts?); high exclusive. */
static int l_randint(lua_State *L) {
  dt_op_args a = {0};
  int two = lua_istable(L, 2) && !dt_lua_test_tensor(L, 2);
  lua_Integer lo = two ? 0 : dt_lua_check_integer(L, 1, "randint", "low");
  lua_Integer hi = dt_lua_check_integer(L, two ? 1 : 2, "randint", "high");
  int sh = two ? 2 : 3;
  if (!lua_istable(L, sh)) return luaL_error(L, "randint: shape must be a table, e.g. dt.randint(0, 10, {2, 3})");
  dt_lua_check_shape(L, sh, &a.nints, a.ints, "randint");
  a.dtype = dt_lua_opt_dtype_field(L, sh + 1, DT_INT64);
  a.has_dtype = 1;
  a.ints[DT_RNG_SLOT_LOW] = lo, a.ints[DT_RNG_SLOT_HIGH] = hi;
  call_random(L, DT_OP_RANDINT, &a, NULL);
  return dt_lua_requires_grad_option(L, sh + 1, "randint");
}

/* dt.randperm(n, opts?): 1..n permuted (values, like every index held in a tensor, are
 * 1-based in Lua). */
static int l_randperm(lua_State *L) {
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_integer(L, 1, "randperm", "n");
  a.ints[1] = 1;
  a.nints = 2;
  a.dtype = dt_lua_opt_dtype_field(L, 2, DT_INT64);
  a.has_dtype = 1;
  call_random(L, DT_OP_RANDPERM, &a, NULL);
  return dt_lua_requires_grad_option(L, 2, "randperm");
}

/* ---- in-place fills and sampling on tensors --------------------------------------------- */
static int fill_inplace(lua_State *L, dt_op_id id, double dx, double dy) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.scalar[0] = luaL_optnumber(L, 2, dx), a.scalar[1] = luaL_optnumber(L, 3, dy), a.nscalar = 2;
  return call_random(L, id, &a, t);
}
static int l_uniform_(lua_State *L) { return fill_inplace(L, DT_OP_UNIFORM_, 0, 1); }
static int l_normal_(lua_State *L) { return fill_inplace(L, DT_OP_NORMAL_, 0, 1); }

/* bernoulli(probs) draws 1 with each element's probability; bernoulli(t, p) draws with
 * probability p in t's shape and dtype. */
static int l_bernoulli(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  if (!lua_isnoneornil(L, 2)) a.scalar[0] = luaL_checknumber(L, 2), a.nscalar = 1, a.flags = DT_ARG_SCALAR;
  return call_random(L, DT_OP_BERNOULLI, &a, t);
}

/* multinomial(weights, n, replacement=false) -> int64 category indices, 1-based. */
static int l_multinomial(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_integer(L, 2, "multinomial", "num_samples");
  a.ints[1] = lua_toboolean(L, 3);
  a.nints = 2;
  call_random(L, DT_OP_MULTINOMIAL, &a, t);
  dt_lua_to_one_based(L, -1);
  return 1;
}

/* dt._dropout(x, p) -> x * keep / (1 - p), keep (bool): the mask a backward reuses. */
static int l_dropout(lua_State *L) {
  dt_value *t = dt_lua_check_value_for(L, 1, "dropout", "input"); /* reached through F.dropout: its name */
  dt_op_args a = {0};
  if (lua_type(L, 2) != LUA_TNUMBER) return luaL_error(L, "dropout: p must be a number, got %s", dt_lua_typename(L, 2));
  a.scalar[0] = lua_tonumber(L, 2), a.nscalar = 1;
  return call_random(L, DT_OP_DROPOUT, &a, t);
}

/* dt._dropout_backward(grad, keep, p) -> grad * keep / (1 - p); draws nothing. */
static int l_dropout_backward(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  a.scalar[0] = luaL_checknumber(L, 3), a.nscalar = 1;
  return dt_lua_call(L, DT_OP_DROPOUT_BACKWARD, &a, in, 2);
}

static const luaL_Reg module_funcs[] = {
    {"manual_seed", l_manual_seed},
    {"initial_seed", l_initial_seed},
    {"get_rng_state", l_get_rng_state},
    {"set_rng_state", l_set_rng_state},
    {"fork_rng", l_fork_rng},
    {"rand", l_rand},
    {"randn", l_randn},
    {"rand_like", l_rand_like},
    {"randn_like", l_randn_like},
    {"randint", l_randint},
    {"randperm", l_randperm},
    {"bernoulli", l_bernoulli},
    {"multinomial", l_multinomial},
    {"uniform_", l_uniform_},
    {"normal_", l_normal_},
    {"_dropout", l_dropout},
    {"_dropout_backward", l_dropout_backward},
    {NULL, NULL},
};

static const luaL_Reg method_funcs[] = {
    {"uniform_", l_uniform_},   {"normal_", l_normal_}, {"bernoulli", l_bernoulli},
    {"multinomial", l_multinomial}, {NULL, NULL},
};

void dt_lua_open_random(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, module_funcs, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, method_funcs, 0);
  lua_pop(L, 1);
  if (luaL_newmetatable(L, RNG_FORK_MT)) {
    lua_pushcfunction(L, fork_restore);
    lua_setfield(L, -2, "__close");
    lua_newtable(L);
    lua_pushcfunction(L, fork_restore);
    lua_setfield(L, -2, "restore");
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, "RngFork"), lua_setfield(L, -2, "__name");
    dt_lua_protect_meta(L, "RngFork");
  }
  lua_pop(L, 1);
}
