-- GPU specs of the NCCL backend (SPMD: `dtlua -n N tests/run_specs.lua tests/gpu/nccl_spec.lua`,
-- one GPU per rank; tests/gpu/run.sh runs it).  Every collective of dt.distributed on tensors on
-- "cuda" against the same call on the CPU (threads/MPI): bitwise for data movement and integer
-- reductions, within reordering error for float sums; bf16/f16 natively; the world and a
-- sub-group (ncclCommSplit); DTensor redistribution on a "cuda" mesh.  Without a GPU, or in a
-- build without the cuda device or NCCL, it skips with one line saying which.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()

local why_skip
if not (dt.cuda and dt.cuda.is_available and dt.cuda.is_available()) then
  why_skip = "no cuda device in this build or on this machine (dt.cuda.is_available() is not true)"
elseif not D.is_nccl_available() then
  why_skip = "this build has no NCCL backend (configure --with-nccl)"
elseif dt.cuda.device_count() < 1 then
  why_skip = "no GPU"
end
if why_skip then
  describe("NCCL collectives on cuda", function()
    it("skipped: " .. why_skip, function() print("nccl_spec: skipped: " .. why_skip) end)
  end)
  return
end

local FLOATS = {"float32", "float64", "bfloat16", "float16"}
local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"}

local function data(shape, dtype, salt)
  dt.manual_seed(1000 * rank + salt)
  return dt.randint(0, 9, shape):to(dtype) -- small integers: sums exact in every dtype
end
local function same(cpu, cuda) assert.are.same(cpu:to("float64"):totable(), cuda:cpu():to("float64"):totable()) end
local function close(cpu, cuda)
  assert.is_true(dt.allclose(cpu:to("float32"), cuda:cpu():to("float32"), 1e-2, 1e-2))
end

local function groups()
  local list = {{name = "world"}}
  if n > 2 then
    local ranks = {}
    for r = 1, n - 1 do ranks[#ranks + 1] = r end
    list[2] = {name = "ranks 1..n-1 (ncclCommSplit)", group = D.new_group(ranks), ranks = ranks}
  end
  return list
end
local function member(spec)
  for _, r in ipairs(spec.ranks or {rank}) do if r == rank then return true end end
  return false
end

describe("NCCL collectives on cuda give the CPU's results", function()
  for _, spec in ipairs(groups()) do
    local g = spec.group
    local size = g and g:size() or n
    it("all_reduce (every op), broadcast on " .. spec.name, function()
      if not member(spec) then return end
      for _, dtype in ipairs(ALL) do
        for _, op in ipairs({"sum", "max", "min"}) do
          local x = data({3, 5}, dtype, 1)
          local c, d = x:clone(), x:to("cuda")
          D.all_reduce(c, op, g); D.all_reduce(d, op, g)
          same(c, d)
        end
        local x = data({7}, dtype, 2)
        local src = g and spec.ranks[#spec.ranks] or n - 1
        local c, d = x:clone(), x:to("cuda")
        D.broadcast(c, src, g); D.broadcast(d, src, g)
        same(c, d)
      end
      for _, dtype in ipairs(FLOATS) do
        local x = dt.randn({4, 6}):to(dtype)
        local c, d = x:clone(), x:to("cuda")
        D.all_reduce(c, "avg", g); D.all_reduce(d, "avg", g)
        close(c, d)
      end
    end)

    it("all_gather(_v), reduce_scatter, all_to_all(_v), scatter, gather on " .. spec.name, function()
      if not member(spec) then return end
      for _, dtype in ipairs(ALL) do
        local x = data({2, 3}, dtype, 3)
        same(D.all_gather(x, g), D.all_gather(x:to("cuda"), g))
        local v = data({rank % 3, 2}, dtype, 4) -- uneven, zero rows on some ranks
        local cv, cs = D.all_gather_v(v, g)
        local dv, ds = D.all_gather_v(v:to("cuda"), g)
        same(cv, dv); assert.are.same(cs, ds)
        local r = data({2 * size, 3}, dtype, 5)
        same(D.reduce_scatter(r, "sum", g), D.reduce_scatter(r:to("cuda"), "sum", g))
        same(D.all_to_all(r, g), D.all_to_all(r:to("cuda"), g))
        local splits = {}
        for p = 1, size do splits[p] = (rank + p) % 3 end
        local total = 0
        for _, k in ipairs(splits) do total = total + k end
        local a = data({total, 2}, dtype, 6)
        local ca, cr = D.all_to_all_v(a, splits, g)
        local da, dr = D.all_to_all_v(a:to("cuda"), splits, g)
        same(ca, da); assert.are.same(cr, dr)
        local root = g and spec.ranks[1] or 0
        local me_root = rank == root
        local s = data({2 * size, 2}, dtype, 7)
        same(D.scatter(me_root and s or nil, root, g), D.scatter(me_root and s:to("cuda") or nil, root, g))
        local cg, dg = D.gather(x, root, g), D.gather(x:to("cuda"), root, g)
        if me_root then same(cg, dg) else assert.is_nil(dg) end
      end
    end)

    it("async collectives on cuda on " .. spec.name, function()
      if not member(spec) then return end
      local x = data({64}, "bfloat16", 8)
      local c, d = x:clone(), x:to("cuda")
      D.all_reduce(c, "sum", g)
      local w = D.all_reduce(d, "sum", {group = g, async_op = true})
      same(c, w:wait())
    end)
  end

  it("send/recv between ranks on cuda", function()
    if n < 2 then return end
    local x = data({5}, "float16", 9)
    if rank == 0 then D.send(x:to("cuda"), 1)
    elseif rank == 1 then
      local got = D.recv(dt.zeros({5}, {dtype = "float16"}):to("cuda"), 0)
      dt.manual_seed(9); same(dt.randint(0, 9, {5}):to("float16"), got)
    end
  end)

  it("a collective mixing a cpu and a cuda tensor is an error naming both devices", function()
    local ok, err = pcall(D.all_gather, dt.ones(2):to("cuda"), nil, dt.zeros(2 * n))
    assert.is_false(ok)
    assert.matches("tensor on cuda", err, 1, true)
  end)
end)

describe("DTensor redistribution on a cuda mesh uses NCCL", function()
  it("Shard -> Replicate, Shard -> Shard, Partial -> Replicate match the cpu mesh bitwise", function()
    local cm, gm = dt.init_device_mesh("cpu", {n}), dt.init_device_mesh("cuda", {n})
    dt.manual_seed(42)
    local full = dt.randint(0, 9, {2 * n + 1, 3}):to("float32")
    for _, pl in ipairs({{dt.Shard(1)}, {dt.Shard(2)}}) do
      local c = dt.distribute_tensor(full, cm, pl)
      local g = dt.distribute_tensor(full:to("cuda"), gm, pl)
      same(c:full_tensor(), g:full_tensor())
      same(c:redistribute(cm, {dt.Shard(2)}):to_local(), g:redistribute(gm, {dt.Shard(2)}):to_local())
    end
  end)
end)
