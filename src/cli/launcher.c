/* The rank launcher (see launcher.h).  Threads backend: rank 0 runs on the main thread
 * (it owns stdin), ranks 1..N-1 on their own threads, each with its own lua_State and
 * dt_context.  MPI backend: this process is one rank. */
#include "config.h"

#include "launcher.h"

#include <lauxlib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "comm/comm.h"
#include "distributed/context.h"
#include "bindings/l_dist.h"

#define RANK_KEY "dtlua.rank"
#define DEFAULT_TIMEOUT 600.0

typedef struct launcher launcher;
typedef struct rank_rec {
  launcher *la;
  int rank;
  dt_context *ctx;
  lua_State *L; /* while running; guarded by la->mu for the abort hook */
  int ok, clean_exit;
  int argc;
  char **argv; /* a private copy: the program may write into its argument strings */
} rank_rec;

struct launcher {
  const dtlua_launch_opts *o;
  dtlua_rank_main fn;
  int n, is_mpi;
  dt_threads_world *world;
  pthread_mutex_t mu;
  int failed;
  int exit_code; /* the first failing rank's exit status */
  rank_rec *ranks;
};

/* ---- failure: printed once, then everyone stops ---- */
static void abort_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  luaL_error(L, "aborted: another rank failed");
}

void dtlua_rank_error(lua_State *L, const char *progname, const char *msg) {
  dtlua_rank_fail(L, progname, msg, EXIT_FAILURE);
}

void dtlua_rank_fail(lua_State *L, const char *progname, const char *msg, int code) {
  if ((code & 0xff) == 0) code = EXIT_FAILURE; /* a failure must not read as success mod 256 */
  lua_getfield(L, LUA_REGISTRYINDEX, RANK_KEY);
  rank_rec *rec = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!rec || rec->la->n == 1) { /* a single rank: the stock lua message */
    fprintf(stderr, "%s: %s\n", progname, msg);
    fflush(stderr);
    if (rec && !rec->la->failed) rec->la->failed = 1, rec->la->exit_code = code;
    return;
  }
  launcher *la = rec->la;
  pthread_mutex_lock(&la->mu);
  int first = !la->failed;
  la->failed = 1;
  if (first) {
    la->exit_code = code;
    fprintf(stderr, "%s: rank %d: %s\n", progname, rec->rank, msg);
    fflush(stderr);
  }
  pthread_mutex_unlock(&la->mu);
  if (la->is_mpi) dt_mpi_abort(code); /* mpirun exits with the first abort's code */
  if (!first) return; /* a consequence of the first failure: already reported */
  char reason[96];
  snprintf(reason, sizeof reason, "rank %d failed", rec->rank);
  dt_threads_world_abort(la->world, reason);
  pthread_mutex_lock(&la->mu); /* ranks busy in Lua code stop at their next hook */
  for (int r = 0; r < la->n; r++)
    if (la->ranks[r].L && r != rec->rank) lua_sethook(la->ranks[r].L, abort_hook, LUA_MASKCOUNT, 1000);
  pthread_mutex_unlock(&la->mu);
}

void dtlua_rank_output(lua_State *L, int *rank, int *quiet_others, int *tag_output) {
  lua_getfield(L, LUA_REGISTRYINDEX, RANK_KEY);
  rank_rec *rec = lua_touserdata(L, -1);
  lua_pop(L, 1);
  *rank = rec ? rec->rank : 0;
  *quiet_others = rec ? rec->la->o->quiet_others : 0;
  *tag_output = rec ? rec->la->o->tag_output : 0;
}

/* ---- os.exit of one rank ---- */
#define EXIT_MT "dtlua.exit"

static int rank_exit(lua_State *L) {
  int code = lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE)
                                 : (int)luaL_optinteger(L, 1, EXIT_SUCCESS);
  lua_newtable(L);
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  luaL_setmetatable(L, EXIT_MT);
  return lua_error(L);
}

static int exit_tostring(lua_State *L) {
  lua_getfield(L, 1, "code");
  lua_pushfstring(L, "os.exit(%d)", (int)lua_tointeger(L, -1));
  return 1;
}

int dtlua_is_exit(lua_State *L, int idx, int *code) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
  luaL_getmetatable(L, EXIT_MT);
  int is = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!is) return 0;
  lua_getfield(L, idx, "code");
  *code = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return 1;
}

void dtlua_rank_clean_exit(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, RANK_KEY);
  rank_rec *rec = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (rec) rec->clean_exit = 1;
}

/* Called once the standard libraries are open. */
void dtlua_rank_libs_opened(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, RANK_KEY);
  rank_rec *rec = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!rec || (rec->la->n == 1 && !rec->la->is_mpi)) return; /* one rank: the stock os.exit */
  if (luaL_newmetatable(L, EXIT_MT)) {
    lua_pushcfunction(L, exit_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushcfunction(L, rank_exit);
    lua_setfield(L, -2, "exit");
  }
  lua_pop(L, 1);
}

/* ---- running one rank ---- */
static char **copy_argv(int argc, char **argv) {
  char **v = calloc((size_t)argc + 1, sizeof *v);
  for (int i = 0; v && i < argc; i++) v[i] = strdup(argv[i]);
  return v;
}

static void free_argv(int argc, char **v) {
  for (int i = 0; v && i < argc; i++) free(v[i]);
  free(v);
}

static void *run_rank(void *arg) {
  rank_rec *rec = arg;
  launcher *la = rec->la;
  lua_State *L = luaL_newstate();
  if (!L || !rec->argv) {
    fprintf(stderr, "dtlua: rank %d: cannot create state: not enough memory\n", rec->rank);
    if (la->world) dt_threads_world_abort(la->world, "out of memory");
    return NULL;
  }
  dt_lua_set_context(L, rec->ctx);
  lua_pushlightuserdata(L, rec);
  lua_setfield(L, LUA_REGISTRYINDEX, RANK_KEY);
  pthread_mutex_lock(&la->mu);
  rec->L = L;
  int aborted = la->failed;
  pthread_mutex_unlock(&la->mu);
  if (aborted) lua_sethook(L, abort_hook, LUA_MASKCOUNT, 1000);
  rec->ok = la->fn(L, rec->argc, rec->argv) || rec->clean_exit;
  /* the rank's async collectives end before its peers learn it exited (after a failure the
   * world's teardown ends them instead: a peer may never join them) */
  if (rec->ok && dt_comm_async_finish(rec->ctx->world) != DT_OK) {
    fprintf(stderr, "dtlua: rank %d: %s\n", rec->rank, dt_error_message());
    rec->ok = 0;
  }
  if (la->world) dt_threads_world_rank_exited(la->world, rec->rank);
  pthread_mutex_lock(&la->mu);
  rec->L = NULL;
  pthread_mutex_unlock(&la->mu);
  lua_close(L);
  return NULL;
}

static double env_timeout(void) {
  const char *s = getenv("DTLUA_TIMEOUT");
  if (!s || !*s) return DEFAULT_TIMEOUT;
  char *end;
  double v = strtod(s, &end);
  if (*end || v < 0) {
    fprintf(stderr, "dtlua: DTLUA_TIMEOUT must be a number of seconds, got '%s' (using %g)\n", s, DEFAULT_TIMEOUT);
    return DEFAULT_TIMEOUT;
  }
  return v;
}

static const char *pick_backend(const dtlua_launch_opts *o) {
  if (o->backend) return o->backend;
  const char *e = getenv("DTLUA_BACKEND");
  if (e && *e) return e;
  /* started by mpirun/mpiexec (Open MPI, MPICH/Hydra, PMIx)? */
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK")) return "mpi";
  return "threads";
}

static int launch_threads(launcher *la, int argc, char **argv) {
  dt_set_ranks_per_process(la->n); /* the ranks share the cores: intra-op threads per rank */
  la->world = dt_threads_world_new(la->n, env_timeout());
  la->ranks = la->world ? calloc((size_t)la->n, sizeof *la->ranks) : NULL;
  if (!la->ranks) {
    fprintf(stderr, "dtlua: cannot create the world: %s\n", dt_error_message());
    dt_threads_world_free(la->world);
    return EXIT_FAILURE;
  }
  for (int r = 0; r < la->n; r++) {
    rank_rec *rec = &la->ranks[r];
    rec->la = la, rec->rank = r, rec->argc = argc, rec->argv = copy_argv(argc, argv);
    dt_comm *c = dt_threads_world_comm(la->world, r);
    rec->ctx = c ? dt_context_new(c, r) : NULL;
    if (!rec->ctx) {
      fprintf(stderr, "dtlua: cannot create rank %d: %s\n", r, dt_error_message());
      return EXIT_FAILURE; /* nothing started yet; the OS reclaims the rest */
    }
  }
  pthread_t *tids = calloc((size_t)la->n, sizeof *tids);
  int *started = calloc((size_t)la->n, sizeof *started);
  for (int r = 1; tids && started && r < la->n; r++) {
    started[r] = pthread_create(&tids[r], NULL, run_rank, &la->ranks[r]) == 0;
    if (!started[r]) {
      fprintf(stderr, "dtlua: cannot start the thread of rank %d\n", r);
      dt_threads_world_abort(la->world, "a rank thread could not start");
      la->failed = 1, la->exit_code = EXIT_FAILURE;
    }
  }
  run_rank(&la->ranks[0]);
  int ok = 1;
  for (int r = 0; r < la->n; r++) {
    if (r && started && started[r]) pthread_join(tids[r], NULL);
    ok &= la->ranks[r].ok;
  }
  for (int r = 0; r < la->n; r++) {
    dt_context_free(la->ranks[r].ctx);
    free_argv(argc, la->ranks[r].argv);
  }
  free(tids), free(started), free(la->ranks);
  dt_threads_world_free(la->world);
  return ok && !la->failed ? EXIT_SUCCESS : la->exit_code ? la->exit_code : EXIT_FAILURE;
}

static int launch_mpi(launcher *la, int argc, char **argv) {
  dt_comm *c = dt_mpi_world_comm(&argc, &argv);
  if (!c) {
    fprintf(stderr, "dtlua: %s\n", dt_error_message());
    return EXIT_FAILURE;
  }
  /* the host-local rank from MPI itself (any launcher); the launchers' variables if it fails */
  int local = dt_mpi_local_rank(c);
  if (local < 0) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"};
    for (size_t i = 0; local < 0 && i < sizeof vars / sizeof vars[0]; i++)
      if (getenv(vars[i])) local = atoi(getenv(vars[i]));
  }
  const char *local_size = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local_size) local_size = getenv("MPI_LOCALNRANKS");
  if (local_size) dt_set_ranks_per_process(atoi(local_size)); /* ranks of this host share its cores */
  rank_rec rec = {.la = la, .rank = c->rank, .argc = argc, .argv = copy_argv(argc, argv)};
  rec.ctx = dt_context_new(c, local > 0 ? local : 0);
  la->n = c->size;
  la->ranks = &rec;
  if (!rec.ctx) {
    fprintf(stderr, "dtlua: %s\n", dt_error_message());
    dt_mpi_abort(1);
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach mpirun whole and in time */
  run_rank(&rec);
  if (rec.ok && dt_mpi_finish(c) != DT_OK) {
    fprintf(stderr, "dtlua: rank %d: %s\n", c->rank, dt_error_message());
    fflush(stderr);
    rec.ok = 0;
    /* the ranks waiting in a collective raise the message that names it (and may catch it):
     * our abort would kill them before they print, so give them time to report first */
    struct timespec grace = {.tv_sec = 2};
    nanosleep(&grace, NULL);
  }
  dt_context_free(rec.ctx);
  free_argv(argc, rec.argv);
  if (!rec.ok && la->n > 1) dt_mpi_abort(1); /* e.g. a failure reported before the context existed */
  dt_mpi_finalize();
  return rec.ok ? EXIT_SUCCESS : la->exit_code ? la->exit_code : EXIT_FAILURE;
}

int dtlua_launch(const dtlua_launch_opts *o, int argc, char **argv, dtlua_rank_main fn) {
  launcher la = {.o = o, .fn = fn, .n = o->nranks > 0 ? o->nranks : 1};
  pthread_mutex_init(&la.mu, NULL);
  const char *backend = pick_backend(o);
  int status;
  if (strcmp(backend, "threads") == 0) {
    status = launch_threads(&la, argc, argv);
  } else if (strcmp(backend, "mpi") == 0) {
    if (!dt_mpi_available()) {
      fprintf(stderr, "dtlua: the MPI backend was not built (configure found no MPI; see --with-mpi)\n");
      status = EXIT_FAILURE;
    } else if (o->nranks > 1) {
      fprintf(stderr, "dtlua: -n is for the threads backend; under MPI start ranks with mpirun -np N\n");
      status = EXIT_FAILURE;
    } else {
      la.is_mpi = 1;
      status = launch_mpi(&la, argc, argv);
    }
  } else {
    fprintf(stderr, "dtlua: unknown backend '%s' (expected threads or mpi)\n", backend);
    status = EXIT_FAILURE;
  }
  pthread_mutex_destroy(&la.mu);
  return status;
}
