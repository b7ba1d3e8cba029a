-- Public functions whose errors may name another op, for tests/fuzz/api_fuzz.lua.
-- key: the name as the fuzzer prints it; names: other words that count as naming the op;
-- pattern: a message matching it is accepted as it is.
-- Keep it short and say why for each.
return {
  -- aliases, as in PyTorch: the error names the op they are
  ["dt.clip"] = {names = {"clamp"}},
  ["Tensor:clip"] = {names = {"clamp"}},
  ["dt.concat"] = {names = {"cat"}},
  -- x:view_as(y) is x:view(y:size()), x:expand_as(y) is x:expand(y:size()): the error names the
  -- op that checks the shape, and the shape
  ["Tensor:view_as"] = {names = {"view"}},
  ["Tensor:expand_as"] = {names = {"expand"}},
  -- dt.empty_like(x) is dt.empty(x:size()) with x's dtype
  ["dt.empty_like"] = {names = {"empty"}},
  -- dt.full_like(d) of a DTensor is dt.full(d:size(), v, {device_mesh=..., placements=...})
  ["dt.full_like"] = {names = {"full"}},
  -- F.linear(x, w, b) is x:matmul(w:t()) + b: the error names matmul/add and the shapes
  ["dt.F.linear"] = {names = {"matmul", "add", "linear"}},
  -- print0 is print on rank 0: its errors are those of tostring on an argument
  ["dt.print0"] = {names = {"tostring"}},
  -- init_device_mesh builds a DeviceMesh: its checks are the constructor's, "DeviceMesh: ..."
  ["dt.init_device_mesh"] = {names = {"DeviceMesh"}},
  -- the shape compositions (lua/dtensor/shape_ops.lua, einsum.lua) check their own arguments;
  -- the rest is checked by the ops they are made of, whose errors name those ops and the values
  ["Tensor:argsort"] = {names = {"sort"}}, -- sort's indices: its checks
  ["dt.argsort"] = {names = {"sort"}},
  ["Tensor:scatter_"] = {names = {"scatter", "copy_"}},
  ["Tensor:scatter_add_"] = {names = {"scatter_add", "copy_"}},
  ["Tensor:tile"] = {names = {"repeat"}},
  ["dt.tile"] = {names = {"repeat"}},
  ["Tensor:swapaxes"] = {names = {"transpose"}},
  ["dt.swapaxes"] = {names = {"transpose"}},
  ["Tensor:swapdims"] = {names = {"transpose"}},
  ["dt.swapdims"] = {names = {"transpose"}},
  ["Tensor:movedim"] = {names = {"permute", "view"}},
  ["dt.movedim"] = {names = {"permute", "view"}},
  ["Tensor:moveaxis"] = {names = {"movedim", "permute", "view"}},
  ["dt.moveaxis"] = {names = {"movedim", "permute", "view"}},
  ["Tensor:ravel"] = {names = {"reshape"}},
  ["dt.ravel"] = {names = {"reshape"}},
  ["Tensor:unflatten"] = {names = {"reshape"}},
  ["dt.unflatten"] = {names = {"reshape"}},
  ["Tensor:unbind"] = {names = {"select"}},
  ["dt.unbind"] = {names = {"select"}},
  ["Tensor:atleast_1d"] = {names = {"reshape"}},
  ["dt.atleast_1d"] = {names = {"reshape"}},
  ["Tensor:atleast_2d"] = {names = {"reshape"}},
  ["dt.atleast_2d"] = {names = {"reshape"}},
  ["Tensor:atleast_3d"] = {names = {"reshape"}},
  ["dt.atleast_3d"] = {names = {"reshape"}},
  ["Tensor:dot"] = {names = {"matmul"}},
  ["dt.dot"] = {names = {"matmul"}},
  ["Tensor:repeat_interleave"] = {names = {"index_select", "reshape", "expand", "unsqueeze"}},
  ["dt.repeat_interleave"] = {names = {"index_select", "reshape", "expand", "unsqueeze"}},
  ["dt.einsum"] = {names = {"bmm", "sum", "permute", "reshape", "expand", "mul", "eye"}},
  -- dt.explain(name, ...) runs the op `name` on the arguments: its errors are that op's, named
  -- by its module path (dtensor.sum) because explain calls it through pcall, or "sum: ..."
  ["dt.explain"] = {pattern = {"^bad argument #%d+ to 'dtensor%.[%w_.]+'", "^[%w_]+: "}},
}
