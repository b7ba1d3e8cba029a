/* DTensor spec and shard geometry (see dtensor.h). */
#include "distributed/dtensor.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void dt_chunk(int64_t L, int n, int c, int64_t *start, int64_t *len) {
  int64_t chunk = (L + n - 1) / n;
  int64_t s = c * chunk < L ? c * chunk : L;
  *start = s;
  *len = L - s < chunk ? L - s : chunk;
}

/* A _StridedShard's dim splits into (split, size / split) blocks.  Several mesh dims may shard
 * it: its plain Shards chunk the blocks themselves (FSDP + TP's [_StridedShard(d, k),
 * Shard(d)]), its _StridedShards the inside of every block; _StridedShards of two factors k1 <
 * k2 see it in three levels (k1, k2 / k1, L / k2), each chunking its own part (a flatten of
 * dims sharded on two mesh dims), so the factors must divide one another.  Dims already
 * normalised. */
static int check_strided(const dt_mesh *mesh, const dt_placement *p, const int64_t *shape, const char *op) {
  for (int i = 0; i < mesh->ndim; i++) {
    if (p[i].kind != DT_STRIDED_SHARD) continue;
    char one[48], all[256];
    int d = p[i].dim;
    if (p[i].split < 1 || p[i].split > DT_STRIDED_MAX_SPLIT)
      return dt_error("%s: %s on mesh dim %d: split factor must be 1..%d", op, dt_placement_format(p[i], one, sizeof one),
                      i + 1, DT_STRIDED_MAX_SPLIT);
    if (shape[d] % p[i].split != 0)
      return dt_error("%s: %s on mesh dim %d: tensor dim %d of size %lld does not split into %d equal blocks", op,
                      dt_placement_format(p[i], one, sizeof one), i + 1, d + 1, (long long)shape[d], p[i].split);
    for (int j = 0; j < i; j++) {
      int lo = p[j].split < p[i].split ? p[j].split : p[i].split, hi = p[j].split ^ p[i].split ^ lo;
      if (p[j].kind == DT_STRIDED_SHARD && p[j].dim == d && hi % lo != 0)
        return dt_error("%s: placements %s split tensor dim %d by two factors neither of which divides the other "
                        "(%d on mesh dim %d, %d on mesh dim %d)",
                        op, dt_placements_format(p, mesh->ndim, all, sizeof all), d + 1, p[j].split, j + 1, p[i].split,
                        i + 1);
    }
  }
  return DT_OK;
}

int dt_dspec_new(dt_mesh *mesh, const dt_placement *p, int ndim, const int64_t *shape, dt_dtype dtype,
                 const char *op, dt_dspec **out) {
  if (dt_check_shape(op, ndim, shape) != DT_OK) return DT_ERR; /* every DTensor's global shape */
  dt_dspec *s = calloc(1, sizeof *s);
  if (!s) return dt_error("%s: out of memory", op);
  for (int i = 0; i < mesh->ndim; i++) {
    s->p[i] = p[i];
    if (p[i].kind != DT_SHARD && p[i].kind != DT_STRIDED_SHARD) continue;
    int d = p[i].dim < 0 ? p[i].dim + ndim : p[i].dim;
    if (ndim == 0) {
      char one[48];
      free(s);
      return dt_error("%s: %s on mesh dim %d: a 0-d tensor cannot be sharded", op,
                      dt_placement_format(p[i], one, sizeof one), i + 1);
    }
    if (d < 0 || d >= ndim) {
      char one[48];
      free(s);
      return dt_error("%s: %s on mesh dim %d is out of range for a %d-d tensor (dims are 1-based: 1..%d or -%d..-1)",
                      op, dt_placement_format(p[i], one, sizeof one), i + 1, ndim, ndim, ndim);
    }
    s->p[i].dim = d;
  }
  if (check_strided(mesh, s->p, shape, op) != DT_OK) return free(s), DT_ERR;
  dt_mesh_retain(mesh);
  s->mesh = mesh;
  s->ndim = ndim;
  memcpy(s->shape, shape, sizeof(int64_t) * (size_t)ndim);
  s->dtype = dtype;
  *out = s;
  return DT_OK;
}

dt_dspec *dt_dspec_copy(const dt_dspec *s) {
  dt_dspec *c = malloc(sizeof *c);
  if (!c) return dt_error("DTensor: out of memory"), NULL;
  *c = *s;
  dt_mesh_retain(c->mesh);
  return c;
}

void dt_dspec_free(dt_dspec *s) {
  if (!s) return;
  dt_mesh_release(s->mesh);
  free(s);
}

int dt_dspec_split_of(const dt_placement *p, int nm, int d) {
  int k = 0;
  for (int m = 0; m < nm; m++)
    if (p[m].kind == DT_STRIDED_SHARD && p[m].dim == d && (!k || p[m].split < k)) k = p[m].split;
  return k;
}

int dt_dspec_levels(const dt_placement *p, int nm, int d, int64_t *lv, int n) {
  for (int m = 0; m < nm; m++) {
    if (p[m].kind != DT_STRIDED_SHARD || p[m].dim != d) continue;
    int i = 0;
    while (i < n && lv[i] < p[m].split) i++;
    if (i < n && lv[i] == p[m].split) continue;
    memmove(lv + i + 1, lv + i, sizeof *lv * (size_t)(n - i));
    lv[i] = p[m].split, n++;
  }
  return n;
}

int dt_dspec_level_of(const int64_t *lv, int n, dt_placement p) {
  int64_t k = p.kind == DT_STRIDED_SHARD ? p.split : 1;
  for (int i = 0; i < n; i++)
    if (lv[i] == k) return i;
  return -1;
}

void dt_dspec_local(const dt_dspec *s, const dt_placement *p, const int *coord, int64_t *shape, int64_t *offset) {
  int nm = s->mesh->ndim;
  for (int d = 0; d < s->ndim; d++) {
    /* the dim in its levels' parts: each placement chunks its part, in mesh-dim order; a plain
     * dim is one part */
    int64_t L = s->shape[d], lv[DT_STRIDED_MAX_LEVELS] = {1}, st[DT_STRIDED_MAX_LEVELS], len[DT_STRIDED_MAX_LEVELS];
    int nl = dt_dspec_levels(p, nm, d, lv, 1);
    for (int i = 0; i < nl; i++) st[i] = 0, len[i] = (i + 1 < nl ? lv[i + 1] : L) / lv[i];
    for (int m = 0; m < nm; m++) {
      if ((p[m].kind != DT_SHARD && p[m].kind != DT_STRIDED_SHARD) || p[m].dim != d) continue;
      int i = dt_dspec_level_of(lv, nl, p[m]);
      int64_t c, l;
      dt_chunk(len[i], s->mesh->shape[m], coord[m], &c, &l);
      st[i] += c, len[i] = l;
    }
    shape[d] = 1, offset[d] = 0; /* a _StridedShard's offset: its first element */
    for (int i = 0; i < nl; i++) shape[d] *= len[i], offset[d] += st[i] * (i + 1 < nl ? L / lv[i + 1] : 1);
  }
}

int64_t dt_dspec_logical_size(const dt_dspec *s, const dt_placement *p, const int *coord, int d, int m) {
  int64_t L = s->shape[d];
  for (int k = 0; k < m; k++)
    if (p[k].kind == DT_SHARD && p[k].dim == d) {
      int64_t st;
      dt_chunk(L, s->mesh->shape[k], coord[k], &st, &L);
    }
  return L;
}

void dt_dspec_my_local(const dt_dspec *s, int *ndim, int64_t *shape, int64_t *offset) {
  if (s->mesh->me < 0) {
    *ndim = 1, shape[0] = 0, offset[0] = 0;
    return;
  }
  *ndim = s->ndim;
  dt_dspec_local(s, s->p, s->mesh->coord, shape, offset);
}

int dt_dspec_has_partial(const dt_placement *p, int n) {
  for (int i = 0; i < n; i++)
    if (p[i].kind == DT_PARTIAL) return 1;
  return 0;
}

int dt_dspec_has_strided(const dt_placement *p, int n) {
  for (int i = 0; i < n; i++)
    if (p[i].kind == DT_STRIDED_SHARD) return 1;
  return 0;
}

int dt_dspec_write_identity(const dt_dspec *s) {
  int product = 0;
  for (int m = 0; m < s->mesh->ndim; m++)
    if (s->p[m].kind == DT_PARTIAL && s->mesh->coord[m] != 0) {
      if (s->p[m].op == DT_REDUCE_SUM) return 0; /* a zero part of a sum: whatever multiplies it */
      if (s->p[m].op == DT_REDUCE_PRODUCT) product = 1;
    }
  return product ? 1 : -1;
}

int dt_dspec_holds_value(const dt_dspec *s) { return dt_dspec_write_identity(s) < 0; }

void dt_dspec_global_header(const dt_dspec *s, dt_tensor *g) {
  memset(g, 0, sizeof *g);
  g->ndim = s->ndim;
  g->dtype = s->dtype;
  memcpy(g->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim);
  dt_contiguous_strides(g->ndim, g->shape, g->stride);
}
