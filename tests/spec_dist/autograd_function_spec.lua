-- dt.autograd.Function and dt.utils.checkpoint on DTensors (doc/autograd.md): the gradients
-- are DTensors with their inputs' placements, equal to the single-device ones computed by
-- hand; materialized zero gradients take the output's placements; a checkpointed block that
-- draws random numbers on the mesh recomputes the same numbers.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local n = dt.world_size()

-- On a mesh of one rank Shard and Replicate hold the same data and the dispatcher may pick
-- either: placements are compared from 2 ranks on.
local function placements_text(t) return n > 1 and H.placement_string(t.placements) or "-" end
local function placements_of(p) return n > 1 and H.placement_string(p) or "-" end

describe("autograd.Function on DTensors", function()
  local mesh = dt.init_device_mesh("cpu", {n})

  local Square = dt.autograd.Function {
    name = "Square",
    forward = function(ctx, x)
      ctx:save_for_backward(x)
      return x * x
    end,
    backward = function(ctx, g)
      local x = table.unpack(ctx.saved_tensors)
      return g * x * 2
    end,
  }

  it("gives the input a DTensor gradient with its placements, 2x for x^2", function()
    local global = H.values({2 * n, 3})
    for _, p in ipairs {{dt.Shard(1)}, {dt.Shard(2)}, {dt.Replicate()}} do
      local x = H.dist(global, mesh, p):requires_grad_()
      local y = Square.apply(x)
      assert.are.equal("Square", y.grad_fn)
      assert.is_true(dt.is_dtensor(y))
      y:sum():backward()
      assert.is_true(dt.is_dtensor(x.grad))
      assert.are.equal(placements_of(p), placements_text(x.grad))
      H.close(x.grad, global * 2, "grad of " .. H.placement_string(p))
    end
  end)

  it("a gradient returned with other placements is redistributed to the input's", function()
    local F = dt.autograd.Function {
      forward = function(_, x) return x * 3 end,
      backward = function(_, g) return (g * 3):redistribute({dt.Replicate()}) end,
    }
    local global = H.values({n, 2})
    local x = H.dist(global, mesh, {dt.Shard(1)}):requires_grad_()
    F.apply(x):sum():backward()
    assert.are.equal(placements_of({dt.Shard(1)}), placements_text(x.grad))
    H.close(x.grad, dt.full({n, 2}, 3.0), "redistributed gradient")
  end)

  it("an output no gradient flowed to gets zeros with the output's placements", function()
    local seen
    local F = dt.autograd.Function {
      name = "TwoOut",
      forward = function(_, x) return x * 2, x:sum(1) end, -- the second is Partial for Shard(1)
      backward = function(_, g1, g2)
        seen = {dt.is_dtensor(g2), placements_text(g2), g2:full_tensor():abs():sum():item()}
        return g1 * 2
      end,
    }
    local x = H.dist(H.values({n, 2}), mesh, {dt.Shard(1)}):requires_grad_()
    local a, b = F.apply(x)
    assert.are.equal("TwoOut", b.grad_fn)
    a:sum():backward()
    assert.are.same({true, placements_of({dt.Replicate()}), 0}, seen)
    H.close(x.grad, dt.full({n, 2}, 2.0), "gradient through the used output")
  end)
end)

describe("dt.utils.checkpoint on DTensors", function()
  local mesh = dt.init_device_mesh("cpu", {n})

  local RANDOM = { -- a list: every rank runs the tests in the same order
    {"a dt.rand mask", function(a) return a * (dt.rand({5, 2 * n}, {device_mesh = mesh, placements = {dt.Shard(2)}}) * 2) end},
    {"dt.F.dropout", function(a) return dt.F.dropout(a, 0.5) end},
  }
  for _, case in ipairs(RANDOM) do
    local what, random = case[1], case[2]
    it("recomputes a tensor-parallel block with " .. what .. " (the same numbers): the gradients of the plain run", function()
      dt.manual_seed(11)
      local w1 = dt.randn({4, 2 * n}, {device_mesh = mesh, placements = {dt.Shard(2)}, requires_grad = true})
      local w2 = dt.randn({2 * n, 3}, {device_mesh = mesh, placements = {dt.Shard(1)}, requires_grad = true})
      local x = dt.randn({5, 4}, {device_mesh = mesh, placements = {dt.Replicate()}, requires_grad = true})
      local function block(h) return random(h:mm(w1)):mm(w2) end
      local state = dt.get_rng_state()
      local out = block(x)
      out:sum():backward()
      local gx, g1, g2 = x.grad:full_tensor(), w1.grad:full_tensor(), w2.grad:full_tensor()
      local after = dt.get_rng_state()
      x.grad, w1.grad, w2.grad = nil, nil, nil

      dt.set_rng_state(state)
      local cout = dt.utils.checkpoint(block, x)
      assert.are.equal("checkpoint", cout.grad_fn)
      H.close(cout, out:full_tensor(), "checkpointed forward")
      cout:sum():backward()
      assert.are.same(after, dt.get_rng_state())
      assert.is_true(H.rng_states_agree())
      assert.are.equal(placements_of({dt.Shard(2)}), placements_text(w1.grad))
      assert.are.equal(placements_of({dt.Shard(1)}), placements_text(w2.grad))
      H.close(x.grad, gx, "x.grad")
      H.close(w1.grad, g1, "w1.grad")
      H.close(w2.grad, g2, "w2.grad")
    end)
  end
end)
