-- Communication bounds, SPMD (dtlua -n 1..4; doc/dispatch.md "Partial through linear ops"):
-- per case the collectives and bytes dt.comm_debug records (an upper bound, so a regression
-- to more communication fails) and the values against one device -- Partial kept through
-- linear ops (P + R, cat(P, R), in-place add_/copy_/mul_), Partial(max)/(min) through
-- monotone ops and amax/amin, Partial(avg) through mean and mm, Replicate/Shard -> Partial
-- without a collective, shards of size-1 and zero-size dims through pointwise ops -- on
-- random shapes (uneven and zero-size too), 1-d and 2-d meshes.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local R, P, S = dt.Replicate, dt.Partial, dt.Shard

local function close(a, b, what) -- plain tensors, float64 to 1e-9 (reordered sums)
  assert.are.same(b:size(), a:size(), what)
  local err = a:numel() == 0 and 0 or (a:to("float64") - b:to("float64")):abs():max():item()
  assert(err <= 1e-9 * (1 + (b:numel() == 0 and 0 or b:abs():max():item())), (what or "") .. ": max error " .. err)
end

local function shape_string(s) return "[" .. table.concat(s, "x") .. "]" end

local function placements_are(want, got, what) -- on one rank every placement is the same data
  if n > 1 then assert.are.equal(H.placement_string(want), H.placement_string(got), what) end
end

-- f's collectives on this rank: at most `ops` of them and `bytes` bytes.
local function bounded(ops, bytes, what, f)
  local c = dt.comm_debug(f)
  assert(#c.ops <= ops, ("%s: %d collectives, at most %d expected"):format(what, #c.ops, ops))
  assert(c.bytes <= bytes, ("%s: %d bytes, at most %d expected"):format(what, c.bytes, bytes))
  return c
end

-- A Partial(op) DTensor on mesh whose full value is x: rank-dependent parts built so that the
-- reduction over every mesh dim gives x exactly (sum: x split into a rank's share and the
-- rest; max/min: x on one coordinate, smaller/larger values elsewhere; avg: x everywhere).
local function partial_of(x, mesh, op)
  local ndim = #mesh:shape()
  local me = mesh:get_coordinate()
  local first = true
  for m = 1, ndim do first = first and me[m] == 0 end
  local part
  if op == "sum" then
    local share = (x * 0.25):floor()
    part = first and (x - share * (mesh:size() - 1)) or share
  elseif op == "max" then part = first and x:clone() or x - 1 - rank
  elseif op == "min" then part = first and x:clone() or x + 1 + rank
  else part = x:clone() end
  local pl = {}
  for m = 1, ndim do pl[m] = P(op) end
  return dt.from_local(part, mesh, pl, {run_check = false})
end

local function rand_shape(rng, nd, allow_zero)
  local s = {}
  for i = 1, nd do s[i] = rng.int(allow_zero and 0 or 1, 7) end
  return s
end

local function values(rng, shape) -- exact small integers in float64
  local numel = 1
  for _, v in ipairs(shape) do numel = numel * v end
  local x = dt.arange(numel):to("float64")
  if numel > 0 then x = (x * (rng.int(1, 5)) + rng.int(-20, 20)):remainder(41) - 20 end
  return x:reshape(shape)
end

local function meshes() -- {name, mesh, its ndim}
  local list = {{"1-d", dt.init_device_mesh("cpu", {n}), 1}}
  if n == 4 then list[2] = {"2x2", dt.init_device_mesh("cpu", {2, 2}), 2} end
  return list
end

local function all(p, nm)
  local t = {}
  for m = 1, nm do t[m] = p end
  return t
end

describe("Partial kept through linear ops", function()
  local rng = H.prng(1811)
  for _, mm in ipairs(meshes()) do
    local name, mesh, nm = mm[1], mm[2], mm[3]
    for case = 1, 6 do
      local shape = rand_shape(rng, rng.int(1, 3), case > 3)
      it(("P(sum) + R, R + P(sum), P(sum) - R on %s, %s: no collective"):format(name, shape_string(shape)), function()
        local x, b = values(rng, shape), values(rng, shape)
        local px = partial_of(x, mesh, "sum")
        local rb = dt.distribute_tensor(b, mesh, all(R(), nm))
        local y1, y2, y3
        bounded(0, 0, "P + R", function() y1, y2, y3 = px + rb, rb + px, px - rb end)
        placements_are(all(P(), nm), y1.placements, "P + R")
        placements_are(all(P(), nm), y2.placements, "R + P")
        close(y1:full_tensor(), x + b, "P + R")
        close(y2:full_tensor(), b + x, "R + P")
        close(y3:full_tensor(), x - b, "P - R")
      end)
    end
    it("P(sum) + R broadcast (a row) on " .. name .. ": no collective", function()
      local x, b = values(rng, {5, 3}), values(rng, {3})
      local px, rb, y = partial_of(x, mesh, "sum"), dt.distribute_tensor(b, mesh, all(R(), nm))
      bounded(0, 0, "P + row", function() y = px + rb end)
      close(y:full_tensor(), x + b, "P + row")
    end)
    it("cat(P(sum), R) on " .. name .. " stays Partial without a collective", function()
      local x, b = values(rng, {3, 4}), values(rng, {2, 4})
      local px, rb, y = partial_of(x, mesh, "sum"), dt.distribute_tensor(b, mesh, all(R(), nm))
      bounded(0, 0, "cat", function() y = dt.cat({px, rb}) end)
      placements_are(all(P(), nm), y.placements, "cat")
      close(y:full_tensor(), dt.cat({x, b}), "cat")
    end)
    it("in-place add_, copy_ (R) and mul_ (R) on a Partial(sum) on " .. name .. ": no collective", function()
      local x, b = values(rng, {4, 5}), values(rng, {4, 5})
      local rb = dt.distribute_tensor(b, mesh, all(R(), nm))
      local p = partial_of(x, mesh, "sum")
      bounded(0, 0, "add_", function() p:add_(rb) end)
      placements_are(all(P(), nm), p.placements, "add_")
      close(p:full_tensor(), x + b, "add_")
      local q = partial_of(x, mesh, "sum")
      bounded(0, 0, "copy_", function() q:copy_(rb) end)
      close(q:full_tensor(), b, "copy_")
      local s = partial_of(x, mesh, "sum")
      bounded(0, 0, "mul_", function() s:mul_(rb) end)
      close(s:full_tensor(), x * b, "mul_")
    end)
    it("mul_ of a Partial(sum) by a sharded tensor on " .. name .. ": one all_gather per sharded mesh dim", function()
      local x, b = values(rng, {6, 5}), values(rng, {6, 5})
      local p = partial_of(x, mesh, "sum")
      local pl = all(R(), nm)
      pl[1] = S(1)
      local sb = dt.distribute_tensor(b, mesh, pl)
      bounded(n > 1 and 1 or 0, 6 * 5 * 8, "mul_ S", function() p:mul_(sb) end)
      placements_are(all(P(), nm), p.placements, "mul_ S")
      close(p:full_tensor(), x * b, "mul_ S")
    end)
  end
end)

describe("Partial(max)/(min)/(avg) through the ops that keep them", function()
  local rng = H.prng(1812)
  local mesh = dt.init_device_mesh("cpu", {n})
  it("relu, tanh, floor keep Partial(max); neg turns it into Partial(min) and back", function()
    local x = values(rng, {4, 6})
    local pm = partial_of(x, mesh, "max")
    local a, b, c, d
    bounded(0, 0, "monotone", function() a, b, c, d = pm:relu(), pm:tanh(), pm:floor(), pm:neg() end)
    placements_are({P("max")}, a.placements, "relu")
    placements_are({P("min")}, d.placements, "neg")
    close(a:full_tensor(), x:relu(), "relu")
    close(b:full_tensor(), x:tanh(), "tanh")
    close(c:full_tensor(), x:floor(), "floor")
    close(d:full_tensor(), -x, "neg")
    local e
    bounded(0, 0, "neg of min", function() e = d:neg() end)
    placements_are({P("max")}, e.placements, "neg neg")
    close(e:full_tensor(), x, "neg neg")
  end)
  it("abs and sqrt do not keep Partial(max) (not monotone on every input): reduced first, right values", function()
    local x = values(rng, {3, 5})
    local y = partial_of(x, mesh, "max"):abs()
    close(y:full_tensor(), x:abs(), "abs")
  end)
  it("amax keeps Partial(max), amin keeps Partial(min): no collective", function()
    local x = values(rng, {5, 4})
    local a, b
    bounded(0, 0, "amax", function() a = partial_of(x, mesh, "max"):amax(1) end)
    bounded(0, 0, "amin", function() b = partial_of(x, mesh, "min"):amin({1, 2}) end)
    placements_are({P("max")}, a.placements, "amax")
    placements_are({P("min")}, b.placements, "amin")
    close(a:full_tensor(), x:amax(1), "amax")
    close(b:full_tensor(), x:amin({1, 2}), "amin")
  end)
  it("mean keeps Partial(avg); mm of Partial(avg) with a replicated operand stays Partial(avg)", function()
    local x, w = values(rng, {4, 3}), values(rng, {3, 2})
    local pa = partial_of(x, mesh, "avg")
    local rw, m, y = dt.distribute_tensor(w, mesh, {R()})
    bounded(0, 0, "mean, mm", function() m, y = pa:mean(2), dt.mm(pa, rw) end)
    placements_are({P("avg")}, m.placements, "mean")
    placements_are({P("avg")}, y.placements, "mm")
    close(m:full_tensor(), x:mean(2), "mean")
    close(y:full_tensor(), dt.mm(x, w), "mm")
  end)
end)

describe("redistribute to Partial", function()
  local rng = H.prng(1813)
  for _, mm in ipairs(meshes()) do
    local name, mesh, nm = mm[1], mm[2], mm[3]
    for case = 1, 5 do
      local shape = rand_shape(rng, rng.int(1, 3), case > 2)
      local d = rng.int(1, #shape)
      for _, op in ipairs({"sum", "max", "min", "product", "avg"}) do
        it(("Replicate and Shard(%d) -> Partial(%s) on %s, %s"):format(d, op, name, shape_string(shape)), function()
          local x = values(rng, shape)
          local r = dt.distribute_tensor(x, mesh, all(R(), nm))
          local s = dt.distribute_tensor(x, mesh, all(S(d), nm))
          local a, b
          bounded(0, 0, "R -> P", function() a = r:redistribute(mesh, all(P(op), nm)) end)
          -- avg has no identity to pad a shard with: it goes through Replicate (an all_gather
          -- per mesh dim)
          local ops = op == "avg" and n > 1 and nm or 0
          bounded(ops, op == "avg" and 8 * x:numel() * nm or 0, "S -> P", function() b = s:redistribute(mesh, all(P(op), nm)) end)
          placements_are(all(P(op), nm), b.placements, "S -> P")
          close(a:full_tensor(), x, "R -> P " .. op)
          close(b:full_tensor(), x, "S -> P " .. op)
        end)
      end
    end
  end
  it("integer and bool shards -> Partial(max)/(min) pad with the dtype's extremes", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    for _, dtype in ipairs({"int64", "int32", "uint8", "bool"}) do
      local x = H.global({7, 2}, dtype)
      local s = dt.distribute_tensor(x, mesh, {S(1)})
      for _, op in ipairs({"max", "min"}) do
        local y = s:redistribute({P(op)})
        assert.are.same(x:totable(), y:full_tensor():totable(), dtype .. " " .. op)
      end
    end
  end)
  it("explain_redistribute names the local steps", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local s = dt.distribute_tensor(dt.ones(4, 4), mesh, {S(2)})
    local text = dt.explain_redistribute(s, {P()}, {print = false})
    if n > 1 then assert.matches("pad", text, 1, true) end
  end)
end)

describe("shards of size-1 and zero-size dims through pointwise ops", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  for _, shape in ipairs({{1, 5}, {0, 3}, {3, 0}}) do
    it("Shard(1) of " .. shape_string(shape) .. " stays sharded through exp and add", function()
      local rng = H.prng(1814)
      local x, b = values(rng, shape), values(rng, shape)
      local sx = dt.distribute_tensor(x, mesh, {S(1)})
      local sb = dt.distribute_tensor(b, mesh, {S(1)})
      local y
      bounded(0, 0, "pointwise", function() y = (sx:exp() + sb) * 2 end)
      placements_are({S(1)}, y.placements, "pointwise")
      close(y:full_tensor(), (x:exp() + b) * 2, "pointwise")
    end)
  end
end)

-- PyTorch's test_view_ops expectations: a view that keeps an unevenly sharded dim whole issues
-- no collective and shares the local storage; dtlua also keeps views PyTorch refuses.
describe("views of unevenly sharded tensors", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local x = dt.arange(5 * 4 * 3):reshape(5, 4, 3):to("float64")
  for _, case in ipairs({
    {1, {5, 4, 3}, 1}, {1, {5, 12}, 1}, {1, {5, 1, 12}, 1}, {1, {1, 5, 12}, 2}, {1, {5, 2, 2, 3}, 1},
    {2, {5, 4, 3}, 2}, {2, {5, 4, 3, 1}, 2}, {3, {20, 3}, 2}, {3, {5, 4, 1, 3}, 4},
  }) do
    local d, shape, od = case[1], case[2], case[3]
    it(("Shard(%d) of [5x4x3] viewed as %s: no collective, the same storage"):format(d, shape_string(shape)), function()
      local s = dt.distribute_tensor(x, mesh, {S(d)})
      local y
      bounded(0, 0, "view", function() y = s:view(table.unpack(shape)) end)
      placements_are({S(od)}, y.placements, "view")
      if s:to_local():numel() > 0 then assert.is_true(y:to_local():shares_storage(s:to_local())) end
      close(y:full_tensor(), x:view(table.unpack(shape)), "view")
    end)
  end
  it("a view that merges an uneven sharded dim with the next one gathers first: right values", function()
    local s = dt.distribute_tensor(x, mesh, {S(1)})
    local y = s:view(60)
    close(y:full_tensor(), x:view(60), "flatten")
  end)
  it("the identity view of a zero-size sharded tensor moves nothing", function()
    local s = dt.distribute_tensor(dt.zeros(0, 3), mesh, {S(2)})
    local y
    bounded(0, 0, "view", function() y = s:view(0, 3) end)
    placements_are({S(2)}, y.placements, "view")
    assert.are.same({0, 3}, y:size())
  end)
end)

-- What dtlua moves less than PyTorch for: kept as bounds, so that none of it regresses.
describe("communication dtlua keeps below PyTorch's", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local x = dt.arange(7 * 6):reshape(7, 6):to("float64")
  it("Shard(1) -> Shard(2) of an uneven tensor: one all_to_all of the local shard, no padding", function()
    local s = dt.distribute_tensor(x, mesh, {S(1)})
    local y
    bounded(n > 1 and 1 or 0, s:to_local():numel() * 8, "all_to_all", function() y = s:redistribute({S(2)}) end)
    close(y:full_tensor(), x, "all_to_all")
  end)
  if n == 4 then it("(Shard(1), Shard(1)) -> Replicate on a 2x2 mesh: one merged all_gather", function()
    local m2 = dt.init_device_mesh("cpu", {2, 2})
    local s = dt.distribute_tensor(x, m2, {S(1), S(1)})
    local y
    bounded(1, x:numel() * 8, "merged all_gather", function() y = s:redistribute({R(), R()}) end)
    close(y:to_local(), x, "merged all_gather")
  end) end
  it("sum and mean of a Partial(sum) stay Partial: no collective", function()
    local p = partial_of(x, mesh, "sum")
    local a, b
    bounded(0, 0, "sum", function() a, b = p:sum(), p:mean(1) end)
    close(a:full_tensor(), x:sum(), "sum")
    close(b:full_tensor(), x:mean(1), "mean")
  end)
  it("P * P reduces one factor and keeps the other's Partial: one all_reduce (sum and avg)", function()
    for _, ops in ipairs({{"sum", "sum"}, {"avg", "avg"}, {"sum", "avg"}}) do
      local p, q = partial_of(x, mesh, ops[1]), partial_of(x * 0.5 - 1, mesh, ops[2])
      local y
      bounded(n > 1 and 1 or 0, x:numel() * 8, "P * P", function() y = p * q end)
      placements_are({P(ops[1])}, y.placements, "P * P keeps the first factor's Partial")
      close(y:full_tensor(), x * (x * 0.5 - 1), "P(" .. ops[1] .. ") * P(" .. ops[2] .. ")")
    end
  end)
  it("batch-sharded cross_entropy: two all_reduces of a few numbers (the target check and the count)", function()
    local logits = (x:remainder(7) - 3) * 0.25
    local target = dt.tensor({1, 2, 3, 4, 5, 6, 1}):to("int64")
    local dl = dt.distribute_tensor(logits, mesh, {S(1)})
    local dtg = dt.distribute_tensor(target, mesh, {S(1)})
    local loss
    bounded(2, 24, "cross_entropy", function() loss = dt.nn.functional.cross_entropy(dl, dtg) end)
    close(loss:full_tensor(), dt.nn.functional.cross_entropy(logits, target), "cross_entropy")
  end)
end)

describe("the cases of the differential run against PyTorch", function()
  local rng = H.prng(4711)
  it("amax/amin over an unevenly sharded dim give Partial(max)/(min) without a collective when no shard is empty",
    function()
      for case = 1, 12 do
        local shape = rand_shape(rng, 2, false)
        local x = values(rng, shape)
        for _, mm in ipairs(meshes()) do
          local name, mesh, nm = mm[1], mm[2], mm[3]
          local d = dt.distribute_tensor(x, mesh, all(S(1), nm))
          local what = ("amax of S1 %s on %s"):format(shape_string(shape), name)
          -- the shortest shard: the last coordinate's chunk of the last chunk
          local L = shape[1]
          for _, k in ipairs(mesh:shape()) do
            local _, len = H.chunk(L, k, k - 1)
            L = len
          end
          local a, b, c
          local cd = dt.comm_debug(function() a, b, c = d:amax(1), d:amin(1, true), d:amax() end)
          if L > 0 then
            assert.are.equal(0, #cd.ops, what)
            placements_are(all(P("max"), nm), a.placements, what)
            placements_are(all(P("min"), nm), b.placements, what)
          end
          close(a:full_tensor(), x:amax(1), what)
          close(b:full_tensor(), x:amin(1, true), what)
          close(c:full_tensor(), x:amax(), what)
        end
      end
    end)

  it("P(avg) + S and S - P(avg) gather the shard and keep Partial(avg), even and uneven shards (as PyTorch)",
    function()
      local mesh = dt.init_device_mesh("cpu", {n})
      for _, shape in ipairs({{n}, {2 * n, 3}, {n, 1}, {1}, {n + 1, 2}, {2 * n - 1}}) do
        local x = values(rng, shape)
        local pa, s = partial_of(x, mesh, "avg"), dt.distribute_tensor(x * 2, mesh, {S(1)})
        local y, z
        local what = "P(avg) + S " .. shape_string(shape)
        local shard = 8 * ((shape[1] + n - 1) // n) * (shape[2] or 1) -- the largest shard (gathered padded)
        bounded(n > 1 and 2 or 0, 2 * shard, what, function() y, z = pa + s, s - pa end)
        placements_are({P("avg")}, y.placements, what)
        placements_are({P("avg")}, z.placements, what)
        close(y:full_tensor(), x * 3, what)
        close(z:full_tensor(), x, what)
      end
    end)

  it("index_select with x and the index sharded on the selected dim gathers x only, the output sharded", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    for case = 1, 8 do
      local rows, cols, k = rng.int(1, 4), rng.int(1, 9), rng.int(1, 7)
      local x = values(rng, {rows, cols})
      local idx = dt.tensor((function()
        local t = {}
        for i = 1, k do t[i] = rng.int(1, cols) end
        return t
      end)()):to("int64")
      local dx, di = dt.distribute_tensor(x, mesh, {S(2)}), dt.distribute_tensor(idx, mesh, {S(1)})
      local y
      local what = ("index_select [%dx%d] by %d indices"):format(rows, cols, k)
      local shard = rows * ((cols + n - 1) // n) -- the largest shard of x
      bounded(n > 1 and 1 or 0, 8 * shard, what, function() y = dt.index_select(dx, 2, di) end)
      placements_are({S(2)}, y.placements, what)
      close(y:full_tensor(), dt.index_select(x, 2, idx), what)
    end
  end)

  it("views of zero-size sharded tensors move nothing (the shards stay on a zero-size dim)", function()
    for _, mm in ipairs(meshes()) do
      local name, mesh, nm = mm[1], mm[2], mm[3]
      for _, shape in ipairs({{3, 0}, {0, 5}, {2, 0, 3}, {4, 3, 0}}) do
        local x = values(rng, shape)
        local d = dt.distribute_tensor(x, mesh, all(S(1), nm))
        local f, v
        local what = ("flatten and view of %s on %s"):format(shape_string(shape), name)
        bounded(0, 0, what, function() f, v = d:flatten(), d:view(7, 0) end)
        close(f:full_tensor(), x:flatten(), what)
        close(v:full_tensor(), x:view(7, 0), what)
      end
    end
  end)

  it("flattening a dim sharded on two mesh dims keeps both shardings (nested _StridedShard): no collective", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    for case = 1, 8 do
      local shape = {rng.int(2, 5), rng.int(2, 7), rng.int(0, 3)}
      local x = values(rng, shape)
      local d = dt.distribute_tensor(x, mesh, {S(2), S(1)})
      local v
      bounded(0, 0, "flatten " .. shape_string(shape), function() v = d:flatten(1, 2) end)
      assert.are.equal(tostring(dt._StridedShard(1, shape[1])), tostring(v.placements[1]))
      close(v:full_tensor(), x:flatten(1, 2), "flatten " .. shape_string(shape))
    end
  end)

  it("flattening dims sharded on different mesh dims keeps both (two-level _StridedShard): no collective", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    -- [4, 4, 6] with (Shard(3), Shard(2)): PyTorch's [_S(0, 16), _S(0, 4)], no collective
    local x = values(rng, {4, 4, 6})
    local d, v = dt.distribute_tensor(x, mesh, {S(3), S(2)})
    bounded(0, 0, "flatten [4x4x6] (S3, S2)", function() v = d:flatten() end)
    placements_are({dt._StridedShard(1, 16), dt._StridedShard(1, 4)}, v.placements, "flatten [4x4x6] (S3, S2)")
    close(v:full_tensor(), x:flatten(), "flatten [4x4x6] (S3, S2)")
    for case = 1, 6 do -- even shapes, either mesh-dim order, reshape too
      local shape = {2 * rng.int(1, 3), 2 * rng.int(1, 3), 2 * rng.int(1, 3)}
      local inner_first = case % 2 == 1
      local p = inner_first and {S(3), S(2)} or {S(2), S(3)}
      local y = values(rng, shape)
      local what = ("reshape %s %s"):format(shape_string(shape), H.placement_string(p))
      local dy = dt.distribute_tensor(y, mesh, p)
      bounded(0, 0, what, function() v = dy:reshape(-1) end)
      local k3, k2 = dt._StridedShard(1, shape[1] * shape[2]), dt._StridedShard(1, shape[1])
      placements_are(inner_first and {k3, k2} or {k2, k3}, v.placements, what)
      close(v:full_tensor(), y:reshape(-1), what)
    end
  end)

  it("cat and index_select gather a dim sharded on one mesh dim after chunking another on the replicated one",
    function()
      if n ~= 4 then return end
      local mesh = dt.init_device_mesh("cpu", {2, 2})
      for case = 1, 6 do
        local ra, rb, c = rng.int(1, 7), rng.int(0, 5), rng.int(2, 7)
        local a, b = values(rng, {ra, c}), values(rng, {rb, c})
        local da, db = dt.distribute_tensor(a, mesh, {S(1), R()}), dt.distribute_tensor(b, mesh, {R(), R()})
        local piece = 8 * ((ra + 1) // 2) * ((c + 1) // 2) -- a's largest shard, chunked on mesh dim 2
        local y
        local what = ("cat [%dx%d] (S1, R) with [%dx%d] (R, R)"):format(ra, c, rb, c)
        bounded(1, piece, what, function() y = dt.cat({da, db}, 1) end)
        placements_are({R(), S(2)}, y.placements, what)
        close(y:full_tensor(), dt.cat({a, b}, 1), what)
        local k = rng.int(1, 6)
        local t = {}
        for i = 1, k do t[i] = rng.int(1, ra) end
        local idx = dt.tensor(t):to("int64")
        for _, ip in ipairs({{S(1), R()}, {R(), R()}}) do
          local di = dt.distribute_tensor(idx, mesh, ip)
          what = ("index_select of [%dx%d] (S1, R) by %d indices %s"):format(ra, c, k, H.placement_string(ip))
          bounded(1, piece, what, function() y = dt.index_select(da, 1, di) end)
          placements_are({ip[1].dim and S(1) or R(), S(2)}, y.placements, what)
          close(y:full_tensor(), dt.index_select(a, 1, idx), what)
        end
      end
    end)

  it("cumsum and softmax along a dim sharded on one mesh dim chunk another dim on the replicated one first",
    function()
      if n ~= 4 then return end
      local mesh = dt.init_device_mesh("cpu", {2, 2})
      for case = 1, 4 do
        local shape = {rng.int(2, 7), rng.int(1, 7)}
        local x = values(rng, shape)
        local d = dt.distribute_tensor(x, mesh, {S(2), R()})
        local piece = 8 * ((shape[1] + 1) // 2) * ((shape[2] + 1) // 2)
        local c, sm
        local what = "cumsum/softmax along dim 2 of " .. shape_string(shape) .. " (S2, R)"
        bounded(2, 2 * piece, what, function() c, sm = d:cumsum(2), d:softmax(2) end)
        placements_are({R(), S(1)}, c.placements, what)
        close(c:full_tensor(), x:cumsum(2), what)
        close(sm:full_tensor(), x:softmax(2), what)
      end
    end)

  it("a small Partial broadcast beside a sharded operand stays Partial: the big operand does not move", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    for case = 1, 4 do
      local shape = {rng.int(1, 5), rng.int(2, 6), 2}
      local x, v = values(rng, shape), values(rng, {2})
      local dx = dt.distribute_tensor(x, mesh, {S(2), S(3)})
      local dv = dt.distribute_tensor(v, mesh, {S(1), R()}):redistribute(mesh, {S(1), P("sum")})
      local y
      local what = "add " .. shape_string(shape) .. " (S2, S3) + [2] (S1, P)"
      bounded(1, 8, what, function() y = dx + dv end) -- v's one-element shard
      placements_are({S(2), P("sum")}, y.placements, what)
      close(y:full_tensor(), x + v, what)
    end
  end)

  it("mm of row-sharded operands gathers the second one: no Partial output left to reduce (as PyTorch)", function()
    if n < 2 then return end
    local mesh = dt.init_device_mesh("cpu", {n})
    for _, sz in ipairs({{8, 8, 9}, {4 * n, 2 * n, 5}}) do
      local x, w = values(rng, {sz[1], sz[2]}), values(rng, {sz[2], sz[3]})
      local dx, dw = dt.distribute_tensor(x, mesh, {S(1)}), dt.distribute_tensor(w, mesh, {S(1)})
      local y
      local what = ("mm [%dx%d] S1 @ [%dx%d] S1"):format(sz[1], sz[2], sz[2], sz[3])
      bounded(1, 8 * ((sz[2] + n - 1) // n) * sz[3], what, function() y = dx:mm(dw) end)
      placements_are({S(1)}, y.placements, what)
      close(y:full_tensor(), x:mm(w), what)
    end
  end)
end)
