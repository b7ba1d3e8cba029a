-- dt.checkpoint.load (doc/checkpoint.md): every check first (the same error on every rank),
-- then one C call reads every byte range this rank needs straight into its local shards
-- (dtype casts in the read), then a collective agreement, then the few targets that could
-- not be read in place (Partial placements, device tensors) and the added entries.
local core = require "dtensor.core"
local tree = require "dtensor.checkpoint.state_tree"
local index = require "dtensor.checkpoint.index"
local agree = require "dtensor.checkpoint.agree"
local geo = require "dtensor.checkpoint.boxes"
local zeros, my_box, add_boxes = geo.zeros, geo.my_box, geo.add_boxes
local replicated_placements = geo.replicated_placements

local now = core._monotonic_time

-- torch.can_cast: no float into an integer, nothing but bool into bool
local KIND = {bool = 0, uint8 = 1, int32 = 1, int64 = 1, float16 = 2, bfloat16 = 2, float32 = 2, float64 = 2}
local function can_cast(from, to) return KIND[from] ~= nil and KIND[to] ~= nil and KIND[from] <= KIND[to] end

-- the plan: boxes to read, targets to finish after the agreement, the keys report
local function plan(state, dir, cat, leaves, strict, op)
  local ipath = dir .. "/" .. index.NAME
  local boxes, later, extra, missing, unexpected, wanted = {}, {}, {}, {}, {}, {}
  for _, leaf in ipairs(leaves) do
    local x, name = leaf.value, leaf.name
    wanted[name] = true
    if core.is_tensor(x) then
      local e = cat.tensors[name]
      if not e and strict then
        error(string.format("%s: %s: tensor '%s' is not in the checkpoint (strict = false reports it instead)", op,
                            ipath, name), 0)
      end
      if not e then
        missing[#missing + 1] = name
      else
        if not index.same(e.shape, x:size()) then
          error(string.format("%s: %s: tensor '%s' has shape %s in the checkpoint, %s in the state", op, ipath, name,
                              index.shape_text(e.shape), index.shape_text(x:size())), 0)
        end
        if e.dtype ~= x.dtype and not can_cast(e.dtype, x.dtype) then
          error(string.format("%s: %s: tensor '%s' is %s in the checkpoint, %s in the state (a load casts only " ..
                              "where torch.can_cast does: no float into an integer, nothing but bool into bool)", op,
                              ipath, name, e.dtype, x.dtype), 0)
        end
        local at, size = my_box(x)
        if at then
          local loc = core.is_dtensor(x) and x:to_local() or x
          local rep = replicated_placements(x)
          local dst = loc
          if rep or loc.device ~= "cpu" then -- not in place: a host temporary, finished after the agreement
            dst = core.empty(size, {dtype = x.dtype})
            later[#later + 1] = {target = x, loc = loc, tmp = dst, rep = rep}
          end
          add_boxes(boxes, cat, name, e, dst, at, size)
        end
      end
    elseif cat.values[name] == nil then
      if strict and next(cat.values) ~= nil then
        error(string.format("%s: %s: value '%s' is not in the checkpoint (strict = false reports it instead)", op,
                            ipath, name), 0)
      end
      missing[#missing + 1] = name
    end
  end
  -- entries of the checkpoint the state lacks (a fresh optimizer's state): added whole
  for name, e in pairs(cat.tensors) do
    if not wanted[name] then
      unexpected[#unexpected + 1] = name
      if e.path then
        local t = core.empty(e.shape, {dtype = e.dtype})
        extra[#extra + 1] = {path = e.path, tensor = t}
        add_boxes(boxes, cat, name, e, t, zeros(#e.shape), e.shape)
      end
    end
  end
  for name in pairs(cat.values) do
    if not wanted[name] then unexpected[#unexpected + 1] = name end
  end
  table.sort(missing)
  table.sort(unexpected)
  return {boxes = boxes, later = later, extra = extra,
          keys = {missing_keys = missing, unexpected_keys = unexpected}}
end

-- the targets read into temporaries: a Partial one gets the loaded value's parts for its
-- placements (a collective on its mesh; leaves come in name order on every rank)
local function finish(later)
  for _, l in ipairs(later) do
    local src = l.tmp
    if l.rep then
      local x = l.target
      local whole = core.from_local(l.tmp, x.device_mesh, l.rep, {shape = x:size()})
      src = whole:redistribute(x.device_mesh, x.placements):to_local()
    end
    l.loc:copy_(src)
  end
end

-- load(M, state, dir, opts, op) -> state, {missing_keys = {...}, unexpected_keys = {...}}
local function load(M, state, dir, opts, op)
  local phases, t0 = {}, now()
  local leaves = tree.flatten(state, op)
  -- header checks and the plan: deterministic, so every rank fails alike with bad input; but a
  -- file shortened by another program meanwhile can fail them on some ranks only, so a failure
  -- goes to the agreement below (where the others' reads end): no rank is left waiting
  local ok, cat = pcall(index.read, dir, op)
  local opened, err, p = ok, not ok and cat or nil, nil
  phases.index = now() - t0
  t0 = now()
  local _ <close> = core.no_grad()
  if ok then
    ok, p = pcall(plan, state, dir, cat, leaves, opts.strict ~= false, op)
    if not ok then err = p end
  end
  phases.plan = now() - t0
  -- data: only I/O can fail from here
  t0 = now()
  if ok then
    ok, err = pcall(core._safetensors_read_boxes, op, p.boxes, {mode = opts._read, after_map = opts._after_map})
  end
  if opened then index.close(cat) end
  phases.read = now() - t0
  t0 = now()
  agree(op, ok, err)
  phases.agree = now() - t0
  t0 = now()
  finish(p.later)
  for _, x in ipairs(p.extra) do tree.set(state, x.path, x.tensor) end
  for _, v in pairs(cat.values) do tree.set(state, v.path, v.value) end
  phases.finish = now() - t0
  M.last_load_phases = phases
  return state, p.keys
end

return load
