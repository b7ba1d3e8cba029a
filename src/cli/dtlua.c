/* dtlua: the stock lua interpreter's behaviour (-e -l -i -v -E -W - --, arg table,
 * LUA_INIT), with the dtensor module preloaded as the global `dt`. */
#include "config.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_core.h"
#include "kernels/cpu/blas_info.h"
#include "launcher.h"
#include "output.h"
#include "repl.h"

int dt_lua_open(lua_State *L); /* libdtensor: the dtensor.core module */
void dtlua_preload_embedded(lua_State *L); /* lua_embedded.c (generated) */

static const char *progname = "dtlua";

static void print_usage(const char *badopt) {
  if (badopt) {
    if (badopt[1] == 'e' || badopt[1] == 'l') fprintf(stderr, "%s: '%s' needs argument\n", progname, badopt);
    else fprintf(stderr, "%s: unrecognized option '%s'\n", progname, badopt);
  }
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "Ranks (see doc/collectives.md):\n"
          "  -n N            run N ranks as threads of this process\n"
          "  --backend B     threads or mpi (default: mpi when started by mpirun)\n"
          "  --quiet-others  only rank 0 prints\n"
          "  --tag-output    prefix every printed line with [rank]\n",
          progname);
}

static void print_version(void) {
  printf("dtlua %s (%s)  Copyright (C) dtlua authors\n", PACKAGE_VERSION, LUA_RELEASE);
}

/* -v: the kernels matmul runs, so a slow machine shows why */
static void print_kernels(void) {
  dt_blas_info b;
  dt_blas_get_info(&b);
  printf("BLAS: %s, %s kernels, %d thread%s (CPU: %s)\n", b.library, b.core, b.threads, b.threads == 1 ? "" : "s",
         b.cpu);
}

/* Reports a non-nil status with its message; returns status. */
/* Fatal for the rank: with several ranks, the launcher prints it once with the rank and
 * tears the world down. */
int dtlua_report(lua_State *L, int status) {
  int code;
  if (status != LUA_OK && dtlua_is_exit(L, -1, &code)) { /* os.exit of one of several ranks */
    lua_pop(L, 1);
    if (code == 0) dtlua_rank_clean_exit(L);
    else {
      char msg[64];
      snprintf(msg, sizeof msg, "os.exit(%d): the run's exit status", code);
      dtlua_rank_fail(L, progname, msg, code);
    }
  } else if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (!msg) msg = "(error object is not a string)";
    dtlua_rank_error(L, progname, msg);
    lua_pop(L, 1);
  }
  return status;
}

static int msghandler(lua_State *L) {
  int code;
  if (dtlua_is_exit(L, 1, &code)) return 1; /* not an error: the rank's os.exit */
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int dtlua_docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  int status = lua_pcall(L, narg, nres, base);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = dtlua_docall(L, 0, 0);
  return dtlua_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l [g=]mod */
static int dolibrary(lua_State *L, char *globname) {
  char *modname = strchr(globname, '=');
  if (modname) *modname++ = '\0';
  else modname = globname;
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  int status = dtlua_docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, globname);
  return dtlua_report(L, status);
}

/* arg table: script at index 0, interpreter and options at negative indices. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  if (script == argc) script = 0;
  lua_createtable(L, argc - (script + 1), script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int pushargs(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
  int status = fname ? luaL_loadfile(L, fname) : dtlua_load_stdin(L);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = dtlua_docall(L, n, LUA_MULTRET);
  }
  return dtlua_report(L, status);
}

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_EXEC = 16 };

/* Returns the flags and sets *first to the script's index (argc when none). */
static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args;
    switch (argv[i][1]) {
    case '-':
      if (argv[i][2] != '\0') return HAS_ERROR;
      *first = i + 1;
      return args;
    case '\0': return args;
    case 'E':
      if (argv[i][2] != '\0') return HAS_ERROR;
      args |= HAS_E;
      break;
    case 'W':
      if (argv[i][2] != '\0') return HAS_ERROR;
      break;
    case 'i':
      args |= HAS_I;
      __attribute__((fallthrough)); /* -i implies -v */
    case 'v':
      if (argv[i][2] != '\0') return HAS_ERROR;
      args |= HAS_V;
      break;
    case 'e':
      args |= HAS_EXEC;
      __attribute__((fallthrough));
    case 'l':
      if (argv[i][2] == '\0') {
        i++;
        if (argv[i] == NULL || argv[i][0] == '-') return HAS_ERROR;
      }
      break;
    default: return HAS_ERROR;
    }
  }
  *first = i;
  return args;
}

static int runargs(lua_State *L, char **argv, int n) {
  for (int i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
    case 'e':
    case 'l': {
      char *extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
      if (status != LUA_OK) return 0;
      break;
    }
    case 'W': lua_warning(L, "@on", 0); break;
    }
  }
  return 1;
}

static int handle_luainit(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
  return dostring(L, init, name);
}

/* Opens the libraries and makes `dt` a global. */
static int open_dtensor(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, dt_lua_open);
  lua_setfield(L, -2, "dtensor.core");
  lua_pop(L, 1);
  dtlua_preload_embedded(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "dtensor");
  int status = dtlua_docall(L, 1, 1);
  if (status != LUA_OK) return dtlua_report(L, status);
  lua_setglobal(L, "dt");
  int rank, quiet, tag;
  dtlua_rank_output(L, &rank, &quiet, &tag);
  dtlua_output_install(L, rank, quiet, tag);
  return LUA_OK;
}

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  if (args == HAS_ERROR) {
    print_usage(argv[script]);
    return 0;
  }
  int rank, quiet, tag;
  dtlua_rank_output(L, &rank, &quiet, &tag);
  if ((args & HAS_V) && rank == 0) { /* once per world */
    print_version();
    print_kernels();
  }
  if (args & HAS_E) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  dtlua_rank_libs_opened(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (!(args & HAS_E) && handle_luainit(L) != LUA_OK) return 0;
  if (open_dtensor(L) != LUA_OK) return 0;
  if (!runargs(L, argv, script)) return 0;
  if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & HAS_I) dtlua_repl(L, progname);
  else if (script == argc && !(args & (HAS_EXEC | HAS_V))) {
    if (dtlua_stdin_is_tty()) {
      if (rank == 0) print_version();
      dtlua_repl(L, progname);
    } else {
      dochunk(L, dtlua_load_stdin(L));
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* One rank's program: the stock lua main on the state the launcher made. */
static int rank_main(lua_State *L, int argc, char **argv) {
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int result = lua_toboolean(L, -1);
  dtlua_report(L, status);
  return result && status == LUA_OK;
}

/* Takes the launcher's options (-n N, --backend B, --quiet-others, --tag-output) out of
 * argv; they may appear anywhere before the script.  Returns the new argc, or -1. */
static int take_launch_opts(int argc, char **argv, dtlua_launch_opts *o) {
  int out = 1;
  int i;
  for (i = 1; i < argc; i++) {
    char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "--") == 0 || strcmp(a, "-") == 0) break;
    if (strcmp(a, "-n") == 0 || (strncmp(a, "-n", 2) == 0 && a[2] >= '0' && a[2] <= '9')) {
      const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
      char *end;
      long n = v ? strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1 || n > 1024) {
        fprintf(stderr, "%s: -n needs a rank count between 1 and 1024\n", progname);
        return -1;
      }
      o->nranks = (int)n;
    } else if (strcmp(a, "--backend") == 0 || strncmp(a, "--backend=", 10) == 0) {
      o->backend = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
      if (!o->backend) {
        fprintf(stderr, "%s: --backend needs threads or mpi\n", progname);
        return -1;
      }
    } else if (strcmp(a, "--quiet-others") == 0) {
      o->quiet_others = 1;
    } else if (strcmp(a, "--tag-output") == 0) {
      o->tag_output = 1;
    } else {
      argv[out++] = a;
      if ((strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) && i + 1 < argc) argv[out++] = argv[++i];
    }
  }
  for (; i < argc; i++) argv[out++] = argv[i];
  argv[out] = NULL;
  return out;
}

int main(int argc, char **argv) {
  dtlua_blas_core_pick(argv); /* first: may re-exec this program */
  if (argv[0] && argv[0][0]) { /* the name as typed, less its folder (and libtool's lt- prefix) */
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
    if (strncmp(progname, "lt-", 3) == 0) progname += 3;
  }
  dtlua_launch_opts o = {0};
  argc = take_launch_opts(argc, argv, &o);
  if (argc < 0) return EXIT_FAILURE;
  return dtlua_launch(&o, argc, argv, rank_main);
}
