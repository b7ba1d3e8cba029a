/* Strided blocks (dt_comm_block): copying between two layouts, and the packing that the
 * front (comm.c) does around the contiguous _v forms for backends without the block forms. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/blocks.h"
#include "base/stream_copy.h"
#include "tensor/block_cache.h"

size_t dt_comm_block_numel(const dt_comm_block *b) { return b->rows * b->cols; }

void dt_comm_block_copy_as(void *dst, const dt_comm_block *db, const void *src, const dt_comm_block *sb, size_t esz,
                           dt_block_copy_kind kind) {
  int strided = db->rows > 1 || sb->rows > 1, stream = kind == DT_BLOCK_COPY_STREAM;
  void *(*copy)(void *, const void *, size_t) = stream ? dt_stream_memcpy
                                                : kind == DT_BLOCK_COPY_ROWS && strided ? dt_row_copy : memcpy;
  char *d = (char *)dst + db->offset * esz;
  const char *s = (const char *)src + sb->offset * esz;
  if (db->cols == sb->cols) { /* row for row (the common case) */
    for (size_t r = 0; r < db->rows; r++) copy(d + r * db->stride * esz, s + r * sb->stride * esz, db->cols * esz);
  } else { /* different row lengths: walk both, copying the longest run that stays in a row of each */
    size_t left = dt_comm_block_numel(db), dr = 0, dc = 0, sr = 0, sc = 0;
    while (left) {
      size_t run = db->cols - dc < sb->cols - sc ? db->cols - dc : sb->cols - sc;
      copy(d + (dr * db->stride + dc) * esz, s + (sr * sb->stride + sc) * esz, run * esz);
      left -= run, dc += run, sc += run;
      if (dc == db->cols) dr++, dc = 0;
      if (sc == sb->cols) sr++, sc = 0;
    }
  }
  if (stream) dt_stream_fence();
}

void dt_comm_block_copy(void *dst, const dt_comm_block *db, const void *src, const dt_comm_block *sb, size_t esz) {
  dt_comm_block_copy_as(dst, db, src, sb, esz, DT_BLOCK_COPY_PLAIN);
}

int dt_comm_blocks_check(const dt_comm_block *b, int n, const char *who, const char *what) {
  for (int r = 0; r < n; r++)
    if (b[r].rows > 1 && b[r].cols && b[r].stride < b[r].cols)
      return dt_error("%s: %s block %d has rows of %zu elements %zu apart (they overlap)", who, what, r, b[r].cols,
                      b[r].stride);
  return DT_OK;
}

int dt_comm_blocks_consecutive(const dt_comm_block *b, int n) {
  size_t off = 0;
  for (int r = 0; r < n; off += dt_comm_block_numel(&b[r]), r++)
    if (dt_comm_block_numel(&b[r]) && (b[r].offset != off || (b[r].rows > 1 && b[r].stride != b[r].cols))) return 0;
  return 1;
}

/* A contiguous buffer of the blocks' elements in order (NULL: out of memory, dt_error set). */
size_t dt_comm_blocks_counts(const dt_comm_block *b, int n, size_t *counts) {
  size_t total = 0;
  for (int r = 0; r < n; r++) total += counts[r] = dt_comm_block_numel(&b[r]);
  return total;
}

void *dt_comm_blocks_packed(const void *buf, const dt_comm_block *b, int n, size_t esz, size_t *counts, const char *who,
                    int pack, size_t *capacity) {
  size_t total = dt_comm_blocks_counts(b, n, counts);
  char *p = dt_block_alloc(total * esz, capacity); /* a cached block: a fresh malloc faulted its pages in each call */
  if (!p) return dt_error("%s: out of memory packing %zu elements", who, total), NULL;
  size_t off = 0;
  for (int r = 0; pack && r < n; off += counts[r], r++) {
    dt_comm_block flat = {off, 1, counts[r], counts[r]};
    dt_comm_block_copy_as(p, &flat, buf, &b[r], esz, DT_BLOCK_COPY_ROWS);
  }
  return p;
}

void dt_comm_blocks_unpack(void *buf, const dt_comm_block *b, int n, size_t esz, const void *p, const size_t *counts) {
  size_t off = 0;
  for (int r = 0; r < n; off += counts[r], r++) {
    dt_comm_block flat = {off, 1, counts[r], counts[r]};
    dt_comm_block_copy_as(buf, &b[r], p, &flat, esz, DT_BLOCK_COPY_ROWS);
  }
}

int dt_comm_all_gather_through_v(dt_comm *c, const void *send, void *recv, const dt_comm_block *blocks, dt_dtype dt,
                                 int (*gather_v)(dt_comm *, const void *, void *, const size_t *, dt_dtype)) {
  size_t esz = dt_dtype_size(dt), cap = 0, *counts = malloc(sizeof(size_t) * (size_t)c->size);
  if (!counts) return dt_error("all_gather: out of memory");
  int as_is = dt_comm_blocks_consecutive(blocks, c->size), st = DT_ERR;
  dt_comm_blocks_counts(blocks, c->size, counts);
  void *r = as_is ? recv : dt_comm_blocks_packed(recv, blocks, c->size, esz, counts, "all_gather", 0, &cap);
  if (r) st = gather_v(c, send, r, counts, dt);
  if (st == DT_OK && !as_is) dt_comm_blocks_unpack(recv, blocks, c->size, esz, r, counts);
  if (!as_is) dt_block_free(r, cap);
  free(counts);
  return st;
}
