-- Redistribute's strided-block collectives (no packing): Shard(i) -> Shard(j) lands each
-- peer's block in its place with one all_to_all, Shard -> Replicate and the 2-d mesh's
-- [Shard, Shard] -> [Replicate, Replicate] with one all_gather, for shapes larger than the
-- property spec's (odd sizes, blocks of many rows, zero-size chunks) and 3-d tensors whose
-- blocks are not 2-d (the gather then places them from a buffer).  Every result must be
-- the torch.chunk slice of the original, bit for bit.
local n = dt.world_size()

local function chunk(L, c) -- torch.chunk over n: start (0-based) and length
  local per = (L + n - 1) // n
  local st = math.min(per * c, L)
  return st, math.min(per, L - st)
end

local function original(shape)
  local numel = 1
  for _, s in ipairs(shape) do numel = numel * s end
  return dt.arange(numel):float():reshape(shape) * 1.5 + 0.25
end

local function count(c, name)
  local k = 0
  for _, op in ipairs(c.ops) do if op.name == name then k = k + 1 end end
  return k
end

local function slice(x, d, st, len) return x:narrow(d, st + 1, len) end

-- [Shard(i), Shard(j)] -> [Replicate, Replicate] of x on a 2x2 mesh: one all_gather, x itself.
local function gathers_whole(x, mesh2, i, j)
  local s = dt.distribute_tensor(x, mesh2, {dt.Shard(i), dt.Shard(j)}, {src_rank = false})
  local r
  local c = dt.comm_debug(function() r = s:redistribute({dt.Replicate(), dt.Replicate()}) end)
  assert.are.equal(1, count(c, "all_gather"))
  assert.is_true(dt.equal(x, r:to_local()))
end

describe("redistribute through strided blocks", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  for _, shape in ipairs({{37, 1029}, {2, 3}, {5, 0}, {6, 7, 9}, {1, 130, 3}}) do
    for i = 1, #shape do
      for j = 1, #shape do
        if i ~= j then
          it(string.format("Shard(%d) -> Shard(%d) of %s", i, j, table.concat(shape, "x")), function()
            local x = original(shape)
            local s = dt.distribute_tensor(x, mesh, {dt.Shard(i)}, {src_rank = false})
            local y
            local c = dt.comm_debug(function() y = s:redistribute({dt.Shard(j)}) end)
            assert.are.equal(n > 1 and 1 or 0, count(c, "all_to_all"))
            local st, len = chunk(shape[j], dt.rank())
            assert.is_true(dt.equal(slice(x, j, st, len), y:to_local()))
            local r
            c = dt.comm_debug(function() r = s:redistribute({dt.Replicate()}) end)
            assert.are.equal(n > 1 and 1 or 0, count(c, "all_gather"))
            assert.is_true(dt.equal(x, r:to_local()))
          end)
        end
      end
    end
  end

  if n == 4 then
    local mesh2 = dt.init_device_mesh("cpu", {2, 2})
    for _, case in ipairs({{{9, 1031}, {1, 2}}, {{7, 5, 3}, {1, 3}}, {{5, 6, 7}, {2, 3}}, {{3, 1}, {1, 2}}}) do
      local shape, dims = case[1], case[2]
      it(string.format("[Shard(%d), Shard(%d)] -> [Replicate, Replicate] of %s on a 2x2 mesh", dims[1], dims[2],
                       table.concat(shape, "x")), function() gathers_whole(original(shape), mesh2, dims[1], dims[2]) end)
    end
  end
end)

-- Outputs over 4 MiB a rank: the threads backend writes them with non-temporal stores (rows
-- of any length and alignment: 1-, 2-, 4- and 8-byte elements at odd widths).  Random uneven
-- shapes from a fixed seed (the same on every rank), against torch.chunk slices of the
-- original, bit for bit.
describe("redistribute of large tensors (streamed copies)", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local rng = math.random
  math.randomseed(20261124)
  local dtypes = {"uint8", "bfloat16", "float32", "float64"}
  local function large(dtype, ndim)
    local esz = ({uint8 = 1, bfloat16 = 2, float32 = 4, float64 = 8})[dtype]
    local want = (17 << 20) // esz -- elements: over 4 MiB a rank after an all_to_all on 4 ranks
    local shape = {}
    if ndim == 2 then
      shape[2] = rng(500, 3000)
    else
      shape[2], shape[3] = rng(3, 40), rng(30, 300)
    end
    local inner = 1
    for k = 2, ndim do inner = inner * shape[k] end
    shape[1] = want // inner + rng(0, 7)
    return shape
  end
  local function original_of(shape, dtype)
    local numel = 1
    for _, s in ipairs(shape) do numel = numel * s end
    local x = dt.arange(numel):reshape(shape)
    if dtype == "uint8" then return (x % 251):to(dtype) end
    if dtype == "bfloat16" then return (x % 4093):to(dtype) * 0.5 end
    return x:to(dtype) * 0.75 + 0.125
  end
  for k, dtype in ipairs(dtypes) do
    local shape = large(dtype, k % 2 == 0 and 3 or 2)
    local i, j = 1, #shape
    if k > 2 then i, j = j, 1 end
    it(string.format("Shard(%d) -> Shard(%d) and Shard -> Replicate of %s %s", i, j, dtype, table.concat(shape, "x")),
       function()
      local x = original_of(shape, dtype)
      local s = dt.distribute_tensor(x, mesh, {dt.Shard(i)}, {src_rank = false})
      local y, r
      local c = dt.comm_debug(function() y = s:redistribute({dt.Shard(j)}) end)
      assert.are.equal(n > 1 and 1 or 0, count(c, "all_to_all"))
      local st, len = chunk(shape[j], dt.rank())
      assert.is_true(dt.equal(slice(x, j, st, len), y:to_local()))
      c = dt.comm_debug(function() r = y:redistribute({dt.Replicate()}) end)
      assert.are.equal(n > 1 and 1 or 0, count(c, "all_gather"))
      assert.is_true(dt.equal(x, r:to_local()))
    end)
  end

  if n == 4 then
    local mesh2 = dt.init_device_mesh("cpu", {2, 2})
    for _, dtype in ipairs({"bfloat16", "float32"}) do
      local shape = large(dtype, 2)
      it(string.format("[Shard(1), Shard(2)] -> [Replicate, Replicate] of %s %s on a 2x2 mesh", dtype,
                       table.concat(shape, "x")), function() gathers_whole(original_of(shape, dtype), mesh2, 1, 2) end)
    end
  end
end)

-- Partial -> Shard(d) reduces each rank's slab straight from every peer's local tensor (any
-- dim, uneven and empty chunks, no packed copy): the result must be the chunk of Partial ->
-- Replicate bit for bit (the same rank-order fold), and of the one-device sum of the parts
-- where that is exact (integer values).
describe("Partial -> Shard by strided slabs", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local function part(shape, dtype, r) -- rank r's addend: distinct on every rank
    local numel = 1
    for _, s in ipairs(shape) do numel = numel * s end
    local v = (dt.arange(numel) * (r + 2) % 97 - 40):reshape(shape)
    return (dtype == "uint8" and v:abs() or v):to(dtype)
  end
  local cases = {{{7, 5, 3}, "float32", "sum"}, {{2, 9}, "float64", "avg"}, {{5, 0, 4}, "float32", "sum"},
                 {{3, 1}, "int64", "max"}, {{6, 11}, "bfloat16", "sum"}, {{4, 3, 2}, "float32", "min"},
                 {{1, 2, 9}, "uint8", "max"}, {{130, 33}, "float64", "sum"}, {{3, 4}, "float32", "prod"}}
  for _, case in ipairs(cases) do
    local shape, dtype, op = case[1], case[2], case[3]
    for d = 1, #shape do
      it(string.format("Partial(%s) -> Shard(%d) of %s %s", op, d, dtype, table.concat(shape, "x")), function()
        local p = dt.from_local(part(shape, dtype, dt.rank()), mesh, {dt.Partial(op)})
        local s, r
        local c = dt.comm_debug(function() s = p:redistribute({dt.Shard(d)}) end)
        assert.are.equal(n > 1 and 1 or 0, count(c, "reduce_scatter"))
        r = p:redistribute({dt.Replicate()}):to_local()
        local st, len = chunk(shape[d], dt.rank())
        assert.is_true(dt.equal(slice(r, d, st, len), s:to_local()))
        if op == "sum" and dtype ~= "bfloat16" then
          local want = part(shape, dtype, 0)
          for q = 1, n - 1 do want = want + part(shape, dtype, q) end
          assert.is_true(dt.equal(slice(want, d, st, len), s:to_local()))
        end
      end)
    end
  end

  if n == 4 then
    local mesh2 = dt.init_device_mesh("cpu", {2, 2})
    for m = 1, 2 do
      it(string.format("Partial(sum) on mesh dim %d -> Shard(2) on a 2x2 mesh", m), function()
        local coord = mesh2:get_coordinate()
        local pl = {dt.Replicate(), dt.Replicate()}
        pl[m] = dt.Partial("sum")
        local x = part({5, 7}, "float64", coord[m]) -- the same part along the other mesh dim
        local p = dt.from_local(x, mesh2, pl)
        local to = {dt.Replicate(), dt.Replicate()}
        to[m] = dt.Shard(2)
        local s = p:redistribute(to)
        local want = part({5, 7}, "float64", 0) + part({5, 7}, "float64", 1)
        local st, len = 4 * coord[m], coord[m] == 0 and 4 or 3 -- torch.chunk of 7 over 2
        assert.is_true(dt.equal(slice(want, 2, st, len), s:to_local()))
      end)
    end
  end
end)

-- Shard(i) -> Shard(j) where every rank sends column slabs of its own rows (the threads backend
-- pushes them: each rank copies its rows once into its peers' outputs) or not, on random
-- shapes from a fixed seed (uneven, size-1 and zero-size dims, 2-4 dims, several dtypes), on the
-- world and, with 4 ranks, along either dim of a 2x2 mesh (group ranks that are not the world's):
-- the torch.chunk slice of the original, bit for bit, and Shard(j) -> Shard(i) back to the shard.
describe("Shard(i) -> Shard(j) of random shapes", function()
  math.randomseed(7331)
  local rng = math.random
  local dtypes = {"float32", "float64", "bfloat16", "int64", "uint8"}
  local mesh = dt.init_device_mesh("cpu", {n})
  local mesh2 = n == 4 and dt.init_device_mesh("cpu", {2, 2}) or nil
  for k = 1, 14 do
    local ndim = rng(2, 4)
    local shape = {}
    for d = 1, ndim do shape[d] = ({0, 1, rng(2, 9), rng(10, 700)})[rng(1, 4)] end
    if k % 5 == 0 then shape[ndim] = 0 end
    local i = rng(1, ndim)
    local j = (i + rng(0, ndim - 2)) % ndim + 1
    local dtype = dtypes[k % #dtypes + 1]
    local m = mesh2 and rng(1, 2) or nil
    it(string.format("Shard(%d) -> Shard(%d) of %s %s%s", i, j, dtype, table.concat(shape, "x"),
                     m and string.format(" on mesh dim %d of 2x2", m) or ""), function()
      local x = original(shape)
      x = (dtype == "uint8" and x % 251 or x):to(dtype)
      local pl, to = {dt.Shard(i)}, {dt.Shard(j)}
      local msh, cnt, coord = mesh, n, dt.rank()
      if m then
        pl, to = {dt.Replicate(), dt.Replicate()}, {dt.Replicate(), dt.Replicate()}
        pl[m], to[m] = dt.Shard(i), dt.Shard(j)
        msh, cnt, coord = mesh2, 2, mesh2:get_coordinate()[m]
      end
      local s = dt.distribute_tensor(x, msh, pl, {src_rank = false})
      local y = s:redistribute(to)
      local per = (shape[j] + cnt - 1) // cnt
      local st = math.min(per * coord, shape[j])
      assert.is_true(dt.equal(slice(x, j, st, math.min(per, shape[j] - st)), y:to_local()))
      assert.is_true(dt.equal(s:to_local(), y:redistribute(pl):to_local()))
    end)
  end
end)
