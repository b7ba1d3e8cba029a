/* The per-rank `print` of dtlua (see output.h). */
#include "output.h"

#include <errno.h>
#include <limits.h>
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct out_opts {
  int rank, quiet, tag;
} out_opts;

static void add_tagged(luaL_Buffer *b, const char *s, size_t len, const out_opts *o) {
  if (!o->tag) {
    luaL_addlstring(b, s, len);
    return;
  }
  const char *end = s + len, *nl;
  while ((nl = memchr(s, '\n', (size_t)(end - s))) != NULL) {
    luaL_addlstring(b, s, (size_t)(nl - s) + 1);
    lua_pushfstring(b->L, "[%d] ", o->rank);
    luaL_addvalue(b);
    s = nl + 1;
  }
  luaL_addlstring(b, s, (size_t)(end - s));
}

/* Tagged output: whole lines in each write(2), so that no reader -- the other ranks' threads,
 * mpirun's forwarding of each process's pipe -- sees a line of one rank cut by another's
 * (stdio may split a long print at its buffer's size).  A print's lines go in one write up
 * to PIPE_BUF bytes (the size a pipe keeps whole), then a write per run of lines that fits,
 * a longer line alone. */
static void write_all(const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* stdout closed: print drops its text, as the stock one does */
    s += w, n -= (size_t)w;
  }
}

static void write_lines(const char *s, size_t len) {
  fflush(stdout); /* text from io.write comes first, in order */
  const char *end = s + len;
  while (s < end) {
    const char *cut = s; /* the end of the whole lines that fit in PIPE_BUF, at least one */
    for (const char *nl; cut < end && (nl = memchr(cut, '\n', (size_t)(end - cut))) != NULL;) {
      if (cut > s && (size_t)(nl + 1 - s) > PIPE_BUF) break;
      cut = nl + 1;
    }
    if (cut == s) cut = end; /* no newline left: the rest (print always ends with one) */
    write_all(s, (size_t)(cut - s));
    s = cut;
  }
}

static int rank_print(lua_State *L) {
  const out_opts *o = lua_touserdata(L, lua_upvalueindex(1));
  if (o->quiet && o->rank != 0) return 0;
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) { /* tostring every argument first: the buffer owns the stack top */
    luaL_tolstring(L, i, NULL);
    lua_replace(L, i);
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (o->tag) {
    lua_pushfstring(L, "[%d] ", o->rank);
    luaL_addvalue(&b);
  }
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = lua_tolstring(L, i, &len);
    if (i > 1) luaL_addchar(&b, '\t');
    add_tagged(&b, s, len, o);
  }
  luaL_addchar(&b, '\n');
  luaL_pushresult(&b);
  size_t len;
  const char *line = lua_tolstring(L, -1, &len);
  if (o->tag) write_lines(line, len);
  else fwrite(line, 1, len, stdout); /* one stdio call: atomic against this process's other ranks */
  return 0;
}

void dtlua_output_install(lua_State *L, int rank, int quiet_others, int tag_output) {
  out_opts *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->rank = rank, o->quiet = quiet_others, o->tag = tag_output;
  lua_pushcclosure(L, rank_print, 1);
  lua_setglobal(L, "print");
}
