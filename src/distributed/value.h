/* The value a user holds: a tensor, or a DTensor (this rank's local shard + its spec).
 * Every op call takes and returns values (src/call/call.h); autograd metadata and, through
 * the local tensor's storage, the device hang off the same value.  A value is plain data
 * that its owner embeds (the Lua userdata is one) or allocates: init takes ownership of
 * local and spec, clear releases them and is idempotent. */
#ifndef DT_DISTRIBUTED_VALUE_H
#define DT_DISTRIBUTED_VALUE_H

#include "base/export.h"

#include "distributed/dtensor.h"

/* The value's autograd metadata (src/autograd/grad_meta.h embeds this link first): the
 * value holds one reference, which dt_value_clear drops through release, so this layer
 * frees what a layer above it attached without knowing it. */
typedef struct dt_autograd_link {
  void (*release)(struct dt_autograd_link *self);
} dt_autograd_link;

typedef struct dt_value {
  dt_tensor *local;            /* owned: the tensor itself, or this rank's shard ({0} off the mesh) */
  dt_dspec *spec;              /* owned; NULL for a plain tensor */
  dt_autograd_link *autograd;  /* requires_grad, .grad, grad_fn; NULL for a value autograd never saw */
} dt_value;

static inline void dt_value_init(dt_value *v, dt_tensor *local, dt_dspec *spec) {
  v->local = local, v->spec = spec, v->autograd = NULL;
}
DT_API void dt_value_clear(dt_value *v);

static inline int dt_value_is_dtensor(const dt_value *v) { return v->spec != NULL; }
/* What the user sees: the global metadata of a DTensor, the tensor's own otherwise. */
static inline int dt_value_ndim(const dt_value *v) { return v->spec ? v->spec->ndim : v->local->ndim; }
static inline const int64_t *dt_value_shape(const dt_value *v) { return v->spec ? v->spec->shape : v->local->shape; }
static inline dt_dtype dt_value_dtype(const dt_value *v) { return v->spec ? v->spec->dtype : v->local->dtype; }
static inline int64_t dt_value_numel(const dt_value *v) { return dt_shape_numel(dt_value_ndim(v), dt_value_shape(v)); }

#endif
