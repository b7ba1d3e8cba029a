-- dt.compile of the GPT demo's whole training step (examples/gpt_model.lua, as
-- examples/train_gpt.lua runs it: token and position embeddings, dropout, cross_entropy with
-- ignored targets, backward, clip_grad_norm_, AdamW with a tensor lr that a cosine schedule
-- writes between steps) on this world's dp x tp mesh: one graph, replayed bitwise equal to
-- eager (losses and parameters); ids and targets are checked at every replay, with the
-- eager error on every rank.
local gpt = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "../../examples/gpt_model.lua")
local F = dt.nn.functional
local R, S = dt.Replicate(), dt.Shard

local n = dt.world_size()
local dp, tp = 1, n
if n == 4 then dp, tp = 2, 2 elseif n == 3 then dp, tp = 3, 1 end
local V, L, B = 11, 8, 6 -- 6 rows over dp 4 or 3 or 2: even and uneven
local mesh = dt.init_device_mesh("cpu", {dp, tp}, {"dp", "tp"})
local pos = dt.distribute_tensor(dt.arange(1, L + 1):reshape(1, L), mesh, {R, R})
local on_mesh = {device_mesh = mesh, placements = {S(1), R}}

-- a model, its AdamW with a float64 tensor lr and its schedule, all alike for each copy
local function copy(dtype)
  dt.manual_seed(1)
  local model = gpt.GPT(V, L, {layers = 2, width = 16, heads = 2, dropout = 0.1}):to(dtype)
  dt.distribute_module(model, mesh, gpt.partition)
  local opt = dt.optim.AdamW(model:parameters(), {lr = dt.tensor(3e-3, {dtype = "float64"}), weight_decay = 0.01})
  local sched = dt.optim.lr_scheduler.cosine_with_warmup(opt, 2, 8, 3e-4)
  return {model = model, step = gpt.train_step(model, opt, pos), sched = sched}
end

local function batch(seed, bad_id, bad_target)
  dt.manual_seed(seed)
  local x = dt.randint(1, V + 1, {B, L}, on_mesh)
  local y = dt.randint(1, V + 1, {B, L}, on_mesh):masked_fill(pos:le(L // 2), -100) -- the first half ignored
  if bad_id then x = x:masked_fill(pos:eq(L), bad_id) end
  if bad_target then y = y:masked_fill(pos:eq(L), bad_target) end
  return x, y
end

local function same_params(a, b)
  local pa, pb = a.model:parameters(), b.model:parameters()
  for i = 1, #pa do
    assert.is_true(dt.equal(pa[i]:to_local(), pb[i]:to_local()), "parameter " .. i)
    assert.are.equal(tostring(pa[i].placements[2]), tostring(pb[i].placements[2]))
  end
end

describe("dt.compile of the GPT demo's training step", function()
  for _, dtype in ipairs {"float32", "float64"} do
    it(dtype .. ": one graph, replayed bitwise equal to eager over steps with a changing lr (mesh " .. dp .. "x" .. tp .. ")", function()
      local e, c = copy(dtype), copy(dtype)
      local compiled
      for i = 1, 6 do
        local x, y = batch(100 + i)
        dt.manual_seed(200 + i)
        local a = e.step(x, y)
        dt.manual_seed(200 + i)
        local b = (compiled or c.step)(x, y)
        assert.is_true(dt.equal(a:to_local(), b:to_local()), "loss of step " .. i)
        e.sched:step(); c.sched:step()
        if i == 1 then compiled = dt.compile(c.step) end -- AdamW's state exists after one eager step
      end
      same_params(e, c)
      local st = compiled:stats()
      assert.are.equal(1, st.graphs)
      assert.are.equal(4, st.replays)
      assert.is_true(st.per_graph[1].nodes > 100)
    end)
  end

  it("checks the ids and targets of every replay: the eager error on every rank, and the graph still replays", function()
    local e, c = copy("float32"), copy("float32")
    local x, y = batch(1)
    dt.manual_seed(8); e.step(x, y)
    dt.manual_seed(8); c.step(x, y)
    local compiled = dt.compile(c.step)
    dt.manual_seed(9); compiled(batch(2))
    dt.manual_seed(9); e.step(batch(2))
    for _, case in ipairs {{V + 1, nil, "embedding: id 12 out of range for vocab size 11 %(ids are 1%-based: 1..11%)"},
                           {0, nil, "embedding: id 0 out of range for vocab size 11"},
                           {nil, V + 3, "cross_entropy: target 14 out of range for 11 classes %(targets are 1%-based: 1..11%)"},
                           {nil, -1, "cross_entropy: target %-1 out of range for 11 classes"}} do
      local bx, by = batch(3, case[1], case[2])
      local ok, err = pcall(compiled, bx, by)
      assert.is_false(ok, case[3])
      assert.matches(case[3], tostring(err))
      local eok, eerr = pcall(e.step, bx, by)
      assert.is_false(eok)
      assert.matches(case[3], tostring(eerr))
    end
    for i = 4, 5 do
      local bx, by = batch(i)
      dt.manual_seed(i)
      local a = e.step(bx, by)
      dt.manual_seed(i)
      assert.is_true(dt.equal(a:to_local(), compiled(bx, by):to_local()), "after the errors, step " .. i)
    end
    same_params(e, c)
    assert.are.equal(1, compiled:stats().graphs)
  end)

  it("plain tensors: embedding and cross_entropy ids are graph nodes, checked at each replay", function()
    local w = dt.randn(V, 4)
    local f = dt.compile(function(ids, t)
      return F.cross_entropy(F.embedding(ids, w):matmul(dt.ones(4, V)), t, {ignore_index = 0})
    end)
    local ids = dt.randint(1, V + 1, {5})
    local t = dt.tensor({1, 0, 11, 3, 0}, {dtype = "int64"})
    local want = F.cross_entropy(F.embedding(ids, w):matmul(dt.ones(4, V)), t, {ignore_index = 0})
    f(ids, t)
    assert.is_true(dt.equal(want, f(ids, t)))
    assert.matches("embedding: id 12 out of range for vocab size 11", select(2, pcall(f, ids:masked_fill(ids:eq(ids[1]), 12), t)))
    assert.matches("cross_entropy: target 12 out of range for 11 classes",
                   select(2, pcall(f, ids, dt.tensor({1, 0, 12, 3, 0}, {dtype = "int64"}))))
    assert.is_true(dt.equal(want, f(ids, t)))
    assert.are.equal(1, f:stats().graphs)
    local path = os.tmpname()
    f:graph({file = path})
    local text = io.open(path):read("a")
    os.remove(path)
    assert.matches("ids_to_zero_based%(%%0, %[11, 0, 0, 0%]%)", text) -- the ids' check, then embedding
    assert.matches("ids_to_zero_based%(%%1, %[11, 1, 0, 1%]%)", text) -- the targets', ignore_index passing
  end)
end)
