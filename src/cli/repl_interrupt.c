/* Ctrl-C in the REPL, as lua5.4: while a line runs, SIGINT stops it with "interrupted!" (on
 * every rank of a threads mesh: a hook on each rank's state, and ranks waiting in a program
 * collective are woken by the world's interrupt flag); at the prompt the default action
 * ends the session.  Signal handlers cannot find a rank's state any other way: hence the
 * statics, which the one REPL of the process owns. */
#include <lauxlib.h>
#include <lua.h>
#include <signal.h>
#include <stdatomic.h>

#include "repl.h"

#include "comm/comm.h"

#define MAX_RANKS 1024 /* ranks beyond are interrupted only when they wait in a collective */

static _Atomic(lua_State *) states[MAX_RANKS];
static _Atomic(dt_comm *) world;
static atomic_int requested;

/* Raises on the rank's thread while the request stands; a hook left from an earlier line
 * (the request since withdrawn) removes itself. */
static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  if (atomic_load(&requested)) luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  signal(sig, SIG_DFL); /* a second Ctrl-C before the line stops ends the session, as lua5.4 */
  atomic_store(&requested, 1);
  dt_comm *w = atomic_load(&world);
  if (w) dt_threads_interrupt(w);
  for (int r = 0; r < MAX_RANKS; r++) {
    lua_State *L = atomic_load(&states[r]);
    if (L) lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  }
}

void dtlua_interrupt_register(lua_State *L, dt_comm *w, int rank) {
  if (rank == 0) atomic_store(&world, w);
  if (rank >= 0 && rank < MAX_RANKS) atomic_store(&states[rank], L);
}

void dtlua_interrupt_unregister(int rank) {
  if (rank == 0) atomic_store(&world, NULL);
  if (rank >= 0 && rank < MAX_RANKS) atomic_store(&states[rank], NULL);
}

void dtlua_interrupt_arm(void) { signal(SIGINT, on_sigint); }

void dtlua_interrupt_disarm(void) {
  signal(SIGINT, SIG_DFL);
  atomic_store(&requested, 0);
}
