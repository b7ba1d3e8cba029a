-- dt.compile on DTensors: random programs with redistributions, random ops and conversions on
-- the meshes of this world (1-4 ranks; uneven, zero-size shapes; random placements) replay
-- bitwise equal to eager, with the same collectives (dt.comm_debug) and the generator where
-- eager leaves it, on every rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local F = dt.nn.functional

-- A training step of the MLP x -> tanh(x p1) p2 (mean-square loss, backward, opt's step).
local function step_of(p, opt)
  return require("tests.spec.support.spec_helpers").mse_step(function(x) return x:matmul(p[1]):tanh():matmul(p[2]) end, opt)
end

-- The same collectives but for packing: the same list without the all_reduces, all_gathers
-- and reduce_scatters, which the graph packs when consecutive (comm_plan.c): no more calls of
-- each, the same bytes (a packed reduce_scatter pads less: no more bytes).
local function same_traffic(ce, cc, what)
  local PACKED = {all_reduce = true, all_gather = true, reduce_scatter = true}
  local function split(c)
    local other, n, b = {}, {}, {}
    for name in pairs(PACKED) do n[name], b[name] = 0, 0 end
    for _, op in ipairs(c.ops) do
      if PACKED[op.name] then n[op.name], b[op.name] = n[op.name] + 1, b[op.name] + op.bytes
      else other[#other + 1] = op.name .. ":" .. op.bytes .. ":" .. op.group_size end
    end
    return other, n, b
  end
  local eo, en, eb = split(ce)
  local co, cn, cb = split(cc)
  assert.are.same(eo, co, what)
  for name in pairs(PACKED) do
    if name == "reduce_scatter" then assert.is_true(cb[name] <= eb[name], what .. ": " .. name .. " bytes")
    else assert.are.equal(eb[name], cb[name], what .. ": " .. name .. " bytes") end
    assert.is_true(cn[name] <= en[name], what .. ": " .. name .. " calls")
  end
end

local function same_value(a, b)
  if a.device_mesh then
    return b.device_mesh ~= nil and H.placement_string(a.placements) == H.placement_string(b.placements) and
      H.same(a:to_local(), b:to_local())
  end
  return H.same(a, b)
end

-- The steps of a program on a DTensor list v (all of one global shape {r, c}) and mesh m.
local function steps(mesh)
  local function any_placements(g, ndim)
    local p = {}
    for d = 1, mesh.ndim do
      local k = g.int(1, 3)
      p[d] = k == 1 and dt.Replicate() or dt.Shard(g.int(1, ndim))
    end
    return p
  end
  return {
    function(v, g) return v[g.int(1, #v)] + v[g.int(1, #v)] end,
    function(v, g) return v[g.int(1, #v)] * 0.5 - v[g.int(1, #v)] end,
    function(v, g) return v[g.int(1, #v)]:relu() end,
    function(v, g) return v[g.int(1, #v)]:redistribute(mesh, any_placements(g, 2)) end,
    function(v, g) return F.dropout(v[g.int(1, #v)], 0.25, true) end,
    function(v, g) return v[g.int(1, #v)]:sum(1, true):expand(v[1]:size()) end,
    function(v, g) return v[g.int(1, #v)]:softmax(2) end,
    function(v, g) -- a local round trip: to_local, a plain op, from_local with the same placements
      local x = v[g.int(1, #v)]
      return dt.from_local(x:to_local() * 2, mesh, x.placements, {shape = x:size(), run_check = false})
    end,
    function(v, g) local x = v[g.int(1, #v)]; return x:matmul(x:t()):sum(2, true):expand(x:size()) end,
    -- views and the ops whose local kernel takes args of its own (replayed directly when
    -- nothing moves: their local args computed once at record), and in-place updates
    function(v, g) return v[g.int(1, #v)]:transpose(1, 2):tanh():transpose(1, 2) end,
    function(v, g) local x = v[g.int(1, #v)]; return x:reshape(x:size(1), 1, x:size(2)):sum(2) end,
    function(v, g) local x = v[g.int(1, #v)]; return x:narrow(2, 1, x:size(2)) * 2 end,
    function(v, g) local x = v[g.int(1, #v)]; return F.layer_norm(x, {x:size(2)}) end,
    function(v, g) local y = v[g.int(1, #v)]:clone(); y:mul_(0.5); y:add_(v[g.int(1, #v)]); return y end,
  }
end

describe("dt.compile on DTensors", function()
  it("replays random programs bitwise equal to eager, with the same collectives", function()
    local g = H.prng(4242)
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local list = steps(mesh)
      for case = 1, 6 do
        local r, c = g.int(0, 6), g.int(1, 6)
        local nsteps, seed = g.int(1, 8), g.int(1, 100000)
        local p1, p2 = H.placements(g, mesh, 2, true), H.placements(g, mesh, 2)
        local fn = function(x, y)
          local pg = H.prng(seed)
          local v = {x, y}
          for _ = 1, nsteps do v[#v + 1] = pg.pick(list)(v, pg) end
          return v[#v], v[#v - 1]:full_tensor()
        end
        local f = dt.compile(fn)
        local x = H.dist(H.values({r, c}, "float32"), mesh, p1)
        local y = H.dist(H.values({r, c}, "float32") * 3, mesh, p2)
        for call = 1, 3 do
          local what = string.format("%s case %d call %d", name, case, call)
          dt.manual_seed(seed + call)
          local e1, e2
          local ce = dt.comm_debug(function() e1, e2 = fn(x, y) end)
          local after = dt.get_rng_state()
          dt.manual_seed(seed + call)
          local c1, c2
          local cc = dt.comm_debug(function() c1, c2 = f(x, y) end)
          local now = dt.get_rng_state()
          assert.are.same({after.seed, after.offset}, {now.seed, now.offset}, what .. ": the generator")
          assert.is_true(same_value(e1, c1), what)
          assert.is_true(same_value(e2, c2), what)
          same_traffic(ce, cc, what .. ": collectives")
        end
        assert.are.equal(2, f:stats().replays, name)
      end
    end
  end)

  it("replays a tensor-parallel training step (forward, backward, SGD) bitwise equal to eager", function()
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local function make()
        local W1, W2 = H.values({5, 8}, "float32") * 0.3, H.values({8, 3}, "float32") * 0.2
        local g = H.prng(#name) -- the same placements for both copies
        local ps = {H.dist(W1, mesh, H.placements(g, mesh, 2)):requires_grad_(),
                    H.dist(W2, mesh, H.placements(g, mesh, 2)):requires_grad_()}
        return ps, dt.optim.SGD(ps, {lr = 0.1})
      end
      local p1, o1 = make()
      local p2, o2 = make()
      local eager, f = step_of(p1, o1), dt.compile(step_of(p2, o2))
      local rep = {}
      for m = 1, mesh.ndim do rep[m] = dt.Replicate() end
      local x = H.dist(H.values({4, 5}, "float32"), mesh, rep)
      local y = H.dist(H.values({4, 3}, "float32") * 0.5, mesh, rep)
      for i = 1, 4 do
        local a, b
        local ce = dt.comm_debug(function() a = eager(x, y) end)
        local cc = dt.comm_debug(function() b = f(x, y) end)
        assert.is_true(same_value(a, b), name .. " step " .. i)
        if i > 1 then same_traffic(ce, cc, name .. " step " .. i .. ": collectives") end
        for k = 1, 2 do
          assert.is_true(same_value(p1[k], p2[k]), name .. " step " .. i .. " parameter " .. k)
          assert.is_true(same_value(p1[k].grad, p2[k].grad), name .. " step " .. i .. " gradient " .. k)
        end
      end
      assert.are.equal(3, f:stats().replays, name)
    end
  end)

  it("records a graph per placement (a guard) and shows decisions and redistributions", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    local f = dt.compile(function(a, b) return a:matmul(b) end)
    local A, B = H.values({4, 6}, "float32"), H.values({6, 5}, "float32")
    local a, b = H.dist(A, mesh, {dt.Shard(2)}), H.dist(B, mesh, {dt.Shard(1)})
    local want = A:matmul(B)
    H.close(f(a, b), want, "capture")
    H.close(f(a, b), want, "replay")
    local a2 = H.dist(A, mesh, {dt.Shard(1)})
    H.close(f(a2, b), want, "another placement")
    local st = f:stats()
    assert.are.equal(2, st.graphs)
    assert.are.equal(1, st.guard_misses)
    local text = f:graph({index = 1, file = os.tmpname()})
    assert.matches("matmul(%0, %1)  float32{4,5} ", text, 1, true)
    assert.matches("Partial(sum)", text, 1, true) -- Shard(2) x Shard(1): a Partial sum
  end)

  -- an all_reduce folds every element alike wherever it lies in the buffer (threads: rank
  -- order), so one of a packed buffer gives the bits of separate ones; MPI's algorithm may
  -- depend on the size for float sums over more than two ranks (the pass does not pack those)
  it("gives the bits of separate all_reduces for one of a packed buffer", function()
    local D, g = dt.distributed, H.prng(77 + dt.world_size())
    local exact = dt.backend() == "threads" or dt.world_size() <= 2
    for case = 1, 8 do
      local dtype = ({"float32", "float64", "bfloat16"})[g.int(1, 3)]
      local op = ({"sum", "avg", "max", "sum"})[g.int(1, 4)]
      local parts, sizes = {}, {}
      for i = 1, g.int(1, 5) do
        sizes[i] = g.int(0, 3000)
        dt.manual_seed(case * 100 + i + 1000 * dt.rank())
        parts[i] = dt.randn(sizes[i]):to(dtype)
      end
      local packed = dt.cat(parts)
      D.all_reduce(packed, op)
      local at = 0
      for i, t in ipairs(parts) do
        D.all_reduce(t, op)
        if exact or op == "max" then
          assert.is_true(H.same(t, packed:narrow(1, at + 1, sizes[i])), ("case %d part %d (%s %s)"):format(case, i, op, dtype))
        end
        at = at + sizes[i]
      end
    end
  end)

  -- Partial -> Replicate redistributions of random shapes, dtypes and reduce ops on every mesh
  local function partial_program(g, mesh)
    local dim = g.int(1, mesh.ndim)
    local ops = {"sum", "avg", "max", "min"}
    local items = {}
    for i = 1, g.int(1, 5) do
      local dtype = ({"float32", "float64", "int64"})[g.int(1, 3)]
      local op = ops[g.int(1, dtype == "int64" and 4 or 2)]
      if dtype == "int64" and op == "avg" then op = "sum" end
      local p = {}
      for d = 1, mesh.ndim do p[d] = d == dim and dt.Partial(op) or dt.Replicate() end
      items[i] = {shape = H.shape_of(g, g.int(0, 3), 0, 5), dtype = dtype, p = p}
    end
    local rep = {}
    for d = 1, mesh.ndim do rep[d] = dt.Replicate() end
    local function fn(...)
      local xs, out = {...}, {}
      for i, x in ipairs(xs) do out[i] = x:redistribute(mesh, rep) end
      for i, y in ipairs(out) do out[i] = y * 2 end -- read after every all_reduce started
      return table.unpack(out)
    end
    local args = {}
    for i, it in ipairs(items) do
      dt.manual_seed(1000 * i + 7 * dt.rank())
      local loc = (dt.randn(it.shape) * 100):to(it.dtype)
      args[i] = dt.from_local(loc, mesh, it.p, {run_check = false, shape = it.shape})
    end
    return fn, args
  end

  local function bytes(c)
    local n = 0
    for _, op in ipairs(c.ops) do n = n + op.bytes end
    return n
  end

  it("packs consecutive all_reduces into one bucket, bitwise equal to eager, with fewer collectives", function()
    local g = H.prng(9090)
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      for case = 1, 5 do
        local fn, args = partial_program(g, mesh)
        for _, opts in ipairs({{}, {bucket_cap_mb = 0}, {overlap = false}}) do
          local f = dt.compile(fn, opts)
          for call = 1, 3 do
            local what = ("%s case %d call %d cap %s overlap %s"):format(name, case, call, opts.bucket_cap_mb, opts.overlap)
            local e, c = {}, {}
            local ce = dt.comm_debug(function() e = {fn(table.unpack(args))} end)
            local cc = dt.comm_debug(function() c = {f(table.unpack(args))} end)
            for i = 1, #e do assert.is_true(same_value(e[i], c[i]), what .. " output " .. i) end
            assert.are.equal(bytes(ce), bytes(cc), what .. ": bytes")
            local st = f:stats().per_graph[1]
            if call > 1 then
              assert.are.equal(st.buckets, #cc.ops, what .. ": one all_reduce per bucket")
              assert.is_true(st.buckets <= #ce.ops, what)
              if opts.bucket_cap_mb == 0 then assert.are.equal(#ce.ops, #cc.ops, what) end
            end
          end
        end
      end
    end
  end)

  it("packs a data-parallel step's gradient all_reduces and overlaps them; Adam and SGD replay equal to eager", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    local R = {dt.Replicate()}
    for _, cls in ipairs({"SGD", "Adam", "AdamW"}) do
      local function make()
        local ps = {H.dist(H.values({5, 8}, "float32") * 0.3, mesh, R):requires_grad_(),
                    H.dist(H.values({8, 3}, "float32") * 0.2, mesh, R):requires_grad_()}
        return ps, dt.optim[cls](ps, {lr = 0.01})
      end
      local p1, o1 = make()
      local p2, o2 = make()
      local eager, plain = step_of(p1, o1), step_of(p2, o2)
      local x = H.dist(H.values({6, 5}, "float32"), mesh, {dt.Shard(1)}) -- the batch, sharded: uneven on 4 ranks
      local y = H.dist(H.values({6, 3}, "float32") * 0.5, mesh, {dt.Shard(1)})
      eager(x, y) -- the optimizer's state exists before the capture
      plain(x, y)
      local f = dt.compile(plain)
      for i = 1, 4 do
        local a, b
        local ce = dt.comm_debug(function() a = eager(x, y) end)
        local cc = dt.comm_debug(function() b = f(x, y) end)
        assert.is_true(same_value(a, b), cls .. " step " .. i)
        for k = 1, 2 do
          assert.is_true(same_value(p1[k], p2[k]), cls .. " step " .. i .. " parameter " .. k)
          assert.is_true(same_value(p1[k].grad, p2[k].grad), cls .. " step " .. i .. " gradient " .. k)
        end
        if i > 1 and dt.world_size() > 1 then
          local packs = dt.backend() == "threads" or dt.world_size() <= 2
          assert.are.equal(2, ce.all_reduce, cls)
          assert.are.equal(packs and 1 or 2, cc.all_reduce, cls)
        end
      end
      local st = f:stats().per_graph[1]
      assert.are.equal(dt.world_size() > 1 and 2 or 0, st.async_all_reduces, cls)
      if dt.world_size() > 1 then
        local text = f:graph({file = os.tmpname()})
        assert.matches("(all_reduce #1: starts", text, 1, true)
        assert.matches("(waits for all_reduce #1)", text, 1, true)
      end
    end
  end)

  it("replays causal attention's backward on DTensors (its positions are a recorded from_local)", function()
    local g = H.prng(515)
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local p = H.placements(g, mesh, 4)
      local function leaves()
        local out = {}
        for i = 1, 3 do out[i] = H.dist(H.values({2, 3, 5, 4}, "float32") * (0.3 * i), mesh, p):requires_grad_() end
        return out
      end
      local function fn(q, k, v)
        local o = F.scaled_dot_product_attention(q, k, v, {is_causal = true})
        local loss = (o * o):sum()
        loss:backward()
        return loss
      end
      local e, c = leaves(), leaves()
      local f = dt.compile(fn)
      for call = 1, 3 do
        for i = 1, 3 do e[i].grad, c[i].grad = nil, nil end
        local a, b = fn(e[1], e[2], e[3]), f(c[1], c[2], c[3])
        assert.is_true(same_value(a, b), name .. " call " .. call)
        for i = 1, 3 do assert.is_true(same_value(e[i].grad, c[i].grad), name .. " call " .. call .. " gradient " .. i) end
      end
      assert.are.equal(2, f:stats().replays, name)
    end
  end)
end)
