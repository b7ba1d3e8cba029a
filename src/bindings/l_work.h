/* The Work object an async collective returns (dt.distributed.*(..., {async_op = true})),
 * as torch.distributed's: work:wait() returns what the blocking call returns,
 * work:is_completed() polls. */
#ifndef DT_BINDINGS_L_WORK_H
#define DT_BINDINGS_L_WORK_H

#include <lua.h>

#include "comm/comm.h"
#include "tensor/tensor.h"

/* Pushes a Work owning w and one reference each of in, out and copy_to (any may be NULL):
 * the buffers the collective uses stay alive until it completes.  copy_to: a strided
 * tensor that an in-place call ran on through the contiguous `in`, copied back at wait.
 * The nres values on the stack top are what wait returns (popped). */
void dt_lua_push_work(lua_State *L, dt_comm_work *w, const char *op, dt_tensor *in, dt_tensor *out,
                      dt_tensor *copy_to, int nres);
void dt_lua_open_work(lua_State *L);

#endif
