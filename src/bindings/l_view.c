/* Bindings: views (view, reshape, transpose, permute, t, narrow, select, (un)squeeze,
 * expand, flatten, chunk, split), joins (cat, stack), and t[k] / t[k] = v.
 * Lua dims and indices are 1-based, negative from the end; ranges in slices are
 * inclusive ({1, 2} is the first two), as in Torch7 and Lua's for loops. */
#include "base/error.h"
#include "base/size.h"
#include "distributed/dtensor.h"
#include "bindings/l_compare.h"
#include "bindings/l_tensor.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Size of dim d as the user sees it: the global one for a DTensor. */
static int64_t user_size(const dt_value *t, int d) { return dt_value_shape(t)[d]; }

/* Runs a one-input view op on t and pushes the result. */
static int call_view(lua_State *L, dt_op_id id, dt_value *t, dt_op_args *a) { return dt_lua_call(L, id, a, &t, 1); }

/* t:<op>(sizes...) with sizes as varargs or one table. */
static int sized_view(lua_State *L, dt_op_id id, const char *op) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  dt_lua_check_shape(L, 2, &a.nints, a.ints, op);
  return call_view(L, id, t, &a);
}

/* t:<op>_as(other): other's shape as the sizes. */
static int as_view(lua_State *L, dt_op_id id) {
  dt_value *t = dt_lua_check_value(L, 1), *o = dt_lua_check_value(L, 2);
  dt_op_args a = {0};
  a.nints = dt_value_ndim(o);
  for (int i = 0; i < a.nints; i++) a.ints[i] = user_size(o, i); /* a DTensor's global shape */
  return call_view(L, id, t, &a);
}

static int l_view(lua_State *L) { return sized_view(L, DT_OP_VIEW, "view"); }
static int l_reshape(lua_State *L) { return sized_view(L, DT_OP_RESHAPE, "reshape"); }
static int l_expand(lua_State *L) { return sized_view(L, DT_OP_EXPAND, "expand"); }
static int l_view_as(lua_State *L) { return as_view(L, DT_OP_VIEW); }
static int l_expand_as(lua_State *L) { return as_view(L, DT_OP_EXPAND); }

static int l_transpose(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(t), 0, "transpose");
  a.ints[1] = dt_lua_check_dim(L, 3, dt_value_ndim(t), 0, "transpose");
  a.nints = 2;
  return call_view(L, DT_OP_TRANSPOSE, t, &a);
}

/* t:t(): 2-d transpose; 0-d and 1-d tensors come back as they are (a view), as torch. */
static int l_t(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  if (dt_value_ndim(t) > 2) return luaL_error(L, "t: expects a tensor with at most 2 dims, got %d-d (use transpose)", dt_value_ndim(t));
  dt_op_args a = {0};
  a.ints[1] = dt_value_ndim(t) == 2;
  a.nints = 2;
  return call_view(L, DT_OP_TRANSPOSE, t, &a);
}

static int l_permute(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  dt_lua_check_shape(L, 2, &a.nints, a.ints, "permute");
  for (int i = 0; i < a.nints; i++) a.ints[i] = dt_lua_to_dim(L, a.ints[i], dt_value_ndim(t), 0, "permute");
  return call_view(L, DT_OP_PERMUTE, t, &a);
}

/* A 1-based index (negative from the end) into a dim of `size` -> 0-based; op and
 * dim (1-based) word the error. */
static int64_t check_index(lua_State *L, int idx, int64_t size, int dim, const char *op) {
  int ok;
  lua_Integer i = lua_tointegerx(L, idx, &ok); /* 2.0 is accepted, as Lua tables accept it */
  if (!ok) return luaL_error(L, "%s: index must be an integer, got %s", op, luaL_typename(L, idx));
  if (i == 0) return luaL_error(L, "%s: index 0 is invalid (indices are 1-based, negative from the end)", op);
  int64_t z = i > 0 ? i - 1 : i + size;
  if (z < 0 || z >= size)
    return luaL_error(L, "%s: index %I out of range for dim %d of size %I", op, (lua_Integer)i, dim, (lua_Integer)size);
  return z;
}

static int l_select(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  if (dt_value_ndim(t) == 0) return luaL_error(L, "select: a 0-d tensor has no dim to select from");
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(t), 0, "select");
  a.ints[1] = check_index(L, 3, user_size(t, (int)a.ints[0]), (int)a.ints[0] + 1, "select");
  a.nints = 2;
  return call_view(L, DT_OP_SELECT, t, &a);
}

/* narrow(dim, start, length): start 1-based (negative from the end; size + 1 is allowed
 * with length 0). */
static int l_narrow(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(t), 0, "narrow");
  lua_Integer start = luaL_checkinteger(L, 3);
  if (start == 0) return luaL_error(L, "narrow: start 0 is invalid (starts are 1-based, negative from the end)");
  int64_t size = user_size(t, (int)a.ints[0]);
  a.ints[1] = start > 0 ? start - 1 : start + size;
  if (a.ints[1] < 0 || a.ints[1] > size)
    return luaL_error(L, "narrow: start %I out of range for dim %d of size %I", (lua_Integer)start, (int)a.ints[0] + 1,
                      (lua_Integer)size);
  a.ints[2] = luaL_checkinteger(L, 4);
  a.nints = 3;
  return call_view(L, DT_OP_NARROW, t, &a);
}

static int l_unsqueeze(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(t), 1, "unsqueeze");
  a.nints = 1;
  return call_view(L, DT_OP_UNSQUEEZE, t, &a);
}

/* squeeze(): every size-1 dim; squeeze(d) or squeeze({d1, d2}): those dims if size 1. */
static int l_squeeze(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  if (lua_isnoneornil(L, 2)) {
    a.flags = DT_ARG_ALL_DIMS;
  } else if (lua_istable(L, 2)) {
    dt_lua_check_shape(L, 2, &a.nints, a.ints, "squeeze");
    for (int i = 0; i < a.nints; i++) a.ints[i] = dt_lua_to_dim(L, a.ints[i], dt_value_ndim(t), 0, "squeeze");
  } else {
    a.ints[0] = dt_lua_check_dim(L, 2, dt_value_ndim(t), 0, "squeeze");
    a.nints = 1;
  }
  return call_view(L, DT_OP_SQUEEZE, t, &a);
}

/* flatten(start = 1, end = -1) */
static int l_flatten(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  dt_op_args a = {0};
  a.ints[0] = lua_isnoneornil(L, 2) ? 0 : dt_lua_check_dim(L, 2, dt_value_ndim(t), 0, "flatten");
  a.ints[1] = lua_isnoneornil(L, 3) ? (dt_value_ndim(t) ? dt_value_ndim(t) - 1 : 0) : dt_lua_check_dim(L, 3, dt_value_ndim(t), 0, "flatten");
  a.nints = 2;
  return call_view(L, DT_OP_FLATTEN, t, &a);
}

/* A list of n pieces must fit a Lua table (and its sizes array, in bytes, a size_t). */
static void check_pieces(lua_State *L, const char *op, int64_t n) {
  if (n > INT_MAX)
    luaL_error(L, "%s: %I pieces are more than a list can hold (at most %d)", op, (lua_Integer)n, INT_MAX);
}

/* Pushes a list of narrow views of t along dim d with the given sizes. */
static int push_pieces(lua_State *L, dt_value *t, int d, int n, const int64_t *sizes) {
  lua_createtable(L, n, 0);
  int64_t pos = 0;
  for (int i = 0; i < n; i++) {
    dt_op_args a = {0};
    a.ints[0] = d, a.ints[1] = pos, a.ints[2] = sizes[i];
    a.nints = 3;
    call_view(L, DT_OP_NARROW, t, &a);
    lua_rawseti(L, -2, i + 1);
    pos += sizes[i];
  }
  return 1;
}

/* Pieces of `size` (the last one shorter), at least one piece, as torch.split. */
static int split_even(lua_State *L, const char *op, dt_value *t, int d, int64_t size) {
  int64_t len = user_size(t, d);
  int64_t n = size > 0 ? len / size + (len % size != 0) : 1;
  if (n < 1) n = 1;
  check_pieces(L, op, n);
  int64_t *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0); /* freed by the GC on error */
  for (int64_t i = 0; i < n; i++) sizes[i] = i < n - 1 ? size : len - size * (n - 1);
  return push_pieces(L, t, d, (int)n, sizes);
}

/* chunk(n, dim = 1): pieces of ceil(L / n), so possibly fewer than n (torch.chunk). */
static int l_chunk(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  if (n < 1) return luaL_error(L, "chunk: number of chunks must be at least 1, got %I", (lua_Integer)n);
  if (dt_value_ndim(t) == 0) return luaL_error(L, "chunk: a 0-d tensor cannot be chunked");
  int d = lua_isnoneornil(L, 3) ? 0 : dt_lua_check_dim(L, 3, dt_value_ndim(t), 0, "chunk");
  int64_t len = user_size(t, d);
  if (len == 0) { /* n empty pieces, as torch */
    check_pieces(L, "chunk", n);
    int64_t *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    for (lua_Integer i = 0; i < n; i++) sizes[i] = 0;
    return push_pieces(L, t, d, (int)n, sizes);
  }
  return split_even(L, "chunk", t, d, len / n + (len % n != 0));
}

/* split(size, dim = 1) or split({s1, s2, ...}, dim = 1) (sizes must add up to the dim). */
static int l_split(lua_State *L) {
  dt_value *t = dt_lua_check_value(L, 1);
  if (dt_value_ndim(t) == 0) return luaL_error(L, "split: a 0-d tensor cannot be split");
  int d = lua_isnoneornil(L, 3) ? 0 : dt_lua_check_dim(L, 3, dt_value_ndim(t), 0, "split");
  if (!lua_istable(L, 2)) {
    lua_Integer size = luaL_checkinteger(L, 2);
    if (size < 0 || (size == 0 && user_size(t, d) > 0))
      return luaL_error(L, "split: split size must be positive, got %I", (lua_Integer)size);
    return split_even(L, "split", t, d, size);
  }
  int n = (int)luaL_len(L, 2);
  int64_t *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n ? n : 1), 0), sum = 0;
  for (int i = 0; i < n; i++) {
    lua_geti(L, 2, i + 1);
    int ok;
    sizes[i] = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || sizes[i] < 0) return luaL_error(L, "split: sizes must be non-negative integers (entry %d)", i + 1);
    if (dt_add_size(sum, sizes[i], &sum) != DT_OK)
      return luaL_error(L, "split: sizes add up to more than %I (entry %d)", (lua_Integer)INT64_MAX, i + 1);
  }
  if (sum != user_size(t, d))
    return luaL_error(L, "split: sizes add up to %I but dim %d has size %I", (lua_Integer)sum, d + 1,
                      (lua_Integer)user_size(t, d));
  return push_pieces(L, t, d, n, sizes);
}

/* index_select(dim, index): the slices of dim at the index's values (1-based, as every index
 * held in a tensor); the index is an int64/int32 tensor (or DTensor) of 0 or 1 dims. */
static int l_index_select(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  int ndim = dt_value_ndim(x);
  int d = dt_lua_check_dim(L, 2, ndim ? ndim : 1, 0, "index_select");
  dt_value *ix = dt_lua_check_value(L, 3);
  dt_dtype it = dt_value_dtype(ix);
  if (it != DT_INT64 && it != DT_INT32)
    return luaL_error(L, "index_select: index must be an int64 or int32 tensor, got %s", dt_dtype_name(it));
  dt_value *in[2] = {x, dt_lua_push_zero_based(L, ix)};
  dt_op_args a = {.nints = 1};
  a.ints[0] = d;
  return dt_lua_call(L, DT_OP_INDEX_SELECT, &a, in, 2);
}

/* index_add(dim, index, src): a new tensor, x with src's slices added at the index's values
 * along dim (1-based; repeated indices accumulate), as torch.index_add (no alpha). */
static int l_index_add(lua_State *L) {
  dt_value *x = dt_lua_check_value(L, 1);
  int ndim = dt_value_ndim(x);
  int d = dt_lua_check_dim(L, 2, ndim ? ndim : 1, 0, "index_add");
  dt_value *ix = dt_lua_check_value(L, 3), *src = dt_lua_check_value(L, 4);
  dt_dtype it = dt_value_dtype(ix);
  if (it != DT_INT64 && it != DT_INT32)
    return luaL_error(L, "index_add: index must be an int64 or int32 tensor, got %s", dt_dtype_name(it));
  dt_value *in[3] = {x, dt_lua_push_zero_based(L, ix), src};
  dt_op_args a = {.nints = 1};
  a.ints[0] = d;
  return dt_lua_call(L, DT_OP_INDEX_ADD, &a, in, 3);
}

/* ---- joins ---- */

/* cat/stack(list, dim = 1): the tensors stay referenced by the list during the call. */
static int join(lua_State *L, dt_op_id id, const char *op, int extra) {
  if (dt_lua_test_tensor(L, 1)) return luaL_error(L, "%s: expects a list of tensors, got a tensor", op);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2); /* the pointer array below goes to slot 3 */
  int n = (int)luaL_len(L, 1);
  if (n == 0) return luaL_error(L, "%s: expected a non-empty list of tensors", op);
  dt_value **in = lua_newuserdatauv(L, sizeof(dt_value *) * (size_t)n, 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    in[i] = dt_lua_test_value(L, -1);
    if (!in[i]) return luaL_error(L, "%s: element %d of the list is a %s, not a tensor", op, i + 1, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  /* dims count from the first input that cat does not skip (see shape_join.c) */
  int ndim = dt_value_ndim(in[0]);
  for (int i = 0; i < n; i++)
    if (!(dt_value_ndim(in[i]) == 1 && dt_value_shape(in[i])[0] == 0)) {
      ndim = dt_value_ndim(in[i]);
      break;
    }
  if (id == DT_OP_STACK) ndim = dt_value_ndim(in[0]);
  dt_op_args a = {0};
  a.ints[0] = lua_isnoneornil(L, 2) ? 0 : dt_lua_check_dim(L, 2, ndim, extra, op);
  a.nints = 1;
  return dt_lua_call(L, id, &a, in, n);
}
static int l_cat(lua_State *L) { return join(L, DT_OP_CAT, "cat", 0); }
static int l_stack(lua_State *L) { return join(L, DT_OP_STACK, "stack", 1); }

/* ---- t[k] and t[k] = v ---- */

/* Replaces the tensor at stack slot `slot` by op(tensor, args). */
static void step_view(lua_State *L, int slot, dt_op_id id, dt_op_args *a) {
  call_view(L, id, dt_lua_check_value(L, slot), a);
  lua_replace(L, slot);
}

/* A range entry {start, stop[, step]} for a dim of `size`: 1-based inclusive, negative
 * from the end; {i} is {i, i}.  d (0-based) words the errors. */
static void range_arg(lua_State *L, int entry, int64_t size, int d, int64_t *start, int64_t *stop, int64_t *step) {
  int n = (int)luaL_len(L, entry);
  lua_Integer v[3] = {1, size, 1};
  if (n > 3) luaL_error(L, "indexing: a range has at most 3 entries {start, stop, step}, got %d", n);
  for (int i = 0; i < n; i++) {
    lua_geti(L, entry, i + 1);
    if (!lua_isinteger(L, -1))
      luaL_error(L, "indexing: range entries must be integers, got %s in dim %d", luaL_typename(L, -1), d + 1);
    v[i] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  if (n == 1) v[1] = v[0];
  lua_Integer s = v[0] < 0 ? v[0] + size + 1 : v[0], e = v[1] < 0 ? v[1] + size + 1 : v[1];
  if (v[2] <= 0) luaL_error(L, "indexing: step must be positive, got %I in dim %d", (lua_Integer)v[2], d + 1);
  if (v[0] == 0 || v[1] == 0 || s < 1 || s > size + 1 || e > size || e < s - 1)
    luaL_error(L, "indexing: range {%I, %I} out of range for dim %d of size %I", (lua_Integer)v[0], (lua_Integer)v[1],
               d + 1, (lua_Integer)size);
  *start = s - 1, *stop = e, *step = v[2];
}

void dt_lua_parse_index(lua_State *L, int key, int ndim, const int64_t *shape, dt_index_key *ix) {
  memset(ix, 0, sizeof *ix);
  ix->ndim = ndim;
  for (int d = 0; d < ndim; d++) ix->stop[d] = shape[d], ix->step[d] = 1;
  if (lua_type(L, key) == LUA_TNUMBER) {
    if (ndim == 0) luaL_error(L, "indexing: a 0-d tensor cannot be indexed (use t:item())");
    ix->kind[0] = DT_INDEX_SELECT;
    ix->start[0] = check_index(L, key, shape[0], 1, "indexing");
    return;
  }
  if (!lua_istable(L, key) || dt_lua_test_value(L, key))
    luaL_error(L, "indexing: key must be an integer or a table of ranges, got %s", luaL_typename(L, key));
  int n = (int)luaL_len(L, key);
  if (n > ndim) luaL_error(L, "indexing: %d entries for a %d-d tensor", n, ndim);
  /* entry i applies to dim i of t, which is dim vd of the view made by the entries before */
  for (int i = 1, vd = 0; i <= n; i++) {
    int d = i - 1, tp = lua_geti(L, key, i);
    int entry = lua_gettop(L);
    if (tp == LUA_TNUMBER) {
      ix->kind[d] = DT_INDEX_SELECT;
      ix->start[d] = check_index(L, entry, shape[d], i, "indexing");
    } else if (tp == LUA_TSTRING && lua_rawlen(L, entry) == 1 && *lua_tostring(L, entry) == ':') {
      vd++;
    } else if (tp == LUA_TTABLE && !dt_lua_test_value(L, entry)) {
      if (luaL_len(L, entry) > 0) {
        ix->kind[d] = DT_INDEX_RANGE;
        range_arg(L, entry, shape[d], vd, &ix->start[d], &ix->stop[d], &ix->step[d]);
      }
      vd++;
    } else {
      luaL_error(L, "indexing: entry %d must be an integer, a range {start, stop, step}, {} or \":\", got %s", i,
                 luaL_typename(L, entry));
    }
    lua_pop(L, 1);
  }
}

/* Leaves the view t[key] at the top of the stack; t at 1, key at 2.  The key is checked
 * against t's global shape (a DTensor's), and each step is a view op that DTensors take
 * through the dispatcher (so the same error on every rank, before any collective). */
static void push_indexed(lua_State *L) {
  dt_value *u = dt_lua_check_value(L, 1);
  dt_index_key ix;
  dt_lua_parse_index(L, 2, dt_value_ndim(u), dt_value_shape(u), &ix);
  lua_pushvalue(L, 1);
  int slot = lua_gettop(L);
  for (int d = 0, vd = 0; d < ix.ndim; d++) {
    dt_op_args a = {0};
    if (ix.kind[d] == DT_INDEX_SELECT) {
      a.ints[0] = vd, a.ints[1] = ix.start[d];
      a.nints = 2;
      step_view(L, slot, DT_OP_SELECT, &a);
      continue;
    }
    if (ix.kind[d] == DT_INDEX_RANGE) {
      a.ints[0] = vd, a.ints[1] = ix.start[d], a.ints[2] = ix.stop[d], a.ints[3] = ix.step[d];
      a.nints = 4;
      step_view(L, slot, DT_OP_SLICE, &a);
    }
    vd++;
  }
}

int dt_lua_tensor_index(lua_State *L) {
  push_indexed(L);
  return 1;
}

dt_tensor *dt_lua_scalar_tensor(lua_State *L, int idx) {
  dt_tensor *s;
  const int64_t no_dims[1] = {0}; /* not NULL: the shape is memcpy'd */
  if (lua_isboolean(L, idx)) s = dt_tensor_full(DT_BOOL, 0, no_dims, lua_toboolean(L, idx), DT_HOST);
  else if (lua_isinteger(L, idx)) {
    s = dt_tensor_empty(DT_INT64, 0, no_dims, DT_HOST);
    if (s) dt_store_i64(dt_tensor_data(s), DT_INT64, lua_tointeger(L, idx));
  } else if (lua_type(L, idx) == LUA_TNUMBER) s = dt_tensor_full(DT_FLOAT64, 0, no_dims, lua_tonumber(L, idx), DT_HOST);
  else return luaL_error(L, "indexing assignment: value must be a number, a boolean or a tensor, got %s",
                        luaL_typename(L, idx)), NULL;
  if (!s) dt_lua_raise(L);
  return s;
}

/* t[k] = v: v (a number or boolean, refused when t's dtype cannot hold it; a tensor; a
 * DTensor) is broadcast and converted into t[k], through the op index_put_ (DTensors: each rank
 * writes its block, src/distributed/dtensor_write.c). */
int dt_lua_tensor_newindex(lua_State *L) {
  lua_settop(L, 3);
  if (lua_type(L, 2) == LUA_TSTRING) {
    if (dt_lua_autograd_set_field(L, dt_lua_check_value(L, 1), lua_tostring(L, 2))) return 0;
    return luaL_error(L, "cannot set field '%s' of a tensor", lua_tostring(L, 2));
  }
  dt_value *t = dt_lua_check_value(L, 1);
  dt_index_key key;
  dt_lua_parse_index(L, 2, dt_value_ndim(t), dt_value_shape(t), &key);
  if (!dt_lua_test_value(L, 3)) { /* a number: a 0-d tensor, owned by Lua from here */
    int is_int = lua_isinteger(L, 3);
    dt_lua_push_tensor(L, dt_lua_scalar_tensor(L, 3));
    if (lua_type(L, 3) == LUA_TNUMBER &&
        dt_check_value_fits("indexing assignment", dt_value_dtype(t), is_int, lua_tointeger(L, 3), lua_tonumber(L, 3)) != DT_OK)
      return dt_lua_raise(L);
    lua_replace(L, 3);
  }
  dt_value *in[2] = {t, dt_lua_check_value(L, 3)};
  dt_op_args a = {.name = "indexing assignment"}; /* errors read as for t[k] = v, not index_put_ */
  dt_index_key_to_args(&key, &a);
  return dt_lua_call_inplace(L, 1, DT_OP_INDEX_PUT_, &a, in, 2), 0;
}

/* Methods only (torch has no torch.view / torch.expand). */
static const luaL_Reg view_methods[] = {
    {"view", l_view}, {"view_as", l_view_as}, {"expand", l_expand}, {"expand_as", l_expand_as}, {NULL, NULL},
};

/* Both methods and dt.<name>(t, ...). */
static const luaL_Reg view_funcs[] = {
    {"reshape", l_reshape},     {"transpose", l_transpose}, {"permute", l_permute}, {"t", l_t},
    {"narrow", l_narrow},       {"select", l_select},       {"unsqueeze", l_unsqueeze},
    {"squeeze", l_squeeze},     {"flatten", l_flatten},     {"chunk", l_chunk},
    {"split", l_split},         {"index_select", l_index_select}, {"index_add", l_index_add},
    {NULL, NULL},
};

static const luaL_Reg join_funcs[] = {{"cat", l_cat}, {"stack", l_stack}, {"concat", l_cat}, {NULL, NULL}};

void dt_lua_open_view(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, view_methods, 0);
  luaL_setfuncs(L, view_funcs, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, view_funcs, 0);
  luaL_setfuncs(L, join_funcs, 0);
  lua_pop(L, 1);
  dt_lua_open_compare(L, tg);
}
