/* The rank launcher of dtlua: picks the backend (threads or MPI), creates the world and
 * one lua_State per rank, runs the same program on each, and turns the first failure into
 * a world teardown (threads) or MPI_Abort (MPI). */
#ifndef DTLUA_LAUNCHER_H
#define DTLUA_LAUNCHER_H

#include <lua.h>

typedef struct dtlua_launch_opts {
  int nranks;          /* -n N (threads backend); 0: not given */
  const char *backend; /* --backend / DTLUA_BACKEND: "threads", "mpi", or NULL (auto) */
  int quiet_others;    /* --quiet-others: only rank 0's print reaches stdout */
  int tag_output;      /* --tag-output: "[rank] " before every printed line */
} dtlua_launch_opts;

/* The program of one rank: gets a fresh state with the rank's context installed; returns
 * non-zero when the rank finished without error. */
typedef int (*dtlua_rank_main)(lua_State *L, int argc, char **argv);

/* Runs the ranks and returns the process exit status (0 only if every rank succeeded). */
int dtlua_launch(const dtlua_launch_opts *o, int argc, char **argv, dtlua_rank_main fn);

/* Reports a fatal error of the rank that owns L: printed once per world with the rank and
 * the message (its traceback included), then the world is torn down. */
void dtlua_rank_error(lua_State *L, const char *progname, const char *msg);
/* The same with the process's exit status: the first failing rank's code is the run's
 * (os.exit(3) on one rank: dtlua and mpirun exit with 3). */
void dtlua_rank_fail(lua_State *L, const char *progname, const char *msg, int code);

/* os.exit inside a rank must not end the other ranks' process: with several ranks it
 * raises an exit object instead, which ends this rank's program with that status.  True
 * (and *code set) when the value at idx is one. */
int dtlua_is_exit(lua_State *L, int idx, int *code);
/* os.exit(0) ended the rank: it counts as success. */
void dtlua_rank_clean_exit(lua_State *L);
/* Installs the per-rank os.exit (call after luaL_openlibs). */
void dtlua_rank_libs_opened(lua_State *L);

/* The rank's print options, for the output module. */
void dtlua_rank_output(lua_State *L, int *rank, int *quiet_others, int *tag_output);

#endif
