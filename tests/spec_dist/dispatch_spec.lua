-- The sharding dispatcher, SPMD on every mesh of this world: for random shapes
-- (even and uneven) and placements, full_tensor() of an op on DTensors equals the op on the
-- global tensors; the collectives issued (dt.comm_debug); the decision cache
-- (dt.dispatch_stats); mixing plain tensors; in-place ops; ranks outside the mesh; errors.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local fails, placements, shape_of, dist = H.fails, H.placements, H.shape_of, H.dist

-- d a DTensor: its global metadata everywhere, its values on the ranks of its mesh.
local function close(d, want, what)
  assert.are.same(want:size(), d:size(), what)
  assert.are.equal(want.dtype, d.dtype, what)
  if not d.device_mesh:get_coordinate() then return end
  local got = d:full_tensor()
  if got:numel() == 0 then return end
  local g, w = got:to("float64"), want:to("float64")
  g, w = dt.where(g:ne(g), 0, g), dt.where(w:ne(w), 0, w) -- nan where both are (var of 1 element)
  local err = (g - w):abs():max():item()
  assert(err <= 1e-9 * (1 + w:abs():max():item()), (what or "") .. ": max error " .. err)
end

local function randn(rng, shape)
  local numel = 1
  for _, v in ipairs(shape) do numel = numel * v end
  return (dt.arange(numel):to("float64") * 0.37):sin():reshape(shape) + rng.int(0, 3)
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("dispatch on mesh " .. name, function()
    it("pointwise unary/binary (broadcasting)/where/casts equal the global op", function()
      local rng = H.prng(11)
      for case = 1, 25 do
        local ndim = rng.int(1, 3)
        local sa = shape_of(rng, ndim)
        local sb = {}
        for d = 1, ndim do sb[d] = rng.int(1, 3) == 1 and 1 or sa[d] end
        if rng.int(1, 3) == 1 then table.remove(sb, 1) end
        local A, B = randn(rng, sa), randn(rng, sb)
        local a, b = dist(A, mesh, placements(rng, mesh, #sa, true)), dist(B, mesh, placements(rng, mesh, #sb, true))
        local what = name .. " case " .. case .. " " .. H.placement_string(a.placements) .. " x " ..
                         H.placement_string(b.placements)
        close((a + b), A + B, what .. " add")
        close((a - b), A - B, what .. " sub")
        close((a * b), A * B, what .. " mul")
        close((a * 3), A * 3, what .. " mul scalar")
        close((2 - a), 2 - A, what .. " rsub scalar")
        close((a / 4), A / 4, what .. " div scalar")
        close((-a), -A, what .. " neg")
        close(a:exp(), A:exp(), what .. " exp")
        close(a:relu(), A:relu(), what .. " relu")
        close(a:gt(b), A:gt(B), what .. " gt")
        close(dt.where(a:gt(2), a, b), dt.where(A:gt(2), A, B), what .. " where")
        close(a:clone(), A:clone(), what .. " clone")
        close(a:float(), A:float(), what .. " float")
        close(a:contiguous(), A, what .. " contiguous")
      end
    end)

    it("random dtypes: pointwise and view results equal the global op", function()
      local rng = H.prng(41)
      for case = 1, 12 do
        local dtype = rng.pick(H.DTYPES)
        local shape = shape_of(rng, 2)
        local X = H.global(shape, dtype)
        local x = dist(X, mesh, placements(rng, mesh, 2, false))
        local what = name .. " dtype case " .. case .. " " .. dtype .. " " .. H.placement_string(x.placements)
        close(x + x, X + X, what .. " add")
        close(x * 3, X * 3, what .. " mul")
        local s = X[1]:clone():sum():to(dtype) -- a 0-d plain tensor: replicated
        close(x:eq(s), X:eq(s), what .. " eq 0-d")
        close(x:t(), X:t(), what .. " t")
        close(x:clone(), X, what .. " clone")
      end
    end)

    it("Partial(sum) passes through linear ops and is reduced before the others", function()
      if mesh.ndim > 1 then return end
      local X = randn(H.prng(3), {3, 5})
      local p = dist(X, mesh, {dt.Partial("sum")})
      assert.are.equal("Partial(sum)", tostring((p + p).placements[1]))
      assert.are.equal("Partial(sum)", tostring((p * 2).placements[1]))
      assert.are.equal("Partial(sum)", tostring((-p).placements[1]))
      assert.are.equal("Replicate()", tostring((p + 1).placements[1]))
      assert.are.equal("Replicate()", tostring(p:exp().placements[1]))
      close((p + 1), X + 1)
      close(p:exp(), X:exp())
      close((p * 2 + p), X * 3)
    end)

    it("matmul family (mm, bmm, addmm, N-d matmul) equals the global op", function()
      local rng = H.prng(5)
      for case = 1, 15 do
        local m, k, nn = rng.int(1, 7), rng.int(1, 7), rng.int(1, 7)
        local A, B = randn(rng, {m, k}), randn(rng, {k, nn})
        local a, b = dist(A, mesh, placements(rng, mesh, 2, true)), dist(B, mesh, placements(rng, mesh, 2, true))
        local what = name .. " mm case " .. case .. " " .. H.placement_string(a.placements) .. " x " ..
                         H.placement_string(b.placements)
        close(a:mm(b), A:mm(B), what)
        close(a:matmul(b), A:matmul(B), what)
        local C = randn(rng, {nn})
        local c = dist(C, mesh, placements(rng, mesh, 1, false))
        close(dt.addmm(c, a, b, {beta = 0.5, alpha = 2}), dt.addmm(C, A, B, {beta = 0.5, alpha = 2}), what .. " addmm")
        local bt = rng.int(1, 5)
        local P, Q = randn(rng, {bt, m, k}), randn(rng, {bt, k, nn})
        local p, q = dist(P, mesh, placements(rng, mesh, 3, false)), dist(Q, mesh, placements(rng, mesh, 3, false))
        close(p:bmm(q), P:bmm(Q), what .. " bmm")
        close(p:matmul(b), P:matmul(B), what .. " matmul 3-d x 2-d")
        local v = dist(C, mesh, placements(rng, mesh, 1, false))
        close(b:matmul(v), B:matmul(C), what .. " matmul 2-d x 1-d")
      end
    end)

    it("reductions equal the global op", function()
      local rng = H.prng(9)
      for case = 1, 20 do
        local ndim = rng.int(1, 3)
        local X = randn(rng, shape_of(rng, ndim))
        local x = dist(X, mesh, placements(rng, mesh, ndim, true))
        local d, keep = rng.int(1, ndim), rng.int(1, 2) == 1
        local what = name .. " reduce case " .. case .. " " .. H.placement_string(x.placements) .. " dim " .. d
        for _, op in ipairs({"sum", "mean", "amax", "amin", "prod", "var", "std"}) do
          close(x[op](x, d, keep), X[op](X, d, keep), what .. " " .. op)
        end
        close(x:sum(), X:sum(), what .. " sum all")
        close(x:norm(2, d), X:norm(2, d), what .. " norm")
        close(x:argmax(d), X:argmax(d), what .. " argmax")
        local v, i = x:max(d, keep)
        local V, I = X:max(d, keep)
        close(v, V, what .. " max values")
        close(i, I, what .. " max indices")
        close(x:softmax(d), X:softmax(d), what .. " softmax")
      end
    end)

    it("views (dim map: sharded dims stay sharded only when their shards stay contiguous)", function()
      local rng = H.prng(17)
      for case = 1, 25 do
        local shape = {rng.int(1, 3) * rng.pick({1, 2, 4}), rng.int(1, 5), rng.pick({1, 2, 3, 4})}
        local X = randn(rng, shape)
        local x = dist(X, mesh, placements(rng, mesh, 3, true))
        local what = name .. " view case " .. case .. " " .. table.concat(shape, "x") .. " " .. H.placement_string(x.placements)
        close(x:view(-1), X:view(-1), what .. " view(-1)")
        close(x:reshape(shape[1], shape[2] * shape[3]), X:reshape(shape[1], shape[2] * shape[3]), what .. " reshape merge")
        close(x:flatten(1, 2), X:flatten(1, 2), what .. " flatten(1, 2)")
        close(x:transpose(1, 3), X:transpose(1, 3), what .. " transpose")
        close(x:permute(3, 1, 2), X:permute(3, 1, 2), what .. " permute")
        close(x:unsqueeze(2), X:unsqueeze(2), what .. " unsqueeze")
        close(x:squeeze(), X:squeeze(), what .. " squeeze")
        close(x:unsqueeze(1):expand(3, -1, -1, -1), X:unsqueeze(1):expand(3, -1, -1, -1), what .. " expand")
        local flat = x:view(-1)
        close(flat:view(shape[1], shape[2], shape[3]), X, what .. " split back")
        close(x:flatten(2, 3):t(), X:flatten(2, 3):t(), what .. " t")
        close(x:view_as(flat), X:view_as(X:view(-1)), what .. " view_as")
        close(x:unsqueeze(1):expand_as(x:unsqueeze(1):expand(2, -1, -1, -1)), X:unsqueeze(1):expand(2, -1, -1, -1), what .. " expand_as")
        local d = rng.int(1, 3)
        close(x:narrow(d, 1, 1), X:narrow(d, 1, 1), what .. " narrow " .. d)
        close(x:select(d, -1), X:select(d, -1), what .. " select " .. d)
        local xs, Xs = x:chunk(2, d), X:chunk(2, d)
        assert.are.equal(#Xs, #xs, what .. " chunk count")
        for i = 1, #Xs do close(xs[i], Xs[i], what .. " chunk " .. i) end
        local ys, Ys = x:split(1, d), X:split(1, d)
        for i = 1, #Ys do close(ys[i], Ys[i], what .. " split " .. i) end
      end
    end)

    it("F.linear (matmul with a transposed weight, bias) equals the global op", function()
      local rng = H.prng(21)
      for case = 1, 8 do
        local X, W, b = randn(rng, {rng.int(1, 6), 4}), randn(rng, {rng.int(1, 6), 4}), nil
        b = randn(rng, {W:size(1)})
        local x, w = dist(X, mesh, placements(rng, mesh, 2, false)), dist(W, mesh, placements(rng, mesh, 2, false))
        local bb = dist(b, mesh, placements(rng, mesh, 1, false))
        close(dt.F.linear(x, w, bb), dt.F.linear(X, W, b), name .. " linear case " .. case)
      end
    end)

    it("layer_norm, rms_norm (normalised dims replicated) and sdpa (batch/heads sharded)", function()
      local rng = H.prng(23)
      for case = 1, 8 do
        local shape = {rng.int(1, 5), rng.int(1, 4), rng.int(2, 5)}
        local X = randn(rng, shape)
        local W, Bb = randn(rng, {shape[3]}), randn(rng, {shape[3]})
        local x = dist(X, mesh, placements(rng, mesh, 3, true))
        local w, b = dist(W, mesh, placements(rng, mesh, 1, false)), dist(Bb, mesh, placements(rng, mesh, 1, false))
        local what = name .. " nn case " .. case .. " " .. H.placement_string(x.placements)
        close(dt.F.layer_norm(x, shape[3], w, b), dt.F.layer_norm(X, shape[3], W, Bb), what .. " layer_norm")
        close(dt.F.layer_norm(x, {shape[2], shape[3]}), dt.F.layer_norm(X, {shape[2], shape[3]}), what .. " layer_norm 2 dims")
        close(dt.F.rms_norm(x, shape[3], w), dt.F.rms_norm(X, shape[3], W), what .. " rms_norm")
        local B, Hh, L, E = rng.int(1, 4), rng.int(1, 4), rng.int(1, 4), rng.int(1, 3)
        local Q, K, V = randn(rng, {B, Hh, L, E}), randn(rng, {B, Hh, L, E}), randn(rng, {B, Hh, L, E})
        local q = dist(Q, mesh, placements(rng, mesh, 2, false)) -- batch or heads sharded (or R)
        local k, v = dist(K, mesh, q.placements), dist(V, mesh, placements(rng, mesh, 4, false))
        local causal = rng.int(1, 2) == 1
        close(dt.F.scaled_dot_product_attention(q, k, v, {is_causal = causal}),
              dt.F.scaled_dot_product_attention(Q, K, V, {is_causal = causal}), what .. " sdpa")
      end
    end)

    it("embedding: an id outside the vocab is plain embedding's error on every rank, whatever the placements", function()
      local rng = H.prng(31)
      for case = 1, 8 do
        local V = rng.int(2, 9)
        local Wt = randn(rng, {V, 3})
        local Ids = (dt.arange(6):remainder(V) + 1):reshape(2, 3)
        local bad = rng.int(1, 2) == 1 and V + rng.int(1, 3) or -rng.int(0, 2)
        Ids[{rng.int(1, 2), rng.int(1, 3)}] = bad
        local w = dist(Wt, mesh, placements(rng, mesh, 2, false))
        local ids = dist(Ids, mesh, placements(rng, mesh, 2, false))
        local want = string.format("embedding: id %d out of range for vocab size %d (ids are 1-based: 1..%d)", bad, V, V)
        fails(want, dt.F.embedding, Ids, Wt)
        fails(want, dt.F.embedding, ids, w)
      end
      local w = dist(randn(rng, {4, 2}), mesh, placements(rng, mesh, 2, false))
      fails("embedding: ids must be an integer tensor, got float32", dt.F.embedding,
            dist(dt.ones(2, 2), mesh, placements(rng, mesh, 2, false)), w)
    end)

    it("embedding: row-wise (vocab) sharded weight -> Partial(sum), column-wise -> Shard(last)", function()
      local rng = H.prng(29)
      for case = 1, 8 do
        local V, D = rng.int(1, 9), rng.int(1, 5)
        local Wt = randn(rng, {V, D})
        local Ids = (dt.arange(6):remainder(V) + 1):reshape(2, 3)
        local w = dist(Wt, mesh, placements(rng, mesh, 2, false))
        local ids = dist(Ids, mesh, placements(rng, mesh, 2, false))
        local y = dt.F.embedding(ids, w)
        close(y, dt.F.embedding(Ids, Wt), name .. " embedding case " .. case .. " " .. H.placement_string(w.placements))
        for m = 1, mesh.ndim do
          local p = w.placements[m]
          if p:is_shard() and p.dim == 1 then assert.are.equal("Partial(sum)", tostring(y.placements[m])) end
          if p:is_shard() and p.dim == 2 then assert.are.equal("Shard(3)", tostring(y.placements[m])) end
        end
      end
    end)

    it("cross_entropy: class-sharded logits (loss parallel) and batch-sharded ones", function()
      local rng = H.prng(31)
      for case = 1, 8 do
        local N, C = rng.int(1, 5), rng.int(1, 7)
        local Lg = randn(rng, {N, C})
        local T = (dt.arange(N):remainder(C) + 1)
        if N > 1 then T[1] = -100 end -- an ignored target
        local lg = dist(Lg, mesh, placements(rng, mesh, 2, false))
        local t = dist(T, mesh, placements(rng, mesh, 1, false))
        local what = name .. " ce case " .. case .. " " .. H.placement_string(lg.placements)
        for _, red in ipairs {"none", "sum", "mean"} do
          close(dt.F.cross_entropy(lg, t, {reduction = red}), dt.F.cross_entropy(Lg, T, {reduction = red}), what .. " " .. red)
        end
      end
    end)

    it("cat and stack (the joined dim replicated, others keep the first input's sharding)", function()
      local rng = H.prng(37)
      for case = 1, 8 do
        local shape = {rng.int(1, 5), rng.int(1, 4)}
        local X, Y = randn(rng, shape), randn(rng, shape)
        local x, y = dist(X, mesh, placements(rng, mesh, 2, true)), dist(Y, mesh, placements(rng, mesh, 2, true))
        local what = name .. " join case " .. case .. " " .. H.placement_string(x.placements)
        for _, d in ipairs {1, 2, -1} do
          close(dt.cat({x, y}, d), dt.cat({X, Y}, d), what .. " cat " .. d)
          close(dt.stack({x, y}, d), dt.stack({X, Y}, d), what .. " stack " .. d)
        end
      end
    end)

    it("cat and stack of 6 DTensors with mixed placements and sizes equal the global op", function()
      local rng = H.prng(41)
      for case = 1, 6 do
        local shape = {rng.int(1, 4), rng.int(1, 4), rng.int(1, 3)}
        local Xs, xs, Cs, cs = {}, {}, {}, {}
        for i = 1, 6 do
          Xs[i] = randn(rng, shape)
          xs[i] = dist(Xs[i], mesh, placements(rng, mesh, 3, true))
          local cshape = {rng.int(1, 4), shape[2], shape[3]} -- cat along dim 1: sizes differ there
          Cs[i] = randn(rng, cshape)
          cs[i] = dist(Cs[i], mesh, placements(rng, mesh, 3, true))
        end
        local what = name .. " join6 case " .. case
        close(dt.cat(cs, 1), dt.cat(Cs, 1), what .. " cat 1 (sizes differ)")
        for _, d in ipairs {1, 2, 3, -1} do
          close(dt.cat(xs, d), dt.cat(Xs, d), what .. " cat " .. d)
          close(dt.stack(xs, d), dt.stack(Xs, d), what .. " stack " .. d)
        end
        close(dt.stack(xs, 4), dt.stack(Xs, 4), what .. " stack 4")
      end
    end)

    it("cat/stack of many: agreeing shardings and Partials pass without a collective; 1-d empty inputs are skipped", function()
      local X = dt.arange(6 * 4):to("float64"):reshape(6, 4)
      local Xs, xs, ps = {}, {}, {}
      for m = 1, mesh.ndim do ps[m] = m == 1 and dt.Shard(2) or dt.Replicate() end
      for i = 1, 7 do
        Xs[i] = X + i
        xs[i] = dist(Xs[i], mesh, ps)
      end
      local y
      local c = dt.comm_debug(function() y = dt.cat(xs, 1) end)
      assert.are.equal(0, #c.ops, name .. ": cat along an unsharded dim moves nothing")
      assert.are.equal("Shard(2)", tostring(y.placements[1]))
      close(y, dt.cat(Xs, 1), name .. " cat of 7")
      c = dt.comm_debug(function() y = dt.stack(xs, 2) end)
      assert.are.equal(0, #c.ops, name .. ": stack before the sharded dim moves nothing")
      assert.are.equal("Shard(3)", tostring(y.placements[1]))
      close(y, dt.stack(Xs, 2), name .. " stack of 7")
      -- Partial(sum) parts from_local, mixed signs: cat of sums is the sum of cats
      local coord = mesh:get_coordinate()
      local parts, Ps = {}, {}
      for m = 1, mesh.ndim do parts[m] = m == 1 and dt.Partial("sum") or dt.Replicate() end
      local k = mesh:shape()[1]
      for i = 1, 5 do
        local Y = -(X * i):remainder(5)
        Ps[i] = X * i
        local mine = coord and (coord[1] == 0 and Ps[i] - Y * (k - 1) or Y) or dt.empty(0, {dtype = "float64"})
        xs[i] = dt.from_local(mine, mesh, parts, {shape = {6, 4}})
      end
      local five = {xs[1], xs[2], xs[3], xs[4], xs[5]}
      c = dt.comm_debug(function() y = dt.cat(five, 2) end)
      assert.are.equal(0, #c.ops, name .. ": a Partial(sum) every input has passes through")
      if k > 1 then assert.are.equal("Partial(sum)", tostring(y.placements[1])) end
      close(y, dt.cat(Ps, 2), name .. " cat of Partial(sum)")
      -- a 1-d empty input is skipped by cat, whatever the others' shapes
      local E = dt.zeros(0, {dtype = "float64"})
      local ep = {}
      for m = 1, mesh.ndim do ep[m] = m == 1 and dt.Shard(1) or dt.Replicate() end
      local e = dist(E, mesh, ep)
      close(dt.cat({e, xs[6], e, xs[7]}, 2), dt.cat({E, Xs[6], E, Xs[7]}, 2), name .. " cat with empty inputs")
    end)

    it("cat/stack of many: the plain op's errors on every rank, before any collective; the cache key", function()
      local X = dt.arange(12):to("float32"):reshape(3, 4)
      local xs, Xs = {}, {}
      for i = 1, 6 do
        Xs[i] = i == 5 and X:narrow(2, 1, 3):contiguous() or X
        xs[i] = dist(Xs[i], mesh, i % 2 == 0 and {dt.Shard(2), table.unpack(placements(H.prng(i), mesh, 2), 2)}
                                                or placements(H.prng(i), mesh, 2))
      end
      local c = dt.comm_debug(function()
        local _, want = pcall(dt.stack, Xs)
        fails(tostring(want), dt.stack, xs)
        assert.matches("stack: tensor 5 has shape {3,3} but tensor 1 has shape {3,4}", want, 1, true)
        _, want = pcall(dt.cat, Xs, 1)
        fails(tostring(want), dt.cat, xs, 1)
      end)
      assert.are.equal(0, #c.ops, name .. ": the errors come before any collective")
      fails("cat: element 6 of the list is a plain tensor of 12 elements mixed with DTensors", dt.cat, {xs[1], xs[2], xs[3], xs[4], xs[6], X})
      -- the same call twice is a hit; another dim or another order of inputs a miss (a mesh of
      -- the same shape may have decided these before: the mesh enters the key by shape)
      dt.dispatch_cache_clear()
      local ys = {xs[1], xs[2], xs[3], xs[4], xs[6], xs[1]}
      dt.cat(ys, 1)
      local s1 = dt.dispatch_stats()
      dt.cat(ys, 1)
      local s2 = dt.dispatch_stats()
      assert.are.same({s1.hits + 1, s1.misses}, {s2.hits, s2.misses})
      dt.cat(ys, 2)
      ys[1], ys[2] = ys[2], ys[1]
      dt.cat(ys, 1)
      local s3 = dt.dispatch_stats()
      assert.are.equal(s2.misses + (H.placement_string(xs[1].placements) == H.placement_string(xs[2].placements) and 1 or 2),
                       s3.misses, name)
    end)

    it("in-place ops keep the placements", function()
      local X = randn(H.prng(2), {5, 3})
      local x = dist(X:clone(), mesh, placements(H.prng(4), mesh, 2, false)) -- 1 rank: no copy
      local before = H.placement_string(x.placements)
      x:add_(x):mul_(2)
      assert.are.equal(before, H.placement_string(x.placements))
      close(x, X * 4)
      x:zero_()
      close(x, X * 0)
      x:fill_(3)
      close(x, X * 0 + 3)
    end)
  end)
end

describe("dispatch", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local X = dt.arange(4 * n + 2):to("float32"):reshape(2 * n + 1, 2)

  it("S(1) x R matmul issues no collective, S(k) x S(k) leaves Partial(sum)", function()
    local W = dt.arange(6):to("float32"):reshape(2, 3)
    local x, w = dt.distribute_tensor(X, mesh, {"S1"}), dt.distribute_tensor(W, mesh, {"R"})
    local y
    local c = dt.comm_debug(function() y = x:matmul(w) end)
    assert.are.equal(0, #c.ops)
    assert.are.equal("Shard(1)", tostring(y.placements[1]))
    local xt, wt = dt.distribute_tensor(W:t(), mesh, {"S2"}), dt.distribute_tensor(W, mesh, {"S1"})
    c = dt.comm_debug(function() y = xt:matmul(wt) end)
    assert.are.equal(0, #c.ops)
    if n > 1 then assert.are.equal("Partial(sum)", tostring(y.placements[1])) end
    assert(dt.allclose(y:full_tensor(), W:t():matmul(W)))
  end)

  it("a view keeps even shards sharded without communication and gathers uneven ones first", function()
    local E = dt.arange(4 * n * 3):to("float32"):reshape(4 * n, 3)
    local e = dt.distribute_tensor(E, mesh, {"S1"})
    local y
    local c = dt.comm_debug(function() y = e:view(-1) end)
    assert.are.equal(0, #c.ops)
    assert.are.equal("Shard(1)", tostring(y.placements[1]))
    assert(dt.equal(y:full_tensor(), E:view(-1)))
    local U = dt.arange((4 * n + 1) * 3):to("float32"):reshape(4 * n + 1, 3)
    local u = dt.distribute_tensor(U, mesh, {"S1"})
    c = dt.comm_debug(function() y = u:view(-1) end)
    if n > 1 then
      assert.are.equal(1, c.all_gather)
      assert.are.equal("Replicate()", tostring(y.placements[1]))
    end
    assert(dt.equal(y:full_tensor(), U:view(-1)))
  end)

  it("*_like factories keep the mesh and placements (Partial -> Replicate)", function()
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    for _, f in ipairs {"zeros_like", "ones_like", "empty_like", "rand_like", "randn_like"} do
      local y = dt[f](x)
      assert.are.equal("Shard(1)", tostring(y.placements[1]), f)
      assert.are.same(x:size(), y:size(), f)
    end
    local z = dt.full_like(dt.distribute_tensor(X, mesh, {"P"}), 7, {dtype = "float64"})
    assert.are.equal("Replicate()", tostring(z.placements[1]))
    assert.are.equal("float64", z.dtype)
    assert(dt.equal(z:full_tensor(), dt.full(X:size(), 7, {dtype = "float64"})))
    assert(dt.equal(dt.ones_like(x):full_tensor(), dt.ones_like(X)))
  end)

  it("loss parallel: cross_entropy over class-sharded logits gathers no logits", function()
    local Lg = dt.arange(6 * n * 3):to("float64"):reshape(3, 6 * n):sin()
    local T = dt.tensor({1, 2, 6 * n}, {dtype = "int64"})
    local lg, t = dt.distribute_tensor(Lg, mesh, {"S2"}), dt.distribute_tensor(T, mesh, {"R"})
    local loss
    local c = dt.comm_debug(function() loss = dt.F.cross_entropy(lg, t, {reduction = "none"}) end)
    assert.are.equal(0, c.all_gather or 0)
    if n > 1 then assert.are.equal(3, c.all_reduce) end
    assert(dt.allclose(loss:full_tensor(), dt.F.cross_entropy(Lg, T, {reduction = "none"})))
  end)

  it("caches decisions: the second identical call is a hit", function()
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    local s0 = dt.dispatch_stats()
    local _ = x + x
    local s1 = dt.dispatch_stats()
    _ = x + x
    local s2 = dt.dispatch_stats()
    assert.are.equal(s1.misses, s2.misses)
    assert.are.equal(s1.hits + 1, s2.hits)
    assert(s1.hits + s1.misses == s0.hits + s0.misses + 1)
  end)

  it("caches the decisions of the ops composed in Lua: a second identical call is all hits", function()
    local W = dt.arange(6 * n * 3):to("float32"):reshape(6 * n, 3)
    local w = dt.distribute_tensor(W, mesh, {"S1"})
    local ids = dt.distribute_tensor(dt.tensor({{1, 2}, {3, 6 * n}}, {dtype = "int64"}), mesh, {"R"})
    local lg = dt.distribute_tensor(W:t():contiguous(), mesh, {"S2"})
    local tg = dt.distribute_tensor(dt.tensor({1, 2, 3}, {dtype = "int64"}), mesh, {"R"})
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    local twice = dt.register_op {name = "twice_cache_spec", forward = function(a) return a * 2 end,
                                  sharding = function(schema) return {{inputs = {schema.inputs[1].placements},
                                                                        output = schema.inputs[1].placements}} end}
    local calls = {
      embedding = function() return dt.F.embedding(ids, w) end,
      cross_entropy = function() return dt.F.cross_entropy(lg, tg) end,
      cat = function() return dt.cat({x, x}, 2) end,
      stack = function() return dt.stack({x, x}) end,
      zeros_like = function() return dt.zeros_like(x) end,
      full_like = function() return dt.full_like(x, 3) end,
      register_op = function() return twice(x) end,
    }
    local names = {} -- one order on every rank (pairs' order differs between ranks)
    for what in pairs(calls) do names[#names + 1] = what end
    table.sort(names)
    for _, what in ipairs(names) do
      local call = calls[what]
      call()
      local s1 = dt.dispatch_stats()
      call()
      local s2 = dt.dispatch_stats()
      assert.are.equal(s1.misses, s2.misses, what .. ": no miss the second time")
      assert(s2.hits > s1.hits, what .. ": counted as a hit")
    end
    -- a different static arg or placement is a new decision
    local s1 = dt.dispatch_stats()
    dt.cat({x, x}, 1)
    assert(dt.dispatch_stats().misses > s1.misses, "cat along another dim: a miss")
    -- a new rule for a Lua op forgets its decisions, and the new one is used
    dt.register_sharding("twice_cache_spec", function(schema)
      local r = {}
      for m = 1, schema.mesh_ndim do r[m] = "R" end
      return {{inputs = {r}, output = r}}
    end)
    s1 = dt.dispatch_stats()
    local y = twice(x)
    assert.are.equal(s1.misses + 1, dt.dispatch_stats().misses)
    assert.are.equal("Replicate()", tostring(y.placements[1]))
    assert(dt.equal(y:full_tensor(), X * 2))
  end)

  it("plain tensors: one element is replicated, others need implicit_replication", function()
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    close((x + dt.tensor(2.0)), X + 2)
    fails("convert it with dt.from_local or dt.distribute_tensor", function() return x + X end)
    local y = dt.implicit_replication(function() return x + X end)
    close(y, X + X)
    do
      local _ <close> = dt.implicit_replication()
      close((x * X), X * X)
    end
    fails("convert it with", function() return x * X end)
  end)

  it("errors: ops without a rule, different meshes, in-place changing placements", function()
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    fails("a DTensor: this op has no sharding rule for DTensor arguments yet; use x:to_local() or x:full_tensor()",
          function() return x:totable() end)
    local m2 = dt.init_device_mesh("cpu", {1, n})
    local z = dt.distribute_tensor(X, m2, {"R", "R"})
    fails("add: DTensor operands on different meshes", function() return x + z end)
    if n > 1 then
      local p = dt.distribute_tensor(X, mesh, {"P"})
      fails("mul_: an in-place op keeps its input's placements", function() p:mul_(p) end)
    end
  end)

  if n >= 3 then
    it("ranks outside the mesh get empty locals with the global metadata", function()
      local ranks = {}
      for r = 1, n - 1 do ranks[#ranks + 1] = r end
      local sub = dt.DeviceMesh("cpu", ranks)
      local x = dt.distribute_tensor(X, sub, {"S1"}, {src_rank = false})
      local y = (x + 1):sum(1)
      assert.are.same({2}, y:size())
      if rank == 0 then assert.are.equal(0, y:to_local():numel()) end
    end)
  end
end)

describe("dispatch: scalar answers, explain, Lua rules and ops", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local A = dt.arange(12):to("float32"):reshape(4, 3)
  local B = dt.arange(6):to("float32"):reshape(3, 2)

  it("x:item() of a reduction and x:equal(y) agree on every rank of the world", function()
    local meshes = {mesh}
    if n >= 3 then
      local ranks = {}
      for r = 1, n - 1 do ranks[#ranks + 1] = r end
      meshes[2] = dt.DeviceMesh("cpu", ranks) -- rank 0 outside
    end
    for _, m in ipairs(meshes) do
      local a = dt.distribute_tensor(A, m, {"S1"}, {src_rank = false})
      assert.are.equal(66.0, a:sum():item())
      assert.are.equal(12, a:argmax():item()) -- 1-based
      assert.is_true(a:equal(a * 1))
      assert.is_false(dt.equal(a, a + (rank == 1 and 1 or 0) * 0 + 1))
      assert.is_false(a:equal(a:sum(1)))
    end
    fails("item: a DTensor of 12 elements", function() return dt.distribute_tensor(A, mesh, {"R"}):item() end)
  end)

  it("dt.explain lists the strategies, their costs and the choice", function()
    local a, b = dt.distribute_tensor(A, mesh, {"S1"}), dt.distribute_tensor(B, mesh, {"R"})
    local text = dt.explain("matmul", a, b)
    assert.matches("matmul((Shard(1)), (Replicate())): strategies", text, 1, true)
    assert.matches("(Replicate()), (Replicate()) -> (Replicate())  cost", text, 1, true)
    assert.matches("chosen: (Shard(1)), (Replicate()) -> (Shard(1))", text, 1, true)
  end)

  it("a Lua rule overrides a built-in one and changes the collectives; errors name the op", function()
    local a, b = dt.distribute_tensor(A, mesh, {"S1"}), dt.distribute_tensor(B, mesh, {"R"})
    local c = dt.comm_debug(function() a:matmul(b) end)
    assert.are.equal(0, #c.ops)
    dt.register_sharding("matmul", function(schema)
      assert.are.equal("matmul", schema.op)
      assert.are.same({4, 3}, schema.inputs[1].shape)
      return {{inputs = {{"R"}, {dt.Replicate()}}, output = {"R"}}}
    end)
    local y
    c = dt.comm_debug(function() y = a:matmul(b) end)
    assert.are.equal(n > 1 and 1 or 0, c.all_gather or 0)
    assert.are.equal("Replicate()", tostring(y.placements[1]))
    assert(dt.equal(y:full_tensor(), A:matmul(B)))
    dt.register_sharding("matmul", function() return {{inputs = {{"S3"}, {"R"}}, output = {"R"}}} end)
    fails("matmul: the sharding rule from Lua returned strategy 1, input 1: Shard(3) on mesh dim 1 is out of range",
          function() return a:matmul(b) end)
    dt.register_sharding("matmul", function() return {{inputs = {{"R"}}, output = {"R"}}} end)
    fails("matmul: the sharding rule from Lua returned strategy 1 with 1 input placement lists for 2 tensor operands",
          function() return a:matmul(b) end)
    dt.register_sharding("matmul", function() error("my rule broke") end)
    local ok, err = pcall(function() return a:matmul(b) end)
    assert.is_false(ok)
    assert.matches("matmul: the sharding rule registered from Lua raised an error: .*my rule broke.*stack traceback", err)
    dt.register_sharding("matmul", nil)
    c = dt.comm_debug(function() a:matmul(b) end)
    assert.are.equal(0, #c.ops)
    fails("register_sharding: unknown op 'nope'", dt.register_sharding, "nope", function() end)
  end)

  it("a Lua op with its own rule, as dt.ops.<name>", function()
    local scale = dt.register_op {
      name = "scale2_spec",
      forward = function(x, k) return x * k end,
      sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
    }
    assert.are.equal(scale, dt.ops.scale2_spec)
    local a = dt.distribute_tensor(A, mesh, {"S1"})
    local y = scale(a, 3)
    assert.are.equal("Shard(1)", tostring(y.placements[1]))
    assert(dt.equal(y:full_tensor(), A * 3))
    assert(dt.equal(scale(A, 2), A * 2)) -- plain tensors: forward directly
    assert.matches("scale2_spec: strategies", dt.explain("scale2_spec", a, 3), 1, true)
    local bad = dt.register_op {name = "bad_spec", forward = function(x) return x end, sharding = function() error("oops") end}
    fails("bad_spec: the sharding rule registered from Lua raised an error", bad, a)
  end)
end)

describe("dispatch: errors of the Lua-composed ops", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  it("name the op and both meshes or the plain operand", function()
    local W = dt.arange(12):to("float32"):reshape(4, 3)
    local w = dt.distribute_tensor(W, mesh, {"S1"})
    local ids = dt.tensor({1, 2}, {dtype = "int64"})
    fails("embedding: argument 1 is a plain tensor of 2 elements mixed with DTensors; convert it with dt.from_local or dt.distribute_tensor (or run inside dt.implicit_replication)",
          dt.F.embedding, ids, w)
    local other = dt.init_device_mesh("cpu", {1, n})
    local ids2 = dt.distribute_tensor(ids, other, {"R", "R"})
    fails("embedding: DTensor operands on different meshes: DeviceMesh", dt.F.embedding, ids2, w)
    fails("cross_entropy: argument 2 is a plain tensor of 2 elements mixed with DTensors", dt.F.cross_entropy, w, ids)
    fails("cat: element 2 of the list is a plain tensor of 12 elements mixed with DTensors", dt.cat, {w, W})
  end)
end)

-- Every pointwise op and reduction over random float dtypes and 0-size dims, matmul shapes and
-- dtypes, in-place ops, errors on the global shapes, cross_entropy, norms, sdpa, Lua ops that
-- change the shape, on every mesh: each against the op on the global plain tensors.
do
  local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
  local rank, n = dt.rank(), dt.world_size()
  local fails, dist = H.fails, H.dist
  local close, values, plain_error, FLOATS = H.close, H.values, H.plain_error, H.FLOATS

  for _, entry in ipairs(H.meshes()) do
    local name, mesh = entry[1], entry[2]
    describe("dispatcher on mesh " .. name .. ": dtypes, 0-size dims, in-place ops, errors, Lua ops", function()
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
          name = "luaop_rowsum", forward = function(x) return x:sum(2, true) end,
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
          name = "luaop_take", forward = function(x, k) return x:narrow(2, 1, k) end,
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
          name = "luaop_twice", forward = function(x) return x * 2 end,
          sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
        }
        local X = values({5, 3})
        close(twice(dist(X, mesh, H.placements(rng, mesh, 2, false))), X * 2, name .. " shape-preserving Lua op")
      end)
    end)
  end
end

-- Partial(sum) inputs built with dt.from_local from non-zero, mixed-sign parts on every rank
-- of the mesh (distribute_tensor's Partial holds the value on one rank and zeros elsewhere,
-- which hides an op wrongly applied to each part: relu(-y) + relu(x + y) == relu(x) when y = 0).
-- Values are multiples of 1/4, so every sum is exact in float64 and the order does not matter.
do
  -- The parts of X: coordinate 0 holds X + (k - 1) * Y, every other coordinate -Y (k ranks).
  local function partial_from_parts(X, Y, mesh)
    local k, c = 1, 0
    local coord = mesh:get_coordinate()
    local shape = mesh:shape()
    for m = 1, mesh.ndim do
      k = k * shape[m]
      if coord then c = c * shape[m] + coord[m] end
    end
    local part = c == 0 and X + Y * (k - 1) or -Y
    local p = {}
    for m = 1, mesh.ndim do p[m] = dt.Partial("sum") end
    return dt.from_local(part, mesh, p), k
  end
  local function quarters(shape, seed)
    local numel = 1
    for _, v in ipairs(shape) do numel = numel * v end
    return ((dt.arange(numel) * (7 + seed)):remainder(23) - 11):to("float64"):reshape(shape) / 4
  end
  local function meshes()
    local list = {{"1-d of " .. n, dt.init_device_mesh("cpu", {n})}}
    if n == 4 then list[2] = {"2x2", dt.init_device_mesh("cpu", {2, 2})} end
    return list
  end
  local function sorted_keys(t)
    local k = {}
    for key in pairs(t) do k[#k + 1] = key end
    table.sort(k)
    return k
  end
  local function all_partial(d)
    for _, p in ipairs(d.placements) do if not p:is_partial() then return false end end
    return true
  end

  for _, entry in ipairs(meshes()) do
    local name, mesh = entry[1], entry[2]
    describe("dispatch on mesh " .. name .. ": Partial(sum) inputs from mixed-sign parts", function()
      local X, Y = quarters({3, 5}, 0), quarters({3, 5}, 4)
      local x, k = partial_from_parts(X, Y, mesh)

      it("the parts are non-zero and of both signs on every rank, and sum to X", function()
        local l = x:to_local()
        if k > 1 then
          assert.is_true(l:gt(0):sum():item() > 0 and l:lt(0):sum():item() > 0)
        end
        assert.is_true(dt.equal(x:full_tensor(), X))
      end)

      it("pointwise ops that are not linear give the op of the sum", function()
        local ops = {
          relu = function(t) return t:relu() end, abs = function(t) return t:abs() end,
          exp = function(t) return t:exp() end, sigmoid = function(t) return t:sigmoid() end,
          tanh = function(t) return t:tanh() end, gelu = function(t) return t:gelu() end,
          silu = function(t) return t:silu() end, sin = function(t) return t:sin() end,
          cos = function(t) return t:cos() end, clamp = function(t) return t:clamp(-1, 1) end,
          square = function(t) return t * t end, pow = function(t) return t:pow(2) end,
          add_scalar = function(t) return t + 1 end, gt = function(t) return t:gt(0) end,
          sqrt_abs = function(t) return t:abs():sqrt() end, amax = function(t) return t:amax(2) end,
          max = function(t) return (t:max(1)) end, softmax = function(t) return t:softmax(2) end,
          norm = function(t) return t:norm() end, var = function(t) return t:var(1) end,
        }
        for _, opname in ipairs(sorted_keys(ops)) do close(ops[opname](x), ops[opname](X), name .. " " .. opname) end
      end)

      it("linear ops keep Partial(sum) and give the op of the sum", function()
        local ops = {
          neg = function(t) return -t end, mul_scalar = function(t) return t * 3 end,
          div_scalar = function(t) return t / 2 end, add_partial = function(t) return t + t end,
          sub_partial = function(t) return t * 3 - t end, sum = function(t) return t:sum(2) end,
          sum_all = function(t) return t:sum() end, transpose = function(t) return t:t() end,
          view = function(t) return t:view(15) end, clone = function(t) return t:clone() end,
        }
        for _, opname in ipairs(sorted_keys(ops)) do -- the same order on every rank: full_tensor is a collective
          local f = ops[opname]
          local y = f(x)
          assert.is_true(all_partial(y), name .. " " .. opname .. " keeps Partial(sum), got " .. H.placement_string(y.placements))
          close(y, f(X), name .. " " .. opname)
        end
      end)
    end)
  end
end

-- The decision cache is keyed by the static arguments and the operand order: the same op
-- called twice on the same DTensor, differing only in one of them, gives each its own result.
for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("dispatch on mesh " .. name .. ": the decision cache tells calls apart", function()
    local X = (dt.arange(4 * 6):to("float64"):reshape(4, 6) * 0.7):sin() * 3 + 0.5
    local pls = {}
    for m = 1, mesh.ndim do pls[m] = dt.Replicate() end
    local families = {{"R", pls}}
    for d = 1, 2 do
      local s = {}
      for m = 1, mesh.ndim do s[m] = m == 1 and dt.Shard(d) or dt.Replicate() end
      families[#families + 1] = {"S" .. d, s}
    end
    local pp = {}
    for m = 1, mesh.ndim do pp[m] = m == 1 and dt.Partial("sum") or dt.Replicate() end
    families[#families + 1] = {"P", pp}

    -- pairs of calls that differ in a static argument or in operand order only
    local pairs_ = {
      {"sum keepdim / not", function(t) return t:sum(2, true) end, function(t) return t:sum(2) end},
      {"sum dim 1 / dim 2", function(t) return t:sum(1) end, function(t) return t:sum(2) end},
      {"mean keepdim / not", function(t) return t:mean(1, true) end, function(t) return t:mean(1) end},
      {"x / 2, 2 / x", function(t) return t / 2 end, function(t) return 2 / t end},
      {"x - 2, 2 - x", function(t) return t - 2 end, function(t) return 2 - t end},
      {"x % 2, 2 % x", function(t) return t % 2 end, function(t) return 2 % t end},
      {"x ^ 2, 2 ^ x", function(t) return t ^ 2 end, function(t) return 2 ^ t end},
      {"x < 1, 1 < x", function(t) return t:lt(1) end, function(t) return t:gt(1) end},
      {"x / 2, x / 3", function(t) return t / 2 end, function(t) return t / 3 end},
      {"clamp min / max", function(t) return t:clamp(0) end, function(t) return t:clamp(nil, 0) end},
      {"clamp (-1, 1) / (0, 2)", function(t) return t:clamp(-1, 1) end, function(t) return t:clamp(0, 2) end},
      {"add alpha 1 / 2", function(t) return t:add(t) end, function(t) return t:add(t, 2) end},
      {"var correction 1 / 0", function(t) return t:var(2) end, function(t) return t:var(2, {correction = 0}) end},
      {"norm p 2 / 1", function(t) return t:norm(2, 2) end, function(t) return t:norm(1, 2) end},
      {"max dim 1 / 2", function(t) return (t:max(1)) end, function(t) return (t:max(2)) end},
      {"argmax keepdim / not", function(t) return t:argmax(2, true) end, function(t) return t:argmax(2) end},
      {"softmax dim 1 / 2", function(t) return t:softmax(1) end, function(t) return t:softmax(2) end},
      {"transpose / permute back", function(t) return t:transpose(1, 2) end, function(t) return t:permute(1, 2) end},
      {"narrow 1 / 2", function(t) return t:narrow(2, 1, 2) end, function(t) return t:narrow(2, 3, 2) end},
      {"gelu erf / tanh", function(t) return t:gelu() end, function(t) return dt.F.gelu(t, {approximate = "tanh"}) end},
    }

    it("static arguments and operand order are part of the key: each call against one device", function()
      for _, fam in ipairs(families) do
        local x = dist(X, mesh, fam[2])
        for _, pc in ipairs(pairs_) do
          local what = name .. " " .. fam[1] .. " " .. pc[1]
          close(pc[2](x), pc[2](X), what .. " (first call)")
          close(pc[3](x), pc[3](X), what .. " (second call)")
          close(pc[2](x), pc[2](X), what .. " (first call again)")
        end
      end
    end)
  end)
end
