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

#include "base/error.h"
#include "comm/comm.h"
#include "bindings/l_dist.h"

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
  if (isatty(0)) dtlua_edit_add(line);
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

/* Compiles the chunk in buf: as an expression first, then as statements.  "=expr" is
 * "return expr" (lua5.4 keeps it for compatibility with 5.2). */
static int load_chunk(lua_State *L, const char *buf) {
  int eq = buf[0] == '=';
  lua_pushfstring(L, "return %s;", buf + eq);
  int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
  lua_remove(L, -2);
  if (status == LUA_OK || eq) return status;
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

/* Reads one complete chunk (continuation lines while the chunk is incomplete); returns it
 * malloc'd, or NULL at end of input.  Leaves L's stack as it found it. */
static char *read_chunk(lua_State *L) {
  char *line = read_line("> ");
  if (!line) return NULL;
  int top = lua_gettop(L), status;
  while ((status = load_chunk(L, line)) != LUA_OK && incomplete(L, status)) {
    char *more = read_line(">> ");
    if (!more) break;
    size_t nl = strlen(line) + strlen(more) + 2;
    char *joined = malloc(nl);
    if (!joined) {
      free(more);
      break;
    }
    snprintf(joined, nl, "%s\n%s", line, more);
    free(more);
    free(line);
    line = joined;
  }
  lua_settop(L, top);
  add_history_line(line);
  return line;
}

static void print_error(lua_State *L) {
  fprintf(stderr, "%s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)");
  fflush(stderr);
  lua_pop(L, 1);
}

static void repl_single(lua_State *L) {
  char *chunk;
  dtlua_interrupt_register(L, NULL, 0);
  while ((chunk = read_chunk(L)) != NULL) {
    lua_settop(L, 0);
    int status = load_chunk(L, chunk);
    free(chunk);
    dtlua_interrupt_arm();
    if (status == LUA_OK) status = dtlua_docall(L, 0, LUA_MULTRET);
    dtlua_interrupt_disarm();
    if (status == LUA_OK) print_results(L);
    else print_error(L);
  }
  dtlua_interrupt_unregister(0);
}

/* ---- the REPL on a mesh: rank 0 reads, every rank runs, rank 0 shows ---- */
/* Broadcasts a string from rank 0 (NULL: end of input); returns it malloc'd on every rank,
 * NULL at end of input or on a failed collective (then *failed is set). */
static char *bcast_string(dt_comm *c, const char *s, int *failed) {
  int64_t len = c->rank == 0 ? (s ? (int64_t)strlen(s) : -1) : 0;
  if (dt_comm_broadcast(c, &len, 1, DT_INT64, 0) != DT_OK) return *failed = 1, NULL;
  if (len < 0) return NULL;
  char *buf = malloc((size_t)len + 1);
  if (!buf) return *failed = 1, NULL;
  if (c->rank == 0) memcpy(buf, s, (size_t)len);
  if (dt_comm_broadcast(c, buf, (size_t)len, DT_UINT8, 0) != DT_OK) return free(buf), *failed = 1, NULL;
  buf[len] = 0;
  return buf;
}

/* Runs the chunk; leaves on the stack one string: its results joined by tabs (as print
 * would show them), "error: ..." on error, or "" when it returned nothing. */
static void run_chunk(lua_State *L, const char *chunk) {
  lua_settop(L, 0);
  int status = load_chunk(L, chunk);
  if (status == LUA_OK) status = dtlua_docall(L, 0, LUA_MULTRET);
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    lua_pushfstring(L, "error: %s", msg ? msg : "(error object is not a string)");
    lua_replace(L, 1);
    lua_settop(L, 1);
    return;
  }
  int n = lua_gettop(L);
  if (n == 0) {
    lua_pushliteral(L, "");
    return;
  }
  luaL_Buffer b;
  for (int i = 1; i <= n; i++) luaL_tolstring(L, i, NULL), lua_replace(L, i);
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    size_t len;
    const char *s = lua_tolstring(L, i, &len);
    luaL_addlstring(&b, s, len);
  }
  luaL_pushresult(&b);
  lua_replace(L, 1);
  lua_settop(L, 1);
}

/* Prints "[r] " before every line of s (rank 0 only). */
static void show(int r, const char *s, size_t len) {
  const char *end = s + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t k = nl ? (size_t)(nl - s) : (size_t)(end - s);
    printf("[%d] %.*s\n", r, (int)k, s);
    s += k + (nl != NULL);
  }
}

/* Gathers every rank's result string on all ranks and shows them on rank 0. */
static int gather_and_show(dt_comm *c, const char *mine, int all_ranks) {
  int n = c->size;
  int64_t len = (int64_t)strlen(mine), *lens = malloc(sizeof(int64_t) * (size_t)n);
  size_t *counts = malloc(sizeof(size_t) * (size_t)n), total = 0;
  if (!lens || !counts) return free(lens), free(counts), DT_ERR;
  int st = dt_comm_all_gather(c, &len, lens, 1, DT_INT64);
  for (int r = 0; st == DT_OK && r < n; r++) total += counts[r] = (size_t)lens[r];
  char *all = st == DT_OK ? malloc(total + 1) : NULL;
  if (all) st = dt_comm_all_gather_v(c, mine, all, counts, DT_UINT8);
  else st = DT_ERR;
  if (st == DT_OK && c->rank == 0) {
    size_t off = 0;
    for (int r = 0; r < n; r++) {
      if (counts[r] && (all_ranks || r == 0)) show(r, all + off, counts[r]);
      off += counts[r];
    }
    fflush(stdout);
  }
  free(all), free(lens), free(counts);
  return st;
}

static void repl_mesh(lua_State *L, dt_comm *world) {
  /* threads: the REPL's exchanges have their own communicator, so a line that only some ranks
   * run fails on those ranks and the session goes on.  MPI: they share the world, and such a
   * line ends the session (doc/collectives.md). */
  dt_comm *own = dt_threads_repl_comm(world), *c = own ? own : world;
  int all_ranks = 1, failed = 0;
  if (own) dtlua_interrupt_register(L, world, c->rank);
  if (c->rank == 0 && isatty(0))
    printf("%d ranks (%s); each line runs on every rank.  :ranks 0 shows rank 0's results only, :ranks all "
           "every rank's\n", c->size, c->backend);
  for (;;) {
    char *line = c->rank == 0 ? read_chunk(L) : NULL;
    /* waiting for the user to type is not a stuck collective: no timeout here */
    double timeout = dt_comm_set_timeout(c, 0);
    dt_comm_pause_observer(c); /* the REPL's exchanges are not the program's (dt.comm_debug) */
    char *chunk = bcast_string(c, line, &failed);
    dt_comm_resume_observer(c);
    dt_comm_set_timeout(c, timeout);
    free(line);
    if (!chunk) break;
    if (strncmp(chunk, ":ranks", 6) == 0) { /* the toggle: every rank sees it, rank 0 uses it */
      char arg[8] = "";
      sscanf(chunk + 6, "%7s", arg);
      if (strcmp(arg, "all") == 0 || strcmp(arg, "0") == 0) all_ranks = arg[0] == 'a';
      else if (c->rank == 0) printf(":ranks takes 0 (rank 0's results only) or all (every rank's), got '%s'\n", arg);
      if (c->rank == 0) fflush(stdout);
      free(chunk);
      continue;
    }
    if (own && c->rank == 0) dtlua_interrupt_arm();
    run_chunk(L, chunk);
    free(chunk);
    dt_comm_async_drain(world); /* the line's async collectives end with it (their Works stay waitable) */
    if (own) dt_threads_line_done(world);
    dt_comm_pause_observer(c);
    failed = gather_and_show(c, lua_tostring(L, 1), all_ranks) != DT_OK;
    dt_comm_resume_observer(c);
    if (failed) break;
    /* every rank has finished the line (they all entered the gather) and none starts the
     * next before rank 0 broadcasts it: the program's groups can be reset now */
    if (own && c->rank == 0) dt_threads_line_over(world), dtlua_interrupt_disarm();
  }
  if (failed) {
    fprintf(stderr, "dtlua: rank %d: the REPL lost its peers: %s\n", c->rank, dt_error_message());
    fflush(stderr);
  }
  if (own && c->rank == 0) dtlua_interrupt_disarm();
  if (own) dtlua_interrupt_unregister(c->rank), dt_comm_destroy(own);
}

void dtlua_repl(lua_State *L, const char *progname) {
  (void)progname;
  dt_context *ctx = dt_lua_context(L);
  int editing = isatty(0) && ctx->rank == 0; /* the rank that reads the lines */
  if (editing) dtlua_edit_begin(L);
  if (ctx->world_size > 1) repl_mesh(L, ctx->world);
  else repl_single(L);
  if (editing) dtlua_edit_end();
  lua_settop(L, 0);
  if (isatty(0) && ctx->rank == 0) putchar('\n');
}

/* stdin as a script: with several ranks, rank 0 reads it and the others receive it. */
int dtlua_load_stdin(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  if (ctx->world_size == 1) return luaL_loadfile(L, NULL);
  dt_comm *c = ctx->world;
  char *text = NULL;
  if (c->rank == 0) {
    size_t cap = 4096, len = 0, got;
    text = malloc(cap);
    while (text && (got = fread(text + len, 1, cap - len - 1, stdin)) > 0) {
      len += got;
      if (len + 1 == cap) {
        char *nt = realloc(text, cap *= 2);
        if (!nt) free(text);
        text = nt;
      }
    }
    if (text) text[len] = 0;
    else text = NULL;
  }
  int failed = 0;
  char *chunk = bcast_string(c, c->rank == 0 ? (text ? text : "") : NULL, &failed);
  free(text);
  if (!chunk) {
    lua_pushfstring(L, "cannot share stdin with the other ranks: %s", dt_error_message());
    return LUA_ERRFILE;
  }
  /* skip a first line starting with '#', as luaL_loadfile does */
  const char *code = chunk;
  if (code[0] == '#') {
    code = strchr(code, '\n');
    code = code ? code : "";
  }
  int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
  free(chunk);
  return status;
}
