-- dt.amp on DTensors (dtlua -n 1..4; doc/amp.md): autocast casts a DTensor's shards (a local
-- op) and runs its matmuls in the low dtype, equal to plain autocast on the global tensors for
-- Shard, Replicate and Partial-producing placements, gradients of float32 DTensor parameters
-- included; GradScaler's inf/nan check gives every rank the same answer when only one rank's
-- shard holds the inf, on every mesh (ranks outside the mesh too).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

-- {placements of a, placements of b} on a 1-d mesh; on more dims the rest are Replicate
local CASES = {
  {{dt.Shard(1)}, {dt.Replicate()}}, -- row-wise a: Shard(1) out
  {{dt.Replicate()}, {dt.Shard(2)}}, -- column-wise b: Shard(2) out
  {{dt.Shard(2)}, {dt.Shard(1)}},    -- the contraction dim: Partial(sum) out
  {{dt.Replicate()}, {dt.Replicate()}},
}

local function on(mesh, p)
  local full = {}
  for m = 1, mesh.ndim do full[m] = p[m] or dt.Replicate() end
  return full
end

describe("autocast on DTensors", function()
  for _, entry in ipairs(H.meshes()) do
    local name, mesh = entry[1], entry[2]
    it("runs matmul and mm in the low dtype, as on the global tensors (" .. name .. ")", function()
      local a, b = H.values({6, 5}), H.values({5, 4}) * 0.5
      for _, dtype in ipairs {"bfloat16", "float16"} do
        local want = dt.amp.autocast(function() return a:matmul(b) end, {dtype = dtype})
        assert.are.equal(dtype, want.dtype)
        for _, case in ipairs(CASES) do
          local what = name .. " " .. dtype .. " " .. H.placement_string(case[1]) .. " @ " .. H.placement_string(case[2])
          local da, db = H.dist(a, mesh, on(mesh, case[1])), H.dist(b, mesh, on(mesh, case[2]))
          local got = dt.amp.autocast(function() return da:matmul(db) end, {dtype = dtype})
          assert.are.equal(dtype, got.dtype, what)
          H.close(got, want, what)
          H.close(dt.amp.autocast(function() return dt.mm(da, db) end, {dtype = dtype}), want, what .. " mm")
          assert.are.equal("float32", da:matmul(db).dtype, what .. ": off after the region")
        end
      end
    end)

    it("gives float32 DTensor parameters float32 gradients, as plain autocast does (" .. name .. ")", function()
      local x, w0 = H.values({8, 6}), H.values({6, 4}) * 0.3
      local w = w0:clone():requires_grad_()
      dt.amp.autocast(function() return x:matmul(w):tanh():sum() end):backward()
      for _, case in ipairs(CASES) do
        local what = name .. " " .. H.placement_string(case[1]) .. " @ " .. H.placement_string(case[2])
        local dx = H.dist(x, mesh, on(mesh, case[1]))
        local dw = H.dist(w0, mesh, on(mesh, case[2])):requires_grad_()
        local loss = dt.amp.autocast(function() return dx:matmul(dw):tanh():sum() end)
        assert.are.equal("float32", loss.dtype, what) -- sum is on the float32 list
        loss:backward()
        assert.are.equal("float32", dw.grad.dtype, what)
        assert.are.equal(H.placement_string(dw.placements), H.placement_string(dw.grad.placements), what)
        local g, want = dw.grad:full_tensor(), w.grad
        if mesh:get_coordinate() then
          -- bf16 rounding of the local matmuls' outputs: a few eps of the largest gradient
          local err = (g - want):abs():max():item() / want:abs():max():item()
          assert.is_true(err <= 8 * 2 ^ -8, what .. ": relative error " .. err)
        end
      end
    end)
  end
end)

describe("GradScaler on DTensor gradients", function()
  for _, entry in ipairs(H.meshes()) do
    local name, mesh = entry[1], entry[2]
    it("skips the step on every rank when one rank's shard holds an inf or a nan (" .. name .. ")", function()
      local n = 4 * mesh:size()
      local placements = on(mesh, {dt.Shard(1)})
      for _, bad in ipairs {math.huge, -math.huge, 0 / 0, false} do
        local p = H.dist(H.values({n}), mesh, placements):requires_grad_()
        local q = H.dist(H.values({3, 2}), mesh, on(mesh, {dt.Replicate()})):requires_grad_()
        local opt = dt.optim.SGD({q, p}, 0.5)
        local scaler = dt.amp.GradScaler {init_scale = 4}
        local g = dt.ones({n})
        if bad then g[n] = bad end -- the last element: only the last shard's rank holds it
        p.grad = H.dist(g * 4, mesh, placements)
        q.grad = H.dist(dt.ones({3, 2}) * 4, mesh, on(mesh, {dt.Replicate()}))
        local before = p:full_tensor():clone() -- full_tensor may be the local tensor itself
        scaler:step(opt)
        scaler:update()
        local after = p:full_tensor()
        -- every rank (off the mesh too) reached the same decision: the scale agrees
        local scales = dt.distributed.all_gather(dt.tensor({scaler:get_scale()}, {dtype = "float64"})):totable()
        for r = 1, #scales do assert.are.equal(bad and 2 or 4, scales[r], name .. ": rank " .. (r - 1) .. "'s scale") end
        if mesh:get_coordinate() then
          if bad then
            assert.is_true(dt.equal(before, after), name .. ": the step was skipped")
          else
            assert.is_true(dt.allclose(before - 0.5, after), name .. ": the step ran with the unscaled gradient")
          end
        end
      end
    end)
  end
end)
