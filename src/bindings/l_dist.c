/* Lua bindings of ranks and collectives: dt.rank()/world_size()/local_rank()/backend()/
 * barrier()/print0() and dt.distributed.*.  Ranks are 0-based world ranks (as in PyTorch);
 * tensors are split and concatenated along dim 1.  In-place: all_reduce, broadcast, recv
 * (they return the tensor they changed); every other collective returns a new tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/spin_wait.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "bindings/l_work.h"

#define CTX_KEY "dtensor.context"
#define GROUP_MT "dtensor.Group"

/* ---- the context ---- */
typedef struct owned_ctx { /* the 1-rank world of a stock lua5.4, freed with the state */
  dt_context *ctx;
  dt_threads_world *world;
} owned_ctx;

static int owned_ctx_gc(lua_State *L) {
  owned_ctx *o = luaL_testudata(L, 1, CTX_KEY); /* by hand (debug library): anything else is ignored */
  if (!o) return 0;
  dt_context_free(o->ctx);
  dt_threads_world_free(o->world);
  o->ctx = NULL, o->world = NULL;
  return 0;
}

static const char ctx_key; /* its address keys the context in the registry (no string hashing) */

void dt_lua_set_context(lua_State *L, dt_context *ctx) {
  lua_pushlightuserdata(L, ctx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &ctx_key);
}

dt_context *dt_lua_context(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_key);
  dt_context *ctx = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (ctx) return ctx;
  owned_ctx *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->ctx = NULL;
  o->world = dt_threads_world_new(1, 0);
  dt_comm *c = o->world ? dt_threads_world_comm(o->world, 0) : NULL;
  o->ctx = c ? dt_context_new(c, 0) : NULL;
  if (luaL_newmetatable(L, CTX_KEY)) {
    lua_pushcfunction(L, owned_ctx_gc);
    lua_setfield(L, -2, "__gc");
    dt_lua_protect_meta(L, "dtensor.context");
  }
  lua_setmetatable(L, -2);
  if (!o->ctx) dt_lua_raise(L);
  lua_setfield(L, LUA_REGISTRYINDEX, CTX_KEY "_owner");
  dt_lua_set_context(L, o->ctx);
  return o->ctx;
}

/* ---- groups ---- */
typedef struct lua_group {
  const dt_group_entry *e;
} lua_group;

/* The group argument at idx may be an options table {group =, async_op =} (as the keyword
 * arguments of torch.distributed): its group, left on the stack top when one was read. */
static int group_arg(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return idx;
  lua_getfield(L, idx, "group");
  return lua_gettop(L);
}

/* async_op = true in the options table at idx? */
static int async_arg(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  lua_getfield(L, idx, "async_op");
  int on = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return on;
}

/* The communicator for the group argument at idx (nil: the world); raises on non-members. */
static dt_comm *check_group(lua_State *L, int idx, const char *op) {
  dt_context *ctx = dt_lua_context(L);
  int top = lua_gettop(L), gi = group_arg(L, idx);
  dt_comm *c = ctx->world;
  lua_group *g = lua_isnoneornil(L, gi) ? NULL : luaL_testudata(L, gi, GROUP_MT);
  int bad = !lua_isnoneornil(L, gi) && !g;
  lua_settop(L, top);
  if (!g && !bad) return c;
  if (!g) luaL_error(L, "%s: argument #%d must be a group (from dt.distributed.new_group), an options table "
                     "{group =, async_op =} or nil", op, idx);
  if (!g->e->comm) {
    char buf[128];
    luaL_error(L, "%s: rank %d is not a member of group %s", op, ctx->rank,
               dt_comm_format_ranks(buf, sizeof buf, g->e->ranks, g->e->n));
  }
  return g->e->comm;
}


static int l_new_group(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  int n;
  int *ranks;
  if (lua_isnoneornil(L, 1)) {
    n = ctx->world_size;
    ranks = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; ranks && i < n; i++) ranks[i] = i;
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    n = (int)luaL_len(L, 1);
    ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; ranks && i < n; i++) {
      lua_geti(L, 1, i + 1);
      int isint;
      lua_Integer v = lua_tointegerx(L, -1, &isint);
      lua_pop(L, 1);
      if (!isint) {
        free(ranks);
        return luaL_error(L, "new_group: ranks must be integers (0-based world ranks)");
      }
      ranks[i] = (int)v;
    }
  }
  if (!ranks) return luaL_error(L, "new_group: out of memory");
  const dt_group_entry *e;
  int st = dt_context_group(ctx, ranks, n, &e);
  free(ranks);
  if (st != DT_OK) return dt_lua_raise(L);
  lua_group *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->e = e;
  luaL_setmetatable(L, GROUP_MT);
  return 1;
}

void dt_lua_push_group(lua_State *L, const dt_group_entry *e) {
  lua_group *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->e = e;
  luaL_setmetatable(L, GROUP_MT);
}

static int group_tostring(lua_State *L) {
  lua_group *g = luaL_checkudata(L, 1, GROUP_MT);
  char buf[256];
  lua_pushfstring(L, "Group%s", dt_comm_format_ranks(buf, sizeof buf, g->e->ranks, g->e->n));
  return 1;
}
static int group_ranks(lua_State *L) {
  lua_group *g = luaL_checkudata(L, 1, GROUP_MT);
  lua_createtable(L, g->e->n, 0);
  for (int i = 0; i < g->e->n; i++) lua_pushinteger(L, g->e->ranks[i]), lua_rawseti(L, -2, i + 1);
  return 1;
}
static int group_size(lua_State *L) { return lua_pushinteger(L, ((lua_group *)luaL_checkudata(L, 1, GROUP_MT))->e->n), 1; }
/* This rank's index in the group, or -1 (as torch.distributed.get_rank(group)). */
static int group_rank(lua_State *L) {
  lua_group *g = luaL_checkudata(L, 1, GROUP_MT);
  lua_pushinteger(L, g->e->comm ? g->e->comm->rank : -1);
  return 1;
}

/* ---- argument agreement ---- */
/* Runs a collective's binding (impl) so that argument checks failing on some ranks only
 * raise the same error on every rank of the group, naming the rank, instead of leaving the
 * others waiting: an error raised before impl reached any call on the group's communicator
 * meets the peers' call (dt_comm_fail_agreed).  A bad group argument still raises on its
 * rank only (there is no group to agree on). */
static int agreed(lua_State *L, lua_CFunction impl, int group_idx, const char *op) {
  dt_comm *c = check_group(L, group_idx, op);
  if (c->size == 1) return impl(L);
  unsigned long before = c->entered;
  int nargs = lua_gettop(L);
  lua_pushcfunction(L, impl);
  lua_insert(L, 1);
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  if (st == LUA_OK) return lua_gettop(L);
  if (st != LUA_ERRRUN || !lua_isstring(L, -1)) return lua_error(L);
  if (c->entered != before) { /* the collective's own failure: raised as is, at the caller's line */
    luaL_where(L, 1); /* impl's luaL_error saw this C function as its caller: no position */
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
  }
  char name[64]; /* luaL_argerror cannot name a function called through lua_pcall */
  snprintf(name, sizeof name, "'%s'", op);
  dt_comm_fail_agreed(c, luaL_gsub(L, lua_tostring(L, -1), "'?'", name));
  return dt_lua_raise(L);
}

#define AGREED(name, group_idx) \
  static int l_##name(lua_State *L) { return agreed(L, name##_checked, group_idx, #name); }

/* ---- ranks ---- */
static int l_rank(lua_State *L) {
  if (lua_isnoneornil(L, 1)) return lua_pushinteger(L, dt_lua_context(L)->rank), 1;
  lua_group *g = luaL_checkudata(L, 1, GROUP_MT);
  return lua_pushinteger(L, g->e->comm ? g->e->comm->rank : -1), 1;
}
static int l_world_size(lua_State *L) {
  if (lua_isnoneornil(L, 1)) return lua_pushinteger(L, dt_lua_context(L)->world_size), 1;
  return lua_pushinteger(L, ((lua_group *)luaL_checkudata(L, 1, GROUP_MT))->e->n), 1;
}
static int l_local_rank(lua_State *L) { return lua_pushinteger(L, dt_lua_context(L)->local_rank), 1; }
static int l_backend(lua_State *L) { return lua_pushstring(L, dt_lua_context(L)->backend), 1; }
static int barrier_checked(lua_State *L) {
  dt_comm *c = check_group(L, 1, "barrier");
  if (dt_comm_barrier(c) != DT_OK) return dt_lua_raise(L);
  return 0;
}
static int l_print0(lua_State *L) {
  if (dt_lua_context(L)->rank != 0) return 0;
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

/* ---- tensor helpers ---- */
/* A collective's tensor: on the host (threads/MPI) or on "cuda" (NCCL, data_comm). */
static dt_tensor *check_comm_tensor(lua_State *L, int idx, const char *op) {
  dt_tensor *t = dt_lua_check_tensor(L, idx);
  dt_device_type d = dt_tensor_device(t);
  if (d != DT_CPU && d != DT_CUDA) luaL_error(L, "%s: only CPU and cuda tensors are supported, got %s", op, dt_device_name(d));
  return t;
}

/* The communicator that moves t's data: c itself for host tensors, c's NCCL twin for tensors
 * on "cuda" (made on first use).  Metadata (host int64 buffers) stays on c.  NULL + dt_error. */
static dt_comm *data_comm(dt_comm *c, const dt_tensor *t, const char *op) {
  return dt_comm_for_device(c, dt_tensor_device(t), op);
}

/* World rank at idx -> rank in c. */
static int check_peer(lua_State *L, int idx, dt_comm *c, const char *op, const char *what) {
  lua_Integer w = luaL_checkinteger(L, idx);
  int r = w >= 0 && w < 1 << 30 ? dt_comm_group_rank(c, (int)w) : -1;
  if (r < 0) {
    char buf[128];
    luaL_error(L, "%s: %s %d is not a rank of the group %s", op, what, (int)w,
               dt_comm_format_ranks(buf, sizeof buf, c->world_ranks, c->size));
  }
  return r;
}

static dt_reduce_op check_op(lua_State *L, int idx, const char *who) {
  dt_reduce_op op;
  if (dt_reduce_op_from_name(luaL_optstring(L, idx, "sum"), &op) != DT_OK) {
    dt_error_prefix("%s", who);
    dt_lua_raise(L);
  }
  return op;
}

/* Rows along dim 1 and elements per row (a 0-d tensor is one row of one element). */
static void rows_of(const dt_tensor *t, int64_t *rows, int64_t *inner) {
  *rows = t->ndim ? t->shape[0] : 1;
  *inner = t->ndim ? dt_tensor_numel(t) / (t->shape[0] ? t->shape[0] : 1) : 1;
  if (t->ndim && t->shape[0] == 0) {
    *inner = 1;
    for (int i = 1; i < t->ndim; i++) *inner *= t->shape[i];
  }
}

/* t's shape with dim 1 set to rows (0-d tensors become 1-d), on device. */
static dt_tensor *new_with_rows_on(const dt_tensor *t, int64_t rows, dt_device_type device) {
  int64_t shape[DT_MAX_DIMS];
  int nd = t->ndim ? t->ndim : 1;
  shape[0] = rows;
  for (int i = 1; i < nd; i++) shape[i] = t->shape[i];
  return dt_tensor_empty(t->dtype, nd, shape, device);
}
static dt_tensor *new_with_rows(const dt_tensor *t, int64_t rows) { return new_with_rows_on(t, rows, dt_tensor_device(t)); }

/* The output: the caller's `out` tensor at out_idx (contiguous, t's dtype, the expected
 * shape; retained) or a new one.  NULL + dt_error on mismatch. */
static dt_tensor *out_or_new(lua_State *L, int out_idx, const dt_tensor *t, int64_t rows, const char *op) {
  if (lua_isnoneornil(L, out_idx)) return new_with_rows(t, rows);
  dt_tensor *o = dt_lua_check_tensor(L, out_idx);
  int nd = t->ndim ? t->ndim : 1, ok = o->ndim == nd && o->dtype == t->dtype && dt_tensor_is_contiguous(o) &&
                                        dt_tensor_device(o) == dt_tensor_device(t) && o->shape[0] == rows;
  for (int i = 1; ok && i < nd; i++) ok = o->shape[i] == t->shape[i];
  if (!ok) {
    char want[96], got[96];
    int64_t shape[DT_MAX_DIMS] = {rows};
    for (int i = 1; i < nd; i++) shape[i] = t->shape[i];
    dt_format_shape(want, sizeof want, nd, shape);
    dt_format_shape(got, sizeof got, o->ndim, o->shape);
    return dt_error("%s: out must be a contiguous %s tensor on %s of shape %s, got %s %s on %s", op,
                    dt_dtype_name(t->dtype), dt_device_name(dt_tensor_device(t)), want, dt_dtype_name(o->dtype), got,
                    dt_device_name(dt_tensor_device(o))), NULL;
  }
  dt_tensor_retain(o);
  return o;
}

/* The contiguous input of a collective writing out: a copy when out shares t's storage,
 * since peers still read this rank's input while it writes its output. */
static dt_tensor *input_apart(dt_tensor *t, const dt_tensor *out) {
  return out->storage == t->storage ? dt_tensor_clone(t) : dt_tensor_contiguous(t);
}

/* Runs an in-place collective on t through a contiguous buffer, copying back when t is
 * a strided view.  fn returns DT_OK/DT_ERR; with async (work non-NULL) it only issues the
 * call, and the Work returned does the copy back at wait. */
typedef int (*inplace_fn)(dt_comm *c, void *buf, size_t count, dt_dtype dt, const void *arg, dt_comm_work **work);
static int run_inplace(lua_State *L, dt_tensor *t, dt_comm *c, inplace_fn fn, const void *arg, const char *op,
                       int async) {
  dt_lua_capture_refuse(L, op);
  if (!(c = data_comm(c, t, op))) return dt_lua_raise(L);
  dt_tensor *buf = dt_tensor_contiguous(t);
  if (!buf) return dt_lua_raise(L);
  dt_comm_work *w = NULL;
  int st = fn(c, dt_tensor_data(buf), (size_t)dt_tensor_numel(t), t->dtype, arg, async ? &w : NULL);
  if (st == DT_OK && w) {
    lua_settop(L, 1);
    dt_lua_push_work(L, w, op, buf, NULL, buf != t ? t : NULL, 1);
    dt_tensor_release(buf);
    return 1;
  }
  if (st == DT_OK && buf != t) st = dt_tensor_copy_(t, buf, op);
  dt_tensor_release(buf);
  if (st != DT_OK) return dt_lua_raise(L);
  lua_settop(L, 1);
  return 1;
}

/* Pushes out or raises; releases in (the contiguous input) either way. */
static int finish(lua_State *L, int st, dt_tensor *in, dt_tensor *out) {
  dt_tensor_release(in);
  if (st != DT_OK) {
    if (out) dt_tensor_release(out);
    return dt_lua_raise(L);
  }
  dt_lua_push_tensor(L, out);
  dt_lua_capture_refuse(L, "a collective on plain tensors");
  return 1;
}

/* finish() for the collectives with an `out` argument at out_idx: returns that very
 * tensor object when it was given (as all_gather_into_tensor does).  w (async): returns a
 * Work whose wait returns it. */
static int finish_out(lua_State *L, int st, dt_tensor *in, dt_tensor *out, int out_idx, dt_comm_work *w,
                      const char *op) {
  if (st != DT_OK || !w) {
    if (st != DT_OK || lua_isnoneornil(L, out_idx)) return finish(L, st, in, out);
    dt_tensor_release(in);
    dt_tensor_release(out);
    lua_pushvalue(L, out_idx);
    return 1;
  }
  if (lua_isnoneornil(L, out_idx)) {
    dt_tensor_retain(out);
    dt_lua_push_tensor(L, out); /* Lua's reference; the Work holds its own */
  } else {
    lua_pushvalue(L, out_idx);
  }
  dt_lua_push_work(L, w, op, in, out, NULL, 1);
  dt_tensor_release(in);
  dt_tensor_release(out);
  return 1;
}

/* The async form of the uneven collectives: a Work (holding in and out, whose references
 * the caller passes) whose wait returns the tensor and the size table now on the stack. */
static int push_work_v(lua_State *L, dt_comm_work *w, const char *op, dt_tensor *in, dt_tensor *out) {
  dt_lua_push_work(L, w, op, in, out, NULL, 2);
  dt_tensor_release(in);
  dt_tensor_release(out);
  return 1;
}

/* ---- collectives ---- */
static int ar_fn(dt_comm *c, void *buf, size_t n, dt_dtype dt, const void *arg, dt_comm_work **work) {
  return dt_comm_iall_reduce(c, buf, buf, n, dt, *(const dt_reduce_op *)arg, work);
}
/* all_reduce(t, op="sum", group): in place, returns t.  The group argument of every
 * collective but scatter/gather/barrier may be {group =, async_op = true}: the call returns
 * a Work at once, whose wait() returns what the blocking call returns. */
static int all_reduce_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "all_reduce");
  dt_reduce_op op = check_op(L, 2, "all_reduce");
  dt_comm *c = check_group(L, 3, "all_reduce");
  return run_inplace(L, t, c, ar_fn, &op, "all_reduce", async_arg(L, 3));
}

static int bc_fn(dt_comm *c, void *buf, size_t n, dt_dtype dt, const void *arg, dt_comm_work **work) {
  return dt_comm_ibroadcast(c, buf, n, dt, *(const int *)arg, work);
}
/* broadcast(t, src, group): in place, returns t. */
static int broadcast_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "broadcast");
  dt_comm *c = check_group(L, 3, "broadcast");
  int src = check_peer(L, 2, c, "broadcast", "src");
  return run_inplace(L, t, c, bc_fn, &src, "broadcast", async_arg(L, 3));
}

static int recv_fn(dt_comm *c, void *buf, size_t n, dt_dtype dt, const void *arg, dt_comm_work **work) {
  (void)work; /* point-to-point calls have no async form */
  return dt_comm_recv(c, buf, n, dt, *(const int *)arg);
}
/* recv(t, src, group): fills t in place, returns t. */
static int l_recv(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "recv");
  dt_comm *c = check_group(L, 3, "recv");
  int src = check_peer(L, 2, c, "recv", "src");
  return run_inplace(L, t, c, recv_fn, &src, "recv", 0);
}

/* send(t, dst, group): returns nothing; blocks until dst received it. */
static int l_send(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "send");
  dt_comm *c = check_group(L, 3, "send");
  int dst = check_peer(L, 2, c, "send", "dst");
  dt_tensor *in = dt_tensor_contiguous(t);
  if (!in) return dt_lua_raise(L);
  dt_comm *dc = data_comm(c, in, "send");
  int st = dc ? dt_comm_send(dc, dt_tensor_data(in), (size_t)dt_tensor_numel(in), in->dtype, dst) : DT_ERR;
  dt_tensor_release(in);
  return st == DT_OK ? 0 : dt_lua_raise(L);
}

/* all_gather(t, group, out?): every rank's t (same shape) concatenated along dim 1, into
 * out when given (as all_gather_into_tensor), else into a new tensor. */
static int all_gather_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "all_gather");
  dt_comm *c = check_group(L, 2, "all_gather");
  int64_t rows, inner;
  rows_of(t, &rows, &inner);
  dt_tensor *out = out_or_new(L, 3, t, rows * c->size, "all_gather"), *in = out ? input_apart(t, out) : NULL;
  if (!in) return finish(L, DT_ERR, NULL, out);
  dt_comm_work *w = NULL;
  dt_comm *dc = data_comm(c, t, "all_gather");
  int st = dc ? dt_comm_iall_gather(dc, dt_tensor_data(in), dt_tensor_data(out), (size_t)(rows * inner), t->dtype,
                                    async_arg(L, 2) ? &w : NULL)
              : DT_ERR;
  return finish_out(L, st, in, out, 3, w, "all_gather");
}

/* Every rank's {ndim, dtype, shape...} (int64), to size uneven results and to reject
 * inconsistent inputs on every rank alike. */
#define META_LEN (2 + DT_MAX_DIMS)
static int64_t *gather_meta(dt_comm *c, const dt_tensor *t) {
  int64_t mine[META_LEN] = {t->ndim, t->dtype};
  for (int i = 0; i < t->ndim; i++) mine[2 + i] = t->shape[i];
  int64_t *all = malloc(sizeof(int64_t) * META_LEN * (size_t)c->size);
  if (!all) return dt_error("out of memory"), NULL;
  dt_comm_pause_observer(c); /* metadata: dt.comm_debug counts the data collective only */
  int st = dt_comm_all_gather(c, mine, all, META_LEN, DT_INT64);
  dt_comm_resume_observer(c);
  if (st != DT_OK) return free(all), NULL;
  return all;
}

/* all_gather_v(t, group): like all_gather, but dim 1 may differ between ranks (the other
 * dims and the dtype may not).  Returns the tensor and the table of per-rank dim-1 sizes. */
static int all_gather_v_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "all_gather_v");
  dt_comm *c = check_group(L, 2, "all_gather_v");
  if (t->ndim == 0) return luaL_error(L, "all_gather_v: needs a tensor of at least 1 dim");
  int64_t *meta = gather_meta(c, t);
  if (!meta) return dt_error_prefix("all_gather_v"), dt_lua_raise(L);
  int64_t total = 0, inner = 1;
  for (int i = 1; i < t->ndim; i++) inner *= t->shape[i];
  size_t *counts = malloc(sizeof(size_t) * (size_t)c->size);
  for (int r = 0; r < c->size; r++) {
    int64_t *m = meta + r * META_LEN;
    int same = m[0] == meta[0] && m[1] == meta[1];
    for (int i = 1; same && i < meta[0]; i++) same = m[2 + i] == meta[2 + i];
    if (!same) {
      free(meta), free(counts);
      return luaL_error(L, "all_gather_v: rank %d's tensor differs from rank %d's in dtype or in dims other than 1",
                        c->world_ranks[r], c->world_ranks[0]);
    }
    if (counts) counts[r] = (size_t)(m[2] * inner);
    total += m[2];
  }
  if (!counts) return free(meta), luaL_error(L, "all_gather_v: out of memory");
  dt_tensor *in = dt_tensor_contiguous(t), *out = in ? new_with_rows(t, total) : NULL;
  dt_comm_work *w = NULL;
  dt_comm *dc = out ? data_comm(c, t, "all_gather_v") : NULL;
  int st = dc ? dt_comm_iall_gather_v(dc, dt_tensor_data(in), dt_tensor_data(out), counts, t->dtype,
                                      async_arg(L, 2) ? &w : NULL)
              : DT_ERR;
  free(counts);
  if (st != DT_OK) return free(meta), finish(L, st, in, out);
  if (w) dt_tensor_retain(in), dt_tensor_retain(out);
  finish(L, st, in, out);
  lua_createtable(L, c->size, 0);
  for (int r = 0; r < c->size; r++) lua_pushinteger(L, meta[r * META_LEN + 2]), lua_rawseti(L, -2, r + 1);
  free(meta);
  return w ? push_work_v(L, w, "all_gather_v", in, out) : 2;
}

/* Rows must split into `parts` equal blocks. */
static void check_divisible(lua_State *L, const dt_tensor *t, int parts, const char *op) {
  if (t->ndim == 0) luaL_error(L, "%s: needs a tensor of at least 1 dim", op);
  if (t->shape[0] % parts)
    luaL_error(L, "%s: dim 1 (size %d) must be divisible by the group size %d", op, (int)t->shape[0], parts);
}

/* reduce_scatter(t, op="sum", group, out?): t split in group-size blocks along dim 1;
 * rank r gets block r reduced over the group (into out when given, else a new tensor). */
static int reduce_scatter_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "reduce_scatter");
  dt_reduce_op op = check_op(L, 2, "reduce_scatter");
  dt_comm *c = check_group(L, 3, "reduce_scatter");
  check_divisible(L, t, c->size, "reduce_scatter");
  int64_t rows, inner;
  rows_of(t, &rows, &inner);
  dt_tensor *out = out_or_new(L, 4, t, rows / c->size, "reduce_scatter"), *in = out ? input_apart(t, out) : NULL;
  if (!in) return finish(L, DT_ERR, NULL, out);
  dt_comm_work *w = NULL;
  dt_comm *dc = data_comm(c, t, "reduce_scatter");
  int st = dc ? dt_comm_ireduce_scatter(dc, dt_tensor_data(in), dt_tensor_data(out), (size_t)(rows / c->size * inner),
                                        t->dtype, op, async_arg(L, 3) ? &w : NULL)
              : DT_ERR;
  return finish_out(L, st, in, out, 4, w, "reduce_scatter");
}

/* all_to_all(t, group, out?): block r (of group-size equal blocks along dim 1) goes to
 * rank r; the result (out when given) holds the received blocks in rank order. */
static int all_to_all_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "all_to_all");
  dt_comm *c = check_group(L, 2, "all_to_all");
  check_divisible(L, t, c->size, "all_to_all");
  int64_t rows, inner;
  rows_of(t, &rows, &inner);
  dt_tensor *out = out_or_new(L, 3, t, rows, "all_to_all"), *in = out ? input_apart(t, out) : NULL;
  if (!in) return finish(L, DT_ERR, NULL, out);
  dt_comm_work *w = NULL;
  dt_comm *dc = data_comm(c, t, "all_to_all");
  int st = dc ? dt_comm_iall_to_all(dc, dt_tensor_data(in), dt_tensor_data(out), (size_t)(rows / c->size * inner),
                                    t->dtype, async_arg(L, 2) ? &w : NULL)
              : DT_ERR;
  return finish_out(L, st, in, out, 3, w, "all_to_all");
}

/* all_to_all_v(t, send_splits, group, recv_splits?): send_splits[r] rows of t (dim 1)
 * go to rank r; recv_splits (exchanged when omitted) size what comes back.  Returns the
 * tensor and the recv_splits table. */
static int all_to_all_v_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "all_to_all_v");
  luaL_checktype(L, 2, LUA_TTABLE);
  dt_comm *c = check_group(L, 3, "all_to_all_v");
  if (t->ndim == 0) return luaL_error(L, "all_to_all_v: needs a tensor of at least 1 dim");
  int n = c->size;
  if (luaL_len(L, 2) != n) return luaL_error(L, "all_to_all_v: send_splits needs %d entries (one per rank), got %d", n, (int)luaL_len(L, 2));
  if (!lua_isnoneornil(L, 4) && (!lua_istable(L, 4) || luaL_len(L, 4) != n))
    return luaL_error(L, "all_to_all_v: recv_splits must be a table of %d entries", n);
  int64_t rows, inner;
  rows_of(t, &rows, &inner);
  int64_t *splits = calloc((size_t)n * 2, sizeof(int64_t)); /* send rows, then recv rows */
  size_t *counts = calloc((size_t)n * 2, sizeof(size_t));
  if (!splits || !counts) return free(splits), free(counts), luaL_error(L, "all_to_all_v: out of memory");
  int64_t sum = 0, rsum = 0, given_rsum = 0;
  for (int r = 0; r < 2 * n; r++) {
    if (r >= n && lua_isnoneornil(L, 4)) break;
    const char *which = r < n ? "send_splits" : "recv_splits";
    lua_geti(L, r < n ? 2 : 4, r % n + 1);
    int isint;
    splits[r] = lua_tointegerx(L, -1, &isint);
    if (!isint || splits[r] < 0) {
      free(splits), free(counts);
      return luaL_error(L, "all_to_all_v: %s[%d] must be a non-negative integer, got %s", which, r % n + 1,
                        luaL_tolstring(L, -1, NULL));
    }
    lua_pop(L, 1);
    if (r < n && splits[r] > rows - sum) { /* checked before the sum, which cannot overflow then */
      lua_Integer bad = splits[r];
      free(splits), free(counts);
      return luaL_error(L, "all_to_all_v: send_splits add up to more than dim 1's size %d (at send_splits[%d] = %I)",
                        (int)rows, r + 1, bad);
    }
    if (r < n) sum += splits[r];
    if (r >= n) { /* given recv_splits: their elements must fit in memory (no overflow below) */
      int64_t cap = ((int64_t)1 << 59) / (inner > 0 ? inner : 1);
      if (splits[r] > cap - given_rsum) {
        lua_Integer bad = splits[r];
        free(splits), free(counts);
        return luaL_error(L, "all_to_all_v: recv_splits add up to more elements than fit in memory (at recv_splits[%d] = %I)",
                          r - n + 1, bad);
      }
      given_rsum += splits[r];
    }
  }
  if (sum != rows)
    return free(splits), free(counts), luaL_error(L, "all_to_all_v: send_splits add up to %d, but dim 1 has size %d", (int)sum, (int)rows);
  int st = DT_OK;
  if (lua_isnoneornil(L, 4)) { /* metadata: not counted by dt.comm_debug */
    dt_comm_pause_observer(c);
    st = dt_comm_all_to_all(c, splits, splits + n, 1, DT_INT64);
    dt_comm_resume_observer(c);
  }
  for (int r = 0; r < n; r++) counts[r] = (size_t)(splits[r] * inner), counts[n + r] = (size_t)(splits[n + r] * inner), rsum += splits[n + r];
  dt_tensor *in = st == DT_OK ? dt_tensor_contiguous(t) : NULL, *out = in ? new_with_rows(t, rsum) : NULL;
  dt_comm_work *w = NULL;
  dt_comm *dc = out ? data_comm(c, t, "all_to_all_v") : NULL;
  if (dc)
    st = dt_comm_iall_to_all_v(dc, dt_tensor_data(in), counts, dt_tensor_data(out), counts + n, t->dtype,
                               async_arg(L, 3) ? &w : NULL);
  else st = DT_ERR;
  free(counts);
  if (st != DT_OK) return free(splits), finish(L, st, in, out);
  if (w) dt_tensor_retain(in), dt_tensor_retain(out);
  finish(L, st, in, out);
  lua_createtable(L, n, 0);
  for (int r = 0; r < n; r++) lua_pushinteger(L, splits[n + r]), lua_rawseti(L, -2, r + 1);
  free(splits);
  return w ? push_work_v(L, w, "all_to_all_v", in, out) : 2;
}

/* scatter(t_or_nil, src, group): src passes the full tensor (dim 1 divisible by the group
 * size), the others pass nil (or anything); rank r gets block r as a new tensor. */
static int scatter_checked(lua_State *L) {
  dt_comm *c = check_group(L, 3, "scatter");
  int src = check_peer(L, 2, c, "scatter", "src");
  int64_t meta[META_LEN] = {0};
  dt_tensor *t = NULL;
  if (c->rank == src) { /* checked without raising: the other ranks wait in the broadcast below */
    dt_value *v = dt_lua_test_value(L, 1);
    int on = v ? (int)dt_tensor_device(v->local) : -1;
    t = v && !v->spec && (on == DT_CPU || on == DT_CUDA) ? v->local : NULL;
    if (!t) meta[0] = -2;
    else {
      meta[0] = t->ndim, meta[1] = t->dtype + 256 * (int64_t)on; /* the others allocate on its device */
      for (int i = 0; i < t->ndim; i++) meta[2 + i] = t->shape[i];
      if (t->ndim == 0 || t->shape[0] % c->size) meta[0] = -1;
    }
  }
  dt_comm_pause_observer(c); /* metadata: not counted by dt.comm_debug */
  int mst = dt_comm_broadcast(c, meta, META_LEN, DT_INT64, src);
  dt_comm_resume_observer(c);
  if (mst != DT_OK) return dt_lua_raise(L);
  /* every rank raises the same error */
  if (meta[0] == -2)
    return luaL_error(L, "scatter: the src rank (%d) must pass a CPU or cuda tensor (plain, not a DTensor)",
                      c->world_ranks ? c->world_ranks[src] : src);
  if (meta[0] < 0)
    return luaL_error(L, "scatter: the src rank's tensor must have dim 1 divisible by the group size %d", c->size);
  dt_tensor shape_of = {.ndim = (int)meta[0], .dtype = (dt_dtype)(meta[1] % 256)};
  dt_device_type on = (dt_device_type)(meta[1] / 256);
  for (int i = 0; i < shape_of.ndim; i++) shape_of.shape[i] = meta[2 + i];
  int64_t rows = meta[2] / c->size, inner = 1;
  for (int i = 1; i < shape_of.ndim; i++) inner *= meta[2 + i];
  dt_tensor *in = t ? dt_tensor_contiguous(t) : NULL, *out = new_with_rows_on(&shape_of, rows, on);
  if (!out || (t && !in)) return finish(L, DT_ERR, in, out);
  dt_comm *dc = data_comm(c, out, "scatter");
  int st = dc ? dt_comm_scatter(dc, in ? dt_tensor_data(in) : NULL, dt_tensor_data(out), (size_t)(rows * inner),
                                shape_of.dtype, src)
              : DT_ERR;
  return finish(L, st, in, out);
}

/* gather(t, dst, group): on dst, every rank's t (same shape) concatenated along dim 1;
 * nil elsewhere. */
static int gather_checked(lua_State *L) {
  dt_tensor *t = check_comm_tensor(L, 1, "gather");
  dt_comm *c = check_group(L, 3, "gather");
  int dst = check_peer(L, 2, c, "gather", "dst");
  int64_t rows, inner;
  rows_of(t, &rows, &inner);
  dt_tensor *in = dt_tensor_contiguous(t), *out = NULL;
  if (in && c->rank == dst && !(out = new_with_rows(t, rows * c->size))) return finish(L, DT_ERR, in, NULL);
  dt_comm *dc = in ? data_comm(c, t, "gather") : NULL;
  int st = dc ? dt_comm_gather(dc, dt_tensor_data(in), out ? dt_tensor_data(out) : NULL, (size_t)(rows * inner),
                               t->dtype, dst)
              : DT_ERR;
  if (st == DT_OK && !out) {
    dt_tensor_release(in);
    lua_pushnil(L);
    return 1;
  }
  return finish(L, st, in, out);
}

/* every collective of the API, its group argument's position */
AGREED(all_reduce, 3)
AGREED(broadcast, 3)
AGREED(all_gather, 2)
AGREED(all_gather_v, 2)
AGREED(reduce_scatter, 3)
AGREED(all_to_all, 2)
AGREED(all_to_all_v, 3)
AGREED(scatter, 3)
AGREED(gather, 3)
AGREED(barrier, 1)

/* Was dtlua built with the MPI backend? (as torch.distributed.is_mpi_available) */
static int l_is_mpi_available(lua_State *L) { return lua_pushboolean(L, dt_mpi_available()), 1; }

/* ---- benchmark helpers (bench/collectives.lua), not part of the API ---- */
static int l_bench_mpi(lua_State *L) {
  double s;
  if (dt_mpi_bench_raw(luaL_checkstring(L, 1), (size_t)luaL_checkinteger(L, 2), (int)luaL_checkinteger(L, 3), &s) != DT_OK)
    return dt_lua_raise(L);
  return lua_pushnumber(L, s), 1;
}

static const luaL_Reg top_funcs[] = {
    {"rank", l_rank},       {"world_size", l_world_size}, {"local_rank", l_local_rank}, {"backend", l_backend},
    {"barrier", l_barrier}, {"print0", l_print0},         {NULL, NULL},
};

static const luaL_Reg dist_funcs[] = {
    {"get_rank", l_rank},
    {"get_world_size", l_world_size},
    {"new_group", l_new_group},
    {"barrier", l_barrier},
    {"all_reduce", l_all_reduce},
    {"broadcast", l_broadcast},
    {"all_gather", l_all_gather},
    {"all_gather_v", l_all_gather_v},
    {"reduce_scatter", l_reduce_scatter},
    {"all_to_all", l_all_to_all},
    {"all_to_all_v", l_all_to_all_v},
    {"scatter", l_scatter},
    {"gather", l_gather},
    {"send", l_send},
    {"recv", l_recv},
    {"is_mpi_available", l_is_mpi_available},
    {"_bench_mpi", l_bench_mpi},
    {NULL, NULL},
};

static const luaL_Reg group_methods[] = {
    {"rank", group_rank}, {"size", group_size}, {"ranks", group_ranks}, {NULL, NULL},
};

void dt_lua_open_dist(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, top_funcs, 0);
  lua_newtable(L);
  luaL_setfuncs(L, dist_funcs, 0);
  lua_pushstring(L, "sum"), lua_setfield(L, -2, "SUM");
  lua_pushstring(L, "avg"), lua_setfield(L, -2, "AVG");
  lua_pushstring(L, "max"), lua_setfield(L, -2, "MAX");
  lua_pushstring(L, "min"), lua_setfield(L, -2, "MIN");
  lua_pushstring(L, "product"), lua_setfield(L, -2, "PRODUCT");
  lua_setfield(L, -2, "distributed");
  lua_pop(L, 1);
  if (luaL_newmetatable(L, GROUP_MT)) {
    lua_newtable(L);
    luaL_setfuncs(L, group_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, group_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushstring(L, "Group"), lua_setfield(L, -2, "__name");
    dt_lua_protect_meta(L, "Group"); /* the entry is the context's: nothing to release */
  }
  lua_pop(L, 1);
  dt_lua_open_work(L);
}
