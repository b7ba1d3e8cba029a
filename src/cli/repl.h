/* The interactive prompt of dtlua. */
#ifndef DTLUA_REPL_H
#define DTLUA_REPL_H

#include <lua.h>

int dtlua_stdin_is_tty(void);
/* Reads, evaluates and prints lines until end of input.  Errors are reported, not fatal.
 * With several ranks: rank 0 reads each chunk and broadcasts it, every rank runs it, and
 * rank 0 shows the results as "[rank] ..." (":ranks 0" / ":ranks all" toggle). */
void dtlua_repl(lua_State *L, const char *progname);
/* luaL_loadfile(L, NULL) for every rank: rank 0 reads stdin, the others receive it. */
int dtlua_load_stdin(lua_State *L);
/* Line editing (repl_edit.c): history across sessions and tab completion of Lua names read
 * from L; no-ops without readline.  begin/end bracket a REPL session on the reading rank. */
void dtlua_edit_begin(lua_State *L);
void dtlua_edit_add(const char *line);
void dtlua_edit_end(void);
/* Ctrl-C (repl_interrupt.c): each rank registers its state (and rank 0 the world) for the
 * REPL's lifetime; the reading rank arms the handler while a line runs, and disarms it once
 * every rank has finished the line (which withdraws the interrupt). */
typedef struct dt_comm dt_comm;
void dtlua_interrupt_register(lua_State *L, dt_comm *world, int rank);
void dtlua_interrupt_unregister(int rank);
void dtlua_interrupt_arm(void);
void dtlua_interrupt_disarm(void);
/* Shared with dtlua.c: run the function on top with a traceback handler / print errors. */
int dtlua_docall(lua_State *L, int narg, int nres);
int dtlua_report(lua_State *L, int status);

#endif
