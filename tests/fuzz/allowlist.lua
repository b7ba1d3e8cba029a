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
  -- dt.explain(name, ...) runs the op `name` on the arguments: its errors are that op's, named
  -- by its module path (dtensor.sum) because explain calls it through pcall, or "sum: ..."
  ["dt.explain"] = {pattern = {"^bad argument #%d+ to 'dtensor%.[%w_.]+'", "^[%w_]+: "}},
}
