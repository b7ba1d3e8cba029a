/* CommDebugMode: while a dt.comm_debug region is open on a rank, every collective run on a
 * communicator of its context (the world and every group, src/distributed/context.c) is
 * recorded with its name, the bytes of this rank's send buffer and the group size.  The
 * recording is the communicators' observer (src/comm/comm.h), so it happens once, in the
 * collectives' wrappers; metadata exchanges inside one call (dt.distributed.all_gather_v's
 * sizes, scatter's shape, the RNG tracker's agreement, the REPL's lines) pause the observer
 * and are not counted.  The records hang off the per-rank context. */
#ifndef DT_DISTRIBUTED_COMM_DEBUG_H
#define DT_DISTRIBUTED_COMM_DEBUG_H

#include "base/export.h"

#include <stddef.h>

#include "distributed/context.h"

typedef struct dt_comm_record {
  const char *name; /* a static string: "all_gather", "all_reduce", ... */
  size_t bytes;
  int group_size;
} dt_comm_record;

typedef struct dt_comm_debug {
  int depth; /* open regions; records are kept while > 0 */
  dt_comm_record *ops;
  int n, cap;
} dt_comm_debug;

/* Every collective name a region reports (zero when unused), NULL-terminated. */
extern DT_API const char *const dt_comm_debug_names[];

/* The observer the context installs on its communicators (ud: the dt_context): records one
 * collective if a region is open (out of memory drops the record). */
DT_API void dt_comm_debug_observe(void *ctx, const char *name, size_t bytes, int group_size);
/* Opens a region; returns the index its records start at. */
DT_API int dt_comm_debug_begin(dt_context *ctx);
/* Closes a region opened at start (records stay readable until the outermost one closes and a
 * new one begins). */
DT_API void dt_comm_debug_end(dt_context *ctx);
DT_API void dt_comm_debug_free(dt_comm_debug *d);

#endif
