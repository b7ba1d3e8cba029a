-- dt.checkpoint: distributed checkpoints of DTensor state (doc/checkpoint.md).
--   save(state, dir, {async = false})  each rank writes the blocks it owns (a replicated block
--                                      once) as safetensors files + model.safetensors.index.json,
--                                      into <dir>.dtlua-tmp, swapped in when every rank is done
--   load(state, dir, {strict = true}) fills state's tensors for their current mesh and
--                                      placements, reading only the byte ranges each rank needs
--                                      (load.lua); returns state, {missing_keys, unexpected_keys}
--   consolidate(dir, path)             one ordinary safetensors file
local core = require "dtensor.core"
local tree = require "dtensor.checkpoint.state_tree"
local index = require "dtensor.checkpoint.index"
local agree = require "dtensor.checkpoint.agree"
local loader = require "dtensor.checkpoint.load"
local boxes = require "dtensor.checkpoint.boxes"
local zeros = boxes.zeros
local M = {}

local pending = {} -- async saves not yet waited for (the writers' __gc joins at program end)
-- async saves' private copies, kept for the next async save of the same state: copying into
-- warm buffers costs no page faults (PyTorch's async_save stages into cached buffers too)
local staging = {}

-- a private copy of data under name, in the last async save's buffer when it fits; `kept`
-- collects this save's buffers (those of names no longer saved are let go)
local function staged_copy(name, data, kept)
  local s = staging[name]
  if s and s.dtype == data.dtype and s.device == data.device and s:is_contiguous() and
     table.concat(s:size(), ",") == table.concat(data:size(), ",") then
    s:copy_(data)
  else
    s = data:clone()
  end
  kept[name] = s
  return s
end

local function wait_pending()
  local list = pending
  pending = {}
  for _, h in ipairs(list) do h:wait() end
end

local function shard_file(rank, world) return string.format("model-%05d-of-%05d.safetensors", rank + 1, world) end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- a DTensor whose Partial placements are reduced (blocks of a partial tensor are not its values)
local function without_partial(x)
  local ps = boxes.replicated_placements(x)
  return ps and x:redistribute(x.device_mesh, ps) or x
end

-- the blocks of tensor x: {{rank = writer, offset, shape}}, each distinct non-empty block
-- once, written by the lowest rank holding it
local function blocks_of(x)
  if not core.is_dtensor(x) then return {{rank = 0, offset = zeros(x:dim()), shape = x:size()}} end
  local by_key, list = {}, {}
  for _, s in ipairs(core._dtensor_shards(x)) do
    if numel(s.shape) > 0 then
      local key = table.concat(s.offset, ",") .. "|" .. table.concat(s.shape, ",")
      local b = by_key[key]
      if not b then
        b = {rank = s.rank, offset = s.offset, shape = s.shape}
        by_key[key] = b
        list[#list + 1] = b
      elseif s.rank < b.rank then
        b.rank = s.rank
      end
    end
  end
  if #list == 0 then list[1] = {rank = 0, offset = zeros(x:dim()), shape = x:size(), empty = true} end
  table.sort(list, function(a, b) -- the block at the origin first: the weight_map names its file
    for d = 1, #a.offset do
      if a.offset[d] ~= b.offset[d] then return a.offset[d] < b.offset[d] end
    end
    return false
  end)
  return list
end

local Handle = {}
Handle.__index = Handle

-- h:wait(): the save is complete (on every rank: a collective); raises its error on every rank
function Handle:wait()
  if self.done then return end
  self.done = true
  local ok, err = pcall(self.writer.wait, self.writer)
  self.writer = nil
  local agreed, aerr = pcall(agree, "checkpoint.save", ok, err)
  if not agreed then
    if core.rank() == 0 then pcall(core._dir_remove, self.tmp) end -- the previous checkpoint stays
    error(aerr, 2)
  end
end

-- the checked (dir, opts) of save and load; waits for a pending async save
local function arguments(op, dir, opts, known)
  if type(dir) ~= "string" or dir == "" then error(op .. ": dir must be a directory path, got " .. type(dir), 3) end
  if opts ~= nil and type(opts) ~= "table" then error(op .. ": options must be a table, got " .. type(opts), 3) end
  for k in pairs(opts or {}) do
    if not known[k] then error(op .. ": unknown option '" .. tostring(k) .. "' (options: " .. known._list .. ")", 3) end
  end
  wait_pending()
  return (dir:gsub("/+$", "")), opts or {}
end

function M.save(state, dir, opts)
  local op = "checkpoint.save"
  dir, opts = arguments(op, dir, opts, {async = true, _list = "async"})
  local rank, world = core.rank(), core.world_size()
  local leaves = tree.flatten(state, op)
  local tensors, values, mine, kept = {}, {}, {}, {}
  do
    local _ <close> = core.no_grad()
    for _, leaf in ipairs(leaves) do
      local x = leaf.value
      if core.is_tensor(x) then
        if core.is_dtensor(x) then x = without_partial(x) end
        local pieces = {}
        for i, b in ipairs(blocks_of(x)) do
          pieces[i] = {file = shard_file(b.rank, world), offset = b.offset, shape = b.shape}
          if b.rank == rank then
            local data = b.empty and core.empty(x:size(), {dtype = x.dtype}) or
                         (core.is_dtensor(x) and x:to_local() or x):detach()
            mine[leaf.name] = opts.async and staged_copy(leaf.name, data, kept) or data -- async: a private copy
          end
        end
        tensors[#tensors + 1] = {name = leaf.name, path = leaf.path, dtype = x.dtype, shape = x:size(),
                                 elsize = x:element_size(), pieces = pieces}
      else
        values[#values + 1] = leaf
      end
    end
  end
  if opts.async then staging = kept end
  local tmp = dir .. ".dtlua-tmp"
  local ok, err = true, nil
  if rank == 0 then ok, err = pcall(core._dir_make_fresh, tmp, op) end
  agree(op, ok, err) -- also the barrier: the directory exists before anyone writes
  ok, err = pcall(core._checkpoint_write, {
    tmp_dir = tmp, final_dir = dir, file = next(mine) ~= nil and shard_file(rank, world) or nil, tensors = mine,
    index_name = rank == 0 and index.NAME or nil,
    index_text = rank == 0 and index.encode(tensors, values, world) or nil,
    rank = rank, world = world, async = opts.async == true})
  local h = setmetatable({writer = ok and err or nil, tmp = tmp}, Handle)
  if not ok then h.writer = {wait = function() error(err, 0) end} end
  if not opts.async then return h:wait() end
  pending[#pending + 1] = h
  return h
end

-- load(state, dir, {strict = true}) -> state, {missing_keys, unexpected_keys}
function M.load(state, dir, opts)
  local op = "checkpoint.load"
  -- _read ("auto", "preadv", "mmap") and _after_map (a function run once the files are mapped):
  -- for tests and benchmarks of the two ways a box is read (src/io/safetensors_boxes.c)
  dir, opts = arguments(op, dir, opts, {strict = true, _read = true, _after_map = true, _list = "strict"})
  return loader(M, state, dir, opts, op)
end

function M.consolidate(dir, path)
  local op = "checkpoint.consolidate"
  if type(dir) ~= "string" or type(path) ~= "string" then
    error(op .. ": expected (dir, path) strings, got " .. type(dir) .. ", " .. type(path), 2)
  end
  dir = dir:gsub("/+$", "")
  wait_pending()
  local ok, err = true, nil
  if core.rank() == 0 then -- one writer; the others wait for its outcome
    ok, err = pcall(function()
      local cat = index.read(dir, op)
      local out, list = {}, {}
      for name, t in pairs(cat.tensors) do
        out[name] = core.empty(t.shape, {dtype = t.dtype})
        boxes.add_boxes(list, cat, name, t, out[name], zeros(#t.shape), t.shape)
      end
      local good, e = pcall(core._safetensors_read_boxes, op, list)
      index.close(cat)
      if not good then error(e, 0) end
      core.save(out, path, {format = "pt"})
    end)
  end
  agree(op, ok, err)
end

return {module = {checkpoint = M}}
