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
