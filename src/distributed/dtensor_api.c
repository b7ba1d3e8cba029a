/* The DTensor API (see dtensor_api.h): distribute_tensor, from_local, to_local, full_tensor,
 * redistribute and its explanation.  Writes into a DTensor: dtensor_write.c. */
#include "distributed/dtensor_api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/redistribute.h"

#define META_LEN (2 + DT_MAX_DIMS) /* ndim, dtype, shape: what every rank must agree on */

static int all_mask(const dt_mesh *m) { return (1 << m->ndim) - 1; }

static dt_tensor *empty_local(dt_dtype dtype) {
  int64_t zero = 0;
  return dt_tensor_empty(dtype, 1, &zero, DT_HOST);
}

static void replicate_all(dt_placement *p, int n) {
  for (int i = 0; i < n; i++) p[i] = (dt_placement){DT_REPLICATE, 0, 0, 0};
}

/* p (Shard dims as written) normalised in place for an ndim-d tensor of this shape. */
static int normalise(dt_mesh *m, dt_placement *p, int ndim, const int64_t *shape, const char *op) {
  dt_dspec *s;
  if (dt_dspec_new(m, p, ndim, shape, DT_FLOAT32, op, &s) != DT_OK) return DT_ERR;
  memcpy(p, s->p, sizeof(dt_placement) * (size_t)m->ndim);
  dt_dspec_free(s);
  return DT_OK;
}

/* out = (local, s) brought to placements `to` (normalised).  Consumes local and s. */
static int move_to(dt_context *ctx, dt_tensor *local, dt_dspec *s, const dt_placement *to, int allow_partial,
                   dt_value *out) {
  const dt_redist_plan *plan;
  dt_tensor *res = NULL;
  int st = local ? dt_redistribute_plan(ctx, s, to, allow_partial, &plan) : DT_ERR;
  if (st == DT_OK) st = dt_redistribute_exec(ctx, s, plan, local, &res);
  dt_tensor_release(local);
  if (st != DT_OK) return dt_dspec_free(s), DT_ERR;
  memcpy(s->p, to, sizeof(dt_placement) * (size_t)s->mesh->ndim);
  dt_value_init(out, res, s);
  return DT_OK;
}

static int need_dtensor(const dt_value *v, const char *op) {
  if (v->spec) return DT_OK;
  return dt_error("%s: expected a DTensor, got a plain tensor (use dt.distribute_tensor or dt.from_local)", op);
}

/* ---- distribute_tensor ---- */
/* The src rank's shard of every mesh rank, padded to `count` elements, in the order of the
 * all-ranks group (ranks sorted). */
static dt_tensor *scatter_blocks(const dt_dspec *s, const dt_group_entry *g, dt_tensor *t, int64_t count) {
  int64_t total = count * g->n;
  dt_tensor *buf = dt_tensor_zeros(s->dtype, 1, &total, DT_HOST);
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

/* This rank's shard from src (t on the root, NULL elsewhere) over the mesh: a broadcast when
 * nothing is sharded, else one scatter of padded shards.  s has no Partial placements. */
static dt_tensor *from_src(const dt_dspec *s, dt_tensor *t, int root) {
  const dt_group_entry *g = s->mesh->groups[all_mask(s->mesh)];
  int sharded = 0;
  for (int i = 0; i < s->mesh->ndim; i++) sharded |= s->p[i].kind == DT_SHARD;
  if (!sharded) {
    dt_tensor *buf = t ? dt_tensor_clone(t) : dt_tensor_empty(s->dtype, s->ndim, s->shape, DT_HOST);
    if (!buf) return NULL;
    if (dt_comm_broadcast(g->comm, dt_tensor_data(buf), (size_t)dt_tensor_numel(buf), s->dtype, root) != DT_OK)
      return dt_tensor_release(buf), NULL;
    return buf;
  }
  int zero[DT_MESH_MAX_DIMS] = {0};
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  dt_dspec_local(s, s->p, zero, shape, off); /* coordinate 0 holds the largest shard */
  int64_t count = dt_shape_numel(s->ndim, shape);
  dt_tensor *send = t ? scatter_blocks(s, g, t, count) : NULL, *recv = dt_tensor_empty(s->dtype, 1, &count, DT_HOST);
  if ((t && !send) || !recv) return dt_tensor_release(send), dt_tensor_release(recv), NULL;
  int st = dt_comm_scatter(g->comm, send ? dt_tensor_data(send) : NULL, dt_tensor_data(recv), (size_t)count, s->dtype,
                           root);
  dt_tensor_release(send);
  if (st != DT_OK) return dt_tensor_release(recv), NULL;
  dt_dspec_my_local(s, &(int){0}, shape, off);
  dt_contiguous_strides(s->ndim, shape, stride);
  dt_tensor *v = dt_tensor_view_of(recv, s->ndim, shape, stride, recv->offset), *out = v ? dt_tensor_clone(v) : NULL;
  dt_tensor_release(v), dt_tensor_release(recv);
  return out;
}

/* The position of world rank src in the mesh's all-ranks group (the broadcast root). */
static int src_root(const dt_mesh *m, int src, const char *op) {
  const dt_group_entry *g = m->groups[all_mask(m)];
  for (int i = 0; i < g->n; i++)
    if (g->ranks[i] == src) return i;
  char buf[1024];
  return dt_error("%s: src_rank %d is not a rank of %s", op, src, dt_mesh_format(m, buf, sizeof buf)), -1;
}

int dt_distribute_tensor(dt_context *ctx, dt_tensor *t, dt_mesh *m, const dt_placement *placements, int src_rank,
                         dt_value *out) {
  const char *op = "distribute_tensor";
  int local_chunk = src_rank == DT_SRC_LOCAL, root = -1;
  if (t && !dt_device_is_host(dt_tensor_device(t))) return dt_error("%s: only CPU tensors are supported", op);
  if (!local_chunk && (root = src_root(m, src_rank, op)) < 0) return DT_ERR;
  if (!t && (local_chunk || m->me < 0)) /* no collective follows here: failing alone is safe */
    return dt_error("%s: bad argument #1 (expected a tensor: %s)", op,
                    local_chunk ? "with src_rank = false every rank chunks its own" : "ranks off the mesh need one");
  /* the src rank's metadata decides the shape and dtype everywhere; ndim -1 tells every
   * rank that src passed no tensor, so that all of them fail */
  int64_t meta[META_LEN] = {-1};
  if (t) {
    meta[0] = t->ndim, meta[1] = t->dtype;
    memcpy(meta + 2, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  }
  if (!local_chunk && m->me >= 0) {
    if (dt_comm_broadcast(m->groups[all_mask(m)]->comm, meta, META_LEN, DT_INT64, root) != DT_OK) return DT_ERR;
    if (meta[0] < 0) return dt_error("%s: src_rank %d passed no tensor (argument #1)", op, src_rank);
  }
  int ndim = (int)meta[0];
  dt_dtype dtype = (dt_dtype)meta[1];
  dt_placement to[DT_MESH_MAX_DIMS], start[DT_MESH_MAX_DIMS];
  memcpy(to, placements, sizeof(dt_placement) * (size_t)m->ndim);
  if (normalise(m, to, ndim, meta + 2, op) != DT_OK) return DT_ERR;
  /* the data moves as Replicate where the target is Partial (then partitioned locally);
   * local chunking starts from the whole tensor everywhere */
  for (int i = 0; i < m->ndim; i++) /* _StridedShard too: its shards are no boxes to scatter */
    start[i] = to[i].kind == DT_PARTIAL || to[i].kind == DT_STRIDED_SHARD ? (dt_placement){DT_REPLICATE, 0, 0, 0} : to[i];
  if (local_chunk) replicate_all(start, m->ndim);
  dt_dspec *s;
  if (dt_dspec_new(m, start, ndim, meta + 2, dtype, op, &s) != DT_OK) return DT_ERR;
  dt_tensor *local;
  if (m->me < 0) local = empty_local(dtype);
  else if (local_chunk) dt_tensor_retain(t), local = t;
  else local = from_src(s, ctx->rank == src_rank ? t : NULL, root);
  if (!local) return dt_dspec_free(s), DT_ERR;
  return move_to(ctx, local, s, to, 1, out);
}

/* ---- from_local ---- */
/* Every rank checks every rank's dtype and local shape against the spec, so a mismatch fails
 * the same way everywhere; then Replicate dims are broadcast from coordinate 0 of the dim. */
/* run_check: every mesh rank's (ndim, dtype, local shape, given global shape) is gathered
 * first, so that the spec is built and checked from the same data on every rank: an error is
 * then the same message everywhere, naming every rank that disagrees.  The mesh's first rank
 * is the reference for the global shape (as given, or its local shape times the shards). */
#define CHECK_LEN (4 + 2 * DT_MAX_DIMS) /* ndim, dtype, local shape, given?, given ndim, given shape */

static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
}

static int checked_spec(dt_mesh *m, const dt_group_entry *g, const int64_t *all, const dt_placement *placements,
                        dt_dspec **out) {
  const char *op = "from_local";
  int ref = 0;
  for (int r = 0; r < g->n; r++)
    if (g->ranks[r] == m->ranks[0]) ref = r;
  const int64_t *e = all + ref * CHECK_LEN;
  int ndim = (int)(e[2 + DT_MAX_DIMS] ? e[3 + DT_MAX_DIMS] : e[0]);
  if (ndim < 0 || ndim > DT_MAX_DIMS) ndim = 0;
  dt_placement p[DT_MESH_MAX_DIMS];
  memcpy(p, placements, sizeof(dt_placement) * (size_t)m->ndim);
  int64_t gshape[DT_MAX_DIMS];
  if (e[2 + DT_MAX_DIMS]) {
    memcpy(gshape, e + 4 + DT_MAX_DIMS, sizeof(int64_t) * (size_t)ndim);
  } else {
    memcpy(gshape, e + 2, sizeof(int64_t) * (size_t)ndim);
    if (normalise(m, p, ndim, gshape, op) != DT_OK) return DT_ERR;
    for (int i = 0; i < m->ndim; i++)
      if (p[i].kind == DT_SHARD || p[i].kind == DT_STRIDED_SHARD) gshape[p[i].dim] *= m->shape[i];
  }
  dt_dspec *s;
  if (dt_dspec_new(m, p, ndim, gshape, (dt_dtype)e[1], op, &s) != DT_OK) return DT_ERR;
  char msg[1024] = "", gs[160], pl[256];
  int bad = 0;
  for (int r = 0; r < g->n; r++) {
    const int64_t *got = all + r * CHECK_LEN;
    int coord[DT_MESH_MAX_DIMS];
    dt_mesh_coord_of_rank(m, g->ranks[r], coord);
    int64_t want[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_local(s, s->p, coord, want, off);
    int gnd = (int)got[0] >= 0 && got[0] <= DT_MAX_DIMS ? (int)got[0] : 0;
    int ok = got[0] == s->ndim && got[1] == s->dtype;
    for (int i = 0; ok && i < s->ndim; i++) ok = got[2 + i] == want[i];
    int same_given = got[2 + DT_MAX_DIMS] == e[2 + DT_MAX_DIMS] &&
                     (!got[2 + DT_MAX_DIMS] || (got[3 + DT_MAX_DIMS] == e[3 + DT_MAX_DIMS] &&
                      memcmp(got + 4 + DT_MAX_DIMS, e + 4 + DT_MAX_DIMS, sizeof(int64_t) * (size_t)ndim) == 0));
    if (ok && same_given) continue;
    char a[160], b[160];
    dt_format_shape(a, sizeof a, gnd, got + 2);
    dt_format_shape(b, sizeof b, s->ndim, want);
    if (bad++ < 4) {
      if (!ok)
        append(msg, sizeof msg, "%s rank %d's local tensor is %s %s (expected %s %s)", bad > 1 ? ";" : "",
               g->ranks[r], dt_dtype_name((dt_dtype)got[1]), a, dt_dtype_name(s->dtype), b);
      else
        append(msg, sizeof msg, "%s rank %d passed another global shape than rank %d", bad > 1 ? ";" : "",
               g->ranks[r], m->ranks[0]);
    }
  }
  if (bad) {
    if (bad > 4) append(msg, sizeof msg, "; and %d more ranks", bad - 4);
    dt_format_shape(gs, sizeof gs, s->ndim, s->shape);
    dt_error("from_local: run_check: global shape %s with placements %s (from rank %d):%s", gs,
             dt_placements_format(s->p, m->ndim, pl, sizeof pl), m->ranks[0], msg);
    dt_dspec_free(s);
    return DT_ERR;
  }
  *out = s;
  return DT_OK;
}

static int from_local_checked(dt_tensor *t, dt_mesh *m, const dt_placement *p, int ndim, const int64_t *shape,
                              dt_value *out) {
  const dt_group_entry *g = m->groups[all_mask(m)];
  int64_t mine[CHECK_LEN] = {t->ndim, t->dtype};
  memcpy(mine + 2, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  if (shape) {
    mine[2 + DT_MAX_DIMS] = 1, mine[3 + DT_MAX_DIMS] = ndim;
    memcpy(mine + 4 + DT_MAX_DIMS, shape, sizeof(int64_t) * (size_t)(ndim <= DT_MAX_DIMS ? ndim : 0));
  }
  int64_t *all = malloc(sizeof(int64_t) * CHECK_LEN * (size_t)g->n);
  if (!all) return dt_error("from_local: out of memory");
  if (dt_comm_all_gather(g->comm, mine, all, CHECK_LEN, DT_INT64) != DT_OK) return free(all), DT_ERR;
  dt_dspec *s = NULL;
  int st = checked_spec(m, g, all, p, &s);
  free(all);
  if (st != DT_OK) return DT_ERR;
  dt_tensor *x = dt_tensor_clone(t);
  for (int i = 0; x && i < m->ndim; i++) {
    if (s->p[i].kind != DT_REPLICATE || m->shape[i] == 1) continue;
    dt_comm *c = dt_comm_for_device(dt_mesh_comm(m, i), dt_tensor_device(x), "from_local"); /* NCCL on cuda */
    if (!c || dt_comm_broadcast(c, dt_tensor_data(x), (size_t)dt_tensor_numel(x), x->dtype,
                                dt_mesh_group_rank_of(m, i, 0)) != DT_OK)
      dt_tensor_release(x), x = NULL;
  }
  if (!x) return dt_dspec_free(s), DT_ERR;
  dt_value_init(out, x, s);
  return DT_OK;
}

/* Without run_check, this rank's own shard must have the shape the spec gives it. */
static int check_own_shape(dt_context *ctx, const dt_dspec *s, const dt_tensor *t) {
  int64_t want[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec_local(s, s->p, s->mesh->coord, want, off);
  for (int i = 0; i < t->ndim; i++)
    if (want[i] != t->shape[i]) {
      char a[160], b[160], gs[160];
      dt_format_shape(a, sizeof a, t->ndim, t->shape);
      dt_format_shape(b, sizeof b, t->ndim, want);
      dt_format_shape(gs, sizeof gs, t->ndim, s->shape);
      return dt_error("from_local: rank %d's local tensor has shape %s, but global shape %s gives it %s", ctx->rank, a,
                      gs, b);
    }
  return DT_OK;
}

int dt_from_local(dt_context *ctx, dt_tensor *local, dt_mesh *m, const dt_placement *placements, int run,
                  int ndim, const int64_t *shape, dt_value *out) {
  const char *op = "from_local";
  if (run && m->me >= 0) return from_local_checked(local, m, placements, ndim, shape, out);
  dt_placement p[DT_MESH_MAX_DIMS];
  memcpy(p, placements, sizeof(dt_placement) * (size_t)m->ndim);
  int64_t gshape[DT_MAX_DIMS];
  if (shape) {
    if (m->me >= 0 && ndim != local->ndim)
      return dt_error("%s: shape has %d entries for a %d-d local tensor", op, ndim, local->ndim);
    memcpy(gshape, shape, sizeof(int64_t) * (size_t)ndim);
  } else { /* even shards: the local size times the ranks sharding each dim */
    ndim = local->ndim;
    memcpy(gshape, local->shape, sizeof(int64_t) * (size_t)ndim);
    if (normalise(m, p, ndim, gshape, op) != DT_OK) return DT_ERR;
    for (int i = 0; i < m->ndim; i++)
      if (p[i].kind == DT_SHARD || p[i].kind == DT_STRIDED_SHARD) gshape[p[i].dim] *= m->shape[i];
  }
  dt_dspec *s;
  if (dt_dspec_new(m, p, ndim, gshape, local->dtype, op, &s) != DT_OK) return DT_ERR;
  dt_tensor *x;
  if (m->me < 0) x = empty_local(local->dtype);
  else x = check_own_shape(ctx, s, local) == DT_OK ? (dt_tensor_retain(local), local) : NULL;
  if (!x) return dt_dspec_free(s), DT_ERR;
  dt_value_init(out, x, s);
  return DT_OK;
}

/* ---- to_local, full_tensor, redistribute ---- */
int dt_to_local(const dt_value *v, dt_tensor **out) {
  if (need_dtensor(v, "to_local") != DT_OK) return DT_ERR;
  dt_tensor_retain(v->local);
  *out = v->local;
  return DT_OK;
}

int dt_full_tensor(dt_context *ctx, const dt_value *v, dt_tensor **out) {
  if (need_dtensor(v, "full_tensor") != DT_OK) return DT_ERR;
  dt_placement to[DT_MESH_MAX_DIMS];
  replicate_all(to, v->spec->mesh->ndim);
  const dt_redist_plan *plan;
  if (dt_redistribute_plan(ctx, v->spec, to, 0, &plan) != DT_OK) return DT_ERR;
  return dt_redistribute_exec(ctx, v->spec, plan, v->local, out);
}

/* The user's target placements, normalised into to (any placements, Partial too). */
static int check_target(const dt_dspec *s, const dt_placement *target, dt_placement *to, const char *op) {
  memcpy(to, target, sizeof(dt_placement) * (size_t)s->mesh->ndim);
  return normalise(s->mesh, to, s->ndim, s->shape, op);
}

/* Partial targets are allowed: Replicate -> Partial and Shard -> Partial are local steps. */
int dt_redistribute(dt_context *ctx, const dt_value *v, dt_mesh *mesh, const dt_placement *target, dt_value *out) {
  const char *op = "redistribute";
  if (need_dtensor(v, op) != DT_OK) return DT_ERR;
  if (mesh && !dt_mesh_equal(mesh, v->spec->mesh)) {
    char a[1024], b[1024];
    return dt_error("%s: the DTensor lives on %s, not on %s: moving between meshes is not supported yet", op,
                    dt_mesh_format(v->spec->mesh, a, sizeof a), dt_mesh_format(mesh, b, sizeof b));
  }
  dt_placement to[DT_MESH_MAX_DIMS];
  if (check_target(v->spec, target, to, op) != DT_OK) return DT_ERR;
  dt_dspec *s = dt_dspec_copy(v->spec);
  if (!s) return DT_ERR;
  dt_tensor_retain(v->local);
  return move_to(ctx, v->local, s, to, 1, out);
}

int dt_redistribute_to_any(dt_context *ctx, const dt_value *v, dt_mesh *mesh, const dt_placement *target,
                           dt_value *out) {
  return dt_redistribute(ctx, v, mesh, target, out);
}

/* ---- explain_redistribute ---- */
typedef struct text {
  char *s;
  size_t n, cap;
  int failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (t->failed || k < 0) return;
  if (t->n + (size_t)k + 1 > t->cap) {
    size_t cap = 2 * (t->n + (size_t)k + 1);
    char *s = realloc(t->s, cap);
    if (!s) return (void)(t->failed = 1);
    t->s = s, t->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)k;
}

/* One line per step: the mesh dims it changes, their state before it, the collective. */
static void add_step(text *t, const dt_dspec *s, const dt_redist_step *st, int i, dt_placement *cur) {
  char f[192] = "", to[48], dims[32] = "";
  int ranks = 1;
  for (int d = 0; d < s->mesh->ndim; d++)
    if ((st->mask >> d) & 1) {
      char one[48];
      snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%d", dims[0] ? "+" : "", d + 1);
      dt_placement_format(cur[d], one, sizeof one);
      snprintf(f + strlen(f), sizeof f - strlen(f), "%s%s", f[0] ? " " : "", one);
      ranks *= s->mesh->shape[d];
      cur[d] = st->to;
    }
  add(t, "  %d. mesh dim%s %s (%d ranks): %s -> %s  %s  %.0f bytes/rank  %.3g us\n", i + 1,
      strchr(dims, '+') ? "s" : "", dims, ranks, f, dt_placement_format(st->to, to, sizeof to), dt_step_name(st->kind),
      st->bytes, st->cost * 1e6);
}

int dt_redistribute_cost(dt_context *ctx, const dt_value *v, const dt_placement *target, double *cost) {
  const char *op = "redistribute_cost";
  if (need_dtensor(v, op) != DT_OK) return DT_ERR;
  dt_placement to[DT_MESH_MAX_DIMS];
  memcpy(to, target, sizeof(dt_placement) * (size_t)v->spec->mesh->ndim);
  if (normalise(v->spec->mesh, to, v->spec->ndim, v->spec->shape, op) != DT_OK) return DT_ERR;
  const dt_redist_plan *plan;
  *cost = dt_redistribute_plan(ctx, v->spec, to, 1, &plan) == DT_OK ? plan->cost : -1;
  return DT_OK;
}

int dt_explain_redistribute(dt_context *ctx, const dt_value *v, const dt_placement *target, char **out) {
  const char *op = "explain_redistribute";
  if (need_dtensor(v, op) != DT_OK) return DT_ERR;
  const dt_dspec *s = v->spec;
  dt_placement to[DT_MESH_MAX_DIMS];
  const dt_redist_plan *plan;
  if (check_target(s, target, to, op) != DT_OK || dt_redistribute_plan(ctx, s, to, 1, &plan) != DT_OK) return DT_ERR;
  char a[256], b[256], gs[160];
  text t = {0};
  dt_format_shape(gs, sizeof gs, s->ndim, s->shape);
  add(&t, "redistribute %s %s: %s -> %s, %d step(s)\n", gs, dt_dtype_name(s->dtype),
      dt_placements_format(s->p, s->mesh->ndim, a, sizeof a), dt_placements_format(to, s->mesh->ndim, b, sizeof b),
      plan->n);
  dt_placement cur[DT_MESH_MAX_DIMS]; /* the state before each step: a merged step shows each dim's */
  memcpy(cur, s->p, sizeof cur);
  if (!plan->nphase)
    for (int i = 0; i < plan->n; i++) add_step(&t, s, &plan->steps[i], i, cur);
  for (int k = 0; k < plan->nphase; k++) { /* steps of a strided plan: placements in the split view */
    const dt_redist_phase *ph = &plan->phase[k];
    dt_dspec u;
    dt_placement ut[DT_MESH_MAX_DIMS];
    if (!dt_strided_view(s, ph->from, ph->to, &u, cur, ut)) continue;
    dt_format_shape(gs, sizeof gs, u.ndim, u.shape);
    add(&t, "  in the split view %s (a _StridedShard is a Shard of its inner dim):\n", gs);
    for (int i = ph->first; i < ph->first + ph->count; i++) add_step(&t, &u, &plan->steps[i], i, cur);
  }
  add(&t, "  total: %.0f bytes/rank, %.3g us (alpha %g s, beta %g s/byte)", plan->bytes, plan->cost * 1e6,
      DT_COST_ALPHA, DT_COST_BETA);
  if (t.failed || !t.s) return free(t.s), dt_error("%s: out of memory", op);
  *out = t.s;
  return DT_OK;
}
