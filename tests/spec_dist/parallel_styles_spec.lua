-- Tensor and data parallelism over dt.nn modules, SPMD (dtlua -n 1..4, mpirun -np 2/4;
-- doc/parallel.md): each parallel style alone on a small module -- the parameters' and the
-- output's placements, forward and gradients against the same module on one device, the
-- collectives of each layer (dt.comm_debug) -- then plan keys with wildcards,
-- distribute_module, loss_parallel, and replicate (data parallel) on a 1-d mesh and on the dp
-- dim of a 2-d dp x tp mesh, trained 5 SGD steps against one device on the whole batch.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local nn, P = dt.nn, dt.parallel
local R, S = dt.Replicate, dt.Shard
local F64 = {dtype = "float64"}
local one = n > 1 and 1 or 0 -- a collective over a mesh dim of size 1 is skipped
local D = 12 -- features, vocab, sequence: divisible by every world size here (even shards)

local function mesh1() return dt.init_device_mesh("cpu", {n}) end

-- the collectives f issued, by name (only those used), and their total
local function comm(f)
  local c = dt.comm_debug(f)
  local used = {}
  for _, op in ipairs(c.ops) do used[op.name] = (used[op.name] or 0) + 1 end
  return used, #c.ops, c
end

-- expected counts: {all_reduce = 1, ...} with every count multiplied by `one`
local function counts(t)
  local out = {}
  for k, v in pairs(t) do if v * one > 0 then out[k] = v * one end end
  return out
end

local function full(t) return dt.is_dtensor(t) and t:full_tensor() or t end

local function close(got, want, what, tol)
  got = full(got)
  assert.are.same(want:size(), got:size(), what)
  local err = want:numel() == 0 and 0 or (got - want):abs():max():item()
  assert(err <= (tol or 1e-12) * (1 + want:abs():max():item()), what .. ": max error " .. err)
end

-- two modules made alike (the same draws): one for the mesh, one on one device
local function twin(make)
  dt.manual_seed(1234)
  local ref = make()
  dt.manual_seed(1234)
  return ref, make()
end

-- every parameter's gradient (gathered) equals the reference's; placements as listed by name
local function grads_match(m, ref, placements, what)
  local want = {}
  for _, np in ipairs(ref:named_parameters()) do want[np[1]] = np[2].grad end
  for _, np in ipairs(m:named_parameters()) do
    local name, p = np[1], np[2]
    assert(p.grad, what .. ": " .. name .. " has no gradient")
    if placements and placements[name] then
      assert.are.equal(H.placement_string(placements[name]), H.placement_string(p.grad.placements), what .. " " .. name)
    end
    close(p.grad, want[name], what .. ": gradient of " .. name)
  end
end

local function placements_of(m)
  local out = {}
  for _, np in ipairs(m:named_parameters()) do
    out[np[1]] = dt.is_dtensor(np[2]) and H.placement_string(np[2].placements) or "plain"
  end
  return out
end

local function my_chunk(x, dim) return x:chunk(n, dim)[rank + 1] end

describe("ColwiseParallel", function()
  it("Linear: weight and bias Shard(1); a replicated input gives this rank's output features, locally", function()
    local mesh = mesh1()
    local ref, m = twin(function() return nn.Linear(D, D, F64) end)
    P.parallelize_module(m, mesh, P.ColwiseParallel())
    assert.are.same({weight = "{Shard(1)}", bias = "{Shard(1)}"}, placements_of(m))
    local X = H.values({4, D}, "float64")
    local x, xr = X:clone():requires_grad_(), X:clone():requires_grad_()
    local y
    local used = comm(function() y = m(x) end)
    assert.are.same({}, used) -- the input is replicated already
    assert.is_false(dt.is_dtensor(y)) -- use_local_output
    local want = ref(xr)
    close(y, my_chunk(want, 2), "this rank's output columns")
    -- each rank's loss is its columns' part of the whole loss; their sum is one device's
    want:pow(2):sum():backward()
    used = comm(function() y:pow(2):sum():backward() end)
    assert.are.same(counts {all_reduce = 1}, used) -- the input's gradient: the ranks' contributions summed
    close(x.grad, xr.grad, "input gradient")
    grads_match(m, ref, {weight = {S(1)}, bias = {S(1)}}, "Colwise Linear")
  end)

  it("use_local_output = false gives the DTensor (Shard(-1)); output_layouts = Replicate gathers it", function()
    local mesh = mesh1()
    local X = H.values({3, 2, D}, "float64")
    local ref, m = twin(function() return nn.Linear(D, D, F64) end)
    P.parallelize_module(m, mesh, P.ColwiseParallel {use_local_output = false})
    local y = m(X)
    assert.is_true(dt.is_dtensor(y))
    assert.are.equal("{Shard(3)}", H.placement_string(y.placements))
    close(y, ref(X), "DTensor output")
    local _, g = twin(function() return nn.Linear(D, D, F64) end)
    P.parallelize_module(g, mesh, P.ColwiseParallel {output_layouts = R()})
    local used = comm(function() y = g(X) end)
    assert.are.same(counts {all_gather = 1}, used)
    close(y, ref(X), "gathered output")
  end)

  it("Embedding: weight Shard(2) (the embedding dim); the output's last dim sharded", function()
    local mesh = mesh1()
    local ref, m = twin(function() return nn.Embedding(D, D, F64) end)
    P.parallelize_module(m, mesh, P.ColwiseParallel {use_local_output = false})
    assert.are.same({weight = "{Shard(2)}"}, placements_of(m))
    local ids = dt.tensor({{1, 5, 12}, {7, 7, 2}})
    local y
    local used = comm(function() y = m(ids) end)
    assert.are.same({}, used)
    assert.are.equal("{Shard(3)}", H.placement_string(y.placements))
    local want = ref(ids)
    close(y, want, "embedding output")
    local G = H.values({2, 3, D}, "float64")
    want:backward(G)
    y:backward(H.dist(G, mesh, {S(3)}))
    grads_match(m, ref, {weight = {S(2)}}, "Colwise Embedding")
  end)
end)

describe("RowwiseParallel", function()
  it("Linear: weight Shard(2), bias Replicate; this rank's input features in, the reduced output out", function()
    local mesh = mesh1()
    local ref, m = twin(function() return nn.Linear(D, D, F64) end)
    P.parallelize_module(m, mesh, P.RowwiseParallel())
    assert.are.same({weight = "{Shard(2)}", bias = "{Replicate()}"}, placements_of(m))
    local X = H.values({4, D}, "float64")
    local x, xr = my_chunk(X, 2):clone():requires_grad_(), X:clone():requires_grad_()
    local y
    local used = comm(function() y = m(x) end)
    assert.are.same(counts {all_reduce = 1}, used) -- the Partial sum of the ranks' products
    assert.is_false(dt.is_dtensor(y))
    local want = ref(xr)
    close(y, want, "output")
    want:pow(2):sum():backward()
    used = comm(function() y:pow(2):sum():backward() end)
    assert.are.same({}, used) -- every gradient is local: the input's and the weight's shards, the bias whole
    close(x.grad, my_chunk(xr.grad, 2), "input gradient")
    grads_match(m, ref, {weight = {S(2)}, bias = {R()}}, "Rowwise Linear")
  end)

  it("Embedding: weight Shard(1) (the vocab); replicated ids, each rank looks up its rows; one all_reduce", function()
    local mesh = mesh1()
    local ref, m = twin(function() return nn.Embedding(D, 4, F64) end)
    P.parallelize_module(m, mesh, P.RowwiseParallel())
    assert.are.same({weight = "{Shard(1)}"}, placements_of(m))
    local ids = dt.tensor({{1, 5, 12}, {7, 7, 2}})
    local y
    local used = comm(function() y = m(ids) end)
    assert.are.same(counts {all_reduce = 1}, used)
    local want = ref(ids)
    close(y, want, "embedding output")
    want:pow(2):sum():backward()
    used = comm(function() y:pow(2):sum():backward() end)
    assert.are.same({}, used)
    grads_match(m, ref, {weight = {S(1)}}, "Rowwise Embedding")
  end)
end)

-- fc1 -> relu -> fc2
local MLP = nn.Module:extend("MLP")
function MLP:init(bias)
  self.fc1 = nn.Linear(D, 2 * D, {dtype = "float64", bias = bias})
  self.fc2 = nn.Linear(2 * D, D, {dtype = "float64", bias = bias})
end
function MLP:forward(x) return self.fc2(self.fc1(x):relu()) end

describe("ColwiseParallel then RowwiseParallel (an MLP)", function()
  it("one all_reduce forward (in fc2), one backward (the input's gradient, in fc1)", function()
    local mesh = mesh1()
    local ref, m = twin(function() return MLP(true) end)
    P.parallelize_module(m, mesh, {fc1 = P.ColwiseParallel(), fc2 = P.RowwiseParallel()})
    local X = H.values({2, 3, D}, "float64")
    local x, xr = X:clone():requires_grad_(), X:clone():requires_grad_()
    local h, y
    local used1 = comm(function() h = m.fc1(x):relu() end)
    local used2 = comm(function() y = m.fc2(h) end)
    assert.are.same({}, used1)
    assert.are.same(counts {all_reduce = 1}, used2)
    local want = ref(xr)
    close(y, want, "MLP output")
    close(m(x), want, "MLP output through its forward")
    want:pow(2):sum():backward()
    local used, total = comm(function() y:pow(2):sum():backward() end)
    assert.are.same(counts {all_reduce = 1}, used)
    assert.are.equal(one, total)
    close(x.grad, xr.grad, "input gradient")
    grads_match(m, ref, {["fc1.weight"] = {S(1)}, ["fc1.bias"] = {S(1)}, ["fc2.weight"] = {S(2)}, ["fc2.bias"] = {R()}},
                "MLP")
  end)
end)

-- norm -> fc1 -> relu -> fc2 -> dropout, on [batch, seq, D]
local Block = nn.Module:extend("Block")
function Block:init(norm)
  self.norm = norm == "rms" and nn.RMSNorm(D, F64) or nn.LayerNorm(D, F64)
  self.mlp = MLP(false)
  self.drop = nn.Dropout(0.25)
end
function Block:forward(x) return self.drop(self.mlp(self.norm(x))) end

describe("SequenceParallel", function()
  for _, norm in ipairs {"layer", "rms"} do
    it(norm .. " norm and dropout on sequence shards: no collective forward, one all_reduce per norm parameter backward", function()
      local mesh = mesh1()
      local ref, m = twin(function() return Block(norm) end)
      P.parallelize_module(m, mesh, {norm = P.SequenceParallel(), drop = P.SequenceParallel()})
      for name, p in pairs(placements_of(m)) do
        assert.are.equal(name:match("^norm") and "{Replicate()}" or "plain", p, name)
      end
      local X = H.values({2, D, D}, "float64")
      local x, xr = my_chunk(X, 2):clone():requires_grad_(), X:clone():requires_grad_()
      local y
      local used = comm(function() y = m.norm(x) end)
      assert.are.same({}, used)
      assert.are.equal("{Shard(2)}", H.placement_string(y.placements))
      close(y, ref.norm(xr), "norm output")
      dt.manual_seed(7)
      local d = m.drop(y)
      dt.manual_seed(7)
      local want = ref.drop(ref.norm(xr))
      assert.are.equal("{Shard(2)}", H.placement_string(d.placements))
      close(d, want, "dropout output: one device's mask")
      want:pow(2):sum():backward()
      used = comm(function() d:pow(2):sum():backward() end)
      assert.are.same(counts {all_reduce = norm == "layer" and 2 or 1}, used)
      close(x.grad, my_chunk(xr.grad, 2), "input gradient")
      grads_match(m.norm, ref.norm, {weight = {R()}, bias = {R()}}, "norm")
    end)
  end

  it("with Colwise(input Shard(2)) and Rowwise(output Shard(2)): all_gather / reduce_scatter pairs, no all_reduce forward", function()
    local mesh = mesh1()
    local ref, m = twin(function() return Block("layer") end)
    P.parallelize_module(m, mesh, {
      norm = P.SequenceParallel(),
      ["mlp.fc1"] = P.ColwiseParallel {input_layouts = S(2)},
      ["mlp.fc2"] = P.RowwiseParallel {output_layouts = S(2)},
      drop = P.SequenceParallel(),
    })
    local X = H.values({2, D, D}, "float64")
    local x, xr = my_chunk(X, 2):clone():requires_grad_(), X:clone():requires_grad_()
    local layers, y = {}, nil
    layers.norm = comm(function() y = m.norm(x) end)
    layers.fc1 = comm(function() y = m.mlp.fc1(y):relu() end)
    layers.fc2 = comm(function() y = m.mlp.fc2(y) end)
    dt.manual_seed(3)
    layers.drop = comm(function() y = m.drop(y) end)
    assert.are.same({norm = {}, fc1 = counts {all_gather = 1}, fc2 = counts {reduce_scatter = 1}, drop = {}}, layers)
    assert.are.equal("{Shard(2)}", H.placement_string(y.placements))
    dt.manual_seed(3)
    local want = ref.drop(ref.mlp(ref.norm(xr)))
    close(y, want, "block output")
    want:pow(2):sum():backward()
    local used = comm(function() y:pow(2):sum():backward() end)
    -- fc2's reduce_scatter mirrored by an all_gather, fc1's all_gather by a reduce_scatter (the
    -- Partial gradient of the gathered input goes to its sequence shards in one step), and the
    -- norm's two parameters' gradients summed over the sequence shards
    assert.are.same(counts {all_gather = 1, reduce_scatter = 1, all_reduce = 2}, used)
    close(x.grad, my_chunk(xr.grad, 2), "input gradient")
    grads_match(m, ref, {["norm.weight"] = {R()}, ["mlp.fc1.weight"] = {S(1)}, ["mlp.fc2.weight"] = {S(2)}}, "SP block")
  end)

  it("a DTensor input is redistributed to the sequence sharding; sequence_dim and use_local_output", function()
    local mesh = mesh1()
    local ref, m = twin(function() return nn.LayerNorm(D, F64) end)
    P.parallelize_module(m, mesh, P.SequenceParallel {sequence_dim = 1, use_local_output = true})
    local X = H.values({D, 2, D}, "float64")
    local y = m(H.dist(X, mesh, {R()}))
    assert.is_false(dt.is_dtensor(y))
    close(y, my_chunk(ref(X), 1), "local output of sequence dim 1")
  end)
end)

-- a module of two inputs that returns a DTensor or a plain tensor
local Two = nn.Module:extend("Two")
function Two:forward(a, b) return a * 2 + b end

describe("PrepareModuleInput and PrepareModuleOutput", function()
  it("each input from its layout to the desired one (false: left alone); the output likewise", function()
    local mesh = mesh1()
    local m = Two()
    P.parallelize_module(m, mesh, P.PrepareModuleInput {
      input_layouts = {S(1), false}, desired_input_layouts = {R(), false}, use_local_output = true})
    local A, B = H.values({n * 2, 3}, "float64"), H.values({1, 3}, "float64")
    local y
    local used = comm(function() y = m(my_chunk(A, 1), B) end)
    assert.are.same(counts {all_gather = 1}, used)
    close(y, A * 2 + B, "gathered input")
    local o = Two()
    P.parallelize_module(o, mesh, P.PrepareModuleInput {input_layouts = {"S1", "S1"}, desired_input_layouts = {"S1", "S1"}})
    P.parallelize_module(o, mesh, P.PrepareModuleOutput {output_layouts = S(1), desired_output_layouts = R()})
    local Bn = H.values({n * 2, 3}, "float64")
    used = comm(function() y = o(my_chunk(A, 1), my_chunk(Bn, 1)) end)
    assert.are.same(counts {all_gather = 1}, used)
    assert.is_false(dt.is_dtensor(y))
    close(y, A * 2 + Bn, "gathered output")
  end)

  it("a plain output is taken with its layout; use_local_output = false keeps the DTensor", function()
    local mesh = mesh1()
    local m = Two()
    P.parallelize_module(m, mesh, P.PrepareModuleOutput {output_layouts = "S1", desired_output_layouts = "S1",
                                                        use_local_output = false})
    local A = H.values({2, 3}, "float64")
    local y = m(A, A)
    assert.is_true(dt.is_dtensor(y))
    assert.are.same({2 * n, 3}, y:size())
  end)

  it("errors: layouts of different lengths, a wrong number of inputs", function()
    local mesh = mesh1()
    H.fails("PrepareModuleInput: input_layouts and desired_input_layouts should have the same length, got 2 and 1",
            P.PrepareModuleInput, {input_layouts = {R(), R()}, desired_input_layouts = {R()}})
    H.fails("PrepareModuleOutput: output_layouts and desired_output_layouts are required", P.PrepareModuleOutput, {})
    H.fails("PrepareModuleInput: unknown option 'input_kwarg_layouts'", P.PrepareModuleInput, {input_kwarg_layouts = {}})
    local m = P.parallelize_module(Two(), mesh, P.PrepareModuleInput {input_layouts = R(), desired_input_layouts = R()})
    H.fails("PrepareModuleInput: the module got 2 inputs for 1 input_layouts", m, dt.ones(2), dt.ones(2))
  end)
end)

-- layers.1 .. layers.3, each {norm, mlp = MLP}, then a head
local Model = nn.Module:extend("Model")
function Model:init()
  self.layers = nn.ModuleList {}
  for _ = 1, 3 do
    local layer = nn.Module()
    layer.mlp = MLP(true)
    self.layers:append(layer)
  end
  self.head = nn.Linear(D, D, F64)
end
function Model:forward(x)
  for _, layer in ipairs(self.layers) do x = x + layer.mlp(x) end
  return self.head(x)
end

describe("parallelize_module", function()
  it("plan keys with * wildcards reach every layer; a style on the module path sees the layer's input", function()
    local mesh = mesh1()
    local ref, m = twin(Model)
    local seen = 0
    P.parallelize_module(m, mesh, {
      ["layers.*.mlp"] = P.PrepareModuleInput {input_layouts = R(), desired_input_layouts = R()},
      ["layers.*.mlp.fc1"] = P.ColwiseParallel(),
      ["layers.*.mlp.fc?"] = P.PrepareModuleOutput {output_layouts = R(), desired_output_layouts = R(),
                                                    use_local_output = true},
      ["layers.*.mlp.fc2"] = P.RowwiseParallel(),
    })
    for i = 1, 3 do
      m.layers[i].mlp:register_forward_pre_hook(function(_, inputs)
        assert.is_true(dt.is_dtensor(inputs[1]))
        seen = seen + 1
      end)
    end
    local pl = placements_of(m)
    for i = 1, 3 do
      assert.are.equal("{Shard(1)}", pl["layers." .. i .. ".mlp.fc1.weight"])
      assert.are.equal("{Shard(2)}", pl["layers." .. i .. ".mlp.fc2.weight"])
    end
    assert.are.equal("plain", pl["head.weight"])
    local X = H.values({4, D}, "float64")
    local y = m(X)
    assert.are.equal(3, seen)
    close(y, ref(X), "model output")
  end)

  it("a style as the plan applies to the module itself; src_data_rank chooses the source of the values", function()
    local mesh = mesh1()
    dt.manual_seed(10 + rank) -- every rank draws other values; rank 0's are distributed
    local m = nn.Linear(D, D, F64)
    local w0 = dt.distributed.broadcast(m.weight:detach():clone(), 0)
    P.parallelize_module(m, mesh, P.ColwiseParallel(), {src_data_rank = 0})
    close(m.weight, w0, "rank 0's weight")
    dt.manual_seed(10 + rank)
    local l = nn.Linear(D, D, F64)
    local mine = l.weight:detach():clone()
    P.parallelize_module(l, mesh, P.ColwiseParallel(), {src_data_rank = false})
    close(l.weight:to_local(), my_chunk(mine, 1), "each rank keeps its own chunk")
  end)

  it("errors name the call, the key and the module", function()
    local mesh = mesh1()
    H.fails("parallelize_module: plan key 'layers.*.attn' matches no submodule",
            P.parallelize_module, Model(), mesh, {["layers.*.attn"] = P.ColwiseParallel()})
    H.fails("parallelize_module: 'layers.1.mlp': ColwiseParallel: supports dt.nn.Linear and dt.nn.Embedding only, got a MLP module",
            P.parallelize_module, Model(), mesh, {["layers.*.mlp"] = P.ColwiseParallel()})
    H.fails("parallelize_module: plan['head'] must be a parallel style (ColwiseParallel(), ...), got string",
            P.parallelize_module, Model(), mesh, {head = "colwise"})
    H.fails("parallelize_module: plan key 'layers..mlp' is not a module path",
            P.parallelize_module, Model(), mesh, {["layers..mlp"] = P.ColwiseParallel()})
    H.fails("ColwiseParallel: unknown option 'input_layout'", P.ColwiseParallel, {input_layout = R()})
    H.fails("RowwiseParallel: output_layouts: bad placement 'X1'", P.RowwiseParallel, {output_layouts = "X1"})
    H.fails("ColwiseParallel: output_layouts must be one placement (tensor parallelism runs on a 1-d mesh), got a list of 2",
            P.ColwiseParallel, {output_layouts = {R(), R()}})
    H.fails("SequenceParallel: sequence_dim must be a non-zero integer (dims are 1-based), got 0",
            P.SequenceParallel, {sequence_dim = 0})
    if n == 4 then
      local mesh2 = dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})
      H.fails("parallelize_module: tensor parallelism takes a 1-d mesh, got a 2-d one",
              P.parallelize_module, Model(), mesh2, {head = P.ColwiseParallel()})
    end
    local m = nn.Linear(D, D, F64)
    P.parallelize_module(m, mesh, P.ColwiseParallel())
    H.fails("ColwiseParallel: the module's input 1", m, "not a tensor")
  end)
end)

describe("distribute_module", function()
  it("partition_fn shards what it wants, the rest is replicated; input_fn and output_fn become hooks", function()
    local mesh = mesh1()
    local ref, m = twin(function() return MLP(true) end)
    local names = {}
    dt.distribute_module(m, mesh,
      function(name, sub, mesh_)
        names[#names + 1] = name
        assert.are.equal(mesh, mesh_)
        if name == "fc1" then sub.weight = dt.distribute_tensor(sub.weight:detach(), mesh_, {S(1)}) end
      end,
      function(_, inputs, mesh_) return {dt.from_local(inputs[1], mesh_, {R()})} end,
      function(_, output) return output:full_tensor() end) -- fc2's output is Partial(sum): its bias is partitioned
    assert.are.same({"", "fc1", "fc2"}, names)
    assert.are.same({["fc1.weight"] = "{Shard(1)}", ["fc1.bias"] = "{Replicate()}", ["fc2.weight"] = "{Replicate()}",
                     ["fc2.bias"] = "{Replicate()}"}, placements_of(m))
    for _, p in ipairs(m:parameters()) do assert.is_true(p.requires_grad and p.is_leaf) end
    local X = H.values({4, D}, "float64")
    local y = m(X)
    assert.is_false(dt.is_dtensor(y))
    local want = ref(X)
    close(y, want, "output")
    want:pow(2):sum():backward()
    y:pow(2):sum():backward()
    grads_match(m, ref, {["fc1.weight"] = {S(1)}, ["fc2.weight"] = {R()}}, "distribute_module")
    H.fails("distribute_module: distribute_module should only be called once on a module", dt.distribute_module, m, mesh)
    H.fails("distribute_module: partition_fn (argument 3) must be a function or nil, got number",
            dt.distribute_module, MLP(true), mesh, 3)
  end)

  it("without functions: every parameter replicated; buffers too", function()
    local mesh = mesh1()
    local m = nn.Linear(D, 2, F64)
    m:register_buffer("count", dt.zeros(2))
    dt.distribute_module(m, mesh)
    assert.are.same({weight = "{Replicate()}", bias = "{Replicate()}"}, placements_of(m))
    assert.is_true(dt.is_dtensor(m.count))
  end)
end)

-- embedding -> head (vocab D), the head column-parallel into loss parallel
local LM = nn.Module:extend("LM")
function LM:init()
  self.emb = nn.Embedding(D, 8, F64)
  self.head = nn.Linear(8, D, F64)
end
function LM:forward(ids) return self.head(self.emb(ids)) end

describe("loss_parallel", function()
  it("class-sharded logits and a plain target: one device's loss and gradients, the logits never gathered", function()
    local mesh = mesh1()
    local ref, m = twin(LM)
    P.parallelize_module(m, mesh, {emb = P.RowwiseParallel(), head = P.ColwiseParallel {use_local_output = false}})
    local ids, target = dt.tensor({{1, 5, 12}, {7, 7, 2}}), dt.tensor({{2, 3, 4}, {12, 5, 1}})
    local logits = m(ids)
    assert.are.equal("{Shard(3)}", H.placement_string(logits.placements))
    local loss
    local used = comm(function()
      loss = P.loss_parallel(function() return dt.F.cross_entropy(logits:flatten(1, 2), target:flatten()) end)
    end)
    assert.is_nil(used.all_gather)
    local want = dt.F.cross_entropy(ref(ids):flatten(1, 2), target:flatten())
    close(loss, want, "loss")
    want:backward()
    loss:backward()
    grads_match(m, ref, {["emb.weight"] = {S(1)}, ["head.weight"] = {S(1)}}, "LM")
  end)

  it("the <close> form; outside it a plain target is refused, inside it unsharded classes are", function()
    local mesh = mesh1()
    local logits = H.dist(H.values({3, D}, "float64"), mesh, {S(2)})
    local target = dt.tensor({1, 2, 12})
    H.fails("cross_entropy: argument 2 is a plain tensor of 3 elements mixed with DTensors", dt.F.cross_entropy, logits, target)
    do
      local _ <close> = P.loss_parallel()
      close(dt.F.cross_entropy(logits, target), dt.F.cross_entropy(H.values({3, D}, "float64"), target), "loss")
      H.fails("cross_entropy: loss_parallel expects the logits sharded on the class dim (dim 2), got placements (Shard(1))",
              dt.F.cross_entropy, H.dist(H.values({2 * n, D}, "float64"), mesh, {S(1)}), dt.tensor({1, 2}))
    end
    H.fails("cross_entropy: argument 2 is a plain tensor", dt.F.cross_entropy, logits, target)
    H.fails("boom", P.loss_parallel, function() error("boom") end)
    H.fails("cross_entropy: argument 2 is a plain tensor", dt.F.cross_entropy, logits, target) -- restored after an error
  end)
end)

-- SGD by hand: p <- p - lr * p.grad, the gradient cleared
local function sgd(m, lr)
  dt.no_grad(function()
    for _, p in ipairs(m:parameters()) do
      p:add_(p.grad * -lr)
      p.grad = nil
    end
  end)
end

-- trains ref on the whole batch and m on this rank's part (dp coordinate c of ndp) for 5
-- steps; returns the collectives of m's first backward and checks the parameters after
local function train_alike(ref, m, c, ndp, what)
  dt.manual_seed(77)
  local first
  for step = 1, 5 do
    local X, Y = H.values({2 * ndp, D}, "float64") * (0.5 + step / 10), (H.values({2 * ndp, D}, "float64") * 1.7):cos()
    local x, y = X:chunk(ndp, 1)[c + 1], Y:chunk(ndp, 1)[c + 1]
    local lref = (ref(X) - Y):pow(2):mean()
    lref:backward()
    local l = (m(x) - y):pow(2):mean()
    local used, _, raw = comm(function() l:backward() end)
    first = first or {used = used, raw = raw}
    sgd(ref, 0.1)
    sgd(m, 0.1)
  end
  local want = {}
  for _, np in ipairs(ref:named_parameters()) do want[np[1]] = np[2] end
  for _, np in ipairs(m:named_parameters()) do close(np[2], want[np[1]], what .. ": " .. np[1] .. " after 5 steps", 1e-9) end
  return first
end

describe("replicate (data parallel)", function()
  it("1-d mesh: 5 SGD steps on each rank's batch equal one device on the whole batch; one all_reduce per bucket", function()
    local mesh = mesh1()
    local ref, m = twin(function() return MLP(true) end)
    P.replicate(m, mesh, {bucket_cap_mb = (2 * D * D * 8 + 1) / 2 ^ 20}) -- a bucket closes after fc2's weight and bias
    local buckets = P.replicate_buckets(m)
    assert.are.same({{"fc2.bias", "fc2.weight"}, {"fc1.bias", "fc1.weight"}}, buckets)
    for _, p in ipairs(m:parameters()) do assert.is_false(dt.is_dtensor(p)) end
    local first = train_alike(ref, m, rank, n, "1-d")
    assert.are.same(counts {all_reduce = 2}, first.used)
    if n > 1 then -- each all_reduce carries its bucket's gradients
      assert.are.equal((2 * D * D + D) * 8, first.raw.ops[1].bytes) -- fc2's weight and bias
      assert.are.equal((2 * D * D + 2 * D) * 8, first.raw.ops[2].bytes) -- fc1's
    end
  end)

  it("a bucket's async all_reduce starts as soon as its gradients are in; backward's end writes the averages", function()
    local mesh = mesh1()
    local m = MLP(true)
    local in_flight, fc2_when_fc1_arrives
    m.fc1.bias:register_hook(function() -- runs before replicate's: fc2's bucket was launched
      in_flight = #rawget(m, "_replicate").pending
      fc2_when_fc1_arrives = m.fc2.weight.grad:clone()
    end)
    P.replicate(m, mesh, {bucket_cap_mb = (2 * D * D * 8 + 1) / 2 ^ 20})
    local x = H.values({2, D}, "float64") * (rank + 1) -- each rank its own batch
    m(x):pow(2):mean():backward()
    assert.are.equal(n > 1 and 1 or 0, in_flight)
    assert.are.equal(0, #rawget(m, "_replicate").pending) -- waited by the end of backward
    local all = dt.distributed.all_gather(m.fc2.weight.grad:reshape(1, -1))
    for r = 2, n do close(all[r], all[1], "the ranks' averages agree") end
    local local_grads = dt.distributed.all_gather(fc2_when_fc1_arrives:reshape(1, -1))
    close(m.fc2.weight.grad:reshape(1, -1), local_grads:mean(1, true), "the average of the ranks' gradients")
  end)

  it("the default bucket (25 MB) takes every gradient: one all_reduce", function()
    local mesh = mesh1()
    local ref, m = twin(function() return MLP(true) end)
    P.replicate(m, mesh)
    assert.are.equal(1, #P.replicate_buckets(m))
    local first = train_alike(ref, m, rank, n, "one bucket")
    assert.are.same(counts {all_reduce = 1}, first.used)
  end)

  it("the replicas start from the first rank's values (broadcast at replicate)", function()
    local mesh = mesh1()
    dt.manual_seed(100 + rank)
    local m = nn.Linear(D, 2, F64)
    local w0 = dt.distributed.broadcast(m.weight:detach():clone(), 0)
    P.replicate(m, mesh)
    close(m.weight, w0, "weight after replicate")
  end)

  it("2-d dp x tp mesh: tensor parallel on mesh['tp'], replicate over dp; 5 SGD steps equal one device", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.mlp = MLP(true)
      self.norm = nn.LayerNorm(D, F64)
    end
    function Net:forward(x) return self.norm(self.mlp(x)) end
    local ref, m = twin(Net)
    P.parallelize_module(m, mesh["tp"], {["mlp.fc1"] = P.ColwiseParallel(), ["mlp.fc2"] = P.RowwiseParallel()})
    P.replicate(m, mesh, {mesh_dim = "dp", bucket_cap_mb = (D * D * 8) / 2 ^ 20})
    local buckets = P.replicate_buckets(m)
    assert(#buckets > 1, "several buckets")
    local first = train_alike(ref, m, mesh:get_coordinate()[1], 2, "dp x tp")
    assert.are.same({all_reduce = #buckets}, first.used) -- the dp averages only: the input needs no gradient
    assert.are.equal("{Shard(1)}", H.placement_string(m.mlp.fc1.weight.placements))
  end)

  it("mp_policy: forward on float32 casts, float32 averages, float64 parameters and gradients", function()
    local mesh = mesh1()
    local ref, m = twin(function() return MLP(true) end)
    local ref32 = ref:to("float32") -- the single-device run in the compute dtype
    local seen = {}
    m.fc1:register_forward_pre_hook(function(sub) seen[#seen + 1] = sub.weight.dtype end)
    P.replicate(m, mesh, {mp_policy = {param_dtype = "float32"}})
    local X = H.values({2 * n, D}, "float64")
    local y = m(X:chunk(n, 1)[rank + 1])
    assert.are.same({"float32"}, seen)
    assert.are.equal("float32", y.dtype)
    assert.are.equal("float64", m.fc1.weight.dtype) -- the parameter is back after forward
    local used, _, raw = comm(function() y:pow(2):mean():backward() end)
    assert.are.same(counts {all_reduce = 1}, used)
    if n > 1 then assert.are.equal((4 * D * D + 3 * D) * 4, raw.ops[1].bytes) end -- every gradient, averaged in float32
    ref32(X:to("float32")):pow(2):mean():backward()
    for _, np in ipairs(m:named_parameters()) do
      assert.are.equal("float64", np[2].grad.dtype, np[1])
      local want = ref32:get_parameter(np[1]).grad:double()
      assert(dt.allclose(np[2].grad, want, {rtol = 1e-5, atol = 1e-6}), "gradient of " .. np[1])
    end
    -- reduce_dtype alone: float64 compute, the averages rounded through float32 on any mesh
    local ref2, m2 = twin(function() return MLP(true) end)
    P.replicate(m2, mesh, {mp_policy = {reduce_dtype = "float32"}})
    m2(X:chunk(n, 1)[rank + 1]):pow(2):mean():backward()
    ref2(X):pow(2):mean():backward()
    for _, np in ipairs(m2:named_parameters()) do
      local g, want = np[2].grad, ref2:get_parameter(np[1]).grad
      assert.is_true(g:equal(g:float():double()), np[1] .. ": rounded through float32")
      assert(dt.allclose(g, want, {rtol = 1e-6, atol = 1e-7}), "gradient of " .. np[1])
    end
    H.fails("replicate: mp_policy.param_dtype must be a floating dtype, got int64", P.replicate, MLP(true), mesh,
            {mp_policy = {param_dtype = "int64"}})
    H.fails("replicate: mp_policy: unknown option 'dtype'", P.replicate, MLP(true), mesh, {mp_policy = {dtype = "float32"}})
  end)

  it("errors: a DTensor parameter spanning the dp dim, a parameter without a gradient, options", function()
    local mesh = mesh1()
    local m = nn.Linear(D, 2, F64)
    if n > 1 then
      dt.distribute_module(m, mesh)
      H.fails("replicate: parameter 'weight' is a DTensor on " .. tostring(mesh) .. ", which spans the data-parallel dim",
              P.replicate, m, mesh)
    end
    local u = MLP(true)
    P.replicate(u, mesh)
    u.fc1(H.values({2, D}, "float64")):sum():backward() -- fc2 takes no part
    H.fails("replicate: the previous backward gave no gradient to parameter(s) 'fc2.bias', 'fc2.weight'", u,
            H.values({2, D}, "float64"))
    H.fails("replicate: the module is replicated already", P.replicate, u, mesh)
    H.fails("replicate: unknown option 'bucket_cap'", P.replicate, MLP(true), mesh, {bucket_cap = 1})
    H.fails("replicate: bucket_cap_mb must be a positive number, got 0", P.replicate, MLP(true), mesh, {bucket_cap_mb = 0})
    if n == 4 then
      H.fails("replicate: a 2-d mesh needs mesh_dim", P.replicate, MLP(true), dt.init_device_mesh("cpu", {2, 2}))
    end
  end)
end)
