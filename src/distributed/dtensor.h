/* The DTensor spec: mesh, one placement per mesh dim, global shape and dtype, and the
 * local shard geometry each rank derives from it.  Shards follow torch.chunk: a size L over
 * n ranks gives chunks of ceil(L/n), the last ones shorter or empty.  A tensor dim sharded
 * over several mesh dims is chunked in mesh-dim order (the first mesh dim outermost). */
#ifndef DT_DISTRIBUTED_DTENSOR_H
#define DT_DISTRIBUTED_DTENSOR_H

#include "base/export.h"

#include "distributed/mesh.h"
#include "distributed/placement.h"
#include "tensor/tensor.h"

typedef struct dt_dspec {
  dt_mesh *mesh; /* owned reference */
  dt_placement p[DT_MESH_MAX_DIMS]; /* mesh->ndim entries, Shard dims 0-based */
  int ndim;
  int64_t shape[DT_MAX_DIMS]; /* global */
  dt_dtype dtype;
} dt_dspec;

/* Chunk c of n of a size L: start and length (torch.chunk). */
DT_API void dt_chunk(int64_t L, int n, int c, int64_t *start, int64_t *len);
/* A spec retaining mesh; Shard dims as written by the user (1-based or negative) are
 * normalised.  Errors name the placements and the shape.  Free with dt_dspec_free. */
DT_API int dt_dspec_new(dt_mesh *mesh, const dt_placement *p, int ndim, const int64_t *shape, dt_dtype dtype,
                 const char *op, dt_dspec **out);
DT_API dt_dspec *dt_dspec_copy(const dt_dspec *s);
DT_API void dt_dspec_free(dt_dspec *s);
/* Local shape and global offset of the shard at mesh coordinates coord, with placements p
 * (so that planners can ask about intermediate states).  A _StridedShard's shard is no box:
 * its offset is the global index of its first element (the chunk's start inside the first
 * block it holds). */
DT_API void dt_dspec_local(const dt_dspec *s, const dt_placement *p, const int *coord, int64_t *shape, int64_t *offset);
/* The split factor of tensor dim d's _StridedShards in p (0: none; the smallest when several). */
DT_API int dt_dspec_split_of(const dt_placement *p, int nm, int d);
/* Tensor dim d's split levels: lv (n entries, ascending, lv[0] = 1) with the split factors of
 * d's _StridedShards in p merged in; returns the new count.  The dim of size L is seen as
 * parts (lv[1] / lv[0], ..., L / lv[n - 1]): a Shard chunks part 0, a _StridedShard(d, k) the
 * part that starts at level k (nested, in mesh-dim order, when several chunk one part). */
#define DT_STRIDED_MAX_LEVELS (2 * DT_MESH_MAX_DIMS + 1)
DT_API int dt_dspec_levels(const dt_placement *p, int nm, int d, int64_t *lv, int n);
/* The part of a Shard or _StridedShard p among levels lv (n entries); -1: not a level. */
DT_API int dt_dspec_level_of(const int64_t *lv, int n, dt_placement p);
/* Size of tensor dim d as seen by mesh dim m: chunked by the mesh dims before m that
 * shard d (at coord), not by m and later ones. */
DT_API int64_t dt_dspec_logical_size(const dt_dspec *s, const dt_placement *p, const int *coord, int d, int m);
/* This rank's local shape (an empty {0} off-mesh). */
DT_API void dt_dspec_my_local(const dt_dspec *s, int *ndim, int64_t *shape, int64_t *offset);
DT_API int dt_dspec_has_partial(const dt_placement *p, int n);
DT_API int dt_dspec_has_strided(const dt_placement *p, int n);
/* A tensor header with the spec's global shape, dtype and contiguous strides, no storage:
 * what shape rules read when an op is decided on global metadata. */
DT_API void dt_dspec_global_header(const dt_dspec *s, dt_tensor *g);
/* Writing a value v into a DTensor of spec s in place: does this rank hold v, or an identity?
 * On a Partial(sum) (Partial(product)) mesh dim only coordinate 0 holds v, the others 0 (1),
 * so that the pending sum (product) is v once (avg/max/min and the other placements hold v
 * everywhere).  A mesh rank only.  write_identity: -1 when this rank holds v, else the
 * number it holds instead (0 when off coordinate 0 of any Partial(sum) dim, else 1). */
DT_API int dt_dspec_holds_value(const dt_dspec *s);
DT_API int dt_dspec_write_identity(const dt_dspec *s);

#endif
