-- The dtensor module: the C core plus what is best written in Lua, composed here.
--
-- How the Lua library is put together:
--   * dtensor.core (the C bindings) is never written: dt starts as a copy of it, and
--     dt.nn.functional (dt.F) as a copy of dtensor.nn.functional, the plain nn functions.
--   * Every other module returns a table and writes nowhere when required.  Its fields say
--     where its functions go:
--       module     = {name = fn}  -> dt.name
--       methods    = {name = fn}  -> dt.Tensor.name (the C core's method table, which
--                                    tensors read: the one table shared with the core)
--       functional = {name = fn}  -> dt.nn.functional.name
--       with_dt    = {name = fn}  -> dt.name, called as fn(dt, ...): it reads the composed dt
--       nn         = {name = v}   -> dt.nn.name (classes such as dt.nn.Linear, tables such
--                                    as dt.nn.init; dt.nn.functional is not theirs to replace)
--       utils      = {name = fn}  -> dt.utils.name (several modules add to dt.utils)
--       nn_utils   = {name = fn}  -> dt.nn.utils.name
--     Any other field is a helper for this file (dispatch.load_plugins).  A module takes
--     the C functions it wraps from dtensor.core, and what it builds on from the modules it
--     requires; so every module is required below before anything is installed, and the
--     methods it captures from dt.Tensor are C's.
--   * This file is the only writer of dt, dt.Tensor, dt.nn (dt.nn.functional and dt.nn.utils
--     included) and dt.utils.  It installs the modules in the order below; a module may
--     replace a core function, never another module's, nor the tables this file composes
--     (dt.nn, dt.nn.functional, dt.nn.utils, dt.utils).  The DTLUA_PLUGINS, which may extend
--     dt, are loaded last.
local core = require "dtensor.core"
local functional = require "dtensor.nn.functional" -- plain nn functions over tensors
local factories = require "dtensor.dtensor" -- DTensor factories on a mesh, visualize_sharding
local dispatch = require "dtensor.dispatch" -- decisions, register_sharding/register_op, explain
local dtensor_ops = require "dtensor.dtensor_ops" -- item/equal/allclose, *_like on DTensors
local dtensor_nn = require "dtensor.dtensor_nn" -- F.embedding, F.cross_entropy on DTensors
local shape_ops = require "dtensor.shape_ops" -- scatter forms, topk over a sharded dim, movedim, tile, einsum...
local autograd = require "dtensor.autograd" -- dt.autograd.Function, dt.utils.checkpoint
local optim = require "dtensor.optim" -- dt.optim (optimizers, lr_scheduler), dt.nn.utils.clip_grad_*
local amp = require "dtensor.amp" -- dt.amp (autocast, GradScaler)
local utils = require "dtensor.utils" -- dt.utils.progress, plot, sparkline, read_jsonl
local parallel = require "dtensor.parallel" -- dt.parallel (tensor/data parallel styles), dt.distribute_module
local checkpoint = require "dtensor.checkpoint" -- dt.checkpoint (sharded save/load, reshard on load)
local MODULES = { -- installed in this order
  {"dtensor.dtensor", factories}, {"dtensor.dispatch", dispatch},
  {"dtensor.dtensor_ops", dtensor_ops}, {"dtensor.dtensor_nn", dtensor_nn}, {"dtensor.shape_ops", shape_ops},
  {"dtensor.autograd", autograd}, {"dtensor.optim", optim}, {"dtensor.amp", amp}, {"dtensor.utils", utils},
  {"dtensor.checkpoint", checkpoint},
}
-- dt.nn: the Module base class, dt.nn.init, the layers and containers
for _, name in ipairs {"module", "initializers", "linear", "embedding", "normalization", "dropout", "activation",
                       "containers", "loss"} do
  MODULES[#MODULES + 1] = {"dtensor.nn." .. name, require("dtensor.nn." .. name)}
end
MODULES[#MODULES + 1] = {"dtensor.parallel", parallel}

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local dt = copy(core)

-- dtype constants: dt.float32 == "float32", usable wherever a dtype is expected
for _, name in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
  dt[name] = name
end
dt.float, dt.double, dt.half, dt.long, dt.int = "float32", "float64", "float16", "int64", "int32"

dt.nn = {functional = copy(functional), utils = {}}
dt.F = dt.nn.functional
dt.utils = {}

-- the table each field of a module's table goes into
local targets = {module = dt, methods = dt.Tensor, functional = dt.nn.functional, with_dt = dt, nn = dt.nn,
                 utils = dt.utils, nn_utils = dt.nn.utils}
local FIELDS = {"module", "methods", "functional", "with_dt", "nn", "utils", "nn_utils"} -- a fixed order
local owner = {module = {}, methods = {}, functional = {}, -- target -> name -> the module that installed it
               nn = {functional = "dtensor.nn.functional", utils = "init.lua (the nn_utils field fills dt.nn.utils)"},
               utils = {}, nn_utils = {}}
owner.with_dt = owner.module -- with_dt names are dt names too

local function bind(fn) return function(...) return fn(dt, ...) end end

local COMPOSED = {nn = true, utils = true} -- dt tables several modules add to, through their fields

local function install(name, provided)
  for _, field in ipairs(FIELDS) do
    for key, fn in pairs(provided[field] or {}) do
      if (field == "module" or field == "with_dt") and COMPOSED[key] then
        error(name .. ": " .. field .. "." .. key .. " would replace dt." .. key .. ", which init.lua composes: use the " ..
              (key == "nn" and "nn, functional and nn_utils" or "utils") .. " fields", 0)
      end
      local before = owner[field][key]
      if before then error(name .. ": " .. field .. "." .. key .. " is already installed by " .. before, 0) end
      owner[field][key] = name
      targets[field][key] = field == "with_dt" and bind(fn) or fn
    end
  end
end

for _, m in ipairs(MODULES) do install(m[1], m[2]) end

dt._VERSION = "dtlua 0.1.0"

dispatch.load_plugins(dt) -- last: plugins may extend dt
return dt
