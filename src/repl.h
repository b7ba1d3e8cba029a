/* The interactive prompt of dtlua. */
#ifndef DTLUA_REPL_H
#define DTLUA_REPL_H

#include <lua.h>

int dtlua_stdin_is_tty(void);
/* Reads, evaluates and prints lines until end of input.  Errors are reported, not fatal. */
void dtlua_repl(lua_State *L, const char *progname);
/* Shared with dtlua.c: run the function on top with a traceback handler / print errors. */
int dtlua_docall(lua_State *L, int narg, int nres);
int dtlua_report(lua_State *L, int status);

#endif
