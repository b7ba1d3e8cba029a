/* The NCCL backend from Lua (dt.distributed): whether this build has it, and the two steps of
 * its start-up that run without a GPU, for the tests: the unique id's exchange with a fake id
 * (tests/spec_dist/nccl_bootstrap_spec.lua) and the world's NCCL communicator (an error naming
 * the ranks without a GPU, or the build without NCCL).  Collectives choose NCCL themselves,
 * for tensors on "cuda" (l_dist.c, dt_comm_for_device). */
#include <string.h>

#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "comm/comm.h"
#include "comm/nccl_id.h"

static int l_is_nccl_available(lua_State *L) { return lua_pushboolean(L, dt_nccl_available()), 1; }

typedef struct fake_id {
  const char *bytes; /* NULL: making it fails */
  size_t len;
} fake_id;

static int make_fake(void *ud, unsigned char id[DT_NCCL_ID_BYTES]) {
  const fake_id *f = ud;
  if (!f->bytes) return dt_error("_nccl_id_exchange: rank 0 was given no fake id");
  memcpy(id, f->bytes, DT_NCCL_ID_BYTES);
  return DT_OK;
}

/* _nccl_id_exchange(id): this rank's fake id (a string of 128 bytes, or false to make rank 0's
 * ncclGetUniqueId stand-in fail); returns the id every rank got, rank 0's.  Collective over
 * the world, as the NCCL world's start-up is. */
static int l_nccl_id_exchange(lua_State *L) {
  fake_id f = {0};
  if (lua_toboolean(L, 1)) {
    f.bytes = luaL_checklstring(L, 1, &f.len);
    if (f.len != DT_NCCL_ID_BYTES)
      return luaL_error(L, "_nccl_id_exchange: the id must be %d bytes, got %d", DT_NCCL_ID_BYTES, (int)f.len);
  }
  unsigned char id[DT_NCCL_ID_BYTES];
  if (dt_nccl_id_exchange(dt_lua_context(L)->world, make_fake, &f, id) != DT_OK) return dt_lua_raise(L);
  lua_pushlstring(L, (const char *)id, sizeof id);
  return 1;
}

/* _nccl_init(): the world's NCCL communicator (made on first use, collective); true, or an
 * error on every rank. */
static int l_nccl_init(lua_State *L) {
  if (!dt_comm_for_device(dt_lua_context(L)->world, DT_CUDA, "nccl init")) return dt_lua_raise(L);
  return lua_pushboolean(L, 1), 1;
}

static const luaL_Reg nccl_funcs[] = {
    {"is_nccl_available", l_is_nccl_available},
    {"_nccl_id_exchange", l_nccl_id_exchange},
    {"_nccl_init", l_nccl_init},
    {NULL, NULL},
};

void dt_lua_open_nccl(lua_State *L, const dt_lua_targets *tg) {
  lua_getfield(L, tg->module, "distributed"); /* l_dist.c made it */
  luaL_setfuncs(L, nccl_funcs, 0);
  lua_pop(L, 1);
}
