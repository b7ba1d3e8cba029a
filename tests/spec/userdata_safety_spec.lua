-- Userdata safety: every userdata's metatable is protected (getmetatable returns its type
-- name, setmetatable refuses), __gc and __close are one idempotent release, and using a
-- released object is a Lua error naming the function, never a crash.  The debug library
-- still reaches __gc (as a finalizer would run it early); these cases use it on purpose.
local S = require("tests.spec.support.spec_helpers")
local fails = S.fails

-- Runs the object's own __gc (or __close) by hand, as only the debug library can.
local function release(x, field)
  debug.getmetatable(x)[field or "__gc"](x)
end

local function mesh() return dt.init_device_mesh("cpu", {dt.world_size()}, {"dp"}) end

describe("protected metatables", function()
  it("getmetatable returns the type name and setmetatable refuses, for every userdata and guard", function()
    local m = mesh()
    local region <close> = dt.comm_debug()
    local fork <close> = dt.fork_rng()
    local guard <close> = m:use()
    local implicit <close> = dt.implicit_replication()
    local values = {
      Tensor = dt.ones(2), DeviceMesh = m, Placement = dt.Shard(1), Group = dt.distributed.new_group(),
      CommDebugRegion = region, RngFork = fork, MeshGuard = guard, ImplicitReplication = implicit,
      [dt.distribute_tensor(dt.ones(2), m, {dt.Replicate()})] = "Tensor",
    }
    for name, v in pairs(values) do
      if type(name) ~= "string" then name, v = v, name end
      assert.are.equal(name, getmetatable(v), name)
      assert.is_false(pcall(setmetatable, v, {}), name)
    end
  end)

  it("every dtensor.* metatable in the registry is protected", function()
    local n = 0
    for k, v in pairs(debug.getregistry()) do
      if type(k) == "string" and k:match("^dtensor%.") and type(v) == "table" then
        n = n + 1
        assert.are.equal("string", type(rawget(v, "__metatable")), k .. " has no __metatable")
      end
    end
    assert.is_true(n >= 7, "found " .. n .. " metatables")
  end)

  it("the type name shows in errors about a wrong argument", function()
    fails("relu: expected a tensor, got DeviceMesh", dt.nn.functional.relu, mesh())
    fails("expected a DeviceMesh, got Placement", dt.distribute_tensor, dt.ones(2), dt.Shard(1), {dt.Replicate()})
  end)
end)

describe("a released DeviceMesh", function()
  it("raises naming the function for every use, and releasing again is a no-op", function()
    local m = mesh()
    release(m)
    release(m)
    release(m, "__close")
    local msg = "DeviceMesh has been released"
    fails("shape: " .. msg, m.shape, m)
    fails("size: " .. msg, m.size, m)
    fails("dim_names: " .. msg, m.dim_names, m)
    fails("get_coordinate: " .. msg, m.get_coordinate, m)
    fails("get_local_rank: " .. msg, m.get_local_rank, m)
    fails("get_group: " .. msg, m.get_group, m)
    fails("layout: " .. msg, m.layout, m)
    fails("slice: " .. msg, m.slice, m, 1)
    fails("flatten: " .. msg, m.flatten, m)
    fails("use: " .. msg, m.use, m)
    fails("ndim: " .. msg, function() return m.ndim end)
    fails("device_type: " .. msg, function() return m.device_type end)
    fails("dp: " .. msg, function() return m.dp end)
    fails("slice: " .. msg, function() return m[{"dp"}] end)
    fails("tostring: " .. msg, tostring, m)
    fails("distribute_tensor: " .. msg, dt.distribute_tensor, dt.ones(2), m, {dt.Replicate()})
    fails("from_local: " .. msg, dt.from_local, dt.ones(2), m, {dt.Replicate()})
    fails("zeros: " .. msg, dt.zeros, {2}, {device_mesh = m, placements = {dt.Replicate()}})
    local d = dt.distribute_tensor(dt.ones(2), mesh(), {dt.Replicate()})
    fails("redistribute: " .. msg, d.redistribute, d, m, {dt.Replicate()})
    assert.is_true(m == m) -- identity
    assert.is_false(m == mesh()) -- a released mesh equals no live one
  end)

  it("<close> releases it; what still uses the mesh (DTensors, the mesh stack) keeps it alive", function()
    local d, outer
    do
      local m <close> = mesh()
      outer = m
      d = dt.distribute_tensor(dt.arange(4), m, {dt.Replicate()})
      local g <close> = m:use()
      local cur = dt.current_mesh()
      release(cur)
      assert.are.same({dt.world_size()}, dt.current_mesh():shape()) -- the stack's own reference
    end
    fails("shape: DeviceMesh has been released", outer.shape, outer)
    collectgarbage()
    collectgarbage()
    assert.are.same({0, 1, 2, 3}, d:full_tensor():totable())
    assert.are.same({dt.world_size()}, d.device_mesh:shape())
    local dm = d.device_mesh
    release(dm)
    assert.are.same({0, 1, 2, 3}, d:full_tensor():totable())
  end)

  it("a release function given the wrong object raises instead of crashing", function()
    local gc = debug.getmetatable(mesh()).__gc
    assert.is_false(pcall(gc, dt.ones(2)))
    assert.is_false(pcall(gc, nil))
    assert.is_false(pcall(debug.getmetatable(dt.ones(1)).__gc, mesh()))
    assert.is_false(pcall(debug.getmetatable(dt.comm_debug()).__close, {}))
    assert.is_false(pcall(debug.getmetatable(dt.fork_rng()).__close, 1))
  end)
end)

describe("idempotent release of the other userdata", function()
  it("tensors (plain and DTensor): __gc, __close and release() any number of times", function()
    for _, t in ipairs {dt.ones(3), dt.distribute_tensor(dt.ones(2), mesh(), {dt.Replicate()})} do
      t:release()
      release(t)
      release(t, "__close")
      t:release()
      fails("has been released", t.sum, t)
      fails("has been released", function() return t + 1 end)
      fails("scaled_dot_product_attention: query has been released", dt.nn.functional.scaled_dot_product_attention, t, t, t)
    end
  end)

  it("guards restore once: mesh guard, rng fork, comm_debug region, implicit replication", function()
    local before = dt.current_mesh()
    local g = mesh():use()
    release(g, "__close")
    release(g, "__close")
    assert.are.equal(before, dt.current_mesh())

    dt.manual_seed(3)
    local state = dt.get_rng_state()
    local f = dt.fork_rng()
    dt.rand(4)
    release(f, "__close")
    dt.rand(4)
    f:restore() -- done already: a no-op, the state moves on
    release(f, "__close")
    assert.are_not.same(state, dt.get_rng_state())

    local r = dt.comm_debug()
    release(r, "__close")
    release(r)
    release(r, "__close")
    assert.are.equal(0, r:counts().bytes)

    local d = dt.distribute_tensor(dt.ones(2), mesh(), {dt.Replicate()})
    local outer = dt.implicit_replication()
    local inner = dt.implicit_replication()
    local close = debug.getmetatable(inner).__close
    close(inner)
    close(inner) -- counted once: the outer region still holds
    assert.are.same({2, 2}, (d + dt.ones(2)):full_tensor():totable())
    release(outer, "__close")
    assert.is_false(pcall(function() return d + dt.ones(2) end))
  end)

  it("placements and groups own nothing: they stay valid values", function()
    local p, g = dt.Shard(1), dt.distributed.new_group()
    assert.is_nil(debug.getmetatable(p).__gc)
    assert.is_nil(debug.getmetatable(g).__gc)
    assert.are.equal("Shard(1)", tostring(p))
    assert.are.equal(dt.world_size(), g:size())
  end)
end)

describe("a tensor whose storage is released (t:_release_storage, fully_shard's)", function()
  it("every read of its values raises naming the function, and _refill_ brings them back", function()
    local t = dt.ones(2, 3)
    t:_release_storage()
    assert.is_true(t:_storage_released())
    for name, f in pairs {
      item = function() return t:sum():item() end, totable = function() return t:totable() end,
      tostring = function() return tostring(t) end, all_reduce = function() return dt.distributed.all_reduce(t) end,
      broadcast = function() return dt.distributed.broadcast(t, 0) end,
    } do
      local ok, err = pcall(f)
      assert.is_false(ok, name)
      assert.matches("storage is released", err, 1, true)
      assert.matches(name == "item" and "sum" or name, err, 1, true)
    end
    t:_refill_(dt.full({2, 3}, 2))
    assert.is_false(t:_storage_released())
    assert.are.equal(12, t:sum():item())
  end)
end)
