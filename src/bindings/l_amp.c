/* Bindings of autocast (lua/dtensor/amp.lua builds dt.amp on them): the per-rank mode and the
 * op classification, converted between Lua and C, nothing else.
 *   dt._autocast_mode([dtype or false]) -> the previous mode (a dtype name, or false when off);
 *     with no argument it only reads.  Only bfloat16 and float16 are autocast dtypes.
 *   dt._autocast_class(op_name) -> "lower", "float32" or "as_is" (src/call/autocast.c). */
#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "call/autocast.h"

static void push_mode(lua_State *L, int mode) {
  if (mode) lua_pushstring(L, dt_dtype_name((dt_dtype)(mode - 1)));
  else lua_pushboolean(L, 0);
}

static int l_autocast_mode(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  int prev = ctx->modes.autocast_dtype;
  if (lua_isnone(L, 1)) return push_mode(L, prev), 1;
  int mode = 0;
  if (!(lua_isboolean(L, 1) && !lua_toboolean(L, 1))) {
    const char *name = lua_tostring(L, 1);
    dt_dtype t;
    if (!name || dt_dtype_from_name(name, &t) != DT_OK || (t != DT_BFLOAT16 && t != DT_FLOAT16))
      return luaL_error(L, "autocast: dtype must be \"bfloat16\" or \"float16\", got %s",
                        name ? name : luaL_typename(L, 1));
    mode = 1 + (int)t;
  }
  ctx->modes.autocast_dtype = mode;
  push_mode(L, prev);
  return 1;
}

static int l_autocast_class(lua_State *L) {
  const char *name = lua_tostring(L, 1);
  dt_op_id op;
  if (!name || dt_op_find(name, &op) != DT_OK)
    return luaL_error(L, "autocast_class: no op named %s", name ? name : luaL_typename(L, 1));
  lua_pushstring(L, dt_autocast_class_name(dt_autocast_class_of(op)));
  return 1;
}

static const luaL_Reg amp_funcs[] = {
    {"_autocast_mode", l_autocast_mode}, {"_autocast_class", l_autocast_class}, {NULL, NULL},
};

void dt_lua_open_amp(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, amp_funcs, 0);
  lua_pop(L, 1);
}
