-- dt.compile packs consecutive all_gathers (Shard -> Replicate) and reduce_scatters
-- (Partial -> Shard) on one group and dtype into one collective at replay (FSDP-like programs),
-- bitwise equal to eager: random shapes with uneven and zero-size shards, random dtypes,
-- every mesh of this world (1-4 ranks, threads and mpirun); the calls counted by comm_debug,
-- the buckets shown by f:graph() and f:stats().
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

local DTYPES = {"float64", "float32", "int64", "bfloat16"}

-- MPI's float sums over 3+ ranks may depend on the buffer: such reduce_scatters are not packed
local function packs(kind, dtype, size)
  return kind == "all_gather" or dt.backend() == "threads" or size <= 2 or not dtype:find("float")
end

local function placements(mesh, m, p)
  local list = {}
  for d = 1, mesh.ndim do list[d] = d == m and p or dt.Replicate() end
  return list
end

-- a random case on mesh dim m: each tensor is gathered or scattered, consecutive ones packed
local function make_case(g, mesh, m)
  local items = {}
  for i = 1, g.int(2, 5) do
    local nd = g.int(1, 3)
    local shape = {}
    for d = 1, nd do shape[d] = g.int(0, 7) end
    local dim = g.int(1, nd)
    local kind = g.int(1, 3) == 1 and "reduce_scatter" or "all_gather"
    if i > 1 and g.int(1, 2) == 1 then kind = items[i - 1].kind end -- runs of one kind
    local dtype = g.int(1, 3) == 1 and DTYPES[g.int(1, #DTYPES)] or (i > 1 and items[i - 1].dtype or "float64")
    local from = kind == "all_gather" and dt.Shard(dim) or dt.Partial()
    local to = kind == "all_gather" and dt.Replicate() or dt.Shard(dim)
    local x = dt.distribute_tensor(H.global(shape, dtype), mesh, placements(mesh, m, from))
    items[i] = {kind = kind, dtype = dtype, x = x, dim = dim, to = placements(mesh, m, to)}
  end
  return items
end

-- a member of a bucket: every all_gather; a reduce_scatter of even chunks (packed uneven ones
-- would pad each rank's block: they run as recorded)
local function bucketed(it, size)
  return it.kind == "all_gather" or it.x:size()[it.dim] % size == 0
end

-- the collectives replay runs: one per run of consecutive bucket members of one kind and dtype
-- (a collective that is not a member runs on its own, between them, and ends no run)
local function expected_calls(items, size)
  local calls = {all_gather = 0, reduce_scatter = 0}
  if size == 1 then return calls end
  local open
  for _, it in ipairs(items) do
    if not bucketed(it, size) then
      calls[it.kind] = calls[it.kind] + 1
    else
      if not (open and open.kind == it.kind and open.dtype == it.dtype and packs(it.kind, it.dtype, size)) then
        calls[it.kind] = calls[it.kind] + 1
      end
      open = it
    end
  end
  return calls
end

local function count(c)
  local calls, bytes = {all_gather = 0, reduce_scatter = 0}, {all_gather = 0, reduce_scatter = 0}
  for _, op in ipairs(c.ops) do
    if calls[op.name] then calls[op.name], bytes[op.name] = calls[op.name] + 1, bytes[op.name] + op.bytes end
  end
  return calls, bytes
end

local function same_dtensor(a, b, what)
  assert.are.equal(H.placement_string(a.placements), H.placement_string(b.placements), what)
  assert.is_true(H.same(a:to_local(), b:to_local()), what)
end

describe("dt.compile packs all_gathers and reduce_scatters", function()
  it("replays random gathers and scatters bitwise equal to eager, packed into fewer calls", function()
    local g = H.prng(4242)
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local on_mesh = mesh:get_coordinate() ~= nil
      for trial = 1, 6 do
        local m = g.int(1, mesh.ndim)
        local size = mesh:shape()[m]
        local items = make_case(g, mesh, m)
        local function program(...)
          local ins, outs = table.pack(...), {}
          for i = 1, ins.n do outs[i] = ins[i]:redistribute(mesh, items[i].to) end
          return table.unpack(outs, 1, ins.n)
        end
        local xs = {}
        for i, it in ipairs(items) do xs[i] = it.x end
        local f = dt.compile(program)
        f(table.unpack(xs))
        local eager, replayed
        local ce = dt.comm_debug(function() eager = table.pack(program(table.unpack(xs))) end)
        local cc = dt.comm_debug(function() replayed = table.pack(f(table.unpack(xs))) end)
        local what = name .. " trial " .. trial
        for i = 1, #items do same_dtensor(eager[i], replayed[i], what .. " tensor " .. i .. " " .. items[i].kind) end
        assert.are.equal(1, f:stats().replays, what)
        if on_mesh then
          local ecalls, ebytes = count(ce)
          local calls, bytes = count(cc)
          assert.are.same(expected_calls(items, size), calls, what)
          assert.are.equal(ebytes.all_gather, bytes.all_gather, what .. ": all_gather bytes")
          assert.are.equal(ebytes.reduce_scatter, bytes.reduce_scatter, what .. ": reduce_scatter bytes")
          assert.is_true(calls.all_gather <= ecalls.all_gather and calls.reduce_scatter <= ecalls.reduce_scatter, what)
          local st, want = f:stats().per_graph[1], {all_gather = 0, reduce_scatter = 0}
          if size > 1 then for _, it in ipairs(items) do if bucketed(it, size) then want[it.kind] = want[it.kind] + 1 end end end
          assert.are.same(want, {all_gather = st.async_all_gathers, reduce_scatter = st.async_reduce_scatters}, what)
        end
      end
    end
  end)

  it("waits where an output is first read, and marks the buckets in f:graph()", function()
    local n = dt.world_size()
    local mesh = dt.init_device_mesh("cpu", {n})
    local w1 = dt.distribute_tensor(dt.randn(2 * n + 1, 3):double(), mesh, {dt.Shard(1)}) -- uneven
    local w2 = dt.distribute_tensor(dt.randn(2 * n + 1, 2):double(), mesh, {dt.Shard(2)}) -- zero-size shards on 3-4 ranks
    local function fsdp(x)
      local a = w1:redistribute(mesh, {dt.Replicate()}) -- the layers' weights gathered together
      local b = w2:redistribute(mesh, {dt.Replicate()})
      return x:matmul(a:t()):tanh():matmul(b):sum()
    end
    local x = dt.distribute_tensor(dt.randn(5, 3):double(), mesh, {dt.Replicate()})
    for _, opts in ipairs {{}, {overlap = false}, {bucket_cap_mb = 0}} do
      local f = dt.compile(function(y) return fsdp(y) end, opts)
      local want = fsdp(x)
      f(x)
      local got
      local c = dt.comm_debug(function() got = f(x) end)
      same_dtensor(want, got, "fsdp")
      if n > 1 then
        assert.are.equal(opts.bucket_cap_mb == 0 and 2 or 1, count(c).all_gather)
        local text = f:graph({file = os.tmpname()})
        if opts.bucket_cap_mb ~= 0 then
          assert.is_truthy(text:find("(all_gather #1, packed)", 1, true), text)
          assert.is_truthy(text:find("(all_gather #1: starts, packed)", 1, true), text)
        end
        assert.is_truthy(text:find("(waits for all_gather #1)", 1, true), text)
      end
    end
  end)
end)
