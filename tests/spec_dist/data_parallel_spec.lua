-- dt.parallel.data_parallel: a single-device training step, traced and analysed for its batch
-- dims, runs as a DTensor program over the world (1-4 ranks, threads and mpirun) and follows
-- the single-rank run: losses and parameters within 1e-9 in float64, with even, uneven and
-- smaller-than-the-world batches; gradients all-reduced in buckets; the analysis of the GPT
-- demo's step; errors for programs that are not data-parallel, on every rank.
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
  local f = dp and P.data_parallel(step, mesh(), {inputs = {1, 1}, bucket_cap_mb = opts.cap}) or step
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
local function gpt_run(B, steps, dp, explain)
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
  local f = dp and P.data_parallel(step, mesh()) or step
  local losses = {}
  for i = 1, steps do losses[i] = f(ids, target):item() end
  return losses, model, f
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

  it("trains the GPT demo's model like one device (dropout, uneven batch)", function()
    for _, B in ipairs {2 * n, n + 1} do
      local a, ma = gpt_run(B, 3, false)
      local b, mb = gpt_run(B, 3, true)
      for i = 1, #a do close(a[i], b[i], "gpt batch " .. B .. " step " .. i) end
      params_close(ma, mb)
    end
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

  it("checks its arguments", function()
    H.fails("data_parallel: expected a step function, got number", P.data_parallel, 1, mesh())
    H.fails("data_parallel: batch_dim must be an integer dim (1-based), got x", P.data_parallel, print, mesh(), {batch_dim = "x"})
    H.fails("data_parallel: unknown option", P.data_parallel, print, mesh(), {batch = 1})
    H.fails("inputs[1] must be a batch dim (an integer) or false, got true", P.data_parallel, print, mesh(), {inputs = {true}})
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
