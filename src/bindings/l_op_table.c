/* dt._op_rows(): the rows of the operator table (src/ops/op_list.h), in table order, for the
 * table-driven specs (tests/spec/op_table_spec.lua, tests/spec_dist/op_table_dtensor_spec.lua):
 * a list of {name =, nout =, view =, inplace =, factory =, random =, differentiable =}
 * (differentiable: the row names a backward rule; cuda: src/kernels/cuda/kernel_list.h gives it a
 * CUDA kernel). */
#include "bindings/l_tensor.h"
#include "kernels/cuda/coverage.h"

void dt_lua_open_op_table(lua_State *L, const dt_lua_targets *tg);

static void set_flag(lua_State *L, int flags, int bit, const char *key) {
  lua_pushboolean(L, (flags & bit) != 0);
  lua_setfield(L, -2, key);
}

static int op_rows(lua_State *L) {
  lua_createtable(L, DT_OP_COUNT, 0);
  for (int i = 0; i < DT_OP_COUNT; i++) {
    const dt_op_def *op = dt_op_get((dt_op_id)i);
    lua_createtable(L, 0, 7);
    lua_pushstring(L, op->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, op->nout);
    lua_setfield(L, -2, "nout");
    set_flag(L, op->flags, DT_OPF_VIEW, "view");
    set_flag(L, op->flags, DT_OPF_INPLACE, "inplace");
    set_flag(L, op->flags, DT_OPF_FACTORY, "factory");
    set_flag(L, op->flags, DT_OPF_RANDOM, "random");
    lua_pushboolean(L, op->differentiable);
    lua_setfield(L, -2, "differentiable");
    lua_pushboolean(L, dt_cuda_row_has_kernel((dt_op_id)i));
    lua_setfield(L, -2, "cuda");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

void dt_lua_open_op_table(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, op_rows);
  lua_setfield(L, tg->module, "_op_rows");
}
