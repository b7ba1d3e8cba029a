/* The file side of a sharded checkpoint (dt.checkpoint): every rank writes its shard file
 * into a shared temporary directory, maybe on a background thread, and the last rank to
 * finish swaps the directory in.  No collective here: "last" is decided through marker
 * files, so a save still commits when the program ends while it is in flight. */
#ifndef DT_IO_CHECKPOINT_FILES_H
#define DT_IO_CHECKPOINT_FILES_H

#include "base/export.h"
#include "io/safetensors.h"

/* A fresh empty directory at path; a stale one (an interrupted save: files only) is removed first. */
DT_API int dt_dir_make_fresh(const char *path, const char *op);
/* Removes a directory that holds files only; a missing one is fine. */
DT_API int dt_dir_remove(const char *path, const char *op);
/* tmp becomes path: swapped atomically with an existing path (renameat2 RENAME_EXCHANGE,
 * or two renames where the file system cannot), whose old content is then removed. */
DT_API int dt_dir_commit(const char *tmp, const char *path, const char *op);

/* One rank's part of a save.  Strings are copied; tensors are retained until the writer is
 * freed (they must not change while it runs: pass private copies for an async save). */
typedef struct dt_shard_job {
  const char *tmp_dir, *final_dir;
  const char *file;       /* shard file name in tmp_dir, NULL when this rank writes no tensor */
  dt_safetensors shard;   /* the tensors of that file (sorted names) */
  const char *index_name; /* NULL, or a text file this rank writes too (the index) */
  const char *index_text;
  int rank, world;
} dt_shard_job;

typedef struct dt_shard_writer dt_shard_writer;

/* Runs the job inline (async = 0) or on a new thread; NULL + dt_error when it cannot start.
 * The job ends with this rank's marker; the rank whose marker completes the set commits. */
DT_API dt_shard_writer *dt_shard_writer_start(const dt_shard_job *job, int async, const char *op);
/* Waits for the job; DT_OK or DT_ERR with its message.  Idempotent. */
DT_API int dt_shard_writer_wait(dt_shard_writer *w);
/* Waits (if needed) and releases everything. */
DT_API void dt_shard_writer_free(dt_shard_writer *w);

#endif
