/* The value -> slot map of a recording (see graph_impl.h). */
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "capture/graph_impl.h"

/* ---- the value -> slot map (open addressing on the value's and its local tensor's addresses).
 * A value is known by (value, local tensor); a tensor alone finds the last slot that held it,
 * for a userdata whose contents were swapped in (1-based index results).  Two values may share
 * a local tensor (full_tensor of a replicated DTensor returns its shard), hence the pair. ---- */
static size_t hash_key(const void *v, const void *t, int cap) {
  uint64_t h = ((uint64_t)(uintptr_t)v * 31 + (uint64_t)(uintptr_t)t) >> 4;
  return (size_t)(h * 0x9E3779B97F4A7C15ull >> 20) & (size_t)(cap - 1);
}

int dt_slotmap_get(const dt_graph *g, const dt_value *v, const dt_tensor *t) {
  if (!g->mapcap) return MISSING;
  for (size_t i = hash_key(v, t, g->mapcap);; i = (i + 1) & (size_t)(g->mapcap - 1)) {
    if (!g->map[i].t) return MISSING;
    if (g->map[i].t == t && g->map[i].v == v) return g->map[i].slot;
  }
}

int dt_slotmap_find(const dt_graph *g, const dt_value *v) {
  int s = dt_slotmap_get(g, v, v->local);
  return s != MISSING ? s : dt_slotmap_get(g, TENSOR_KEY(v), v->local);
}

int dt_slotmap_set(dt_graph *g, const dt_value *v, dt_tensor *t, int slot) {
  if (2 * (g->mapn + 1) > g->mapcap) {
    int cap = g->mapcap ? 2 * g->mapcap : 64;
    tmap_entry *m = calloc((size_t)cap, sizeof *m);
    if (!m) return dt_error("compile: out of memory");
    for (int i = 0; i < g->mapcap; i++) {
      if (!g->map[i].t) continue;
      size_t j = hash_key(g->map[i].v, g->map[i].t, cap);
      while (m[j].t) j = (j + 1) & (size_t)(cap - 1);
      m[j] = g->map[i];
    }
    free(g->map);
    g->map = m, g->mapcap = cap;
  }
  size_t j = hash_key(v, t, g->mapcap);
  while (g->map[j].t && !(g->map[j].t == t && g->map[j].v == v)) j = (j + 1) & (size_t)(g->mapcap - 1);
  if (!g->map[j].t) {
    g->mapn++;
    if (IS_TENSOR_KEY(v)) dt_tensor_retain(t); /* an address is never reused while recording */
  }
  g->map[j] = (tmap_entry){v, t, slot};
  return DT_OK;
}

int dt_slotmap_put(dt_graph *g, const dt_value *v, int slot) {
  if (dt_slotmap_set(g, TENSOR_KEY(v), v->local, slot) != DT_OK) return DT_ERR;
  return dt_slotmap_set(g, v, v->local, slot);
}

void dt_slotmap_free(dt_graph *g) {
  for (int i = 0; i < g->mapcap; i++)
    if (g->map[i].t && IS_TENSOR_KEY(g->map[i].v)) dt_tensor_release(g->map[i].t);
  free(g->map);
  g->map = NULL, g->mapcap = g->mapn = 0;
}
