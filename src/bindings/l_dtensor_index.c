/* t[k] = v on a DTensor: the key is parsed here against the global shape, the write is
 * dt_dtensor_write (src/distributed/dtensor_write.c, doc/dispatch.md "Indexing").  v: a
 * number or boolean (a 0-d tensor here, refused when the target's dtype cannot hold it), a
 * tensor or a DTensor. */
#include "base/error.h"
#include "distributed/dtensor_api.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"

#define OP "indexing assignment"

int dt_lua_dtensor_newindex(lua_State *L) {
  dt_value *u = dt_lua_check_value(L, 1);
  dt_index_key key;
  dt_lua_parse_index(L, 2, u->spec->ndim, u->spec->shape, &key);
  dt_value *v = dt_lua_test_value(L, 3);
  if (!v) {
    int is_int = lua_isinteger(L, 3);
    dt_lua_push_tensor(L, dt_lua_scalar_tensor(L, 3)); /* owned by Lua: no leak if this raises */
    if (dt_check_value_fits(OP, u->spec->dtype, is_int, lua_tointeger(L, 3), lua_tonumber(L, 3)) != DT_OK)
      return dt_lua_raise(L);
    v = dt_lua_check_value(L, -1);
  }
  if (dt_dtensor_write(dt_lua_context(L), u, &key, v) != DT_OK) return dt_lua_raise(L);
  return 0;
}
