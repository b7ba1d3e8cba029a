/* Bindings: what the Lua library needs from the host and Lua cannot ask itself (a monotonic
 * wall clock for rates and ETAs, whether a file descriptor is a terminal): dt._monotonic_time
 * and dt._isatty, which lua/dtensor/utils exposes as dt.utils.monotonic_time and isatty. */
#include <time.h>
#include <unistd.h>
#include "bindings/l_tensor.h"

/* seconds since an arbitrary point (CLOCK_MONOTONIC: never goes back, unlike os.time) */
static int l_monotonic_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

static int l_isatty(lua_State *L) {
  int isnum = 0;
  lua_Integer fd = lua_tointegerx(L, 1, &isnum);
  if (!isnum || fd < 0 || fd > 1024) return luaL_error(L, "isatty: expected a file descriptor number (0..1024), got %s", luaL_typename(L, 1));
  lua_pushboolean(L, isatty((int)fd) == 1);
  return 1;
}

static const luaL_Reg host_funcs[] = {
    {"_monotonic_time", l_monotonic_time}, {"_isatty", l_isatty}, {NULL, NULL},
};

void dt_lua_open_host(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, host_funcs, 0);
  lua_pop(L, 1);
}
