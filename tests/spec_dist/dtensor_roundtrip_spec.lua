-- Property-based SPMD spec: random shapes (smaller than, equal to and not divisible by the
-- mesh size, zero-size dims), dtypes and placements on every mesh of this world; the cases
-- are drawn from a PRNG seeded alike on every rank.  distribute_tensor -> redistribute ->
-- full_tensor must give the original exactly, every shard must be the torch.chunk slice,
-- and on 1-d meshes each transition issues exactly the collective of the table.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

local SIZES = {0, 1, 2, 3, 4, 5, 6}

local function random_case(rng, mesh)
  local ndim = rng.int(1, 3)
  local shape = {}
  for d = 1, ndim do shape[d] = rng.pick(SIZES) end
  local dtype = rng.pick(H.DTYPES)
  local function placement(allow_partial)
    local k = rng.int(1, allow_partial and 4 or 3)
    if k == 1 then return dt.Replicate() end
    if k == 4 then
      local ops = (dtype == "float32" or dtype == "float64") and {"sum", "avg", "max"} or {"sum", "max"}
      return dt.Partial(rng.pick(ops))
    end
    local d = rng.int(1, ndim)
    if rng.int(1, 4) == 1 then d = d - ndim - 1 end -- negative dims too
    return dt.Shard(d)
  end
  local src, dst = {}, {}
  for m = 1, mesh.ndim do
    src[m] = placement(true)
    dst[m] = src[m]:is_partial() and rng.int(1, 3) == 1 and src[m] or placement(false)
  end
  return shape, dtype, src, dst
end

local function normalised(list, ndim) -- Shard(-1) -> Shard(ndim)
  local out = {}
  for i, p in ipairs(list) do
    out[i] = p:is_shard() and p.dim < 0 and dt.Shard(p.dim + ndim + 1) or p
  end
  return out
end

local function has_partial(list)
  for _, p in ipairs(list) do
    if p:is_partial() then return true end
  end
  return false
end

-- The collective a 1-d transition must issue (nil: none).
local function expected_collective(a, b, n)
  if n == 1 or a == b then return nil end
  if a:is_shard() and b:is_replicate() then return "all_gather" end
  if a:is_partial() and b:is_replicate() then return "all_reduce" end
  if a:is_partial() and b:is_shard() then return "reduce_scatter" end
  if a:is_shard() and b:is_shard() then return "all_to_all" end
  return nil -- Replicate -> Shard: a local chunk
end

local function check_local(x, d, mesh)
  local coord = mesh:get_coordinate()
  if not coord then -- off the mesh: an empty local tensor of the right dtype
    local l = d:to_local()
    return l:numel() == 0 and l.dtype == x.dtype
  end
  if has_partial(d.placements) then return true end
  return H.same(d:to_local(), H.expected_local(x, mesh, d.placements, coord))
end

local CASES = 40

for mi, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("DTensor round trips on the " .. name .. " mesh", function()
    it("distribute_tensor, redistribute and full_tensor preserve the global tensor; shards are torch.chunk slices", function()
      local rng = H.prng(1234 + mi)
      for case = 1, CASES do
        local shape, dtype, src, dst = random_case(rng, mesh)
        local x = H.global(shape, dtype)
        local what = string.format("case %d: %s %s %s -> %s", case, dtype, table.concat(shape, "x"),
          H.placement_string(src), H.placement_string(dst))
        local src_rank = false -- even cases chunk locally, odd ones scatter from the first mesh rank
        if case % 2 == 1 then
          src_rank = mesh:layout()
          while type(src_rank) == "table" do src_rank = src_rank[1] end
        end
        local d = dt.distribute_tensor(x, mesh, src, {src_rank = src_rank})
        assert(dt.is_dtensor(d), what)
        assert.are.same(shape, d:size(), what)
        assert.are.equal(dtype, d.dtype, what)
        assert(check_local(x, d, mesh), what .. ": source shard")
        assert(H.same(d:full_tensor(), x) or not mesh:get_coordinate(), what .. ": full_tensor of the source")
        local r
        local counts = dt.comm_debug(function() r = d:redistribute(mesh, dst) end)
        assert(check_local(x, r, mesh), what .. ": target shard")
        assert(H.same(r:full_tensor(), x) or not mesh:get_coordinate(), what .. ": full_tensor of the target")
        local ns, nd = normalised(src, #shape), normalised(dst, #shape)
        assert.are.same(nd, r.placements, what)
        if mesh.ndim == 1 and mesh:get_coordinate() then
          local want = expected_collective(ns[1], nd[1], mesh:size())
          local total = 0
          for _, op in ipairs(counts.ops) do total = total + 1 end
          assert.are.equal(want and 1 or 0, total, what .. ": collectives issued")
          if want then assert.are.equal(1, counts[want], what .. ": " .. want) end
        elseif not mesh:get_coordinate() then
          assert.are.equal(0, #counts.ops, what .. ": off-mesh ranks issue nothing")
        else -- N-d meshes: invariants of the plan
          local all_r, any_p, src_r = true, false, true
          for m = 1, mesh.ndim do
            all_r = all_r and nd[m]:is_replicate()
            any_p = any_p or ns[m]:is_partial()
            src_r = src_r and ns[m]:is_replicate()
          end
          if src_r then assert.are.equal(0, #counts.ops, what .. ": from Replicate nothing moves") end
          if all_r and not any_p then
            assert.are.equal(#counts.ops, counts.all_gather, what .. ": to Replicate only all_gathers")
            assert.is_true(counts.all_gather <= mesh.ndim, what .. ": at most one all_gather per mesh dim")
          end
          for _, op in ipairs(counts.ops) do assert.is_true(op.group_size > 1, what .. ": no 1-rank collective") end
        end
      end
    end)

    it("from_local(to_local) round-trips and full_tensor agrees", function()
      local rng = H.prng(99 + mi)
      for case = 1, 10 do
        local shape, dtype, src = random_case(rng, mesh)
        local x = H.global(shape, dtype)
        for m = 1, mesh.ndim do
          if src[m]:is_partial() then src[m] = dt.Replicate() end
        end
        local d = dt.distribute_tensor(x, mesh, src, {src_rank = false})
        local back = dt.from_local(d:to_local(), mesh, src, {shape = shape, run_check = case % 2 == 0})
        assert.are.same(shape, back:size())
        assert(H.same(back:full_tensor(), x) or not mesh:get_coordinate(),
          string.format("case %d %s %s", case, table.concat(shape, "x"), H.placement_string(src)))
      end
    end)
  end)
end
