-- The index of a sharded checkpoint, model.safetensors.index.json, in the layout of the
-- safetensors ecosystem ({"metadata": {"total_size": N}, "weight_map": {name: file}}) plus
-- what dtlua needs under metadata.dtlua: every tensor's global shape, dtype, state path and
-- pieces (file, global offset, shape: one block of its sharding each), and the plain values.
-- A foreign index (no metadata.dtlua) maps whole tensors to files; its entries are read
-- from the files' headers.
local core = require "dtensor.core"
local jsonl = require "dtensor.utils.jsonl"
local M = {}

M.NAME = "model.safetensors.index.json"
local FORMAT = 1

local ARRAY = {} -- marks a table encoded as an array even when empty (a 0-d shape)
local function list(t) return setmetatable(table.move(t, 1, #t, 1, {}), ARRAY) end

-- JSON text of v: tables with [1] (or empty and marked by `array`) are arrays
local function encode(v, out)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = jsonl.quote(v)
  elseif math.type(v) == "integer" then
    out[#out + 1] = tostring(v)
  elseif t == "table" and (v[1] ~= nil or getmetatable(v) == ARRAY) then
    out[#out + 1] = "["
    for i, x in ipairs(v) do
      if i > 1 then out[#out + 1] = "," end
      encode(x, out)
    end
    out[#out + 1] = "]"
  elseif t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      out[#out + 1] = (i > 1 and ",\n" or "\n") .. jsonl.quote(k) .. ": "
      encode(v[k], out)
    end
    out[#out + 1] = "\n}"
  else
    error("checkpoint index: cannot encode a " .. t, 0)
  end
  return out
end


-- a plain value as text that reads back exactly (floats in hex)
local function value_entry(v, path)
  local kind = math.type(v) or type(v)
  local text = kind == "float" and string.format("%a", v) or tostring(v)
  return {type = kind, value = text, path = list(path)}
end

function M.read_value(e)
  if e.type == "integer" then return math.tointeger(tonumber(e.value)) end
  if e.type == "float" then return tonumber(e.value) end
  if e.type == "boolean" then return e.value == "true" end
  return e.value
end

-- encode(tensors, values, world): tensors = list of {name, path, dtype, shape, pieces =
-- {{file, offset, shape}}}; values = list of {name, path, value}
function M.encode(tensors, values, world)
  local weight_map, meta_t, meta_v, total = {}, {}, {}, 0
  for _, t in ipairs(tensors) do
    local pieces = {}
    for i, p in ipairs(t.pieces) do
      pieces[i] = {file = p.file, offset = list(p.offset), shape = list(p.shape)}
      local n = 1
      for _, s in ipairs(p.shape) do n = n * s end
      total = total + n * t.elsize
    end
    weight_map[t.name] = t.pieces[1].file -- the block at the origin (the whole tensor when not sharded)
    meta_t[t.name] = {dtype = t.dtype, shape = list(t.shape), path = list(t.path), pieces = list(pieces)}
  end
  for _, v in ipairs(values) do meta_v[v.name] = value_entry(v.value, v.path) end
  local index = {metadata = {total_size = total, dtlua = {format = FORMAT, world_size = world,
                 tensors = meta_t, values = meta_v}}, weight_map = weight_map}
  return table.concat(encode(index, {})) .. "\n"
end

local function read_text(path, op)
  local f, err = io.open(path, "rb")
  if not f then error(string.format("%s: %s: cannot open the index (%s)", op, path, err), 0) end
  local text = f:read("a")
  f:close()
  local ok, v = pcall(jsonl.decode, text)
  if not ok or type(v) ~= "table" then
    local at = type(v) == "table" and v.at or "?"
    error(string.format("%s: %s: the index is not valid JSON (at byte %s)", op, path, tostring(at)), 0)
  end
  return v
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
M.same = same

local function shape_text(s) return "{" .. table.concat(s, ",") .. "}" end
M.shape_text = shape_text

-- read(dir, op) -> catalog {tensors = {name = {dtype, shape, path?, pieces = {{file, path, offset,
-- shape}}}}, values = {name = {path, value}}, files = {file = open safetensors file}}.
-- Every file the index names is opened and its header checked against the index, so every
-- rank raises the same error for a missing or truncated file or a tensor absent or mismatched.
function M.read(dir, op)
  local ipath = dir .. "/" .. M.NAME
  local index = read_text(ipath, op)
  if type(index.weight_map) ~= "table" then error(op .. ": " .. ipath .. ": no \"weight_map\" object", 0) end
  local files, headers = {}, {}
  local cat = {tensors = {}, values = {}, files = files}
  local function open(file, name)
    if type(file) ~= "string" or file:find("/", 1, true) or file == ".." then
      error(string.format("%s: %s: bad file name %s in the index", op, ipath, tostring(file)), 0)
    end
    if not files[file] then
      local ok, f = pcall(core._safetensors_open, dir .. "/" .. file, op)
      if not ok then error(string.format("%s (it holds tensor '%s')", f, name), 0) end
      files[file], headers[file] = f, f:entries()
    end
    return headers[file]
  end
  local meta = type(index.metadata) == "table" and index.metadata.dtlua
  if type(meta) == "table" then
    for name, v in pairs(meta.values or {}) do cat.values[name] = {path = v.path, value = M.read_value(v)} end
    for name, t in pairs(meta.tensors or {}) do
      cat.tensors[name] = {dtype = t.dtype, shape = t.shape, path = t.path, pieces = t.pieces}
    end
  else
    for name, file in pairs(index.weight_map) do
      local entries = open(file, name)
      local e = entries[name]
      if not e then error(string.format("%s: %s: tensor '%s' is not in the file (the index names it)", op, dir .. "/" .. file, name), 0) end
      local zero = {}
      for i = 1, #e.shape do zero[i] = 0 end
      cat.tensors[name] = {dtype = e.dtype, shape = e.shape, pieces = {{file = file, offset = zero, shape = e.shape}}}
    end
  end
  -- every piece against its file's header, in name order (the same error on every rank)
  local names = {}
  for name in pairs(cat.tensors) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local t = cat.tensors[name]
    local numel, covered = 1, 0
    for _, s in ipairs(t.shape) do numel = numel * s end
    for _, p in ipairs(t.pieces) do
      local fpath = dir .. "/" .. tostring(p.file)
      local e = open(p.file, name)[name]
      if not e then error(string.format("%s: %s: tensor '%s' is not in the file (the index names it)", op, fpath, name), 0) end
      if e.dtype ~= t.dtype then
        error(string.format("%s: %s: tensor '%s' is %s in the file, %s in the index", op, fpath, name, e.dtype, t.dtype), 0)
      end
      if not same(e.shape, p.shape) then
        error(string.format("%s: %s: tensor '%s' has shape %s in the file, %s in the index", op, fpath, name,
                            shape_text(e.shape), shape_text(p.shape)), 0)
      end
      local n = 1
      for d, s in ipairs(p.shape) do
        n = n * s
        if p.offset[d] < 0 or p.offset[d] + s > t.shape[d] then
          error(string.format("%s: %s: tensor '%s': the block at offset %s of shape %s is outside the shape %s", op,
                              ipath, name, shape_text(p.offset), shape_text(p.shape), shape_text(t.shape)), 0)
        end
      end
      covered = covered + n
    end
    if covered ~= numel then
      error(string.format("%s: %s: tensor '%s': its blocks hold %d elements, its shape %s needs %d", op, ipath, name,
                          covered, shape_text(t.shape), numel), 0)
    end
  end
  return cat
end

function M.close(cat)
  for _, f in pairs(cat.files) do f:close() end
end

return M
