-- Lua ops (dt.register_op) and Lua sharding rules (dt.register_sharding, schema.builtin), dt.explain,
-- the ops composed in Lua (cat/stack, embedding, cross_entropy) with plain operands, implicit
-- replication and ranks outside the mesh, SPMD: every result is compared with the same op on the
-- global plain tensors, every error with the plain op's error, on every rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local fails, dist = H.fails, H.dist
local close, values, plain_error = H.close, H.values, H.plain_error

describe("Lua ops, Lua rules, explain, the ops composed in Lua", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local X = values({4, 3})

  it("Lua ops: DTensors on different meshes name both meshes; explain shows the choice", function()
    local add2 = dt.register_op {
      name = "luaop_add2", forward = function(a, b) return a + b end,
      sharding = function(schema)
        local p = schema.inputs[1].placements
        local r = {}
        for m = 1, schema.mesh_ndim do r[m] = "R" end
        return {{inputs = {r, r}, output = r}, {inputs = {p, p}, output = p}}
      end,
    }
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    local other = dt.init_device_mesh("cpu", {1, n})
    fails("luaop_add2: DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(other),
          add2, x, dt.distribute_tensor(X, other, {"R", "R"}))
    local text = dt.explain("luaop_add2", x, x)
    assert.matches("(Replicate()), (Replicate()) -> (Replicate())  cost", text, 1, true)
    -- S(1) is where x is: nothing moves, the cheapest (on one rank, a tie: the first listed)
    assert.matches("chosen: " .. (n > 1 and "(Shard(1)), (Shard(1)) -> (Shard(1))" or "(Replicate()), (Replicate()) -> (Replicate())"),
                   text, 1, true)
    close(add2(x, x), X * 2, "luaop_add2")
  end)

  it("a Lua rule extends the built-in one through schema.builtin", function()
    local A, B = values({4, 3}), values({3, 2})
    local a, b = dt.distribute_tensor(A, mesh, {"S2"}), dt.distribute_tensor(B, mesh, {"S1"})
    assert.are.equal("Partial(sum)", tostring(a:matmul(b).placements[1])) -- S(k) x S(k)
    local seen
    dt.register_sharding("matmul", function(schema)
      seen = #schema.builtin
      local out = {} -- the built-in strategies without a Partial output, plus one of ours
      for _, st in ipairs(schema.builtin) do
        if not st.outputs[1][1]:is_partial() then out[#out + 1] = st end
      end
      out[#out + 1] = {inputs = {{"R"}, {"S2"}}, output = {"S2"}}
      return out
    end)
    local y
    local c = dt.comm_debug(function() y = a:matmul(b) end)
    dt.register_sharding("matmul", nil)
    assert.are.equal(4, seen) -- S(m) x R, R x S(n), S(k) x S(k), R x R
    assert.are_not.equal("Partial(sum)", tostring(y.placements[1]))
    if n > 1 then assert.is_true(#c.ops > 0) end
    close(y, A:matmul(B), "extended rule")
  end)

  it("explain takes the dt.F names of dispatched ops, and refuses the ops composed in Lua without running them", function()
    local Q = values({2, 4, 3, 2})
    local q = dt.distribute_tensor(Q, mesh, {"S2"})
    local text = dt.explain("scaled_dot_product_attention", q, q, q)
    assert.matches("chosen: (Shard(2)), (Shard(2)), (Shard(2)) -> (Shard(2))", text, 1, true)
    assert.matches("chosen: (Shard(2)) -> (Shard(2))", dt.explain("layer_norm", q, 2), 1, true)
    local x = dt.distribute_tensor(X, mesh, {"S2"})
    -- cat/stack are ops of the table: explained, nothing runs
    local c = dt.comm_debug(function()
      text = dt.explain("cat", {x, x, x}, 2)
    end)
    assert.are.equal(0, #c.ops, "explain cat")
    assert.matches("cat((Shard(2)), (Shard(2)), (Shard(2))): strategies", text, 1, true)
    assert.matches("chosen: (Replicate()), (Replicate()), (Replicate()) -> (Replicate())", text, 1, true)
    for _, op in ipairs {"embedding", "cross_entropy", "linear", "zeros_like"} do
      local c = dt.comm_debug(function()
        fails("explain: " .. op .. " is composed in Lua from dispatched ops", dt.explain, op, {x, x}, 2)
      end)
      assert.are.equal(0, #c.ops, op)
    end
  end)

  it("scaled_dot_product_attention with heads or batch sharded stays sharded and issues no collective", function()
    local Q = values({2, 4, 3, 2})
    for _, d in ipairs {1, 2} do
      local q = dt.distribute_tensor(Q, mesh, {dt.Shard(d)})
      local y
      local c = dt.comm_debug(function() y = dt.F.scaled_dot_product_attention(q, q, q, {is_causal = true}) end)
      assert.are.equal(0, #c.ops)
      assert.are.equal("Shard(" .. d .. ")", tostring(y.placements[1]))
      close(y, dt.F.scaled_dot_product_attention(Q, Q, Q, {is_causal = true}), "sdpa Shard(" .. d .. ")")
    end
  end)

  it("embedding with a replicated weight lets the ids' sharding through", function()
    local W = values({10, 3})
    local I = dt.tensor({{1, 2, 3}, {4, 5, 10}, {7, 8, 9}, {1, 1, 1}}, {dtype = "int64"})
    local y
    local c = dt.comm_debug(function() y = dt.F.embedding(dt.distribute_tensor(I, mesh, {"S1"}), dt.distribute_tensor(W, mesh, {"R"})) end)
    assert.are.equal("Shard(1)", tostring(y.placements[1]))
    assert.are.equal(0, c.all_gather or 0)
    close(y, dt.F.embedding(I, W), "embedding ids S(1)")
  end)

  it("embedding with a row-wise (vocab) sharded weight: one dispatched lookup, a Partial(sum), no all_gather", function()
    local W = values({4 * n + 1, 3}) -- uneven rows: the last rank's shard is shorter
    local I = dt.tensor({{1, 2, 4 * n + 1}, {n + 1, 3, 1}}, {dtype = "int64"})
    local w, ids = dt.distribute_tensor(W, mesh, {"S1"}), dt.distribute_tensor(I, mesh, {"R"})
    local y
    local s0 = dt.dispatch_stats()
    local c = dt.comm_debug(function() y = dt.F.embedding(ids, w) end)
    local s1 = dt.dispatch_stats()
    assert.are.equal("Partial(sum)", tostring(y.placements[1]))
    assert.are.equal(0, #c.ops, "replicated ids on the whole world: no collective at all")
    assert(s1.hits + s1.misses > s0.hits + s0.misses, "the lookup goes through the dispatcher")
    close(y, dt.F.embedding(I, W), "embedding row-wise")
  end)

  it("the ops composed in Lua and Lua ops take plain tensors as the dispatcher does", function()
    local W = values({4, 3})
    local w = dt.distribute_tensor(W, mesh, {"S1"})
    local ids, T = dt.tensor({1, 4}, {dtype = "int64"}), dt.tensor({1, 2, 3, 1}, {dtype = "int64"})
    local add2 = dt.register_op {
      name = "luaop_add_plain", forward = function(a, b) return a + b end,
      sharding = function(schema) -- b follows a unless it is a (0-d) scalar
        local p, q = schema.inputs[1].placements, schema.inputs[2]
        return {{inputs = {p, #q.shape == #schema.inputs[1].shape and p or q.placements}, output = p}}
      end,
    }
    -- one element: replicated
    local id0 = dt.tensor(2, {dtype = "int64"})
    close(dt.F.embedding(id0, w), dt.F.embedding(id0, W), "embedding of a 0-d plain id")
    close(add2(w, dt.tensor(1.0)), W + 1, "Lua op with a 0-d plain tensor")
    -- several: the dispatcher's error, and replicated inside implicit_replication
    local want = " is a plain tensor of %d elements mixed with DTensors; convert it with dt.from_local or dt.distribute_tensor (or run inside dt.implicit_replication)"
    fails("embedding: argument 1" .. want:format(2), dt.F.embedding, ids, w)
    fails("cross_entropy: argument 2" .. want:format(4), dt.F.cross_entropy, w, T)
    fails("cat: element 2 of the list" .. want:format(12), dt.cat, {w, W})
    fails("luaop_add_plain: argument 2" .. want:format(12), add2, w, W)
    dt.implicit_replication(function()
      close(dt.F.embedding(ids, w), dt.F.embedding(ids, W), "embedding, implicit")
      close(dt.F.cross_entropy(w, T, {reduction = "none"}), dt.F.cross_entropy(W, T, {reduction = "none"}), "cross_entropy, implicit")
      close(dt.cat({w, W}, 1), dt.cat({W, W}, 1), "cat, implicit")
      close(dt.stack({W, w}), dt.stack({W, W}), "stack, implicit")
      close(add2(w, W), W * 2, "Lua op, implicit")
    end)
  end)

  it("documented errors: a local shard used as a plain operand; a Lua rule whose output does not fit", function()
    local t = dt.ones(4)
    local x = dt.from_local(t, mesh, {"S1"})
    -- the shard is a plain tensor of its own: the plain-operand rule applies (no ambiguity)
    fails("add: argument 2 is a plain tensor of 4 elements mixed with DTensors",
          function() return x + t end)
    local X6 = values({2 * n, 3})
    local y = dt.distribute_tensor(X6, mesh, {"S1"})
    dt.register_sharding("add", function(schema) -- claims the sum is sharded along dim 2
      return {{inputs = {{"S1"}, {"S1"}}, output = {"S2"}}}
    end)
    local ok, err = pcall(function() return y + y end)
    dt.register_sharding("add", nil)
    if n > 1 then -- (on one rank, every placement holds the whole tensor: the claim is true)
      assert.is_false(ok)
      assert.matches("add: the local result's shape does not match the chosen output placements (a wrong sharding rule?)",
                     tostring(err), 1, true)
    end
    close(y + y, X6 * 2, "the built-in rule again")
  end)

  it("implicit_replication passes its arguments and ends with an error raised inside", function()
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    close(dt.implicit_replication(function(a, b) return a + b end, x, X), X * 2, "implicit_replication(fn, ...)")
    assert.is_false(pcall(dt.implicit_replication, function() local _ = x + X; error("boom") end))
    fails("convert it with dt.from_local or dt.distribute_tensor", function() return x + X end)
  end)

  if n >= 3 then
    it("ranks outside the mesh: every Lua-composed op and Lua op gives the global metadata", function()
      local ranks = {}
      for r = 1, n - 1 do ranks[#ranks + 1] = r end
      local sub = dt.DeviceMesh("cpu", ranks)
      local x = dist(X, sub, {"S1"})
      local T = dt.tensor({1, 2, 3, 1}, {dtype = "int64"})
      local t = dist(T, sub, {"R"})
      close(dt.cat({x, x}, 2), dt.cat({X, X}, 2), "cat")
      close(dt.F.cross_entropy(x, t), dt.F.cross_entropy(X, T), "cross_entropy")
      close(dt.F.cross_entropy(dist(X, sub, {"S2"}), t), dt.F.cross_entropy(X, T), "cross_entropy loss parallel")
      close(dt.F.embedding(t, x), dt.F.embedding(T, X), "embedding")
      close(dt.F.layer_norm(x, 3), dt.F.layer_norm(X, 3), "layer_norm")
      local rowsum = dt.register_op {
        name = "luaop_rowsum_sub", forward = function(a) return a:sum(2, true) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      close(rowsum(x), X:sum(2, true), "Lua op")
      local bad = dt.register_op {
        name = "luaop_bad_sub", forward = function(a) return a:sum(7) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      -- forward fails on the mesh's ranks: every rank raises (the others name the op)
      local ok, err = pcall(bad, x)
      assert.is_false(ok)
      assert.matches(rank == 0 and "luaop_bad_sub: the op failed on another rank" or "sum: dim 7 out of range", tostring(err), 1, true)
      fails(plain_error(dt.cat, {X, values({2, 4})}, 1), dt.cat, {x, dist(values({2, 4}), sub, {"S1"})}, 1)
    end)
  end
end)
