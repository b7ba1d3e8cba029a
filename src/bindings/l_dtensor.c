/* Lua bindings of DTensor: distribute_tensor, from_local, to_local, full_tensor,
 * redistribute, explain_redistribute, properties and printing.  A DTensor is the Tensor
 * userdata with a spec; its `t` is the local shard.  Factories: l_dtensor_factory.c;
 * comm_debug: l_comm_debug.c. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/comm_debug.h"
#include "distributed/redistribute.h"
#include "bindings/l_dist.h"
#include "bindings/l_dtensor.h"
#include "bindings/l_mesh.h"
#include "bindings/l_tensor.h"

dt_value *dt_lua_check_dtensor(lua_State *L, int idx, const char *op) {
  dt_value *u = dt_lua_check_value(L, idx);
  if (!u->spec) luaL_error(L, "%s: expected a DTensor, got a plain tensor (use dt.distribute_tensor or dt.from_local)", op);
  return u;
}

static int all_mask(const dt_mesh *m) { return (1 << m->ndim) - 1; }

dt_dspec *dt_lua_new_spec(lua_State *L, dt_mesh *m, const dt_placement *p, int ndim, const int64_t *shape,
                          dt_dtype dtype, const char *op) {
  dt_dspec *s;
  if (dt_dspec_new(m, p, ndim, shape, dtype, op, &s) != DT_OK) dt_lua_raise(L);
  return s;
}

/* Pushes the DTensor (local, s) after running the plan to `to` (local is released). */
static void push_redistributed(lua_State *L, dt_tensor *local, dt_dspec *s, const dt_placement *to, int allow_partial) {
  dt_context *ctx = dt_lua_context(L);
  const dt_redist_plan *plan;
  dt_tensor *out = NULL;
  int st = dt_redistribute_plan(ctx, s, to, allow_partial, &plan);
  if (st == DT_OK) st = dt_redistribute_exec(ctx, s, plan, local, &out);
  dt_tensor_release(local);
  if (st != DT_OK) {
    dt_dspec_free(s);
    dt_lua_raise(L);
  }
  memcpy(s->p, to, sizeof(dt_placement) * (size_t)s->mesh->ndim); /* normalised by the callers */
  dt_lua_push_dtensor(L, out, s);
}

static dt_tensor *empty_local(dt_dtype dtype) {
  int64_t zero = 0;
  return dt_tensor_empty(dtype, 1, &zero, DT_CPU);
}

/* Placements with Shard dims normalised for an ndim-d tensor (errors name op). */
static void normalise(lua_State *L, dt_mesh *m, dt_placement *p, int ndim, const int64_t *shape, const char *op) {
  dt_dspec *s = dt_lua_new_spec(L, m, p, ndim, shape, DT_FLOAT32, op);
  memcpy(p, s->p, sizeof(dt_placement) * (size_t)m->ndim);
  dt_dspec_free(s);
}

/* ---- distribute_tensor ---- */
#define META_LEN (2 + DT_MAX_DIMS)

/* The src rank's shard of every mesh rank, padded to `count` elements, in the order of the
 * all-ranks group (ranks sorted). */
static dt_tensor *scatter_blocks(const dt_dspec *s, const dt_group_entry *g, dt_tensor *t, int64_t count) {
  int64_t total = count * g->n;
  dt_tensor *buf = dt_tensor_zeros(s->dtype, 1, &total, DT_CPU);
  int coord[DT_MESH_MAX_DIMS];
  for (int r = 0; buf && r < g->n; r++) {
    dt_mesh_coord_of_rank(s->mesh, g->ranks[r], coord);
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS], stride[DT_MAX_DIMS];
    dt_dspec_local(s, s->p, coord, shape, off);
    int64_t o = t->offset;
    for (int i = 0; i < s->ndim; i++) o += off[i] * t->stride[i];
    dt_tensor *src = dt_tensor_view_of(t, s->ndim, shape, t->stride, o);
    dt_contiguous_strides(s->ndim, shape, stride);
    dt_tensor *dst = src ? dt_tensor_view_of(buf, s->ndim, shape, stride, buf->offset + r * count) : NULL;
    int st = dst ? dt_tensor_copy_(dst, src, "distribute_tensor") : DT_ERR;
    dt_tensor_release(src), dt_tensor_release(dst);
    if (st != DT_OK) dt_tensor_release(buf), buf = NULL;
  }
  return buf;
}

/* The shard of this rank from src over the mesh: broadcast when nothing is sharded, else one
 * scatter of padded shards.  s has no Partial placements. */
static dt_tensor *from_src(dt_context *ctx, const dt_dspec *s, dt_tensor *t, int root) {
  const dt_group_entry *g = s->mesh->groups[all_mask(s->mesh)];
  int sharded = 0;
  for (int i = 0; i < s->mesh->ndim; i++) sharded |= s->p[i].kind == DT_SHARD;
  size_t es = dt_dtype_size(s->dtype);
  if (!sharded) {
    dt_tensor *buf = t ? dt_tensor_clone(t) : dt_tensor_empty(s->dtype, s->ndim, s->shape, DT_CPU);
    if (!buf) return NULL;
    if (dt_comm_broadcast(g->comm, dt_tensor_data(buf), (size_t)dt_tensor_numel(buf), s->dtype, root) != DT_OK)
      return dt_tensor_release(buf), NULL;
    return buf;
  }
  int zero[DT_MESH_MAX_DIMS] = {0};
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  dt_dspec_local(s, s->p, zero, shape, off); /* coordinate 0 holds the largest shard */
  int64_t count = dt_shape_numel(s->ndim, shape);
  dt_tensor *send = t ? scatter_blocks(s, g, t, count) : NULL, *recv = dt_tensor_empty(s->dtype, 1, &count, DT_CPU);
  if ((t && !send) || !recv) return dt_tensor_release(send), dt_tensor_release(recv), NULL;
  int st = dt_comm_scatter(g->comm, send ? dt_tensor_data(send) : NULL, dt_tensor_data(recv), (size_t)count, s->dtype, root);
  dt_tensor_release(send);
  if (st != DT_OK) return dt_tensor_release(recv), NULL;
  dt_dspec_my_local(s, &(int){0}, shape, off);
  dt_contiguous_strides(s->ndim, shape, stride);
  dt_tensor *v = dt_tensor_view_of(recv, s->ndim, shape, stride, recv->offset), *out = v ? dt_tensor_clone(v) : NULL;
  dt_tensor_release(v), dt_tensor_release(recv);
  return out;
}

/* dt.distribute_tensor(t, mesh, placements, {src_rank = 0}): src_rank = false chunks every
 * rank's own t with no communication. */
static int l_distribute_tensor(lua_State *L) {
  const char *op = "distribute_tensor";
  dt_context *ctx = dt_lua_context(L);
  dt_mesh *m = dt_lua_opt_mesh(L, 2, op);
  dt_placement to[DT_MESH_MAX_DIMS], rep[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 3, m->ndim, to, op);
  int local_chunk = 0, src = 0;
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "src_rank");
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) local_chunk = 1;
    else if (!lua_isnil(L, -1)) {
      if (!lua_isinteger(L, -1)) return luaL_error(L, "%s: src_rank must be a rank (integer) or false", op);
      src = (int)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
  }
  dt_value *u = dt_lua_test_value(L, 1);
  if (u && u->spec) return luaL_error(L, "%s: the input is already a DTensor (use x:redistribute)", op);
  dt_tensor *t = u ? u->local : NULL;
  if (t && dt_tensor_device(t) != DT_CPU) return luaL_error(L, "%s: only CPU tensors are supported", op);
  int root = -1;
  if (!local_chunk) {
    const dt_group_entry *g = m->groups[all_mask(m)];
    for (int i = 0; i < g->n; i++)
      if (g->ranks[i] == src) root = i;
    if (root < 0) {
      char buf[1024];
      return luaL_error(L, "%s: src_rank %d is not a rank of %s", op, src, dt_mesh_format(m, buf, sizeof buf));
    }
  }
  if (!t && (local_chunk || m->me < 0)) /* no collective follows here: raising alone is safe */
    return luaL_error(L, "%s: bad argument #1 (expected a tensor, got %s)", op, luaL_typename(L, 1));
  /* the src rank's metadata decides the shape and dtype everywhere; ndim -1 tells every
   * rank that src passed no tensor, so that all of them raise */
  int64_t meta[META_LEN] = {-1};
  if (t) {
    meta[0] = t->ndim, meta[1] = t->dtype;
    memcpy(meta + 2, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  }
  if (!local_chunk && m->me >= 0) {
    if (dt_comm_broadcast(m->groups[all_mask(m)]->comm, meta, META_LEN, DT_INT64, root) != DT_OK) return dt_lua_raise(L);
    if (meta[0] < 0) return luaL_error(L, "%s: src_rank %d passed no tensor (argument #1)", op, src);
  }
  int ndim = (int)meta[0];
  dt_dtype dtype = (dt_dtype)meta[1];
  normalise(L, m, to, ndim, meta + 2, op);
  for (int i = 0; i < m->ndim; i++) rep[i] = to[i].kind == DT_PARTIAL ? (dt_placement){DT_REPLICATE, 0, 0} : to[i];
  if (local_chunk) {
    for (int i = 0; i < m->ndim; i++) rep[i] = (dt_placement){DT_REPLICATE, 0, 0};
    dt_dspec *s = dt_lua_new_spec(L, m, rep, ndim, meta + 2, dtype, op);
    if (m->me >= 0) dt_tensor_retain(t);
    push_redistributed(L, m->me >= 0 ? t : empty_local(dtype), s, to, 1);
    return 1;
  }
  dt_dspec *s = dt_lua_new_spec(L, m, rep, ndim, meta + 2, dtype, op);
  dt_tensor *local = m->me < 0 ? empty_local(dtype) : from_src(ctx, s, ctx->rank == src ? t : NULL, root);
  if (!local) return dt_dspec_free(s), dt_lua_raise(L);
  push_redistributed(L, local, s, to, 1);
  return 1;
}

/* ---- from_local ---- */
/* opts[field] as a shape; *given = its length (0 when absent).  ndim < 0: any length. */
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

/* run_check: every rank checks every rank's dtype and local shape against the spec, so a
 * mismatch raises the same error everywhere; then Replicate dims are broadcast from
 * coordinate 0 of the dim. */
static dt_tensor *run_check(dt_context *ctx, const dt_dspec *s, dt_tensor *t) {
  dt_mesh *m = s->mesh;
  const dt_group_entry *g = m->groups[all_mask(m)];
  int64_t mine[META_LEN] = {t->ndim, t->dtype};
  memcpy(mine + 2, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  int64_t *all = malloc(sizeof(int64_t) * META_LEN * (size_t)g->n);
  if (!all) return dt_error("from_local: out of memory"), NULL;
  if (dt_comm_all_gather(g->comm, mine, all, META_LEN, DT_INT64) != DT_OK) return free(all), NULL;
  for (int r = 0; r < g->n; r++) {
    int coord[DT_MESH_MAX_DIMS];
    dt_mesh_coord_of_rank(m, g->ranks[r], coord);
    int64_t want[DT_MAX_DIMS], off[DT_MAX_DIMS], *got = all + r * META_LEN;
    dt_dspec_local(s, s->p, coord, want, off);
    int ok = got[0] == s->ndim && got[1] == s->dtype;
    for (int i = 0; ok && i < s->ndim; i++) ok = got[2 + i] == want[i];
    if (!ok) {
      char a[160], b[160], gs[160], pl[256];
      dt_format_shape(a, sizeof a, (int)(got[0] >= 0 && got[0] <= DT_MAX_DIMS ? got[0] : 0), got + 2);
      dt_format_shape(b, sizeof b, s->ndim, want);
      dt_format_shape(gs, sizeof gs, s->ndim, s->shape);
      dt_error("from_local: run_check: rank %d's local tensor is %s %s, but global shape %s with placements %s gives "
               "it %s %s", g->ranks[r], dt_dtype_name((dt_dtype)got[1]), a, gs,
               dt_placements_format(s->p, m->ndim, pl, sizeof pl), dt_dtype_name(s->dtype), b);
      free(all);
      return NULL;
    }
  }
  free(all);
  dt_tensor *x = dt_tensor_clone(t);
  for (int i = 0; x && i < m->ndim; i++) {
    if (s->p[i].kind != DT_REPLICATE || m->shape[i] == 1) continue;
    if (dt_comm_broadcast(dt_mesh_comm(m, i), dt_tensor_data(x), (size_t)dt_tensor_numel(x), x->dtype,
                          dt_mesh_group_rank_of(m, i, 0)) != DT_OK)
      dt_tensor_release(x), x = NULL;
  }
  return x;
}

/* dt.from_local(local, mesh, placements, {run_check = false, shape = , stride = }) */
static int l_from_local(lua_State *L) {
  const char *op = "from_local";
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  dt_mesh *m = dt_lua_opt_mesh(L, 2, op);
  dt_placement p[DT_MESH_MAX_DIMS];
  dt_lua_check_placements(L, 3, m->ndim, p, op);
  int check = dt_lua_opt_bool_field(L, 4, "run_check", 0), given, sgiven;
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  /* off-mesh ranks hold an empty tensor: the given shape decides the dims there */
  shape_opt(L, 4, "shape", m->me < 0 ? -1 : t->ndim, shape, &given, op);
  int ndim = given > 0 ? given : given < 0 ? 0 : t->ndim;
  shape_opt(L, 4, "stride", ndim, stride, &sgiven, op);
  if (!given) { /* even shards: the local size times the ranks sharding each dim */
    memcpy(shape, t->shape, sizeof shape);
    normalise(L, m, p, t->ndim, shape, op);
    for (int i = 0; i < m->ndim; i++)
      if (p[i].kind == DT_SHARD) shape[p[i].dim] *= m->shape[i];
  }
  dt_dspec *s = dt_lua_new_spec(L, m, p, ndim, shape, t->dtype, op);
  if (m->me < 0) {
    dt_lua_push_dtensor(L, empty_local(t->dtype), s);
    return 1;
  }
  if (!check) {
    int64_t want[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_local(s, s->p, m->coord, want, off);
    for (int i = 0; i < t->ndim; i++)
      if (want[i] != t->shape[i]) {
        char a[160], b[160], gs[160];
        dt_format_shape(a, sizeof a, t->ndim, t->shape);
        dt_format_shape(b, sizeof b, t->ndim, want);
        dt_format_shape(gs, sizeof gs, t->ndim, shape);
        dt_dspec_free(s);
        return luaL_error(L, "from_local: rank %d's local tensor has shape %s, but global shape %s gives it %s",
                          dt_lua_context(L)->rank, a, gs, b);
      }
    dt_tensor_retain(t);
    dt_lua_push_dtensor(L, t, s);
    return 1;
  }
  dt_tensor *x = run_check(dt_lua_context(L), s, t);
  if (!x) return dt_dspec_free(s), dt_lua_raise(L);
  dt_lua_push_dtensor(L, x, s);
  return 1;
}

/* ---- methods ---- */
static int l_to_local(lua_State *L) {
  dt_value *u = dt_lua_check_dtensor(L, 1, "to_local");
  dt_tensor_retain(u->local);
  dt_lua_push_tensor(L, u->local);
  return 1;
}

/* The target placements of redistribute at idx, checked for the user's rules. */
static void check_target(lua_State *L, const dt_dspec *s, int idx, dt_placement *to, const char *op) {
  dt_lua_check_placements(L, idx, s->mesh->ndim, to, op);
  normalise(L, s->mesh, to, s->ndim, s->shape, op);
  for (int i = 0; i < s->mesh->ndim; i++)
    if (to[i].kind == DT_PARTIAL && !dt_placement_equal(to[i], s->p[i])) {
      char a[48], b[48];
      luaL_error(L, "%s: %s on mesh dim %d is not a valid target (the DTensor has %s there): redistributing to Partial "
                    "is not supported", op, dt_placement_format(to[i], a, sizeof a), i + 1,
                 dt_placement_format(s->p[i], b, sizeof b));
    }
}

/* x:redistribute(mesh?, placements, {async_op = false}) or x:redistribute(placements) */
static int l_redistribute(lua_State *L) {
  const char *op = "redistribute";
  dt_value *u = dt_lua_check_dtensor(L, 1, op);
  dt_mesh *m = dt_lua_test_mesh(L, 2);
  int pidx = m || lua_isnil(L, 2) ? 3 : 2; /* x:redistribute(placements, opts) skips the mesh */
  if (!m) m = u->spec->mesh;
  if (!dt_mesh_equal(m, u->spec->mesh)) {
    char a[1024], b[1024];
    return luaL_error(L, "%s: the DTensor lives on %s, not on %s: moving between meshes is not supported yet", op,
                      dt_mesh_format(u->spec->mesh, a, sizeof a), dt_mesh_format(m, b, sizeof b));
  }
  dt_placement to[DT_MESH_MAX_DIMS];
  check_target(L, u->spec, pidx, to, op);
  dt_dspec *s = dt_dspec_copy(u->spec);
  if (!s) return dt_lua_raise(L);
  dt_tensor_retain(u->local);
  push_redistributed(L, u->local, s, to, 0);
  return 1;
}

static int l_full_tensor(lua_State *L) {
  dt_value *u = dt_lua_check_dtensor(L, 1, "full_tensor");
  dt_placement to[DT_MESH_MAX_DIMS];
  for (int i = 0; i < u->spec->mesh->ndim; i++) to[i] = (dt_placement){DT_REPLICATE, 0, 0};
  dt_context *ctx = dt_lua_context(L);
  const dt_redist_plan *plan;
  dt_tensor *out;
  if (dt_redistribute_plan(ctx, u->spec, to, 0, &plan) != DT_OK ||
      dt_redistribute_exec(ctx, u->spec, plan, u->local, &out) != DT_OK)
    return dt_lua_raise(L);
  dt_lua_push_tensor(L, out);
  return 1;
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
  check_target(L, u->spec, 2, to, op);
  const dt_redist_plan *plan;
  if (dt_redistribute_plan(dt_lua_context(L), u->spec, to, 0, &plan) != DT_OK) return dt_lua_raise(L);
  char a[256], b[256], gs[160];
  luaL_Buffer buf;
  luaL_buffinit(L, &buf);
  dt_format_shape(gs, sizeof gs, u->spec->ndim, u->spec->shape);
  lua_pushfstring(L, "redistribute %s %s: %s -> %s, %d step(s)\n", gs, dt_dtype_name(u->spec->dtype),
                  dt_placements_format(u->spec->p, u->spec->mesh->ndim, a, sizeof a),
                  dt_placements_format(to, u->spec->mesh->ndim, b, sizeof b), plan->n);
  luaL_addvalue(&buf);
  dt_placement cur[DT_MESH_MAX_DIMS]; /* the state before each step: a merged step shows each dim's */
  memcpy(cur, u->spec->p, sizeof cur);
  for (int i = 0; i < plan->n; i++) {
    const dt_redist_step *st = &plan->steps[i];
    char f[192] = "", t[48], line[384], dims[32] = "";
    int ranks = 1;
    for (int d = 0; d < u->spec->mesh->ndim; d++)
      if ((st->mask >> d) & 1) {
        char one[48];
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%d", dims[0] ? "+" : "", d + 1);
        snprintf(f + strlen(f), sizeof f - strlen(f), "%s%s", f[0] ? " " : "", dt_placement_format(cur[d], one, sizeof one));
        ranks *= u->spec->mesh->shape[d];
        cur[d] = st->to;
      }
    snprintf(line, sizeof line, "  %d. mesh dim%s %s (%d ranks): %s -> %s  %s  %.0f bytes/rank  %.3g us\n", i + 1,
             strchr(dims, '+') ? "s" : "", dims, ranks, f, dt_placement_format(st->to, t, sizeof t),
             dt_step_name(st->kind), st->bytes, st->cost * 1e6);
    luaL_addstring(&buf, line);
  }
  char total[128];
  snprintf(total, sizeof total, "  total: %.0f bytes/rank, %.3g us (alpha %g s, beta %g s/byte)", plan->bytes,
           plan->cost * 1e6, DT_COST_ALPHA, DT_COST_BETA);
  luaL_addstring(&buf, total);
  luaL_pushresult(&buf);
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
