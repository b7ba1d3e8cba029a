-- Autograd through DTensors, SPMD (dtlua -n 1..4, mpirun -np 2/4; doc/autograd-dtensor.md):
-- the backward of the DTensor API's conversions (from_local, to_local, redistribute,
-- full_tensor) -- the placements of each gradient, the collectives its backward issues
-- (dt.comm_debug), grad_placements, the kind of a local gradient that chooses to_local's
-- default and the errors where it cannot -- then the gradients of ops on random placements
-- against one device, and a tensor-parallel MLP trained with SGD against one rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local R, P, S = dt.Replicate, dt.Partial, dt.Shard

local function collectives(f) -- the collectives f issued: name -> count, and the total
  local c = dt.comm_debug(f)
  return c, #c.ops
end
local one = n > 1 and 1 or 0 -- a collective over a mesh dim of size 1 is skipped

local function mesh1() return dt.init_device_mesh("cpu", {n}) end

local function same(a, b, what) -- plain tensors, float64 to 1e-12
  assert.are.same(b:size(), a:size(), what)
  local err = a:numel() == 0 and 0 or (a:to("float64") - b:to("float64")):abs():max():item()
  assert(err <= 1e-12 * (1 + (b:numel() == 0 and 0 or b:abs():max():item())), (what or "") .. ": max error " .. err)
end

local function placements_are(want, got, what)
  assert.are.equal(H.placement_string(want), H.placement_string(got), what)
end

-- a DTensor leaf from the global X
local function leaf(X, mesh, p) return H.dist(X, mesh, p):requires_grad_() end

describe("from_local backward", function()
  local mesh = mesh1()
  local G = H.values({2 * n + 1, 3}, "float64") -- the gradient of the DTensor (uneven dim 1)

  it("Shard forward: the local part of a Shard gradient, no collective", function()
    local s, len = H.chunk(2 * n + 1, n, rank)
    local t = dt.zeros(len, 3, {dtype = "float64"}):requires_grad_()
    local y = dt.from_local(t, mesh, {S(1)}, {shape = {2 * n + 1, 3}})
    assert.are.equal("from_local", y.grad_fn)
    local _, total = collectives(function() y:backward(H.dist(G, mesh, {S(1)})) end)
    assert.are.equal(0, total)
    same(t.grad, G:narrow(1, s + 1, len), "the rank's rows")
    -- a Replicate gradient arriving is chunked, still without a collective
    t.grad = nil
    y = dt.from_local(t, mesh, {S(1)}, {shape = {2 * n + 1, 3}})
    _, total = collectives(function() y:backward(H.dist(G, mesh, {R()})) end)
    assert.are.equal(0, total)
    same(t.grad, G:narrow(1, s + 1, len), "chunked")
  end)

  it("Replicate forward: the whole gradient on every rank, no collective", function()
    local t = dt.zeros(2 * n + 1, 3, {dtype = "float64"}):requires_grad_()
    local y = dt.from_local(t, mesh, {R()})
    local _, total = collectives(function() y:backward(H.dist(G, mesh, {R()})) end)
    assert.are.equal(0, total)
    same(t.grad, G, "whole")
  end)

  it("Partial forward: a Replicate gradient (never Partial); a Partial gradient arriving is reduced first", function()
    local t = dt.zeros(2 * n + 1, 3, {dtype = "float64"}):requires_grad_()
    local y = dt.from_local(t, mesh, {P()})
    local _, total = collectives(function() y:backward(H.dist(G, mesh, {R()})) end)
    assert.are.equal(0, total)
    same(t.grad, G, "each rank gets the whole gradient of the sum")
    -- a gradient kept Partial on its way (grad_placements) is reduced by from_local's backward
    t.grad = nil
    y = dt.from_local(t, mesh, {P()})
    local z = y:redistribute({R()}, {grad_placements = {P()}}) -- forward: one all_reduce
    local c
    c, total = collectives(function() z:backward(H.dist(G, mesh, {R()})) end)
    assert.are.equal(one, c.all_reduce)
    assert.are.equal(one, total)
    same(t.grad, G, "reduced")
  end)

  it("grad_placements overrides the default: Partial gives each rank a share", function()
    local t = dt.zeros(2 * n + 1, 3, {dtype = "float64"}):requires_grad_()
    local y = dt.from_local(t, mesh, {R()}, {grad_placements = {P()}})
    local _, total = collectives(function() y:backward(H.dist(G, mesh, {R()})) end)
    assert.are.equal(0, total) -- Replicate -> Partial(sum) is local
    same(t.grad, rank == 0 and G or G * 0, "coordinate 0 keeps the gradient")
    -- the shares add up: a to_local of a replicated source sums them
    local x = leaf(G * 0, mesh, {R()})
    y = dt.from_local(x:to_local(), mesh, {R()}, {grad_placements = {P()}})
    y:backward(H.dist(G, mesh, {R()}))
    H.close(x.grad, G, "shares summed")
  end)

  it("grad_placements must shard what the placements shard", function()
    local t = dt.zeros(2, 3)
    if n > 1 then
      H.fails("from_local: grad_placements (Replicate()) must shard the tensor dims that the placements (Shard(1)) shard",
        dt.from_local, t, mesh, {S(1)}, {grad_placements = {R()}})
      H.fails("from_local: grad_placements (Shard(2)) must shard", dt.from_local, t, mesh, {S(1)},
        {grad_placements = {S(2)}})
    end
    H.fails("from_local: grad_placements: 2 placements for a 1-d mesh", dt.from_local, t, mesh, {S(1)},
      {grad_placements = {R(), R()}})
    H.fails("from_local: grad_placements", dt.from_local, t, mesh, {S(1)}, {grad_placements = {S(3)}})
    assert.is_true(dt.is_dtensor(dt.from_local(t, mesh, {S(1)}, {grad_placements = {S(-2)}})))
  end)
end)

describe("to_local backward", function()
  local mesh = mesh1()
  local X = H.values({n + 2, 3}, "float64")

  it("Shard: the local gradient is the shard's, no collective", function()
    local x = leaf(X, mesh, {S(1)})
    local t = x:to_local()
    assert.are.equal("to_local", t.grad_fn)
    local y = dt.from_local(t * 2, mesh, {S(1)}, {shape = X:size()})
    local _, total = collectives(function() y:sum():backward() end)
    assert.are.equal(0, total)
    placements_are({S(1)}, x.grad.placements)
    H.close(x.grad, dt.full(X:size(), 2, {dtype = "float64"}), "2")
  end)

  it("Replicate whose local part fed from_local with Replicate: the whole gradient, no collective", function()
    local x = leaf(X, mesh, {R()})
    local y = dt.from_local(x:to_local() * 3, mesh, {R()})
    local _, total = collectives(function() y:sum():backward() end)
    assert.are.equal(0, total)
    placements_are({R()}, x.grad.placements)
    H.close(x.grad, dt.full(X:size(), 3, {dtype = "float64"}), "3 (not 3n)")
  end)

  it("Replicate whose local part fed from_local with Shard: the ranks' contributions are summed (one all_reduce)", function()
    local x = leaf(X, mesh, {R()})
    local y = dt.from_local(x:to_local() * (rank + 1), mesh, {S(1)}) -- y: n blocks, block r = (r + 1) X
    local c, total = collectives(function() y:sum():backward() end)
    assert.are.equal(one, c.all_reduce)
    assert.are.equal(one, total)
    placements_are({R()}, x.grad.placements)
    H.close(x.grad, dt.full(X:size(), n * (n + 1) / 2, {dtype = "float64"}), "sum over the blocks")
  end)

  it("Replicate whose local part fed from_local with Partial: summed too (y = n x)", function()
    local x = leaf(X, mesh, {R()})
    local y = dt.from_local(x:to_local(), mesh, {P()})
    y:sum():backward()
    H.close(x.grad, dt.full(X:size(), n, {dtype = "float64"}), "n")
  end)

  it("Partial: the local gradient of a part is the gradient of the sum (Replicate, never n times it)", function()
    local x = leaf(X, mesh, {P()})
    local y = dt.from_local(x:to_local() * 5, mesh, {R()}) -- every rank's part times 5, taken as replicated
    local _, total = collectives(function() y:sum():backward() end)
    assert.are.equal(0, total)
    placements_are({R()}, x.grad.placements)
    H.close(x.grad, dt.full(X:size(), 5, {dtype = "float64"}), "5")
  end)

  it("a plain loss of the local part: the forward placements (each rank's loss is the same)", function()
    for _, p in ipairs {{R()}, {S(2)}, {P()}} do
      local x = leaf(X, mesh, p)
      local _, total = collectives(function() (x:to_local() * 4):sum():backward() end)
      assert.are.equal(0, total)
      H.close(x.grad, dt.full(X:size(), 4, {dtype = "float64"}), H.placement_string(p))
    end
  end)

  it("grad_placements overrides the kind", function()
    local x = leaf(X, mesh, {R()})
    local y = dt.from_local(x:to_local({grad_placements = {P()}}), mesh, {R()})
    local c = collectives(function() y:sum():backward() end)
    assert.are.equal(one, c.all_reduce)
    H.close(x.grad, dt.full(X:size(), n, {dtype = "float64"}), "taken as contributions: n")
    x = leaf(X, mesh, {R()})
    y = dt.from_local(x:to_local({grad_placements = {R()}}), mesh, {S(1)})
    y:sum():backward()
    H.close(x.grad, dt.ones(X:size(), {dtype = "float64"}), "taken as whole: 1")
    if n > 1 then
      H.fails("to_local: grad_placements (Replicate()) must shard the tensor dims that the placements (Shard(1)) shard",
        function() leaf(X, mesh, {S(1)}):to_local({grad_placements = {R()}}) end)
    end
    H.fails("to_local: grad_placements: a placement is", function() leaf(X, mesh, {R()}):to_local({grad_placements = 3}) end)
  end)

  it("whole gradients added to contributions on one mesh dim: an error naming the grad_placements to pass", function()
    local x = leaf(X, mesh, {R()})
    local t = x:to_local()
    local y1, y2 = dt.from_local(t, mesh, {R()}), dt.from_local(t, mesh, {S(1)})
    local loss = y1:sum() + y2:sum()
    if n > 1 then
      H.fails("to_local: backward: on mesh dim 1 (Replicate()) the gradient of the local part adds whole gradients",
        function() loss:backward() end)
      H.fails("call to_local once per use (each then takes its own use's kind), or pass grad_placements = " ..
        "(Replicate()) to the one whose gradient is whole and (Partial(sum)) to the one whose ranks' gradients add up",
        function() loss:backward() end)
    end
    -- as the message says: one to_local per use, by its kind or by grad_placements
    x = leaf(X, mesh, {R()})
    y1, y2 = dt.from_local(x:to_local(), mesh, {R()}), dt.from_local(x:to_local(), mesh, {S(1)})
    ;(y1:sum() + y2:sum()):backward()
    H.close(x.grad, dt.full(X:size(), 1 + n, {dtype = "float64"}), "1 + n")
    x = leaf(X, mesh, {R()})
    y1 = dt.from_local(x:to_local({grad_placements = {R()}}), mesh, {R()})
    y2 = dt.from_local(x:to_local({grad_placements = {P()}}), mesh, {S(1)})
    ;(y1:sum() + y2:sum()):backward()
    H.close(x.grad, dt.full(X:size(), 1 + n, {dtype = "float64"}), "1 + n")
    -- a plain loss is whole on every rank: adding it to contributions is the same error
    x = leaf(X, mesh, {R()})
    t = x:to_local()
    local plain = dt.from_local(t, mesh, {S(1)}):sum():full_tensor() + t:sum()
    if n > 1 then H.fails("adds whole gradients", function() plain:backward() end) else plain:backward() end
  end)

  it("Partial whose local part fed from_local with Shard: an error (the loss depends on the parts)", function()
    local x = leaf(X, mesh, {P()})
    local y = dt.from_local(x:to_local(), mesh, {S(1)})
    if n > 1 then
      H.fails("to_local: backward: the DTensor is Partial on mesh dim 1 and its local part fed dt.from_local with Shard",
        function() y:sum():backward() end)
      H.fails("pass grad_placements = (Replicate()) if every rank's gradient is the whole gradient, or (Partial(sum))",
        function() y:sum():backward() end)
    end
  end)

  it("2-d mesh: the kind is per mesh dim (contributions summed over dp only)", function()
    if n ~= 4 then return end
    local m2 = dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})
    local x = leaf(X, m2, {R(), S(2)})
    local dp = m2:get_coordinate()[1]
    local y = dt.from_local(x:to_local() * (dp + 1), m2, {S(1), S(2)}, {shape = {2 * (n + 2), 3}})
    local c, total = collectives(function() y:sum():backward() end)
    assert.are.equal(1, c.all_reduce)
    assert.are.equal(1, total)
    assert.are.equal(2, c.ops[1].group_size)
    placements_are({R(), S(2)}, x.grad.placements)
    H.close(x.grad, dt.full(X:size(), 3, {dtype = "float64"}), "1 + 2")
  end)

  it("a mesh without rank 0: the ranks off the mesh hold empty gradients and join no collective", function()
    if n < 3 then return end
    local ranks = {}
    for r = n - 1, 1, -1 do ranks[#ranks + 1] = r end
    local sub = dt.DeviceMesh("cpu", ranks)
    local k = n - 1
    local x = leaf(X, sub, {R()})
    local coord = sub:get_coordinate()
    local y = dt.from_local(x:to_local() * ((coord and coord[1] or 0) + 1), sub, {S(1)}, {shape = {k * (n + 2), 3}})
    local c, total = collectives(function() y:sum():backward() end)
    assert.are.equal(coord and 1 or 0, total)
    H.close(x.grad, dt.full(X:size(), k * (k + 1) / 2, {dtype = "float64"}), "sum over the mesh's ranks")
    if not coord then assert.are.equal(0, x.grad:to_local():numel()) end
  end)

  it("inside dt.utils.checkpoint: the recomputed to_local takes the kind of the checkpoint's gradient", function()
    local function run(checkpointed)
      local x = leaf(X, mesh, {R()})
      local f = function(a) return a:to_local() * 2 end
      local t = checkpointed and dt.utils.checkpoint(f, x) or f(x)
      dt.from_local(t * (rank + 1), mesh, {S(1)}):sum():backward() -- contributions: summed over the ranks
      return x.grad
    end
    local want = dt.full(X:size(), n * (n + 1), {dtype = "float64"})
    H.close(run(false), want, "without checkpoint")
    H.close(run(true), want, "with checkpoint")
  end)

  it("a local part that fed from_local on another mesh: an error unless grad_placements says", function()
    if n == 1 then return end
    local other = dt.init_device_mesh("cpu", {n, 1})
    local x = leaf(X, mesh, {R()})
    local y = dt.from_local(x:to_local(), other, {S(1), R()})
    H.fails("to_local: backward: the gradient of the local part came through dt.from_local on another mesh",
      function() y:sum():backward() end)
    x = leaf(X, mesh, {R()})
    y = dt.from_local(x:to_local({grad_placements = {P()}}), other, {S(1), R()})
    y:sum():backward()
    H.close(x.grad, dt.full(X:size(), n, {dtype = "float64"}), "n")
  end)
end)

describe("to_local then from_local on a Partial DTensor", function()
  it("gives the gradient of the DTensor ops alone (PyTorch issue 172932: n times it there)", function()
    local mesh = mesh1()
    local A, B = H.values({3, 2 * n}, "float64"), H.values({2 * n, 4}, "float64") * 0.5
    local W = H.values({3, 4}, "float64") + 1
    local function run(round_trip)
      local a, b = leaf(A, mesh, {S(2)}), leaf(B, mesh, {S(1)})
      local x = a:mm(b) -- Partial(sum)
      placements_are({P()}, x.placements)
      if round_trip then x = dt.from_local(x:to_local(), mesh, {P()}, {shape = x:size()}) end
      ;((x * H.dist(W, mesh, {R()})):sum()):backward()
      return a.grad:full_tensor(), b.grad:full_tensor()
    end
    local ga, gb = run(false)
    local ra, rb = run(true)
    same(ra, ga, "a")
    same(rb, gb, "b")
    local pa, pb = A:clone():requires_grad_(), B:clone():requires_grad_()
    ;(pa:mm(pb) * W):sum():backward()
    same(ga, pa.grad, "a against one device")
    same(gb, pb.grad, "b against one device")
  end)
end)

describe("a log-sum-exp over class shards (F.cross_entropy's loss-parallel path)", function()
  -- the class max feeds the per-sample result (computed alike on every rank) and each rank's
  -- exponentials (a contribution): one to_local of it has a mixed gradient; with one to_local
  -- per use, each takes the kind of its own use
  local function lse(x, mesh, split)
    local kshape = {x:size(1), 1}
    local lx = x:to_local()
    local gmaxd = dt.from_local(lx:amax(2, true), mesh, {P("max")}, {shape = kshape}):redistribute({R()})
    local gmax = gmaxd:to_local()
    local gmax_own = split and gmaxd:to_local() or gmax
    local se = dt.from_local((lx - gmax_own):exp():sum(2, true), mesh, {P()}, {shape = kshape}):redistribute({R()})
    return dt.from_local(se:to_local():log() + gmax, mesh, {R()}, {shape = kshape})
  end

  it("one to_local for both uses: an error saying to split them; one per use: one device's gradient", function()
    local mesh = mesh1()
    local L, W = H.values({4, 3 * n - 1}, "float64"), H.values({4, 1}, "float64") + 2 -- no empty class shard
    local pl = L:clone():requires_grad_()
    local m = pl:amax(2, true)
    ;((((pl - m):exp():sum(2, true)):log() + m) * W):sum():backward()
    local x = leaf(L, mesh, {S(2)})
    local loss = (lse(x, mesh, false) * H.dist(W, mesh, {R()})):sum()
    if n > 1 then
      H.fails("call to_local once per use", function() loss:backward() end)
    end
    x = leaf(L, mesh, {S(2)})
    ;(lse(x, mesh, true) * H.dist(W, mesh, {R()})):sum():backward()
    placements_are({S(2)}, x.grad.placements)
    H.close(x.grad, pl.grad, "log-sum-exp")
  end)
end)

describe("F.cross_entropy on DTensor logits (composed in Lua through the conversions)", function()
  it("the logits' gradient equals one device's: class-sharded (loss parallel), batch-sharded, replicated", function()
    local rng = H.prng(4242)
    for _, m in ipairs(H.meshes()) do
      local mesh = m[2]
      for k = 1, 4 do
        local B, Cn = rng.int(1, 5), rng.int(1, 9) -- classes: empty shards on some ranks
        local L = H.values({B, Cn}, "float64")
        local tt = {}
        for i = 1, B do tt[i] = rng.int(1, Cn) end
        if B > 1 then tt[1] = -100 end -- ignored
        local T = dt.tensor(tt, {dtype = "int64"})
        local reduction = ({"mean", "sum", "none", "mean"})[k]
        local W = H.values({B}, "float64") + 1
        local function loss_of(logits, target, w)
          local l = dt.F.cross_entropy(logits, target, {reduction = reduction})
          return reduction == "none" and (l * w):sum() or l
        end
        local pl = L:clone():requires_grad_()
        loss_of(pl, T, W):backward()
        local p = {}
        for d = 1, mesh.ndim do p[d] = rng.pick {R(), S(1), S(2)} end
        local x = leaf(L, mesh, p)
        local rep = {}
        for d = 1, mesh.ndim do rep[d] = R() end
        loss_of(x, H.dist(T, mesh, rep), H.dist(W, mesh, rep)):backward()
        local what = m[1] .. " " .. H.placement_string(p) .. " " .. reduction .. " " .. B .. "x" .. Cn
        placements_are(p, x.grad.placements, what)
        H.close(x.grad, pl.grad, what)
      end
    end
  end)
end)

describe("redistribute backward", function()
  it("dst -> src with Partial -> Replicate: the collectives of each transition", function()
    local mesh = mesh1()
    local X, G = H.values({2 * n + 1, n + 1}, "float64"), H.values({2 * n + 1, n + 1}, "float64") * 2
    -- {from, to, the gradient's placements, the backward's collective (or none)}
    local cases = {
      {{S(1)}, {R()}, {S(1)}, nil},                 -- Shard -> Replicate: a Shard gradient, no collective
      {{R()}, {S(1)}, {R()}, "all_gather"},         -- Replicate -> Shard: one all_gather
      {{P()}, {R()}, {R()}, nil},                   -- Partial -> Replicate: a pass-through
      {{P()}, {S(2)}, {R()}, "all_gather"},
      {{S(1)}, {S(2)}, {S(1)}, "all_to_all"},
      {{R()}, {R()}, {R()}, nil},
    }
    for _, c in ipairs(cases) do
      local from, to, gp, coll = table.unpack(c)
      local what = H.placement_string(from) .. " -> " .. H.placement_string(to)
      local x = leaf(X, mesh, from)
      local z = x:redistribute(to)
      assert.are.equal("redistribute", z.grad_fn, what)
      local counts, total = collectives(function() z:backward(H.dist(G, mesh, to)) end)
      assert.are.equal(coll and one or 0, total, what)
      if coll then assert.are.equal(one, counts[coll], what) end
      placements_are(gp, x.grad.placements, what)
      H.close(x.grad, G, what)
    end
  end)

  it("grad_placements: the placements of the input's gradient (Partial kept)", function()
    local mesh = mesh1()
    local X = H.values({n + 1, 2}, "float64")
    local x = leaf(X, mesh, {S(1)})
    local z = x:redistribute({R()}, {grad_placements = {P()}})
    local _, total = collectives(function() z:sum():backward() end)
    assert.are.equal(0, total)
    placements_are({P()}, x.grad.placements)
    H.close(x.grad, dt.ones(X:size(), {dtype = "float64"}), "ones")
    x = leaf(X, mesh, {S(1)})
    z = x:redistribute(mesh, {R()}, {grad_placements = {S(2)}})
    z:sum():backward()
    placements_are({S(2)}, x.grad.placements)
    H.fails("redistribute: grad_placements", function() x:redistribute({R()}, {grad_placements = {S(3)}}) end)
  end)

  it("a Partial gradient arriving goes to the source in one step: Shard -> Replicate mirrored by a reduce_scatter", function()
    local mesh = mesh1()
    local X, W, G = H.values({2 * n + 1, 3}, "float64"), H.values({3, n + 2}, "float64") + 1, H.values({2 * n + 1, n + 2}, "float64")
    local want = X:clone():requires_grad_()
    want:mm(W):backward(G)
    for _, hooked in ipairs {false, true} do
      local x = leaf(X, mesh, {S(1)})
      local z = x:redistribute({R()})
      local seen
      if hooked then z:register_hook(function(g) seen = H.placement_string(g.placements) end) end
      local y = z:mm(H.dist(W, mesh, {S(2)})) -- z's gradient: g (Shard(2)) @ W^T (Shard(1)) is Partial(sum)
      local counts, total = collectives(function() y:backward(H.dist(G, mesh, {S(2)})) end)
      local what = hooked and "with a hook" or "without a hook"
      assert.are.equal(one, total, what)
      -- a hook (or retain_grad, or dt.autograd.grad) sees the gradient reduced, as documented
      assert.are.equal(one, counts[hooked and "all_reduce" or "reduce_scatter"], what)
      if hooked then assert.are.equal("{Replicate()}", seen) end
      placements_are({S(1)}, x.grad.placements, what)
      H.close(x.grad, want.grad, what)
    end
  end)

  it("2-d mesh: every transition's gradient equals the single-device one", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    local X, W = H.values({5, 3}, "float64"), H.values({5, 3}, "float64") + 2
    local lists = {{R(), R()}, {S(1), R()}, {S(1), S(2)}, {P(), S(1)}, {S(2), S(2)}, {R(), P()}, {P(), P()}}
    for _, from in ipairs(lists) do
      for _, to in ipairs(lists) do
        local ok_to = true
        for m = 1, 2 do ok_to = ok_to and (not to[m]:is_partial() or to[m] == from[m]) end
        if ok_to then
          local x = leaf(X, mesh, from)
          ;(x:redistribute(to) * H.dist(W, mesh, {R(), R()})):sum():backward()
          local want = {}
          for m = 1, 2 do want[m] = from[m]:is_partial() and R() or from[m] end
          local what = H.placement_string(from) .. " -> " .. H.placement_string(to)
          placements_are(want, x.grad.placements, what)
          H.close(x.grad, W, what)
        end
      end
    end
  end)
end)

describe("full_tensor backward", function()
  local mesh = mesh1()
  local X = H.values({2 * n + 1, 2}, "float64")
  local W = H.values({2 * n + 1, 2}, "float64") + 3

  it("a plain loss: the gradient is whole on every rank, brought to x's placements without a collective", function()
    for _, p in ipairs {{S(1)}, {S(2)}, {R()}, {P()}} do
      local x = leaf(X, mesh, p)
      local t = x:full_tensor()
      assert.are.equal("full_tensor", t.grad_fn)
      local _, total = collectives(function() (t * W):sum():backward() end)
      assert.are.equal(0, total, H.placement_string(p))
      placements_are({p[1]:is_partial() and R() or p[1]}, x.grad.placements)
      H.close(x.grad, W, H.placement_string(p))
    end
  end)

  it("contributions (the full tensor fed from_local with Shard): summed", function()
    local x = leaf(X, mesh, {S(1)})
    local y = dt.from_local(x:full_tensor() * (rank + 1), mesh, {S(1)})
    local c = collectives(function() y:sum():backward() end)
    assert.are.equal(one, c.reduce_scatter) -- Partial(sum) -> Shard
    H.close(x.grad, dt.full(X:size(), n * (n + 1) / 2, {dtype = "float64"}), "sum over the blocks")
  end)

  it("grad_placements: Partial sums the ranks' gradients; a Shard is refused", function()
    local x = leaf(X, mesh, {S(1)})
    local t = x:full_tensor({grad_placements = {P()}})
    local c = collectives(function() (t * (rank + 1)):sum():backward() end)
    assert.are.equal(one, c.reduce_scatter)
    H.close(x.grad, dt.full(X:size(), n * (n + 1) / 2, {dtype = "float64"}), "the ranks' losses added")
    x = leaf(X, mesh, {S(1)})
    t = dt.full_tensor(x, {grad_placements = {R()}})
    t:sum():backward()
    H.close(x.grad, dt.ones(X:size(), {dtype = "float64"}), "ones")
    if n > 1 then
      H.fails("full_tensor: grad_placements (Shard(1)): the gradient of the full tensor is whole on every rank",
        function() x:full_tensor({grad_placements = {S(1)}}) end)
    end
  end)
end)

-- ---- gradients of ops on random placements, against one device ----
-- Each case: f(inputs...) on plain tensors and on DTensors; the loss is sum(f(...) * W) with a
-- fixed W, so every element of the output weighs differently.
local OPS = {
  {"add", 2, function(a, b) return a + b end},
  {"add alpha", 2, function(a, b) return a:add(b, 2.5) end},
  {"sub", 2, function(a, b) return a - b end},
  {"mul", 2, function(a, b) return a * b end},
  {"mul scalar", 1, function(a) return a * -1.5 end},
  {"neg", 1, function(a) return -a end},
  {"clone", 1, function(a) return a:clone() end},
  {"contiguous", 1, function(a) return a:contiguous() end},
  {"to float32 and back", 1, function(a) return a:to("float32"):to("float64") end},
  {"sum", 1, function(a) return a:sum() end},
  {"sum dim", 1, function(a) return a:sum(1) end},
  {"sum dim keepdim", 1, function(a) return a:sum(-1, true) end},
  {"reshape", 1, function(a) return a:reshape(-1) end},
  {"flatten", 1, function(a) return a:flatten() end},
  {"view", 1, function(a) return a:view(a:size()) end},
  {"mm", 2, function(a, b) return a:mm(b) end, mm = true},
  {"chain", 2, function(a, b) return ((a * b) - a):sum(2) * 2 end},
  -- the conversions: identities on plain tensors
  {"to_local then from_local", 1, function(a)
    if not dt.is_dtensor(a) then return a end
    return dt.from_local(a:to_local() * 1, a.device_mesh, a.placements, {shape = a:size()})
  end},
  {"redistribute", 1, function(a, rng)
    if not dt.is_dtensor(a) then return a end
    return a:redistribute(H.placements(rng, a.device_mesh, a:dim(), false))
  end, rng = true},
  {"full_tensor", 1, function(a) return dt.is_dtensor(a) and a:full_tensor() or a end},
}

local function replicated(mesh)
  local r = {}
  for k = 1, mesh.ndim do r[k] = R() end
  return r
end

local function inputs_for(op, rng)
  local shape = H.shape_of(rng, 2, 1, 7)
  if op.mm then return {H.values(shape, "float64"), H.values({shape[2], rng.int(1, 6)}, "float64") * 0.5} end
  local ins = {}
  for j = 1, op[2] do ins[j] = (H.values(shape, "float64") + j) * (j % 2 == 0 and -1 or 1) end
  return ins
end

describe("gradients of ops on random DTensor placements", function()
  it("each input's gradient, gathered, equals the single-device gradient (1-d and 2-d meshes)", function()
    local rng = H.prng(20261123)
    for _, m in ipairs(H.meshes()) do
      local mesh = m[2]
      for _, op in ipairs(OPS) do
        for _ = 1, 3 do
          local ins = inputs_for(op, rng)
          local plain = {}
          for j, t in ipairs(ins) do plain[j] = t:clone():requires_grad_() end
          if op.rng then plain[2] = rng end
          local out = op[3](table.unpack(plain))
          local W = H.values(out:size(), "float64") + 0.25
          ;(out * W):sum():backward()
          local dins, pls = {}, {}
          for j, t in ipairs(ins) do
            pls[j] = H.placements(rng, mesh, t:dim(), "float64")
            dins[j] = leaf(t, mesh, pls[j])
          end
          local what = op[1] .. " on " .. m[1]
          for j = 1, #ins do what = what .. " " .. H.placement_string(pls[j]) end
          if op.rng then dins[2] = rng end
          local dout = op[3](table.unpack(dins))
          local Wd = dt.is_dtensor(dout) and H.dist(W, mesh, replicated(mesh)) or W
          if not mesh:get_coordinate() and not dt.is_dtensor(dout) then Wd = 1 end -- off the mesh: an empty full_tensor
          ;(dout * Wd):sum():backward()
          for j = 1, #ins do
            assert(dins[j].grad, what .. ": input " .. j .. " has no gradient")
            local gp = {}
            for k = 1, mesh.ndim do gp[k] = pls[j][k]:is_partial() and R() or pls[j][k] end
            placements_are(gp, dins[j].grad.placements, what .. " input " .. j)
            H.close(dins[j].grad, plain[j].grad, what .. " input " .. j)
          end
        end
      end
    end
  end)
end)

-- ---- a two-layer MLP with tensor-parallel weights, trained with plain SGD ----
local B, D, HID, O, STEPS, LR = 6, 5, 4 * 3, 3, 20, 0.1

local function data()
  return H.values({B, D}, "float64") * 0.3, H.values({D, HID}, "float64") * 0.2, H.values({HID, O}, "float64") * 0.2,
    H.values({B, O}, "float64") * 0.2 + 0.1
end

local function act(h) return h + h * h * 0.1 end -- a polynomial: every op here has a backward rule

-- loss(step) for params {w1, w2}: fwd(x, w1, w2, t) -> a loss tensor (plain or DTensor of one element)
local function train(w1, w2, fwd)
  local curve = {}
  for step = 1, STEPS do
    local loss = fwd(w1, w2)
    loss:backward()
    curve[step] = dt.is_dtensor(loss) and loss:full_tensor():item() or loss:item()
    dt.no_grad(function()
      for _, w in ipairs {w1, w2} do
        w:add_(w.grad * -LR)
        w.grad = nil
      end
    end)
  end
  return curve
end

local function reference()
  local X, W1, W2, T = data()
  local w1, w2 = W1:clone():requires_grad_(), W2:clone():requires_grad_()
  return train(w1, w2, function(a, b)
    local d = act(X:mm(a)):mm(b) - T
    return (d * d):sum() * (1 / B)
  end)
end

local function same_curve(got, want, what)
  for step = 1, STEPS do
    local rel = math.abs(got[step] - want[step]) / math.abs(want[step])
    assert(rel <= 1e-9, string.format("%s: step %d: loss %.17g, one rank %.17g", what, step, got[step], want[step]))
  end
  assert(want[STEPS] < want[1], "the loss decreases")
end

describe("two-layer MLP, tensor parallel (colwise then rowwise), float64", function()
  local want = reference()

  it("20 SGD steps give one rank's loss curve (DTensor ops)", function()
    local X, W1, W2, T = data()
    local mesh = mesh1()
    local x, t = H.dist(X, mesh, {R()}), H.dist(T, mesh, {R()})
    local w1, w2 = leaf(W1, mesh, {S(2)}), leaf(W2, mesh, {S(1)})
    local got = train(w1, w2, function(a, b)
      local d = act(x:mm(a)):mm(b) - t
      return (d * d):sum() * (1 / B)
    end)
    placements_are({S(2)}, w1.placements)
    same_curve(got, want, "1-d mesh")
  end)

  it("20 SGD steps on a 2-d mesh (batch over dp, weights over tp)", function()
    if n ~= 4 then return end
    local X, W1, W2, T = data()
    local mesh = dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})
    local x, t = H.dist(X, mesh, {S(1), R()}), H.dist(T, mesh, {S(1), R()})
    local w1, w2 = leaf(W1, mesh, {R(), S(2)}), leaf(W2, mesh, {R(), S(1)})
    local got = train(w1, w2, function(a, b)
      local d = act(x:mm(a)):mm(b) - t
      return (d * d):sum() * (1 / B)
    end)
    same_curve(got, want, "2-d mesh")
  end)

  it("20 SGD steps with local math between to_local and from_local (Megatron style)", function()
    local X, W1, W2, T = data()
    local mesh = mesh1()
    local x, t = H.dist(X, mesh, {R()}):requires_grad_(), H.dist(T, mesh, {R()})
    local w1, w2 = leaf(W1, mesh, {S(2)}), leaf(W2, mesh, {S(1)})
    local got = train(w1, w2, function(a, b)
      -- x's local part feeds each rank's slice of the hidden layer: its gradient is the sum of
      -- the ranks' contributions, which the kind of the local gradient tells to_local
      local o = act(x:to_local():mm(a:to_local())):mm(b:to_local())
      local d = dt.from_local(o, mesh, {P()}) - t
      return (d * d):sum() * (1 / B)
    end)
    same_curve(got, want, "to_local / from_local")
    -- x's gradient is the single-device one (PyTorch's default would leave each rank's part)
    local px, pw1, pw2 = X:clone():requires_grad_(), W1:clone(), W2:clone()
    local d = act(px:mm(pw1)):mm(pw2) - T
    ;((d * d):sum() * (1 / B)):backward()
    x.grad = nil
    local a, b = H.dist(W1, mesh, {S(2)}), H.dist(W2, mesh, {S(1)})
    local dd = dt.from_local(act(x:to_local():mm(a:to_local())):mm(b:to_local()), mesh, {P()}) - t
    ;((dd * dd):sum() * (1 / B)):backward()
    H.close(x.grad, px.grad, "x's gradient")
  end)
end)
