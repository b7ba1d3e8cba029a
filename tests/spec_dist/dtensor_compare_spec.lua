-- equal/allclose on DTensors (answers every rank of the world agrees on, from shards of any
-- placements, Partial included), and the metadata queries element_size/is_contiguous.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

describe("allclose on DTensors", function()
  it("equals allclose of the global tensors for random placements, tolerances and perturbations", function()
    local rng = H.prng(4242)
    for _, case in ipairs(H.meshes()) do
      local name, mesh = case[1], case[2]
      for _ = 1, 8 do
        local shape = H.shape_of(rng, rng.int(1, 3), 1, 6)
        local dtype = rng.pick {"float32", "float64"}
        local gx = H.global(shape, dtype):div(7)
        -- perturb one element (or none) by an amount around the tolerance
        local gy = gx:clone()
        local eps = rng.pick {0, 1e-9, 1e-6, 1e-3}
        local flat = gy:reshape(-1)
        flat[rng.int(1, flat:numel())] = flat[rng.int(1, flat:numel())] + eps
        local px = H.placements(rng, mesh, #shape, false)
        local py = H.placements(rng, mesh, #shape, false)
        local x, y = H.dist(gx, mesh, px), H.dist(gy, mesh, py)
        for _, tol in ipairs {{1e-5, 1e-8}, {0, 0}, {0, 1e-4}} do
          local want = dt.allclose(gx, gy, tol[1], tol[2])
          local what = name .. " " .. H.placement_string(px) .. " vs " .. H.placement_string(py) .. " eps " .. eps
          assert.are.equal(want, dt.allclose(x, y, tol[1], tol[2]), what)
          assert.are.equal(want, x:allclose(y, {rtol = tol[1], atol = tol[2]}), what)
        end
      end
    end
  end)

  it("reads Partial DTensors through their pending reduction", function()
    for _, case in ipairs(H.meshes()) do
      local mesh = case[2]
      local p = {}
      for m = 1, mesh.ndim do p[m] = dt.Partial("sum") end
      local g = dt.arange(12, {dtype = "float64"}):reshape(3, 4)
      -- each rank holds g / (mesh size): the pending sum is g
      local part = dt.from_local(g / mesh:size(), mesh, p)
      local rep = H.dist(g, mesh, (function() local r = {} for m = 1, mesh.ndim do r[m] = "R" end return r end)())
      assert.is_true(dt.allclose(part, rep), case[1])
      assert.is_false(dt.allclose(part, rep + 1), case[1])
    end
  end)

  it("refuses shape mismatches, plain tensors and other meshes on every rank", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    local x = H.dist(dt.ones(4, 3), mesh, {"S1"})
    H.fails("allclose: DTensors of global shapes {4,3} and {3}", dt.allclose, x, H.dist(dt.ones(3), mesh, {"R"}))
    H.fails("allclose: a DTensor and a plain tensor", dt.allclose, x, dt.ones(4, 3))
    local other = dt.init_device_mesh("cpu", {1, dt.world_size()})
    H.fails("allclose: DTensor operands on different meshes", dt.allclose, x, H.dist(dt.ones(4, 3), other, {"R", "R"}))
    H.fails("equal: DTensor operands on different meshes", dt.equal, x, H.dist(dt.ones(4, 3), other, {"R", "R"}))
  end)
end)

describe("element_size and is_contiguous on DTensors", function()
  it("answer for the local shard", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    for _, dtype in ipairs(H.DTYPES) do
      local x = H.dist(H.global({4, 6}, dtype), mesh, {"S1"})
      assert.are.equal(dt.ones(1, {dtype = dtype}):element_size(), x:element_size(), dtype)
    end
    local x = H.dist(H.global({4, 6}, "float32"), mesh, {"S2"})
    assert.is_true(x:is_contiguous())
    assert.are.equal(x:to_local():transpose(1, 2):is_contiguous(), x:transpose(1, 2):is_contiguous())
  end)
end)
