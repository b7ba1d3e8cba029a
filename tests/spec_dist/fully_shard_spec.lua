-- fully_shard (FSDP2), SPMD (dtlua -n 1..4, mpirun -np 2/4; doc/parallel.md): a two-block
-- model with uneven parameter sizes sharded per block and at the root, trained with SGD on
-- each rank's batch against one device on the whole batch (float64); the collectives per
-- block (dt.comm_debug); reshard_after_forward = false; activation checkpointing; mp_policy;
-- each rank's parameter bytes; the errors; the storage release/refill primitives.
-- (The GPT demo with --fsdp on 2, 4 and 2x2 ranks: tests/spec/examples_spec.lua.)
local rank, n = dt.rank(), dt.world_size()
local nn, P = dt.nn, dt.parallel
local one = n > 1 and 1 or 0 -- a collective over a group of one is skipped

local MLP = nn.Module:extend("FsdpMLP")
function MLP:init(i, h, o) self.fc1, self.fc2 = nn.Linear(i, h), nn.Linear(h, o) end
function MLP:forward(x) return self.fc2(self.fc1(x):tanh()) end
local Net = nn.Module:extend("FsdpNet")
function Net:init(ckpt)
  self.a, self.b, self.proj = MLP(5, 7, 3), MLP(3, 9, 2), nn.Linear(2, 1) -- 7, 9, 3 rows: uneven
  self.ckpt = ckpt
end
function Net:forward(x)
  local h = self.ckpt and dt.utils.checkpoint(function(t) return self.a(t) end, x) or self.a(x)
  return self.proj(self.b(h))
end

local function mesh1() return dt.init_device_mesh("cpu", {n}) end
local B = 3 -- rows of the batch per rank

local function models(opts, ckpt)
  dt.manual_seed(11)
  local ref = Net():double()
  local m = Net(ckpt):double()
  m:load_state_dict(ref:state_dict())
  local mesh = mesh1()
  P.fully_shard(m.a, mesh, opts)
  P.fully_shard(m.b, mesh, opts)
  P.fully_shard(m, mesh, opts)
  return ref, m
end

local function batch(step)
  dt.manual_seed(100 + step)
  local X = dt.randn(B * n, 5):double()
  return X, X:narrow(1, rank * B + 1, B)
end

local function train_equal(opts, ckpt)
  local ref, m = models(opts, ckpt)
  local opt_ref = dt.optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
  local opt = dt.optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
  for step = 1, 3 do
    local X, x = batch(step)
    local want = ref(X):pow(2):mean()
    want:backward()
    if ckpt then x = x:clone():requires_grad_() end -- the reentrant checkpoint needs an input that does
    local got = m(x):pow(2):mean() -- this rank's loss: gradients are averaged over dp
    got:backward()
    for _, np in ipairs(m:named_parameters()) do
      local g, w = np[2].grad:full_tensor(), ref:get_parameter(np[1]).grad
      assert.is_true(dt.allclose(g, w, {rtol = 1e-9, atol = 1e-12}), "step " .. step .. ": gradient of " .. np[1])
    end
    opt_ref:step(); opt:step(); opt_ref:zero_grad(); opt:zero_grad()
  end
  for name, t in pairs(m:state_dict()) do
    assert.is_true(dt.allclose(t:full_tensor(), ref:get_parameter(name), {rtol = 1e-9, atol = 1e-12}), name)
  end
  return m
end

describe("fully_shard", function()
  it("shards every parameter on dim 1 over dp (torch.chunk sizes); 3 SGD steps equal one device", function()
    local m = train_equal()
    local w = m.a.fc1.weight -- 7 rows
    assert.are.equal("Shard(1)", tostring(w.placements[1]))
    local c = (7 + n - 1) // n
    assert.are.equal(math.max(0, math.min(c, 7 - rank * c)), w:to_local():size()[1])
    assert.are.same({7, 5}, w:size())
  end)

  it("one all_gather per block forward; backward gathers again and reduce-scatters once per block", function()
    local _, m = models()
    local _, x = batch(1)
    local a = dt.comm_debug(function() dt.no_grad(function() return m.a(x) end) end) -- a block alone: one gather, nothing else
    assert.are.equal(one, a.all_gather)
    assert.are.equal(one, #a.ops)
    local y
    local fwd = dt.comm_debug(function() y = m(x) end)
    assert.are.equal(3 * one, fwd.all_gather) -- root, a, b
    assert.are.equal(0, fwd.reduce_scatter)
    local bwd = dt.comm_debug(function() y:sum():backward() end)
    assert.are.equal(2 * one, bwd.all_gather) -- a and b were freed after forward; the root was not
    assert.are.equal(3 * one, bwd.reduce_scatter)
    assert.are.equal(0, bwd.all_reduce)
    -- between steps only the shards live: the gathered buffers are released
    for _, mod in ipairs {m, m.a, m.b} do assert.is_true(rawget(mod, "_fsdp").full:_storage_released()) end
  end)

  it("prefetch: the next block's all_gather runs during a block's forward, the previous one's during its backward",
     function()
    local ref, m = models()
    local fsdp = function(mod) return rawget(mod, "_fsdp") end
    local seen = {}
    m.a.fc2:register_forward_hook(function() seen.fwd = fsdp(m.b).prefetched ~= nil end) -- inside a's compute
    m.b.fc1:register_forward_hook(function(_, _, out)
      out:register_hook(function() seen.bwd = fsdp(m.a).prefetched ~= nil end) -- inside b's backward
    end)
    for step = 1, 2 do -- the first forward records the blocks' order, the second prefetches by it
      m:zero_grad(); ref:zero_grad()
      local X, x = batch(step)
      local y
      local fwd = dt.comm_debug(function() y = m(x):pow(2):mean() end)
      local bwd = dt.comm_debug(function() y:backward() end)
      assert.are.equal(3 * one, fwd.all_gather) -- the counts prefetch leaves alone
      assert.are.equal(2 * one, bwd.all_gather)
      assert.are.equal(3 * one, bwd.reduce_scatter)
      ref(X):pow(2):mean():backward()
      for _, np in ipairs(m:named_parameters()) do
        local g, w = np[2].grad:full_tensor(), ref:get_parameter(np[1]).grad
        assert.is_true(dt.allclose(g, w, {rtol = 1e-9, atol = 1e-12}), "step " .. step .. ": gradient of " .. np[1])
      end
    end
    assert.is_true(seen.fwd, "b's gather in flight while a computes")
    assert.is_true(seen.bwd, "a's gather in flight while b's backward runs")
    for _, mod in ipairs {m, m.a, m.b} do
      assert.is_nil(fsdp(mod).prefetched)
      assert.is_true(fsdp(mod).full:_storage_released())
    end
  end)

  it("DTensor parameters (Replicate on dp) and a batch-sharded DTensor input: gradients summed", function()
    dt.manual_seed(3)
    local ref = MLP(5, 7, 3):double()
    local m = MLP(5, 7, 3):double()
    m:load_state_dict(ref:state_dict())
    local mesh = mesh1()
    dt.distribute_module(m, mesh) -- every parameter Replicate
    P.fully_shard(m, mesh)
    local X = dt.randn(B * n, 5):double()
    local x = dt.distribute_tensor(X, mesh, {dt.Shard(1)})
    local y = m(x)
    local c = dt.comm_debug(function() y:to_local():sum():backward() end) -- each rank its rows' sum
    -- every Partial gradient reaches fully_shard's node unreduced (keeps_partial; a weight's
    -- passes Linear's weight:t(), a view, which hands the Partial on) and goes in its one
    -- reduce_scatter: no all_reduce
    assert.are.equal(one, c.reduce_scatter)
    assert.are.equal(0, c.all_reduce)
    ref(X):sum():backward()
    for _, np in ipairs(m:named_parameters()) do
      assert.is_true(dt.allclose(np[2].grad:full_tensor(), ref:get_parameter(np[1]).grad, {rtol = 1e-9, atol = 1e-12}),
                     np[1])
    end
  end)

  it("reshard_after_forward = false keeps the gathered parameters until backward", function()
    local _, m = models({reshard_after_forward = false})
    local _, x = batch(1)
    local y = m(x)
    local bwd = dt.comm_debug(function() y:sum():backward() end)
    assert.are.equal(0, bwd.all_gather)
    assert.are.equal(3 * one, bwd.reduce_scatter)
    train_equal({reshard_after_forward = false})
  end)

  it("composes with activation checkpointing (the block recomputed in backward gathers there)", function()
    train_equal(nil, true)
  end)

  it("mp_policy: bfloat16 compute copies and float32 gradient reduction; parameters stay float32", function()
    dt.manual_seed(5)
    local ref = Net():float()
    local m = Net():float()
    m:load_state_dict(ref:state_dict())
    local mesh = mesh1()
    local seen = {}
    m.a.fc1:register_forward_pre_hook(function(sub) seen[#seen + 1] = sub.weight.dtype end)
    local mp = {mp_policy = {param_dtype = "bfloat16", reduce_dtype = "float32"}}
    P.fully_shard(m.a, mesh, mp); P.fully_shard(m.b, mesh, mp); P.fully_shard(m, mesh, mp)
    dt.manual_seed(7)
    local X = dt.randn(B * n, 5)
    local x = X:narrow(1, rank * B + 1, B)
    local y = dt.amp.autocast(function() return m(x) end, {dtype = "bfloat16"})
    local c = dt.comm_debug(function() y:float():pow(2):mean():backward() end)
    assert.are.same({"bfloat16"}, seen)
    for _, op in ipairs(c.ops) do
      if op.name == "reduce_scatter" then assert.are.equal(0, op.bytes % 4) end
    end
    ref(X):pow(2):mean():backward()
    for _, np in ipairs(m:named_parameters()) do
      assert.are.equal("float32", np[2].dtype)
      assert.are.equal("float32", np[2].grad.dtype)
      local g, w = np[2].grad:full_tensor(), ref:get_parameter(np[1]).grad
      assert.is_true(dt.allclose(g, w, {rtol = 0.05, atol = 0.02}), "gradient of " .. np[1])
    end
  end)

  it("each rank keeps about 1/N of the parameter bytes", function()
    local ref, m = models()
    local full = 0
    for _, p in ipairs(ref:parameters()) do full = full + p:numel() * p:element_size() end
    local mine = P.fully_shard_bytes(m) + P.fully_shard_bytes(m.a) + P.fully_shard_bytes(m.b)
    local all = dt.tensor({mine}):double()
    dt.distributed.all_reduce(all, "sum")
    assert.are.equal(full, all:item()) -- the shards cover the parameters once
    -- torch.chunk rows: at most one row per parameter more than an even split
    assert.is_true(mine <= full / n + 6 * 9 * 8, "rank " .. rank .. ": " .. mine .. " bytes of " .. full)
  end)

  it("bad input gives errors naming fully_shard", function()
    local mesh = mesh1()
    assert.has_error(function() P.fully_shard(dt.randn(2), mesh) end,
      "fully_shard: expected a dt.nn.Module, got a tensor")
    local m = MLP(2, 3, 1)
    P.fully_shard(m, mesh)
    assert.has_error(function() P.fully_shard(m, mesh) end, "fully_shard: the module (FsdpMLP) is sharded already")
    if n == 4 then
      local m2 = dt.init_device_mesh("cpu", {2, 2})
      assert.has_error(function() P.fully_shard(MLP(2, 3, 1), m2) end,
        "fully_shard: a 2-d mesh needs mesh_dim (the data-parallel dim: an index or a name)")
    end
    local lin = nn.Linear(4, 2)
    lin.weight = dt.distribute_tensor(lin.weight:detach(), mesh, {dt.Shard(1)})
    local ok, err = pcall(P.fully_shard, lin, mesh)
    assert.is_false(ok)
    assert.matches("fully_shard: parameter 'weight' has placements (Shard(1)): it must be Replicate on the " ..
                   "data-parallel dim 1", err, 1, true)
    assert.has_error(function() P.fully_shard(nn.Linear(2, 2), mesh, {bogus = 1}) end)
    assert.has_error(function() P.fully_shard(nn.Linear(2, 2), mesh, {mp_policy = {param_dtype = "int64"}}) end,
      "fully_shard: mp_policy.param_dtype must be a floating dtype, got int64")
  end)
end)

describe("storage release and refill", function()
  it("a released tensor refuses ops; _refill_ brings the values back without tripping autograd", function()
    local w = dt.randn(3, 4):double()
    local keep = w:clone()
    local x = dt.randn(2, 3):double():requires_grad_()
    local y = x:matmul(w) -- saves w for x's gradient
    w:_release_storage()
    assert.is_true(w:_storage_released())
    local ok, err = pcall(function() return w + 1 end)
    assert.is_false(ok)
    assert.matches("storage is released", err, 1, true)
    w:_refill_(keep)
    assert.is_false(w:_storage_released())
    assert.are.same(keep:totable(), w:totable())
    y:sum():backward() -- no "modified by an in-place operation" error
    assert.is_true(dt.allclose(x.grad, dt.ones(2, 4):double():matmul(keep:t())))
  end)
end)
