-- dt.parallel.data_parallel: a single-device training step, traced and analysed for its batch
-- dims, runs as a DTensor program over the world (1-4 ranks, threads and mpirun) and follows
-- the single-rank run: losses and parameters within 1e-9 in float64, with even, uneven and
-- smaller-than-the-world batches; gradients all-reduced in buckets; the analysis of the GPT
-- demo's step; errors for programs that are not data-parallel, on every rank.  From a
-- signature's third call the step replays as a graph: equal to the eager DTensor program
-- (bitwise where its all_reduces fold alike), its gradient all_reduces packed in buckets.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local gpt = dofile("examples/gpt_model.lua")
local n = dt.world_size()
local P = dt.parallel

local function mesh() return dt.init_device_mesh("cpu", {n}) end

local function close(a, b, what)
  assert.is_true(math.abs(a - b) <= 1e-9 * math.max(1, math.abs(a)), what .. ": " .. a .. " vs " .. b)
end

local function params_close(ma, mb)
  local pa, pb = ma:named_parameters(), mb:named_parameters()
  for i = 1, #pa do
    local d = (pa[i][2] - pb[i][2]):abs():max():item()
    assert.is_true(d <= 1e-9, pa[i][1] .. " differs by " .. d)
  end
end

-- an MLP step; reduction "mean" or "sum"; returns losses, the model and the runner
local function mlp_run(B, steps, dp, opts)
  opts = opts or {}
  dt.manual_seed(11)
  local model = dt.nn.Sequential(dt.nn.Linear(5, 7), dt.nn.Tanh(), dt.nn.Linear(7, 3)):to("float64")
  local opt = dt.optim.SGD(model:parameters(), {lr = 0.05})
  local function step(x, y, scale)
    opt:zero_grad()
    local d = model(x) - y
    local loss = opts.reduction == "sum" and (d * d):sum() * scale or (d * d):mean() * scale
    loss:backward()
    opt:step()
    return loss, 7
  end
  local x, y = dt.randn(B, 5):double(), dt.randn(B, 3):double()
  local f = dp and P.data_parallel(step, mesh(), {inputs = {1, 1}, bucket_cap_mb = opts.cap, replay = opts.replay}) or step
  local losses = {}
  for i = 1, steps do
    local l, seven = f(x, y, 0.5)
    assert.are.equal(7, seven)
    assert.is_false(l.device_mesh ~= nil) -- a plain tensor, as the single-device step returns
    losses[i] = l:item()
  end
  return losses, model, f
end

-- the GPT demo's model (examples/gpt_model.lua: embeddings, attention, LayerNorm, GELU,
-- dropout) with a cross-entropy loss and SGD
local function gpt_run(B, steps, dp, explain, replay)
  dt.manual_seed(5)
  local V, L = 11, 6
  local model = gpt.GPT(V, L, {width = 16, heads = 2, layers = 2, dropout = 0.1}):to("float64")
  local opt = dt.optim.SGD(model:parameters(), {lr = 0.1})
  local pos = dt.arange(1, L + 1):reshape(1, L)
  local function step(ids, target)
    opt:zero_grad()
    local logits = model(ids, pos)
    local loss = dt.F.cross_entropy(logits:reshape(-1, V), target:reshape(-1))
    loss:backward()
    opt:step()
    return loss
  end
  local ids, target = dt.randint(1, V + 1, {B, L}), dt.randint(1, V + 1, {B, L})
  if explain then
    local print0 = _G.print
    _G.print = function() end -- explain_batch_dims prints the text it returns
    local ok, text = pcall(P.explain_batch_dims, step, ids, target)
    _G.print = print0
    assert(ok, text)
    return text
  end
  local f = dp and P.data_parallel(step, mesh(), {replay = replay}) or step
  local losses = {}
  for i = 1, steps do losses[i] = f(ids, target):item() end
  return losses, model, f
end

-- replay's all_reduces fold as eager's: the threads backend in rank order, two ranks alike;
-- MPI's float sums over more ranks may depend on the buffer (eager packs what replay does not)
local exact = dt.backend() == "threads" or n <= 2

local function same_numbers(a, b, what)
  for i = 1, #a do
    if exact then assert.are.equal(a[i], b[i], what .. " step " .. i) else close(a[i], b[i], what .. " step " .. i) end
  end
end

local function same_params(ma, mb, what)
  local pa, pb = ma:named_parameters(), mb:named_parameters()
  for i = 1, #pa do
    if exact then assert.is_true(H.same(pa[i][2], pb[i][2]), what .. ": " .. pa[i][1])
    else assert.is_true((pa[i][2] - pb[i][2]):abs():max():item() <= 1e-12, what .. ": " .. pa[i][1]) end
  end
end

-- a Linear's step (SGD, mean of squares) that calls after(loss) at its end; and the Linear
local function linear_step(seed, after)
  dt.manual_seed(seed)
  local lin = dt.nn.Linear(3, 2):to("float64")
  local opt = dt.optim.SGD(lin:parameters(), {lr = 0.1})
  return function(x)
    opt:zero_grad()
    local loss = lin(x):pow(2):mean()
    loss:backward()
    opt:step()
    after(loss)
    return loss
  end, lin
end

describe("dt.parallel.data_parallel", function()
  it("trains an MLP like one device on even, uneven and small batches", function()
    local g = H.prng(77)
    for _, B in ipairs {4 * n, 2 * n + 1, n > 1 and n - 1 or 1, g.int(1, 13)} do
      for _, reduction in ipairs {"mean", "sum"} do
        local a, ma = mlp_run(B, 4, false, {reduction = reduction})
        local b, mb, f = mlp_run(B, 4, true, {reduction = reduction})
        for i = 1, #a do close(a[i], b[i], "batch " .. B .. " " .. reduction .. " step " .. i) end
        params_close(ma, mb)
        local s = f:stats()
        assert.are.equal(1, s.traces) -- the first call traces, the others run on DTensors
        assert.are.equal(3, s.distributed_calls)
      end
    end
  end)

  it("takes an empty batch", function()
    local a, ma = mlp_run(0, 2, false, {reduction = "sum"})
    local b, mb, f = mlp_run(0, 2, true, {reduction = "sum"})
    assert.are.same({0, 0}, a)
    assert.are.same(a, b)
    params_close(ma, mb)
    assert.are.equal(1, f:stats().distributed_calls)
  end)

  it("all-reduces the gradients in buckets", function()
    local _, model, f = mlp_run(2 * n + 1, 1, true)
    local x, y = dt.randn(2 * n + 1, 5):double(), dt.randn(2 * n + 1, 3):double()
    local c = dt.comm_debug(function() f(x, y, 1) end)
    local bytes = 0
    for _, p in ipairs(model:parameters()) do bytes = bytes + p:numel() * 8 end
    local flat = 0
    for _, op in ipairs(c.ops) do
      if op.name == "all_reduce" and op.bytes == bytes and op.group_size == n then flat = flat + 1 end
    end
    assert.are.equal(n > 1 and 1 or 0, flat) -- one bucket (25 MB) holds the four gradients
    -- a small cap: one bucket per parameter (4 all_reduces of the gradients' sizes)
    local _, _, f2 = mlp_run(2 * n + 1, 1, true, {cap = 1e-6})
    local c2 = dt.comm_debug(function() f2(x, y, 1) end)
    local sizes = {}
    for _, op in ipairs(c2.ops) do if op.name == "all_reduce" then sizes[op.bytes] = (sizes[op.bytes] or 0) + 1 end end
    if n > 1 then
      for _, b in ipairs {7 * 5 * 8, 7 * 8, 3 * 7 * 8, 3 * 8} do assert.is_true((sizes[b] or 0) >= 1, "no bucket of " .. b .. " bytes") end
    end
  end)

  it("explains the batch dim of every node of the GPT demo's step", function()
    local text = gpt_run(n + 1, 1, false, true)
    local lines = {}
    for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.is_true(#lines > 100)
    assert.is_truthy(lines[#lines]:find("^  return %%%d+$"), lines[#lines])
    for i = 2, #lines - 1 do
      local l = lines[i]
      assert.is_truthy(l:find("batch dim %d") or l:find("partial %(reduced over the batch%)") or
                       l:find("replicate %(batch%-independent%)") or l:find("%.grad"), l)
      assert.is_truthy(l:find("%-%- [^ ]+:%d+$"), l) -- its Lua line
    end
    assert.is_truthy(text:find("embedding%(%%%d+, %%%d+%)  {" .. (n + 1) .. ",6,16}  batch dim 1"))
    assert.is_truthy(text:find("cross_entropy%([^)]*%)  {}  partial"))
    assert.is_truthy(text:find("scaled_dot_product_attention%([^)]*%)  {" .. (n + 1) .. ",2,6,8}  batch dim 1"))
    assert.is_truthy(text:find("set_grad%([^)]*%)  %.grad set: the gradient all%-reduced"))
  end)

  it("takes a non-batched argument and a batch dim other than the first", function()
    dt.manual_seed(3)
    local w = dt.randn(4, 2):double():requires_grad_()
    local holder = dt.nn.Module()
    holder:register_parameter("w", w)
    local function step(x, bias)
      w.grad = nil -- the plain parameter (through the module, a step on DTensors reads its replica)
      local loss = (x:t():matmul(holder.w) + bias):pow(2):mean() -- x is {features, batch}
      loss:backward()
      return loss, w.grad:clone()
    end
    local B = 2 * n + 1
    local x, bias = dt.randn(4, B):double():t():contiguous():t(), dt.randn(2):double()
    local l1, g1 = step(x, bias)
    local f = P.data_parallel(step, mesh(), {batch_dim = 2, inputs = {2, false}})
    f(x, bias)
    local l2, g2 = f(x, bias)
    close(l1:item(), l2:item(), "loss")
    assert.is_true((g1 - g2):abs():max():item() <= 1e-9)
  end)

  it("refuses a program that mixes batch rows, naming the op and the line", function()
    local function gram(x) return (x:matmul(x:t())):sum() end -- the batch in two dims
    local ok, err = pcall(P.data_parallel(gram, mesh()), dt.randn(3, 2))
    assert.is_false(ok)
    assert.is_truthy(err:find("data_parallel: matmul at .*data_parallel_spec.lua:%d+: its operands put the batch in different dims"), err)
    local function smax(x) return x:softmax(1):sum() end
    ok, err = pcall(P.data_parallel(smax, mesh()), dt.randn(3, 2))
    assert.is_truthy(err:find("data_parallel: softmax at .*: it works along the batch dim %(dim 1%)"), err)
    local function interleave(x) return x:t():reshape(-1):sum() end -- {2, B} -> {2B}: samples interleave
    ok, err = pcall(P.data_parallel(interleave, mesh()), dt.randn(3, 2))
    assert.is_truthy(err:find("data_parallel: reshape at .*: the batch %(dim 2 of {2,3}%) is merged with the dims before it"), err)
    -- x:t() @ x and x:t() @ c sum over the batch's rows: data-parallel (a Partial), as a Linear's weight gradient
    local c = dt.randn(2 * n + 1, 2):double()
    local function cov(x) return x:t():matmul(x), x:t():matmul(c) end
    local x = dt.randn(2 * n + 1, 3):double()
    local f = P.data_parallel(cov, mesh())
    f(x)
    local a1, a2 = f(x)
    local b1, b2 = cov(x)
    assert.is_true((a1 - b1):abs():max():item() <= 1e-12)
    assert.is_true((a2 - b2):abs():max():item() <= 1e-12)
    assert.are.equal(1, f:stats().distributed_calls)
  end)

  it("replicates a parameter tied into two modules once", function()
    local function run(dp)
      dt.manual_seed(9)
      local a, b = dt.nn.Linear(3, 3):to("float64"), dt.nn.Linear(3, 3):to("float64")
      b.weight = a.weight -- tied
      local opt = dt.optim.SGD({a.weight, a.bias, b.bias}, {lr = 0.1})
      local function step(x)
        opt:zero_grad()
        local loss = b(a(x):tanh()):pow(2):mean()
        loss:backward()
        opt:step()
        return loss
      end
      local f = dp and P.data_parallel(step, mesh()) or step
      local x = dt.randn(2 * n + 1, 3):double()
      local out = {}
      for i = 1, 3 do out[i] = f(x):item() end
      assert.are.equal(a.weight, b.weight)
      return out, a.weight
    end
    local l1, w1 = run(false)
    local l2, w2 = run(true)
    for i = 1, 3 do close(l1[i], l2[i], "tied step " .. i) end
    assert.is_true((w1 - w2):abs():max():item() <= 1e-9)
  end)

  it("refuses a parameter read without its module", function()
    local lin = dt.nn.Linear(3, 1):to("float64")
    local weight = lin.weight
    local function step(x)
      local loss = (lin(x) + x:matmul(weight:t())):mean() -- the weight through the module, then directly
      loss:backward()
      return loss
    end
    local f = P.data_parallel(step, mesh())
    local x = dt.randn(2 * n + 1, 3):double()
    f(x)
    H.fails("data_parallel: parameter 'weight' got a gradient as a plain tensor", f, x)
  end)

  it("replays later calls equal to the eager DTensor program (MLP mean/sum losses; even, uneven, small batches)", function()
    local g = H.prng(91)
    for _, B in ipairs {4 * n, 2 * n + 1, n > 1 and n - 1 or 1, g.int(0, 13)} do
      for _, reduction in ipairs {"mean", "sum"} do
        local what = "batch " .. B .. " " .. reduction
        local a, ma, fa = mlp_run(B, 6, true, {reduction = reduction})
        local b, mb, fb = mlp_run(B, 6, true, {reduction = reduction, replay = false})
        same_numbers(a, b, what)
        same_params(ma, mb, what)
        local sa, sb = fa:stats(), fb:stats()
        assert.are.same({traces = 1, distributed_calls = 5, replayed_calls = 4, graphs = 1}, sa) -- the 2nd call eager, then the graph
        assert.are.same({traces = 1, distributed_calls = 5, replayed_calls = 0, graphs = 0}, sb)
        local c, r = mlp_run(B, 6, false, {reduction = reduction}) -- one device
        for i = 1, #c do close(c[i], a[i], what .. " vs one device, step " .. i) end
        params_close(r, ma)
      end
    end
  end)

  it("trains the GPT demo's model like one device (dropout, uneven batch), replayed equal to eager", function()
    for _, B in ipairs {2 * n, n + 1} do
      local a, ma, fa = gpt_run(B, 5, true)
      local b, mb = gpt_run(B, 5, true, false, false)
      same_numbers(a, b, "gpt batch " .. B)
      same_params(ma, mb, "gpt batch " .. B)
      assert.are.equal(3, fa:stats().replayed_calls)
      local c, mc = gpt_run(B, 5, false)
      for i = 1, #c do close(c[i], a[i], "gpt batch " .. B .. " vs one device, step " .. i) end
      params_close(mc, ma)
    end
  end)

  it("packs the replayed gradient all_reduces into buckets (comm_debug, dp:graph())", function()
    local B = 2 * n + 1
    local _, model, f = mlp_run(B, 3, true) -- traced, eager, recorded
    local x, y = dt.randn(B, 5):double(), dt.randn(B, 3):double()
    local bytes = 0
    for _, p in ipairs(model:parameters()) do bytes = bytes + p:numel() * 8 end
    local function grad_all_reduces(c)
      local sizes, total = {}, 0
      for _, op in ipairs(c.ops) do
        if op.name == "all_reduce" and op.bytes ~= 8 then sizes[#sizes + 1], total = op.bytes, total + op.bytes end
      end
      return sizes, total
    end
    local c = dt.comm_debug(function() f(x, y, 0.5) end) -- the scale of the recorded calls (a constant of the graph)
    assert.are.equal(2, f:stats().replayed_calls) -- the 3rd call recorded, this one replayed
    local sizes, total = grad_all_reduces(c)
    if exact then -- the four gradients in one all_reduce (dt.compile packs MPI float sums over 3+ ranks apart)
      assert.are.same(n > 1 and {bytes} or {}, sizes)
    elseif n > 1 then
      assert.are.same({4, bytes}, {#sizes, total})
    end
    local text = f:graph({file = os.tmpname()})
    assert.is_truthy(text:find("from_local%(%%%d+%)"))
    if n > 1 then
      assert.is_truthy(text:find(exact and "(all_reduce #1: starts, packed)" or "(all_reduce #1: starts)", 1, true), text)
      assert.is_truthy(text:find("(waits for all_reduce #1)", 1, true), text)
    end
    -- a small cap: one all_reduce per gradient, the same bytes
    local _, _, f2 = mlp_run(B, 3, true, {cap = 1e-6})
    local sizes2, total2 = grad_all_reduces(dt.comm_debug(function() f2(x, y, 0.5) end))
    if n > 1 then
      assert.are.equal(4, #sizes2)
      assert.are.equal(bytes, total2)
    end
    assert.is_truthy(f2:explain():find("\nreplay: on", 1, true))
  end)

  it("runs eagerly when replay is off or the step reads values into Lua, and says why", function()
    local _, _, f = mlp_run(n + 1, 4, true, {replay = false})
    assert.are.equal(0, f:stats().replayed_calls)
    assert.is_truthy(f:explain():find("replay: off: the option replay = false", 1, true))
    H.fails("graph: no replayed graph yet (replay: off: the option replay = false)", f.graph, f)
    local seen = {}
    local step = linear_step(4, function(loss) seen[#seen + 1] = loss:item() end) -- a value read into Lua: a graph cannot replay it
    local x = dt.randn(2 * n + 1, 3):double()
    local dp = P.data_parallel(step, mesh())
    for _ = 1, 4 do dp(x) end
    assert.are.equal(4, #seen)
    assert.are.equal(0, dp:stats().replayed_calls)
    assert.is_truthy(dp:explain():find("replay: off: the step does t:item%(%) %(.*%) at .*data_parallel_spec.lua:%d+"), dp:explain())
  end)

  it("records a new graph when a schedule changes a Lua-number learning rate (never a stale value)", function()
    local function run(dp, tensor_lr)
      dt.manual_seed(12)
      local lr = tensor_lr and dt.tensor(0.05, {dtype = "float64"}) or 0.05 -- the scheduler writes a tensor in place
      local model = dt.nn.Sequential(dt.nn.Linear(4, 6), dt.nn.Tanh(), dt.nn.Linear(6, 2)):to("float64")
      local opt = dt.optim.AdamW(model:parameters(), {lr = lr})
      local sched = dt.optim.lr_scheduler.StepLR(opt, 2, 0.5) -- halves the lr every second step
      local step = require("tests.spec.support.spec_helpers").mse_step(model, opt)
      local f = dp and P.data_parallel(step, mesh()) or step
      local x, y = dt.randn(2 * n + 1, 4):double(), dt.randn(2 * n + 1, 2):double()
      local out = {}
      for i = 1, 8 do out[i] = f(x, y):item(); sched:step() end
      return out, model, f
    end
    for _, tensor_lr in ipairs {false, true} do
      local a, ma = run(false, tensor_lr)
      local b, mb, f = run(true, tensor_lr)
      for i = 1, #a do close(a[i], b[i], "scheduled step " .. i) end
      params_close(ma, mb)
      local s = f:stats()
      assert.are.equal(6, s.replayed_calls)
      -- a number lr is a graph constant: calls 3-4, 5-6, 7-8 each record one; a tensor lr is read at each replay
      assert.are.equal(tensor_lr and 1 or 3, s.graphs)
    end
  end)

  it("keeps the results of a step whose capture is refused after it ran (state kept in Lua)", function()
    local function run(replay)
      local kept = {}
      local step, lin = linear_step(8, function(loss) kept.last = loss * 1 end) -- a graph-made tensor held in Lua state
      local dp = P.data_parallel(step, mesh(), {replay = replay})
      local x = dt.randn(2 * n + 1, 3):double()
      local out = {}
      for i = 1, 5 do out[i] = dp(x):item() end
      return out, lin.weight, dp
    end
    local a, wa, dp = run(true)
    local b, wb = run(false)
    same_numbers(a, b, "kept state")
    assert.is_true(exact and H.same(wa, wb) or (wa - wb):abs():max():item() <= 1e-12)
    assert.are.equal(0, dp:stats().replayed_calls)
    assert.is_truthy(dp:explain():find("replay: off: dt.compile refused the step after it ran", 1, true), dp:explain())
  end)

  it("checks its arguments", function()
    H.fails("data_parallel: expected a step function, got number", P.data_parallel, 1, mesh())
    H.fails("data_parallel: batch_dim must be an integer dim (1-based), got x", P.data_parallel, print, mesh(), {batch_dim = "x"})
    H.fails("data_parallel: unknown option", P.data_parallel, print, mesh(), {batch = 1})
    H.fails("inputs[1] must be a batch dim (an integer) or false, got true", P.data_parallel, print, mesh(), {inputs = {true}})
    H.fails("data_parallel: replay must be a boolean, got 1", P.data_parallel, print, mesh(), {replay = 1})
    local f = P.data_parallel(function(x) return x:sum() end, mesh(), {batch_dim = 3})
    H.fails("data_parallel: batch dim 3 of argument 1 is out of range for its shape {2,2}", f, dt.ones(2, 2))
    local d = dt.distribute_tensor(dt.ones(2, 2), mesh(), {dt.Replicate()})
    H.fails("data_parallel: argument 1 is a DTensor", P.data_parallel(function(x) return x end, mesh()), d)
    if n > 1 then
      local m2 = dt.init_device_mesh("cpu", {n // 2 * 2 == n and 2 or 1, n // 2 * 2 == n and n // 2 or n})
      if m2.ndim == 2 then H.fails("data_parallel: expects a 1-d mesh", P.data_parallel, print, m2) end
    end
  end)
end)
