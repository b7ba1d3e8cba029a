-- The math family on DTensors (SPMD): every op on random shapes (even, uneven, zero-size) and
-- random placements (Shard, Replicate, Partial sum/avg/max/min) on every mesh of this world,
-- against the op on the global tensor; the placements and collectives the sharding rules
-- choose (scans along an unsharded dim and linear ops of Partial(sum) move nothing; floor of a
-- Partial reduces it first; prod/any/all over a sharded dim stay Partial(product/max/min));
-- Partial("prod") placements themselves.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local n = dt.world_size()
local dist = H.dist

-- the op on plain tensors or DTensors alike: name -> function(x, rng-chosen dim d, y, z)
local OPS = {
  floor = function(x) return x:floor() end, ceil = function(x) return x:ceil() end,
  round = function(x) return x:round(1) end, trunc = function(x) return x:trunc() end,
  sign = function(x) return x:sign() end, erf = function(x) return x:erf() end,
  isnan = function(x) return x:isnan() end, isfinite = function(x) return x:isfinite() end,
  nan_to_num = function(x) return x:nan_to_num(0, 5, -5) end,
  lerp_number = function(x, _, y) return dt.lerp(x, y, 0.75) end,
  lerp_tensor = function(x, _, y, z) return dt.lerp(x, y, z) end,
  addcmul = function(x, _, y, z) return dt.addcmul(x, y, z, 0.5) end,
  addcdiv = function(x, _, y, z) return dt.addcdiv(x, y, z:abs() + 1, {value = 2}) end,
  logsumexp = function(x, d) return x:logsumexp(d) end,
  all = function(x, d) return x:ge(-1):all(d) end, any = function(x, d) return x:ge(2):any(d, true) end,
  all_dims = function(x) return x:ge(-2):all() end,
  cumsum = function(x, d) return x:cumsum(d) end, cumprod = function(x, d) return x:cumprod(d) end,
  var_mean = function(x, d) return x:var_mean(d) end, prod = function(x, d) return x:prod(d) end,
  masked_fill_ = function(x, _, y) return x:clone():masked_fill_(y:gt(0), 7) end,
}
local NAMES = {}
for k in pairs(OPS) do NAMES[#NAMES + 1] = k end
table.sort(NAMES)

local function all_close(got, want, what)
  for j = 1, want.n do H.close(got[j], want[j], what .. " result " .. j) end
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("the math family on mesh " .. name, function()
    it("equals the op on the global tensors for random shapes and placements", function()
      local rng = H.prng(313)
      for case = 1, 6 do
        for _, op in ipairs(NAMES) do
          local ndim = rng.int(1, 3)
          local shape = H.shape_of(rng, ndim, case == 1 and 0 or 1, 5)
          local X, Y, Z = H.values(shape, "float64"), H.values(shape, "float64") * -0.5, H.values(shape, "float64"):sin()
          local d = rng.int(1, ndim)
          local px, py, pz = H.placements(rng, mesh, ndim, "float64"), H.placements(rng, mesh, ndim, "float64"),
                             H.placements(rng, mesh, ndim, "float64")
          local what = op .. " on {" .. table.concat(shape, ",") .. "} " .. H.placement_string(px) .. " (case " .. case .. ")"
          local want = table.pack(OPS[op](X, d, Y, Z))
          local got = table.pack(OPS[op](dist(X, mesh, px), d, dist(Y, mesh, py), dist(Z, mesh, pz)))
          all_close(got, want, what)
        end
      end
    end)
  end)
end

describe("the math family's sharding on a 1-d mesh of " .. n, function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local X = H.values({2 * n + 1, 6}, "float64")
  local coord = mesh:get_coordinate()
  -- X as Partial(sum) from mixed-sign parts
  local function partial_sum(T)
    local Y = (T * 3):remainder(1.5)
    return dt.from_local(coord[1] == 0 and T + Y * (n - 1) or -Y, mesh, {dt.Partial("sum")}, {shape = T:size()})
  end

  it("scans along an unsharded dim stay sharded and move nothing; along the sharded dim they replicate", function()
    local x = dist(X, mesh, {dt.Shard(1)})
    local y
    local c = dt.comm_debug(function() y = x:cumsum(2) end)
    assert.are.equal(0, #c.ops)
    assert.are.equal("Shard(1)", tostring(y.placements[1]))
    H.close(y, X:cumsum(2), "cumsum along dim 2")
    c = dt.comm_debug(function() y = x:cumprod(1) end)
    if n > 1 then assert.is_true(#c.ops > 0) end
    H.close(y, X:cumprod(1), "cumprod along the sharded dim")
  end)

  it("cumsum, lerp and addcmul keep Partial(sum) where linear; floor and nan_to_num reduce it first", function()
    local p, q = partial_sum(X), partial_sum(X * 2)
    local y
    local c = dt.comm_debug(function() y = p:cumsum(1) end)
    assert.are.same({0, "Partial(sum)"}, {#c.ops, tostring(y.placements[1])})
    H.close(y, X:cumsum(1), "cumsum of a Partial")
    c = dt.comm_debug(function() y = dt.lerp(p, q, 0.25) end)
    assert.are.same({0, "Partial(sum)"}, {#c.ops, tostring(y.placements[1])})
    H.close(y, dt.lerp(X, X * 2, 0.25), "lerp of two Partials")
    local r = dist(X:cos(), mesh, {dt.Replicate()})
    c = dt.comm_debug(function() y = dt.addcmul(p, q, r) end)
    assert.are.same({0, "Partial(sum)"}, {#c.ops, tostring(y.placements[1])})
    H.close(y, dt.addcmul(X, X * 2, X:cos()), "addcmul(P, P, R)")
    for _, op in ipairs {"floor", "round", "sign", "nan_to_num", "isnan"} do
      y = p[op](p)
      assert.are_not.equal("Partial(sum)", tostring(y.placements[1]), op)
      H.close(y, X[op](X), op .. " of a Partial")
    end
  end)

  it("prod, any and all over a sharded dim give Partial(product), Partial(max), Partial(min) with no collective", function()
    local x = dist(X, mesh, {dt.Shard(1)})
    for _, c in ipairs {{"prod", "Partial(product)", X:prod(1)}, {"any", "Partial(max)", X:gt(1):any(1)},
                        {"all", "Partial(min)", X:gt(-2):all(1)}} do
      local y
      local src = c[1] == "prod" and x or c[1] == "any" and x:gt(1) or x:gt(-2)
      local log = dt.comm_debug(function() y = src[c[1]](src, 1) end)
      assert.are.equal(0, #log.ops, c[1])
      assert.are.equal(c[2], tostring(y.placements[1]), c[1])
      H.close(y, c[3], c[1])
    end
    -- an empty shard gives each op's identity: 1, false, true
    local small = H.values({n - 1 > 0 and n - 1 or 1, 2}, "float64")
    local s = dist(small, mesh, {dt.Shard(1)})
    H.close(s:prod(1), small:prod(1), "prod with an empty shard")
    H.close(s:gt(0):any(1), small:gt(0):any(1), "any with an empty shard")
    H.close(s:gt(0):all(1), small:gt(0):all(1), "all with an empty shard")
  end)

  it("Partial(\"prod\") placements multiply across ranks, to Replicate and to Shard", function()
    local parts = {}
    for r = 0, n - 1 do parts[r + 1] = H.values({3, 2}, "float64") + r end
    local want = parts[1]
    for r = 2, n do want = want * parts[r] end
    local p = dt.from_local(parts[coord[1] + 1], mesh, {dt.Partial("prod")}, {shape = {3, 2}})
    assert.are.equal("Partial(product)", tostring(p.placements[1]))
    H.close(p:redistribute(mesh, {dt.Replicate()}), want, "Partial(prod) -> Replicate")
    H.close(p:redistribute(mesh, {dt.Shard(1)}), want, "Partial(prod) -> Shard(1)")
    H.close(p + 1, want + 1, "a pointwise op reduces Partial(prod) first")
    -- writes and draws into a Partial(prod): the value once, ones elsewhere
    local q = dt.from_local(parts[coord[1] + 1]:clone(), mesh, {dt.Partial("prod")}, {shape = {3, 2}})
    q[{2, {}}] = 5
    local w = want:clone()
    w[{2, {}}] = 5
    H.close(q, w, "t[k] = v into a Partial(prod)")
    dt.manual_seed(11)
    q:uniform_(1, 2)
    dt.manual_seed(11)
    H.close(q, dt.empty({3, 2}, {dtype = "float64"}):uniform_(1, 2), "uniform_ into a Partial(prod)")
    dt.nn.init.constant_(q, 2.5)
    H.close(q, dt.full({3, 2}, 2.5, {dtype = "float64"}), "nn.init into a Partial(prod)")
  end)

  it("fill_ and masked_fill_ into a Partial keep it and read back the value (every reduce op), moving nothing", function()
    local T = H.values({3, 5}, "float64")
    local mask = T:gt(0)
    local m = dist(mask, mesh, {dt.Replicate()})
    for _, op in ipairs({"sum", "avg", "max", "min", "prod"}) do
      local pl = {dt.Partial(op)}
      local p = dist(T:clone(), mesh, {dt.Replicate()}):redistribute(mesh, pl) -- own storage each
      local q = dist(T:clone(), mesh, {dt.Replicate()}):redistribute(mesh, pl)
      local log = dt.comm_debug(function()
        p:fill_(2.5)
        q:masked_fill_(m, -3)
      end)
      assert.are.equal(0, #log.ops, op)
      assert.are.equal(H.placement_string(pl), H.placement_string(p.placements))
      assert.are.equal(H.placement_string(pl), H.placement_string(q.placements))
      H.close(p, dt.full({3, 5}, 2.5, {dtype = "float64"}), "fill_ into Partial(" .. op .. ")")
      H.close(q, T:masked_fill(mask, -3), "masked_fill_ into Partial(" .. op .. ")")
    end
    local i = dist(dt.arange(6):view(2, 3), mesh, {dt.Replicate()}):redistribute(mesh, {dt.Partial()})
    i:fill_(2 ^ 53 + 1) -- an exact int64 fill: the identity replaces ints[0] too
    assert.are.equal(2 ^ 53 + 1, i:full_tensor()[{2, 3}]:item())
  end)
end)
