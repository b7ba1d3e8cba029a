/* Helpers for the strided-block collectives (dt_comm_block, comm.h), internal to src/comm. */
#ifndef DT_COMM_BLOCKS_H
#define DT_COMM_BLOCKS_H

#include "comm/comm.h"

size_t dt_comm_block_numel(const dt_comm_block *b);
typedef enum {
  DT_BLOCK_COPY_PLAIN,  /* memcpy */
  DT_BLOCK_COPY_STREAM, /* non-temporal stores (stream_copy.h; fenced at the end) */
  DT_BLOCK_COPY_ROWS    /* the rows of a strided block by dt_row_copy, a single run by memcpy */
} dt_block_copy_kind;
/* dt_comm_block_copy, the copies made as kind says. */
void dt_comm_block_copy_as(void *dst, const dt_comm_block *db, const void *src, const dt_comm_block *sb, size_t esz,
                           dt_block_copy_kind kind);
/* DT_OK, or DT_ERR naming who, what ("send", "recv") and the block whose rows overlap. */
int dt_comm_blocks_check(const dt_comm_block *b, int n, const char *who, const char *what);
/* The blocks are already the contiguous layout of the _v forms: one after another from 0. */
int dt_comm_blocks_consecutive(const dt_comm_block *b, int n);
/* counts[r] = block r's elements; returns their sum. */
size_t dt_comm_blocks_counts(const dt_comm_block *b, int n, size_t *counts);
/* A contiguous buffer for the n blocks' elements in order, filled from buf when pack (NULL:
 * out of memory, dt_error set); counts[r] = block r's elements.  From the block cache: give it
 * back with dt_block_free(p, *capacity). */
void *dt_comm_blocks_packed(const void *buf, const dt_comm_block *b, int n, size_t esz, size_t *counts, const char *who,
                            int pack, size_t *capacity);
/* The reverse: the contiguous p (counts[r] elements per block) into the blocks of buf. */
void dt_comm_blocks_unpack(void *buf, const dt_comm_block *b, int n, size_t esz, const void *p, const size_t *counts);
/* An all_gather into strided blocks made by gather_v (the front's dt_comm_all_gather_v, or a
 * backend's own _v form): straight into recv when the blocks are one run, else through a packed
 * buffer unpacked after. */
int dt_comm_all_gather_through_v(dt_comm *c, const void *send, void *recv, const dt_comm_block *blocks, dt_dtype dt,
                                 int (*gather_v)(dt_comm *, const void *, void *, const size_t *, dt_dtype));

#endif
