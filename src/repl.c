/* REPL: `return <line>` first so expressions print, continuation lines for incomplete
 * chunks, readline editing and history when available. */
#include "config.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl.h"

#ifdef DT_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

int dtlua_stdin_is_tty(void) { return isatty(0); }

/* Returns a malloc'd line without its newline, or NULL at end of input. */
static char *read_line(const char *prompt) {
#ifdef DT_HAVE_READLINE
  if (isatty(0)) return readline(prompt);
#endif
  if (isatty(0)) {
    fputs(prompt, stdout);
    fflush(stdout);
  }
  size_t cap = 256, len = 0;
  char *buf = malloc(cap);
  int c;
  while (buf && (c = getchar()) != EOF && c != '\n') {
    if (len + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) break;
      buf = nb;
    }
    buf[len++] = (char)c;
  }
  if (!buf || (c == EOF && len == 0)) return free(buf), NULL;
  buf[len] = 0;
  return buf;
}

static void add_history_line(const char *line) {
#ifdef DT_HAVE_READLINE
  if (isatty(0) && line[0]) add_history(line);
#else
  (void)line;
#endif
}

static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= 5 && strcmp(msg + lmsg - 5, "<eof>") == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* Compiles the chunk in buf: as an expression first, then as statements. */
static int load_chunk(lua_State *L, const char *buf) {
  lua_pushfstring(L, "return %s;", buf);
  int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
  lua_remove(L, -2);
  if (status == LUA_OK) return status;
  lua_pop(L, 1);
  return luaL_loadbuffer(L, buf, strlen(buf), "=stdin");
}

static void print_results(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) return;
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    fprintf(stderr, "error calling 'print' (%s)\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

void dtlua_repl(lua_State *L, const char *progname) {
  (void)progname;
  char *line;
  while ((line = read_line("> ")) != NULL) {
    lua_settop(L, 0);
    size_t cap = strlen(line) + 1;
    char *chunk = malloc(cap);
    if (!chunk) break;
    memcpy(chunk, line, cap);
    free(line);
    int status;
    while ((status = load_chunk(L, chunk)) != LUA_OK && incomplete(L, status)) {
      char *more = read_line(">> ");
      if (!more) break;
      size_t nl = strlen(chunk) + strlen(more) + 2;
      char *joined = malloc(nl);
      if (!joined) {
        free(more);
        break;
      }
      snprintf(joined, nl, "%s\n%s", chunk, more);
      free(more);
      free(chunk);
      chunk = joined;
    }
    add_history_line(chunk);
    free(chunk);
    if (status == LUA_OK) status = dtlua_docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_results(L);
    else {
      fprintf(stderr, "%s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)");
      lua_pop(L, 1);
    }
  }
  lua_settop(L, 0);
  if (isatty(0)) putchar('\n');
}
