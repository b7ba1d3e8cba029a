-- The dtensor module: the C core plus what is best written in Lua.
local core = require "dtensor.core"

local dt = core

-- dtype constants: dt.float32 == "float32", usable wherever a dtype is expected
for _, name in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
  dt[name] = name
end
dt.float, dt.double, dt.half, dt.long, dt.int = "float32", "float64", "float16", "int64", "int32"

dt.nn = dt.nn or {}
dt.nn.functional = require "dtensor.nn.functional"
dt.F = dt.nn.functional

require "dtensor.dtensor"(dt) -- DTensor factories on a mesh, visualize_sharding
require "dtensor.dtensor_ops"(dt) -- item/equal, *_like, cat/stack on DTensors
require "dtensor.dtensor_nn"(dt) -- F.embedding, F.cross_entropy on DTensors
require "dtensor.dispatch"(dt) -- register_sharding/register_op, explain; DTLUA_PLUGINS last

dt._VERSION = "dtlua 0.1.0"
return dt
