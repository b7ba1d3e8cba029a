/* The yardstick of bench/collectives.lua under MPI: the same collective called straight from
 * C on MPI_COMM_WORLD, bare, and in the forms the backend could take, all in the same run. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/mpi_impl.h"
#include "comm/spin_wait.h"

enum { BARE, FINGERPRINT, FINGERPRINT_MSGS, POLLED, BARRIER, UNCHECKED };

/* One call of coll: blocking, or (req given) its non-blocking form posted. */
static int bench_call(const char *coll, float *a, float *b, int count, int part, MPI_Request *req) {
  MPI_Comm w = MPI_COMM_WORLD;
  if (strcmp(coll, "all_reduce") == 0)
    return req ? MPI_Iallreduce(MPI_IN_PLACE, a, count, MPI_FLOAT, MPI_SUM, w, req)
               : MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_FLOAT, MPI_SUM, w);
  if (strcmp(coll, "all_gather") == 0)
    return req ? MPI_Iallgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, w, req)
               : MPI_Allgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, w);
  if (strcmp(coll, "reduce_scatter") == 0)
    return req ? MPI_Ireduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, w, req)
               : MPI_Reduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, w);
  if (strcmp(coll, "all_to_all") == 0)
    return req ? MPI_Ialltoall(a, part, MPI_FLOAT, b, part, MPI_FLOAT, w, req)
               : MPI_Alltoall(a, part, MPI_FLOAT, b, part, MPI_FLOAT, w);
  if (strcmp(coll, "broadcast") == 0)
    return req ? MPI_Ibcast(a, count, MPI_FLOAT, 0, w, req) : MPI_Bcast(a, count, MPI_FLOAT, 0, w);
  return MPI_ERR_OTHER;
}

static tc_kind kind_of(const char *coll) {
  return strcmp(coll, "all_reduce") == 0       ? TC_ALL_REDUCE
         : strcmp(coll, "all_gather") == 0     ? TC_ALL_GATHER
         : strcmp(coll, "reduce_scatter") == 0 ? TC_REDUCE_SCATTER
         : strcmp(coll, "all_to_all") == 0     ? TC_ALL_TO_ALL
                                               : TC_BROADCAST;
}

/* One call on the shared-memory data path (mpi_shm_coll.c) as the backend makes it: the
 * buffers published with the call's fingerprint (checked: hashed and compared, else a
 * constant published and the verdict ignored), then the reads. */
static int shm_call(dt_mpi_shm_coll *x, dt_mpi_shm_agree *s, const char *coll, int checked, float *a, float *b,
                    int count, int part, int n) {
  tc_kind kind = kind_of(coll);
  tc_desc d = {.kind = kind, .dtype = DT_FLOAT32, .count = (size_t)(kind == TC_ALL_REDUCE || kind == TC_BROADCAST ? count : part)};
  int64_t h = checked ? (int64_t)tc_fingerprint(&d, "{bench}") : 0;
  int same = 0, late = 0;
  int rc = dt_mpi_shm_agree_publish(s, h, a, kind == TC_ALL_REDUCE || kind == TC_BROADCAST ? (void *)a : (void *)b,
                                    &same, NULL, 0, &late);
  if (rc != MPI_SUCCESS) return rc;
  if (checked && !same) return MPI_ERR_OTHER;
  dt_mpi_shm_run run = {.failed_rank = -1};
  size_t counts[64];
  for (int r = 0; r < n && r < 64; r++) counts[r] = (size_t)part;
  int failed = kind == TC_ALL_REDUCE       ? dt_mpi_shm_all_reduce(x, a, (size_t)count, DT_FLOAT32, DT_REDUCE_SUM, &run)
               : kind == TC_ALL_GATHER     ? dt_mpi_shm_all_gather(x, b, counts, sizeof(float), &run)
               : kind == TC_REDUCE_SCATTER ? dt_mpi_shm_reduce_scatter(x, b, (size_t)part, DT_FLOAT32, DT_REDUCE_SUM, &run)
               : kind == TC_ALL_TO_ALL     ? dt_mpi_shm_all_to_all(x, b, (size_t)part, sizeof(float), &run)
                                           : dt_mpi_shm_broadcast(x, a, (size_t)count * sizeof(float), 0, &run);
  return failed ? MPI_ERR_OTHER : MPI_SUCCESS;
}

/* "<coll>": the blocking call; "<coll>+fingerprint": each call preceded by the backend's
 * fingerprint agreement (dt_mpi_agree_same on a communicator of its own, polled), as the
 * backend runs it by default (through shared memory when the ranks share a host);
 * "<coll>+fingerprint_msgs": the same agreement always by point-to-point messages (the form
 * across hosts, and the only one before the shared-memory form); "<coll>+polled": the
 * non-blocking call polled (dt_mpi_poll), the form the backend would need to time out the data
 * call itself; "<coll>+barrier": an MPI_Barrier before each call, the least that any agreement
 * waiting for every rank costs.  Where the backend takes the shared-memory data path (one
 * host, process_vm_readv allowed, dt_mpi_shm_worth), "+fingerprint" is that path with the
 * fingerprint published and compared, and "+unchecked" the same path without them; elsewhere
 * "+unchecked" is the bare call.  "fp cost" = +fingerprint against +unchecked. */
int dt_mpi_bench_raw(const char *coll, size_t bytes, int iters, double *seconds) {
  static const char *const colls[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
  size_t base_len = strcspn(coll, "+");
  int form = coll[base_len] == 0 ? BARE
             : strcmp(coll + base_len, "+fingerprint") == 0 ? FINGERPRINT
             : strcmp(coll + base_len, "+fingerprint_msgs") == 0 ? FINGERPRINT_MSGS
             : strcmp(coll + base_len, "+polled") == 0 ? POLLED
             : strcmp(coll + base_len, "+barrier") == 0 ? BARRIER
             : strcmp(coll + base_len, "+unchecked") == 0 ? UNCHECKED : -1;
  char name[32] = "";
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
    if (strlen(colls[i]) == base_len && strncmp(coll, colls[i], base_len) == 0) strcpy(name, colls[i]);
  if (form < 0 || !name[0])
    return dt_error("bench: unknown collective '%s' (all_reduce, all_gather, reduce_scatter, all_to_all or broadcast, "
                    "optionally +fingerprint, +fingerprint_msgs, +polled, +barrier or +unchecked)", coll);
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int count = (int)(bytes / sizeof(float)), part = count / n;
  float *a = calloc((size_t)count + 1, sizeof(float)), *b = calloc((size_t)count + 1, sizeof(float));
  MPI_Comm check = MPI_COMM_NULL;
  if (!a || !b || MPI_Comm_dup(MPI_COMM_WORLD, &check) != MPI_SUCCESS)
    return free(a), free(b), dt_error("bench: out of memory");
  /* written, as dtlua's tensors are: a calloc'd buffer that is only read maps every page to the
   * kernel's one zero page, which a copy reads from cache (a broadcast or all_gather of 16-64 MiB
   * then ran 1.4-2x quicker than from real memory) */
  for (int i = 0; i <= count; i++) a[i] = 1.0f, b[i] = 0.0f;
  dt_mpi_agree *agree = form == FINGERPRINT || form == FINGERPRINT_MSGS || form == UNCHECKED
                             ? dt_mpi_agree_new(check, form != FINGERPRINT_MSGS)
                             : NULL;
  /* the backend's shared-memory data path, where it would take it (collective to create) */
  dt_mpi_shm_agree *sa = agree && form != FINGERPRINT_MSGS ? dt_mpi_agree_shm(agree) : NULL;
  dt_mpi_shm_coll *x = sa ? dt_mpi_shm_coll_new(sa, check) : NULL;
  size_t big = kind_of(name) == TC_ALL_GATHER ? (size_t)part * (size_t)n * sizeof(float) : (size_t)count * sizeof(float);
  if (x && (n > 64 || !dt_mpi_shm_worth(x, kind_of(name), big)))
    dt_mpi_shm_coll_free(x), x = NULL; /* (shm_call's counts: 64 ranks at most) */
  int rc = MPI_SUCCESS, late = 0, same = 0;
  for (int i = -1; i < iters && rc == MPI_SUCCESS; i++) { /* i = -1: warm-up */
    if (i == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      *seconds = dt_now();
    }
    if (x) {
      rc = shm_call(x, sa, name, form == FINGERPRINT, a, b, count, part, n);
      continue;
    }
    if (agree && form != UNCHECKED) rc = dt_mpi_agree_same(agree, i, &same, NULL, 0, &late);
    if (form == BARRIER) rc = MPI_Barrier(check);
    if (rc != MPI_SUCCESS) break;
    MPI_Request req;
    rc = bench_call(name, a, b, count, part, form == POLLED ? &req : NULL);
    if (rc == MPI_SUCCESS && form == POLLED) rc = dt_mpi_poll(1, &req, NULL, NULL, 0, &late);
  }
  *seconds = (dt_now() - *seconds) / iters;
  dt_mpi_shm_coll_free(x);
  dt_mpi_agree_free(agree, 1);
  MPI_Comm_free(&check);
  free(a), free(b);
  if (rc != MPI_SUCCESS) return dt_error("bench: %s: MPI error %d", coll, rc);
  return DT_OK;
}
