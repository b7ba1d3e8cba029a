/* The per-rank `print` of dtlua (see output.h). */
#include "output.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

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
  fwrite(line, 1, len, stdout); /* one stdio call: atomic against other ranks' lines */
  return 0;
}

void dtlua_output_install(lua_State *L, int rank, int quiet_others, int tag_output) {
  out_opts *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->rank = rank, o->quiet = quiet_others, o->tag = tag_output;
  lua_pushcclosure(L, rank_print, 1);
  lua_setglobal(L, "print");
}
