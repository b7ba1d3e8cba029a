/* Placements: how a tensor sits on one mesh dim -- Shard(dim), Replicate(), Partial(op), and
 * PyTorch's internal _StridedShard(dim, split): the dim seen as (split, size / split), the inner
 * part chunked over the mesh dim, each rank holding its chunk of every one of the split blocks
 * (what flattening a non-leading sharded dim gives without moving data). */
#ifndef DT_DISTRIBUTED_PLACEMENT_H
#define DT_DISTRIBUTED_PLACEMENT_H

#include "base/export.h"

#include <stddef.h>

#include "base/reduce_op.h"

typedef enum dt_place_kind { DT_REPLICATE, DT_SHARD, DT_PARTIAL, DT_STRIDED_SHARD } dt_place_kind;

typedef struct dt_placement {
  dt_place_kind kind;
  int dim;         /* Shard, _StridedShard: the tensor dim (0-based in a spec; as written by the user before) */
  dt_reduce_op op; /* Partial */
  int split;       /* _StridedShard: the split factor (>= 1); 0 for the other kinds */
} dt_placement;

/* The largest split factor: the dispatcher's key packs it in 24 bits. */
#define DT_STRIDED_MAX_SPLIT ((1 << 24) - 1)

DT_API int dt_placement_equal(dt_placement a, dt_placement b);
/* Lists of n placements, element by element. */
DT_API int dt_placements_equal(const dt_placement *a, const dt_placement *b, int n);
/* "Shard(2)" (dims shown 1-based), "Replicate()", "Partial(sum)", "_StridedShard(dim=1, sf=4)". */
DT_API char *dt_placement_format(dt_placement p, char *buf, size_t len);
/* "(Shard(1), Replicate())" for a list. */
DT_API char *dt_placements_format(const dt_placement *p, int n, char *buf, size_t len);
/* Shorthand "S1", "S-1", "R", "P", "P(max)": the dim as written (1-based or negative). */
DT_API int dt_placement_parse(const char *s, dt_placement *out);

#endif
