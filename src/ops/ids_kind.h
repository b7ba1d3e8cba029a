/* Which 1-based index values ids_to_zero_based checks (its ints[3]): the names its errors
 * use, so a replayed graph raises what the Lua function would ("embedding: id 11 out of
 * range for vocab size 10 (ids are 1-based: 1..10)"). */
#ifndef DT_OPS_IDS_KIND_H
#define DT_OPS_IDS_KIND_H

typedef enum dt_ids_kind {
  DT_IDS_EMBEDDING,             /* embedding ids against the vocab size */
  DT_IDS_CROSS_ENTROPY,         /* cross_entropy targets against the classes */
  DT_IDS_CROSS_ENTROPY_BACKWARD /* the same for cross_entropy_backward */
} dt_ids_kind;

/* The function, the values' name and the range's wording (one %lld for hi) of a kind;
 * DT_ERR (and an error) for an unknown kind. */
int dt_ids_kind_names(long long kind, const char **op, const char **what, const char **range);

#endif
