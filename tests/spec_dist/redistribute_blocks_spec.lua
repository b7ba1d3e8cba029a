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
                       table.concat(shape, "x")), function()
        local x = original(shape)
        local s = dt.distribute_tensor(x, mesh2, {dt.Shard(dims[1]), dt.Shard(dims[2])}, {src_rank = false})
        local r
        local c = dt.comm_debug(function() r = s:redistribute({dt.Replicate(), dt.Replicate()}) end)
        assert.are.equal(1, count(c, "all_gather"))
        assert.is_true(dt.equal(x, r:to_local()))
      end)
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
                       table.concat(shape, "x")), function()
        local x = original_of(shape, dtype)
        local s = dt.distribute_tensor(x, mesh2, {dt.Shard(1), dt.Shard(2)}, {src_rank = false})
        local r
        local c = dt.comm_debug(function() r = s:redistribute({dt.Replicate(), dt.Replicate()}) end)
        assert.are.equal(1, count(c, "all_gather"))
        assert.is_true(dt.equal(x, r:to_local()))
      end)
    end
  end
end)
