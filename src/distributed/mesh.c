/* DeviceMesh construction, slicing and flattening (see mesh.h). */
#include "distributed/mesh.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/size.h"

static dt_mesh *mesh_alloc(int ndim, const int *shape, const char *device) {
  dt_mesh *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  atomic_init(&m->refcount, 1);
  m->ndim = ndim;
  m->size = 1;
  for (int i = 0; i < ndim; i++) m->shape[i] = shape[i], m->size *= shape[i];
  m->ranks = malloc(sizeof(int) * (size_t)(m->size ? m->size : 1));
  if (!m->ranks) return free(m), NULL;
  snprintf(m->device_type, sizeof m->device_type, "%s", device);
  m->me = -1;
  return m;
}

/* Row-major index of a coordinate. */
static int index_of(const dt_mesh *m, const int *coord) {
  int idx = 0;
  for (int i = 0; i < m->ndim; i++) idx = idx * m->shape[i] + coord[i];
  return idx;
}

void dt_mesh_coord_of(const dt_mesh *m, int idx, int *coord) {
  for (int i = m->ndim - 1; i >= 0; i--) coord[i] = idx % m->shape[i], idx /= m->shape[i];
}

void dt_mesh_coord_of_rank(const dt_mesh *m, int w, int *coord) {
  int idx = 0;
  while (idx < m->size - 1 && m->ranks[idx] != w) idx++;
  dt_mesh_coord_of(m, idx, coord);
}

/* Every group over the dims in mask, one per setting of the other coordinates, in the same
 * order on every rank; keeps the one holding `mine` (this rank's coordinates). */
static int make_groups(dt_context *ctx, dt_mesh *m, int mask, const int *mine) {
  int *members = malloc(sizeof(int) * (size_t)m->size);
  if (!members) return dt_error("DeviceMesh: out of memory");
  int coord[DT_MESH_MAX_DIMS];
  for (int base = 0; base < m->size; base++) {
    dt_mesh_coord_of(m, base, coord);
    int lead = 1; /* one group per base whose coordinates inside mask are all 0 */
    for (int i = 0; i < m->ndim; i++) lead &= !((mask >> i) & 1) || coord[i] == 0;
    if (!lead) continue;
    int n = 0, same = 1;
    for (int i = 0; i < m->ndim; i++) same &= ((mask >> i) & 1) || coord[i] == mine[i];
    for (int idx = 0; idx < m->size; idx++) {
      int c[DT_MESH_MAX_DIMS], in = 1;
      dt_mesh_coord_of(m, idx, c);
      for (int i = 0; i < m->ndim; i++) in &= ((mask >> i) & 1) || c[i] == coord[i];
      if (in) members[n++] = m->ranks[idx];
    }
    const dt_group_entry *e;
    if (dt_context_group(ctx, members, n, &e) != DT_OK) return free(members), DT_ERR;
    if (same) m->groups[mask] = e;
  }
  free(members);
  return DT_OK;
}

int dt_mesh_new(dt_context *ctx, const char *device, int ndim, const int *shape, const int *ranks,
                const char *const *names, dt_mesh **out) {
  if (ndim < 1 || ndim > DT_MESH_MAX_DIMS)
    return dt_error("DeviceMesh: a mesh has 1..%d dims, got %d", DT_MESH_MAX_DIMS, ndim);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 1) return dt_error("DeviceMesh: mesh dim %d has size %d (sizes must be >= 1)", i + 1, shape[i]);
  /* the product (an int: the mesh's size) is checked before anything is sized by it; the
   * layout's checks below then find a rank outside the world or a repeated one */
  int64_t size = 1;
  for (int i = 0; i < ndim; i++)
    if (dt_mul_size(size, shape[i], &size) != DT_OK || size > INT_MAX) {
      char buf[160] = "{";
      for (int j = 0; j < ndim; j++) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d", j ? "," : "", shape[j]);
      return dt_error("DeviceMesh: mesh shape %s} has more ranks than fit in an int (the world has %d)", buf,
                      ctx->world_size);
    }
  dt_mesh *m = mesh_alloc(ndim, shape, device);
  if (!m) return dt_error("DeviceMesh: out of memory");
  char *seen = calloc((size_t)ctx->world_size, 1);
  if (!seen) return dt_mesh_release(m), dt_error("DeviceMesh: out of memory");
  for (int i = 0; i < m->size; i++) {
    if (ranks[i] < 0 || ranks[i] >= ctx->world_size) {
      free(seen), dt_mesh_release(m);
      return dt_error("DeviceMesh: rank %d is outside the world of %d ranks (0..%d)", ranks[i], ctx->world_size,
                      ctx->world_size - 1);
    }
    if (seen[ranks[i]]++) {
      free(seen), dt_mesh_release(m);
      return dt_error("DeviceMesh: rank %d appears twice in the layout", ranks[i]);
    }
    m->ranks[i] = ranks[i];
    if (ranks[i] == ctx->rank) m->me = i;
  }
  free(seen);
  for (int i = 0; i < ndim; i++) {
    const char *nm = names && names[i] ? names[i] : "";
    if (strlen(nm) >= DT_MESH_NAME_LEN) return dt_mesh_release(m), dt_error("DeviceMesh: dim name '%s' is too long", nm);
    for (int j = 0; *nm && j < i; j++)
      if (strcmp(m->names[j], nm) == 0) return dt_mesh_release(m), dt_error("DeviceMesh: dim name '%s' repeats", nm);
    strcpy(m->names[i], nm);
  }
  if (m->me >= 0) dt_mesh_coord_of(m, m->me, m->coord);
  for (int mask = 1; mask < 1 << ndim; mask++)
    if (make_groups(ctx, m, mask, m->coord) != DT_OK) return dt_mesh_release(m), DT_ERR;
  *out = m;
  return DT_OK;
}

void dt_mesh_retain(dt_mesh *m) { atomic_fetch_add(&m->refcount, 1); }

void dt_mesh_release(dt_mesh *m) {
  if (!m || atomic_fetch_sub(&m->refcount, 1) != 1) return;
  free(m->ranks);
  free(m);
}

int dt_mesh_slice(const dt_mesh *m, const int *dims, int n, dt_mesh **out) {
  int shape[DT_MESH_MAX_DIMS], used = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] >= m->ndim) return dt_error("DeviceMesh: slice: no mesh dim %d", dims[i] + 1);
    if ((used >> dims[i]) & 1) return dt_error("DeviceMesh: slice: mesh dim %d named twice", dims[i] + 1);
    used |= 1 << dims[i];
    shape[i] = m->shape[dims[i]];
  }
  dt_mesh *s = mesh_alloc(n, shape, m->device_type);
  if (!s) return dt_error("DeviceMesh: out of memory");
  int c[DT_MESH_MAX_DIMS];
  for (int idx = 0; idx < s->size; idx++) {
    dt_mesh_coord_of(s, idx, c);
    int pc[DT_MESH_MAX_DIMS];
    memcpy(pc, m->coord, sizeof pc);
    for (int i = 0; i < n; i++) pc[dims[i]] = c[i];
    s->ranks[idx] = m->ranks[index_of(m, pc)];
  }
  for (int i = 0; i < n; i++) {
    strcpy(s->names[i], m->names[dims[i]]);
    s->coord[i] = m->coord[dims[i]];
  }
  if (m->me >= 0) s->me = index_of(s, s->coord);
  for (int mask = 1; mask < 1 << n; mask++) {
    int pmask = 0;
    for (int i = 0; i < n; i++)
      if ((mask >> i) & 1) pmask |= 1 << dims[i];
    s->groups[mask] = m->groups[pmask];
  }
  *out = s;
  return DT_OK;
}

int dt_mesh_flatten(const dt_mesh *m, const char *name, dt_mesh **out) {
  if (name && strlen(name) >= DT_MESH_NAME_LEN) return dt_error("DeviceMesh: flatten: name '%s' is too long", name);
  dt_mesh *f = mesh_alloc(1, &m->size, m->device_type);
  if (!f) return dt_error("DeviceMesh: out of memory");
  memcpy(f->ranks, m->ranks, sizeof(int) * (size_t)m->size);
  strcpy(f->names[0], name ? name : "");
  f->me = m->me;
  f->coord[0] = m->me >= 0 ? m->me : 0;
  f->groups[1] = m->groups[(1 << m->ndim) - 1];
  *out = f;
  return DT_OK;
}

int dt_mesh_dim_by_name(const dt_mesh *m, const char *name) {
  for (int i = 0; i < m->ndim; i++)
    if (m->names[i][0] && strcmp(m->names[i], name) == 0) return i;
  return -1;
}

int dt_mesh_equal(const dt_mesh *a, const dt_mesh *b) {
  if (a == b) return 1;
  if (a->ndim != b->ndim || strcmp(a->device_type, b->device_type)) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i] || strcmp(a->names[i], b->names[i])) return 0;
  return memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->size) == 0;
}

int dt_mesh_group_rank_of(const dt_mesh *m, int d, int c) {
  int pc[DT_MESH_MAX_DIMS];
  memcpy(pc, m->coord, sizeof pc);
  pc[d] = c;
  const dt_group_entry *e = m->groups[1 << d];
  int w = m->ranks[index_of(m, pc)];
  for (int i = 0; i < e->n; i++)
    if (e->ranks[i] == w) return i;
  return -1;
}

/* The nested list of ranks from position *idx over dims d.. */
static size_t format_dims(const dt_mesh *m, int d, int *idx, char *buf, size_t len, size_t pos) {
#define PUT(...) pos += (size_t)snprintf(buf + (pos < len ? pos : len), pos < len ? len - pos : 0, __VA_ARGS__)
  if (d == m->ndim) {
    PUT("%d", m->ranks[(*idx)++]);
    return pos;
  }
  PUT("[");
  for (int i = 0; i < m->shape[d]; i++) {
    if (i) PUT(", ");
    pos = format_dims(m, d + 1, idx, buf, len, pos);
  }
  PUT("]");
  return pos;
}

char *dt_mesh_format(const dt_mesh *m, char *buf, size_t len) {
  int idx = 0;
  size_t pos = 0;
  PUT("DeviceMesh('%s', ", m->device_type);
  pos = format_dims(m, 0, &idx, buf, len, pos);
  if (m->names[0][0]) {
    PUT(", mesh_dim_names=(");
    for (int i = 0; i < m->ndim; i++) PUT("%s'%s'", i ? ", " : "", m->names[i]);
    PUT(m->ndim == 1 ? ",)" : ")");
  }
  PUT(")");
#undef PUT
  return buf;
}
