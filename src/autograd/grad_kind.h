/* The kind of a plain gradient: what each rank's local value is, relative to the other ranks
 * of each mesh dim, along the stretch of graph between a dt.from_local and the to_local (or
 * full_tensor) that made its local tensor (doc/autograd-dtensor.md).
 *
 * A local tensor taken from a Replicate DTensor may feed computations whose gradients are the
 * whole gradient on every rank (from_local with Replicate: the ranks computed the same thing)
 * or each rank's contribution (from_local with Shard or Partial: the ranks computed different
 * parts, so the gradient is the sum over the ranks).  Only the graph knows which; the engine
 * carries a kind with every plain gradient it holds (OR-ed where gradients add, passed
 * through op nodes) so that to_local's backward can choose Replicate or Partial(sum). */
#ifndef DT_AUTOGRAD_GRAD_KIND_H
#define DT_AUTOGRAD_GRAD_KIND_H

#include "distributed/mesh.h"
#include "distributed/placement.h"

typedef struct dt_grad_kind {
  dt_mesh *mesh;   /* retained: the mesh the bits refer to (NULL: no bit set) */
  unsigned whole;  /* bit d: every rank of mesh dim d holds the whole gradient (from_local, Replicate) */
  unsigned summed; /* bit d: every rank holds the whole gradient of a sum it contributed to
                    * (from_local, Partial): the ranks' gradients add up for a shared source */
  unsigned parts;  /* bit d: each rank holds the gradient of its own part (from_local, Shard; or a
                    * gradient taken as Partial: each rank holds a share) */
  int root;        /* a plain root's gradient reached it: the same loss on every rank, so whole
                    * on every dim of every mesh */
  int foreign;     /* bits came from a second mesh, not comparable with the first's */
} dt_grad_kind;

void dt_grad_kind_clear(dt_grad_kind *k);
/* dst |= src (gradients added); bits of a different mesh make dst foreign. */
void dt_grad_kind_merge(dt_grad_kind *dst, const dt_grad_kind *src);
/* k becomes the kind of the local part of a gradient redistributed to grad_p, for a
 * from_local with placements fwd_p (both normalised) on mesh m.  Mesh dims of size 1 set
 * nothing: one rank is every kind at once. */
void dt_grad_kind_set_from_local(dt_grad_kind *k, dt_mesh *m, const dt_placement *fwd_p, const dt_placement *grad_p);
/* k becomes whole on every dim of m (a DTensor gradient gathered for a plain input). */
void dt_grad_kind_set_whole(dt_grad_kind *k, dt_mesh *m);
/* The placements of the gradient of a DTensor with placements xp on mesh m made from the
 * gradient of its local part, of kind k: Shard stays; Replicate becomes Partial(sum) where
 * the ranks hold contributions, else stays; Partial becomes Replicate (the local gradient of
 * a sum's part is the gradient of the sum).  An error (op names the call: "to_local") where
 * the kind cannot say, naming the grad_placements to pass.  The same on every rank: kinds
 * come from the graph and the placements, which every rank shares. */
int dt_grad_kind_placements(const dt_grad_kind *k, const dt_mesh *m, const dt_placement *xp, dt_placement *out,
                            const char *op);

#endif
