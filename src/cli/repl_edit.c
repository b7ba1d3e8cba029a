/* The REPL's line editing (readline, when built with it): history kept across sessions in
 * $DTLUA_HISTORY (default ~/.dtlua_history, the last 1000 lines; DTLUA_HISTORY= empty keeps
 * none) and tab completion of Lua names: globals, fields of tables (`dt.ran<TAB>`), methods
 * of values (`x:res<TAB>` for a tensor lists Tensor methods), read from the live state of the
 * rank that reads the lines. */
#include "config.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl.h"

#ifdef DT_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>

#define HISTORY_LINES 1000

static lua_State *completion_state;
static char history_path[4096];

/* Pushes the value that the dotted path text[0..len) names (a.b.c), or nil. */
static void push_path(lua_State *L, const char *text, size_t len) {
  lua_pushglobaltable(L);
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && text[i] != '.' && text[i] != ':') continue;
    if (i == start || lua_isnil(L, -1)) { lua_pop(L, 1), lua_pushnil(L); return; }
    lua_pushlstring(L, text + start, i - start);
    int t = lua_type(L, -2);
    if (t == LUA_TTABLE || t == LUA_TUSERDATA) {
      /* a protected call would be safer for odd __index; names here are plain lookups */
      if (t == LUA_TTABLE) lua_rawget(L, -2);
      else lua_gettable(L, -2);
    } else {
      lua_pop(L, 1), lua_pushnil(L);
    }
    lua_remove(L, -2);
    start = i + 1;
  }
}

/* The table whose keys complete after `obj.` (obj itself) or `obj:` (its methods: the
 * metatable's __index when it is a table, or the table a C __index closes over first, as
 * the Tensor's does). */
static int push_candidates(lua_State *L, int method) {
  if (!method) return lua_istable(L, -1);
  if (!lua_getmetatable(L, -1)) return 0;
  lua_getfield(L, -1, "__index");
  lua_remove(L, -2);
  if (lua_iscfunction(L, -1)) {
    if (!lua_getupvalue(L, -1, 1)) lua_pushnil(L);
    lua_remove(L, -2);
  }
  return lua_istable(L, -1);
}

static char **matches;
static int nmatches, imatch;

static void add_match(const char *prefix, size_t plen, const char *name) {
  size_t n = plen + strlen(name) + 2;
  char *m = malloc(n);
  if (!m) return;
  snprintf(m, n, "%.*s%s", (int)plen, prefix, name);
  char **grown = realloc(matches, sizeof *matches * (size_t)(nmatches + 1));
  if (!grown) return free(m);
  matches = grown;
  matches[nmatches++] = m;
}

static void collect(const char *text) {
  for (int i = 0; i < nmatches; i++) free(matches[i]);
  free(matches);
  matches = NULL, nmatches = 0, imatch = 0;
  lua_State *L = completion_state;
  if (!L) return;
  int top = lua_gettop(L);
  const char *sep = strrchr(text, '.'), *colon = strrchr(text, ':');
  if (colon && (!sep || colon > sep)) sep = colon;
  const char *word = sep ? sep + 1 : text;
  size_t plen = (size_t)(word - text), wlen = strlen(word);
  if (sep) push_path(L, text, (size_t)(sep - text));
  else lua_pushglobaltable(L);
  if (push_candidates(L, sep && *sep == ':')) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, -2);
        if (strncmp(k, word, wlen) == 0 && (k[0] != '_' || word[0] == '_')) add_match(text, plen, k);
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
}

static char *generator(const char *text, int state) {
  if (state == 0) collect(text);
  return imatch < nmatches ? strdup(matches[imatch++]) : NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)start, (void)end;
  rl_attempted_completion_over = 1; /* no file names */
  rl_completion_append_character = '\0';
  return rl_completion_matches(text, generator);
}

void dtlua_edit_begin(lua_State *L) {
  completion_state = L;
  rl_readline_name = "dtlua";
  rl_basic_word_break_characters = " \t\n\"'`@$><=;|&{(,+-*/%^#~[]";
  rl_attempted_completion_function = complete;
  const char *env = getenv("DTLUA_HISTORY"), *home = getenv("HOME");
  if (env) snprintf(history_path, sizeof history_path, "%s", env);
  else if (home) snprintf(history_path, sizeof history_path, "%s/.dtlua_history", home);
  if (history_path[0]) read_history(history_path);
}

void dtlua_edit_add(const char *line) {
  if (!line[0]) return;
  add_history(line);
  if (history_path[0] && append_history(1, history_path) != 0) write_history(history_path); /* a new file */
}

void dtlua_edit_end(void) {
  if (history_path[0]) history_truncate_file(history_path, HISTORY_LINES);
  completion_state = NULL;
}

#else
void dtlua_edit_begin(lua_State *L) { (void)L; }
void dtlua_edit_add(const char *line) { (void)line; }
void dtlua_edit_end(void) {}
#endif
