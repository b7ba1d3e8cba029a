-- Acceptance of issue 5 (the sharding dispatcher), SPMD on every mesh of this world: what
-- dispatch_spec.lua and dispatch_index_spec.lua leave out.  Every result is compared with
-- the same op on the global plain tensors, every error with the plain op's error on the
-- global tensors, on every rank (ranks outside the mesh included).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local fails, dist = H.fails, H.dist

-- d a DTensor: its global metadata on every rank, its values on the mesh's ranks (nan and
-- inf where the reference has them; bfloat16/float16 to their precision).
local function close(d, want, what)
  assert.are.same(want:size(), d:size(), what)
  assert.are.equal(want.dtype, d.dtype, what)
  local got = d:full_tensor()
  if not d.device_mesh:get_coordinate() or want:numel() == 0 then return end
  local g, w = got:to("float64"), want:to("float64")
  assert(dt.equal(g:ne(g), w:ne(w)), (what or "") .. ": nan at other places")
  local same = g:eq(w)
  g, w = dt.where(same, 0, g), dt.where(same, 0, w)
  g, w = dt.where(g:ne(g), 0, g), dt.where(w:ne(w), 0, w)
  local tol = (want.dtype == "bfloat16" or want.dtype == "float16") and 2e-2 or 1e-9
  if want.dtype == "float32" then tol = 1e-5 end
  local err = (g - w):abs():max():item()
  assert(err <= tol * (1 + w:abs():max():item()), (what or "") .. ": max error " .. err)
end

local function values(shape, dtype)
  local numel = 1
  for _, v in ipairs(shape) do numel = numel * v end
  return ((dt.arange(numel):to("float64") * 0.37):sin():reshape(shape) * 3):to(dtype or "float32")
end

-- the plain op's error message on the global tensors (without its position)
local function plain_error(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "the plain op was expected to fail")
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""))
end

local FLOATS = {"float32", "float64", "bfloat16", "float16"}

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("issue 5 acceptance on mesh " .. name, function()
    it("every pointwise op and reduction, random float dtypes, shapes with 0-size dims, Partial inputs", function()
      local rng = H.prng(123)
      for case = 1, 10 do
        local dtype = rng.pick(FLOATS)
        local shape = H.shape_of(rng, rng.int(1, 3), 0, 5)
        local X = values(shape, dtype)
        local x = dist(X, mesh, H.placements(rng, mesh, #shape, true))
        local what = name .. " case " .. case .. " " .. dtype .. " {" .. table.concat(shape, ",") .. "} " ..
                         H.placement_string(x.placements)
        for _, op in ipairs {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "sin", "cos"} do
          close(x[op](x), X[op](X), what .. " " .. op)
        end
        close(x:gelu("tanh"), X:gelu("tanh"), what .. " gelu tanh")
        close(x:clamp(-1, 1), X:clamp(-1, 1), what .. " clamp")
        close(x:pow(2), X:pow(2), what .. " pow")
        close(x:remainder(2), X:remainder(2), what .. " remainder")
        for _, op in ipairs {"eq", "ne", "lt", "le", "gt", "ge"} do close(x[op](x, 0.5), X[op](X, 0.5), what .. " " .. op) end
        close(dt.add(x, x, {alpha = 2}), dt.add(X, X, {alpha = 2}), what .. " add alpha")
        close(dt.sub(x, x * 3, {alpha = 0.5}), dt.sub(X, X * 3, {alpha = 0.5}), what .. " sub alpha")
        close(dt.where(x:gt(0), x, 0), dt.where(X:gt(0), X, 0), what .. " where with a number")
        close(x:to("int32"), X:to("int32"), what .. " to int32")
        close(x:sum(), X:sum(), what .. " sum all")
        close(x:mean(), X:mean(), what .. " mean all")
        local d = rng.int(1, #shape)
        if shape[d] > 0 then
          for _, op in ipairs {"sum", "mean", "amax", "amin", "prod", "var", "std", "argmax", "argmin"} do
            close(x[op](x, d, true), X[op](X, d, true), what .. " " .. op .. " dim " .. d)
          end
          close(x:norm(2, d), X:norm(2, d), what .. " norm dim " .. d)
          local v, i = x:min(d)
          local V, I = X:min(d)
          close(v, V, what .. " min values")
          close(i, I, what .. " min indices")
        else -- plain tensors refuse these too: the same error on every rank
          fails(plain_error(X.amax, X, d), x.amax, x, d)
          fails(plain_error(X.argmin, X, d), x.argmin, x, d)
        end
        close(x:softmax(d), X:softmax(d), what .. " softmax")
        close(x:log_softmax(d), X:log_softmax(d), what .. " log_softmax")
      end
    end)

    it("matmul: 1-d and broadcast N-d operands, integer and bfloat16 dtypes, addmm with a 2-d bias, N-d linear", function()
      local rng = H.prng(77)
      for case = 1, 8 do
        local dtype = rng.pick {"float32", "float64", "bfloat16", "int64", "int32"}
        local m, k, nn, b = rng.int(0, 5), rng.int(1, 5), rng.int(1, 5), rng.int(1, 3)
        local A, B, V = values({m, k}, dtype), values({k, nn}, dtype), values({k}, dtype)
        local a, bb = dist(A, mesh, H.placements(rng, mesh, 2, true)), dist(B, mesh, H.placements(rng, mesh, 2, true))
        local v = dist(V, mesh, H.placements(rng, mesh, 1, true))
        local what = name .. " matmul case " .. case .. " " .. dtype .. " " .. H.placement_string(a.placements) ..
                         H.placement_string(bb.placements)
        close(a:matmul(v), A:matmul(V), what .. " 2-d x 1-d")
        close(v:matmul(v), V:matmul(V), what .. " 1-d x 1-d")
        close(v:matmul(bb), V:matmul(B), what .. " 1-d x 2-d")
        local X4, Y3 = values({b, 1, m, k}, dtype), values({3, k, nn}, dtype)
        local x4, y3 = dist(X4, mesh, H.placements(rng, mesh, 4, true)), dist(Y3, mesh, H.placements(rng, mesh, 3, true))
        close(x4:matmul(y3), X4:matmul(Y3), what .. " 4-d x 3-d broadcast batch")
        close(v:matmul(y3), V:matmul(Y3), what .. " 1-d x 3-d")
        if not dtype:match("int") then
          local C = values({m, nn}, dtype)
          local c = dist(C, mesh, H.placements(rng, mesh, 2, true))
          close(dt.addmm(c, a, bb), dt.addmm(C, A, B), what .. " addmm 2-d bias")
          local W, Bi = values({nn, k}, dtype), values({nn}, dtype)
          local w, bi = dist(W, mesh, H.placements(rng, mesh, 2, false)), dist(Bi, mesh, H.placements(rng, mesh, 1, false))
          close(dt.F.linear(x4, w, bi), dt.F.linear(X4, W, Bi), what .. " linear 4-d")
        end
      end
    end)

    it("in-place ops: copy_ from other placements, broadcast and dtypes; add_ with alpha; Partial kept", function()
      local rng = H.prng(5)
      for case = 1, 6 do
        local X = values({5, 3}, "float32")
        local px = H.placements(rng, mesh, 2, false)
        local what = name .. " in-place case " .. case .. " " .. H.placement_string(px)
        local y = dist(X, mesh, px):clone()
        local src = dist(X * 2 + 1, mesh, H.placements(rng, mesh, 2, true))
        y:copy_(src)
        assert.are.equal(H.placement_string(px), H.placement_string(y.placements), what)
        close(y, X * 2 + 1, what .. " copy_")
        local row = values({3}, "float64")
        y:copy_(dist(row, mesh, H.placements(rng, mesh, 1, false)))
        close(y, row:to("float32"):unsqueeze(1):expand(5, 3):contiguous(), what .. " copy_ broadcast, cast")
        local Xi = X:to("int64")
        local yi = dist(Xi, mesh, px):clone()
        yi:add_(yi, {alpha = 2})
        close(yi, Xi * 3, what .. " add_ alpha int64")
        assert.are.equal(H.placement_string(px), H.placement_string(yi.placements), what)
      end
      if n > 1 and mesh.ndim == 1 then
        local X = values({4, 3}, "float32")
        local p = dist(X, mesh, {dt.Partial("sum")})
        p:add_(p)
        assert.are.equal("Partial(sum)", tostring(p.placements[1]))
        close(p, X * 2, name .. " add_ of two Partial(sum)")
        p:mul_(3)
        close(p, X * 6, name .. " mul_ of a Partial(sum) by a number")
        fails("add_: an in-place op keeps its input's placements (Partial(sum)), and no strategy can", p.add_, p, 1)
      end
    end)

    it("bad input: the plain op's error on the global shapes, on every rank", function()
      local X, Y = values({4, 3}), values({2, 4})
      local x, y = dist(X, mesh, {dt.Shard(1), table.unpack(H.placements(H.prng(1), mesh, 2, false), 2)}), dist(Y, mesh, H.placements(H.prng(2), mesh, 2, false))
      fails(plain_error(function() return X + Y end), function() return x + y end)
      fails(plain_error(X.matmul, X, X), x.matmul, x, x)
      fails(plain_error(X.sum, X, 5), x.sum, x, 5)
      fails(plain_error(X.view, X, 5, -1), x.view, x, 5, -1)
      fails(plain_error(X.narrow, X, 1, 3, 5), x.narrow, x, 1, 3, 5)
      fails(plain_error(X.expand, X, 5, 3), x.expand, x, 5, 3)
      fails(plain_error(X.copy_, X:clone(), Y), x.copy_, x, y)
      fails(plain_error(X.softmax, X:long(), 1), function() return x:long():softmax(1) end)
      fails(plain_error(dt.where, X, X, X), dt.where, x, x, x)
      -- the joins check the global shapes (local shards may agree where they do not)
      fails(plain_error(dt.cat, {X, Y}, 1), dt.cat, {x, y}, 1)
      fails(plain_error(dt.stack, {X, X:narrow(1, 1, 2)}), dt.stack, {x, x:narrow(1, 1, 2)})
      fails(plain_error(dt.cat, {X, X}, 3), dt.cat, {x, x}, 3)
      fails(plain_error(dt.cat, {X, X}, 0), dt.cat, {x, x}, 0)
      fails(plain_error(dt.stack, {X, X}, -4), dt.stack, {x, x}, -4)
      fails(plain_error(dt.cat, {X, X}, 1.5), dt.cat, {x, x}, 1.5)
      local s = dist(dt.tensor(1.0), mesh, H.placements(H.prng(3), mesh, 0, false))
      fails(plain_error(dt.cat, {dt.tensor(1.0)}), dt.cat, {s})
      fails(plain_error(dt.F.layer_norm, X, 5), dt.F.layer_norm, x, 5)
    end)

    it("cross_entropy on DTensors: bad targets, shapes, dtypes and options raise plain's error on every rank", function()
      local rng = H.prng(8)
      local Lg = values({5, 4}, "float32")
      local Good = dt.tensor({1, 4, 2, 3, -100}, {dtype = "int64"})
      for case = 1, 6 do
        local lg = dist(Lg, mesh, H.placements(rng, mesh, 2, false)) -- class-sharded (loss parallel) or not
        local tp = H.placements(rng, mesh, 1, false)
        local what = name .. " ce case " .. case .. " " .. H.placement_string(lg.placements) .. H.placement_string(tp)
        for _, bad in ipairs {5, 0, -3} do
          local T = Good:clone()
          T[rng.int(1, 5)] = bad
          fails(plain_error(dt.F.cross_entropy, Lg, T), dt.F.cross_entropy, lg, dist(T, mesh, tp))
        end
        local t = dist(Good, mesh, tp)
        local G4 = dt.tensor({1, 4, 2, 3, 4}, {dtype = "int64"})
        close(dt.F.cross_entropy(lg, dist(G4, mesh, tp), {ignore_index = 4, reduction = "none"}),
              dt.F.cross_entropy(Lg, G4, {ignore_index = 4, reduction = "none"}), what .. " ignore_index")
        close(dt.F.cross_entropy(lg, t), dt.F.cross_entropy(Lg, Good), what .. " mean")
        local T3 = dt.tensor({1, 2, 3}, {dtype = "int64"})
        fails(plain_error(dt.F.cross_entropy, Lg, T3), dt.F.cross_entropy, lg, dist(T3, mesh, tp))
        fails(plain_error(dt.F.cross_entropy, Lg, Good, {reduction = "bogus"}), dt.F.cross_entropy, lg, t, {reduction = "bogus"})
        fails(plain_error(dt.F.cross_entropy, Lg, Good, {foo = 1}), dt.F.cross_entropy, lg, t, {foo = 1})
        fails(plain_error(dt.F.cross_entropy, Lg, Good, {ignore_index = 1.5}), dt.F.cross_entropy, lg, t, {ignore_index = 1.5})
        fails(plain_error(dt.F.cross_entropy, Lg:long(), Good), dt.F.cross_entropy, lg:long(), t)
        fails(plain_error(dt.F.cross_entropy, Lg, Good:float()), dt.F.cross_entropy, lg, t:float())
      end
    end)

    it("cross_entropy on [n, classes, d] and [classes] logits; norms in bfloat16/float16; sdpa with masks", function()
      local rng = H.prng(99)
      for case = 1, 5 do
        local N, C, D = rng.int(1, 4), rng.int(1, 6), rng.int(1, 3)
        local Lg = values({N, C, D}, rng.pick {"float32", "float64"})
        local T = (dt.arange(N * D):remainder(C) + 1):reshape(N, D)
        local lg, t = dist(Lg, mesh, H.placements(rng, mesh, 3, false)), dist(T, mesh, H.placements(rng, mesh, 2, false))
        local what = name .. " case " .. case .. " " .. H.placement_string(lg.placements) .. H.placement_string(t.placements)
        for _, red in ipairs {"none", "sum", "mean"} do
          close(dt.F.cross_entropy(lg, t, {reduction = red}), dt.F.cross_entropy(Lg, T, {reduction = red}), what .. " ce 3-d " .. red)
        end
        local L1, T0 = values({C}), dt.tensor(C, {dtype = "int64"})
        close(dt.F.cross_entropy(dist(L1, mesh, H.placements(rng, mesh, 1, false)), dist(T0, mesh, H.placements(rng, mesh, 0, false))),
              dt.F.cross_entropy(L1, T0), what .. " ce 1-d logits")
        local dtype = rng.pick {"bfloat16", "float16"}
        local X, W = values({N, C, D + 1}, dtype), values({D + 1}, dtype)
        local x = dist(X, mesh, H.placements(rng, mesh, 3, true))
        local w = dist(W, mesh, H.placements(rng, mesh, 1, false))
        close(dt.F.layer_norm(x, D + 1, w, w), dt.F.layer_norm(X, D + 1, W, W), what .. " layer_norm " .. dtype)
        close(dt.F.rms_norm(x, D + 1, w), dt.F.rms_norm(X, D + 1, W), what .. " rms_norm " .. dtype)
        local B, Hh, L, S, E = rng.int(1, 3), rng.int(1, 4), rng.int(1, 4), rng.int(1, 4), rng.int(1, 3)
        local Q, K, V = values({B, Hh, L, E}), values({B, Hh, S, E}):cos(), values({B, Hh, S, E}):sin()
        local M, Mf = values({1, Hh, L, S}):gt(-1), values({L, S})
        local q, k, v = dist(Q, mesh, H.placements(rng, mesh, 4, false)), dist(K, mesh, H.placements(rng, mesh, 4, false)),
                        dist(V, mesh, H.placements(rng, mesh, 4, false))
        close(dt.F.scaled_dot_product_attention(q, k, v, {attn_mask = dist(M, mesh, H.placements(rng, mesh, 4, false))}),
              dt.F.scaled_dot_product_attention(Q, K, V, {attn_mask = M}), what .. " sdpa bool mask")
        close(dt.F.scaled_dot_product_attention(q, k, v, {attn_mask = dist(Mf, mesh, H.placements(rng, mesh, 2, false)), scale = 0.3}),
              dt.F.scaled_dot_product_attention(Q, K, V, {attn_mask = Mf, scale = 0.3}), what .. " sdpa float mask")
      end
    end)

    it("a Lua op whose forward changes the shape: the global shape adds up uneven shards, on every rank", function()
      local rowsum = dt.register_op {
        name = "acc5_rowsum", forward = function(x) return x:sum(2, true) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      local rng = H.prng(13)
      for case = 1, 5 do
        local X = values(H.shape_of(rng, 2, 1, 7))
        local p = H.placements(rng, mesh, 2, false)
        for m = 1, mesh.ndim do if p[m]:is_shard() and p[m].dim == 2 then p[m] = dt.Replicate() end end
        local y = rowsum(dist(X, mesh, p))
        close(y, X:sum(2, true), name .. " Lua op case " .. case .. " " .. H.placement_string(p))
      end
      -- the agreed shape is remembered per decision and non-tensor arguments: a new k is
      -- agreed again, a repeated call issues no collective
      local take = dt.register_op {
        name = "acc5_take", forward = function(x, k) return x:narrow(2, 1, k) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      local X5 = values({5, 3})
      local p = H.placements(rng, mesh, 2, false)
      for m = 1, mesh.ndim do if p[m]:is_shard() and p[m].dim == 2 then p[m] = dt.Replicate() end end
      local x5 = dist(X5, mesh, p)
      close(take(x5, 1), X5:narrow(2, 1, 1), name .. " Lua op, k = 1")
      close(take(x5, 2), X5:narrow(2, 1, 2), name .. " Lua op, k = 2")
      local c = dt.comm_debug(function() take(x5, 2) end)
      assert.are.equal(0, #c.ops, name .. " a repeated Lua op call agrees on nothing")
      local twice = dt.register_op {
        name = "acc5_twice", forward = function(x) return x * 2 end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      local X = values({5, 3})
      close(twice(dist(X, mesh, H.placements(rng, mesh, 2, false))), X * 2, name .. " shape-preserving Lua op")
    end)
  end)
end

describe("issue 5 acceptance", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local X = values({4, 3})

  it("Lua ops: DTensors on different meshes name both meshes; explain shows the choice", function()
    local add2 = dt.register_op {
      name = "acc5_add2", forward = function(a, b) return a + b end,
      sharding = function(schema)
        local p = schema.inputs[1].placements
        local r = {}
        for m = 1, schema.mesh_ndim do r[m] = "R" end
        return {{inputs = {r, r}, output = r}, {inputs = {p, p}, output = p}}
      end,
    }
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    local other = dt.init_device_mesh("cpu", {1, n})
    fails("acc5_add2: DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(other),
          add2, x, dt.distribute_tensor(X, other, {"R", "R"}))
    local text = dt.explain("acc5_add2", x, x)
    assert.matches("(Replicate()), (Replicate()) -> (Replicate())  cost", text, 1, true)
    -- S(1) is where x is: nothing moves, the cheapest (on one rank, a tie: the first listed)
    assert.matches("chosen: " .. (n > 1 and "(Shard(1)), (Shard(1)) -> (Shard(1))" or "(Replicate()), (Replicate()) -> (Replicate())"),
                   text, 1, true)
    close(add2(x, x), X * 2, "acc5_add2")
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

  it("the ops composed in Lua and Lua ops take plain tensors as the dispatcher does", function()
    local W = values({4, 3})
    local w = dt.distribute_tensor(W, mesh, {"S1"})
    local ids, T = dt.tensor({1, 4}, {dtype = "int64"}), dt.tensor({1, 2, 3, 1}, {dtype = "int64"})
    local add2 = dt.register_op {
      name = "acc5_add_plain", forward = function(a, b) return a + b end,
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
    fails("acc5_add_plain: argument 2" .. want:format(12), add2, w, W)
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
        name = "acc5_rowsum_sub", forward = function(a) return a:sum(2, true) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      close(rowsum(x), X:sum(2, true), "Lua op")
      local bad = dt.register_op {
        name = "acc5_bad_sub", forward = function(a) return a:sum(7) end,
        sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
      }
      -- forward fails on the mesh's ranks: every rank raises (the others name the op)
      local ok, err = pcall(bad, x)
      assert.is_false(ok)
      assert.matches(rank == 0 and "acc5_bad_sub: the op failed on another rank" or "sum: dim 7 out of range", tostring(err), 1, true)
      fails(plain_error(dt.cat, {X, values({2, 4})}, 1), dt.cat, {x, dist(values({2, 4}), sub, {"S1"})}, 1)
    end)
  end
end)
