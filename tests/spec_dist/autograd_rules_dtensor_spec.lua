-- The backward rules of the linear-algebra, view, indexing, join, nn and random rows on
-- DTensors: the rules are written with ops through the front door, so on DTensors they pass
-- the sharding dispatcher; each leaf's .grad must be a DTensor with the leaf's placements
-- whose full tensor is the plain tensors' gradient (float64, allclose), on every mesh of this
-- world.  (cross_entropy's DTensor form is composed in Lua through to_local/from_local: its
-- gradient is checked in autograd_dtensor_spec.lua, with the conversions.)
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

local function vals(shape, seed) return H.values(shape, "float64") + seed end

-- f on plain leaves and on DTensor leaves (placements pl[i]); compares every float leaf's grad
local function check(mesh, what, f, inputs, pl)
  local function run(leaves)
    dt.manual_seed(11)
    local out = f(table.unpack(leaves))
    return out
  end
  local plain = {}
  for i, x in ipairs(inputs) do plain[i] = x.dtype:match("float") and x:clone():requires_grad_() or x end
  local out = run(plain)
  local w = vals(out:size(), 0.25)
  ;(out * w):sum():backward()
  local dist = {}
  for i, x in ipairs(inputs) do
    dist[i] = H.dist(x, mesh, pl[i])
    if x.dtype:match("float") then dist[i]:requires_grad_() end
  end
  local dout = run(dist)
  local R = {}
  for m = 1, mesh.ndim do R[m] = dt.Replicate() end
  ;(dout * H.dist(w, mesh, R)):sum():backward()
  for i, x in ipairs(plain) do
    if x.dtype:match("float") then
      local g, dg = x.grad, dist[i].grad
      assert(dg, what .. ": input " .. i .. " has a gradient on DTensors")
      for m = 1, mesh.ndim do
        assert.are.equal(tostring(dist[i].placements[m]), tostring(dg.placements[m]), what .. ": the gradient's placements")
      end
      H.close(dg, g, what .. ": the gradient of input " .. i)
    end
  end
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  local function P(...) -- a placement list per input: each argument a dim to shard (0: replicate) on every mesh dim
    local out = {}
    for i, d in ipairs({...}) do
      out[i] = {}
      for m = 1, mesh.ndim do out[i][m] = d == 0 and dt.Replicate() or dt.Shard(d) end
    end
    return out
  end
  describe("backward rules on DTensors on mesh " .. name, function()
    it("linear algebra: matmul (1-d, batched, broadcast), bmm, addmm", function()
      check(mesh, "matmul", function(a, b) return a:matmul(b) end, {vals({4, 3, 5}, 1), vals({5, 2}, 2)}, P(1, 0))
      check(mesh, "matmul k sharded", function(a, b) return a:matmul(b) end, {vals({4, 3, 5}, 1), vals({5, 2}, 2)}, P(3, 1))
      check(mesh, "matmul 1-d", function(a, b) return a:matmul(b) end, {vals({5}, 1), vals({4, 5, 2}, 2)}, P(0, 1))
      check(mesh, "bmm", function(a, b) return a:bmm(b) end, {vals({4, 3, 5}, 1), vals({4, 5, 2}, 2)}, P(1, 1))
      check(mesh, "addmm", function(c, a, b) return dt.addmm(c, a, b, {beta = 0.5, alpha = 2}) end,
            {vals({2}, 3), vals({4, 5}, 1), vals({5, 2}, 2)}, P(0, 1, 0))
    end)

    it("views: transpose, permute, narrow, slice, select, unsqueeze, squeeze, expand", function()
      check(mesh, "transpose", function(a) return a:transpose(1, 2) end, {vals({4, 3}, 1)}, P(1))
      check(mesh, "permute", function(a) return a:permute(3, 1, 2) end, {vals({4, 3, 2}, 1)}, P(2))
      check(mesh, "narrow of a sharded dim", function(a) return a:narrow(1, 2, 2) end, {vals({5, 3}, 1)}, P(1))
      check(mesh, "narrow", function(a) return a:narrow(1, 2, 2) end, {vals({5, 3}, 1)}, P(2))
      check(mesh, "slice with a step", function(a) return a[{{1, 5, 2}, {}}] end, {vals({5, 3}, 1)}, P(1))
      check(mesh, "select", function(a) return a:select(2, 2) end, {vals({4, 3}, 1)}, P(1))
      check(mesh, "unsqueeze", function(a) return a:unsqueeze(2) end, {vals({4, 3}, 1)}, P(1))
      check(mesh, "squeeze", function(a) return a:squeeze(2) end, {vals({4, 1, 3}, 1)}, P(1))
      check(mesh, "expand", function(a) return a:expand(4, 2, 3) end, {vals({4, 1, 3}, 1)}, P(1))
    end)

    it("indexing and joins: t[k] = v, index_select, index_add, cat, stack", function()
      check(mesh, "t[k] = v", function(a, v) local c = a * 1 c[{{}, 2}] = v return c end, {vals({4, 3}, 1), vals({4}, 2)}, P(1, 1))
      local ids = dt.tensor({1, 5, 1, 2})
      check(mesh, "index_select", function(a, i) return a:index_select(1, i) end, {vals({5, 3}, 1), ids}, P(1, 1))
      check(mesh, "index_select, other dim sharded", function(a, i) return a:index_select(1, i) end, {vals({5, 3}, 1), ids}, P(2, 0))
      check(mesh, "index_add", function(x, i, s) return x:index_add(1, i, s) end, {vals({5, 3}, 1), ids, vals({4, 3}, 2)}, P(1, 1, 1))
      check(mesh, "cat", function(a, b) return dt.cat({a, b}, 1) end, {vals({2, 3}, 1), vals({3, 3}, 2)}, P(2, 2))
      check(mesh, "stack", function(a, b) return dt.stack({a, b}, 2) end, {vals({2, 3}, 1), vals({2, 3}, 2)}, P(1, 1))
    end)

    it("nn: embedding (ids sharded, row-wise and column-wise weights), layer_norm, rms_norm, sdpa", function()
      local ids = dt.tensor({{1, 3}, {6, 1}, {2, 2}, {5, 4}})
      check(mesh, "embedding, ids sharded", function(i, w) return dt.F.embedding(i, w) end, {ids, vals({6, 4}, 1)}, P(1, 0))
      check(mesh, "embedding, row-wise", function(i, w) return dt.F.embedding(i, w) end, {ids, vals({6, 4}, 1)}, P(0, 1))
      check(mesh, "embedding, column-wise", function(i, w) return dt.F.embedding(i, w) end, {ids, vals({6, 4}, 1)}, P(1, 2))
      check(mesh, "layer_norm", function(x, w, b) return dt.F.layer_norm(x, 3, w, b) end,
            {vals({4, 2, 3}, 1), vals({3}, 2), vals({3}, 3)}, P(1, 0, 0))
      check(mesh, "rms_norm", function(x, w) return dt.F.rms_norm(x, {2, 3}, w) end, {vals({4, 2, 3}, 1), vals({2, 3}, 2)}, P(1, 0))
      local q, k, v = vals({4, 3, 2}, 1), vals({4, 3, 2}, 2), vals({4, 3, 2}, 3)
      check(mesh, "sdpa, causal", function(a, b, c) return dt.F.scaled_dot_product_attention(a, b, c, {is_causal = true}) end,
            {q, k, v}, P(1, 1, 1))
      check(mesh, "sdpa, float mask", function(a, b, c, m) return dt.F.scaled_dot_product_attention(a, b, c, {attn_mask = m}) end,
            {q, k, v, vals({3, 3}, 4)}, P(1, 1, 1, 0))
      local keep = dt.tensor({{true, false, true}, {false, true, false}, {true, true, false}})
      check(mesh, "sdpa, bool mask", function(a, b, c, m) return dt.F.scaled_dot_product_attention(a, b, c, {attn_mask = m}) end,
            {q, k, v, keep}, P(1, 1, 1, 0))
    end)

    it("random: dropout reuses its mask, uniform_ gives zero", function()
      check(mesh, "dropout", function(x) return dt.F.dropout(x, 0.3) end, {vals({6, 3}, 1)}, P(1))
      check(mesh, "uniform_", function(x) local c = x * 2 c:uniform_(0, 1) return c + x end, {vals({4, 3}, 1)}, P(1))
    end)
  end)
end
