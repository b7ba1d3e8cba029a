-- DTensor helpers best written in Lua: the factories on a mesh (dt.zeros/ones/empty/full/
-- rand/randn/randint/randperm with device_mesh/placements allocate only the local shard;
-- the random ones draw through the RNG tracker region, doc/random.md) and
-- dt.visualize_sharding.  {requires_grad = true} makes the DTensor a leaf that requires grad
-- (its local shard is made without it).  Returns {module = {...}}: init.lua installs it into dt.
local core = require "dtensor.core"
local module = {}

local plain = {} -- the C factories for plain tensors
for _, name in ipairs {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm"} do plain[name] = core[name] end

-- opts for a DTensor factory: a table with device_mesh or placements
local function dist_opts(o)
  return type(o) == "table" and not core.is_tensor(o) and (o.device_mesh ~= nil or o.placements ~= nil) and o or nil
end

-- shape given as varargs of integers or as one table; the opts table last
local function split(...)
  local n = select("#", ...)
  local args = {...}
  local opts = dist_opts(args[n])
  if not opts then return nil end
  if type(args[1]) == "table" then return args[1], opts end
  local shape = {}
  for i = 1, n - 1 do shape[i] = args[i] end
  return shape, opts
end

local function placements_of(opts, mesh)
  if opts.placements ~= nil then return opts.placements end
  local p = {} -- PyTorch's default: replicated on every mesh dim
  for i = 1, mesh.ndim do p[i] = core.Replicate() end
  return p
end

local function mesh_of(opts, op)
  local mesh = opts.device_mesh or core.current_mesh()
  if not mesh then error(op .. ": placements given but no device_mesh and no current mesh", 3) end
  return mesh
end

local requires_grad = core._requires_grad_option -- (t, opts, name): the option, named errors

local function on_mesh(name, shape, opts, ...) -- a factory with device_mesh/placements
  local mesh = mesh_of(opts, name)
  local placements = placements_of(opts, mesh)
  if name == "rand" or name == "randn" then
    return requires_grad(core._dtensor_random(name, shape, mesh, placements, opts.dtype), opts, name)
  end
  local lshape = core._dtensor_local_shape(shape, mesh, placements, name)
  local value = ...
  local o, loc = {dtype = opts.dtype}, nil
  -- each call spelled out: Lua names the function in argument errors ('?' through plain[name])
  if name == "full" then loc = plain.full(lshape, value, o)
  elseif name == "zeros" then loc = plain.zeros(lshape, o)
  elseif name == "ones" then loc = plain.ones(lshape, o)
  else loc = plain.empty(lshape, o) end
  return requires_grad(core.from_local(loc, mesh, placements, {shape = shape}), opts, name)
end

-- Plain calls go through `plain.<name>(...)` so that Lua names the function in argument errors.
function module.zeros(...)
  local shape, opts = split(...)
  if not shape then return plain.zeros(...) end
  return on_mesh("zeros", shape, opts)
end
function module.ones(...)
  local shape, opts = split(...)
  if not shape then return plain.ones(...) end
  return on_mesh("ones", shape, opts)
end
function module.empty(...)
  local shape, opts = split(...)
  if not shape then return plain.empty(...) end
  return on_mesh("empty", shape, opts)
end
function module.rand(...)
  local shape, opts = split(...)
  if not shape then return plain.rand(...) end
  return on_mesh("rand", shape, opts)
end
function module.randn(...)
  local shape, opts = split(...)
  if not shape then return plain.randn(...) end
  return on_mesh("randn", shape, opts)
end
-- dt.randint(low, high, shape, opts) or dt.randint(high, shape, opts)
function module.randint(...)
  local n = select("#", ...)
  local opts = n > 0 and dist_opts((select(n, ...))) or nil
  if not opts or n < 3 then return plain.randint(...) end
  local low, high, shape = ...
  if n == 3 then low, high, shape = 0, low, high end
  if type(shape) ~= "table" then error("randint: shape must be a table, e.g. dt.randint(0, 10, {2, 3}, opts)", 2) end
  local mesh = mesh_of(opts, "randint")
  return requires_grad(core._dtensor_random("randint", shape, mesh, placements_of(opts, mesh), opts.dtype, low, high),
                       opts, "randint")
end
-- dt.randperm(n, {device_mesh = m}): replicated (placements other than Replicate: an error)
function module.randperm(n, opts)
  if not dist_opts(opts) then return plain.randperm(n, opts) end
  local mesh = mesh_of(opts, "randperm")
  return requires_grad(core._dtensor_random("randperm", n, mesh, placements_of(opts, mesh), opts.dtype), opts, "randperm")
end
function module.full(shape, value, opts)
  if not dist_opts(opts) then return plain.full(shape, value, opts) end
  return on_mesh("full", shape, opts, value)
end

-- dt.visualize_sharding(x): an ASCII table of which ranks hold which index ranges of a 1-d
-- or 2-d DTensor (ranges 1-based, inclusive).  Prints it on rank 0 and returns nothing (as
-- PyTorch: the REPL then shows it once); with opts.print == false returns the string instead.
function module.visualize_sharding(x, opts)
  if opts ~= nil and type(opts) ~= "table" then error("visualize_sharding: opts must be a table, got " .. type(opts), 2) end
  if not core.is_dtensor(x) then error("visualize_sharding: expected a DTensor", 2) end
  local size = x:size()
  if #size < 1 or #size > 2 then
    error(string.format("visualize_sharding: only 1-d and 2-d DTensors, got %d-d", #size), 2)
  end
  local partial = false
  for _, p in ipairs(x.placements) do partial = partial or p:is_partial() end
  local function range(off, len)
    if len == 0 then return nil end
    return len == 1 and tostring(off + 1) or string.format("%d-%d", off + 1, off + len)
  end
  -- distinct row and column ranges, each block's ranks
  local rows, cols, cells, empty = {}, {}, {}, {}
  local function add(list, key, off)
    for _, e in ipairs(list) do if e.key == key then return end end
    list[#list + 1] = {key = key, off = off}
  end
  for _, s in ipairs(core._dtensor_shards(x)) do
    local r = #size == 2 and range(s.offset[1], s.shape[1]) or "1"
    local c = range(s.offset[#size], s.shape[#size])
    if not r or not c then
      empty[#empty + 1] = s.rank
    else
      add(rows, r, #size == 2 and s.offset[1] or 0)
      add(cols, c, s.offset[#size])
      local k = r .. "|" .. c
      cells[k] = cells[k] or {}
      table.insert(cells[k], s.rank)
    end
  end
  table.sort(rows, function(a, b) return a.off < b.off end)
  table.sort(cols, function(a, b) return a.off < b.off end)
  local head = {string.format("%s %s on %s%s", "DTensor", "{" .. table.concat(size, ",") .. "}",
    tostring(x.device_mesh), partial and " (partial values: the sum/avg/max/min over ranks is the tensor)" or "")}
  local grid = {{#size == 2 and "rows \\ cols" or "index"}}
  for _, c in ipairs(cols) do table.insert(grid[1], c.key) end
  for _, r in ipairs(rows) do
    local line = {#size == 2 and r.key or ""}
    for _, c in ipairs(cols) do
      local rk = cells[r.key .. "|" .. c.key]
      line[#line + 1] = rk and ("rank" .. (#rk > 1 and "s " or " ") .. table.concat(rk, ",")) or "-"
    end
    grid[#grid + 1] = line
  end
  local width = {}
  for _, line in ipairs(grid) do
    for i, cell in ipairs(line) do width[i] = math.max(width[i] or 0, #cell) end
  end
  local sep = {}
  for i = 1, #width do sep[i] = string.rep("-", width[i] + 2) end
  local sepline = "+" .. table.concat(sep, "+") .. "+"
  local out = {head[1], sepline}
  for li, line in ipairs(grid) do
    local cellsout = {}
    for i, cell in ipairs(line) do cellsout[i] = " " .. cell .. string.rep(" ", width[i] - #cell) .. " " end
    out[#out + 1] = "|" .. table.concat(cellsout, "|") .. "|"
    if li == 1 then out[#out + 1] = sepline end
  end
  out[#out + 1] = sepline
  if #empty > 0 then out[#out + 1] = "empty shards on ranks " .. table.concat(empty, ",") end
  local text = table.concat(out, "\n")
  if opts and opts.print == false then return text end
  if core.rank() == 0 then print(text) end
end

return {module = module}
