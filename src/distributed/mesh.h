/* DeviceMesh: world ranks laid out row-major over an N-d shape, with optional dim names
 * and one communicator per (subset of) mesh dims.  Groups are collective to create under
 * MPI, so every group a slice or a flatten can need is created when the mesh is built
 * (every world rank builds the mesh, SPMD, as in PyTorch); sub-meshes share them. */
#ifndef DT_DISTRIBUTED_MESH_H
#define DT_DISTRIBUTED_MESH_H

#include "base/export.h"

#include <stdatomic.h>

#include "distributed/context.h"

#define DT_MESH_MAX_DIMS 4
#define DT_MESH_NAME_LEN 32

typedef struct dt_mesh {
  atomic_int refcount;
  int ndim, size;
  int shape[DT_MESH_MAX_DIMS];
  int *ranks; /* size world ranks, row-major over shape (owned) */
  char names[DT_MESH_MAX_DIMS][DT_MESH_NAME_LEN]; /* "" when unnamed */
  char device_type[16];
  int me;                           /* this rank's index in ranks, -1 off-mesh */
  int coord[DT_MESH_MAX_DIMS];      /* this rank's coordinates (0 off-mesh) */
  /* groups[mask]: this rank's group over the mesh dims in the bit mask (ranks that share
   * the coordinates outside it); off-mesh ranks get the one at coordinates 0. */
  const dt_group_entry *groups[1 << DT_MESH_MAX_DIMS];
} dt_mesh;

/* A mesh over `ranks` (world ranks, row-major over shape); names may be NULL or hold
 * NULL/"" entries.  Collective over the world (creates the groups). */
DT_API int dt_mesh_new(dt_context *ctx, const char *device, int ndim, const int *shape, const int *ranks,
                const char *const *names, dt_mesh **out);
DT_API void dt_mesh_retain(dt_mesh *m);
DT_API void dt_mesh_release(dt_mesh *m);
/* The sub-mesh over dims[0..n) (0-based, distinct, any order) containing this rank. */
DT_API int dt_mesh_slice(const dt_mesh *m, const int *dims, int n, dt_mesh **out);
/* A 1-d mesh over every rank of m, named name (may be NULL). */
DT_API int dt_mesh_flatten(const dt_mesh *m, const char *name, dt_mesh **out);
/* The dim called name, or -1. */
DT_API int dt_mesh_dim_by_name(const dt_mesh *m, const char *name);
/* Same layout, shape and names. */
DT_API int dt_mesh_equal(const dt_mesh *a, const dt_mesh *b);
/* This rank's communicator over mesh dim d (NULL off-mesh). */
static inline dt_comm *dt_mesh_comm(const dt_mesh *m, int d) { return m->groups[1 << d]->comm; }
/* Coordinates of position idx of the layout (row-major). */
DT_API void dt_mesh_coord_of(const dt_mesh *m, int idx, int *coord);
/* Coordinates of world rank w (which must be in the mesh). */
DT_API void dt_mesh_coord_of_rank(const dt_mesh *m, int w, int *coord);
/* The rank of the group over dim d holding coordinate c along d (groups sort ranks). */
DT_API int dt_mesh_group_rank_of(const dt_mesh *m, int d, int c);
/* "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))" into buf. */
DT_API char *dt_mesh_format(const dt_mesh *m, char *buf, size_t len);

#endif
