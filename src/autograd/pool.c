/* Zeroed blocks for the graph's small objects, recycled per thread (a rank is a thread, and a
 * graph lives and dies on its rank's thread): recording an op allocates a node, its saved
 * values and its outputs' metadata, and freeing them went to malloc every time, a third of
 * recording's cost.  Blocks up to POOL_MAX bytes come from one of a few size classes and go
 * back to their thread's free list (at most POOL_KEEP_BYTES per class: Lua's collector frees
 * the garbage of thousands of op calls at once); larger ones use calloc.
 * A thread's lists are freed when it exits. */
#include "autograd/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POOL_CLASSES 4
#define POOL_KEEP_BYTES ((size_t)4 << 20)
static const size_t class_size[POOL_CLASSES] = {128, 256, 512, 1024};
#define POOL_MAX 1024

typedef struct block {
  struct block *next;
} block;

typedef struct lists {
  block *head[POOL_CLASSES];
  int n[POOL_CLASSES];
} lists;

static _Thread_local lists *mine;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void free_lists(void *p) {
  lists *l = p;
  for (int c = 0; c < POOL_CLASSES; c++)
    while (l->head[c]) {
      block *b = l->head[c];
      l->head[c] = b->next;
      free(b);
    }
  free(l);
}

static void make_key(void) { pthread_key_create(&key, free_lists); }

static int class_of(size_t size) {
  for (int c = 0; c < POOL_CLASSES; c++)
    if (size <= class_size[c]) return c;
  return -1;
}

static lists *thread_lists(void) {
  if (mine) return mine;
  pthread_once(&key_once, make_key);
  if (!(mine = calloc(1, sizeof *mine))) return NULL;
  pthread_setspecific(key, mine); /* the key's destructor frees them at thread exit */
  return mine;
}

void *dt_pool_alloc(size_t size) {
  int c = class_of(size);
  if (c < 0) return calloc(1, size);
  lists *l = thread_lists();
  if (l && l->head[c]) {
    block *b = l->head[c];
    l->head[c] = b->next, l->n[c]--;
    memset(b, 0, size);
    return b;
  }
  return calloc(1, class_size[c]);
}

void dt_pool_free(void *p, size_t size) {
  if (!p) return;
  int c = class_of(size);
  lists *l = c >= 0 ? thread_lists() : NULL;
  if (!l || (size_t)l->n[c] * class_size[c] >= POOL_KEEP_BYTES) {
    free(p);
    return;
  }
  block *b = p;
  b->next = l->head[c], l->head[c] = b, l->n[c]++;
}
