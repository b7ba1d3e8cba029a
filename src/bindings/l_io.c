/* Bindings: dt.save / dt.load (safetensors) and dt.save_npy / dt.load_npy. */
#include <stdio.h>
#include "base/error.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "bindings/l_tensor.h"

#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Collects the string keys of the table at idx, sorted (a stable file layout whatever the
 * table's iteration order).  Each value is checked by `check`.  The array lives in a
 * userdata pushed on the stack, so nothing leaks when a check raises. */
/* The plain tensor at idx, or NULL when it is not a tensor; a DTensor raises what to do
 * instead (the same on every rank: its global metadata is). */
static dt_tensor *saveable(lua_State *L, int idx, const char *op, const char *path, const char *name) {
  dt_value *v = dt_lua_test_value(L, idx);
  if (v && v->spec)
    luaL_error(L, "%s: %s: %s is a DTensor: save d:full_tensor() (the whole tensor, on every rank: write it from "
               "one rank) or d:to_local() (this rank's shard, one file per rank)", op, path, name);
  return v ? v->local : NULL;
}

static const char **sorted_keys(lua_State *L, int idx, int *n, const char *what, const char *path, int want_tensor) {
  int count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) count++, lua_pop(L, 1);
  const char **keys = lua_newuserdatauv(L, sizeof(char *) * ((size_t)count + 1), 0);
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "save: %s: %s keys must be strings, got %s", path, what, luaL_typename(L, -2));
    const char *k = lua_tostring(L, -2);
    char name[96];
    snprintf(name, sizeof name, "'%.80s'", k);
    if (want_tensor && !saveable(L, -1, "save", path, name))
      luaL_error(L, "save: %s: value of '%s' is not a tensor (%s)", path, k, luaL_typename(L, -1));
    if (!want_tensor && lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "save: %s: metadata value of '%s' must be a string, got %s", path, k, luaL_typename(L, -1));
    keys[i++] = k; /* anchored by the table itself */
    lua_pop(L, 1);
  }
  qsort(keys, (size_t)count, sizeof(char *), cmp_str);
  *n = count;
  return keys;
}

/* dt.save(tensor_or_table, path, metadata?): a single tensor is stored under the key "tensor". */
static int l_save(lua_State *L) {
  dt_lua_capture_refuse(L, "dt.save");
  lua_settop(L, 3); /* scratch userdata go above the arguments */
  const char *path = luaL_checkstring(L, 2);
  dt_safetensors st = {0};
  const char *single = "tensor";
  dt_tensor *one = saveable(L, 1, "save", path, "the tensor");
  if (one) {
    st.n = 1;
    st.names = (char **)&single;
    st.tensors = &one;
  } else {
    if (!lua_istable(L, 1))
      return luaL_error(L, "save: %s: expected a tensor or a table of name -> tensor, got %s", path, luaL_typename(L, 1));
    const char **keys = sorted_keys(L, 1, &st.n, "tensor", path, 1);
    st.names = (char **)keys;
    st.tensors = lua_newuserdatauv(L, sizeof(dt_tensor *) * ((size_t)st.n + 1), 0);
    for (int i = 0; i < st.n; i++) {
      lua_getfield(L, 1, keys[i]);
      st.tensors[i] = saveable(L, -1, "save", path, keys[i]); /* kept alive by the table */
      lua_pop(L, 1);
    }
  }
  if (!lua_isnoneornil(L, 3)) {
    if (!lua_istable(L, 3)) return luaL_error(L, "save: %s: metadata must be a table of strings", path);
    const char **mk = sorted_keys(L, 3, &st.nmeta, "metadata", path, 0);
    st.meta_keys = (char **)mk;
    st.meta_values = lua_newuserdatauv(L, sizeof(char *) * ((size_t)st.nmeta + 1), 0);
    for (int i = 0; i < st.nmeta; i++) {
      lua_getfield(L, 3, mk[i]);
      st.meta_values[i] = (char *)lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  }
  if (dt_safetensors_save(path, &st) != DT_OK) return dt_lua_raise(L);
  return 0;
}

/* dt.load(path) -> {name = tensor, ...}, metadata table (empty when the file has none). */
static int l_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dt_safetensors st;
  if (dt_safetensors_load(path, &st) != DT_OK) return dt_lua_raise(L);
  lua_createtable(L, 0, st.n);
  lua_createtable(L, 0, st.nmeta);
  for (int i = 0; i < st.nmeta; i++) {
    lua_pushstring(L, st.meta_values[i]);
    lua_setfield(L, -2, st.meta_keys[i]);
  }
  for (int i = 0; i < st.n; i++) {
    dt_lua_push_tensor(L, st.tensors[i]); /* the userdata takes the reference */
    st.tensors[i] = NULL;
    lua_setfield(L, -3, st.names[i]);
  }
  for (int i = 0; i < st.n; i++) free(st.names[i]);
  st.n = 0;
  dt_safetensors_free(&st);
  return 2;
}

static int l_save_npy(lua_State *L) {
  dt_lua_capture_refuse(L, "dt.save_npy");
  const char *path = luaL_checkstring(L, 2);
  dt_tensor *t = saveable(L, 1, "save_npy", path, "the tensor");
  if (!t) return luaL_error(L, "save_npy: %s: expected a tensor, got %s", path, luaL_typename(L, 1));
  if (dt_npy_save(path, t) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_load_npy(lua_State *L) {
  dt_lua_push_tensor(L, dt_npy_load(luaL_checkstring(L, 1)));
  return 1;
}

static const luaL_Reg io_funcs[] = {
    {"save", l_save}, {"load", l_load}, {"save_npy", l_save_npy}, {"load_npy", l_load_npy}, {NULL, NULL},
};

void dt_lua_open_io(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, io_funcs, 0);
  lua_pop(L, 1);
}
