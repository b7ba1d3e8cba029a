-- dt.amp on one device (doc/amp.md): autocast casts the inputs of the matmul family to the low
-- dtype in the front door and leaves or casts up the others (the classification of every op
-- row), its regions nest and restore, float32 parameters get float32 gradients close to the
-- float32 ones, a small MLP trained under bfloat16 autocast follows the float32 loss curve;
-- GradScaler's scale/unscale math, skipped steps, and torch's growth/backoff schedule.
-- DTensors: tests/spec_dist/amp_dtensor_spec.lua.
local S = require "tests.spec.support.spec_helpers"

local LOWER = {matmul = true, mm = true, bmm = true, addmm = true, scaled_dot_product_attention = true}
local FP32 = {softmax = true, log_softmax = true, layer_norm = true, rms_norm = true, cross_entropy = true, sum = true,
              prod = true, norm = true, exp = true, log = true, pow = true, rsqrt = true, cumsum = true, cumprod = true}

local function values(t) -- a tensor's values as a flat Lua list (float64)
  local flat = t:to("float64"):reshape({-1})
  local out = {}
  for i = 1, flat:numel() do out[i] = flat[i]:item() end
  return out
end

-- the largest |a - b| relative to the largest |b|
local function rel_diff(a, b)
  local x, y = values(a), values(b)
  local d, m = 0, 0
  for i = 1, #x do
    d = math.max(d, math.abs(x[i] - y[i]))
    m = math.max(m, math.abs(y[i]))
  end
  return d / math.max(m, 1e-30)
end

local BF16_EPS, F16_EPS = 2 ^ -8, 2 ^ -11 -- the spacing of the dtypes' numbers just above 1

describe("dt.amp.autocast", function()
  after_each(function() assert.is_false(dt.amp.is_autocast_enabled(), "a test left autocast on") end)

  it("classifies every row of the op table: the matmul family and sdpa lower, the float32 list up, the rest as they are", function()
    local n = 0
    for _, row in ipairs(dt._op_rows()) do
      n = n + 1
      local want = LOWER[row.name] and "lower" or FP32[row.name] and "float32" or "as_is"
      assert.are.equal(want, dt.amp.autocast_class(row.name), row.name)
    end
    assert.is_true(n > 50)
    assert.matches("autocast_class: no op named nope", S.err(dt.amp.autocast_class, "nope"), 1, true)
  end)

  it("runs matmul, mm, bmm, addmm and sdpa in the low dtype on float32 inputs; outputs stay low", function()
    local a, b = dt.randn({3, 4}), dt.randn({4, 5})
    local a3, b3 = dt.randn({2, 3, 4}), dt.randn({2, 4, 5})
    local c = dt.randn({3, 5})
    for _, dtype in ipairs {"bfloat16", "float16"} do
      dt.amp.autocast(function()
        assert.are.equal(dtype, a:matmul(b).dtype)
        assert.are.equal(dtype, dt.mm(a, b).dtype)
        assert.are.equal(dtype, dt.bmm(a3, b3).dtype)
        assert.are.equal(dtype, dt.addmm(c, a, b).dtype)
        assert.are.equal(dtype, a:to("bfloat16"):matmul(b).dtype) -- any other floating dtype is cast too
        local q = dt.randn({2, 3, 4})
        assert.are.equal(dtype, dt.F.scaled_dot_product_attention(q, q, q).dtype)
        -- the values are those of the matmul of the rounded inputs
        local want = a:to(dtype):to("float32"):matmul(b:to(dtype):to("float32"))
        assert.is_true(rel_diff(a:matmul(b), want) <= 2 * BF16_EPS)
      end, {dtype = dtype})
    end
    assert.are.equal("float32", a:matmul(b).dtype) -- off again
  end)

  it("leaves float64 and the as-is ops alone, and runs the float32 list on float32", function()
    local _ <close> = dt.amp.autocast {dtype = "bfloat16"}
    local a, b = dt.randn({3, 4}, {dtype = "float64"}), dt.randn({4, 2}, {dtype = "float64"})
    assert.are.equal("float64", a:matmul(b).dtype) -- torch: float64 is not eligible
    local x = dt.randn({3, 4})
    assert.are.equal("float32", (x + x).dtype)
    assert.are.equal("float32", x:relu().dtype)
    local h = x:to("bfloat16")
    assert.are.equal("bfloat16", (h + h).dtype) -- as is
    assert.are.equal("bfloat16", h:relu().dtype)
    assert.are.equal("float32", h:softmax(2).dtype) -- float32 list: cast up
    assert.are.equal("float32", h:log_softmax(2).dtype)
    assert.are.equal("float32", h:sum().dtype)
    assert.are.equal("float32", h:exp().dtype)
    assert.are.equal("float32", dt.F.layer_norm(h, {4}).dtype)
    assert.are.equal("float32", dt.F.cross_entropy(h, dt.tensor({1, 2, 3})).dtype)
    assert.are.equal("float32", x:matmul(x:t()):sum().dtype) -- downstream of a low matmul
    assert.are.equal("float32", (x:matmul(x:t()) + dt.randn({3, 3})).dtype) -- promotion takes it back up
  end)

  it("nests and restores: the function form (also on error), the <close> form (once, however often closed)", function()
    assert.is_false(dt.amp.is_autocast_enabled())
    assert.is_nil(dt.amp.get_autocast_dtype())
    local seen = {}
    local r1, r2 = dt.amp.autocast(function()
      seen[1] = dt.amp.get_autocast_dtype()
      do
        local _ <close> = dt.amp.autocast {dtype = "float16"}
        seen[2] = dt.amp.get_autocast_dtype()
        do
          local _ <close> = dt.amp.autocast {enabled = false}
          seen[3] = dt.amp.is_autocast_enabled()
        end
        seen[4] = dt.amp.get_autocast_dtype()
      end
      seen[5] = dt.amp.get_autocast_dtype()
      return 1, 2
    end)
    assert.are.same({"bfloat16", "float16", false, "float16", "bfloat16"}, seen)
    assert.are.same({1, 2}, {r1, r2})
    local ok, err = pcall(dt.amp.autocast, function() error("boom", 0) end, {dtype = "float16"})
    assert.is_false(ok)
    assert.are.equal("boom", err)
    assert.is_false(dt.amp.is_autocast_enabled())
    local g = dt.amp.autocast {dtype = "float16"}
    local inner = dt.amp.autocast {dtype = "bfloat16"}
    getmetatable(inner) -- protected
    assert.are.equal("AutocastMode", getmetatable(inner))
    assert.are.equal("bfloat16", dt.amp.get_autocast_dtype())
    local close = function(x) local _ <close> = x end
    close(inner)
    close(inner) -- twice: restores once
    assert.are.equal("float16", dt.amp.get_autocast_dtype())
    close(g)
    assert.is_false(dt.amp.is_autocast_enabled())
  end)

  it("raises on bad options, naming autocast", function()
    assert.matches('autocast: dtype must be "bfloat16" or "float16", got float32',
                   S.err(dt.amp.autocast, function() end, {dtype = "float32"}), 1, true)
    assert.matches("autocast: unknown option 'dtyp'", S.err(dt.amp.autocast, {dtyp = "float16"}), 1, true)
    assert.matches("autocast: enabled must be a boolean", S.err(dt.amp.autocast, {enabled = 1}), 1, true)
    assert.is_false(dt.amp.is_autocast_enabled())
  end)

  it("gives float32 parameters float32 gradients within the low dtype's rounding of the float32 ones", function()
    for _, case in ipairs {{"bfloat16", BF16_EPS}, {"float16", F16_EPS}} do
      local dtype, eps = case[1], case[2]
      dt.manual_seed(7)
      local w = dt.randn({6, 5}, {requires_grad = true})
      local b = dt.randn({5}, {requires_grad = true})
      local x = dt.randn({8, 6})
      local function loss() return ((x:matmul(w) + b):tanh():matmul(w:t())):pow(2):mean() end
      loss():backward()
      local gw, gb = w.grad:clone(), b.grad:clone()
      w.grad, b.grad = nil, nil
      local l = dt.amp.autocast(loss, {dtype = dtype})
      assert.are.equal("float32", l.dtype) -- pow is on the float32 list
      l:backward() -- outside the region: backward runs the dtypes forward ran in
      assert.are.equal("float32", w.grad.dtype)
      assert.are.equal("float32", b.grad.dtype)
      -- each matmul rounds its inputs and its output once: a few eps of the largest gradient
      assert.is_true(rel_diff(w.grad, gw) <= 8 * eps, dtype .. " w: " .. rel_diff(w.grad, gw))
      assert.is_true(rel_diff(b.grad, gb) <= 8 * eps, dtype .. " b: " .. rel_diff(b.grad, gb))
      assert.is_true(rel_diff(w.grad, gw) > 0) -- it did run low
    end
  end)

  it("records the casts: backward inside the region and a cast's grad_fn", function()
    local w = dt.randn({4, 3}, {requires_grad = true})
    local _ <close> = dt.amp.autocast()
    local y = dt.randn({2, 4}):matmul(w)
    assert.are.equal("bfloat16", y.dtype)
    y:sum():backward()
    assert.are.equal("float32", w.grad.dtype)
    dt.no_grad(function() assert.are.equal("bfloat16", dt.randn({2, 4}):matmul(w).dtype) end)
  end)

  -- The MLP: 20 SGD steps on a fixed regression batch, float32 parameters, once in float32 and
  -- once with its matmuls in bfloat16.  Each step's matmuls round inputs and outputs to bf16
  -- (relative 2^-9 each), so a step's loss differs by about one bf16 eps (2^-8) of itself;
  -- training contracts rather than amplifies such perturbations on this well-conditioned
  -- problem (measured: 1.1 eps at worst over the 20 steps), so 2%, five eps, bounds every step,
  -- and both curves must fall.
  it("trains a small MLP under bfloat16 autocast along the float32 loss curve", function()
    local function train(dtype)
      dt.manual_seed(3)
      local model = dt.nn.Sequential(dt.nn.Linear(8, 32), dt.nn.Tanh(), dt.nn.Linear(32, 1))
      local opt = dt.optim.SGD(model:parameters(), {lr = 0.1})
      local x = dt.randn({64, 8})
      local y = (x[{{}, {1, 2}}]:sum(2, true) - x[{{}, {3}}]):tanh()
      local losses = {}
      for step = 1, 20 do
        opt:zero_grad()
        local loss = dt.amp.autocast(function() return (model(x) - y):pow(2):mean() end,
                                     {dtype = dtype or "bfloat16", enabled = dtype ~= nil})
        loss:backward()
        opt:step()
        losses[step] = loss:to("float64"):item()
      end
      for _, p in ipairs(model:parameters()) do assert.are.equal("float32", p.dtype) end
      return losses
    end
    local f32, bf16 = train(nil), train("bfloat16")
    assert.is_true(f32[20] < 0.7 * f32[1] and bf16[20] < 0.7 * bf16[1])
    local worst = 0
    for i = 1, 20 do worst = math.max(worst, math.abs(bf16[i] - f32[i]) / f32[i]) end
    assert.is_true(worst <= 0.02, "worst relative loss difference " .. worst)
    assert.is_true(worst > 0) -- it did run low
  end)
end)

describe("dt.amp.GradScaler", function()
  local function param(list) return dt.tensor(list, {dtype = "float32", requires_grad = true}) end
  local function f32(list) return dt.tensor(list, {dtype = "float32"}) end

  it("scales the loss and unscales the gradients in place", function()
    local s = dt.amp.GradScaler {init_scale = 1024}
    assert.are.equal(1024, s:get_scale())
    local p = param({1, 2, 3})
    local loss = (p * p):sum()
    local scaled = s:scale(loss)
    assert.are.equal(14 * 1024, scaled:item())
    local pair = s:scale({loss, {loss}})
    assert.are.equal(14 * 1024, pair[2][1]:item())
    scaled:backward()
    assert.are.same({2048, 4096, 6144}, values(p.grad))
    local opt = dt.optim.SGD({p}, 0.5)
    s:unscale_(opt)
    assert.are.same({2, 4, 6}, values(p.grad))
    s:step(opt) -- no second unscale
    assert.are.same({0, 0, 0}, values(p))
    s:update()
    assert.are.equal(1024, s:get_scale())
  end)

  it("skips the step when a gradient is inf or nan and backs off; grows after growth_interval good steps", function()
    local s = dt.amp.GradScaler {init_scale = 8, growth_factor = 4, backoff_factor = 0.25, growth_interval = 3}
    local p, q = param({1, 2}), param({3})
    local opt = dt.optim.SGD({p, q}, 1.0)
    -- torch's rule (_amp_update_scale_): inf -> scale * backoff, tracker 0; else tracker + 1,
    -- and at growth_interval: scale * growth, tracker 0
    local pattern = {false, false, true, false, false, false, false, "nan", false}
    local scale, tracker = 8, 0
    for step, bad in ipairs(pattern) do
      local before = {values(p), values(q)}
      p.grad = f32({8, 8})
      q.grad = f32({bad == "nan" and 0 / 0 or bad and math.huge or 8})
      local r = s:step(opt)
      s:update()
      if bad then
        assert.are.same(before, {values(p), values(q)}, "step " .. step .. " was skipped")
        assert.is_nil(r)
        scale, tracker = scale * 0.25, 0
      else
        assert.are.same({before[1][1] - 8 / scale, before[1][2] - 8 / scale}, values(p), "step " .. step)
        tracker = tracker + 1
        if tracker == 3 then scale, tracker = scale * 4, 0 end
      end
      assert.are.equal(scale, s:get_scale(), "scale after step " .. step)
      assert.are.equal(tracker, s:state_dict()._growth_tracker, "tracker after step " .. step)
    end
    s:update(3.0) -- an explicit scale
    assert.are.equal(3.0, s:get_scale())
  end)

  it("keeps torch's order: one unscale_ and one step per update, an inf check before update", function()
    local s = dt.amp.GradScaler()
    local p = param({1})
    local opt = dt.optim.SGD({p}, 0.1)
    assert.matches("GradScaler.update: no inf checks were recorded prior to update()", S.err(s.update, s), 1, true)
    p.grad = f32({1})
    s:unscale_(opt)
    assert.matches("unscale_() has already been called on this optimizer since the last update()",
                   S.err(s.unscale_, s, opt), 1, true)
    s:step(opt)
    assert.matches("step() has already been called since the last update()", S.err(s.step, s, opt), 1, true)
    assert.matches("unscale_() is being called after step()", S.err(s.unscale_, s, opt), 1, true)
    s:update()
    s:unscale_(opt) -- a new iteration
    assert.matches("a closure is not supported", S.err(s.step, s, opt, function() end), 1, true)
    local h = dt.tensor({1}, {dtype = "float16", requires_grad = true})
    h.grad = dt.tensor({1}, {dtype = "float16"})
    local s2 = dt.amp.GradScaler()
    assert.matches("GradScaler.unscale_: attempting to unscale float16 gradients",
                   S.err(s2.unscale_, s2, dt.optim.SGD({h}, 0.1)), 1, true)
  end)

  it("checks its options, and does nothing when disabled", function()
    assert.matches("GradScaler: unknown option 'scale'", S.err(dt.amp.GradScaler, {scale = 2}), 1, true)
    assert.matches("GradScaler: growth_factor must be a number > 1, got 0.5",
                   S.err(dt.amp.GradScaler, {growth_factor = 0.5}), 1, true)
    assert.matches("GradScaler: backoff_factor must be a number in (0, 1), got 2",
                   S.err(dt.amp.GradScaler, {backoff_factor = 2}), 1, true)
    assert.matches("GradScaler: growth_interval must be an integer >= 1, got 0.5",
                   S.err(dt.amp.GradScaler, {growth_interval = 0.5}), 1, true)
    local s = dt.amp.GradScaler {enabled = false}
    assert.is_false(s:is_enabled())
    local x = dt.tensor({2})
    assert.are.equal(x, s:scale(x))
    local p = param({1})
    p.grad = f32({math.huge})
    s:step(dt.optim.SGD({p}, 1.0)) -- disabled: no check, the step runs
    assert.is_true(values(p)[1] == -math.huge)
    s:update()
    assert.are.same({}, s:state_dict())
    assert.are.equal(1.0, s:get_scale())
  end)

  it("round-trips state_dict (torch's keys) and refuses an empty one", function()
    local s = dt.amp.GradScaler {init_scale = 16, growth_interval = 5}
    local p = param({1})
    local opt = dt.optim.SGD({p}, 0.1)
    p.grad = f32({1})
    s:step(opt)
    s:update()
    local sd = s:state_dict()
    assert.are.same({scale = 16, growth_factor = 2, backoff_factor = 0.5, growth_interval = 5, _growth_tracker = 1}, sd)
    local t = dt.amp.GradScaler()
    t:load_state_dict(sd)
    assert.are.same(sd, t:state_dict())
    assert.matches("GradScaler.load_state_dict: the state dict is empty", S.err(t.load_state_dict, t, {}), 1, true)
    assert.matches("GradScaler(scale=16", tostring(t), 1, true)
  end)

  -- float16 autocast with loss scaling: with the default 2^16 the first backward overflows
  -- float16 (gradients past 65504): those steps are skipped and the scale backs off until the
  -- gradients fit; then the model trains.
  it("trains an MLP under float16 autocast with loss scaling, backing off from an overflowing scale", function()
    dt.manual_seed(5)
    local model = dt.nn.Sequential(dt.nn.Linear(8, 64), dt.nn.Tanh(), dt.nn.Linear(64, 1))
    local opt = dt.optim.SGD(model:parameters(), {lr = 0.05})
    local scaler = dt.amp.GradScaler {init_scale = 2.0 ^ 24}
    local x = dt.randn({32, 8})
    local y = x[{{}, {1}}]:tanh() * 3
    local first, last, skipped = nil, nil, 0
    for _ = 1, 30 do
      opt:zero_grad()
      local loss = dt.amp.autocast(function() return (model(x) - y):pow(2):mean() end, {dtype = "float16"})
      scaler:scale(loss):backward()
      local before = scaler:get_scale()
      scaler:step(opt)
      scaler:update()
      if scaler:get_scale() < before then skipped = skipped + 1 end
      first = first or loss:item()
      last = loss:item()
    end
    assert.is_true(skipped >= 1, "no step overflowed at 2^24")
    assert.is_true(scaler:get_scale() < 2.0 ^ 24)
    assert.is_true(last < 0.8 * first, first .. " -> " .. last)
    for _, p in ipairs(model:parameters()) do assert.are.equal("float32", p.dtype) end
  end)
end)
