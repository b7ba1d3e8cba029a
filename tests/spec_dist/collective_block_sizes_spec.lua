-- SPMD specs of the collectives at sizes around the threads backend's internal boundaries
-- (64-byte slice lines, the 4 KiB fold accumulator, the 64 KiB reduce block, the 512-element
-- half-precision block): every dtype, every op, odd and zero sizes, in place, on the world and
-- a sub-group.  Every rank rebuilds every rank's input from its seed and folds them in rank
-- order itself, so the results are checked bitwise, not just for plausibility.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
local HALF = {bfloat16 = true, float16 = true}
local FLOAT = {float32 = true, float64 = true, bfloat16 = true, float16 = true}

-- element counts: empty, tiny, odd, either side of the accumulator (1024 f32, 512 f64) and of
-- a 64 KiB block (16384 f32), and a multi-block odd size
local SIZES = {0, 1, 17, 511, 513, 1025, 16383, 16385, 3 * 16384 + 5}

-- Rank r's input: random fractions in the floating dtypes (so the summation order shows in the
-- bits), small integers elsewhere (products stay exact in uint8).
local function input(r, len, dtype, op, salt)
  dt.manual_seed(7919 * r + salt)
  if FLOAT[dtype] then return dt.randn({len}):to(dtype) end
  local t = op == "product" and dt.randint(1, 4, {len}) or dt.randint(0, 40, {len})
  if dtype == "bool" then return t:remainder(2):to("bool") end
  return t:to(dtype)
end

local function fold2(op, a, b)
  if op == "sum" then return a + b end
  if op == "product" then return a * b end
  if op == "max" then return dt.where(a:gt(b), a, b) end
  return dt.where(a:lt(b), a, b)
end

-- The reduction of the members' inputs in rank order, as the backend promises: bf16/f16 in
-- f32, rounded once; bool as or (sum, max) / and (product, min).
local function expected(members, len, dtype, op, salt)
  local work = HALF[dtype] and "float32" or dtype == "bool" and "int32" or dtype
  local bop = dtype == "bool" and ((op == "sum" or op == "max") and "max" or "min") or op
  local acc
  for _, r in ipairs(members) do
    local x = input(r, len, dtype, op, salt):to(work)
    acc = acc and fold2(bop, acc, x) or x
  end
  return acc:to(dtype)
end

local function position(spec)
  for i, r in ipairs(spec.ranks) do if r == rank then return i end end
end

local OPS = {"sum", "product", "max", "min"}

-- Bitwise on the threads backend; MPI chooses its own summation order (and rounds bf16/f16
-- between steps), so there floating values are checked to rounding error.
local EXACT = dt.backend() == "threads"
local TOL = {float32 = 1e-5, float64 = 1e-12, bfloat16 = 3e-2, float16 = 3e-3}
local function same(got, want)
  if EXACT or not TOL[want.dtype] or want:numel() == 0 then return dt.equal(got, want) end
  local g, w = got:to("float64"), want:to("float64")
  return ((g - w):abs() - (w:abs() + 1) * TOL[want.dtype]):max():item() <= 0
end

describe("collectives across the threads backend's block boundaries", function()
  for _, spec in ipairs(H.groups()) do
    it("all_reduce in place gives the rank-order fold, bitwise, on " .. spec.name, function()
      if not position(spec) then return end
      for _, dtype in ipairs(ALL) do
        for _, op in ipairs(OPS) do
          for k, len in ipairs(SIZES) do
            local t = input(rank, len, dtype, op, k)
            local r = D.all_reduce(t, op, spec.group)
            assert.are.equal(t, r)
            assert.is_true(same(t, expected(spec.ranks, len, dtype, op, k)),
              string.format("all_reduce %s %s %d elements", op, dtype, len))
          end
        end
      end
    end)

    it("reduce_scatter gives each rank its block of the rank-order fold, bitwise, on " .. spec.name, function()
      local me = position(spec)
      if not me then return end
      local g = #spec.ranks
      for _, dtype in ipairs(ALL) do
        for _, op in ipairs(OPS) do
          for k, len in ipairs(SIZES) do
            local block = len // g + (len % 2) -- odd per-rank blocks too
            local out = D.reduce_scatter(input(rank, block * g, dtype, op, k), op, spec.group)
            local want = expected(spec.ranks, block * g, dtype, op, k):narrow(1, (me - 1) * block + 1, block)
            assert.is_true(same(out, want), string.format("reduce_scatter %s %s block %d", op, dtype, block))
          end
        end
      end
    end)

    it("all_gather concatenates the members' inputs, bitwise, into a given out too, on " .. spec.name, function()
      if not position(spec) then return end
      for _, dtype in ipairs(ALL) do
        for k, len in ipairs(SIZES) do
          local parts = {}
          for i, r in ipairs(spec.ranks) do parts[i] = input(r, len, dtype, "sum", k) end
          local want = dt.cat(parts)
          local mine = input(rank, len, dtype, "sum", k)
          assert.is_true(dt.equal(D.all_gather(mine, spec.group), want), string.format("all_gather %s %d", dtype, len))
          local out = dt.zeros({len * #spec.ranks}, {dtype = dtype})
          assert.are.equal(out, D.all_gather(mine, spec.group, out))
          assert.is_true(dt.equal(out, want), string.format("all_gather into out %s %d", dtype, len))
        end
      end
    end)
  end

  it("avg in place is the rank-order sum divided once, in every floating dtype", function()
    local world = H.groups()[1].ranks
    for _, dtype in ipairs({"float32", "float64", "bfloat16", "float16"}) do
      for k, len in ipairs({0, 17, 16385}) do
        local t = D.all_reduce(input(rank, len, dtype, "avg", k), "avg")
        local sum = expected(world, len, dtype, "sum", k)
        if not HALF[dtype] then
          assert.is_true(same(t, sum / n), string.format("avg %s %d", dtype, len))
        else -- rounded once from the f32 sum / n
          local acc
          for _, r in ipairs(world) do
            local x = input(r, len, dtype, "avg", k):to("float32")
            acc = acc and acc + x or x
          end
          assert.is_true(same(t, (acc / n):to(dtype)), string.format("avg %s %d", dtype, len))
        end
      end
    end
  end)

  it("integer sums and products wrap as torch's do (two's complement), on every rank count", function()
    local t = D.all_reduce(dt.tensor({math.mininteger, 3, math.maxinteger}, {dtype = "int64"}), "sum")
    local want = {math.mininteger * n, 3 * n, math.maxinteger * n} -- Lua integers wrap alike
    assert.are.same(want, t:totable())
    local p = D.all_reduce(dt.tensor({2 ^ 40, -3}, {dtype = "int64"}), "product")
    local wp = {1, 1}
    for _ = 1, n do wp[1], wp[2] = wp[1] * (1 << 40), wp[2] * -3 end
    assert.are.same(wp, p:totable())
    local i = D.all_reduce(dt.tensor({2 ^ 30 + 1}, {dtype = "int32"}), "sum")
    local wi = ((2 ^ 30 + 1) // 1 * n) & 0xffffffff
    if wi >= 2 ^ 31 then wi = wi - (1 << 32) end
    assert.are.same({wi}, i:totable())
  end)
end)
