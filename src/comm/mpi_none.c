/* The MPI entry points when dtlua is built without MPI: the launcher reports it. */
#include "base/error.h"
#include "comm/comm.h"

#include <stdlib.h>

int dt_mpi_available(void) { return 0; }
dt_comm *dt_mpi_world_comm(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return dt_error("the MPI backend was not built"), NULL;
}
int dt_mpi_local_rank(dt_comm *world) {
  (void)world;
  return -1;
}
int dt_mpi_finish(dt_comm *world) {
  (void)world;
  return DT_OK;
}
void dt_mpi_finalize(void) {}
void dt_mpi_abort(int code) { exit(code); }
int dt_mpi_bench_raw(const char *coll, size_t bytes, int iters, double *seconds) {
  (void)coll, (void)bytes, (void)iters, (void)seconds;
  return dt_error("the MPI backend was not built");
}
