/* Kinds of plain gradients (see grad_kind.h). */
#include "autograd/grad_kind.h"

#include <string.h>

#include "base/error.h"

void dt_grad_kind_clear(dt_grad_kind *k) {
  if (k->mesh) dt_mesh_release(k->mesh);
  memset(k, 0, sizeof *k);
}

static void take_mesh(dt_grad_kind *k, dt_mesh *m) {
  dt_mesh_retain(m);
  k->mesh = m;
}

void dt_grad_kind_merge(dt_grad_kind *dst, const dt_grad_kind *src) {
  dst->root |= src->root;
  dst->foreign |= src->foreign;
  if (!src->mesh) return;
  if (!dst->mesh) take_mesh(dst, src->mesh);
  else if (dst->mesh != src->mesh && !dt_mesh_equal(dst->mesh, src->mesh)) {
    dst->foreign = 1;
    return;
  }
  dst->whole |= src->whole, dst->summed |= src->summed, dst->parts |= src->parts;
}

void dt_grad_kind_set_from_local(dt_grad_kind *k, dt_mesh *m, const dt_placement *fwd_p, const dt_placement *grad_p) {
  dt_grad_kind_clear(k);
  for (int d = 0; d < m->ndim; d++) {
    if (m->shape[d] == 1) continue;
    unsigned bit = 1u << d;
    if (grad_p[d].kind != DT_REPLICATE) k->parts |= bit; /* a shard, or a share of a Partial */
    else if (fwd_p[d].kind == DT_PARTIAL) k->summed |= bit;
    else k->whole |= bit;
  }
  if (k->whole | k->summed | k->parts) take_mesh(k, m);
}

void dt_grad_kind_set_whole(dt_grad_kind *k, dt_mesh *m) {
  dt_grad_kind_clear(k);
  for (int d = 0; d < m->ndim; d++)
    if (m->shape[d] > 1) k->whole |= 1u << d;
  if (k->whole) take_mesh(k, m);
}

/* xp with mesh dim d set to a and to b, as the two lists an error proposes. */
static void proposals(const dt_mesh *m, const dt_placement *xp, int d, dt_placement a, dt_placement b, char *pa,
                      char *pb, size_t len) {
  dt_placement p[DT_MESH_MAX_DIMS];
  memcpy(p, xp, sizeof(dt_placement) * (size_t)m->ndim);
  for (int i = 0; i < m->ndim; i++)
    if (p[i].kind == DT_PARTIAL) p[i] = (dt_placement){.kind = DT_REPLICATE};
  p[d] = a;
  dt_placements_format(p, m->ndim, pa, len);
  p[d] = b;
  dt_placements_format(p, m->ndim, pb, len);
}

int dt_grad_kind_placements(const dt_grad_kind *k, const dt_mesh *m, const dt_placement *xp, dt_placement *out,
                            const char *op) {
  const dt_placement R = {.kind = DT_REPLICATE}, P = {.kind = DT_PARTIAL, .op = DT_REDUCE_SUM};
  int same = !k->foreign && (!k->mesh || dt_mesh_equal(k->mesh, m));
  char pa[256], pb[256], mesh[1024];
  for (int d = 0; d < m->ndim; d++) {
    out[d] = xp[d].kind == DT_PARTIAL ? R : xp[d];
    if (xp[d].kind == DT_SHARD || m->shape[d] == 1) continue;
    unsigned bit = 1u << d;
    int whole = k->root || (same && (k->whole & bit)), contrib = same && ((k->summed | k->parts) & bit);
    if (!same) {
      proposals(m, xp, d, R, P, pa, pb, sizeof pa);
      return dt_error("%s: backward: the gradient of the local part came through dt.from_local on another mesh "
                      "than this DTensor's %s, so the ranks of its mesh dim %d may hold the whole gradient or "
                      "contributions to it; pass grad_placements = %s if every rank holds the whole gradient, or %s "
                      "if the ranks' gradients add up to it", op, dt_mesh_format(m, mesh, sizeof mesh), d + 1, pa, pb);
    }
    if (xp[d].kind == DT_PARTIAL) {
      if (!(k->parts & bit)) continue; /* the gradient of a sum's part is the gradient of the sum */
      proposals(m, xp, d, R, P, pa, pb, sizeof pa);
      return dt_error("%s: backward: the DTensor is Partial on mesh dim %d and its local part fed dt.from_local with "
                      "Shard there (or a gradient taken as Partial): each rank's gradient is of its own part, so the "
                      "loss depends on how the sum is split among the ranks, not on the DTensor; pass grad_placements "
                      "= %s if every rank's gradient is the whole gradient, or %s if they add up to it", op, d + 1,
                      pa, pb);
    }
    if (whole && contrib) {
      proposals(m, xp, d, R, P, pa, pb, sizeof pa);
      return dt_error("%s: backward: on mesh dim %d (Replicate()) the gradient of the local part adds whole "
                      "gradients (from dt.from_local with Replicate, or a loss that is the same on every rank) to "
                      "per-rank contributions (from dt.from_local with Shard or Partial), and no placement describes "
                      "that sum: call to_local once per use (each then takes its own use's kind), or pass "
                      "grad_placements = %s to the one whose gradient is whole and %s to the one whose ranks' "
                      "gradients add up", op, d + 1, pa, pb);
    }
    if (contrib) out[d] = P;
  }
  return DT_OK;
}
