-- dt.nn's module system on one device (lua/dtensor/nn/module.lua, doc/nn.md): the Module
-- contract (classes, registration, fields, iteration, hooks, state_dict, modes, to, apply,
-- zero_grad, tostring), then the layers' forwards against hand-computed values and their
-- gradients, and the initialisers' statistics and reproducibility.
local nn = dt.nn

-- pcall(f, ...) must fail with a message containing text (plain)
local function fails(text, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error containing: " .. text)
  assert(tostring(err):find(text, 1, true), "expected an error containing: " .. text .. "\ngot: " .. tostring(err))
  return err
end

local function names(list)
  local out = {}
  for i, p in ipairs(list) do out[i] = p[1] end
  return out
end

local function close(a, b, tol, what)
  assert.are.same(b:size(), a:size(), what)
  local err = a:numel() == 0 and 0 or (a:to("float64") - b:to("float64")):abs():max():item()
  assert(err <= (tol or 1e-6), (what or "") .. ": max error " .. err)
end

-- a small user module: a parameter, a buffer and two submodules
local Lin = nn.Module:extend("Lin")
function Lin:init(i, o)
  self:register_parameter("weight", dt.randn(o, i))
  self:register_parameter("bias", dt.zeros(o))
end
function Lin:extra_repr() return "in=" .. self.weight:size(2) .. ", out=" .. self.weight:size(1) end
function Lin:forward(x) return x:matmul(self.weight:t()) + self.bias end

local Block = nn.Module:extend("Block")
function Block:init(width)
  self.scale = dt.ones(width) -- a plain field: not registered
  self:register_parameter("gain", dt.ones(width))
  self:register_buffer("steps", dt.zeros(1, {dtype = "int64"}))
  self.fc1 = Lin(width, 2 * width)
  self.fc2 = Lin(2 * width, width)
end
function Block:forward(x) return self.fc2(self.fc1(x * self.gain):relu()) end

describe("nn.Module: classes", function()
  it("extend makes subclasses whose instances run init after the base's setup", function()
    local b = Block(3)
    assert.is_true(nn.is_module(b))
    assert.is_true(nn.is_module(b, Block) and nn.is_module(b, nn.Module))
    assert.is_false(nn.is_module(b, Lin))
    assert.is_false(nn.is_module(dt.ones(1)) or nn.is_module({}))
    assert.are.equal(Block, getmetatable(b))
    assert.are.equal(nn.Module, Block.super)
    assert.is_true(b.training)
    -- a subclass of a subclass inherits init, forward and extra_repr, and may call its parent's
    local Lin2 = Lin:extend("Lin2")
    function Lin2:init(i, o)
      Lin.init(self, i, o)
      self.tag = "two"
    end
    local l2 = Lin2(2, 3)
    assert.are.equal("two", l2.tag)
    assert.are.same({3, 2}, l2.weight:size())
    assert.is_true(nn.is_module(l2, Lin))
    assert.are.equal("Lin2(in=2, out=3)", tostring(l2):match("^[^\n]*"))
    fails("forward: Module does not define forward", function() nn.Module()(1) end)
    fails("extend: the class needs a name (a string), got nil", function() nn.Module:extend() end)
  end)

  it("registers parameters (made to require grad), buffers and submodules in order", function()
    local b = Block(3)
    assert.are.same({"gain"}, b._param_names)
    assert.are.same({"steps"}, b._buffer_names)
    assert.are.same({"fc1", "fc2"}, b._module_names)
    assert.is_true(b.gain.requires_grad and b.gain.is_leaf)
    assert.is_false(b.steps.requires_grad)
    assert.is_nil(b._parameters.scale)
    assert.are.equal(b._modules.fc1, b.fc1)
    -- a computed tensor is detached first: a parameter is a leaf
    local w = dt.ones(2, {requires_grad = true}) * 2
    b:register_parameter("extra", w)
    assert.is_true(b.extra.is_leaf and b.extra.requires_grad)
    assert.are.same({"gain", "extra"}, b._param_names)
    b:register_parameter("extra", nil)
    assert.are.same({"gain"}, b._param_names)
    assert.is_nil(b.extra)
  end)

  it("assignment replaces parameters, buffers and submodules in place; nil removes", function()
    local b = Block(3)
    local new = dt.full({3}, 2.0)
    b.gain = new
    assert.are.equal(new, b.gain)
    assert.is_true(new.requires_grad)
    b.steps = dt.ones(1, {dtype = "int64"})
    assert.are.equal(1, b.steps:item())
    local fc = Lin(3, 6)
    b.fc1 = fc
    assert.are.equal(fc, b.fc1)
    assert.are.same({"fc1", "fc2"}, b._module_names) -- kept its place
    b.fc3 = Lin(3, 3) -- a new name: registered
    assert.are.same({"fc1", "fc2", "fc3"}, b._module_names)
    b.fc3 = nil
    assert.are.same({"fc1", "fc2"}, b._module_names)
    b.note = "plain" -- anything else: a plain field
    assert.are.equal("plain", rawget(b, "note"))
    fails("cannot assign a number to submodule 'fc1' of Block (a Module, or nil to remove it)", function() b.fc1 = 3 end)
    fails("register_parameter: parameter 'gain' must be a floating-point tensor, got int64",
          function() b.gain = dt.ones(3, {dtype = "int64"}) end)
  end)

  it("refuses names that are taken, empty or dotted", function()
    local b = Block(3)
    fails("register_parameter: 'forward' is already a method of Block", b.register_parameter, b, "forward", dt.ones(1))
    fails("register_parameter: 'steps' is already a buffer of Block", b.register_parameter, b, "steps", dt.ones(1))
    fails("register_buffer: 'fc1' is already a submodule of Block", b.register_buffer, b, "fc1", dt.ones(1))
    fails("add_module: 'gain' is already a parameter of Block", b.add_module, b, "gain", Lin(1, 1))
    fails("register_parameter: 'scale' is already a field of Block", b.register_parameter, b, "scale", dt.ones(1))
    fails("register_parameter: the name must not contain '.', got 'a.b'", b.register_parameter, b, "a.b", dt.ones(1))
    fails("add_module: the name must not be empty", b.add_module, b, "", Lin(1, 1))
    fails("add_module: submodule 'x' must be a Module or nil, got table", b.add_module, b, "x", {})
    fails("register_parameter: parameter 'x' must be a tensor or nil, got number", b.register_parameter, b, "x", 1)
  end)
end)

describe("nn.Module: iteration", function()
  it("named_parameters, parameters, named_buffers, named_modules, children in registration order", function()
    local b = Block(3)
    assert.are.same({"gain", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}, names(b:named_parameters()))
    assert.are.same({"blk.gain", "blk.fc1.weight", "blk.fc1.bias", "blk.fc2.weight", "blk.fc2.bias"},
                    names(b:named_parameters("blk")))
    assert.are.same({"gain"}, names(b:named_parameters("", false)))
    local ps = b:parameters()
    assert.are.equal(5, #ps)
    assert.are.equal(b.fc1.weight, ps[2])
    assert.are.same({"steps"}, names(b:named_buffers()))
    assert.are.same({"", "fc1", "fc2"}, names(b:named_modules()))
    assert.are.equal(b, b:named_modules()[1][2])
    assert.are.same({"fc1", "fc2"}, names(b:named_children()))
    assert.are.same({b.fc1, b.fc2}, b:children())
    assert.are.equal(3, #b:modules())
  end)

  it("lists a shared parameter and a shared module once", function()
    local b = Block(3)
    b.fc3 = b.fc1 -- the same module twice
    b.fc2.weight = b.fc1.weight:t():detach() -- unrelated tensor; then tie one for real
    b:register_parameter("tied", b.fc1.bias)
    assert.are.same({"gain", "tied", "fc1.weight", "fc2.weight", "fc2.bias"}, names(b:named_parameters()))
    assert.are.same({"", "fc1", "fc2"}, names(b:named_modules()))
    assert.are.same({"fc1", "fc2"}, names(b:named_children()))
  end)

  it("get_submodule and get_parameter follow dotted paths", function()
    local outer = nn.Module()
    outer.inner = Block(2)
    assert.are.equal(outer.inner.fc2, outer:get_submodule("inner.fc2"))
    assert.are.equal(outer, outer:get_submodule(""))
    assert.are.equal(outer.inner.fc2.bias, outer:get_parameter("inner.fc2.bias"))
    fails("get_submodule: Block 'inner' has no submodule 'fc9' (in 'inner.fc9.x')", outer.get_submodule, outer, "inner.fc9.x")
    fails("get_parameter: Lin has no parameter 'w' (in 'inner.fc1.w')", outer.get_parameter, outer, "inner.fc1.w")
  end)
end)

describe("nn.Module: hooks", function()
  it("pre hooks replace the inputs, hooks the output, in registration order; handles remove them", function()
    local m = Lin(2, 2)
    local log = {}
    local h1 = m:register_forward_pre_hook(function(mod, inputs)
      assert.are.equal(m, mod)
      log[#log + 1] = "pre1:" .. inputs.n
      return {inputs[1] * 0}
    end)
    local h2 = m:register_forward_pre_hook(function(_, inputs)
      log[#log + 1] = "pre2:" .. inputs[1]:sum():item()
    end)
    local h3 = m:register_forward_hook(function(_, inputs, out)
      log[#log + 1] = "post1"
      return out + 1
    end)
    local h4 = m:register_forward_hook(function(_, _, out)
      log[#log + 1] = "post2:" .. out:sum():item()
      return out * 2
    end)
    local y = m(dt.ones(1, 2), "extra")
    assert.are.same({"pre1:2", "pre2:0.0", "post1", "post2:2.0"}, log)
    assert.is_true(dt.equal(y, dt.full({1, 2}, 2.0))) -- (0 + bias 0 + 1) * 2
    h1:remove(); h2:remove(); h3:remove(); h4:remove()
    h1:remove() -- removing twice is harmless
    local x = dt.ones(1, 2)
    assert.is_true(dt.equal(m(x), m:forward(x)))
    -- a non-table result of a pre hook is the single input
    local h = m:register_forward_pre_hook(function() return dt.zeros(1, 2) end)
    assert.is_true(dt.equal(m(x), m.bias:reshape(1, 2)))
    h:remove()
    fails("register_forward_hook: the hook must be a function, got number", m.register_forward_hook, m, 3)
  end)

  it("a hook that removes itself does not skip the next one", function()
    local m = Lin(1, 1)
    local calls, h = 0, nil
    h = m:register_forward_hook(function() h:remove() calls = calls + 1 end)
    m:register_forward_hook(function() calls = calls + 10 end)
    m(dt.ones(1, 1))
    m(dt.ones(1, 1))
    assert.are.equal(21, calls)
  end)
end)

describe("nn.Module: state_dict", function()
  it("holds parameters and persistent buffers under dotted names, detached, walked in order", function()
    local b = Block(3)
    b:register_buffer("cache", dt.zeros(2), false) -- not persistent
    local sd = b:state_dict()
    local keys = {}
    for k, v in pairs(sd) do
      keys[#keys + 1] = k
      assert.is_false(v.requires_grad)
    end
    assert.are.same({"gain", "steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}, keys)
    assert.is_true(dt.equal(sd["fc1.weight"], b.fc1.weight))
    local prefixed = {}
    for k in pairs(b:state_dict("m")) do prefixed[#prefixed + 1] = k end
    assert.are.same({"m.gain", "m.steps", "m.fc1.weight", "m.fc1.bias", "m.fc2.weight", "m.fc2.bias"}, prefixed)
  end)

  it("round trips through dt.save and dt.load", function()
    local a, b = Block(3), Block(3)
    a.steps:fill_(7)
    local path = os.tmpname()
    dt.save(a:state_dict(), path)
    local missing, unexpected = b:load_state_dict(dt.load(path))
    os.remove(path)
    assert.are.same({}, missing)
    assert.are.same({}, unexpected)
    for _, p in ipairs(a:named_parameters()) do
      assert.is_true(dt.equal(p[2], b:get_parameter(p[1])), p[1])
    end
    assert.are.equal(7, b.steps:item())
    -- in place: the parameters are the same tensors, still leaves that require grad
    assert.is_true(b.gain.requires_grad and b.gain.is_leaf)
    local x = dt.randn(4, 3)
    assert.is_true(dt.equal(a(x), b(x)))
  end)

  it("load errors name the missing, unexpected and mismatched keys, before copying anything", function()
    local b = Block(2)
    local sd = b:state_dict()
    local before = b.fc1.bias:clone()
    local bad = {}
    for k, v in pairs(sd) do bad[k] = v end
    bad["fc2.bias"] = nil
    bad["fc9.weight"] = dt.ones(1)
    bad["fc1.weight"] = dt.ones(2, 4)
    bad["fc1.bias"] = dt.full({4}, 5.0)
    fails("load_state_dict: error(s) in loading the state_dict of Block: missing keys: fc2.bias; unexpected keys: " ..
          "fc9.weight; size mismatch for fc1.weight: copying a tensor of shape [2, 4] into a parameter of shape [4, 2]",
          b.load_state_dict, b, bad)
    assert.is_true(dt.equal(before, b.fc1.bias))
    -- not strict: missing and unexpected keys are returned, a size mismatch still raises
    bad["fc1.weight"] = nil
    local missing, unexpected = b:load_state_dict(bad, {strict = false})
    assert.are.same({"fc1.weight", "fc2.bias"}, missing)
    assert.are.same({"fc9.weight"}, unexpected)
    assert.is_true(dt.equal(b.fc1.bias, dt.full({4}, 5.0)))
    bad["fc2.weight"] = dt.ones(3)
    fails("size mismatch for fc2.weight: copying a tensor of shape [3] into a parameter of shape [2, 4]",
          b.load_state_dict, b, bad, {strict = false})
    fails("of Block: 'gain' is a number, expected a tensor", b.load_state_dict, b, {gain = 1}, {strict = false})
    fails("load_state_dict: unknown option 'strct'", b.load_state_dict, b, sd, {strct = false})
    fails("load_state_dict: expected a table name -> tensor, got nil", b.load_state_dict, b)
  end)

  it("load_state_dict casts to the parameter's dtype and records nothing", function()
    local m = Lin(2, 2)
    m:load_state_dict({weight = dt.eye(2, {dtype = "float64"}), bias = dt.ones(2, {dtype = "float64"})})
    assert.are.equal("float32", m.weight.dtype)
    assert.is_true(m.weight.is_leaf and m.weight.grad_fn == nil)
    assert.is_true(dt.equal(m(dt.ones(1, 2)), dt.full({1, 2}, 2.0)))
  end)
end)

describe("nn.Module: modes and conversions", function()
  it("train and eval set training recursively", function()
    local b = Block(2)
    assert.are.equal(b, b:eval())
    assert.is_false(b.training or b.fc1.training or b.fc2.training)
    b:train()
    assert.is_true(b.training and b.fc1.training and b.fc2.training)
    b.fc2:train(false)
    assert.is_true(b.training and not b.fc2.training)
    fails("train: mode must be a boolean, got string", b.train, b, "no")
  end)

  it("to(dtype) makes new leaves that keep requires_grad, .grad and sharing", function()
    local b = Block(2)
    b:register_parameter("tied", b.fc1.bias)
    b.fc2.bias:requires_grad_(false)
    b(dt.ones(1, 2)):sum():backward()
    local old = b.fc1.weight
    assert.are.equal(b, b:to("float64"))
    for _, p in ipairs(b:named_parameters()) do assert.are.equal("float64", p[2].dtype, p[1]) end
    assert.is_true(b.fc1.weight.is_leaf and b.fc1.weight.requires_grad)
    assert.is_false(b.fc2.bias.requires_grad)
    assert.are.equal("float64", b.fc1.weight.grad.dtype)
    close(b.fc1.weight.grad, old.grad, 1e-6, "grad kept")
    assert.are.equal(b.tied, b.fc1.bias)
    assert.are.equal("int64", b.steps.dtype) -- integer buffers stay
    assert.are.equal("float64", b(dt.ones(1, 2, {dtype = "float64"})).dtype)
    b:float()
    assert.are.equal("float32", b.gain.dtype)
    fails("to: modules convert to a floating-point dtype (float32, float64, bfloat16, float16), got int64", b.to, b, "int64")
  end)

  it("apply visits children first; zero_grad clears or zeroes gradients; requires_grad_", function()
    local b = Block(2)
    local seen = {}
    assert.are.equal(b, b:apply(function(m) seen[#seen + 1] = m end))
    assert.are.same({b.fc1, b.fc2, b}, seen)
    b(dt.ones(1, 2)):sum():backward()
    assert.is_not_nil(b.fc1.weight.grad)
    b:zero_grad(false)
    assert.are.equal(0, b.fc1.weight.grad:abs():sum():item())
    b:zero_grad()
    for _, p in ipairs(b:parameters()) do assert.is_nil(p.grad) end
    b:requires_grad_(false)
    for _, p in ipairs(b:parameters()) do assert.is_false(p.requires_grad) end
  end)
end)

describe("nn.Module: tostring", function()
  it("prints the tree with each parameter's shape and dtype", function()
    local b = Block(2)
    b:register_buffer("cache", dt.zeros(3))
    assert.are.equal(table.concat({
      "Block(",
      "  gain: [2] float32",
      "  steps: [1] int64 (buffer)",
      "  cache: [3] float32 (buffer)",
      "  (fc1): Lin(in=2, out=4)",
      "    weight: [4, 2] float32",
      "    bias: [4] float32",
      "  (fc2): Lin(in=4, out=2)",
      "    weight: [2, 4] float32",
      "    bias: [2] float32",
      ")"}, "\n"), tostring(b))
    assert.are.equal("Module()", tostring(nn.Module()))
    assert.are.equal("class Block", tostring(Block))
  end)
end)

-- ---- layers ----

local function t64(v) return dt.tensor(v, {dtype = "float64"}) end

-- the module's parameters set to these values (in place, through load_state_dict)
local function set(m, values)
  local sd = {}
  for k, v in pairs(values) do sd[k] = dt.tensor(v) end
  m:load_state_dict(sd)
  return m
end

describe("nn.Linear", function()
  it("computes x @ W^T + b, with its gradients", function()
    local m = set(nn.Linear(2, 3), {weight = {{1, 2}, {3, 4}, {5, 6}}, bias = {1, 1, -1}})
    local x = dt.tensor({{1, 2}, {-1, 0.5}}, {requires_grad = true})
    local y = m(x)
    assert.is_true(dt.equal(y, dt.tensor({{6, 12, 16}, {1, -0, -3.0}})))
    y:sum():backward()
    assert.is_true(dt.equal(m.weight.grad, dt.tensor({{0, 2.5}, {0, 2.5}, {0, 2.5}})))
    assert.is_true(dt.equal(m.bias.grad, dt.tensor({2, 2, 2})))
    assert.is_true(dt.equal(x.grad, dt.tensor({{9, 12}, {9, 12}})))
    -- batch dims broadcast
    assert.are.same({4, 2, 3}, m(dt.ones(4, 2, 2)):size())
  end)

  it("draws torch's default initialisation, reproducibly", function()
    dt.manual_seed(11)
    local m = nn.Linear(5, 3)
    dt.manual_seed(11)
    local w = dt.empty(3, 5):uniform_(-1 / math.sqrt(5), 1 / math.sqrt(5))
    local b = dt.empty(3):uniform_(-1 / math.sqrt(5), 1 / math.sqrt(5))
    close(m.weight, w, 1e-6, "weight")
    assert.is_true(dt.equal(m.bias, b))
    dt.manual_seed(11)
    assert.is_true(dt.equal(nn.Linear(5, 3).weight, m.weight))
    assert.is_nil(nn.Linear(5, 3, {bias = false}).bias)
    assert.are.equal("float64", nn.Linear(2, 2, {dtype = "float64"}).weight.dtype)
    assert.are.equal("Linear(in_features=5, out_features=3, bias=true)", tostring(m):match("^[^\n]*"))
    fails("Linear: unknown option 'bais'", nn.Linear, 2, 2, {bais = false})
    fails("Linear: in_features must be a positive integer, got 0", nn.Linear, 0, 2)
    fails("Linear: dtype must be a floating-point dtype (float32, float64, bfloat16, float16), got int64",
          nn.Linear, 2, 2, {dtype = "int64"})
  end)

  it("Identity returns its arguments", function()
    local x = dt.ones(2)
    local a, b = nn.Identity()(x, 3)
    assert.are.equal(x, a)
    assert.are.equal(3, b)
  end)
end)

describe("nn.Embedding", function()
  it("looks up 1-based rows; repeated ids accumulate their gradients", function()
    local m = set(nn.Embedding(3, 2), {weight = {{1, 2}, {3, 4}, {5, 6}}})
    local y = m(dt.tensor({{3, 1}, {3, 3}}))
    assert.is_true(dt.equal(y, dt.tensor({{{5, 6}, {1, 2}}, {{5, 6}, {5, 6}}})))
    y:sum():backward()
    assert.is_true(dt.equal(m.weight.grad, dt.tensor({{1, 1}, {0, 0}, {3, 3}})))
    dt.manual_seed(3)
    local e = nn.Embedding(4, 5)
    dt.manual_seed(3)
    assert.is_true(dt.equal(e.weight, dt.randn(4, 5)))
    assert.are.equal("Embedding(4, 5)", tostring(e):match("^[^\n]*"))
    fails("embedding: id 4 out of range for vocab size 3", m, dt.tensor({4}))
  end)
end)

describe("nn.LayerNorm and nn.RMSNorm", function()
  it("LayerNorm normalises the last dims, then scales and shifts", function()
    local m = nn.LayerNorm(4, {dtype = "float64"})
    assert.is_true(dt.equal(m.weight, dt.ones(4, {dtype = "float64"})) and dt.equal(m.bias, dt.zeros(4, {dtype = "float64"})))
    m:load_state_dict({weight = t64({1, 2, 1, 1}), bias = t64({0, 0, 0, 1})})
    local x = t64({{1, 2, 3, 4}, {2, 2, 2, 2}})
    local r = 1 / math.sqrt(1.25 + 1e-5)
    close(m(x), t64({{-1.5 * r, -1 * r, 0.5 * r, 1.5 * r + 1}, {0, 0, 0, 1}}), 1e-12, "forward")
    m(x):sum():backward()
    close(m.weight.grad, t64({-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r}), 1e-12, "weight grad")
    close(m.bias.grad, t64({2, 2, 2, 2}), 0, "bias grad")
    local two = nn.LayerNorm({2, 2}, {elementwise_affine = false, eps = 0})
    assert.are.equal(0, #two:parameters())
    close(two(dt.tensor({{{1.0, 2}, {3, 4}}})), dt.tensor({{{-1.5, -0.5}, {0.5, 1.5}}}) / math.sqrt(1.25), 1e-6, "2 dims")
    assert.is_nil(nn.LayerNorm(3, {bias = false}).bias)
    assert.are.equal("LayerNorm([2, 2], eps=0, elementwise_affine=false)", tostring(two))
  end)

  it("RMSNorm divides by the root mean square", function()
    local m = nn.RMSNorm(4, {eps = 0, dtype = "float64"})
    m:load_state_dict({weight = t64({1, 1, 2, 1})})
    local x = t64({{1, 2, 3, 4}})
    local r = 1 / math.sqrt(7.5)
    close(m(x), t64({{r, 2 * r, 6 * r, 4 * r}}), 1e-12, "forward")
    m(x):sum():backward()
    close(m.weight.grad, t64({r, 2 * r, 3 * r, 4 * r}), 1e-12, "weight grad")
    assert.are.equal("RMSNorm([4], eps=nil, elementwise_affine=true)", tostring(nn.RMSNorm(4)):match("^[^\n]*"))
    fails("RMSNorm: normalized_shape must be a positive integer, got -1", nn.RMSNorm, -1)
  end)
end)

describe("nn.Dropout", function()
  it("drops with the generator's mask while training and is the identity in eval", function()
    local m = nn.Dropout(0.25)
    local x = dt.ones(1000)
    dt.manual_seed(5)
    local y = m(x)
    dt.manual_seed(5)
    assert.is_true(dt.equal(y, dt.F.dropout(x, 0.25, true)))
    local kept = y:ne(0):sum():item()
    assert(kept > 700 and kept < 800, "kept " .. kept)
    assert.is_true(dt.equal(y:amax(), dt.tensor(1 / 0.75)))
    m:eval()
    assert.are.equal(x, m(x))
    assert.are.equal(0.5, nn.Dropout().p)
    fails("Dropout: p must be a number in [0, 1], got 1.5", nn.Dropout, 1.5)
  end)
end)

describe("activation modules", function()
  local x = t64({-2, -0.5, 0, 1.5})
  local function each(f)
    local out = {}
    for i, v in ipairs(x:totable()) do out[i] = f(v) end
    return t64(out)
  end
  local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
  local function erf(v) -- Abramowitz-Stegun 7.1.26 is too coarse: use the series (|v| < 2)
    local term, sum, n = v, v, 0
    repeat
      n = n + 1
      term = -term * v * v / n
      sum = sum + term / (2 * n + 1)
    until math.abs(term) < 1e-17
    return 2 / math.sqrt(math.pi) * sum
  end

  it("compute their functions", function()
    close(nn.ReLU()(x), each(function(v) return math.max(v, 0) end), 0, "ReLU")
    close(nn.Tanh()(x), each(function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end), 1e-12, "Tanh")
    close(nn.Sigmoid()(x), each(sigmoid), 1e-12, "Sigmoid")
    close(nn.SiLU()(x), each(function(v) return v * sigmoid(v) end), 1e-12, "SiLU")
    close(nn.GELU()(x), each(function(v) return 0.5 * v * (1 + erf(v / math.sqrt(2))) end), 1e-9, "GELU")
    close(nn.GELU("tanh")(x), each(function(v)
      local u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)
      return 0.5 * v * (1 + (math.exp(2 * u) - 1) / (math.exp(2 * u) + 1))
    end), 1e-12, "GELU tanh")
    assert.are.equal("tanh", nn.GELU({approximate = "tanh"}).approximate)
    close(nn.LeakyReLU(0.1)(x), each(function(v) return v < 0 and 0.1 * v or v end), 1e-15, "LeakyReLU")
    close(nn.Hardtanh(-1, 1)(x), each(function(v) return math.min(math.max(v, -1), 1) end), 0, "Hardtanh")
    local s = 0
    for _, v in ipairs(x:totable()) do s = s + math.exp(v) end
    close(nn.Softmax(1)(x), each(function(v) return math.exp(v) / s end), 1e-12, "Softmax")
    close(nn.LogSoftmax(-1)(x), each(function(v) return v - math.log(s) end), 1e-12, "LogSoftmax")
    assert.are.equal("LeakyReLU(negative_slope=0.1)", tostring(nn.LeakyReLU(0.1)))
    assert.are.equal("ReLU()", tostring(nn.ReLU()))
    fails('GELU: approximate must be "none" or "tanh", got erf', nn.GELU, "erf")
    fails("Softmax: dim must be a non-zero integer (1-based, negative from the end), got nil", nn.Softmax)
  end)

  it("pass gradients", function()
    local xs = dt.tensor({-1.0, 2.0}, {requires_grad = true})
    nn.ReLU()(xs):sum():backward()
    assert.is_true(dt.equal(xs.grad, dt.tensor({0, 1})))
  end)
end)

describe("containers", function()
  it("Sequential chains its modules, named 1..n, indexable like a list", function()
    dt.manual_seed(1)
    local seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    local x = dt.randn(5, 3)
    assert.is_true(dt.equal(seq(x), seq[3](seq[2](seq[1](x)))))
    assert.are.equal(3, #seq)
    assert.are.equal(seq[3], seq[-1])
    assert.is_nil(seq[4])
    local n = 0
    for i, m in ipairs(seq) do n = n + 1 assert.are.equal(seq._modules[tostring(i)], m) end
    assert.are.equal(3, n)
    assert.are.same({"1.weight", "1.bias", "3.weight", "3.bias"}, names(seq:named_parameters()))
    assert.are.equal(seq[3], seq:get_submodule("3"))
    seq:append(nn.Tanh())
    assert.are.same({"1", "2", "3", "4"}, seq._module_names)
    local named = nn.Sequential({{"fc", nn.Linear(3, 3)}, {"act", nn.ReLU()}})
    assert.are.same({"fc", "act"}, named._module_names)
    assert.are.equal(named.fc, named[1])
    assert.are.equal(x, nn.Sequential()(x))
    fails("Sequential: argument 2 must be a Module, got number", nn.Sequential, nn.ReLU(), 3)
    -- gradients flow through every layer
    seq(x):sum():backward()
    for _, p in ipairs(seq:named_parameters()) do assert.is_not_nil(p[2].grad, p[1]) end
  end)

  it("ModuleList holds a list: append, extend, insert, replace, remove", function()
    local a, b, c = nn.ReLU(), nn.Tanh(), nn.SiLU()
    local ml = nn.ModuleList({a, b})
    assert.are.equal(2, #ml)
    ml:insert(1, c)
    assert.are.same({c, a, b}, {ml[1], ml[2], ml[3]})
    assert.are.same({"1", "2", "3"}, ml._module_names)
    ml[2] = nil
    assert.are.same({c, b}, {ml[1], ml[2]})
    ml[-1] = a
    assert.are.same({c, a}, {ml[1], ml[2]})
    ml:extend({b}):append(nn.Linear(1, 1))
    assert.are.same({"4.weight", "4.bias"}, names(ml:named_parameters()))
    fails("ModuleList: index 9 is out of range for a ModuleList of 4 modules", function() ml[9] = a end)
    fails("forward: ModuleList has no forward", ml, dt.ones(1))
  end)

  it("ModuleDict keeps sorted keys, or the order of a list of pairs", function()
    local md = nn.ModuleDict({proj = nn.Linear(2, 2), act = nn.ReLU()})
    assert.are.same({"act", "proj"}, md:keys())
    assert.are.equal(md.proj, md["proj"])
    local ordered = nn.ModuleDict({{"z", nn.ReLU()}, {"a", nn.Tanh()}})
    assert.are.same({"z", "a"}, ordered:keys())
    assert.are.equal(2, #ordered)
    assert.are.same({"z", "a"}, names(ordered:items()))
    ordered:update({b = nn.SiLU()})
    assert.are.same({"z", "a", "b"}, ordered:keys())
    local z = ordered:pop("z")
    assert.are.equal("ReLU", z.__name)
    assert.are.same({"a", "b"}, ordered:keys())
    md.extra = nn.Tanh()
    assert.are.same({"act", "proj", "extra"}, md:keys())
    fails("pop: ModuleDict has no key 'q'", ordered.pop, ordered, "q")
    fails("add_module: 'keys' is already a method of ModuleDict", nn.ModuleDict, {keys = nn.ReLU()})
  end)
end)

describe("loss modules", function()
  it("CrossEntropyLoss is F.cross_entropy; MSELoss the mean squared error", function()
    local logits, target = dt.randn(4, 5), dt.tensor({1, 5, 2, 2})
    assert.is_true(dt.equal(nn.CrossEntropyLoss()(logits, target), dt.F.cross_entropy(logits, target)))
    assert.is_true(dt.equal(nn.CrossEntropyLoss({reduction = "sum", ignore_index = 2})(logits, target),
                            dt.F.cross_entropy(logits, target, {reduction = "sum", ignore_index = 2})))
    local a, b = t64({1, 2, 3}), t64({1, 0, 0})
    close(nn.MSELoss()(a, b), t64(13 / 3), 1e-15, "mean")
    close(nn.MSELoss({reduction = "sum"})(a, b), t64(13), 0, "sum")
    close(nn.MSELoss({reduction = "none"})(a, b), t64({0, 4, 9}), 0, "none")
    fails('MSELoss: reduction must be "mean", "sum" or "none", got avg', nn.MSELoss, {reduction = "avg"})
  end)
end)

-- ---- initialisers ----

describe("nn.init", function()
  local init = nn.init

  local function stats(t)
    local x = t:to("float64")
    return x:mean():item(), x:std():item(), x:min():item(), x:max():item()
  end

  it("calculate_gain gives torch's gains", function()
    assert.are.equal(1, init.calculate_gain("linear"))
    assert.are.equal(1, init.calculate_gain("sigmoid"))
    assert.are.equal(5 / 3, init.calculate_gain("tanh"))
    assert.are.equal(math.sqrt(2), init.calculate_gain("relu"))
    assert.are.equal(math.sqrt(2 / (1 + 0.01 ^ 2)), init.calculate_gain("leaky_relu"))
    assert.are.equal(math.sqrt(2 / 6), init.calculate_gain("leaky_relu", math.sqrt(5)))
    assert.are.equal(0.75, init.calculate_gain("selu"))
    fails("calculate_gain: unsupported nonlinearity swish", init.calculate_gain, "swish")
  end)

  it("uniform_, normal_, constant_, zeros_, ones_ fill in place, also leaves that require grad", function()
    local t = dt.empty({200, 500}, {requires_grad = true})
    assert.are.equal(t, init.uniform_(t, -2, 3))
    local mean, std, lo, hi = stats(t)
    assert(math.abs(mean - 0.5) < 0.02 and math.abs(std - 5 / math.sqrt(12)) < 0.02 and lo >= -2 and hi < 3)
    assert.is_true(t.is_leaf and t.requires_grad)
    init.normal_(t, 1, 2)
    mean, std = stats(t)
    assert(math.abs(mean - 1) < 0.02 and math.abs(std - 2) < 0.02, mean .. " " .. std)
    init.constant_(t, 0.5)
    assert.is_true(dt.equal(t, dt.full({200, 500}, 0.5)))
    init.zeros_(t)
    assert.are.equal(0, t:abs():sum():item())
    init.ones_(t)
    assert.are.equal(100000, t:sum():item())
    fails("uniform_: expected a floating-point tensor, got int64", init.uniform_, dt.zeros(2, {dtype = "int64"}))
    fails("normal_: std must be a number, got string", init.normal_, t, 0, "1")
  end)

  it("xavier and kaiming aim at their standard deviations, from the fans", function()
    local t = dt.empty(300, 200, 2) -- fan_in 400, fan_out 600
    init.xavier_uniform_(t, 2)
    local bound = 2 * math.sqrt(6 / 1000)
    local _, std, lo, hi = stats(t)
    assert(lo >= -bound and hi <= bound and math.abs(std - bound / math.sqrt(3)) < 0.01 * bound)
    init.xavier_normal_(t, {gain = 0.5})
    _, std = stats(t)
    assert(math.abs(std - 0.5 * math.sqrt(2 / 1000)) < 0.01 * std)
    init.kaiming_uniform_(t) -- leaky_relu with a = 0: sqrt(2), fan_in
    _, std, lo, hi = stats(t)
    bound = math.sqrt(2) * math.sqrt(3 / 400)
    assert(lo >= -bound and hi <= bound and math.abs(std - math.sqrt(2 / 400)) < 0.01 * std)
    init.kaiming_normal_(t, 0, "fan_out", "relu")
    _, std = stats(t)
    assert(math.abs(std - math.sqrt(2 / 600)) < 0.01 * std, std)
    init.kaiming_normal_(t, {mode = "fan_out", nonlinearity = "tanh"})
    _, std = stats(t)
    assert(math.abs(std - 5 / 3 / math.sqrt(600)) < 0.01 * std, std)
    fails('kaiming_uniform_: mode must be "fan_in" or "fan_out", got fan', init.kaiming_uniform_, t, 0, "fan")
    fails("xavier_uniform_: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, got shape [3]",
          init.xavier_uniform_, dt.empty(3))
    fails("kaiming_normal_: unknown option 'gain'", init.kaiming_normal_, t, {gain = 1})
    assert.are.equal(0, init.kaiming_uniform_(dt.empty(0, 3)):numel()) -- a no-op, as torch
  end)

  it("trunc_normal_ stays in [a, b] with the truncated normal's moments", function()
    local function moments(mean, std, a, b) -- of N(mean, std) truncated to [a, b]
      local al, be = (a - mean) / std, (b - mean) / std
      local pdf = function(z) return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) end
      local Z = init._norm_cdf(be) - init._norm_cdf(al)
      local m = (pdf(al) - pdf(be)) / Z
      local v = 1 + (al * pdf(al) - be * pdf(be)) / Z - m * m
      return mean + std * m, std * math.sqrt(v)
    end
    local t = dt.empty(500, 400)
    for _, case in ipairs {{0, 1, -2, 2}, {1, 2, 0, 10}, {0, 0.02, -0.04, 0.04}, {0, 1, 2.5, 4}, {0, 1, -8, -6}} do
      init.trunc_normal_(t, table.unpack(case))
      local mean, std, lo, hi = stats(t)
      local want_mean, want_std = moments(table.unpack(case))
      local what = table.concat(case, ", ")
      assert(lo >= case[3] and hi <= case[4], what .. ": range " .. lo .. " " .. hi)
      assert(math.abs(mean - want_mean) < 0.01 * want_std, what .. ": mean " .. mean .. " vs " .. want_mean)
      assert(math.abs(std - want_std) < 0.01 * want_std, what .. ": std " .. std .. " vs " .. want_std)
    end
    assert.is_true(t.dtype == "float32")
    fails("trunc_normal_: a must be below b, got a = 2, b = 1", init.trunc_normal_, t, 0, 1, 2, 1)
    fails("trunc_normal_: std must be positive, got 0", init.trunc_normal_, t, 0, 0)
  end)

  it("trunc_normal_'s inverse CDF is Phi's inverse to 2e-9 relative, tails included", function()
    local ps = {}
    for e = 1, 15 do ps[#ps + 1] = 10 ^ -e end
    for i = 1, 99 do ps[#ps + 1] = i / 100 end
    for e = 3, 12 do ps[#ps + 1] = 1 - 10 ^ -e end
    local x = init._norm_icdf(t64(ps)):totable()
    for i, p in ipairs(ps) do -- one Newton step on Phi(x) = p gives the exact quantile
      local xi = x[i]
      local exact = xi - (init._norm_cdf(xi) - p) / (math.exp(-xi * xi / 2) / math.sqrt(2 * math.pi))
      local err = math.abs(xi - exact) / math.max(math.abs(exact), 1)
      assert(err < 2e-9, "p = " .. p .. ": " .. xi .. " instead of " .. exact)
    end
  end)

  it("draws the same numbers under the same seed, whatever the function", function()
    for _, f in ipairs {
      function(t) return init.uniform_(t, -1, 1) end, function(t) return init.normal_(t, 0, 3) end,
      init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_, init.kaiming_normal_, init.trunc_normal_,
    } do
      dt.manual_seed(42)
      local a = f(dt.empty(7, 9))
      dt.manual_seed(42)
      local b = f(dt.empty(7, 9))
      assert.is_true(dt.equal(a, b))
      assert.is_false(dt.equal(a, f(dt.empty(7, 9)))) -- the generator moved on
    end
    dt.manual_seed(42)
    local a = init.uniform_(dt.empty(5), -1, 1)
    dt.manual_seed(42)
    assert.is_true(dt.equal(a, dt.empty(5):uniform_(-1, 1)))
  end)
end)
