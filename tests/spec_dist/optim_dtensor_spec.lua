-- dt.optim on DTensor parameters (dtlua -n 1..4): SGD, Adam and AdamW on parameters of random
-- placements (Shard of any dim, uneven, Replicate) give, after a few steps, full tensors equal
-- to the same optimizer on the plain global tensors; a step issues no collective
-- (dt.comm_debug); state is made like the parameter; a state_dict of whole tensors loads into
-- other placements.  clip_grad_norm_ gives the single-device norm for Shard, Replicate and
-- mixed placements on 1-d and 2-d meshes, orders 1, 2, 3 and inf.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

local SHAPES = {{5, 3}, {4}, {2, 3, 2}, {8, 4}}
local STEPS = 3

-- the gradient of parameter i at step k (a global tensor every rank computes alike)
local function grad_of(shape, i, k) return H.values(shape, "float64") * (0.5 + 0.25 * k) + (i - k) * 0.1 end

local OPTIMIZERS = {
  {"SGD", {lr = 0.1, momentum = 0.9, weight_decay = 0.01}},
  {"SGD", {lr = 0.1, momentum = 0.9, nesterov = true}},
  {"Adam", {lr = 0.05, weight_decay = 0.1, amsgrad = true}},
  {"Adam", {lr = 0.05, maximize = true}},
  {"AdamW", {lr = 0.05}},
  {"AdamW", {lr = 0.05, amsgrad = true, fused = false}}, -- the composed ops (fused: one adam_step_ per shard)
}

local function no_collective(c, what)
  assert(c.bytes == 0 and #c.ops == 0, what .. ": " .. #c.ops .. " collective(s) (" .. (c.ops[1] and c.ops[1].name or "") .. ")")
end

-- runs steps first..last of opt on params (plain or DTensor) with the gradients above;
-- returns the comm_debug counts of the steps
local function steps(opt, params, placements, mesh, first, last)
  local counts = {}
  for k = first, last do
    for i, p in ipairs(params) do
      local g = grad_of(p:size(), i, k)
      p.grad = placements and H.dist(g, mesh, placements[i]) or g
    end
    counts[#counts + 1] = dt.comm_debug(function() opt:step() end)
  end
  return counts
end

local function globals()
  local list = {}
  for i, shape in ipairs(SHAPES) do list[i] = H.values(shape, "float64") + i end
  return list
end

local function same_as_plain(dparams, plain, mesh, what)
  for i, d in ipairs(dparams) do
    local full = d:full_tensor()
    if mesh:get_coordinate() then
      assert(dt.allclose(full, plain[i], {rtol = 1e-12, atol = 1e-12}), what .. ": parameter " .. i .. " differs from one device by " .. tostring((full - plain[i]):abs():max():item()))
    end
  end
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  local rng = H.prng(97 + #name)

  describe("dt.optim on DTensor parameters on mesh " .. name, function()
    for _, o in ipairs(OPTIMIZERS) do
      local kind, hp = o[1], o[2]
      it(kind .. " equals one device and issues no collective in step", function()
        local pl = {}
        for i, shape in ipairs(SHAPES) do pl[i] = H.placements(rng, mesh, #shape) end
        local plain, dparams = {}, {}
        for i, g in ipairs(globals()) do
          plain[i] = g:clone():requires_grad_()
          dparams[i] = H.dist(g, mesh, pl[i]):requires_grad_()
        end
        local popt, dopt = dt.optim[kind](plain, hp), dt.optim[kind](dparams, hp)
        steps(popt, plain, nil, mesh, 1, STEPS)
        for k, c in ipairs(steps(dopt, dparams, pl, mesh, 1, STEPS)) do no_collective(c, kind .. " step " .. k) end
        local what = kind .. " with " .. table.concat((function()
          local s = {}
          for i, p in ipairs(pl) do s[i] = H.placement_string(p) end
          return s
        end)(), " ")
        same_as_plain(dparams, plain, mesh, what)
        for i, p in ipairs(dparams) do -- state made like the parameter
          for key, v in pairs(dopt.state[p]) do
            if key ~= "step" then
              assert(dt.is_dtensor(v), what .. ": state " .. key .. " is a DTensor")
              assert.are.equal(H.placement_string(pl[i]), H.placement_string(v.placements), what .. ": state " .. key)
            end
          end
        end
      end)
    end

    it("a state_dict of whole tensors loads into DTensor parameters of other placements", function()
      local g = globals()
      local plain, da, db = {}, {}, {}
      local pa, pb = {}, {}
      for i, shape in ipairs(SHAPES) do
        pa[i], pb[i] = H.placements(rng, mesh, #shape), H.placements(rng, mesh, #shape)
        plain[i] = g[i]:clone():requires_grad_()
        da[i] = H.dist(g[i], mesh, pa[i]):requires_grad_()
      end
      local hp = {lr = 0.05, amsgrad = true}
      local popt, aopt = dt.optim.Adam(plain, hp), dt.optim.Adam(da, hp)
      steps(popt, plain, nil, mesh, 1, 2)
      steps(aopt, da, pa, mesh, 1, 2)
      -- a checkpoint as dt.save would hold it: whole tensors (keys in one order on every rank:
      -- full_tensor is a collective)
      local sd = aopt:state_dict()
      for i = 1, #SHAPES do
        for _, key in ipairs {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"} do
          local whole = sd.state[i][key]:full_tensor()
          -- a rank off the mesh has no part of it: it takes the one-device state
          sd.state[i][key] = mesh:get_coordinate() and whole or popt.state[plain[i]][key]
        end
      end
      for i in ipairs(da) do db[i] = H.dist(plain[i]:detach(), mesh, pb[i]):requires_grad_() end
      local bopt = dt.optim.Adam(db)
      bopt:load_state_dict(sd)
      -- and the DTensor state of one optimizer straight into another's placements
      local copt = dt.optim.Adam(db, {lr = 1})
      copt:load_state_dict(aopt:state_dict())
      for i, p in ipairs(db) do
        assert.are.equal(H.placement_string(pb[i]), H.placement_string(bopt.state[p].exp_avg.placements))
        assert.are.equal(H.placement_string(pb[i]), H.placement_string(copt.state[p].exp_avg_sq.placements))
      end
      steps(popt, plain, nil, mesh, 3, 4)
      for k, c in ipairs(steps(bopt, db, pb, mesh, 3, 4)) do no_collective(c, "loaded Adam step " .. k) end
      same_as_plain(db, plain, mesh, "Adam resumed on other placements")
    end)

    it("trains through backward: a DTensor loss's gradients, then a step without collectives", function()
      local x = H.values({6, 4}, "float64")
      local w = H.dist(x, mesh, H.placements(rng, mesh, 2)):requires_grad_()
      local pw = x:clone():requires_grad_()
      local dopt, popt = dt.optim.SGD({w}, {lr = 0.1, momentum = 0.5}), dt.optim.SGD({pw}, {lr = 0.1, momentum = 0.5})
      for _ = 1, 3 do
        dopt:zero_grad()
        popt:zero_grad()
        local dl = (w * w):sum()
        dl:backward()
        local pl = (pw * pw):sum()
        pl:backward()
        no_collective(dt.comm_debug(function() dopt:step() end), "SGD after backward")
        popt:step()
      end
      same_as_plain({w}, {pw}, mesh, "SGD through backward")
    end)
  end)

  describe("clip_grad_norm_ on DTensor gradients on mesh " .. name, function()
    -- placements families: every mesh dim the same kind, or mixed
    local function family(kind, ndim)
      return function()
        local p = {}
        for m = 1, mesh.ndim do
          if kind == "replicate" or (kind == "mixed" and m % 2 == 0) then p[m] = dt.Replicate()
          else p[m] = dt.Shard(kind == "shard last" and ndim or rng.int(1, ndim)) end
        end
        return p
      end
    end
    for _, kind in ipairs {"shard", "shard last", "replicate", "mixed", "random"} do
      for _, order in ipairs {2, 1, 3, math.huge} do
        it(kind .. " placements, order " .. tostring(order) .. ": the single-device norm, and the same clipped gradients", function()
          local plain, dparams = {}, {}
          for i, shape in ipairs(SHAPES) do
            local pl = kind == "random" and H.placements(rng, mesh, #shape) or family(kind, #shape)()
            plain[i] = H.values(shape, "float64"):requires_grad_()
            dparams[i] = H.dist(plain[i]:detach(), mesh, pl):requires_grad_()
            plain[i].grad = grad_of(shape, i, 1)
            dparams[i].grad = H.dist(grad_of(shape, i, 1), mesh, pl)
          end
          local want = dt.nn.utils.clip_grad_norm_(plain, 1.5, order)
          local got = dt.nn.utils.clip_grad_norm_(dparams, 1.5, order)
          assert(not dt.is_dtensor(got), "the total norm is a plain tensor")
          if mesh:get_coordinate() then
            local w, g = want:item(), got:item()
            assert(math.abs(w - g) <= 1e-12 * w, ("norm %.17g, one device %.17g"):format(g, w))
          end
          for i, d in ipairs(dparams) do H.close(d.grad, plain[i].grad, "clipped gradient " .. i) end
        end)
      end
    end

    it("float32 gradients, sharded and replicated: the partial sums reduced together", function()
      local plain, dparams = {}, {}
      local pl = {}
      for i, shape in ipairs(SHAPES) do
        pl[i] = {}
        for m = 1, mesh.ndim do pl[i][m] = (i % 2 == 0) and dt.Replicate() or dt.Shard(1) end
        plain[i] = H.values(shape):requires_grad_()
        dparams[i] = H.dist(plain[i]:detach(), mesh, pl[i]):requires_grad_()
        plain[i].grad = grad_of(shape, i, 2):float()
        dparams[i].grad = H.dist(grad_of(shape, i, 2):float(), mesh, pl[i])
      end
      local want = dt.nn.utils.clip_grad_norm_(plain, 0.5)
      local got
      local c = dt.comm_debug(function() got = dt.nn.utils.clip_grad_norm_(dparams, 0.5) end)
      assert.are.equal("float32", got.dtype)
      if mesh:get_coordinate() then
        assert(math.abs(want:item() - got:item()) <= 1e-6 * want:item(), "float32 norm")
        -- the sharded gradients' partial sums are added first and reduced together (at most one
        -- all_reduce per mesh dim); the replicated ones need none
        assert(c.all_reduce <= mesh.ndim, c.all_reduce .. " all_reduces")
      end
      for i, d in ipairs(dparams) do H.close(d.grad, plain[i].grad, "clipped float32 gradient " .. i) end
    end)

    it("clip_grad_value_ clamps every shard without a collective", function()
      local g = grad_of({6, 5}, 1, 3)
      local d = H.dist(g:clone(), mesh, H.placements(rng, mesh, 2)):requires_grad_()
      d.grad = H.dist(g, mesh, d.placements)
      local c = dt.comm_debug(function() dt.nn.utils.clip_grad_value_({d}, 0.7) end)
      no_collective(c, "clip_grad_value_")
      H.close(d.grad, g:clamp(-0.7, 0.7), "clamped gradient")
    end)
  end)
end
