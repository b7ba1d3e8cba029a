/* The front door on DTensors without any Lua state: a threads world of 2 and of 4 ranks,
 * one dt_context per rank thread (as src/cli/launcher.c builds them), a 1-d mesh, DTensors
 * from dt_distribute_tensor, ops through dt_call, and dt_full_tensor compared on every rank
 * with the same op on plain tensors.  Also the DTensor API's round trips and the collectives
 * dt.comm_debug records through the communicators' observer. */
#include <string.h>

#include "base/error.h"
#include "call/call.h"
#include "distributed/comm_debug.h"
#include "distributed/dtensor_api.h"
#include "distributed/mesh.h"
#include "distributed/rng.h"
#include "ctest.h"
#include "spmd.h"

/* fn(ctx, m) on n ranks (tests/c/spmd.h) */
typedef struct rank_fn {
  int (*fn)(dt_context *, dt_mesh *);
} rank_fn;
static int call_plain(dt_context *ctx, dt_mesh *m, void *f) { return ((rank_fn *)f)->fn(ctx, m); }
static int spmd(int n, int (*fn)(dt_context *, dt_mesh *)) {
  rank_fn f = {fn};
  return spmd_run(n, call_plain, &f);
}

/* ---- helpers ---- */
static const dt_placement R = {DT_REPLICATE, 0, 0}, S0 = {DT_SHARD, 0, 0}, S1 = {DT_SHARD, 1, 0},
                          P = {DT_PARTIAL, 0, DT_REDUCE_SUM};

/* A 5x3 float32 tensor (5 rows: uneven over 2 and 4 ranks) of small integers, so that sums
 * in any order are exact. */
static dt_tensor *matrix(int seed) {
  int64_t shape[2] = {5, 3};
  dt_tensor *t = dt_tensor_empty(DT_FLOAT32, 2, shape, DT_CPU);
  float *p = t ? dt_tensor_data(t) : NULL;
  for (int i = 0; p && i < 15; i++) p[i] = (float)((i * 7 + seed * 3) % 11) - 5;
  return t;
}

static int same(const dt_tensor *a, const dt_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || a->dtype != b->dtype || !dt_tensor_is_contiguous(a) ||
      !dt_tensor_is_contiguous(b))
    return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return memcmp(dt_tensor_data(a), dt_tensor_data(b), (size_t)dt_tensor_numel(a) * dt_dtype_size(a->dtype)) == 0;
}

/* op on two (or one) values through the front door; the output value in *out. */
static int call(dt_context *ctx, dt_op_id op, dt_op_args *a, dt_value *x, dt_value *y, dt_value *out) {
  dt_value *in[2] = {x, y}, *outs[1] = {out};
  return dt_call(ctx, op, a, in, y ? 2 : 1, outs) == DT_OK;
}

/* dt_full_tensor(d) equals the plain value p on this rank. */
static int full_equals(dt_context *ctx, const dt_value *d, const dt_value *p) {
  dt_tensor *full = NULL;
  int ok = dt_full_tensor(ctx, d, &full) == DT_OK && same(full, p->local);
  dt_tensor_release(full);
  return ok;
}

/* A plain value holding t (retained). */
static dt_value plain(dt_tensor *t) {
  dt_value v;
  dt_tensor_retain(t);
  dt_value_init(&v, t, NULL);
  return v;
}

/* ---- cases ---- */
/* add and sum (all dims, one dim) on DTensors of several placements equal the plain ops. */
static int add_and_sum(dt_context *ctx, dt_mesh *m) {
  const dt_placement pairs[][2] = {{S0, S0}, {S0, R}, {S1, S0}, {R, P}, {P, S1}};
  dt_tensor *x = matrix(1), *y = matrix(2);
  dt_value px = plain(x), py = plain(y);
  int ok = x && y;
  for (size_t i = 0; ok && i < sizeof pairs / sizeof pairs[0]; i++) {
    dt_value dx, dy, dz, pz, ds, ps, dd, pd;
    /* only rank 0's tensors travel: the others pass NULL */
    ok = dt_distribute_tensor(ctx, ctx->rank == 0 ? x : NULL, m, &pairs[i][0], 0, &dx) == DT_OK;
    ok = ok && dt_distribute_tensor(ctx, ctx->rank == 0 ? y : NULL, m, &pairs[i][1], 0, &dy) == DT_OK;
    if (!ok) break;
    dt_op_args add = {0};
    ok = call(ctx, DT_OP_ADD, &add, &dx, &dy, &dz);
    dt_op_args padd = {0};
    ok = ok && call(ctx, DT_OP_ADD, &padd, &px, &py, &pz);
    ok = ok && dt_value_is_dtensor(&dz) && full_equals(ctx, &dz, &pz);
    dt_op_args all = {.flags = DT_ARG_ALL_DIMS}, pall = {.flags = DT_ARG_ALL_DIMS};
    ok = ok && call(ctx, DT_OP_SUM, &all, &dz, NULL, &ds) && call(ctx, DT_OP_SUM, &pall, &pz, NULL, &ps);
    ok = ok && full_equals(ctx, &ds, &ps);
    dt_op_args dim = {.ints = {1}, .nints = 1}, pdim = {.ints = {1}, .nints = 1};
    ok = ok && call(ctx, DT_OP_SUM, &dim, &dx, NULL, &dd) && call(ctx, DT_OP_SUM, &pdim, &px, NULL, &pd);
    ok = ok && full_equals(ctx, &dd, &pd);
    if (ok) dt_value_clear(&dd), dt_value_clear(&pd), dt_value_clear(&ds), dt_value_clear(&ps);
    if (ok) dt_value_clear(&dz), dt_value_clear(&pz);
    dt_value_clear(&dx), dt_value_clear(&dy);
  }
  dt_value_clear(&px), dt_value_clear(&py);
  dt_tensor_release(x), dt_tensor_release(y);
  return ok;
}

/* from_local of to_local, redistribute and local chunking give back the same tensor. */
static int round_trips(dt_context *ctx, dt_mesh *m) {
  dt_tensor *x = matrix(3), *local = NULL, *full = NULL;
  dt_value d, back, moved, chunked;
  int ok = dt_distribute_tensor(ctx, x, m, &S0, DT_SRC_LOCAL, &chunked) == DT_OK;
  if (!ok) return dt_tensor_release(x), 0;
  ok = dt_to_local(&chunked, &local) == DT_OK;
  ok = ok && dt_from_local(ctx, local, m, &S0, 1, 2, chunked.spec->shape, &back) == DT_OK;
  if (ok) {
    ok = dt_redistribute(ctx, &back, NULL, &S1, &moved) == DT_OK;
    ok = ok && dt_full_tensor(ctx, &moved, &full) == DT_OK && same(full, x);
    if (ok) dt_value_clear(&moved);
    dt_value_clear(&back);
  }
  /* a plain value is not a DTensor; a Partial target is reached locally (Shard -> Partial) */
  dt_value px = plain(x);
  ok = ok && dt_to_local(&px, &local) == DT_ERR;
  dt_tensor *pfull = NULL;
  int to_p = ok && dt_redistribute(ctx, &chunked, NULL, &P, &d) == DT_OK;
  ok = to_p && dt_full_tensor(ctx, &d, &pfull) == DT_OK && same(pfull, x);
  if (to_p) dt_value_clear(&d);
  dt_tensor_release(pfull);
  dt_value_clear(&px), dt_value_clear(&chunked);
  dt_tensor_release(local), dt_tensor_release(full), dt_tensor_release(x);
  return ok;
}

/* dt.comm_debug's records come from the observer: one all_gather for Shard -> Replicate,
 * with this rank's shard bytes, and nothing for the metadata the RNG agreement exchanges. */
static int observed(dt_context *ctx, dt_mesh *m) {
  dt_tensor *x = matrix(4), *full = NULL;
  dt_value d;
  int ok = dt_distribute_tensor(ctx, x, m, &S0, DT_SRC_LOCAL, &d) == DT_OK;
  if (!ok) return dt_tensor_release(x), 0;
  int start = dt_comm_debug_begin(ctx);
  ok = dt_full_tensor(ctx, &d, &full) == DT_OK && same(full, x);
  ok = ok && dt_rng_manual_seed(ctx, 7, 1) == DT_OK; /* a paused broadcast: not recorded */
  dt_comm_debug *dbg = ctx->comm_debug;
  int n = m->size;
  if (n == 1) ok = ok && dbg->n - start == 0;
  else
    ok = ok && dbg->n - start == 1 && strcmp(dbg->ops[start].name, "all_gather") == 0 &&
         dbg->ops[start].bytes == (size_t)dt_tensor_numel(d.local) * 4 && dbg->ops[start].group_size == n;
  dt_comm_debug_end(ctx);
  dt_value_clear(&d);
  dt_tensor_release(full), dt_tensor_release(x);
  return ok;
}

static void test_add_and_sum_on_2_and_4_ranks(void) {
  CHECK(spmd(2, add_and_sum));
  CHECK(spmd(4, add_and_sum));
}

static void test_dtensor_api_round_trips(void) {
  CHECK(spmd(2, round_trips));
  CHECK(spmd(4, round_trips));
}

static void test_comm_debug_records_through_the_observer(void) {
  CHECK(spmd(2, observed));
  CHECK(spmd(4, observed));
}

int main(void) {
  TEST_CASE(test_add_and_sum_on_2_and_4_ranks);
  TEST_CASE(test_dtensor_api_round_trips);
  TEST_CASE(test_comm_debug_records_through_the_observer);
  return CTEST_END();
}
