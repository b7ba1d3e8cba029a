/* Datatypes and reduce ops of the MPI backend.  bf16/f16 have no MPI type: they travel as
 * MPI_UINT16_T and reduce through custom MPI_Ops that call dt_reduce_ops_apply. */
#include "comm/mpi_impl.h"
#include "kernels/cpu/reduce_ops.h"

#include <pthread.h>

MPI_Datatype dt_mpi_datatype(dt_dtype dt) {
  switch (dt) {
  case DT_FLOAT32: return MPI_FLOAT;
  case DT_FLOAT64: return MPI_DOUBLE;
  case DT_BFLOAT16:
  case DT_FLOAT16: return MPI_UINT16_T;
  case DT_INT64: return MPI_INT64_T;
  case DT_INT32: return MPI_INT32_T;
  default: return MPI_UINT8_T; /* uint8, bool */
  }
}

#define HALF_OP(name, DT, OP)                                                  \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {     \
    (void)type;                                                                \
    const void *src[2] = {inout, in};                                          \
    dt_reduce_ops_apply(OP, DT, inout, src, 2, (size_t)*len);                  \
  }
HALF_OP(bf16_sum, DT_BFLOAT16, DT_REDUCE_SUM)
HALF_OP(bf16_max, DT_BFLOAT16, DT_REDUCE_MAX)
HALF_OP(bf16_min, DT_BFLOAT16, DT_REDUCE_MIN)
HALF_OP(bf16_prod, DT_BFLOAT16, DT_REDUCE_PRODUCT)
HALF_OP(f16_sum, DT_FLOAT16, DT_REDUCE_SUM)
HALF_OP(f16_max, DT_FLOAT16, DT_REDUCE_MAX)
HALF_OP(f16_min, DT_FLOAT16, DT_REDUCE_MIN)
HALF_OP(f16_prod, DT_FLOAT16, DT_REDUCE_PRODUCT)

static MPI_User_function *const half_fns[2][DT_NREDUCE_OPS] = {
    {bf16_sum, bf16_sum, bf16_max, bf16_min, bf16_prod},
    {f16_sum, f16_sum, f16_max, f16_min, f16_prod},
};
static MPI_Op half_ops[2][DT_NREDUCE_OPS];
static pthread_once_t half_once = PTHREAD_ONCE_INIT;

/* Process-wide by nature (MPI_Ops belong to the MPI library, one per process), created
 * once and never changed afterwards. */
static void create_half_ops(void) {
  for (int h = 0; h < 2; h++)
    for (int o = 0; o < DT_NREDUCE_OPS; o++) MPI_Op_create(half_fns[h][o], 1, &half_ops[h][o]);
}

MPI_Op dt_mpi_op(dt_reduce_op op, dt_dtype dt) {
  if (dt == DT_BFLOAT16 || dt == DT_FLOAT16) {
    pthread_once(&half_once, create_half_ops);
    return half_ops[dt == DT_FLOAT16][op];
  }
  if (dt == DT_BOOL) return op == DT_REDUCE_SUM || op == DT_REDUCE_MAX ? MPI_LOR : MPI_LAND;
  switch (op) {
  case DT_REDUCE_MAX: return MPI_MAX;
  case DT_REDUCE_MIN: return MPI_MIN;
  case DT_REDUCE_PRODUCT: return MPI_PROD;
  default: return MPI_SUM;
  }
}
