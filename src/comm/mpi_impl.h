/* MPI backend internals: datatype and reduce-op mapping (custom ops for bf16/f16). */
#ifndef DT_COMM_MPI_IMPL_H
#define DT_COMM_MPI_IMPL_H

#include <mpi.h>

#include "comm/comm.h"

MPI_Datatype dt_mpi_datatype(dt_dtype dt);
/* The MPI_Op for (op, dtype): a built-in one, or a custom op (created once) for bf16/f16,
 * which computes in f32 through the shared reduction kernels.  avg maps to sum; the
 * caller divides. */
MPI_Op dt_mpi_op(dt_reduce_op op, dt_dtype dt);

#endif
