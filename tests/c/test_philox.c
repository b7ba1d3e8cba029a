/* Philox4x32-10 known answers (Random123 kat_vectors) and the shard property of the fill
 * engine: any block of a global tensor, filled alone, equals that block of the whole. */
#include <string.h>

#include "base/error.h"
#include "kernels/philox.h"
#include "kernels/cpu/philox_batch.h"
#include "kernels/local_op.h"
#include "kernels/random.h"
#include "ctest.h"

static int kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1, uint32_t e0,
               uint32_t e1, uint32_t e2, uint32_t e3) {
  uint32_t ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1};
  dt_philox4 r = dt_philox4x32_10(ctr, key);
  return r.v[0] == e0 && r.v[1] == e1 && r.v[2] == e2 && r.v[3] == e3;
}

static void test_known_answers(void) {
  CHECK(kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8));
  CHECK(kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
            0xa20bc7c6, 0x6d5451fd));
  CHECK(kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
            0x5001e420, 0x24126ea1));
}

static void test_stream_layout(void) {
  /* word p = lane p%4 of block p/4; the seed is the key (low word first) */
  uint64_t seed = 0x299f31d0a4093822ull, b = 0x85a308d3243f6a88ull;
  dt_philox4 r = dt_philox_block(seed, b);
  uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0, 0}, key[2] = {0xa4093822, 0x299f31d0};
  dt_philox4 e = dt_philox4x32_10(ctr, key);
  CHECK(memcmp(r.v, e.v, sizeof r.v) == 0);
  uint64_t b2 = 0x123456789ull; /* word index 4*b2 + l must not overflow 64 bits */
  dt_philox4 e2 = dt_philox_block(seed, b2);
  for (int l = 0; l < 4; l++) CHECK(dt_philox_word(seed, b2 * 4 + (uint64_t)l) == e2.v[l]);
  CHECK(e2.v[0] != e.v[0]);
  CHECK(dt_philox_unit_f32(0xffffffffu, 24) < 1.0f);
  CHECK(dt_philox_unit_f64(0xffffffffu, 0xffffffffu) < 1.0);
  CHECK(dt_philox_unit_f32(0, 24) == 0.0f);
}

/* The batched (AVX2 where available) blocks equal the scalar ones, across a 2^32 carry
 * into the counter's second word and for every batch length around the vector width. */
static void test_batch_matches_scalar(void) {
  uint32_t fast[4 * 40], slow[4 * 40];
  const uint64_t starts[] = {0, 5, 0xfffffff9ull, 0xfffffffffffffff0ull};
  for (int s = 0; s < 4; s++)
    for (int64_t n = 0; n <= 40; n++) {
      dt_philox_blocks(0x9e3779b97f4a7c15ull, starts[s], n, fast);
      dt_philox_blocks_scalar(0x9e3779b97f4a7c15ull, starts[s], n, slow);
      CHECK(memcmp(fast, slow, sizeof(uint32_t) * 4 * (size_t)n) == 0);
    }
  dt_philox_blocks_scalar(0, 0, 1, slow);
  CHECK(slow[0] == 0x6627e8d5 && slow[3] == 0x9b00dbd8);
}

/* Fills the block [start, start+shape) of a 5x7x3 tensor alone and compares it with the
 * same block of the whole tensor, for every kind and for float32/float64. */
static int block_matches(dt_rng_kind kind, dt_dtype dtype, const int64_t *start, const int64_t *shape) {
  static double whole[105 * 2], part[105 * 2];
  const int64_t gshape[3] = {5, 7, 3};
  dt_rng_fill f = {.kind = kind, .dtype = dtype, .seed = 7, .offset = 12, .a = 0.25, .b = 2, .low = -3, .range = 10};
  dt_rng_fill_init(&f);
  dt_rng_region r;
  dt_rng_region_whole(&r, 3, gshape);
  f.dst = whole;
  if (dt_rng_fill_region(&f, &r) != DT_OK) return 0;
  for (int d = 0; d < 3; d++) r.start[d] = start[d], r.shape[d] = shape[d];
  f.dst = part;
  if (dt_rng_fill_region(&f, &r) != DT_OK) return 0;
  size_t es = dt_dtype_size(dtype);
  int64_t n = 0;
  for (int64_t i = 0; i < shape[0]; i++)
    for (int64_t j = 0; j < shape[1]; j++)
      for (int64_t k = 0; k < shape[2]; k++, n++) {
        int64_t g = ((start[0] + i) * 7 + start[1] + j) * 3 + start[2] + k;
        if (memcmp((char *)part + n * es, (char *)whole + g * es, es) != 0) return 0;
      }
  return 1;
}

static void test_shards_agree(void) {
  const int64_t starts[][3] = {{0, 0, 0}, {1, 0, 0}, {2, 3, 0}, {0, 1, 1}, {4, 6, 2}, {1, 2, 1}};
  const int64_t shapes[][3] = {{5, 7, 3}, {3, 7, 3}, {2, 3, 3}, {5, 5, 1}, {1, 1, 1}, {3, 3, 2}};
  const dt_rng_kind kinds[] = {DT_RNG_UNIFORM, DT_RNG_NORMAL, DT_RNG_RANDINT, DT_RNG_BERNOULLI};
  const dt_dtype dtypes[] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16};
  for (int s = 0; s < 6; s++)
    for (int k = 0; k < 4; k++)
      for (int t = 0; t < 3; t++) CHECK(block_matches(kinds[k], dtypes[t], starts[s], shapes[s]));
}

static void test_region_bounds(void) {
  dt_rng_fill f = {.kind = DT_RNG_UNIFORM, .dtype = DT_FLOAT32, .b = 1};
  float buf[4];
  f.dst = buf;
  dt_rng_region r = {.ndim = 1, .gshape = {4}, .start = {2}, .shape = {3}};
  CHECK(dt_rng_fill_region(&f, &r) == DT_ERR);
  CHECK(strstr(dt_error_message(), "out of bounds") != NULL);
}

/* uniform_ on a transposed (non-contiguous) view fills it in the view's row-major order. */
static void test_inplace_noncontiguous(void) {
  int64_t base_shape[2] = {3, 4}, vshape[2] = {4, 3}, vstride[2] = {1, 4};
  dt_tensor *base = dt_tensor_zeros(DT_FLOAT32, 2, base_shape, DT_CPU);
  dt_tensor *view = dt_tensor_view_of(base, 2, vshape, vstride, 0);
  dt_op_args a = {0};
  a.in = &view, a.nin = 1;
  a.scalar[0] = 0, a.scalar[1] = 1, a.nscalar = 2;
  a.ints[DT_RNG_SLOT_SEED] = 11, a.ints[DT_RNG_SLOT_OFFSET] = 8;
  dt_tensor *out[2] = {0};
  CHECK(dt_op_call(DT_OP_UNIFORM_, &a, out) == DT_OK);
  dt_op_args r = {0};
  r.nints = 2, r.ints[0] = 4, r.ints[1] = 3;
  r.scalar[1] = 1, r.nscalar = 2;
  r.ints[DT_RNG_SLOT_SEED] = 11, r.ints[DT_RNG_SLOT_OFFSET] = 8;
  dt_tensor *ref[2] = {0};
  CHECK(dt_op_call(DT_OP_RAND, &r, ref) == DT_OK);
  const float *b = dt_tensor_data(base), *e = ref[0] ? dt_tensor_data(ref[0]) : NULL;
  int same = e != NULL;
  for (int i = 0; i < 4 && same; i++)
    for (int j = 0; j < 3; j++) same &= b[j * 4 + i] == e[i * 3 + j];
  CHECK(same);
  if (out[0]) dt_tensor_release(out[0]);
  if (ref[0]) dt_tensor_release(ref[0]);
  dt_tensor_release(view);
  dt_tensor_release(base);
}

int main(void) {
  TEST_CASE(test_inplace_noncontiguous);
  TEST_CASE(test_known_answers);
  TEST_CASE(test_batch_matches_scalar);
  TEST_CASE(test_stream_layout);
  TEST_CASE(test_shards_agree);
  TEST_CASE(test_region_bounds);
  return CTEST_END();
}
