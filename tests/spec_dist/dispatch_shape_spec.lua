-- The shape and index ops on DTensors (sharding_rules/shape_ops.c, lua/dtensor/shape_ops.lua):
-- random shapes (even, uneven, zero-size), random placements, every mesh of this world (off-mesh
-- ranks included), against the same op on the global tensor -- bitwise for these data
-- movements; the shards they keep (no communication); topk over a sharded dim with ties; the
-- compositions; errors on every rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local dist = H.dist

-- d a DTensor equal to the plain want, bit for bit (NaN where want has NaN)
local function same(d, want, what)
  assert(dt.is_dtensor(d), what .. ": not a DTensor")
  assert.are.same(want:size(), d:size(), what .. ": shape")
  assert.are.equal(want.dtype, d.dtype, what .. ": dtype")
  local full = d:full_tensor()
  if not d.device_mesh:get_coordinate() then return end
  if want.dtype:match("float") then
    local gn, wn = full:ne(full), want:ne(want)
    assert(dt.equal(gn, wn), what .. ": NaN at other places")
    full, want = dt.where(gn, 0, full), dt.where(wn, 0, want)
  end
  assert(H.same(full, want), what .. ": values differ")
end

-- a global tensor with many ties: values 0..3 (as dtype), some NaN for floats when nan
local function ties(rng, shape, dtype, nan)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = rng.int(0, 3) end
  if nan then for i = 1, n do if rng.int(1, 8) == 1 then v[i] = 0 / 0 end end end
  return dt.tensor(n > 0 and v or {}, {dtype = "float64"}):reshape(shape):to(dtype)
end

local function shard_dim_on(rng, mesh, ndim, d)
  local p = H.placements(rng, mesh, ndim, true)
  p[rng.int(1, mesh.ndim)] = dt.Shard(d)
  return p
end

local function comm_free(f, what)
  local r
  local c = dt.comm_debug(function() r = table.pack(f()) end)
  assert.are.equal(0, #c.ops, what .. ": expected no communication")
  return table.unpack(r, 1, r.n)
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  local on_mesh = mesh:get_coordinate() ~= nil
  describe("shape and index ops on DTensors, mesh " .. name, function()
    it("topk over a sharded dim (per-shard candidates merged) equals one device, ties and NaN included", function()
      local rng = H.prng(301)
      for case = 1, 24 do
        local ndim = rng.int(1, 3)
        local shape = H.shape_of(rng, ndim, 0, 7)
        local d = rng.int(1, ndim)
        local dtype = rng.pick {"float64", "float32", "int64", "bfloat16"}
        local G = ties(rng, shape, dtype, dtype ~= "int64" and case % 3 == 0)
        local p = shard_dim_on(rng, mesh, ndim, d)
        local k, largest = rng.int(0, shape[d]), rng.int(0, 1) == 1
        local what = string.format("case %d: topk(%d, %d, %s) of {%s} %s %s", case, k, d, tostring(largest),
                                   table.concat(shape, ","), dtype, H.placement_string(p))
        local x = p[1]:is_partial() and dtype:match("float") and dist(G, mesh, p) or
                  dist(G, mesh, (function() local q = {} for m, pl in ipairs(p) do q[m] = pl:is_partial() and dt.Replicate() or pl end return q end)())
        local v, i = x:topk(k, d, largest)
        local wv, wi = G:topk(k, d, largest)
        same(v, wv, what .. " values")
        same(i, wi, what .. " indices")
      end
    end)

    it("flip, roll, tril, gather and scatter_add keep a Partial(avg) input's Partial, without communication", function()
      local G = H.values({5, 3}, "float64")
      local S = H.values({5, 3}, "float64") * 2
      local I = dt.tensor({{1, 3, 2}, {2, 2, 1}, {3, 1, 3}, {1, 1, 2}, {2, 3, 3}}, {dtype = "int64"})
      local rep, avg = {}, {}
      for m = 1, mesh.ndim do rep[m], avg[m] = dt.Replicate(), dt.Partial("avg") end
      local x = dist(G, mesh, rep):redistribute(avg)
      local src = dist(S, mesh, rep):redistribute(avg)
      local ix = dist(I, mesh, rep)
      local cases = {
        {"flip", function(t) return t:flip(1) end, G:flip(1)},
        {"roll", function(t) return t:roll(2, 1) end, G:roll(2, 1)},
        {"tril", function(t) return t:tril(-1) end, G:tril(-1)},
        {"gather", function(t) return t:gather(2, ix) end, G:gather(2, I)},
        {"scatter_add", function(t) return t:scatter_add(2, ix, src) end, G:scatter_add(2, I, S)},
      }
      for _, c in ipairs(cases) do
        local out = comm_free(function() return c[2](x) end, c[1])
        local full = out:full_tensor() -- the mean of 3 parts is within rounding, not bitwise
        if on_mesh then
          assert.are.same(avg, out.placements, c[1] .. " keeps Partial(avg)")
          assert(full:allclose(c[3], 1e-12, 1e-12), c[1] .. " of a Partial(avg): values differ")
        end
      end
    end)

    it("topk with k near the shard's size moves the shard once (candidates would send more)", function()
      local G = H.values({3, 8}, "float32")
      local p = {}
      for m = 1, mesh.ndim do p[m] = m == 1 and dt.Shard(2) or dt.Replicate() end
      local x = dist(G, mesh, p)
      local v, i
      local c = dt.comm_debug(function() v, i = x:topk(4, 2) end)
      local wv, wi = G:topk(4, 2)
      same(v, wv, "topk values")
      same(i, wi, "topk indices")
      if on_mesh and mesh:size(1) > 1 then
        assert.are.equal(1, #c.ops, "one collective")
        -- the shard moves once: gathered, or (cheaper) resharded onto the other dim
        assert(c.ops[1].name == "all_gather" or c.ops[1].name == "all_to_all", c.ops[1].name)
        assert(c.bytes <= x:to_local():numel() * 4, "at most the shard's bytes, not " .. c.bytes)
      end
    end)

    it("topk's gradient over a sharded dim equals one device's", function()
      local G = H.values({5, 7}, "float64")
      for _, d in ipairs {1, 2} do
        local p = {}
        for m = 1, mesh.ndim do p[m] = dt.Shard(d) end
        local x = dist(G, mesh, p):requires_grad_()
        local v = x:topk(3, d)
        local g = G:clone():requires_grad_()
        local w = g:topk(3, d)
        local W = H.values(w:size(), "float64");
        (w * W):sum():backward()
        local rep = {}
        for m = 1, mesh.ndim do rep[m] = dt.Replicate() end;
        (v * dist(W, mesh, rep)):sum():backward()
        same(x.grad, g.grad, "gradient over dim " .. d)
      end
    end)

    it("sort, topk, flip and roll keep the shards of the dims they leave alone, without communication", function()
      local G = H.values({6, 5, 3}, "float64")
      local p = {}
      for m = 1, mesh.ndim do p[m] = dt.Shard(1) end
      local x = dist(G, mesh, p)
      local v, i = comm_free(function() return x:sort(2, true) end, "sort")
      assert.are.same(x.placements, v.placements)
      assert.are.same(x.placements, i.placements)
      local wv, wi = G:sort(2, true)
      same(v, wv, "sort values")
      same(i, wi, "sort indices")
      v, i = comm_free(function() return x:topk(2, 3) end, "topk")
      wv, wi = G:topk(2, 3)
      same(v, wv, "topk values")
      same(i, wi, "topk indices")
      same(comm_free(function() return x:flip({2, 3}) end, "flip"), G:flip({2, 3}), "flip")
      same(comm_free(function() return x:roll({2, -1}, {2, 3}) end, "roll"), G:roll({2, -1}, {2, 3}), "roll")
      same(comm_free(function() return x["repeat"](x, {1, 2, 3}) end, "repeat"), G["repeat"](G, {1, 2, 3}), "repeat")
    end)

    it("flip, roll, sort along a sharded dim (uneven shards) equal one device", function()
      local rng = H.prng(302)
      for case = 1, 12 do
        local ndim = rng.int(1, 3)
        local shape = H.shape_of(rng, ndim, 0, 7)
        local G = ties(rng, shape, rng.pick {"float64", "int32"})
        local d = rng.int(1, ndim)
        local x = dist(G, mesh, shard_dim_on(rng, mesh, ndim, d))
        local what = "case " .. case .. " {" .. table.concat(shape, ",") .. "} dim " .. d
        same(x:flip(d), G:flip(d), what .. " flip")
        same(x:roll(case - 6, d), G:roll(case - 6, d), what .. " roll")
        same(x:roll(case), G:roll(case), what .. " flattened roll")
        local v, i = x:sort(d, case % 2 == 0)
        local wv, wi = G:sort(d, case % 2 == 0)
        same(v, wv, what .. " sort values")
        same(i, wi, what .. " sort indices")
      end
    end)

    it("tril and triu on a matrix sharded on both dims compute on each block at its offsets", function()
      local rng = H.prng(303)
      for case = 1, 8 do
        local shape = {rng.int(1, 3), rng.int(0, 7), rng.int(0, 7)}
        local G = H.values(shape, "float32")
        local p = {}
        for m = 1, mesh.ndim do p[m] = dt.Shard(rng.int(2, 3)) end
        local x = dist(G, mesh, p)
        for _, k in ipairs {-2, 0, 1, 3} do
          local lo = comm_free(function() return x:tril(k) end, "tril")
          local up = comm_free(function() return x:triu(k) end, "triu")
          assert.are.same(x.placements, lo.placements)
          same(lo, G:tril(k), "tril " .. k .. " " .. H.placement_string(p))
          same(up, G:triu(k), "triu " .. k .. " " .. H.placement_string(p))
        end
      end
    end)

    it("gather and scatter with the index sharded like the input on another dim stay sharded", function()
      local G = H.values({6, 4}, "float64")
      local I = dt.tensor({{1, 4, 2, 2}, {3, 3, 1, 4}, {4, 1, 1, 2}, {2, 2, 3, 3}, {1, 1, 4, 4}, {3, 4, 1, 2}}, {dtype = "int64"})
      local p = {}
      for m = 1, mesh.ndim do p[m] = dt.Shard(1) end
      local x, ix = dist(G, mesh, p), dist(I, mesh, p)
      local g = comm_free(function() return x:gather(2, ix) end, "gather")
      assert.are.same(x.placements, g.placements)
      same(g, G:gather(2, I), "gather")
      local S = H.values({6, 4}, "float64") * 2
      local src = dist(S, mesh, p)
      same(comm_free(function() return x:scatter_add(2, ix, src) end, "scatter_add"), G:scatter_add(2, I, S), "scatter_add")
      -- the index sharded, x replicated: the output follows the index
      local rep = {}
      for m = 1, mesh.ndim do rep[m] = dt.Replicate() end
      local xr = dist(G, mesh, rep)
      local g2 = comm_free(function() return xr:gather(1, ix:redistribute(p)) end, "gather of a replicated x")
      same(g2, G:gather(1, I), "gather along the sharded dim of the index")
      -- the index sharded on a dim other than the gather dim, x replicated and longer there:
      -- a shard of the index addresses its own rows of x, so it cannot stay sharded alone
      local X3 = H.values({3, 4, 4}, "float32")
      local I3 = dt.tensor({1, 2, 3, 4, 4, 3, 2, 1}, {dtype = "int64"}):reshape(2, 4, 1)
      for m = 1, mesh.ndim do
        local pi = {}
        for k = 1, mesh.ndim do pi[k] = k == m and dt.Shard(1) or dt.Replicate() end
        same(dist(X3, mesh, rep):gather(2, dist(I3, mesh, pi)), X3:gather(2, I3),
             "gather, index Shard(1) on mesh dim " .. m .. ", x replicated")
      end
    end)

    it("the compositions equal one device: scatter with a number, scatter_, einsum, dot, movedim, tile, unbind, repeat_interleave", function()
      local rng = H.prng(304)
      local G = H.values({4, 5}, "float64")
      local c3 = H.values({3, 2, 2}, "float64")
      local x = dist(G, mesh, H.placements(rng, mesh, 2))
      local I = dt.tensor({{2}, {1}, {5}, {3}}, {dtype = "int64"})
      local ix = dist(I, mesh, H.placements(rng, mesh, 2))
      same(x:scatter(2, ix, -1.5), G:scatter(2, I, -1.5), "scatter with a number")
      local y = x:clone()
      y:scatter_(2, ix, -1.5)
      same(y, G:scatter(2, I, -1.5), "scatter_")
      local B = H.values({5, 3}, "float64")
      local b = dist(B, mesh, H.placements(rng, mesh, 2))
      H.close(dt.einsum("ij,jk->ik", x, b), G:matmul(B), "einsum matmul")
      H.close(dt.einsum("ij->j", x), G:sum(1), "einsum sum")
      H.close(dt.einsum("ij,ij->i", x, x), (G * G):sum(2), "einsum row dots")
      local Q = H.values({4, 4}, "float64")
      local q = dist(Q, mesh, H.placements(rng, mesh, 2))
      H.close(dt.einsum("ii->i", q), Q:diag(), "einsum diagonal")
      H.close(dt.einsum("bij,bjk->bik", dist(c3, mesh, H.placements(rng, mesh, 3)), dist(c3, mesh, H.placements(rng, mesh, 3))),
              c3:bmm(c3), "einsum batched")
      H.close(x[1]:dot(x[2]), G[1]:dot(G[2]), "dot")
      same(x:movedim(1, 2), G:movedim(1, 2), "movedim")
      same(x:tile({2, 1}), G:tile({2, 1}), "tile")
      same(x:repeat_interleave(2, 2), G:repeat_interleave(2, 2), "repeat_interleave")
      same(x:repeat_interleave({1, 0, 2, 1}, 1), G:repeat_interleave({1, 0, 2, 1}, 1), "repeat_interleave counts")
      local parts, want = x:unbind(2), G:unbind(2)
      assert.are.equal(#want, #parts)
      for i = 1, #want do same(parts[i], want[i], "unbind " .. i) end
    end)

    it("errors name the op and the values, on every rank", function()
      local x = dist(H.values({4, 5}, "float64"), mesh, {dt.Shard(2), table.unpack((function()
        local r = {} for m = 2, mesh.ndim do r[#r + 1] = dt.Replicate() end return r end)())})
      H.fails("topk: k 6 out of range for dim 1 of size 4", function() return x:topk(6, 1) end)
      H.fails("topk: k 7 out of range for dim 2 of size 5", function() return x:topk(7, 2) end)
      local bad = dist(dt.tensor({{9}}, {dtype = "int64"}), mesh, {dt.Replicate(), table.unpack((function()
        local r = {} for m = 2, mesh.ndim do r[#r + 1] = dt.Replicate() end return r end)())})
      if on_mesh then
        H.fails("gather: index 9 out of range for dim 2 of size 5", function() return x:gather(2, bad):full_tensor() end)
      end
      H.fails("einsum: operand 2 is not a tensor (equation 'ij,jk')", function() return dt.einsum("ij,jk", x, 3) end)
    end)
  end)
end
