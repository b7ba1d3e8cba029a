/* Bindings: dt.save / dt.load (safetensors) and dt.save_npy / dt.load_npy; for dt.checkpoint
 * an open safetensors file read by boxes and the shard writer (conversion only: the work is
 * in src/io). */
#include <stdio.h>
#include "base/error.h"
#include "io/checkpoint_files.h"
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

/* ---- dt._safetensors_open(path, op): a file read by boxes (dt.checkpoint) ---- */
#define ST_FILE_MT "dtensor.SafetensorsFile"

static dt_safetensors_file *check_st_file(lua_State *L) {
  dt_safetensors_file **u = luaL_checkudata(L, 1, ST_FILE_MT);
  if (!*u) luaL_error(L, "safetensors file is closed");
  return *u;
}

static int l_st_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1), *op = luaL_optstring(L, 2, "load");
  dt_safetensors_file **u = lua_newuserdatauv(L, sizeof *u, 1);
  *u = NULL;
  luaL_setmetatable(L, ST_FILE_MT);
  lua_pushvalue(L, 2), lua_setiuservalue(L, -2, 1); /* keeps op alive */
  if (dt_safetensors_open(path, op, u) != DT_OK) return dt_lua_raise(L);
  return 1;
}

static int l_st_close(lua_State *L) {
  dt_safetensors_file **u = luaL_checkudata(L, 1, ST_FILE_MT);
  dt_safetensors_close(*u);
  *u = NULL;
  return 0;
}

static void push_shape(lua_State *L, int n, const int64_t *v) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) lua_pushinteger(L, v[i]), lua_rawseti(L, -2, i + 1);
}

/* f:entries() -> {name = {dtype =, shape = {...}}}, metadata {k = v} */
static int l_st_entries(lua_State *L) {
  dt_safetensors_file *f = check_st_file(L);
  lua_createtable(L, 0, f->n);
  for (int i = 0; i < f->n; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, dt_dtype_name(f->entries[i].dtype)), lua_setfield(L, -2, "dtype");
    push_shape(L, f->entries[i].ndim, f->entries[i].shape), lua_setfield(L, -2, "shape");
    lua_setfield(L, -2, f->entries[i].name);
  }
  lua_createtable(L, 0, f->nmeta);
  for (int i = 0; i < f->nmeta; i++) lua_pushstring(L, f->meta_values[i]), lua_setfield(L, -2, f->meta_keys[i]);
  return 2;
}

static void check_box(lua_State *L, int idx, int n, int64_t *out, const char *what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  if ((int)lua_rawlen(L, idx) != n) luaL_error(L, "read_box: %s must have %d entries", what, n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    out[i] = (int64_t)dt_lua_check_integer(L, -1, "read_box", what);
    lua_pop(L, 1);
  }
}

/* f:read_box(name, dst, src_offset, size, dst_offset): offsets are 0-based element offsets
 * per dim (as dt._dtensor_shards gives them), not indices */
static int l_st_read_box(lua_State *L) {
  dt_safetensors_file *f = check_st_file(L);
  const char *name = luaL_checkstring(L, 2);
  dt_tensor *dst = dt_lua_check_tensor(L, 3);
  lua_getiuservalue(L, 1, 1);
  const char *op = lua_tostring(L, -1);
  int index = dt_safetensors_find(f, name);
  if (index < 0) return luaL_error(L, "%s: %s: tensor '%s' is not in the file", op, f->path, name);
  int nd = f->entries[index].ndim;
  int64_t src[DT_MAX_DIMS], size[DT_MAX_DIMS], at[DT_MAX_DIMS];
  check_box(L, 4, nd, src, "src_offset");
  check_box(L, 5, nd, size, "size");
  check_box(L, 6, nd, at, "dst_offset");
  if (dt_safetensors_read_box(f, index, src, size, dst, at, op) != DT_OK) return dt_lua_raise(L);
  return 0;
}

/* the after_map hook of a read: the Lua function at stack index ctx, called protected (an
 * error in it is ignored: the read goes on, and its failure is the test's to see) */
typedef struct {
  lua_State *L;
  int fn;
} after_map_hook;

static void call_after_map(void *ctx) {
  after_map_hook *h = ctx;
  lua_pushvalue(h->L, h->fn);
  if (lua_pcall(h->L, 0, 0, 0) != LUA_OK) lua_pop(h->L, 1);
}

/* dt._safetensors_read_boxes(op, {{file, name, dst, src_offset, size, dst_offset}, ...}
 * [, {mode = "auto"|"preadv"|"mmap", after_map = function}]): every box in one C call (file
 * opened once, reads batched, the rank's threads); mode and after_map are for tests and
 * benchmarks (safetensors.h) */
static int l_st_read_boxes(lua_State *L) {
  const char *op = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  dt_safetensors_read_opts opts = {DT_BOX_READ_AUTO, NULL, NULL};
  after_map_hook hook = {L, 0};
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    static const char *const modes[] = {"auto", "preadv", "mmap", NULL};
    lua_getfield(L, 3, "mode");
    opts.mode = (dt_box_read_mode)luaL_checkoption(L, -1, "auto", modes);
    lua_getfield(L, 3, "after_map");
    if (!lua_isnil(L, -1)) {
      luaL_checktype(L, -1, LUA_TFUNCTION);
      hook.fn = lua_gettop(L), opts.after_map = call_after_map, opts.ctx = &hook;
    }
  }
  int n = (int)lua_rawlen(L, 2);
  dt_safetensors_box *boxes = lua_newuserdatauv(L, sizeof *boxes * ((size_t)n + 1), 0); /* freed by Lua */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    int t = lua_gettop(L);
    luaL_checktype(L, t, LUA_TTABLE);
    lua_rawgeti(L, t, 1);
    dt_safetensors_file **u = luaL_checkudata(L, -1, ST_FILE_MT);
    if (!*u) return luaL_error(L, "%s: safetensors file is closed", op);
    lua_rawgeti(L, t, 2);
    const char *name = luaL_checkstring(L, -1);
    int index = dt_safetensors_find(*u, name);
    if (index < 0) return luaL_error(L, "%s: %s: tensor '%s' is not in the file", op, (*u)->path, name);
    lua_rawgeti(L, t, 3);
    dt_safetensors_box *b = &boxes[i];
    b->file = *u, b->index = index, b->dst = dt_lua_check_tensor(L, -1); /* anchored by the list */
    int nd = (*u)->entries[index].ndim;
    static const char *const what[3] = {"src_offset", "size", "dst_offset"};
    int64_t *into[3] = {b->src_start, b->size, b->dst_start};
    for (int k = 0; k < 3; k++) {
      lua_rawgeti(L, t, 4 + k);
      check_box(L, lua_gettop(L), nd, into[k], what[k]);
    }
    lua_settop(L, t - 1);
  }
  if (dt_safetensors_read_boxes_with(boxes, n, op, &opts) != DT_OK) return dt_lua_raise(L);
  return 0;
}

/* ---- dt._checkpoint_write{...}: one rank's shard file, index and marker ---- */
#define WRITER_MT "dtensor.CheckpointWriter"

static const char *opt_field(lua_State *L, const char *k) {
  lua_getfield(L, 1, k);
  const char *v = lua_tostring(L, -1); /* anchored: the table holds it */
  lua_pop(L, 1);
  return v;
}

/* {tmp_dir =, final_dir =, file = name|nil, tensors = {name = tensor}, index_name =, index_text =,
 *  rank =, world =, async = bool} -> a writer with :wait() */
static int l_checkpoint_write(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  dt_shard_job job = {0};
  job.tmp_dir = opt_field(L, "tmp_dir"), job.final_dir = opt_field(L, "final_dir"), job.file = opt_field(L, "file");
  job.index_name = opt_field(L, "index_name"), job.index_text = opt_field(L, "index_text");
  if (!job.tmp_dir || !job.final_dir) return luaL_error(L, "checkpoint.save: tmp_dir and final_dir are required");
  lua_getfield(L, 1, "rank"), job.rank = (int)dt_lua_check_integer(L, -1, "checkpoint.save", "rank");
  lua_getfield(L, 1, "world"), job.world = (int)dt_lua_check_integer(L, -1, "checkpoint.save", "world");
  lua_getfield(L, 1, "async");
  int async = lua_toboolean(L, -1);
  lua_settop(L, 1);
  lua_getfield(L, 1, "tensors"); /* index 2 */
  if (lua_istable(L, 2)) {
    const char **keys = sorted_keys(L, 2, &job.shard.n, "tensor", job.tmp_dir, 1);
    job.shard.names = (char **)keys;
    job.shard.tensors = lua_newuserdatauv(L, sizeof(dt_tensor *) * ((size_t)job.shard.n + 1), 0);
    for (int i = 0; i < job.shard.n; i++) {
      lua_getfield(L, 2, keys[i]);
      job.shard.tensors[i] = saveable(L, -1, "checkpoint.save", job.tmp_dir, keys[i]);
      lua_pop(L, 1);
    }
  }
  dt_shard_writer **u = lua_newuserdatauv(L, sizeof *u, 0);
  *u = NULL;
  luaL_setmetatable(L, WRITER_MT);
  if (!(*u = dt_shard_writer_start(&job, async, "checkpoint.save"))) return dt_lua_raise(L);
  return 1;
}

static int l_writer_wait(lua_State *L) {
  dt_shard_writer **u = luaL_checkudata(L, 1, WRITER_MT);
  if (*u && dt_shard_writer_wait(*u) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_writer_free(lua_State *L) {
  dt_shard_writer **u = luaL_checkudata(L, 1, WRITER_MT);
  dt_shard_writer_free(*u);
  *u = NULL;
  return 0;
}

static int l_dir_make_fresh(lua_State *L) {
  if (dt_dir_make_fresh(luaL_checkstring(L, 1), luaL_optstring(L, 2, "checkpoint.save")) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_dir_remove(lua_State *L) {
  if (dt_dir_remove(luaL_checkstring(L, 1), luaL_optstring(L, 2, "checkpoint.save")) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static const luaL_Reg st_file_methods[] = {
    {"entries", l_st_entries}, {"read_box", l_st_read_box}, {"close", l_st_close}, {NULL, NULL}};
static const luaL_Reg writer_methods[] = {{"wait", l_writer_wait}, {NULL, NULL}};

/* name "dtensor.X": getmetatable answers "X" (protected, as every dtensor userdata) */
static void new_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction release) {
  luaL_newmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, release), lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, release), lua_setfield(L, -2, "__close");
  lua_pushstring(L, strchr(name, '.') + 1), lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

static const luaL_Reg io_funcs[] = {
    {"save", l_save}, {"load", l_load}, {"save_npy", l_save_npy}, {"load_npy", l_load_npy},
    {"_safetensors_open", l_st_open}, {"_safetensors_read_boxes", l_st_read_boxes}, {"_checkpoint_write", l_checkpoint_write},
    {"_dir_make_fresh", l_dir_make_fresh}, {"_dir_remove", l_dir_remove}, {NULL, NULL},
};

void dt_lua_open_io(lua_State *L, const dt_lua_targets *tg) {
  new_class(L, ST_FILE_MT, st_file_methods, l_st_close);
  new_class(L, WRITER_MT, writer_methods, l_writer_free);
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, io_funcs, 0);
  lua_pop(L, 1);
}
